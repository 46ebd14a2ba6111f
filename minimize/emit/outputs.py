"""Writes the reduce output: repro.py, report.md, summary.json, reduced.pt2 and tensors
(the script's text: minimize/emit/script.py; the report's: minimize/emit/report.py).

Every file is written to a temporary name and renamed, so a crash never leaves a
half-written file in --out.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any, Callable

import torch
import torch.fx as fx
from torch.fx.traceback import NodeSource
from torch.utils._pytree import tree_leaves

from minimize.program.libraries import import_copies
from minimize.program.model import Slice
from minimize.emit.out_dir import written_digests
from minimize.emit.report import render_report, report_snippet
from minimize.emit.script import INPUTS_FILE, ReproInfo, render_script, retitled, script_pattern
from oracles.backends.base import Backend
from oracles.backends.onnx_export import OnnxExportError
from oracles.dynamic import export_dynamic_shapes, mark_dynamic
from oracles.errors import TrtminError
from oracles.out_folder import emitted_names, replace_from_temporary, sweep_temporaries
from oracles.reference import float64_outputs


def atomic_write(path: Path, data: str | bytes) -> None:
    def write(tmp: Path) -> None:
        with open(tmp, "wb" if isinstance(data, bytes) else "w") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
    replace_from_temporary(path, write)


def copy_files(out: Path, files: dict[str, Path]) -> None:
    """Each of `files` (name in `out` -> source) copied there through a temporary, as
    atomic_write writes: the plugin's copies, a command's files. A runner script the
    command runs as its program stays executable."""
    for name, src in files.items():
        def copy(tmp: Path, src: Path = src) -> None:
            shutil.copyfile(src, tmp)
            shutil.copymode(src, tmp)
        replace_from_temporary(out / name, copy)


def atomic_torch_save(obj: Any, path: Path) -> None:
    """torch.save through a temporary. Its zip writer words a short write (a full disk) as
    "[enforce fail at inline_container.cc] unexpected pos" (or "file write failed"): raised
    as the OSError it is."""
    try:
        replace_from_temporary(path, lambda tmp: torch.save(obj, str(tmp)))
    except RuntimeError as e:
        if "unexpected pos" not in str(e) and "file write failed" not in str(e):
            raise
        raise OSError(errno.ENOSPC, f"writing {path.name} fell short: is its disk full?") from e


def _number_graph_ids(ep: torch.export.ExportedProgram) -> None:
    """Each node's provenance (meta["from_node"]) names its source graphs by id(graph), a
    memory address that differs from run to run: two identical runs wrote different
    reduced.pt2 files (model.json, and .data/serialization_id, which hashes every record).
    The graphs are numbered in order of first appearance instead, so one graph keeps one
    number throughout the file; -1 (no source node) stays. The lists are replaced, not
    edited: they may be shared with the reduction's graph."""
    numbers: dict[int, int] = {}

    def renumber(d: dict[str, Any]) -> dict[str, Any]:
        old = d["graph_id"]
        new = old if old == -1 else numbers.setdefault(old, len(numbers))
        return {**d, "graph_id": new, "from_node": [renumber(f) for f in d["from_node"]]}

    graphs = [m.graph for m in ep.graph_module.modules() if isinstance(m, fx.GraphModule)]  # subgraphs too
    for node in (n for g in graphs for n in g.nodes):
        if sources := node.meta.get("from_node"):
            # to_dict is what the file holds, _from_dict how torch.export.load reads it back
            node.meta["from_node"] = [NodeSource._from_dict(renumber(s.to_dict()))
                                      for s in sources if isinstance(s, NodeSource)]


def export_passed(info: ReproInfo, backend: Backend) -> bool:
    """Whether the workers' export of the reduced program passed, so trtmin may export it
    again in its own process (Backend.upstream_files): a mismatch, NaN or a crash after the
    export; not an export error, a bug that ends the process (a death, whose site may be the
    exporter's, unless the backend knows it came later, or a hang: needs_subprocess), or OOM."""
    v = info.verdict
    return v.kind in ("mismatch", "nan") or backend.died_after_export(v) or (
        v.kind == "crash" and not info.needs_subprocess and v.exc_type != OnnxExportError.__name__)


def write_reduced(out: Path, gm: fx.GraphModule, inputs: list[Any],
                  dynamic: dict[str, dict[int, tuple[int, int | None]]] | None = None) -> Path:
    """reduced.pt2: the reduced program, exported and saved with torch.export.save, with the
    sizes the original was exported with as dynamic (by input name) dynamic again."""
    reduced = out / "reduced.pt2"
    names = [n.name for n in gm.graph.nodes if n.op == "placeholder"]
    marked = [mark_dynamic(v.detach().clone(), (dynamic or {}).get(name, {})) if isinstance(v, torch.Tensor) else v
              for name, v in zip(names, inputs)]
    ep = torch.export.export(gm, tuple(marked), strict=False, dynamic_shapes=export_dynamic_shapes(marked))
    _number_graph_ids(ep)
    check_room_for(ep, reduced)
    # torch.export.save names the archive's folder after the file: a temporary
    # reduced.pt2 in a hidden folder, so the archive reads reduced/..., not .tmp-reduced/...
    for stale in out.glob(".reduced-*"):  # a kill mid-save left it: one run at a time writes here
        shutil.rmtree(stale, ignore_errors=True)
    with tempfile.TemporaryDirectory(prefix=".reduced-", dir=out) as tmp:
        torch.export.save(ep, str(Path(tmp) / reduced.name))
        os.replace(Path(tmp) / reduced.name, reduced)
    return reduced


ARCHIVE_OVERHEAD = 256 << 10  # an archive's JSON and zip records, beyond its storages' bytes


def check_room_for(ep: torch.export.ExportedProgram, path: Path) -> None:
    """Refuse, in one line, to save `ep` where its disk has no room: torch's archive writer
    aborts the process on a full disk (a C++ exception thrown from a destructor, exit 134),
    which no handler catches. The archive holds each storage of its weights, constants and
    example inputs once, whole (a view saves its base; tied weights, one storage). A disk
    that does not say its free space is not judged."""
    storages: dict[tuple[str, int], int] = {}
    for t in [*ep.state_dict.values(), *ep.constants.values(), *tree_leaves(ep.example_inputs)]:
        if isinstance(t, torch.Tensor):
            try:
                storage = t.untyped_storage()
                storages[(str(t.device), storage.data_ptr())] = storage.nbytes()
            except (RuntimeError, NotImplementedError):  # no storage (a sparse tensor): its elements
                storages[(str(t.device), id(t))] = t.numel() * t.element_size()
    needed = ARCHIVE_OVERHEAD + sum(storages.values())
    try:
        usage = shutil.disk_usage(path.parent)
    except OSError:
        return
    if usage.total and usage.free < needed:
        raise TrtminError(f"cannot write {path} (about {needed / 2**20:.1f} MiB, and {usage.free / 2**20:.1f} MiB are "
                          "free on its disk); free space or choose another --out, then rerun with --resume")


def write_outputs(out: Path, info: ReproInfo, piece: Slice, values: dict[str, Any], backend: Backend,
                  summary: dict[str, Any], verify: Callable[[Path], dict[str, Any]] | None = None,
                  generated: dict[str, str] | None = None,
                  others: Callable[[], dict[str, dict[str, Any]]] | None = None,
                  known_bugs: Callable[[Path, dict[str, Any]], list[dict[str, Any]]] | None = None,
                  on_phase: Callable[[str], None] = lambda s: None) -> dict[str, Path]:
    """The outputs; `verify` runs the written repro.py (minimize/emit/verify.py) before the
    report and the summary, which say what it did. `values` holds the generated tensors
    in place of the originals, and `generated` the expressions the script makes them with.
    `others` writes the --emit scripts, after the report and the summary, and returns what
    each printed run alone (none with --no-verify): both are written again with it."""
    out.mkdir(parents=True, exist_ok=True)
    sweep_temporaries(out)  # a kill -9 mid-write left one (a partial repro_inputs.pt of GBs, say)
    gm = piece.gm
    inputs = {n: values[n] for n in piece.input_names}
    input_values = list(inputs.values())
    constants, generated = piece.weights(values), piece.by_attribute(generated)
    script, big = render_script(info, gm, inputs, constants, backend, generated)
    written: dict[str, Path] = {}
    if big:
        atomic_torch_save(big, out / INPUTS_FILE)
        written["inputs"] = out / INPUTS_FILE
    copied = {**backend.script_part().files, **import_copies(info.imports)}  # --import modules of the user's folder
    copy_files(out, copied)
    atomic_write(out / "repro.py", script)
    written["repro"] = out / "repro.py"
    if verify is not None:
        alone = verify(out / "repro.py")
        summary.setdefault("timing", {})["repro_alone_seconds"] = alone.pop("seconds")  # timing: varies by run
        summary["repro_alone"] = alone
    try:
        written["reduced"] = write_reduced(out, gm, input_values, info.dynamic)
    except Exception as e:  # the script is the deliverable; say why the .pt2 is missing
        summary["reduced_pt2_error"] = f"{type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}"
    # What this run writes (the --emit scripts come next): `repros add` saves these and no
    # other, as an earlier run's files may be beside them (--force replaces, never deletes)
    def emitted() -> set[str]:  # a script that could not be made leaves summary["emitted"] (minimize/reduce.py)
        return {n for spec in summary.get("emitted", []) for n in emitted_names(spec)}

    def files() -> list[str]:
        return sorted({p.name for p in written.values()} | set(copied) | {"report.md", "summary.json"} | emitted())

    summary["files"] = files()
    snippet = report_snippet(info, gm, inputs, constants, backend, generated)

    def report_and_summary(scripts_written: bool = False) -> None:
        atomic_write(out / "report.md", render_report(info, script, backend, summary, snippet,
                                                       input_names=list(inputs), inputs=inputs))
        mine = [n for n in summary["files"] if scripts_written or n not in emitted()]  # not an earlier run's scripts
        summary["written_sha256"] = written_digests(out, mine)  # a replay keeps off later edits
        atomic_write(out / "summary.json", json.dumps(summary, indent=2, sort_keys=True) + "\n")

    if known_bugs is not None:  # the saved repros it looks like (the CLI's: minimize/ reads no suite), read from
        summary["known_bugs"] = known_bugs(out, summary)  # repro.py and this summary: in report.md from the start
    report_and_summary()  # whole before anything that may fail or be stopped: none of it is lost
    written["report"], written["summary"] = out / "report.md", out / "summary.json"
    if export_passed(info, backend) and type(backend).upstream_files is not Backend.upstream_files:  # in this process:
        on_phase(f"writing the files for {backend.describe_shared()}'s maintainers (an export again)")
        try:  # not where the export itself may be the bug
            upstream = backend.upstream_files(out, gm, input_values)
        except Exception as e:  # noqa: BLE001 - the results are written; say why these files are missing
            upstream, summary["upstream_files_error"] = {}, f"{type(e).__name__}: {(str(e).splitlines() or [''])[0][:200]}"
        if upstream:
            summary["upstream_files"] = upstream
            written.update({f"upstream {name}": out / name for name in upstream})
            summary["files"] = files()
        if upstream or "upstream_files_error" in summary:
            report_and_summary()
    if others is not None:
        ran = others()
        for name, alone in ran.items():
            summary.setdefault("timing", {})[f"{name}_alone_seconds"] = alone.pop("seconds")
        if ran:
            summary["emitted_alone"] = ran
        summary["files"] = files()
        report_and_summary(scripts_written=True)  # again, with what each printed, and the scripts' digests
    return written


def settings_for(spec: str, settings: dict[str, Any]) -> dict[str, Any]:
    """Of the reduced backend's --set settings, those the emitted backend also takes (a
    TensorRT setting is no Inductor's); the others stay with the backend they were for."""
    from oracles.backends import BUILTIN
    from oracles.errors import TrtminError
    taken = {}
    for key, value in settings.items():
        try:
            BUILTIN[spec](spec, {key: value})
        except TrtminError:
            continue
        taken[key] = value
    return taken


def undelegated_of(spec: str) -> str | None:
    """The backend that runs what `spec`'s delegate leaves (Backend.undelegated), or None."""
    from oracles.backends import BUILTIN
    return getattr(BUILTIN[spec](spec, {}), "undelegated", None) if spec in BUILTIN else None


def write_extra_script(out: Path, info: ReproInfo, piece: Slice, values: dict[str, Any], spec: str,
                       settings: dict[str, Any], generated: dict[str, str] | None = None,
                       reduced_with: str = "", ran_as: str | None = None) -> Path:
    """A script for another backend than the one reduced with (--emit; `reduced_with`: that
    one, as titles show it). The script's title names the backend as `ran_as` says, where
    the reduction ran what `spec` runs (the backend itself: `--emit tensorrt` beside
    `--backend tensorrt`; the portable kernels where XNNPACK's delegate took none of the ops);
    else (None) no backend: `spec` never ran the bug (a hunt: "torch_tensorrt parser failure"
    of a bug only TensorRT's ONNX parser showed).

    `tensorrt` writes the TensorRT-only script (tensorrt + numpy, an .onnx and an .npz);
    any other backend name writes repro_<name>.py with that backend's part. These
    scripts were generated, not run by the oracle: their header says so.
    """
    from oracles.backends import BUILTIN
    from oracles.checks import flatten_outputs

    settings = settings_for(spec, settings)
    note = f"Emitted for {spec} by trtmin; the reduction was checked on {info.device} with "
    if ran_as != reduced_with:
        note += f"{reduced_with or 'another backend'}."
    elif reduced_with.split(" ")[0] == undelegated_of(spec):  # its delegate took none: the kernels the reduction ran
        note += f"{reduced_with}, whose kernels this script runs: {spec}'s delegate takes none of its ops."
    else:  # the backend itself
        note += "this backend."
    if reduced_with:
        info = ReproInfo(**{**info.__dict__, "title": retitled(info.title, reduced_with, ran_as)})
    if info.verdict.kind == "crash" and ran_as is None:
        note += (f" Its ERROR_PATTERN holds {reduced_with or 'that backend'}'s words: where {spec} fails in words "
                 "of its own, it says CHANGED with them.")
    inputs = [values[n] for n in piece.input_names]
    if spec == "tensorrt":
        from oracles.backends.onnx_export import export_onnx
        from oracles.backends.tensorrt import TensorRTBackend, build_failure
        from oracles.backends.tensorrt_script import write_tensorrt_script

        backend = TensorRTBackend(spec, settings)
        with torch.no_grad():
            expected = flatten_outputs(piece.gm(*inputs))
        exact = flatten_outputs(float64_outputs(piece.gm, inputs)) if info.reference == "float64" else None
        onnx = export_onnx(piece.gm, inputs, out / "model.onnx", opset=backend.options.get("opset"))
        return write_tensorrt_script(out, onnx.path, inputs, expected, info.oracle, info.atol, info.rtol,
                                     header=f"{info.title}\n\n{info.verdict.describe()}\n{note}",
                                     error_pattern=script_pattern(info),
                                     timeout=info.timeout, settings=backend.build_settings, exact=exact,
                                     build_time=build_failure(info.verdict),
                                     child=info.needs_subprocess)
    backend = BUILTIN[spec](spec, settings)  # no package check: writing a script needs none
    device = info.device if info.device.split(":")[0] in backend.devices else backend.devices[0]
    if device != info.device:  # Torch-TensorRT from a CPU reduction: its script runs where it can
        note += f" It runs the program on {device}, where {spec} runs."
    extra = ReproInfo(**{**info.__dict__, "device": device, "title": f"{info.title} [{note}]"})
    script, big = render_script(extra, piece.gm, {n: values[n] for n in piece.input_names},
                                piece.weights(values), backend, piece.by_attribute(generated))
    if big and not (out / INPUTS_FILE).exists():
        atomic_torch_save(big, out / INPUTS_FILE)
    path = out / emitted_names(spec)[0]
    atomic_write(path, script)
    return path
