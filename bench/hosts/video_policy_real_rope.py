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

from bench.cases import block_causal_rope as case
from bench.hosts.video_policy import RUN

LAYERS = 8
__all__ = ["RUN", "build", "RealRopePolicy"]


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """case.apply_rope's rotation of each (even, odd) pair, in real arithmetic."""
    a, b = x.reshape(*x.shape[:-1], -1, 2).unbind(-1)
    return torch.stack((a * cos - b * sin, a * sin + b * cos), -1).flatten(-2)


class Block(case.Block):
    def rope(self, x: torch.Tensor, table: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        return apply_rope(x, *table)


class RealRopePolicy(case.VideoPolicy):
    def __init__(self, layers: int = LAYERS) -> None:
        super().__init__()
        self.blocks = nn.ModuleList(Block() for _ in range(layers))
        angle = self.freqs_cis.angle()
        del self.freqs_cis
        self.register_buffer("rope_cos", angle.cos())
        self.register_buffer("rope_sin", angle.sin())

    def rope_table(self) -> tuple[torch.Tensor, torch.Tensor]:
        return self.rope_cos, self.rope_sin


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
