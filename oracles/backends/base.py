"""What a backend is: it compiles a graph and writes its own part of the repro script.

Each backend both runs the candidate and emits the code that does the same in the
standalone script (docs/design.md#backends), so what is emitted is what was checked.
"""

from __future__ import annotations

import re
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

import torch
import torch.fx as fx

from oracles.backend_names import COMPILE_OFF

CUDAGRAPH_TREES = "torch._inductor.cudagraph_trees"
_scratch_root: str | None = None  # set in a worker by use_scratch_root; None: the system's temp folder


def use_scratch_root(folder: str | None) -> None:
    """Backends' files (exported models, ONNX, .pte) go under `folder`, which the run
    removes when it ends and the next run removes after a kill -9. A worker killed in the
    middle of a compile (--timeout on a hang) runs no cleanup of its own; at a 3B-parameter
    model each such kill would otherwise leave gigabytes in /tmp."""
    global _scratch_root
    _scratch_root = folder


LOWER_STEP = "lower"  # the step of a backend's compile that turns the graph into its program


def mark_step(e: BaseException, step: str) -> None:
    """Name the step of its compile that raised `e` (the verdict keeps it as extra["step"]),
    so that report.md's snippet ends at the statement that fails, not at a later one."""
    try:
        e.trtmin_step = step  # type: ignore[attr-defined]
    except AttributeError:  # an exception type without a __dict__: the snippet marks its last line
        pass


def scratch_folder(prefix: str) -> tempfile.TemporaryDirectory:
    """A temporary folder for one compile's files: removed when dropped, and with the run."""
    return tempfile.TemporaryDirectory(prefix=prefix, dir=_scratch_root)


def reset_dynamo() -> None:
    """torch._dynamo.reset(), before each candidate's compile, without its import of
    Inductor's CUDA graph trees (182 modules of Inductor; 0.6 s on this machine's CPU)
    when nothing has imported them: with CUDA available, reset() imports them to clear
    trees that cannot exist yet. A TensorRT or plugin worker never needed them, and the
    zygote paid the import on the way to every worker's start. Once Inductor has made
    trees (it imports the module), this is reset() itself."""
    if CUDAGRAPH_TREES in sys.modules or not torch.cuda.is_available():
        torch._dynamo.reset()
        return
    available = torch.cuda.is_available
    torch.cuda.is_available = lambda: False  # type: ignore[assignment]  # read only by that branch
    try:
        torch._dynamo.reset()
    finally:
        torch.cuda.is_available = available  # type: ignore[assignment]


def compile_off_guard() -> str:
    """The first lines of a compile_backend that compiles through torch.compile: with
    TORCH_COMPILE_DISABLE=1 or TORCHDYNAMO_DISABLE=1 it hands back eager PyTorch, and the
    script would say FIXED of a bug it never compiled; SKIPPED instead."""
    return (f"if '1' in map(os.environ.get, {list(COMPILE_OFF)!r}):  # eager PyTorch\n"
            f"        sys.exit(print('SKIPPED: {' or '.join(COMPILE_OFF)} is 1: torch.compile is off') or 2)\n    ")


@dataclass
class ScriptPart:
    """A backend's contribution to repro.py.

    `compile_body` is the body of `def compile_backend(module, inputs, backend)`, which must
    return a callable taking the inputs positionally. `requires` names the packages it
    imports: the script says SKIPPED (exit 2) where their import fails, and `trtmin repros
    run` skips it without running where they are not installed. `load_body`, the
    body of `def load_backend()`, imports the backend's own code (a plugin) before the
    call, so that a missing file or module is "cannot run", not a failure of the compiler;
    what it returns reaches compile_backend as `backend`.
    """

    imports: list[str] = field(default_factory=list)
    requires: list[str] = field(default_factory=list)
    compile_body: str = "return module"
    load_body: str = "return None"
    files: dict[str, Path] = field(default_factory=dict)  # name in out dir -> source file
    outputs_on_host: bool = False  # the call returns host arrays (onnxruntime): no GPU work to wait for
    # ERROR_PATTERN where the script words the failure otherwise than trtmin's worker did
    error_pattern: str | None = None
    raises_own_error: bool = False  # compile_backend raises the error itself: no wrapped errors to search
    exits_when_fixed: bool = False  # compile_backend ends the script with FIXED where it does not raise


@dataclass(frozen=True)
class SnippetCall:
    """How report.md's snippet compiles its graph: `compiled`, one expression that is the
    compiled callable, after the statements of `setup`; the `imports` it needs; `module`:
    the graph must be an nn.Module (torch.export takes no plain function), named `f` either
    way; `takes_list`: the callable takes its inputs as one list (ExecuTorch's execute);
    `last`: the statement that shows the bug where that is not the compiled graph's call
    (TensorRT's parse or build), in place of `got = compiled(inputs)`."""

    compiled: str = ""
    imports: tuple[str, ...] = ()
    module: bool = False
    setup: tuple[str, ...] = ()
    takes_list: bool = False
    last: str = ""


def args_tuple(args: Sequence[str]) -> str:
    """The snippet's variables `args` as the tuple of example inputs an exporter takes:
    "(x,)", "(x, y)", "()"."""
    return "(" + ", ".join(args) + ("," if len(args) == 1 else "") + ")"


NATIVE_ERRORS_KEPT = 5  # of a compiler's native error lines: the first is the cause, the rest its echo
NATIVE_ERROR_WORDS = re.compile(r"fail|error|unhandled|unsupported|not supported|invalid|cannot|can't|unable|missing"
                                r"|mismatch|abort|assert", re.IGNORECASE)  # a log line that says something went wrong


class Backend:
    name = "backend"
    devices: tuple[str, ...] = ("cpu", "cuda")  # where trtmin may run the program for it
    # Modules each worker's first compile imports: the zygote imports them once, before it
    # forks the workers (none that starts CUDA).
    warm_imports: tuple[str, ...] = ()

    def __init__(self, spec: str, settings: dict[str, Any] | None = None):
        self.spec = spec
        self.settings = dict(settings or {})

    # Partition-aware backends (Torch-TensorRT, plugins that define `partitions`) say
    # which nodes each compiled engine holds, and which setting forces op types to run
    # in PyTorch instead (Torch-TensorRT's torch_executed_ops).
    reports_partitions = False
    # Whether candidates are compiled with the program's dynamic sizes dynamic (oracles/dynamic.py);
    # the ONNX -> TensorRT engine would need an optimization profile for them, and is built static.
    keeps_dynamic = True
    op_fallback_setting: str | None = None
    # Settings, at their non-default value, that turn off a whole-graph rewrite the backend
    # makes before it converts ops: tried when forcing every op type back does not help, or
    # where the backend forces none back (ONNX Runtime's graph optimizations).
    lowering_toggles: tuple[tuple[str, str], ...] = ()
    rewrite_words = "its lowering, before it converts ops"  # what the toggles turn off, as the report says it
    # The backend that runs what a delegate leaves, alone (ExecuTorch's portable kernels for
    # XNNPACK): where the delegate takes none of a reduced program, its script tells whose bug it is
    undelegated: str | None = None
    # A line of the compiler's native log (written to stderr, not raised) that says what its
    # error code means: ExecuTorch's "[XNNCompiler.cpp:664] Failed to define tensor 0 with
    # code: xnn_status_unsupported_parameter" behind "Failed to load method forward, error: 0x:1"
    native_log_line: re.Pattern[str] | None = None
    # Lines of that form that are no error of the program's (ExecuTorch's cpuinfo probes on a
    # process's first threaded run: "[cpuinfo_utils.cpp:87] Failed to open midr file ...")
    native_log_noise: re.Pattern[str] | None = None

    def native_errors(self, log: str) -> list[str]:
        """The lines of `log` (what a failed job wrote to stderr) that are the compiler's own
        words of its error (its log's form, words of a failure, not its noise), first first,
        at most NATIVE_ERRORS_KEPT; none where it logs none."""
        if self.native_log_line is None:
            return []
        found = [line.strip() for line in log.splitlines()
                 if self.native_log_line.match(line.strip()) and NATIVE_ERROR_WORDS.search(line)
                 and not (self.native_log_noise and self.native_log_noise.match(line.strip()))]
        return list(dict.fromkeys(found))[:NATIVE_ERRORS_KEPT]

    def own_code(self) -> str | None:
        """The user's own code this backend runs ("the command", "plugin run.py:be"), whose
        failure on any program at all is that code's mistake: Session.setup_problem runs
        one-op programs (x + 1, then x * 2) to tell. None for a built-in compiler."""
        return None

    def compile(self, gm: fx.GraphModule, example_inputs: Sequence[Any]) -> Callable[..., Any]:
        raise NotImplementedError

    def program_imports(self, gm: fx.GraphModule) -> tuple[str, ...]:
        """Modules that must be imported before this backend compiles `gm`, which it does not
        import itself: kernels some of the program's ops need (ExecuTorch's quantized ones).
        Its compile imports them, and repro.py and report.md's snippet write them."""
        return ()

    def oracle_problem(self, oracle: str) -> str | None:
        """Why this backend cannot serve `oracle` (what to do instead), or None."""
        return None

    def setup_problem(self, message: str) -> str | None:
        """Why the original program's failure (its error message) is the set-up's mistake,
        not the compiler's bug (what to fix), or None: nothing to reduce then. A module the
        backend imports that is not installed is one, for every backend: each candidate
        would fail alike, and repro.py calls a missing package SKIPPED."""
        missing = re.search(r"No module named '([^']+)'", message)
        if missing:
            return (f"the backend imports {missing.group(1)!r}, which is not installed here (No module named "
                    f"{missing.group(1)!r}); install it, or fix the import: no compiler's bug to reduce")
        return None

    def partitions(self, gm: fx.GraphModule, example_inputs: Sequence[Any]) -> list[list[str]]:
        """Node names of each engine the backend would build for gm, in order."""
        return []

    def delegation(self, gm: fx.GraphModule, example_inputs: Sequence[Any]) -> dict[str, Any] | None:
        """For a backend that hands ops to a delegate and runs the rest itself (ExecuTorch's
        XNNPACK): {"delegated": whether any op went to the delegate, "not_delegated": the
        ops that did not}, for the report of the reduced program; None for the others."""
        return None

    def exporter_control(self) -> "Backend | None":
        """For a backend that runs torch.onnx's export of the program (ONNX Runtime, TensorRT):
        the backend that runs the same export by the ONNX spec (onnxruntime.py OnnxReference),
        to tell a wrong value of the exported model (torch.onnx's) from one of the runtime;
        None for the others."""
        return None

    def upstream_files(self, folder: Path, gm: fx.GraphModule, example_inputs: Sequence[Any]) -> dict[str, str]:
        """Files for the compiler's own maintainers, who may not take torch (an ONNX runtime's
        model.onnx), written into `folder` beside repro.py: {file name: what it is, for
        report.md}; none for most backends."""
        return {}

    def died_after_export(self, verdict: Any) -> bool:
        """Whether a bug that ended the process (a signal) did so after the export, where
        upstream_files may export again in trtmin's own process (TensorRT's builder dying in
        build_plan); no for most backends, whose death may be the exporter's."""
        return False

    def script_part(self) -> ScriptPart:
        raise NotImplementedError

    def script_part_for(self, verdict: Any, dynamic: bool = True,
                        io_dtypes: frozenset[Any] | None = None) -> ScriptPart:
        """script_part for a script that reproduces `verdict` (a backend whose script judges
        a bug by where it happened, as TensorRT's build-time failures without a GPU), of a
        program with (or without) dynamic dims, whose inputs' and outputs' dtypes are
        `io_dtypes` (None among them, or no set: not known)."""
        return self.script_part()

    def snippet_call(self, args: Sequence[str], verdict: Any = None) -> SnippetCall | None:
        """This backend's compile of the graph `f` taking the variables `args`, as report.md's
        snippet shows it for a bug that shows as `verdict`, where that is a few short
        statements that take the path trtmin took; else None."""
        return None

    def note(self, verdict: Any = None) -> str | None:
        """What a user must know about how this backend judges candidates here, or None;
        `verdict`: the result's, where report.md says it of that failure."""
        return None

    def doubt(self, verdict: Any) -> str | None:
        """Why `verdict`, the result's failure, may be no bug at all, to be said at the end of
        the run and kept with a saved repro; None where nothing says so."""
        return None

    def failure_words(self, verdict: Any) -> str | None:
        """The title's name for `verdict` where "crash on DEVICE" would mislead (a TensorRT
        parser or builder error runs on no device and kills nothing; an ONNX backend's failure
        is torch.onnx's, before the backend ran), else None."""
        from oracles.backends.onnx_export import OnnxExportError
        if verdict is not None and getattr(verdict, "exc_type", None) == OnnxExportError.__name__:
            return "torch.onnx export failure"
        return None

    def describe(self) -> str:
        return self.spec

    def describe_shared(self) -> str:
        """As titles and report.md show it, for an upstream issue: without the user's folders."""
        return self.describe()
