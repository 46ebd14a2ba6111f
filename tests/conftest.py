"""Shared fixtures: a small host model with every planted trigger, saved as a .pt2."""

from __future__ import annotations

import signal
import sys
from pathlib import Path

import pytest
import torch
from torch import nn

ROOT = Path(__file__).resolve().parent.parent
PLUGINS = Path(__file__).resolve().parent / "plugins" / "planted.py"
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

# The suite tests what trtmin does on Ctrl-C. Run under nohup or as a shell's `&` job, pytest
# and all it starts inherit SIGINT ignored, and those tests would test the caller instead:
# every process the tests start takes SIGINT as a terminal's foreground job does.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


class Host(nn.Module):
    """18 call nodes: sin, mul -> exp, tanh and rsqrt each appear once."""

    def __init__(self) -> None:
        super().__init__()
        self.l1 = nn.Linear(8, 16)
        self.norm = nn.LayerNorm(16)
        self.l2 = nn.Linear(16, 16)
        self.l3 = nn.Linear(16, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.l1(x).relu()
        h = h + torch.sin(h) * 0.5
        h = self.norm(h)
        h = h * torch.exp(h * 0.1)
        h = torch.tanh(self.l2(h))
        s = torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-6)
        return self.l3(h * s) + 1.0


def save_program(model: nn.Module, inputs: tuple, folder: Path, name: str = "model") -> tuple[Path, Path]:
    ep = torch.export.export(model, inputs)
    pt2, inp = folder / f"{name}.pt2", folder / f"{name}_inputs.pt"
    torch.export.save(ep, str(pt2))
    torch.save(inputs, str(inp))
    return pt2, inp


@pytest.fixture(scope="session")
def host_program(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    torch.manual_seed(0)
    folder = tmp_path_factory.mktemp("host")
    return save_program(Host().eval(), (torch.randn(4, 8),), folder)


def plugin(name: str) -> str:
    return f"{PLUGINS}:{name}"
