"""An 8-layer video policy: 2 RGB frames of 7x7 patch tokens, a block-causal mask (a token
sees its own frame and earlier ones) and complex RoPE (view_as_complex * freqs_cis).

Torch-TensorRT-RTX 2.11.0 on the H200 differs from eager by ~0.1 (atol 1e-2): the bug our
users filed as pytorch/TensorRT#4953 (block-causal attention in a graph with complex numbers).
"""

from __future__ import annotations

import torch
import torch.nn as nn

from bench.cases import block_causal_rope as case

LAYERS = 8
RUN = ("--oracle", "mismatch", "--backend", "torch_tensorrt", "--device", "cuda", "--atol", "1e-2")


class VideoPolicy(case.VideoPolicy):
    def __init__(self, layers: int = LAYERS) -> None:
        super().__init__()
        self.blocks = nn.ModuleList(case.Block() for _ in range(layers))


def build(layers: int = LAYERS) -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    torch.manual_seed(0)
    return VideoPolicy(layers).eval(), (torch.randn(1, case.FRAMES, 3, 28, 28),)
