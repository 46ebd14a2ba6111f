"""minimize/fast_load.py: the same exported program, with far fewer type-hint lookups."""

from __future__ import annotations

import typing
from pathlib import Path

import torch
from torch._export.serde import serialize

from minimize.fast_load import memoized_schema_type_hints
from minimize.program import load_exported
from tests.conftest import Host


def test_memoized_load_gives_the_same_program_with_fewer_lookups(tmp_path: Path, monkeypatch):
    path = tmp_path / "host.pt2"
    torch.export.save(torch.export.export(Host().eval(), (torch.randn(4, 8),)), str(path))
    calls = {"n": 0}
    real = typing.get_type_hints

    def counting(*args, **kwargs):
        calls["n"] += 1
        return real(*args, **kwargs)

    monkeypatch.setattr(typing, "get_type_hints", counting)
    plain = torch.export.load(str(path))
    plain_calls, calls["n"] = calls["n"], 0
    fast = load_exported(path)
    assert plain.graph_module.code == fast.graph_module.code
    assert calls["n"] < plain_calls / 3, (calls["n"], plain_calls)
    assert serialize.typing is typing  # put back after the load


def test_the_patch_is_undone_when_the_load_fails(tmp_path: Path):
    try:
        with memoized_schema_type_hints():
            assert serialize.typing is not typing
            raise ValueError("a damaged archive")
    except ValueError:
        pass
    assert serialize.typing is typing
