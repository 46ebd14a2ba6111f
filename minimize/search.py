"""Oracle-driven searches as replayable generators, and how to speculate on them.

A search is a generator that yields the integer it wants tested and receives whether
the candidate made from it is interesting; its return value is the answer. Because a
search is a pure function of those answers, it can be *replayed* from the start under
any set of known or hypothetical answers. That is all speculation needs: the next
probes the sequential search could ask for are found by replaying it under both
answers of each probe still unknown, breadth first (ReductionProblem.run_search).
Searches stay plain sequential code, and the probes they ask for, the calls charged
and the answer are the same for any number of workers.
"""

from __future__ import annotations

from typing import Callable, Generator

Search = Generator[int, bool, int]
SearchFactory = Callable[[], Search]


def binary_first_true(lo: int, hi: int) -> Search:
    """Smallest x in [lo, hi] whose probe is true; hi itself is taken as true.
    About log2(hi - lo) probes wherever the answer lies."""
    while lo < hi:
        mid = (lo + hi) // 2
        if (yield mid):
            hi = mid
        else:
            lo = mid + 1
    return lo


def gallop_first_true(lo: int, hi: int, max_steps: int = 4) -> Search:
    """Smallest x in [lo, hi] whose probe is true, hi taken as true, for answers
    expected near lo: probes lo, lo+1, lo+3, lo+7 (max_steps of them), then a binary
    search in what is left. An answer within 2**max_steps of lo costs about
    2*log2(x - lo + 1) probes (a 2-node window at the end of a 200-node prefix: 2,
    where a binary search takes 8); one further away costs max_steps more than a
    binary search would."""
    below = lo - 1                # the largest x known to be false
    for step in range(max_steps):
        x = lo + (1 << step) - 1
        if x >= hi:
            break
        if (yield x):
            return (yield from binary_first_true(below + 1, x))
        below = x
    return (yield from binary_first_true(below + 1, hi))


def replay(factory: SearchFactory, answer: Callable[[int], bool | None]) -> tuple[int | None, int | None]:
    """Run a search from the start with `answer` (None = unknown). Returns
    (first unknown probe, None), or (None, result) when every probe was answered."""
    gen = factory()
    try:
        x = next(gen)
        while True:
            a = answer(x)
            if a is None:
                return x, None
            x = gen.send(a)
    except StopIteration as done:
        return None, done.value


def speculative_probes(factory: SearchFactory, known: Callable[[int], bool | None], budget: int) -> list[int]:
    """Up to `budget` probes the sequential search may need next, nearest first: the
    next unknown probe, then the next one under each of its answers, and so on."""
    out: list[int] = []
    frontier: list[dict[int, bool]] = [{}]
    replays = 0
    while frontier and len(out) < budget and replays < 8 * budget + 16:
        guess = frontier.pop(0)
        replays += 1
        x, _ = replay(factory, lambda p: guess[p] if p in guess else known(p))
        if x is None:
            continue
        if x not in out:
            out.append(x)
        frontier += [{**guess, x: True}, {**guess, x: False}]
    return out
