"""The verdict journal: every oracle verdict, appended as it arrives, in --out.

An interrupted run (Ctrl-C, SIGTERM, kill -9, a power cut) resumes by *replaying* the
deterministic reduction from the start against the journal: every verdict already paid
for is free, so the resumed run walks exactly the same path and reaches exactly the
same repro as an uninterrupted one, then goes on. Lines are flushed and fsynced; a torn
last line (killed mid-write) is ignored. Each verdict carries its session's number and the
seconds since it opened the journal, so a resumed run can say what all its sessions cost.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from pathlib import Path
from typing import Any

from minimize.emit.run_header import same_run
from minimize.program.candidate import Candidate
from oracles.errors import TrtminError, write_failure
from oracles.out_folder import JOURNAL, header_digest
from oracles.verdict import Verdict


def header_line(header: dict[str, Any]) -> str:
    return json.dumps({"header": header}, sort_keys=True)


class Journal:
    def __init__(self, folder: Path, header: dict[str, Any], resume: bool):
        self.path = folder / JOURNAL
        self.cache: dict[Candidate, list[Verdict]] = {}
        self.damaged: list[int] = []  # the numbers of the lines that hold no verdict (resumed)
        self.started = time.monotonic()
        self.session = 1  # this command's place among the sessions of the run (--resume: later ones)
        self.earlier_seconds = 0.0  # what the earlier sessions ran, each up to its last verdict
        self._write_failed = False
        if resume:
            data = self._load(header)
            self._cut_torn_tail(data)
            self._file = open(self.path, "a")
            self.digest = header_digest(data.decode(errors="replace").splitlines()[0])  # the run it continues
        else:
            folder.mkdir(parents=True, exist_ok=True)
            self._file = open(self.path, "w")
            header = {**header, "run_id": uuid.uuid4().hex}  # this run, not the next with the same options (--force):
            self._write({"header": header})  # outputs an interrupted --force left are known as the earlier run's
            self.digest = header_digest(header_line(header))
        stat = os.fstat(self._file.fileno())
        self._identity = (stat.st_dev, stat.st_ino)

    def _load(self, header: dict[str, Any]) -> bytes:
        """Check the header against this run's and read the verdicts; returns the file as read."""
        if not self.path.exists():
            raise TrtminError(f"--resume: {self.path.parent} has no {JOURNAL} to resume from; run without --resume")
        data = self.path.read_bytes()
        lines = data.decode(errors="replace").splitlines()
        same_run(self.path, lines[0] if lines else "", header)
        last_elapsed: dict[int, float] = {}  # each earlier session's seconds at its last verdict
        for number, line in enumerate(lines[1:], start=2):
            try:
                rec = json.loads(line)
            except json.JSONDecodeError:
                if number < len(lines) or data.endswith(b"\n"):  # not the tail a kill mid-write tore
                    self.damaged.append(number)
                continue
            try:
                runs = [Verdict.from_dict(v) for v in rec["runs"]]
                if not runs:
                    raise ValueError("no runs")
                self.cache[Candidate.from_record(rec)] = runs
            except (AttributeError, KeyError, TypeError, ValueError):
                self.damaged.append(number)  # its candidate is asked again: the others' verdicts stay paid for
                continue
            session, elapsed = rec.get("session", 1), rec.get("elapsed", 0.0)  # none in older journals
            if isinstance(session, int) and isinstance(elapsed, (int, float)):
                last_elapsed[session] = max(last_elapsed.get(session, 0.0), float(elapsed))
        self.session = max(last_elapsed, default=0) + 1
        self.earlier_seconds = sum(last_elapsed.values())
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
            self._write_failed = True
            then = "--resume" if "header" not in record else "--force"  # a header cut short cannot resume
            raise write_failure(str(self.path), e, f"rerun with {then}") from None

    def record(self, cand: Candidate, runs: list[Verdict]) -> None:
        self._write({**cand.record(), "runs": [v.to_dict() for v in runs], "session": self.session,
                     "elapsed": round(time.monotonic() - self.started, 2)})

    def still_in_place(self) -> bool:
        """Whether the journal file at `path` is still the one this run writes: not gone with
        a folder removed mid-run, nor another run's, started on the path since."""
        try:
            now = os.stat(self.path)
        except OSError:
            return False
        return (now.st_dev, now.st_ino) == self._identity

    def close(self) -> None:
        """Closes the file. After a write that failed (a full disk, said in one line), the
        bytes of it left in the buffer fail again here: that error is the one said already."""
        try:
            self._file.close()
        except OSError:
            if not self._write_failed:
                raise
