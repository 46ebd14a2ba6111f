"""A faster torch.export.load for big graphs.

torch's deserializer (torch/_export/serde/serialize.py, `_dict_to_dataclass`) looks up
each schema object's class anew: for a 5,112-node graph, ~195,000 `typing.get_type_hints`
and ~300,000 `dataclasses.fields` calls. Neither answer changes during a load, so while
trtmin loads a model that module sees `typing` and `dataclasses` whose two functions are
memoized per class. If a torch release renames what this relies on, the load simply runs
unpatched.
"""

from __future__ import annotations

import contextlib
import dataclasses
import types
import typing
from typing import Any, Iterator


class _MemoizedTyping(types.ModuleType):
    def __init__(self) -> None:
        super().__init__("typing")
        # everything else is typing's own, looked up without __getattr__ (millions of calls)
        self.__dict__.update({k: v for k, v in vars(typing).items() if not k.startswith("__")})
        del self.__dict__["get_type_hints"]  # the memoized method below, not typing's
        self._hints: dict[tuple[Any, int, bool], dict[str, Any]] = {}

    def get_type_hints(self, obj: Any, globalns: Any = None, localns: Any = None,
                       include_extras: bool = False) -> dict[str, Any]:
        if localns is not None:
            return typing.get_type_hints(obj, globalns, localns, include_extras)
        key = (obj, id(globalns), include_extras)
        if key not in self._hints:
            self._hints[key] = typing.get_type_hints(obj, globalns, None, include_extras)
        return self._hints[key]


class _MemoizedDataclasses(types.ModuleType):
    def __init__(self) -> None:
        super().__init__("dataclasses")
        self.__dict__.update({k: v for k, v in vars(dataclasses).items() if not k.startswith("__")})
        del self.__dict__["fields"]
        self._fields: dict[type, tuple[dataclasses.Field, ...]] = {}

    def fields(self, cls: Any) -> tuple[dataclasses.Field, ...]:
        if not isinstance(cls, type):  # an instance: not what the deserializer asks
            return dataclasses.fields(cls)
        if cls not in self._fields:
            self._fields[cls] = dataclasses.fields(cls)
        return self._fields[cls]


@contextlib.contextmanager
def memoized_schema_type_hints() -> Iterator[None]:
    try:
        from torch._export.serde import serialize
    except ImportError:
        yield
        return
    if getattr(serialize, "typing", None) is not typing or getattr(serialize, "dataclasses", None) is not dataclasses:
        yield
        return
    serialize.typing, serialize.dataclasses = _MemoizedTyping(), _MemoizedDataclasses()  # type: ignore[attr-defined]
    try:
        yield
    finally:
        serialize.typing, serialize.dataclasses = typing, dataclasses  # type: ignore[attr-defined]
