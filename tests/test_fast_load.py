"""minimize/program/fast_load.py: the same exported program, with far fewer type-hint lookups."""

from __future__ import annotations

import dataclasses
import typing
from pathlib import Path

import torch
from torch._export.serde import serialize, union

from minimize.program.fast_load import fast_schema_decoding
from minimize.program.model import load_exported
from tests.conftest import Host

TORCH_DECODER = serialize._dict_to_dataclass  # torch's own, before any load of trtmin's


def test_the_fast_load_gives_the_same_program_with_fewer_lookups(tmp_path: Path, monkeypatch):
    path = tmp_path / "host.pt2"
    torch.export.save(torch.export.export(Host().eval(), (torch.randn(4, 8),)), str(path))
    calls = {"hints": 0, "fields": 0}
    real_hints, real_fields = typing.get_type_hints, dataclasses.fields

    def hints(*args, **kwargs):
        calls["hints"] += 1
        return real_hints(*args, **kwargs)

    def fields(*args, **kwargs):
        calls["fields"] += 1
        return real_fields(*args, **kwargs)

    monkeypatch.setattr(typing, "get_type_hints", hints)
    monkeypatch.setattr(dataclasses, "fields", fields)
    monkeypatch.setattr(union, "fields", fields)
    union._get_field_names.cache_clear()  # torch's own cache would hide fields() calls of a second load
    fast = load_exported(path)  # first, so that torch's caches do not favour it
    fast_calls = dict(calls)
    calls.update(hints=0, fields=0)
    union._get_field_names.cache_clear()
    plain = torch.export.load(str(path))
    assert plain.graph_module.code == fast.graph_module.code
    assert str(plain.graph_signature) == str(fast.graph_signature)
    assert plain.state_dict.keys() == fast.state_dict.keys()
    assert all(torch.equal(plain.state_dict[k], fast.state_dict[k]) for k in plain.state_dict)
    assert fast_calls["hints"] < calls["hints"] / 3 and fast_calls["fields"] < calls["fields"] / 3, (fast_calls, calls)
    assert serialize.typing is typing and serialize.dataclasses is dataclasses  # put back after the load
    assert union.fields is fields and serialize._dict_to_dataclass is TORCH_DECODER


def test_the_patch_is_undone_when_the_load_fails(tmp_path: Path):
    try:
        with fast_schema_decoding():
            assert serialize._dict_to_dataclass is not TORCH_DECODER
            raise ValueError("a damaged archive")
    except ValueError:
        pass
    assert serialize._dict_to_dataclass is TORCH_DECODER
    assert serialize.typing is typing and serialize.dataclasses is dataclasses and union.fields is dataclasses.fields


def test_the_schema_decoder_builds_the_objects_torch_builds():
    """The decoder in place of serialize._dict_to_dataclass gives equal schema objects for
    a whole exported program (graph, signature, every node's metadata)."""
    import json
    import pickle

    from torch._export.serde import schema

    from minimize.program.fast_load import _SchemaDecoder
    ep = torch.export.export(Host().eval(), (torch.randn(4, 8),))
    data = json.loads(serialize.serialize(ep).exported_program)
    ours = _SchemaDecoder(serialize, union)(schema.ExportedProgram, data)
    theirs = serialize._dict_to_dataclass(schema.ExportedProgram, data)
    assert ours == theirs
    assert len(ours.graph_module.graph.nodes) >= 15
    # Equal attribute by attribute, in the same order (union objects compare by value only).
    assert pickle.dumps(ours) == pickle.dumps(theirs)


def test_the_deserializers_warnings_are_not_shown_and_its_loggers_are_restored(tmp_path: Path):
    """A program indexing by a 0-d tensor (a diffusion policy's timestep) made torch's
    deserializer warn 'Symbol u1 did not appear in the graph' once per index, above the live
    screen, through a handler torch gives that module's logger itself: kept out of sight,
    and the loggers are as they were afterwards."""
    import logging

    class Timestep(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.register_buffer("table", torch.linspace(0, 1, 100))

        def forward(self, t: torch.Tensor) -> torch.Tensor:
            return self.table[t] + self.table[t - 1]  # a 0-d index: an unbacked symbol each

    class Seen(logging.Handler):
        def __init__(self) -> None:
            super().__init__()
            self.said: list[str] = []

        def emit(self, record: logging.LogRecord) -> None:
            self.said.append(record.getMessage())

    path = tmp_path / "timestep.pt2"
    torch.export.save(torch.export.export(Timestep(), (torch.tensor(7),)), str(path))
    serde, seen = logging.getLogger("torch._export.serde.serialize"), Seen()
    serde.addHandler(seen)  # as torch's logging set-up adds its stderr handler there
    try:
        torch.export.load(str(path))
        assert any("did not appear in the graph" in s for s in seen.said), seen.said  # torch's own load says it
        seen.said.clear()
        before = (list(serde.handlers), serde.propagate, serde.level)
        load_exported(path)
        assert seen.said == [] and (list(serde.handlers), serde.propagate, serde.level) == before
    finally:
        serde.removeHandler(seen)
