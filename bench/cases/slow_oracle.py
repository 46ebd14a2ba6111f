"""Slow-compile case: LayerNorm -> GELU fusion uses the sigmoid GELU approximation.

Planted miscompile (a fusion-pattern bug of the usual Torch-TensorRT kind): when a GELU
consumes a LayerNorm output directly, the fused LayerNorm+GELU kernel evaluates GELU as
``x * sigmoid(1.702 x)`` instead of the exact erf form (max error ~0.02). Only the
pre-logits head of this small ViT has LayerNorm -> GELU; the block MLPs (Linear -> GELU)
are unaffected.

The plugin sleeps COMPILE_SECONDS (1.0 s; TRTMIN_BENCH_COMPILE_SECONDS overrides it) per
compile to emulate a TensorRT engine build; the case exists to measure the speed-up of
evaluating candidates in parallel.

Core under cut-to-input: 2 nodes (layer_norm + gelu).
"""

from __future__ import annotations

import operator
import os
import time
from typing import Any, Callable

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.fx import GraphModule, Interpreter, Node

ORACLE = "mismatch"
MATCH = None
CORE = 2
COMPILE_SECONDS = float(os.environ.get("TRTMIN_BENCH_COMPILE_SECONDS", "1.0"))
# An engine build grows with the graph: TRTMIN_BENCH_SECONDS_PER_NODE more per call node (0 by default).
SECONDS_PER_NODE = float(os.environ.get("TRTMIN_BENCH_SECONDS_PER_NODE", "0"))

DIM, HEADS, DEPTH, PATCH = 32, 4, 11, 4
aten = torch.ops.aten


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(DIM), nn.LayerNorm(DIM)
        self.qkv, self.proj = nn.Linear(DIM, 3 * DIM), nn.Linear(DIM, DIM)
        self.fc1, self.fc2 = nn.Linear(DIM, 2 * DIM), nn.Linear(2 * DIM, DIM)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, _ = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(b, t, 3, HEADS, -1).permute(2, 0, 3, 1, 4).unbind(0)
        x = x + self.proj(F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(b, t, DIM))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


class TinyViT(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.patch = nn.Conv2d(3, DIM, PATCH, stride=PATCH)
        self.pos = nn.Parameter(torch.randn(1, 16, DIM) * 0.02)
        self.blocks = nn.Sequential(*(Block() for _ in range(DEPTH)))
        self.pre_logits = nn.Sequential(nn.LayerNorm(DIM), nn.GELU())
        self.head = nn.Linear(DIM, 10)

    def forward(self, img: torch.Tensor) -> torch.Tensor:  # [B, 3, 16, 16]
        x = self.blocks(self.patch(img).flatten(2).transpose(1, 2) + self.pos)
        return self.head(self.pre_logits(x.mean(1)))


def build() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    torch.manual_seed(0)
    model = TinyViT().eval()
    with torch.no_grad():  # trained-like scales: logits of a few units, LN gain 2
        model.pre_logits[0].weight.fill_(2.0)
        model.head.weight.mul_(3.0)
    return model, (torch.randn(2, 3, 16, 16),)


# ---------------------------------------------------------------- planted-bug plugin
def _is_layer_norm(n: Node) -> bool:
    if n.target is operator.getitem:
        n = n.args[0]
    return getattr(n.target, "overloadpacket", None) in (aten.layer_norm, aten.native_layer_norm)


class _FusedLnGeluInterpreter(Interpreter):
    def run_node(self, n: Node) -> Any:
        approximate = n.kwargs.get("approximate", n.args[1] if len(n.args) > 1 else "none")
        if n.target is aten.gelu.default and _is_layer_norm(n.args[0]) and approximate == "none":
            x = self.env[n.args[0]]
            return x * torch.sigmoid(1.702 * x)
        return super().run_node(n)


def backend(gm: GraphModule, example_inputs: list[torch.Tensor]) -> Callable[..., Any]:
    nodes = sum(n.op == "call_function" for n in gm.graph.nodes)
    time.sleep(COMPILE_SECONDS + SECONDS_PER_NODE * nodes)  # "engine build"
    return lambda *args: _FusedLnGeluInterpreter(gm).run(*args)
