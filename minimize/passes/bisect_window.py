"""Block bisection: the minimal contiguous failing window, in O(log n) oracle calls.

One search over candidates, in three steps:
1. The shortest failing prefix [0, h) (cut nodes feed the rest as inputs): a binary
   search, or, when localization names the first value that is off, or the compiler's
   error the node it failed on (minimize/localize.py), one probe of the prefix that ends
   there.
2. When the prefix's verdict names the output that is off (mismatch, NaN), that
   output's cone, if it alone still fails: on the Inductor example the prefix ends at
   node 98 and the cone is 4 nodes (arange * 1e9 and two more).
3. The shortest failing suffix of what is left: its last w nodes, w = 1, 2, 4, 8, then
   a binary search. Bug cores are a few nodes, so this costs about 2*log2(w) calls.
With --jobs, while the prefix is being confirmed, idle workers already try the
suffixes of the expected prefix, and what the next passes ask of the expected window
(minimize/speculate.py). Searching the suffix of the whole program at the same time
would parallelize better, but costs more calls at --jobs 1, and oracle calls are the
currency. Borrowed in spirit from torch.fx net_min_base's block
traverse and Polygraphy's `debug reduce`.
"""

from __future__ import annotations

from minimize.localize import first_off_position, named_failing_position
from minimize.passes.outputs import failing_output_cone
from minimize.problem import Candidate, ReductionProblem
from minimize.search import Search, gallop_first_true, guided_first_true, mapped

MIN_LEN = 4  # below this, delta debugging is as cheap


def _window_search(problem: ReductionProblem, cur: Candidate, guess: int | None) -> Search:
    """The minimal failing window of `cur`; guess: the prefix length localization expects."""
    norm = problem.program.normalize
    h = yield from mapped(guided_first_true(1, len(cur), guess), lambda h: norm(cur[:h]))
    region = norm(cur[:h])
    cone = failing_output_cone(problem, region)
    if cone and cone != region and (yield cone):
        region = cone
    w = yield from mapped(gallop_first_true(1, len(region)), lambda w: norm(region[-w:]))
    return norm(region[-w:])


def bisect_window(problem: ReductionProblem) -> None:
    cur = problem.current
    if len(cur) < MIN_LEN:
        return
    off = first_off_position(problem, cur)
    if off is None:
        off = named_failing_position(problem, cur)
    window = problem.run_search(lambda: _window_search(problem, cur, None if off is None else off + 1))
    if window and window != cur and problem.is_interesting(window):
        problem.accept(window)
