#!/usr/bin/env python3
"""executorch:xnnpack mismatch on cpu: batch_norm.default, linear.default [Emitted for executorch:portable by trtmin; the reduction was checked on cpu with another backend.]

MISMATCH: output 0 differs from eager by max abs 2.255 (max rel 13.79) (40 of 50 values off, dtype float32)

Reduced by trtmin 0.1.0 from model.pt2: 12 -> 2 call nodes in 8 oracle calls.
Reduced on: torch 2.13.0+cpu, Python 3.11.7, Linux-6.18.44-fc-v595-x86_64-with-glibc2.36, device cpu.
Backend: executorch:portable. Oracle: mismatch (atol 0.001, rtol 0.001).

Run:      python repro.py
          exit 1 = REPRODUCED, 0 = FIXED, 2 = cannot run here (no GPU, missing package or file),
          3 = CHANGED: it still fails, but differently (another error, a hang or a kill)
Control:  TRTMIN_BACKEND=eager python repro.py
          runs eager PyTorch in place of the backend, so it must print FIXED
"""

import importlib.util
import os
import pathlib
import re
import sys

try:
    import torch
except ImportError as exc:  # no torch here: cannot run, which is no verdict on the bug
    print(f"SKIPPED: torch cannot be imported: {exc}")
    sys.exit(2)

inf, nan = float("inf"), float("nan")
DEVICE = 'cpu'
ATOL, RTOL = 0.001, 0.001
REQUIRES = ['executorch']
def lower_to_pte(variant, gm, inputs, folder, options):
    """Export and lower to ExecuTorch; write model.pte (and any .ptd) into folder.
    Returns the .pte path. Shared, by source, with repro.py."""
    import pathlib
    folder = pathlib.Path(folder)
    if variant == 'tensorrt':
        import torch_tensorrt
        ep = torch.export.export(gm, tuple(inputs))
        trt_gm = torch_tensorrt.dynamo.compile(ep, arg_inputs=list(inputs), **options)
        torch_tensorrt.save(trt_gm, str(folder / 'model.pte'), output_format='executorch', arg_inputs=list(inputs), retrace=False)
        return folder / 'model.pte'
    from executorch.exir import EdgeCompileConfig, to_edge_transform_and_lower
    ep = torch.export.export(gm, tuple(inputs))
    config = None
    if variant == 'xnnpack':
        from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
        partitioners = [XnnpackPartitioner(**options)]
    elif variant == 'cuda':
        from executorch.backends.cuda.cuda_backend import CudaBackend
        from executorch.backends.cuda.cuda_partitioner import CudaPartitioner
        partitioners = [CudaPartitioner([CudaBackend.generate_method_name_compile_spec('forward')])]
        config = EdgeCompileConfig(_check_ir_validity=False)
    else:
        partitioners = []
    edge = to_edge_transform_and_lower(ep, partitioner=partitioners, compile_config=config)
    program = edge.to_executorch()
    with open(folder / 'model.pte', 'wb') as f:
        program.write_to_file(f)
    if getattr(program, '_tensor_data', None):
        program.write_tensor_data_to_file(str(folder))
    return folder / 'model.pte'


def load_pte(variant, pte):
    """Load a written .pte back; returns run(list of CPU tensors) -> list of outputs."""
    import pathlib
    pte = pathlib.Path(pte)
    if variant == 'tensorrt':
        import torch_tensorrt
        program = torch_tensorrt.load(str(pte), format='executorch')
        return lambda args: list(program.forward(*args))
    data = sorted(pte.parent.glob('*.ptd'))
    if data:
        from executorch.extension.pybindings.portable_lib import _load_for_executorch
        module = _load_for_executorch(str(pte), data_path=str(data[0]))
        return lambda args: list(module.forward(tuple(args)))
    from executorch.runtime import Runtime
    program = Runtime.get().load_program(pte.read_bytes())
    method = program.load_method('forward')
    return lambda args, program=program: list(method.execute(list(args)))



class Repro(torch.nn.Module):
    def __init__(self):
        super().__init__()
        tensors = torch.load(pathlib.Path(__file__).with_name('repro_inputs.pt'), weights_only=True)
        self.register_buffer('p_proj_weight', tensors['p_proj_weight'])
        self.register_buffer('p_proj_bias', torch.tensor([-0.21515105664730072, 0.32080376148223877, 0.24229009449481964, -0.2981455326080322, -0.08799389749765396], dtype=torch.float32).reshape((5,)))
        self.register_buffer('p_bn_weight', torch.tensor([1.8478118181228638, 1.372128963470459, 1.872218370437622, 0.9985695481300354, 1.470916509628296], dtype=torch.float32).reshape((5,)))
        self.register_buffer('p_bn_bias', torch.tensor([-0.2286761999130249, -0.044471144676208496, -0.6090441942214966, 0.3382009267807007, 0.3161659240722656], dtype=torch.float32).reshape((5,)))
        self.register_buffer('b_bn_running_mean', torch.tensor([0.216048002243042, -0.5611824989318848, -0.891575813293457, 0.8768764734268188, -0.6494112014770508], dtype=torch.float32).reshape((5,)))
        self.register_buffer('b_bn_running_var', torch.tensor([1.1646788120269775, 1.4648702144622803, 1.2738937139511108, 0.7453386783599854, 0.6437587141990662], dtype=torch.float32).reshape((5,)))

    def forward(self, add):
        p_proj_weight = self.p_proj_weight
        p_proj_bias = self.p_proj_bias
        p_bn_weight = self.p_bn_weight
        p_bn_bias = self.p_bn_bias
        b_bn_running_mean = self.b_bn_running_mean
        b_bn_running_var = self.b_bn_running_var
        linear_1 = torch.ops.aten.linear.default(add, p_proj_weight, p_proj_bias)
        batch_norm = torch.ops.aten.batch_norm.default(linear_1, p_bn_weight, p_bn_bias, b_bn_running_mean, b_bn_running_var, False, 0.1, 1e-05, False)
        return (batch_norm,)


def make_inputs():
    tensors = torch.load(pathlib.Path(__file__).with_name('repro_inputs.pt'), weights_only=True)
    return [
        tensors['add'],  # add
    ]


def load_backend():
    return None


def compile_backend(module, inputs, backend):
    import atexit, shutil, tempfile
    gm, runtime_inputs, positions = module, list(inputs), list(range(len(inputs)))  # weights are buffers of Repro
    folder = tempfile.mkdtemp(prefix="repro-et-")
    atexit.register(shutil.rmtree, folder, True)  # the .pte goes when the script ends
    pte = lower_to_pte('portable', gm, runtime_inputs, folder, {})
    run_pte = load_pte('portable', pte)
    return lambda *args: run_pte([args[i].cpu() if isinstance(args[i], torch.Tensor) else args[i] for i in positions])


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


def exception_chain(e):
    """The exception and what it wraps (torch.compile wraps a backend's error)."""
    chain = []
    while e is not None and len(chain) < 8:
        chain.append(e)
        e = getattr(e, "inner_exception", None) or e.__cause__
    return chain


def prepare():
    """(module, inputs, eager's outputs): everything before the backend is called."""
    inputs = [x.to(DEVICE) if isinstance(x, torch.Tensor) else x for x in make_inputs()]
    module = Repro()
    with torch.no_grad():
        expected = flatten(module(*clone(inputs)))  # the eager half runs everywhere, so a broken script shows
    return module, inputs, expected


def clone(inputs):
    return [x.clone() if isinstance(x, torch.Tensor) else x for x in inputs]


def first_line(e):
    lines = [line.strip() for line in str(e).splitlines() if line.strip()]
    return f"{type(e).__name__}: {lines[0][:300] if lines else ''}".rstrip(": ")


def run():
    try:
        module, inputs, expected = prepare()
    except Exception as e:  # a file beside the script is gone or eager fails here: no news about the bug
        print(f"SKIPPED: cannot run: {first_line(e)}")
        return 2
    eager = os.environ.get("TRTMIN_BACKEND") == "eager"
    missing = [name for name in REQUIRES if importlib.util.find_spec(name) is None]
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
    reproduced, message = outcome(expected, actual)
    print(("REPRODUCED: " if reproduced else "FIXED: ") + message)
    return 1 if reproduced else 0


def main():
    if DEVICE.startswith("cuda") and not torch.cuda.is_available():
        print("SKIPPED: no CUDA GPU is visible here")
        return 2
    return run()


if __name__ == "__main__":
    sys.exit(main())
