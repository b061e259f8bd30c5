"""Runs a `bin/` command in the project's own virtualenv, made on first use: `bin/serve` and `bin/test` then work
with nothing but `python3` (and its `venv` module), also where the system Python is "externally managed".

Started by a virtualenv's Python (an activated one, CI's, or `.venv/bin/python bin/serve`), the command runs in
it as it is. Started by a system Python, it runs in `.venv/` beside this folder, which is created, and filled
with the project (`pip install -e .`, or `.[dev]` for `bin/test`), whenever it is missing or `pyproject.toml`
has changed since. Standard library only: it runs before anything is installed.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VENV = ROOT / ".venv"
MARKER = VENV / ".hire-installed"


def in_a_virtualenv() -> bool:
    return sys.prefix != sys.base_prefix


def digest() -> str:
    """What `.venv` was filled from: `pyproject.toml` as it stands."""
    return hashlib.sha256((ROOT / "pyproject.toml").read_bytes()).hexdigest()[:16]


def installed() -> set[str]:
    """The extras `.venv` holds for this `pyproject.toml` (`run` for none)."""
    lines = MARKER.read_text().split() if MARKER.exists() else []
    return {line.split(":")[0] for line in lines if line.endswith(f":{digest()}")}


def prepare(extras: str) -> Path:
    """`.venv/bin/python`, after making the virtualenv and installing what is missing (dev includes run)."""
    python = VENV / "bin" / "python"
    have = installed() if python.exists() else set()
    wanted = extras or "run"
    if wanted in have or (wanted == "run" and have):
        return python
    say(f"setting up {VENV} for the project (first run, or pyproject.toml changed) ...")
    if not python.exists():
        made = subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=False)  # noqa: S603 - our own
        if made.returncode != 0:
            fail("no virtualenv could be made: Python's venv module is missing (Debian: apt install python3-venv)")
    pip = [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    run([*pip, "--upgrade", "pip"])
    run([*pip, "-e", f".[{extras}]" if extras else "."])
    MARKER.write_text("\n".join(f"{name}:{digest()}" for name in {*have, wanted}) + "\n")
    return python


def run(command: list[str]) -> None:
    if subprocess.run(command, cwd=ROOT, check=False).returncode != 0:  # noqa: S603 - pip of our own virtualenv
        fail(f"{' '.join(command[2:5])} ... failed; see the messages above")


def say(message: str) -> None:
    sys.stderr.write(f"{message}\n")


def fail(reason: str) -> None:
    sys.stderr.write(f"error: {reason}\n")
    raise SystemExit(1)


def use_project_environment(extras: str = "") -> None:
    """Carry on in this Python when it is a virtualenv's; otherwise run this same command in `.venv`."""
    if in_a_virtualenv():
        return
    python = prepare(extras)
    os.execv(python, [str(python), *sys.argv])  # noqa: S606 - this same command, in the project's virtualenv
