"""The video policy of bench/hosts/video_policy.py with RoPE in real arithmetic (the
cos/sin form most policies use) in place of view_as_complex * freqs_cis: no complex value
anywhere. Torch-TensorRT's complex-graph rewrite runs twice per layer over the whole graph,
so the complex policy's compile grows with layers x nodes (48 layers: 2 minutes; 180: past
5); this one keeps the block-causal attention, whose mask Torch-TensorRT 2.11's
attn_bias_is_causal lowering drops, without that rewrite.
"""

from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

from bench.cases import block_causal_rope as case
from bench.hosts.video_policy import RUN

LAYERS = 8
__all__ = ["RUN", "build", "RealRopePolicy"]


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """case.apply_rope's rotation of each (even, odd) pair, in real arithmetic."""
    a, b = x.reshape(*x.shape[:-1], -1, 2).unbind(-1)
    return torch.stack((a * cos - b * sin, a * sin + b * cos), -1).flatten(-2)


class Block(case.Block):
    def forward(self, x: torch.Tensor, rope: tuple[torch.Tensor, torch.Tensor], mask: torch.Tensor) -> torch.Tensor:
        b, t, _ = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(b, t, 3, case.HEADS, case.DIM // case.HEADS).permute(2, 0, 3, 1, 4).unbind(0)
        q, k = apply_rope(q, *rope), apply_rope(k, *rope)
        o = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        x = x + self.proj(o.transpose(1, 2).reshape(b, t, case.DIM))
        return x + self.mlp(self.ln2(x))


class RealRopePolicy(case.VideoPolicy):
    def __init__(self, layers: int = LAYERS) -> None:
        super().__init__()
        self.blocks = nn.ModuleList(Block() for _ in range(layers))
        angle = self.freqs_cis.angle()
        del self.freqs_cis
        self.register_buffer("rope_cos", angle.cos())
        self.register_buffer("rope_sin", angle.sin())

    def forward(self, frames: torch.Tensor) -> torch.Tensor:  # [B, F, 3, 28, 28]
        b, n = frames.shape[0], case.FRAMES * case.TOKENS
        tok = self.patch(frames.flatten(0, 1)).flatten(2).transpose(1, 2)  # [B*F, 49, D]
        x = (tok.view(b, case.FRAMES, case.TOKENS, case.DIM) + self.frame_emb).reshape(b, n, case.DIM)
        pos = torch.arange(n)
        mask = (pos[:, None] // case.TOKENS) >= (pos[None] // case.TOKENS)
        for blk in self.blocks:
            x = blk(x, (self.rope_cos, self.rope_sin), mask)
        return self.head(self.norm(x)[:, -case.TOKENS:].mean(1))


def build(layers: int = LAYERS) -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    torch.manual_seed(0)
    return RealRopePolicy(layers).eval(), (torch.randn(1, case.FRAMES, 3, 28, 28),)


def attn_bias_is_causal(gm: torch.fx.GraphModule, example_inputs: list[torch.Tensor]):
    """A trtmin plugin backend that does on the CPU what Torch-TensorRT 2.11's
    attn_bias_is_causal lowering does on the GPU: every attention with a square mask runs
    as plain causal, the mask dropped (bench/cases/block_causal_rope.py's planted
    mechanism, without its need for a complex value). For counting oracle calls on the
    5,057-node host without a GPU."""
    return lambda *args: case._CausalizingInterpreter(gm).run(*args)
