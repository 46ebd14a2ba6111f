#!/usr/bin/env python3
"""torch_tensorrt min_block_size=1 mismatch on cuda: <built-in function getitem>,
flatten.using_ints, mul.Tensor, permute.default, reshape.default, scaled_dot_product_attent:
MISMATCH: output 0 differs from eager by max abs 1.511 (max rel 6.117) (8 of 16 values off,
dtype float32). trtmin 0.1.0 cut video_policy.pt2 from 241 to 16 call nodes in 39 oracle calls
on torch 2.11.0+cu130, device cuda (NVIDIA H200).
Exit 1 REPRODUCED, 0 FIXED, 2 SKIPPED (cannot run here), 3 CHANGED (it fails another way).
TRTMIN_BACKEND=eager python repro.py runs eager PyTorch in place of the backend: FIXED."""
import os
import sys
import importlib
import importlib.util

try:
    import torch
except ImportError:  # no torch: cannot run here, which is no verdict on the bug
    sys.exit(print("SKIPPED: torch cannot be imported") or 2)
DEVICE, ATOL, RTOL = 'cuda', 0.01, 0.001
REQUIRES = ['torch_tensorrt']  # packages the backend needs ("a|b": either)


class Repro(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer('b_freqs_cis', torch.randn((2, 2), generator=torch.Generator().manual_seed(2), dtype=torch.complex128).mul(0.8729).add(complex(0.4561, 0.1787)).to(torch.complex64))

    def forward(self, view_1, ge):
        b_freqs_cis = self.b_freqs_cis
        permute = torch.ops.aten.permute.default(view_1, [2, 0, 3, 1, 4])
        unbind = torch.ops.aten.unbind.int(permute)
        getitem = unbind[0]
        getitem_1 = unbind[1]
        getitem_2 = unbind[2]
        reshape_1 = torch.ops.aten.reshape.default(getitem, [1, 2, 2, -1, 2])
        view_as_complex = torch.ops.aten.view_as_complex.default(reshape_1)
        mul = torch.ops.aten.mul.Tensor(view_as_complex, b_freqs_cis)
        view_as_real = torch.ops.aten.view_as_real.default(mul)
        flatten_2 = torch.ops.aten.flatten.using_ints(view_as_real, -2)
        reshape_2 = torch.ops.aten.reshape.default(getitem_1, [1, 2, 2, -1, 2])
        view_as_complex_1 = torch.ops.aten.view_as_complex.default(reshape_2)
        mul_1 = torch.ops.aten.mul.Tensor(view_as_complex_1, b_freqs_cis)
        view_as_real_1 = torch.ops.aten.view_as_real.default(mul_1)
        flatten_3 = torch.ops.aten.flatten.using_ints(view_as_real_1, -2)
        scaled_dot_product_attention = torch.ops.aten.scaled_dot_product_attention.default(flatten_2, flatten_3, getitem_2, ge)
        return (scaled_dot_product_attention,)


def compile_backend(module, inputs):
    import torch_tensorrt
    gm, runtime_inputs, positions = module, list(inputs), list(range(len(inputs)))  # weights are buffers of Repro
    ep = torch.export.export(gm, tuple(runtime_inputs), dynamic_shapes=export_dynamic_shapes(runtime_inputs, True))
    compiled = torch_tensorrt.dynamo.compile(ep, arg_inputs=tensorrt_inputs(ep, runtime_inputs), min_block_size=1)
    return lambda *args: compiled(*[args[i] for i in positions])


def make_inputs():
    return [
        torch.randn((1, 2, 3, 2, 4), generator=torch.Generator().manual_seed(0), dtype=torch.float64).mul(0.5812).add(-0.01189).to(torch.float32),  # view_1
        torch.rand((2, 2), generator=torch.Generator().manual_seed(1)) < 0.75,  # ge
    ]


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


def outcome(expected, actual, exact=None):
    off = []  # (max abs error, output, values off, note) of each output that is off
    for i, (e, a) in enumerate(zip(expected, actual)):
        if not isinstance(e, torch.Tensor) or e.shape != a.shape:  # another value or shape: all off
            off += [(float("inf"), i, "all", "")] if isinstance(e, torch.Tensor) or e != a else []
            continue
        e64, a64 = (x.detach().cpu().to(torch.complex128 if e.is_complex() else torch.float64) for x in (e, a))
        if (e64.isfinite() & ~a64.isfinite()).any():
            return None, f"output {i} has non-finite values where eager is finite"
        rtol = RTOL if e.is_floating_point() or e.is_complex() else 0.0  # integers do not round
        bad = ~torch.isclose(a64, e64, rtol=rtol, atol=ATOL, equal_nan=True)  # off by > ATOL + rtol * |eager|
        if bad.any():
            err = float((e64 - a64).abs()[bad].nan_to_num(float("inf")).max())  # a lost inf or NaN: inf
            off.append((err, i, f"{int(bad.sum())} of {bad.numel()}", ""))
    if not off:
        return False, "the backend matches eager PyTorch"
    return True, "output {1} differs from eager by max abs {0:.4g} ({2} values off{3})".format(*max(off, key=lambda o: o[0]))


def say(verdict, why):
    text = f"{type(why).__name__}: {str(why).strip()}".rstrip(": ") if isinstance(why, BaseException) else why
    print(f"{verdict}: {text.splitlines()[0][:300]}")
    return {"FIXED": 0, "REPRODUCED": 1, "SKIPPED": 2, "CHANGED": 3}[verdict.split(":")[0]]


def call(module, inputs):
    out = module(*[x.clone() if isinstance(x, torch.Tensor) else x for x in inputs])
    return list(out) if isinstance(out, (list, tuple)) else [out]


@torch.no_grad()
def main():
    eager = os.environ.get("TRTMIN_BACKEND") == "eager"
    if DEVICE.startswith("cuda") and not torch.cuda.is_available():
        return say("SKIPPED", "no CUDA GPU is visible here")
    try:  # the eager half runs everywhere, so a broken script shows
        inputs = [x.to(DEVICE) if isinstance(x, torch.Tensor) else x for x in make_inputs()]
        module = Repro().to(DEVICE)
        expected = call(module, inputs)
    except Exception as e:  # a file beside the script is gone, or eager fails here: no news of the bug
        return say("SKIPPED: cannot run", e)
    missing = [name for name in REQUIRES if not any(importlib.util.find_spec(n) for n in name.split("|"))]
    if missing and not eager:
        return say("SKIPPED", f"{', '.join(m.replace('|', ' or ') for m in missing)} is not installed")
    try:
        actual = call(module if eager else compile_backend(module, inputs), inputs)
        torch.cuda.synchronize()  # a kernel's error shows here
    except Exception as e:  # the compiler failed: is it the same failure?
        return say("CHANGED: fails differently now", getattr(e, "inner_exception", None) or e)
    reproduced, why = outcome(expected, actual)
    return say({True: "REPRODUCED", False: "FIXED", None: "CHANGED: fails differently now"}[reproduced], why)


if __name__ == "__main__":
    sys.exit(main())
