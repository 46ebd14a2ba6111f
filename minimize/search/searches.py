"""Oracle-driven searches as generators, and how to speculate on a sequential walk.

A search is a generator that yields the probe it wants tested (an integer, or a
candidate) and receives whether it is interesting; its return value is the answer.
Searches stay plain sequential code: the probes they ask for, the calls charged and
the answer are the same for any number of workers. A search may say which answer it
expects (`Expect`), which only changes what is speculated.

Speculation (`speculative_probes`) works on any *walk*: a function that replays a
sequential algorithm from its start under some hypothetical answers and returns the
first probe it cannot answer. The reducer's walk is the whole reduction, every pass
(minimize/search/speculate.py); the tests also walk single searches (`search_walk`). The
next probes the algorithm may need are found by replaying it under both answers of
each unknown probe, most probable path first.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass
from typing import Any, Callable, Generator, Hashable

Search = Generator[Any, bool, Any]
SearchFactory = Callable[[], Search]
ProbeWalk = Callable[[dict[Any, bool]], "tuple[Hashable, float] | None"]
EXPECTED_P = 0.8  # how likely an Expect hint is taken to be right, when ranking speculative probes


@dataclass(frozen=True)
class Expect:
    """A probe and the answer the search expects for it, with how sure it is
    (speculation tries the likeliest paths first)."""
    probe: Hashable
    answer: bool
    confidence: float = EXPECTED_P


def unwrap(y: Any) -> tuple[Hashable, float]:
    """A yielded probe and the probability that its answer is True."""
    if isinstance(y, Expect):
        return y.probe, y.confidence if y.answer else 1 - y.confidence
    return y, 0.5


def mapped(search: Search, make: Callable[[Any], Any]) -> Search:
    """`search` with each probe p replaced by make(p) (hints kept): an integer search
    over candidates, to compose with other searches by `yield from`."""
    try:
        y = next(search)
        while True:
            p = make(y.probe) if isinstance(y, Expect) else make(y)
            y = search.send((yield Expect(p, y.answer, y.confidence) if isinstance(y, Expect) else p))
    except StopIteration as done:
        return done.value


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


LOCALIZED_P = 0.95  # a prefix (or cone) ending where localization saw the first value off fails


def guided_first_true(lo: int, hi: int, guess: int | None) -> Search:
    """Smallest x in [lo, hi] whose probe is true, hi taken as true, for an answer
    expected at `guess` (from localization: below it every value was right, so guess - 1
    is taken as false unasked): 1 probe when the guess is right. A guess too low gallops
    up from it (a miss by d < 8 costs about 2*log2(d) + 1 probes, any miss at most 5
    more than a binary search). A guess too high is taken as it is: the window ends a
    few nodes late, and delta debugging removes them (minimize/search/passes/delete_chunks.py)."""
    if guess is None or not lo <= guess <= hi:
        return (yield from binary_first_true(lo, hi))
    if guess < hi and not (yield Expect(guess, True, LOCALIZED_P)):
        return (yield from gallop_first_true(guess + 1, hi))
    return guess


def _walk(factory: SearchFactory, answer: Callable[[Hashable, float], bool | None]) -> tuple[Any, Any]:
    """Run a search from the start; `answer` gets each probe and how likely it is true,
    and returns None when it does not know. Returns (what the search yielded at the
    first unknown probe, None), or (None, result) when all were answered."""
    gen = factory()
    try:
        y = next(gen)
        while True:
            a = answer(*unwrap(y))
            if a is None:
                return y, None
            y = gen.send(a)
    except StopIteration as done:
        return None, done.value


def replay(factory: SearchFactory, answer: Callable[[Any], bool | None]) -> tuple[Any, Any]:
    """(first unknown probe, None), or (None, result) when every probe was answered."""
    y, result = _walk(factory, lambda p, _: answer(p))
    return (None if y is None else unwrap(y)[0]), result


def drive(factory: SearchFactory, answer: Callable[[Hashable, float], bool]) -> Any:
    """Run a search to its answer; `answer` gets each probe and how likely it is true."""
    return _walk(factory, answer)[1]


def search_walk(factory: SearchFactory, known: Callable[[Any], bool | None]) -> ProbeWalk:
    """The walk of one search: its first probe that neither `known` nor the guesses answer."""
    def walk(guess: dict[Any, bool]) -> tuple[Hashable, float] | None:
        y, _ = _walk(factory, lambda p, _: guess[p] if p in guess else known(p))
        return None if y is None else unwrap(y)
    return walk


def speculative_probes(walk: ProbeWalk, budget: int) -> list[Any]:
    """Up to `budget` probes the sequential walk may need next, most probable first:
    the next unknown probe, then the next one under each of its answers, and so on,
    each path ranked by the product of its answers' probabilities (0.5 each, or what
    an Expect hint says). Ties go breadth first."""
    out: list[Any] = []
    heap: list[tuple[float, int, dict[Any, bool]]] = [(-1.0, 0, {})]
    pushed = replays = 0
    while heap and len(out) < budget and replays < 8 * budget + 16:
        neg_p, _, guess = heapq.heappop(heap)
        replays += 1
        step = walk(guess)
        if step is None:
            continue
        x, p_true = step
        if x not in out:
            out.append(x)
        for answer, p in ((True, p_true), (False, 1 - p_true)):
            pushed += 1
            heapq.heappush(heap, (neg_p * p, pushed, {**guess, x: answer}))
    return out
