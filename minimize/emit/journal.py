"""The verdict journal: every oracle verdict, appended as it arrives, in --out.

An interrupted run (Ctrl-C, SIGTERM, kill -9, a power cut) resumes by *replaying* the
deterministic reduction from the start against the journal: every verdict already paid
for is free, so the resumed run walks exactly the same path and reaches exactly the
same repro as an uninterrupted one, then goes on. Lines are flushed and fsynced; a torn
last line (killed mid-write) is ignored.
"""

from __future__ import annotations

import json
import os
from dataclasses import MISSING, fields
from pathlib import Path
from typing import Any

from minimize.options import Options
from minimize.program.candidate import Candidate
from oracles.errors import TrtminError
from oracles.out_folder import JOURNAL, header_digest
from oracles.verdict import Verdict


def header_line(header: dict[str, Any]) -> str:
    return json.dumps({"header": header}, sort_keys=True)


class Journal:
    def __init__(self, folder: Path, header: dict[str, Any], resume: bool):
        self.path = folder / JOURNAL
        self.cache: dict[Candidate, list[Verdict]] = {}
        if resume:
            data = self._load(header)
            self._cut_torn_tail(data)
            self._file = open(self.path, "a")
            self.digest = header_digest(data.decode(errors="replace").splitlines()[0])  # the run it continues
        else:
            folder.mkdir(parents=True, exist_ok=True)
            self._file = open(self.path, "w")
            self._write({"header": header})
            self.digest = header_digest(header_line(header))

    def _load(self, header: dict[str, Any]) -> bytes:
        """Check the header against this run's and read the verdicts; returns the file as read."""
        if not self.path.exists():
            raise TrtminError(f"--resume: {self.path.parent} has no {JOURNAL} to resume from; run without --resume")
        data = self.path.read_bytes()
        lines = data.decode(errors="replace").splitlines()
        try:
            first = json.loads(lines[0])["header"]
        except (IndexError, KeyError, json.JSONDecodeError):
            raise TrtminError(f"--resume: {self.path} is damaged; start over with --force") from None
        if not isinstance(first, dict):
            raise TrtminError(f"--resume: {self.path} is damaged; start over with --force")
        then, now = _recorded_by_both(first, header)
        if then != now:
            raise TrtminError(f"--resume: {self.path.parent} was made {_difference(then, now)}; "
                              "rerun with the same arguments, or start over with --force")
        for number, line in enumerate(lines[1:], start=2):
            try:
                rec = json.loads(line)
            except json.JSONDecodeError:
                continue  # a line torn by a kill mid-write
            try:
                runs = [Verdict.from_dict(v) for v in rec["runs"]]
                if not runs:
                    raise ValueError("no runs")
                self.cache[Candidate.from_record(rec)] = runs
            except (AttributeError, KeyError, TypeError, ValueError):
                raise TrtminError(f"--resume: {self.path} is damaged (line {number} is not a verdict); "
                                  "start over with --force") from None
        return data

    def _cut_torn_tail(self, data: bytes) -> None:
        """Drop what a kill mid-write left after the last whole line, so the next verdict
        starts a line of its own instead of being glued to the fragment (and lost). A
        tail that is a whole record, killed before its newline, is kept and ended."""
        whole = data.rfind(b"\n") + 1
        if whole == len(data):
            return
        with open(self.path, "r+b") as f:
            try:
                json.loads(data[whole:])
                f.seek(len(data))
                f.write(b"\n")
            except ValueError:  # JSON's errors, and bytes that are not text
                f.truncate(whole)

    def _write(self, record: dict[str, Any]) -> None:
        try:
            self._file.write(json.dumps(record, sort_keys=True) + "\n")  # a header: header_line's text
            self._file.flush()
            os.fsync(self._file.fileno())
        except OSError as e:  # a full disk: say so in one line; the verdicts written so far stay
            then = "--resume" if "header" not in record else "--force"  # a header cut short cannot resume
            raise TrtminError(f"cannot write {self.path} ({e.strerror or e}); free space or choose another "
                              f"--out, then rerun with {then}") from None

    def record(self, cand: Candidate, runs: list[Verdict]) -> None:
        self._write({**cand.record(), "runs": [v.to_dict() for v in runs]})

    def close(self) -> None:
        self._file.close()


def _recorded_by_both(then: dict[str, Any], now: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The two headers, each cut to what both record: a journal from before an option or a
    digest was recorded says nothing of it, and that is not a difference, unless the option
    is now off its default (what that journal's run had: --reference float64 does not
    replay verdicts judged against eager alone)."""
    then_opts, now_opts = then.get("options", {}), now.get("options", {})
    both = {k for k in then if k in now and k != "options"}
    opts = {k for k in then_opts if k in now_opts}
    defaults = {f.name: f.default if f.default is not MISSING else f.default_factory()  # type: ignore[misc]
                for f in fields(Options) if f.default is not MISSING or f.default_factory is not MISSING}
    new = {k: defaults[k] for k in now_opts if k not in then_opts and k in defaults and now_opts[k] != defaults[k]}
    then_opts, opts = {**then_opts, **new}, opts | set(new)
    if "inputs_sha256" in both:
        opts.discard("inputs")  # the contents are compared: the same inputs by another path resume
    if then.get("program_sha256") and now.get("program_sha256"):
        both.discard("model_sha256")  # the program is compared: a re-export of the same code resumes
    else:
        both.discard("program_sha256")  # one could not be computed: the file's bytes decide
    cut = lambda h, o: {**{k: h[k] for k in both}, "options": {k: o[k] for k in opts}}  # noqa: E731
    return cut(then, then_opts), cut(now, now_opts)


def _difference(then: dict[str, Any], now: dict[str, Any]) -> str:
    """What differs between the journal's header and this run's (each cut by
    _recorded_by_both to what both record: both digests, or neither), in the CLI's words."""
    if then.get("program_sha256") != now.get("program_sha256"):
        return ("from another model (its graph or weights differ: program sha256 "
                f"{then['program_sha256'][:12]}... there, {now['program_sha256'][:12]}... now)")
    if then.get("model_sha256") != now.get("model_sha256"):
        # A journal without the program's digest: a re-export of the same code differs too
        # (its stack traces hold the source's path).
        return (f"from another model (the model file's contents differ: sha256 {then['model_sha256'][:12]}... "
                f"there, {now['model_sha256'][:12]}... now; a re-export differs even where the code is the same)")
    if then.get("inputs_sha256") != now.get("inputs_sha256"):
        return "with other inputs (the --inputs file's contents differ)"
    if then.get("plugin_sha256") != now.get("plugin_sha256"):
        return "with another version of the plugin file (its contents differ)"
    if then.get("torch") != now.get("torch"):
        return f"with torch {then.get('torch')} (this is {now.get('torch')})"
    old, new = then.get("options", {}), now.get("options", {})
    flag = {"settings": "set", "memory_limit_mb": "memory-limit"}
    changed = [f"--{flag.get(k, k.replace('_', '-'))} {old.get(k)!r} there, {new.get(k)!r} now"
               for k in sorted(set(old) | set(new)) if old.get(k) != new.get(k)]
    return f"with other options ({'; '.join(changed)})" if changed else "with other options"
