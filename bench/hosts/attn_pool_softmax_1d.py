"""A policy's readout: one query vector attends over 5 slots (unbatched), then a LayerNorm
and an MLP head. The softmax of the rank-1 score vector exports to an ONNX Softmax on a 1-D
input, which TensorRT's operator list supports; TensorRT-RTX 1.4.0.76's parser refuses it
("at least 2 dimensions are required for input"), where ONNX Runtime matches eager. Its
parser runs without a GPU: a real TensorRT case for the CPU bench and tests."""

from __future__ import annotations

import torch
from torch import nn

RUN = ("--oracle", "crash", "--backend", "tensorrt", "--device", "cpu")


class AttnPool(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.q, self.k, self.v = nn.Linear(12, 16), nn.Linear(12, 16), nn.Linear(12, 16)
        self.norm = nn.LayerNorm(16)
        self.mlp1, self.mlp2 = nn.Linear(16, 32), nn.Linear(32, 6)

    def forward(self, query: torch.Tensor, slots: torch.Tensor) -> torch.Tensor:
        q, k, v = self.q(query), self.k(slots), self.v(slots)
        w = ((k @ q) / 4.0).softmax(-1)
        h = self.norm((w.unsqueeze(-1) * v).sum(0) + q)
        return torch.tanh(self.mlp2(nn.functional.gelu(self.mlp1(h))))


def build() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    torch.manual_seed(0)
    return AttnPool().eval(), (torch.randn(12), torch.randn(5, 12))
