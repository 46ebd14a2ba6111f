"""Smaller shapes: the sizes the bug does not need shrink, in the made tensors and the graph.

After generate_values, the script makes its large tensors with one line each, at the
user's shapes: a (1, 98, 8, 64) activation, a (4096, 4096) weight, and the graph says
`layer_norm(x, [4096])`. Most bugs need one size (a vector width, a block of 49, a softmax
dimension of 1) and not the others, and a maintainer reads `torch.randn((2, 2))` faster, and
a compiler builds it faster. A size is a number shared by every made tensor that has it and
every size argument of the graph that holds it (the 8 of a (5, 8) weight, a (4, 8) input
and a view to (4, 8) is one dimension), so each candidate changes one number everywhere at
once, and the graph stays consistent. Sizes also held by a tensor the script does not make
(a mask the bug needs) stay, as do 1 and 2; a small one written inline (a batch norm's 16
means) follows a made tensor's size, cut to its first values.

A size that is a product of others (the 512 of a (2, 98, 512) viewed as (2, 98, 8, 64))
follows them where it must: 8 and 64 to 2 take 512 to 4. Before any oracle call, the
candidate runs on fake tensors (no data, no device work), as mapped and then with such
products: a size the graph also fixes in a way this does not rewrite (an arange(98), a
dimension held by position) fails there, and costs nothing. The oracle then decides:
every size to 2 at once, else the largest few one at a time, each to 2. At most
1 + ONE_AT_A_TIME calls; none where no size can change. Before generate_values,
generate_small_values tries the made tensors with every size shrunk, in one call: where
that keeps the bug, both passes are done; where not, this pass's first try is that run.

The new sizes are the candidate's state (minimize/program/candidate.py): the made tensors'
expressions and the graph's size map, cached, journaled, resumed and speculated like
every run.
"""

from __future__ import annotations

import functools
import logging
import math
from typing import Mapping

import torch
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.fx.experimental.symbolic_shapes import ShapeEnv

from minimize.program.candidate import INLINE_MAX_ELEMENTS, Candidate
from minimize.program.inputs import is_row_major
from minimize.program.literals import tensor_literal
from minimize.search.passes.values import bounded, index_bound, made_expressions, reshaped
from minimize.search.problem import ReductionProblem
from minimize.program.model import Slice, size_arguments
from minimize.search.searches import EXPECTED_P

SHRUNK_TO = 2  # not 1: a size of 1 broadcasts and squeezes, which many compilers special-case
ONE_AT_A_TIME = 4
INDEXING_OPS = ("embedding", "index", "gather", "take", "scatter")  # in the op's name
MAX_TRIES = 16  # fake runs per candidate (milliseconds each): as mapped, then with products of its sizes


def _fits(problem: ReductionProblem, shapes: dict[str, tuple[int, ...]], sizes: dict[int, int]) -> bool:
    """Whether the current graph, its sizes mapped, runs on made tensors of these shapes, on
    fake tensors (once per candidate: speculation replays the pass)."""
    key = (problem.current.nodes, tuple(sorted(shapes.items())), tuple(sorted(sizes.items())))
    if key not in problem.shape_checks:
        prog = problem.program
        quiet = logging.getLogger("torch._subclasses.fake_tensor")  # logs a traceback per refusal
        level = quiet.level
        quiet.setLevel(logging.CRITICAL)
        try:
            # a ShapeEnv: an op whose output size is data-dependent (nonzero, x[mask]) gets
            # an unbacked size there, where without one every candidate would fail
            with FakeTensorMode(allow_non_fake_inputs=True, shape_env=ShapeEnv()):
                fakes = {n: torch.empty(s, dtype=prog.values[n].dtype, device=prog.values[n].device)
                         for n, s in shapes.items()}
                piece = prog.materialize(problem.current.nodes, replaced=fakes, sizes=sizes)
                # forward, not gm(): GraphModule.__call__ prints the generated code of a
                # failing line to stderr, the user's terminal (an unbind that now has 2 parts)
                piece.gm.forward(*prog.inputs_for(piece, fakes))
            problem.shape_checks[key] = True
        except Exception:  # noqa: BLE001 - any failure means these sizes do not fit the graph
            problem.shape_checks[key] = False
        finally:
            quiet.setLevel(level)
    return problem.shape_checks[key]


@functools.lru_cache(maxsize=64)  # speculation replays the pass: once per set of sizes
def _factorizations(present: tuple[int, ...]) -> dict[int, list[tuple[int, ...]]]:
    """Each size's ways to be a product of 2 or 3 others (by division: no cap on how many
    sizes), fewest factors first."""
    have = set(present)
    found: dict[int, list[tuple[int, ...]]] = {}
    for size in present:
        ways = [(a, size // a) for a in present if a * a <= size and size % a == 0 and size // a in have]
        ways += [(a, b, size // (a * b)) for i, a in enumerate(present) for b in present[i:]
                 if a * b * b <= size and size % (a * b) == 0 and size // (a * b) in have]
        if ways:
            found[size] = ways
    return found


def _products(size: int, present: tuple[int, ...], mapped: Mapping[int, int]) -> list[int]:
    """New values for `size` where it is a product of other sizes, at least one of them
    mapped: its factors' new sizes multiplied (512 = 8 * 64, with 64 -> 2: 16), without repeats."""
    found: list[int] = []
    for combo in _factorizations(present).get(size, []):
        if any(f in mapped for f in combo):
            new = math.prod(mapped.get(f, f) for f in combo)
            if new != size and new not in found:
                found.append(new)
    return found


def _in_bounds(expr: str, mapped: Mapping[int, int]) -> str:
    """Made indices (int64/int32 from 0 up) that fit a size being shrunk are kept below its
    new size: an embedding's ids below 50 index a table of 50 rows, shrunk to 2 rows, ids
    below 2 (from 0 where they started at 2 or more). Eager PyTorch would refuse the others
    (a CUDA one with a device-side assert). Where they index another, unshrunk dimension,
    they only take fewer values."""
    bound = index_bound(expr)
    if bound is None:
        return expr
    low, high = bound
    caps = [new for old, new in mapped.items() if old >= high]
    if not caps or min(caps) >= high:
        return expr
    return bounded(expr, low if low < min(caps) else 0, min(caps))


def sliceable(value: object) -> bool:
    """Whether a value is a tensor repro.py writes as a literal (at most INLINE_MAX_ELEMENTS
    real, finite values, row-major), which a shrunk size may cut to its first values (an
    inf or a NaN in a mask may be the bug's, and make() has no names for them)."""
    return (type(value) in (torch.Tensor, torch.nn.Parameter) and 0 < value.numel() <= INLINE_MAX_ELEMENTS
            and value.layout == torch.strided and not value.is_complex() and not value.is_quantized and value.dim() > 0
            and is_row_major(value) and bool(value.detach().isfinite().all()))


def _indices(piece: Slice) -> set[str]:
    """The inputs and weights an indexing op reads (embedding, index, gather, take, scatter):
    only these are kept inside a shrunk size; other integers (counts, pixel values) are data."""
    return {a.name for n in piece.gm.graph.nodes if n.op == "call_function"
            and any(op in str(n.target) for op in INDEXING_OPS) for a in n.all_input_nodes}


class _SizePlan:
    """Which sizes of a candidate (the current one's graph, its made tensors at the user's
    shapes) can shrink, and the candidates that shrink some of them: one construction, so
    that generate_small_values' try and shrink_shapes' first are the same run."""

    def __init__(self, problem: ReductionProblem, cand: Candidate) -> None:
        prog = problem.program
        self.problem, self.cand = problem, cand
        self.generated = dict(cand.made)
        piece = prog.materialize(cand.nodes)
        self.indices = _indices(piece)
        # small tensors repro.py writes as literals (a batch norm's 16 means) shrink as literals
        # of their first values with a made tensor's size (a 16-channel conv's weight): a size
        # they hold is not held. One only they hold stays (4 values shrunk to 2 is no gain)
        self.literals = {n: v for n in piece.input_names + piece.constant_names if n not in self.generated
                         and n not in self.indices and sliceable(v := prog.values[n])}
        self.held = {d for n in piece.input_names + piece.constant_names if n not in self.generated
                     and n not in self.literals and isinstance(v := prog.values[n], torch.Tensor) for d in v.shape}
        self.in_graph = {x for i in cand.nodes for _, value in size_arguments(prog.nodes[i])
                         for x in value if type(x) is int}
        in_tensors = {d for n in self.generated for d in prog.values[n].shape}  # literals follow these, never lead
        # a size a dynamic dim of a made tensor holds shrinks no lower than the dim's
        # torch.export.Dim min: below it, the user's program takes no such input, and the
        # script's export would widen the range without a word
        self.floor: dict[int, int] = {}
        for n in self.generated:
            for dim, (low, _) in prog.dynamic.get(n, {}).items():
                size = prog.values[n].shape[dim]
                self.floor[size] = max(self.floor.get(size, SHRUNK_TO), low)
        self.present = tuple(sorted(d for d in in_tensors | self.in_graph if d > 1))
        sizes = sorted({d for d in in_tensors | self.in_graph if d > self.target(d) and d not in self.held},
                       reverse=True)
        # A size the graph fixes (x * arange(120) of a made (120,)) fails alone on fake tensors:
        # left in, it would fail "all at once" for the others and take a turn of ONE_AT_A_TIME.
        # Some fit only with others (a 96x96 image to 2x2 under a 5x5 kernel, which must shrink
        # too): where every size shrunk at once fits, they stay, for that one try.
        self.alone = [d for d in sizes if self._fitting(self.shrunk([d])) is not None]  # the one-at-a-time turns
        together = len(self.alone) < len(sizes) and self._fitting(self.shrunk(sizes)) is not None
        self.sizes = sizes if together else self.alone  # the try of all at once

    def target(self, size: int) -> int:
        """What `size` shrinks to: SHRUNK_TO, or its dynamic dim's minimum."""
        return self.floor.get(size, SHRUNK_TO)

    def shrunk(self, sizes: list[int]) -> dict[int, int]:
        """Each of `sizes` mapped to what it shrinks to."""
        return {d: self.target(d) for d in sizes}

    def _shapes_for(self, mapped: dict[int, int]) -> dict[str, tuple[int, ...]]:
        return {n: tuple(mapped.get(d, d) for d in self.problem.program.values[n].shape)
                for n in [*self.generated, *self.literals]}

    def _fitting(self, mapped: dict[int, int]) -> dict[int, int] | None:
        """`mapped`, or else it with the sizes that are products of others following them
        (a view of (2, 98, 512) to (2, 98, 8, 64): 512 = 8 * 64 goes to 2 * 2 with them),
        whichever first runs on fake tensors; None when none does."""
        present = self.present
        options = {size: new for size in reversed(present) if size > self.target(size) and size not in mapped
                   and size not in self.held
                   if (new := [n for n in _products(size, present, mapped) if n >= self.target(size)])}
        # one product at a time first: 16 = 2 * 8 is a product too, but maybe not one to follow
        alone = [{**mapped, size: n} for size, new in options.items() for n in new]
        together = [{**mapped, **{size: new[min(i, len(new) - 1)] for size, new in options.items()}}
                    for i in range(max((len(new) for new in options.values()), default=0))]
        tries = ([mapped] + alone + (together if len(options) > 1 else []))[:MAX_TRIES]
        return next((full for full in tries if _fits(self.problem, self._shapes_for(full), full)), None)

    def trial(self, wanted: dict[int, int]) -> Candidate | None:
        """The candidate with the sizes in `wanted` shrunk (and the products that must follow
        them), or None where the graph cannot run so."""
        mapped = self._fitting(wanted)
        if mapped is None:
            return None
        prog, shapes = self.problem.program, self._shapes_for(mapped)
        exprs = {n: reshaped(e, tuple(prog.values[n].shape), shapes[n]) for n, e in self.generated.items()}
        exprs = {n: _in_bounds(e, mapped) if n in self.indices else e for n, e in exprs.items()}
        exprs |= {n: tensor_literal(v[tuple(slice(0, k) for k in shapes[n])]) for n, v in self.literals.items()
                  if shapes[n] != tuple(v.shape)}  # the first values along each shrunk dim
        return self.cand.but(made=exprs, sizes={d: t for d, t in mapped.items() if d in self.in_graph})


def generate_small_values(problem: ReductionProblem) -> None:
    """Generated values at every size shrunk, in one call, before generate_values and
    shrink_shapes try each part: most bugs need neither the values nor most sizes, and
    those two tries were two dependent calls where one does. Where this loses the bug, the
    two passes run as before, and shrink_shapes' first try is this run, already answered."""
    if not problem.rules.generate_values or problem.current.made:
        return
    exprs = made_expressions(problem)
    if not exprs:
        return
    plan = _SizePlan(problem, problem.current.but(made=exprs))
    trial = plan.trial(plan.shrunk(plan.sizes)) if plan.sizes else None
    if trial is not None and problem.is_interesting(trial, EXPECTED_P):
        problem.consider(trial)


def shrink_shapes(problem: ReductionProblem) -> None:
    """Shrink the sizes the bug does not need, in the generated tensors and the graph's size
    arguments: all at once, else the largest ONE_AT_A_TIME one at a time."""
    if not problem.rules.generate_values or problem.current.sizes is not None:
        return  # nothing made, or shrunk with the values already (generate_small_values)
    plan, done = _SizePlan(problem, problem.current), {}

    def keeps_failing(more: dict[int, int], p_true: float = 0.5) -> bool:
        trial = plan.trial({**done, **more})
        if trial is None or not problem.is_interesting(trial, p_true):
            return False
        problem.consider(trial)
        done.update(more)
        return True

    sizes = plan.sizes
    if not sizes or keeps_failing(plan.shrunk(sizes), EXPECTED_P) or len(sizes) == 1:
        return
    for d in plan.alone[:ONE_AT_A_TIME]:  # not those that fit only with others: no turn spent on them
        keeps_failing(plan.shrunk([d]))
