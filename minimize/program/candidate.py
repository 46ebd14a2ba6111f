"""A candidate: one program to try, as a frozen value (docs/design.md, "The candidate").

It is the kept nodes, the backend's settings (--set) and its state outside the graph:
made values (minimize/search/passes/values.py), shrunk sizes (minimize/search/passes/shapes.py),
localization's every-value-an-output run (minimize/search/localize.py) and the compile with
static sizes (minimize/reduce.py, _needed_dynamic). Runs are cached
and speculated under it, journaled as its `record()` and sent to a worker as its `job()`.
"""

from __future__ import annotations

import dataclasses
import functools
import json
from dataclasses import dataclass
from typing import Any, Mapping

import torch

Nodes = tuple[int, ...]
Settings = tuple[tuple[str, str], ...]  # sorted (name, text) pairs

# How journals written before the type existed carried the state outside the graph: as
# settings named so (read by Candidate.from_record, never written).
_OLD_MADE, _OLD_SIZES, _OLD_MARK_ALL = "trtmin.generated", "trtmin.sizes", "trtmin.mark_all"
INLINE_MAX_ELEMENTS = 16  # smaller tensors are literals in repro.py, never made values


def make(expr: str) -> torch.Tensor:
    """The tensor a made value's expression makes: the same text repro.py runs."""
    # With the builtins: torch's C code imports through the calling frame's __import__ (a
    # Python float as a fill value or an operand: torch.full, `< 0.5`), KeyError without them.
    return eval(expr, {"torch": torch})  # noqa: S307  (our own text, never the user's)


@functools.lru_cache(maxsize=4096)
def _elements(expr: str) -> int:
    return make(expr).numel()


@dataclass(frozen=True)
class Candidate:
    """One program to try; equal candidates are one run (the verdict cache's key)."""

    nodes: Nodes
    settings: Settings = ()  # the backend's own, sorted
    made: tuple[tuple[str, str], ...] = ()  # (value name, expression), sorted by name
    sizes: tuple[tuple[int, int], ...] | None = None  # None: not shrunk; (): only made tensors shrank
    mark_all: bool = False
    static: bool = False  # compiled with the program's dynamic dims (torch.export.Dim) not marked

    def record(self) -> dict[str, Any]:
        """Its JSON form in the journal (nodes as runs of consecutive indices: a 5,000-node
        prefix is one pair)."""
        return {"kept": _runs(self.nodes), "settings": [list(kv) for kv in self.settings],
                **({"made": dict(self.made)} if self.made else {}),
                **({"sizes": {str(k): v for k, v in self.sizes}} if self.sizes is not None else {}),
                **({"mark_all": True} if self.mark_all else {}),
                **({"static": True} if self.static else {})}

    @classmethod
    def from_record(cls, rec: Mapping[str, Any]) -> Candidate:
        """The candidate a journal record names, also one written before this type (its
        made values, sizes and marks as `trtmin.*` settings)."""
        settings = [(str(k), str(v)) for k, v in rec.get("settings", [])]
        old = {k: v for k, v in settings if k.startswith("trtmin.")}
        made = rec.get("made", json.loads(old.get(_OLD_MADE, "{}")))
        sizes = rec.get("sizes", json.loads(old[_OLD_SIZES]) if _OLD_SIZES in old else None)
        return cls(tuple(i for a, b in rec["kept"] for i in range(a, b + 1)),
                   tuple(sorted(kv for kv in settings if not kv[0].startswith("trtmin."))),
                   tuple(sorted(made.items())),
                   None if sizes is None else tuple(sorted((int(k), int(v)) for k, v in sizes.items())),
                   bool(rec.get("mark_all", old.get(_OLD_MARK_ALL) == "1")), bool(rec.get("static", False)))

    def but(self, **changes: Any) -> Candidate:
        """This candidate with some fields changed (made and sizes given as mappings)."""
        if isinstance(changes.get("made"), Mapping):
            changes["made"] = tuple(sorted(changes["made"].items()))
        if isinstance(changes.get("sizes"), Mapping):
            changes["sizes"] = tuple(sorted(changes["sizes"].items()))
        return dataclasses.replace(self, **changes)

    def job(self) -> dict[str, Any]:
        """What a worker is sent to run it."""
        return {"kept": list(self.nodes), "settings": dict(self.settings),
                **({"mark_all": True} if self.mark_all else {}),
                **({"generated": dict(self.made)} if self.made else {}),
                **({"sizes": dict(self.sizes)} if self.sizes else {}),
                **({"static": True} if self.static else {})}

    def size_key(self) -> tuple[int, ...]:
        """The order in which a reduction step must make a candidate smaller: fewer nodes,
        then fewer backend settings, then more values made instead of taken from the
        program, then fewer elements in them, then smaller size arguments."""
        return (len(self.nodes), len(self.settings), -len(self.made), sum(_elements(e) for _, e in self.made),
                -sum(old - new for old, new in self.sizes or ()))


def _runs(kept: Nodes) -> list[list[int]]:
    runs: list[list[int]] = []
    for i in kept:
        if runs and runs[-1][1] == i - 1:
            runs[-1][1] = i
        else:
            runs.append([i, i])
    return runs
