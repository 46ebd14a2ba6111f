"""A view above 8 dimensions fails: "missing fallback kernels: aten::_reshape_copy".

User-documented Torch-TensorRT failure: TensorRT tensors have at most 8 dimensions. Qwen-VL
style vision patchifiers view pixels as a 9-10-D tensor (batch, grid_t, temporal_patch,
channel, grid_h, merge, patch, grid_w, merge, patch) before permuting into patch order, so
the reshape cannot be converted, is left to a fallback kernel that does not exist, and the
program fails with ``RuntimeError: Method forward missing fallback kernels:
aten::_reshape_copy``.

Planted mechanism: any view / reshape / _unsafe_view / expand / permute node whose output
rank is > 8 raises that error.

Core under cut-to-input: 1 node (the 10-D view, or the 10-D permute with its input fed).
"""

from __future__ import annotations

from typing import Any, Callable

import torch
import torch.nn as nn
from torch.fx import GraphModule, Interpreter, Node

ORACLE = "crash"
MATCH = r"missing fallback kernels: aten::_reshape_copy"
CORE = 1

B, T_PATCH, MERGE, PATCH, GRID, DIM = 2, 2, 2, 16, 8, 32
aten = torch.ops.aten
_RANKED = {aten.view, aten.reshape, aten._unsafe_view, aten.expand, aten.permute}


class VisionPatchEmbed(nn.Module):
    """Qwen-VL-like: pixels -> (2x16x16 spatio-temporal patches) -> ViT MLP -> 2x2 patch merger."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(3 * T_PATCH * PATCH * PATCH, DIM, bias=False)
        self.norm = nn.LayerNorm(DIM)
        self.mlp = nn.Sequential(nn.Linear(DIM, 2 * DIM), nn.GELU(), nn.Linear(2 * DIM, DIM))
        self.merger = nn.Sequential(nn.LayerNorm(4 * DIM), nn.Linear(4 * DIM, DIM), nn.GELU(), nn.Linear(DIM, DIM))

    def forward(self, pixels: torch.Tensor) -> torch.Tensor:  # [B, 2, 3, 256, 256]
        x = pixels.view(B, 1, T_PATCH, 3, GRID, MERGE, PATCH, GRID, MERGE, PATCH)
        x = x.permute(0, 1, 4, 7, 5, 8, 3, 2, 6, 9)  # b, t, gh, gw, mh, mw, c, tp, ph, pw
        x = x.reshape(B, GRID * GRID * MERGE * MERGE, 3 * T_PATCH * PATCH * PATCH)
        h = self.proj(x)
        h = h + self.mlp(self.norm(h))
        return self.merger(h.reshape(B, GRID * GRID, MERGE * MERGE * DIM))


def build() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    torch.manual_seed(0)
    size = GRID * MERGE * PATCH
    return VisionPatchEmbed().eval(), (torch.randn(B, T_PATCH, 3, size, size),)


# ---------------------------------------------------------------- planted-bug plugin
class _MaxRank8Interpreter(Interpreter):
    def run_node(self, n: Node) -> Any:
        out = super().run_node(n)
        if getattr(n.target, "overloadpacket", None) in _RANKED and isinstance(out, torch.Tensor) and out.dim() > 8:
            raise RuntimeError("Method forward missing fallback kernels: aten::_reshape_copy")
        return out


def backend(gm: GraphModule, example_inputs: list[torch.Tensor]) -> Callable[..., Any]:
    return lambda *args: _MaxRank8Interpreter(gm).run(*args)
