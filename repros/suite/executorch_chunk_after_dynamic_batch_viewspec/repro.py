"""executorch:portable crash on cpu: cat.default, chunk.default, flatten.using_ints, linear.default,
mish.default, unsqueeze.default: CRASH: Exception: _ViewSpec is incompatible with its base on creation.  It
has shape_dynamism=0, but its base has shape_dynamism=1. trtmin 0.1.0 (git 035dc01) cut diffusion.pt2 from 186
to 8 call nodes in 38 oracle calls on torch 2.13.0+cpu, device cpu.
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
ERROR_PATTERN = '_ViewSpec\\s+is\\s+incompatible\\s+with\\s+its\\s+base\\s+on\\s+creation\\.\\s+It\\s+has\\s+shape_dynamism=\\d+,\\s+but\\s+its\\s+base\\s+has\\s+shape_dynamism=\\d+\\.'  # the failure's text, as a regex
DYNAMIC = {0: {0: (1, 16)}, 1: {0: (1, 16)}, 2: {0: (1, 16)}}  # input -> {dim: (min, max)}: sizes the program was exported with as dynamic (torch.export.Dim); the compile keeps them dynamic


class Repro(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer('down1_film_weight', torch.randn((2, 82), generator=torch.Generator().manual_seed(3), dtype=torch.float64).mul(0.06394).add(0.0005576).to(torch.float32))
        self.register_buffer('down1_film_bias', torch.randn((2,), generator=torch.Generator().manual_seed(4), dtype=torch.float64).mul(0.06162).add(-0.0009717).to(torch.float32))

    def forward(self, state, linear_1, cat):
        flatten_1 = torch.ops.aten.flatten.using_ints(state, 1)
        cat_2 = torch.ops.aten.cat.default([linear_1, cat, flatten_1], -1)
        mish_2 = torch.ops.aten.mish.default(cat_2)
        linear_2 = torch.ops.aten.linear.default(mish_2, self.down1_film_weight, self.down1_film_bias)
        unsqueeze_2 = torch.ops.aten.unsqueeze.default(linear_2, -1)
        chunk = torch.ops.aten.chunk.default(unsqueeze_2, 2, 1)
        getitem = chunk[0]
        getitem_1 = chunk[1]
        return (getitem, getitem_1)


def compile_backend(module, inputs):
    import atexit, shutil, tempfile
    gm, runtime_inputs, positions = module, list(inputs), list(range(len(inputs)))  # weights are buffers of Repro
    folder = tempfile.mkdtemp(prefix="repro-et-")
    atexit.register(shutil.rmtree, folder, True)  # the .pte goes when the script ends
    pte = lower_to_pte('portable', gm, runtime_inputs, folder, {})
    run_pte = load_pte('portable', pte)
    return lambda *args: run_pte([args[i].cpu() if isinstance(args[i], torch.Tensor) else args[i] for i in positions])


def make_inputs():
    return [torch.randn((2, 2, 9), generator=torch.Generator().manual_seed(0), dtype=torch.float64).mul(0.9277).add(-0.1748).to(torch.float32),  # state
            torch.randn((2, 32), generator=torch.Generator().manual_seed(1), dtype=torch.float64).mul(0.1555).add(-0.0247).to(torch.float32),  # linear_1
            torch.randn((2, 32), generator=torch.Generator().manual_seed(2), dtype=torch.float64).mul(0.0534).add(0.02149).to(torch.float32)]  # cat


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


def lower_to_pte(variant, gm, inputs, folder, options):
    import pathlib

    folder = pathlib.Path(folder)
    from executorch.exir import to_edge_transform_and_lower

    ep = torch.export.export(gm, tuple(inputs), dynamic_shapes=export_dynamic_shapes(inputs))
    partitioners, config = [], None  # the portable kernels, where no partitioner follows
    edge = to_edge_transform_and_lower(ep, partitioner=partitioners, compile_config=config)
    program = edge.to_executorch()
    with open(folder / "model.pte", "wb") as f:
        program.write_to_file(f)
    return folder / "model.pte"


def load_pte(variant, pte):
    import pathlib

    pte = pathlib.Path(pte)
    from executorch.runtime import Runtime

    program = Runtime.get().load_program(pte.read_bytes())  # holds the bytes: keep it alive
    method = program.load_method("forward")
    return lambda args, program=program: list(method.execute(list(args)))


def mark_dynamic(t, bounds):
    """t with the dims of `bounds` ({dim: (min, max or None)}: the export's) marked dynamic,
    for torch.compile and for the exporters; a dim of size 0 or 1 stays static, as torch
    specializes it."""
    if not isinstance(t, torch.Tensor) or not bounds:
        return t
    dims = {int(d): tuple(b) for d, b in bounds.items() if int(d) < t.dim() and t.shape[int(d)] > 1}
    if dims:
        setattr(t, '_trtmin_dynamic', dims)
        for d in dims:
            torch._dynamo.maybe_mark_dynamic(t, d)
    return t


def clone_marked(values):
    """Clones of `values`, their dynamic dims kept (a clone loses Dynamo's marks)."""
    return [mark_dynamic(v.clone(), getattr(v, '_trtmin_dynamic', {})) if isinstance(v, torch.Tensor) else v for v in values]


@torch.no_grad()
def main():
    def call(module):  # module's outputs on a copy of the inputs, as a list
        out = module(*clone_marked(inputs))  # with their dynamic dims
        return list(out) if isinstance(out, (list, tuple)) else [out]
    try:  # the eager half runs everywhere, so a broken script shows
        inputs = [x.to(DEVICE) if isinstance(x, torch.Tensor) else x for x in make_inputs()]
        inputs = [mark_dynamic(x, DYNAMIC.get(i, {})) for i, x in enumerate(inputs)]
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
    if type(why) is Exception and why.__cause__ is not None:  # a pass manager's: its pass's words after
        why = f"Exception: {why}: {type(why.__cause__).__name__}: {why.__cause__}"  # as trtmin words it
    why = f"{type(why).__name__}: {str(why).strip()}".rstrip(": ") if isinstance(why, BaseException) else why
    print(f"{verdict}: {why.splitlines()[0][:300]}")
    sys.exit({"FIXED": 0, "REPRODUCED": 1, "SKIPPED": 2, "CHANGED": 3}[verdict.split(":")[0]])
