"""A three-camera policy: uint8 HWC frames (as a robot's cameras deliver them), permuted to
NCHW and cast to float in the graph, three ResNet-style encoders, the joint state, an MLP head.

Torch-TensorRT-RTX 2.11.0 fails to compile it (`ValueError: __len__() should return >= 0`),
at the permute of the uint8 input before its cast: the users' camera-preprocessing bug.
"""

from __future__ import annotations

import torch
import torch.nn as nn

RUN = ("--oracle", "crash", "--backend", "torch_tensorrt", "--device", "cuda")
H, W, STATE, ACTION = 48, 64, 14, 7


class BasicBlock(nn.Module):
    def __init__(self, c: int) -> None:
        super().__init__()
        self.c1, self.b1 = nn.Conv2d(c, c, 3, padding=1, bias=False), nn.BatchNorm2d(c)
        self.c2, self.b2 = nn.Conv2d(c, c, 3, padding=1, bias=False), nn.BatchNorm2d(c)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x + self.b2(self.c2(torch.relu(self.b1(self.c1(x))))))


class Encoder(nn.Module):
    def __init__(self, width: int = 32, blocks: int = 8) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, width, 5, stride=2, padding=2, bias=False), nn.BatchNorm2d(width),
                                  nn.ReLU(), nn.MaxPool2d(2))
        self.blocks = nn.Sequential(*(BasicBlock(width) for _ in range(blocks)))
        self.register_buffer("mean", torch.tensor([0.485, 0.456, 0.406]).view(1, 3, 1, 1))
        self.register_buffer("std", torch.tensor([0.229, 0.224, 0.225]).view(1, 3, 1, 1))

    def forward(self, frame: torch.Tensor) -> torch.Tensor:  # [B, H, W, 3] uint8
        x = frame.permute(0, 3, 1, 2).to(torch.float32) / 255.0
        x = self.blocks(self.stem((x - self.mean) / self.std))
        return x.mean((2, 3))


class CameraPolicy(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.front, self.wrist, self.side = Encoder(), Encoder(), Encoder()
        self.state = nn.Linear(STATE, 32)
        self.head = nn.Sequential(nn.Linear(128, 256), nn.GELU(), nn.LayerNorm(256), nn.Linear(256, 256), nn.GELU(),
                                  nn.Linear(256, ACTION))

    def forward(self, front: torch.Tensor, wrist: torch.Tensor, side: torch.Tensor, state: torch.Tensor) -> torch.Tensor:
        z = torch.cat([self.front(front), self.wrist(wrist), self.side(side), torch.tanh(self.state(state))], -1)
        return self.head(z)


def build() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    torch.manual_seed(0)
    model = CameraPolicy().eval()
    for m in model.modules():  # trained-looking statistics
        if isinstance(m, nn.BatchNorm2d):
            m.running_mean.uniform_(-0.2, 0.2)
            m.running_var.uniform_(0.5, 1.5)
    g = torch.Generator().manual_seed(1)
    frames = tuple(torch.randint(0, 256, (1, H, W, 3), dtype=torch.uint8, generator=g) for _ in range(3))
    return model, (*frames, torch.randn(1, STATE, generator=g))
