"""Does a compile slow down when others run beside it on the same machine? For `--jobs N`
on one GPU: N processes start together, each compiles the whole program (a trtmin slice
of every node, as a worker compiles a candidate) `--repeat` times with the backend and
runs it once per compile; each phase is timed.

    python bench/parallel_compile.py MODEL --inputs F --backend torch_tensorrt --device cuda \
        --procs 1 4 --repeat 3 [--threads 4]

--threads caps torch's and OpenMP's threads in each process (trtmin's workers leave them
at their defaults). Prints one line per process count: the median compile and run time and
the slowest process's wall time; --json keeps every sample.
"""

from __future__ import annotations

import argparse
import atexit
import json
import multiprocessing as mp
import os
import shutil
import statistics
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def one_process(args: argparse.Namespace, state: str, barrier, results) -> None:
    """Load the program as a worker does, wait for the others, then compile and run
    `repeat` times. Any failure is put on the queue (and breaks the barrier), so the
    probe ends at once."""
    try:
        if args.threads:
            os.environ["OMP_NUM_THREADS"] = str(args.threads)
        import torch

        if args.threads:
            torch.set_num_threads(args.threads)
        from minimize.run.worker_side import load_state
        from oracles.backends import resolve

        program = load_state(Path(state), args.device)
        piece = program.materialize(program.all_kept())
        values = program.inputs_for(piece)
        backend = resolve(args.backend, {})
        backend.compile(piece.gm, values)(*values)  # warm: imports, CUDA context, first kernels
        barrier.wait(timeout=600)
        samples = []
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            compiled = backend.compile(piece.gm, values)
            t1 = time.perf_counter()
            compiled(*values)
            if args.device.startswith("cuda"):
                torch.cuda.synchronize()
            samples.append((t1 - t0, time.perf_counter() - t1))
        results.put(samples)
    except BaseException as e:  # noqa: BLE001 - reported by the parent
        barrier.abort()
        results.put(f"{type(e).__name__}: {e}"[:2000])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("model")
    parser.add_argument("--inputs", required=True)
    parser.add_argument("--backend", default="torch_tensorrt")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--procs", type=int, nargs="+", default=[1, 4])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--threads", type=int, default=0)
    parser.add_argument("--json")
    args = parser.parse_args()
    import tempfile

    from minimize.program.inputs import load_inputs, prepare, to_device
    from minimize.program.model import Program, load_exported
    from minimize.run.worker_side import save_state

    state = tempfile.mkdtemp(prefix="parallel-compile-")  # the program as the main process leaves it to workers
    atexit.register(shutil.rmtree, state, True)
    ep = load_exported(Path(args.model))
    inputs = to_device(load_inputs(Path(args.inputs), ep), args.device)
    save_state(Program(prepare(ep, args.device), inputs, device=args.device, fixed_random=True), Path(state))
    ctx = mp.get_context("spawn")  # CUDA in each child of its own
    report = {}
    for n in args.procs:
        barrier, results = ctx.Barrier(n + 1), ctx.Queue()
        procs = [ctx.Process(target=one_process, args=(args, state, barrier, results)) for _ in range(n)]
        for p in procs:
            p.start()
        try:
            barrier.wait(timeout=600)
        except threading.BrokenBarrierError:
            sys.exit(f"a process failed: {results.get(timeout=10)}")
        t0 = time.perf_counter()
        samples = [results.get(timeout=600) for _ in procs]
        wall = time.perf_counter() - t0
        for p in procs:
            p.join()
        if any(isinstance(s, str) for s in samples):
            sys.exit(f"a process failed: {next(s for s in samples if isinstance(s, str))}")
        compiles = [c for s in samples for c, _ in s]
        runs = [r for s in samples for _, r in s]
        report[n] = {"wall_s": wall, "compile_s": compiles, "run_s": runs}
        print(f"procs {n} threads {args.threads or 'default'}: compile median {statistics.median(compiles):.2f} s "
              f"(min {min(compiles):.2f}, max {max(compiles):.2f}), run median {statistics.median(runs):.3f} s, "
              f"{n * args.repeat} compiles in {wall:.1f} s", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
