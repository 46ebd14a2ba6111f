"""A program whose weights are most of its bytes: what trtmin costs at a policy's size.

    python bench/big_weights.py FOLDER [--blocks 30] [--width 4096] [--device cpu] [--jobs 1]

Builds a stack of LayerNorm -> Linear(width, width) -> GELU residual blocks (30 blocks of
4096 wide: 2 GB of float32 weights, 122 call nodes) with a tanh after block 20, exports it
to FOLDER/big.pt2 once, then reduces it with a planted crash on tanh and prints the
reduction's timing and the peak RSS of its largest process (getrusage of the children: the
CLI, or a worker, whichever held most). A benchmark, not a test: it writes gigabytes.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PLUGIN = ROOT / "bench" / "big_weights_plugin.py"


def build(folder: Path, blocks: int, width: int) -> tuple[Path, Path]:
    import torch
    import torch.nn as nn

    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.norm, self.proj = nn.LayerNorm(width), nn.Linear(width, width)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x + nn.functional.gelu(self.proj(self.norm(x)))

    class Stack(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.blocks = nn.ModuleList(Block() for _ in range(blocks))
            self.head = nn.Linear(width, 8)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            for i, block in enumerate(self.blocks):
                x = block(x)
                if i == min(20, blocks - 1):
                    x = torch.tanh(x)
            return self.head(x)

    pt2, inputs = folder / f"big_{blocks}x{width}.pt2", folder / f"big_{blocks}x{width}_inputs.pt"
    if not pt2.exists():
        torch.manual_seed(0)
        x = torch.randn(2, 16, width)
        with torch.no_grad():
            torch.export.save(torch.export.export(Stack().eval(), (x,)), str(pt2))
        torch.save((x,), str(inputs))
    return pt2, inputs


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("folder", type=Path)
    ap.add_argument("--blocks", type=int, default=30)
    ap.add_argument("--width", type=int, default=4096)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--jobs", type=int, default=1)
    args = ap.parse_args()
    args.folder.mkdir(parents=True, exist_ok=True)
    pt2, inputs = build(args.folder, args.blocks, args.width)
    out = args.folder / f"out_{args.device.replace(':', '')}_j{args.jobs}"
    t0 = time.monotonic()
    r = subprocess.run([sys.executable, "-m", "minimize.cli", "reduce", str(pt2), "--inputs", str(inputs),
                        "--oracle", "crash", "--backend", f"{PLUGIN}:crash_on_tanh", "--device", args.device,
                        "--jobs", str(args.jobs), "--out", str(out), "--force"],
                       env={**os.environ, "PYTHONPATH": str(ROOT)}, cwd=ROOT, capture_output=True, text=True)
    wall = time.monotonic() - t0
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1e6  # GB: the largest process of the run
    if r.returncode != 0:
        sys.exit(f"reduce failed (exit {r.returncode}):\n{r.stderr[-3000:]}")
    s = json.loads((out / "summary.json").read_text())
    t = s["timing"]
    print(json.dumps({"model_gb": round(pt2.stat().st_size / 1e9, 2), "nodes": [s["original_nodes"], s["final_nodes"]],
                      "calls": s["oracle_calls"], "process_s": round(wall, 1), "seconds": t["seconds"],
                      "trtmin_seconds": t["trtmin_seconds"], "peak_rss_gb": round(peak, 2), "load": t["load"],
                      "worker_start": t["worker_start"], "repro_alone": s.get("repro_alone")}, indent=1))


if __name__ == "__main__":
    main()
