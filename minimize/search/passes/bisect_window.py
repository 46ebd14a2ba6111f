"""Block bisection: the minimal contiguous failing window, in O(log n) oracle calls.

With a guess of where the bug is (localization's first value off, or the node the
compiler's error names: minimize/search/localize.py), the window is searched where the bug
shows, with no prefix confirmed first:
1. The guessed node's cone (what it depends on, up to it), cut to inputs on its left:
   its last node, its last 2, then the whole cone, and when that fails its shortest
   failing suffix (a gallop, then a binary search). A bug core of 1 or 2 nodes costs
   1 or 2 calls; confirming the prefix first, as this search did before, cost one more,
   and the off output's cone another.
2. When even the whole cone passes (the guess was wrong, or the bug needs more than
   what the value depends on), 3 calls are lost, and the search below runs from the
   prefix.
Without a guess, one search over candidates, in three steps:
1. The shortest failing prefix [0, h) (cut nodes feed the rest as inputs): a binary
   search, or with a guess the one probe of the prefix that ends there.
2. When the prefix's verdict names the output that is off (mismatch, NaN), that
   output's cone, if it alone still fails.
3. The shortest failing suffix of what is left: its last w nodes, w = 1, 2, 4, 8, then
   a binary search. Bug cores are a few nodes, so this costs about 2*log2(w) calls.
With --jobs, idle workers already try the suffixes that follow the answers expected,
and what the next passes ask of the expected window (minimize/search/speculate.py). Searching
the suffix of the whole program at the same time would parallelize better, but costs
more calls at --jobs 1, and oracle calls are the currency. Borrowed in spirit from
torch.fx net_min_base's block traverse and Polygraphy's `debug reduce`.
"""

from __future__ import annotations

from minimize.search.localize import first_off_position, named_failing_position
from minimize.search.passes.outputs import cone, failing_output_cone
from minimize.program.candidate import Nodes
from minimize.search.problem import ReductionProblem
from minimize.search.searches import LOCALIZED_P, Expect, Search, gallop_first_true, guided_first_true, mapped

MIN_LEN = 4  # below this, delta debugging is as cheap


def _guessed_window(problem: ReductionProblem, cur: Nodes, off: int) -> Search:
    """The shortest failing suffix of the cone of cur[off] (the node the guess names)
    within cur[:off + 1], or None when the whole cone passes."""
    norm = problem.program.normalize
    nodes = cone(problem, cur[off], cur[:off + 1])
    suffix = lambda w: norm(nodes[-w:])  # noqa: E731
    short = [w for w in (1, 2) if w < len(nodes)]
    for w in short:  # shortest first: each is minimal when it fails
        if (yield suffix(w)):
            return suffix(w)
    if not (yield Expect(nodes, True, LOCALIZED_P)):
        return None  # a wrong guess has cost 3 calls
    return suffix((yield from mapped(gallop_first_true(len(short) + 1, len(nodes)), suffix)))


def _window_search(problem: ReductionProblem, cur: Nodes, off: int | None) -> Search:
    """The minimal failing window of `cur`; off: the position localization names."""
    norm = problem.program.normalize
    if off is not None:
        window = yield from _guessed_window(problem, cur, off)
        if window is not None:
            return window
    h = yield from mapped(guided_first_true(1, len(cur), None if off is None else off + 1), lambda h: norm(cur[:h]))
    region = norm(cur[:h])
    cone_of_off = failing_output_cone(problem, region)
    if cone_of_off and cone_of_off != region and (yield cone_of_off):
        region = cone_of_off
    w = yield from mapped(gallop_first_true(1, len(region)), lambda w: norm(region[-w:]))
    return norm(region[-w:])


def bisect_window(problem: ReductionProblem) -> None:
    cur = problem.current.nodes
    if len(cur) < MIN_LEN:
        return
    off = first_off_position(problem, cur)
    if off is None:
        off = named_failing_position(problem, cur)
    window = problem.run_search(lambda: _window_search(problem, cur, off))
    if window:
        problem.consider(problem.at(window))
