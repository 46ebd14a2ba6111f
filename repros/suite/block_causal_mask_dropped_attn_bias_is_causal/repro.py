#!/usr/bin/env python3
"""torch_tensorrt min_block_size=1 mismatch on cuda: <built-in function getitem>, flatten.using_ints, mul.Tensor, permute.default, reshape.default, scaled_dot_product_attent

MISMATCH: output 0 differs from eager by max abs 1.515 (max rel 6.421) (8 of 16 values off, dtype float32)

Reduced by trtmin 0.1.0 from video_policy.pt2: 241 -> 16 call nodes in 109 oracle calls.
Reduced on: torch 2.11.0+cu130, Python 3.12.3, Linux-6.18.44-fc-v973-gpu-x86_64-with-glibc2.39, device cuda (NVIDIA H200).
Backend: torch_tensorrt min_block_size=1. Oracle: mismatch (atol 0.01, rtol 0.001).

Run:      python repro.py
          exit 1 = REPRODUCED, 0 = FIXED, 2 = cannot run here (no GPU, missing package or file),
          3 = CHANGED: it still fails, but differently (another error, a hang or a kill)
Control:  TRTMIN_BACKEND=eager python repro.py
          runs eager PyTorch in place of the backend, so it must print FIXED
"""

import importlib.util
import os
import re
import sys

try:
    import torch
except ImportError as exc:  # no torch here: cannot run, which is no verdict on the bug
    print(f"SKIPPED: torch cannot be imported: {exc}")
    sys.exit(2)

inf, nan = float("inf"), float("nan")
DEVICE = 'cuda'
ATOL, RTOL = 0.01, 0.001
REFERENCE = 'eager'  # float64: a difference counts only beyond ERROR_RATIO x eager's own error from a float64 run
REQUIRES = ['torch_tensorrt']  # "a|b": either package
def export_dynamic_shapes(inputs, bounded=False):
    """torch.export's dynamic_shapes for `inputs`: Dim.AUTO on each marked dim, within the
    export's bounds widened to the example's size (ExecuTorch plans memory to the max); None
    when no input has one (a static export, as before). bounded: an unbounded dim gets the
    example's size as its max, as a TensorRT profile needs one."""
    from torch.export import Dim

    def dim(size, lo, hi):
        limits = {}
        if min(lo, size) >= 2:
            limits['min'] = min(lo, size)
        if hi is not None or bounded:
            limits['max'] = size if hi is None else max(hi, size)
        try:
            return Dim.AUTO(**limits) if limits else Dim.AUTO
        except TypeError:
            return Dim.AUTO
    specs = [{d: dim(x.shape[d], lo, hi) for d, (lo, hi) in getattr(x, '_trtmin_dynamic', {}).items()} or None if isinstance(x, torch.Tensor) else None for x in inputs]
    return tuple(specs) if any(specs) else None


def tensorrt_inputs(ep, inputs):
    """Torch-TensorRT's arg_inputs for `ep`, exported from `inputs`: an input whose dims stayed
    symbolic in the export (Dim.AUTO keeps static what the ops fix) as torch_tensorrt.Input
    over the export's range for them (opt: the example's size), the others as they are."""
    import torch_tensorrt
    names = [s.arg.name for s in ep.graph_signature.input_specs if s.kind.name == 'USER_INPUT']
    vals = {n.name: n.meta.get('val') for n in ep.graph.nodes if n.op == 'placeholder'}
    out = []
    for name, t in zip(names, inputs):
        val = vals.get(name)
        ranges = {d: ep.range_constraints.get(size.node.expr) for d, size in enumerate(getattr(val, 'shape', ())) if isinstance(size, torch.SymInt)} if isinstance(t, torch.Tensor) else {}
        ranges = {d: r for d, r in ranges.items() if r is not None}
        if not ranges:
            out.append(t)
            continue
        opt = list(t.shape)
        low, high = (list(opt), list(opt))
        for d, r in ranges.items():
            low[d] = max(1, min(int(r.lower), opt[d]))
            high[d] = max(int(r.upper), opt[d]) if r.upper.is_Integer else opt[d]
        out.append(torch_tensorrt.Input(min_shape=low, opt_shape=opt, max_shape=high, dtype=t.dtype))
    return out



class Repro(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer('b_freqs_cis', torch.randn((2, 2), generator=torch.Generator().manual_seed(2), dtype=torch.complex128).mul(0.8729).add(complex(0.4561, 0.1787)).to(torch.complex64))

    def forward(self, view_4, ge):
        b_freqs_cis = self.b_freqs_cis
        permute_3 = torch.ops.aten.permute.default(view_4, [2, 0, 3, 1, 4])
        unbind_3 = torch.ops.aten.unbind.int(permute_3)
        getitem_9 = unbind_3[0]
        getitem_10 = unbind_3[1]
        getitem_11 = unbind_3[2]
        reshape_10 = torch.ops.aten.reshape.default(getitem_9, [1, 2, 2, -1, 2])
        view_as_complex_6 = torch.ops.aten.view_as_complex.default(reshape_10)
        mul_6 = torch.ops.aten.mul.Tensor(view_as_complex_6, b_freqs_cis)
        view_as_real_6 = torch.ops.aten.view_as_real.default(mul_6)
        flatten_8 = torch.ops.aten.flatten.using_ints(view_as_real_6, -2)
        reshape_11 = torch.ops.aten.reshape.default(getitem_10, [1, 2, 2, -1, 2])
        view_as_complex_7 = torch.ops.aten.view_as_complex.default(reshape_11)
        mul_7 = torch.ops.aten.mul.Tensor(view_as_complex_7, b_freqs_cis)
        view_as_real_7 = torch.ops.aten.view_as_real.default(mul_7)
        flatten_9 = torch.ops.aten.flatten.using_ints(view_as_real_7, -2)
        scaled_dot_product_attention_3 = torch.ops.aten.scaled_dot_product_attention.default(flatten_8, flatten_9, getitem_11, ge)
        return (scaled_dot_product_attention_3,)


def make_inputs():
    return [
        torch.randn((1, 2, 3, 2, 4), generator=torch.Generator().manual_seed(0), dtype=torch.float64).mul(0.5828).add(-0.01545).to(torch.float32),  # view_4
        torch.rand((2, 2), generator=torch.Generator().manual_seed(1)) < 0.75,  # ge
    ]


def load_backend():
    return None


def compile_backend(module, inputs, backend):
    import torch_tensorrt
    gm, runtime_inputs, positions = module, list(inputs), list(range(len(inputs)))  # weights are buffers of Repro
    ep = torch.export.export(gm, tuple(runtime_inputs), dynamic_shapes=export_dynamic_shapes(runtime_inputs, True))
    compiled = torch_tensorrt.dynamo.compile(ep, arg_inputs=tensorrt_inputs(ep, runtime_inputs), min_block_size=1)
    return lambda *args: compiled(*[args[i] for i in positions])


def flatten(out):
    if isinstance(out, (list, tuple)):
        return [leaf for item in out for leaf in flatten(item)]
    return [out]


def max_error(expected, actual, exact=None):
    """(output index, max abs error, offending values, note) of the worst output, or None."""
    worst = None
    for i, (e, a) in enumerate(zip(expected, actual)):
        if not isinstance(e, torch.Tensor):
            if e != a:
                return i, float("inf"), 1, ""
            continue
        if e.shape != a.shape:
            return i, float("inf"), e.numel(), ""
        wide = torch.complex128 if e.is_complex() else torch.float64
        e64, a64 = e.detach().cpu().to(wide), a.detach().cpu().to(wide)
        diff = (e64 - a64).abs().nan_to_num(0.0, float("inf"), float("inf"))
        both_nan = e64.isnan() & a64.isnan()
        diff = torch.where(both_nan | (e64 == a64), torch.zeros_like(diff), diff)
        rounds = e.is_floating_point() or e.is_complex()
        rtol = RTOL if rounds else 0.0  # integers do not round
        bad = diff > ATOL + rtol * e64.abs().nan_to_num(0.0, 0.0, 0.0)
        note = ""
        if bad.any() and (worst is None or float(diff.max()) > worst[1]):
            worst = (i, float(diff.max()), int(bad.sum()), note)
    return worst


def non_finite(expected, actual):
    """The first output with non-finite values where eager is finite, as a message, or None."""
    for i, (e, a) in enumerate(zip(expected, actual)):
        if isinstance(e, torch.Tensor) and isinstance(a, torch.Tensor) and e.shape == a.shape:
            bad = torch.isfinite(e.cpu()) & ~torch.isfinite(a.cpu())
            if bad.any():
                return f"output {i} has {int(bad.sum())} non-finite values where eager is finite"
    return None

def outcome(expected, actual, exact=None):
    """(True, why) reproduced, (False, why) fixed, (None, why) failing another way."""
    lost = non_finite(expected, actual)  # trtmin's checks call that a nan, not this mismatch
    if lost:
        return None, lost
    worst = max_error(expected, actual, exact)
    if worst is None:
        return False, "the backend matches eager PyTorch"
    i, err, n, note = worst
    return True, f"output {i} differs from eager by max abs {err:.4g} ({n} values off{note})"

ERROR_PATTERN = ''


def exception_chain(e):
    """The exception and what it wraps (torch.compile wraps a backend's error)."""
    chain = []
    while e is not None and len(chain) < 8:
        chain.append(e)
        e = getattr(e, "inner_exception", None) or e.__cause__
    return chain


def prepare():
    """(module, inputs, eager's outputs, the float64 run's or None): everything before the
    backend is called."""
    inputs = [x.to(DEVICE) if isinstance(x, torch.Tensor) else x for x in make_inputs()]
    module = Repro().to(DEVICE)  # its weights too: written (or loaded) on the CPU
    with torch.no_grad():
        expected = flatten(module(*clone(inputs)))  # the eager half runs everywhere, so a broken script shows
        return module, inputs, expected, None


def clone(inputs):
    return [x.clone() if isinstance(x, torch.Tensor) else x for x in inputs]


def first_line(e):
    lines = [line.strip() for line in str(e).splitlines() if line.strip()]
    return f"{type(e).__name__}: {lines[0][:300] if lines else ''}".rstrip(": ")


def run():
    try:
        module, inputs, expected, exact = prepare()
    except Exception as e:  # a file beside the script is gone or eager fails here: no news about the bug
        print(f"SKIPPED: cannot run: {first_line(e)}")
        return 2
    eager = os.environ.get("TRTMIN_BACKEND") == "eager"
    missing = [name for name in REQUIRES if not any(importlib.util.find_spec(n) for n in name.split("|"))]
    if missing and not eager:
        print(f"SKIPPED: {', '.join(missing)} is not installed")
        return 2
    try:
        backend = None if eager else load_backend()
    except Exception as e:  # plugin.py gone from beside the script, a module not installed: not the bug
        print(f"SKIPPED: cannot run: the backend cannot be loaded: {first_line(e)}")
        return 2
    with torch.no_grad():
        try:
            compiled = module if eager else compile_backend(module, clone(inputs), backend)
            actual = flatten(compiled(*clone(inputs)))
            if DEVICE.startswith("cuda"):
                torch.cuda.synchronize()
        except Exception as e:  # the compiler failed: is it the same failure?
            chain = exception_chain(e)
            text = "\n".join(f"{type(x).__name__}: {x}" for x in chain)
            root = e  # the compiler's own error: what torch.compile's wrapper wraps, not its causes
            while getattr(root, "inner_exception", None) is not None:
                root = root.inner_exception
            error = first_line(root)
            if ERROR_PATTERN and re.search(ERROR_PATTERN, text):
                print(f"REPRODUCED: {error}")
                return 1
            print(f"CHANGED: fails differently now: {error}")
            return 3
    reproduced, message = outcome(expected, actual, exact)
    if reproduced is None:
        print(f"CHANGED: fails differently now: {message}")
        return 3
    print(("REPRODUCED: " if reproduced else "FIXED: ") + message)
    return 1 if reproduced else 0


def main():
    if DEVICE.startswith("cuda") and not torch.cuda.is_available():
        print("SKIPPED: no CUDA GPU is visible here")
        return 2
    return run()


if __name__ == "__main__":
    sys.exit(main())
