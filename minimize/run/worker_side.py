"""What a worker process runs: rebuild the program once, then evaluate candidates.

The main process writes the prepared program and its eager values to a state folder;
each worker loads them once, so a job is only the list of kept node indices (small
IPC, no re-export or re-serialization per candidate).
"""

from __future__ import annotations

import importlib
import time
from pathlib import Path
from typing import Any, Callable

import torch

from minimize.program import graph_io
from minimize.run.heap import freeze_heap, gc_paused
from minimize.program.libraries import import_libraries
from minimize.program.candidate import make
from minimize.program.model import Program, one_op_candidate
from minimize.run.steps import StepClock
from oracles.backends import resolve
from oracles.backends.base import reset_dynamo, use_scratch_root
from oracles.checks import Tolerance, failing_kernel, flatten_outputs
from oracles.dynamic import mark_dynamic
from oracles.errors import TrtminError
from oracles.evaluate import evaluate, evaluate_each
from oracles.verdict import ERROR_ORACLES, VALUE_ORACLES, Verdict
from oracles.worker_process import log_position, log_since

GRAPH_FILE = "graph.bin"
VALUES_FILE = "values.pt"
READY_FILE = "ready"  # written last: workers start before the state exists and wait for it
MAX_REPORTED = 64  # off values a localization run sends back


def off_values(node_of_leaf: list[int], each: list[Verdict]) -> list[list[Any]]:
    """[node index, verdict dict] of the first MAX_REPORTED outputs of a localization run
    (every value an output) that are off (minimize/search/localize.py reads them)."""
    return [[node_of_leaf[i], v.to_dict()] for i, v in enumerate(each) if v.kind in VALUE_ORACLES][:MAX_REPORTED]


def _owned(values: dict[str, Any]) -> dict[str, Any]:
    """The values as torch.save can write them, without copying what it need not: a view, a
    tensor on a larger storage than its own elements (a slice an --inputs file saved) and one
    whose storage another value reads as another dtype (view_as_real, a bitcast) get a storage
    of their own (a storage seen as two dtypes cannot be saved; a slice would save its base).
    The rest (the weights: most of a large model's bytes) are saved as they are."""
    dtypes: dict[int, set[torch.dtype]] = {}
    for t in (t for v in values.values() for t in flatten_outputs(v) if isinstance(t, torch.Tensor)):
        dtypes.setdefault(t.untyped_storage().data_ptr(), set()).add(t.dtype)

    def own(v: Any) -> Any:
        if isinstance(v, (list, tuple)):
            return type(v)(own(x) for x in v)
        if not isinstance(v, torch.Tensor):
            return v
        storage = v.untyped_storage()
        shared = (v._is_view() or storage.nbytes() > v.numel() * v.element_size()
                  or len(dtypes[storage.data_ptr()]) > 1)
        return v.detach().clone() if shared else v.detach()
    return {k: own(v) for k, v in values.items()}


def save_state(program: Program, folder: Path, imports: list[str] | None = None) -> None:
    """The program and every value of it, for the workers to load; a full disk under the
    folder ($TMPDIR: the values of a big model are gigabytes) is one line, not torch's
    "basic_ios::clear: iostream error"."""
    state = {"values": _owned(program.values),
             "user_outputs": program.output_order, "constants": sorted(program.constants),
             "fixed_random": program.fixed_random, "imports": list(imports or []), "dynamic": program.dynamic,
             "attributes": program.attributes}
    graph = graph_io.dumps(program.graph)  # its own errors are no disk's
    try:
        (folder / GRAPH_FILE).write_bytes(graph)
        torch.save(state, str(folder / VALUES_FILE))
    except (OSError, RuntimeError) as e:  # torch's writer raises RuntimeError for a full disk
        raise TrtminError(f"cannot write the program's values for the workers into {folder.parent} "
                          f"({getattr(e, 'strerror', None) or str(e).splitlines()[0][:120]}); free space there, or set "
                          "TMPDIR to a folder on a larger disk") from None
    (folder / READY_FILE).touch()


def wait_for_state(folder: Path, poll_s: float = 0.05) -> None:
    """Workers are started while the main process still loads the model, so that their
    own start (importing torch, the backend, CUDA) overlaps it. If the main process
    dies first, PR_SET_PDEATHSIG ends this wait."""
    while not (folder / READY_FILE).exists():
        time.sleep(poll_s)


def load_state(folder: Path, device: str) -> Program:
    """The program the main process left, with the collector paused (minimize/run/heap.py)."""
    with gc_paused():
        # weights_only=False: the C unpickler, twice as fast at 10,000 values (0.42 against
        # 0.82 s at 5,112 nodes), for a file this run wrote into its own private (0700) folder
        # mmap: a CPU worker reads a weight's pages only when a candidate uses it, and the
        # zygote's forks share them (a 2 GB program: 0.2 s against 3-7 s read whole)
        state = torch.load(str(folder / VALUES_FILE), weights_only=False, map_location=device, mmap=True)
        import_libraries(state["imports"])  # before the graph: its custom ops must resolve
        graph = graph_io.loads((folder / GRAPH_FILE).read_bytes())
        return Program.restore(graph, state["user_outputs"], set(state["constants"]), state["values"], device,
                               state["fixed_random"], state.get("dynamic"), state.get("attributes"))


_backends: dict[tuple[str, tuple[tuple[str, Any], ...]], Any] = {}  # kept across the zygote's fork
_dynamo_warm = False


def _backend(spec: str, settings: dict[str, Any]) -> Any:
    key = (spec, tuple(sorted(settings.items())))  # one spec per worker; a test runs several in one process
    if key not in _backends:
        _backends[key] = resolve(spec, settings)  # settings bisection varies them per job
    return _backends[key]


def _warm_up_dynamo() -> None:
    """Backends are called through torch.compile after torch._dynamo.reset(); the first use
    of each costs seconds of imports and set-up, paid here while the main process is still
    loading. (reset_dynamo() leaves out the import of Inductor's CUDA graph trees that
    torch's reset() does where CUDA is available; a backend that uses them lists them in
    its warm_imports, which the zygote imports.)"""
    global _dynamo_warm
    if not _dynamo_warm:
        reset_dynamo()
        torch.compile(lambda x: x + 1, backend="eager")(torch.zeros(1))
        _dynamo_warm = True


# What Dynamo's first compile imports beyond reset() (with torch 2.13, most of its modules):
# imports only, so the zygote takes them off each GPU worker's start.
FIRST_COMPILE_IMPORTS = ("functorch.compile", "torch._dynamo.backends.debugging",
                         "torch._dynamo.repro.after_dynamo", "torch.export._trace")


def preload(backend: str, settings: dict[str, Any], **_: Any) -> dict[str, float]:
    """In the zygote (oracles/zygote.py), before it forks workers: what every worker then
    has, and nothing that starts CUDA, which a fork cannot use: the backend's warm_imports
    and Dynamo's. A fork after Dynamo's first compile cannot start CUDA at all (that
    compile saves the CUDA RNG state and starts the driver), so only without CUDA is the
    warm-up done here; with it, each worker does it after starting CUDA (hiding CUDA for
    the zygote's warm-up made workers slower: bench/README.md, bench/probes/probe_warm.py)."""
    clock = StepClock()
    for module in _backend(backend, settings).warm_imports:
        importlib.import_module(module)
    clock.step("import_backend")
    if torch.cuda.is_available():  # the zygote asks NVML, which starts no CUDA
        reset_dynamo()  # its imports only; the compile is each worker's
        for module in FIRST_COMPILE_IMPORTS:
            try:
                importlib.import_module(module)
            except ImportError:  # another torch's layout: the worker's compile imports what it needs
                pass
        torch._dynamo.list_backends()  # imports the registered backends' modules
        clock.step("dynamo_reset")  # named apart: timing.worker_start adds steps up by name
    else:
        _warm_up_dynamo()  # reset() and a first compile
        clock.step("warm_up_dynamo")
    return clock.seconds


_zygote_program: Program | None = None  # loaded by the zygote (before_fork), shared by its later forks


def before_fork(state: str, device: str, **_: Any) -> None:
    """In the zygote, before each fork (oracles/zygote.py): once the main process has left
    the program, a CPU run's zygote loads it, so the workers forked after it (each restart
    after a crash) start without reading it, and share its memory. A CUDA run's workers
    load their own: the zygote has no CUDA."""
    global _zygote_program
    if _zygote_program is None and device == "cpu" and (Path(state) / READY_FILE).exists():
        _zygote_program = load_state(Path(state), device)


def worker_setup(state: str, backend: str, settings: dict[str, Any], atol: float, rtol: float,
                 device: str, scratch: str | None = None, reference: str = "eager",
                 asked: str = "nan") -> Callable[[dict[str, Any]], dict[str, Any]]:
    tol = Tolerance(atol, rtol, reference, asked)
    use_scratch_root(scratch)

    def backend_for(overrides: dict[str, str]) -> Any:
        return _backend(backend, overrides)

    clock = StepClock()  # start-up seconds by step, for summary.json timing.worker_start
    for module in backend_for(settings).warm_imports:  # the compiler's imports (a zygote's fork has them),
        importlib.import_module(module)                 # while the main process is still loading
    clock.step("import_backend")
    if device.startswith("cuda") and torch.cuda.is_available():
        torch.cuda.init()  # and creates the CUDA context (seconds) meanwhile
    clock.step("cuda_init")
    _warm_up_dynamo()
    clock.step("warm_up_dynamo")
    wait_for_state(Path(state))
    clock.step("wait_for_state")
    program = _zygote_program if _zygote_program is not None else load_state(Path(state), device)
    freeze_heap()
    clock.step("load_state")

    # (name, expression) -> tensor, made once per worker. Not by the text alone: two weights of
    # ones have one text, and one tensor for both is a graph with aliased weights (Dynamo
    # folds them into one input), where repro.py has two.
    generated: dict[tuple[str, str], Any] = {}

    def made(exprs: dict[str, str]) -> dict[str, Any]:
        for name, expr in exprs.items():
            if (name, expr) not in generated:
                generated[(name, expr)] = make(expr).to(device)
        return {name: generated[(name, expr)] for name, expr in exprs.items()}

    def run(job: dict[str, Any]) -> dict[str, Any]:
        if job.get("one_op"):  # the set-up's control (Session.setup_problem)
            return evaluate(*one_op_candidate(device, job["one_op"]), backend_for(settings), tol, device).to_dict()
        replaced = made(job.get("generated", {}))
        sizes = {int(k): v for k, v in job.get("sizes", {}).items()}  # JSON's keys are text
        piece = program.materialize(job["kept"], mark_all=job.get("mark_all", False), replaced=replaced, sizes=sizes)
        be = backend_for(job.get("settings", settings))
        dynamic = program.dynamic if be.keeps_dynamic and not job.get("static") else {}  # the export's stay so
        inputs = [mark_dynamic(v, dynamic.get(name, {})) for name, v in
                  zip(piece.input_names, program.inputs_for(piece, replaced))]
        if job.get("static"):  # the marks of earlier jobs stay on the program's tensors: new tensor objects
            inputs = [v.detach() if isinstance(v, torch.Tensor) else v for v in inputs]
        if job.get("delegation"):  # the report's: which ops the delegate took (Backend.delegation), of
            try:  # this backend or an --emit's ("backend"; one not installed here says nothing)
                be = resolve(job["backend"], {}) if job.get("backend") else be
                return {"delegation": be.delegation(piece.gm, inputs)}
            except Exception as e:  # a backend that cannot say: no word of it in the report
                return {"delegation": None, "error": f"{type(e).__name__}: {e}"}
        if job.get("exporter_control"):  # the report's: the same export run by the ONNX spec (Backend.exporter_control)
            control = be.exporter_control()
            return evaluate(piece.gm, inputs, control, tol, device).to_dict() if control is not None else {}
        if job.get("partitions"):
            try:
                return {"partitions": be.partitions(piece.gm, inputs) or []}
            except Exception as e:  # a backend that cannot say: no partition pass
                return {"partitions": [], "error": f"{type(e).__name__}: {e}"}
        logged = log_position()
        verdict = _localize(piece, inputs, be) if job.get("mark_all") else \
            evaluate(piece.gm, inputs, be, tol, device).to_dict()
        if verdict.get("kind") in ERROR_ORACLES and be.native_log_line is not None:
            native = be.native_errors(log_since(logged))  # what the compiler logged of the error it raised
            if native:
                verdict["extra"] = {**verdict.get("extra", {}), "native_errors": native}
                kernel = failing_kernel(native)  # the kernel it names, where the error named no node
                if kernel is not None and "failing_node" not in verdict["extra"]:
                    verdict["extra"]["failing_node"] = kernel
        if "CUDA error" in verdict.get("message", "") or "CUDA error" in verdict.get("detail", ""):
            verdict["restart"] = True  # the CUDA context may be unusable now
        return verdict

    def _localize(piece: Any, inputs: list[Any], be: Any) -> dict[str, Any]:
        verdict, each = evaluate_each(piece.gm, inputs, be, tol, device)
        out = verdict.to_dict()
        out["extra"] = {**out["extra"], "deviating": off_values(program.leaf_nodes(piece.output_names), each)}
        return out

    run.start_phases = clock.seconds  # type: ignore[attr-defined]  # sent with the worker's READY
    return run
