"""A candidate: one program to try, as a frozen value (docs/design.md, "The candidate").

It is the kept nodes, the backend's settings (--set) and its state outside the graph:
made values (minimize/search/passes/values.py), shrunk sizes (minimize/search/passes/shapes.py) and
localization's every-value-an-output run (minimize/search/localize.py). Its text form, the
`Key` (nodes, settings), holds that state as pseudo-settings (`trtmin.generated`,
`trtmin.sizes`, `trtmin.mark_all`), so a run is cached, journaled and sent to a worker
under one key; only this module reads or writes them.
"""

from __future__ import annotations

import dataclasses
import functools
import json
from dataclasses import dataclass
from typing import Any, Mapping

import torch

Nodes = tuple[int, ...]
Settings = tuple[tuple[str, str], ...]  # sorted (name, text) pairs: part of the cache key
Key = tuple[Nodes, Settings]

MADE = "trtmin.generated"  # JSON {value name: expression}
SIZES = "trtmin.sizes"  # JSON {size: smaller size} for the graph's size arguments
MARK_ALL = "trtmin.mark_all"  # "1": every kept value is an output
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
    nodes: Nodes
    settings: Settings = ()  # the backend's own, sorted
    made: tuple[tuple[str, str], ...] = ()  # (value name, expression), sorted by name
    sizes: tuple[tuple[int, int], ...] | None = None  # None: not shrunk; (): only made tensors shrank
    mark_all: bool = False

    @classmethod
    def of(cls, key: Key) -> Candidate:
        """The candidate a key stands for."""
        nodes, settings = key
        pseudo = {k: v for k, v in settings if k.startswith("trtmin.")}
        sizes = pseudo.get(SIZES)
        return cls(tuple(nodes), tuple(kv for kv in settings if not kv[0].startswith("trtmin.")),
                   tuple(sorted(json.loads(pseudo.get(MADE, "{}")).items())),
                   None if sizes is None else tuple(sorted((int(k), v) for k, v in json.loads(sizes).items())),
                   pseudo.get(MARK_ALL) == "1")

    @property
    def key(self) -> Key:
        pseudo = ([(MADE, json.dumps(dict(self.made), sort_keys=True))] if self.made else []) \
            + ([(SIZES, json.dumps({str(k): v for k, v in self.sizes}))] if self.sizes is not None else []) \
            + ([(MARK_ALL, "1")] if self.mark_all else [])
        return self.nodes, tuple(sorted([*self.settings, *pseudo]))

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
                **({"sizes": dict(self.sizes)} if self.sizes else {})}

    def size_key(self) -> tuple[int, ...]:
        """The order in which a reduction step must make a candidate smaller: fewer nodes,
        then fewer backend settings, then more values made instead of taken from the
        program, then fewer elements in them, then smaller size arguments."""
        return (len(self.nodes), len(self.settings), -len(self.made), sum(_elements(e) for _, e in self.made),
                -sum(old - new for old, new in self.sizes or ()))


def made_of(settings: Settings) -> dict[str, str]:
    """The made values' expressions a run's settings carry ({} for none)."""
    return dict(Candidate.of(((), settings)).made)


def with_made(settings: Settings, exprs: Mapping[str, str]) -> Settings:
    return Candidate.of(((), settings)).but(made=exprs).key[1]


def sizes_of(settings: Settings) -> dict[int, int]:
    """The size map a run's settings carry ({} for none)."""
    return dict(Candidate.of(((), settings)).sizes or ())


def with_sizes(settings: Settings, sizes: Mapping[int, int]) -> Settings:
    """The settings of a shrunk run: the graph's size map, {} where only made tensors shrank
    (present either way: it says the shapes were shrunk)."""
    return Candidate.of(((), settings)).but(sizes=sizes).key[1]


def with_mark_all(settings: Settings) -> Settings:
    return Candidate.of(((), settings)).but(mark_all=True).key[1]
