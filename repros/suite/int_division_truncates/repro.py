"""x.shape[0] / 2 truncates to an integer inside a TensorRT engine.

Upstream: https://github.com/pytorch/TensorRT/pull/4964

Bug: with a dynamic batch dimension, Python true division of a symbolic size
(x.shape[0] / 2, a SymFloat in the exported graph: sym_size -> operator.truediv)
is computed in the engine as integer division. At x.shape[0] = 15 the engine
uses 7 instead of 7.5.

Oracle: mismatch. The module returns x * (x.shape[0] / 2); the script reads
the factor back as out / x. REPRODUCED when the output differs from eager by
more than atol 1e-4 + rtol 1e-4 (7 vs 7.5 is a 7% error); the factor is printed.
The dimension is dynamic (torch.export.Dim, profile 2 / 15 / 64) so the
division stays in the engine instead of being folded to a constant.

Run:   python repro.py                       # Torch-TensorRT on CUDA
       TRTMIN_BACKEND=eager python repro.py  # the "backend" is eager PyTorch
                                             # (checks the script: must print FIXED)
Exit:  0 FIXED, 1 REPRODUCED, 2 SKIPPED (cannot run here), 3 CHANGED (fails, but not as this bug);
       an "ERROR: ..." line with exit 3: the script itself broke.
"""
import operator
import importlib
import os
import sys

try:
    import torch
except ImportError as exc:
    print(f"SKIPPED: torch is not importable: {exc}")
    sys.exit(2)

EAGER = os.environ.get("TRTMIN_BACKEND", "").strip().lower() == "eager"
ROWS, COLS, MIN_ROWS, MAX_ROWS = 15, 4, 2, 64


class HalfBatchScale(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * (x.shape[0] / 2)


def make_inputs(rows: int = ROWS) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    return [torch.rand(rows, COLS, generator=g) + 0.5]  # in [0.5, 1.5): no zeros


def export(inputs: list[torch.Tensor]) -> torch.export.ExportedProgram:
    rows = torch.export.Dim("rows", min=MIN_ROWS, max=MAX_ROWS)
    return torch.export.export(HalfBatchScale(), tuple(inputs), dynamic_shapes=({0: rows},))


def eager_half() -> torch.Tensor:
    inputs = make_inputs()
    ref = HalfBatchScale()(*inputs)
    assert torch.allclose(ref / inputs[0], torch.full_like(ref, 7.5))  # 15 / 2 = 7.5
    ep = export(inputs)
    # The division must stay symbolic in the exported graph (not folded to 7.5).
    assert any(n.target is operator.truediv for n in ep.graph.nodes), "truediv not in graph"
    assert torch.allclose(ep.module()(*inputs), ref)
    x9 = make_inputs(9)[0]
    assert torch.allclose(ep.module()(x9) / x9, torch.full_like(x9, 4.5))  # dynamic
    return ref


def run_backend(inputs: list[torch.Tensor]) -> torch.Tensor:
    if EAGER:
        dev = "cuda" if torch.cuda.is_available() else "cpu"
        dev_inputs = [t.to(dev) for t in inputs]
        return export(dev_inputs).module()(*dev_inputs).cpu()
    import torch_tensorrt

    cuda_inputs = [t.cuda() for t in inputs]
    spec = torch_tensorrt.Input(
        min_shape=(MIN_ROWS, COLS), opt_shape=(ROWS, COLS), max_shape=(MAX_ROWS, COLS),
        dtype=torch.float32,
    )
    trt_mod = torch_tensorrt.dynamo.compile(export(cuda_inputs), arg_inputs=[spec], min_block_size=1)
    return trt_mod(*cuda_inputs).cpu()


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
    inputs = make_inputs()
    try:
        out = run_backend(inputs)
    except Exception as exc:
        print(f"CHANGED: backend failed (not this bug): {type(exc).__name__}: {exc}")
        return 3
    factor = (out / inputs[0]).mean().item()
    if out.shape == ref.shape and torch.allclose(out, ref, atol=1e-4, rtol=1e-4):
        print(f"FIXED: x.shape[0] / 2 at {ROWS} rows gives {factor:.4g} (eager 7.5)")
        return 0
    print(f"REPRODUCED: x.shape[0] / 2 at {ROWS} rows gives {factor:.4g} in the engine, eager 7.5")
    return 1


if __name__ == "__main__":
    try:
        code = main()
    except Exception as exc:  # an uncaught exception would exit 1 (= REPRODUCED)
        print(f"ERROR: unexpected {type(exc).__name__}: {exc}")
        code = 3
    sys.exit(code)
