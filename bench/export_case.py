"""Export one bench case to NAME.pt2 and NAME_inputs.pt: python bench/export_case.py NAME DIR"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def export_case(name: str, folder: Path) -> tuple[Path, Path]:
    mod = importlib.import_module(f"bench.cases.{name}")
    model, inputs = mod.build()
    ep = torch.export.export(model, inputs)
    folder.mkdir(parents=True, exist_ok=True)
    pt2, inp = folder / f"{name}.pt2", folder / f"{name}_inputs.pt"
    torch.export.save(ep, str(pt2))
    torch.save(inputs, str(inp))
    return pt2, inp


if __name__ == "__main__":
    print(*export_case(sys.argv[1], Path(sys.argv[2])))
