"""docs/api.md and the procedure tables of README.md and docs/architecture.md are what `bin/api-reference` makes
from the registry, and name every procedure; its words for types are plain, never a schema's name."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from rpc.app import load_registry
from rpc.ops import reference
from rpc.ops.reference import ROOT, Schemas

REGENERATE = "run `bin/api-reference --write` and commit what it changes"


def test_the_reference_is_the_commands_output() -> None:
    written = reference.PAGE.read_text()
    assert written == reference.reference(load_registry()), f"docs/api.md is not the registry's: {REGENERATE}"


@pytest.mark.parametrize("path", reference.SPLICED, ids=lambda path: path.name)
def test_the_procedure_tables_are_the_commands_output(path: reference.Path) -> None:
    text = path.read_text()
    assert reference.BLOCK.search(text), f"{path.name} has its procedures table between the markers"
    assert text == reference.spliced(text, load_registry()), f"{path.name}'s procedures table is stale: {REGENERATE}"


def test_every_procedure_is_in_the_reference_and_the_tables() -> None:
    registry = load_registry()
    page = reference.PAGE.read_text()
    tables = [match.group(3) for path in reference.SPLICED for match in reference.BLOCK.finditer(path.read_text())]
    assert len(registry) > 40 and len(tables) == 2
    for proc in registry:
        assert f"\n### `{proc.name}`\n" in page, proc.name
        assert all(f"`{proc.name}`" in table for table in tables), proc.name


def test_the_command_prints_the_reference_and_the_tables() -> None:
    command = [sys.executable, str(ROOT / "bin" / "api-reference")]
    printed = subprocess.run(command, capture_output=True, text=True, timeout=120, check=True).stdout
    assert printed == reference.PAGE.read_text()
    table = subprocess.run([*command, "--by-module"], capture_output=True, text=True, timeout=120, check=True).stdout
    assert table == reference.by_module(load_registry()) + "\n"
    assert "| `procedures/profile.py` | `profile.me` | `read:profile` | any |" in table


def test_types_are_said_in_words() -> None:
    """Bounds, choices, lists and ids as a reader says them; nested objects as paths; no component names."""
    registry = load_registry()
    schemas = Schemas(list(registry))
    jobs_list = registry.get("jobs.list")
    assert jobs_list is not None
    rows = {row.path: row for row in schemas.rows(schemas.of[jobs_list.params_type], params=True)}
    assert rows["per_page"].words == "integer 1–100" and rows["per_page"].need == "default `20`"
    assert rows["employment_type"].words.startswith("one of contract, full_time, ") and rows["q"].need == "optional"
    assert rows["q"].words == "string, at most 200 characters", "a pattern of the shared types in words, or none"
    results = {row.path: row.words for row in schemas.rows(schemas.of[jobs_list.result_type], params=False)}
    assert results["data"] == "list of object" and results["data[].status"] == "one of closed, draft, published"
    published = registry.get("jobs.publish")
    assert published is not None
    assert [row.words for row in schemas.rows(schemas.of[published.params_type], params=True)] == ["string (uuid)"]
    page = reference.PAGE.read_text()
    named = [name for name in schemas.defs if re.search(r"[a-z][A-Z]|_", name) and re.search(rf"\b{name}\b", page)]
    assert named == [], "the reference names no schema component (their names are the OpenAPI document's)"
