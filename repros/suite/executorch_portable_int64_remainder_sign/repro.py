"""executorch:portable mismatch on cpu: remainder.Scalar: MISMATCH: output 0 differs from eager by max abs 16 (10
of 16 values off, dtype int64). trtmin 0.1.0 cut executorch_portable_int64_remainder_sign.pt2 from 1 to 1 call
node in 1 oracle calls on torch 2.13.0+cpu, device cpu.
Exit 1 REPRODUCED, 0 FIXED, 2 SKIPPED, 3 CHANGED. TRTMIN_BACKEND=eager: eager PyTorch for the backend (FIXED)."""
import os
import sys
try:
    import torch
except ImportError:  # no torch: cannot run here, which is no verdict on the bug
    sys.exit(print("SKIPPED: torch cannot be imported") or 2)
DEVICE, ATOL, RTOL = 'cpu', 0.001, 0.001
REQUIRES = ['executorch']  # packages the backend imports ("a|b": either); `trtmin repros run` reads it: SKIPPED at once without them


class Repro(torch.nn.Module):
    def forward(self, sub):
        remainder = torch.ops.aten.remainder.Scalar(sub, 16)
        return (remainder,)


def compile_backend(module, inputs):
    from executorch.exir import to_edge_transform_and_lower
    from executorch.runtime import Runtime
    ep = torch.export.export(module, tuple(inputs))  # the weights are buffers of Repro
    pte = to_edge_transform_and_lower(ep).to_executorch()
    program = Runtime.get().load_program(pte.buffer)  # the lambda keeps it: forward's method needs it
    return lambda *args: list(program.load_method("forward").execute(args))  # on the CPU, as DEVICE is


def make_inputs():
    return [torch.tensor([-31, -28, -25, -22, -19, -16, -13, -10, -7, -4, -1, 2, 5, 8, 11, 14], dtype=torch.int64)]  # sub


def outcome(expected, actual, exact=None):
    off = []  # (max abs error, output, values off, note) of each output that is off
    for i, (e, a) in enumerate(zip(expected, actual)):
        if not isinstance(e, torch.Tensor) or not isinstance(a, torch.Tensor) or e.shape != a.shape:  # all off
            off += [(float("inf"), i, "all", "")] if isinstance(e, torch.Tensor) or e != a else []
            continue
        e64, a64 = (x.detach().cpu().to(torch.complex128 if e.is_complex() else torch.float64 if e.is_floating_point() else torch.int64) for x in (e, a))  # integers exactly: 2**60 + 1
        if (e64.isfinite() & ~a64.isfinite()).any():
            return "CHANGED: fails differently now", f"output {i} has non-finite values where eager is finite"
        rtol = RTOL if e.is_floating_point() or e.is_complex() else 0.0  # integers do not round
        bad = ~torch.isclose(a64, e64, rtol=rtol, atol=ATOL, equal_nan=True) if rtol else (e64 - a64).abs() > ATOL  # off by > ATOL + rtol * |eager|
        err = torch.where(bad, (e64 - a64).abs().nan_to_num(float("inf")), 0)  # the values off; a lost inf or NaN: inf
        at = tuple(int(k) for k in torch.unravel_index(err.argmax(), err.shape)) if bad.any() else ()  # the worst
        off += [(float(err.max()), i, f"{int(bad.sum())} of {bad.numel()}", f"; at {list(at)}: eager {e64[at]:.4g}, backend {a64[at]:.4g}")] if bad.any() else []
    if not off:
        return "FIXED", "the backend matches eager PyTorch"
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
    except Exception as e:  # the compiler failed: is it the same failure?
        missing = any(isinstance(x, ImportError) for x in (e, e.__cause__, getattr(e, "inner_exception", None)))  # raised or wrapped
        return ("SKIPPED" if missing else "CHANGED: fails differently now"), getattr(e, "inner_exception", None) or e
    return outcome(expected, actual) if len(actual) == len(expected) else ("CHANGED: fails differently now", f"the backend returns {len(actual)} outputs, eager {len(expected)}")


if __name__ == "__main__":
    verdict, why = main() if os.environ.get("TRTMIN_BACKEND", "eager") in ("", "eager") else ("SKIPPED", "TRTMIN_BACKEND takes eager alone (eager PyTorch for the backend)")
    why = f"{type(why).__name__}: {str(why).strip()}".rstrip(": ") if isinstance(why, BaseException) else why
    print(f"{verdict}: {why.splitlines()[0][:300]}")
    sys.exit({"FIXED": 0, "REPRODUCED": 1, "SKIPPED": 2, "CHANGED": 3}[verdict.split(":")[0]])
