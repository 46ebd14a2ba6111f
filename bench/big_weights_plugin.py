"""The planted compiler of bench/big_weights.py: no converter for tanh."""

from __future__ import annotations

from typing import Any, Callable

import torch
from torch.fx import GraphModule


def crash_on_tanh(gm: GraphModule, example_inputs: list[torch.Tensor]) -> Callable[..., Any]:
    if any(n.op == "call_function" and n.target == torch.ops.aten.tanh.default for n in gm.graph.nodes):
        raise RuntimeError("planted: no converter for tanh")
    return gm.forward
