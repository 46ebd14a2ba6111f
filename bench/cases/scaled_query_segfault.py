"""The engine builder segfaults when one scaled query is read by 2 attention layers.

User-documented TensorRT crash (the segfault row of our users' NVIDIA TensorRT table): the
builder crashes when one scaled query (q * c, c a constant) feeds 2 IAttention layers; it
builds with 1 attention, with no scale, or with 2 different scale constants. A flow-matching
policy hits it because its unrolled flow steps run the same attention on the same
conditioning, so one scaled query feeds every step's attention.

Host: a flow-matching action head. A 10-block transformer encodes the observation tokens;
the conditioning queries are projected and scaled once, then 2 unrolled flow steps attend
from them to that step's action tokens.

Planted mechanism: at compile time ("engine build"), if a `mul` by a Python number is the
query of 2 or more SDPA-family nodes, the plugin reads address 0 (SIGSEGV), as the builder
does. The crash kills the process that compiles: bench/run_bench.py and check_cases.py run
this case's compiles in a forked child (KILLS_PROCESS).

Core under cut-to-input: 3 nodes (the mul and both SDPA nodes).
"""

from __future__ import annotations

import ctypes
from typing import Any, Callable

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.fx import GraphModule, Interpreter, Node

ORACLE = "crash"
MATCH = None
CORE = 3
KILLS_PROCESS = True

DIM, HEADS, DEPTH, TOKENS, ACTIONS, STEPS = 32, 4, 10, 12, 6, 2
aten = torch.ops.aten


class EncoderBlock(nn.Module):
    """slow_oracle.py's Block, written again: a case file is the plugin trtmin copies beside
    repro.py, so it imports nothing of the benchmark."""

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


class FlowActionHead(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.encoder = nn.Sequential(*(EncoderBlock() for _ in range(DEPTH)))
        self.q = nn.Linear(DIM, DIM)
        self.act_in, self.k, self.v = nn.Linear(7, DIM), nn.Linear(DIM, DIM), nn.Linear(DIM, DIM)
        self.act_out = nn.Linear(DIM, 7)
        self.step_emb = nn.Parameter(torch.randn(STEPS, DIM) * 0.1)

    def forward(self, obs: torch.Tensor, noise: torch.Tensor) -> torch.Tensor:  # [B, T, D], [B, A, 7]
        b = obs.shape[0]
        cond = self.encoder(obs)
        heads = lambda t: t.view(b, -1, HEADS, DIM // HEADS).transpose(1, 2)
        q = heads(self.q(cond)) * (DIM // HEADS) ** -0.5  # scaled once, read by every flow step
        x = noise
        for step in range(STEPS):
            h = self.act_in(x) + self.step_emb[step]
            a = F.scaled_dot_product_attention(q, heads(self.k(h)), heads(self.v(h)), scale=1.0)
            pooled = a.transpose(1, 2).reshape(b, TOKENS, DIM).mean(1, keepdim=True)
            x = x + 0.5 * self.act_out(h + pooled)
        return x


def build() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    torch.manual_seed(0)
    return FlowActionHead().eval(), (torch.randn(2, TOKENS, DIM), torch.randn(2, ACTIONS, 7))


# ---------------------------------------------------------------- planted-bug plugin
def _is_sdpa(target: Any) -> bool:
    name = getattr(target, "__name__", "")
    return isinstance(target, torch._ops.OpOverload) and "scaled_dot_product" in name and "backward" not in name


def _is_scaled(n: Any) -> bool:
    return (isinstance(n, Node) and n.target in (aten.mul.Tensor, aten.mul.Scalar)
            and any(isinstance(a, (int, float)) and not isinstance(a, bool) for a in n.args))


def builder_crashes(gm: GraphModule) -> bool:
    readers: dict[Node, int] = {}
    for n in gm.graph.nodes:
        if n.op == "call_function" and _is_sdpa(n.target) and _is_scaled(n.args[0]):
            readers[n.args[0]] = readers.get(n.args[0], 0) + 1
    return any(count >= 2 for count in readers.values())


def backend(gm: GraphModule, example_inputs: list[torch.Tensor]) -> Callable[..., Any]:
    if builder_crashes(gm):
        ctypes.string_at(0)  # the builder's null-pointer read: SIGSEGV
    return lambda *args: Interpreter(gm).run(*args)
