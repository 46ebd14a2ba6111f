"""Softmax over a size-1 dimension followed by a matmul returns infinity.

Upstream: https://github.com/pytorch/TensorRT/pull/4964

Bug: softmax over a dimension of size 1 is identically 1, so
softmax(s, -1) @ v must equal v (broadcast over the query rows); this is
attention with a single key. The TensorRT engine returns inf instead.
The report gives no shapes; the ones below are this script's choice.

Oracle: nan (non-finite output). REPRODUCED when the engine output has any
inf/NaN. FIXED when it is finite and matches eager (atol 1e-3, rtol 1e-3).
A finite but wrong result is a different problem: CHANGED, exit 3.

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
BATCH, HEADS, QUERIES, HEAD_DIM = 2, 4, 16, 32


class SingleKeyAttention(torch.nn.Module):
    def forward(self, scores: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return torch.softmax(scores, dim=-1) @ v  # softmax over a size-1 dim


def make_inputs() -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    scores = torch.randn(BATCH, HEADS, QUERIES, 1, generator=g) * 4
    v = torch.randn(BATCH, HEADS, 1, HEAD_DIM, generator=g)
    return [scores, v]


def eager_half() -> torch.Tensor:
    inputs = make_inputs()
    ref = SingleKeyAttention()(*inputs)
    assert ref.shape == (BATCH, HEADS, QUERIES, HEAD_DIM) and torch.isfinite(ref).all()
    assert torch.equal(ref, inputs[1].expand_as(ref))  # softmax over size 1 is exactly 1
    ep = torch.export.export(SingleKeyAttention(), tuple(inputs))  # what the backend gets
    assert torch.allclose(ep.module()(*inputs), ref)
    return ref


def run_backend(inputs: list[torch.Tensor]) -> torch.Tensor:
    if EAGER:
        dev = "cuda" if torch.cuda.is_available() else "cpu"
        return SingleKeyAttention()(*[t.to(dev) for t in inputs]).cpu()
    import torch_tensorrt

    cuda_inputs = [t.cuda() for t in inputs]
    ep = torch.export.export(SingleKeyAttention(), tuple(cuda_inputs))
    trt_mod = torch_tensorrt.dynamo.compile(ep, arg_inputs=cuda_inputs, min_block_size=1)
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
    try:
        out = run_backend(make_inputs())
    except Exception as exc:
        print(f"CHANGED: backend failed (not this bug): {type(exc).__name__}: {exc}")
        return 3
    bad = (~torch.isfinite(out)).sum().item()
    if bad:
        print(f"REPRODUCED: {bad} of {out.numel()} outputs are inf/NaN (eager: all finite)")
        return 1
    if out.shape == ref.shape and torch.allclose(out, ref, atol=1e-3, rtol=1e-3):
        print("FIXED: softmax over a size-1 dim then matmul is finite and matches eager")
        return 0
    print("CHANGED: output is finite but differs from eager (a different bug)")
    return 3


if __name__ == "__main__":
    try:
        code = main()
    except Exception as exc:  # an uncaught exception would exit 1 (= REPRODUCED)
        print(f"ERROR: unexpected {type(exc).__name__}: {exc}")
        code = 3
    sys.exit(code)
