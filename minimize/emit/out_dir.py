"""The --out folder: what a run may write there, checked before anything starts.

Nothing of the user's is overwritten: trtmin writes only its own file names, and replaces
them (--force) only where a journal shows they came from an earlier run. Torch-free, so
the CLI checks this before it starts workers or loads the model.
"""

from __future__ import annotations

import fcntl
import json
import os
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator

from minimize.emit.run_header import RERUN_SAME, resume_difference
from oracles.backend_names import COMMAND_PREFIX, parse_backend, plugin_own_modules
from oracles.command_line import parse_command
from oracles.errors import TrtminError
from oracles.out_folder import (JOURNAL, edited_copy_name, edited_since_written, file_digest, holds_saved_repros,
                               is_ours, journal_first_line, outputs_of_journal)


def earlier_runs_files(out: Path, written: list[str]) -> list[str]:
    """Files with trtmin's names in `out` that this run did not write (nor its journal)."""
    return sorted(p.name for p in out.iterdir() if is_ours(p.name) and p.name not in written and p.name != JOURNAL)


def check_out_dir(out: Path, resume: bool, force: bool,
                  header: Callable[[], dict[str, Any]] | None = None) -> None:
    """Refuse, in one line that says what to do, to write over another run or the user's
    files, into a folder that cannot be written, or to resume what has no journal.
    `header`: this run's (run_header.header_before_loading), so that an interrupted run
    made otherwise is not offered a --resume that would be refused next."""
    try:
        _check_out_dir(out, resume, force, header)
    except OSError as e:  # a name too long, a folder that cannot be listed: no traceback
        raise TrtminError(f"--out {_short(out)} cannot be used ({e.strerror or e}); choose another folder") from None


def check_reads_outside(out: Path, backend: str, model: Path | None = None, inputs: Path | None = None) -> None:
    """Refuse to read a file that this run writes over: MODEL or --inputs under a name of
    trtmin's in --out (an earlier run's reduced.pt2, its repro_inputs.pt: --force lost the
    user's only copy of the model being reduced), or a --backend that runs one (its
    plugin.py, a command's repro_cmd_run.py, a plugin's module copy: a user who edits the
    copy beside repro.py would have the run rewrite it, or --force move it aside while its
    workers load it, then blame the plugin)."""
    if backend.startswith(COMMAND_PREFIX):
        runs = [Path(arg) for arg in parse_command(backend) if os.path.isfile(arg)]
    else:
        spec = parse_backend(backend)
        plugin = spec.plugin_file or _module_file(spec.target if spec.kind == "plugin" else "")
        runs = [plugin, *plugin_own_modules(plugin).values()] if plugin is not None and plugin.is_file() else []
    folder = os.path.realpath(out)
    for file, flag in [(model, "MODEL"), (inputs, "--inputs"), *((f, "--backend runs") for f in runs)]:
        real = Path(os.path.realpath(file)) if file is not None else None  # a link to the file, as the file
        if real is not None and str(real.parent) == folder and is_ours(real.name):
            fix = (f"copy it out of {_short(out)} and pass the copy" if flag == "--backend runs"
                   else f"reduce it into another --out, or copy it out of {_short(out)} first")
            raise TrtminError(f"{flag} {file} is {real.name} in --out, a name this run writes over; {fix}")


def _module_file(module: str) -> Path | None:
    """The file a plugin module (`package.module`) would be imported from, found without
    importing anything (find_spec of a dotted name imports its package: seconds, before any
    answer); None for none (a built-in or missing module, a namespace package)."""
    import importlib.util
    top, *rest = module.split(".") if module else [""]
    try:
        found = importlib.util.find_spec(top) if top else None
    except (ImportError, ValueError):
        return None
    if found is None or not found.has_location or not found.origin:
        return None
    if not rest:
        return Path(found.origin)
    for folder in found.submodule_search_locations or []:
        file = Path(folder, *rest[:-1], rest[-1] + ".py")
        if file.is_file():
            return file
    return None


def _short(path: Path) -> str:
    text = str(path)
    return text if len(text) <= 120 else text[:60] + "..." + text[-40:]


def _check_out_dir(out: Path, resume: bool, force: bool, header: Callable[[], dict[str, Any]] | None) -> None:
    if out.exists() and not out.is_dir():
        raise TrtminError(f"--out {out} is a file; pass a folder for the results")
    if _held_by_another_run(out):  # its journal reads as an interrupted run's: --resume would be refused next
        raise _in_use(out)
    if holds_saved_repros(out):  # its files there would make the suite read as one repro, its own hidden
        raise TrtminError(f"--out {out} is a repro suite (its folders hold manifest.toml); reduce into a folder "
                          "outside it, then save the result with `trtmin repros add OUT --name NAME`")
    _check_writable(out)
    existing = sorted(p.name for p in out.iterdir() if not p.name.startswith(".")) if out.is_dir() else []
    alone = not [n for n in existing if is_ours(n) and n != JOURNAL]  # no other file of trtmin's beside it
    if JOURNAL in existing and alone and (never_started(out) or (
            is_trtmin_journal(out) and not journaled_verdicts(out / JOURNAL))):
        existing.remove(JOURNAL)  # a run stopped before its first verdict: nothing to resume, and no file to keep
    has_run = JOURNAL in existing and is_trtmin_journal(out)
    ours = [n for n in existing if is_ours(n)]
    foreign = [n for n in existing if not is_ours(n)]
    if ours and not has_run:  # the user's files under trtmin's names: no flag makes the folder usable
        why = f"its {JOURNAL} is no trtmin run's" if JOURNAL in ours else f"there is no {JOURNAL} of one"
        raise TrtminError(f"--out {out} holds {_names(ours)}, named as trtmin names its files, but no trtmin "
                          f"run wrote them ({why}); choose another folder")
    if resume:
        if not has_run and existing:
            raise TrtminError(f"--out {out} holds no interrupted run ({JOURNAL} is missing); drop --resume and "
                              "choose another folder, or pass --force to write trtmin's files beside these")
        edited = not_as_written(out)[0] if has_run and not force and finished_run(out) else []
        if edited:  # a finished run's replay writes its results again: not over the user's changes
            raise TrtminError(f"--out {out} holds a finished run whose {_names(edited)} changed since it wrote "
                              f"{'them' if len(edited) > 1 else 'it'}, and --resume would write "
                              f"{'them' if len(edited) > 1 else 'it'} again; copy your changes elsewhere, or "
                              "pass --force with --resume to replace them")
        return  # the journal checks that it is the same model and options; an empty folder starts afresh
    if force or not existing:
        return  # --force: replaces trtmin's files only; the user's own files stay as they are
    if has_run and finished_run(out):
        raise TrtminError(f"--out {out} holds a finished run (its results: report.md, repro.py); choose another "
                          "folder, or pass --force to run again over it")
    differs = resume_difference(out, header()) if has_run and header is not None else None
    if differs:
        what, fix = differs
        resume_it = "rerun with its arguments and --resume to continue it, " if fix == RERUN_SAME else ""
        raise TrtminError(f"--out {out} holds an interrupted run made {what}; {resume_it}pass --force to replace it, "
                          "or choose another folder")
    if has_run:
        raise TrtminError(f"--out {out} holds an interrupted run; pass --resume to continue it, --force to "
                          "replace it, or choose another folder")
    raise TrtminError(f"--out {out} is not empty ({_names(foreign)}); choose another folder, or pass --force "
                      "to write trtmin's files beside these (none of them is replaced)")


HEADER_START = b'{"header": {'  # how trtmin's journal starts (json.dumps with sort_keys)


def is_trtmin_journal(out: Path) -> bool:
    """A journal trtmin wrote: its first line is {"header": {"model_sha256": ...}}, not just
    its name (a user's own journal.jsonl is the user's)."""
    try:
        first = json.loads(journal_first_line(out) or b"")
    except ValueError:
        return False
    return isinstance(first, dict) and isinstance(first.get("header"), dict) and "model_sha256" in first["header"]


def journaled_verdicts(journal: Path) -> int:
    """How many verdicts a journal holds: its lines after the header (a torn last one too)."""
    try:
        with open(journal, "rb") as f:
            return max(0, sum(1 for _ in f) - 1)
    except OSError:
        return 0


def finished_run(out: Path) -> bool:
    """The journal's run wrote its results: summary.json (written once they are whole) names its header."""
    try:
        summary = json.loads((out / "summary.json").read_bytes())
    except (OSError, ValueError):
        return False
    return isinstance(summary, dict) and outputs_of_journal(out, summary) is True


# The outputs a user may edit by hand (a comment in repro.py, a line in report.md): summary.json
# keeps their digests as written, so a replay (--resume of a finished run) does not write over edits.
EDITABLE_SUFFIXES = (".py", ".md")


def written_digests(out: Path, names: list[str]) -> dict[str, str]:
    """{name: sha256} of the editable files among `names` in `out`, as this run wrote them."""
    return {name: file_digest(out / name) for name in sorted(names)
            if name.endswith(EDITABLE_SUFFIXES) and (out / name).is_file()}


def not_as_written(out: Path) -> tuple[list[str], list[str]]:
    """(edited, unwritten) files of the finished run in `out`, which a run over it would
    write over: those that differ from what it wrote (edited_since_written), and those with
    trtmin's names that it did not write (not in its `files`: the user's own, or an older
    run's)."""
    try:
        listed = json.loads((out / "summary.json").read_bytes()).get("files")
        unwritten = [] if not isinstance(listed, list) else [  # a summary from before `files`: none known
            name for name in earlier_runs_files(out, [*listed, "summary.json"]) if (out / name).is_file()]
        return edited_since_written(out), unwritten
    except (OSError, ValueError, AttributeError):
        return [], []


def keep_edited(out: Path, edited_too: bool = True) -> list[tuple[str, str, bool]]:
    """Before a run writes over a finished run (--force, or --resume's replay, which may write
    files it did not: repro_inputs.pt with --no-generate-values), the files under trtmin's
    names it did not write, and (`edited_too`: --force) those edited since it wrote them,
    moved aside as NAME.edited (NAME.edited.2, ... where that is taken): the new run writes
    its own without losing them. Returns (name, the name kept under, whether it was edited)."""
    kept = []
    edited, unwritten = not_as_written(out) if finished_run(out) else ([], [])
    for name in (edited if edited_too else []) + unwritten:
        target = edited_copy_name(name, out)
        os.replace(out / name, out / target)
        kept.append((name, target, name in edited))
    return kept


def never_started(out: Path) -> bool:
    """An empty journal, or one whose header a kill or a full disk cut short: a run that
    wrote nothing else yet (check_out_dir takes it for one only where no other file has
    trtmin's names: a user's empty journal.jsonl beside the user's repro.py is the user's)."""
    line = journal_first_line(out)
    return line is not None and not line.endswith(b"\n") and (
        line.startswith(HEADER_START) or HEADER_START.startswith(line))


def _names(names: list[str]) -> str:
    return ", ".join(names[:4]) + (f" and {len(names) - 4} more" if len(names) > 4 else "")


def _check_writable(out: Path) -> None:
    """The folder, or the nearest folder above it that exists, must be writable (access(2)
    also says EROFS for a read-only file system); checked without creating anything."""
    target = out
    while not target.exists():
        if target.parent == target:
            break
        target = target.parent
    if target != out and not target.is_dir():
        raise TrtminError(f"--out {out} cannot be made: {target} is a file, not a folder; choose another folder")
    if not os.access(target, os.W_OK | os.X_OK):
        where = "" if target == out else f" (its folder {target} is not writable)"
        raise TrtminError(f"--out {out} cannot be written{where}; choose a folder you can write to")


_HELD: set[str] = set()  # the folders this process holds: the CLI takes the lock, reduce() holds it again


def _in_use(out: Path) -> TrtminError:
    return TrtminError(f"--out {out} is in use by another trtmin run; wait for it to end, or choose another folder")


LOCK_PATIENCE_S = 0.2  # another process's probe (_held_by_another_run) holds the lock for microseconds


def _held_by_another_run(out: Path) -> bool:
    """Whether another process holds `out` (held_by_this_run's lock), found without keeping it."""
    if os.path.realpath(out) in _HELD or not out.is_dir():
        return False
    fd = os.open(out, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        fcntl.flock(fd, fcntl.LOCK_UN)
        return False
    except BlockingIOError:
        return True
    finally:
        os.close(fd)


@contextmanager
def held_by_this_run(out: Path) -> Iterator[None]:
    """One run at a time in a folder: a second run (--force or --resume beside a live one)
    would interleave its verdicts with the first's in one journal. A lock on the folder
    itself (flock), so no file is added and a killed run holds nothing. The folders it made
    are removed at the end if nothing was written into them (a model that failed to load). Held
    again by the process that holds it, it is a no-op (flock would refuse a second open)."""
    key = os.path.realpath(out)
    if key in _HELD:
        yield
        return
    made = [p for p in [out, *out.parents] if not p.exists()]  # this folder and those above it, deepest first
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:  # what access(2) could not foresee (a read-only /proc, a quota)
        raise TrtminError(f"--out {_short(out)} cannot be made ({e.strerror or e}); choose another folder") from None
    fd = os.open(out, os.O_RDONLY)
    deadline = time.monotonic() + LOCK_PATIENCE_S
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            break
        except BlockingIOError:
            if time.monotonic() > deadline:  # a run holds it, not another process's probe
                os.close(fd)
                raise _in_use(out) from None
            time.sleep(0.01)
    _HELD.add(key)
    try:
        yield
    finally:
        _HELD.discard(key)
        os.close(fd)
        for folder in made:  # only where nothing is in it: a typo's path leaves no empty folders behind
            try:
                folder.rmdir()
            except OSError:
                break
