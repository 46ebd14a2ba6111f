"""ExecuTorch, `--backend executorch:<variant>`: torch.export the candidate, lower it
with `to_edge_transform_and_lower(ep, partitioner=[...])`, `.to_executorch()`, write
the `.pte`, load it back with the ExecuTorch runtime and run it. Loading the written
file (not the in-memory program) is what a deployment does, so serialization bugs count.

Variants:
  executorch:xnnpack   XnnpackPartitioner, the rest on portable kernels (CPU)
  executorch:portable  no partitioner: portable kernels only (CPU)
  executorch:cuda      CudaPartitioner (AOTInductor-generated CUDA kernels; weights and
                       kernels in a .ptd beside the .pte); needs an ExecuTorch runtime
                       built with the CUDA backend, which the pip wheel is not
  executorch:tensorrt  Torch-TensorRT's ExecuTorch delegate: torch_tensorrt.dynamo.compile,
                       then torch_tensorrt.save(..., output_format="executorch") (its
                       TensorRTPartitioner), loaded with torch_tensorrt.load(...,
                       format="executorch") from torch-tensorrt-executorch-runtime
The xnnpack and portable variants run here; cuda and tensorrt are written against
executorch 1.4.1 and pytorch/TensorRT main (d7f2062, 2.14.0a0) and were not run.

Nothing imports executorch at module import time.
"""

from __future__ import annotations

import importlib
import operator
import re
import textwrap
from typing import Any, Callable, Sequence

import torch
import torch.fx as fx

from oracles.backends.base import (LOWER_STEP, Backend, ScriptPart, SnippetCall, args_tuple, mark_step,
                                   scratch_folder)
from oracles.dynamic import detached, export_dynamic_shapes, tensorrt_inputs
from oracles.backend_names import EXECUTORCH_VARIANTS as VARIANTS
from oracles.backend_setup import ET_KEYS, check_packages, no_gpu_for_backend, parse_et_settings
from oracles.errors import MissingPackageError, TrtminError


def check_executorch(spec: str) -> None:
    check_packages(spec)
    variant = spec.partition(":")[2]
    if variant in ("cuda", "tensorrt") and not torch.cuda.is_available():
        raise TrtminError(no_gpu_for_backend(spec, f"torch {torch.__version__} sees none here"))
    if variant == "cuda":
        from executorch.runtime import Runtime

        if not Runtime.get().backend_registry.is_available("CudaBackend"):
            raise MissingPackageError(f"backend {spec} needs an ExecuTorch runtime with the CUDA backend, and this "
                                      "executorch has none (registered: "
                                      f"{', '.join(Runtime.get().backend_registry.registered_backend_names)}); "
                                      "build executorch from source with EXECUTORCH_BUILD_CUDA=ON")


def parse_settings_of(spec: str, settings: dict[str, Any] | None) -> dict[str, Any]:
    """executorch:tensorrt takes Torch-TensorRT's settings; the other variants their flags."""
    if ET_KEYS[spec.partition(":")[2]] is None:
        from oracles.backends.torch_tensorrt import parse_settings
        return parse_settings(settings, spec)
    return parse_et_settings(spec, settings)


def lower_with_torch_tensorrt(variant, gm, inputs, folder, options):
    """executorch:tensorrt's lower_to_pte: Torch-TensorRT compiles, then saves the .pte.
    Shared, by source, with repro.py (under the name lower_to_pte)."""
    import pathlib

    import torch_tensorrt

    folder = pathlib.Path(folder)
    ep = torch.export.export(gm, tuple(inputs), dynamic_shapes=export_dynamic_shapes(inputs, bounded=True))
    trt_gm = torch_tensorrt.dynamo.compile(ep, arg_inputs=tensorrt_inputs(ep, inputs), **options)
    torch_tensorrt.save(trt_gm, str(folder / "model.pte"), output_format="executorch",
                        arg_inputs=list(inputs), retrace=False)
    return folder / "model.pte"


def lower_to_pte(variant, gm, inputs, folder, options):
    """Export and lower to ExecuTorch; write model.pte (and any .ptd) into folder.
    Returns the .pte path. A script holds the lines of its variant alone (their tags)."""
    import pathlib

    folder = pathlib.Path(folder)
    from executorch.exir import to_edge_transform_and_lower

    ep = torch.export.export(gm, tuple(inputs), dynamic_shapes=export_dynamic_shapes(inputs))
    partitioners, config = [], None  # the portable kernels, where no partitioner follows
    if variant == "xnnpack":  # [xnnpack]
        from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner  # [xnnpack]
        partitioners = [XnnpackPartitioner(**options)]  # [xnnpack]
    if variant == "cuda":  # [cuda]
        from executorch.backends.cuda.cuda_backend import CudaBackend  # [cuda]
        from executorch.backends.cuda.cuda_partitioner import CudaPartitioner  # [cuda]
        from executorch.exir import EdgeCompileConfig  # [cuda]
        partitioners = [CudaPartitioner([CudaBackend.generate_method_name_compile_spec("forward")])]  # [cuda]
        config = EdgeCompileConfig(_check_ir_validity=False)  # [cuda]
    edge = to_edge_transform_and_lower(ep, partitioner=partitioners, compile_config=config)
    program = edge.to_executorch()
    with open(folder / "model.pte", "wb") as f:
        program.write_to_file(f)
    if getattr(program, "_tensor_data", None):  # [cuda] external weights / kernels (.ptd)
        program.write_tensor_data_to_file(str(folder))  # [cuda]
    return folder / "model.pte"


def load_pte(variant, pte):
    """Load a written .pte back; returns run(list of CPU tensors) -> list of outputs. A
    script holds the lines of its variant alone (their tags)."""
    import pathlib

    pte = pathlib.Path(pte)
    if variant == "tensorrt":  # [tensorrt]
        import torch_tensorrt  # [tensorrt]
        program = torch_tensorrt.load(str(pte), format="executorch")  # [tensorrt]
        return lambda args: list(program.forward(*args))  # [tensorrt]
    data = sorted(pte.parent.glob("*.ptd"))  # [cuda]
    if data:  # [cuda] weights (and for cuda the kernels) live in a .ptd beside the .pte
        from executorch.extension.pybindings.portable_lib import _load_for_executorch  # [cuda]
        module = _load_for_executorch(str(pte), data_path=str(data[0]))  # [cuda]
        return lambda args: list(module.forward(tuple(args)))  # [cuda]
    from executorch.runtime import Runtime

    program = Runtime.get().load_program(pte.read_bytes())  # holds the bytes: keep it alive
    method = program.load_method("forward")
    return lambda args, program=program: list(method.execute(list(args)))


QUANTIZED_KERNELS = "executorch.kernels.quantized"  # registers quantized_decomposed's kernels on import

# to_edge's own verifiers' words, before any partitioner (a SpecViolationError is also torch.export's,
# and the edge verifier's after to_backend, a delegate's doing)
TO_EDGE_REFUSALS = ("are taking Tensor inputs with mismatched dtypes", "is not in Core ATen opset")


class ExecuTorchBackend(Backend):
    name = "executorch"
    devices: tuple[str, ...] = ("cpu",)
    native_log_line = re.compile(r"\[[\w.-]+\.(?:cpp|cc|c|h|hpp):\d+\] \S")  # its ET_LOG: "[method.cpp:128] Init failed ..."
    native_log_noise = re.compile(r"\[cpuinfo_utils\.cpp:\d+\] ")  # its probe of the CPU, on a first threaded run

    def __init__(self, spec: str, settings: dict[str, Any] | None = None):
        super().__init__(spec, settings)
        self.variant = spec.partition(":")[2]
        if self.variant not in VARIANTS:
            raise TrtminError(f"unknown ExecuTorch backend {spec!r}; use one of "
                              + ", ".join(f"executorch:{v}" for v in VARIANTS))
        self.options = parse_settings_of(spec, self.settings)
        if self.variant == "tensorrt":
            from oracles.backends.torch_tensorrt import TorchTensorRTBackend
            self.options = {**TorchTensorRTBackend.DEFAULTS, **self.options}
        # the program runs where the lowering expects it; the ExecuTorch Python runtime
        # takes CPU tensors (Torch-TensorRT's copies CUDA inputs to CPU itself)
        self.devices = ("cuda",) if self.variant == "tensorrt" else ("cpu",)
        self.undelegated = "executorch:portable" if self.variant == "xnnpack" else None

    @staticmethod
    def check_available(spec: str) -> None:
        check_executorch(spec)

    def program_imports(self, gm: fx.GraphModule) -> tuple[str, ...]:
        """The quantized kernels (out variants of quantized_decomposed's ops, and their code in
        the runtime), where the program has such ops (PT2E quantization): ExecuTorch loads
        them only when asked, and without them every quantized program failed to lower
        ("Missing out variants"), a hunt's report of ExecuTorch's bug that was trtmin's."""
        quantized = any(n.op == "call_function" and str(n.target).startswith("quantized_decomposed.")
                        for n in gm.graph.nodes)
        return (QUANTIZED_KERNELS,) if quantized and self.variant in ("portable", "xnnpack") else ()

    def compile(self, gm: fx.GraphModule, example_inputs: Sequence[Any]) -> Callable[..., Any]:
        from oracles.backends.torch_tensorrt import materialize

        for module in self.program_imports(gm):
            importlib.import_module(module)
        plain = [detached(v) for v in example_inputs]
        module, inputs, positions = gm, plain, list(range(len(plain)))  # weights are already get_attr
        options = {k: materialize(v) for k, v in self.options.items()}
        folder = scratch_folder("trtmin-et-")  # removed when `run` is dropped
        lower = lower_with_torch_tensorrt if self.variant == "tensorrt" else lower_to_pte
        try:
            pte = lower(self.variant, module, inputs, folder.name, options)
        except Exception as e:  # the lowering failed, not the program's load or run: the snippet's last line
            mark_step(e, LOWER_STEP)
            raise
        run_pte = load_pte(self.variant, pte)

        def run(*args: Any) -> list[Any]:
            _ = folder  # a .ptd may be read lazily: keep the files while the program lives
            runtime = [args[i] for i in positions]
            return run_pte([a.detach().cpu() if isinstance(a, torch.Tensor) else a for a in runtime])

        return run

    def failure_words(self, verdict: Any) -> str | None:
        """A to_edge verifier's refusal (a dtype mix, an op not in core ATen) is ExecuTorch's
        own, met before any partitioner: titled so, not as a crash of the delegate the spec
        names, whose maintainers would get a bug that is not theirs."""
        if (verdict is not None and getattr(verdict, "exc_type", None) == "SpecViolationError"
                and self.variant != "tensorrt"  # Torch-TensorRT's lowering calls no to_edge
                and any(words in verdict.message for words in TO_EDGE_REFUSALS)):
            return "to_edge verifier failure"
        return super().failure_words(verdict)

    def delegation(self, gm: fx.GraphModule, example_inputs: Sequence[Any]) -> dict[str, Any] | None:
        """XNNPACK's share of gm, as lower_to_pte lowers it (no run): a bf16 conv XNNPACK does
        not take runs on ExecuTorch's portable kernels, and its bug is theirs, not XNNPACK's."""
        if self.variant != "xnnpack":
            return None
        from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
        from executorch.exir import to_edge_transform_and_lower

        from oracles.backends.torch_tensorrt import materialize
        plain = [detached(v) for v in example_inputs]
        ep = torch.export.export(gm, tuple(plain), dynamic_shapes=export_dynamic_shapes(plain))
        options = {k: materialize(v) for k, v in self.options.items()}
        lowered = to_edge_transform_and_lower(ep, partitioner=[XnnpackPartitioner(**options)]).exported_program()
        calls = [n for n in lowered.graph.nodes if n.op == "call_function" and n.target is not operator.getitem]
        delegated = [n for n in calls if "executorch_call_delegate" in str(n.target)]
        names = {getattr(n.target, "__name__", str(n.target)) for n in calls if n not in delegated}
        return {"delegated": bool(delegated),  # ops, by ATen name: not a size read or a layout copy of ExecuTorch's
                "not_delegated": sorted(n for n in names if n.startswith("aten.") and not n.startswith("aten.sym_"))}

    def snippet_call(self, args: Sequence[str], verdict: Any = None) -> SnippetCall | None:
        """Export, lower (XNNPACK's partitioner, or none for portable kernels), load the
        program from its buffer and execute forward, as lower_to_pte and load_pte do without
        the files. None for the cuda and tensorrt variants (weights or kernels in a .ptd)."""
        if self.variant not in ("portable", "xnnpack"):
            return None
        imports, partitioner = self._lowering_words()
        lowering = (f"pte = to_edge_transform_and_lower(torch.export.export(f, {args_tuple(args)}){partitioner})"
                    ".to_executorch()")
        if verdict is not None and verdict.extra.get("step") == LOWER_STEP:  # it fails there: the snippet ends there
            return SnippetCall(imports=tuple(i for i in imports if "Runtime" not in i), module=True, last=lowering)
        return SnippetCall('program.load_method("forward").execute', imports=tuple(imports), module=True,
                           setup=(lowering, "program = Runtime.get().load_program(pte.buffer)"), takes_list=True)

    def _lowering_words(self) -> tuple[list[str], str]:
        """The imports and the partitioner argument of to_edge_transform_and_lower for the
        portable and XNNPACK variants, as report.md's snippet and a static repro.py write them."""
        from oracles.backends.torch_tensorrt import render_value

        imports = ["from executorch.exir import to_edge_transform_and_lower", "from executorch.runtime import Runtime"]
        if self.variant != "xnnpack":
            return imports, ""
        imports.insert(1, "from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner")
        options = ", ".join(f"{k}={render_value(v)}" for k, v in self.options.items())
        return imports, f", partitioner=[XnnpackPartitioner({options})]"

    def script_part_for(self, verdict: Any, dynamic: bool = True,
                        io_dtypes: frozenset[Any] | None = None) -> ScriptPart:
        """A static program on XNNPACK or portable kernels needs none of lower_to_pte's
        variants, files or dynamic shapes: export, lower and load from the buffer, as the
        workers do through a .pte file (no .ptd for these two), in a few lines."""
        from oracles.backends.torch_tensorrt import _indent_body

        if dynamic or self.variant not in ("portable", "xnnpack"):
            return self.script_part()
        imports, partitioner = self._lowering_words()
        body = "\n".join([*imports, textwrap.dedent(f"""\
            ep = torch.export.export(module, tuple(inputs))  # the weights are buffers of Repro
            pte = to_edge_transform_and_lower(ep{partitioner}).to_executorch()
            program = Runtime.get().load_program(pte.buffer)  # the lambda keeps it: forward's method needs it
            return lambda *args: list(program.load_method("forward").execute(args))  # on the CPU, as DEVICE is""")])
        return ScriptPart(requires=["executorch"], compile_body=_indent_body(body))

    def script_part(self) -> ScriptPart:
        from oracles.backends.onnx_export import script_source
        from oracles.backends.torch_tensorrt import _indent_body, render_value

        options = "{" + ", ".join(f"{k!r}: {render_value(v)}" for k, v in self.options.items()) + "}"
        gpu_check = ('if not torch.cuda.is_available():\n'
                     f'    print("SKIPPED: {self.spec} needs a CUDA GPU, and none is visible here")\n'
                     '    sys.exit(2)\n') if self.variant in ("cuda", "tensorrt") else ""
        body = gpu_check + textwrap.dedent(f"""\
            import atexit, shutil, tempfile
            gm, runtime_inputs, positions = module, list(inputs), list(range(len(inputs)))  # weights are buffers of Repro
            folder = tempfile.mkdtemp(prefix="repro-et-")
            atexit.register(shutil.rmtree, folder, True)  # the .pte goes when the script ends
            pte = lower_to_pte({self.variant!r}, gm, runtime_inputs, folder, {options})
            run_pte = load_pte({self.variant!r}, pte)
            return lambda *args: run_pte([args[i].cpu() if isinstance(args[i], torch.Tensor) else args[i] for i in positions])""")
        requires = ["executorch"] + (["torch_tensorrt", "torch_tensorrt_executorch_runtime"]
                                     if self.variant == "tensorrt" else [])
        from oracles.script_checks import tagged_source

        if self.variant == "tensorrt":  # its own lowering, under the name the body calls
            lower = script_source(tensorrt_inputs, lower_with_torch_tensorrt).replace(
                "def lower_with_torch_tensorrt(", "def lower_to_pte(")
        else:
            lower = tagged_source(lower_to_pte, [self.variant], docstring=False)
        return ScriptPart(imports=[script_source(export_dynamic_shapes) + "\n\n" + lower + "\n\n" +
                                   tagged_source(load_pte, [self.variant], docstring=False)], requires=requires,
                          compile_body=_indent_body(body))

    def describe(self) -> str:
        from oracles.backends.torch_tensorrt import render_value

        return self.spec + "".join(f" {k}={render_value(v)}" for k, v in self.options.items())
