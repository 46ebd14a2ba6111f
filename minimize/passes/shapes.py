"""Smaller shapes: the generated tensors shrink where the bug does not need their sizes.

After generate_values, the script makes its large tensors with one line each, at the
user's shapes: a (1, 98, 8, 64) activation, a (4096, 4096) weight. Most bugs need one
size (a vector width, a block of 49, a softmax dimension of 1) and not the others, and a
maintainer reads `torch.randn((2, 2))` faster, and a compiler builds it faster. A size
is a number shared by every generated tensor that has it (the 8 in (5, 8) and (8, 3) is
one matmul dimension), so each candidate changes one number everywhere at once, and the
graph stays consistent. Sizes also held by a tensor the script does not make (a mask the
bug needs, a small inline one) stay, as do 1 and 2.

Before any oracle call, the candidate runs on fake tensors (no data, no device work):
a graph that fixes a size in its own arguments (a view to (98, 64), an arange(98)) fails
there, and costs nothing. The oracle then decides: every size to 2 at once, else the
largest few one at a time, each to 2. At most 1 + ONE_AT_A_TIME calls; none where no
size can change.

The new shapes are only the expressions' text (the `trtmin.generated` pseudo-setting), so
they are cached, journaled, resumed and speculated like generate_values' runs.
"""

from __future__ import annotations

from typing import Mapping

import torch
from torch._subclasses.fake_tensor import FakeTensorMode

from minimize.passes.values import generated_of, reshaped, with_generated
from minimize.problem import ReductionProblem

SHRUNK_TO = 2  # not 1: a size of 1 broadcasts and squeezes, which many compilers special-case
ONE_AT_A_TIME = 4


def _shapes(problem: ReductionProblem, sizes: Mapping[int, int]) -> dict[str, tuple[int, ...]]:
    """The generated tensors' shapes with `sizes` replaced."""
    return {name: tuple(sizes.get(d, d) for d in problem.program.values[name].shape)
            for name in generated_of(problem.settings)}


def _fits(problem: ReductionProblem, shapes: dict[str, tuple[int, ...]]) -> bool:
    """Whether the current graph runs on tensors of these shapes, on fake tensors (once per
    shape set: speculation replays the pass)."""
    key = (problem.current, tuple(sorted(shapes.items())))
    if key not in problem.shape_checks:
        prog = problem.program
        try:
            with FakeTensorMode(allow_non_fake_inputs=True):
                fakes = {n: torch.empty(s, dtype=prog.values[n].dtype, device=prog.values[n].device)
                         for n, s in shapes.items()}
                piece = prog.materialize(problem.current, replaced=fakes)
                piece.gm(*prog.inputs_for(piece, fakes))
            problem.shape_checks[key] = True
        except Exception:  # noqa: BLE001 - any failure means these shapes do not fit the graph
            problem.shape_checks[key] = False
    return problem.shape_checks[key]


def shrink_shapes(problem: ReductionProblem) -> None:
    """Shrink the sizes of the generated tensors that the bug does not need: all at once,
    else the largest ONE_AT_A_TIME one at a time."""
    if not problem.generate_values:
        return
    prog = problem.program
    generated = generated_of(problem.settings)
    if not generated:
        return
    piece = prog.materialize(problem.current)
    held = {d for n in piece.input_names + piece.constant_names if n not in generated
            and isinstance(v := prog.values[n], torch.Tensor) for d in v.shape}
    sizes = sorted({d for n in generated for d in prog.values[n].shape if d > SHRUNK_TO and d not in held},
                   reverse=True)
    done: dict[int, int] = {}

    def keeps_failing(more: dict[int, int]) -> bool:
        shapes = _shapes(problem, {**done, **more})
        if not _fits(problem, shapes):
            return False
        exprs = {n: reshaped(e, tuple(prog.values[n].shape), shapes[n]) for n, e in generated.items()}
        trial = with_generated(problem.settings, exprs)
        if not problem.is_interesting(problem.current, trial):
            return False
        problem.settings = trial
        problem.counters.accepted += 1
        done.update(more)
        return True

    if not sizes or keeps_failing({d: SHRUNK_TO for d in sizes}) or len(sizes) == 1:
        return
    for d in sizes[:ONE_AT_A_TIME]:
        keeps_failing({d: SHRUNK_TO})
