"""uint8 graph input permuted before a cast: "Could not get tensor shape."

Upstream: https://github.com/pytorch/TensorRT/pull/4953 (fixed there)

Bug: an HWC uint8 image input that is permuted to CHW *before* the cast to
float (img.permute(2, 0, 1).float(), the usual preprocessing) fails to
compile under Torch-TensorRT with
    RuntimeError: Could not get tensor shape.

Oracle: crash. REPRODUCED when compiling or running raises an error whose
text contains SIGNATURE. FIXED when it runs and the output equals eager
exactly (uint8 -> float32 is exact, tolerance 0). Any other failure or a
wrong result is a different problem: CHANGED, exit 3.
pass_through_build_failures=True so a conversion error is raised instead of
silently falling back to PyTorch.

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
SIGNATURE = "Could not get tensor shape"
H, W = 64, 48


class Preprocess(torch.nn.Module):
    def forward(self, img: torch.Tensor) -> torch.Tensor:
        return img.permute(2, 0, 1).float()


def make_inputs() -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    return [torch.randint(0, 256, (H, W, 3), dtype=torch.uint8, generator=g)]


def eager_half() -> torch.Tensor:
    inputs = make_inputs()
    ref = Preprocess()(*inputs)
    assert ref.shape == (3, H, W) and ref.dtype == torch.float32
    assert torch.equal(ref[1], inputs[0][:, :, 1].float())
    ep = torch.export.export(Preprocess(), tuple(inputs))  # the program the backend gets
    assert torch.equal(ep.module()(*inputs), ref)
    return ref


def run_backend(inputs: list[torch.Tensor]) -> torch.Tensor:
    if EAGER:
        dev = "cuda" if torch.cuda.is_available() else "cpu"
        return Preprocess()(*[t.to(dev) for t in inputs]).cpu()
    import torch_tensorrt

    cuda_inputs = [t.cuda() for t in inputs]
    ep = torch.export.export(Preprocess(), tuple(cuda_inputs))
    trt_mod = torch_tensorrt.dynamo.compile(
        ep, arg_inputs=cuda_inputs, min_block_size=1, pass_through_build_failures=True
    )
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
        msg = f"{type(exc).__name__}: {exc}".splitlines()[0][:300]
        if SIGNATURE in str(exc):
            print(f"REPRODUCED: compiling img.permute(2, 0, 1).float() raised {msg}")
            return 1
        print(f"CHANGED: backend failed, but not with {SIGNATURE!r}: {msg}")
        return 3
    if out.shape == ref.shape and out.dtype == ref.dtype and torch.equal(out, ref):
        print("FIXED: uint8 permute-then-cast compiles and matches eager exactly")
        return 0
    print(f"CHANGED: ran without {SIGNATURE!r} but the output differs from eager (a different bug)")
    return 3


if __name__ == "__main__":
    try:
        code = main()
    except Exception as exc:  # an uncaught exception would exit 1 (= REPRODUCED)
        print(f"ERROR: unexpected {type(exc).__name__}: {exc}")
        code = 3
    sys.exit(code)
