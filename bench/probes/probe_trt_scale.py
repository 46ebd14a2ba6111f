"""GPU probe (2026-12-03, fourth session): how Torch-TensorRT-RTX's compile of the video
policy grows with its layers, for issue 25's >= 5,000-node case (180 layers did not compile
within 300 s). For each layer count: export on CUDA, load as trtmin does, then compile and
run (1) the whole program, (2) the localization slice (every value an output), each timed,
and cProfile's top functions of one whole compile (--profile LAYERS).

    python bench/probes/probe_trt_scale.py --layers 8 24 48 96 --mark-all --profile 48 --budget 480

Stops before a layer count whose predicted compile (linear in layers from the last one)
would pass --budget seconds in all.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent.parent))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--layers", type=int, nargs="+", default=[8, 24, 48])
    parser.add_argument("--budget", type=float, default=400.0)
    parser.add_argument("--mark-all", action="store_true", help="also compile the localization slice")
    parser.add_argument("--profile", type=int, default=0, help="cProfile the whole compile at this layer count")
    parser.add_argument("--backend", default="torch_tensorrt")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--host", default="video_policy", help="a bench/hosts module whose build() takes the layers")
    args = parser.parse_args()
    import torch

    import importlib

    host = importlib.import_module(f"bench.hosts.{args.host}")
    from minimize.program.inputs import prepare
    from minimize.program.model import Program
    from oracles.backends import resolve

    backend = resolve(args.backend, {})
    start, last = time.perf_counter(), None
    for layers in args.layers:
        spent = time.perf_counter() - start
        if last and spent + 2.5 * last[1] * layers / last[0] > args.budget:
            print(f"layers {layers}: skipped, predicted past the budget", flush=True)
            break
        model, inputs = host.build(layers)  # exported on the CPU as bench/hosts does
        t = time.perf_counter()
        ep = torch.export.export(model, inputs)
        export_s = time.perf_counter() - t
        with tempfile.TemporaryDirectory() as folder:
            torch.export.save(ep, f"{folder}/m.pt2")
            ep = torch.export.load(f"{folder}/m.pt2")
        program = Program(prepare(ep, args.device),
                          [x.to(args.device) for x in inputs], device=args.device, fixed_random=True)
        calls = len(program.all_kept())
        line = f"layers {layers}: {calls} nodes, export {export_s:.1f} s"
        for mark_all in ([False, True] if args.mark_all else [False]):
            piece = program.materialize(program.all_kept(), mark_all=mark_all)
            values = program.inputs_for(piece)
            profiler = cProfile.Profile() if not mark_all and layers == args.profile else None
            t, compile_s = time.perf_counter(), None
            try:
                if profiler:
                    profiler.enable()
                compiled = backend.compile(piece.gm, values)
                if profiler:
                    profiler.disable()
                compile_s = time.perf_counter() - t
                expected = piece.gm(*values)
                t = time.perf_counter()
                out = compiled(*values)
                if args.device.startswith("cuda"):
                    torch.cuda.synchronize()
                run_s = time.perf_counter() - t
                out, expected = (list(v) if isinstance(v, (list, tuple)) else [v] for v in (out, expected))
                off = max(float((a.float() - e.float()).abs().max()) for a, e in zip(out, expected)
                          if isinstance(e, torch.Tensor) and not e.is_complex() and a.shape == e.shape)
                line += (f"; {'mark_all' if mark_all else 'whole'} compile {compile_s:.1f} s run {run_s:.2f} s "
                         f"({len(out)} outputs, max abs off eager {off:.3g})")
            except Exception as e:  # noqa: BLE001 - a probe reports and goes on
                line += f"; {'mark_all' if mark_all else 'whole'} failed after {time.perf_counter() - t:.1f} s: {type(e).__name__}: {str(e)[:200]}"
                if compile_s is None:  # the compile failed: its time is what it took to fail
                    compile_s = time.perf_counter() - t
            if not mark_all:
                last = (layers, compile_s)
            if profiler:
                text = io.StringIO()
                pstats.Stats(profiler, stream=text).sort_stats("cumulative").print_stats(45)
                print(text.getvalue(), flush=True)
                text = io.StringIO()
                pstats.Stats(profiler, stream=text).sort_stats("tottime").print_stats(25)
                print(text.getvalue(), flush=True)
        print(line, flush=True)
        del program, ep, model


if __name__ == "__main__":
    main()
