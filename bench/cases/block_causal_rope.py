"""Block-causal attention silently becomes plain causal when the graph has complex numbers.

Upstream: pytorch/TensorRT#4953. A video policy attends over 2 frames x 49 tokens with a
block-causal mask (a token sees every token of its own frame and of earlier frames) and
uses complex RoPE (view_as_complex * freqs_cis -> view_as_real). When the compiled graph
contains any complex-valued tensor, the SDPA converter takes a different lowering path that
drops the explicit square mask and emits is_causal=True, so tokens of frame 0 stop seeing
later tokens of frame 0.

Planted mechanism: if any node / graph input of the (sub)graph is complex (or it contains
view_as_complex / view_as_real), every SDPA-family node whose mask is square (L == S) runs
with attn_mask=None, is_causal=True.

Core under cut-to-input: 2 nodes -- one complex-producing/consuming op (e.g.
view_as_complex) plus one SDPA node; the mask is fed as an input.
"""

from __future__ import annotations

from typing import Any, Callable

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.fx import GraphModule, Interpreter, Node

ORACLE = "mismatch"
MATCH = None
CORE = 2

FRAMES, TOKENS, DIM, HEADS, LAYERS = 2, 49, 32, 4, 2
aten = torch.ops.aten


def apply_rope(x: torch.Tensor, freqs_cis: torch.Tensor) -> torch.Tensor:
    xc = torch.view_as_complex(x.reshape(*x.shape[:-1], -1, 2))
    return torch.view_as_real(xc * freqs_cis).flatten(-2)


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(DIM), nn.LayerNorm(DIM)
        self.qkv, self.proj = nn.Linear(DIM, 3 * DIM), nn.Linear(DIM, DIM)
        self.mlp = nn.Sequential(nn.Linear(DIM, 4 * DIM), nn.GELU(), nn.Linear(4 * DIM, DIM))

    def rope(self, x: torch.Tensor, table: Any) -> torch.Tensor:
        """The rotation of q and k; a subclass may hold its table in another form."""
        return apply_rope(x, table)

    def forward(self, x: torch.Tensor, rope_table: Any, mask: torch.Tensor) -> torch.Tensor:
        b, t, _ = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(b, t, 3, HEADS, DIM // HEADS).permute(2, 0, 3, 1, 4).unbind(0)
        q, k = self.rope(q, rope_table), self.rope(k, rope_table)
        o = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        x = x + self.proj(o.transpose(1, 2).reshape(b, t, DIM))
        return x + self.mlp(self.ln2(x))


class VideoPolicy(nn.Module):
    """2 RGB frames -> 7x7 patch tokens per frame -> block-causal RoPE transformer -> action."""

    def __init__(self) -> None:
        super().__init__()
        self.patch = nn.Conv2d(3, DIM, kernel_size=4, stride=4)
        self.frame_emb = nn.Parameter(torch.randn(FRAMES, 1, DIM) * 0.02)
        self.blocks = nn.ModuleList(Block() for _ in range(LAYERS))
        self.norm = nn.LayerNorm(DIM)
        self.head = nn.Linear(DIM, 7)
        hd = DIM // HEADS
        inv = 1.0 / (10000 ** (torch.arange(0, hd, 2).float() / hd))
        ang = torch.outer(torch.arange(FRAMES * TOKENS).float(), inv)
        self.register_buffer("freqs_cis", torch.polar(torch.ones_like(ang), ang))

    def rope_table(self) -> Any:
        """What each block's rope() reads: here the complex freqs_cis."""
        return self.freqs_cis

    def forward(self, frames: torch.Tensor) -> torch.Tensor:  # [B, F, 3, 28, 28]
        b = frames.shape[0]
        tok = self.patch(frames.flatten(0, 1)).flatten(2).transpose(1, 2)  # [B*F, 49, D]
        x = (tok.view(b, FRAMES, TOKENS, DIM) + self.frame_emb).reshape(b, FRAMES * TOKENS, DIM)
        n = torch.arange(FRAMES * TOKENS)
        mask = (n[:, None] // TOKENS) >= (n[None] // TOKENS)
        for blk in self.blocks:
            x = blk(x, self.rope_table(), mask)
        return self.head(self.norm(x)[:, -TOKENS:].mean(1))


def build() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    torch.manual_seed(0)
    return VideoPolicy().eval(), (torch.randn(1, FRAMES, 3, 28, 28),)


# ---------------------------------------------------------------- planted-bug plugin
def _is_sdpa(target: Any) -> bool:
    name = getattr(target, "__name__", "")
    return isinstance(target, torch._ops.OpOverload) and "scaled_dot_product" in name and "backward" not in name


def _has_complex(gm: GraphModule, example_inputs: list[torch.Tensor]) -> bool:
    if any(isinstance(t, torch.Tensor) and t.is_complex() for t in example_inputs):
        return True
    for n in gm.graph.nodes:
        val = n.meta.get("val", n.meta.get("example_value"))  # export or dynamo graph
        if isinstance(val, torch.Tensor) and val.is_complex():
            return True
        if n.target in (aten.view_as_complex.default, aten.view_as_real.default):
            return True
    return False


class _CausalizingInterpreter(Interpreter):
    def run_node(self, n: Node) -> Any:
        if n.op != "call_function" or not _is_sdpa(n.target):
            return super().run_node(n)
        args, kwargs = self.fetch_args_kwargs_from_env(n)
        names = [a.name for a in n.target._schema.arguments]
        kw = {**dict(zip(names, args)), **kwargs}
        mask_key = "attn_mask" if "attn_mask" in names else "attn_bias"
        mask = kw.get(mask_key)
        if isinstance(mask, torch.Tensor) and mask.dim() >= 2 and mask.shape[-1] == mask.shape[-2] and "is_causal" in names:
            kw[mask_key], kw["is_causal"] = None, True  # the bug: square mask -> plain causal
        return n.target(**kw)


def backend(gm: GraphModule, example_inputs: list[torch.Tensor]) -> Callable[..., Any]:
    interp = _CausalizingInterpreter if _has_complex(gm, example_inputs) else Interpreter
    return lambda *args: interp(gm).run(*args)
