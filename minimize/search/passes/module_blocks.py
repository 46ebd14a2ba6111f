"""Delete whole nn.Module blocks (a layer, an attention, an MLP) before single nodes."""

from __future__ import annotations

from minimize.search.problem import ReductionProblem


def _groups(problem: ReductionProblem, depth: int) -> list[tuple[int, ...]]:
    by_path: dict[str, list[int]] = {}
    for i in problem.current.nodes:
        path = problem.program.module_path(i)
        if len(path) >= depth:
            by_path.setdefault(path[depth - 1], []).append(i)
    # Fixed order: by first node; blocks holding everything are no deletion.
    return sorted((tuple(v) for v in by_path.values() if len(v) < len(problem.current.nodes)), key=lambda g: g[0])


def delete_module_blocks(problem: ReductionProblem) -> None:
    max_depth = max((len(problem.program.module_path(i)) for i in problem.current.nodes), default=0)
    for depth in range(1, max_depth + 1):
        while True:
            groups = _groups(problem, depth)
            if len(groups) < 2:
                break
            cands = []
            for g in groups:
                drop = set(g)
                c = problem.program.normalize(i for i in problem.current.nodes if i not in drop)
                if c and c != problem.current.nodes:
                    cands.append(problem.at(c))
            i = problem.try_first(cands)
            if i is None:
                break
            problem.consider(cands[i])
