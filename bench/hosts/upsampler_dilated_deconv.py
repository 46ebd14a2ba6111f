"""A small CNN decoder with a strided, dilated transposed convolution: TensorRT-RTX
1.4.0.76's builder fails in Myelin ("Strided & Dilated Deconv not supported by cuDNN", an
internal CHECK), where ONNX Runtime matches eager. Its builder runs without a GPU: a real
TensorRT case for the CPU bench and tests."""

from __future__ import annotations

import torch
from torch import nn

RUN = ("--oracle", "crash", "--backend", "tensorrt", "--device", "cpu")


class Upsampler(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv1, self.bn1 = nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8)
        self.conv2 = nn.Conv2d(8, 8, 3, padding=1, groups=2)
        self.up, self.bn2 = nn.ConvTranspose2d(8, 4, 3, stride=2, dilation=2, padding=1), nn.BatchNorm2d(4)
        self.conv3 = nn.Conv2d(4, 1, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = nn.functional.relu(self.bn1(self.conv1(x)))
        h = nn.functional.max_pool2d(h + nn.functional.silu(self.conv2(h)), 2)
        h = nn.functional.relu(self.bn2(self.up(h)))
        return torch.sigmoid(self.conv3(h)).mean(1) * 2 - 1


def build() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    torch.manual_seed(0)
    return Upsampler().eval(), (torch.randn(1, 3, 8, 8),)
