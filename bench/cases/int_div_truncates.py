"""Integer true-division truncates inside the engine.

User-documented Torch-TensorRT miscompile: ``x.shape[0] / 2`` with x.shape[0] == 15 gives 7
in the engine instead of 7.5 -- an elementwise DIV whose operands are both integer runs as
an integer kernel and the result is cast to float afterwards, so PyTorch's true-division
semantics are lost.

Planted mechanism: aten.div.Tensor / aten.div.Scalar whose two operands are both integer
(int tensor or Python int) computes ``torch.div(a, b, rounding_mode="trunc")`` (then cast
to the float result dtype). Here a forecaster builds a normalized time feature
``torch.arange(L) / (L // 2) - 1`` with L = 15 (a float ``sum / count`` mean elsewhere in the
model is not affected).

Core under cut-to-input: 1 node (the div; the arange is fed as an int64 input).
"""

from __future__ import annotations

from typing import Any, Callable

import torch
import torch.nn as nn
from torch.fx import GraphModule, Interpreter, Node

ORACLE = "mismatch"
MATCH = None
CORE = 1

LOOKBACK, HORIZON, CHANNELS, HIDDEN = 15, 4, 3, 16
aten = torch.ops.aten


class Forecaster(nn.Module):
    """Conv1d encoder over [series, time feature] -> per-channel multi-step forecast."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv1d(CHANNELS + 1, HIDDEN, 3, padding=1)
        self.conv2 = nn.Conv1d(HIDDEN, HIDDEN, 3, padding=1)
        self.head = nn.Linear(HIDDEN * LOOKBACK, HORIZON * CHANNELS)

    def forward(self, series: torch.Tensor) -> torch.Tensor:  # [B, L, C]
        b, length, _ = series.shape
        level = series.sum(1, keepdim=True) / length  # float / int: fine
        x = series - level
        pos = torch.arange(length) / (length // 2) - 1.0  # int / int: planted trigger
        x = torch.cat([x, pos.view(1, length, 1).expand(b, length, 1)], dim=-1).transpose(1, 2)
        h = torch.relu(self.conv2(torch.relu(self.conv1(x))))
        out = self.head(h.flatten(1)).view(b, HORIZON, CHANNELS)
        return out + level


def build() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    torch.manual_seed(0)
    return Forecaster().eval(), (torch.randn(2, LOOKBACK, CHANNELS),)


# ---------------------------------------------------------------- planted-bug plugin
_DIV = (aten.div.Tensor, aten.div.Scalar)


def _is_int(x: Any) -> bool:
    if isinstance(x, torch.Tensor):
        return not (x.is_floating_point() or x.is_complex())
    return isinstance(x, int)


class _TruncDivInterpreter(Interpreter):
    def run_node(self, n: Node) -> Any:
        if n.op == "call_function" and n.target in _DIV:
            (a, b), _ = self.fetch_args_kwargs_from_env(n)
            if _is_int(a) and _is_int(b):
                a = a if isinstance(a, torch.Tensor) else torch.tensor(a)
                return torch.div(a, b, rounding_mode="trunc").to(torch.get_default_dtype())
        return super().run_node(n)


def backend(gm: GraphModule, example_inputs: list[torch.Tensor]) -> Callable[..., Any]:
    has_div = any(n.op == "call_function" and n.target in _DIV for n in gm.graph.nodes)
    interp = _TruncDivInterpreter if has_div else Interpreter
    return lambda *args: interp(gm).run(*args)
