"""A faster torch.export.load for big graphs.

torch's deserializer (torch/_export/serde/serialize.py and union.py) looks up each
schema object's class anew: for a 5,112-node graph, ~195,000 `typing.get_type_hints`
and ~500,000 `dataclasses.fields` calls, most of a load's time. Neither answer changes
during a load, so while trtmin loads a model those modules see the two functions
memoized per class (measured there: 10.5-12.4 s -> 5.4-7.2 s). If a torch release renames
what this relies on, that part of the load simply runs unpatched.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import types
import typing
from typing import Any, Iterator


def _memoized_fields() -> Any:
    cache: dict[type, tuple[dataclasses.Field, ...]] = {}

    def fields(obj: Any) -> tuple[dataclasses.Field, ...]:
        cls = obj if isinstance(obj, type) else type(obj)  # an instance has its class's fields
        if cls not in cache:
            cache[cls] = dataclasses.fields(cls)
        return cache[cls]

    return fields


class _MemoizedModule(types.ModuleType):
    """A stand-in for a module: its names, some replaced. Looked up without
    __getattr__ (the deserializer makes millions of these lookups)."""

    def __init__(self, module: types.ModuleType, **replaced: Any) -> None:
        super().__init__(module.__name__)
        self.__dict__.update({k: v for k, v in vars(module).items() if not k.startswith("__")})
        self.__dict__.update(replaced)


def _memoized_type_hints() -> Any:
    cache: dict[tuple[Any, int, bool], dict[str, Any]] = {}

    def get_type_hints(obj: Any, globalns: Any = None, localns: Any = None,
                       include_extras: bool = False) -> dict[str, Any]:
        if localns is not None:
            return typing.get_type_hints(obj, globalns, localns, include_extras)
        key = (obj, id(globalns), include_extras)
        if key not in cache:
            cache[key] = typing.get_type_hints(obj, globalns, None, include_extras)
        return cache[key]

    return get_type_hints


def _module(name: str) -> types.ModuleType | None:
    try:
        return importlib.import_module(f"torch._export.serde.{name}")
    except ImportError:
        return None


@contextlib.contextmanager
def memoized_schema_type_hints() -> Iterator[None]:
    serialize, union = _module("serialize"), _module("union")
    fields = _memoized_fields()
    patches = [(serialize, "typing", typing, _MemoizedModule(typing, get_type_hints=_memoized_type_hints())),
               (serialize, "dataclasses", dataclasses, _MemoizedModule(dataclasses, fields=fields)),
               (union, "fields", dataclasses.fields, fields)]
    applied = [p for p in patches if getattr(p[0], p[1], None) is p[2]]  # a missing module: None, skipped
    for mod, name, _, new in applied:
        setattr(mod, name, new)
    try:
        yield
    finally:
        for mod, name, old, _ in applied:
            setattr(mod, name, old)
