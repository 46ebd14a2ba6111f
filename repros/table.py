"""Merge the JSON records of several runs (machines, releases) into one markdown matrix.

Rows are repros (title with upstream links, and the folder name), sorted by name.
Columns are runs, headed "device label / key versions" (the installed ones of torch,
torch_tensorrt, tensorrt, executorch, onnxruntime), sorted by device label, then versions
(numerically), then date, then file name, so the output does not depend on the order of
the files given; runs whose headers are alike are told apart by platform, date, then file
(a file given twice is one run). Cells: "reproduces", "fixed", "skipped (short reason)",
"changed (how it fails now)" (fails, but not as the reduced bug did), "error (why)", or "—"
where that run did not include the repro; a cell is **bold**, with what was expected, when
the run disagreed with the repro's manifest (the runner's ``ok`` was false). Paths in the
reasons are cut to their file names: the row names the repro.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Sequence
from urllib.parse import quote, urlparse

from oracles.environment import KEY_PACKAGES, NOT_INSTALLED
from oracles.errors import TrtminError
from repros.runner import JSON_FORMAT
from repros.suite import version_tuple

REASON_MAX = 60
# what a link's URL keeps as it is: the rest is %-escaped, so a `|` cannot split the table's
# row and a `(`, `)` or space cannot end the markdown link early
URL_SAFE = ":/?#[]@!$&'*+,;=%~"
CELL_WORD = {"FIXED": "fixed", "REPRODUCED": "reproduces", "SKIPPED": "skipped", "CHANGED": "changed",
             "ERROR": "error"}


def load_run(path: Path | str) -> dict[str, Any]:
    """One run's JSON (written by ``repros.runner.write_json``), checked enough to tabulate."""
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise TrtminError(f"{path}: no such file; pass files written by `trtmin repros run --json FILE`") from None
    except IsADirectoryError:
        raise TrtminError(f"{path} is a folder; pass the files in it written by `trtmin repros run --json FILE`") from None
    except OSError as e:
        raise TrtminError(f"{path} cannot be read ({e.strerror}); pass a file written by `trtmin repros run --json`") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise TrtminError(f"{path}: not valid JSON ({e}); pass a file written by `trtmin repros run --json FILE`") from None
    if not isinstance(data, dict) or data.get("format") != JSON_FORMAT:
        raise TrtminError(f"{path}: not a trtmin repros run (format {JSON_FORMAT!r}); "
                          f"write one with `trtmin repros run --json FILE`")
    problem = _malformed(data)
    if problem:
        raise TrtminError(f"{path}: {problem}; write it again with `trtmin repros run --json FILE`")
    return data


def _malformed(data: dict[str, Any]) -> str | None:
    """What in a run's JSON is not as the runner writes it, in the fields the table reads
    (a hand-edited version 1.4 or `"ok": "false"` is refused here, not misread later)."""
    env, results = data.get("environment"), data.get("results")
    if not isinstance(env, dict) or not isinstance(results, list):
        return "its environment or results are missing"
    versions = env.get("versions") or {}
    if not isinstance(versions, dict) or not all(isinstance(v, str) for v in versions.values()):
        return "environment.versions must map each package to its version as a string"
    wrong = [k for k in ("device_label", "date", "platform", "trtmin_backend") if not isinstance(env.get(k) or "", str)]
    for i, r in enumerate(results):
        if not isinstance(r, dict) or not isinstance(r.get("name"), str) or r.get("status") not in CELL_WORD:
            return f"results[{i}] has no name or no status among {', '.join(CELL_WORD)}"
        wrong += [f"results[{i}].{k}" for k in ("title", "reason", "verdict", "expected")
                  if not isinstance(r.get(k) or "", str)]
        wrong += [f"results[{i}].ok"] if not isinstance(r.get("ok", True), bool) else []
        links = r.get("upstream") or []
        wrong += [f"results[{i}].upstream"] if not isinstance(links, list) or not all(
            isinstance(u, str) for u in links) else []
    return f"{wrong[0]} is not of the type the runner writes" if wrong else None


def _md(text: str) -> str:
    return re.sub(r"\s+", " ", str(text)).replace("|", "\\|").strip()


def _short(text: str, limit: int = REASON_MAX) -> str:
    text = re.sub(r"\s+", " ", text).strip().rstrip(".")
    text = re.sub(r"(?<![\w.:/])(?:/[^/\s:]+)+/([^/\s:]+)", r"\1", text)  # /suite/x/manifest.toml: manifest.toml
    return text if len(text) <= limit else text[:limit - 1].rstrip() + "…"


def column_header(env: dict[str, Any]) -> str:
    versions = env.get("versions") or {}
    keys = ", ".join(f"{p} {versions[p]}" for p in dict.fromkeys((*KEY_PACKAGES, *versions))  # a plugin's after
                     if versions.get(p) and versions[p] != NOT_INSTALLED)
    head = f"{env.get('device_label') or 'unknown device'}" + (f" / {keys}" if keys else "")
    if env.get("trtmin_backend"):
        head += f" [TRTMIN_BACKEND={env['trtmin_backend']}]"
    return head


def cell(result: dict[str, Any] | None) -> str:
    if result is None:
        return "—"
    status = result["status"]
    text = CELL_WORD[status]
    if status == "SKIPPED":
        text += f" ({_short(result.get('reason') or 'no reason')})"
    elif status == "CHANGED":  # how it fails now, from its "CHANGED: fails differently now: ..." line
        now = re.sub(r"^\s*fails differently now\b:?", "", (result.get("verdict") or "").split(":", 1)[-1])
        text += f" ({_short(now or 'no verdict line')})"
    elif status == "ERROR":  # what broke: the table is read without the run's screen
        text += f" ({_short(result.get('reason') or 'no reason')})"
    text = _md(text)
    expected = result.get("expected")
    return text if result.get("ok", True) else f"**{text}**" + (f" (expected: {_md(expected)})" if expected else "")


def _link_label(url: str) -> str:
    m = re.match(r"https?://github\.com/([^/]+/[^/]+)/(?:pull|issues)/(\d+)", url)
    if m:
        return f"{m.group(1)}#{m.group(2)}"
    return urlparse(url).netloc or url


def _bug_cell(title: str, upstream: Sequence[str]) -> str:
    links = ", ".join(f"[{_md(_link_label(u))}]({quote(u.strip(), safe=URL_SAFE)})" for u in upstream)
    return _md(title) + (f" ({links})" if links else "")


def _vkey(env: dict[str, Any]) -> tuple[tuple[int, ...], ...]:
    out = []
    for p in KEY_PACKAGES:
        v = (env.get("versions") or {}).get(p, NOT_INSTALLED)
        try:
            out.append(version_tuple(v) if v != NOT_INSTALLED else ())
        except ValueError:
            out.append(())
    return tuple(out)


def _told_apart(headers: list[str], words: list[str]) -> list[str]:
    """Each header that others share, with its run's `words` added where those differ
    within the group: a platform, a date or a file that is the same for all tells nothing."""
    def group(h: str) -> set[str]:
        return {w for other, w in zip(headers, words) if other == h}
    return [f"{h} {w}" if headers.count(h) > 1 and len(group(h)) > 1 else h for h, w in zip(headers, words)]


def merge_tables(json_files: Sequence[Path | str]) -> str:
    """The markdown matrix of the runs in ``json_files`` (see the module docstring)."""
    if not json_files:
        raise TrtminError("no run files given; pass one or more files written by `trtmin repros run --json FILE`")
    runs: list[tuple[Path, dict[str, Any]]] = []
    for f in json_files:
        if all(Path(f).resolve() != path.resolve() for path, _ in runs):  # a file given twice is one run
            runs.append((Path(f), load_run(f)))
    runs.sort(key=lambda fr: (str(fr[1]["environment"].get("device_label", "")).lower(), _vkey(fr[1]["environment"]),
                              str(fr[1]["environment"].get("date", "")), fr[0].name, str(fr[0])))
    headers = [column_header(d["environment"]) + (" (interrupted)" if d.get("interrupted") else "") for _, d in runs]
    for told in (lambda path, env: f"({env.get('platform') or 'platform unknown'})",
                 lambda path, env: f"({env.get('date', '?')})", lambda path, env: f"[{path.name}]",
                 lambda path, env: f"[{path}]"):  # two runs of one setup: by what tells them apart
        headers = _told_apart(headers, [told(path, d["environment"]) for path, d in runs])
    by_run = [{r["name"]: r for r in d["results"]} for _, d in runs]
    names = sorted({n for rs in by_run for n in rs})
    # titles and links from the most recent run that has the repro
    latest = sorted(range(len(runs)), key=lambda i: (str(runs[i][1]["environment"].get("date", "")), i))
    lines = ["| bug | repro | " + " | ".join(_md(h) for h in headers) + " |",
             "|---|---|" + "---|" * len(headers)]
    for name in names:
        sources = [by_run[i][name] for i in reversed(latest) if name in by_run[i]]
        links = dict.fromkeys(u for r in sources for u in r.get("upstream") or [])  # each run's, the latest's first
        row = [_bug_cell(sources[0].get("title") or name, list(links)), f"`{_md(name)}`"]
        row += [cell(rs.get(name)) for rs in by_run]
        lines.append("| " + " | ".join(row) + " |")
    lines += ["", "**Bold**: differs from what the repro's manifest expects on that run. —: not run there."]
    return "\n".join(lines) + "\n"
