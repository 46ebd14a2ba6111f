"""Torch-TensorRT, `--backend torch_tensorrt`: torch.export the candidate, then
`torch_tensorrt.dynamo.compile(ep, arg_inputs=..., **settings)`.

Settings come from `--set KEY=VALUE` as strings. They are parsed to the types
Torch-TensorRT takes and checked against its option names: Torch-TensorRT itself
swallows unknown keyword arguments without a word (pytorch/TensorRT#5040; e.g.
`enabled_precisions`, removed in 2.13, is silently ignored there), so a typo would
quietly test the default configuration.

Nothing here imports torch_tensorrt at module import time; `trtmin --help` works
without it. This file was written against pytorch/TensorRT v2.13.0
(commit 64f0ed46c01c61fe2a7cc93b47f393c3a7da9f75) and checked against main at
d7f2062810df37e4bbcfc9065b5f44f09aca7156 (2.14.0a0). It runs on the GPU machine with
Torch-TensorRT-RTX 2.11.0 (tests/test_torch_tensorrt_gpu.py); CI has no GPU.
"""

from __future__ import annotations

import dataclasses
import inspect
import textwrap
from typing import Any, Callable, Sequence

import torch
import torch.fx as fx

from oracles.backends.base import Backend, ScriptPart, SnippetCall, args_tuple
from oracles.backend_setup import as_bool, as_int, check_packages, torch_tensorrt_installed, unknown_key_error
from oracles.dynamic import detached, export_dynamic_shapes, tensorrt_inputs
from oracles.errors import TrtminError

# dataclasses.fields(CompilationSettings) of pytorch/TensorRT v2.13.0, commit
# 64f0ed46c01c61fe2a7cc93b47f393c3a7da9f75, py/torch_tensorrt/dynamo/_settings.py.
# Used to validate --set keys where torch_tensorrt is not importable.
COMPILATION_SETTINGS_FIELDS_V2_13 = (
    "workspace_size", "min_block_size", "torch_executed_ops", "pass_through_build_failures",
    "max_aux_streams", "version_compatible", "optimization_level", "truncate_double",
    "use_fast_partitioner", "enable_experimental_decompositions", "device", "require_full_compilation",
    "disable_tf32", "assume_dynamic_shape_support", "sparse_weights", "engine_capability",
    "num_avg_timing_iters", "dla_sram_size", "dla_local_dram_size", "dla_global_dram_size", "dryrun",
    "hardware_compatible", "timing_cache_path", "lazy_engine_init", "cache_built_engines",
    "reuse_cached_engines", "use_fp32_acc", "refit_identical_engine_weights", "strip_engine_weights",
    "immutable_weights", "enable_weight_streaming", "enable_cross_compile_for_windows",
    "tiling_optimization_level", "l2_limit_for_tiling", "use_distributed_mode_trace",
    "offload_module_to_cpu", "enable_autocast", "autocast_low_precision_type", "autocast_excluded_nodes",
    "autocast_excluded_ops", "autocast_max_output_threshold", "autocast_max_depth_of_reduction",
    "autocast_calibration_dataloader", "enable_resource_partitioning", "cpu_memory_budget",
    "dynamically_allocate_resources", "decompose_attention", "attn_bias_is_causal",
    "fallback_data_dependent_ops",
)
# Keyword parameters of torch_tensorrt.dynamo.compile (v2.13.0, _compiler.py) that are
# not CompilationSettings fields, and the deprecated names it still reads from **kwargs.
COMPILE_ONLY_KWARGS_V2_13 = ("torch_executed_modules", "use_python_runtime", "engine_cache_dir",
                             "engine_cache_size", "custom_engine_cache")
DEPRECATED_KWARGS = ("debug", "truncate_long_and_double", "refit", "make_refittable")
# Not taken by compile(): the arguments trtmin passes itself.
RESERVED = {"exported_program", "inputs", "arg_inputs", "kwarg_inputs", "kwargs"}
# Options of older releases that 2.13 no longer has, with what to do instead.
REMOVED = {
    "enabled_precisions": "it was removed in Torch-TensorRT 2.13, which ignores it silently; the graph's own "
                          "dtypes decide now (or set enable_autocast=true autocast_low_precision_type=fp16)",
    "use_explicit_typing": "it was removed in Torch-TensorRT 2.13, where typing is always explicit",
    "make_refitable": "it was renamed; use immutable_weights=false",
    "use_strong_types": "it was renamed use_explicit_typing and then removed in 2.13",
    "precision": "it is from Torch-TensorRT 1.x; the graph's dtypes decide now",
}

# How a value given as a string is parsed, by option (types from _settings.py).
BOOL, INT, OPT_INT, FLOAT, STR, BOOL_OR_STR, DTYPE, DTYPE_SET, OP_SET, STR_SET, STR_LIST, ENGINE_CAP, OBJECT = (
    "bool", "int", "int or none", "float", "str", "bool or path", "dtype", "dtype list", "op list",
    "str list", "str list", "engine capability", "object")
KINDS: dict[str, str] = {
    **{k: BOOL for k in (
        "pass_through_build_failures", "version_compatible", "truncate_double", "use_fast_partitioner",
        "enable_experimental_decompositions", "require_full_compilation", "disable_tf32",
        "assume_dynamic_shape_support", "sparse_weights", "hardware_compatible", "lazy_engine_init",
        "cache_built_engines", "reuse_cached_engines", "use_fp32_acc", "refit_identical_engine_weights",
        "strip_engine_weights", "immutable_weights", "enable_weight_streaming",
        "enable_cross_compile_for_windows", "use_distributed_mode_trace", "offload_module_to_cpu",
        "enable_autocast", "enable_resource_partitioning", "dynamically_allocate_resources",
        "decompose_attention", "attn_bias_is_causal", "fallback_data_dependent_ops", "use_python_runtime",
        "use_complex_decomposition", "debug", "truncate_long_and_double", "refit", "make_refittable",
        "use_explicit_typing", "make_refitable")},
    **{k: INT for k in ("workspace_size", "min_block_size", "num_avg_timing_iters", "dla_sram_size",
                        "dla_local_dram_size", "dla_global_dram_size", "l2_limit_for_tiling", "engine_cache_size")},
    **{k: OPT_INT for k in ("max_aux_streams", "optimization_level", "autocast_max_depth_of_reduction",
                            "cpu_memory_budget")},
    "autocast_max_output_threshold": FLOAT,
    **{k: STR for k in ("timing_cache_path", "tiling_optimization_level", "engine_cache_dir", "device")},
    "dryrun": BOOL_OR_STR,
    "autocast_low_precision_type": DTYPE,
    "enabled_precisions": DTYPE_SET,
    **{k: OP_SET for k in ("torch_executed_ops", "autocast_excluded_ops")},
    **{k: STR_SET for k in ("autocast_excluded_nodes", "disabled_constant_fold_exclusions")},
    "torch_executed_modules": STR_LIST,
    "engine_capability": ENGINE_CAP,
    **{k: OBJECT for k in ("custom_engine_cache", "autocast_calibration_dataloader")},
}

DTYPES: dict[str, torch.dtype] = {
    "fp32": torch.float32, "float32": torch.float32, "float": torch.float32, "f32": torch.float32,
    "fp16": torch.float16, "float16": torch.float16, "half": torch.float16, "f16": torch.float16,
    "bf16": torch.bfloat16, "bfloat16": torch.bfloat16,
    "fp64": torch.float64, "float64": torch.float64, "double": torch.float64,
    "int8": torch.int8, "i8": torch.int8, "uint8": torch.uint8, "int32": torch.int32, "int64": torch.int64,
    "fp8": torch.float8_e4m3fn, "float8_e4m3fn": torch.float8_e4m3fn, "bool": torch.bool,
}
ENGINE_CAPABILITIES = ("STANDARD", "SAFETY", "DLA_STANDALONE")


class Expr(str):
    """A value that only exists where torch_tensorrt is importable, kept as source text
    (e.g. `torch_tensorrt.EngineCapability.STANDARD`) and evaluated at compile time."""


def check_available(spec: str = "torch_tensorrt") -> None:
    check_packages(spec)
    if not torch.cuda.is_available():
        raise TrtminError(f"backend {spec} needs an NVIDIA GPU, and torch {torch.__version__} sees none here; "
                          "run trtmin on a machine with a CUDA GPU and a CUDA build of torch")


def valid_option_names() -> tuple[tuple[str, ...], str]:
    """The option names compile() takes, and where the list came from."""
    if torch_tensorrt_installed():
        try:
            from torch_tensorrt.dynamo import compile as trt_compile
            from torch_tensorrt.dynamo._settings import CompilationSettings
        except Exception as e:  # a broken install: fall back to the static list, say so
            source = f"the list of Torch-TensorRT 2.13 (importing torch_tensorrt failed: {type(e).__name__})"
        else:
            names = {f.name for f in dataclasses.fields(CompilationSettings)}
            params = inspect.signature(trt_compile).parameters.values()
            names |= {p.name for p in params if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)}
            names |= set(DEPRECATED_KWARGS)
            import torch_tensorrt
            return tuple(sorted(names - RESERVED)), f"Torch-TensorRT {getattr(torch_tensorrt, '__version__', '?')}"
    else:
        source = "the list of Torch-TensorRT 2.13 (torch_tensorrt is not installed here)"
    names = set(COMPILATION_SETTINGS_FIELDS_V2_13) | set(COMPILE_ONLY_KWARGS_V2_13) | set(DEPRECATED_KWARGS)
    return tuple(sorted(names - RESERVED)), source


def _dtype(key: str, text: str) -> torch.dtype:
    name = text.strip().lower().removeprefix("torch.")
    if name not in DTYPES:
        raise TrtminError(f"--set {key}={text}: unknown dtype {text!r}; use one of fp32, fp16, bf16, int8, fp8, ...")
    return DTYPES[name]


def _items(text: str) -> list[str]:
    return [t.strip() for t in text.split(",") if t.strip()]


def _op_name(text: str) -> str:
    """`aten.add.Tensor` or `torch.ops.aten.add.Tensor` -> the qualified name Torch-TensorRT
    compares torch_executed_ops with (ConverterRegistry.qualified_name_or_str)."""
    return text if text.startswith("torch.ops.") or "." not in text else "torch.ops." + text


def guess_value(text: str) -> Any:
    """For options this file has no type for (a newer Torch-TensorRT): bool, none, int,
    float, a comma list of those, else the string."""
    low = text.strip().lower()
    if low in ("true", "false"):
        return low == "true"
    if low == "none":
        return None
    for cast in (int, float):
        try:
            return cast(text)
        except ValueError:
            pass
    if "," in text:
        return [guess_value(t) for t in _items(text)]
    return text


def parse_value(key: str, value: Any) -> Any:
    """A --set value (a string, or already typed when given from Python) as compile() takes it."""
    if not isinstance(value, str):
        return value
    kind = KINDS.get(key)
    text = value.strip()
    if kind is None:
        return guess_value(text)
    if kind == BOOL:
        return as_bool(key, text)
    if kind == INT:
        return as_int(key, text)
    if kind == OPT_INT:
        return None if text.lower() == "none" else as_int(key, text)
    if kind == FLOAT:
        try:
            return float(text)
        except ValueError:
            raise TrtminError(f"--set {key}={text}: expected a number") from None
    if kind == STR:
        return text
    if kind == BOOL_OR_STR:
        low = text.lower()
        return low in ("1", "true", "yes", "on") if low in ("1", "0", "true", "false", "yes", "no", "on", "off") else text
    if kind == DTYPE:
        return None if text.lower() == "none" else _dtype(key, text)
    if kind == DTYPE_SET:
        return {_dtype(key, t) for t in _items(text)}
    if kind == OP_SET:
        return {_op_name(t) for t in _items(text)}
    if kind == STR_SET:
        return set(_items(text))
    if kind == STR_LIST:
        return _items(text)
    if kind == ENGINE_CAP:
        name = text.upper().removeprefix("TORCH_TENSORRT.ENGINECAPABILITY.")
        if name not in ENGINE_CAPABILITIES:
            raise TrtminError(f"--set {key}={text}: use one of {', '.join(c.lower() for c in ENGINE_CAPABILITIES)}")
        return Expr(f"torch_tensorrt.EngineCapability.{name}")
    raise TrtminError(f"--set {key}: this option takes a Python object, which cannot be given on the command line; "
                      "use a plugin backend (--backend file.py:fn) that calls torch_tensorrt itself")


def parse_settings(settings: dict[str, Any] | None, backend: str = "torch_tensorrt",
                   valid: Sequence[str] | None = None, source: str = "") -> dict[str, Any]:
    """Check every key against Torch-TensorRT's options and parse every value. Without
    settings nothing is asked of torch_tensorrt: importing it to list its options takes
    5 s in trtmin's main process at the start of every run (H200, 2.11.0), and prints its
    warnings (TRT-LLM plugins, modelopt) on the user's terminal."""
    if not settings:
        return {}
    if valid is None:
        valid, source = valid_option_names()
    parsed: dict[str, Any] = {}
    for key, value in (settings or {}).items():
        if key not in valid:
            if key in REMOVED:
                raise TrtminError(f"--set {key}: Torch-TensorRT does not take {key!r} any more: {REMOVED[key]}")
            raise unknown_key_error(key, valid, backend, source)
        parsed[key] = parse_value(key, value)
    return parsed


def render_value(value: Any) -> str:
    """Python source for a parsed setting, for repro.py."""
    if isinstance(value, Expr):
        return str(value)
    if isinstance(value, torch.dtype):
        return str(value)  # "torch.float16"
    if isinstance(value, (set, frozenset)):
        items = sorted((render_value(v) for v in value))
        return "{" + ", ".join(items) + "}" if items else "set()"
    if isinstance(value, (list, tuple)):
        items = [render_value(v) for v in value]
        return ("[" + ", ".join(items) + "]") if isinstance(value, list) else ("(" + ", ".join(items) + ",)")
    return repr(value)


def materialize(value: Any) -> Any:
    """Turn Expr values into the objects they name (torch_tensorrt must be importable)."""
    if isinstance(value, Expr):
        import torch_tensorrt
        return eval(str(value), {"torch": torch, "torch_tensorrt": torch_tensorrt})  # noqa: S307 - our own text
    return value


class TorchTensorRTBackend(Backend):
    name = "torch_tensorrt"
    devices = ("cuda",)  # Torch-TensorRT's runtime wants CUDA inputs: run trtmin with --device cuda
    # Below the default min_block_size (5) a TensorRT block falls back to PyTorch, so a
    # reduced graph of a few nodes would stop using TensorRT at all. Overridable.
    DEFAULTS: dict[str, Any] = {"min_block_size": 1}

    def __init__(self, spec: str, settings: dict[str, Any] | None = None):
        super().__init__(spec, settings)
        self.options = {**self.DEFAULTS, **parse_settings(self.settings, spec)}

    @staticmethod
    def check_available(spec: str = "torch_tensorrt") -> None:
        check_available(spec)

    def compile(self, gm: fx.GraphModule, example_inputs: Sequence[Any]) -> Callable[..., Any]:
        import torch_tensorrt

        inputs = [detached(v) for v in example_inputs]
        module, positions = gm, list(range(len(inputs)))  # weights are already get_attr
        ep = torch.export.export(module, tuple(inputs), dynamic_shapes=export_dynamic_shapes(inputs, bounded=True))
        options = {k: materialize(v) for k, v in self.options.items()}
        compiled = torch_tensorrt.dynamo.compile(ep, arg_inputs=tensorrt_inputs(ep, inputs), **options)
        self.last_compiled = compiled

        def run(*args: Any) -> Any:
            return compiled(*[detached(args[i]) for i in positions])

        return run

    reports_partitions = True
    op_fallback_setting = "torch_executed_ops"
    # Lowering passes run on the whole graph before partitioning: attn_bias_is_causal (True by
    # default in 2.11) makes force_causal_efficient_attention drop every efficient-attention
    # mask; decompose_attention replaces the attention converters with matmul and softmax.
    lowering_toggles = (("attn_bias_is_causal", "false"), ("decompose_attention", "true"))

    def partitions(self, gm: fx.GraphModule, example_inputs: Sequence[Any]) -> list[list[str]]:
        """Node names of each TensorRT engine, from Torch-TensorRT's own partitioner.
        (NOT RUN here: torch_tensorrt cannot be installed in this workplace.)"""
        from torch_tensorrt.dynamo import partitioning

        options = {k: materialize(v) for k, v in self.options.items()}
        parted, _ = partitioning.fast_partition(gm, min_block_size=options.get("min_block_size", 1),
                                                torch_executed_ops=options.get("torch_executed_ops", set()))
        return [[n.name for n in sub.graph.nodes if n.op == "call_function"]
                for name, sub in parted.named_children() if name.startswith("_run_on_acc")]

    def script_part_for(self, verdict: Any, dynamic: bool = True,
                        io_dtypes: frozenset[Any] | None = None) -> ScriptPart:
        """A program with no dynamic dim needs neither export's dynamic_shapes nor
        Torch-TensorRT Input ranges: the export and the compile take the inputs as they are
        (what the dynamic form does for it too), in three lines."""
        if dynamic:
            return self.script_part()
        options = "".join(f", {k}={render_value(v)}" for k, v in self.options.items())
        body = textwrap.dedent(f"""\
            import torch_tensorrt
            ep = torch.export.export(module, tuple(inputs))  # the weights are buffers of Repro
            return torch_tensorrt.dynamo.compile(ep, arg_inputs=list(inputs){options})""")
        return ScriptPart(requires=["torch_tensorrt"], compile_body=_indent_body(body))

    def snippet_call(self, args: Sequence[str], verdict: Any = None) -> SnippetCall:
        """Export, then Torch-TensorRT's dynamo compile of the ExportedProgram, as trtmin's
        workers and the static repro.py call it."""
        options = "".join(f", {k}={render_value(v)}" for k, v in self.options.items())
        exported = f"torch.export.export(f, {args_tuple(args)})"
        return SnippetCall(f"torch_tensorrt.dynamo.compile({exported}, arg_inputs=[{', '.join(args)}]{options})",
                           imports=("import torch_tensorrt",), module=True)

    def script_part(self) -> ScriptPart:
        options = "".join(f", {k}={render_value(v)}" for k, v in self.options.items())
        body = textwrap.dedent(f"""\
            import torch_tensorrt
            gm, runtime_inputs, positions = module, list(inputs), list(range(len(inputs)))  # weights are buffers of Repro
            ep = torch.export.export(gm, tuple(runtime_inputs), dynamic_shapes=export_dynamic_shapes(runtime_inputs, True))
            compiled = torch_tensorrt.dynamo.compile(ep, arg_inputs=tensorrt_inputs(ep, runtime_inputs){options})
            return lambda *args: compiled(*[args[i] for i in positions])""")
        from oracles.backends.onnx_export import script_source
        return ScriptPart(imports=[script_source(export_dynamic_shapes, tensorrt_inputs)], requires=["torch_tensorrt"],
                          compile_body=_indent_body(body))

    def describe(self) -> str:
        return self.spec + "".join(f" {k}={render_value(v)}" for k, v in self.options.items())


def partition_report(compiled: Any) -> dict[str, int]:
    """How a compiled module was split: TensorRT engines vs blocks left to PyTorch
    (Torch-TensorRT names them _run_on_acc_N and _run_on_gpu_N)."""
    children = [name for name, _ in getattr(compiled, "named_children", lambda: [])()]
    return {"tensorrt_engines": sum(n.startswith("_run_on_acc") for n in children),
            "pytorch_blocks": sum(n.startswith("_run_on_gpu") for n in children)}


def _indent_body(body: str) -> str:
    """compile_body goes after `def compile_backend(module, inputs):\\n    `: the first line
    is placed by the template, the others need the 4-space indent themselves."""
    lines = body.splitlines()
    return "\n".join([lines[0]] + ["    " + ln if ln.strip() else "" for ln in lines[1:]])
