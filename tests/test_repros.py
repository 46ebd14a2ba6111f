"""The repro suite: discovery, manifests, the runner's statuses and judgement, JSON,
the merged markdown table, `add_repro`, and `pytest repros/` against a fake suite.

The fake repro scripts are plain Python that print a verdict line and exit per the
docs/design.md#the-script-contract; they import neither torch nor trtmin, so each runs in ~30 ms.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
import signal
import shutil
import socket
import subprocess
import sys
import textwrap
import time
import tomllib
from datetime import date
from pathlib import Path

import pytest
from rich.console import Console

from oracles.errors import TrtminError
from repros.runner import (CHANGED, ERROR, FIXED, REPRODUCED, SKIPPED, Result, classify, environment, exit_code, judge,
                           render_table, results_to_json, run_repros, summary_line, write_json)
from repros.suite import (Condition, Manifest, add_repro, default_root, find_repros, manifest_text,
                          parse_manifest, validate_suite)
from repros.table import merge_tables
from tests.helpers import run_cli, run_cli_here

REPO = Path(__file__).resolve().parents[1]


def manifest(title: str | None = "a bug", expected: str = "reproduces", extra: str = "",
             **over: str | None) -> str:
    fields = {"title": None if title is None else f'"{title}"',
              "upstream": '["https://github.com/pytorch/TensorRT/pull/4964"]', "backend": '"inductor"',
              "oracle": '"mismatch"', "device": '"cpu"',  # runnable anywhere: the scripts are stand-ins
              "added": '"2026-11-30"', "expected": f'"{expected}"', **over}
    return "\n".join(f"{k} = {v}" for k, v in fields.items() if v is not None) + "\n" + extra


def make_repro(root: Path, name: str, body: str, expected: str = "reproduces", extra: str = "",
               title: str | None = None) -> Path:
    d = root / name
    d.mkdir(parents=True)
    (d / "repro.py").write_text("import sys\n" + textwrap.dedent(body))
    (d / "manifest.toml").write_text(manifest(title or name.replace("_", " "), expected, extra))
    return d


def exits(code: int, line: str) -> str:
    return f"print('some log line')\nprint({line!r})\nsys.exit({code})\n"


@pytest.fixture
def suite(tmp_path: Path) -> Path:
    root = tmp_path / "suite"
    make_repro(root, "a_reproduces", exits(1, "REPRODUCED: max abs diff 1.0"))
    make_repro(root, "b_fixed", exits(0, "FIXED: matches eager"), expected="fixed")
    make_repro(root, "c_skipped", exits(2, "SKIPPED: no CUDA GPU is visible here"))
    make_repro(root, "d_exit3", exits(3, "ERROR: eager half failed"))
    make_repro(root, "e_raises", "raise RuntimeError('script bug')\n")
    make_repro(root, "f_exit2_no_line", "sys.exit(2)\n")
    make_repro(root, "g_contradicts", exits(1, "FIXED: but exits 1"))
    return root


def by_name(results: list[Result]) -> dict[str, Result]:
    return {r.name: r for r in results}


def test_statuses_and_ok(suite: Path) -> None:
    results = run_repros(suite, timeout=20)
    assert [r.name for r in results] == sorted(p.name for p in suite.iterdir())
    r = by_name(results)
    assert (r["a_reproduces"].status, r["a_reproduces"].ok) == (REPRODUCED, True)
    assert r["a_reproduces"].verdict == "REPRODUCED: max abs diff 1.0"  # the last line, not the log line
    assert (r["b_fixed"].status, r["b_fixed"].ok) == (FIXED, True)
    assert (r["c_skipped"].status, r["c_skipped"].ok, r["c_skipped"].reason) == \
        (SKIPPED, True, "no CUDA GPU is visible here")
    assert r["d_exit3"].status == ERROR and "exit code 3: ERROR: eager half failed" in r["d_exit3"].reason
    assert r["e_raises"].status == ERROR and "RuntimeError: script bug" in r["e_raises"].reason
    assert r["e_raises"].stderr_tail[-1] == "RuntimeError: script bug"
    assert r["f_exit2_no_line"].status == ERROR and "SKIPPED: <reason>" in r["f_exit2_no_line"].reason
    assert r["g_contradicts"].status == ERROR and "says FIXED" in r["g_contradicts"].reason
    assert not any(x.ok for x in results if x.status == ERROR)
    assert exit_code(results) == 1
    assert exit_code([x for x in results if x.status != ERROR]) == 0
    assert exit_code([]) == 0
    assert summary_line(results).startswith("7 repros: 1 reproduced, 1 fixed, 1 skipped, 0 changed, 4 errors; NOT as expected")


def test_changed_status_is_not_ok(tmp_path: Path) -> None:
    make_repro(tmp_path, "now_fixed", exits(0, "FIXED: matches eager"), expected="reproduces")
    make_repro(tmp_path, "regressed", exits(1, "REPRODUCED: nan"), expected="fixed")
    results = by_name(run_repros(tmp_path, timeout=20))
    assert (results["now_fixed"].status, results["now_fixed"].ok) == (FIXED, False)
    assert "no longer reproduces" in results["now_fixed"].note
    assert (results["regressed"].status, results["regressed"].ok) == (REPRODUCED, False)
    assert "regression" in results["regressed"].note
    assert exit_code(list(results.values())) == 1
    assert exit_code(run_repros(tmp_path, names=["now_fixed"], timeout=20)) == 1


def test_exit_3_with_its_line_is_changed_not_a_broken_script(tmp_path: Path) -> None:
    """exit 3 + "CHANGED: ..." is the repro contract's "fails differently": its own status, not
    ok where the bug should reproduce, shown as such by `repros run` (exit 1), in the JSON and
    in `repros table`; an exit 3 without the line is still an ERROR."""
    suite = tmp_path / "suite"
    changed_name, exit3_name = "changed_" + "c" * 90, "own_exit3_" + "e" * 90  # a summary line of over 160
    make_repro(suite, changed_name, exits(3, "CHANGED: fails differently now: TypeError: bad dtype"))
    make_repro(suite, exit3_name, "sys.exit(3)\n")
    (suite / changed_name / "summary.json").write_text(json.dumps({"final_verdict": "MISMATCH: output 0 differs"}))
    r = run_cli("repros", "run", "--suite", str(suite), "--json", str(tmp_path / "run.json"), "--timeout", "20")
    assert r.returncode == 1, r.stdout + r.stderr
    assert "CHANGED" in r.stdout and "fails differently from the reduced bug" in r.stdout, r.stdout
    assert "1 changed, 1 error" in r.stdout, r.stdout
    assert f"NOT as expected: {changed_name}, {exit3_name}\n" in r.stdout, r.stdout  # one line in a pipe
    data = json.loads((tmp_path / "run.json").read_text())
    results = {x["name"]: x for x in data["results"]}
    changed = results[changed_name]
    assert (changed["status"], changed["ok"], changed["returncode"]) == (CHANGED, False, 3)
    assert changed["verdict"] == "CHANGED: fails differently now: TypeError: bad dtype"
    assert "did not run to a verdict" not in changed["note"] and "reproduces is expected" in changed["note"]
    assert changed["note"].endswith("; the reduced bug: MISMATCH: output 0 differs")  # what it was, beside what it is
    assert (results[exit3_name]["status"], results[exit3_name]["reason"]) == (ERROR, "exit code 3, no output")
    assert data["summary"]["changed"] == 1 and data["summary"]["error"] == 1
    table = run_cli("repros", "table", str(tmp_path / "run.json"))
    assert table.returncode == 0, table.stderr
    assert "| **changed (TypeError: bad dtype)** (expected: reproduces) |" in table.stdout, table.stdout


def test_names_select_and_unknown_name_is_an_error(suite: Path) -> None:
    assert [r.name for r in run_repros(suite, names=["b_fixed", "a_reproduces"], timeout=20)] == \
        ["a_reproduces", "b_fixed"]
    with pytest.raises(TrtminError, match=r"no repro named nope .*known: a_reproduces, b_fixed"):
        run_repros(suite, names=["nope"])
    with pytest.raises(TrtminError, match="is not a folder"):
        find_repros(suite / "missing")
    # a single repro folder is a suite of one
    assert [r.name for r in find_repros(suite / "b_fixed")] == ["b_fixed"]
    # a shell pattern picks every name it matches; one that matches none is named as unknown
    assert [r.name for r in find_repros(suite, ["[ab]_*", "e_raises"])] == ["a_reproduces", "b_fixed", "e_raises"]
    with pytest.raises(TrtminError, match=r"no repro named z_\*"):
        find_repros(suite, ["z_*"])


def test_a_timeout_is_changed_and_kills_the_process_group(tmp_path: Path) -> None:
    marker = tmp_path / "grandchild_alive"
    make_repro(tmp_path, "hangs", f"""
        import subprocess, time
        # a grandchild that would outlive a plain kill and hold the stdout pipe open
        subprocess.Popen([sys.executable, "-c",
                          "import time, pathlib; time.sleep(1.5); pathlib.Path({str(marker)!r}).touch()"])
        print("working", flush=True)
        time.sleep(60)
    """)
    start = time.monotonic()
    [r] = run_repros(tmp_path, timeout=0.5)
    assert time.monotonic() - start < 5
    assert (r.status, r.ok) == (CHANGED, False)  # a release that hangs now fails differently; no broken script
    assert r.reason.startswith("no verdict within 0.5 s: working: it hangs now") and "raise --timeout" in r.reason
    assert r.verdict == "CHANGED: no verdict within 0.5 s (a hang?)"
    assert r.timed_out and r.to_dict()["timed_out"] is True  # a CI job need not read the words
    assert r.note == r.reason  # not "its error changed ... update the repro": maybe a --timeout too short
    time.sleep(2)
    assert not marker.exists()


def test_a_script_that_hangs_after_its_verdict_keeps_that_verdict(tmp_path: Path) -> None:
    """A verdict printed, then no exit (a thread that never ends, a library's teardown that
    hangs): the script decided, so its verdict stands, said with the hang; it is not CHANGED."""
    make_repro(tmp_path, "hangs_at_exit", """
        import threading, time
        print("REPRODUCED: RuntimeError: the bug", flush=True)
        threading.Thread(target=time.sleep, args=(60,)).start()  # not a daemon: the exit waits for it
        sys.exit(1)
    """)
    [r] = run_repros(tmp_path, timeout=1)
    assert (r.status, r.verdict) == (REPRODUCED, "REPRODUCED: RuntimeError: the bug"), r
    assert "then did not exit within 1 s" in r.reason, r.reason
    for log_line in ("fixed seed 0; compiling", "Skipped 3 passes:", "REPRODUCED the export"):  # no verdict lines
        assert classify(None, f"{log_line}\n", "", timed_out=True, timeout=5)[0] == CHANGED, log_line


def test_skip_rules_and_expected_when(tmp_path: Path) -> None:
    make_repro(tmp_path, "odd_skip", exits(2, "SKIPPED: flaky today"))
    make_repro(tmp_path, "pkg_skip", exits(2, "SKIPPED: torch_tensorrt is not installed"))
    make_repro(tmp_path, "expects_skip", exits(2, "SKIPPED: flaky today"),
               extra='[expected_when]\n"label:box" = "skipped"\n')
    make_repro(tmp_path, "fixed_on_h100", exits(0, "FIXED: ok"),
               extra='[expected_when]\n"label:h100" = "fixed"\n"python >= 3.0" = "reproduces"\n')
    r = by_name(run_repros(tmp_path, timeout=20, env_label="test-box"))
    assert (r["odd_skip"].status, r["odd_skip"].ok) == (SKIPPED, False)
    assert r["pkg_skip"].ok
    assert (r["expects_skip"].ok, r["expects_skip"].expected) == (True, "skipped")
    assert r["expects_skip"].expected_because == 'expected_when "label:box"'
    assert (r["fixed_on_h100"].expected, r["fixed_on_h100"].ok) == ("reproduces", False)  # python >= 3.0 holds
    r = by_name(run_repros(tmp_path, names=["fixed_on_h100"], timeout=20, env_label="NVIDIA H100 80GB"))
    assert (r["fixed_on_h100"].expected, r["fixed_on_h100"].ok) == ("fixed", True)  # first condition wins
    strict = by_name(run_repros(tmp_path, names=["pkg_skip", "expects_skip"], timeout=20, env_label="test-box",
                                strict_skips=True))
    assert (strict["pkg_skip"].ok, strict["expects_skip"].ok) == (False, True)
    assert judge(SKIPPED, "reproduces", "no CUDA GPU") == (True, "cannot run here: says nothing about the bug")
    for lacks in ("no CUDA GPU is visible here", "cannot run: AssertionError: Torch not compiled with CUDA enabled",
                  "TensorRT-RTX 1.4.0.76 needs a CUDA GPU, and none is visible here",
                  "cannot run: RuntimeError: Found no NVIDIA driver on your system.", "No module named 'onnxscript'",
                  "cannot run: RuntimeError: The NVIDIA driver on your system is too old (found version 11040)",
                  "cannot run: RuntimeError: CUDA error: no kernel image is available for execution on the device"):
        assert judge(SKIPPED, "reproduces", lacks)[0], lacks
    # a script's own skip for what is no lack of this machine's: not ok, whatever words it uses
    for broken in ("cannot run: RuntimeError: CUDA error: device-side assert triggered",
                   "cannot run: the reference data file is missing", "cannot run: FileNotFoundError: repro_inputs.pt"):
        assert judge(SKIPPED, "reproduces", broken) == (
            False, "skipped for a reason that is not a missing GPU or package"), broken
    assert judge(REPRODUCED, "skipped")[0] is False
    # a stack where it is known to fail otherwise (TensorRT-RTX for two bugs saved on full
    # TensorRT): CHANGED there is as expected, and the bug back or gone is not
    make_repro(tmp_path, "changed_here", exits(3, "CHANGED: fails differently now: TypeError"),
               extra='[expected_when]\n"label:box" = "changed"\n')
    r = by_name(run_repros(tmp_path, names=["changed_here"], timeout=20, env_label="test-box"))
    assert (r["changed_here"].status, r["changed_here"].expected, r["changed_here"].ok) == (CHANGED, "changed", True)
    assert judge(CHANGED, "reproduces")[0] is False and judge(REPRODUCED, "changed")[0] is False
    assert judge(FIXED, "changed")[0] is False


class FakeFacts:
    def __init__(self, label: str = "cpu", gpu: str | None = None, **versions: str):
        self.label, self.gpu, self._v = label, gpu, versions

    def version(self, package: str) -> str:
        return self._v.get(package, "not installed")


def test_conditions() -> None:
    f = FakeFacts("NVIDIA A100", "NVIDIA A100", torch_tensorrt="2.16.0.dev20251101+cu128", tensorrt="10.16")
    holds = lambda text: Condition.parse(text).holds(f)  # noqa: E731
    assert holds("torch_tensorrt >= 2.16") and not holds("torch_tensorrt < 2.16") and holds("tensorrt == 10.16.0")
    assert holds("gpu") and not holds("no_gpu") and holds("label:a100") and not holds("label:H100")
    assert holds("missing:executorch") and not holds("missing:tensorrt")
    assert not holds("executorch >= 0") and not holds("executorch != 1")  # not installed: never holds
    assert Condition.parse("no_gpu").holds(FakeFacts())
    for good in ("torch >= 2.16.0rc1", "torch_tensorrt < 2.16.0.dev20251101+cu128", "tensorrt == v10.16"):
        Condition.parse(good)
    for bad in ("gpu:A100", "torch >= banana", "label:", "torch ~= 2", "torch >= 2.x", "torch >= 2.16-ish"):
        with pytest.raises(ValueError):
            Condition.parse(bad)


def test_json_shape(suite: Path, tmp_path: Path) -> None:
    results = run_repros(suite, names=["a_reproduces", "c_skipped"], timeout=20)
    env = environment("test-box")
    data = results_to_json(results, env)
    assert data["format"] == "trtmin-repros-run/1"
    assert set(data) == {"format", "environment", "summary", "results"}
    assert data["environment"]["device_label"] == "test-box"
    assert set(data["environment"]["versions"]) == {"torch", "torch_tensorrt", "tensorrt", "tensorrt_rtx", "executorch",
                                                    "onnxruntime", "onnxscript"}
    assert data["environment"]["versions"]["torch"].startswith("2.")
    assert data["environment"]["date"] == date.today().isoformat()
    assert {"python", "platform", "gpu", "cuda", "trtmin"} <= set(data["environment"])
    assert data["summary"] == {"total": 2, "reproduced": 1, "fixed": 0, "skipped": 1, "changed": 0, "error": 0, "not_ok": 0,
                               "not_finished": 0, "all_ok": True}
    assert data["results"][0]["timed_out"] is False
    first = data["results"][0]
    assert first["name"] == "a_reproduces" and first["status"] == "REPRODUCED" and first["ok"] is True
    assert first["upstream"] == ["https://github.com/pytorch/TensorRT/pull/4964"]
    assert {"title", "expected", "seconds", "verdict", "reason", "returncode"} <= set(first)
    path = tmp_path / "out" / "run.json"
    write_json(path, results, env)
    text = path.read_text()
    assert json.loads(text) == json.loads(json.dumps(data))
    host = socket.gethostname()
    if len(host) > 3:
        assert host not in text


def _run_json(label: str, versions: dict[str, str], statuses: dict[str, tuple[str, bool, str]]) -> dict:
    results = [Result(name, name.replace("_", " "), ["https://github.com/pytorch/TensorRT/pull/4953"], status,
                      "reproduces", ok, 1.0, f"{status}: ...", reason=reason)
               for name, (status, ok, reason) in statuses.items()]
    env = {"device_label": label, "date": "2026-11-30",
           "versions": {"torch": "not installed", "torch_tensorrt": "not installed", "tensorrt": "not installed",
                        "executorch": "not installed", **versions}}
    return results_to_json(results, env)


def test_merge_tables(tmp_path: Path) -> None:
    h200 = _run_json("H200", {"torch": "2.15.0", "torch_tensorrt": "2.15.0", "tensorrt": "11.4"}, {
        "uint8_permute": ("FIXED", False, ""),               # changed: expected reproduces
        "view_above_8": ("REPRODUCED", True, ""),
        "segfault": ("ERROR", False, "killed by SIGKILL"),
    })
    cpu = _run_json("cpu", {"torch": "2.13.0+cpu"}, {
        "uint8_permute": ("SKIPPED", True, "torch_tensorrt is not installed"),
        "view_above_8": ("SKIPPED", True, "no CUDA GPU is visible here, and none will ever be"),
    })
    (tmp_path / "h200.json").write_text(json.dumps(h200))
    (tmp_path / "cpu.json").write_text(json.dumps(cpu))
    md = merge_tables([tmp_path / "h200.json", tmp_path / "cpu.json"])
    link = "[pytorch/TensorRT#4953](https://github.com/pytorch/TensorRT/pull/4953)"
    assert md.splitlines()[:5] == [
        "| bug | repro | cpu / torch 2.13.0+cpu | H200 / torch 2.15.0, torch_tensorrt 2.15.0, tensorrt 11.4 |",
        "|---|---|---|---|",
        f"| segfault ({link}) | `segfault` | — | **error (killed by SIGKILL)** (expected: reproduces) |",
        f"| uint8 permute ({link}) | `uint8_permute` | skipped (torch_tensorrt is not installed) "
        "| **fixed** (expected: reproduces) |",
        f"| view above 8 ({link}) | `view_above_8` | skipped (no CUDA GPU is visible here, and none will ever be) "
        "| reproduces |",
    ]
    assert merge_tables([tmp_path / "cpu.json", tmp_path / "h200.json"]) == md  # order of files does not matter
    # a file given twice (a shell pattern and its name) is one run
    assert merge_tables([tmp_path / "cpu.json", tmp_path / "h200.json", tmp_path / "cpu.json"]) == md
    # two runs of one setup are told apart by what differs: the platform, the date, the file
    (tmp_path / "cpu_later.json").write_bytes((tmp_path / "cpu.json").read_bytes())
    named = merge_tables([tmp_path / "cpu.json", tmp_path / "cpu_later.json"])
    assert "| cpu / torch 2.13.0+cpu [cpu.json] | cpu / torch 2.13.0+cpu [cpu_later.json] |" in named
    (tmp_path / "arm").mkdir()  # another machine's run, of the same file name
    later_link = "https://github.com/pytorch/TensorRT/issues/9"  # the later run's manifest gained a link
    (tmp_path / "arm" / "cpu.json").write_text(json.dumps({**cpu, "environment": {
        **cpu["environment"], "platform": "Linux-aarch64", "date": "2026-12-01"}, "results": [
            {**cpu["results"][0], "upstream": [later_link]}, cpu["results"][1]]}))
    arm = merge_tables([tmp_path / "cpu.json", tmp_path / "arm" / "cpu.json"]).splitlines()
    assert "cpu / torch 2.13.0+cpu (platform unknown) | cpu / torch 2.13.0+cpu (Linux-aarch64) |" in arm[0], arm
    assert f"([pytorch/TensorRT#9]({later_link}), {link})" in arm[2], arm  # each run's links, the latest's first
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "cpu.json").write_bytes((tmp_path / "cpu.json").read_bytes())
    both = merge_tables([tmp_path / "cpu.json", tmp_path / "b" / "cpu.json"]).splitlines()[0]
    assert f"[{tmp_path / 'b' / 'cpu.json'}]" in both and f"[{tmp_path / 'cpu.json'}]" in both, both
    # a reason's paths cut to file names; a CHANGED cell says how it fails now; a bold one what was expected
    odd = _run_json("cpu", {"torch": "2.13.0+cpu"}, {
        "bad_cond": ("ERROR", False, f"{tmp_path}/suite/bad_cond/manifest.toml: expected must be one of reproduces"),
        "uint8_permute": ("CHANGED", False, "")})
    odd["results"][1]["verdict"] = "CHANGED: fails differently now: RuntimeError: new message"
    (tmp_path / "odd.json").write_text(json.dumps(odd))
    rows = merge_tables([tmp_path / "odd.json"]).splitlines()
    assert "| **error (manifest.toml: expected must be one of reproduces)** (expected: reproduces) |" in rows[2], rows
    assert "| **changed (RuntimeError: new message)** (expected: reproduces) |" in rows[3], rows
    # one machine on two releases: columns by version, 2.9 before 2.15 (by its name, 2.15 first)
    for name, torch_version in (("a.json", "2.15.0"), ("b.json", "2.9.0")):
        (tmp_path / name).write_text(json.dumps(_run_json("H200", {"torch": torch_version}, {
            "view_above_8": ("REPRODUCED", True, "")})))
    releases = merge_tables([tmp_path / "a.json", tmp_path / "b.json"]).splitlines()[0]
    assert releases.index("torch 2.9.0") < releases.index("torch 2.15.0"), releases
    from repros.table import _short
    assert _short("see https://github.com/a/b") == "see https://github.com/a/b"  # a URL is no path to cut
    (tmp_path / "bad.json").write_text('{"results": []}')
    with pytest.raises(TrtminError, match="not a trtmin repros run"):
        merge_tables([tmp_path / "bad.json"])
    with pytest.raises(TrtminError, match="no such file"):
        merge_tables([tmp_path / "absent.json"])
    (tmp_path / "model.pt").write_bytes(b"PK\x03\x04 not json")  # another file given by mistake: the fix named
    with pytest.raises(TrtminError, match=r"not valid JSON \(.*\); pass a file written by `trtmin repros run --json"):
        merge_tables([tmp_path / "model.pt"])
    # hand-edited runs: a version written as a number, ok as a string, one link as a string
    for edit, said in (({"environment": {**cpu["environment"], "versions": {"torch": 2.13}}},
                        "environment.versions must map each package to its version as a string"),
                       ({"results": [{**cpu["results"][0], "ok": "false"}]}, "results[0].ok is not of the type"),
                       ({"results": [{**cpu["results"][0], "upstream": "https://github.com/a/b/issues/1"}]},
                        "results[0].upstream is not of the type")):
        (tmp_path / "edited.json").write_text(json.dumps({**cpu, **edit}))
        with pytest.raises(TrtminError, match=re.escape(f"edited.json: {said}")):
            merge_tables([tmp_path / "edited.json"])


def test_a_link_whose_url_has_a_bar_parentheses_or_spaces_stays_one_link_in_its_cell(tmp_path: Path) -> None:
    """A `|` in an upstream URL split the row; `(` ... `)` or a space ended the markdown link."""
    urls = ["https://example.com/a|b", "https://en.wikipedia.org/wiki/Modulo_(mathematics)", "https://x.org/a b"]
    run = _run_json("cpu", {"torch": "2.13.0+cpu"}, {"odd_links": ("REPRODUCED", True, "")})
    run["results"][0]["upstream"] = urls
    (tmp_path / "run.json").write_text(json.dumps(run))
    row = merge_tables([tmp_path / "run.json"]).splitlines()[2]
    assert row.count(" | ") == 2, row  # three cells: bug, repro, the run's
    assert ("(https://example.com/a%7Cb)" in row and "(https://en.wikipedia.org/wiki/Modulo_%28mathematics%29)" in row
            and "(https://x.org/a%20b)" in row), row


def test_render_table(suite: Path) -> None:
    results = run_repros(suite, names=["a_reproduces", "d_exit3"], timeout=20)
    console = Console(width=160, record=True, color_system=None)
    console.print(render_table(results))
    text = console.export_text()
    assert "a_reproduces" in text and "REPRODUCED: max abs diff 1.0" in text and "exit code 3" in text
    assert "NO" in text and "yes" in text


def test_the_table_keeps_every_column_readable_at_80_columns() -> None:
    """A suite repro's long name and verdict at a terminal's 80 columns: the verdict column,
    beside five no-wrap ones, had one character a line (a verdict a letter a row, 141 lines
    for one repro: the screen trial). Each column keeps room, the verdict wraps under the name."""
    from repros.runner import Result

    verdict = ("REPRODUCED: output 0 differs from eager by max abs 1.718e+10 (18 of 24 values off; at [15]: eager "
               "1.5e+10, backend -2.18e+09)")
    result = Result(name="inductor_int64_arange_vectorized", title="t", upstream="", status="REPRODUCED",
                    expected="reproduces", ok=True, seconds=5.8, verdict=verdict, reason="", note="",
                    expected_because="", returncode=1, stderr_tail="", backend="inductor", oracle="mismatch",
                    device="cpu", timed_out=False)
    console = Console(width=80, record=True, color_system=None)
    console.print(render_table([result]))
    shown = console.export_text()
    lines = shown.splitlines()
    assert max(map(len, lines)) <= 80 and len(lines) <= 12, shown
    assert "REPRODUCED │" in shown and " yes " in shown and "5.8 s" in shown, shown
    cells = " ".join(line.split("│")[1].strip() for line in lines if line.startswith("│"))
    assert "inductor_int64_arange_vectorized" in cells.replace(" ", "") and verdict.replace(" ", "") in \
        cells.replace(" ", ""), cells


def _reduce_out(d: Path) -> Path:
    d.mkdir()
    (d / "repro.py").write_text("import sys\nprint('REPRODUCED: mismatch')\nsys.exit(1)\n")
    (d / "repro_inputs.pt").write_bytes(b"fake tensors")
    (d / "report.md").write_text("# ReLU after \"cast\" differs on inductor\n\n**What fails:** ...\n")
    (d / "journal.jsonl").write_text("{}")
    (d / "reduced.pt2").write_bytes(b"pt2")
    (d / "summary.json").write_text(json.dumps({
        "model": "m.pt2", "backend": "inductor", "device": "cpu", "oracle": "mismatch", "original_nodes": 40,
        "final_nodes": 2, "oracle_calls": 17, "final_verdict": "mismatch: max abs diff 3",
        "environment": {"trtmin": "0.1.0", "torch": "2.13.0+cpu", "python": "3.11.7", "cuda": "none"}}))
    return d


def test_add_repro(tmp_path: Path) -> None:
    out, root = _reduce_out(tmp_path / "trtmin-out"), tmp_path / "suite"
    for emitted in ("repro_tensorrt.py", "model.onnx", "repro_tensorrt.npz"):  # --emit tensorrt's, kept too
        (out / emitted).write_text("emitted")
    entry = add_repro(out, "relu_cast", root)
    assert entry == root / "relu_cast"
    assert sorted(p.name for p in entry.iterdir()) == ["manifest.toml", "model.onnx", "report.md", "repro.py",
                                                       "repro_inputs.pt", "repro_tensorrt.npz", "repro_tensorrt.py",
                                                       "summary.json"]
    m = parse_manifest(entry / "manifest.toml")
    assert m.title == 'ReLU after "cast" differs on inductor'
    assert (m.backend, m.oracle, m.device, m.expected) == ("inductor", "mismatch", "cpu", "reproduces")
    assert m.added == date.today().isoformat() and m.first_seen == {"torch": "2.13.0+cpu"} and m.upstream == ()
    assert "40 -> 2 call nodes in 17 oracle calls." in m.notes
    assert "Reduced on: python 3.11.7." in m.notes and "none" not in m.notes  # not "cuda none"
    one = _reduce_out(tmp_path / "one")
    summary = json.loads((one / "summary.json").read_text())
    (one / "summary.json").write_text(json.dumps({**summary, "final_nodes": 1, "oracle_calls": 1}))
    assert "40 -> 1 call node in 1 oracle call." in parse_manifest(add_repro(one, "one", tmp_path / "suite1") / "manifest.toml").notes
    with pytest.raises(TrtminError, match="already exists.*--force"):
        add_repro(out, "relu_cast", root)
    (out / "report.md").write_text("# A better title\n")
    add_repro(out, "relu_cast", root, force=True)
    assert parse_manifest(entry / "manifest.toml").title == "A better title"  # report.md's, as before
    # what people wrote into the manifest stays when a newer reduction replaces the repro
    written = dataclasses.replace(parse_manifest(entry / "manifest.toml"), title="uint8 relu cast, by hand",
                                  upstream=("https://example.com/issue/1",), added="2026-01-02",
                                  expected_when=((Condition.parse("torch >= 9"), "fixed"),), notes="By hand.")
    (entry / "manifest.toml").write_text(manifest_text(written))
    add_repro(out, "relu_cast", root, force=True)
    again = parse_manifest(entry / "manifest.toml")
    assert (again.title, again.upstream, again.added, again.expected_when) == (
        written.title, written.upstream, written.added, written.expected_when)
    assert again.notes.startswith("By hand.\nReplaced on ") and "40 -> 2 call nodes" in again.notes
    add_repro(out, "relu_cast", root, force=True, upstream=["https://example.com/issue/2"], title="Given")
    given = parse_manifest(entry / "manifest.toml")  # given again on the command line: those win
    assert (given.title, given.upstream, given.added) == ("Given", ("https://example.com/issue/2",), "2026-01-02")
    add_repro(out, "relu_cast", root, force=True)  # a title given before is kept like a hand-written one
    assert parse_manifest(entry / "manifest.toml").title == "Given"
    assert [p.name for p in root.iterdir()] == ["relu_cast"]  # no temporary folders left behind
    [r] = run_repros(root, timeout=20)
    assert (r.status, r.ok) == (REPRODUCED, True)

    (out / "summary.json").unlink()
    with pytest.raises(TrtminError, match=r"no summary\.json: .*--resume"):  # a journal: an unfinished run
        add_repro(out, "other", root)
    (out / "journal.jsonl").unlink()
    with pytest.raises(TrtminError, match=r"no summary\.json: pass the --out folder of a finished `trtmin reduce`"):
        add_repro(out, "other", root)
    with pytest.raises(TrtminError, match="--name"):
        add_repro(out, "../escape", root)
    assert [p.name for p in root.iterdir()] == ["relu_cast"]


def test_a_plugins_manifest_names_its_file_not_the_path_it_had(tmp_path: Path) -> None:
    """The suite copies the plugin as plugin.py: the folder it came from (a user's home) says
    nothing to a maintainer. Module specs, built-in names and cmd: lines stay as they are."""
    out = _reduce_out(tmp_path / "trtmin-out")
    for i, (spec, shown) in enumerate([("/home/someone/work/my_compiler.py:backend", "my_compiler.py:backend"),
                        ("my_pkg.compilers:backend", "my_pkg.compilers:backend"),
                        ("executorch:xnnpack", "executorch:xnnpack"), ("cmd:trtexec --onnx={onnx}", "cmd:trtexec --onnx={onnx}"),
                        ("cmd:python /opt/tools/run.py:main {onnx}", "cmd:python /opt/tools/run.py:main {onnx}")]):
        summary = json.loads((out / "summary.json").read_text())
        (out / "summary.json").write_text(json.dumps({**summary, "backend": spec}))
        entry = add_repro(out, f"relu_cast_{i}", tmp_path / "suite")  # two commands are two compilers: two names
        assert parse_manifest(entry / "manifest.toml").backend == shown


def test_manifest_text_round_trips() -> None:
    m = Manifest(title='quotes " and \\ backslash', backend="tensorrt", oracle="crash", device="cuda",
                 added="2026-11-30", expected="fixed", upstream=("https://example.com/x",),
                 first_seen={"tensorrt": "10.16"}, expected_when=((Condition.parse("tensorrt >= 11"), "fixed"),),
                 notes='line 1\n"""triple""" and \\n literal\nends with quote"')
    assert parse_manifest_text(manifest_text(m)) == m


def parse_manifest_text(text: str) -> Manifest:
    from repros.suite import manifest_from_dict
    parsed, problems = manifest_from_dict(tomllib.loads(text))
    assert not problems, problems
    return parsed


@pytest.mark.parametrize("text, message", [
    (manifest(title=None), "missing title"),
    (manifest(expected="fixd"), "expected = 'fixd' is not one of 'reproduces', 'fixed'"),
    (manifest(added='"yesterday"'), "added must be a date"),
    (manifest(upstream='"https://x"'), "upstream must be a list"),
    (manifest(expectd='"fixed"'), "unknown key expectd"),
    (manifest(extra="[first_seen]\ntensorrt = 10.16\n"), "quote the versions"),
    (manifest(extra='[expected_when]\n"gpu:A100" = "fixed"\n'), "'gpu:A100' is not a condition"),
    (manifest(extra='[expected_when]\nno_gpu = "broken"\n'), "is not one of 'reproduces', 'fixed', 'skipped'"),
    ('title = "unterminated\n', "not valid TOML"),
])
def test_bad_manifest(tmp_path: Path, text: str, message: str) -> None:
    (tmp_path / "manifest.toml").write_text(text)
    with pytest.raises(TrtminError) as e:
        parse_manifest(tmp_path / "manifest.toml")
    assert message in str(e.value) and "manifest.toml" in str(e.value)
    assert "\n" not in str(e.value)  # one line per bad manifest


def test_a_reduce_output_without_a_manifest_is_pointed_to_repros_add(tmp_path: Path) -> None:
    (tmp_path / "summary.json").write_text("{}")
    with pytest.raises(TrtminError, match="it is a `trtmin reduce` output: save it into the suite with `trtmin "
                                          "repros add "):
        parse_manifest(tmp_path / "manifest.toml")
    (tmp_path / "summary.json").unlink()
    with pytest.raises(TrtminError, match="see docs/reference.md, \"The suite.s manifest\", for its fields"):
        parse_manifest(tmp_path / "manifest.toml")


def test_bad_entries_do_not_stop_the_others(tmp_path: Path) -> None:
    make_repro(tmp_path, "good", exits(1, "REPRODUCED: x"))
    make_repro(tmp_path, "bad", exits(1, "REPRODUCED: x"), expected="maybe")
    (tmp_path / "no_script").mkdir()
    (tmp_path / "no_script" / "manifest.toml").write_text(manifest())
    make_repro(tmp_path, "manifest_a_folder", exits(1, "REPRODUCED: x"))
    (tmp_path / "manifest_a_folder" / "manifest.toml").unlink()
    (tmp_path / "manifest_a_folder" / "manifest.toml").mkdir()  # an IsADirectoryError's traceback, once
    (tmp_path / ".tmp-half-written").mkdir()
    (tmp_path / "not_a_repro").mkdir()
    loads = "tensors = __import__('torch').load(__import__('os').path.join(__import__('os').path.dirname(__file__), "
    make_repro(tmp_path, "no_inputs", loads + "'repro_inputs.pt'))\n")  # its inputs file deleted
    (tmp_path / "shared_elsewhere").symlink_to(tmp_path / "moved_away")  # a link to a repro that is gone
    results = by_name(run_repros(tmp_path, timeout=20))
    assert sorted(results) == ["bad", "good", "manifest_a_folder", "no_inputs", "no_script", "shared_elsewhere"]
    link = results["shared_elsewhere"]  # listed as broken: skipped, it was gone from every run unsaid
    assert link.status == ERROR and f"a link to {tmp_path / 'moved_away'}, which is gone" in link.reason, link
    assert results["manifest_a_folder"].status == ERROR and "cannot be read" in results["manifest_a_folder"].reason
    gone = results["no_inputs"]  # an ERROR of the folder, not a SKIPPED as if the machine lacked something
    assert (gone.status, gone.expected, gone.ok, gone.seconds) == (ERROR, "reproduces", False, 0.0), gone
    assert "no repro_inputs.pt, which repro.py reads" in gone.reason
    assert results["good"].ok
    assert (results["bad"].status, results["bad"].ok, results["bad"].returncode) == (ERROR, False, None)
    assert "expected = 'maybe'" in results["bad"].reason
    assert "no repro.py" in results["no_script"].reason
    with pytest.raises(TrtminError) as e:
        validate_suite(tmp_path)
    assert str(e.value).count("\n") == 5 and str(e.value).startswith("5 bad repro folders")


def test_list_names_every_repro_and_what_is_wrong_with_a_bad_one(tmp_path: Path) -> None:
    from tests.helpers import run_cli_here
    make_repro(tmp_path, "good", exits(1, "REPRODUCED: x"), title="a good bug")
    make_repro(tmp_path, "bad", exits(1, "REPRODUCED: x"), expected="maybe")
    make_repro(tmp_path, "typo", exits(1, "REPRODUCED: x"), extra='\n[expected_when]\n"torch >= 9" = "fixed"\n')
    (tmp_path / "typo" / "manifest.toml").write_text((tmp_path / "typo" / "manifest.toml").read_text()
                                                     .replace('"inductor"', '"inductr"').replace('"cpu"', '"gpu"'))
    make_repro(tmp_path, "when", exits(1, "REPRODUCED: x"), extra='\n[expected_when]\n"torch >= 9" = "fixed"\n')
    make_repro(tmp_path, "gone", exits(1, "REPRODUCED: x"))
    (tmp_path / "gone" / "repro.py").unlink()
    r = run_cli_here("repros", "list", "--suite", str(tmp_path))
    lines = r.stdout.splitlines()
    assert r.returncode == 1 and [ln.split()[0] for ln in lines] == ["bad", "gone", "good", "typo", "when"], r.stdout
    assert "inductor mismatch on cpu, reproduces: a good bug" in lines[2]
    assert "cannot run:" in lines[0] and "maybe" in lines[0]
    assert "cannot run:" in lines[1] and "no repro.py" in lines[1]
    assert "unknown backend 'inductr'" in lines[3] and "device = 'gpu' is not cpu, cuda or cuda:N" in lines[3]
    assert "inductor mismatch on cpu, reproduces, fixed where torch >= 9: when" in lines[4]
    shipped = run_cli_here("repros", "list").stdout.splitlines()
    assert [ln.split()[0] for ln in shipped] == [r.name for r in find_repros(default_root())]


def test_classify_signals() -> None:
    # A repro whose bug ran in-process and now kills it fails differently (README: exit 3's
    # meaning); a kill from outside says nothing of the bug.
    assert classify(-11, "some log", "") == (CHANGED, "the process died of SIGSEGV: some log",
                                             "CHANGED: the process died of SIGSEGV")
    assert classify(-9, "REPRODUCED: ?", "")[:2] == (ERROR, "killed by SIGKILL: REPRODUCED: ?")
    # its verdict printed, then a death at exit (a native library's teardown): the verdict stands, as after a hang
    assert classify(-11, "log\nREPRODUCED: RuntimeError: the bug\n", "") == (
        REPRODUCED, "it printed its verdict, then died of SIGSEGV (at exit: a library's teardown)",
        "REPRODUCED: RuntimeError: the bug")
    assert classify(0, "FIXED: it matches\n", "") == (FIXED, "", "FIXED: it matches")
    # an empty script exits 0, a bare sys.exit(1) 1: without the verdict line, no verdict
    assert classify(0, "", "") == (ERROR, "exit code 0 without a 'FIXED: ...' line, no output", "")
    assert classify(1, "done\n", "")[:2] == (ERROR, "exit code 1 without a 'REPRODUCED: ...' line: done")
    # a script Python cannot compile: exit 1, and no "Traceback" line before the error
    said = '  File "repro.py", line 4\n    CRASH: x """ y\n             ^\nSyntaxError: invalid syntax\n'
    assert classify(1, "", said)[:2] == (ERROR, "the script raised and exited 1 without a REPRODUCED line: "
                                                "SyntaxError: invalid syntax")
    assert classify(2, "SKIPPED:   no GPU  \n\n", "") == (SKIPPED, "no GPU", "SKIPPED:   no GPU")
    # torch.onnx's coloured words in a verdict line (a hunt: escape bytes in report.md's table)
    assert classify(3, "CHANGED: ConversionError: \x1b[96mThis is step 3/3\x1b[0m of exporting\n", "") == (
        CHANGED, "", "CHANGED: ConversionError: This is step 3/3 of exporting")


def test_shipped_suite_manifests_are_valid() -> None:
    repros = find_repros(default_root())
    assert all(r.problem is None for r in repros), [r.problem for r in repros if r.problem]


def test_pytest_collects_a_suite_through_the_runner(tmp_path: Path) -> None:
    make_repro(tmp_path, "still_reproduces", exits(1, "REPRODUCED: x"))
    make_repro(tmp_path, "now_fixed", exits(0, "FIXED: y"))
    make_repro(tmp_path, "no_gpu_here", exits(2, "SKIPPED: no CUDA GPU"))
    proc = subprocess.run([sys.executable, "-m", "pytest", "repros/test_suite.py", "--repro-root", str(tmp_path),
                           "-q", "-rs", "-p", "no:cacheprovider"], cwd=REPO, capture_output=True, text=True,
                          timeout=60, env={**os.environ, "PYTEST_ADDOPTS": ""})
    out = proc.stdout
    assert proc.returncode == 1, out + proc.stderr
    assert "1 failed, 1 passed, 1 skipped" in out
    assert "test_repro[now_fixed]" in out and "no longer reproduces" in out
    assert "SKIPPED [1] repros/test_suite.py" in out and "no CUDA GPU" in out


@pytest.mark.parametrize("stop", ["sigterm", "two_sigints"])
def test_a_terminated_run_leaves_no_repro_running_and_keeps_what_finished(tmp_path: Path, stop: str) -> None:
    """SIGTERM (a CI cancel) to `trtmin repros run` ends the repro it is running too: the
    repro runs in a session of its own, and was left behind with parent 1. What finished
    before is shown and written to --json, marked as interrupted (it was all lost, with no
    word), and the exit code is SIGTERM's, as a shell gives it. Two SIGINTs 2 ms apart
    (`timeout -s INT`, an impatient Ctrl-C) lost it all in 5 of 6 tries: the second one
    raised inside the first one's clean-up."""
    from repros.table import merge_tables
    from tests.helpers import ROOT
    started, finished = tmp_path / "started", tmp_path / "finished"
    make_repro(tmp_path / "suite", "a_quick", exits(1, "REPRODUCED: x"))
    make_repro(tmp_path / "suite", "b_hangs", f"""
        import pathlib, time
        pathlib.Path({str(started)!r}).touch()
        time.sleep(4)
        pathlib.Path({str(finished)!r}).touch()
    """)
    make_repro(tmp_path / "suite", "c_later", exits(1, "REPRODUCED: x"))
    proc = subprocess.Popen([sys.executable, "-m", "minimize.cli", "repros", "run", "--suite", str(tmp_path / "suite"),
                             "--timeout", "100", "--json", str(tmp_path / "run.json")], cwd=ROOT,
                            env={**os.environ, "PYTHONPATH": str(ROOT)},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    t0 = time.monotonic()
    while not started.exists() and time.monotonic() - t0 < 60:
        time.sleep(0.05)
    assert started.exists()
    if stop == "sigterm":
        proc.terminate()
    else:
        proc.send_signal(signal.SIGINT)
        time.sleep(0.002)
        proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == (143 if stop == "sigterm" else 130), (out, err)
    assert "a_quick" in out and "1 repro: 1 reproduced" in out, out
    assert "interrupted: 2 repros not finished (b_hangs, c_later)" in err and "run.json holds the 1 finished" in err, err
    record = json.loads((tmp_path / "run.json").read_text())
    assert [r["name"] for r in record["results"]] == ["a_quick"]
    assert record["interrupted"] == {"not_finished": ["b_hangs", "c_later"]}
    # what a CI step reads first cannot pass for a whole run: not_ok is 0, all_ok is not
    assert record["summary"]["not_ok"] == 0 and (record["summary"]["not_finished"], record["summary"]["all_ok"]) == (2, False)
    assert "(interrupted)" in merge_tables([tmp_path / "run.json"]).splitlines()[0]
    time.sleep(5)
    assert not finished.exists()


def test_a_script_and_its_child_die_with_trtmin_even_by_kill_9(tmp_path: Path) -> None:
    """A script run_script runs (repro.py checked alone after a reduction, a saved repro)
    and the child it starts end when the process that ran it is killed with SIGKILL, which
    no handler sees: they ran on in a session of their own, a TensorRT build or a hang's
    child for minutes."""
    from tests.helpers import ROOT
    started, finished = tmp_path / "started", tmp_path / "finished"
    script = tmp_path / "repro.py"
    script.write_text(textwrap.dedent(f"""
        import pathlib, subprocess, sys, time
        child = subprocess.Popen([sys.executable, "-c", "import pathlib, time; time.sleep(4); "
                                  "pathlib.Path({str(finished)!r} + '_child').touch()"])
        pathlib.Path({str(started)!r}).touch()
        time.sleep(4)
        pathlib.Path({str(finished)!r}).touch()
    """))
    driver = subprocess.Popen([sys.executable, "-c", "import sys, pathlib; from oracles.script_run import run_script; "
                               "run_script(pathlib.Path(sys.argv[1]), 100)", str(script)], cwd=ROOT,
                              env={**os.environ, "PYTHONPATH": str(ROOT)})
    t0 = time.monotonic()
    while not started.exists() and time.monotonic() - t0 < 60:
        time.sleep(0.05)
    assert started.exists()
    driver.kill()
    driver.wait(timeout=30)
    time.sleep(6)
    assert not finished.exists() and not Path(str(finished) + "_child").exists()


def test_a_script_killed_by_a_signal_and_a_childs_held_pipe_read_as_before_the_supervisor(tmp_path: Path) -> None:
    """Under the supervisor, a script killed by SIGKILL (the OOM killer's) is still 'killed
    by SIGKILL', not exit 1, which its REPRODUCED line then passed for; and a child the
    script leaves holding its pipes ends with it, so its line is read at once, not lost
    at the timeout."""
    from oracles.script_run import classify, run_script
    killed = tmp_path / "killed.py"
    killed.write_text("import os, signal\nprint('REPRODUCED: x', flush=True)\nos.kill(os.getpid(), signal.SIGKILL)\n")
    rc, out, err, timed_out, _ = run_script(killed, 60)
    assert rc == -9 and classify(rc, out, err, timed_out, 60)[:2] == (ERROR, "killed by SIGKILL: REPRODUCED: x"), err
    finished = tmp_path / "finished"
    left = tmp_path / "left.py"
    left.write_text(textwrap.dedent(f"""
        import subprocess, sys
        subprocess.Popen([sys.executable, "-c", "import pathlib, time; time.sleep(8); "
                          "pathlib.Path({str(finished)!r}).touch()"])  # inherits the pipes
        print("REPRODUCED: x")
        sys.exit(1)
    """))
    rc, out, err, timed_out, seconds = run_script(left, 30)
    assert (rc, out.strip(), timed_out) == (1, "REPRODUCED: x", False) and seconds < 8, (rc, out, err, seconds)
    time.sleep(9)
    assert not finished.exists()


def test_control_run_strict_skips_and_an_empty_suite(suite: Path, tmp_path: Path, monkeypatch) -> None:
    """The control run (TRTMIN_BACKEND=eager) expects FIXED of every repro, not what the
    manifests say (it had told the user to edit every manifest); --strict-skips reaches the
    CLI; an empty suite is an error, not 'all as expected'."""
    from tests.helpers import run_cli
    make_repro(tmp_path / "control", "a_bug", exits(0, "FIXED: eager matches"))
    make_repro(tmp_path / "control", "broken_script", exits(1, "REPRODUCED: even eager differs"))
    monkeypatch.setenv("TRTMIN_BACKEND", "eager")
    results = by_name(run_repros(tmp_path / "control", timeout=20))
    assert results["a_bug"].ok and results["a_bug"].expected == "fixed"
    assert "control run" in results["a_bug"].expected_because
    assert not results["broken_script"].ok  # a script that fails under eager is unsound
    monkeypatch.delenv("TRTMIN_BACKEND")
    assert not by_name(run_repros(tmp_path / "control", timeout=20))["a_bug"].ok  # expects reproduces again
    make_repro(tmp_path / "skips", "needs_gpu", exits(2, "SKIPPED: no CUDA GPU is visible here"))
    assert run_cli("repros", "run", "--suite", str(tmp_path / "skips")).returncode == 0
    assert run_cli("repros", "run", "--suite", str(tmp_path / "skips"), "--strict-skips").returncode == 1
    (tmp_path / "empty").mkdir()
    r = run_cli("repros", "run", "--suite", str(tmp_path / "empty"))
    assert r.returncode == 2 and "no repros in" in r.stderr and "Traceback" not in r.stderr, r.stderr


def test_add_refuses_an_earlier_runs_outputs_beside_a_later_journal(tmp_path: Path) -> None:
    """A run started over an earlier one (--force) and stopped before its own outputs
    leaves the earlier repro beside its journal: summary.json names its journal's header,
    so repros add does not save it as the later run's."""
    from minimize.emit.journal import header_line
    from oracles.out_folder import header_digest
    out = _reduce_out(tmp_path / "out")
    earlier = header_line({"model_sha256": "a", "options": {}})
    summary = json.loads((out / "summary.json").read_text())
    (out / "summary.json").write_text(json.dumps({**summary, "journal_header_sha256": header_digest(earlier)}))
    (out / "journal.jsonl").write_text(header_line({"model_sha256": "b", "options": {}}) + "\n")
    with pytest.raises(TrtminError, match="an earlier run's than journal.jsonl.*--resume"):
        add_repro(out, "stale", tmp_path / "suite")
    (out / "journal.jsonl").write_text(earlier + "\n")
    assert add_repro(out, "same_run", tmp_path / "suite").is_dir()


def test_a_reductions_summary_names_the_compilers_version_for_first_seen(tmp_path: Path) -> None:
    """summary.json's environment had only torch's version, so the manifest of an ExecuTorch
    or ONNX Runtime bug never said which release it was seen in (add_repro looks for them)."""
    import importlib.metadata as md

    from minimize.emit.script import environment

    env = environment()
    for package in ("executorch", "onnxruntime"):
        try:
            assert env[package] == md.version(package)
        except md.PackageNotFoundError:
            assert package not in env
    out = _reduce_out(tmp_path / "o")
    summary = json.loads((out / "summary.json").read_text())
    summary["backend"] = "executorch:xnnpack"
    summary["environment"].update({"executorch": "1.4.1", "onnxruntime": "1.32.0"})
    (out / "summary.json").write_text(json.dumps(summary))
    installed = tmp_path / "lib" / "site-packages" / "repros" / "suite"  # a pip install's: an upgrade replaces it
    with pytest.MonkeyPatch.context() as patched:
        patched.setattr("repros.suite.SHIPPED_SUITE", installed)
        patched.delenv("TRTMIN_SUITE", raising=False)
        with pytest.raises(TrtminError, match="which the next upgrade replaces; pass --suite DIR"):
            add_repro(out, "xnn")
    assert not installed.exists()
    written = add_repro(out, "xnn", tmp_path / "suite") / "manifest.toml"
    m = parse_manifest(written)
    assert m.first_seen == {"torch": "2.13.0+cpu", "executorch": "1.4.1"}  # not onnxruntime: not its compiler
    assert '\n# "executorch > 1.4.1" = "fixed"\n' in written.read_text()  # the release to watch is the compiler's
    summary["backend"] = "tensorrt"  # run on TensorRT-RTX: the full TensorRT it lacked is no release it was seen in
    summary["environment"].update({"tensorrt": "not installed", "tensorrt_rtx": "1.4.0.76"})
    (out / "summary.json").write_text(json.dumps(summary))
    summary["environment"]["onnxscript"] = "0.7.2"  # torch.onnx's op library: the export is part of the compiler
    (out / "summary.json").write_text(json.dumps(summary))
    rtx = parse_manifest(add_repro(out, "rtx", tmp_path / "suite", duplicate=True) / "manifest.toml")
    assert rtx.first_seen == {"torch": "2.13.0+cpu", "tensorrt_rtx": "1.4.0.76", "onnxscript": "0.7.2"}, rtx.first_seen
    summary["backend"] = "onnxruntime"  # an exporter's bug (onnxscript's atan2) is seen in its release too
    (out / "summary.json").write_text(json.dumps(summary))
    written = add_repro(out, "ort", tmp_path / "suite", duplicate=True) / "manifest.toml"
    ort = parse_manifest(written)
    assert ort.first_seen == {"torch": "2.13.0+cpu", "onnxruntime": "1.32.0", "onnxscript": "0.7.2"}, ort.first_seen
    assert '\n# "onnxruntime > 1.32.0" = "fixed"\n' in written.read_text()  # the runtime first: its bugs are most
    summary["diagnosis"] = {"fixed_by": "onnxscript",  # torch.onnx's (an export failure, an invalid model)
                            "backend": "no GPU here: this failure names CUDA"}  # how the backend judged it, kept
    (out / "summary.json").write_text(json.dumps(summary))
    written = add_repro(out, "ort_export", tmp_path / "suite", duplicate=True) / "manifest.toml"
    assert '\n# "onnxscript > 0.7.2" = "fixed"\n' in written.read_text()  # not the runtime that never saw the model
    assert "\nBackend: no GPU here: this failure names CUDA.\n" in parse_manifest(written).notes + "\n"


def test_a_repro_that_cannot_run_here_is_skipped_without_running(tmp_path: Path, monkeypatch) -> None:
    """Known from the manifest alone (a compiler that is not installed, a CUDA repro without
    a GPU): SKIPPED at once, not after the script's eager half. The eager control needs no
    compiler, so there the script runs."""
    import importlib.util
    if importlib.util.find_spec("torch_tensorrt") is not None:
        pytest.skip("torch_tensorrt is installed here")
    ran = tmp_path / "ran"
    body = f"import pathlib\npathlib.Path({str(ran)!r}).touch()\n" + exits(0, "FIXED: eager")
    d = make_repro(tmp_path / "suite", "needs_trt", body)
    (d / "manifest.toml").write_text(manifest("needs trt", backend='"torch_tensorrt"'))
    [result] = run_repros(tmp_path / "suite", timeout=20)
    assert (result.status, result.ok, result.reason) == ("SKIPPED", True, "torch_tensorrt is not installed")
    assert not ran.exists()
    monkeypatch.setenv("TRTMIN_BACKEND", "eager")
    [control] = run_repros(tmp_path / "suite", timeout=20)
    assert control.status == "FIXED" and ran.exists()


def test_the_packages_a_script_checks_for_are_checked_before_it_runs(tmp_path: Path) -> None:
    """A script's own REQUIRES (an ONNX Runtime or TensorRT script also needs onnxscript,
    onnx) decides SKIPPED before it runs, "a|b" meaning either; a backend with no package of
    its own (inductor) and a script that declares none run."""
    ran = tmp_path / "ran"
    touch = f"import pathlib\npathlib.Path({str(ran)!r}).touch()\n"
    make_repro(tmp_path / "missing", "needs_two", "REQUIRES = ['json', 'no_such_pkg_a|no_such_pkg_b']\n" + touch
               + exits(1, "REPRODUCED: ran"))
    [result] = run_repros(tmp_path / "missing", timeout=20)
    assert (result.status, result.reason) == ("SKIPPED", "no_such_pkg_a or no_such_pkg_b is not installed")
    assert not ran.exists() and (result.verdict, result.returncode) == ("", None)  # no line or exit it never gave
    console = Console(width=160, record=True, color_system=None)
    console.print(render_table([result]))
    assert "not run: no_such_pkg_a or no_such_pkg_b is not installed" in console.export_text()
    make_repro(tmp_path / "present", "either_one", "REQUIRES = ['no_such_pkg_a|json']  # either\n" + touch
               + exits(1, "REPRODUCED: ran"))
    [result] = run_repros(tmp_path / "present", timeout=20)
    assert result.status == "REPRODUCED" and ran.exists()


def test_jobs_run_repros_side_by_side_and_keep_the_suite_order(tmp_path: Path) -> None:
    """With --jobs 2 two repros run at once (each waits for the other to start; one after
    the other, the first would give up), the results come back in suite order, and each is
    reported as it finishes."""
    for me, other in (("a", "b"), ("b", "a")):
        make_repro(tmp_path / "suite", f"{me}_waits", f"""
            import pathlib, time
            pathlib.Path({str(tmp_path / me)!r}).touch()
            t0 = time.monotonic()
            while not pathlib.Path({str(tmp_path / other)!r}).exists() and time.monotonic() - t0 < 20:
                time.sleep(0.05)
            seen = pathlib.Path({str(tmp_path / other)!r}).exists()
            print("REPRODUCED: ran beside the other" if seen else "FIXED: ran alone")
            sys.exit(1 if seen else 0)
        """)
    finished: list[str] = []
    results = run_repros(tmp_path / "suite", timeout=60, jobs=2, on_result=lambda r: finished.append(r.name))
    assert [r.name for r in results] == ["a_waits", "b_waits"]
    assert [r.status for r in results] == ["REPRODUCED", "REPRODUCED"], [r.verdict for r in results]
    assert sorted(finished) == ["a_waits", "b_waits"]


def test_a_reduction_is_matched_by_its_ops_backend_and_failure(tmp_path: Path) -> None:
    """repros/match.py: the same op multiset, backend family and kind of failure (for a
    crash, the same normalized error) is a known bug; another op, backend or error is not."""
    from repros.match import known_bugs

    def reduction(folder: Path, ops: list[str], backend: str, verdict: str) -> Path:
        folder.mkdir(parents=True)
        calls = "\n".join(f"        x = torch.ops.{op}(x)" for op in ops)
        (folder / "repro.py").write_text(f"class Repro:\n    def forward(self, x):\n{calls}\n        return (x,)\n")
        (folder / "summary.json").write_text(json.dumps({"backend": backend, "final_verdict": verdict}))
        return folder

    suite = tmp_path / "suite"
    saved = reduction(suite / "saved", ["aten.permute.default", "aten.div.Tensor"], "torch_tensorrt",
                      "CRASH: ValueError: __len__() should return >= 0")
    (saved / "manifest.toml").write_text(manifest("uint8 permute", extra='[expected_when]\n"torch >= 9" = "fixed"\n'))
    mine = reduction(tmp_path / "mine", ["aten.div.Tensor", "aten.permute.default"], "torch_tensorrt",
                     "CRASH: ValueError: __len__() should return >= 0")
    assert [m.name for m in known_bugs(mine, suite)] == ["saved"]
    assert known_bugs(mine, suite)[0].line().endswith("; fixed where torch >= 9)")  # whether upgrading fixes it
    other_op = reduction(tmp_path / "op", ["aten.permute.default", "aten.mul.Tensor"], "torch_tensorrt",
                         "CRASH: ValueError: __len__() should return >= 0")
    other_error = reduction(tmp_path / "err", ["aten.permute.default", "aten.div.Tensor"], "torch_tensorrt",
                            "CRASH: TypeError: deserialize_cuda_engine(): incompatible function arguments")
    other_backend = reduction(tmp_path / "be", ["aten.permute.default", "aten.div.Tensor"], "inductor",
                              "CRASH: ValueError: __len__() should return >= 0")
    assert known_bugs(other_op, suite) == known_bugs(other_error, suite) == known_bugs(other_backend, suite) == []
    # the same ops on the same backend failing otherwise are related (XNNPACK's batch-norm fusion
    # crashes or miscomputes by sizes): said, but no duplicate for `repros add` to refuse
    from repros.match import compare
    mismatch = reduction(tmp_path / "mm", ["aten.permute.default", "aten.div.Tensor"], "torch_tensorrt",
                         "MISMATCH: output 0 differs from eager by max abs 2")
    assert known_bugs(mismatch, suite) == []
    # and so are the same ops reached by other overloads (ExecuTorch's remainder kernel takes
    # the dividend's sign by remainder.Scalar and by remainder.Tensor)
    other_overload = reduction(tmp_path / "ov", ["aten.permute.default", "aten.div.Scalar"], "torch_tensorrt",
                               "CRASH: ValueError: __len__() should return >= 0")
    assert known_bugs(other_overload, suite) == []
    for folder, otherwise in ((mismatch, "where it fails otherwise, as crash"),
                              (other_error, "where it fails otherwise, as crash with another error"),
                              (other_overload, "by other overloads (div.Tensor)")):
        related = compare(folder, suite)[0]
        assert [(m.name, m.otherwise) for m in related] == [("saved", otherwise)], related
        assert related[0].line().startswith(f"looks related to a known bug: saved (the same ops on the same backend, "
                                            f"{otherwise}: uint8 permute")
    assert compare(other_op, suite)[0] == compare(other_backend, suite)[0] == []
    # a mismatch by its symptom: values off is not eager's NaN lost (a hunt: atan2(+0, -1) = -pi on
    # ONNX Runtime was named the saved atan2 that maps NaN to 0, and `repros add` refused it)
    reduction(suite / "nan_lost", ["aten.atan2.default"], "onnxruntime",
              "MISMATCH: output 0 is finite where eager's is NaN (14 of 32 values off, dtype float32)")
    (suite / "nan_lost" / "manifest.toml").write_text(manifest("atan2 maps NaN to 0", backend='"onnxruntime"'))
    sign = reduction(tmp_path / "sign", ["aten.atan2.default"], "onnxruntime",
                     "MISMATCH: output 0 differs from eager by max abs 6.283 (max rel 2) (2 of 4 values off)")
    nan_again = reduction(tmp_path / "nan_again", ["aten.atan2.default"], "onnxruntime",
                          "MISMATCH: output 0 is finite at 3 values where eager's is NaN, and off at others")
    assert known_bugs(sign, suite) == [] and [m.name for m in known_bugs(nan_again, suite)] == ["nan_lost"]
    assert [m.otherwise for m in compare(sign, suite)[0]] == [
        "where it fails otherwise, as mismatch: finite where eager's is NaN"]
    # the same ops and symptom in another output dtype: related, not a twin (a robotics user's hunt: the fp16
    # linear refused as the saved bf16 one); a verdict that names no dtype matches either
    reduction(suite / "bf16_linear", ["aten.linear.default"], "executorch:portable",
              "MISMATCH: output 0 differs from eager by max abs 0.5 (3 of 4 values off, dtype bfloat16)")
    (suite / "bf16_linear" / "manifest.toml").write_text(manifest("bf16 linear", backend='"executorch:portable"'))
    for dtype, known in (("float16", []), ("bfloat16", ["bf16_linear"])):
        again = reduction(tmp_path / dtype, ["aten.linear.default"], "executorch:portable",
                          f"MISMATCH: output 0 differs from eager by max abs 2 (4 of 4 values off, dtype {dtype})")
        assert [m.name for m in known_bugs(again, suite)] == known, dtype
    assert [m.otherwise for m in compare(again.parent / "float16", suite)[0]] == [
        "where it fails otherwise, as mismatch in bfloat16"]
    unnamed = reduction(tmp_path / "unnamed", ["aten.linear.default"], "executorch:portable",
                        "MISMATCH: output 0 differs from eager by max abs 2")
    assert [m.name for m in known_bugs(unnamed, suite)] == ["bf16_linear"]
    from repros.match import _mismatch_symptom  # as oracles/checks.py words a mix of both
    assert _mismatch_symptom("MISMATCH: output 0 is finite where eager's is NaN or inf") == \
        "finite where eager's is NaN or inf"
    # two plugins (or commands) are two compilers, whose bugs are never one (a hunt: compB's clamped
    # sigmoid refused as compA's hardsigmoid); the same plugin from another folder is the same
    reduction(suite / "comp_a", ["aten.sigmoid.default"], "compA.py:backend", "MISMATCH: output 0 differs")
    (suite / "comp_a" / "manifest.toml").write_text(manifest("A's sigmoid", backend='"compA.py:backend"'))
    comp_b = reduction(tmp_path / "comp_b", ["aten.sigmoid.default"], "compB.py:backend", "MISMATCH: output 0 differs")
    comp_a = reduction(tmp_path / "comp_a", ["aten.sigmoid.default"], "/home/me/compA.py:backend",
                       "MISMATCH: output 0 differs")
    assert compare(comp_b, suite)[0] == [] and [m.name for m in known_bugs(comp_a, suite)] == ["comp_a"]
    from repros.match import Fingerprint, _how_it_differs  # the overloads it calls more often, and the failure
    theirs = Fingerprint((("aten.div.Tensor", 2),), "inductor", "crash", "E1")
    mine_ = Fingerprint((("aten.div.Scalar", 1), ("aten.div.Tensor", 1)), "inductor", "crash", "E2")
    assert _how_it_differs(theirs, mine_) == "by other overloads (div.Tensor), failing as crash with another error"
    # one error code, two logged causes (ExecuTorch's 0x1 of any delegate init failure): two bugs;
    # a repro saved before causes were logged matches by its error alone
    logged = [Fingerprint((("aten.view.default", 1),), "executorch", "crash", "E 0x1", "", cause)
              for cause in ("unsupported_parameter", "invalid_state", "")]
    assert _how_it_differs(logged[0], logged[1]) == "where it fails otherwise, as crash with another error"
    assert _how_it_differs(logged[0], logged[2]) == _how_it_differs(logged[2], logged[1]) == ""
    hand_written = [suite / "by_hand_inductor", suite / "by_hand_trt"]  # no summary.json: not compared
    for folder, backend in zip(hand_written, ("inductor", "torch_tensorrt")):
        folder.mkdir()
        (folder / "repro.py").write_text("print('FIXED')\n")
        (folder / "manifest.toml").write_text(manifest("by hand", backend=f'"{backend}"'))
    assert compare(mine, suite)[1] == ["by_hand_trt"]  # of this backend alone: an inductor repro cannot match
    (suite / "by_hand_inductor" / "manifest.toml").write_text("title = \n")  # not "no summary.json": unread
    assert compare(mine, suite)[1:] == (["by_hand_trt"], ["by_hand_inductor"])
    (suite / "by_hand_inductor" / "manifest.toml").write_text(manifest("by hand", backend='"inductor"'))
    # a death by a signal: the signal, not the site (its Python caller, which a release may move)
    reduction(suite / "segv", ["aten.mul.Tensor"], "tensorrt", "CRASH: Signal: SIGSEGV")
    (suite / "segv" / "manifest.toml").write_text(manifest("builder segfault"))
    sited = reduction(tmp_path / "sited", ["aten.mul.Tensor"], "tensorrt",
                      "CRASH: Signal: SIGSEGV in build_serialized_network (called from _build)")
    aborts = reduction(tmp_path / "aborts", ["aten.mul.Tensor"], "tensorrt", "CRASH: Signal: SIGABRT in abort (called from run)")
    assert [m.name for m in known_bugs(sited, suite)] == ["segv"] and known_bugs(aborts, suite) == []
    # cut from the same program (summary.json's program_sha256) to other ops: related, whatever
    # the backend (a user's bf16 policy: a conv2d found first, a layer_norm saved before)
    for folder in (suite / "segv", other_op):
        data = json.loads((folder / "summary.json").read_text())
        (folder / "summary.json").write_text(json.dumps({**data, "program_sha256": "abc"}))
    related = compare(other_op, suite)[0]
    assert [(m.name, m.otherwise) for m in related] == [
        ("segv", "cut from the same program, to other ops (aten.mul) on tensorrt")], related
    assert related[0].line() == ("looks related to a known bug: segv (cut from the same program, to other ops "
                                 "(aten.mul) on tensorrt: builder segfault, upstream https://github.com/pytorch/TensorRT/pull/4964)")
    assert known_bugs(other_op, suite) == [] and compare(other_backend, suite)[0] == []  # another program: nothing
    # on screen, not in report.md: another bug of the user's model is none of the maintainers' (a quantized hunt)
    from minimize.emit.report import _known_section
    assert related[0].other_ops and _known_section({"known_bugs": [
        {"name": "segv", "line": related[0].line(), "same": False, "other_ops": True, "where": "`segv`"}]}) == ""
    for folder in (saved, other_backend):  # the same ops on another backend, from the same program
        data = json.loads((folder / "summary.json").read_text())
        (folder / "summary.json").write_text(json.dumps({**data, "program_sha256": "def"}))
    assert [m.otherwise for m in compare(other_backend, suite)[0]] == [
        "cut from the same program, to the same ops (aten.div, aten.permute) on torch_tensorrt"]
    assert not compare(other_backend, suite)[0][0].other_ops  # the same ops elsewhere: said in report.md too
    # backends compare by family: a built-in less its variant; a plugin or a command by itself, as
    # titles show it (two users' compilers are two: a hunt's compB was refused as compA's bug)
    from repros.match import _family
    assert [_family(b) for b in ("executorch:xnnpack", "cmd:run {model}", "/home/me/plug.py:fn", "mypkg.backends:fn")] \
        == ["executorch", "cmd:run {model}", "plug.py:fn", "mypkg.backends:fn"]


def test_a_crash_is_matched_by_the_first_error_the_compiler_logged(tmp_path: Path) -> None:
    """Behind a bare error code, the compiler's first logged error is the cause (summary.json's
    native_errors, first the cause): what it logged after may differ between two reductions
    of one bug, and another first error is another bug."""
    from repros.match import known_bugs

    def reduction(folder: Path, native: list[str]) -> Path:
        folder.mkdir(parents=True)
        (folder / "repro.py").write_text("class Repro:\n    def forward(self, x):\n"
                                         "        x = torch.ops.aten.sin.default(x)\n        return (x,)\n")
        (folder / "summary.json").write_text(json.dumps({"backend": "inductor", "final_verdict": "CRASH: E: code 0x1",
                                                         "native_errors": native}))
        return folder

    suite = tmp_path / "suite"
    saved = reduction(suite / "saved", ["unsupported parameter in sin", "then the delegate gave up"])
    (saved / "manifest.toml").write_text(manifest("sin's init fails", oracle='"crash"'))
    mine = reduction(tmp_path / "mine", ["unsupported parameter in sin", "then the runtime closed"])
    assert [m.name for m in known_bugs(mine, suite)] == ["saved"]
    other = reduction(tmp_path / "other", ["invalid state in sin", "then the delegate gave up"])
    assert known_bugs(other, suite) == []


def test_a_known_bug_is_found_before_the_report_is_written_and_says_where_it_is(tmp_path: Path, monkeypatch) -> None:
    """The saved repros a reduction looks like are found from its repro.py and the summary
    it is about to write (a kill after report.md no longer leaves it without them); one of a
    team's suite ($TRTMIN_SUITE) is not said to be in the shipped one."""
    from minimize.cli import _known_bugs
    from minimize.emit.report import _known_section

    team = tmp_path / "team"
    script = "class Repro:\n    def forward(self, x):\n        x = torch.ops.aten.sin.default(x)\n        return (x,)\n"
    summary = {"backend": "inductor", "final_verdict": "CRASH: E: x"}
    for folder in (team / "saved_bug", tmp_path / "out"):
        folder.mkdir(parents=True)
        (folder / "repro.py").write_text(script)
    (team / "saved_bug" / "summary.json").write_text(json.dumps(summary))
    (team / "saved_bug" / "manifest.toml").write_text(manifest("sin crashes", oracle='"crash"'))
    monkeypatch.setenv("TRTMIN_SUITE", str(team))
    found = _known_bugs(tmp_path / "out", summary)  # no summary.json there yet
    assert [(k["name"], k["same"]) for k in found] == [("saved_bug", True)], found
    assert _known_section({"known_bugs": found}) == (
        "**Known bug?** This reduction looks like a known bug: saved_bug (sin crashes, upstream "
        "https://github.com/pytorch/TensorRT/pull/4964) (the same ops, backend and "
        "failure): `saved_bug` in the suite $TRTMIN_SUITE names; `trtmin repros run saved_bug` checks it.\n\n")
    related = _known_bugs(tmp_path / "out", {**summary, "final_verdict": "CRASH: E: another"})  # another error
    assert [(k["name"], k["same"]) for k in related] == [("saved_bug", False)]
    # a team's suite does not hide the shipped one's bugs: both are read
    shipped = tmp_path / "shipped"
    shutil.copytree(team / "saved_bug", shipped / "shipped_bug")
    monkeypatch.setattr("repros.suite.SHIPPED_SUITE", shipped)
    both = _known_bugs(tmp_path / "out", summary)
    assert [(k["name"], k["where"]) for k in both] == [
        ("saved_bug", "`saved_bug` in the suite $TRTMIN_SUITE names"), ("shipped_bug", "`repros/suite/shipped_bug`")]
    from minimize.cli import run_command  # on screen, each where it is: the default suite needs no --suite
    assert run_command(both[0]) == "trtmin repros run saved_bug"
    assert run_command(both[1]).startswith("trtmin repros run shipped_bug --suite ") and "shipped" in run_command(both[1])
    assert "--suite" not in _known_section({"known_bugs": both})  # report.md: no path of this machine
    from repros.suite import add_repro  # without --suite, repros add sees the shipped twin as reduce did
    (tmp_path / "out" / "summary.json").write_text(json.dumps({**summary, "device": "cpu", "oracle": "crash"}))
    with pytest.raises(TrtminError, match=r"saving it again would list one bug twice; `trtmin repros run "
                                          r"saved_bug` checks it"):
        add_repro(tmp_path / "out", "again")
    shutil.copytree(shipped / "shipped_bug", team / "shipped_bug")  # a team's suite begun as a copy of the shipped
    assert [k["name"] for k in _known_bugs(tmp_path / "out", summary)] == ["saved_bug", "shipped_bug"]  # once each
    shutil.rmtree(team / "saved_bug")  # a newer reduction of the team's copy replaces it: not its shipped twin
    assert add_repro(tmp_path / "out", "shipped_bug", force=True) == team / "shipped_bug"
    with pytest.raises(TrtminError, match=r"is the saved repro shipped_bug: saving it again as copy would list one "
                                          r"bug twice; `trtmin repros run shipped_bug` checks it"):
        add_repro(team / "shipped_bug", "copy")  # a saved repro under another name is its own twin
    with pytest.raises(TrtminError, match=r"is the saved repro shipped_bug itself: nothing new to save"):
        add_repro(team / "shipped_bug", "shipped_bug", force=True)  # from a shell inside it: a traceback (a review)
    assert add_repro(team / "shipped_bug", "copy", duplicate=True) == team / "copy"
    monkeypatch.setenv("TRTMIN_SUITE", str(tmp_path / "no_such_suite"))  # said, and the shipped one read alone
    notes: list[str] = []
    assert [k["name"] for k in _known_bugs(tmp_path / "out", summary, notes)] == ["shipped_bug"]
    assert notes[0].startswith(f"$TRTMIN_SUITE={tmp_path / 'no_such_suite'} is not a folder") and \
        not any("no_such_suite" in str(v) for v in summary.values())  # no path of this machine in summary.json
    (shipped / "shipped_bug" / "summary.json").write_text("[]")  # damaged: noted, the reduction's results kept
    assert _known_bugs(tmp_path / "out", summary) == []
    assert "looks related to a known bug" in _known_section({"known_bugs": related}) and \
        "(the same ops, backend and failure)" not in _known_section({"known_bugs": related})


def test_a_runs_json_goes_to_stdout_and_the_suite_can_be_named_once(tmp_path: Path, monkeypatch) -> None:
    """`--json -` wrote a file named '-'; a team's own suite had to be passed to every
    command (and reduce's known-bug note read only the shipped one): $TRTMIN_SUITE names it."""
    from tests.helpers import run_cli_here
    make_repro(tmp_path / "ours", "good", exits(1, "REPRODUCED: x"))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TRTMIN_SUITE", str(tmp_path / "ours"))
    monkeypatch.setenv("FORCE_COLOR", "1")  # a CI's: colours on stderr's table, never in the JSON
    assert default_root() == tmp_path / "ours"
    r = run_cli_here("repros", "run", "--json", "-")
    data = json.loads(r.stdout)  # nothing else on stdout: the table went to stderr
    assert "\x1b" not in r.stdout
    assert r.returncode == 0 and [x["name"] for x in data["results"]] == ["good"], r.stdout + r.stderr
    assert {k: data["results"][0][k] for k in ("backend", "oracle", "device")} == {
        "backend": "inductor", "oracle": "mismatch", "device": "cpu"}  # a CI job groups rows by them
    assert "good" in r.stderr and not (tmp_path / "-").exists()
    assert "\non cpu: torch " in r.stderr or "\non " in r.stderr and ": torch " in r.stderr  # the versions it ran


def test_a_run_refuses_what_it_could_only_fail_at_after_the_repros_ran(tmp_path: Path, monkeypatch) -> None:
    """A --json file in a folder that is a file was found out after the whole suite ran, as
    a traceback; a mistyped TRTMIN_BACKEND (EAGER) ran the backends and passed for a green
    control run; an empty --device-label became the GPU's name. All are refused at once, in
    one line, with no repro run. A folder that is missing is made, as pytest's --junitxml
    makes its."""
    from tests.helpers import run_cli_here
    marker = tmp_path / "ran"
    make_repro(tmp_path / "ours", "good", f"import pathlib\npathlib.Path({str(marker)!r}).touch()\n" + exits(1, "REPRODUCED: x"))
    (tmp_path / "afile").write_text("not a folder")
    r = run_cli_here("repros", "run", "--suite", str(tmp_path / "ours"), "--json", str(tmp_path / "afile" / "run.json"))
    assert r.returncode == 2 and "its folder " + str(tmp_path / "afile") + " cannot be made" in r.stderr, r.stderr
    assert not marker.exists()
    manifest_file = tmp_path / "ours" / "good" / "manifest.toml"  # a file no run wrote: kept, not written over
    for path, before in ((tmp_path / "afile", "not a folder"), (manifest_file, manifest_file.read_text())):
        r = run_cli_here("repros", "run", "--suite", str(tmp_path / "ours"), "--json", str(path))
        assert r.returncode == 2 and "exists and is no run file of `trtmin repros run`" in r.stderr, r.stderr
        assert path.read_text() == before
    (tmp_path / "mine.json").write_text("")
    (tmp_path / "link.json").symlink_to(tmp_path / "mine.json")  # a link to an empty file: not replaced by a file
    r = run_cli_here("repros", "run", "--suite", str(tmp_path / "ours"), "--json", str(tmp_path / "link.json"))
    assert r.returncode == 2 and (tmp_path / "link.json").is_symlink(), r.stderr
    r = run_cli_here("repros", "run", "--suite", str(tmp_path / "ours"), "--json", str(tmp_path / "new" / "ci" / "r.json"))
    assert r.returncode == 0 and json.loads((tmp_path / "new" / "ci" / "r.json").read_text())["summary"]["all_ok"], r.stderr
    (tmp_path / "run.json").write_text("")  # empty, as mktemp makes it: written
    r = run_cli_here("repros", "run", "--suite", str(tmp_path / "ours"), "--json", str(tmp_path / "run.json"))
    again = run_cli_here("repros", "run", "--suite", str(tmp_path / "ours"), "--json", str(tmp_path / "run.json"))
    assert r.returncode == again.returncode == 0, again.stderr  # an earlier run's file is written over
    r = run_cli_here("repros", "run", "--suite", str(tmp_path / "ours"), "--jobs", "100000")
    assert r.returncode == 2 and "--jobs 100000 must be between 1 and" in r.stderr, r.stderr
    marker.unlink()
    r = run_cli_here("repros", "run", "--suite", str(tmp_path / "ours"), "--device-label", " ")
    assert r.returncode == 2 and "--device-label is empty" in r.stderr, r.stderr  # not the GPU's name, in silence
    monkeypatch.setenv("TRTMIN_BACKEND", "EAGER")
    r = run_cli_here("repros", "run", "--suite", str(tmp_path / "ours"))
    assert r.returncode == 2 and "TRTMIN_BACKEND='EAGER': the control run takes eager alone" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr and not marker.exists()


def test_a_suite_named_by_trtmin_suite_that_is_missing_is_said(tmp_path: Path, monkeypatch) -> None:
    """reduce's known-bug check read a mistyped $TRTMIN_SUITE as no suite at all, silently;
    then said so while the live line was up, which swallowed it: the note is kept for the
    end of the run."""
    from minimize.cli import _known_bugs
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "repro.py").write_text("class Repro:\n    def forward(self, x):\n        x = torch.ops.aten.sin.default(x)\n"
                                   "        return (x,)\n")
    (mine / "summary.json").write_text(json.dumps({"backend": "inductor", "final_verdict": "CRASH: E: x"}))
    monkeypatch.setenv("TRTMIN_SUITE", str(tmp_path / "nosuchsuite"))
    notes: list[str] = []
    assert _known_bugs(mine, {"backend": "inductor", "final_verdict": "CRASH: E: x"}, notes) == []
    [said] = notes
    assert said.startswith(f"$TRTMIN_SUITE={tmp_path / 'nosuchsuite'} is not a folder; set it to your "), said
    assert said.rstrip().endswith("compared with the shipped suite alone"), said
    from tests.helpers import run_cli_here  # the suite commands name the variable too: no path was typed
    for command in (["list"], ["run"], ["match", str(mine)]):
        r = run_cli_here("repros", *command)
        assert r.returncode == 2 and "error: $TRTMIN_SUITE=" in r.stderr and "unset it" in r.stderr, r.stderr
    (tmp_path / "empty").mkdir()
    monkeypatch.setenv("TRTMIN_SUITE", str(tmp_path / "empty"))  # a folder of no repros: not "the shipped suite"
    assert run_cli_here("repros", "list").stdout.strip() == f"no repros in $TRTMIN_SUITE's suite {tmp_path / 'empty'}"


def test_reduce_says_at_its_end_that_trtmin_suite_names_no_suite(host_program, tmp_path: Path) -> None:
    """The note came while the live line was up, and no one saw it (a docs trial)."""
    from tests.conftest import plugin
    model, inputs = host_program
    env = {**os.environ, "TRTMIN_SUITE": str(tmp_path / "nosuchsuite")}
    r = subprocess.run([sys.executable, "-m", "minimize.cli", "reduce", str(model), "--inputs", str(inputs),
                        "--oracle", "crash", "--backend", plugin("crash_on_sin"), "--out", str(tmp_path / "out"),
                        "--no-verify"], capture_output=True, text=True, env=env, cwd=Path(__file__).parents[1])
    assert r.returncode == 0, r.stderr[-2000:]
    assert f"\nnote: $TRTMIN_SUITE={tmp_path / 'nosuchsuite'} is not a folder; " in r.stderr, r.stderr[-2000:]


def test_match_refuses_an_earlier_runs_results_as_add_does(tmp_path: Path) -> None:
    """A --force run over a finished one, stopped before it wrote its own results, leaves the
    earlier run's repro.py beside its journal: `repros add` refused it, `repros match`
    compared it as if it were the new run's."""
    from tests.helpers import run_cli_here
    out = tmp_path / "out"
    out.mkdir()
    (out / "repro.py").write_text("class Repro:\n    def forward(self, x):\n        x = torch.ops.aten.sin.default(x)\n"
                                  "        return (x,)\n")
    (out / "summary.json").write_text(json.dumps({"backend": "inductor", "final_verdict": "CRASH: E: x",
                                                  "journal_header_sha256": "0" * 64}))
    (out / "journal.jsonl").write_text(json.dumps({"header": {"model_sha256": "1" * 64}}) + "\n")
    r = run_cli_here("repros", "match", str(out), "--suite", str(tmp_path / "suite"))
    assert r.returncode == 2 and "repro.py and summary.json are an earlier run's than journal.jsonl" in r.stderr, r.stderr
    r = run_cli_here("repros", "match", str(tmp_path / "nonexist"))
    assert r.returncode == 2 and "is not a folder; pass the --out folder of a reduce" in r.stderr, r.stderr


def test_an_interrupted_runs_line_never_says_all_is_as_expected() -> None:
    """stdout may be all a CI log keeps: a run stopped by Ctrl-C said 'all as expected'."""
    done = [Result("a", "t", [], FIXED, "fixed", True, 1.0, "FIXED: x")]
    assert summary_line(done).endswith("; all as expected")
    assert summary_line(done, ["b", "c"]).endswith("0 errors; INTERRUPTED: 2 not finished"), summary_line(done, ["b", "c"])


def test_a_suite_folder_that_did_not_exist_is_said_to_be_new(tmp_path: Path) -> None:
    """A mistyped --suite on `repros add` made a new suite, silently, and the duplicate check
    ran against it, empty; the other commands refuse a missing folder."""
    out = _reduce_out(tmp_path / "trtmin-out")
    r = run_cli("repros", "add", str(out), "--name", "relu_cast", "--suite", str(tmp_path / "mysuitee"))
    assert r.returncode == 0 and f"{tmp_path / 'mysuitee'} did not exist: it is a new suite" in r.stdout, r.stdout
    again = run_cli("repros", "add", str(out), "--name", "relu_cast", "--suite", str(tmp_path / "mysuitee"), "--force")
    assert again.returncode == 0 and "new suite" not in again.stdout, again.stdout


def test_a_plugins_compiler_is_recorded_where_releases_are_told_apart(tmp_path: Path) -> None:
    """A plugin's own compiler (what it imports: `mycompiler`) was recorded nowhere: not in
    first_seen, the run's JSON, nor `repros table`'s columns, which then read the same for
    every release. Here `rich` (installed) stands in for the compiler."""
    from oracles.backend_names import parse_backend
    from oracles.environment import package_version
    from repros.runner import suite_packages
    from repros.table import column_header

    folder = tmp_path / "plugin"
    folder.mkdir()
    (folder / "helpers.py").write_text("import rich.text\nimport json\n")
    (folder / "mine.py").write_text("from __future__ import annotations\nimport os, torch\nimport helpers\n"
                                    "from mycompiler.passes import lower\nfrom . import sibling\n"
                                    "def be(gm, example_inputs):\n    return gm.forward\n")
    assert parse_backend(f"{folder / 'mine.py'}:be").packages(("torch", "onnxruntime")) == ("torch", "mycompiler",
                                                                                           "rich")
    assert parse_backend("my_pkg.compilers:be").packages(("torch", "onnxruntime")) == ("torch", "my_pkg")
    entry = make_repro(tmp_path / "suite", "mine", exits(1, "REPRODUCED: x"))
    shutil.copy(folder / "mine.py", entry / "plugin.py")
    shutil.copy(folder / "helpers.py", entry / "repro_plugin_helpers.py")  # as repros add copies it
    assert suite_packages(tmp_path / "suite") == ("mycompiler", "rich")  # its own modules: read as saved
    env = environment("cpu", ("rich",))
    assert env["versions"]["rich"] == package_version("rich") != "not installed"
    assert f"rich {package_version('rich')}" in column_header(env)


def test_a_hang_repro_whose_own_timeout_is_past_the_runs_is_no_new_hang(tmp_path: Path) -> None:
    """A hang's repro waits CHILD_TIMEOUT_S for its child before it says REPRODUCED: with
    `repros run --timeout` below that, no verdict came, which is the run's setting, not a
    release that hangs now (CHANGED)."""
    make_repro(tmp_path, "hang_bug", "import time\nCHILD_TIMEOUT_S = 30.0\ntime.sleep(30)\n")
    [r] = run_repros(tmp_path, timeout=0.5)
    assert (r.status, r.ok) == (ERROR, False) and "run it with --timeout above 30" in r.reason, r.reason


def test_a_newer_reduction_saved_over_its_entry_does_not_look_like_itself(tmp_path: Path) -> None:
    """repros add --force of a newer reduction of a saved repro, which found that repro as
    its known bug: the suite's entry said it looked like itself (a maintainer's review)."""
    from repros.suite import _forget_itself
    entry = tmp_path / "arange"
    entry.mkdir()
    report = "# title\n\n**What fails:** x\n\n**Known bug?** This reduction looks like a known bug: arange (old)\n\nrest"
    for known in ([{"name": "arange", "line": "looks like a known bug: arange"}],
                  [{"name": "arange", "line": "l"}, {"name": "other", "line": "l"}]):
        (entry / "summary.json").write_text(json.dumps({"known_bugs": known}))
        (entry / "report.md").write_text(report)
        _forget_itself(entry, "arange")
        left = json.loads((entry / "summary.json").read_text())["known_bugs"]
        assert [k["name"] for k in left] == [k["name"] for k in known if k["name"] != "arange"]
        assert ("**Known bug?**" in (entry / "report.md").read_text()) is bool(left)  # still true of another
    assert (entry / "report.md").read_text() == report
    (entry / "report.md").write_text(report)
    (entry / "summary.json").write_text(json.dumps({"known_bugs": [{"name": "arange", "line": "l"}]}))
    _forget_itself(entry, "arange")
    assert (entry / "report.md").read_text() == "# title\n\n**What fails:** x\n\nrest"


def test_a_script_that_prints_much_is_read_by_its_tail(tmp_path: Path) -> None:
    """A repro printing 200 MB took `repros run` to 972 MB of memory (communicate() kept it
    all); only the tail is read now, and the verdict line at its end still decides."""
    from oracles.script_run import TAIL_BYTES, run_script
    script = tmp_path / "repro.py"
    script.write_text("import sys\nfor _ in range(20000):\n    print('y' * 99)\nprint('REPRODUCED: it is there')\n"
                      "sys.exit(1)\n")
    rc, out, err, timed_out, _ = run_script(script, timeout=60)
    assert rc == 1 and not timed_out and len(out) <= TAIL_BYTES + 100, len(out)
    assert out.startswith("[") and "bytes before this cut]" in out.splitlines()[0], out[:80]
    assert classify(rc, out, err)[0] == REPRODUCED


def test_an_add_killed_between_its_two_renames_loses_no_repro(tmp_path: Path) -> None:
    """repros add --force sets the entry aside as .old-NAME-*, then moves the new one in; a
    kill -9 between the two left neither in view, and the next --force saved a fresh one,
    the hand-written title and links lost. The next add puts it back first."""
    from repros.suite import _recover
    root = tmp_path / "suite"
    (root / ".old-sin-1a2b3c4d").mkdir(parents=True)
    (root / ".old-sin-1a2b3c4d" / "NOTES.txt").write_text("mine")
    (root / ".tmp-sin-5e6f7a8b").mkdir()
    _recover(root, "sin")
    assert (root / "sin" / "NOTES.txt").read_text() == "mine" and sorted(p.name for p in root.iterdir()) == ["sin"]
    (root / ".old-sin-99999999").mkdir()  # the swap had finished: a leftover alone
    _recover(root, "sin")
    assert sorted(p.name for p in root.iterdir()) == ["sin"] and (root / "sin" / "NOTES.txt").is_file()


def test_add_refuses_an_out_folder_whose_script_lacks_a_file_it_reads(tmp_path: Path) -> None:
    """With plugin.py deleted from the out folder, add saved it and every `repros run` then
    said ERROR ("no plugin.py, which repro.py reads"): refused where it can be mended."""
    out = _reduce_out(tmp_path / "out")
    (out / "repro.py").write_text("import os\nPLUGIN = os.path.join(os.path.dirname(__file__), 'plugin.py')\n"
                                  "print('REPRODUCED: x')\n")
    with pytest.raises(TrtminError, match=r"has no plugin.py, which its repro.py reads; put it back"):
        add_repro(out, "lacks", tmp_path / "suite")
    assert not (tmp_path / "suite" / "lacks").exists()
    (out / "plugin.py").write_text("def f(gm, example_inputs):\n    return gm\n")
    assert (add_repro(out, "lacks", tmp_path / "suite") / "plugin.py").is_file()


def _ops_out(d: Path, ops: list[str], verdict: str, backend: str = "inductor") -> Path:
    """A reduce --out folder whose repro.py calls `ops` (ATen names) and fails with `verdict`,
    its scripts' digests recorded as trtmin records them."""
    out = _reduce_out(d)
    calls = "".join(f"    y = torch.ops.aten.{op}(y)\n" for op in ops)
    (out / "repro.py").write_text(f"import sys\nimport torch\n\n\ndef forward(y):\n{calls}    return y\n\n\n"
                                  "print('REPRODUCED: it fails')\nsys.exit(1)\n")
    summary = json.loads((out / "summary.json").read_text())
    summary.update(backend=backend, final_verdict=verdict, written_sha256={
        n: hashlib.sha256((out / n).read_bytes()).hexdigest() for n in ("repro.py", "report.md")})
    (out / "summary.json").write_text(json.dumps(summary))
    return out


def test_add_force_refuses_another_bug_and_keeps_hand_work(tmp_path: Path) -> None:
    """--force replaces a saved repro by a newer reduction of its own bug: one of another
    backend, failure or ops is refused (the entry's title, links and expectations would hang
    on it); a hand-written repro.py, or one edited since it was saved, is kept as
    repro.py.edited, never lost."""
    root = tmp_path / "suite"
    entry = add_repro(_ops_out(tmp_path / "a", ["relu.default", "_to_copy.default"], "mismatch: max abs 3"), "cast", root)
    for ops, verdict, backend, differs in [(["sin.default"], "mismatch: max abs 1", "inductor", "ops differ"),
                                           (["relu.default"], "mismatch: max abs 1", "executorch:xnnpack",
                                            "backend differs")]:
        other = _ops_out(tmp_path / f"other_{differs.split()[0]}", ops, verdict, backend)
        with pytest.raises(TrtminError, match=f"holds another bug .*its {differs} from.*choose another --name"):
            add_repro(other, "cast", root, force=True, duplicate=True)
    assert parse_manifest(entry / "manifest.toml").backend == "inductor"
    nan = _ops_out(tmp_path / "nan", ["relu.default"], "nan: output 0")  # reduced again with --oracle nan
    add_repro(nan, "cast", root, force=True, duplicate=True)
    newer = _ops_out(tmp_path / "newer", ["relu.default"], "mismatch: max abs 2")  # fewer ops: the same bug
    add_repro(newer, "cast", root, force=True, duplicate=True)
    assert not (entry / "repro.py.edited").exists()  # as saved: nobody's work to keep
    (entry / "repro.py").write_text((entry / "repro.py").read_text() + "# checked by hand on the Orin\n")
    add_repro(newer, "cast", root, force=True, duplicate=True)
    assert "by hand on the Orin" in (entry / "repro.py.edited").read_text()
    assert (entry / "repro.py").read_bytes() == (newer / "repro.py").read_bytes()
    assert not (entry / "manifest.toml.edited").exists()  # as `repros add` wrote it
    older = re.sub(r'# "[^\n]*" = "fixed"', '# "torch >= 2.16" = "fixed"', (entry / "manifest.toml").read_text())
    assert older != (entry / "manifest.toml").read_text()
    (entry / "manifest.toml").write_text(older)  # an older trtmin's example comment: nobody's work either
    add_repro(newer, "cast", root, force=True, duplicate=True)
    assert not (entry / "manifest.toml.edited").exists()
    uncommented = re.sub(r'\n# \[expected_when\]\n# ("[^\n]*" = "fixed")\n', r'\n[expected_when]\n\1\n',
                         (entry / "manifest.toml").read_text())  # the example taken up as it stands: a field
    assert uncommented != (entry / "manifest.toml").read_text()
    (entry / "manifest.toml").write_text(uncommented)
    add_repro(newer, "cast", root, force=True, duplicate=True)
    assert not (entry / "manifest.toml.edited").exists() and parse_manifest(entry / "manifest.toml").expected_when

    # a report annotated, a manifest commented: each kept beside the new one, as a script is
    (entry / "report.md").write_text((entry / "report.md").read_text() + "\nSeen on the Orin too.\n")
    commented = (entry / "manifest.toml").read_text().replace("[first_seen]", "# owner: alice\n[first_seen]")
    (entry / "manifest.toml").write_text(commented)
    add_repro(newer, "cast", root, force=True, duplicate=True)
    assert "Seen on the Orin" in (entry / "report.md.edited").read_text()
    assert (entry / "manifest.toml.edited").read_text() == commented
    assert "# owner" not in (entry / "manifest.toml").read_text()  # the fields carried over, the comment beside

    # a manifest that does not read: replacing it would drop what was written there, unsaid
    broken = (entry / "manifest.toml").read_text().replace('expected = "reproduces"', 'expected = "reproduce"')
    (entry / "manifest.toml").write_text(broken)
    with pytest.raises(TrtminError, match=r"expected.*--force keeps what was written in the manifest.*mend it first"):
        add_repro(newer, "cast", root, force=True, duplicate=True)
    assert (entry / "manifest.toml").read_text() == broken
    (entry / "manifest.toml").write_text(commented)

    hand = root / "by_hand"  # the seeds' kind: a script and a manifest, no summary.json
    hand.mkdir()
    (hand / "repro.py").write_text("print('REPRODUCED: by hand')\nraise SystemExit(1)\n")
    (hand / "report.md").write_text("# Found by hand on the Orin\n")
    (hand / "manifest.toml").write_text((entry / "manifest.toml").read_text())
    add_repro(newer, "by_hand", root, force=True, duplicate=True)
    assert (hand / "repro.py.edited").read_text().startswith("print('REPRODUCED: by hand')")
    assert (hand / "report.md.edited").read_text() == "# Found by hand on the Orin\n"
    assert (hand / "report.md").read_bytes() == (newer / "report.md").read_bytes()  # the new run's, not the hand one
    assert sorted(p.name for p in root.iterdir()) == ["by_hand", "cast"]


def test_add_refuses_a_repro_for_a_suite_and_an_overlong_name(tmp_path: Path) -> None:
    """Saved inside a saved repro, an entry is listed by no command; a 300-letter name was a
    traceback from the file system. Each is one line with the fix, nothing written."""
    out = _reduce_out(tmp_path / "out")
    entry = add_repro(out, "first", tmp_path / "suite")
    with pytest.raises(TrtminError, match=r"is a saved repro \(it holds manifest.toml\), not a suite; .*--suite"):
        add_repro(out, "second", entry, duplicate=True)
    r = run_cli("repros", "add", str(out), "--name", "a" * 300, "--suite", str(tmp_path / "suite"))
    assert r.returncode == 2 and "use at most 100 letters" in r.stderr and "Traceback" not in r.stderr
    assert sorted(p.name for p in entry.iterdir()) == ["manifest.toml", "report.md", "repro.py", "repro_inputs.pt",
                                                       "summary.json"]


def test_add_and_match_say_in_one_line_what_they_cannot_write_or_read(tmp_path: Path, monkeypatch) -> None:
    """A suite that cannot be written (a file in its path; a read-only file system, which
    /sys is even to root) was a 37-line OSError traceback; a summary.json of valid JSON
    that is no object (`[]`, `null`) an AttributeError in add and match. Each is one line
    with the fix, exit 2, nothing written."""
    out = _reduce_out(tmp_path / "out")
    (tmp_path / "afile").write_text("")
    for suite in [tmp_path / "afile" / "suite", *[Path("/sys/fs")] * Path("/sys/fs").is_dir()]:
        r = run_cli_here("repros", "add", str(out), "--name", "ro_test", "--suite", str(suite))
        assert r.returncode == 2 and f"cannot write into the suite {suite} (" in r.stderr, r.stderr
        assert "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    for text in ("[]", "null", '"text"'):
        (out / "summary.json").write_text(text)
        for args in (("add", str(out), "--name", "x", "--suite", str(tmp_path / "suite")), ("match", str(out))):
            r = run_cli_here("repros", *args)
            assert r.returncode == 2 and "Traceback" not in r.stderr, (text, args, r.stderr)
            assert len(r.stderr.strip().splitlines()) == 1, r.stderr
    (out / "summary.json").write_text('{"backend": "inductor", ')  # damaged: match said "no reduction to compare"
    for args in (("add", str(out), "--name", "x", "--suite", str(tmp_path / "suite")), ("match", str(out))):
        r = run_cli_here("repros", *args)
        assert r.returncode == 2 and "summary.json is not valid JSON (" in r.stderr, (args, r.stderr)
        assert "rerun `trtmin reduce` to write it again" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "suite").exists()
    with monkeypatch.context() as m:  # the suite the user set, not typed: named as set
        m.setenv("TRTMIN_SUITE", str(tmp_path / "afile"))
        r = run_cli_here("repros", "add", str(out), "--name", "x")
        typed = run_cli_here("repros", "add", str(out), "--name", "x", "--suite", str(tmp_path / "afile"))
    assert r.returncode == 2 and f"$TRTMIN_SUITE={tmp_path / 'afile'} is a file; set it to" in r.stderr, r.stderr
    assert f"error: --suite {tmp_path / 'afile'} is a file; pass" in typed.stderr, typed.stderr  # typed: named so
    begun = tmp_path / "begun"  # a reduction interrupted before its outputs: its journal alone
    begun.mkdir()
    (begun / "journal.jsonl").write_text("{}\n")
    for args in (("add", str(begun), "--name", "x", "--suite", str(tmp_path / "suite")), ("match", str(begun))):
        r = run_cli_here("repros", *args)
        assert r.returncode == 2 and "has not finished: continue it with `trtmin reduce ... --out " in r.stderr, r.stderr


def test_add_names_a_file_of_the_run_it_cannot_read_as_such(tmp_path: Path, monkeypatch) -> None:
    """A file of the --out folder that cannot be read was said as a suite that cannot be
    written ("choose a suite folder you can write to"): the wrong fix."""
    out = _reduce_out(tmp_path / "out")
    real = shutil.copy2

    def copy2(src, dst, **kw):
        if Path(src).name == "report.md":
            raise PermissionError(13, "Permission denied", str(src))
        return real(src, dst, **kw)
    monkeypatch.setattr(shutil, "copy2", copy2)
    with pytest.raises(TrtminError, match=f"^cannot read {re.escape(str(out / 'report.md'))} \\(Permission denied\\); "
                                          "check the --out folder's files"):
        add_repro(out, "unread", tmp_path / "suite")
    assert [p.name for p in (tmp_path / "suite").iterdir()] == []  # nothing half-saved


def test_add_says_when_the_repro_did_not_reproduce_alone(tmp_path: Path) -> None:
    """A reduction whose repro.py, run alone after it, said FIXED was saved expected to
    reproduce without a word: the suite's first run then says NOT as expected. Saved, and
    said with the command that checks it now."""
    out = _reduce_out(tmp_path / "out")
    summary = json.loads((out / "summary.json").read_text())
    (out / "summary.json").write_text(json.dumps({**summary, "repro_alone": {
        "status": "FIXED", "exit": 0, "line": "FIXED: the backend matches eager PyTorch"}}))
    r = run_cli("repros", "add", str(out), "--name", "flaky", "--suite", str(tmp_path / "suite"))
    assert r.returncode == 0 and (tmp_path / "suite" / "flaky" / "repro.py").is_file(), r.stderr
    assert "warning: run alone after the reduction, its repro.py printed `FIXED: the backend matches eager" in r.stderr
    assert f"trtmin repros run flaky --suite {tmp_path / 'suite'}" in r.stderr, r.stderr
    (out / "summary.json").write_text(json.dumps({**summary, "repro_alone": {"status": "REPRODUCED", "exit": 1}}))
    quiet = run_cli("repros", "add", str(out), "--name", "steady", "--suite", str(tmp_path / "suite"), "--duplicate")
    assert quiet.returncode == 0 and "warning" not in quiet.stderr, quiet.stderr


def test_a_manifest_with_a_byte_order_mark_reads_and_a_bad_upstream_names_the_option(tmp_path: Path) -> None:
    """An editor that saves UTF-8 with a BOM made the manifest 'not valid TOML (Invalid
    statement at line 1, column 1)'; --upstream notaurl was named as the manifest's field."""
    entry = make_repro(tmp_path / "suite", "bom", exits(1, "REPRODUCED: x"))
    (entry / "manifest.toml").write_bytes(b"\xef\xbb\xbf" + (entry / "manifest.toml").read_bytes())
    assert parse_manifest(entry / "manifest.toml").title == "bom"
    out = _reduce_out(tmp_path / "out")
    r = run_cli_here("repros", "add", str(out), "--name", "x", "--suite", str(tmp_path / "s2"), "--upstream", "notaurl")
    assert r.returncode == 2 and "--upstream 'notaurl' is not an http(s) URL" in r.stderr, r.stderr
    assert not (tmp_path / "s2").exists()


def test_the_machine_facts_a_run_judges_by_on_a_gpu_box(tmp_path: Path) -> None:
    """--device-label names the machine for `label:` conditions, on a GPU box too (not the
    GPU's name over it: a CI job's "nightly-h100" column would never match its own
    conditions); without one, the GPU's name, else cpu. A repro for any CUDA device
    (cuda:1 too) is SKIPPED before it runs where no GPU is visible."""
    from repros.runner import Facts, cannot_run_here

    def facts(label: str | None, gpu: str | None) -> Facts:
        f = Facts(label)
        f.__dict__["_cuda"] = (gpu, "12.8" if gpu else "none")  # what torch says there, looked up once
        return f

    box = facts("nightly-box", "NVIDIA H100 80GB HBM3")
    assert box.label == "nightly-box" and Condition.parse("label:nightly").holds(box)
    assert facts(None, "NVIDIA H100 80GB HBM3").label == "NVIDIA H100 80GB HBM3" and facts(None, None).label == "cpu"
    for device in ("cuda", "cuda:1"):
        assert cannot_run_here("inductor", device, facts(None, None)) == "no CUDA GPU is visible here", device
    assert cannot_run_here("inductor", "cpu", facts(None, None)) is None


def test_a_plugins_module_is_never_imported_for_its_version(tmp_path: Path, monkeypatch) -> None:
    """The versions a run records of what a plugin imports come from package metadata
    alone: a module with none (a plugin's helper beside it, one that crashes on import) is
    "not installed", never imported in trtmin's process for a __version__."""
    from oracles.environment import package_version

    (tmp_path / "fails_when_imported.py").write_text("raise RuntimeError('imported for its version')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert package_version("fails_when_imported") == "not installed"


def test_a_suite_skips_folders_set_aside_and_a_repro_folder_is_a_suite_of_one(tmp_path: Path) -> None:
    """Sub-folders named "_..." are set aside (an attic of old repros): no run runs them. A
    repro folder given as the suite is one repro, also where its script or manifest is
    gone: listed as broken, not read as a suite of nothing."""
    make_repro(tmp_path / "suite", "good", exits(1, "REPRODUCED: x"))
    make_repro(tmp_path / "suite", "_attic", exits(1, "REPRODUCED: x"))
    assert [r.name for r in find_repros(tmp_path / "suite")] == ["good"]
    half = make_repro(tmp_path, "half", exits(1, "REPRODUCED: x"))
    (half / "repro.py").unlink()
    [r] = find_repros(half)
    assert r.name == "half" and "no repro.py" in r.problem, r


def test_add_force_keeps_an_expected_fixed_written_into_the_manifest(tmp_path: Path) -> None:
    """`expected = "fixed"` is a person's record that a release fixed the bug: a newer
    reduction saved over the entry (--force) keeps it, as it keeps [expected_when]."""
    out, root = _reduce_out(tmp_path / "out"), tmp_path / "suite"
    entry = add_repro(out, "relu_cast", root)
    written = dataclasses.replace(parse_manifest(entry / "manifest.toml"), expected="fixed")
    (entry / "manifest.toml").write_text(manifest_text(written))
    add_repro(out, "relu_cast", root, force=True)
    assert parse_manifest(entry / "manifest.toml").expected == "fixed"


def test_a_hang_repro_whose_own_timeout_is_the_runs_is_no_new_hang_either(tmp_path: Path) -> None:
    """A --timeout equal to the script's CHILD_TIMEOUT_S leaves it no time to say its verdict
    after its own wait: the run's setting again (ERROR with the fix), not a hang now."""
    make_repro(tmp_path, "hang_bug", "import time\nCHILD_TIMEOUT_S = 1.0\ntime.sleep(30)\n")
    [r] = run_repros(tmp_path, timeout=1.0)
    assert (r.status, r.ok) == (ERROR, False) and "run it with --timeout above 1" in r.reason, r.reason


def test_a_run_stopped_before_its_first_row_says_so_not_that_the_suite_is_empty(tmp_path: Path, monkeypatch) -> None:
    """Ctrl-C while the first repros still run: no row finished, but the suite is not empty.
    The command says which repros it did not finish and exits as a Ctrl-C does (130), not
    "no repros in ..." with exit 2, which sends the user to save one."""
    import repros.runner

    make_repro(tmp_path, "first", exits(1, "REPRODUCED: x"))
    make_repro(tmp_path, "second", exits(1, "REPRODUCED: x"))

    def stopped(*args, **kwargs):
        raise repros.runner.Interrupted([], ["first", "second"])

    monkeypatch.setattr(repros.runner, "run_repros", stopped)
    r = run_cli_here("repros", "run", "--suite", str(tmp_path))
    assert r.returncode == 130 and "no repros in" not in r.stderr, (r.returncode, r.stderr)
    assert "2 repros not finished (first, second)" in " ".join(r.stderr.split()), r.stderr


def test_add_warns_of_a_repro_that_did_not_reproduce_alone_but_not_of_one_that_could_not_run(tmp_path: Path) -> None:
    """A repro whose script said FIXED when trtmin ran it alone (a flaky compiler) is saved
    with a warning: the suite would mark it NOT as expected from its first run. One that said
    SKIPPED there (reduced with --device cuda on a box whose script lacked a package) is no
    such news: saved without one."""
    said = {}
    for status, line in (("FIXED", "FIXED: the backend matches eager PyTorch"), ("SKIPPED", "SKIPPED: no GPU")):
        out = _reduce_out(tmp_path / status)
        summary = json.loads((out / "summary.json").read_text())
        summary["repro_alone"] = {"status": status, "exit": {"FIXED": 0, "SKIPPED": 2}[status], "line": line}
        (out / "summary.json").write_text(json.dumps(summary))
        r = run_cli_here("repros", "add", str(out), "--name", status.lower(), "--suite", str(tmp_path / "suite"))
        assert r.returncode == 0 and (tmp_path / "suite" / status.lower() / "repro.py").is_file(), r.stderr
        said[status] = " ".join(r.stderr.split())
    assert ("warning: run alone after the reduction, its repro.py printed `FIXED: the backend matches eager PyTorch`, "
            "not REPRODUCED: `trtmin repros run fixed --suite") in said["FIXED"], said["FIXED"]
    assert "warning" not in said["SKIPPED"], said["SKIPPED"]


def test_the_runs_last_line_names_only_what_is_installed(tmp_path: Path) -> None:
    """The table's last line names the machine and the versions that ran the repros: a
    compiler missing here is no version of this run ("tensorrt not installed" beside each
    run read as if it had been part of it)."""
    make_repro(tmp_path, "one", exits(1, "REPRODUCED: x"))
    r = run_cli_here("repros", "run", "--suite", str(tmp_path), "--device-label", "box")
    [line] = [ln for ln in r.stdout.splitlines() if ln.startswith("on box: ")]
    assert line.startswith("on box: torch 2.") and "not installed" not in line, line


def test_add_takes_a_run_whose_journal_was_left_behind(tmp_path: Path) -> None:
    """The results copied without journal.jsonl (it is no file `repros add` saves), their
    summary.json naming that journal's header: which run they are cannot be told, and
    they are added, not a traceback."""
    from minimize.emit.journal import header_line
    from oracles.out_folder import header_digest
    out = _reduce_out(tmp_path / "out")
    summary = json.loads((out / "summary.json").read_text())
    header = header_line({"model_sha256": "a", "options": {}})
    (out / "summary.json").write_text(json.dumps({**summary, "journal_header_sha256": header_digest(header)}))
    (out / "journal.jsonl").unlink()
    assert (add_repro(out, "copied", tmp_path / "suite") / "repro.py").is_file()


def test_a_flaky_repro_is_saved_with_runs_and_run_until_it_reproduces(tmp_path: Path, monkeypatch) -> None:
    """A reduction that failed 2 of 4 runs was saved as `expected = "reproduces"` and judged by
    one run: FIXED half the time, with advice to record a fix. `repros add` writes `runs`
    (a 1-in-100 chance of missing it) and `repros run` runs the script again while it says
    FIXED, up to that many times; the control (TRTMIN_BACKEND=eager) runs once."""
    from repros.suite import flaky_runs
    assert flaky_runs({"repeat": 4, "final_failures": 2, "original_failures": 2}) == (7, flaky_runs(
        {"repeat": 4, "final_failures": 2})[1])  # 0.5 ** 7 < 0.01 <= 0.5 ** 6
    assert flaky_runs({"repeat": 4, "final_failures": 4})[0] == 1 and flaky_runs(None) == (1, "")
    assert flaky_runs({"repeat": 10, "final_failures": 1})[0] == 20  # 0.9 ** 44 <= 0.01: held to MAX_RUNS
    out = _reduce_out(tmp_path / "out")
    summary = json.loads((out / "summary.json").read_text())
    summary["flakiness"] = {"repeat": 4, "original_failures": 2, "final_failures": 2, "min_failures": 1}
    (out / "summary.json").write_text(json.dumps(summary))
    state = tmp_path / "count"  # the saved script fails on every third run only
    (out / "repro.py").write_text("import sys, pathlib\n"
                                  f"p = pathlib.Path({str(state)!r}); n = len(p.read_text()) if p.exists() else 0\n"
                                  "p.write_text('x' * (n + 1))\n"
                                  "print('REPRODUCED: flaky' if n % 3 == 2 else 'FIXED: passed'); sys.exit(n % 3 == 2)\n")
    saved = add_repro(out, "flaky", tmp_path / "suite")
    m = parse_manifest(saved / "manifest.toml")
    assert m.runs == 7 and "Flaky: the reduced program failed 2 of 4 runs; `repros run` runs it up to 7" in m.notes
    [r] = run_repros(tmp_path / "suite")
    assert (r.status, r.ok, len(state.read_text())) == (REPRODUCED, True, 3), r
    assert r.verdict == "REPRODUCED: flaky (run 3 of up to 7: flaky)", r.verdict
    state.unlink()
    monkeypatch.setenv("TRTMIN_BACKEND", "eager")  # the control: FIXED at once, never run again
    [r] = run_repros(tmp_path / "suite")
    assert (r.status, r.ok, len(state.read_text())) == (FIXED, True, 1), r
    text = (saved / "manifest.toml").read_text().replace("runs = 7", "runs = 0")
    (saved / "manifest.toml").write_text(text)
    with pytest.raises(TrtminError, match="runs must be a whole number from 1 to 20"):
        parse_manifest(saved / "manifest.toml")


def test_force_replaces_a_plugins_repro_only_by_the_same_plugins_reduction(tmp_path: Path) -> None:
    """Every plugin was one backend to `repros add --force`: a crash_on_sin reduction replaced
    the saved repro of segfault_at_two_sites, keeping its title, added and first_seen."""
    def reduced(folder: str, backend: str) -> Path:
        out = _reduce_out(tmp_path / folder)
        summary = json.loads((out / "summary.json").read_text())
        (out / "summary.json").write_text(json.dumps({**summary, "backend": backend}))
        return out

    add_repro(reduced("seg", "/home/me/planted.py:segfault_at_two_sites"), "seg", tmp_path / "suite")
    with pytest.raises(TrtminError, match=r"holds another bug \(.*\): its backend differs"):
        add_repro(reduced("sin", "/home/me/planted.py:crash_on_sin"), "seg", tmp_path / "suite", force=True,
                  duplicate=True)
    again = reduced("seg2", "/elsewhere/planted.py:segfault_at_two_sites")  # the same plugin, from another folder
    assert add_repro(again, "seg", tmp_path / "suite", force=True, duplicate=True) == tmp_path / "suite" / "seg"


def test_a_crash_whose_read_off_ops_are_a_saved_bug_matches_it_only_by_the_same_overloads(tmp_path: Path) -> None:
    """A crash (remainder feeding an embedding) whose read-off ops, compiled alone, fail as a
    saved repro does is that bug; by other overloads (remainder.Tensor for .Scalar) it is
    related, never a duplicate `repros add` would refuse."""
    from repros.match import compare

    suite, mine = tmp_path / "suite", tmp_path / "out"
    saved = {"backend": "executorch:portable", "final_verdict": "MISMATCH: output 0 differs from eager by max abs 16"}
    for folder, ops in ((suite / "remainder_sign", ["remainder.Scalar"]), (mine, ["remainder.Scalar", "embedding.default"])):
        folder.mkdir(parents=True)
        calls = "".join(f"        x = torch.ops.aten.{op}(x)\n" for op in ops)
        (folder / "repro.py").write_text(f"class Repro:\n    def forward(self, x):\n{calls}        return (x,)\n")
    (suite / "remainder_sign" / "summary.json").write_text(json.dumps(saved))
    (suite / "remainder_sign" / "manifest.toml").write_text(manifest("remainder keeps the sign",
                                                                     backend='"executorch:portable"'))
    crash = {"backend": "executorch:portable", "final_verdict": "CRASH: RuntimeError: execute() failed with error 0x12",
             "read_off": {"ops": {"aten.remainder.Scalar": 1}, "verdict": "MISMATCH: output 0 differs ..."}}
    found = compare(mine, suite, crash)[0]
    assert [(m.name, m.otherwise) for m in found] == [("remainder_sign", "")], found
    assert found[0].line().startswith("looks like a known bug: remainder_sign (the ops the failing ones read "
                                      "(remainder.Scalar), compiled alone, fail as it does: ")
    other = {**crash, "read_off": {"ops": {"aten.remainder.Tensor": 1}, "verdict": "MISMATCH: ..."}}
    related = compare(mine, suite, other)[0]
    assert len(related) == 1 and related[0].otherwise and related[0].line().startswith(
        "looks related to a known bug: remainder_sign (cut to its effect: "), related
    assert compare(mine, suite, {**crash, "read_off": None})[0] == []  # an older summary: no read-off
    # read-off ops that lose eager's NaN are not the saved bug whose values differ (a review)
    nan_lost = {**crash, "read_off": {"ops": {"aten.remainder.Scalar": 1},
                                      "verdict": "MISMATCH: output 0 is finite where eager's is NaN (2 of 4 values off)"}}
    assert compare(mine, suite, nan_lost)[0] == []
