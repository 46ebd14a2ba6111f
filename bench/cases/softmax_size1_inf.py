"""Softmax over a size-1 dimension followed by a matmul returns +inf.

User-documented Torch-TensorRT miscompile: a softmax reduced over an axis of extent 1 (all
ones in PyTorch) that feeds a matrix multiply is fused by the engine into a kernel that
produces +inf for the whole product (the fused normalizer's reduction over a degenerate
axis divides by zero).

Host: Slot Attention (Locatello et al. 2020) with a single slot, as used for single-object
scenes. Slot Attention normalizes attention over the *slot* axis (softmax(dim=1)), which has
size 1 here, and the attention weights then feed ``attn @ v``.

Planted mechanism: an aten softmax whose reduced dim has size 1 and whose output reaches a
matmul-family op (mm/bmm/matmul/linear/addmm/baddbmm/einsum), directly or through view-like
ops, makes that matmul return +inf.

Core under cut-to-input: 2 nodes (softmax + matmul); the logits and v are fed as inputs.
"""

from __future__ import annotations

from typing import Any, Callable

import torch
import torch.nn as nn
from torch.fx import GraphModule, Interpreter, Node

ORACLE = "nan"  # +inf where eager is finite: trtmin's nan oracle covers every non-finite value
MATCH = None
CORE = 2

SLOTS, DIM, ITERS = 1, 16, 3
aten = torch.ops.aten
_SOFTMAX = {aten.softmax, aten._softmax, aten._safe_softmax}
_MATMUL = {aten.mm, aten.bmm, aten.matmul, aten.linear, aten.addmm, aten.baddbmm, aten.einsum}
_VIEWS = {aten.view, aten.reshape, aten._unsafe_view, aten.expand, aten.unsqueeze, aten.squeeze,
          aten.transpose, aten.permute, aten.t, aten.clone, aten.contiguous}


class SlotAttention(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.slots_init = nn.Parameter(torch.randn(1, SLOTS, DIM))
        self.norm_in, self.norm_slots, self.norm_mlp = nn.LayerNorm(DIM), nn.LayerNorm(DIM), nn.LayerNorm(DIM)
        self.q, self.k, self.v = (nn.Linear(DIM, DIM, bias=False) for _ in range(3))
        self.update = nn.Linear(2 * DIM, DIM)
        self.mlp = nn.Sequential(nn.Linear(DIM, 2 * DIM), nn.ReLU(), nn.Linear(2 * DIM, DIM))

    def forward(self, feats: torch.Tensor) -> torch.Tensor:  # [B, N, D]
        x = self.norm_in(feats)
        k, v = self.k(x), self.v(x)
        slots = self.slots_init.expand(feats.shape[0], -1, -1)
        for _ in range(ITERS):
            q = self.q(self.norm_slots(slots))
            attn = torch.softmax(q @ k.transpose(1, 2) * DIM**-0.5, dim=1)  # over slots (size 1)
            updates = attn @ v / feats.shape[1]
            slots = self.update(torch.cat([slots, updates], -1))
            slots = slots + self.mlp(self.norm_mlp(slots))
        return slots


class ObjectEncoder(nn.Module):
    """Image -> CNN feature map with position embedding -> single-slot Slot Attention."""

    def __init__(self) -> None:
        super().__init__()
        self.cnn = nn.Sequential(nn.Conv2d(3, DIM, 5, padding=2), nn.ReLU(), nn.Conv2d(DIM, DIM, 5, padding=2))
        self.pos = nn.Parameter(torch.randn(1, 64, DIM) * 0.1)
        self.slot_attn = SlotAttention()
        self.head = nn.Linear(DIM, 6)  # e.g. object position + size

    def forward(self, img: torch.Tensor) -> torch.Tensor:  # [B, 3, 8, 8]
        feats = self.cnn(img).flatten(2).transpose(1, 2) + self.pos
        return self.head(self.slot_attn(feats))


def build() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    torch.manual_seed(0)
    return ObjectEncoder().eval(), (torch.randn(2, 3, 8, 8),)


# ---------------------------------------------------------------- planted-bug plugin
def _packet(n: Node) -> Any:
    return getattr(n.target, "overloadpacket", None) if n.op == "call_function" else None


def _softmax_sources(n: Node) -> list[Node]:
    """Softmax nodes whose output reaches n's operands through view-like ops only."""
    out, stack = [], list(n.all_input_nodes)
    while stack:
        a = stack.pop()
        if _packet(a) in _SOFTMAX:
            out.append(a)
        elif _packet(a) in _VIEWS:
            stack.extend(a.all_input_nodes[:1])
    return out


class _InfMatmulInterpreter(Interpreter):
    def __init__(self, gm: GraphModule, fed_by: dict[Node, list[Node]]) -> None:
        super().__init__(gm)
        self.fed_by, self.degenerate = fed_by, set()

    def run_node(self, n: Node) -> Any:
        out = super().run_node(n)
        if _packet(n) in _SOFTMAX:
            x, dim = self.env[n.args[0]], n.args[1]
            if x.shape[dim] == 1:
                self.degenerate.add(n)
        if any(s in self.degenerate for s in self.fed_by.get(n, ())):
            out = torch.full_like(out, float("inf"))
        return out


def backend(gm: GraphModule, example_inputs: list[torch.Tensor]) -> Callable[..., Any]:
    fed_by = {n: s for n in gm.graph.nodes if _packet(n) in _MATMUL and (s := _softmax_sources(n))}
    return lambda *args: _InfMatmulInterpreter(gm, fed_by).run(*args)
