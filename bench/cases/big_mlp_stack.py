"""Large program (>= 5,000 call nodes) with one planted bug deep in the middle.

Host: a deep, narrow residual trunk (a distilled policy / world-model backbone): 880 blocks
of width 8 over 4 tokens. Most blocks are pre-LN MLPs; every 10th is a token-mixing
self-attention written with an explicit ``softmax(q k^T) @ v`` over 4 tokens (a decoy: same
softmax -> matmul shape, but the reduced dim has size 4). Exactly one block, in the middle,
is a read-out from a single learned memory slot: cross-attention whose softmax runs over
the memory axis of size 1 and feeds ``@ mem_v``.

Planted bug: the softmax_size1_inf mechanism (see that case): a softmax over a size-1 dim
reaching a matmul-family op (directly or via view-like ops) makes that matmul return +inf.

Core under cut-to-input: 2 nodes (the memory softmax + its matmul).
"""

from __future__ import annotations

from typing import Any, Callable

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.fx import GraphModule, Interpreter, Node

ORACLE = "nan"  # +inf where eager is finite: trtmin's nan oracle covers every non-finite value
MATCH = None
CORE = 2

DIM, TOKENS, BLOCKS, ATTN_EVERY = 8, 4, 880, 10
aten = torch.ops.aten
_SOFTMAX = {aten.softmax, aten._softmax, aten._safe_softmax}
_MATMUL = {aten.mm, aten.bmm, aten.matmul, aten.linear, aten.addmm, aten.baddbmm, aten.einsum}
_VIEWS = {aten.view, aten.reshape, aten._unsafe_view, aten.expand, aten.unsqueeze, aten.squeeze,
          aten.transpose, aten.permute, aten.t, aten.clone, aten.contiguous}


class MLPBlock(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.ln, self.fc1, self.fc2 = nn.LayerNorm(DIM), nn.Linear(DIM, 2 * DIM), nn.Linear(2 * DIM, DIM)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.fc2(F.gelu(self.fc1(self.ln(x))))


class TokenAttention(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.ln, self.qkv, self.out = nn.LayerNorm(DIM), nn.Linear(DIM, 3 * DIM), nn.Linear(DIM, DIM)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q, k, v = self.qkv(self.ln(x)).chunk(3, dim=-1)
        attn = torch.softmax(q @ k.transpose(1, 2) * DIM**-0.5, dim=-1)  # over 4 tokens
        return x + self.out(attn @ v)


class MemoryReadout(nn.Module):
    def __init__(self, slots: int = 1) -> None:
        super().__init__()
        self.ln, self.q, self.out = nn.LayerNorm(DIM), nn.Linear(DIM, DIM), nn.Linear(DIM, DIM)
        self.mem_k = nn.Parameter(torch.randn(1, slots, DIM))
        self.mem_v = nn.Parameter(torch.randn(1, slots, DIM))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        attn = torch.softmax(self.q(self.ln(x)) @ self.mem_k.transpose(1, 2) * DIM**-0.5, dim=-1)
        return x + self.out(attn @ self.mem_v)  # softmax over 1 memory slot


class DeepTrunk(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        blocks: list[nn.Module] = []
        for i in range(BLOCKS):
            if i == BLOCKS // 2 + 3:
                blocks.append(MemoryReadout())
            elif i % ATTN_EVERY == ATTN_EVERY - 1:
                blocks.append(TokenAttention())
            else:
                blocks.append(MLPBlock())
        self.embed = nn.Linear(6, DIM)
        self.blocks = nn.Sequential(*blocks)
        self.norm, self.head = nn.LayerNorm(DIM), nn.Linear(DIM, 2)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:  # [B, TOKENS, 6]
        return self.head(self.norm(self.blocks(self.embed(obs))).mean(1))


def build() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    torch.manual_seed(0)
    model = DeepTrunk().eval()
    with torch.no_grad():  # keep activations O(1) through 880 residual blocks
        for blk in model.blocks:
            (blk.out if hasattr(blk, "out") else blk.fc2).weight.mul_(0.1)
    return model, (torch.randn(2, TOKENS, 6),)


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
        if _packet(n) in _SOFTMAX and self.env[n.args[0]].shape[n.args[1]] == 1:
            self.degenerate.add(n)
        if any(s in self.degenerate for s in self.fed_by.get(n, ())):
            out = torch.full_like(out, float("inf"))
        return out


def backend(gm: GraphModule, example_inputs: list[torch.Tensor]) -> Callable[..., Any]:
    fed_by = {n: s for n in gm.graph.nodes if _packet(n) in _MATMUL and (s := _softmax_sources(n))}
    return lambda *args: _InfMatmulInterpreter(gm, fed_by).run(*args)
