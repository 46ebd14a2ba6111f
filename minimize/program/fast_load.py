"""A faster torch.export.load for big graphs.

torch's deserializer (torch/_export/serde/serialize.py and union.py) turns the JSON into
schema dataclasses with `_dict_to_dataclass`, which works out each object's class anew:
for a 5,112-node graph, ~530,000 calls, ~195,000 `typing.get_type_hints` and ~500,000
`dataclasses.fields`, most of a load's time. None of those answers changes during a
load, so while trtmin loads a model `_dict_to_dataclass` is replaced by a decoder that
works out each schema type once and keeps a small function for it (`_SchemaDecoder`;
the same objects, tested): a load of a 5,112-node graph takes about half as long
(bench/README.md). What is left is mostly torch's own: fake tensors for each node's metadata, its union
objects and its first import of the deserializer.
If a torch release renames what this relies on, that part of the load simply runs
unpatched.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import types
import typing
from typing import Any, Callable, Iterator


class _SchemaDecoder:
    """serialize._dict_to_dataclass(cls, data), with the class analysis done once per
    type: the same branches in the same order (a schema type's decoder is built on
    first use, so self-referring types need no forward declaration)."""

    def __init__(self, serialize: types.ModuleType, union: types.ModuleType) -> None:
        self.serialize, self.serialize_union, self.union_base = serialize, union, union._Union
        self.globalns = vars(serialize.schema)
        self.decoders: dict[Any, Callable[[Any], Any]] = {}

    def __call__(self, cls: Any, data: Any) -> Any:
        return self.decoder(cls)(data)

    def decoder(self, cls: Any) -> Callable[[Any], Any]:
        try:
            found = self.decoders.get(cls)
        except TypeError:  # an unhashable type object: analysed each time
            return self._build(cls)
        if found is None:
            found = self.decoders[cls] = self._build(cls)
        return found

    def _build(self, cls: Any) -> Callable[[Any], Any]:
        cls = self.serialize._resolve_schema_cls(cls)
        if isinstance(cls, str):
            raise AssertionError(f"Unresolved class type: '{cls}'.")
        origin, args = typing.get_origin(cls), typing.get_args(cls)
        if origin is typing.Annotated:
            return lambda data: self.decoder(cls.__origin__)(data)
        if origin in (typing.Union, types.UnionType) and type(None) in args:
            def optional(data: Any) -> Any:
                if data is None:
                    return None
                if len(args) != 2:
                    raise AssertionError(f"expected 2 type args, got {len(args)}")
                return self.decoder(args[0])(data)
            return optional
        if isinstance(cls, type) and issubclass(cls, self.union_base):
            hints = typing.get_type_hints(cls, globalns=self.globalns)
            create = self._union_create(cls)

            def one_of(data: Any) -> Any:
                if not isinstance(data, dict) or len(data) != 1:
                    raise AssertionError(f"expected a dict with 1 key, got {data!r:.80}")
                ((tag, value),) = data.items()
                return create(tag, self.decoder(hints[tag])(value))
            return one_of
        if dataclasses.is_dataclass(cls):
            hints = typing.get_type_hints(cls, globalns=self.globalns)
            names = [f.name for f in dataclasses.fields(cls)]
            # Keys the dataclass does not define are ignored, as torch does (forward compatibility).
            return lambda data: cls(**{n: self.decoder(hints[n])(data[n]) for n in names if n in data})

        def by_value(data: Any) -> Any:  # what is left depends on the data, as in torch
            if isinstance(data, list):
                return data if not data else [self.decoder(args[0])(d) for d in data]
            if isinstance(data, dict):
                return {k: self.decoder(args[1])(v) for k, v in data.items()}
            return float(data) if cls is float else data
        return by_value

    def _union_create(self, cls: type) -> Callable[[str, Any], Any]:
        """cls.create(**{tag: value}): torch's builds a dict of every field per call and
        checks the field names per object. For a plain union class (torch's create and
        __post_init__, dataclass attributes in __dict__) the check is made once here and
        the object filled directly: the same attributes in the same order."""
        base = self.union_base
        plain = (getattr(cls.create, "__func__", None) is base.create.__func__ and cls.__post_init__ is base.__post_init__
                 and cls.__setattr__ is object.__setattr__ and not hasattr(cls, "__slots__"))
        if not plain:
            return lambda tag, value: cls.create(**{tag: value})
        unset = {f.name: None for f in dataclasses.fields(cls)}
        if any(name in ("type", "_type", "create", "value") for name in unset):
            raise AssertionError("field names 'type', '_type', 'create', 'value' are reserved")
        make_tag = self.serialize_union._UnionTag.create

        def create(tag: str, value: Any) -> Any:
            if tag not in unset:  # as cls(**...) would refuse it
                raise TypeError(f"{cls.__name__}.__init__() got an unexpected keyword argument '{tag}'")
            obj = cls.__new__(cls)
            attrs = obj.__dict__
            attrs.update(unset)
            attrs[tag] = value
            obj._type = make_tag(tag, cls)
            return obj
        return create


def _module(name: str) -> types.ModuleType | None:
    try:
        return importlib.import_module(f"torch._export.serde.{name}")
    except ImportError:
        return None


@contextlib.contextmanager
def fast_schema_decoding() -> Iterator[None]:
    serialize, union = _module("serialize"), _module("union")
    original = getattr(serialize, "_dict_to_dataclass", None)
    if original is None or not hasattr(union, "_Union"):  # another torch: the load runs unpatched
        yield
        return
    serialize._dict_to_dataclass = _SchemaDecoder(serialize, union)  # type: ignore[union-attr, arg-type]
    try:
        yield
    finally:
        serialize._dict_to_dataclass = original  # type: ignore[union-attr]
