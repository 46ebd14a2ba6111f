"""A view above 8 dimensions is left to the runtime as aten._reshape_copy.

Upstream: reported from the ExecuTorch CUDA (AOTInductor) delegate path:
    Method forward missing fallback kernels: aten::_reshape_copy
(the error text is ExecuTorch's CudaBackend). No upstream PR is known to us.

Bug: x.view(2, 1, 2, 3, 8, 2, 16, 8, 2, 16) has 10 dimensions, above
TensorRT's 8-dimension limit. Torch-TensorRT decomposes aten.view into
aten._reshape_copy and, being unable to convert it, leaves that node to run
outside TensorRT. In PyTorch that still runs, so under Torch-TensorRT alone
the numbers are right and the symptom is the leftover node; a runtime with
no _reshape_copy kernel (ExecuTorch's CUDA backend) then fails to load.

Oracle: crash (proxy). REPRODUCED when the compiled module still contains an
aten._reshape_copy node executed outside TensorRT, or when compiling/running
raises an error that names _reshape_copy. FIXED when it runs, matches eager
(atol 1e-5, rtol 1e-5) and leaves no _reshape_copy outside TensorRT.
Anything else (another exception, a wrong result): CHANGED, exit 3.

Run:   python repro.py                       # Torch-TensorRT on CUDA
       TRTMIN_BACKEND=eager python repro.py  # the "backend" is eager PyTorch
                                             # (checks the script: must print FIXED)
Exit:  0 FIXED, 1 REPRODUCED, 2 SKIPPED (cannot run here), 3 CHANGED (fails, but not as this bug);
       an "ERROR: ..." line with exit 3: the script itself broke.
"""
import importlib
import os
import sys

try:
    import torch
except ImportError as exc:
    print(f"SKIPPED: torch is not importable: {exc}")
    sys.exit(2)

EAGER = os.environ.get("TRTMIN_BACKEND", "").strip().lower() == "eager"
VIEW = (2, 1, 2, 3, 8, 2, 16, 8, 2, 16)  # 10 dims; 786432 elements


class TenDimView(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = (x * 2.0).view(*VIEW)
        return y.sum(dim=(1, 3))  # back to 8 dims


def make_inputs() -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    return [torch.randn(4, 96, 2048, generator=g)]


def eager_half() -> torch.Tensor:
    inputs = make_inputs()
    ref = TenDimView()(*inputs)
    assert ref.shape == (2, 2, 8, 2, 16, 8, 2, 16) and torch.isfinite(ref).all()
    ep = torch.export.export(TenDimView(), tuple(inputs))  # the program the backend gets
    assert torch.allclose(ep.module()(*inputs), ref)
    return ref


def leftover_reshape_copy(mod: torch.nn.Module) -> list[str]:
    """Names of aten._reshape_copy nodes in graphs that run outside TensorRT."""
    return [
        f"{name or '<top>'}.{node.name}"
        for name, sub in mod.named_modules()
        if isinstance(sub, torch.fx.GraphModule)
        for node in sub.graph.nodes
        if node.op == "call_function" and "_reshape_copy" in str(node.target)
    ]


def run_backend(inputs: list[torch.Tensor]) -> tuple[torch.Tensor, list[str]]:
    if EAGER:
        dev = "cuda" if torch.cuda.is_available() else "cpu"
        mod = torch.export.export(TenDimView(), tuple(t.to(dev) for t in inputs)).module()
        return mod(*[t.to(dev) for t in inputs]).cpu(), leftover_reshape_copy(mod)
    import torch_tensorrt

    cuda_inputs = [t.cuda() for t in inputs]
    ep = torch.export.export(TenDimView(), tuple(cuda_inputs))
    trt_mod = torch_tensorrt.dynamo.compile(ep, arg_inputs=cuda_inputs, min_block_size=1)
    return trt_mod(*cuda_inputs).cpu(), leftover_reshape_copy(trt_mod)


def skip_reason() -> str | None:
    if EAGER:
        return None
    try:
        importlib.import_module("torch_tensorrt")  # is it importable here?
    except ModuleNotFoundError as exc:
        if exc.name == "torch_tensorrt":
            return "torch_tensorrt is not installed"
        return f"torch_tensorrt cannot be imported: {exc}"
    except Exception as exc:
        return f"torch_tensorrt cannot be imported: {type(exc).__name__}: {exc}"
    if not torch.cuda.is_available():
        return "no CUDA GPU"
    return None


def main() -> int:
    try:
        ref = eager_half()
    except Exception as exc:
        print(f"ERROR: eager half failed: {type(exc).__name__}: {exc}")
        return 3
    reason = skip_reason()
    if reason:
        print(f"SKIPPED: {reason}")
        return 2
    try:
        out, leftovers = run_backend(make_inputs())
    except Exception as exc:
        msg = f"{type(exc).__name__}: {exc}".splitlines()[0][:300]
        if "_reshape_copy" in str(exc):
            print(f"REPRODUCED: the 10-dim view failed as _reshape_copy: {msg}")
            return 1
        print(f"CHANGED: backend failed in another way: {msg}")
        return 3
    if leftovers:
        print(f"REPRODUCED: the 10-dim view runs outside TensorRT as aten._reshape_copy ({', '.join(leftovers)})")
        return 1
    if out.shape == ref.shape and torch.allclose(out, ref, atol=1e-5, rtol=1e-5):
        print("FIXED: the 10-dim view compiles, matches eager and leaves no aten._reshape_copy behind")
        return 0
    print("CHANGED: no _reshape_copy left behind, but the output differs from eager (a different bug)")
    return 3


if __name__ == "__main__":
    try:
        code = main()
    except Exception as exc:  # an uncaught exception would exit 1 (= REPRODUCED)
        print(f"ERROR: unexpected {type(exc).__name__}: {exc}")
        code = 3
    sys.exit(code)
