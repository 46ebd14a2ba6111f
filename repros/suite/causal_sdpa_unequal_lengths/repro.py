"""Causal SDPA with fewer queries than keys uses a bottom-right causal mask.

Upstream: https://github.com/pytorch/TensorRT/pull/4964

Bug: F.scaled_dot_product_attention(q, k, v, is_causal=True) with query
length L != key length S. PyTorch aligns the causal mask top-left
(query i sees keys 0..i, i.e. torch.ones(L, S).tril()); the TensorRT engine
aligns it bottom-right (query i sees keys 0..i + S - L), as in decode.

Oracle: mismatch. Eager reference on CPU, float32, L = 5, S = 12.
REPRODUCED when the engine output differs from eager by more than
ATOL = 1e-2 (TF32-tolerant; the two alignments differ by order 1). The
distance to the bottom-right result is printed to identify the bug.

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
HEADS, Q_LEN, KV_LEN, HEAD_DIM = 2, 5, 12, 32
ATOL = 1e-2


class CausalAttention(torch.nn.Module):
    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)


def make_inputs() -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    q = torch.randn(1, HEADS, Q_LEN, HEAD_DIM, generator=g)
    k = torch.randn(1, HEADS, KV_LEN, HEAD_DIM, generator=g)
    v = torch.randn(1, HEADS, KV_LEN, HEAD_DIM, generator=g)
    return [q, k, v]


def eager_half() -> tuple[torch.Tensor, torch.Tensor]:
    q, k, v = inputs = make_inputs()
    ref = CausalAttention()(*inputs)
    assert ref.shape == (1, HEADS, Q_LEN, HEAD_DIM) and torch.isfinite(ref).all()
    top_left = torch.ones(Q_LEN, KV_LEN, dtype=torch.bool).tril()
    bottom_right = torch.ones(Q_LEN, KV_LEN, dtype=torch.bool).tril(diagonal=KV_LEN - Q_LEN)
    assert torch.allclose(ref, F.scaled_dot_product_attention(q, k, v, attn_mask=top_left), atol=1e-6)
    br = F.scaled_dot_product_attention(q, k, v, attn_mask=bottom_right)
    gap = (ref - br).abs().max().item()
    print(f"eager: top-left vs bottom-right causal max|diff| = {gap:.3f}")
    assert gap > 10 * ATOL, f"top-left and bottom-right too close ({gap})"
    ep = torch.export.export(CausalAttention(), tuple(inputs))  # what the backend gets
    assert torch.allclose(ep.module()(*inputs), ref, atol=1e-6)
    return ref, br


def run_backend(inputs: list[torch.Tensor]) -> torch.Tensor:
    if EAGER:
        dev = "cuda" if torch.cuda.is_available() else "cpu"
        return CausalAttention()(*[t.to(dev) for t in inputs]).cpu()
    import torch_tensorrt

    cuda_inputs = [t.cuda() for t in inputs]
    ep = torch.export.export(CausalAttention(), tuple(cuda_inputs))
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
        ref, bottom_right = eager_half()
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
    err = (out - ref).abs().max().item()
    err_br = (out - bottom_right).abs().max().item()
    detail = f"max|out - eager| = {err:.3g}, max|out - bottom-right| = {err_br:.3g} (atol {ATOL})"
    if err <= ATOL:
        print(f"FIXED: causal SDPA with L={Q_LEN} < S={KV_LEN} matches eager; {detail}")
        return 0
    print(f"REPRODUCED: causal SDPA with L={Q_LEN} < S={KV_LEN} differs from eager; {detail}")
    return 1


if __name__ == "__main__":
    try:
        code = main()
    except Exception as exc:  # an uncaught exception would exit 1 (= REPRODUCED)
        print(f"ERROR: unexpected {type(exc).__name__}: {exc}")
        code = 3
    sys.exit(code)
