"""Planted compiler bugs, as torch.compile backends (the plugin signature).

Each plugin runs the graph it is given with an fx Interpreter and miscomputes (or
crashes) only when its trigger pattern is in the graph, so its minimal failing core
under cut-to-input is known exactly:

- crash_on_sin:        any aten.sin -> RuntimeError                  core: {sin}
- fails_on_any_program: RuntimeError on every graph: the plugin's mistake, no bug
- hangs_on_any_program: sleeps on every graph: the plugin's mistake, no bug
- crash_on_add:        aten.add.Tensor -> RuntimeError: a bug, though x + 1 shows it too
- mismatch_mul_exp:    aten.exp reading an aten.mul output -> x1.5   core: {mul, exp}
- mismatch_on_attention: attention's output -> x1.5                  core: {attention}
- nan_on_rsqrt:        aten.rsqrt -> NaN                              core: {rsqrt}
- segfault_on_tanh:    aten.tanh -> a null-pointer read (SIGSEGV)     core: {tanh}
- segfault_at_two_sites: aten.tanh -> SIGSEGV in _lower_tanh, aten.sin -> in _lower_sin:
                       two bugs; the host's is tanh's                core: {tanh}
- abort_on_tanh:       aten.tanh -> os.abort() (SIGABRT)              core: {tanh}
- hang_on_tanh:        aten.tanh -> sleeps forever                    core: {tanh}
- float32_inside:      bf16/fp16 kept in float32, rounded at the outputs: off eager's
                       per-op rounding everywhere, but no further from float64 than eager
- float32_inside_mul_exp: the same, and mismatch_mul_exp's x1.5       core: {mul, exp}
- crash_on_dynamic_softmax: aten.softmax over a symbolic size        core: {softmax}
"""

from __future__ import annotations

import ctypes
import os
import sys
import time
from typing import Any, Callable

import torch
from torch.fx import GraphModule, Interpreter, Node

aten = torch.ops.aten


def _has(gm: GraphModule, target: Any) -> bool:
    return any(n.op == "call_function" and n.target is target for n in gm.graph.nodes)


def _run(gm: GraphModule, interp: type[Interpreter] = Interpreter) -> Callable[..., Any]:
    return lambda *args: interp(gm).run(*args)


def crash_on_sin(gm: GraphModule, example_inputs: list[torch.Tensor]) -> Callable[..., Any]:
    if _has(gm, aten.sin.default):
        # raised from a cause, as converters do: the repro must print this error, not its cause
        raise RuntimeError("planted converter failure: no converter for aten::sin (node 17)") from KeyError("dim")
    return _run(gm)


class _NoSinConverter(Interpreter):
    """An engine build that walks the graph and has no converter for sin, as Torch-TensorRT's
    interpreter does for an op it cannot convert: torch.fx names the node in the error."""

    def run_node(self, n: Node) -> Any:
        if n.op == "call_function" and n.target is aten.sin.default:
            raise RuntimeError("planted: no converter for aten.sin.default")
        return super().run_node(n)


def converter_fails_on_sin(gm: GraphModule, example_inputs: list[torch.Tensor]) -> Callable[..., Any]:
    _NoSinConverter(gm).run(*example_inputs)
    return _run(gm)


def inductor_sin_lowering_fails(gm: GraphModule, example_inputs: list[torch.Tensor]) -> Callable[..., Any]:
    """Real Inductor (AOT, decompositions, its lowering) with one lowering broken: the error
    is Inductor's own LoweringException, as a lowering bug raises it."""
    from torch._inductor import config, lowering
    from torch._inductor.compile_fx import compile_fx

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("planted: the sin lowering fails")

    saved = {k: lowering.lowerings[k] for k in (aten.sin, aten.sin.default) if k in lowering.lowerings}
    lowering.lowerings.update({k: broken for k in saved})
    try:
        with config.patch(fx_graph_cache=False):  # a cached graph would skip the lowering
            return compile_fx(gm, example_inputs)
    finally:
        lowering.lowerings.update(saved)


class _ExpAfterMul(Interpreter):
    def run_node(self, n: Node) -> Any:
        out = super().run_node(n)
        src = n.args[0] if n.args else None
        if n.target is aten.exp.default and isinstance(src, Node) and src.target is aten.mul.Tensor:
            return out * 1.5
        return out


def mismatch_mul_exp(gm: GraphModule, example_inputs: list[torch.Tensor]) -> Callable[..., Any]:
    return _run(gm, _ExpAfterMul)


def mismatch_mul_exp_slow_when_localizing(gm: GraphModule, example_inputs: list[torch.Tensor]) -> Callable[..., Any]:
    """mismatch_mul_exp, but a graph of many outputs (localization's, every value an output)
    takes a minute to compile: a batch whose other run lands first."""
    outputs = next(n for n in gm.graph.nodes if n.op == "output").args[0]
    if len(outputs) > 3:
        time.sleep(60)
    return _run(gm, _ExpAfterMul)


class _IntAddAndMulExp(_ExpAfterMul):
    """Two independent bugs in two outputs: an integer add 10 high (a slot index) and the
    exp of a mul 1.5x (a float feature), as a policy's two heads met them."""

    def run_node(self, n: Node) -> Any:
        out = super().run_node(n)
        if n.target is aten.add.Tensor and isinstance(out, torch.Tensor) and not out.is_floating_point():
            return out + 10
        return out


def int_add_and_mul_exp(gm: GraphModule, example_inputs: list[torch.Tensor]) -> Callable[..., Any]:
    return _run(gm, _IntAddAndMulExp)


class _NanRsqrtAndMulExp(_ExpAfterMul):
    """Two bugs of two kinds in two outputs: rsqrt all NaN (a value head) and the exp of a
    mul 1.5x (the action head the user asks about with --oracle mismatch)."""

    def run_node(self, n: Node) -> Any:
        out = super().run_node(n)
        return torch.full_like(out, float("nan")) if n.target is aten.rsqrt.default else out


def nan_rsqrt_and_mul_exp(gm: GraphModule, example_inputs: list[torch.Tensor]) -> Callable[..., Any]:
    return _run(gm, _NanRsqrtAndMulExp)


class _SmallThenLarge(_ExpAfterMul):
    """Two bugs of other sizes: relu's values 0.01 high (upstream, the first value off) and
    1.5x from an exp of a mul (the error the user sees, 100s of times larger)."""

    def run_node(self, n: Node) -> Any:
        if n.target is aten.relu.default:
            return super().run_node(n) + 0.01
        return super().run_node(n)


def small_relu_large_exp(gm: GraphModule, example_inputs: list[torch.Tensor]) -> Callable[..., Any]:
    return _run(gm, _SmallThenLarge)


class _AmaxDropsNan(Interpreter):
    def run_node(self, n: Node) -> Any:
        if n.target is aten.amax.default:  # as ONNX Runtime's ReduceMax: a NaN is skipped, not propagated
            x, *rest = self.fetch_args_kwargs_from_env(n)[0]
            return aten.amax.default(torch.where(x.isnan(), float("-inf"), x), *rest)
        return super().run_node(n)


def amax_drops_nan(gm: GraphModule, example_inputs: list[torch.Tensor]) -> Callable[..., Any]:
    return _run(gm, _AmaxDropsNan)


def every_output_off_with_tanh(gm: GraphModule, example_inputs: list[torch.Tensor]) -> Callable[..., Any]:
    """x1.5 on every float output of a graph that holds tanh (a backend that scales its
    results when it meets tanh): with every value an output, the first value off is no tanh."""
    run = _run(gm)
    if not _has(gm, aten.tanh.default):
        return run
    return lambda *args: [o * 1.5 if isinstance(o, torch.Tensor) and o.is_floating_point() else o for o in run(*args)]


class _WrongAttention(Interpreter):
    def run_node(self, n: Node) -> Any:
        out = super().run_node(n)
        attention = isinstance(n.target, torch._ops.OpOverload) and "scaled_dot_product" in n.target.name()
        return out * 1.5 if attention and isinstance(out, torch.Tensor) else out


def mismatch_on_attention(gm: GraphModule, example_inputs: list[torch.Tensor]) -> Callable[..., Any]:
    return _run(gm, _WrongAttention)


class _NanRsqrt(Interpreter):
    def run_node(self, n: Node) -> Any:
        out = super().run_node(n)
        return torch.full_like(out, float("nan")) if n.target is aten.rsqrt.default else out


class _Float32(torch.overrides.TorchFunctionMode):
    """bf16 and fp16 tensors read and dtypes asked for become float32."""

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        low = (torch.bfloat16, torch.float16)

        def widen(x: Any) -> Any:
            if isinstance(x, torch.Tensor) and x.dtype in low:
                return x.float()
            if isinstance(x, torch.dtype) and x in low:
                return torch.float32
            return type(x)(widen(v) for v in x) if type(x) in (list, tuple) else x
        return func(*widen(args), **{k: widen(v) for k, v in (kwargs or {}).items()})


def _float32_inside(gm: GraphModule, interp: type[Interpreter]) -> Callable[..., Any]:
    """Runs in float32 and rounds only the outputs, to the dtypes eager returns: what a fused
    kernel with float32 accumulation does to a bf16 program."""
    def run(*args: Any) -> Any:
        with torch.no_grad():
            dtypes = [o.dtype if isinstance(o, torch.Tensor) else None for o in Interpreter(gm).run(*args)]
            with _Float32():
                outs = interp(gm).run(*args)
        return tuple(o.to(d) if d is not None else o for o, d in zip(outs, dtypes))
    return run


def float32_inside(gm: GraphModule, example_inputs: list[torch.Tensor]) -> Callable[..., Any]:
    return _float32_inside(gm, Interpreter)


def float32_inside_mul_exp(gm: GraphModule, example_inputs: list[torch.Tensor]) -> Callable[..., Any]:
    return _float32_inside(gm, _ExpAfterMul)


def nan_on_rsqrt(gm: GraphModule, example_inputs: list[torch.Tensor]) -> Callable[..., Any]:
    return _run(gm, _NanRsqrt)


def segfault_on_tanh(gm: GraphModule, example_inputs: list[torch.Tensor]) -> Callable[..., Any]:
    if _has(gm, aten.tanh.default):
        ctypes.string_at(0)  # reads address 0: SIGSEGV
    return _run(gm)


def _lower_tanh() -> None:
    ctypes.string_at(0)  # SIGSEGV, here


def _lower_sin() -> None:
    ctypes.string_at(0)  # SIGSEGV too, at another site: another bug


def segfault_at_two_sites(gm: GraphModule, example_inputs: list[torch.Tensor]) -> Callable[..., Any]:
    if _has(gm, aten.tanh.default):
        _lower_tanh()
    if _has(gm, aten.sin.default):
        _lower_sin()
    return _run(gm)


def abort_on_tanh(gm: GraphModule, example_inputs: list[torch.Tensor]) -> Callable[..., Any]:
    if _has(gm, aten.tanh.default):
        os.abort()
    return _run(gm)


def exit_on_tanh(gm: GraphModule, example_inputs: list[torch.Tensor]) -> Callable[..., Any]:
    if _has(gm, aten.tanh.default):
        os._exit(7)  # the process ends with a code, no signal, no Python exception
    return _run(gm)


def hang_on_tanh(gm: GraphModule, example_inputs: list[torch.Tensor]) -> Callable[..., Any]:
    if _has(gm, aten.tanh.default):
        while True:
            time.sleep(1)
    return _run(gm)


NOT_CALLABLE = 42


def cuda_oom_on_tanh(gm: GraphModule, example_inputs: list[torch.Tensor]) -> Callable[..., Any]:
    """A real CUDA out-of-memory: asks the GPU for 1 PiB."""
    if _has(gm, aten.tanh.default):
        torch.empty(2**50, dtype=torch.uint8, device="cuda")
    return _run(gm)


def cuda_bad_index_on_tanh(gm: GraphModule, example_inputs: list[torch.Tensor]) -> Callable[..., Any]:
    """An out-of-bounds index inside a CUDA kernel: a device-side assert that leaves the
    CUDA context unusable, so the worker must be replaced."""
    if _has(gm, aten.tanh.default):
        table = torch.zeros(4, device="cuda")
        table[torch.tensor([1 << 30], device="cuda")].sum().item()
    return _run(gm)


def crash_on_add(gm: GraphModule, example_inputs: list[torch.Tensor]) -> Callable[..., Any]:
    if _has(gm, aten.add.Tensor):
        raise RuntimeError("no converter for aten.add.Tensor")  # a compiler's bug, in the one-op control x + 1 too
    return _run(gm)


def fails_on_any_program(gm: GraphModule, example_inputs: list[torch.Tensor]) -> Callable[..., Any]:
    raise RuntimeError("cannot open /dev/npu0")  # its own set-up's mistake, whatever the model


def hangs_on_any_program(gm: GraphModule, example_inputs: list[torch.Tensor]) -> Callable[..., Any]:
    while True:  # waits for a device that never answers, whatever the model: no bug to reduce
        time.sleep(1)


def crash_on_custom_op(gm: GraphModule, example_inputs: list[torch.Tensor]) -> Callable[..., Any]:
    """No converter for a custom op of tests/plugins/custom_op_lib.py (this plugin does not
    import it: trtmin --import must), called itself or through auto_functionalized."""
    if any(n.op == "call_function" and "trtmin_test" in str((n.target, n.args)) for n in gm.graph.nodes):
        raise RuntimeError("planted: no converter for trtmin_test::twice")
    return _run(gm)


def crash_on_sin_in_trtmins_workers_only(gm: GraphModule, example_inputs: list[torch.Tensor]) -> Callable[..., Any]:
    """A bug that needs the state of the process it runs in (here: trtmin's modules loaded):
    its repro, run alone, passes."""
    if "minimize" in sys.modules and _has(gm, aten.sin.default):
        raise RuntimeError("planted: fails only inside trtmin's workers")
    return _run(gm)


def crash_on_sin_when_configured(gm: GraphModule, example_inputs: list[torch.Tensor]) -> Callable[..., Any]:
    """A plugin configured from the environment, under a name that starts like trtmin's own
    (as the benchmark's TRTMIN_BENCH_COMPILE_SECONDS): without it, the sin passes."""
    if os.environ.get("TRTMIN_PLANTED_CRASH") == "sin" and _has(gm, aten.sin.default):
        raise RuntimeError("planted: sin is not supported (configured)")
    return _run(gm)


def crash_on_linear(gm: GraphModule, example_inputs: list[torch.Tensor]) -> Callable[..., Any]:
    """A failing converter for a node with weights: the repro must carry them."""
    if _has(gm, aten.linear.default):
        raise NotImplementedError("planted: linear with a constant weight is not supported")
    return _run(gm)


def error_code_on_tanh(gm: GraphModule, example_inputs: list[torch.Tensor]) -> Callable[..., Any]:
    """A runtime that fails with an error code, as ExecuTorch's does ("execute() failed with
    error 0x12"); PLANTED_ERROR_CODE sets the code, as another release would."""
    if _has(gm, aten.tanh.default):
        code = os.environ.get("PLANTED_ERROR_CODE", "0x12")
        raise RuntimeError(f"method->execute() failed with error {code} (program at {hex(id(gm))})")
    return _run(gm)


def crash_on_wide_layer_norm(gm: GraphModule, example_inputs: list[torch.Tensor]) -> Callable[..., Any]:
    """A converter that fails on layer_norm at any width but 1: its shape is in the graph."""
    if any(n.target == aten.layer_norm.default and list(n.args[1]) != [1] for n in gm.graph.nodes):
        raise NotImplementedError("planted: layer_norm is not supported")
    return _run(gm)


def _state_file(name: str) -> str:
    return os.path.join(os.environ["TRTMIN_TEST_STATE"], name)


def sigkill_once_then_mismatch(gm: GraphModule, example_inputs: list[torch.Tensor]) -> Callable[..., Any]:
    """The worker is killed from outside (SIGKILL) in the middle of its first call, then
    behaves like mismatch_mul_exp: the kill must be a retry, not a verdict."""
    marker = _state_file("killed")
    if not os.path.exists(marker):
        open(marker, "w").close()
        os.kill(os.getpid(), 9)
    return _run(gm, _ExpAfterMul)


def host_oom_on_tanh(gm: GraphModule, example_inputs: list[torch.Tensor]) -> Callable[..., Any]:
    """Asks for 8 GiB of host memory: over --memory-limit, an allocation failure. Left empty:
    with no limit (repro.py that forgot it) the pages are never touched, so it costs nothing."""
    if _has(gm, aten.tanh.default):
        torch.empty(8 * 2**30, dtype=torch.uint8)
    return _run(gm)


def flaky_crash_on_tanh(gm: GraphModule, example_inputs: list[torch.Tensor]) -> Callable[..., Any]:
    """Crashes on aten.tanh in every other compile only (a process-wide counter), like a
    builder that fails in 12 of 22 builds."""
    if _has(gm, aten.tanh.default):
        import fcntl
        with open(_state_file("count"), "a+") as f:
            fcntl.flock(f, fcntl.LOCK_EX)
            f.seek(0)
            n = len(f.read())
            f.write("x")
        if n % 2 == 0:
            raise RuntimeError("planted flaky failure: tactic selection failed for tanh")
    return _run(gm)


def crash_on_dynamic_softmax(gm: GraphModule, example_inputs: list[torch.Tensor]) -> Callable[..., Any]:
    """A converter that cannot take softmax over a symbolic size, as Torch-TensorRT's attention
    and split converters could not take a dynamic text length (pytorch/TensorRT#5037): the
    same graph at static sizes compiles."""
    for n in gm.graph.nodes:
        if n.op == "call_function" and n.target is aten.softmax.int:
            val = n.args[0].meta.get("example_value")
            if isinstance(val, torch.Tensor) and any(isinstance(d, torch.SymInt) for d in val.shape):
                raise NotImplementedError("planted: softmax over a dynamic dimension is not supported")
    return _run(gm)


def pass_fails_on_tanh(gm: GraphModule, example_inputs: list[torch.Tensor]) -> Callable[..., Any]:
    """A compiler pass that fails inside a pass manager, as torch.fx's and ExecuTorch's
    wrap it: a bare Exception naming the pass, from the pass's own error, here a bare
    `assert` (no message); PLANTED_PASS_ERROR names another error type, as another bug would."""
    if _has(gm, aten.tanh.default):
        cause = {"ValueError": ValueError("'w_fused' is not in list")}.get(os.environ.get("PLANTED_PASS_ERROR", ""),
                                                                           AssertionError())
        raise Exception("An error occurred when running the 'PlantedPass' pass after the following passes: []") \
            from cause
    return _run(gm)


def wrong_shape_on_exp(gm: GraphModule, example_inputs: list[torch.Tensor]) -> Callable[..., Any]:
    """Outputs one dimension too many where the graph has an exp: a mismatch with no max abs."""
    run = _run(gm)
    if not _has(gm, aten.exp.default):
        return run
    return lambda *args: tuple(o.unsqueeze(0) if isinstance(o, torch.Tensor) else o for o in run(*args))


def crash_on_sin_then_disk_full(gm: GraphModule, example_inputs: list[torch.Tensor]) -> Callable[..., Any]:
    """crash_on_sin's bug, but from the third compile on the disk is full (OSError ENOSPC, as
    a compiler's temporary file meets it) until TRTMIN_TEST_STATE/freed exists: no verdict."""
    import errno
    import fcntl
    with open(_state_file("compiles"), "a+") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        f.seek(0)
        n = len(f.read())
        f.write("x")
    if n >= 2 and not os.path.exists(_state_file("freed")):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), "/tmp/torchinductor_user/cache.tmp")
    return crash_on_sin(gm, example_inputs)


def hang_on_tanh_with_a_child(gm: GraphModule, example_inputs: list[torch.Tensor]) -> Callable[..., Any]:
    """hang_on_tanh, having started a helper process first (as a compiler starts a linker or
    a build server), whose pid it writes to TRTMIN_TEST_STATE/child: killed for the hang,
    the worker must not leave it running."""
    if _has(gm, aten.tanh.default):
        import subprocess
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
        with open(_state_file("child"), "w") as f:
            f.write(str(child.pid))
        while True:
            time.sleep(1)
    return _run(gm)
