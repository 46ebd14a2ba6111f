"""IIfConditional leaves output rows past the profile's opt size unwritten.

Upstream: TensorRT-only report (no public issue known to us).

Bug: input x float16 (-1, 6), optimization profile min/opt/max = 2/1000/300000
rows, an IIfConditional that picks x * 10 or x * 2. Run at 300,000 rows,
every output row from 1000 (the opt size) on keeps its old value, in 12 of
22 builds (flaky across builds). The report does not say where the
condition comes from; here it is a 0-D bool network input "use_ten".

Oracle: mismatch. Builds the engine N_BUILDS times (default 6, env
TRTMIN_BUILDS), runs each at 300,000 rows with use_ten True and False, and
fills the output with SENTINEL before every run so stale rows show.
Reference: numpy float16 x * 10 / x * 2 (atol 1e-2, rtol 1e-3). REPRODUCED
when any build is wrong (prints k of N and the first bad row); FIXED when
all are right. Needs tensorrt (or tensorrt_rtx), numpy and cuda-python (cuda.bindings, or the
older cuda.cudart) for device buffers.

Run:   python repro.py                       # TensorRT on a CUDA GPU
       TRTMIN_BACKEND=eager python repro.py  # numpy stands in for the engine
                                             # (checks the script: must print FIXED)
Exit:  0 FIXED, 1 REPRODUCED, 2 SKIPPED (cannot run here), 3 CHANGED (fails, but not as this bug);
       an "ERROR: ..." line with exit 3: the script itself broke.
"""
import os
import sys

try:
    import numpy as np
except ImportError as exc:
    print(f"SKIPPED: numpy is not importable: {exc}")
    sys.exit(2)

EAGER = os.environ.get("TRTMIN_BACKEND", "").strip().lower() == "eager"
N_BUILDS = int(os.environ.get("TRTMIN_BUILDS", "6"))
COLS, MIN_ROWS, OPT_ROWS, MAX_ROWS = 6, 2, 1000, 300_000
ROWS = MAX_ROWS
SENTINEL = np.float16(-999.0)


def make_input() -> np.ndarray:
    return np.random.RandomState(0).uniform(-1, 1, (ROWS, COLS)).astype(np.float16)


def reference(x: np.ndarray, use_ten: bool) -> np.ndarray:
    return x * np.float16(10 if use_ten else 2)


def wrong_rows(out: np.ndarray, ref: np.ndarray) -> np.ndarray:
    ok = np.isclose(out.astype(np.float32), ref.astype(np.float32), atol=1e-2, rtol=1e-3)
    return np.nonzero(~ok.all(axis=1))[0]


def load_cudart():
    try:
        from cuda.bindings import runtime as cudart
    except ImportError:
        from cuda import cudart  # older cuda-python
    return cudart


def check(result):  # cuda-python calls return (error, *values)
    if result[0] != type(result[0]).cudaSuccess:
        raise RuntimeError(f"CUDA error {result[0]}")
    return result[1] if len(result) > 1 else None


def build_engine(trt, logger) -> bytes:
    builder = trt.Builder(logger)
    flag = getattr(trt.NetworkDefinitionCreationFlag, "STRONGLY_TYPED", None)
    network = builder.create_network(0 if flag is None else 1 << int(flag))
    x = network.add_input("x", trt.float16, (-1, COLS))
    cond = network.add_if_conditional()
    cond.set_condition(network.add_input("use_ten", trt.bool, ()))
    xin = cond.add_input(x).get_output(0)
    ten, two = np.full((1, 1), 10, np.float16), np.full((1, 1), 2, np.float16)
    prod = trt.ElementWiseOperation.PROD
    then_y = network.add_elementwise(xin, network.add_constant((1, 1), ten).get_output(0), prod)
    else_y = network.add_elementwise(xin, network.add_constant((1, 1), two).get_output(0), prod)
    y = cond.add_output(then_y.get_output(0), else_y.get_output(0)).get_output(0)
    y.name = "y"
    network.mark_output(y)
    config = builder.create_builder_config()
    profile = builder.create_optimization_profile()
    profile.set_shape("x", (MIN_ROWS, COLS), (OPT_ROWS, COLS), (MAX_ROWS, COLS))
    config.add_optimization_profile(profile)
    plan = builder.build_serialized_network(network, config)
    if plan is None:
        raise RuntimeError("build_serialized_network returned None")
    return plan


def trt_builds(x: np.ndarray):
    """Yield one run(use_ten) -> output function per fresh TensorRT build."""
    trt = import_tensorrt()

    cudart = load_cudart()
    h2d, d2h = cudart.cudaMemcpyKind.cudaMemcpyHostToDevice, cudart.cudaMemcpyKind.cudaMemcpyDeviceToHost
    logger = trt.Logger(trt.Logger.WARNING)
    d_x, d_y, d_flag = (check(cudart.cudaMalloc(n)) for n in (x.nbytes, x.nbytes, 1))
    stream = check(cudart.cudaStreamCreate())
    flag = np.zeros((), np.bool_)
    check(cudart.cudaMemcpy(d_x, x.ctypes.data, x.nbytes, h2d))
    for _ in range(N_BUILDS):
        engine = trt.Runtime(logger).deserialize_cuda_engine(build_engine(trt, logger))
        ctx = engine.create_execution_context()
        ctx.set_input_shape("x", x.shape)
        ctx.set_tensor_address("x", int(d_x))
        ctx.set_tensor_address("y", int(d_y))
        on_host = engine.is_shape_inference_io("use_ten")  # TensorRT may want it on the host
        ctx.set_tensor_address("use_ten", flag.ctypes.data if on_host else int(d_flag))

        def run(use_ten: bool) -> np.ndarray:
            flag[...] = use_ten
            out = np.full_like(x, SENTINEL)
            check(cudart.cudaMemcpy(d_flag, flag.ctypes.data, 1, h2d))
            check(cudart.cudaMemcpy(d_y, out.ctypes.data, out.nbytes, h2d))  # stale marker
            if not ctx.execute_async_v3(int(stream)):
                raise RuntimeError("execute_async_v3 returned False")
            check(cudart.cudaStreamSynchronize(stream))
            check(cudart.cudaMemcpy(out.ctypes.data, d_y, out.nbytes, d2h))
            return out

        yield run


def numpy_builds(x: np.ndarray):
    """TRTMIN_BACKEND=eager: the same protocol; numpy writes every row."""
    for _ in range(N_BUILDS):
        def run(use_ten: bool) -> np.ndarray:
            out = np.full_like(x, SENTINEL)
            out[...] = reference(x, use_ten)
            return out
        yield run


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
    try:
        cudart = load_cudart()
    except ImportError:
        return "cuda-python (cuda.bindings) is not installed; it is needed for device buffers"
    err, count = cudart.cudaGetDeviceCount()
    return "no CUDA GPU" if err != type(err).cudaSuccess or count == 0 else None


def main() -> int:
    try:
        x = make_input()
        for use_ten in (True, False):
            ref = reference(x, use_ten)
            assert ref.shape == (ROWS, COLS) and np.isfinite(ref).all()
            assert len(wrong_rows(np.full_like(x, SENTINEL), ref)) == ROWS  # sentinel shows
        assert not np.array_equal(reference(x, True), reference(x, False))
    except Exception as exc:
        print(f"ERROR: reference half failed: {type(exc).__name__}: {exc}")
        return 3
    reason = skip_reason()
    if reason:
        print(f"SKIPPED: {reason}")
        return 2
    bad_builds, first_bad, stale = 0, ROWS, True
    try:
        for run in numpy_builds(x) if EAGER else trt_builds(x):
            wrong = False
            for use_ten in (True, False):
                out = run(use_ten)
                rows = wrong_rows(out, reference(x, use_ten))
                if len(rows):
                    wrong, first_bad = True, min(first_bad, int(rows[0]))
                    stale = stale and bool((out[rows] == SENTINEL).all())
            bad_builds += wrong
    except Exception as exc:
        print(f"CHANGED: backend failed (not this bug): {type(exc).__name__}: {exc}")
        return 3
    if bad_builds:
        what = "still hold the sentinel (never written)" if stale else "are wrong"
        print(f"REPRODUCED: {bad_builds} of {N_BUILDS} builds wrong at {ROWS} rows; "
              f"rows from {first_bad} on {what} (opt = {OPT_ROWS})")
        return 1
    stand_in = " (eager stand-in: numpy, no TensorRT)" if EAGER else ""
    print(f"FIXED: all {N_BUILDS} builds wrote all {ROWS} rows correctly{stand_in}")
    return 0


if __name__ == "__main__":
    try:
        code = main()
    except Exception as exc:  # an uncaught exception would exit 1 (= REPRODUCED)
        print(f"ERROR: unexpected {type(exc).__name__}: {exc}")
        code = 3
    sys.exit(code)
