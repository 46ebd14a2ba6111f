"""Float-to-integer casts of values the integer type cannot hold, in a program run eagerly.

C++ leaves such a cast undefined, and eager PyTorch's kernels inherit that: a compiler's
other answer to `(x * 200).to(torch.int8)` (eager 120, Inductor -128, a maintainer's hunt)
may be no bug at all. reduce says so beside a mismatch whose program has one, before a
user files it upstream.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import torch
from torch import fx

aten = torch.ops.aten


@dataclass(frozen=True)
class OutOfRangeCast:
    node: str              # the cast's node name
    source: torch.dtype    # the floating dtype cast from
    target: torch.dtype    # the integer dtype cast to
    low: float             # the smallest value cast, NaN aside
    high: float            # the largest
    nan: bool              # whether a NaN is cast too


def _integer_target(node: fx.Node) -> torch.dtype | None:
    """The integer dtype (not bool) a cast node casts to: _to_copy's keyword, to.dtype's
    argument; None for any other node."""
    if node.op != "call_function":
        return None
    if node.target is aten._to_copy.default:
        dtype = node.kwargs.get("dtype")
    elif node.target is aten.to.dtype:
        dtype = node.args[1] if len(node.args) > 1 else node.kwargs.get("dtype")
    else:
        return None
    integer = isinstance(dtype, torch.dtype) and not (dtype.is_floating_point or dtype.is_complex or dtype is torch.bool)
    return dtype if integer else None


def out_of_range_casts(gm: fx.GraphModule, inputs: Sequence[Any]) -> list[OutOfRangeCast]:
    """The casts of `gm` from a floating dtype to an integer one (not bool) whose input,
    run eagerly on `inputs`, holds a value outside the integer type's range, or NaN or inf."""
    casts = [(node, target) for node in gm.graph.nodes if (target := _integer_target(node)) is not None]
    if not casts:
        return []
    interpreter = fx.Interpreter(gm, garbage_collect_values=False)
    with torch.no_grad():
        interpreter.run(*inputs)
    found = []
    for node, target in casts:
        x = interpreter.env.get(node.args[0])
        if not isinstance(x, torch.Tensor) or not x.is_floating_point() or not x.numel():
            continue
        info, x64 = torch.iinfo(target), x.detach().double()
        if bool(((x64 < info.min) | (x64 > info.max) | ~x64.isfinite()).any()):
            numbers = x64[~x64.isnan()]
            low, high = (float(numbers.min()), float(numbers.max())) if numbers.numel() else (0.0, 0.0)
            found.append(OutOfRangeCast(node.name, x.dtype, target, low, high, bool(x64.isnan().any())))
    return found
