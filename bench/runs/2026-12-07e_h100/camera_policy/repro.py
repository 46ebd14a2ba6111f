"""torch_tensorrt min_block_size=1 crash on cuda: div.Tensor, permute.default, to.dtype: CRASH: ValueError:
__len__() should return >= 0. trtmin 0.1.0 (git 5858aa7) cut camera_policy.pt2 from 207 to 3 call nodes in 12
oracle calls on torch 2.11.0+cu130, device cuda (NVIDIA H100 80GB HBM3).
Exit 1 REPRODUCED, 0 FIXED, 2 SKIPPED, 3 CHANGED. TRTMIN_BACKEND=eager: eager PyTorch for the backend (FIXED)."""
import os
import re
import sys
import traceback
try:
    import torch
except ImportError:  # no torch: cannot run here, which is no verdict on the bug
    sys.exit(print("SKIPPED: torch cannot be imported") or 2)
DEVICE = 'cuda'
REQUIRES = ['torch_tensorrt']  # packages the backend imports ("a|b": either); `trtmin repros run` reads it: SKIPPED at once without them
ERROR_PATTERN = '__len__\\(\\)\\s+should\\s+return\\s+>=\\s+\\d+'  # the failure's text, as a regex


class Repro(torch.nn.Module):
    def forward(self, front):
        permute = torch.ops.aten.permute.default(front, [0, 3, 1, 2])
        to = torch.ops.aten.to.dtype(permute, torch.float32)
        div = torch.ops.aten.div.Tensor(to, 255.0)
        return (div,)


def compile_backend(module, inputs):
    import torch_tensorrt
    ep = torch.export.export(module, tuple(inputs))  # the weights are buffers of Repro
    return torch_tensorrt.dynamo.compile(ep, arg_inputs=list(inputs), min_block_size=1)


def make_inputs():
    return [torch.randint(0, 256, (1, 2, 2, 2), generator=torch.Generator().manual_seed(0), dtype=torch.uint8)]  # front


@torch.no_grad()
def main():
    def call(module):  # module's outputs on a copy of the inputs, as a list
        out = module(*[x.clone() if isinstance(x, torch.Tensor) else x for x in inputs])
        return list(out) if isinstance(out, (list, tuple)) else [out]
    try:  # the eager half runs everywhere, so a broken script shows
        inputs = [x.to(DEVICE) if isinstance(x, torch.Tensor) else x for x in make_inputs()]
        call(module := Repro().to(DEVICE))  # the bug is a failure: eager must run, its values do not matter
    except Exception as e:  # no GPU, a file beside the script gone, or eager fails here: no news of the bug
        return "SKIPPED: cannot run", e
    try:
        call(module if os.environ.get("TRTMIN_BACKEND") == "eager" else compile_backend(module, inputs))
        torch.cuda.synchronize()  # a kernel's error shows here
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
    verdict, why = main() if os.environ.get("TRTMIN_BACKEND", "eager") in ("", "eager") else ("SKIPPED", "TRTMIN_BACKEND takes eager alone (eager PyTorch for the backend)")
    if isinstance(why, BaseException) and not verdict.startswith("SKIPPED"):  # where the compiler failed, for its
        traceback.print_exception(why)  # maintainers: on stderr, before the verdict line
    why = f"{type(why).__name__}: {str(why).strip()}".rstrip(": ") if isinstance(why, BaseException) else why
    sys.exit(print(f"{verdict}: {why.splitlines()[0][:300]}") or {"FIXED": 0, "REPRODUCED": 1, "SKIPPED": 2, "CHANGED": 3}[verdict.split(":")[0]])
