"""A faster torch.export.load for big graphs.

torch's deserializer (torch/_export/serde/serialize.py, `_dict_to_dataclass`) calls
`typing.get_type_hints` once per schema object, not once per class: ~195,000 calls for
a 5,112-node graph, half of the 10-15 s that `torch.export.load` takes there. Type hints
of the schema classes do not change during a load, so while trtmin loads a model that
module sees a `typing` whose get_type_hints is memoized per class. If a torch release
renames what this relies on, the load simply runs unpatched.
"""

from __future__ import annotations

import contextlib
import types
import typing
from typing import Any, Iterator


class _MemoizedTyping(types.ModuleType):
    def __init__(self) -> None:
        super().__init__("typing")
        self._hints: dict[tuple[Any, int, bool], dict[str, Any]] = {}

    def __getattr__(self, name: str) -> Any:
        return getattr(typing, name)

    def get_type_hints(self, obj: Any, globalns: Any = None, localns: Any = None,
                       include_extras: bool = False) -> dict[str, Any]:
        if localns is not None:
            return typing.get_type_hints(obj, globalns, localns, include_extras)
        key = (obj, id(globalns), include_extras)
        if key not in self._hints:
            self._hints[key] = typing.get_type_hints(obj, globalns, None, include_extras)
        return self._hints[key]


@contextlib.contextmanager
def memoized_schema_type_hints() -> Iterator[None]:
    try:
        from torch._export.serde import serialize
    except ImportError:
        yield
        return
    if getattr(serialize, "typing", None) is not typing:
        yield
        return
    serialize.typing = _MemoizedTyping()  # type: ignore[attr-defined]
    try:
        yield
    finally:
        serialize.typing = typing  # type: ignore[attr-defined]
