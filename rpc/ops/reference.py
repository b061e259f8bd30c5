"""`bin/api-reference`: docs/api.md, the reference of every procedure, made from the registry (its Structs, scope,
roles, events) and the error tree, so that it cannot drift from the code; and the compact procedure tables that
README.md and docs/architecture.md show between `<!-- procedures: bin/api-reference --by-… -->` markers.

`tests/test_api_reference.py` holds the files to this command's output; `bin/api-reference --write` regenerates
them all. Types are said in words from the JSON Schema msgspec derives (`integer 1–100`, `one of draft, published,
closed`), never by a schema's component name.
"""

from __future__ import annotations

import argparse
import re
import sys
import typing
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from itertools import groupby
from pathlib import Path
from typing import Any

import msgspec

from rpc.app import load_registry
from rpc.core import multipart
from rpc.core.errors import RpcError
from rpc.core.fields import SPACE, Id
from rpc.core.registry import Procedure, Registry
from rpc.ops.reference_text import INTRO, PAGING, TITLE

ROOT = Path(__file__).resolve().parent.parent.parent
PAGE = ROOT / "docs/api.md"
SPLICED = (ROOT / "README.md", ROOT / "docs/architecture.md")
BLOCK = re.compile(r"(<!-- procedures: bin/api-reference (--[a-z-]+) -->\n)(.*?)(\n<!-- /procedures -->)", re.DOTALL)
MAX_LISTED_VALUES = 30  # an enum longer than this is said by its size (the event kinds, 24, are listed)

_SCALARS = [{"type": kind} for kind in ("string", "integer", "number", "boolean", "null")]
_ID_TEXT = typing.get_args(Id)[1].description
# The patterns the shared field types publish, in words; any other is shown as it is.
_PATTERNS = {
    r"^[^\x00]*$": "",
    rf"^[^\x00]*[^\x00{SPACE}][^\x00]*$": "not blank",
    rf"^[^\x00-\x1f\x7f]*[^\x00-\x1f\x7f{SPACE}][^\x00-\x1f\x7f]*$": "not blank, no control characters",
    r"^[^\x00-\x1f\x7f\x85\u2028\u2029]*$": "no control characters or line breaks",
    rf"^https?://[^\x00{SPACE}]+$": "an http(s) URL",
    rf"^https://[^\x00{SPACE}]+$": "an https URL",
    r"^[A-Z]{3}$": "three capital letters",
    r"^[A-Za-z0-9_-]+$": "letters, digits, `_` and `-`",
}


@dataclass(frozen=True, slots=True)
class Row:
    """One field of a parameters or result table."""

    path: str
    words: str
    need: str
    description: str


class Schemas:
    """The JSON Schema of every Struct the procedures take or answer, with references followed."""

    def __init__(self, procedures: list[Procedure]) -> None:
        types: list[Any] = [t for proc in procedures for t in (proc.params_type, proc.result_type)]
        refs, self.defs = msgspec.json.schema_components(types, ref_template="#/$defs/{name}")
        self.of = {t: self.resolve(ref) for t, ref in zip(types, refs, strict=True)}

    def resolve(self, schema: Mapping[str, Any]) -> Mapping[str, Any]:
        while "$ref" in schema:
            schema = {
                **self.defs[schema["$ref"].rsplit("/", 1)[-1]],
                **{k: v for k, v in schema.items() if k != "$ref"},
            }
        return schema

    def words(self, schema: Mapping[str, Any], *, with_null: bool = True) -> str:
        """A value's type in plain words: `string (date-time)`, `integer 1–100`, `list of string (uuid)`."""
        schema = self.resolve(schema)
        if schema.get("anyOf") == _SCALARS:
            return "string (uuid)"
        if "anyOf" in schema:
            choices = [self.words(choice) for choice in schema["anyOf"] if choice != {"type": "null"}]
            nullable = with_null and len(choices) < len(schema["anyOf"])
            return " or ".join(choices + (["null"] if nullable else []))
        if "enum" in schema:
            values = [str(value) for value in schema["enum"]]
            if len(values) > MAX_LISTED_VALUES:  # a code list (ISO 4217's) would fill the page
                return f"one of {len(values)} codes ({', '.join(values[:3])}, …: all in /openapi.json)"
            return "one of " + ", ".join(values)
        kind = schema.get("type", "any value")
        if kind == "array":
            return _joined(f"list of {self.words(schema['items'])}", _items(schema))
        if kind == "object":
            extra = schema.get("additionalProperties")
            return f"object of {self.words(extra)} values" if isinstance(extra, dict) else "object"
        if kind in ("integer", "number"):
            return f"{kind} {_bounds(schema)}".strip()
        if kind == "string":
            named = f"string ({schema['format']})" if "format" in schema else "string"
            pattern = schema.get("pattern")
            # A pattern of its own is said in the field's description, where it has one.
            said = (
                _PATTERNS.get(pattern, "" if schema.get("description") else f"matching `{pattern}`") if pattern else ""
            )
            return _joined(named, _length(schema), said)
        return str(kind)

    def nested(self, schema: Mapping[str, Any]) -> tuple[Mapping[str, Any], str] | None:
        """The object whose fields a field holds (itself, its list's items, or its non-null choice), and the
        suffix of their paths (`.` or `[].`)."""
        schema = self.resolve(schema)
        choices = [choice for choice in schema.get("anyOf", ()) if choice != {"type": "null"}]
        if len(choices) == 1:
            return self.nested(choices[0])
        if schema.get("type") == "array":
            inner = self.nested(schema["items"])
            return (inner[0], "[]" + inner[1]) if inner else None
        return (schema, ".") if "properties" in schema else None

    def rows(
        self, schema: Mapping[str, Any], *, params: bool, prefix: str = "", seen: tuple[str, ...] = ()
    ) -> Iterator[Row]:
        """One row per field, and the fields of the objects it holds after it (`salary.amount`, `data[].id`)."""
        required = set(schema.get("required", ()))
        for name, field in schema.get("properties", {}).items():
            resolved = self.resolve(field)
            default = field.get("default", resolved.get("default", msgspec.UNSET))
            need = "required" if name in required else _default(default) if params else ""
            words = self.words(field, with_null=not (params and default is None))
            nested = self.nested(field)
            choices = [self.resolve(choice) for choice in resolved.get("anyOf", ()) if choice != {"type": "null"}]
            said = [resolved, *choices[:1], *(nested[:1] if nested else ())]
            described = next((text for s in said if (text := s.get("description")) and text != _ID_TEXT), "")
            yield Row(prefix + name, words, need, described)
            title = nested[0].get("title", "") if nested else ""
            if nested and title not in seen:
                yield from self.rows(nested[0], params=params, prefix=prefix + name + nested[1], seen=(*seen, title))


def _joined(*parts: str) -> str:
    return ", ".join(part for part in parts if part)


def _bounds(schema: Mapping[str, Any]) -> str:
    low, high = schema.get("minimum"), schema.get("maximum")
    if "exclusiveMinimum" in schema:
        return f"> {schema['exclusiveMinimum']}"
    if low is not None and high is not None:
        return f"{low}–{high}"
    return f"≥ {low}" if low is not None else f"≤ {high}" if high is not None else ""


def _length(schema: Mapping[str, Any]) -> str:
    low, high = schema.get("minLength", 0), schema.get("maxLength")
    if high is None:
        return f"at least {low} characters" if low else ""
    return f"{low}–{high} characters" if low else f"at most {high} characters"


def _items(schema: Mapping[str, Any]) -> str:
    low, high = schema.get("minItems", 0), schema.get("maxItems")
    counted = (
        f"{low}–{high} items" if low and high else f"at most {high} items" if high else f"at least {low}" if low else ""
    )
    return _joined(counted, "distinct" if schema.get("uniqueItems") else "")


def _default(value: Any) -> str:
    if value is msgspec.UNSET or value is None:
        return "optional"
    return f"default `{msgspec.json.encode(value).decode()}`"


def _cell(text: str) -> str:
    """Text fit for one cell of a Markdown table."""
    return " ".join(text.split()).replace("|", "\\|")


def _table(headers: Iterable[str], rows: Iterable[Iterable[str]]) -> list[str]:
    headers = list(headers)
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    return lines + ["| " + " | ".join(_cell(value) for value in row) + " |" for row in rows]


def _anchor(name: str) -> str:
    """The anchor a Markdown renderer gives the heading `` `name` ``."""
    return re.sub(r"[^a-z0-9_-]", "", name.lower())


def _who(proc: Procedure) -> str:
    return ", ".join(sorted(proc.roles)) if proc.roles else "any"


def _scopes(proc: Procedure) -> str:
    return "`" + "` or `".join(proc.scopes) + "`"


def _call(proc: Procedure, takes: bool) -> str:
    """How to send it: `takes` when it has parameters."""
    where = f"`/v1/{proc.name}`"
    if proc.upload:
        return f"`POST` {where}, the body `multipart/form-data` with one part `{multipart.FIELD}`, the file"
    if proc.write:
        return f"`POST` {where}, the parameters as a JSON object"
    if not takes:
        return f"`GET` {where}, or `POST` (an empty body or `{{}}`); `HEAD`"
    return f"`GET` {where} with the parameters in the query string, or `POST` with them as a JSON object; `HEAD`"


def procedure_section(proc: Procedure, schemas: Schemas) -> list[str]:
    """A procedure's entry: how to call it, who may, what it takes and answers, what it emits."""
    params, result = schemas.of[proc.params_type], schemas.of[proc.result_type]
    takes = bool(params.get("properties")) and not proc.upload
    lines = [f"### `{proc.name}`", "", proc.doc, "", f"- **Call:** {_call(proc, takes)}."]
    lines.append(f"- **Scope:** {_scopes(proc)}.")
    if proc.roles:
        lines.append(f"- **Roles:** {_who(proc)} (any other role: `403 forbidden`).")
    if proc.write:
        lines.append("- **Idempotency-Key:** taken ([idempotency](#idempotency)).")
    if proc.emits:
        emitted = ", ".join(f"`{kind}`" for kind in proc.emits)
        lines.append(f"- **Events:** {emitted} ([webhooks](docs/webhooks.md#event-kinds-and-routing)).")
    if takes:
        given = ((f"`{r.path}`", r.words, r.need, r.description) for r in schemas.rows(params, params=True))
        lines += ["", "Parameters:", "", *_table(["name", "type", "required or default", "meaning"], given)]
    elif not proc.upload:
        lines += ["", "Parameters: none."]
    said = f" {_cell(result['description'])}" if result.get("description") else ""
    answered = ((f"`{r.path}`", r.words, r.description) for r in schemas.rows(result, params=False))
    return [*lines, "", f"Result:{said}", "", *_table(["field", "type", "meaning"], answered), ""]


def error_rows() -> list[tuple[str, str, str]]:
    """Every error the tree defines, by status: its code, and when (the docstring of the most general class that
    answers the code; the root's, which describes the class, gives way to its message)."""
    found: dict[tuple[int, str], str] = {}
    pending: list[type[RpcError]] = [RpcError]
    while pending:
        kind = pending.pop(0)
        pending += kind.__subclasses__()
        said = kind.default_message if kind is RpcError else (kind.__doc__ or "").strip().split("\n\n")[0]
        found.setdefault((kind.status, kind.code), said)
    return [(str(status), f"`{code}`", said) for (status, code), said in sorted(found.items())]


def reference(registry: Registry) -> str:
    """docs/api.md."""
    procedures = list(registry)
    schemas = Schemas(procedures)
    lines = [TITLE, ""]
    for name, group in groupby(procedures, lambda proc: proc.resource):
        lines.append(f"- **{name}**: " + ", ".join(f"[`{p.name}`](#{_anchor(p.name)})" for p in group))
    scopes = ", ".join(f"`{scope}`" for scope in sorted(registry.scopes))
    lines += ["", INTRO.format(scopes=scopes).strip(), ""]
    lines += [*_table(["status", "code", "when"], error_rows()), "", PAGING.strip(), ""]
    for name, group in groupby(procedures, lambda proc: proc.resource):
        lines += [f"## {name}", ""]
        for proc in group:
            lines += procedure_section(proc, schemas)
    return "\n".join(lines).rstrip().replace("](docs/", "](") + "\n"


def _module(proc: Procedure) -> str:
    path = Path(sys.modules[proc.handler.__module__].__file__ or "")
    return f"`{path.relative_to(ROOT)}`"


def _grouped(procedures: list[Procedure], key: Callable[[Procedure], str], headers: list[str]) -> str:
    """Procedures in one row per (key, scope, roles): compact, and whole."""
    ordered = sorted(procedures, key=lambda p: (key(p), _scopes(p), _who(p), p.name))
    rows = []
    for (where, scopes, who), group in groupby(ordered, lambda p: (key(p), _scopes(p), _who(p))):
        rows.append((where, ", ".join(f"`{p.name}`" for p in group), scopes, who))
    return "\n".join(_table(headers, rows))


def by_module(registry: Registry) -> str:
    """Which module registers which procedures (docs/architecture.md)."""
    return _grouped(list(registry), _module, ["module", "procedures", "scope", "roles"])


def by_resource(registry: Registry) -> str:
    """The procedures of each resource, with scope and roles (README.md)."""
    return _grouped(list(registry), lambda p: f"`{p.resource}`", ["resource", "procedures", "scope", "roles"])


TABLES: dict[str, Callable[[Registry], str]] = {"--by-module": by_module, "--by-resource": by_resource}


def spliced(text: str, registry: Registry) -> str:
    """`text` with every procedures block made again."""
    return BLOCK.sub(lambda m: m.group(1) + TABLES[m.group(2)](registry) + m.group(4), text)


def main(argv: list[str] | None = None) -> None:
    """bin/api-reference: print docs/api.md (or a compact table of the procedures), or write them all."""
    parser = argparse.ArgumentParser(prog="bin/api-reference", description=main.__doc__)
    shown = parser.add_mutually_exclusive_group()
    shown.add_argument("--by-module", action="store_true", help="the table of modules and their procedures")
    shown.add_argument("--by-resource", action="store_true", help="the table of resources and their procedures")
    shown.add_argument(
        "--write", action="store_true", help="write docs/api.md and the tables of README.md and docs/architecture.md"
    )
    args = parser.parse_args(argv)
    registry = load_registry()
    if args.write:
        PAGE.write_text(reference(registry))
        for path in SPLICED:
            path.write_text(spliced(path.read_text(), registry))
        return
    table = by_module if args.by_module else by_resource if args.by_resource else None
    sys.stdout.write(table(registry) + "\n" if table else reference(registry))
