"""The backend names trtmin knows (and the devices), and a --backend parsed once into a BackendSpec,
torch-free: the CLI checks a --backend before any worker starts or torch is imported
(outside oracles/backends/, whose package imports every backend), and the registry
(oracles/backends/__init__.py) refuses an unknown one with the same words."""

from __future__ import annotations

import ast
import difflib
import os
import re
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from oracles.errors import TrtminError

EXECUTORCH_VARIANTS = ("xnnpack", "portable", "cuda", "tensorrt")
BUILTIN_NAMES = ("eager", "inductor", "torch_tensorrt", "tensorrt", "onnxruntime",
                 *(f"executorch:{v}" for v in EXECUTORCH_VARIANTS))
COMMAND_PREFIX = "cmd:"
# Names a user may try for a built-in backend: the one meant, and why it is named so
ALIASES = {"tensorrt_rtx": "tensorrt", "trt": "tensorrt", "trt_rtx": "tensorrt",
           "torch_tensorrt_rtx": "torch_tensorrt", "torchtrt": "torch_tensorrt", "torch_trt": "torch_tensorrt",
           "executorch": "executorch:xnnpack", "xnnpack": "executorch:xnnpack", "ort": "onnxruntime",
           "onnx_runtime": "onnxruntime", "onnx": "onnxruntime", "torch.compile": "inductor", "compile": "inductor"}
ALIAS_WHY = {"tensorrt": "ONNX -> TensorRT, with NVIDIA's tensorrt or TensorRT-RTX's tensorrt_rtx, whichever is "
                         "installed",
             "torch_tensorrt": "Torch-TensorRT, built on TensorRT or TensorRT-RTX",
             "executorch:xnnpack": "ExecuTorch's backends are executorch:xnnpack, executorch:portable, "
                                   "executorch:cuda and executorch:tensorrt",
             "onnxruntime": "ONNX Runtime on the torch.onnx export; `tensorrt` takes that export to TensorRT",
             "inductor": "torch.compile's default backend"}
DEVICE_WORDS = "cpu, cuda or cuda:N"  # the devices trtmin runs on, as its errors name them


def is_device(name: str) -> bool:
    """Whether `name` is a device trtmin runs on (--device, a manifest's device)."""
    return name in ("cpu", "cuda") or re.fullmatch(r"cuda:\d+", name) is not None


@dataclass(frozen=True)
class BackendSpec:
    """A --backend: a built-in name (`kind` "builtin"), an external command ("command":
    a line that may hold ':'), or a plugin ("plugin": `target` a file.py or a module, and
    its `function`)."""

    text: str
    kind: str
    target: str = ""
    function: str = ""

    @property
    def plugin_file(self) -> Path | None:
        """The plugin's file, where the plugin is one (a module plugin is none)."""
        return Path(self.target) if self.kind == "plugin" and (self.target.endswith(".py") or "/" in self.target) \
            else None

    @property
    def shown(self) -> str:
        """As titles, reports and manifests show it: a plugin file by its name, not its path
        (a user's home folder in an issue says nothing; the suite copies the file as plugin.py)."""
        return f"{Path(self.target).name}:{self.function}" if self.target.endswith(".py") else self.text

    def packages(self, default: tuple[str, ...]) -> tuple[str, ...]:
        """The packages whose versions say where this backend's bug was seen (a plugin may use
        any: `default`)."""
        if self.kind == "command":  # the compiler is outside this Python: only the export is torch's
            return ("torch",)
        if self.text in ("eager", "inductor"):
            return ("torch",)
        if self.text in ("torch_tensorrt", "executorch:tensorrt"):
            return ("torch", "torch_tensorrt", "tensorrt", "tensorrt_rtx") + (
                ("executorch",) if self.text.startswith("executorch") else ())
        if self.text == "tensorrt":  # onnxscript: the torch.onnx export's op library
            return ("torch", "tensorrt", "tensorrt_rtx", "onnxscript")
        if self.text.startswith("executorch:"):
            return ("torch", "executorch")
        if self.text == "onnxruntime":
            return ("torch", "onnxruntime", "onnxscript")
        if self.plugin_file is not None and self.plugin_file.is_file():  # the compiler is what it imports
            return ("torch", *(p for p in plugin_packages(self.plugin_file) if p != "torch"))
        if self.kind == "plugin" and self.plugin_file is None:  # package.module:fn: its package
            return tuple(dict.fromkeys(("torch", self.target.split(".")[0])))
        return default


def _imports(plugin_file: Path, own: Callable[[str], Path | None]) -> Iterator[tuple[str, Path | None]]:
    """Each top-level name the plugin file imports (also inside a function), then those its
    own modules import in turn: (name, its module file beside the plugin by `own`, or None).
    A file that does not parse is passed over: importing it says what is wrong."""
    seen, todo = {plugin_file.resolve()}, [plugin_file]
    while todo:
        try:
            tree = ast.parse(todo.pop().read_text(encoding="utf-8", errors="replace"))
        except (OSError, SyntaxError, ValueError):
            continue
        for node in ast.walk(tree):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module] if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module else []
            for top in (n.split(".")[0] for n in names):
                file = own(top)
                yield top, file
                if file is not None and file.resolve() not in seen:
                    seen.add(file.resolve())
                    todo.append(file)


def plugin_own_modules(plugin_file: Path) -> dict[str, Path]:
    """The modules a plugin file imports from its own folder (`import helpers` with
    helpers.py beside it, also inside a function), and theirs in turn: {name: file}. Python
    finds them there as it finds a script's neighbours; repro.py gets copies of them, so
    the plugin runs beside it as it ran here. A package folder beside it is no module file:
    it must be installed (repro.py cannot carry it)."""
    def own(top: str) -> Path | None:
        file = plugin_file.parent / f"{top}.py"
        return file if file.is_file() and file.resolve() != plugin_file.resolve() else None

    return dict(sorted({top: file for top, file in _imports(plugin_file, own) if file is not None}.items()))


def plugin_packages(plugin_file: Path) -> tuple[str, ...]:
    """The installed packages a plugin file (and its own modules beside it, or their copies
    `repro_plugin_NAME.py` in a saved repro) imports, by their top-level names, stdlib's
    left out: the compiler whose release a bug is seen in (`mycompiler`), which first_seen,
    the journal's header and `repros run` record."""
    from oracles.out_folder import PLUGIN_COPY_PREFIX

    folder = plugin_file.parent

    def own(top: str) -> Path | None:
        return next((f for f in (folder / f"{top}.py", folder / f"{PLUGIN_COPY_PREFIX}{top}.py") if f.is_file()), None)

    found = {top: None for top, file in _imports(plugin_file, own)
             if file is None and not (folder / top / "__init__.py").is_file()  # a package beside it: the plugin's
             and top not in sys.stdlib_module_names and top != "__future__"}
    return tuple(found)


def parse_backend(spec: str) -> BackendSpec:
    """`spec` parsed, or a one-line error for one that is neither a built-in name, an
    external command, nor a plugin spec (path/to/file.py:function or package.module:function)."""
    check_backend_name(spec)
    if spec in BUILTIN_NAMES:
        return BackendSpec(spec, "builtin")
    if spec.startswith(COMMAND_PREFIX):
        return BackendSpec(spec, "command")
    target, _, function = spec.rpartition(":")
    if not target or not function:
        raise TrtminError(f"plugin backend {spec!r} is not of the form path/to/file.py:function or "
                          "package.module:function")
    return BackendSpec(spec, "plugin", target, function)


def check_plugin_file(spec: str) -> None:
    """A plugin `path/to/file.py:function` whose file is not there: one line, from the CLI's
    checks before torch loads and from the worker's import alike."""
    path = parse_backend(spec).plugin_file
    if path is not None and not path.is_file():
        raise TrtminError(f"plugin file {path} does not exist; pass --backend path/to/file.py:function")


def check_emit(specs: list[str], backend: str = "") -> None:
    """--emit's backends, before any worker starts or torch loads: a typo must not cost the run,
    nor the --backend's own script written twice (but `tensorrt`'s: a torch-free script)."""
    for spec in specs:
        if spec not in BUILTIN_NAMES:
            raise TrtminError(f"--emit {spec!r} is not a backend; use one of {', '.join(sorted(BUILTIN_NAMES))}")
        if spec == backend and spec != "tensorrt":
            raise TrtminError(f"--emit {spec} is the --backend: repro.py is its script already; drop --emit {spec}")


def check_backend_name(spec: str) -> None:
    """A one-line error for a --backend that is neither a built-in name, an external
    command, nor a plugin spec (use parse_backend for what it is)."""
    if spec in BUILTIN_NAMES or spec.startswith(COMMAND_PREFIX):
        return
    if spec.startswith("executorch:"):
        raise TrtminError(f"unknown backend {spec!r}; ExecuTorch backends are "
                          + ", ".join(f"executorch:{v}" for v in EXECUTORCH_VARIANTS))
    if ":" not in spec:  # a plugin spec has one: file.py:fn or module:fn
        alias = ALIASES.get(spec.lower().replace("-", "_"))
        if alias:
            raise TrtminError(f"unknown backend {spec!r}; did you mean --backend {alias}? ({ALIAS_WHY[alias]})")
        close = difflib.get_close_matches(spec.lower(), BUILTIN_NAMES, n=1, cutoff=0.75)
        if close:
            raise TrtminError(f"unknown backend {spec!r}; did you mean --backend {close[0]}?")
        raise TrtminError(f"unknown backend {spec!r}; use one of {', '.join(sorted(BUILTIN_NAMES))}, a plugin "
                          "path/to/file.py:function, or an external command 'cmd:... {model} ...'")


COMPILE_OFF = ("TORCH_COMPILE_DISABLE", "TORCHDYNAMO_DISABLE")  # =1: torch.compile hands back the function as is


def check_compile_on(backend: str | None) -> None:
    """With TORCH_COMPILE_DISABLE=1 or TORCHDYNAMO_DISABLE=1, torch.compile runs eager PyTorch:
    every bug of a backend that compiles through it (Inductor; a plugin may) reads FIXED, and
    a reduction finds nothing. Refused for such a `backend`; None: a suite's repros (`repros
    run`), any backend, whose refusal names the eager control run."""
    off = next((name for name in COMPILE_OFF if os.environ.get(name) == "1"), None)
    kind = parse_backend(backend).kind if backend is not None else None
    if off is None or kind == "command" or (kind == "builtin" and backend.split(":")[0] != "inductor"):
        return
    control = " (the eager control run is TRTMIN_BACKEND=eager)" if backend is None else ""
    raise TrtminError(f"{off}=1 switches torch.compile off here: the compiler would run eager PyTorch and every bug "
                      f"read as fixed; unset {off}{control}")
