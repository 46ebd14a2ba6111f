"""ONNX Runtime on CPU, `--backend onnxruntime`: the candidate exported with
torch.onnx (the same export the tensorrt backend feeds TensorRT), run by
`onnxruntime.InferenceSession(..., providers=["CPUExecutionProvider"])`.

It runs anywhere, so it exercises the ONNX half of the TensorRT pipeline end to end,
and it is the reference path of the TensorRT-only script (TRTMIN_BACKEND=onnxruntime).
`run_onnxruntime` works on numpy arrays only and is pasted into that script as is.

Settings (`--set`): graph_optimization_level=disable|basic|extended|all,
intra_op_num_threads=N, opset=N (the ONNX opset of the export).
"""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np
import torch
import torch.fx as fx

from oracles.backends.base import Backend, ScriptPart, SnippetCall, args_tuple, scratch_folder
from oracles.backends.onnx_export import (OnnxExportError, export_error, export_onnx, export_statement,
                                          naming_the_node, script_source, upstream_onnx)
from oracles.backend_setup import check_packages, parse_ort_settings
from oracles.dynamic import export_dynamic_shapes


def ort_session(onnx_path, options):
    """An onnxruntime CPU session for an ONNX file (it reads the file and any external
    data now). options: graph_optimization_level, intra_op_num_threads."""
    import onnxruntime

    so = onnxruntime.SessionOptions()
    level = options.get("graph_optimization_level")
    if level:
        so.graph_optimization_level = {
            "disable": onnxruntime.GraphOptimizationLevel.ORT_DISABLE_ALL,
            "basic": onnxruntime.GraphOptimizationLevel.ORT_ENABLE_BASIC,
            "extended": onnxruntime.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
            "all": onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL,
        }[level]
    if options.get("intra_op_num_threads"):
        so.intra_op_num_threads = int(options["intra_op_num_threads"])
    return onnxruntime.InferenceSession(str(onnx_path), so, providers=["CPUExecutionProvider"])


def run_onnxruntime(session, feeds, bf16_inputs):
    """Run an onnxruntime session. numpy in, numpy out.

    feeds: {input name: array}; bf16 inputs are given as uint16 arrays (their bits) and
    named in bf16_inputs. Returns (outputs in the model's order, names of the outputs
    that are bf16, returned as uint16 bits)."""
    import ctypes

    import numpy as np
    import onnxruntime

    values = {}
    for name, array in feeds.items():
        array = np.asarray(array, order="C")
        if name in bf16_inputs:  # 16 = TensorProto.BFLOAT16; numpy has no bfloat16
            values[name] = onnxruntime.OrtValue.ortvalue_from_numpy_with_onnx_type(array.view(np.uint16), 16)
        else:
            values[name] = onnxruntime.OrtValue.ortvalue_from_numpy(array)
    names = [o.name for o in session.get_outputs()]
    results = session.run_with_ort_values(names, values)
    outputs, bf16_outputs = [], []
    for name, value in zip(names, results):
        if value.data_type() == "tensor(bfloat16)":
            shape = tuple(value.shape())
            count = int(np.prod(shape)) if shape else 1
            bits = np.zeros(0, np.uint16)
            if count:
                bits = np.ctypeslib.as_array((ctypes.c_uint16 * count).from_address(value.data_ptr())).copy()
            outputs.append(bits.reshape(shape))
            bf16_outputs.append(name)
        else:
            outputs.append(value.numpy())
    return outputs, bf16_outputs


def to_numpy(t: torch.Tensor) -> np.ndarray:
    t = t.detach().cpu().contiguous()
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy().view(np.uint16)
    return t.numpy()


def from_numpy(a: np.ndarray, bf16: bool = False) -> torch.Tensor:
    a = np.asarray(a, order="C")
    if bf16:
        return torch.from_numpy(a.view(np.int16)).view(torch.bfloat16)
    return torch.from_numpy(a)


class OnnxRuntimeBackend(Backend):
    name = "onnxruntime"
    devices = ("cpu", "cuda")  # exported from either; run on CPU copies
    # a bug its graph optimizer makes (a fusion, a constant folded, a float Conv between Q/DQ
    # quantized: a hunt) is gone without it: one call at the end says which
    lowering_toggles = (("graph_optimization_level", "disable"),)
    rewrite_words = "its graph optimizations: a fusion, a folded constant, a layout change"

    def __init__(self, spec: str, settings: dict[str, Any] | None = None):
        super().__init__(spec, settings)
        self.options = parse_ort_settings(self.settings, spec)

    @property
    def session_options(self) -> dict[str, Any]:
        """The --set options ort_session takes (all but the export's opset)."""
        return {k: v for k, v in self.options.items() if k != "opset"}

    @staticmethod
    def check_available(spec: str = "onnxruntime") -> None:
        check_packages(spec)

    def exporter_control(self) -> Backend:
        return OnnxReference(self.options.get("opset"))

    def upstream_files(self, folder: Path, gm: fx.GraphModule, example_inputs: Sequence[Any]) -> dict[str, str]:
        return upstream_onnx(folder, gm, example_inputs, self.options.get("opset"),
                             {k: v for k, v in self.settings.items() if k != "opset"})

    def compile(self, gm: fx.GraphModule, example_inputs: Sequence[Any]) -> Callable[..., Any]:
        with scratch_folder("trtmin-onnx-") as tmp:
            export = export_onnx(gm, example_inputs, Path(tmp) / "model.onnx", opset=self.options.get("opset"))
            with naming_the_node(export):
                session = ort_session(export.path, self.options)

        def run(*args: Any) -> list[torch.Tensor]:
            feeds, bf16 = {}, set()
            for name, value in export.feeds(args).items():
                tensor = value if isinstance(value, torch.Tensor) else torch.tensor(value)
                feeds[name] = to_numpy(tensor)
                if tensor.dtype == torch.bfloat16:
                    bf16.add(name)
            with naming_the_node(export):
                outputs, bf16_out = run_onnxruntime(session, feeds, bf16)
            return [from_numpy(a, name in bf16_out) for a, name in zip(outputs, export.output_names)]

        return run

    def snippet_call(self, args: Sequence[str], verdict: Any = None) -> SnippetCall | None:
        """torch.onnx's exported program, called: it runs itself in an onnxruntime session
        (the CPU provider, or CUDA's where onnxruntime-gpu is installed). None where a
        --set option of the session applies, which that call cannot take."""
        if any(k != "opset" for k in self.options):
            return None
        opset = f", opset_version={self.options['opset']}" if self.options.get("opset") else ""
        return SnippetCall(f"torch.onnx.export(f, {args_tuple(args)}, dynamo=True{opset})", module=True)

    def script_part_for(self, verdict: Any, dynamic: bool = True,
                        io_dtypes: frozenset[Any] | None = None) -> ScriptPart:
        """A static program whose inputs and outputs numpy can hold (no bfloat16) needs none
        of the runner's helpers: export into a folder, open a session (ort_session's, where
        --set options apply), feed it numpy arrays by input name, in a few lines. The
        exporter's failure is worded as the workers word it only where the bug is one
        (ERROR_PATTERN matches those words)."""
        if dynamic or io_dtypes is None or torch.bfloat16 in io_dtypes or None in io_dtypes:
            return self.script_part()
        from oracles.backends.torch_tensorrt import _indent_body

        export = export_statement(self.options.get("opset"))
        wrap = verdict is not None and verdict.kind == "crash" and verdict.exc_type == OnnxExportError.__name__
        if wrap:
            export = ("try:\n    " + export + "\nexcept Exception as e:  # worded as trtmin's workers word it, "
                      "so ERROR_PATTERN matches\n    raise export_error(e) from e")
        run_options = self.session_options
        session = (f'ort_session(folder + "/model.onnx", {run_options!r})' if run_options else
                   'onnxruntime.InferenceSession(folder + "/model.onnx", providers=["CPUExecutionProvider"])')
        helpers = ([OnnxExportError, export_error] if wrap else []) + ([ort_session] if run_options else [])
        body = "\n".join([
            "import inspect, tempfile" + ("" if run_options else ", onnxruntime"),
            "with tempfile.TemporaryDirectory() as folder:  # the session reads the file (and its weights) now",
            textwrap.indent(export, "    "),
            f"    session = {session}",
            "params = list(inspect.signature(module.forward).parameters)  # the ONNX inputs bear their names",
            "return lambda *args: [torch.from_numpy(a) for a in session.run(None, {",
            "    i.name: args[params.index(i.name)].cpu().contiguous().numpy() for i in session.get_inputs()})]"])
        return ScriptPart(imports=[script_source(*helpers)] if helpers else [],
                          requires=["onnxruntime", "onnxscript", "onnx", "numpy"], compile_body=_indent_body(body),
                          outputs_on_host=True)

    def script_part(self) -> ScriptPart:
        run_options = self.session_options
        body = textwrap.dedent(f"""\
            import atexit, shutil, tempfile
            import numpy as np
            gm, runtime_inputs, positions = module, list(inputs), list(range(len(inputs)))  # weights are buffers of Repro
            folder = tempfile.mkdtemp(prefix="repro-onnx-")
            atexit.register(shutil.rmtree, folder, True)  # the .onnx goes when the script ends
            try:
                shapes = export_dynamic_shapes(runtime_inputs)  # sizes exported as dynamic stay so
                onnx_program = torch.onnx.export(gm.eval(), tuple(runtime_inputs), dynamo=True, verbose=False, opset_version={self.options.get("opset")!r}, **({{"dynamic_shapes": shapes}} if shapes else {{}}))
            except Exception as e:  # worded as trtmin's workers word it, so ERROR_PATTERN matches
                raise export_error(e) from e
            onnx_program.save(folder + "/model.onnx")
            session = ort_session(folder + "/model.onnx", {run_options!r})
            names = [v.name for v in onnx_program.model.graph.inputs]
            placeholders = list(__import__("inspect").signature(module.forward).parameters)
            index = [placeholders.index(n) for n in names]

            def to_np(t):
                t = t.detach().cpu().contiguous()
                return t.view(torch.int16).numpy().view(np.uint16) if t.dtype == torch.bfloat16 else t.numpy()

            def run(*args):
                runtime = [args[i] for i in positions]
                feeds = {{n: to_np(runtime[i]) for n, i in zip(names, index)}}
                bf16 = {{n for n, i in zip(names, index) if runtime[i].dtype == torch.bfloat16}}
                outs, bf16_out = run_onnxruntime(session, feeds, bf16)
                out_names = [v.name for v in onnx_program.model.graph.outputs]
                return [torch.from_numpy(np.asarray(a, order="C").view(np.int16)).view(torch.bfloat16)
                        if n in bf16_out else torch.from_numpy(np.asarray(a, order="C")) for a, n in zip(outs, out_names)]
            return run""")
        from oracles.backends.torch_tensorrt import _indent_body

        return ScriptPart(imports=[script_source(OnnxExportError, export_error, export_dynamic_shapes, ort_session,
                                                 run_onnxruntime)],
                          requires=["onnxruntime", "onnxscript", "onnx", "numpy"], compile_body=_indent_body(body),
                          outputs_on_host=True)

    def describe(self) -> str:
        return self.spec + "".join(f" {k}={v}" for k, v in self.options.items())


class InvalidOnnxModel(RuntimeError):
    """onnx.checker (full check, shape inference included) refuses torch.onnx's export."""


class OnnxReference(Backend):
    """ONNX's reference evaluator (onnx.reference: the operators' spec, in numpy) on the same
    torch.onnx export an ONNX backend runs: no backend a user asks for, but the control that
    tells whose a wrong value is. Where the exported model computes it on the evaluator too,
    the model is wrong (torch.onnx's lowering); where the evaluator matches eager, the
    runtime that ran it is (Backend.exporter_control). First, onnx.checker's full check: a
    model it refuses (InvalidOnnxModel) is torch.onnx's, whatever refused it at run. No bf16
    values: numpy has none."""
    name = "onnx_reference"

    def __init__(self, opset: int | None = None):
        super().__init__("onnx_reference", {})
        self.opset = opset

    def compile(self, gm: fx.GraphModule, example_inputs: Sequence[Any]) -> Callable[..., Any]:
        import onnx
        from onnx.reference import ReferenceEvaluator

        with scratch_folder("trtmin-onnx-ref-") as tmp:
            export = export_onnx(gm, example_inputs, Path(tmp) / "model.onnx", opset=self.opset)
            try:  # a model the spec refuses is the exporter's mistake, whatever runs it
                onnx.checker.check_model(str(export.path), full_check=True)
            except (onnx.checker.ValidationError, onnx.shape_inference.InferenceError) as e:
                raise InvalidOnnxModel(str(e).strip()) from e
            if any(isinstance(v, torch.Tensor) and v.dtype == torch.bfloat16 for v in example_inputs):
                raise TypeError("ONNX's reference evaluator takes numpy arrays, and numpy has no bfloat16")
            evaluator = ReferenceEvaluator(str(export.path))  # reads the file (and its weights) now

        def run(*args: Any) -> list[torch.Tensor]:
            feeds = {name: to_numpy(v) if isinstance(v, torch.Tensor) else np.asarray(v)
                     for name, v in export.feeds(args).items()}
            return [from_numpy(np.asarray(a)) for a in evaluator.run(None, feeds)]

        return run
