"""The house's rules (docs/architecture.md), read from the source: imports point one way and never in a circle, and the
installed package holds no benchmark code. The benchmark (`bench/`) is held to the same: it may import the packages,
they never import it, and its own modules import each other without a circle."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("rpc", "procedures")
BENCH = "bench"  # beside the packages, not installed: bin/bench puts the project on the path
# The layer table (docs/architecture.md): a room imports only rooms on lower floors. Each folder under rpc/ is a
# room, and so is each module directly under it; the rooms of procedures/ all stand above rpc/ but below its
# assembly (`rpc.app`, which alone imports them) and the command line.
FLOORS = {
    "rpc.settings": 0,
    "rpc.core": 0,
    "rpc.db": 1,
    "rpc.limits": 1,
    "rpc.audit": 2,
    "rpc.outbox": 2,
    "rpc.search": 2,
    "rpc.files": 2,
    "rpc.mail": 3,
    "rpc.payments": 3,
    "rpc.auth": 4,
    "rpc.privacy": 5,
    "rpc.worker": 5,
    "rpc.dispatch": 5,
    "rpc.business": 6,
    "rpc.api": 6,
    "rpc.services": 7,
    "rpc.web": 8,
    "rpc.panel": 9,
    "procedures": 10,
    "rpc.app": 11,
    "rpc.ops": 12,
}


def modules(packages: tuple[str, ...] = PACKAGES) -> dict[str, Path]:
    """Every module of `packages` (the installed ones unless told), by dotted name."""
    found = {}
    for package in packages:
        for path in (ROOT / package).rglob("*.py"):
            parts = path.relative_to(ROOT).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            found[name] = path
    return found


def imported(path: Path, known: dict[str, Path]) -> Iterator[str]:
    """The project's modules that `path` imports, wherever the import stands (also under TYPE_CHECKING or inside
    a function: a circle hidden there is still a circle)."""
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [f"{node.module}.{alias.name}" for alias in node.names] + [node.module]
        else:
            continue
        for name in names:
            while name and name not in known:
                name = name.rpartition(".")[0]
            if name:
                yield name


def graph(packages: tuple[str, ...] = PACKAGES) -> dict[str, set[str]]:
    known = modules(packages)
    return {name: {target for target in imported(path, known) if target != name} for name, path in known.items()}


def room(module: str) -> str:
    """The room a module stands in: `rpc.<folder>` or `rpc.<module>`; `procedures.<folder or module>`."""
    return ".".join(module.split(".")[:2])


def floor(name: str) -> int:
    return FLOORS["procedures"] if name.startswith("procedures") else FLOORS[name]


def room_graph() -> dict[str, set[str]]:
    """Which rooms each room imports (a package's own `__init__` counts as no room)."""
    rooms: dict[str, set[str]] = {}
    for name, targets in graph().items():
        if name in PACKAGES:
            continue
        rooms.setdefault(room(name), set()).update(room(target) for target in targets if target not in PACKAGES)
    return {name: targets - {name} for name, targets in rooms.items()}


def test_every_room_has_its_floor() -> None:
    assert sorted(name for name in room_graph() if not name.startswith("procedures") and name not in FLOORS) == []


def test_rooms_import_only_rooms_below_them() -> None:
    upward = sorted(
        (name, target)
        for name, targets in room_graph().items()
        for target in targets
        if floor(target) >= floor(name) and not (name.startswith("procedures") and target.startswith("procedures"))
    )
    assert upward == []


def test_no_room_imports_itself_round_a_circle() -> None:
    assert circles(room_graph()) == []


def test_rpc_imports_procedures_only_in_the_assembly() -> None:
    offenders = sorted(
        (name, target)
        for name, targets in graph().items()
        if name.startswith("rpc") and name != "rpc.app"
        for target in targets
        if target.startswith("procedures")
    )
    assert offenders == []


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Every circle a depth-first walk of `edges` finds (none, in a house that depends one way)."""
    state: dict[str, int] = {}
    found: list[list[str]] = []

    def visit(name: str, path: list[str]) -> None:
        state[name] = 1
        for target in sorted(edges.get(name, ())):
            if state.get(target) == 1:
                found.append([*path[path.index(target) :], target])
            elif target not in state:
                visit(target, [*path, target])
        state[name] = 2

    for name in sorted(edges):
        if name not in state:
            visit(name, [name])
    return found


def test_no_module_imports_itself_round_a_circle() -> None:
    # A package's __init__ importing nothing, its submodules importing their siblings: only real circles count.
    assert circles(graph()) == []


def place(name: str) -> str:
    """A room as a path: `rpc/core/`, `rpc/app.py`, `procedures/jobs/`."""
    path = ROOT / name.replace(".", "/")
    return f"`{path.relative_to(ROOT)}/`" if path.is_dir() else f"`{path.relative_to(ROOT)}.py`"


def arrows() -> str:
    """The table of rooms and the rooms each imports, floor by floor, as docs/architecture.md shows it."""
    edges = room_graph()
    lines = ["| floor | room | imports |", "|---|---|---|"]
    for name in sorted(edges, key=lambda name: (floor(name), name)):
        targets = sorted(edges[name], key=lambda target: (floor(target), target))
        lines.append(f"| {floor(name)} | {place(name)} | {', '.join(place(target) for target in targets) or '—'} |")
    return "\n".join(lines)


def test_the_architecture_page_draws_the_rooms_as_they_are() -> None:
    """docs/architecture.md's table of rooms and arrows is the code's (regenerate it with `arrows()`)."""
    page = (ROOT / "docs" / "architecture.md").read_text()
    drawn = page.split("<!-- rooms: tests/test_layout.py arrows() -->\n", 1)[1].split("\n<!-- /rooms -->", 1)[0]
    assert drawn == arrows()


def test_the_package_holds_no_benchmark_code() -> None:
    assert [name for name in modules() if "bench" in name] == []
    assert (ROOT / "bench" / "harness.py").exists()


def test_the_packages_never_import_the_benchmark() -> None:
    """The benchmark drives the service from outside; the service never reaches into it."""
    edges = graph((*PACKAGES, BENCH))
    reaching = sorted(
        (name, target)
        for name, targets in edges.items()
        if not name.startswith(BENCH)
        for target in targets
        if target.startswith(BENCH)
    )
    assert reaching == []
    assert any(target.startswith("rpc") for target in edges["bench.harness"])  # the graph does see bench's imports


def test_no_benchmark_module_imports_itself_round_a_circle() -> None:
    """Also an import under TYPE_CHECKING: a scenario module takes what it runs on as a protocol (`bench.stand`),
    not from the module that imports it."""
    assert circles(graph((BENCH,))) == []


def test_no_module_keeps_answers_in_a_global() -> None:
    """Answers remembered between calls live in the app's memory (`ctx.kept`): a module global would be shared by
    two apps in one process, each on its own database."""
    import importlib

    from procedures.published_cache import PublishedCache

    kept = sorted(
        f"{name}.{attribute}"
        for name in modules()
        for attribute, value in vars(importlib.import_module(name)).items()
        if isinstance(value, PublishedCache)
    )
    assert kept == []


def test_each_app_keeps_its_own_memory() -> None:
    from rpc.core.memory import Memory, Slot

    slot = Slot("answers", dict)
    first, second = Memory(), Memory()
    first.get(slot)["q"] = 1
    assert first.get(slot) == {"q": 1}
    assert second.get(slot) == {}


def test_the_credential_rule_is_written_once() -> None:
    """Every lookup of a credential composes `rpc.auth.validity`: none writes the rule itself."""
    lookups = ["rpc/auth/authenticate.py", "rpc/auth/identity.py", "rpc/auth/oauth.py", "rpc/web/sessions.py"]
    written = [
        (path, rule)
        for path in lookups
        for rule in ("deleted_at IS NULL", "retired_at IS NULL")
        if rule in (ROOT / path).read_text()
    ]
    assert written == []


def test_duplicate_keys_are_read_only_by_the_constraint_translation() -> None:
    """A duplicate is told apart by the constraint it broke (`rpc.core.database_errors`), never caught wholesale."""
    caught = sorted(
        name
        for name, path in modules().items()
        # Creating a database (the db room) races on the system catalog, not on a constraint of ours.
        if name != "rpc.core.database_errors"
        and not name.startswith("rpc.db.")
        and "errors.UniqueViolation" in path.read_text()
    )
    assert caught == []


def test_privacy_names_no_business_table() -> None:
    """Erasure, export and retention in the business's tables are the business's steps (`Business.privacy`)."""
    import re

    business = re.compile(r"\b(FROM|JOIN|UPDATE|INTO)\s+(applications|application_files|jobs|subscriptions)\b")
    named = sorted(path.name for path in (ROOT / "rpc" / "privacy").glob("*.py") if business.search(path.read_text()))
    assert named == []


MOST_LINES = 450


def test_no_file_is_longer_than_a_reader_can_hold() -> None:
    """A module past this many lines has seams to split along (docs/architecture.md)."""
    long = {
        str(path.relative_to(ROOT)): lines
        for folder in ("rpc", "procedures", "bench")
        for path in (ROOT / folder).rglob("*.py")
        if (lines := len(path.read_text().splitlines())) > MOST_LINES
    }
    assert long == {}
