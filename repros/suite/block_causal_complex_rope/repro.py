"""Block-causal mask + complex RoPE becomes plain causal under Torch-TensorRT.

Upstream: https://github.com/pytorch/TensorRT/pull/4953

Bug: q and k go through a complex RoPE (view_as_complex * freqs -> view_as_real)
and then F.scaled_dot_product_attention with a *block*-causal boolean mask
(98 tokens, blocks of 49: token i sees every token of its own and earlier
blocks). The TensorRT engine computes plain causal attention instead.
Report: TensorRT differs from PyTorch by 1.01 (max abs), and matches a
plain causal mask to 1.3e-6. (Those figures are for the reporter's inputs;
this script uses its own seeded inputs, so its numbers differ.)

Oracle: mismatch. Eager reference on CPU in float32. REPRODUCED when the
engine output differs from the eager block-causal output by more than
ATOL = 1e-2 (loose enough for TF32 matmuls; the bug is of order 1).

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
SEQ, BLOCK, HEADS, HEAD_DIM = 98, 49, 2, 64
ATOL = 1e-2


def complex_rope(x: torch.Tensor, freqs: torch.Tensor) -> torch.Tensor:
    xc = torch.view_as_complex(x.float().reshape(*x.shape[:-1], -1, 2))
    return torch.view_as_real(xc * freqs).flatten(-2).type_as(x)


class Attn(torch.nn.Module):
    def __init__(self, block_causal: bool = True) -> None:
        super().__init__()
        self.block_causal = block_causal
        inv_freq = 1.0 / (10000.0 ** (torch.arange(0, HEAD_DIM, 2).float() / HEAD_DIM))
        angles = torch.arange(SEQ).float()[:, None] * inv_freq[None]
        self.register_buffer("freqs", torch.polar(torch.ones_like(angles), angles))

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        n = torch.arange(SEQ, device=q.device)
        if self.block_causal:
            mask = (n[:, None] // BLOCK) >= (n[None] // BLOCK)
        else:
            mask = n[:, None] >= n[None]
        q, k = complex_rope(q, self.freqs), complex_rope(k, self.freqs)
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)


def make_inputs() -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    return [torch.randn(1, HEADS, SEQ, HEAD_DIM, generator=g) for _ in range(3)]


def eager_half() -> tuple[torch.Tensor, torch.Tensor]:
    inputs = make_inputs()
    with torch.no_grad():
        ref = Attn(block_causal=True)(*inputs)
        plain = Attn(block_causal=False)(*inputs)
    assert ref.shape == (1, HEADS, SEQ, HEAD_DIM) and torch.isfinite(ref).all()
    gap = (ref - plain).abs().max().item()
    print(f"eager: block-causal vs plain-causal max|diff| = {gap:.3f}")
    # The bug is only visible if the two masks give materially different outputs.
    assert gap > 10 * ATOL, f"block-causal and plain-causal too close ({gap})"
    ep = torch.export.export(Attn(), tuple(inputs))  # the program the backend gets
    assert torch.allclose(ep.module()(*inputs), ref, atol=1e-5)
    return ref, plain


def run_backend(inputs: list[torch.Tensor]) -> torch.Tensor:
    if EAGER:
        dev = "cuda" if torch.cuda.is_available() else "cpu"
        with torch.no_grad():
            return Attn().to(dev)(*[t.to(dev) for t in inputs]).cpu()
    import torch_tensorrt

    model = Attn().cuda().eval()
    cuda_inputs = [t.cuda() for t in inputs]
    ep = torch.export.export(model, tuple(cuda_inputs))
    trt_mod = torch_tensorrt.dynamo.compile(ep, arg_inputs=cuda_inputs, min_block_size=1)
    with torch.no_grad():
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
        ref, plain = eager_half()
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
    err_plain = (out - plain).abs().max().item()
    detail = f"max|out - eager| = {err:.3g}, max|out - plain causal| = {err_plain:.3g} (atol {ATOL})"
    if err <= ATOL:
        print(f"FIXED: block-causal attention matches eager; {detail}")
        return 0
    print(f"REPRODUCED: block-causal attention differs from eager; {detail}")
    return 1


if __name__ == "__main__":
    try:
        code = main()
    except Exception as exc:  # an uncaught exception would exit 1 (= REPRODUCED)
        print(f"ERROR: unexpected {type(exc).__name__}: {exc}")
        code = 3
    sys.exit(code)
