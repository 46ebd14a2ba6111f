"""Lines of repro.py for a 3-node graph (relu, mul, cast) and a 5-node one (two more adds)
in each common form: a crash (TensorRT's: a build failure) and a mismatch, on each backend
(device cuda where it runs there), inputs in the tensors file. Issue 23's target is 80
lines for a bug of at most 5 nodes. Rendering needs neither a GPU nor torch_tensorrt:
`python bench/script_lengths.py`."""

from __future__ import annotations

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from minimize.emit.script import ReproInfo, render_script  # noqa: E402
from minimize.program.model import Program  # noqa: E402
from oracles.backends import BUILTIN  # noqa: E402
from oracles.verdict import Signature, Verdict  # noqa: E402

VERDICTS = {"crash": Verdict("crash", "RuntimeError", "converter failed on node 12"),
            "mismatch": Verdict("mismatch", output=0, max_abs=1.0)}
# TensorRT's crashes without a GPU are its parser's and builder's (the real ones of bench/hosts)
BUILD_FAILURE = Verdict("crash", "TensorRTError", "building the engine failed: Error Code 10: Internal Error")


class ThreeNodes(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (torch.relu(x) * 2).to(torch.uint8)


class FiveNodes(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return ((torch.relu(x) * 2 + 1) + x).to(torch.uint8)


def main() -> None:
    x = torch.randn(4, 8)
    for model in (ThreeNodes(), FiveNodes()):
        lengths(model, x)


def lengths(model: torch.nn.Module, x: torch.Tensor) -> None:
    program = Program(torch.export.export(model.eval(), (x,)).run_decompositions({}), [x])
    piece = program.materialize(program.all_kept())
    n = sum(node.op == "call_function" for node in piece.gm.graph.nodes)
    for backend in ("inductor", "torch_tensorrt", "executorch:xnnpack", "onnxruntime", "tensorrt"):
        made = BUILTIN[backend](backend, {})
        device = "cuda" if "cuda" in made.devices else made.devices[0]
        for kind, verdict in VERDICTS.items():
            verdict = BUILD_FAILURE if (backend, kind) == ("tensorrt", "crash") else verdict
            info = ReproInfo(title="lengths", source_model="model.pt2", original_nodes=100, final_nodes=n,
                             oracle_calls=5, oracle=kind, verdict=verdict, signature=Signature.of(verdict),
                             match=None, atol=1e-3, rtol=1e-3, device=device, needs_subprocess=False, timeout=300.0)
            script, _ = render_script(info, piece.gm, {name: x for name in piece.input_names}, {},
                                      made)
            print(f"{n} nodes  {backend:<19} {device:<5} {kind:<9} {len(script.splitlines())} lines")


if __name__ == "__main__":
    main()
