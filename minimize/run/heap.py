"""Python's cyclic garbage collector around trtmin's big one-time allocations.

A full collection walks every live object, and while a program of thousands of nodes is
being built the collector runs again and again over the growing heap: loading the
5,112-node big_mlp_stack.pt2 took 5.3 s with it and 3.8 s without (plus 0.27 s for one
collection after), at the same peak memory.
"""

from __future__ import annotations

import gc
from contextlib import contextmanager
from typing import Iterator


@contextmanager
def gc_paused(collect: bool = True) -> Iterator[None]:
    """No automatic collections inside; one collection after, so that garbage made
    inside (which may hold tensors) is freed at once. collect=False: the caller runs
    `collect_parked()` later, while it waits for something else anyway; until then what
    was made inside is parked out of the collector's sight (gc.freeze), or else the next
    allocation would start a collection over all of it (it is all still generation 0)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if collect:
            gc.collect()
        else:
            gc.freeze()
        if was_enabled:
            gc.enable()


def collect_parked() -> None:
    """The collection a gc_paused(collect=False) left to its caller; nothing when nothing
    is parked (so it can be called before every wait)."""
    if gc.get_freeze_count():
        gc.unfreeze()
        gc.collect()


def freeze_heap() -> None:
    """Move everything alive now out of the collector's reach (gc.freeze): what a worker
    has imported and built lives until it exits, and a full collection over it stalled
    a worker's first job by 0.2 s on CPU."""
    gc.freeze()
