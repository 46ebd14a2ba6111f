"""Builds examples/forecaster.pt2: a small time-series transformer that hits a real Inductor bug.

The forecaster stamps each step with its time in nanoseconds,
`start_ns + torch.arange(T) * 1_000_000_000`, and encodes the time of day. On CPU,
Inductor's vectorized kernel computes that int64 arithmetic in int32
(pytorch/pytorch#175966), so the timestamps are off by about 8.6e9 and the
forecast is wrong, silently. Run: python examples/build_forecaster.py
"""

from __future__ import annotations

import math
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

NS_PER_S = 1_000_000_000
SECONDS_PER_DAY = 86_400


class TimeEncoding(nn.Module):
    """Time2Vec-style encoding of the time of day, from nanosecond timestamps."""

    def __init__(self, dim: int):
        super().__init__()
        self.register_buffer("freqs", torch.arange(1, dim + 1, dtype=torch.float32))
        self.phase = nn.Parameter(torch.linspace(0.0, math.pi, dim))

    def forward(self, t_ns: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Per-step encodings (B, T, dim), and the window's mean daily phase (B, 2)."""
        day = (t_ns // NS_PER_S % SECONDS_PER_DAY).float() / SECONDS_PER_DAY  # (B, T) in [0, 1)
        steps = torch.sin(2 * math.pi * day[..., None] * self.freqs + self.phase)
        angle = 2 * math.pi * day
        return steps, torch.stack([torch.sin(angle).mean(dim=1), torch.cos(angle).mean(dim=1)], dim=-1)


class Block(nn.Module):
    def __init__(self, dim: int, heads: int):
        super().__init__()
        self.heads = heads
        self.norm1 = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.out = nn.Linear(dim, dim)
        self.norm2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(self.norm1(x)).chunk(3, dim=-1)
        q, k, v = (z.reshape(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        att = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.out(att.transpose(1, 2).reshape(b, t, d))
        return x + self.mlp(self.norm2(x))


class Forecaster(nn.Module):
    """Reads `history` (B, T, C) sampled every second from `start_ns`, forecasts H steps."""

    def __init__(self, channels: int = 4, dim: int = 32, heads: int = 4, layers: int = 3, horizon: int = 8):
        super().__init__()
        self.horizon = horizon
        self.embed = nn.Linear(channels, dim)
        self.time = TimeEncoding(dim)
        self.blocks = nn.ModuleList(Block(dim, heads) for _ in range(layers))
        self.norm = nn.LayerNorm(dim)
        self.context = nn.Linear(2, dim)
        self.head = nn.Linear(dim, horizon * channels)

    def forward(self, history: torch.Tensor, start_ns: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        b, t, c = history.shape
        mean = history.mean(dim=1, keepdim=True)
        std = history.std(dim=1, keepdim=True) + 1e-5
        x = self.embed((history - mean) / std)
        stamps = start_ns + torch.arange(t, dtype=torch.int64) * NS_PER_S  # (B, T) in ns
        steps, daily_phase = self.time(stamps)
        x = x + steps
        for block in self.blocks:
            x = block(x)
        summary = self.norm(x[:, -1]) + self.context(daily_phase)
        forecast = self.head(summary).reshape(b, self.horizon, c)
        future = stamps[:, -1:] + torch.arange(1, self.horizon + 1, dtype=torch.int64) * NS_PER_S
        return forecast * std + mean, future


def build() -> tuple[nn.Module, tuple[torch.Tensor, torch.Tensor]]:
    torch.manual_seed(0)
    model = Forecaster().eval()
    history = torch.randn(2, 24, 4)
    start_ns = torch.tensor([[1_764_460_800 * NS_PER_S], [1_764_547_200 * NS_PER_S]])  # 2025-11-30, 12-01 UTC
    return model, (history, start_ns)


def main() -> None:
    here = Path(__file__).parent
    model, inputs = build()
    ep = torch.export.export(model, inputs)
    torch.export.save(ep, str(here / "forecaster.pt2"))
    torch.save(inputs, str(here / "forecaster_inputs.pt"))
    calls = sum(1 for n in ep.graph_module.graph.nodes if n.op == "call_function")
    print(f"wrote {here / 'forecaster.pt2'} ({calls} call nodes) and forecaster_inputs.pt")


if __name__ == "__main__":
    main()
