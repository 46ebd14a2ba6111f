#!/usr/bin/env python3
"""inductor mismatch on cpu: arange.default, mul.Tensor

MISMATCH: output 0 differs from eager by max abs 1.718e+10 (max rel 1.432) (18 of 24 values off, dtype int64)

Reduced by trtmin 0.1.0 from forecaster.pt2: 103 -> 2 call nodes in 20 oracle calls.
Reduced on: torch 2.13.0+cpu, Python 3.11.7, Linux-6.18.44-fc-v595-x86_64-with-glibc2.36, device cpu.
Backend: inductor. Oracle: mismatch (atol 0.001, rtol 0.001).

Run:      python repro.py
          exit 1 = REPRODUCED, 0 = FIXED, 2 = cannot run here (no GPU, missing package)
Control:  TRTMIN_BACKEND=eager python repro.py
          runs eager PyTorch in place of the backend, so it must print FIXED
"""

import importlib.util
import os
import re
import subprocess
import sys

import torch
from torch import device  # the graph below writes devices as device(type=...)

inf, nan = float("inf"), float("nan")
DEVICE = 'cpu'
ATOL, RTOL = 0.001, 0.001
REQUIRES = []


class Repro(torch.nn.Module):
    def forward(self):
        arange = torch.ops.aten.arange.default(24, dtype = torch.int64, device = device(type='cpu'), pin_memory = False)
        mul = torch.ops.aten.mul.Tensor(arange, 1000000000)
        return (mul,)


def make_inputs():
    return []


def compile_backend(module, inputs):
    return torch.compile(module, backend="inductor")


def flatten(out):
    if isinstance(out, (list, tuple)):
        return [leaf for item in out for leaf in flatten(item)]
    return [out]


def max_error(expected, actual):
    """(output index, max abs error, offending values) of the worst output, or None."""
    worst = None
    for i, (e, a) in enumerate(zip(expected, actual)):
        if not isinstance(e, torch.Tensor):
            if e != a:
                return i, float("inf"), 1
            continue
        if e.shape != a.shape:
            return i, float("inf"), e.numel()
        e64, a64 = e.detach().cpu().double(), a.detach().cpu().double()
        diff = (e64 - a64).abs().nan_to_num(0.0, float("inf"), float("inf"))
        both_nan = e64.isnan() & a64.isnan()
        diff = torch.where(both_nan | (e64 == a64), torch.zeros_like(diff), diff)
        rtol = RTOL if (e.is_floating_point() or e.is_complex()) else 0.0  # integers do not round
        bad = diff > ATOL + rtol * e64.abs().nan_to_num(0.0, 0.0, 0.0)
        if bad.any() and (worst is None or float(diff.max()) > worst[1]):
            worst = (i, float(diff.max()), int(bad.sum()))
    return worst

def outcome(expected, actual):
    worst = max_error(expected, actual)
    if worst is None:
        return False, "the backend matches eager PyTorch"
    i, err, n = worst
    return True, f"output {i} differs from eager by max abs {err:.4g} ({n} values off)"

ERROR_PATTERN = ''


def exception_text(e):
    """The exception and everything it wraps, for matching the original error."""
    parts = []
    while e is not None and len(parts) < 8:
        parts.append(f"{type(e).__name__}: {e}")
        e = getattr(e, "inner_exception", None) or e.__cause__
    return "\n".join(parts)


def run():
    inputs = [x.to(DEVICE) if isinstance(x, torch.Tensor) else x for x in make_inputs()]
    clone = lambda: [x.clone() if isinstance(x, torch.Tensor) else x for x in inputs]
    module = Repro()
    with torch.no_grad():
        expected = flatten(module(*clone()))  # the eager half runs everywhere, so a broken script shows
        missing = [name for name in REQUIRES if importlib.util.find_spec(name) is None]
        if missing and os.environ.get("TRTMIN_BACKEND") != "eager":
            print(f"SKIPPED: {', '.join(missing)} is not installed")
            return 2
        try:
            compiled = module if os.environ.get("TRTMIN_BACKEND") == "eager" else compile_backend(module, clone())
            actual = flatten(compiled(*clone()))
            if DEVICE.startswith("cuda"):
                torch.cuda.synchronize()
        except Exception as e:  # the compiler failed: is it the same failure?
            text = exception_text(e)
            first = str(e).strip().splitlines()[0][:200] if str(e).strip() else type(e).__name__
            if ERROR_PATTERN and re.search(ERROR_PATTERN, text):
                print(f"REPRODUCED: {type(e).__name__}: {first}")
                return 1
            print(f"CHANGED: fails differently now: {type(e).__name__}: {first}")
            return 3
    reproduced, message = outcome(expected, actual)
    print(("REPRODUCED: " if reproduced else "FIXED: ") + message)
    return 1 if reproduced else 0


def main():
    if DEVICE.startswith("cuda") and not torch.cuda.is_available():
        print("SKIPPED: no CUDA GPU is visible here")
        return 2
    if False and not os.environ.get("TRTMIN_CHILD"):
        # The bug kills or hangs the process: run it in a child and read how it ended.
        try:
            child = subprocess.run([sys.executable, __file__], env={**os.environ, "TRTMIN_CHILD": "1"},
                                   capture_output=True, text=True, timeout=300.0)
        except subprocess.TimeoutExpired:
            print("REPRODUCED: no result within 300 s (hang)" if False else "CHANGED: hangs now")
            return 1 if False else 3
        if child.returncode < 0:
            import signal
            name = signal.Signals(-child.returncode).name
            print(f"REPRODUCED: the process was killed by {name}" if re.search(ERROR_PATTERN or "$^", name)
                  else f"CHANGED: the process was killed by {name}")
            return 1 if re.search(ERROR_PATTERN or "$^", name) else 3
        sys.stdout.write(child.stdout)
        return child.returncode
    return run()


if __name__ == "__main__":
    sys.exit(main())
