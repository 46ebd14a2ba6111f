"""Export a host program: python -m bench.hosts NAME DIR [--device cuda]."""

from __future__ import annotations

import argparse
import importlib
from pathlib import Path

import torch


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("name", help="a module of bench/hosts: video_policy, camera_policy, ...")
    parser.add_argument("folder", type=Path)
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()
    host = importlib.import_module(f"bench.hosts.{args.name}")
    model, inputs = host.build()
    model, inputs = model.to(args.device), tuple(x.to(args.device) for x in inputs)
    ep = torch.export.export(model, inputs)
    args.folder.mkdir(parents=True, exist_ok=True)
    torch.export.save(ep, str(args.folder / f"{args.name}.pt2"))
    torch.save(tuple(x.cpu() for x in inputs), str(args.folder / f"{args.name}_inputs.pt"))
    calls = sum(n.op == "call_function" for n in ep.graph.nodes)
    print(f"{args.folder / args.name}.pt2: {calls} call nodes; trtmin options: {' '.join(host.RUN)}")


if __name__ == "__main__":
    main()
