"""What a procedure keeps between calls, per app: answers remembered in a module global would be shared by two
apps in one process (the tests' live servers, each on its own database), so they live in the app's lifespan
state and a procedure reaches them through `ctx.kept(slot)`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic, TypeVar, cast

T = TypeVar("T")


class Slot(Generic[T]):
    """A named piece of per-app state and how to make it: declared once at module level (a key, never the
    value), made at its first use in each app."""

    def __init__(self, name: str, make: Callable[[], T]) -> None:
        self.name = name
        self.make = make

    def __repr__(self) -> str:
        return f"Slot({self.name!r})"


class Memory:
    """One app's kept state, by slot; opened with the app's services and dropped with them."""

    def __init__(self) -> None:
        self._values: dict[Slot[Any], Any] = {}

    def get(self, slot: Slot[T]) -> T:
        if slot not in self._values:
            self._values[slot] = slot.make()
        return cast(T, self._values[slot])
