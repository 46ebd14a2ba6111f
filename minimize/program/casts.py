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


def _target_dtype(node: fx.Node) -> torch.dtype | None:
    """The dtype a cast node casts to: _to_copy's keyword, to.dtype's argument."""
    if node.target is aten._to_copy.default:
        return node.kwargs.get("dtype")
    if node.target is aten.to.dtype:
        return node.args[1] if len(node.args) > 1 else node.kwargs.get("dtype")
    return None


def out_of_range_casts(gm: fx.GraphModule, inputs: Sequence[Any]) -> list[OutOfRangeCast]:
    """The casts of `gm` from a floating dtype to an integer one (not bool) whose input,
    run eagerly on `inputs`, holds a value outside the integer type's range, or NaN or inf."""
    casts = [n for n in gm.graph.nodes if n.op == "call_function" and isinstance(_target_dtype(n), torch.dtype)
             and not _target_dtype(n).is_floating_point and not _target_dtype(n).is_complex
             and _target_dtype(n) is not torch.bool]
    if not casts:
        return []
    interpreter = fx.Interpreter(gm, garbage_collect_values=False)
    with torch.no_grad():
        interpreter.run(*inputs)
    found = []
    for node in casts:
        x, target = interpreter.env.get(node.args[0]), _target_dtype(node)
        if not isinstance(x, torch.Tensor) or not x.is_floating_point() or not x.numel():
            continue
        info, x64 = torch.iinfo(target), x.detach().double()
        if bool(((x64 < info.min) | (x64 > info.max) | ~x64.isfinite()).any()):
            numbers = x64[~x64.isnan()]
            low, high = (float(numbers.min()), float(numbers.max())) if numbers.numel() else (0.0, 0.0)
            found.append(OutOfRangeCast(node.name, x.dtype, target, low, high, bool(x64.isnan().any())))
    return found
