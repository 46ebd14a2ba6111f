"""executorch:portable crash on cpu: item.default, select.int: CRASH: GuardOnDataDependentSymNode: Could not
guard on data-dependent expression 100 <= -u10 - 1 (unhinted: 100 <= -u10 - 1).  (Size-like symbols: none).
trtmin 0.1.0 cut ddim.pt2 from 182 to 2 call nodes in 6 oracle calls on torch 2.13.0+cpu, device cpu.
Exit 1 REPRODUCED, 0 FIXED, 2 SKIPPED, 3 CHANGED. TRTMIN_BACKEND=eager: eager PyTorch for the backend (FIXED)."""
import os
import re
import sys
import traceback
try:
    import torch
except ImportError:  # no torch: cannot run here, which is no verdict on the bug
    sys.exit(print("SKIPPED: torch cannot be imported") or 2)
DEVICE = 'cpu'
REQUIRES = ['executorch']  # packages the backend imports ("a|b": either); `trtmin repros run` reads it: SKIPPED at once without them
ERROR_PATTERN = 'Could\\s+not\\s+guard\\s+on\\s+data\\-dependent\\s+expression\\s+\\d+\\s+<=\\s+\\-u\\d+\\s+\\-\\s+\\d+\\s+\\(unhinted:\\s+\\d+\\s+<=\\s+\\-u\\d+\\s+\\-\\s+\\d+\\)\\.\\s+\\(Size\\-like\\s+symbols:\\s+none\\)'  # the failure's text, as a regex


class Repro(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer('acp', torch.randn((100,), generator=torch.Generator().manual_seed(1), dtype=torch.float64).mul(0.2045).add(0.7418).to(torch.float32))

    def forward(self, select):
        item = torch.ops.aten.item.default(select)
        select_1 = torch.ops.aten.select.int(self.acp, 0, item)
        return (select_1,)


def compile_backend(module, inputs):
    from executorch.exir import to_edge_transform_and_lower
    from executorch.runtime import Runtime
    ep = torch.export.export(module, tuple(inputs))  # the weights are buffers of Repro
    pte = to_edge_transform_and_lower(ep).to_executorch()
    program = Runtime.get().load_program(pte.buffer)  # the lambda keeps it: forward's method needs it
    return lambda *args: list(program.load_method("forward").execute(args))  # on the CPU, as DEVICE is


def make_inputs():
    return [torch.tensor(80, dtype=torch.int64)]  # select


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
    print(f"{verdict}: {why.splitlines()[0][:300]}")
    sys.exit({"FIXED": 0, "REPRODUCED": 1, "SKIPPED": 2, "CHANGED": 3}[verdict.split(":")[0]])
