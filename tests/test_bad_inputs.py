"""Bad input: one line naming the problem and the fix, exit 2, no traceback, nothing overwritten."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import torch

from minimize.arguments import gpu_driver_seen
from tests.conftest import plugin, save_program
from tests.helpers import ROOT, check_here, reduce_here, run_check, run_cli, run_cli_here, run_reduce


def assert_one_line_error(r, *words: str) -> None:
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    assert "Traceback" not in r.stderr + r.stdout
    lines = [ln for ln in r.stderr.strip().splitlines() if ln.strip()]
    errors = [ln for ln in lines if ln.startswith("error:")]
    # One error line, last; at most a progress note ("loaded ...") before it.
    assert len(errors) == 1 and lines[-1] == errors[0] and len(lines) <= 2, r.stderr
    for w in words:
        assert w in errors[0], errors[0]


def test_a_pt2_of_a_newer_torch_is_said_so(host_program, tmp_path):
    """An archive a newer torch wrote (a newer schema, an aten op this torch lacks) was "could
    not be loaded ... Please check the warnings above" (warnings trtmin keeps quiet), or blamed
    on a custom op's missing --import: it names both releases and what this one lacks."""
    model, inputs = host_program

    def rewritten(name: str, edit) -> Path:  # model.json edited, the rest as saved
        out = tmp_path / name
        with zipfile.ZipFile(model) as src, zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as dst:
            for info in src.infolist():
                data = src.read(info.filename)
                dst.writestr(info, edit(json.loads(data)) if info.filename.endswith("models/model.json") else data)
        return out

    def newer(data: dict, op: bool) -> bytes:
        data["torch_version"] = "2.99.0"
        if not op:
            data["schema_version"] = {"major": 99, "minor": 1}
        text = json.dumps(data)
        return (text.replace("torch.ops.aten.sin.default", "torch.ops.aten.sin_v2.default") if op else text).encode()

    ours = f"this is torch {torch.__version__}, which cannot load it"
    r = check_here(str(rewritten("op.pt2", lambda d: newer(d, True))), "--inputs", str(inputs))
    assert_one_line_error(r, "was saved with torch 2.99.0 and " + ours, "(it uses aten::sin_v2, which this torch lacks)",
                          "run trtmin with torch 2.99, or export the model again with this one")
    r = check_here(str(rewritten("schema.pt2", lambda d: newer(d, False))), "--inputs", str(inputs))
    assert_one_line_error(r, "was saved with torch 2.99.0 and " + ours, "SerializeError: Serialized schema version")
    assert "warnings above" not in r.stderr, r.stderr
    same = rewritten("same.pt2", lambda d: json.dumps({**d, "schema_version": {"major": 99, "minor": 1}}).encode())
    r = check_here(str(same), "--inputs", str(inputs))  # this release's own: not blamed on a release
    assert_one_line_error(r, "could not be loaded as an exported program (SerializeError: ")
    assert "saved with" not in r.stderr


def test_truncated_pt2(host_program, tmp_path):
    data = host_program[0].read_bytes()
    bad = tmp_path / "cut.pt2"
    bad.write_bytes(data[: len(data) // 2])
    assert_one_line_error(check_here(str(bad)), "cut.pt2", "torch.export.save")


def test_not_a_pt2(tmp_path):
    bad = tmp_path / "notes.pt2"
    bad.write_text("hello")
    assert_one_line_error(reduce_here(str(bad), "--out", str(tmp_path / "o")), "not a .pt2")
    z = tmp_path / "other.pt2"
    with zipfile.ZipFile(z, "w") as f:
        f.writestr("readme.txt", "not a program")
    assert_one_line_error(check_here(str(z)), "other.pt2")


def test_missing_file(tmp_path):
    assert_one_line_error(check_here(str(tmp_path / "nope.pt2")), "no such file")
    assert_one_line_error(reduce_here(str(tmp_path / "nope.pt2"), "--out", str(tmp_path / "o")), "no such file")
    assert not (tmp_path / "o").exists()


def test_oracle_never_fires(host_program, tmp_path):
    model, inputs = host_program
    out = tmp_path / "o"
    r = reduce_here(str(model), "--inputs", str(inputs), "--oracle", "mismatch", "--backend", "eager",
                    "--out", str(out))
    assert_one_line_error(r, "does not fail the mismatch oracle", "if it fails only sometimes, measure it with trtmin check --repeat 10")
    assert not (out / "repro.py").exists()


def test_a_program_torch_cannot_decompose_is_one_line_with_the_fix(tmp_path):
    """torch 2.13's run_decompositions fails on a loaded program with a derived dim (2*H)
    beside an in-place op (a hunt: a traceback, exit 1); trtmin runs it to make in-place ops
    functional, so it says torch's words and the fix: save the program decomposed."""
    class Counts(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("n", torch.zeros(()))

        def forward(self, x):
            self.n.add_(1)
            return x * 2

    x = torch.randn(6, 8)
    ep = torch.export.export(Counts(), (x,), dynamic_shapes={"x": {0: 2 * torch.export.Dim("H", min=1, max=16)}})
    torch.export.save(ep, model := tmp_path / "derived.pt2")
    try:
        torch.export.load(model).run_decompositions({})
        pytest.skip("this torch decomposes the loaded program: nothing to refuse")
    except AssertionError:
        pass
    assert_one_line_error(check_here(str(model)), "run_decompositions failed", "expected sympy.Symbol",
                          "torch.export.save(ep.run_decompositions({})")
    torch.export.save(ep.run_decompositions({}), decomposed := tmp_path / "decomposed.pt2")
    torch.save(((x,), {}), inputs := tmp_path / "inputs.pt")
    r = check_here(str(decomposed), "--inputs", str(inputs))  # the fix the error names works
    assert r.returncode == 0 and "does not fail" in r.stdout, (r.stdout, r.stderr)


def test_eager_run_fails(tmp_path):
    class Bad(torch.nn.Module):
        def forward(self, x):
            return torch.nn.functional.linear(x, torch.ones(3, 8))

    model, _ = save_program(Bad(), (torch.randn(2, 8),), tmp_path)
    wrong = tmp_path / "wrong.pt"
    torch.save((torch.randn(2, 8),), wrong)
    # Eager fails only on these inputs: the shape check passes (2x8) but values are fine,
    # so make eager fail through a plugin-free route: an index out of range.
    class Gather(torch.nn.Module):
        def forward(self, x, i):
            return x[i]

    model, _ = save_program(Gather(), (torch.randn(4), torch.tensor([0, 1])), tmp_path, "gather")
    torch.save((torch.randn(4), torch.tensor([0, 9])), wrong)
    r = check_here(str(model), "--inputs", str(wrong))
    assert_one_line_error(r, "eager PyTorch fails")


def test_a_plugin_that_crashes_the_process_on_import_is_named_with_its_line(host_program, tmp_path):
    """A segfault as the plugin is imported ended trtmin with exit 139 and not a word."""
    model, _ = host_program
    (tmp_path / "segv_import.py").write_text("import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)\n"
                                             "def be(gm, example_inputs):\n    return gm.forward\n")
    r = run_cli("check", str(model), "--oracle", "crash", "--backend", f"{tmp_path / 'segv_import.py'}:be")
    assert r.returncode in (-11, 139), (r.returncode, r.stderr)
    assert f'File "{tmp_path / "segv_import.py"}", line 2 in <module>' in r.stderr, r.stderr


def test_bad_plugin_specs(host_program, tmp_path):
    model, inputs = host_program
    assert_one_line_error(check_here(str(model), "--backend", str(tmp_path / "none.py") + ":f"), "does not exist")
    assert_one_line_error(check_here(str(model), "--backend", plugin("no_such_fn")), "no function 'no_such_fn'; "
                          "name a function defined in it (abort_on_tanh, ")  # its functions, not _AmaxDropsNan
    assert_one_line_error(check_here(str(model), "--backend", plugin("crash_on_sinn")),
                          "no function 'crash_on_sinn'; did you mean ")  # a typo: the name meant
    assert_one_line_error(check_here(str(model), "--backend", plugin("NOT_CALLABLE")), "is an int, not callable")
    assert_one_line_error(check_here(str(model), "--backend", "tvm"), "unknown backend")
    assert_one_line_error(check_here(str(model), "--backend", "[bold]tvm"), "unknown backend '[bold]tvm'")  # no markup
    for typed, meant in (("tensorrt_rtx", "tensorrt"), ("xnnpack", "executorch:xnnpack"), ("inductr", "inductor"), ("onnx", "onnxruntime")):
        assert_one_line_error(check_here(str(model), "--backend", typed), f"did you mean --backend {meant}?")
    # a plugin that exits as it is imported: argparse read trtmin's arguments and printed a
    # usage line as trtmin's; sys.exit(0) ended trtmin with exit 0 and no word
    (tmp_path / "parses.py").write_text("import argparse\np = argparse.ArgumentParser()\n"
                                        "p.add_argument('--opt-level', required=True)\np.parse_args()\n"
                                        "def compile(gm, example_inputs):\n    return gm\n")
    (tmp_path / "exits.py").write_text("import sys\nsys.exit(0)\n")
    r = check_here(str(model), "--backend", f"{tmp_path / 'parses.py'}:compile")
    assert "usage: parses.py" in r.stderr  # argparse names the plugin, not trtmin
    assert r.returncode == 2 and r.stderr.strip().splitlines()[-1].startswith("error: plugin file "), r.stderr
    assert "it exits with code 2 as it is imported: an argparse or sys.exit" in r.stderr
    assert_one_line_error(check_here(str(model), "--backend", f"{tmp_path / 'exits.py'}:compile"),
                          "fails on import (it exits with code 0 as it is imported")
    # the plugin's own mistakes were "CRASH: ...; try --oracle crash", and with it a repro of the mistake
    (tmp_path / "mistakes.py").write_text("def one_arg(gm):\n    return gm\n\n\ndef returns_none(gm, inputs):\n"
                                          "    return None\n\n\ndef imports_runtime(gm, inputs):\n"
                                          "    import mycc_runtime\n    return gm\n")
    assert_one_line_error(check_here(str(model), "--backend", f"{tmp_path / 'mistakes.py'}:one_arg"),
                          "takes 1 positional argument; a backend is called as fn(gm, example_inputs)")
    assert_one_line_error(check_here(str(model), "--inputs", str(inputs), "--oracle", "crash", "--backend",
                                     f"{tmp_path / 'mistakes.py'}:returns_none"),
                          "returns no callable", "the plugin's mistake, no compiler's bug")
    assert_one_line_error(check_here(str(model), "--inputs", str(inputs), "--backend",
                                     f"{tmp_path / 'mistakes.py'}:imports_runtime"),
                          "imports 'mycc_runtime', which is not installed here", "install it")


def test_inputs_file_mismatches(host_program, tmp_path):
    model, _ = host_program
    f = tmp_path / "in.pt"
    torch.save((torch.randn(4, 8), torch.randn(1)), f)
    assert_one_line_error(check_here(str(model), "--inputs", str(f)), "2 inputs", "takes 1")
    torch.save((torch.randn(4, 8).double(),), f)
    assert_one_line_error(check_here(str(model), "--inputs", str(f)), "torch.float64")
    torch.save((torch.randn(4, 9),), f)
    assert_one_line_error(check_here(str(model), "--inputs", str(f)), "shape")
    torch.save((torch.randn(4, 8, device="meta"),), f)  # no values: copying them out was a traceback
    assert_one_line_error(check_here(str(model), "--inputs", str(f)), "is a meta tensor", "save the real tensors")
    torch.save(((torch.randn(4, 8),), {"scale": 1.0}), f)  # kwargs the program does not take: "(it takes )"
    said = check_here(str(model), "--inputs", str(f))
    assert said.returncode == 2 and "(it takes )" not in said.stderr, said.stderr


def test_a_folder_given_as_inputs_is_named_as_one(host_program, tmp_path):
    """It was 'cannot be loaded with weights_only=True (IsADirectoryError ...)': the fix it
    pointed at (weights_only, a plain tuple) was not the problem."""
    model, _ = host_program
    assert_one_line_error(check_here(str(model), "--inputs", str(tmp_path)), "is a folder", "torch.save")


def test_the_model_given_as_its_inputs_is_named_as_a_program(host_program):
    """`--inputs model.pt2` (the model twice) took 8 s and said torch.load's "checkpoint
    corrupted"; it is named from the archive's file names, before torch loads."""
    model, _ = host_program
    assert_one_line_error(check_here(str(model), "--inputs", str(model)),
                          "is a program saved by torch.export.save, not the model's inputs", "torch.save(args")


def test_out_folder_with_other_files_is_not_overwritten(host_program, tmp_path):
    model, inputs = host_program
    (tmp_path / "mine.txt").write_text("keep me")
    r = run_cli("reduce", str(model), "--inputs", str(inputs), "--oracle", "crash", "--backend",
                plugin("crash_on_sin"), "--out", str(tmp_path))
    assert_one_line_error(r, "--force")
    assert (tmp_path / "mine.txt").read_text() == "keep me" and not (tmp_path / "repro.py").exists()


def test_an_options_mistake_is_named_before_the_out_folders(host_program, tmp_path):
    """Both are one-line errors; the flag's comes first, so that --force is not the fix that
    leads to the next error."""
    model, inputs = host_program
    (tmp_path / "mine.txt").write_text("keep me")
    r = run_cli("reduce", str(model), "--inputs", str(inputs), "--oracle", "crash", "--backend",
                plugin("crash_on_sin"), "--device", "gpu", "--out", str(tmp_path))
    assert_one_line_error(r, "--device 'gpu'")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mine.txt"]


def test_missing_backend_package_is_one_line_and_help_still_works(host_program):
    import importlib.util
    model, _ = host_program
    if importlib.util.find_spec("torch_tensorrt") is None:
        assert_one_line_error(check_here(str(model), "--backend", "torch_tensorrt"),
                              "torch_tensorrt package", "pip install")
    r = run_cli("--help")
    assert r.returncode == 0 and "reduce" in r.stdout


def test_help_shows_no_type_for_a_flag_and_a_name_for_a_value():
    """A flag takes no value: typer printed `<bool>` beside --resume and --help as if it did."""
    r = run_cli("reduce", "--help")
    rows = {line.split()[1]: line for line in r.stdout.splitlines() if line.startswith("│ --")}
    assert r.returncode == 0 and {"--resume", "--verify", "--help", "--set", "--jobs"} <= set(rows), r.stdout
    assert "<bool>" not in r.stdout and "<list" not in r.stdout, r.stdout
    assert "KEY=VALUE" in rows["--set"] and " N " in rows["--jobs"] and "--no-verify" in rows["--verify"]
    assert " -o " in rows["--out"] and " -j " in rows["--jobs"]  # the short names of make, tar and gcc
    assert " -j " in " ".join(line for line in run_cli("repros", "run", "--help").stdout.splitlines() if "--jobs" in line)


def test_every_commands_options_name_their_values():
    """Every option row of every command names its value (FILE, DIR, SECONDS, URL, ...) or
    lists its choices, never typer's `<float>`, `<str>` or `<list[str]>`; an argument's
    name is its value's (`MODEL.pt2`, `NAME`), with no `<path>` or `<list[str]>` beside it."""
    import re
    arguments = set()
    for command in (["reduce"], ["check"], ["env"], ["repros", "run"], ["repros", "add"], ["repros", "match"],
                    ["repros", "table"]):
        r = run_cli(*command, "--help")
        rows = [line for line in r.stdout.splitlines() if re.match(r"│\s+(\*\s+)?--", line)]
        assert r.returncode == 0 and rows, r.stdout  # --help at least
        named = [line for line in r.stdout.splitlines() if re.match(r"│\s+(\*\s+)?[A-Z]", line)]
        arguments |= {line.split()[2 if "*" in line.split()[1] else 1] for line in named}
        typed = [row for row in rows + named if re.search(r"<[\w\[\]]+>", row)]
        assert not typed, f"trtmin {' '.join(command)}: " + "\n".join(typed)
    assert arguments == {"MODEL.pt2", "OUT_DIR", "NAME", "FILE"}, arguments


def test_folder_given_as_model(tmp_path):
    assert_one_line_error(check_here(str(tmp_path)), "is a folder")
    assert_one_line_error(reduce_here(str(tmp_path), "--out", str(tmp_path / "o")), "is a folder")


def test_a_pipe_or_a_device_is_no_model_nor_inputs(host_program, tmp_path):
    """A FIFO as the model blocked its first read for ever; /dev/null as --inputs was 'no such file'."""
    import os
    model, _ = host_program
    os.mkfifo(tmp_path / "model.pt2")
    assert_one_line_error(check_here(str(tmp_path / "model.pt2")), "is not a regular file")
    assert_one_line_error(check_here(str(model), "--inputs", "/dev/null"), "is not a regular file")


def test_unknown_setting_is_refused_with_a_suggestion(host_program):
    model, _ = host_program
    r = run_check(str(model), "--backend", "onnxruntime", "--set", "bogus_key=1")
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr


def test_numbers_that_would_mean_nothing_are_refused_before_anything_starts(host_program, tmp_path):
    model, inputs = host_program
    out = tmp_path / "o"
    for args, words in [(["--atol", "-1"], ["--atol -1", ">= 0"]), (["--rtol", "nan"], ["--rtol nan"]),
                        (["--timeout", "0"], ["--timeout 0", "positive"]), (["--timeout", "nan"], ["--timeout nan"]),
                        (["--repeat", "0"], ["--repeat 0"]), (["--memory-limit", "0"], ["--memory-limit 0"]),
                        (["--timeout", "1e20"], ["--timeout 1e+20", "a week"]),  # past it: an OverflowError's traceback
                        (["--repeat", "99999999999999999999"], ["--repeat 99999999999999999999", "1000"]),
                        (["--jobs", "100000"], ["--jobs 100000", "each a process that imports torch"]),
                        (["--repeat", "2", "--min-failures", "3"], ["--min-failures 3", "--repeat (2)"]),
                        (["--emit", "bogus"], ["--emit 'bogus'", "tensorrt"])]:
        r = run_cli_here("reduce", str(model), "--inputs", str(inputs), "--oracle", "crash", "--backend",
                         plugin("crash_on_sin"), "--out", str(out), *args)
        assert_one_line_error(r, *words)
        assert "loaded" not in r.stderr and not out.exists()  # refused before the model loaded: no run lost
    assert_one_line_error(check_here(str(model), "--repeat", "0"), "--repeat 0")
    assert_one_line_error(check_here(str(model), "--memory-limit", "0"), "--memory-limit 0")
    # a key given twice (which value would win?), and the --backend's own script as --emit's
    assert_one_line_error(check_here(str(model), "--backend", "inductor", "--set", "fullgraph=true", "--set",
                                     "fullgraph=false"), "--set fullgraph is given twice, as 'true' and 'false'")
    assert_one_line_error(run_cli_here("reduce", str(model), "--inputs", str(inputs), "--oracle", "mismatch",
                                       "--backend", "onnxruntime", "--emit", "onnxruntime", "--out", str(out)),
                          "--emit onnxruntime is the --backend", "drop --emit onnxruntime")
    assert_one_line_error(run_cli_here("repros", "run", "--timeout", "-1"), "--timeout -1")


def test_the_edges_of_what_the_numbers_and_settings_take():
    """0 is a tolerance (--atol 0 --rtol 0: what the rounding note suggests); --jobs starts
    at 1; a --set key given twice with one value is that value, with two is refused."""
    from minimize.arguments import check_jobs, check_numbers, parse_settings
    from oracles.errors import TrtminError
    check_numbers(0.0, 0.0, 300.0, 1)
    with pytest.raises(TrtminError, match="--atol -1 must be"):
        check_numbers(-1.0, 0.0, 300.0, 1)
    check_jobs(1)
    with pytest.raises(TrtminError, match="--jobs 0 must be between 1 and"):
        check_jobs(0)
    assert parse_settings(["a=1", "a = 1"]) == {"a": "1"}
    with pytest.raises(TrtminError, match="--set a is given twice"):
        parse_settings(["a=1", "a=2"])


def test_a_missing_import_or_gpu_is_named_before_torch_loads(host_program):
    """--import of a module that is not installed, an --emit typo, a plugin file that is not
    there, and --device cuda where
    the machine shows no GPU, were found only after torch had loaded (7-8 s); so were the
    --set mistakes of the backends whose settings trtmin lists (3-4 s): now from files
    alone. Each ask: the words the error must hold, then the arguments."""
    model, inputs = host_program
    inductor = ["--backend", "inductor"]
    asks = [["--import", "check", *inductor, "--import", "no_such_lib.ops"],
            ["--emit", "reduce", *inductor, "--emit", "bogus", "--out", str(model.parent / "o")],
            # a plugin file's typo: after the workers' start and torch's import it took 5.9 s (a newcomer's hunt)
            ["plugin file nofile.py does not exist", "check", "--backend", "nofile.py:fn"]]

    def installed(*modules: str) -> bool:
        return all(importlib.util.find_spec(m) for m in modules)
    if installed("onnx", "onnxscript") and (installed("tensorrt") or installed("tensorrt_rtx")):  # else: said missing
        asks += [["has no setting 'fp61'; did you mean fp16", "check", "--backend", "tensorrt", "--set", "fp61=true"],
                 ["--set optimization_level=9: TensorRT takes 0 to 5", "reduce", "--backend", "tensorrt",
                  "--set", "optimization_level=9", "--out", str(model.parent / "o")],
                 # a size_t: set_memory_pool_limit raised a TypeError (a traceback, exit 1: "reproduced")
                 ["--set workspace=-5: TensorRT takes 0 to 18446744073709551615", "check", "--backend", "tensorrt",
                  "--set", "workspace=-5"]]
    if installed("onnx", "onnxscript", "onnxruntime"):
        asks += [["graph_optimization_level=max: use one of", "check", "--backend", "onnxruntime",
                  "--set", "graph_optimization_level=max"]]
    if installed("executorch"):
        asks += [["has no setting 'per_op'", "check", "--backend", "executorch:xnnpack", "--set", "per_op=1"],
                 ["executorch:portable takes no settings", "check", "--backend", "executorch:portable", "--set", "x=1"]]
    asks += [["--device cuda", "check", *inductor, "--device", "cuda"]] if not gpu_driver_seen() else []
    if installed("executorch") and not gpu_driver_seen():  # 5.6 s, after the workers' start (a newcomer's hunt)
        asks += [["backend executorch:cuda needs an NVIDIA GPU, and none is visible here", "check", "--backend",
                  "executorch:cuda"]]
    for words, command, *ask in asks:
        code = ("import sys\nfrom minimize.cli import run\n"
                f"code = run({[command, str(model), '--inputs', str(inputs), '--oracle', 'crash', *ask]!r})\n"
                "print(code, 'torch' in sys.modules)")
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
        assert r.stdout.split() == ["2", "False"] and words in r.stderr, (ask, r.stdout, r.stderr[-2000:])


def test_an_import_found_where_trtmin_runs_is_not_refused(tmp_path, monkeypatch):
    """The early --import check finds modules as the import does: a sourceless .pyc (or a
    built extension) in the folder trtmin runs in counts, not only a .py or a package."""
    import py_compile

    from minimize.program.libraries import checked_imports
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "trtmin_test_ops.py").write_text("X = 1\n")
    py_compile.compile(str(tmp_path / "src" / "trtmin_test_ops.py"), cfile=str(tmp_path / "trtmin_test_ops.pyc"))
    monkeypatch.chdir(tmp_path)
    assert checked_imports(["trtmin_test_ops"]) == ["trtmin_test_ops"]
    with pytest.raises(Exception, match="No module named 'trtmin_no_such_ops'"):
        checked_imports(["trtmin_no_such_ops.ops"])


def test_an_import_that_exits_is_one_line_not_trtmins_exit(host_program, tmp_path, monkeypatch):
    """--import of a module that calls sys.exit(1) as it is imported made check exit 1 with
    no word (exit 1 reads as "it fails"), and reduce exit 0 with no out folder."""
    model, inputs = host_program
    (tmp_path / "trtmin_test_exiter.py").write_text("import sys\nsys.exit(1)\n")
    monkeypatch.chdir(tmp_path)
    for command, extra in ((check_here, ()), (reduce_here, ("--out", str(tmp_path / "out")))):
        r = command(str(model), "--inputs", str(inputs), "--import", "trtmin_test_exiter", *extra)
        assert_one_line_error(r, "--import trtmin_test_exiter: it exits as it is imported (sys.exit(1))")


def test_usage_errors_are_one_line_too(host_program):
    model, _ = host_program
    assert_one_line_error(run_cli_here("reduce", str(model), "--oracle", "bogus"), "--oracle", "'mismatch'", "--help")
    assert_one_line_error(run_cli_here("reduce"), "Missing argument", "reduce --help")
    assert_one_line_error(check_here(str(model), "--jobs", "2"), "No such option")
    assert_one_line_error(run_cli_here("reduse", str(model)), "No such command")
    assert_one_line_error(check_here(str(model), "--match", "x"), "--match applies", "drop --match")
    assert_one_line_error(run_cli_here("repros", "run", "--json"), "requires an argument", "repros run --help")


def test_a_memory_limit_below_a_workers_own_start_is_named_not_called_a_crash(host_program, tmp_path):
    model, inputs = host_program
    r = reduce_here(str(model), "--inputs", str(inputs), "--oracle", "crash", "--backend",
                    plugin("crash_on_sin"), "--out", str(tmp_path / "o"), "--memory-limit", "64")
    assert_one_line_error(r, "--memory-limit 64 MiB is below", "use at least --memory-limit")


def test_settings_are_checked_and_parsed_for_inductor_and_refused_for_eager(host_program):
    from oracles.backends import resolve
    from oracles.errors import TrtminError
    model, _ = host_program
    assert_one_line_error(check_here(str(model), "--backend", "inductor", "--set", "max_autotun=1"),
                          "no setting 'max_autotun'", "did you mean max_autotune")
    assert_one_line_error(check_here(str(model), "--backend", "eager", "--set", "x=1"), "takes no settings")
    backend = resolve("inductor", {"dynamic": "true", "fullgraph": "false", "cpp.simdlen": "8", "max_autotune": "off"})
    assert backend._options() == {"dynamic": True, "fullgraph": False,
                                  "options": {"cpp.simdlen": 8, "max_autotune": False}}
    assert "options={'cpp.simdlen': 8, 'max_autotune': False}" in backend.script_part().compile_body
    for settings, words in [({"mode": "fast"}, "max-autotune"), ({"fullgraph": "maybe"}, "true or false"),
                            ({"mode": "max-autotune", "max_autotune": "1"}, "cannot be combined")]:
        try:
            resolve("inductor", settings)
        except TrtminError as e:
            assert words in str(e)
        else:
            raise AssertionError(f"{settings} was accepted")


def test_an_inputs_file_torch_cannot_read_is_one_line(host_program, tmp_path):
    model, _ = host_program
    f = tmp_path / "in.pt"
    for data, what in ((b"hello", "is text"), (b"\x01\x02abc", "is of another format")):  # was "cannot be loaded
        f.write_bytes(data)                                                   # with weights_only=True (KeyError: 101)"
        assert_one_line_error(check_here(str(model), "--inputs", str(f)), f"{what}, not a file torch.save wrote",
                              "torch.save(args, path)")
    torch.save((torch.zeros(4, 8),), f)
    f.write_bytes(f.read_bytes()[:300])  # a copy cut short: not "of another format", nor torch's miniz blurb
    assert_one_line_error(check_here(str(model), "--inputs", str(f)), "is cut short or damaged")
    import numpy
    numpy.save(tmp_path / "in.npy", numpy.zeros((4, 8), numpy.float32))  # was torch's weights_only blurb, cut
    assert_one_line_error(check_here(str(model), "--inputs", str(tmp_path / "in.npy")),
                          "is a NumPy array (numpy.save), not a file torch.save wrote")
    for value, words in ((3, "is an int,"), (None, "is None,")):  # were "a int", "a NoneType"
        torch.save((value,), tmp_path / "one.pt")
        assert_one_line_error(check_here(str(model), "--inputs", str(tmp_path / "one.pt")), words,
                              "the program expects a tensor")
    f.write_bytes(b"")  # it was "EOFError: EOFError"
    assert_one_line_error(check_here(str(model), "--inputs", str(f)), "is empty", "torch.save(args, path)")
    import numpy
    numpy.savez(tmp_path / "in.npz", x=numpy.zeros((4, 8), numpy.float32))  # torch.load's "enforce fail at ..."
    assert_one_line_error(check_here(str(model), "--inputs", str(tmp_path / "in.npz")), "is a NumPy archive")
    # numpy arrays: torch's advice to trust the file (with its bold as escape codes) was no fix
    import numpy as np
    torch.save((np.zeros((4, 8), dtype=np.float32),), f)
    r = check_here(str(model), "--inputs", str(f))
    assert_one_line_error(r, "holds numpy arrays", "convert them with torch.from_numpy")
    assert "\x1b" not in r.stderr
    code = ("import sys\nfrom minimize.cli import run\n"  # said before torch loads (4.2 s: a newcomer's hunt)
            f"code = run({['check', str(model), '--inputs', str(f), '--oracle', 'crash', '--backend', 'inductor']!r})\n"
            "print(code, 'torch' in sys.modules)")
    early = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert early.stdout.split() == ["2", "False"] and "holds numpy arrays" in early.stderr, early


def test_out_folders_trtmin_did_not_write_are_never_written_over(host_program, tmp_path):
    model, inputs = host_program
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "repro.py").write_text("my own script")
    args = ["--inputs", str(inputs), "--oracle", "crash", "--backend", plugin("crash_on_sin")]
    r = reduce_here(str(model), *args, "--out", str(mine), "--force")
    assert_one_line_error(r, "repro.py", "no trtmin run wrote", "another folder")
    assert_one_line_error(reduce_here(str(model), *args, "--out", str(mine), "--resume"),  # not "drop --resume"
                          "repro.py", "no trtmin run wrote", "another folder")
    assert (mine / "repro.py").read_text() == "my own script"
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "notes.txt").write_text("mine")
    assert_one_line_error(reduce_here(str(model), *args, "--out", str(tmp_path / "other"), "--resume"),
                          "no interrupted run", "drop --resume and choose another folder, or pass --force")
    # --resume where nothing was journaled yet (Ctrl-C before the first verdict): a fresh run
    fresh = reduce_here(str(model), *args, "--out", str(tmp_path / "new"), "--resume", "--no-verify")
    assert fresh.returncode == 0 and "starting the run afresh" in fresh.stderr, fresh.stderr[-2000:]
    ro = tmp_path / "read-only"  # root writes anywhere but on a read-only file system: mount one where allowed
    ro.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=1m", "tmpfs", str(ro)], capture_output=True).returncode:
        return
    try:
        assert_one_line_error(reduce_here(str(model), *args, "--out", str(ro / "o")), "cannot be written")
    finally:
        subprocess.run(["umount", str(ro)], capture_output=True)


def test_resume_names_the_option_that_changed(host_program, tmp_path, monkeypatch):
    model, inputs = host_program
    args = ["--inputs", str(inputs), "--oracle", "crash", "--backend", plugin("crash_on_sin"), "--out", str(tmp_path),
            "--no-verify"]  # what is tested is the journal's options, not the script
    assert reduce_here(str(model), *args).returncode == 0
    results = (tmp_path / "summary.json").read_text()
    (tmp_path / "summary.json").unlink()  # as if stopped before its end: a finished run has nothing to resume
    with monkeypatch.context() as patched:  # said before any worker starts, so before the model loads
        patched.setattr("minimize.run.workers.Workers.__init__", lambda *a: pytest.fail("a worker started"))
        changed = reduce_here(str(model), *args, "--resume", "--timeout", "60")
    assert_one_line_error(changed, "--timeout 300.0 there, --timeout 60.0 now", "--force")
    journal = tmp_path / "journal.jsonl"
    finished = journal.read_text()
    lines = finished.splitlines(keepends=True)
    header = json.loads(lines[0])
    from minimize.emit.run_header import VERDICT_FORMAT
    # a plugin's compilers: the packages it imports, torch apart (planted.py imports torch alone)
    assert header["header"]["verdict_format"] == VERDICT_FORMAT and header["header"]["compilers"] == {}
    header["header"]["compilers"]["onnxruntime"] = "0.9"  # as a plugin's run journaled before 8f26320 recorded
    journal.write_text(json.dumps(header) + "\n" + "".join(lines[1:]))
    upgraded = reduce_here(str(model), *args, "--resume")
    assert_one_line_error(upgraded, "by a trtmin that recorded other compilers for this backend (onnxruntime there, "
                                    "none now)", "start over with --force")
    assert "loaded" not in upgraded.stderr
    from minimize.emit.run_header import _difference  # a compiler of another version: named, with both
    said = _difference({"compilers": {"mycompiler": "1.0"}}, {"compilers": {"mycompiler": "2.0"}})[0]
    assert said == "with mycompiler 1.0 (this is 2.0): its verdicts are that compiler's", said
    # another backend records other compilers: the backend is the difference, and its fix a rerun (a newcomer's)
    said = _difference({"compilers": {"torch_inductor": "2.13"}, "options": {"backend": "inductor"}},
                       {"compilers": {"onnxruntime": "1.32", "onnxscript": "0.7"}, "options": {"backend": "onnxruntime"}})
    assert said[0] == "with other options (--backend 'inductor' there, --backend 'onnxruntime' now)", said
    # a plugin file gone since the run began is gone, not "another version" (the resilience trial)
    from minimize.emit.run_header import _recorded_by_both
    plugin_run = {"plugin_sha256": "ab", "options": {"backend": "/x/plug.py:fn"}}
    for backend, said in (("/y/plug.py:fn", "with a plugin file that is not there now (the file --backend names)"),
                          ("inductor", "with other options (--backend '/x/plug.py:fn' there, --backend 'inductor' now)")):
        then, now = _recorded_by_both(plugin_run, {"plugin_sha256": None, "options": {"backend": backend}})
        assert _difference(then, now)[0] == said, (backend, _difference(then, now))
    assert _difference({"plugin_sha256": "ab"}, {"plugin_sha256": "cd"})[0].startswith("with another version")
    del header["header"]["verdict_format"]  # a journal from before the format was recorded: verdicts worded otherwise
    journal.write_text(json.dumps(header) + "\n" + "".join(lines[1:]))
    assert_one_line_error(reduce_here(str(model), *args, "--resume"), "by another trtmin, which words verdicts otherwise")
    journal.write_text(finished)
    (tmp_path / "summary.json").write_text(results)
    # --resume of a finished run replays it and writes its results again: not over the user's edit
    script = tmp_path / "repro.py"
    script.write_text(script.read_text() + "# my note\n")
    assert_one_line_error(reduce_here(str(model), *args, "--resume"), "finished run whose repro.py changed since it "
                          "wrote it", "copy your changes elsewhere, or pass --force with --resume")
    assert script.read_text().endswith("# my note\n")
    (tmp_path / ".repro_inputs.pt.tmp").write_bytes(b"\0" * 4096)  # a kill -9 mid-write left it; a run that
    (tmp_path / ".notes.txt.tmp").write_text("mine")  # writes no repro_inputs.pt would never replace it
    replayed = reduce_here(str(model), *args, "--resume", "--force")
    assert replayed.returncode == 0 and not script.read_text().endswith("# my note\n"), replayed.stderr[-2000:]
    assert not (tmp_path / ".repro_inputs.pt.tmp").exists() and (tmp_path / ".notes.txt.tmp").read_text() == "mine"
    assert "replaying" in replayed.stderr and json.loads((tmp_path / "summary.json").read_text())["oracle_calls"]
    (tmp_path / "notes.txt").write_text("mine")  # --force replaces the earlier run's files, not these
    assert_one_line_error(reduce_here(str(model), *args, "--timeout", "60"), "holds a finished run", "--force")
    r = reduce_here(str(model), *args, "--timeout", "60", "--force")
    assert r.returncode == 0, r.stderr[-2000:]
    assert (tmp_path / "notes.txt").read_text() == "mine" and (tmp_path / "repro.py").exists()
    header = json.loads((tmp_path / "journal.jsonl").read_text().splitlines()[0])["header"]
    assert header["options"]["timeout"] == 60.0  # a new run, not the old one resumed


def test_repros_commands_refuse_folders_and_files_in_each_others_place(tmp_path):
    (tmp_path / "afile").write_text("x")
    assert_one_line_error(run_cli_here("repros", "add", str(tmp_path), "--name", "p", "--suite", str(tmp_path / "afile")),
                          "is a file")
    assert_one_line_error(run_cli_here("repros", "table", str(tmp_path)), "is a folder")
    assert_one_line_error(run_cli_here("repros", "run", "--json", str(tmp_path)), "is a folder")


def test_any_failure_lets_candidates_fail_otherwise_not_the_original(host_program, tmp_path):
    """--any-failure with --oracle mismatch reduced a crash (and with --match, a failure the
    pattern never matched), writing a repro of another bug than the one asked about."""
    model, inputs = host_program
    r = reduce_here(str(model), "--inputs", str(inputs), "--oracle", "mismatch", "--backend", plugin("crash_on_sin"),
                    "--any-failure", "--out", str(tmp_path / "o"))
    assert_one_line_error(r, "does not fail the mismatch oracle", "try --oracle crash")
    assert not (tmp_path / "o").exists()


def test_an_out_in_a_repro_suite_is_refused(host_program, tmp_path, monkeypatch):
    """--out a suite (its entries then read as one broken repro) or a new folder in the one
    the repros commands read (an entry with no manifest): refused, pointing to `repros add`.
    A folder beside a saved repro elsewhere is an ordinary folder."""
    model, inputs = host_program
    entry = tmp_path / "suite" / "saved"
    entry.mkdir(parents=True)
    (entry / "repro.py").write_text("print('FIXED')\n")
    (entry / "manifest.toml").write_text('title = "a bug"\n')
    monkeypatch.setenv("TRTMIN_SUITE", str(tmp_path / "suite"))
    for out, words in ((tmp_path / "suite", "is a repro suite"), (tmp_path / "suite" / "new", "is in the repro suite")):
        r = reduce_here(str(model), "--inputs", str(inputs), "--out", str(out), "--force")
        assert_one_line_error(r, words, "trtmin repros add OUT --name NAME")
        assert not (tmp_path / "suite" / "new").exists() and sorted(p.name for p in entry.iterdir()) == [
            "manifest.toml", "repro.py"]
    monkeypatch.delenv("TRTMIN_SUITE")
    from minimize.emit.out_dir import check_out_dir
    check_out_dir(tmp_path / "suite" / "run1", resume=False, force=False)  # no suite the commands read: not refused
    (tmp_path / "loop").symlink_to(tmp_path / "loop")  # resolve() raised RuntimeError: a traceback
    r = reduce_here(str(model), "--inputs", str(inputs), "--out", str(tmp_path / "loop"))
    assert r.returncode == 2 and "Traceback" not in r.stderr and r.stderr.count("\n") == 1, r.stderr


def test_a_users_own_journal_and_a_file_in_the_outs_path_are_told_apart(host_program, tmp_path):
    model, inputs = host_program
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "journal.jsonl").write_text('{"day": 1}\n')  # the user's, not a trtmin run's
    (mine / "report.md").write_text("my report")
    args = ["--inputs", str(inputs), "--oracle", "crash", "--backend", plugin("crash_on_sin")]
    assert_one_line_error(reduce_here(str(model), *args, "--out", str(mine), "--force"), "no trtmin run wrote")
    assert (mine / "report.md").read_text() == "my report" and (mine / "journal.jsonl").read_text() == '{"day": 1}\n'
    assert_one_line_error(reduce_here(str(model), *args, "--out", str(mine / "report.md" / "o")),
                          "report.md is a file, not a folder")


def test_inductor_config_values_that_text_cannot_give_are_refused():
    from oracles.backends import resolve
    from oracles.errors import TrtminError
    assert resolve("inductor", {"cpp.simdlen": "none"})._options() == {"options": {"cpp.simdlen": None}}
    try:
        resolve("inductor", {"trace.dot_graph_shape": "box"})  # typed None: torch.compile would refuse any str
    except TrtminError as e:
        assert "cannot write" in str(e)
    else:
        raise AssertionError("accepted")


def test_resume_reads_a_journal_from_before_an_option_was_recorded(tmp_path):
    import json

    from minimize.emit.journal import Journal
    from oracles.errors import TrtminError
    old = {"model_sha256": "ab", "options": {"oracle": "crash", "atol": 0.001}}
    (tmp_path / "journal.jsonl").write_text(json.dumps({"header": old}) + "\n")
    now = {"model_sha256": "ab", "options": {"oracle": "crash", "atol": 0.001, "timeout": 300.0}}
    Journal(tmp_path, now, resume=True).close()  # the old journal said nothing of --timeout
    changed = {"model_sha256": "ab", "options": {"oracle": "crash", "atol": 0.01, "timeout": 300.0}}
    try:
        Journal(tmp_path, changed, resume=True)
    except TrtminError as e:
        assert "--atol 0.001 there, --atol 0.01 now" in str(e)
    else:
        raise AssertionError("a changed --atol was resumed")


def test_resume_says_the_model_files_contents_differ(tmp_path):
    """A re-export of the same code under another folder differs in bytes (the .pt2's stack
    traces hold the source's path): the refusal says it is the contents, not the path."""
    import re

    from minimize.emit.journal import Journal
    from oracles.errors import TrtminError
    header = {"model_sha256": "ab" * 32, "options": {"oracle": "crash"}}
    Journal(tmp_path, header, resume=False).close()
    with pytest.raises(TrtminError, match=re.escape(f"another model (the model file's contents differ: sha256 "
                                                    f"{'ab' * 6}... there, {'cd' * 6}... now; a re-export differs")):
        Journal(tmp_path, {**header, "model_sha256": "cd" * 32}, resume=True)


def test_a_re_export_of_the_same_code_from_another_folder_resumes(tmp_path):
    """The same source exported from two folders: the files differ (their stack traces hold
    each folder's path), the programs do not, and a journal of one resumes with the other.
    Another weight is another program, and the refusal says so."""
    import hashlib
    import importlib.util

    from minimize.emit.journal import Journal
    from minimize.program.model import Program
    from oracles.errors import TrtminError
    source = ("import torch\n\nclass M(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n"
              "        self.lin = torch.nn.Linear(4, 4)\n\n    def forward(self, x):\n"
              "        return torch.sin(self.lin(x)).permute(1, 0)\n")
    x, saved, programs = torch.randn(2, 4), [], []
    for folder in ("a", "b"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "policy.py").write_text(source)
        spec = importlib.util.spec_from_file_location(f"policy_{folder}", tmp_path / folder / "policy.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        torch.manual_seed(0)
        torch.export.save(torch.export.export(module.M(), (x,)), tmp_path / folder / "model.pt2")
        saved.append(hashlib.sha256((tmp_path / folder / "model.pt2").read_bytes()).hexdigest())
        programs.append(Program(torch.export.load(tmp_path / folder / "model.pt2"), [x]))
    assert saved[0] != saved[1]
    assert programs[0].digest() == programs[1].digest() is not None
    header = lambda i: {"model_sha256": saved[i], "program_sha256": programs[i].digest(),  # noqa: E731
                        "options": {"oracle": "crash"}}
    Journal(tmp_path / "out", header(0), resume=False).close()
    Journal(tmp_path / "out", header(1), resume=True).close()
    other_shape = Program(torch.export.export(module.M(), (torch.randn(3, 4),)), [torch.randn(3, 4)])
    assert other_shape.digest() != programs[0].digest()  # made inputs follow the shapes: another program
    weight = next(iter(sorted(programs[1].constants)))
    programs[1].values[weight] = programs[1].values[weight] + 1
    assert programs[1].digest() != programs[0].digest()
    with pytest.raises(TrtminError, match="another model \\(its graph or weights differ: program sha256"):
        Journal(tmp_path / "out", header(1), resume=True)


def test_the_model_file_hashed_in_the_background_is_its_bytes_or_its_error(tmp_path):
    """The journal's model_sha256 is hashed on a thread while the program loads: the same
    digest as the bytes', and a file gone meanwhile raises where the header asks for it."""
    import hashlib
    from minimize.reduce import digest_in_background
    data = bytes(range(256)) * 20000  # several of the hash's 1 MiB blocks
    (tmp_path / "model.pt2").write_bytes(data)
    assert digest_in_background(tmp_path / "model.pt2").result(timeout=60) == hashlib.sha256(data).hexdigest()
    with pytest.raises(FileNotFoundError):
        digest_in_background(tmp_path / "gone.pt2").result(timeout=60)


def test_resume_refuses_inputs_whose_contents_changed(host_program, tmp_path):
    """The journal's verdicts were made on the inputs' contents, not their path: resumed
    with other contents under the same name, the run would write a repro that does not
    reproduce. The same contents under another path resume."""
    import os
    import shutil
    from pathlib import Path

    model, inputs = host_program
    mine = tmp_path / "inputs.pt"
    shutil.copy(inputs, mine)
    out = tmp_path / "out"
    r = run_cli_here("reduce", str(model), "--inputs", str(mine), "--oracle", "crash", "--backend",
                     plugin("crash_on_sin"), "--out", str(out), "--no-verify")
    assert r.returncode == 0, r.stderr[-2000:]
    lines = (out / "journal.jsonl").read_text().splitlines()
    (out / "journal.jsonl").write_text("\n".join(lines[:3]) + "\n")  # as if killed after two verdicts
    (out / "summary.json").unlink()
    torch.save(tuple(t * 0.01 for t in torch.load(mine)), mine)
    r = run_cli_here("reduce", str(model), "--inputs", str(mine), "--oracle", "crash", "--backend",
                     plugin("crash_on_sin"), "--out", str(out), "--resume", "--no-verify")
    assert r.returncode == 2 and "with other inputs (the --inputs file's contents differ)" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr and r.stderr.count("error:") == 1 and not (out / "summary.json").exists()
    r = run_cli_here("reduce", str(model), "--oracle", "crash", "--backend", plugin("crash_on_sin"), "--out", str(out),
                     "--resume", "--no-verify")  # none given: not "contents differ"
    assert r.returncode == 2 and "with an --inputs file (none is given now)" in r.stderr, r.stderr
    shutil.copy(inputs, mine)
    r = run_cli_here("reduce", str(model), "--inputs", str(Path(os.path.relpath(mine))), "--oracle", "crash",
                     "--backend", plugin("crash_on_sin"), "--out", str(out), "--resume", "--no-verify")
    assert r.returncode == 0 and "replaying 2 journaled verdicts" in r.stderr + r.stdout, r.stderr[-2000:]
    assert json.loads(lines[0])["header"]["torch"] == torch.__version__


def test_journal_damage(tmp_path):
    """A torn last line is cut before the next verdict is appended (it was glued to it, and
    lost), and a whole one that lacks only its newline is kept; a line that is JSON but no
    verdict is skipped and counted (it made the resume refuse every verdict); an empty or
    cut-short header with nothing else of trtmin's beside it is a run that never started,
    which --force replaces; so is a whole header without a verdict, which the same command
    replaces."""
    import json

    import pytest

    from minimize.emit.journal import Journal
    from minimize.emit.out_dir import check_out_dir
    from oracles.errors import TrtminError
    from oracles.out_folder import header_digest
    from minimize.program.candidate import Candidate
    from oracles.verdict import Verdict
    header = {"model_sha256": "ab", "options": {"oracle": "crash"}}
    Journal(tmp_path, header, resume=False).record(Candidate((0, 1)), [Verdict("pass")])
    path = tmp_path / "journal.jsonl"
    path.write_bytes(path.read_bytes() + b'{"kept": [[0, 3]], "runs": [{"kind": "cr')  # killed mid-write
    j = Journal(tmp_path, header, resume=True)
    assert list(j.cache) == [Candidate((0, 1))]
    j.record(Candidate((0, 2)), [Verdict("crash", "E", "m")])
    j.close()
    assert set(Journal(tmp_path, header, resume=True).cache) == {Candidate((0, 1)), Candidate((0, 2))}
    whole_line = path.read_bytes().splitlines(keepends=True)[-1]
    path.write_bytes(path.read_bytes()[:-1])  # killed after the record, before its newline
    Journal(tmp_path, header, resume=True).close()
    assert path.read_bytes().endswith(whole_line)  # kept, and ended for the next one
    for bad in ("{}", "[]", '{"kept": [[0, 7]], "runs": [], "settings": []}', '{"kept": [[0, 7]], "ru\x00garbage', ""):
        # a damaged line costs its verdict only, and is said (not a torn tail: lines follow it)
        path.write_text(path.read_text() + bad + "\n" + path.read_text().splitlines(keepends=True)[1])
        j = Journal(tmp_path, header, resume=True)
        assert j.damaged == [4] and set(j.cache) == {Candidate((0, 1)), Candidate((0, 2))}
        j.close()
        path.write_text("".join(path.read_text().splitlines(keepends=True)[:3]))
    for start in ("", json.dumps({"header": header})[:30]):  # a disk full, a kill, as the header was written
        path.write_text(start)
        check_out_dir(tmp_path, resume=False, force=True)
        with pytest.raises(TrtminError, match="is damaged; start over with --force"):
            Journal(tmp_path, header, resume=True)
    # A run stopped before its first verdict leaves nothing to resume: the same command runs
    # again there (without --force). With a verdict it is an interrupted run; with its
    # summary.json (written last), a finished one.
    path.write_text(json.dumps({"header": header}) + "\n")
    check_out_dir(tmp_path, resume=False, force=False)
    Journal(tmp_path, header, resume=False).record(Candidate((0, 1)), [Verdict("pass")])
    with pytest.raises(TrtminError, match="holds an interrupted run; pass --resume to continue it"):
        check_out_dir(tmp_path, resume=False, force=False)
    (tmp_path / "summary.json").write_text(json.dumps({"journal_header_sha256": "another run's"}))
    with pytest.raises(TrtminError, match="holds an interrupted run"):
        check_out_dir(tmp_path, resume=False, force=False)
    (tmp_path / "summary.json").write_text(json.dumps({"journal_header_sha256": header_digest(path.read_text().splitlines()[0])}))
    with pytest.raises(TrtminError, match="holds a finished run .*--force to run again over it"):
        check_out_dir(tmp_path, resume=False, force=False)
    check_out_dir(tmp_path, resume=True, force=False)  # replayed: its outputs again, no oracle call (test_values)
    (tmp_path / "summary.json").unlink()
    # ... but not beside files of trtmin's names: an empty journal.jsonl may be the user's
    path.write_text("")
    (tmp_path / "repro.py").write_text("the user's")
    with pytest.raises(TrtminError, match=r"no trtmin run wrote them \(its journal.jsonl is no trtmin run's\)"):
        check_out_dir(tmp_path, resume=False, force=True)
    path.unlink()  # and without one: said so, not the other way round
    with pytest.raises(TrtminError, match=r"holds repro.py, .* \(there is no journal.jsonl of one\)"):
        check_out_dir(tmp_path, resume=False, force=True)


def test_one_run_at_a_time_in_a_folder_and_none_runs_its_files(host_program, tmp_path):
    """A second run into a folder a live run is writing (--force or --resume beside it)
    is refused before it writes anything: both had appended to one journal. Nor may a run
    take its backend from trtmin's own files there (an edited plugin.py)."""
    from minimize.emit.out_dir import held_by_this_run
    model, inputs = host_program
    args = ["--inputs", str(inputs), "--oracle", "crash", "--backend", plugin("crash_on_sin"), "--out", str(tmp_path),
            "--no-verify"]
    with held_by_this_run(tmp_path):  # as the live run holds it
        r = run_reduce(str(model), *args, "--force")
        assert_one_line_error(r, "is in use by another trtmin run")
        assert list(tmp_path.iterdir()) == []
    r = run_reduce(str(model), *args, "--force")
    assert r.returncode == 0 and (tmp_path / "repro.py").exists(), r.stderr[-2000:]
    # A live run's folder holds its journal: a run without flags was told it "holds an
    # interrupted run; pass --resume", which was refused next as in use
    import fcntl
    import os
    from minimize.emit.out_dir import check_out_dir
    from oracles.errors import TrtminError
    fd = os.open(tmp_path, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # as another process's run holds it
        for resume, force in ((False, False), (True, False), (False, True)):
            with pytest.raises(TrtminError, match="is in use by another trtmin run"):
                check_out_dir(tmp_path, resume, force)
    finally:
        os.close(fd)
    check_out_dir(tmp_path, resume=True, force=False)  # once it ends: resumable
    # The user edits the plugin.py copy beside repro.py and reduces with it into this folder
    # again: --force moved it aside (plugin.py.edited) while the workers loaded it, and the
    # run blamed the plugin ("fails the same way on one-op programs"); every run rewrites it
    plugin_copy = tmp_path / "plugin.py"
    plugin_copy.write_text(plugin_copy.read_text() + "# the user's tweak\n")
    before = sorted(p.name for p in tmp_path.iterdir())
    link = tmp_path.parent / f"{tmp_path.name}_link_to_plugin.py"  # a link to the copy is the copy
    link.symlink_to(plugin_copy)
    for backend, flags in ((plugin_copy, ["--force"]), (plugin_copy, ["--resume", "--force"]),
                           (plugin_copy, []), (link, ["--force"])):  # said first: --force would not mend it
        r = reduce_here(str(model), *args[:-5], "--backend", f"{backend}:crash_on_sin", "--out", str(tmp_path), *flags)
        assert_one_line_error(r, f"--backend runs {backend} is plugin.py in --out, a name this run writes over")
    assert sorted(p.name for p in tmp_path.iterdir()) == before and "the user's tweak" in plugin_copy.read_text()
    assert_one_line_error(reduce_here(str(model), *args[:-5], "--backend", f"cmd:{sys.executable} {plugin_copy} {{model}}",
                                      "--out", str(tmp_path), "--force"), "is plugin.py in --out, a name this run")


def test_a_model_or_inputs_under_trtmins_names_in_out_are_not_written_over(host_program, tmp_path):
    """Reducing an earlier run's reduced.pt2 into its own folder with --force replaced the
    very model being reduced (the user's only copy of it): refused first, as a plugin there."""
    model, inputs = host_program
    out = tmp_path / "run"
    out.mkdir()
    shutil.copy(model, out / "reduced.pt2")
    shutil.copy(inputs, out / "repro_inputs.pt")
    kept = {p.name: p.read_bytes() for p in out.iterdir()}
    for reads, flags in (([str(out / "reduced.pt2"), "--inputs", str(inputs)], ["--force"]),
                         ([str(model), "--inputs", str(out / "repro_inputs.pt")], ["--force"]),
                         ([str(out / "reduced.pt2"), "--inputs", str(inputs)], [])):
        r = reduce_here(*reads, "--oracle", "crash", "--backend", "inductor", "--out", str(out), *flags)
        name = "reduced.pt2" if "reduced.pt2" in reads[0] else "repro_inputs.pt"
        assert_one_line_error(r, f"is {name} in --out, a name this run writes over", "copy it out of")
    assert {p.name: p.read_bytes() for p in out.iterdir()} == kept
    (out / "my_model.pt2").write_bytes(kept["reduced.pt2"])  # a name of the user's own: read, never written
    from minimize.emit.out_dir import check_reads_outside
    check_reads_outside(out, "inductor", out / "my_model.pt2", inputs)


def test_a_journal_without_an_inputs_digest_still_compares_the_inputs_path(tmp_path):
    """Journals written before the inputs' digest was kept name their inputs by path: a
    resume with other inputs is refused as it was (it had been resumed, its verdicts made
    on the old inputs)."""
    import json

    import pytest

    from minimize.emit.journal import Journal
    from oracles.errors import TrtminError
    old = {"model_sha256": "ab", "options": {"oracle": "crash", "inputs": "/data/a.pt"}}
    (tmp_path / "journal.jsonl").write_text(json.dumps({"header": old}) + "\n")
    now = {"model_sha256": "ab", "inputs_sha256": "cd", "torch": "2.13", "options": {"oracle": "crash",
                                                                                     "inputs": "/data/b.pt"}}
    with pytest.raises(TrtminError, match="--inputs '/data/a.pt' there, --inputs '/data/b.pt' now"):
        Journal(tmp_path, now, resume=True)
    Journal(tmp_path, {**now, "options": {"oracle": "crash", "inputs": "/data/a.pt"}}, resume=True).close()


def test_a_run_that_wrote_the_folder_while_this_one_loaded_is_not_written_over(host_program, tmp_path):
    """The folder is checked before the model loads and locked after: a run started at the
    same moment may have written its journal in between (and ended). The check is made
    again under the lock."""
    import json

    import pytest

    from minimize.options import Options
    from minimize.reduce import reduce
    from oracles.errors import TrtminError
    model, inputs = host_program
    out = tmp_path / "out"
    theirs = json.dumps({"header": {"model_sha256": "theirs"}}) + "\n" + json.dumps(  # and its first verdict
        {"kept": [[0, 1]], "runs": [{"kind": "pass"}], "settings": []}) + "\n"

    def log(line: str) -> None:
        if line.startswith("loaded"):  # the other run writes now
            out.mkdir(exist_ok=True)
            (out / "journal.jsonl").write_text(theirs)

    opts = Options(model=model, inputs=inputs, oracle="crash", backend=plugin("crash_on_sin"), verify=False)
    with pytest.raises(TrtminError, match="holds an interrupted run; pass --resume"):
        reduce(opts, out, log=log)
    assert [p.name for p in out.iterdir()] == ["journal.jsonl"] and (out / "journal.jsonl").read_text() == theirs


def test_a_setting_the_plugin_function_does_not_take_is_refused(host_program, tmp_path):
    """--set reaches a plugin as a keyword argument: one the function lacks made every
    compile a TypeError, which --oracle crash reduced as if it were the bug."""
    model, inputs = host_program
    out = tmp_path / "o"
    r = run_cli_here("reduce", str(model), "--inputs", str(inputs), "--backend", plugin("crash_on_sin"), "--oracle",
                     "crash", "--set", "min_block_size=1", "--out", str(out))
    assert_one_line_error(r, "--set min_block_size", "crash_on_sin", "no keyword argument 'min_block_size'")
    assert not (out / "repro.py").exists()
    assert_one_line_error(check_here(str(model), "--backend", plugin("crash_on_sin"), "--set", "x=1"),
                          "no keyword argument 'x'")


def test_a_plugins_settings_reach_it_as_the_values_they_spell(tmp_path):
    """--set KEY=VALUE reaches a plugin as a keyword argument: true/false as booleans, an
    integer as an int (a level a plugin counts with), other numbers as floats, the rest as
    text; a function with **kwargs takes any, one without names the settings it takes."""
    from oracles.backends.plugin import PluginBackend, parse_setting
    from oracles.errors import TrtminError
    values = [parse_setting(v) for v in ("true", "False", "3", "-2", "0.5", "1e-3", "fast")]
    assert values == [True, False, 3, -2, 0.5, 0.001, "fast"]
    assert [type(v) for v in values] == [bool, bool, int, int, float, float, str]
    path = tmp_path / "my_compiler.py"
    path.write_text("def loose(gm, example_inputs, **options):\n    return gm\n\n\n"
                    "def strict(gm, example_inputs, *, level=0):\n    return gm\n")
    PluginBackend(f"{path}:loose", {"anything": "1"}).validate()
    PluginBackend(f"{path}:strict", {"level": "2"}).validate()
    with pytest.raises(TrtminError, match=r"has no keyword argument 'anything' \(it takes level\)"):
        PluginBackend(f"{path}:strict", {"anything": "1"}).validate()


def test_a_plugins_settings_reach_its_partitions_too(tmp_path):
    """partitions(gm, example_inputs, **settings) names the engines the compile with those
    settings builds (a min_block_size changes them): it gets the same --set values."""
    from oracles.backends.plugin import PluginBackend
    path = tmp_path / "engines.py"
    path.write_text("def compile(gm, example_inputs, min_block_size=3):\n    return gm\n\n\n"
                    "def partitions(gm, example_inputs, min_block_size=3):\n    return [['block of', min_block_size]]\n")
    assert PluginBackend(f"{path}:compile", {"min_block_size": "1"}).partitions(None, []) == [["block of", 1]]
    assert PluginBackend(f"{path}:compile").partitions(None, []) == [["block of", 3]]


def test_a_run_with_nothing_to_reduce_leaves_the_folder_free(host_program, tmp_path):
    """The original does not fail the oracle: the corrected command, into the same --out,
    must not be refused as 'holds another run' (its journal held one verdict, a pass)."""
    model, inputs = host_program
    args = ("reduce", str(model), "--inputs", str(inputs), "--backend", plugin("crash_on_sin"))
    out = tmp_path / "o" / "deeper" / "out"  # a typo's path: none of the folders it made stays
    assert_one_line_error(run_cli_here(*args, "--oracle", "mismatch", "--out", str(out)), "try --oracle crash")
    assert not (tmp_path / "o").exists()
    slow = ("reduce", str(model), "--inputs", str(inputs), "--backend", plugin("hang_on_tanh"), "--timeout", "3")
    assert_one_line_error(run_cli_here(*slow, "--oracle", "crash", "--out", str(tmp_path / "slow")),
                          "no result within --timeout 3 s", "raise --timeout", "try --oracle hang")
    assert not out.exists()  # this run made it: nothing of it is left
    mine = tmp_path / "mine"
    mine.mkdir()
    assert_one_line_error(run_cli_here(*args, "--oracle", "nan", "--out", str(mine)), "does not fail the nan oracle")
    assert mine.is_dir() and not list(mine.iterdir())  # the user's folder stays, empty as it was
    # --force over a finished run, with a question the original does not fail: the finished
    # run's journal stays, so its outputs are still its own (repros add took them as orphans)
    done = tmp_path / "done"
    assert run_cli_here(*args, "--oracle", "crash", "--out", str(done), "--no-verify").returncode == 0
    before = (done / "journal.jsonl").read_bytes()
    assert_one_line_error(run_cli_here(*args, "--oracle", "nan", "--out", str(done), "--force"),
                          "does not fail the nan oracle")
    assert (done / "journal.jsonl").read_bytes() == before
    from repros.suite import add_repro
    assert (add_repro(done, "sin", tmp_path / "suite") / "repro.py").is_file()




def test_force_keeps_an_earlier_runs_files_out_of_the_new_runs_repro(host_program, tmp_path):
    """--force over a run with a plugin file and --emit: the new run writes neither. The old
    plugin.py and repro_executorch_portable.py (another bug's script, reading the new
    repro_inputs.pt) stay, as --force deletes nothing (an earlier fix that deleted them
    also deleted a user's edited plugin.py that was being run); the CLI names them, and
    `repros add` saves only what the new run wrote (summary.json's files)."""
    from repros.suite import add_repro

    model, inputs = host_program
    out = tmp_path / "o"
    args = ["reduce", str(model), "--inputs", str(inputs), "--oracle", "crash", "--out", str(out), "--no-verify"]
    r = run_cli_here(*args, "--backend", plugin("crash_on_sin"), "--emit", "executorch:portable")
    assert r.returncode == 0, r.stderr[-2000:]
    first = json.loads((out / "summary.json").read_text())["files"]
    assert "plugin.py" in first and "repro_executorch_portable.py" in first and "journal.jsonl" not in first
    emitted = (out / "repro_executorch_portable.py").read_text()  # no backend in its title: it never ran the bug
    assert emitted.startswith('"""crash on cpu: sin.default [Emitted for executorch:portable') and \
        "planted.py:crash_on_sin." in " ".join(emitted.split()) and str(ROOT) not in emitted, emitted[:600]
    (out / "notes.txt").write_text("mine")
    edited = (out / "repro.py").read_text() + "# my fix\n"  # the user's edit of the earlier run's script
    (out / "repro.py").write_text(edited)
    (out / "model.onnx").write_text("my own")  # trtmin's name, which the run there did not write: the user's
    r = run_cli_here(*args, "--backend", "tests.plugins.planted:crash_on_sin", "--force")  # a module: no plugin.py
    assert r.returncode == 0, r.stderr[-2000:]
    said = " ".join((r.stdout + r.stderr).split())
    assert "note: repro.py was edited since trtmin wrote it; --force keeps that copy as repro.py.edited" in said, said
    assert (out / "repro.py.edited").read_text() == edited and "# my fix" not in (out / "repro.py").read_text()
    assert "note: model.onnx was not written by the run there; --force keeps that copy as model.onnx.edited" in said
    assert (out / "model.onnx.edited").read_text() == "my own"
    from oracles.out_folder import is_ours  # a kept copy is the user's, whatever its name was
    assert not is_ours("repro_cmd_run.py.edited") and not is_ours("repro.py.edited.2") and is_ours("repro_cmd_run.py")
    assert "note: plugin.py, repro_executorch_portable.py in " in said and "are from an earlier run, not this one (a " \
        "run writes over trtmin's files, it deletes none)" in said, said  # not "--force", which a --resume lacks
    files = json.loads((out / "summary.json").read_text())["files"]
    assert "plugin.py" not in files and "repro_executorch_portable.py" not in files and "repro.py" in files
    assert (out / "notes.txt").read_text() == "mine" and (out / "plugin.py").is_file()  # nothing deleted
    saved = {p.name for p in add_repro(out, "sin", tmp_path / "suite").iterdir()}
    assert "plugin.py" not in saved and "repro_executorch_portable.py" not in saved and "repro.py" in saved, saved
    (out / "repro_tensorrt.py").write_text("mine too")  # a replay of that run with --emit tensorrt: kept
    r = run_cli_here(*args, "--backend", "tests.plugins.planted:crash_on_sin", "--resume", "--emit", "tensorrt")
    assert r.returncode == 0 and (out / "repro_tensorrt.py.edited").read_text() == "mine too", r.stderr[-2000:]
    assert "not written by the run there; --resume keeps that copy as repro_tensorrt.py.edited" in \
        " ".join(r.stderr.split()), r.stderr[-2000:]
    assert "repro_tensorrt.py" in json.loads((out / "summary.json").read_text())["files"]


def test_an_out_name_the_file_system_refuses_is_one_line(host_program, tmp_path):
    """A name over the file system's 255 bytes made pathlib's exists() raise: a traceback."""
    model, inputs = host_program
    out = tmp_path / ("o" * 300)
    r = run_cli("reduce", str(model), "--inputs", str(inputs), "--backend", plugin("crash_on_sin"), "--oracle",
                "crash", "--out", str(out))
    assert_one_line_error(r, "cannot be used", "File name too long", "choose another folder")


def test_what_is_mistaken_for_a_pt2_is_named(host_program, tmp_path):
    """The compiled program a bug starts from (.pte), the inputs file given as the model, a
    module saved with torch.save or torch.jit.save: each was 'not a .pt2 archive' or 'could
    not be loaded (... check the warnings above)', which did not say what to export."""
    model, inputs = host_program
    assert_one_line_error(check_here(str(inputs)), "written by torch.save", "torch.export.export(model, args)")
    ts = tmp_path / "model.pt"
    torch.jit.save(torch.jit.script(torch.nn.Linear(2, 2)), str(ts))
    assert_one_line_error(check_here(str(ts)), "TorchScript archive")
    pytest.importorskip("executorch")
    from executorch.exir import to_edge
    pte = tmp_path / "model.pte"
    pte.write_bytes(to_edge(torch.export.load(str(model))).to_executorch().buffer)
    assert_one_line_error(check_here(str(pte)), "ExecuTorch program (.pte)", "torch.export.save(ep")


def test_oracle_and_backend_are_the_question_and_have_no_default(host_program):
    """--oracle and --backend silently defaulted to mismatch and inductor: a user who gave
    neither got an answer to a question they had not asked."""
    model, inputs = host_program
    for command in ("check", "reduce"):
        r = run_cli(command, str(model), "--inputs", str(inputs))
        assert_one_line_error(r, "--oracle and --backend are required", f"trtmin {command} model.pt2 --oracle")
    r = run_cli("check", str(model), "--inputs", str(inputs), "--oracle", "crash")
    assert_one_line_error(r, "--backend is required")


def test_every_option_with_a_metavar_names_its_flag():
    """typer before 0.28 takes an Option's metavar for its name (`--BACKEND`, and then
    `--backend` is "No such option", as on the GPU machine's typer 0.27.2): every option
    that sets a metavar names its flag itself."""
    import ast
    tree = ast.parse((Path(__file__).resolve().parent.parent / "minimize" / "cli.py").read_text())
    unnamed = [node.lineno for node in ast.walk(tree)
               if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "Option"
               and any(k.arg == "metavar" for k in node.keywords)
               and not (node.args and isinstance(node.args[0], ast.Constant) and str(node.args[0].value).startswith("--"))]
    assert not unnamed, f"typer.Option with a metavar and no --flag at minimize/cli.py lines {unnamed}"


def test_a_disk_too_full_for_reduced_pt2_is_one_line_not_an_abort(tmp_path):
    """torch's archive writer aborts the process when the disk fills (a C++ exception from
    a destructor: exit 134 and a C++ stack, the run's state left in /tmp): trtmin sees the
    archive will not fit first and says so, with the fix. It counts storages, as the
    archive holds them: a view's whole base, tied weights once."""
    from minimize.emit.outputs import atomic_torch_save, write_reduced
    from oracles.errors import TrtminError
    small = tmp_path / "small"
    small.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(small)], capture_output=True).returncode:
        pytest.skip("no tmpfs can be mounted here")

    class Held(torch.nn.Module):
        def __init__(self, *weights: torch.Tensor):
            super().__init__()
            for i, w in enumerate(weights):
                self.register_buffer(f"w{i}", w)

        def forward(self, x):
            return sum(x * w[:4] for w in self.buffers())

    x = torch.randn(4)
    try:
        big = torch.randn(512 * 1024)  # 2 MiB, of which the program holds a view of 16 values
        with pytest.raises(TrtminError, match=r"cannot write .*reduced\.pt2 \(about 2\.3 MiB, and 1\.0 MiB are free "
                                              r"on its disk\); free space or choose another --out"):
            write_reduced(small, torch.fx.symbolic_trace(Held(big[:16])), [x])
        assert not (small / "reduced.pt2").exists()
        tied = torch.randn(100 * 1024)  # 400 KiB held twice: one storage, 400 KiB in the archive
        write_reduced(small, torch.fx.symbolic_trace(Held(tied, tied)), [x])
        assert (small / "reduced.pt2").stat().st_size < 600 * 1024
        (small / "reduced.pt2").unlink()
        with pytest.raises(OSError, match="writing repro_inputs.pt fell short: is its disk full"):  # not torch's words
            atomic_torch_save({"x": torch.randn(512, 1024)}, small / "repro_inputs.pt")
        assert list(small.iterdir()) == []  # no temporary left
    finally:
        subprocess.run(["umount", str(small)], capture_output=True)


def test_an_interrupted_run_made_otherwise_is_not_offered_a_resume_that_would_be_refused(tmp_path):
    """The folder of an interrupted `--no-localize` run, and the command again without it:
    "pass --resume" led to "--resume: ... made with other options (--localize False there,
    True now)". The first refusal now names the difference, as the flags are written."""
    from minimize.emit.out_dir import check_out_dir
    from minimize.emit.run_header import VERDICT_FORMAT
    from oracles.errors import TrtminError
    then = {"model_sha256": "ab", "options": {"oracle": "crash", "localize": False, "timeout": 300.0},
            "compilers": {"executorch": "1.4.1"}, "verdict_format": VERDICT_FORMAT}
    (tmp_path / "journal.jsonl").write_text(json.dumps({"header": then}) + "\n" + '{"runs": []}\n')
    same = {k: v for k, v in then.items() if k != "model_sha256"}  # what is known before the model loads
    with pytest.raises(TrtminError, match="holds an interrupted run; pass --resume to continue it"):
        check_out_dir(tmp_path, resume=False, force=False, header=lambda: same)
    now = {**same, "options": {**same["options"], "localize": True}}
    with pytest.raises(TrtminError, match=r"holds an interrupted run made with other options \(--no-localize there, "
                                          r"--localize now\); rerun with its arguments and --resume to continue it, "
                                          r"pass --force to replace it, or choose another folder"):
        check_out_dir(tmp_path, resume=False, force=False, header=lambda: now)
    flags = {**same, "options": {**same["options"], "imports": ["mylib"], "match": "x", "settings": {"a": 1}}}
    before = {**same, "options": {**same["options"], "imports": [], "match": None, "settings": {}}}
    journaled = lambda header: (tmp_path / "journal.jsonl").write_text(  # noqa: E731
        json.dumps({"header": {"model_sha256": "ab", **header}}) + "\n" + '{"runs": []}\n')
    journaled(before)
    with pytest.raises(TrtminError, match=r"\(no --import there, --import mylib now; no --match there, --match 'x' "
                                          r"now; no --set there, --set a=1 now\)"):  # as the flags are written
        check_out_dir(tmp_path, resume=False, force=False, header=lambda: flags)
    other_inputs = {**before, "inputs_sha256": "cd"}
    journaled({**before, "inputs_sha256": "ab"})
    with pytest.raises(TrtminError, match=r"with other inputs \(the --inputs file's contents differ\); pass --force"):
        check_out_dir(tmp_path, resume=False, force=False, header=lambda: other_inputs)  # no --resume to offer
    (tmp_path / "journal.jsonl").write_text(json.dumps({"header": then}) + "\n" + '{"runs": []}\n')
    upgraded = {**same, "compilers": {"executorch": "1.6.0"}}  # no argument gives the old compiler back
    with pytest.raises(TrtminError, match=r"made with executorch 1\.4\.1 \(this is 1\.6\.0\): its verdicts are that "
                                          r"compiler's; pass --force to replace it"):
        check_out_dir(tmp_path, resume=False, force=False, header=lambda: upgraded)


def test_a_program_that_computes_nothing_and_sparse_inputs_are_one_line(host_program, tmp_path):
    """An adversarial trial's finds: a program returning its input (no call node) made
    check say "CRASH: Signal: SIGKILL" of eager itself and reduce raise "empty candidate";
    a sparse input (COO or CSR) raised "Cannot access storage of SparseTensorImpl"."""
    class Identity(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x

    model, inputs = save_program(Identity(), (torch.randn(2),), tmp_path, "identity")
    for command in (check_here, reduce_here):
        extra = ("--out", str(tmp_path / "out")) if command is reduce_here else ()
        assert_one_line_error(command(str(model), "--inputs", str(inputs), "--oracle", "crash", "--backend", "eager",
                                      *extra), "computes nothing: its graph has no call nodes")
    assert not (tmp_path / "out").exists()
    host, _ = host_program
    for layout in ("coo", "csr"):
        x = torch.randn(4, 8)
        torch.save((x.to_sparse() if layout == "coo" else x.to_sparse_csr(),), tmp_path / f"{layout}.pt")
        assert_one_line_error(check_here(str(host), "--inputs", str(tmp_path / f"{layout}.pt")),
                              f"input 'x' in {tmp_path / f'{layout}.pt'} is a sparse tensor (torch.sparse_{layout})",
                              ".to_dense()")


def test_an_emit_given_twice_runs_once(host_program):
    """--emit tensorrt --emit tensorrt wrote and ran the script twice, and listed it twice."""
    from minimize.arguments import build_options
    model, inputs = host_program
    opts = build_options(model, "crash", "inductor", inputs, None, 1e-3, 1e-3, 60.0, "cpu",
                         emit=["tensorrt", "executorch:portable", "tensorrt"])
    assert opts.emit == ["tensorrt", "executorch:portable"]


def test_a_full_disk_under_the_workers_state_is_one_line(tmp_path, monkeypatch):
    """TMPDIR on a small tmpfs: torch.save of the program's values raised
    'basic_ios::clear: iostream error' (a traceback, exit 1) in the adversarial trial."""
    from minimize.program.model import Program
    from minimize.run import worker_side
    from oracles.errors import TrtminError

    x = torch.randn(4, 8)
    program = Program(torch.export.export(torch.nn.Linear(8, 2), (x,)).run_decompositions({}), [x])
    (tmp_path / "state").mkdir()

    def full(*args, **kwargs):
        raise RuntimeError("basic_ios::clear: iostream error")
    monkeypatch.setattr(worker_side.torch, "save", full)
    with pytest.raises(TrtminError, match=r"cannot write the program's values for the workers into .*\(basic_ios::clear: "
                                          r"iostream error\); free space there, or set TMPDIR"):
        worker_side.save_state(program, tmp_path / "state")
    assert not (tmp_path / "state" / worker_side.READY_FILE).exists()  # no worker starts on half a state


def test_torch_compile_switched_off_is_refused_where_it_would_read_as_fixed(host_program, tmp_path, monkeypatch):
    """With TORCHDYNAMO_DISABLE=1 (or TORCH_COMPILE_DISABLE=1) Inductor runs eager PyTorch:
    every repro of the suite read FIXED and a reduction found no bug. Refused in one line for a
    backend that compiles through torch.compile; a built-in that does not is left to run."""
    model, inputs = host_program
    monkeypatch.setenv("TORCHDYNAMO_DISABLE", "1")
    assert_one_line_error(check_here(str(model), "--inputs", str(inputs)), "TORCHDYNAMO_DISABLE=1 switches "
                          "torch.compile off", "unset TORCHDYNAMO_DISABLE")
    assert_one_line_error(run_cli_here("repros", "run", "--suite", str(tmp_path)), "TORCHDYNAMO_DISABLE=1",
                          "the eager control run is TRTMIN_BACKEND=eager")
    from oracles.backend_names import check_compile_on
    check_compile_on("executorch:xnnpack")  # no torch.compile in it: no reason to refuse
    check_compile_on("cmd:trtexec --onnx={onnx}")  # a command of its own
    monkeypatch.setenv("TORCHDYNAMO_DISABLE", "0")
    check_compile_on("inductor")


def test_resume_takes_the_same_plugin_file_by_another_path():
    """The inputs resumed by their contents under any path, a plugin file only by its path
    as typed: `plug.py:fn` from its folder was "other options" than `/abs/plug.py:fn`. Its
    contents (plugin_sha256) decide now, and its function still counts."""
    from minimize.emit.run_header import _recorded_by_both
    header = lambda spec, digest="ab" * 32: {"plugin_sha256": digest, "options": {"backend": spec, "atol": 0.001}}
    then = header("/tmp/work/plug.py:crash_tanh")
    same = _recorded_by_both(then, header("plug.py:crash_tanh"))
    assert same[0] == same[1]
    for other in (header("plug.py:crash_sin"), header("plug.py:crash_tanh", "cd" * 32)):
        cut = _recorded_by_both(then, other)
        assert cut[0] != cut[1], other


def test_version_names_the_commit_of_a_checkout(tmp_path):
    """Every commit is 0.1.0: `trtmin --version`, report.md, repro.py and `repros run --json`
    name the commit where trtmin runs from a git checkout (this one: its HEAD, read from
    .git's files), so results from two checkouts can be told apart. A submodule's or a
    worktree's .git file may name its folder relative to itself; a copy without .git, or a
    HEAD that is no commit, says the version alone."""
    import minimize
    from oracles.environment import _git_commit

    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    if head.returncode != 0 or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    r = run_cli_here("--version")
    assert (r.returncode, r.stdout.strip()) == (0, f"trtmin {minimize.__version__} (git {head.stdout.strip()[:7]})"), r
    sha = "0123456789abcdef" * 2 + "01234567"
    real = tmp_path / "super" / ".git" / "modules" / "sub"
    real.mkdir(parents=True)
    (real / "HEAD").write_text("ref: refs/heads/main\n")
    (real / "packed-refs").write_text(f"# pack-refs with: peeled\n{sha} refs/heads/main\n^{'f' * 40}\n")
    checkout = tmp_path / "super" / "sub"
    checkout.mkdir()
    (checkout / ".git").write_text("gitdir: ../.git/modules/sub\n")
    assert _git_commit(checkout) == sha  # relative to the .git file, from any working directory
    (real / "HEAD").write_text("garbage\n")
    assert _git_commit(checkout) is None
    assert _git_commit(tmp_path) is None  # no .git: the version alone


def test_a_full_disk_mid_journal_is_one_line_not_a_traceback(tmp_path):
    """The disk fills while a verdict's line is written: the write says so in one line, and
    the close that follows (the `finally` of the run) flushes the line's rest into the full
    disk again. Its OSError replaced the one-line error with a 257-line traceback, exit 1
    (the resilience trial, on a 4 KiB tmpfs)."""
    import errno

    from minimize.emit.journal import Journal
    from minimize.program.candidate import Candidate
    from oracles.errors import TrtminError
    from oracles.verdict import Verdict

    class FullDisk:
        """A buffered file whose disk is full: what is written stays in its buffer."""

        def write(self, text: str) -> int:
            return len(text)

        def flush(self) -> None:
            raise OSError(errno.ENOSPC, "No space left on device")

        def fileno(self) -> int:
            raise AssertionError("flush fails first")

        close = flush

    journal = Journal(tmp_path, {"model_sha256": "ab" * 32}, resume=False)
    journal._file.close()
    journal._file = FullDisk()
    with pytest.raises(TrtminError, match=r"cannot write .*journal.jsonl \(No space left on device\); free space.*"
                                          r"rerun with --resume"):  # not --force: the verdicts so far are kept
        journal.record(Candidate((1, 2)), [Verdict("pass")])
    journal.close()  # the error said already, not a second one
    healthy = Journal(tmp_path / "other", {"model_sha256": "ab" * 32}, resume=False)
    healthy._file.close()
    healthy._file = FullDisk()
    with pytest.raises(OSError):  # a close that fails where no write did is not swallowed
        healthy.close()


def test_a_resumed_journal_counts_every_earlier_session_and_a_damaged_last_line(tmp_path):
    """Two sessions before this one (10 s, then 5 s): the run's time is their sum, not the
    longest. A whole last line that is not JSON is damage to say, not a line cut short by a
    kill (which has no newline)."""
    from minimize.emit.journal import Journal
    from minimize.program.candidate import Candidate
    from oracles.verdict import Verdict

    header = {"model_sha256": "ab" * 32, "options": {"oracle": "crash"}}
    Journal(tmp_path, header, resume=False).close()
    path = tmp_path / "journal.jsonl"
    records = [{**Candidate((0, i)).record(), "runs": [Verdict("pass").to_dict()], "session": session,
                "elapsed": elapsed} for i, (session, elapsed) in enumerate([(1, 10.0), (2, 5.0)], start=1)]
    path.write_text(path.read_text() + "".join(json.dumps(r) + "\n" for r in records))
    journal = Journal(tmp_path, header, resume=True)
    assert (journal.session, journal.earlier_seconds, journal.damaged) == (3, 15.0, [])
    journal.close()
    path.write_text(path.read_text() + "not json\n")
    journal = Journal(tmp_path, header, resume=True)
    assert journal.damaged == [len(path.read_text().splitlines())]
    journal.close()


def test_a_failed_write_names_the_fix_its_cause_asks_for():
    """Every write error at the end said "free space": a folder made read-only too
    ("Operation not permitted; free space"), and a plugin file deleted mid-run, whose copy
    failed ("No such file or directory; free space"), without naming the file."""
    import errno

    from oracles.errors import write_failure

    said = {code: str(write_failure("the results into /o", OSError(code, os.strerror(code), *names), "rerun"))
            for code, names in ((errno.ENOSPC, ()), (errno.EPERM, ("/o/report.md",)), (errno.ENOENT, ("/w/p.py",)),
                                (errno.EIO, ()))}
    assert said[errno.ENOSPC] == "cannot write the results into /o (No space left on device); free space on its disk, " \
        "then rerun"
    assert said[errno.EPERM] == ("cannot write the results into /o (Operation not permitted: /o/report.md); fix the "
                                 "permissions of /o/report.md (or the disk's, if it is mounted read-only), then rerun")
    assert said[errno.ENOENT] == ("cannot write the results into /o (No such file or directory: /w/p.py); put back "
                                  "/w/p.py, then rerun")
    assert said[errno.EIO] == "cannot write the results into /o (Input/output error); mend what the error names, then " \
        "rerun"
    # a copy's full disk names the file it read: the disk to free is the folder's it wrote to
    copied = write_failure("the results into /o", OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), "/w/p.py"), "rerun")
    assert str(copied) == said[errno.ENOSPC], copied


@pytest.mark.parametrize("copier", ["copy_files", "tensorrt_script", "save_npz"])
def test_a_copy_that_meets_a_full_disk_leaves_no_temporary(tmp_path, monkeypatch, copier):
    """A full disk while the plugin file was copied beside repro.py left `.plugin.py.tmp`,
    half-written, in --out (a bug hunt, on a 20 KiB tmpfs): as every other file trtmin
    writes, a copy that fails leaves the old file or none, and no temporary; so does
    TensorRT's model_io file (np.savez; a review found its temporary left)."""
    import errno
    import shutil

    import numpy as np

    from minimize.emit import outputs
    from oracles.backends import tensorrt_script

    def savez_full(target, **arrays):
        Path(str(target)).write_bytes(b"PK half")
        raise OSError(errno.ENOSPC, "No space left on device")

    if copier == "save_npz":
        monkeypatch.setattr(np, "savez", savez_full)
        out = tmp_path / "out"
        out.mkdir()
        with pytest.raises(OSError):
            tensorrt_script.save_npz(out / "model_io.npz", {"x": torch.ones(2)}, [torch.ones(2)])
        assert list(out.iterdir()) == []
        return

    src = tmp_path / "plugin_src.py"
    src.write_text("x = 1\n" * 1000)
    out = tmp_path / "out"
    out.mkdir()

    def full_disk(source, target):  # half of it written, then the disk is full
        Path(target).write_text(Path(source).read_text()[:100])
        raise OSError(errno.ENOSPC, "No space left on device", str(source))

    monkeypatch.setattr(shutil, "copyfile", full_disk)
    with pytest.raises(OSError):
        if copier == "copy_files":
            outputs.copy_files(out, {"plugin.py": src})
        else:
            tensorrt_script._atomic_copy(src, out / "model.onnx")
    assert list(out.iterdir()) == []


def test_a_run_over_a_finished_one_moves_aside_only_what_that_run_did_not_write(tmp_path):
    """--force (or --resume's replay) over a finished run moves aside, as NAME.edited, the
    files under trtmin's names that run did not write (a user's, an older run's): not its
    own summary.json, which its `files` list does not name (it is written last, of them
    all). A stray summary.json.edited read as a user's file kept."""
    from minimize.emit.out_dir import keep_edited
    from oracles.out_folder import header_digest

    header = json.dumps({"header": {"model_sha256": "ab", "options": {}}})
    (tmp_path / "journal.jsonl").write_text(header + "\n" + '{"runs": []}\n')
    (tmp_path / "repro.py").write_text("print('REPRODUCED: x')\n")
    (tmp_path / "report.md").write_text("an older run's report\n")  # not in this run's files
    (tmp_path / "summary.json").write_text(json.dumps({"journal_header_sha256": header_digest(header),
                                                       "files": ["repro.py"]}))
    assert keep_edited(tmp_path) == [("report.md", "report.md.edited", False)]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["journal.jsonl", "report.md.edited", "repro.py",
                                                          "summary.json"]


def test_a_resume_takes_other_jobs_emit_and_verify(tmp_path):
    """--jobs, --emit and --verify change no verdict (the result is the same for any
    --jobs): a run interrupted with one value resumes with another; --timeout changes a
    verdict and is named."""
    import dataclasses

    from minimize.emit.run_header import header_before_loading, resume_difference
    from minimize.options import Options

    opts = Options(model=tmp_path / "model.pt2", oracle="crash")
    (tmp_path / "journal.jsonl").write_text(json.dumps({"header": {"model_sha256": "ab", **header_before_loading(opts)}})
                                            + "\n" + '{"runs": []}\n')
    for other in ({"jobs": 4}, {"emit": ["tensorrt"]}, {"verify": False}):
        now = header_before_loading(dataclasses.replace(opts, **other))
        assert resume_difference(tmp_path, now) is None, other
    slower = header_before_loading(dataclasses.replace(opts, timeout=60.0))
    assert "--timeout 300.0 there, --timeout 60.0 now" in resume_difference(tmp_path, slower)[0]


def test_resume_compares_what_an_older_journal_recorded_and_names_another_torch():
    """A journal from before an option was recorded resumes with that option at its default,
    not off it (--reference float64 judges otherwise); one from before the program's digest
    compares the model file's bytes (else any model resumed it); another torch is named,
    with the fix no argument gives."""
    from minimize.emit.run_header import START_OVER, _difference, _recorded_by_both

    old = {"model_sha256": "ab", "options": {"oracle": "mismatch"}}
    for reference, same in (("eager", True), ("float64", False)):
        then, now = _recorded_by_both(old, {"model_sha256": "ab", "options": {"oracle": "mismatch", "reference": reference}})
        assert (then == now) == same, (reference, then, now)
    then, now = _recorded_by_both(old, {"model_sha256": "cd", "program_sha256": "ef", "options": {"oracle": "mismatch"}})
    assert _difference(then, now)[0].startswith("from another model (the model file's contents differ"), (then, now)
    assert _difference({"torch": "2.13.0"}, {"torch": "2.14.0"}) == ("with torch 2.13.0 (this is 2.14.0)", START_OVER)


def test_a_bare_command_shows_its_help_not_an_error():
    """`trtmin` and `trtmin repros` alone are someone finding their way: the help, with the
    commands to choose from (exit 2, as click gives it), not a one-line usage error."""
    for args, commands in (((), ("reduce", "check", "repros")), (("repros",), ("add", "run", "list"))):
        r = run_cli_here(*args)
        assert r.returncode == 2 and f"Usage: trtmin {' '.join(args)}".rstrip() in r.stdout, (args, r.stdout, r.stderr)
        assert all(f" {c} " in r.stdout for c in commands) and "error:" not in r.stderr, (args, r.stdout, r.stderr)


def test_a_grad_region_torch_cannot_load_back_says_how_to_write_it(tmp_path):
    """`with torch.set_grad_enabled(False):` in forward exports (torch 2.13) to a .pt2 that
    torch.export.load itself cannot read back: trtmin said "re-export it with
    torch.export.export and torch.export.save", which is what wrote it (a bug hunt). The fix
    is the region written as `with torch.no_grad():`, which loads. A torch that reads it
    back needs no such words: then the program is checked as any other."""
    class GradRegion(torch.nn.Module):
        def forward(self, x):
            with torch.set_grad_enabled(False):
                h = torch.tanh(x)
            return h * 2

    torch.export.save(torch.export.export(GradRegion(), (torch.randn(4, 8),)), str(tmp_path / "m.pt2"))
    try:
        torch.export.load(str(tmp_path / "m.pt2"))
        loads = True
    except Exception:  # noqa: BLE001 - torch's own error for its own file: the bug this test is about
        loads = False
    r = check_here(str(tmp_path / "m.pt2"), "--oracle", "crash", "--backend", "eager")
    if loads:
        assert r.returncode == 0, r.stdout + r.stderr
    else:
        assert_one_line_error(r, "cannot read back the `with torch.set_grad_enabled(...)` region",
                              "write it as `with torch.no_grad():` and export again")


def test_a_region_in_an_autocast_torch_cannot_load_back_says_to_save_it_inlined(tmp_path):
    """A no_grad region inside an autocast one exports (torch 2.13) to a .pt2 torch.export.load
    cannot read back ("Node.meta wrap_with_autocast_1 is missing val field"); trtmin said
    "re-export it with torch.export.export and torch.export.save", what wrote it (a hunt).
    The fix it names, the program saved with its regions inlined, loads and checks."""
    class Nested(torch.nn.Module):
        def forward(self, x):
            with torch.autocast("cpu", dtype=torch.bfloat16):
                h = torch.tanh(x)
                with torch.no_grad():
                    h2 = h.float() * 2
            return h2

    x = torch.randn(4, 8)
    ep = torch.export.export(Nested(), (x,))
    torch.export.save(ep, str(tmp_path / "m.pt2"))
    try:
        torch.export.load(str(tmp_path / "m.pt2"))
        pytest.skip("this torch reads the region back: nothing to refuse")
    except Exception:  # noqa: BLE001 - torch's own error for its own file: the bug this test is about
        pass
    assert_one_line_error(check_here(str(tmp_path / "m.pt2"), "--oracle", "crash", "--backend", "eager"),
                          "cannot read back the `torch.autocast` region", "torch.export.save(ep.run_decompositions({})")
    torch.export.save(ep.run_decompositions({}), str(tmp_path / "inlined.pt2"))
    r = check_here(str(tmp_path / "inlined.pt2"), "--oracle", "crash", "--backend", "eager")
    assert r.returncode == 0, r.stdout + r.stderr


def test_an_effectful_call_is_named_not_the_token_torch_threads_it_through(tmp_path):
    """A print beside a buffer update: the functional form trtmin makes threads the print
    through a token input, and trtmin said "input token is a TOKEN ... export the model
    without custom objects or tokens", though the user's export had none (a hunt)."""
    class Prints(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("n", torch.zeros(()))

        def forward(self, x):
            torch.ops.aten._print("step")
            self.n.add_(1)
            return x * 2

    model, _ = save_program(Prints(), (torch.randn(4),), tmp_path, "prints")
    assert_one_line_error(check_here(str(model)), "the program calls aten._print.default for its side effect",
                          "export the model without that call")


def test_a_plugin_in_out_under_its_own_name_runs_but_not_one_that_imports_trtmins_copy(tmp_path):
    """A plugin file the user keeps in --out under a name of their own is theirs: the run
    takes it. One that imports trtmin's copy of a plugin module there (repro_plugin_NAME.py,
    which the run writes over, or --force moves aside) is refused as plugin.py is."""
    from minimize.emit.out_dir import check_reads_outside
    from oracles.errors import TrtminError
    out = tmp_path / "out"
    out.mkdir()
    (out / "my_compiler.py").write_text("def compile(gm, example_inputs):\n    return gm\n")
    check_reads_outside(out, f"{out / 'my_compiler.py'}:compile")  # the user's own name: not refused
    (out / "repro_plugin_helpers.py").write_text("SCALE = 2\n")
    (out / "uses_copy.py").write_text("import repro_plugin_helpers\n\n\n"
                                      "def compile(gm, example_inputs):\n    return gm\n")
    with pytest.raises(TrtminError, match="is repro_plugin_helpers.py in --out, a name this run writes over"):
        check_reads_outside(out, f"{out / 'uses_copy.py'}:compile")


def test_hidden_files_do_not_make_an_out_folder_someone_elses(tmp_path):
    """A folder holding only dot files (.gitignore, .DS_Store, an editor's swap file) is
    an empty one to a run: no --force asked for."""
    from minimize.emit.out_dir import check_out_dir
    from oracles.errors import TrtminError
    (tmp_path / ".gitignore").write_text("*\n")
    (tmp_path / ".DS_Store").write_bytes(b"\0")
    check_out_dir(tmp_path, resume=False, force=False)
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(TrtminError, match=r"is not empty \(notes.txt\)"):
        check_out_dir(tmp_path, resume=False, force=False)


def test_a_refusal_names_four_files_and_counts_the_rest(tmp_path):
    """Six files of the user's: the one-line refusal names the first four (sorted) and says
    how many more, so that none is left unsaid nor counted twice."""
    from minimize.emit.out_dir import check_out_dir
    from oracles.errors import TrtminError
    for name in ("a.txt", "b.txt", "c.txt", "d.txt", "e.txt", "f.txt"):
        (tmp_path / name).write_text("mine")
    with pytest.raises(TrtminError, match=r"is not empty \(a.txt, b.txt, c.txt, d.txt and 2 more\)"):
        check_out_dir(tmp_path, resume=False, force=False)


def test_force_keeps_an_edited_report_md_as_well_as_an_edited_repro_py(tmp_path):
    """report.md is the user's to annotate as repro.py is (its digest is kept as written):
    --force over the finished run moves either aside, edited, as NAME.edited."""
    from minimize.emit.journal import header_line
    from minimize.emit.out_dir import keep_edited, written_digests
    from oracles.out_folder import header_digest

    header = header_line({"model_sha256": "ab", "options": {}})
    (tmp_path / "journal.jsonl").write_text(header + "\n" + '{"runs": []}\n')
    (tmp_path / "repro.py").write_text("print('REPRODUCED: x')\n")
    (tmp_path / "report.md").write_text("# the bug\n")
    files = ["report.md", "repro.py", "summary.json"]
    (tmp_path / "summary.json").write_text(json.dumps({"journal_header_sha256": header_digest(header), "files": files,
                                                       "written_sha256": written_digests(tmp_path, files)}))
    (tmp_path / "report.md").write_text("# the bug\n\nmy notes: seen on two machines\n")
    assert keep_edited(tmp_path) == [("report.md", "report.md.edited", True)]
    assert (tmp_path / "report.md.edited").read_text().endswith("my notes: seen on two machines\n")


def test_a_third_session_is_counted_as_the_third(tmp_path):
    """Each session's verdicts carry its number: resumed twice, the run has had three
    sessions, and the time of both earlier ones is counted (the second's verdicts were
    journaled as the first's, and the run said two sessions)."""
    from minimize.emit.journal import Journal
    from minimize.program.candidate import Candidate
    from oracles.verdict import Verdict

    header = {"model_sha256": "ab" * 32, "options": {"oracle": "crash"}}
    first = Journal(tmp_path, header, resume=False)
    first.record(Candidate((0, 1)), [Verdict("pass")])
    first.close()
    second = Journal(tmp_path, header, resume=True)
    assert second.session == 2
    second.record(Candidate((0, 2)), [Verdict("pass")])
    second.close()
    records = [json.loads(line) for line in (tmp_path / "journal.jsonl").read_text().splitlines()[1:]]
    assert [r["session"] for r in records] == [1, 2]
    third = Journal(tmp_path, header, resume=True)
    assert third.session == 3 and third.earlier_seconds == sum(r["elapsed"] for r in records)
    third.close()


def test_a_ctrl_c_mid_copy_leaves_no_temporary(tmp_path, monkeypatch):
    """Ctrl-C (KeyboardInterrupt) while the plugin file is copied beside repro.py: as a full
    disk does, it leaves the old file or none, and no half-written temporary in --out."""
    import shutil
    from pathlib import Path

    from minimize.emit import outputs

    src = tmp_path / "plugin_src.py"
    src.write_text("x = 1\n" * 1000)
    out = tmp_path / "out"
    out.mkdir()

    def interrupted(source, target):
        Path(target).write_text(Path(source).read_text()[:100])
        raise KeyboardInterrupt

    monkeypatch.setattr(shutil, "copyfile", interrupted)
    with pytest.raises(KeyboardInterrupt):
        outputs.copy_files(out, {"plugin.py": src})
    assert list(out.iterdir()) == []


def test_an_out_that_is_a_file_is_named_as_one(host_program, tmp_path):
    """--out naming a file (the model, a log) is said as such, with the fix, before anything
    loads: not mkdir's "cannot be made (File exists)"."""
    model, inputs = host_program
    (tmp_path / "results").write_text("a file")
    r = reduce_here(str(model), "--inputs", str(inputs), "--oracle", "crash", "--backend", plugin("crash_on_sin"),
                    "--out", str(tmp_path / "results"))
    assert_one_line_error(r, "is a file; pass a folder for the results")
    assert (tmp_path / "results").read_text() == "a file"


def test_a_users_journal_with_a_header_of_its_own_is_not_taken_for_a_run(tmp_path):
    """A journal.jsonl whose first line is {"header": {...}} but no trtmin header (no
    model_sha256) is the user's: beside the user's report.md, even --force is refused,
    as it would write over that report."""
    from minimize.emit.out_dir import check_out_dir
    from oracles.errors import TrtminError
    (tmp_path / "journal.jsonl").write_text('{"header": {"title": "lab notes"}}\n{"day": 1}\n')
    (tmp_path / "report.md").write_text("my report")
    with pytest.raises(TrtminError, match=r"holds journal.jsonl, report.md, .*no trtmin run wrote them \(its journal.jsonl is no "
                                          r"trtmin run's\)"):
        check_out_dir(tmp_path, resume=False, force=True)
    assert (tmp_path / "report.md").read_text() == "my report"


def test_a_summary_that_names_no_journal_header_is_no_finished_run_of_it(tmp_path):
    """summary.json without journal_header_sha256 (an older trtmin's, or a copy from
    elsewhere) cannot be told to be the outputs of the journal beside it: the folder is
    an interrupted run to resume, not a finished one that --force must run over."""
    from minimize.emit.journal import header_line
    from minimize.emit.out_dir import check_out_dir, finished_run
    from oracles.errors import TrtminError
    (tmp_path / "journal.jsonl").write_text(header_line({"model_sha256": "ab", "options": {}}) + "\n" + '{"runs": []}\n')
    (tmp_path / "repro.py").write_text("print('REPRODUCED: x')\n")
    (tmp_path / "summary.json").write_text(json.dumps({"files": ["repro.py"]}))
    assert not finished_run(tmp_path)
    with pytest.raises(TrtminError, match="holds an interrupted run; pass --resume to continue it"):
        check_out_dir(tmp_path, resume=False, force=False)


def _finished_run(out, files, **summary):
    """A finished run's folder: its journal, and a summary.json that names it and its files."""
    from minimize.emit.journal import header_line
    from minimize.emit.out_dir import written_digests
    from oracles.out_folder import header_digest
    header = header_line({"model_sha256": "ab", "options": {}})
    (out / "journal.jsonl").write_text(header + "\n" + '{"runs": []}\n')
    (out / "summary.json").write_text(json.dumps({"journal_header_sha256": header_digest(header), "files": files,
                                                  "written_sha256": written_digests(out, files), **summary}))


def test_a_run_over_a_finished_one_keeps_edits_beside_a_file_the_user_deleted(tmp_path):
    """The user deleted report.md and edited repro.py: the deleted file is no edit to keep,
    and the edit is still kept (a missing file made the digests unreadable, and --force
    wrote over the edited repro.py)."""
    from minimize.emit.out_dir import keep_edited
    (tmp_path / "repro.py").write_text("print('REPRODUCED: x')\n")
    (tmp_path / "report.md").write_text("# the bug\n")
    _finished_run(tmp_path, ["report.md", "repro.py", "summary.json"])
    (tmp_path / "report.md").unlink()
    (tmp_path / "repro.py").write_text("print('REPRODUCED: x')  # my fix\n")
    assert keep_edited(tmp_path) == [("repro.py", "repro.py.edited", True)]
    assert (tmp_path / "repro.py.edited").read_text().endswith("# my fix\n")


def test_copies_kept_earlier_stay_as_they_are_and_a_new_one_takes_a_free_name(tmp_path):
    """A folder that --force ran over twice holds repro_cmd_run.py.edited and .edited.2,
    the user's: a third run keeps them as they are (not moved aside again as
    repro_cmd_run.py.edited.2.edited), and a dangling link named repro.py.edited is no
    free name for the next kept copy."""
    import os

    from minimize.emit.out_dir import keep_edited
    (tmp_path / "repro.py").write_text("print('REPRODUCED: x')\n")
    _finished_run(tmp_path, ["repro.py", "summary.json"])
    for name in ("repro_cmd_run.py.edited", "repro_cmd_run.py.edited.2"):
        (tmp_path / name).write_text("the user's runner\n")
    os.symlink(tmp_path / "gone.py", tmp_path / "repro.py.edited")  # the user's link, to a file since moved
    (tmp_path / "repro.py").write_text("print('REPRODUCED: x')  # my fix\n")
    assert keep_edited(tmp_path) == [("repro.py", "repro.py.edited.2", True)]
    assert (tmp_path / "repro.py.edited").is_symlink() and (tmp_path / "repro_cmd_run.py.edited.2").is_file()


def test_a_folder_set_aside_in_out_does_not_make_it_a_repro_suite(tmp_path):
    """Folders whose names start with . or _ are set aside (a suite skips them): a
    manifest.toml in one (_old/, .trash/) does not make --out a suite to refuse."""
    from minimize.emit.out_dir import check_out_dir
    for aside in ("_old", ".trash"):
        (tmp_path / aside).mkdir()
        (tmp_path / aside / "manifest.toml").write_text('title = "a bug"\n')
    check_out_dir(tmp_path, resume=False, force=True)


def test_an_interrupted_run_on_other_example_inputs_is_not_offered_a_resume(tmp_path):
    """Without --inputs, a run on the example inputs saved in another model file: no
    argument gives those inputs back, so the refusal offers --force, not "rerun with its
    arguments and --resume" (which the resume would refuse next)."""
    from minimize.emit.out_dir import check_out_dir
    from minimize.emit.run_header import VERDICT_FORMAT
    from oracles.errors import TrtminError
    now = {"options": {"oracle": "crash"}, "compilers": {}, "verdict_format": VERDICT_FORMAT,
           "example_inputs_sha256": "cd"}
    (tmp_path / "journal.jsonl").write_text(json.dumps({"header": {"model_sha256": "ab", **now,
                                                                   "example_inputs_sha256": "ab"}})
                                            + "\n" + '{"runs": []}\n')
    with pytest.raises(TrtminError) as e:
        check_out_dir(tmp_path, resume=False, force=False, header=lambda: now)
    assert "made with other inputs (without --inputs: other example inputs saved in the model file there" in str(e.value)
    assert "--resume" not in str(e.value) and "pass --force to replace it" in str(e.value), str(e.value)


def test_a_journal_from_before_example_inputs_were_recorded_is_not_resumed_with_saved_ones(tmp_path):
    """A journal that recorded no example_inputs_sha256 was made when a run without --inputs
    made its inputs from the program's shapes: a model with example inputs saved in it would
    ask other questions, and the resume is refused, naming both."""
    from minimize.emit.journal import Journal
    from oracles.errors import TrtminError
    old = {"model_sha256": "ab", "options": {"oracle": "crash"}}
    Journal(tmp_path, old, resume=False).close()
    with pytest.raises(TrtminError, match=r"without --inputs: inputs made from the program's shapes there, the example "
                                          r"inputs saved in the model file now"):
        Journal(tmp_path, {**old, "example_inputs_sha256": "cd"}, resume=True)
