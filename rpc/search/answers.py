"""Answers remembered at one position of an index: a popular question asked again before anything changed costs
a dictionary lookup. An answer is exact at the position it was computed at, so it is kept only until the index
moves past it (the next change forgets them all), and a call is given one only when its view is at that very
position. At most `size` are kept, the least recently asked going first."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

T = TypeVar("T")

SIZE = 1024  # answers of a page or two each: a few megabytes at most


class Answers(Generic[T]):
    def __init__(self, size: int = SIZE) -> None:
        self._size = size
        self._position = -1
        self._kept: OrderedDict[Hashable, T] = OrderedDict()

    def of(self, position: int, key: Hashable, compute: Callable[[], T]) -> T:
        """The answer to `key` at `position`: remembered, or computed now (and remembered when `position` is the
        newest seen; an answer at an older one, from a call that began before a change, is not kept)."""
        if position == self._position and key in self._kept:
            self._kept.move_to_end(key)
            return self._kept[key]
        answer = compute()
        if position > self._position:
            self._position = position
            self._kept.clear()
        if position == self._position:
            self._kept[key] = answer
            if len(self._kept) > self._size:
                self._kept.popitem(last=False)
        return answer
