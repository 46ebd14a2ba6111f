"""torch_tensorrt min_block_size=1 mismatch on cuda: scaled_dot_product_attention.default: MISMATCH: output 0
differs from eager by max abs 0.9013 (max rel 472.9) (16 of 32 values off, dtype float32). trtmin 0.1.0 (git
5858aa7) cut video_policy.pt2 from 241 to 1 call node in 10 oracle calls on torch 2.11.0+cu130, device cuda
(NVIDIA H100 80GB HBM3).
Exit 1 REPRODUCED, 0 FIXED, 2 SKIPPED, 3 CHANGED. TRTMIN_BACKEND=eager: eager PyTorch for the backend (FIXED)."""
import os
import sys
try:
    import torch
except ImportError:  # no torch: cannot run here, which is no verdict on the bug
    sys.exit(print("SKIPPED: torch cannot be imported") or 2)
DEVICE, ATOL, RTOL = 'cuda', 0.01, 0.001
REQUIRES = ['torch_tensorrt']  # packages the backend imports ("a|b": either); `trtmin repros run` reads it: SKIPPED at once without them


class Repro(torch.nn.Module):
    def forward(self, flatten_2, flatten_3, getitem_2, ge):
        scaled_dot_product_attention = torch.ops.aten.scaled_dot_product_attention.default(flatten_2, flatten_3, getitem_2, ge)
        return (scaled_dot_product_attention,)


def compile_backend(module, inputs):
    import torch_tensorrt
    ep = torch.export.export(module, tuple(inputs))  # the weights are buffers of Repro
    return torch_tensorrt.dynamo.compile(ep, arg_inputs=list(inputs), min_block_size=1)


def make_inputs():
    return [torch.randn((1, 2, 2, 8), generator=torch.Generator().manual_seed(0), dtype=torch.float64).mul(0.5871).add(-0.02513).to(torch.float32),  # flatten_2
            torch.randn((1, 2, 2, 8), generator=torch.Generator().manual_seed(1), dtype=torch.float64).mul(0.5757).add(-0.01105).to(torch.float32),  # flatten_3
            torch.randn((1, 2, 2, 8), generator=torch.Generator().manual_seed(2), dtype=torch.float64).mul(0.5804).add(-0.01388).to(torch.float32),  # getitem_2
            torch.rand((2, 2), generator=torch.Generator().manual_seed(3)) < 0.75]  # ge


def outcome(expected, actual, exact=None):
    off, lost = [], ""  # (max abs error, output, values off, note) of each output that is off; a NaN output
    for i, (e, a) in enumerate(zip(expected, actual)):
        if not isinstance(e, torch.Tensor) or not isinstance(a, torch.Tensor) or e.shape != a.shape:  # all off
            off += [(float("inf"), i, "all", "")] if isinstance(e, torch.Tensor) or e != a else []
            continue
        e64, a64 = (x.detach().cpu().to(torch.complex128 if e.is_complex() else torch.float64) for x in (e, a))
        if (e64.isfinite() & ~a64.isfinite()).any():
            lost = lost or f"output {i} has non-finite values where eager is finite"
            continue
        rtol, ints = (RTOL if e.is_floating_point() or e.is_complex() else 0.0), ATOL < 1 and not any(x.is_floating_point() or x.is_complex() for x in (e, a))  # integers do not round
        bad = ~torch.isclose(a64, e64, rtol=rtol, atol=ATOL, equal_nan=True) | (ints & (e.cpu() != a.cpu()))  # off by > ATOL + rtol * |eager|; 2**60 + 1 too
        err = torch.where(bad, (e64 - a64).abs().nan_to_num(float("inf"), float("inf")).clamp_min(float(ints)), 0)  # the values off; a lost inf or NaN: inf
        at = tuple(int(k) for k in torch.unravel_index(err.argmax(), err.shape)) if bad.any() else ()  # the worst
        off += [(float(err.max()), i, f"{int(bad.sum())} of {bad.numel()}", f"; at {list(at)}: eager {e64[at]:.4g}, backend {a64[at]:.4g}")] if bad.any() else []
    if not off:  # a NaN where eager is finite, and nothing off: trtmin's NaN bug, not this one
        return ("CHANGED: fails differently now", lost) if lost else ("FIXED", "the backend matches eager PyTorch")
    return "REPRODUCED", "output {1} differs from eager by max abs {0:.4g} ({2} values off{3})".format(*max(off, key=lambda o: o[0]))


@torch.no_grad()
def main():
    def call(module):  # module's outputs on a copy of the inputs, as a list
        out = module(*[x.clone() if isinstance(x, torch.Tensor) else x for x in inputs])
        return list(out) if isinstance(out, (list, tuple)) else [out]
    try:  # the eager half runs everywhere, so a broken script shows
        inputs = [x.to(DEVICE) if isinstance(x, torch.Tensor) else x for x in make_inputs()]
        expected = call(module := Repro().to(DEVICE))
    except Exception as e:  # no GPU, a file beside the script gone, or eager fails here: no news of the bug
        return "SKIPPED: cannot run", e
    try:
        actual = call(module if os.environ.get("TRTMIN_BACKEND") == "eager" else compile_backend(module, inputs))
        torch.cuda.synchronize()  # a kernel's error shows here
    except Exception as e:  # the compiler failed: is it the same failure?
        missing = any(isinstance(x, ImportError) for x in (e, e.__cause__, getattr(e, "inner_exception", None)))  # raised or wrapped
        return ("SKIPPED" if missing else "CHANGED: fails differently now"), getattr(e, "inner_exception", None) or e
    return outcome(expected, actual) if len(actual) == len(expected) else ("REPRODUCED", f"the backend returns {len(actual)} outputs, eager {len(expected)}")


if __name__ == "__main__":
    verdict, why = main() if os.environ.get("TRTMIN_BACKEND", "eager") in ("", "eager") else ("SKIPPED", "TRTMIN_BACKEND takes eager alone (eager PyTorch for the backend)")
    why = f"{type(why).__name__}: {str(why).strip()}".rstrip(": ") if isinstance(why, BaseException) else why
    sys.exit(print(f"{verdict}: {why.splitlines()[0][:300]}") or {"FIXED": 0, "REPRODUCED": 1, "SKIPPED": 2, "CHANGED": 3}[verdict.split(":")[0]])
