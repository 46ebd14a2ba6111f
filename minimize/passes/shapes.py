"""Smaller shapes: the sizes the bug does not need shrink, in the made tensors and the graph.

After generate_values, the script makes its large tensors with one line each, at the
user's shapes: a (1, 98, 8, 64) activation, a (4096, 4096) weight, and the graph says
`layer_norm(x, [4096])`. Most bugs need one size (a vector width, a block of 49, a softmax
dimension of 1) and not the others, and a maintainer reads `torch.randn((2, 2))` faster, and
a compiler builds it faster. A size is a number shared by every made tensor that has it and
every size argument of the graph that holds it (the 8 of a (5, 8) weight, a (4, 8) input
and a view to (4, 8) is one dimension), so each candidate changes one number everywhere at
once, and the graph stays consistent. Sizes also held by a tensor the script does not make
(a mask the bug needs, a small inline one) stay, as do 1 and 2.

Before any oracle call, the candidate runs on fake tensors (no data, no device work): a
size the graph also fixes in a way this does not rewrite (an arange(98), a view to 98 * 64,
a dimension held by position) fails there, and costs nothing. The oracle then decides:
every size to 2 at once, else the largest few one at a time, each to 2. At most
1 + ONE_AT_A_TIME calls; none where no size can change.

The new sizes are the candidate's state, as pseudo-settings: the made tensors' expressions
(`trtmin.generated`) and the graph's size map (`trtmin.sizes`), so they are cached,
journaled, resumed and speculated like every run.
"""

from __future__ import annotations

import json
from typing import Mapping

import torch
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.fx.experimental.symbolic_shapes import ShapeEnv

from minimize.passes.values import bounded, generated_of, index_bound, reshaped, with_generated
from minimize.problem import ReductionProblem, Settings
from minimize.program import size_arguments

SIZES = "trtmin.sizes"  # pseudo-setting: JSON {size: smaller size} for the graph's size arguments
SHRUNK_TO = 2  # not 1: a size of 1 broadcasts and squeezes, which many compilers special-case
ONE_AT_A_TIME = 4


def sizes_of(settings: Settings) -> dict[int, int]:
    """The size map a run's settings carry ({} for none)."""
    return next(({int(k): v for k, v in json.loads(v).items()} for k, v in settings if k == SIZES), {})


def split_sizes(settings: Settings) -> tuple[Settings, dict[int, int]]:
    """The other settings, and the size map."""
    return tuple(kv for kv in settings if kv[0] != SIZES), sizes_of(settings)


def with_sizes(settings: Settings, sizes: Mapping[int, int]) -> Settings:
    rest = tuple(kv for kv in settings if kv[0] != SIZES)
    text = json.dumps({str(k): v for k, v in sorted(sizes.items())})
    return tuple(sorted(rest + ((SIZES, text),))) if sizes else rest


def _fits(problem: ReductionProblem, shapes: dict[str, tuple[int, ...]], sizes: dict[int, int]) -> bool:
    """Whether the current graph, its sizes mapped, runs on made tensors of these shapes, on
    fake tensors (once per candidate: speculation replays the pass)."""
    key = (problem.current, tuple(sorted(shapes.items())), tuple(sorted(sizes.items())))
    if key not in problem.shape_checks:
        prog = problem.program
        try:
            # a ShapeEnv: an op whose output size is data-dependent (nonzero, x[mask]) gets
            # an unbacked size there, where without one every candidate would fail
            with FakeTensorMode(allow_non_fake_inputs=True, shape_env=ShapeEnv()):
                fakes = {n: torch.empty(s, dtype=prog.values[n].dtype, device=prog.values[n].device)
                         for n, s in shapes.items()}
                piece = prog.materialize(problem.current, replaced=fakes, sizes=sizes)
                piece.gm(*prog.inputs_for(piece, fakes))
            problem.shape_checks[key] = True
        except Exception:  # noqa: BLE001 - any failure means these sizes do not fit the graph
            problem.shape_checks[key] = False
    return problem.shape_checks[key]


def _in_bounds(expr: str, mapped: Mapping[int, int]) -> str:
    """Made indices (int64/int32 from 0 up) that fit a size being shrunk are kept below its
    new size: an embedding's ids below 50 index a table of 50 rows, shrunk to 2 rows, ids
    below 2. Eager PyTorch would refuse the others (a CUDA one with a device-side assert).
    Where they index another, unshrunk dimension, they only take fewer values."""
    bound = index_bound(expr)
    if bound is None:
        return expr
    low, high = bound
    caps = [new for old, new in mapped.items() if old >= high and new > low]
    return bounded(expr, min(caps)) if caps and min(caps) < high else expr


def shrink_shapes(problem: ReductionProblem) -> None:
    """Shrink the sizes the bug does not need, in the generated tensors and the graph's size
    arguments: all at once, else the largest ONE_AT_A_TIME one at a time."""
    if not problem.generate_values:
        return
    prog = problem.program
    generated = generated_of(problem.settings)
    piece = prog.materialize(problem.current)
    held = {d for n in piece.input_names + piece.constant_names if n not in generated
            and isinstance(v := prog.values[n], torch.Tensor) for d in v.shape}
    in_graph = {x for i in problem.current for _, value in size_arguments(prog.nodes[i])
                for x in value if type(x) is int}
    in_tensors = {d for n in generated for d in prog.values[n].shape}
    sizes = sorted({d for d in in_tensors | in_graph if d > SHRUNK_TO and d not in held}, reverse=True)
    done: dict[int, int] = {}

    def shapes_for(mapped: dict[int, int]) -> dict[str, tuple[int, ...]]:
        return {n: tuple(mapped.get(d, d) for d in prog.values[n].shape) for n in generated}

    # A size the graph fixes (a view to 120 of a made (120,)) fails alone on fake tensors:
    # left in, it would fail "all at once" for the others and take a turn of ONE_AT_A_TIME.
    sizes = [d for d in sizes if _fits(problem, shapes_for({d: SHRUNK_TO}), {d: SHRUNK_TO})]

    def keeps_failing(more: dict[int, int]) -> bool:
        mapped = {**done, **more}
        shapes = shapes_for(mapped)
        if not _fits(problem, shapes, mapped):
            return False
        exprs = {n: _in_bounds(reshaped(e, tuple(prog.values[n].shape), shapes[n]), mapped)
                 for n, e in generated.items()}
        trial = with_sizes(with_generated(problem.settings, exprs), {d: t for d, t in mapped.items() if d in in_graph})
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
