"""The names in a `trtmin reduce --out` folder: what the reducer writes (minimize/emit/)
and what `trtmin repros add` reads back (repros/suite.py), so both sides share them here.

A run's identity is its journal's first line: summary.json keeps that header's digest, so
outputs left by an earlier run beside a later run's journal are known as such.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from pathlib import Path
from typing import Any, Callable

JOURNAL = "journal.jsonl"  # minimize/emit/journal.py writes it first, so every run's folder has one
OUR_FILES = {"repro.py", "report.md", "summary.json", "reduced.pt2", "repro_inputs.pt", "plugin.py", JOURNAL,
             "model.onnx", "model.onnx.data", "model_io.npz", "repro_tensorrt.npz"}  # the ONNX backends' upstream files
# --emit's scripts (repro_tensorrt.py, repro_torch_tensorrt.py) and the copies of the files a
# cmd: backend's command names (repro_cmd_run.py, repro_cmd_run.sh)
OUR_PATTERN = re.compile(r"repro_[\w.-]+\.py|repro_cmd_[\w.-]+")
# the copies of the modules a plugin file imports from its own folder (repro_plugin_helpers.py)
PLUGIN_COPY_PREFIX = "repro_plugin_"
MANIFEST = "manifest.toml"  # what makes a folder of repro.py a saved repro (repros/suite.py)


def holds_saved_repros(folder: Path) -> bool:
    """Whether `folder` is a repro suite: a folder in it holds a manifest.toml. A reduce's
    output written there would make it read as a suite of one, its repros hidden."""
    try:
        return any((p / MANIFEST).is_file() for p in folder.iterdir() if p.is_dir() and not p.name.startswith((".", "_")))
    except OSError:  # not there yet, or not to be listed: no suite
        return False


def emitted_names(spec: str) -> list[str]:
    """The files `--emit spec` writes into --out: its script first, then what it reads."""
    if spec == "tensorrt":
        return ["repro_tensorrt.py", "model.onnx", "repro_tensorrt.npz"]
    return [f"repro_{spec.replace(':', '_')}.py"]


EDITED = re.compile(r"\.edited(\.\d+)?$")  # a user's copy --force kept: NAME.edited, NAME.edited.2, ...


def is_ours(name: str) -> bool:
    """A name trtmin writes into --out; not a user's copy --force kept (repro_cmd_run.py.edited)."""
    return (name in OUR_FILES or bool(OUR_PATTERN.fullmatch(name))) and not EDITED.search(name)


def edited_copy_name(name: str, *folders: Path) -> str:
    """The name a user's edited (or hand-written) NAME is kept under, free in every folder
    given: NAME.edited, else NAME.edited.2, ..."""
    return next(t for n in range(1, 1000) if not any(
        os.path.lexists(f / (t := f"{name}.edited" + (f".{n}" if n > 1 else ""))) for f in folders))


def file_digest(path: Path) -> str:
    """The sha256 of a file's contents, read a megabyte at a time."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def edited_since_written(folder: Path) -> list[str]:
    """The files of a finished run (or a saved repro) in `folder` that differ from what trtmin
    wrote there: summary.json's written_sha256 (a file deleted since is no edit to keep)."""
    try:
        recorded = json.loads((folder / "summary.json").read_bytes()).get("written_sha256") or {}
        return sorted(name for name, digest in recorded.items()
                      if (folder / name).is_file() and file_digest(folder / name) != digest)
    except (OSError, ValueError, AttributeError):
        return []


def header_digest(line: str) -> str:
    """Names a run by its journal's header line (summary.json's journal_header_sha256)."""
    return hashlib.sha256(line.strip().encode()).hexdigest()


def journal_first_line(folder: Path) -> bytes | None:
    """The first line of the journal in `folder` (at most 1 MiB, its newline kept), or None
    where there is none to read."""
    try:
        with open(folder / JOURNAL, "rb") as f:
            return f.readline(1 << 20)
    except OSError:
        return None


def outputs_of_journal(folder: Path, summary: dict[str, Any]) -> bool | None:
    """Whether the outputs whose summary.json is `summary` are the run of the journal beside
    them (--force over an earlier run, stopped before it wrote its own, leaves the earlier
    run's); None where it cannot be told: no journal, or a summary from before the digest."""
    recorded, line = summary.get("journal_header_sha256"), journal_first_line(folder)
    if recorded is None or line is None:
        return None
    return header_digest(line.decode(errors="replace")) == recorded


TEMPORARY = re.compile(r"\.(?P<name>.+)\.tmp(?:\.npz)?")  # replace_from_temporary's names


def sweep_temporaries(out: Path) -> None:
    """Remove the temporaries of trtmin's files (replace_from_temporary's) that a kill -9
    left in `out` (a run writes one at a time: any there now is stale)."""
    for p in out.glob(".*.tmp*"):
        m = TEMPORARY.fullmatch(p.name)
        if m and is_ours(m["name"]) and p.is_file() and not p.is_symlink():
            p.unlink(missing_ok=True)


def replace_from_temporary(path: Path, write: Callable[[Path], None], suffix: str = ".tmp") -> None:
    """`write(tmp)` beside `path`, then renamed over it: a kill leaves the old file or the new
    one, and a failed write (a full disk) leaves no temporary behind. `suffix`: the
    temporary's (np.savez adds .npz to a name without it)."""
    tmp = path.with_name(f".{path.name}{suffix}")
    try:
        write(tmp)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
