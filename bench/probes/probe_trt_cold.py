"""GPU probe: what a Torch-TensorRT worker's first compile costs beyond a warm one, and what
the camera policy's crash says of its node. `python bench/probes/probe_trt_cold.py CASES_DIR`
on the GPU machine, after `python -m bench.hosts camera_policy CASES_DIR` and video_policy.

Prints seconds: a tiny module's first and second compile in a fresh process, then the video
policy's original compile twice (warm), so a --jobs run's first round (every worker cold)
can be read against them; then the camera policy's compile error, whole, and what trtmin's
failing_node reads from it. Figures go to bench/README.md."""

from __future__ import annotations

import importlib
import sys
import time
import traceback
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from minimize.program.inputs import load_inputs, prepare  # noqa: E402
from minimize.program.model import Program, load_exported  # noqa: E402
from oracles.backends import BUILTIN  # noqa: E402
from oracles.checks import failing_node  # noqa: E402


def timed(label: str, fn) -> None:
    t = time.perf_counter()
    try:
        fn()
        print(f"{label}: {time.perf_counter() - t:.2f} s", flush=True)
    except Exception as e:  # noqa: BLE001 - a probe: show it whole
        print(f"{label}: failed after {time.perf_counter() - t:.2f} s", flush=True)
        text = "".join(traceback.format_exception(e))
        print(text[-6000:])
        print("failing_node:", failing_node(str(e)), "| on the traceback:", failing_node(text))


def program_of(cases: Path, name: str) -> tuple[torch.fx.GraphModule, list]:
    ep = load_exported(cases / f"{name}.pt2")
    user = load_inputs(cases / f"{name}_inputs.pt", ep)
    ep = prepare(ep, "cuda")
    program = Program(ep, [v.cuda() if isinstance(v, torch.Tensor) else v for v in user], "cuda")
    piece = program.materialize(program.all_kept())
    return piece.gm, program.inputs_for(piece)


def main() -> None:
    cases = Path(sys.argv[1])
    t = time.perf_counter()
    importlib.import_module("torch_tensorrt")
    print(f"import torch_tensorrt: {time.perf_counter() - t:.2f} s")
    t = time.perf_counter()
    torch.cuda.init()
    torch.zeros(1, device="cuda")
    print(f"cuda init: {time.perf_counter() - t:.2f} s")
    backend = BUILTIN["torch_tensorrt"]("torch_tensorrt", {})
    tiny = torch.fx.symbolic_trace(torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU()).cuda())
    x = torch.randn(2, 8, device="cuda")
    timed("tiny module, first compile and run", lambda: backend.compile(tiny, [x])(x))
    timed("tiny module, second", lambda: backend.compile(tiny, [x])(x))
    gm, inputs = program_of(cases, "video_policy")
    for i in (1, 2):
        timed(f"video_policy original, compile and run {i}", lambda: backend.compile(gm, inputs)(*inputs))
    gm, inputs = program_of(cases, "camera_policy")
    timed("camera_policy original", lambda: backend.compile(gm, inputs)(*inputs))


if __name__ == "__main__":
    main()
