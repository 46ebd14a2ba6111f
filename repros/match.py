"""Known bugs: does a reduction look like a repro already in the suite?

Before a user files a duplicate, a reduction is compared with every saved repro: the same
multiset of ops in the reduced graph (ATen op names, as repro.py's `Repro.forward` calls
them), the same backend family (a plugin or command: itself) and the same kind of failure,
for a mismatch the same symptom (eager's NaN or inf lost, or values off), and for a crash the same
normalized error (for a death by a signal, the signal: not the site, which another release
may move). One that differs in the failure, or only in the ops' overloads (remainder.Scalar
for remainder.Tensor: one kernel, reached two ways), is related: said, never a duplicate; so is
one cut from the same program to other ops (summary.json's program_sha256): another bug of the
model, or the same one met at another size. A crash whose read-off ops (those its failing
ops read, compiled alone: summary.json's read_off) fail as a saved repro does is that bug,
met as its effect (a negative index from ExecuTorch's remainder, crashing an embedding).
Hand-written repros, whose graphs are plain PyTorch, match by backend, kind and error only
where they name their ops the same way: most do not, and are left out.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from oracles.backend_names import parse_backend
from oracles.errors import TrtminError
from oracles.verdict import DTYPE_WORDS, normalize_message, signal_of
from repros.suite import SCRIPT, Repro, default_roots, find_repros

_OP_CALL = re.compile(r"torch\.ops\.(\w+)\.(\w+)\.(\w+)\(")


@dataclass(frozen=True)
class Fingerprint:
    ops: tuple[tuple[str, int], ...]   # sorted (op, count)
    backend: str                       # its family: torch_tensorrt, tensorrt, executorch, inductor, ...
    kind: str                          # crash, mismatch, nan, oom, hang
    error: str                         # a crash's normalized message, a mismatch's symptom, else ""
    program: str = ""                  # the sha256 of the program it was cut from (summary.json's), where known
    cause: str = ""                    # a crash's first logged native error, normalized (summary.json's), where any
    # a crash's ops before the failing ones, where compiled alone they already differ from eager
    # (summary.json's read_off): sorted (op, count), and the kind of that failure
    read_off_ops: tuple[tuple[str, int], ...] = ()
    read_off_kind: str = ""
    read_off_symptom: str = ""         # where that failure is a mismatch (_mismatch_symptom)
    dtype: str = ""                    # a mismatch's output dtype, as its verdict names it, where it does


def ops_of(script: str) -> Counter[str]:
    """The ATen ops a repro.py's graph calls, with their counts."""
    return Counter(f"{ns}.{op}.{overload}" for ns, op, overload in _OP_CALL.findall(script))


def _family(backend: str) -> str:
    """What a repro's backend is compared by: a built-in's name less its variant
    (executorch:xnnpack is executorch's); a plugin or a command by itself, as titles show it
    ("compA.py:backend"): two users' compilers are two, whose bugs are never one (a hunt:
    compB's clamped sigmoid was refused as compA's hardsigmoid)."""
    try:
        parsed = parse_backend(backend)
    except TrtminError:  # a summary.json edited by hand: its text, as written
        return backend
    return backend.split(":")[0] if parsed.kind == "builtin" else parsed.shown


_LOST = re.compile(r"where eager's is (NaN or inf|NaN|inf)\b")  # oracles/checks.py's words


def _mismatch_symptom(verdict: str) -> str:
    """What a mismatch's values show, as its verdict says it: eager's NaN or inf come back
    finite ("finite where eager's is NaN": an op that drops NaN), else values that differ.
    An atan2 that flips pi's sign is not the atan2 that maps NaN to 0 (a hunt)."""
    lost = _LOST.search(verdict)
    return f"finite where eager's is {lost.group(1)}" if lost else "values differ"


def fingerprint(folder: Path, summary: dict[str, Any] | None = None) -> Fingerprint | None:
    """A reduce output folder's (or a saved repro's) fingerprint, from its repro.py and
    summary.json (`summary`: the one a reduction is about to write); None where either is
    missing or the graph names no ATen op."""
    script, summary_file = folder / SCRIPT, folder / "summary.json"
    if not script.exists() or (summary is None and not summary_file.exists()):
        return None
    try:
        data = summary if summary is not None else json.loads(summary_file.read_text())
    except ValueError:
        return None
    if not isinstance(data, dict):  # valid JSON, but no summary: `[]`, `null`
        return None
    ops = ops_of(script.read_text())
    verdict = str(data.get("final_verdict", ""))
    kind = verdict.split(":", 1)[0].strip().lower()
    if not ops or not kind:
        return None
    error = normalize_message(verdict.split(":", 1)[1]) if kind == "crash" and ":" in verdict else \
        _mismatch_symptom(verdict) if kind == "mismatch" else ""
    if error.startswith("Signal: "):  # a death's site (its Python caller) may move between releases: the signal
        error = "Signal: " + signal_of(error.removeprefix("Signal: "))
    native = data.get("native_errors") if kind == "crash" else None
    cause = normalize_message(str(native[0])) if isinstance(native, list) and native else ""
    read_off = data.get("read_off") if kind == "crash" else None
    read_ops = read_off.get("ops") if isinstance(read_off, dict) else None
    read_ops = {str(op): n for op, n in read_ops.items() if isinstance(n, int)} if isinstance(read_ops, dict) else {}
    read_verdict = str(read_off.get("verdict", "")) if read_ops else ""
    read_kind = read_verdict.split(":", 1)[0].strip().lower()
    read_symptom = _mismatch_symptom(read_verdict) if read_kind == "mismatch" else ""
    dtype = DTYPE_WORDS.search(verdict) if kind == "mismatch" else None  # as its describe() names it
    return Fingerprint(tuple(sorted(ops.items())), _family(str(data.get("backend", ""))), kind, error,
                       str(data.get("program_sha256") or ""), cause, tuple(sorted(read_ops.items())), read_kind,
                       read_symptom, dtype.group(1) if dtype else "")


def _same_error(theirs: Fingerprint, mine: Fingerprint) -> bool:
    """The same kind and error, and the same logged cause where both were saved with one
    (a repro saved before causes were logged matches by its error alone)."""
    return (theirs.kind, theirs.error) == (mine.kind, mine.error) and (
        not theirs.cause or not mine.cause or theirs.cause == mine.cause)


def _same_failure(theirs: Fingerprint, mine: Fingerprint) -> bool:
    """The same error (_same_error), in the same output dtype where both name one: a bf16
    linear's error is not an fp16 one's (a robotics user's hunt: the fp16 twin was refused as
    "a known bug"; a fix of one may leave the other)."""
    return _same_error(theirs, mine) and (not theirs.dtype or not mine.dtype or theirs.dtype == mine.dtype)


def _less_overloads(ops: tuple[tuple[str, int], ...]) -> Counter[str]:
    """The op multiset with each op's overload dropped: aten.remainder.Scalar and
    aten.remainder.Tensor are one op."""
    less: Counter[str] = Counter()
    for op, count in ops:
        less[op.rsplit(".", 1)[0]] += count
    return less


def _how_it_differs(theirs: Fingerprint, mine: Fingerprint) -> str:
    """How a saved repro of the same ops (by name) and backend differs from a reduction;
    "" where it is the same bug."""
    if (theirs.ops, theirs.backend) == (mine.ops, mine.backend) and _same_failure(theirs, mine):
        return ""
    how = ("" if theirs.kind != mine.kind else f" in {theirs.dtype}" if _same_error(theirs, mine) else
           f": {theirs.error}" if theirs.kind == "mismatch" else " with another error")  # a mismatch's symptom, said
    failing = "" if _same_failure(theirs, mine) else f"as {theirs.kind}{how}"
    if theirs.ops != mine.ops:
        other = Counter(dict(theirs.ops)) - Counter(dict(mine.ops))  # the overloads it calls more often
        overloads = ", ".join(op.split(".", 1)[-1] for op in sorted(other))
        return f"by other overloads ({overloads})" + (f", failing {failing}" if failing else "")
    return f"where it fails otherwise, {failing}"


@dataclass(frozen=True)
class Match:
    name: str
    path: Path
    title: str
    upstream: tuple[str, ...]
    fixed_where: tuple[str, ...] = ()  # its manifest's [expected_when] conditions that expect it fixed
    otherwise: str = ""  # a related repro: how it differs ("where it fails otherwise, as crash"); "": the same bug
    via: str = ""  # the same bug met as its effect: the ops the failing ones read are the saved repro's

    @property
    def other_ops(self) -> bool:
        """Related only as cut from the same program, to other ops: another bug of the user's
        model, said on screen, but none for the compiler's maintainers (report.md)."""
        return self.otherwise.startswith("cut from the same program, to other ops")

    def line(self) -> str:
        links = f", upstream {', '.join(self.upstream)}" if self.upstream else ""
        fixed = f"; fixed where {' or '.join(self.fixed_where)}" if self.fixed_where else ""
        if self.otherwise.startswith(("cut from the same program", "cut to its effect")):  # not the same ops
            return f"looks related to a known bug: {self.name} ({self.otherwise}: {self.title}{links}{fixed})"  # smaller
        if self.otherwise:
            return (f"looks related to a known bug: {self.name} (the same ops on the same backend, {self.otherwise}: "
                    f"{self.title}{links}{fixed})")
        via = f"{self.via}: " if self.via else ""
        return f"looks like a known bug: {self.name} ({via}{self.title}{links}{fixed})"


def _match(repro: Repro, fixed: bool = True, **how: str) -> Match:
    """A saved repro as a Match, its manifest's title and links, said as `how` says
    (otherwise=, via=); `fixed`: with the conditions that expect it fixed."""
    m = repro.manifest
    return Match(repro.name, repro.path, m.title, tuple(m.upstream),
                 tuple(c.text for c, status in m.expected_when if status == "fixed") if fixed else (), **how)


def known_bugs(folder: Path, suite: Path | None = None) -> list[Match]:
    """The saved repros whose fingerprint is the reduction's in `folder`."""
    return [m for m in compare(folder, suite)[0] if not m.otherwise]


def compare(folder: Path, suite: Path | None = None,
            summary: dict[str, Any] | None = None) -> tuple[list[Match], list[str], list[str]]:
    """(the saved repros whose fingerprint is the reduction's in `folder` (`summary`: its
    summary.json, where it is still to be written), then those of the same ops and backend
    that fail otherwise (`otherwise` set: a crash and a mismatch of one cause, as XNNPACK's
    batch-norm fusion gives), the names of those of its backend that have none to compare:
    hand-written, or their summary.json gone or damaged, and those whose manifest.toml does
    not read, of any backend). `suite`: the one to read, else $TRTMIN_SUITE's and the
    shipped one (default_roots)."""
    mine = fingerprint(Path(folder), summary)
    if mine is None:
        return [], [], []
    found, related, blind, unread, names = [], [], [], [], set()
    for repro in (r for root in ([suite] if suite is not None else default_roots()) for r in find_repros(root)):
        if repro.path.resolve() == Path(folder).resolve() or repro.name in names:  # a team's copy of a shipped one
            continue
        names.add(repro.name)
        theirs = fingerprint(repro.path) if repro.manifest is not None else None
        if repro.manifest is None:
            unread.append(repro.name)
        elif theirs is None:
            if _family(repro.manifest.backend) == mine.backend:  # another's cannot match
                blind.append(repro.name)
        elif theirs.backend == mine.backend and _less_overloads(theirs.ops) == _less_overloads(mine.ops):
            otherwise = _how_it_differs(theirs, mine)
            (related if otherwise else found).append(_match(repro, otherwise=otherwise))
        elif (mine.read_off_ops and theirs.backend == mine.backend and theirs.kind == mine.read_off_kind
              and (theirs.kind != "mismatch" or theirs.error == mine.read_off_symptom)  # a mismatch: its symptom too
              and _less_overloads(theirs.ops) == _less_overloads(mine.read_off_ops)):  # the crash is its effect
            ops = ", ".join(op.split(".", 1)[-1] for op, _ in mine.read_off_ops)
            read = f"the ops the failing ones read ({ops})"
            if theirs.ops == mine.read_off_ops:
                found.append(_match(repro, via=f"{read}, compiled alone, fail as it does"))
            else:  # as for the reduced ops themselves: one kernel reached two ways is related, not a twin
                related.append(_match(repro, otherwise=f"cut to its effect: {read}, by other overloads, "
                                                       "fail as it does"))
        elif mine.program and theirs.program == mine.program:  # other ops, or another backend: said, not a twin
            ops = ", ".join(sorted(_less_overloads(theirs.ops)))
            same_ops = _less_overloads(theirs.ops) == _less_overloads(mine.ops)
            to = "the same" if same_ops else "other"
            related.append(_match(repro, fixed=False,
                                  otherwise=f"cut from the same program, to {to} ops ({ops}) on {theirs.backend}"))
    return found + related, blind, unread
