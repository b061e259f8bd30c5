"""The procedure author's one import surface, `rpc.api`: everything it names exists and is said in `__all__`, and
the operations take those names from it rather than from the rooms that define them."""

from __future__ import annotations

import ast
import types
from pathlib import Path

import rpc.api

ROOT = Path(__file__).resolve().parent.parent


def test_exported_members() -> None:
    """As httpx's own test: `__all__` is exactly the public names the module holds, each of them real."""
    public = {
        name
        for name, value in vars(rpc.api).items()
        if not name.startswith("_") and not isinstance(value, types.ModuleType) and name != "annotations"
    }
    assert sorted(rpc.api.__all__) == sorted(public)
    assert all(getattr(rpc.api, name) is not None for name in rpc.api.__all__)


def test_the_surface_defines_nothing_of_its_own() -> None:
    """The surface gathers names from the rooms that own them: a rule written here would be a second home."""
    body = ast.parse((ROOT / "rpc" / "api.py").read_text()).body
    statements = [node for node in body if not isinstance(node, ast.ImportFrom)]
    assert [type(node).__name__ for node in statements] == ["Expr", "Assign"]  # the docstring and __all__


def test_the_operations_import_the_surface_from_rpc_api() -> None:
    """No module of procedures/ takes one of the surface's names from the room that defines it."""
    exported = set(rpc.api.__all__)
    detours = []
    for path in sorted((ROOT / "procedures").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("rpc.") and node.level == 0:
                if node.module == "rpc.api":
                    continue
                detours += [
                    f"{path.relative_to(ROOT)}: {alias.name} from {node.module}"
                    for alias in node.names
                    if alias.name in exported
                ]
    assert detours == []
