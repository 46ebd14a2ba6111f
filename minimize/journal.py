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
from pathlib import Path
from typing import Any, Sequence

from minimize.out_dir import JOURNAL
from oracles.errors import TrtminError
from oracles.verdict import Verdict


def encode_kept(kept: Sequence[int]) -> list[list[int]]:
    """Runs of consecutive indices: a 5,000-node prefix is one pair, not 5,000 numbers."""
    runs: list[list[int]] = []
    for i in kept:
        if runs and runs[-1][1] == i - 1:
            runs[-1][1] = i
        else:
            runs.append([i, i])
    return runs


def decode_kept(runs: list[list[int]]) -> tuple[int, ...]:
    return tuple(i for a, b in runs for i in range(a, b + 1))


class Journal:
    def __init__(self, folder: Path, header: dict[str, Any], resume: bool):
        self.path = folder / JOURNAL
        self.cache: dict[tuple[tuple[int, ...], tuple[tuple[str, str], ...]], list[Verdict]] = {}
        if resume:
            self._load(header)
            self._file = open(self.path, "a")
        else:
            folder.mkdir(parents=True, exist_ok=True)
            self._file = open(self.path, "w")
            self._write({"header": header})

    def _load(self, header: dict[str, Any]) -> None:
        if not self.path.exists():
            raise TrtminError(f"--resume: {self.path.parent} has no {JOURNAL} to resume from; run without --resume")
        lines = self.path.read_text().splitlines()
        try:
            first = json.loads(lines[0])["header"]
        except (IndexError, KeyError, json.JSONDecodeError):
            raise TrtminError(f"--resume: {self.path} is damaged; start over with --force") from None
        # a journal from before an option was recorded says nothing of it: not a difference
        recorded = first.get("options", {}) if isinstance(first, dict) else {}
        header = {**header, "options": {k: v for k, v in header["options"].items() if k in recorded}}
        if first != header:
            raise TrtminError(f"--resume: {self.path.parent} was made {_difference(first, header)}; "
                              "rerun with the same arguments, or start over with --force")
        for line in lines[1:]:
            try:
                rec = json.loads(line)
            except json.JSONDecodeError:
                continue  # a line torn by a kill mid-write
            settings = tuple((k, v) for k, v in rec.get("settings", []))
            self.cache[(decode_kept(rec["kept"]), settings)] = [Verdict.from_dict(v) for v in rec["runs"]]

    def _write(self, record: dict[str, Any]) -> None:
        self._file.write(json.dumps(record, sort_keys=True) + "\n")
        self._file.flush()
        os.fsync(self._file.fileno())

    def record(self, key: tuple[Sequence[int], tuple[tuple[str, str], ...]], runs: list[Verdict]) -> None:
        kept, settings = key
        self._write({"kept": encode_kept(kept), "settings": [list(kv) for kv in settings],
                     "runs": [v.to_dict() for v in runs]})

    def close(self) -> None:
        self._file.close()


def _difference(then: dict[str, Any], now: dict[str, Any]) -> str:
    """What differs between the journal's header and this run's, in the CLI's words."""
    if then.get("model_sha256") != now.get("model_sha256"):
        return "from another model"
    old, new = then.get("options", {}), now.get("options", {})
    flag = {"settings": "set", "memory_limit_mb": "memory-limit"}
    changed = [f"--{flag.get(k, k.replace('_', '-'))} {old.get(k)!r} there, {new.get(k)!r} now"
               for k in sorted(set(old) | set(new)) if old.get(k) != new.get(k)]
    return f"with other options ({'; '.join(changed)})" if changed else "with other options"
