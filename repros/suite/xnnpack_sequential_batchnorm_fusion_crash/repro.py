"""executorch:xnnpack crash on cpu: batch_norm.default, conv2d.default: CRASH: Exception: An error occurred when
running the 'FuseBatchNormPass' pass after the following passes: []: ValueError: '0_weight_fused_bn' is not in
list. trtmin 0.1.0 cut cnn.pt2 from 10 to 2 call nodes in 7 oracle calls on torch 2.13.0+cpu, device cpu.
Exit 1 REPRODUCED, 0 FIXED, 2 SKIPPED, 3 CHANGED. TRTMIN_BACKEND=eager: eager PyTorch for the backend (FIXED)."""
import os
import re
import sys
try:
    import torch
except ImportError:  # no torch: cannot run here, which is no verdict on the bug
    sys.exit(print("SKIPPED: torch cannot be imported") or 2)
DEVICE = 'cpu'
REQUIRES = ['executorch']  # packages the backend imports ("a|b": either); `trtmin repros run` reads it: SKIPPED at once without them
ERROR_PATTERN = "An\\s+error\\s+occurred\\s+when\\s+running\\s+the\\s+'FuseBatchNormPass'\\s+pass\\s+after\\s+the\\s+following\\s+passes:\\s+\\[\\]:\\s+ValueError:\\s+'\\d+_weight_fused_bn'\\s+is\\s+not\\s+in\\s+list"  # the failure's text, as a regex


class Repro(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer('0_weight', torch.randn((16, 2, 2, 2), generator=torch.Generator().manual_seed(1), dtype=torch.float64).mul(0.111).add(-0.001369).to(torch.float32))
        self.register_buffer('0_bias', torch.tensor([0.16334742, 0.012622485, -0.12826562, -0.06895197, 0.042024195, -0.14670818, 0.09561119, -0.17471959, -0.18500099, -0.18699618, -0.03904107, 0.12940978, -0.18214996, 0.15996204, -0.076984435, 0.056365576], dtype=torch.float32))
        self.register_buffer('1_weight', torch.tensor([1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0], dtype=torch.float32))
        self.register_buffer('1_bias', torch.tensor([0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0], dtype=torch.float32))
        self.register_buffer('1_running_mean', torch.tensor([0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0], dtype=torch.float32))
        self.register_buffer('1_running_var', torch.tensor([1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0], dtype=torch.float32))

    def forward(self, input):
        input_1 = input
        _0_weight = getattr(self, "0_weight")
        _0_bias = getattr(self, "0_bias")
        _1_weight = getattr(self, "1_weight")
        _1_bias = getattr(self, "1_bias")
        _1_running_mean = getattr(self, "1_running_mean")
        _1_running_var = getattr(self, "1_running_var")
        conv2d = torch.ops.aten.conv2d.default(input_1, _0_weight, _0_bias, [1, 1], [1, 1])
        batch_norm = torch.ops.aten.batch_norm.default(conv2d, _1_weight, _1_bias, _1_running_mean, _1_running_var, False, 0.1, 1e-05, False)
        return (batch_norm,)


def compile_backend(module, inputs):
    from executorch.exir import to_edge_transform_and_lower
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from executorch.runtime import Runtime
    ep = torch.export.export(module, tuple(inputs))  # the weights are buffers of Repro
    pte = to_edge_transform_and_lower(ep, partitioner=[XnnpackPartitioner()]).to_executorch()
    program = Runtime.get().load_program(pte.buffer)  # the lambda keeps it: forward's method needs it
    return lambda *args: list(program.load_method("forward").execute(args))  # on the CPU, as DEVICE is


def make_inputs():
    return [torch.randn((1, 2, 2, 2), generator=torch.Generator().manual_seed(0), dtype=torch.float64).mul(1.019).add(-0.02943).to(torch.float32)]  # input


@torch.no_grad()
def main():
    def call(module):  # module's outputs on a copy of the inputs, as a list
        out = module(*[x.clone() if isinstance(x, torch.Tensor) else x for x in inputs])
        return list(out) if isinstance(out, (list, tuple)) else [out]
    try:  # the eager half runs everywhere, so a broken script shows
        inputs = [x.to(DEVICE) if isinstance(x, torch.Tensor) else x for x in make_inputs()]
        module = Repro().to(DEVICE)
        call(module)  # the bug is a failure: eager must run, its values do not matter
    except Exception as e:  # no GPU, a file beside the script gone, or eager fails here: no news of the bug
        return "SKIPPED: cannot run", e
    try:
        call(module if os.environ.get("TRTMIN_BACKEND") == "eager" else compile_backend(module, inputs))
    except Exception as e:  # the compiler failed: is it the same failure?
        chain, x = [], e
        while x is not None and len(chain) < 8:  # torch.compile wraps the backend's error: match them all
            chain, x = [*chain, x], getattr(x, "inner_exception", None) or x.__cause__
        if re.search(ERROR_PATTERN, ": ".join(f"{type(x).__name__}: {str(x) or repr(x)}" for x in chain)):
            return "REPRODUCED", getattr(e, "inner_exception", None) or e  # the backend's own error
        missing = any(isinstance(x, ImportError) for x in (e, e.__cause__, getattr(e, "inner_exception", None)))  # raised or wrapped
        return ("SKIPPED" if missing else "CHANGED: fails differently now"), getattr(e, "inner_exception", None) or e
    return "FIXED", "compiled and ran without error"


if __name__ == "__main__":
    verdict, why = main()
    why = f"{type(why).__name__}: {str(why).strip()}".rstrip(": ") if isinstance(why, BaseException) else why
    print(f"{verdict}: {why.splitlines()[0][:300]}")
    sys.exit({"FIXED": 0, "REPRODUCED": 1, "SKIPPED": 2, "CHANGED": 3}[verdict.split(":")[0]])
