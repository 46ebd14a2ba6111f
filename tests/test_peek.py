"""Inputs of the wrong shape or dtype are refused before torch is imported (minimize/program/peek.py),
in the words of the full check (minimize/program/inputs.py), and anything the torch-free reader
cannot tell is left to that check."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch

from minimize.program.inputs import load_inputs
from minimize.program.peek import check_inputs_early, program_inputs, saved_inputs
from oracles.errors import TrtminError

ROOT = Path(__file__).resolve().parent.parent
MODEL = ROOT / "examples" / "forecaster.pt2"
INPUTS = ROOT / "examples" / "forecaster_inputs.pt"


def full_check_error(path: Path) -> str:
    with pytest.raises(TrtminError) as e:
        load_inputs(path, torch.export.load(str(MODEL)))
    return str(e.value)


def test_the_files_are_read_without_torch():
    code = ("import sys, pathlib; from minimize.program.peek import program_inputs, saved_inputs; "
            f"print(program_inputs(pathlib.Path({str(MODEL)!r})), saved_inputs(pathlib.Path({str(INPUTS)!r}))); "
            "print('torch' in sys.modules)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert r.returncode == 0 and r.stdout.splitlines()[-1] == "False", r.stdout + r.stderr
    wanted = program_inputs(MODEL)
    assert [(n, s.sizes, s.dtype) for n, s in wanted] == [("history", (2, 24, 4), "float32"),
                                                          ("start_ns", (2, 1), "int64")]
    assert saved_inputs(INPUTS) == (wanted[0][1], wanted[1][1])  # the example saves (history, start_ns)


@pytest.mark.parametrize("change", ["shape", "dtype"])
def test_a_wrong_input_is_refused_early_as_the_full_check_refuses_it(tmp_path, change):
    history, start = torch.load(INPUTS)
    wrong = torch.randn(3, 3) if change == "shape" else history.double()
    path = tmp_path / "inputs.pt"
    torch.save(((wrong, start), {}), path)  # (args, kwargs), as torch.export.export took them
    with pytest.raises(TrtminError) as early:
        check_inputs_early(MODEL, path)
    assert str(early.value) == full_check_error(path)


@pytest.mark.parametrize("form", ["args_kwargs", "flat", "lone_tensor", "three"])
def test_too_few_or_many_inputs_are_refused_early_as_the_full_check_refuses_them(tmp_path, form):
    """Saving (history,) for a program of (history, start_ns) is a common slip: refused before
    torch's import, in the full check's words, which say what the file holds."""
    history, start = torch.load(INPUTS)
    saved = {"args_kwargs": ((history,), {}), "flat": (start,), "lone_tensor": history,
             "three": (history, start, start)}[form]
    path = tmp_path / "inputs.pt"
    torch.save(saved, path)
    with pytest.raises(TrtminError) as early:
        check_inputs_early(MODEL, path)
    assert str(early.value) == full_check_error(path)
    said = {"args_kwargs": "holds args of 1 input and no kwargs but", "flat": "holds 1 input but",
            "lone_tensor": "holds a Tensor but", "three": "holds 3 inputs but"}[form]
    assert said in str(early.value) and "the program takes 2 inputs (history, start_ns)" in str(early.value)


def test_a_none_argument_counts_as_an_input_early_as_it_does_in_the_full_check(tmp_path):
    """export(M(), (x, None, y)) stores the None as a constant input: the full check counts
    it, so the early one must not refuse (x, y, y), which the full check takes, nor word the
    count of (x,) otherwise."""
    class TakesNone(torch.nn.Module):
        def forward(self, x, m, y):
            return x + y

    x = torch.randn(2, 3)
    model = tmp_path / "none.pt2"
    torch.export.save(torch.export.export(TakesNone(), (x, None, x)), model)
    ep = torch.export.load(str(model))
    for saved in [(x,), (x, x, x)]:
        path = tmp_path / "inputs.pt"
        torch.save(saved, path)
        try:
            full = load_inputs(path, ep)
        except TrtminError as e:
            with pytest.raises(TrtminError) as early:
                check_inputs_early(model, path)
            assert str(early.value) == str(e)
        else:
            check_inputs_early(model, path)  # taken by the full check: not refused early
            assert len(full) == 3


class TakesABatch(torch.nn.Module):
    """A policy's forward: one dict of observations, as LeRobot passes them."""

    def forward(self, batch, scale: float = 2.0):
        return batch["observation.state"] * scale + batch["observation.image"].mean()


def test_a_batch_dict_is_checked_early_as_the_full_check_flattens_it(tmp_path):
    """A dict batch is flattened by the program's call spec, read from the .pt2 without
    torch: a wrong key, count or shape is refused in the full check's words, and every form
    the full check takes (the batch, the call's args, its kwargs, the inputs flat) passes."""
    state, image = torch.randn(2, 6), torch.randn(2, 3, 8, 8)
    batch = {"observation.state": state, "observation.image": image}
    model = tmp_path / "policy.pt2"
    torch.export.save(torch.export.export(TakesABatch(), (batch,)), model)
    ep = torch.export.load(str(model))
    path = tmp_path / "inputs.pt"
    wrong = {"a key missing": {"observation.state": state},
             "another key": {"observation.state": state, "observation.images": image},
             "a wrong shape": {"observation.state": state, "observation.image": image[:, :1]},
             "a wrong dtype": {"observation.state": state.double(), "observation.image": image},
             "by keyword": ((), {"batch": batch})}  # export took it by position: its spec does not flatten this
    for what, saved in wrong.items():
        torch.save(saved, path)
        with pytest.raises(TrtminError) as full:
            load_inputs(path, ep)
        with pytest.raises(TrtminError) as early:
            check_inputs_early(model, path)
        assert str(early.value) == str(full.value), what
    torch.save(wrong["a key missing"], path)  # the words, once, and before torch's import
    code = ("import sys, pathlib; from minimize.program.peek import check_inputs_early\n"
            f"try:\n    check_inputs_early(pathlib.Path({str(model)!r}), pathlib.Path({str(path)!r}))\n"
            "except Exception as e:\n    print(e)\nprint('torch' in sys.modules)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert r.stdout.splitlines()[-1] == "False", r.stdout + r.stderr
    assert "holds a dict of 1 ('observation.state') but the program takes 2 inputs" in r.stdout, r.stdout
    for saved in [batch, (batch,), ((batch,), {}), (state, image)]:
        torch.save(saved, path)
        assert len(load_inputs(path, ep)) == 2
        check_inputs_early(model, path)  # taken by the full check: not refused early


def test_what_it_cannot_read_is_left_to_the_full_check(tmp_path):
    check_inputs_early(MODEL, INPUTS)  # the right inputs pass
    not_a_zip = tmp_path / "legacy.pt"
    not_a_zip.write_bytes(b"\x80\x02}q\x00.")
    check_inputs_early(MODEL, not_a_zip)


class _EveryDtype(torch.nn.Module):
    def forward(self, *xs: torch.Tensor) -> torch.Tensor:
        return sum(x.float().sum() for x in xs)


def test_each_dtype_reads_early_as_torch_names_it(tmp_path):
    """The .pt2's dtype numbers and torch.save's storage names, read without torch, name the
    dtype torch does (float16 and bfloat16 apart): else a right input is refused early."""
    dtypes = [torch.float16, torch.bfloat16, torch.float32, torch.float64, torch.uint8, torch.int8, torch.int16,
              torch.int32, torch.int64, torch.bool, torch.complex64, torch.complex128]
    xs = tuple(torch.zeros(2, 3, dtype=d) for d in dtypes)
    model, inputs = tmp_path / "model.pt2", tmp_path / "inputs.pt"
    torch.export.save(torch.export.export(_EveryDtype(), xs), str(model))
    torch.save(xs, inputs)
    names = [str(d).removeprefix("torch.") for d in dtypes]
    assert [s.dtype for _, s in program_inputs(model)] == names
    assert [s.dtype for s in saved_inputs(inputs)] == names
    check_inputs_early(model, inputs)  # the program's own inputs: no refusal
    torch.save(tuple(x.half() if x.dtype == torch.bfloat16 else x for x in xs), inputs)
    with pytest.raises(TrtminError, match=r"is torch.float16, the program expects torch.bfloat16"):
        check_inputs_early(model, inputs)


class _Scaled(torch.nn.Module):
    def forward(self, x: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
        return x * scale


def test_args_and_kwargs_are_taken_early_as_the_full_check_takes_them(tmp_path):
    """(args, kwargs) with a tensor in kwargs, as torch.export.export(m, args, kwargs) took
    them: no early refusal, and the full check reads both."""
    x, scale = torch.randn(2, 3), torch.randn(3)
    ep = torch.export.export(_Scaled(), (x,), {"scale": scale})
    model, inputs = tmp_path / "model.pt2", tmp_path / "inputs.pt"
    torch.export.save(ep, str(model))
    torch.save(((x,), {"scale": scale}), inputs)
    check_inputs_early(model, inputs)
    assert [tuple(t.shape) for t in load_inputs(inputs, torch.export.load(str(model)))] == [(2, 3), (3,)]
    torch.save(((x,), {"scale": torch.randn(4)}), inputs)  # and its shape is checked there
    with pytest.raises(TrtminError) as early:
        check_inputs_early(model, inputs)
    assert "has shape (4,), the program expects (3,)" in str(early.value)
    assert str(early.value) == str(pytest.raises(TrtminError, load_inputs, inputs, torch.export.load(str(model))).value)


class _Widened(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.float() * 2


def test_a_dtype_the_early_reader_does_not_know_is_left_to_the_full_check(tmp_path):
    """A float8 input has no name in the .pt2's dtype table here: a float32 given for it is
    not refused early as "expects torch.None", but in the full check's words, which name it."""
    model, path = tmp_path / "model.pt2", tmp_path / "inputs.pt"
    ep = torch.export.export(_Widened(), (torch.zeros(4, 4).to(torch.float8_e4m3fn),))
    torch.export.save(ep, str(model))
    torch.save((torch.zeros(4, 4),), path)
    with pytest.raises(TrtminError) as full:
        load_inputs(path, torch.export.load(str(model)))
    assert "the program expects torch.float8_e4m3fn" in str(full.value)
    try:
        check_inputs_early(model, path)
    except TrtminError as early:
        assert str(early) == str(full.value)
