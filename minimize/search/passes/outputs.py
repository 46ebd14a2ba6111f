"""Keep one output: the backward cone of a single sink, dropping every other output."""

from __future__ import annotations

from typing import Sequence

from minimize.program.candidate import Nodes
from minimize.search.problem import ReductionProblem


def cone(problem: ReductionProblem, sink: int, within: Sequence[int] | None = None) -> Nodes:
    """The nodes of `within` (default: the current candidate) that `sink` depends on."""
    return problem.program.cone(sink, problem.current.nodes if within is None else within)


def keep_one_output(problem: ReductionProblem) -> None:
    while True:
        outs = problem.program.outputs_of(problem.current.nodes)
        if len(outs) < 2:
            return
        cands = [problem.at(c) for c in (cone(problem, o) for o in outs if problem.upstream_of_symptom(o))
                 if c and c != problem.current.nodes]  # another output's cone cannot show the bug
        i = problem.try_first(cands)
        if i is None:
            return
        problem.consider(cands[i])


def failing_output_cone(problem: ReductionProblem, cand: Nodes) -> Nodes | None:
    """The cone of the node whose value a failing verdict on `cand` names, or None."""
    sink = problem.failing_sink(problem.at(cand))
    return None if sink is None else cone(problem, sink, cand)
