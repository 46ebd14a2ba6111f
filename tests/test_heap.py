"""minimize/run/heap.py: the collector is paused inside, and what was made garbage inside is freed after."""

from __future__ import annotations

import gc
import weakref

import torch

from minimize.run.heap import collect_parked, gc_paused


class _Node:
    def __init__(self) -> None:
        self.me = self  # a cycle: only the cyclic collector frees it
        self.weight = torch.zeros(1000)


def test_the_collector_is_paused_inside_and_garbage_is_freed_after():
    assert gc.isenabled()
    with gc_paused():
        assert not gc.isenabled()
        ref = weakref.ref(_Node())
        assert ref() is not None  # garbage, but not yet collected
    assert gc.isenabled()
    assert ref() is None  # the tensor in the cycle is freed when the block ends


def test_a_paused_collector_stays_paused_and_an_error_still_restores_it():
    gc.disable()
    try:
        with gc_paused():
            pass
        assert not gc.isenabled()  # it was off before: it stays off
    finally:
        gc.enable()
    try:
        with gc_paused():
            raise ValueError
    except ValueError:
        pass
    assert gc.isenabled()


def test_the_collection_can_be_left_to_the_caller():
    with gc_paused(collect=False):
        ref = weakref.ref(_Node())
    assert gc.isenabled() and ref() is not None
    gc.collect()
    assert ref() is not None  # parked: collections before the caller's do not walk it
    collect_parked()
    assert ref() is None and gc.get_freeze_count() == 0
    collect_parked()  # nothing parked: nothing to do
