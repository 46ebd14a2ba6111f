"""Partition-aware passes, for backends that report their engines and op fallback.

- isolate_partition: run each compiled engine alone in the compiler (the rest, cut to
  inputs, in PyTorch); keep the first that fails the same way. Coarsest cut of all.
- bisect_settings: drop every --set setting the bug does not need, so the repro carries
  only those (and the report says which).
- bisect_op_fallback: the fewest op types that, forced to PyTorch (Torch-TensorRT's
  torch_executed_ops), make the bug vanish: that names the culprit converter. Where
  none does, or the backend forces no op back (ONNX Runtime), the option that turns off
  its whole-graph rewrites (a lowering, graph optimizations) where that makes it vanish.
"""

from __future__ import annotations

from typing import Callable, Sequence, TypeVar

from minimize.program.candidate import Settings
from minimize.search.problem import ReductionProblem

T = TypeVar("T")


def isolate_partition(problem: ReductionProblem) -> None:
    if not problem.has_partitions():
        return
    parts = problem.partitions(problem.current)
    if len(parts) < 2:
        return
    keep = set(problem.current.nodes)
    cands = []
    for names in parts:
        idx = {problem.program.index[n] for n in names if n in problem.program.index} & keep
        c = problem.program.normalize(idx)
        cands.append(c if c and c != problem.current.nodes else ())
    usable = [c for c in cands if c]
    i = problem.try_first([problem.at(c) for c in usable])
    if i is not None:
        n = cands.index(usable[i])
        problem.notes["failing_engine"] = f"engine {n} of {len(parts)} ({len(usable[i])} call nodes)"
        problem.consider(problem.at(usable[i]))


def shrink_list(items: list[T], keeps_property: Callable[[list[list[T]]], int | None]) -> list[T]:
    """Delta debugging on a list: remove chunks while the property holds. `keeps_property`
    gets the candidate lists in order and returns the index of the first that holds."""
    size = max(1, len(items) // 2)
    while items:
        starts = list(range(0, len(items), size))
        cands = [items[:s] + items[s + size:] for s in starts]
        i = keeps_property(cands)
        if i is not None:
            items = cands[i]
            size = max(1, min(size, len(items) // 2))
            continue
        if size == 1:
            break
        size = max(1, size // 2)
    return items


def bisect_settings(problem: ReductionProblem) -> None:
    given = list(problem.current.settings)
    if not given:
        return
    as_settings = lambda kvs: tuple(sorted(kvs))  # noqa: E731
    needed = shrink_list(given, lambda cands: problem.first_settings([as_settings(c) for c in cands]))
    problem.notes["settings_needed"] = dict(needed)
    problem.notes["settings_dropped"] = sorted(k for k, _ in given if k not in dict(needed))
    if len(needed) < len(given):
        problem.consider(problem.current.but(settings=as_settings(needed)))


def bisect_op_fallback(problem: ReductionProblem) -> None:
    setting = problem.rules.op_fallback_setting
    if not setting:  # no op can be forced back (ONNX Runtime): its graph rewrites can still be turned off
        if problem.rules.lowering_toggles:
            lowering_toggle(problem)
        return
    ops = sorted({str(problem.program.nodes[i].target) for i in problem.current.nodes})

    def with_fallback(subset: Sequence[str]) -> Settings:
        base = [kv for kv in problem.current.settings if kv[0] != setting]
        return tuple(sorted(base + [(setting, ",".join(subset))]))

    if problem.first_settings([with_fallback(ops)], want_failure=False) is None:
        problem.notes["culprit_ops"] = "the bug remains with every op type forced to PyTorch"
        lowering_toggle(problem)
        return
    none_forced_is_current = all(key != setting or not value for key, value in problem.current.settings)

    def first_that_vanishes(cands: list[list[str]]) -> int | None:
        # forcing no op type to PyTorch is the current candidate, whose bug stays: no call
        asked = [c for c in cands if c or not none_forced_is_current]
        i = problem.first_settings([with_fallback(c) for c in asked], want_failure=False)
        return None if i is None else cands.index(asked[i])

    problem.notes["culprit_ops"] = shrink_list(ops, first_that_vanishes)


def lowering_toggle(problem: ReductionProblem) -> None:
    """A bug that survives every op type forced to PyTorch is in what the compiler does to
    the whole graph before it converts ops (Torch-TensorRT's lowering passes run before
    partitioning, so torch_executed_ops cannot undo them). Name the backend's lowering
    option whose other value makes it vanish, one call each, until one does."""
    toggles = problem.rules.lowering_toggles
    base = [kv for kv in problem.current.settings if kv[0] not in {k for k, _ in toggles}]
    options = [tuple(sorted(base + [kv])) for kv in toggles if kv not in problem.current.settings]
    i = problem.first_settings(options, want_failure=False)
    if i is None:
        return
    key, value = next(kv for kv in options[i] if kv not in base)
    verdict = problem.known_verdict(problem.current.but(settings=options[i]))
    if verdict is not None and verdict.kind == "pass":
        problem.notes["lowering"] = (f"the bug is in the compiler's rewrite of the whole graph ({problem.rules.rewrite_words}), "
                                     f"not in its ops as written: it vanishes with --set {key}={value}")
    elif verdict is not None:  # the toggle takes this bug away and fails another way: say both
        problem.notes["lowering"] = (f"with --set {key}={value} this bug is gone, but the compiler fails another way: "
                                     f"{verdict.describe()[:200]}")
