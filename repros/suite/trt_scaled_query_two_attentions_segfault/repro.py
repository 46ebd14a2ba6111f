"""TensorRT builder segfaults when one scaled query feeds two IAttention layers.

Upstream: TensorRT-only report (no public issue known to us); seen on
TensorRT 10.16 through 11.4.0.106, H100 and A100.

Bug: qs = q * c (c a constant) is read by two IAttention layers
(INetworkDefinition.add_attention). build_serialized_network crashes the
process with SIGSEGV. The same network builds with one attention, with no
scale (q fed directly), or with two different scale constants.
The report's network had 6 layers; its exact layers are not known to us.
This one is: constant c, q * c, attention(qs, k1, v1), attention(qs, k2, v2),
a1 + a2 (fp16, 1x8x128x64, strongly typed).

Oracle: crash. The build runs in a child process (this file with
--child VARIANT). REPRODUCED when the child dies by a signal. FIXED when the
child returns a serialized engine. A build that does not finish: CHANGED;
a build that returns None or any other child failure: ERROR. Both exit 3.
The engine is not executed.
Controls, by hand: python repro.py --child one_attention | no_scale | two_scales

Run:   python repro.py                       # TensorRT build on a CUDA GPU
       TRTMIN_BACKEND=eager python repro.py  # the child evaluates the network in
                                             # numpy instead (must print FIXED)
Exit:  0 FIXED, 1 REPRODUCED, 2 SKIPPED (cannot run here), 3 CHANGED (fails, but not as this bug);
       an "ERROR: ..." line with exit 3: the script itself broke.
"""
import os
import signal
import subprocess
import sys

try:
    import numpy as np
except ImportError as exc:
    print(f"SKIPPED: numpy is not importable: {exc}")
    sys.exit(2)

EAGER = os.environ.get("TRTMIN_BACKEND", "").strip().lower() == "eager"
SHAPE = (1, 8, 128, 64)  # batch, heads, tokens, head dim
SCALES = {"c": 0.125, "c2": 0.0625}
VARIANTS = ("bug", "one_attention", "no_scale", "two_scales")
CHILD_BUILT, CHILD_BUILD_NONE, CHILD_NO_GPU, CHILD_FAILED = 0, 4, 5, 6
TIMEOUT_S = 900


def make_inputs() -> dict[str, np.ndarray]:
    rng = np.random.RandomState(0)
    return {n: rng.standard_normal(SHAPE).astype(np.float16) for n in ("q", "k1", "v1", "k2", "v2")}


def np_attention(q: np.ndarray, k: np.ndarray, v: np.ndarray) -> np.ndarray:
    s = q.astype(np.float32) @ k.astype(np.float32).swapaxes(-1, -2)  # no scale inside
    p = np.exp(s - s.max(-1, keepdims=True))
    return (p / p.sum(-1, keepdims=True)) @ v.astype(np.float32)


def reference(variant: str, x: dict[str, np.ndarray]) -> np.ndarray:
    """numpy mirror of build_network(variant)."""
    q1 = x["q"] if variant == "no_scale" else x["q"] * np.float16(SCALES["c"])
    q2 = x["q"] * np.float16(SCALES["c2"]) if variant == "two_scales" else q1
    a1 = np_attention(q1, x["k1"], x["v1"])
    return a1 if variant == "one_attention" else a1 + np_attention(q2, x["k2"], x["v2"])


def build_network(trt, network, variant: str, keep: list) -> None:
    inp = {n: network.add_input(n, trt.float16, SHAPE) for n in ("q", "k1", "v1", "k2", "v2")}

    def scaled(name: str):
        keep.append(np.full((1, 1, 1, 1), SCALES[name], dtype=np.float16))  # must outlive build
        const = network.add_constant((1, 1, 1, 1), keep[-1]).get_output(0)
        return network.add_elementwise(inp["q"], const, trt.ElementWiseOperation.PROD).get_output(0)

    def attention(q, k, v):
        layer = network.add_attention(q, k, v, trt.AttentionNormalizationOp.SOFTMAX, False)
        if layer is None:
            raise RuntimeError("add_attention returned None")
        return layer.get_output(0)

    q1 = inp["q"] if variant == "no_scale" else scaled("c")
    q2 = scaled("c2") if variant == "two_scales" else q1
    out = attention(q1, inp["k1"], inp["v1"])
    if variant != "one_attention":
        a2 = attention(q2, inp["k2"], inp["v2"])
        out = network.add_elementwise(out, a2, trt.ElementWiseOperation.SUM).get_output(0)
    out.name = "out"
    network.mark_output(out)


def child(variant: str) -> int:
    if EAGER:  # the numpy mirror stands in for the TensorRT build
        out = reference(variant, make_inputs())
        print(f"eager stand-in: {variant} evaluated in numpy, shape {out.shape}")
        return CHILD_BUILT
    trt = import_tensorrt()

    logger = trt.Logger(trt.Logger.WARNING)
    reason: object = "trt.Builder() returned None"
    try:
        builder = trt.Builder(logger)
    except Exception as exc:  # no GPU / CUDA init failure
        builder, reason = None, exc
    if builder is None:
        print(f"cannot create a TensorRT builder: {reason}")
        return CHILD_NO_GPU
    flag = getattr(trt.NetworkDefinitionCreationFlag, "STRONGLY_TYPED", None)
    network = builder.create_network(0 if flag is None else 1 << int(flag))
    keep: list = []
    build_network(trt, network, variant, keep)
    name = ("TensorRT-RTX " if trt.__name__.startswith("tensorrt_rtx") else "TensorRT ") + trt.__version__
    print(f"{name}: {variant} network has {network.num_layers} layers; building")
    sys.stdout.flush()
    plan = builder.build_serialized_network(network, builder.create_builder_config())
    if plan is None:
        print("build_serialized_network returned None")
        return CHILD_BUILD_NONE
    print(f"built a {plan.nbytes}-byte engine")
    return CHILD_BUILT


def eager_half() -> None:
    x = make_inputs()
    for variant in VARIANTS:
        out = reference(variant, x)
        assert out.shape == SHAPE and np.isfinite(out).all(), variant
    assert not np.allclose(reference("bug", x), reference("two_scales", x))


def import_tensorrt():
    """NVIDIA's TensorRT, else TensorRT-RTX (module tensorrt_rtx, the same Python API)."""
    try:
        import tensorrt as trt
    except ImportError:
        import tensorrt_rtx as trt
    return trt


def skip_reason() -> str | None:
    if EAGER:
        return None
    try:
        import_tensorrt()
    except ImportError as exc:
        missing = exc.name in ("tensorrt", "tensorrt_rtx")
        return "neither tensorrt nor tensorrt_rtx is installed" if missing else f"tensorrt cannot be imported: {exc}"
    except Exception as exc:
        return f"tensorrt cannot be imported: {type(exc).__name__}: {exc}"
    return None


def main() -> int:
    try:
        eager_half()
    except Exception as exc:
        print(f"ERROR: eager half failed: {type(exc).__name__}: {exc}")
        return 3
    reason = skip_reason()
    if reason:
        print(f"SKIPPED: {reason}")
        return 2
    cmd = [sys.executable, os.path.abspath(__file__), "--child", "bug"]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        print(f"CHANGED: the build did not finish in {TIMEOUT_S} s (a hang, not this bug)")
        return 3
    for line in (proc.stdout + proc.stderr).strip().splitlines()[-6:]:
        print(f"  child| {line}")
    rc = proc.returncode
    if rc < 0:
        print(f"REPRODUCED: building one scaled query read by 2 IAttention layers killed the builder ({signal.Signals(-rc).name})")
        return 1
    if rc == CHILD_BUILT:
        stand_in = " (eager stand-in: numpy, no TensorRT)" if EAGER else ""
        print(f"FIXED: one scaled query read by 2 IAttention layers builds{stand_in}")
        return 0
    if rc == CHILD_NO_GPU:
        print("SKIPPED: no CUDA GPU (TensorRT could not create a builder)")
        return 2
    print(f"ERROR: the build child exited {rc} without a signal (build failure or script error)")
    return 3


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--child" and sys.argv[2] in VARIANTS:
        try:
            sys.exit(child(sys.argv[2]))
        except Exception as exc:
            print(f"child failed: {type(exc).__name__}: {exc}")
            sys.exit(CHILD_FAILED)
    try:
        code = main()
    except Exception as exc:  # an uncaught exception would exit 1 (= REPRODUCED)
        print(f"ERROR: unexpected {type(exc).__name__}: {exc}")
        code = 3
    sys.exit(code)
