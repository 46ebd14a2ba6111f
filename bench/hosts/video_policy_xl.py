"""The real-RoPE video policy of bench/hosts/video_policy_real_rope.py at 120 layers: 5,057
call nodes with the same real Torch-TensorRT-RTX mismatch (the block-causal mask dropped by
the attn_bias_is_causal lowering), for the "at least 5,000 nodes" GPU case of
bench/run_bench.py. The complex-RoPE policy at 180 layers (5,058 nodes) did not compile
within 300 s: Torch-TensorRT's complex-graph rewrite runs twice per layer over the whole
graph (bench/probes/probe_trt_scale.py)."""

from __future__ import annotations

import torch
import torch.nn as nn

from bench.hosts import video_policy_real_rope as real_rope
from bench.hosts.video_policy import RUN

LAYERS = 120
__all__ = ["RUN", "build"]


def build(layers: int = LAYERS) -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    return real_rope.build(layers)
