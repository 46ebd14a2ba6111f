"""The video policy of bench/hosts/video_policy.py at 180 layers: 5,058 call nodes, the
same real Torch-TensorRT-RTX mismatch (block-causal attention in a graph with complex
numbers), for the "at least 5,000 nodes" case of bench/run_bench.py."""

from __future__ import annotations

import torch
import torch.nn as nn

from bench.cases import block_causal_rope as case
from bench.hosts.video_policy import RUN, VideoPolicy

LAYERS = 180
__all__ = ["RUN", "build"]


def build() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    torch.manual_seed(0)
    return VideoPolicy(LAYERS).eval(), (torch.randn(1, case.FRAMES, 3, 28, 28),)
