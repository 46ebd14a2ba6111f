"""executorch:xnnpack mismatch on cpu: batch_norm.default, linear.default [Emitted for torch_tensorrt by trtmin;
the reduction was checked on cpu with another backend. It runs the program on cuda, where torch_tensorrt
runs.]: MISMATCH: output 0 differs from eager by max abs 2.187 (max rel 113.4) (40 of 50 values off, dtype
float32). trtmin 0.1.0 cut model.pt2 from 12 to 2 call nodes in 9 oracle calls on torch 2.13.0+cpu, device
cuda.
Exit 1 REPRODUCED, 0 FIXED, 2 SKIPPED, 3 CHANGED. TRTMIN_BACKEND=eager: eager PyTorch for the backend (FIXED)."""
import os
import sys
try:
    import torch
except ImportError:  # no torch: cannot run here, which is no verdict on the bug
    sys.exit(print("SKIPPED: torch cannot be imported") or 2)
DEVICE, ATOL, RTOL = 'cuda', 0.001, 0.001
REQUIRES = ['torch_tensorrt']  # packages the backend imports ("a|b": either); `trtmin repros run` reads it: SKIPPED at once without them


class Repro(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer('proj_weight', torch.randn((5, 2), generator=torch.Generator().manual_seed(1), dtype=torch.float64).mul(0.2226).add(-0.008264).to(torch.float32))
        self.register_buffer('proj_bias', torch.tensor([-0.21515106, 0.32080376, 0.2422901, -0.29814553, -0.0879939], dtype=torch.float32))
        self.register_buffer('bn_weight', torch.tensor([1.8478118, 1.372129, 1.8722184, 0.99856955, 1.4709165], dtype=torch.float32))
        self.register_buffer('bn_bias', torch.tensor([-0.2286762, -0.044471145, -0.6090442, 0.33820093, 0.31616592], dtype=torch.float32))
        self.register_buffer('bn_running_mean', torch.tensor([0.216048, -0.5611825, -0.8915758, 0.8768765, -0.6494112], dtype=torch.float32))
        self.register_buffer('bn_running_var', torch.tensor([1.1646788, 1.4648702, 1.2738937, 0.7453387, 0.6437587], dtype=torch.float32))

    def forward(self, add):
        linear_1 = torch.ops.aten.linear.default(add, self.proj_weight, self.proj_bias)
        batch_norm = torch.ops.aten.batch_norm.default(linear_1, self.bn_weight, self.bn_bias, self.bn_running_mean, self.bn_running_var, False, 0.1, 1e-05, False)
        return (batch_norm,)


def compile_backend(module, inputs):
    import torch_tensorrt
    ep = torch.export.export(module, tuple(inputs))  # the weights are buffers of Repro
    return torch_tensorrt.dynamo.compile(ep, arg_inputs=list(inputs), min_block_size=1)


def make_inputs():
    return [torch.randn((2, 5, 2), generator=torch.Generator().manual_seed(0), dtype=torch.float64).mul(1.092).add(-0.04976).to(torch.float32)]  # add


def outcome(expected, actual, exact=None):
    off = []  # (max abs error, output, values off, note) of each output that is off
    for i, (e, a) in enumerate(zip(expected, actual)):
        if not isinstance(e, torch.Tensor) or e.shape != a.shape:  # another value or shape: all off
            off += [(float("inf"), i, "all", "")] if isinstance(e, torch.Tensor) or e != a else []
            continue
        e64, a64 = (x.detach().cpu().to(torch.complex128 if e.is_complex() else torch.float64) for x in (e, a))
        if (e64.isfinite() & ~a64.isfinite()).any():
            return "CHANGED: fails differently now", f"output {i} has non-finite values where eager is finite"
        rtol = RTOL if e.is_floating_point() or e.is_complex() else 0.0  # integers do not round
        bad = ~torch.isclose(a64, e64, rtol=rtol, atol=ATOL, equal_nan=True)  # off by > ATOL + rtol * |eager|
        err = (e64 - a64).abs()[bad].nan_to_num(float("inf"))  # the values off; a lost inf or NaN: inf
        off += [(float(err.max()), i, f"{int(bad.sum())} of {bad.numel()}", "")] if bad.any() else []
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
        module = Repro().to(DEVICE)
        expected = call(module)
    except Exception as e:  # no GPU, a file beside the script gone, or eager fails here: no news of the bug
        return "SKIPPED: cannot run", e
    try:
        actual = call(module if os.environ.get("TRTMIN_BACKEND") == "eager" else compile_backend(module, inputs))
        torch.cuda.synchronize()  # a kernel's error shows here
    except Exception as e:  # the compiler failed: is it the same failure?
        missing = any(isinstance(x, ImportError) for x in (e, e.__cause__, getattr(e, "inner_exception", None)))  # raised or wrapped
        return ("SKIPPED" if missing else "CHANGED: fails differently now"), getattr(e, "inner_exception", None) or e
    return outcome(expected, actual)


if __name__ == "__main__":
    verdict, why = main()
    why = f"{type(why).__name__}: {str(why).strip()}".rstrip(": ") if isinstance(why, BaseException) else why
    print(f"{verdict}: {why.splitlines()[0][:300]}")
    sys.exit({"FIXED": 0, "REPRODUCED": 1, "SKIPPED": 2, "CHANGED": 3}[verdict.split(":")[0]])
