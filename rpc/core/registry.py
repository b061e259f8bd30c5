"""`@procedure` and the registry it fills.

Registration is strict at import time: a duplicate name, a missing scope or docstring, or a signature
without Struct types fails loudly there, never at the first request. At assembly `check` holds every
procedure to the business vocabulary: its scope must be a known scope, and each event kind it declares it
emits a known kind (and a procedure can emit no kind it did not declare: `Context.emit`).
"""

from __future__ import annotations

import dataclasses
import difflib
import inspect
import re
import typing
from collections.abc import Awaitable, Callable, Collection, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

import msgspec

from rpc.core.envelope import Params
from rpc.core.multipart import Upload
from rpc.core.types import ROLES, Role
from rpc.core.vocabulary import Vocabulary

Handler = Callable[[Any, Any], Awaitable[Any]]
F = TypeVar("F", bound=Handler)

_NAME = re.compile(r"^[a-z][a-z_]*(\.[a-z][a-z_]*)+$")
_PROBE = re.compile(r"^[a-z][a-z0-9_]*$")


class RegistrationError(TypeError):
    """A procedure that cannot be served as declared."""


@dataclass(frozen=True, slots=True)
class Procedure:
    """A registered operation and everything the dispatcher needs to serve it."""

    name: str
    handler: Handler
    scopes: tuple[str, ...]  # any one of them admits the caller
    write: bool
    calls_out: bool
    emits: tuple[str, ...]
    probes: tuple[str, ...]
    roles: frozenset[Role] | None
    params_type: type[Params]
    result_type: Any
    doc: str
    decoder: msgspec.json.Decoder[Any]
    upload: bool = False  # the body is multipart/form-data with one file (`rpc.core.multipart`)

    @property
    def scope(self) -> str:
        """The scope it needs, as said to a caller who lacks it: `a or b` where either admits."""
        return " or ".join(self.scopes)

    @property
    def resource(self) -> str:
        """What it acts on: the first part of its name (`jobs`, `billing`, `profile`, ...), its OpenAPI tag."""
        return self.name.split(".", 1)[0]

    @property
    def methods(self) -> tuple[str, ...]:
        """A write takes POST; a read takes GET (and HEAD, wherever GET works: RFC 9110 section 9.3.2) and POST."""
        return ("POST",) if self.write else ("GET", "HEAD", "POST")


class Registry:
    """Procedures by name, and the conflict messages of named constraints."""

    def __init__(self) -> None:
        self._procedures: dict[str, Procedure] = {}
        self._conflicts: dict[str, str] = {}

    def __iter__(self) -> Iterator[Procedure]:
        return iter(sorted(self._procedures.values(), key=lambda p: p.name))

    def __len__(self) -> int:
        return len(self._procedures)

    def get(self, name: str) -> Procedure | None:
        return self._procedures.get(name)

    def unknown(self, name: str) -> str:
        """What to tell a caller who asked for a procedure that does not exist: the nearest names, if any."""
        near = difflib.get_close_matches(name, self._procedures, n=2, cutoff=0.75)
        suggestion = f" Did you mean {' or '.join(near)}?" if near else " /openapi.json lists every procedure."
        return f"No procedure named '{name[:100]}' exists in v1.{suggestion}"

    @property
    def scopes(self) -> frozenset[str]:
        return frozenset(scope for p in self._procedures.values() for scope in p.scopes)

    def check(self, vocabulary: Vocabulary, probes: Collection[str] = ()) -> None:
        """Every procedure's scope and declared event kinds are in the vocabulary, and its probes among those the
        business defines, or the start fails."""
        for proc in self:
            missing = sorted(set(proc.probes) - set(probes))
            if missing:
                raise RegistrationError(f"{proc.name}: probes {missing} are not defined")
            unknown_scopes = sorted(set(proc.scopes) - set(vocabulary.scopes))
            if unknown_scopes:
                raise RegistrationError(f"{proc.name}: scopes {unknown_scopes} are not in the vocabulary")
            unknown = sorted(set(proc.emits) - set(vocabulary.event_kinds))
            if unknown:
                raise RegistrationError(f"{proc.name}: event kinds {unknown} are not in the vocabulary")

    def conflict_message(self, constraint: str | None) -> str | None:
        return self._conflicts.get(constraint or "")

    def on_conflict(self, constraint: str, message: str) -> None:
        """Name the message a violation of `constraint` answers with (`409 conflict`)."""
        self._conflicts[constraint] = message

    def procedure(
        self,
        name: str,
        *,
        scope: str | tuple[str, ...],
        write: bool = False,
        roles: tuple[Role, ...] | None = None,
        calls_out: bool = False,
        emits: tuple[str, ...] = (),
        probes: tuple[str, ...] = (),
        upload: bool = False,
    ) -> Callable[[F], F]:
        """Register an `async def f(ctx, params: SomeParams) -> SomeResult` under `name`.

        `scope` is the scope the caller's credential must hold, or a tuple of scopes any one of which will do.
        An `upload` takes its body as multipart/form-data with one file, and its params Struct is an `Upload`.

        A write names the event kinds it may emit (`emits`). A write that waits on another service says
        `calls_out=True`: it is given no connection and no transaction, and opens short ones itself
        (`ctx.transaction()`), so that a slow service holds nothing. A read names the `probes` it consults
        (`ctx.probe`): they ride in the credential's statement.
        """

        def register(func: F) -> F:
            scopes = (scope,) if isinstance(scope, str) else tuple(scope)
            described = _describe(self._procedures, name, func, scopes, write, roles, calls_out, emits, probes)
            if upload:
                described = _uploading(described)
            self._procedures[name] = described
            return func

        return register


def _describe(
    existing: dict[str, Procedure],
    name: str,
    func: Handler,
    scopes: tuple[str, ...],
    write: bool,
    roles: tuple[Role, ...] | None,
    calls_out: bool,
    emits: tuple[str, ...],
    probes: tuple[str, ...],
) -> Procedure:
    where = f"{func.__module__}.{func.__qualname__}"
    if not _NAME.match(name):
        raise RegistrationError(f"{where}: {name!r} is not a dotted lower-case name")
    if name in existing:
        raise RegistrationError(f"{where}: procedure {name!r} is already registered")
    if not scopes or not all(scopes):
        raise RegistrationError(f"{where}: procedure {name!r} needs a scope")
    if calls_out and not write:
        raise RegistrationError(f"{where}: only a write may call out (a read needs no transaction to leave)")
    if emits and not write:
        raise RegistrationError(f"{where}: only a write emits events (in its transaction)")
    if any(not _PROBE.match(probe) for probe in probes):
        raise RegistrationError(f"{where}: probe names are lower-case identifiers")
    if roles is not None and (not roles or set(roles) - set(ROLES)):
        raise RegistrationError(f"{where}: roles must be a non-empty subset of {ROLES}")
    doc = inspect.getdoc(func)
    if not doc:
        raise RegistrationError(f"{where}: procedure {name!r} needs a docstring (it becomes its OpenAPI text)")
    if not inspect.iscoroutinefunction(func):
        raise RegistrationError(f"{where}: procedure {name!r} must be `async def`")
    try:
        hints = typing.get_type_hints(func, include_extras=True)
    except NameError as exc:
        raise RegistrationError(f"{where}: cannot resolve its annotations: {exc}") from exc
    parameters = list(inspect.signature(func).parameters)
    if len(parameters) != 2:
        raise RegistrationError(f"{where}: a procedure takes exactly (ctx, params)")
    params_type = hints.get(parameters[1])
    if not (isinstance(params_type, type) and issubclass(params_type, Params)):
        raise RegistrationError(f"{where}: params must be annotated with a Params Struct")
    result_type = hints.get("return")
    if not _is_struct(result_type):
        raise RegistrationError(f"{where}: the return annotation must be a msgspec Struct")
    decoder = msgspec.json.Decoder(params_type)
    try:
        decoder.decode(msgspec.json.encode(params_type.example))
    except (msgspec.ValidationError, ValueError) as exc:
        raise RegistrationError(f"{where}: {params_type.__name__}.example is refused: {exc}") from exc
    return Procedure(
        name=name,
        handler=func,
        scopes=scopes,
        write=write,
        calls_out=calls_out,
        emits=tuple(emits),
        probes=tuple(probes),
        roles=frozenset(roles) if roles is not None else None,
        params_type=params_type,
        result_type=result_type,
        doc=doc,
        decoder=decoder,
    )


def _uploading(proc: Procedure) -> Procedure:
    """`proc` as an upload: a write whose params are the uploaded file."""
    if not proc.write:
        raise RegistrationError(f"{proc.name}: only a write takes an upload")
    if not issubclass(proc.params_type, Upload):
        raise RegistrationError(f"{proc.name}: an upload's params must be an Upload Struct")
    return dataclasses.replace(proc, upload=True)


def _is_struct(annotation: Any) -> bool:
    candidate = typing.get_origin(annotation) or annotation
    return isinstance(candidate, type) and issubclass(candidate, msgspec.Struct)


registry = Registry()
procedure = registry.procedure
on_conflict = registry.on_conflict
