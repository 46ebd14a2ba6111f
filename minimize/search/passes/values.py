"""Generated values: the script makes its tensors instead of loading them from a file.

Once the graph is minimal, its inputs and weights still carry the user's values, and those
too large to write inline go to repro_inputs.pt beside the script: at a 3B-parameter
model, a kept linear layer alone is 64 MB, more than an issue tracker takes. Most bugs do
not need those exact values. This pass tries seeded random tensors of the same shape,
dtype and scale (floats and complex numbers: the mean and standard deviation; integers:
the range; booleans: the share of True): all of them at once, then the floating-point
ones together, then the largest few one at a time, and keeps what still fails the same way. The script then makes them with one line each
(`torch.randn(...)`), and the file shrinks or goes.

The expressions are the candidate's state (minimize/program/candidate.py): cached, journaled and
speculated as any run is, and the worker evaluates the same text that repro.py holds.
"""

from __future__ import annotations

import math
import re
from typing import Any

import torch

from minimize.program.candidate import INLINE_MAX_ELEMENTS, make
from minimize.search.problem import ReductionProblem
from minimize.search.searches import EXPECTED_P

ONE_AT_A_TIME = 3  # where all at once loses the bug: the largest tensors, each alone
MAX_NON_FINITE = 8  # a tensor with at most these NaN or inf (and most values finite) is made too
_FLOATS = (torch.float16, torch.bfloat16, torch.float32, torch.float64)
_COMPLEX = (torch.complex64, torch.complex128)


def _number(x: float, digits: int = 4) -> str:
    return repr(float(f"{x:.{digits}g}"))


def expression(value: Any, seed: int) -> str | None:
    """Python source that makes a tensor like `value` on the CPU (needs only torch), or
    None where a tensor is small enough to write out, or none can stand in for it."""
    if type(value) not in (torch.Tensor, torch.nn.Parameter):
        return None  # not a tensor, or a subclass (torchao's quantized weights): randn makes no such thing
    # complex tensors of any size: the script cannot write them inline, they go to the file
    inline = value.numel() <= INLINE_MAX_ELEMENTS and not value.is_complex()
    if inline or value.numel() == 0 or value.is_sparse or value.is_quantized:
        return None
    v, shape, dtype = value.detach(), tuple(value.shape), str(value.dtype)
    gen = f"generator=torch.Generator().manual_seed({seed})"
    if value.dtype in _FLOATS:
        return _float_expression(v, shape, dtype, gen)
    if value.dtype in _COMPLEX:
        return _complex_expression(v, shape, dtype, gen)
    if value.dtype == torch.bool:
        return _bool_expression(v, shape, gen)
    if not value.dtype.is_floating_point:
        return _integer_expression(v, shape, dtype, gen)
    return None  # float8: left as it is


def _mean_digits(mean: complex, std: float) -> int:
    """The mean to a thousandth of the spread, not to 4 digits of itself: 1000.15 ± 0.03 is
    not 1000.0 ± 0.03."""
    return min(17, 4 + max(0, math.ceil(math.log10(abs(mean) / std)))) if mean else 4


def _scaled(mean: float, std: float) -> str:
    """randn's `.mul(std).add(mean)`, less what does nothing at the digits written: a mean
    under a thousandth of the spread (a layer_norm's 5.5e-10 is rounding noise), a spread
    that rounds to 1."""
    return ((f".mul({_number(std)})" if _number(std) != "1.0" else "")
            + (f".add({_number(mean, _mean_digits(mean, std))})" if abs(mean) >= std / 1000 else ""))


def _float_expression(v: torch.Tensor, shape: tuple[int, ...], dtype: str, gen: str,
                      top: float | None = None) -> str | None:
    """`top`: the largest value the tensor's own dtype holds (randn's tails clamp there)."""
    v64 = v.double()
    odd = v64[~torch.isfinite(v64)]  # a NaN or an inf in the input may be the bug's trigger
    if odd.numel():
        if odd.numel() > MAX_NON_FINITE or 2 * odd.numel() > v.numel():
            return None
        finite = torch.where(torch.isfinite(v64), v64, v64[torch.isfinite(v64)].mean())
        made = _float_expression(finite, shape, "torch.float64", gen, torch.finfo(v.dtype).max)  # the finite's spread
        if made is None:
            return None
        # the same count of each, first in memory order: an op that drops a NaN drops it
        # anywhere; where the bug needs its place, the oracle says so and the values stay
        words = ", ".join(f"float({str(float(x))!r})" for x in odd.tolist())
        made = f"{made}.put_(torch.arange({odd.numel()}), torch.tensor([{words}], dtype=torch.float64))"
        return made if v.dtype == torch.float64 else f"{made}.to({dtype})"
    mean, std = float(v64.mean()), float(v64.std()) if v.numel() > 1 else 0.0
    if not all(math.isfinite(float(_number(x))) for x in (mean, std)):
        return None  # float64 beyond 1e154 overflows the variance, near 1.8e308 the rounding: "inf"
    if std == 0.0:  # its one value, exactly (a scale of 1/sqrt(128) is not 0.08839)
        return f"torch.full({shape!r}, {float(v64.reshape(-1)[0])!r}, dtype={dtype})"
    scaled = _scaled(mean, std)
    top = torch.finfo(v.dtype).max if top is None else top
    if abs(mean) + 10 * std > top:  # randn's tails past the dtype's range: an inf the original has not
        scaled += f".clamp({-top!r}, {top!r})"
    # Made in float64, then cast: float32's randn differs by CPU (x86's AVX2 kernel against
    # the default one, ARM's: 4 values in 10, in the last bits), float64's does not; and
    # in float32, 1.7e9 ± 100 would be in steps of 128.
    made = f"torch.randn({shape!r}, {gen}, dtype=torch.float64){scaled}"
    return made if v.dtype == torch.float64 else f"{made}.to({dtype})"


def _complex_expression(v: torch.Tensor, shape: tuple[int, ...], dtype: str, gen: str) -> str | None:
    """A complex tensor (RoPE's rotations) of the same mean and spread; made in complex128,
    whose randn is the same on every CPU kernel, then cast."""
    c = v.to(torch.complex128)
    if not bool(torch.isfinite(c).all()):
        return None
    mean, std = complex(c.mean()), float(c.std()) if c.numel() > 1 else 0.0
    if not all(math.isfinite(float(_number(x, 17))) for x in (mean.real, mean.imag, std)):
        return None
    if std == 0.0:
        return f"torch.full({shape!r}, complex({mean.real!r}, {mean.imag!r}), dtype={dtype})"
    digits = _mean_digits(mean, std)
    made = (f"torch.randn({shape!r}, {gen}, dtype=torch.complex128).mul({_number(std)})"
            f".add(complex({_number(mean.real, digits)}, {_number(mean.imag, digits)}))")
    return made if dtype == "torch.complex128" else f"{made}.to({dtype})"


def _bool_expression(v: torch.Tensor, shape: tuple[int, ...], gen: str) -> str:
    share = float(v.double().mean())
    if share in (0.0, 1.0):
        return f"torch.full({shape!r}, {share == 1.0}, dtype=torch.bool)"
    rounded = _number(share)
    if float(rounded) in (0.0, 1.0):  # 0.99996 to 4 digits is 1.0: every value True
        rounded = repr(share)
    return f"torch.rand({shape!r}, {gen}) < {rounded}"


def _integer_expression(v: torch.Tensor, shape: tuple[int, ...], dtype: str, gen: str) -> str | None:
    wide = v.to(torch.int64)  # min and max are not implemented for uint16, uint32 and uint64
    low, high = int(wide.min()), int(wide.max())
    if max(abs(low), abs(high)) >= 2**62 or (low < 0 and not v.dtype.is_signed):
        return None  # randint's bound would overflow (a uint64 above int64's range reads negative)
    if low == high:
        return f"torch.full({shape!r}, {low}, dtype={dtype})"
    return f"torch.randint({low}, {high + 1}, {shape!r}, {gen}, dtype={dtype})"


_PUT = re.compile(r"\.put_\(torch\.arange\((\d+)\), torch\.tensor\(\[([^\]]*)\], dtype=torch\.float64\)\)")


def reshaped(expr: str, old: tuple[int, ...], new: tuple[int, ...]) -> str:
    """An expression of `expression` that makes a tensor of shape `new` in place of `old`
    (minimize/search/passes/shapes.py): each form holds its shape once, as the first tuple that
    repr writes (randint's bounds before it are two numbers, not a tuple). Its NaN and inf
    (`.put_`) stay as many as the new size holds: past it, put_ raised in the worker."""
    if repr(old) not in expr:
        raise ValueError(f"no shape {old!r} in {expr!r}")
    made = expr.replace(repr(old), repr(new), 1)
    put, size = _PUT.search(made), math.prod(new)
    if put and int(put[1]) > size:
        words = put[2].split(", ")[:size]
        made = made.replace(put[0], f".put_(torch.arange({size}), torch.tensor([{', '.join(words)}], "
                                    "dtype=torch.float64))" if words else "", 1)
    return made


_INDICES = re.compile(r"torch\.randint\((\d+), (\d+), (.*), dtype=torch\.(int64|int32)\)")


def index_bound(expr: str) -> tuple[int, int] | None:
    """(low, high) of an expression that makes int64 or int32 values in [low, high) from 0
    up, the dtypes of indices (minimize/search/passes/shapes.py keeps them inside a shrunk table);
    None for any other."""
    m = _INDICES.fullmatch(expr)
    return (int(m[1]), int(m[2])) if m else None


def bounded(expr: str, low: int, high: int) -> str:
    """An index expression (index_bound) with its values in [low, high)."""
    m = _INDICES.fullmatch(expr)
    assert m is not None and 0 <= low < high, expr
    return f"torch.randint({low}, {high}, {m[3]}, dtype=torch.{m[4]})"


def _expression_of(problem: ReductionProblem, name: str, seed: int) -> str | None:
    """expression() of a value, once per run (speculation replays the pass), and None where
    it fails: an optional last step must not end a reduction whose every call is made."""
    key = (name, seed)
    if key not in problem.value_expressions:
        try:
            expr = expression(problem.program.values[name], seed)
            if expr is not None:
                make(expr)  # the text must run where the workers and repro.py run it
        except Exception:  # noqa: BLE001 - a dtype or layout nobody foresaw: keep its values
            expr = None
        problem.value_expressions[key] = expr
    return problem.value_expressions[key]


def made_expressions(problem: ReductionProblem) -> dict[str, str]:
    """An expression for each of the current graph's inputs and weights that one can make,
    in the graph's order, each seeded by its position."""
    piece = problem.program.materialize(problem.current.nodes)
    names = piece.input_names + piece.constant_names
    return {n: e for seed, n in enumerate(names) if (e := _expression_of(problem, n, seed)) is not None}


def generate_values(problem: ReductionProblem) -> None:
    """Replace the minimal graph's large inputs and weights with generated ones where the
    bug survives it: all at once; else the floating-point ones together (masks and indices
    are often the bug's structure, activations and weights rarely); else the largest of
    those one at a time. 1 call, at most 2 + ONE_AT_A_TIME; none when nothing is large."""
    if not problem.rules.generate_values or problem.current.made:
        return  # off, or made already, at smaller sizes (minimize/search/passes/shapes.py generate_small_values)
    prog = problem.program
    exprs = made_expressions(problem)
    names = list(exprs)
    floats = {n: e for n, e in exprs.items() if prog.values[n].dtype in _FLOATS}

    def keeps_failing(more: dict[str, str], p_true: float = 0.5) -> bool:
        trial = problem.current.but(made={**dict(problem.current.made), **more})
        return problem.is_interesting(trial, p_true) and problem.consider(trial)

    if not exprs or keeps_failing(exprs, EXPECTED_P):  # most bugs are in the graph, not its values
        return
    if 0 < len(floats) < len(exprs) and keeps_failing(floats):
        return
    if len(floats) > 1:
        for name in sorted(floats, key=lambda n: (-prog.values[n].numel(), names.index(n)))[:ONE_AT_A_TIME]:
            keeps_failing({name: floats[name]})
