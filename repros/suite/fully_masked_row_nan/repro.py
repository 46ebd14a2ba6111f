"""float32 attention with a fully masked query row returns NaN; PyTorch gives 0.

Upstream: https://github.com/pytorch/TensorRT/pull/4953 (routes such
attention to a decomposition that returns 0)

Bug: F.scaled_dot_product_attention with a boolean attn_mask in which one
query row masks out every key. PyTorch returns 0 for that row (checked here:
torch 2.13 CPU, bool mask, every SDPA backend); the TensorRT engine returns
NaN (softmax over all -inf).

Oracle: nan. Eager reference on CPU, float32; row FULL_ROW of the mask is
all False, the other rows are causal. REPRODUCED when the engine output
has any NaN/inf. FIXED when it is finite and matches eager (atol 1e-2,
TF32-tolerant), i.e. the masked row is 0. A finite but wrong result is a
different problem: CHANGED, exit 3.

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
    import torch.nn.functional as F
except ImportError as exc:
    print(f"SKIPPED: torch is not importable: {exc}")
    sys.exit(2)

EAGER = os.environ.get("TRTMIN_BACKEND", "").strip().lower() == "eager"
HEADS, SEQ, HEAD_DIM, FULL_ROW = 2, 8, 32, 3
ATOL = 1e-2


class MaskedAttention(torch.nn.Module):
    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)


def make_inputs() -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, HEADS, SEQ, HEAD_DIM, generator=g) for _ in range(3))
    mask = torch.ones(SEQ, SEQ, dtype=torch.bool).tril()
    mask[FULL_ROW] = False  # this query row may attend to nothing
    return [q, k, v, mask]


def eager_half() -> torch.Tensor:
    q, k, v, mask = inputs = make_inputs()
    ref = MaskedAttention()(*inputs)
    assert ref.shape == (1, HEADS, SEQ, HEAD_DIM) and torch.isfinite(ref).all()
    assert torch.equal(ref[:, :, FULL_ROW], torch.zeros_like(ref[:, :, FULL_ROW])), \
        "eager PyTorch no longer returns 0 for a fully masked row"
    # Manual softmax reference for the other rows.
    scores = (q @ k.transpose(-1, -2)) / HEAD_DIM**0.5
    manual = torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1) @ v
    rows = [i for i in range(SEQ) if i != FULL_ROW]
    assert torch.allclose(ref[:, :, rows], manual[:, :, rows], atol=1e-5)
    assert torch.isnan(manual[:, :, FULL_ROW]).all()  # naive softmax gives NaN there
    ep = torch.export.export(MaskedAttention(), tuple(inputs))  # what the backend gets
    assert torch.allclose(ep.module()(*inputs), ref, atol=1e-6)
    return ref


def run_backend(inputs: list[torch.Tensor]) -> torch.Tensor:
    if EAGER:
        dev = "cuda" if torch.cuda.is_available() else "cpu"
        return MaskedAttention()(*[t.to(dev) for t in inputs]).cpu()
    import torch_tensorrt

    cuda_inputs = [t.cuda() for t in inputs]
    ep = torch.export.export(MaskedAttention(), tuple(cuda_inputs))
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
        in_row = (~torch.isfinite(out[:, :, FULL_ROW])).sum().item()
        print(f"REPRODUCED: {bad} NaN/inf outputs ({in_row} in the fully masked row {FULL_ROW}); eager gives 0")
        return 1
    if out.shape == ref.shape and torch.allclose(out, ref, atol=ATOL, rtol=ATOL):
        print(f"FIXED: fully masked row {FULL_ROW} is 0 and the rest matches eager (atol {ATOL})")
        return 0
    row = out[:, :, FULL_ROW].abs().max().item()
    print(f"CHANGED: output finite but differs from eager (masked row max|out| = {row:.3g}); a different bug")
    return 3


if __name__ == "__main__":
    try:
        code = main()
    except Exception as exc:  # an uncaught exception would exit 1 (= REPRODUCED)
        print(f"ERROR: unexpected {type(exc).__name__}: {exc}")
        code = 3
    sys.exit(code)
