"""The shipped example: a real, open Inductor bug (pytorch/pytorch#175966) on CPU."""

from __future__ import annotations

import json
import re
import shutil
import zipfile
from pathlib import Path

import pytest
import torch

from repros.suite import parse_manifest
from tests.helpers import ROOT, run_cli, run_cli_here, run_report_snippet, run_repro

EXAMPLE = ROOT / "examples" / "forecaster.pt2"
INPUTS = ROOT / "examples" / "forecaster_inputs.pt"


def test_example_is_big_enough_and_fails():
    ep = torch.export.load(str(EXAMPLE))
    assert sum(1 for n in ep.graph_module.graph.nodes if n.op == "call_function") >= 100
    r = run_cli("check", str(EXAMPLE), "--inputs", str(INPUTS), "--oracle", "mismatch", "--backend", "inductor")
    assert r.returncode == 1, r.stdout + r.stderr[-2000:]
    assert "int64" in r.stdout


def test_example_reduces_to_three_nodes_or_fewer(tmp_path: Path, tmp_path_factory: pytest.TempPathFactory):
    r = run_cli("reduce", str(EXAMPLE), "--inputs", str(INPUTS), "--oracle", "mismatch", "--backend", "inductor",
                "--out", str(tmp_path), "--no-verify")  # run alone below
    assert r.returncode == 0, r.stderr[-3000:]
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["original_nodes"] >= 100 and summary["final_nodes"] <= 3
    from minimize.cli import seconds_parts  # the done line's parts: each run alone, and the rest
    timing = {"repro_alone_seconds": 5.0, "repro_tensorrt.py_alone_seconds": 3.0, "seconds": 9.0}
    assert seconds_parts({"seconds": 12.0, "timing": timing}, 30.0) == [
        (12.0, "loading and reducing"), (5.0, "running repro.py alone"), (3.0, "running the other backends' scripts alone"),
        (10.0, "starting and writing the files")]
    assert re.search(r"\ndone: .*, \d+ s \(\d+ s loading and reducing, \d+ s starting and writing the files\)\n",
                     r.stderr), r.stderr[-2000:]  # --no-verify: nothing ran alone
    from rich.console import Console

    from minimize.cli import _print_result  # a reduced.pt2 the disk had no room for is said, not only recorded
    screen = Console(record=True, width=300, color_system=None)
    _print_result(screen, {**summary, "reduced_pt2_error": "TrtminError: cannot write reduced.pt2"}, tmp_path, 9.0)
    assert "note: reduced.pt2 (the reduced program) was not written: TrtminError: cannot write" in screen.export_text()
    # Localization: compiled with every value an output, the first value off is the
    # int64 arange * 1e9; the prefix search confirms it with 2 probes (5 calls in the
    # window search with the localization run; a binary search took 11).
    assert summary["passes"]["bisect_window"]["calls"] <= 6, summary["passes"]
    assert "`mul`" in summary["diagnosis"]["first_off_value"]
    assert "First value off" in (tmp_path / "report.md").read_text()
    if summary["original_verdict"] != summary["final_verdict"]:  # the user's symptom, to tie the result to
        assert f"- The original program failed as {summary['original_verdict']}" in (tmp_path / "report.md").read_text()
    assert "arange" in (tmp_path / "repro.py").read_text()
    rr = run_repro(tmp_path)
    assert rr.returncode == 1 and rr.stdout.startswith("REPRODUCED"), rr.stdout + rr.stderr[-2000:]
    assert run_repro(tmp_path, backend="eager").returncode == 0
    s = run_report_snippet(tmp_path)  # arange(..., device=device(type='cpu')): the snippet imports device
    assert s.returncode == 0 and "SNIPPET OK" in s.stdout, s.stdout + s.stderr[-2000:]
    # ... and its last line raises on the bug, in assert_close's words, as a maintainer runs it
    assert "SNIPPET ASSERT RAISES Tensor-likes are not close!" in s.stdout, s.stdout
    with zipfile.ZipFile(tmp_path / "reduced.pt2") as archive:  # named for itself, not a temporary file
        assert {name.split("/")[0] for name in archive.namelist()} == {"reduced"}
    assert not [p.name for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temporary left
    # the bug is in the suite already: said before the user files a duplicate
    said = " ".join(r.stderr.split())
    assert "looks like a known bug: inductor_int64_arange_vectorized" in said and "175966" in said, said[-2000:]
    report = (tmp_path / "report.md").read_text()  # at the top, under what fails
    assert report.split("\n\n")[2].startswith("**Known bug?** This reduction looks like a known bug: "
                                               "inductor_int64_arange_vectorized"), report[:1500]
    assert "`repros/suite/inductor_int64_arange_vectorized`; `trtmin repros run inductor_int64_arange_vectorized` " \
           "checks it." in report.split("\n\n")[2]
    assert json.loads((tmp_path / "summary.json").read_text())["known_bugs"][0]["name"] == \
        "inductor_int64_arange_vectorized"
    # report.md, written again with the note, is still the run's own: its replay is not refused as edited
    again = run_cli_here("reduce", str(EXAMPLE), "--inputs", str(INPUTS), "--oracle", "mismatch", "--backend",
                         "inductor", "--out", str(tmp_path), "--no-verify", "--resume")
    assert again.returncode == 0 and "replaying" in again.stderr, again.stderr[-2000:]
    assert (tmp_path / "report.md").read_text() == report
    m = run_cli("repros", "match", str(tmp_path))
    assert m.returncode == 1 and m.stdout.startswith("looks like a known bug: inductor_int64_arange_vectorized")
    assert "not compared" not in m.stdout  # the hand-written repros are other backends': none could match
    # ... and is not saved into the suite a second time under another name, unless asked
    suite = tmp_path_factory.mktemp("suite") / "suite"
    shutil.copytree(ROOT / "repros" / "suite", suite)
    add = ("repros", "add", str(tmp_path), "--name", "arange_again", "--suite", str(suite))
    a = run_cli_here(*add)
    assert a.returncode == 2 and "inductor_int64_arange_vectorized" in a.stderr and "--duplicate" in a.stderr, a.stderr
    assert f"--suite {suite}" in " ".join(a.stderr.split())  # the command it offers reads this suite
    # --force replaces a repro of the name; it saves no twin, so it never deletes one by the way
    assert run_cli_here(*add, "--force").returncode == 2 and not (suite / "arange_again").exists()
    saved = run_cli_here(*add, "--duplicate", "--force")  # a new name: nothing is replaced, and none is said
    assert saved.returncode == 0 and (suite / "arange_again" / "repro.py").exists() and "in place" not in saved.stdout
    (suite / "view_above_8_dims" / "NOTES.txt").write_text("what we tried")  # the user's own: they stay,
    (suite / "view_above_8_dims" / "repro_fp16.py").write_text("# a variant")  # trtmin-like names too
    (suite / "view_above_8_dims" / "report.md").write_text("# ours")  # a name the new entry has: kept as .edited
    replace = ("repros", "add", str(tmp_path), "--name", "view_above_8_dims", "--suite", str(suite), "--duplicate",
               "--force")
    other = run_cli_here(*replace)  # a Torch-TensorRT crash: not this Inductor mismatch's to replace
    assert other.returncode == 2 and "holds another bug (A view above 8 dimensions" in other.stderr, other.stderr
    assert "its backend differs" in other.stderr, other.stderr
    hand_written = suite / "view_above_8_dims" / "manifest.toml"  # as though it were a hand-written repro of it
    hand_written.write_text(hand_written.read_text().replace('"torch_tensorrt"', '"inductor"', 1)
                            .replace('oracle = "crash"', 'oracle = "mismatch"', 1))
    replaced = run_cli_here(*replace)
    assert replaced.returncode == 0 and "in place of the repro there (A view above 8 dimensions" in replaced.stdout
    assert (suite / "view_above_8_dims" / "NOTES.txt").read_text() == "what we tried"
    assert (suite / "view_above_8_dims" / "repro_fp16.py").read_text() == "# a variant"
    assert (suite / "view_above_8_dims" / "repro.py.edited").read_bytes() == (
        ROOT / "repros" / "suite" / "view_above_8_dims" / "repro.py").read_bytes()  # the hand-written script kept
    assert (suite / "view_above_8_dims" / "report.md.edited").read_text() == "# ours"
    assert replaced.stdout.rstrip().endswith("; kept your files there: NOTES.txt, repro_fp16.py; kept its "
                                             "hand-written or edited files as report.md.edited, repro.py.edited"), \
        replaced.stdout  # report.md was said in both (a newcomer's hunt)
    # what people wrote into the manifest stays: its title, when it was added and first seen, its notes
    assert "kept from its manifest: title, added, first_seen, and its notes" in replaced.stdout, replaced.stdout
    before = parse_manifest(ROOT / "repros" / "suite" / "view_above_8_dims" / "manifest.toml")
    after = parse_manifest(suite / "view_above_8_dims" / "manifest.toml")
    assert (after.title, after.added, after.first_seen) == (before.title, before.added, before.first_seen)
    assert after.notes.startswith(before.notes) and "by `trtmin repros add --force`" in after.notes
    assert after.backend == "inductor"  # the new reduction's own facts


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_example_on_cuda_says_plainly_whether_it_fails():
    r = run_cli("check", str(EXAMPLE), "--inputs", str(INPUTS), "--oracle", "mismatch", "--backend", "inductor",
                "--device", "cuda")
    assert r.returncode in (0, 1), r.stderr[-2000:]
    assert ("FAILS" in r.stdout) == (r.returncode == 1)
    assert r.returncode == 1 or "does not reproduce here" in r.stdout
