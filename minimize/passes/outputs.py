"""Keep one output: the backward cone of a single sink, dropping every other output."""

from __future__ import annotations

from typing import Sequence

from minimize.problem import Candidate, ReductionProblem


def cone(problem: ReductionProblem, sink: int, within: Sequence[int] | None = None) -> Candidate:
    """The nodes of `within` (default: the current candidate) that `sink` depends on."""
    prog = problem.program
    keep = set(problem.current if within is None else within)
    seen = {sink}
    stack = [sink]
    while stack:
        node = prog.nodes[stack.pop()]
        for dep in node.all_input_nodes:
            i = prog.index.get(dep.name)
            if i is not None and i in keep and i not in seen:
                seen.add(i)
                stack.append(i)
    return prog.normalize(seen)


def keep_one_output(problem: ReductionProblem) -> None:
    while True:
        outs = problem.program.outputs_of(problem.current)
        if len(outs) < 2:
            return
        cands = [c for c in (cone(problem, o) for o in outs) if c and c != problem.current]
        i = problem.try_first(cands)
        if i is None:
            return
        problem.accept(cands[i])


def failing_output_cone(problem: ReductionProblem, cand: Candidate) -> Candidate | None:
    """The cone of the output a mismatch or NaN verdict on `cand` names (the verdict
    counts flattened tensors; a node may return several), or None if it names none.
    A replay that only hypothesizes that `cand` fails (minimize/speculate.py) guesses
    the cone of its last node: where a localized prefix ends, the value seen off."""
    verdict = problem.known_verdict(cand)
    if verdict is None and problem.hypotheses is not None and cand and cand[-1] in problem.program.outputs_of(cand):
        return cone(problem, cand[-1], cand)
    if verdict is None or verdict.output is None:
        return None
    prog = problem.program
    leaves = prog.leaf_nodes([prog.nodes[sink].name for sink in prog.outputs_of(cand)])
    return cone(problem, leaves[verdict.output], cand) if verdict.output < len(leaves) else None
