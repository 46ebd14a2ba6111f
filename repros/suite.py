"""The saved repro suite: find the folders, read and validate their manifests, add new ones.

A suite is a folder with one sub-folder per bug (default: $TRTMIN_SUITE, else ``repros/suite/``
inside this package; any folder works, and a single repro folder counts as a suite of one)::

    <root>/<name>/repro.py        the standalone script (docs/design.md#the-script-contract)
    <root>/<name>/manifest.toml   what the bug is and what status to expect
    <root>/<name>/...             small tensors, plugin.py, report.md, summary.json

Sub-folders whose name starts with "." or "_" are ignored (``add_repro`` builds its
entries in hidden temporary folders).

manifest.toml: what the bug is and what status to expect; its fields and the ``[expected_when]``
conditions are in docs/reference.md ("The suite's manifest").

The rules that turn a run's status and this expectation into ok / not ok are in
``repros.runner``.
"""

from __future__ import annotations

import fnmatch
import glob
import json
import math
import os
import re
import shutil
import tomllib
import uuid
import dataclasses
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import Any, Iterable, Protocol, Sequence

from oracles.out_folder import (JOURNAL, MANIFEST, OUR_PATTERN, PLUGIN_COPY_PREFIX, edited_copy_name,
                               edited_since_written, emitted_names, file_digest, outputs_of_journal)
from oracles.backend_names import DEVICE_WORDS, check_backend_name, is_device, parse_backend
from oracles.environment import KEY_PACKAGES, NOT_INSTALLED
from oracles.errors import TrtminError
from oracles.verdict import ORACLES

SCRIPT = "repro.py"
EXPECTED = ("reproduces", "fixed")
EXPECTED_WHEN = ("reproduces", "fixed", "skipped", "changed")  # changed: a known other failure, on one stack
REQUIRED_KEYS = ("title", "backend", "oracle", "device", "added", "expected")
OPTIONAL_KEYS = ("upstream", "runs", "first_seen", "expected_when", "notes")
MAX_RUNS = 20  # a flaky repro's runs: `repros run` tries it up to this many times

# what `trtmin repros add` copies from a `trtmin reduce --out` folder (never journal.jsonl)
REDUCE_FILES = ("repro.py", "repro_inputs.pt", "plugin.py", "report.md", "summary.json")
EMITTED_DATA = tuple(emitted_names("tensorrt")[1:])  # what --emit's scripts (repro_<backend>.py) read
UPSTREAM_URL = re.compile(r"https?://\S+$")  # an upstream issue's or PR's address, in a manifest or --upstream
NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,99}")


SUITE_VARIABLE = "TRTMIN_SUITE"
SHIPPED_SUITE = Path(__file__).resolve().parent / "suite"  # the one shipped with trtmin


def default_root() -> Path:
    """The suite a command reads without --suite: $TRTMIN_SUITE where it is set (a team's
    own suite, which reduce's known-bug note reads too), else the one shipped with trtmin,
    the ``suite/`` folder beside this module."""
    chosen = os.environ.get(SUITE_VARIABLE, "").strip()
    return Path(chosen).expanduser() if chosen else SHIPPED_SUITE


def from_variable(root: Path) -> bool:
    """Whether `root` is the suite $TRTMIN_SUITE names (an error about it names the variable:
    the user typed no path)."""
    chosen = os.environ.get(SUITE_VARIABLE, "").strip()
    return bool(chosen) and Path(chosen).expanduser() == Path(root)


def suite_named(root: Path | None) -> str:
    """How a message names a suite: the shipped one, $TRTMIN_SUITE's, or the folder given."""
    root = default_root() if root is None else Path(root)
    if root.resolve() == SHIPPED_SUITE.resolve():
        return "the shipped suite"
    return f"${SUITE_VARIABLE}'s suite {root}" if from_variable(root) else str(root)


def default_roots() -> list[Path]:
    """The suites a known-bug comparison reads without --suite: $TRTMIN_SUITE's (a team's),
    then the shipped one too, whose bugs a team's suite does not repeat."""
    chosen = default_root()
    if not SHIPPED_SUITE.is_dir() or chosen.resolve() == SHIPPED_SUITE.resolve():
        return [chosen]
    return [chosen, SHIPPED_SUITE]


def suite_words(root: Path) -> str:
    """" --suite ROOT" for a command line, where ROOT is not what the command reads anyway."""
    return "" if Path(root).resolve() == default_root().resolve() else f" --suite {_shown(Path(root))}"


def _shown(path: Path) -> str:
    """The path as the user gave it ("." would say nothing), relative where it is below the
    current folder."""
    try:
        shown = str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)
    return str(path) if shown == "." else shown


# ---------------------------------------------------------------- conditions

class Facts(Protocol):
    """What a condition may ask about the machine (``repros.runner.Facts`` provides it)."""

    @property
    def label(self) -> str: ...

    @property
    def gpu(self) -> str | None: ...

    def version(self, package: str) -> str: ...


def version_tuple(text: str) -> tuple[int, ...]:
    """The release numbers of a version string: "2.16.0.dev2025+cu128" -> (2, 16, 0)."""
    m = re.match(r"\s*v?(\d+(?:\.\d+)*)", text)
    if not m:
        raise ValueError(f"{text!r} does not start with a release number like 2.16 or 10.16.0")
    return tuple(int(p) for p in m.group(1).split("."))


def compare_versions(a: str, op: str, b: str) -> bool:
    x, y = version_tuple(a), version_tuple(b)
    n = max(len(x), len(y))
    x, y = x + (0,) * (n - len(x)), y + (0,) * (n - len(y))
    return {">=": x >= y, ">": x > y, "<=": x <= y, "<": x < y, "==": x == y, "!=": x != y}[op]


_VERSION_COND = re.compile(r"([A-Za-z0-9][A-Za-z0-9_.-]*)\s*(>=|<=|==|!=|>|<)\s*(\S+)")
_CONDITION_VERSION = re.compile(r"v?\d+(?:\.\d+)*(?:(?:a|b|rc)\d*|\.dev\d*|\.post\d*)*(?:\+[\w.]+)?")


@dataclass(frozen=True)
class Condition:
    """One ``[expected_when]`` key, parsed."""

    text: str
    kind: str  # no_gpu | gpu | label | missing | version
    arg: str = ""
    op: str = ""
    version: str = ""

    @classmethod
    def parse(cls, text: str) -> "Condition":
        t = text.strip()
        if t in ("no_gpu", "gpu"):
            return cls(text, t)
        for kind in ("label", "missing"):
            if t.startswith(kind + ":"):
                arg = t[len(kind) + 1:].strip()
                if not arg:
                    raise ValueError(f"{text!r} names nothing after '{kind}:'")
                return cls(text, kind, arg)
        m = _VERSION_COND.fullmatch(t)
        if m:
            if not _CONDITION_VERSION.fullmatch(m.group(3)):  # "2.x" had been read as 2
                raise ValueError(f"{text!r}: {m.group(3)!r} is not a version; write a release number like 2.16 "
                                 "or 2.16.0 (a suffix such as rc1, .dev20250101 or +cu128 may follow)")
            return cls(text, "version", m.group(1), m.group(2), m.group(3))
        raise ValueError(f"{text!r} is not a condition (no_gpu, gpu, label:TEXT, missing:PACKAGE, "
                         f"or 'PACKAGE >= VERSION' with >=, >, <=, <, ==, !=)")

    def holds(self, facts: Facts) -> bool:
        if self.kind == "no_gpu":
            return facts.gpu is None
        if self.kind == "gpu":
            return facts.gpu is not None
        if self.kind == "label":
            return self.arg.lower() in facts.label.lower()
        installed = facts.version(self.arg)
        if self.kind == "missing":
            return installed == NOT_INSTALLED
        if installed == NOT_INSTALLED:
            return False
        try:
            return compare_versions(installed, self.op, self.version)
        except ValueError:  # an installed version we cannot read: the condition does not hold
            return False


# ---------------------------------------------------------------- manifests

@dataclass(frozen=True)
class Manifest:
    title: str
    backend: str
    oracle: str
    device: str
    added: str
    expected: str
    upstream: tuple[str, ...] = ()
    first_seen: dict[str, str] = field(default_factory=dict)
    expected_when: tuple[tuple[Condition, str], ...] = ()
    notes: str = ""
    runs: int = 1  # a flaky bug's: `repros run` runs the script up to this many times; one REPRODUCED is enough

    def expectation(self, facts: Facts | None) -> tuple[str, str]:
        """(expected status, why): the first ``[expected_when]`` condition that holds, else
        ``expected``. ``why`` is "" for the default, else 'expected_when "COND"'."""
        if facts is not None:
            for cond, status in self.expected_when:
                if cond.holds(facts):
                    return status, f'expected_when "{cond.text}"'
        return self.expected, ""


def _check_str(data: dict[str, Any], key: str, problems: list[str]) -> str:
    v = data.get(key)
    if not isinstance(v, str) or not v.strip():
        problems.append(f"{key} must be a non-empty string (got {v!r})")
        return ""
    return v.strip()


def manifest_from_dict(data: dict[str, Any]) -> tuple[Manifest | None, list[str]]:
    """Validate a parsed manifest; returns (manifest, []) or (None, problems)."""
    problems: list[str] = []
    missing = [k for k in REQUIRED_KEYS if k not in data]
    if missing:
        problems.append(f"missing {', '.join(missing)}")
    unknown = sorted(set(data) - set(REQUIRED_KEYS) - set(OPTIONAL_KEYS))
    if unknown:
        problems.append(f"unknown key{'s' if len(unknown) > 1 else ''} {', '.join(unknown)} "
                        f"(known: {', '.join(REQUIRED_KEYS + OPTIONAL_KEYS)})")
    title, backend, oracle, device = ("" if k not in data else _check_str(data, k, problems)
                                      for k in ("title", "backend", "oracle", "device"))
    if "\n" in title:
        problems.append("title must be one line")
    if backend:
        try:
            check_backend_name(backend)
        except TrtminError as e:
            problems.append(f"backend: {e}")
    if oracle and oracle not in ORACLES:
        problems.append(f"oracle = {oracle!r} is not one of {', '.join(ORACLES)}")
    if device and not is_device(device):
        problems.append(f"device = {device!r} is not {DEVICE_WORDS}")
    added = ""
    if "added" in data:
        a = data["added"]
        if isinstance(a, date):
            added = a.isoformat()
        elif isinstance(a, str) and re.fullmatch(r"\d{4}-\d{2}-\d{2}", a.strip()):
            try:
                added = date.fromisoformat(a.strip()).isoformat()
            except ValueError:
                problems.append(f"added = {a!r} is not a real date")
        else:
            problems.append(f"added must be a date like \"2026-11-30\" (got {a!r})")
    expected = data.get("expected", "")
    if "expected" in data and expected not in EXPECTED:
        problems.append(f"expected = {expected!r} is not one of {', '.join(map(repr, EXPECTED))}"
                        + (" (use [expected_when] for 'skipped')" if expected == "skipped" else ""))
    upstream = data.get("upstream", [])
    if not isinstance(upstream, list) or not all(isinstance(u, str) and UPSTREAM_URL.match(u) for u in upstream):
        problems.append(f"upstream must be a list of http(s) URLs (got {upstream!r})")
        upstream = []
    first_seen = data.get("first_seen", {})
    if not isinstance(first_seen, dict) or not all(isinstance(v, str) for v in first_seen.values()):
        problems.append(f"first_seen must be a table of version strings, e.g. torch = \"2.15.0\" "
                        f"(got {first_seen!r}; quote the versions)")
        first_seen = {}
    when: list[tuple[Condition, str]] = []
    raw_when = data.get("expected_when", {})
    if not isinstance(raw_when, dict):
        problems.append(f"expected_when must be a table of \"condition\" = \"status\" (got {raw_when!r})")
        raw_when = {}
    for key, status in raw_when.items():
        try:
            cond = Condition.parse(key)
        except ValueError as e:
            problems.append(f"expected_when: {e}")
            continue
        if status not in EXPECTED_WHEN:
            problems.append(f"expected_when \"{key}\" = {status!r} is not one of "
                            f"{', '.join(map(repr, EXPECTED_WHEN))}")
            continue
        when.append((cond, status))
    runs = data.get("runs", 1)
    if isinstance(runs, bool) or not isinstance(runs, int) or not 1 <= runs <= MAX_RUNS:
        problems.append(f"runs must be a whole number from 1 to {MAX_RUNS}: how many times a flaky repro is run "
                        f"before it counts as FIXED (got {runs!r})")
        runs = 1
    notes = data.get("notes", "")
    if not isinstance(notes, str):
        problems.append(f"notes must be a string (got {type(notes).__name__})")
        notes = ""
    if problems:
        return None, problems
    return Manifest(title=title, backend=backend, oracle=oracle, device=device, added=added,
                    expected=expected, upstream=tuple(upstream), first_seen=dict(first_seen),
                    expected_when=tuple(when), notes=notes.strip(), runs=runs), []


def parse_manifest(path: Path) -> Manifest:
    """Read and validate one manifest.toml; one TrtminError naming every problem in it."""
    path = Path(path)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8-sig"))  # an editor's byte-order mark: no TOML error
    except FileNotFoundError:
        fix = (f"it is a `trtmin reduce` output: save it into the suite with `trtmin repros add "
               f"{_shown(path.parent)} --name NAME{suite_words(path.parent.parent)}`"
               if (path.parent / "summary.json").is_file() else
               "see docs/reference.md, \"The suite's manifest\", for its fields")
        raise TrtminError(f"{_shown(path)}: not found; every repro folder needs a manifest.toml ({fix})") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise TrtminError(f"{_shown(path)}: not valid TOML ({e})") from None
    except OSError as e:  # a folder of that name, a file it may not read
        raise TrtminError(f"{_shown(path)}: cannot be read ({e.strerror or e}); it must be a TOML file") from None
    manifest, problems = manifest_from_dict(data)
    if manifest is None:
        raise TrtminError(f"{_shown(path)}: " + "; ".join(problems))
    return manifest


# ---------------------------------------------------------------- the suite

@dataclass(frozen=True)
class Repro:
    """One saved repro folder. ``problem`` says why it cannot run (then ``manifest`` may be None)."""

    name: str
    path: Path
    manifest: Manifest | None
    problem: str | None = None

    @property
    def script(self) -> Path:
        return self.path / SCRIPT


def load_repro(folder: Path) -> Repro:
    """One folder as a Repro; a missing script or a bad manifest becomes ``problem``."""
    folder = Path(folder)
    manifest: Manifest | None = None
    problem: str | None = None
    if folder.is_symlink() and not folder.exists():
        link = Path(_shown(folder.parent)) / folder.name  # the link's own path: _shown follows it
        return Repro(folder.name, folder, None, f"{link}: a link to {os.readlink(folder)}, which is gone; "
                                                "link it to the repro's folder again, or remove the link")
    try:
        manifest = parse_manifest(folder / MANIFEST)
    except TrtminError as e:
        problem = str(e)
    if not (folder / SCRIPT).is_file():
        problem = f"{_shown(folder)}: no {SCRIPT}" + (f"; {problem}" if problem else "")
    else:
        gone = files_the_script_reads_that_are_gone(folder / SCRIPT)
        if gone:
            problem = (f"{_shown(folder)}: no {' or '.join(gone)}, which {SCRIPT} reads (copy it back from the reduce's "
                       "--out folder)") + (f"; {problem}" if problem else "")
    return Repro(folder.name, folder, manifest, problem)


def files_the_script_reads_that_are_gone(script: Path) -> list[str]:
    """The data files trtmin writes beside a script (the inputs, a plugin) that the script
    names and its folder lacks: its run would say "SKIPPED: cannot run", as if the machine
    lacked something, where the repro folder is what is broken."""
    try:
        text = script.read_text(errors="replace")
    except OSError:
        return []
    copies = re.findall(rf"""['"]({PLUGIN_COPY_PREFIX}\w+\.py)['"]""", text)  # a plugin's own modules
    return [name for name in dict.fromkeys(("repro_inputs.pt", "plugin.py", *copies))
            if re.search(rf"""['"]{re.escape(name)}['"]""", text) and not (script.parent / name).exists()]


def _is_entry(p: Path) -> bool:
    """A repro's folder in a suite; a link whose target is gone too (listed as broken, where
    skipping it lost a repro from every run without a word)."""
    if p.name.startswith((".", "_")):
        return False
    return (p.is_dir() and ((p / SCRIPT).exists() or (p / MANIFEST).exists())) or (p.is_symlink() and not p.exists())


def find_repros(root: Path | str | None = None, names: Sequence[str] | None = None) -> list[Repro]:
    """The repros under ``root`` (default: the shipped suite), sorted by name.

    A folder that is itself a repro (has repro.py or manifest.toml) is a suite of one.
    ``names`` picks some (a name may be a shell pattern: 'trt_*'); an unknown name, or a
    pattern that matches none, is a TrtminError listing the known ones.
    Bad manifests do not raise here: they come back with ``problem`` set, so one broken
    entry does not stop the others from running (``validate_suite`` raises instead).
    """
    root = default_root() if root is None else Path(root)
    if not root.is_dir():
        if from_variable(root):
            raise TrtminError(f"${SUITE_VARIABLE}={root} is not a folder; set it to your suite's folder (one "
                              f"sub-folder per repro), or unset it for the shipped suite")
        raise TrtminError(f"{_shown(root)} is not a folder; pass a suite folder (one sub-folder per repro, "
                          f"each with repro.py and manifest.toml)")
    if (root / SCRIPT).exists() or (root / MANIFEST).exists():
        folders = [root]
    else:
        folders = sorted((p for p in root.iterdir() if _is_entry(p)), key=lambda p: p.name)
    if names:
        by_name = {p.name: p for p in folders}
        picked = {n: [k for k in by_name if fnmatch.fnmatchcase(k, n)] if any(c in n for c in "*?[") else
                  [n] if n in by_name else [] for n in names}  # a pattern picks every name it matches
        unknown = [n for n, found in picked.items() if not found]
        if unknown:
            known = ", ".join(by_name) or "none"
            raise TrtminError(f"no repro named {', '.join(unknown)} in {_shown(root)} (known: {known})")
        wanted = {k for found in picked.values() for k in found}
        folders = [p for p in folders if p.name in wanted]
    return [load_repro(p) for p in folders]


def validate_suite(root: Path | str | None = None, names: Sequence[str] | None = None) -> list[Repro]:
    """Like ``find_repros`` but a TrtminError, one line per bad entry, if any is bad."""
    repros = find_repros(root, names)
    bad = [r.problem for r in repros if r.problem]
    if bad:
        raise TrtminError(f"{len(bad)} bad repro folder{'s' if len(bad) > 1 else ''}:\n" + "\n".join(bad))
    return repros


# ---------------------------------------------------------------- adding a repro

def _toml_str(s: str) -> str:
    # JSON's escapes are valid in a TOML basic string; TOML also wants DEL escaped
    return json.dumps(s, ensure_ascii=False).replace("\x7f", "\\u007f")


def _toml_multiline(s: str) -> str:
    s = "".join(c for c in s if c in "\n\t" or (ord(c) >= 32 and c != "\x7f"))
    s = s.replace("\\", "\\\\").replace('"""', '""\\"')
    if s.endswith('"'):
        s += "\n"
    return f'"""\n{s}\n"""'


# The commented [expected_when] example a manifest without one gets, less its condition line
EXAMPLE_HEAD = ("# Once a release fixes it, say where (first condition that holds wins):", "# [expected_when]")


def manifest_text(m: Manifest, comment_example: bool = True, fixed_by: str | None = None) -> str:
    """manifest.toml for ``m`` (the inverse of ``parse_manifest``). Its commented example
    names the release of `fixed_by` (the package the reduction says the bug is in:
    onnxscript, whose torch_lib holds torch.onnx's lowerings) where first_seen has it, else
    the compiler's own, else torch's."""
    lines = [f"title = {_toml_str(m.title)}",
             "upstream = [" + ", ".join(_toml_str(u) for u in m.upstream) + "]",
             f"backend = {_toml_str(m.backend)}",
             f"oracle = {_toml_str(m.oracle)}",
             f"device = {_toml_str(m.device)}",
             f"added = {_toml_str(m.added)}",
             f"expected = {_toml_str(m.expected)}"]
    if m.runs > 1:
        lines.append(f"runs = {m.runs}  # flaky: run up to {m.runs} times, REPRODUCED if any run is")
    if m.notes:
        lines.append(f"notes = {_toml_multiline(m.notes)}")
    lines += ["", "[first_seen]"] + [f"{_toml_str(k) if not re.fullmatch(r'[A-Za-z0-9_-]+', k) else k} = "
                                     f"{_toml_str(v)}" for k, v in m.first_seen.items()]
    if m.expected_when:
        lines += ["", "[expected_when]"] + [f"{_toml_str(c.text)} = {_toml_str(s)}" for c, s in m.expected_when]
    elif comment_example:  # executorch > 1.4.1
        package, seen = next(((k, v) for k, v in m.first_seen.items() if k == fixed_by),
                             next(((k, v) for k, v in m.first_seen.items() if k != "torch"),
                                  next(iter(m.first_seen.items()), ("torch", "2.16"))))
        lines += ["", *EXAMPLE_HEAD, f'# "{package} > {seen}" = "fixed"']
    return "\n".join(lines) + "\n"


def _title_from(out_dir: Path, fallback: str) -> str:
    report = out_dir / "report.md"
    if report.is_file():
        for line in report.read_text(encoding="utf-8", errors="replace").splitlines():
            if line.strip():
                return line.strip().lstrip("#").strip() or fallback
    return fallback


def users_files(entry: Path, new: Path | None = None) -> list[Path]:
    """What a user put in a saved repro's folder (notes, data, a hand-made repro_fp16.py):
    neither what `repros add` saved there (its summary.json's files; a hand-written entry:
    repro.py) nor among the new entry's (`new`), so `repros add --force` carries it over."""
    try:
        summary = json.loads((entry / "summary.json").read_text())
    except (OSError, ValueError):
        summary = None  # hand-written: repro.py is the entry, the rest the user's
    saved = files_of_the_run(entry, summary) if isinstance(summary, dict) else []  # what `repros add` copied
    ours = {MANIFEST, SCRIPT, *saved}
    return sorted(p for p in entry.iterdir() if not p.name.startswith(".") and p.name not in ours
                  and not (new is not None and os.path.lexists(new / p.name)))


def check_same_run(out_dir: Path, summary: dict[str, Any]) -> None:
    """The outputs must be the journal's run: a run started over an earlier one (--force)
    and stopped before it wrote its own leaves the earlier run's repro beside its journal."""
    if outputs_of_journal(out_dir, summary) is False:  # None: no journal, or outputs from before the digest
        raise TrtminError(f"{_shown(out_dir)}: repro.py and summary.json are an earlier run's than {JOURNAL} (a "
                          "later run there stopped before it wrote its own); finish that run with `trtmin reduce "
                          "... --resume`, or pass the folder of a finished run")


def flaky_runs(flakiness: Any) -> tuple[int, str]:
    """(runs, note) for a reduction's summary.json `flakiness`: a program that failed f of
    r runs is run until one of its runs fails, as many times as leave a 1-in-100 chance
    that none does by luck, (1 - f/r)^runs <= 0.01; (1, "") for a bug that failed every run."""
    try:
        repeat, failed = int(flakiness["repeat"]), int(flakiness["final_failures"])
    except (TypeError, KeyError, ValueError):
        return 1, ""
    if not 0 < failed < repeat:
        return 1, ""
    runs = min(MAX_RUNS, max(2, math.ceil(math.log(0.01) / math.log(1 - failed / repeat))))
    return runs, (f"Flaky: the reduced program failed {failed} of {repeat} runs; `repros run` runs it up to {runs} "
                  "times (runs), so that a run that misses it by chance is 1 in 100 or less.")


def read_summary(out_dir: Path) -> Any:
    """A reduce output's summary.json, read as JSON; a damaged one is said in one line
    (`repros match` had called it "no reduction to compare"), not passed over."""
    try:
        return json.loads((out_dir / "summary.json").read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise TrtminError(f"{_shown(out_dir / 'summary.json')} is not valid JSON ({e}); "
                          f"rerun `trtmin reduce` to write it again") from None


def packages_of(backend: str, out_dir: Path | None = None) -> tuple[str, ...]:
    """The packages whose versions say where a backend's bug was seen (first_seen); for a
    plugin, what its copy in `out_dir` imports (its first path may be gone)."""
    spec, copy = parse_backend(backend), out_dir / "plugin.py" if out_dir is not None else None
    if copy is not None and copy.is_file() and spec.kind == "plugin":
        spec = dataclasses.replace(spec, target=str(copy))
    return spec.packages(KEY_PACKAGES)


def files_of_the_run(out_dir: Path, summary: dict[str, Any]) -> list[str]:
    """The files the run wrote, as its summary.json lists them (an earlier run's, which
    --force leaves in place, stay out of the suite); for a summary from before that list,
    trtmin's names found there; the files for the compiler's maintainers (model.onnx,
    model_io.npz), which its report.md names. Never the journal, nor reduced.pt2 (the suite
    keeps scripts)."""
    listed = summary.get("files")
    emitted_tensorrt = "tensorrt" in (summary.get("emitted") or [])  # its script reads model.onnx
    upstream = summary.get("upstream_files") if isinstance(summary.get("upstream_files"), dict) else {}
    if isinstance(listed, list) and all(isinstance(n, str) for n in listed):
        return [n for n in listed if n in REDUCE_FILES or OUR_PATTERN.fullmatch(n) or n in upstream
                or (n in EMITTED_DATA and emitted_tensorrt)]
    emitted = sorted(p.name for p in out_dir.iterdir() if OUR_PATTERN.fullmatch(p.name) or p.name in EMITTED_DATA)
    return list(dict.fromkeys((*REDUCE_FILES, *emitted)))  # the --emit scripts too, for the maintainer


def _shown_backend(spec: str) -> str:
    """A plugin's file name, not the path it had on the machine that reduced (it is copied
    as plugin.py); built-in names, module specs and cmd: lines (which may hold 'x.py:y')
    as they are (BackendSpec.shown)."""
    return parse_backend(spec).shown


def readable_manifest(folder: Path) -> Manifest | None:
    """The manifest of a saved repro folder, or None where it has none that reads."""
    try:
        return parse_manifest(folder / MANIFEST) if (folder / MANIFEST).is_file() else None
    except TrtminError:
        return None


def kept_fields(previous: Manifest, folder: Path, title_given: bool, upstream_given: bool) -> list[str]:
    """What `repros add --force` keeps of the manifest in `folder` it replaces: what people
    wrote there (the issue links, which releases fix it, when it was added and first seen, a
    title other than its report.md's), unless given again on the command line. Dropping
    them lost the suite's record of which release fixed what, without a word."""
    written_title = previous.title != _title_from(folder, folder.name)
    fields = [("title", written_title and not title_given),
              ("upstream", bool(previous.upstream) and not upstream_given),
              ("expected", previous.expected != "reproduces"), ("expected_when", bool(previous.expected_when)),
              ("added", True), ("first_seen", bool(previous.first_seen))]
    return [name for name, kept in fields if kept]


def _keep_written(new: Manifest, previous: Manifest, kept: list[str], out_dir: Path) -> Manifest:
    """`new` with the `kept` fields of `previous`, and previous's notes followed by a line
    saying what replaced the repro."""
    changes: dict[str, Any] = {name: getattr(previous, name) for name in kept}
    reduced = [line for line in new.notes.splitlines() if not line.startswith("Saved from ")]
    line = f"Replaced on {date.today().isoformat()} from {out_dir.name}/ by `trtmin repros add --force`."
    changes["notes"] = "\n".join(filter(None, [previous.notes, line, *reduced]))
    return dataclasses.replace(new, **changes)


def _forget_itself(entry: Path, name: str) -> None:
    """A newer reduction of a saved repro (--force) found the entry it replaces as its known
    bug: in the suite, summary.json and report.md would say it looks like itself. That
    match is dropped (report.md's paragraph where it was the only one)."""
    try:
        summary = json.loads((entry / "summary.json").read_text())
    except (OSError, ValueError):
        return
    known = summary.get("known_bugs") or []
    others = [k for k in known if isinstance(k, dict) and k.get("name") != name]
    if len(others) == len(known):
        return
    summary["known_bugs"] = others
    report = entry / "report.md"
    if not others and report.is_file():
        parts = report.read_text().split("\n\n")
        report.write_text("\n\n".join(p for p in parts if not p.startswith("**Known bug?**")))
        if "report.md" in (summary.get("written_sha256") or {}):  # as trtmin wrote it: no edit of a user's
            summary["written_sha256"]["report.md"] = file_digest(report)
    (entry / "summary.json").write_text(json.dumps(summary, indent=2, sort_keys=True) + "\n")


def _check_same_bug(out_dir: Path, entry: Path, manifest: Manifest | None, summary: dict[str, Any]) -> None:
    """`repros add --force` replaces a saved repro by a newer reduction of the same bug: one
    of another backend (family; for a plugin, its file name and function), or with none of its ops, is another bug, and
    replacing the entry by it would hang that bug's title, links and [expected_when] on it.
    A hand-written entry is compared by its manifest alone (its script is kept beside it)."""
    from repros.match import _family, _less_overloads, fingerprint  # here: repros.match imports this module
    theirs, mine = fingerprint(entry), fingerprint(out_dir)
    ops = None if theirs is None or mine is None else (
        _less_overloads(theirs.ops).keys() & _less_overloads(mine.ops).keys())  # by op name: any overload
    differs = [what for what, same in (  # not the oracle: a NaN reduced again with --oracle nan is the same bug
        ("backend", manifest is None or _family(manifest.backend) == _family(summary["backend"]) and (
            _family(manifest.backend) != "plugin" or _shown_backend(manifest.backend) == _shown_backend(
                summary["backend"]))),  # a plugin's bug is its own function's: another is another compiler
        ("ops", ops is None or bool(ops))) if not same]
    if differs:
        title = f" ({manifest.title})" if manifest is not None else ""
        raise TrtminError(f"{_shown(entry)} holds another bug{title}: its {' and '.join(differs)} "
                          f"differ{'s' if differs == ['backend'] else ''} from "
                          f"{_shown(out_dir)}'s; --force replaces a repro by a newer reduction of the same bug: "
                          "choose another --name")


def _edited_files(entry: Path, new: Path, previous: Manifest | None) -> list[tuple[str, str]]:
    """The files of a saved repro that `repros add --force` would write over and that are
    someone's work: a hand-written entry's repro.py (no summary.json), scripts and report.md
    edited since `repros add` saved them, and a manifest with more than its fields (comments
    saying why a release is expected to fix it; the fields themselves are carried over).
    Returned as (name, the name kept under: NAME.edited, ...)."""
    written = (entry / "summary.json").is_file()
    edited = edited_since_written(entry) if written else [n for n in (SCRIPT, "report.md") if (entry / n).is_file()]
    if previous is not None and _without_our_example((entry / MANIFEST).read_text(encoding="utf-8-sig")).strip() != (
            manifest_text(previous, comment_example=False).strip()):
        edited.append(MANIFEST)
    return [(name, edited_copy_name(name, new, entry)) for name in edited
            if name.endswith(".py") or name in ("report.md", MANIFEST)]


def _without_our_example(text: str) -> str:
    """A manifest's text less the commented [expected_when] example `repros add` writes (any
    trtmin's: its package and version are the run's), so that only a person's lines differ;
    its heading too where the person uncommented the rest (the table is a field, carried over)."""
    head = "".join(f"\n{re.escape(line)}" for line in EXAMPLE_HEAD)
    text = re.sub(head + r'\n# "[^\n]*" = "fixed"\n', "\n", text)
    return text.replace(f"\n{EXAMPLE_HEAD[0]}\n[expected_when]\n", "\n[expected_when]\n").replace("\n\n\n", "\n\n")


def _previous_manifest(entry: Path) -> Manifest | None:
    """The manifest `repros add --force` replaces (None where the entry has none). One that
    does not read is refused: what people wrote in it (the links, [expected_when], notes)
    would be dropped without a word."""
    if not (entry / MANIFEST).is_file():
        return None
    try:
        return parse_manifest(entry / MANIFEST)
    except TrtminError as e:
        raise TrtminError(f"{e}; --force keeps what was written in the manifest it replaces: mend it first, or "
                          f"move {_shown(entry)} away to save this reduction afresh") from None


def _recover(root: Path, name: str) -> None:
    """What a kill in the middle of an earlier `repros add --force` of `name` left: the entry
    it was replacing, set aside as .old-NAME-*, back in place where NAME is missing (its
    title, links and the user's files were there alone); its half-made .tmp-NAME-* gone."""
    if not root.is_dir():
        return
    for left in sorted(root.glob(f".old-{glob.escape(name)}-*")):
        if not (root / name).exists():
            os.replace(left, root / name)
        else:  # the swap had finished: the new entry is in place
            shutil.rmtree(left, ignore_errors=True)
    for half in root.glob(f".tmp-{glob.escape(name)}-*"):
        shutil.rmtree(half, ignore_errors=True)


def not_a_reduction_fix(out_dir: Path) -> str:
    """The fix for a folder that holds no finished reduction: resume the one begun there
    (its journal is there), else the folder of a finished one."""
    if (out_dir / JOURNAL).exists():
        return f"the reduction there has not finished: continue it with `trtmin reduce ... --out {_shown(out_dir)} --resume`"
    return "pass the --out folder of a finished `trtmin reduce` run (it writes repro.py and summary.json)"


def check_repro_name(name: str) -> None:
    """A repro's name is its folder's: refused with the fix where it is not one."""
    if not NAME_RE.fullmatch(name):
        shown = name if len(name) <= 60 else f"{name[:57]}..."
        raise TrtminError(f"--name {shown!r}: use at most 100 letters, digits, '_', '-' or '.', starting with a "
                          f"letter or digit (e.g. uint8_permute_before_cast)")


def add_repro(out_dir: Path, name: str, root: Path | None = None, *, force: bool = False, duplicate: bool = False,
              expected: str = "reproduces", upstream: Iterable[str] = (), title: str | None = None) -> Path:
    """Save a ``trtmin reduce --out`` folder into the suite as ``root/name/``; returns that folder.

    Copies the files the run wrote (files_of_the_run: repro.py, summary.json, report.md and,
    where the run wrote them, repro_inputs.pt, the plugin's copies, the --emit scripts and
    their data; never journal.jsonl nor reduced.pt2), and writes manifest.toml from summary.json: title from
    report.md's first line, backend, oracle, device, added = today, first_seen from the
    versions summary.json recorded, expected = "reproduces". Everything is written to a
    hidden temporary folder first and renamed into place, so a failure leaves nothing
    half-written. An existing ``name`` is refused unless ``force`` (replace it), and a
    reduction that looks like a saved repro of another name (repros/match.py), the same
    bug twice, unless ``duplicate``: two flags, so that saving a twin never deletes a repro.
    """
    named, out_dir, root = root is not None, Path(out_dir), default_root() if root is None else Path(root)
    if root.resolve() == SHIPPED_SUITE.resolve() and {"site-packages", "dist-packages"} & set(root.resolve().parts):
        raise TrtminError(f"repros add would save into the suite inside the installed trtmin ({root}), which the "
                          "next upgrade replaces; pass --suite DIR, or set TRTMIN_SUITE=DIR for your team's suite")
    by_variable = not named and from_variable(root)  # the user typed no --suite: name what they set
    given = f"${SUITE_VARIABLE}={_shown(root)}" if by_variable else f"--suite {_shown(root)}"
    if root.exists() and not root.is_dir():
        raise TrtminError(f"{given} is a file; {'set it to' if by_variable else 'pass'} the suite's folder "
                          "(it holds one folder per repro)")
    check_repro_name(name)
    if (root / MANIFEST).is_file():  # saved there, no command would ever find it
        raise TrtminError(f"{given} is a saved repro (it holds {MANIFEST}), not a suite; " + (
            f"set it to the suite's folder, {_shown(root.parent)}" if by_variable else
            f"pass the suite's folder, e.g. --suite {_shown(root.parent)}"))
    _recover(root, name)
    if expected not in EXPECTED:
        raise TrtminError(f"expected {expected!r} is not one of {', '.join(EXPECTED)}")
    if not out_dir.is_dir():
        raise TrtminError(f"{_shown(out_dir)} is not a folder; pass the --out folder of a `trtmin reduce` run")
    if out_dir.resolve() == (root / name).resolve():  # replaced by itself, under the feet of a shell inside it
        raise TrtminError(f"{_shown(out_dir)} is the saved repro {name} itself: nothing new to save; pass the --out "
                          "folder of a newer reduction")
    for needed in ("repro.py", "summary.json"):
        if not (out_dir / needed).is_file():
            raise TrtminError(f"{_shown(out_dir)} has no {needed}: {not_a_reduction_fix(out_dir)}")
    gone = files_the_script_reads_that_are_gone(out_dir / SCRIPT)
    if gone:  # saved, it could only say ERROR in every run
        raise TrtminError(f"{_shown(out_dir)} has no {' or '.join(gone)}, which its repro.py reads; put it back, or "
                          "run the reduction again (trtmin reduce ... --force)")
    summary = read_summary(out_dir)
    lacking = [k for k in ("backend", "oracle", "device")
               if not isinstance(summary, dict) or not isinstance(summary.get(k), str)]
    if not isinstance(summary, dict) or lacking:
        raise TrtminError(f"{_shown(out_dir / 'summary.json')} lacks {', '.join(lacking) or 'its fields'}; "
                          f"it does not look written by `trtmin reduce`: rerun the reduction")
    check_same_run(out_dir, summary)
    env = summary.get("environment") or {}
    first_seen = {k: str(env[k]) for k in packages_of(summary["backend"], out_dir) if env.get(k) and env[k] != NOT_INSTALLED}
    notes = [f"Saved from {out_dir.name}/ by `trtmin repros add`."]
    if "original_nodes" in summary:
        final, spent = summary.get("final_nodes"), summary.get("oracle_calls")
        notes.append(f"Reduced from {summary.get('model', '?')}: {summary.get('original_nodes')} -> "
                     f"{final} call node{'' if final == 1 else 's'} in {spent} oracle call{'' if spent == 1 else 's'}.")
    if summary.get("final_verdict"):
        notes.append(f"Verdict: {summary['final_verdict']}")
    said = (summary.get("diagnosis") or {}).get("backend")
    if said:  # how the backend judged it there (TensorRT without a GPU: a CUDA error may be the GPU's absence)
        notes.append(f"Backend: {said}.")
    where = ", ".join(f"{k} {env[k]}" for k in ("gpu", "cuda", "python") if env.get(k) not in (None, "", "none"))
    if where:
        notes.append(f"Reduced on: {where}.")
    runs, flaky = flaky_runs(summary.get("flakiness"))
    if flaky:
        notes.append(flaky)
    manifest = Manifest(title=(title or _title_from(out_dir, name)).splitlines()[0].strip() or name,
                        backend=_shown_backend(summary["backend"]), oracle=summary["oracle"], device=summary["device"],
                        added=date.today().isoformat(), expected=expected, upstream=tuple(upstream),
                        first_seen=first_seen, notes="\n".join(notes), runs=runs)
    previous = _previous_manifest(root / name) if force else None
    if previous is not None:  # a newer reduction of the repro: what people wrote into it stays
        kept = kept_fields(previous, root / name, title is not None, bool(tuple(upstream)))
        manifest = _keep_written(manifest, previous, kept, out_dir)
    text = manifest_text(manifest, fixed_by=(summary.get("diagnosis") or {}).get("fixed_by"))
    parsed, problems = manifest_from_dict(tomllib.loads(text))  # never save what we cannot read back
    if parsed is None:
        raise TrtminError(f"cannot write a valid manifest for {name}: {'; '.join(problems)}")

    from repros.match import known_bugs  # here: repros.match imports this module
    suites = [s for s in ([root] if named else default_roots()) if s.is_dir()]  # without --suite: the shipped one's too
    found = known_bugs(out_dir, suites[0]) if len(suites) == 1 else known_bugs(out_dir) if suites else []  # a name once
    twins = [m for m in found if not (m.name == name and m.path.parent.resolve() == root.resolve())]  # --force's own
    itself = out_dir.resolve()  # a saved repro copied under another name: its own twin (compare skips itself)
    if (out_dir / MANIFEST).is_file() and any(itself.parent == s.resolve() for s in suites) and not (
            itself.name == name and itself.parent == root.resolve()) and not duplicate:
        raise TrtminError(f"{_shown(out_dir)} is the saved repro {itself.name}: saving it again as {name} would list "
                          f"one bug twice; `trtmin repros run {itself.name}{suite_words(itself.parent)}` checks it, or "
                          "pass --duplicate to save a copy beside it")
    if twins and not duplicate:
        raise TrtminError(f"{_shown(out_dir)} {twins[0].line()}: saving it again would list one bug twice; "
                          f"`trtmin repros run {twins[0].name}{suite_words(twins[0].path.parent)}` checks it, or pass "
                          "--duplicate to save it beside it")
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise _unwritable(root, e) from None
    target = root / name
    if target.exists() and not force:
        raise TrtminError(f"{_shown(target)} already exists: choose another --name, or pass --force to replace it")
    if target.exists() and not target.is_dir():
        raise TrtminError(f"{_shown(target)} exists and is not a folder; move it away first")
    if target.exists():
        _check_same_bug(out_dir, target, previous, summary)
    tmp = root / f".tmp-{name}-{uuid.uuid4().hex[:8]}"  # hidden: find_repros skips it
    try:
        tmp.mkdir()
    except OSError as e:
        raise _unwritable(root, e) from None
    try:
        for f in files_of_the_run(out_dir, summary):
            if (out_dir / f).is_file():
                shutil.copy2(out_dir / f, tmp / f)
        (tmp / MANIFEST).write_text(text, encoding="utf-8")
        _forget_itself(tmp, name)
        if target.exists():
            for was, kept in _edited_files(target, tmp, previous):  # hand-written, or edited since saved
                shutil.copy2(target / was, tmp / kept)
            for own in users_files(target, tmp):  # the user's own files in the entry stay with it, links as links
                if own.is_dir() and not own.is_symlink():
                    shutil.copytree(own, tmp / own.name, symlinks=True)
                else:
                    shutil.copy2(own, tmp / own.name, follow_symlinks=False)
            old = root / f".old-{name}-{uuid.uuid4().hex[:8]}"
            os.replace(target, old)
            try:
                os.replace(tmp, target)
            except BaseException:  # a failure or a Ctrl-C between the two: the previous entry back
                os.replace(old, target)
                raise
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, target)
    except BaseException as e:
        shutil.rmtree(tmp, ignore_errors=True)
        if isinstance(e, OSError) and str(e.filename or "").startswith(str(out_dir)):  # a file of the run's unread
            raise TrtminError(f"cannot read {e.filename} ({e.strerror or e}); check the --out folder's files, or "
                              "run the reduction again") from None
        if isinstance(e, OSError):  # a full disk mid-copy: the entry as it was, and one line
            raise _unwritable(root, e) from None
        raise
    return target


def _unwritable(root: Path, e: OSError) -> TrtminError:
    return TrtminError(f"cannot write into the suite {_shown(root)} ({e.strerror or e}); choose a suite folder you "
                       "can write to (--suite), or free space there")
