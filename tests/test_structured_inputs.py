"""--inputs holds the arguments as the model was exported with them: a robot policy takes a
dict batch (LeRobot's `policy(batch)`), a model may take kwargs. Before, only the program's
user inputs flat were read, and `torch.save((batch,), f)` was refused."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import torch
from torch import nn

from minimize.program.inputs import load_inputs
from minimize.program.peek import check_inputs_early
from oracles.errors import TrtminError
from tests.conftest import plugin
from tests.helpers import check_here, cpu_program, run_cli, run_cli_here, run_repro
from tests.test_bad_inputs import assert_one_line_error


class DictPolicy(nn.Module):
    """A policy's forward over a batch dict: a state vector and a uint8 HWC camera frame."""

    def __init__(self) -> None:
        super().__init__()
        self.enc = nn.Linear(6, 16)
        self.img = nn.Conv2d(3, 4, 3)
        self.head = nn.Linear(16 + 4, 7)

    def forward(self, batch: dict[str, torch.Tensor], *, noise: torch.Tensor) -> torch.Tensor:
        state = torch.relu(self.enc(batch["observation.state"]))
        frame = batch["observation.image"].permute(0, 3, 1, 2).float() / 255
        feat = self.img(frame).mean((2, 3))
        return torch.tanh(self.head(torch.cat([state, feat], -1))) + noise


def _batch() -> tuple[dict[str, torch.Tensor], torch.Tensor]:
    torch.manual_seed(0)
    batch = {"observation.state": torch.randn(2, 6),
             "observation.image": torch.randint(0, 256, (2, 8, 8, 3), dtype=torch.uint8)}
    return batch, torch.randn(2, 7)


@pytest.fixture(scope="module")
def policy(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, torch.Tensor], torch.Tensor]:
    batch, noise = _batch()
    ep = torch.export.export(DictPolicy().eval(), (batch,), {"noise": noise})
    path = tmp_path_factory.mktemp("policy") / "policy.pt2"
    torch.export.save(ep, str(path))
    return path, batch, noise


def _load(path: Path, obj: object, tmp_path: Path) -> list:
    f = tmp_path / "inputs.pt"
    torch.save(obj, str(f))
    return load_inputs(f, torch.export.load(str(path)))


def test_the_exported_call_is_read_in_the_programs_order(policy, tmp_path):
    path, batch, noise = policy
    want = [batch["observation.state"], batch["observation.image"], noise]
    reordered = dict(reversed(list(batch.items())))  # a dict's keys are read by name, not position
    for form in [((batch,), {"noise": noise}), ((reordered,), {"noise": noise}), [[batch], {"noise": noise}],
                 tuple(want)]:  # (args, kwargs) as torch.export.export took them, or the inputs flat
        got = _load(path, form, tmp_path)
        assert len(got) == 3 and all(g is not None and torch.equal(g, w) for g, w in zip(got, want)), form


def test_without_inputs_the_arguments_export_was_given_are_used(policy, tmp_path):
    """No --inputs: the .pt2 keeps the arguments torch.export.export was given
    (ep.example_inputs), and the program runs on those, as the user's model did, not on
    seeded values made from their shapes (a bug that needs the real values showed there
    and not here); the screen says so. A file without them gets made inputs, and says that."""
    from minimize.program.inputs import saved_example_inputs

    path, batch, noise = policy
    want = [batch["observation.state"], batch["observation.image"], noise]
    got = saved_example_inputs(torch.export.load(str(path)))
    assert got is not None and len(got) == 3 and all(torch.equal(g, w) for g, w in zip(got, want))
    r = run_cli_here("check", str(path), "--oracle", "crash", "--backend", plugin("crash_on_sin"))
    assert r.returncode == 0 and "note: no --inputs: the program ran on the example inputs saved in the model " \
        "file" in " ".join(r.stderr.split()), r.stderr
    ep = torch.export.load(str(path))
    ep.example_inputs = None
    torch.export.save(ep, str(tmp_path / "bare.pt2"))
    assert saved_example_inputs(torch.export.load(str(tmp_path / "bare.pt2"))) is None


def test_a_resume_without_inputs_refuses_other_example_inputs(tmp_path):
    """Without --inputs the verdicts ran on the example inputs in the .pt2: a re-export of the
    same code with other example values (the same program, as Program.digest sees it) must
    not replay them. The journal records their digest, and the resume is refused in one line."""
    torch.manual_seed(0)
    model = tmp_path / "head.pt2"
    torch.export.save(torch.export.export(_Head().eval(), (torch.randn(4, 8),)), str(model))
    out = tmp_path / "out"
    args = [str(model), "--oracle", "crash", "--backend", plugin("crash_on_sin"), "--out", str(out), "--no-verify"]
    assert run_cli_here("reduce", *args).returncode == 0
    (out / "summary.json").unlink()  # as if stopped before its end
    torch.export.save(torch.export.export(_Head().eval(), (torch.randn(4, 8) * 3,)), str(model))
    r = run_cli_here("reduce", *args, "--resume")
    said = " ".join(r.stderr.split())
    assert r.returncode == 2 and "Traceback" not in said, r.stderr
    assert "was made with other inputs (without --inputs: other example inputs saved in the model file there" in said, said


def test_example_inputs_the_program_does_not_take_are_not_run_on() -> None:
    """Example inputs kept in the .pt2 of another dtype or rank than the program's inputs
    (set by hand after the export) are not used: inputs are made from the program's own."""
    from minimize.program.inputs import saved_example_inputs
    ep = torch.export.export(_Head().eval(), (torch.randn(4, 8),))
    assert saved_example_inputs(ep) is not None
    for other in (torch.randn(4, 8, dtype=torch.float64), torch.randn(32)):
        ep.example_inputs = ((other,), {})
        assert saved_example_inputs(ep) is None, other.shape


def test_the_inputs_digest_tells_the_same_bytes_in_another_shape_or_dtype_apart() -> None:
    """What a journal's verdicts ran on, without --inputs: a program exported with dynamic
    sizes takes the same values as (2, 6) or (3, 4), and those are other inputs."""
    from minimize.program.inputs import values_digest
    x = torch.arange(12, dtype=torch.int32)
    assert values_digest([x.reshape(2, 6)]) == values_digest([x.reshape(2, 6).clone()])
    assert values_digest([x.reshape(2, 6)]) != values_digest([x.reshape(3, 4)])
    assert values_digest([x]) != values_digest([x.view(torch.float32)])


class _Kinds(nn.Module):
    def forward(self, ids: torch.Tensor, pixels: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return ids.float().sum() + pixels.float().sum() + mask.float().sum()


def test_made_inputs_take_the_values_the_note_says() -> None:
    """No --inputs and none saved: the note says what the program ran on (ints 0-15, uint8
    0-255), and the made inputs hold those values, seeded."""
    from minimize.program.inputs import MADE_INPUTS_NOTE, make_inputs
    ep = torch.export.export(_Kinds(), (torch.zeros(1024, dtype=torch.int64), torch.zeros(4096, dtype=torch.uint8),
                                        torch.zeros(64, dtype=torch.bool)))
    ids, pixels, mask = make_inputs(ep)
    assert "ints 0-15, uint8 0-255" in MADE_INPUTS_NOTE
    assert (ids.dtype, pixels.dtype, mask.dtype) == (torch.int64, torch.uint8, torch.bool)
    assert sorted(ids.unique().tolist()) == list(range(16)) and sorted(pixels.unique().tolist()) == list(range(256))
    assert sorted(mask.unique().tolist()) == [False, True]
    assert all(torch.equal(a, b) for a, b in zip(make_inputs(ep), (ids, pixels, mask)))


class _Head(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(1)  # the same weights in each export: the same program
        self.lin = nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sin(self.lin(x)) + 1


def test_a_dict_batch_alone_or_as_the_one_argument(tmp_path):
    batch, _ = _batch()

    class TakesBatch(nn.Module):
        def forward(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
            return batch["observation.state"].sum() + batch["observation.image"].float().sum()

    path = tmp_path / "m.pt2"
    torch.export.save(torch.export.export(TakesBatch(), (batch,)), str(path))
    want = [batch["observation.state"], batch["observation.image"]]
    for form in [(batch,), batch]:  # the one argument in a tuple, or the dict itself
        got = _load(path, form, tmp_path)
        assert [g.shape for g in got] == [w.shape for w in want] and all(map(torch.equal, got, want)), form


def test_a_dict_of_the_programs_input_names_holds_them_by_name(tmp_path):
    """forward(image, state) called positionally; the inputs saved as {"image": ..., "state": ...},
    which the error had refused as "a dict of 2 ('image', 'state') but the program takes 2
    inputs (image, state)". The early (torch-free) check reads it the same way."""
    from minimize.program.peek import check_inputs_early

    class TwoInputs(nn.Module):
        def forward(self, image: torch.Tensor, state: torch.Tensor) -> torch.Tensor:
            return image.mean((1, 2)) + state

    image, state = torch.randn(2, 3, 4), torch.randn(2)
    path = tmp_path / "m.pt2"
    torch.export.save(torch.export.export(TwoInputs(), (image, state)), str(path))
    got = _load(path, {"state": state, "image": image}, tmp_path)
    assert len(got) == 2 and torch.equal(got[0], image) and torch.equal(got[1], state)
    torch.save({"state": state, "image": image[:, :2]}, tmp_path / "short.pt")
    with pytest.raises(Exception, match="input 'image' in .* has shape"):
        check_inputs_early(path, tmp_path / "short.pt")


def test_a_dict_of_forwards_parameter_names_holds_the_arguments(policy, tmp_path):
    """{"batch": batch, "noise": noise} for forward(batch, *, noise): the arguments by their
    parameter names, as a call passes them by keyword. It was refused ("holds a dict of 2
    ('batch', 'noise') but the program takes 3 inputs"). The early (torch-free) check reads
    it alike: a wrong shape inside is said there."""
    from minimize.program.peek import check_inputs_early
    path, batch, noise = policy
    got = _load(path, {"noise": noise, "batch": batch}, tmp_path)
    want = [batch["observation.state"], batch["observation.image"], noise]
    assert len(got) == 3 and all(map(torch.equal, got, want))
    wide = dict(batch, **{"observation.image": torch.zeros(2, 16, 8, 3, dtype=torch.uint8)})
    torch.save({"batch": wide, "noise": noise}, tmp_path / "wide.pt")
    with pytest.raises(TrtminError, match=r"in .*wide.pt has shape \(2, 16, 8, 3\), the program expects \(2, 8, 8, 3\)"):
        check_inputs_early(path, tmp_path / "wide.pt")


class _StatePair(nn.Module):
    def forward(self, batch: dict) -> torch.Tensor:
        return batch["obs"].sum() + batch["state"][0] * batch["state"][1]


def test_a_list_where_the_export_had_a_tuple_holds_the_same_arguments(tmp_path):
    """Exported with batch["state"] a tuple, saved with a list (or the other way): the model
    indexes either alike, and the values are the user's. It was refused with the whole
    structure and no word of list or tuple. The early check reads it alike: a wrong shape
    inside is said there."""
    from minimize.program.peek import check_inputs_early
    obs, a, b = torch.randn(3, 8), torch.randn(2), torch.randn(2)
    path = tmp_path / "m.pt2"
    torch.export.save(torch.export.export(_StatePair(), ({"obs": obs, "state": (a, b)},)), str(path))
    got = _load(path, ({"obs": obs, "state": [a, b]},), tmp_path)
    assert len(got) == 3 and all(map(torch.equal, got, [obs, a, b]))
    check_inputs_early(path, tmp_path / "inputs.pt")  # what _load saved: no refusal
    torch.save(({"obs": obs, "state": [a, torch.randn(5)]},), tmp_path / "long.pt")
    with pytest.raises(TrtminError, match=r"in .*long.pt has shape \(5,\), the program expects \(2,\)"):
        check_inputs_early(path, tmp_path / "long.pt")


def test_a_wrong_shape_in_a_batch_is_named_by_the_users_key(policy, tmp_path):
    """An input of another shape inside a batch dict is named as the user wrote it
    (args[0]['observation.image']), not by the program's flat name (batch_observation_image),
    with both shapes in one form and the fix; the early check and the full one alike."""
    from minimize.program.peek import check_inputs_early
    path, batch, noise = policy
    wide = dict(batch, **{"observation.image": torch.zeros(2, 16, 8, 3, dtype=torch.uint8)})
    torch.save(((wide,), {"noise": noise}), tmp_path / "wide.pt")
    said = (r"input args\[0\]\['observation.image'\] in .*wide.pt has shape \(2, 16, 8, 3\), the program expects "
            r"\(2, 8, 8, 3\); save inputs of the shape it was exported with, or export again with dynamic_shapes")
    with pytest.raises(TrtminError, match=said):
        check_inputs_early(path, tmp_path / "wide.pt")
    with pytest.raises(TrtminError, match=said):
        load_inputs(tmp_path / "wide.pt", torch.export.load(str(path)))
    torch.save(((batch,), {"noise": noise[:1]}), tmp_path / "short.pt")  # a keyword argument: by its key too
    with pytest.raises(TrtminError, match=r"input kwargs\['noise'\] in .* has shape \(1, 7\), the program expects \(2, 7\)"):
        load_inputs(tmp_path / "short.pt", torch.export.load(str(path)))


def test_a_structure_the_program_does_not_take_is_one_line(policy, tmp_path):
    path, batch, noise = policy
    f = tmp_path / "in.pt"
    torch.save((batch,), f)  # the kwargs are missing
    assert_one_line_error(check_here(str(path), "--inputs", str(f)),
                          "holds a tuple of 1 (a dict of 2 ('observation.state', 'observation.image')), the args "
                          "alone, and the program also takes keyword arguments (noise)", "(args, kwargs)")
    for saved, words in ((((batch,), {"noise": noise, "seed": 1}), "kwargs has 'seed', which the program does not "
                                                                   "take (it takes 'noise'; an argument left out of "
                                                                   "torch.export.export is fixed in the program, no "
                                                                   "input)"),
                         ((({"observation.state": batch["observation.state"], "observation.imag": batch["observation.image"]},),
                           {"noise": noise}),  # a typo of a key it lacks
                          "args[0] has 'observation.imag', which the program does not take (did you mean "
                          "'observation.image'?)"),
                         (((batch,), {"noise": noise, "nois": noise}),  # 'noise' is given: no typo of it
                          "kwargs has 'nois', which the program does not take (it takes 'noise'; an argument"),
                         (((batch["observation.state"], batch["observation.image"]), {"noise": noise}),  # tensors
                          "args holds 2 and the program takes 1: a dict of 'observation.state', 'observation.image'")):
        torch.save(saved, f)  # the key that differs, by its path in the arguments
        assert_one_line_error(check_here(str(path), "--inputs", str(f)), words)
    torch.save(((batch,), {"noise": noise.double()}), f)  # the right structure, a wrong dtype: named by input
    assert_one_line_error(check_here(str(path), "--inputs", str(f)), "'noise'", "torch.float64")


def test_reduce_reads_the_batch_and_its_repro_reproduces(policy, tmp_path):
    path, batch, noise = policy
    f = tmp_path / "batch.pt"
    torch.save(((batch,), {"noise": noise}), f)
    out = tmp_path / "out"
    r = run_cli("reduce", str(path), "--inputs", str(f), "--oracle", "crash", "--backend",
                plugin("crash_on_linear"), "--out", str(out), "--no-verify")
    assert r.returncode == 0, r.stderr
    assert "linear" in (out / "repro.py").read_text()
    alone = run_repro(out)
    assert alone.returncode == 1 and alone.stdout.startswith("REPRODUCED"), alone.stdout + alone.stderr


class Strided(nn.Module):
    """A history and its timestamps that share a dynamic length, and an int the export keeps."""

    def forward(self, history: torch.Tensor, stamps: torch.Tensor, stride: int) -> torch.Tensor:
        return history[:, ::stride] + stamps[::stride]


def test_inputs_the_exported_program_cannot_take_are_refused(tmp_path: Path) -> None:
    """An int argument other than the one exported (a constant in the program), a dynamic
    size outside its Dim's range, and two sizes of one Dim that differ: ep.module() refuses
    each (its guards), where trtmin ran the graph without them and reduced a program the
    user's inputs never reach."""
    length = torch.export.Dim("length", min=4, max=16)
    ep = torch.export.export(Strided(), (torch.randn(2, 8), torch.randn(8), 2),
                             dynamic_shapes=({1: length}, {0: length}, None))
    path = tmp_path / "inputs.pt"
    cases = {(torch.randn(2, 8), torch.randn(8), 3): "is 3, and the program was exported with stride=2, which it "
                                                       "keeps as a constant; pass 2",
             (torch.randn(2, 20), torch.randn(20), 2): "has size 20 in dim 1, outside the range the program was "
                                                        "exported for (4 to 16)",
             (torch.randn(2, 8), torch.randn(6), 2): "has size 6 in dim 0, and 'history' size 8 in dim 1: the "
                                                      "program was exported with one size for both"}
    for inputs, words in cases.items():
        torch.save(inputs, path)
        with pytest.raises(TrtminError, match=re.escape(words)):
            load_inputs(path, ep)
    for size in (12, 4, 16):  # the range's ends are in it
        torch.save((torch.randn(2, size), torch.randn(size), 2), path)
        assert [tuple(t.shape) if isinstance(t, torch.Tensor) else t for t in load_inputs(path, ep)] == [
            (2, size), (size,), 2]
    torch.save(((torch.randn(2, 12), torch.randn(12)), {"stride": 2}), path)  # by keyword, exported by position
    with pytest.raises(TrtminError, match=re.escape("kwargs has 'stride', which it does not take by keyword: it "
                                                    "was exported as a positional argument; put it in args")):
        load_inputs(path, ep)
    # a batch of a dict: named by its key, as the dtype and shape errors name it (a newcomer met
    # 'batch_observation_image' in these two and args[0]['observation.image'] in those)
    batch = torch.export.Dim("batch", min=1, max=8)
    dicts = torch.export.export(DictBatch(), ({"observation.image": torch.randn(2, 3), "state": torch.randn(2, 4)},),
                                dynamic_shapes=({"observation.image": {0: batch}, "state": {0: batch}},))
    for batch_inputs, words in [
            (({"observation.image": torch.randn(9, 3), "state": torch.randn(9, 4)},),
             "input args[0]['observation.image'] in "),
            (({"observation.image": torch.randn(2, 3), "state": torch.randn(3, 4)},),
             "input args[0]['state'] in ")]:
        torch.save(batch_inputs, path)
        with pytest.raises(TrtminError, match=re.escape(words)) as raised:
            load_inputs(path, dicts)
        assert "batch_" not in str(raised.value), raised.value
        # and before torch loads, from the files alone, in the same words (it took 4-8 s: a newcomer's hunt)
        torch.export.save(dicts, tmp_path / "dicts.pt2")
        with pytest.raises(TrtminError) as early:
            check_inputs_early(tmp_path / "dicts.pt2", path)
        assert str(early.value) == str(raised.value)
    torch.export.save(ep, tmp_path / "strided.pt2")
    for inputs, words in list(cases.items())[1:]:  # the int's constant is the full check's
        torch.save(inputs, path)
        with pytest.raises(TrtminError, match=re.escape(words)):
            check_inputs_early(tmp_path / "strided.pt2", path)
    torch.save((torch.randn(2, 12), torch.randn(12), 2), path)
    check_inputs_early(tmp_path / "strided.pt2", path)  # within the range, one size: nothing to say
    torch.export.save(ep, tmp_path / "model.pt2")
    torch.save(next(iter(cases)), path)
    assert_one_line_error(run_cli_here("check", str(tmp_path / "model.pt2"), "--inputs", str(path), "--oracle",
                                       "mismatch", "--backend", "inductor"), "'stride'", "pass 2")


class DictBatch(nn.Module):
    def forward(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        return batch["observation.image"].sum(-1) + batch["state"].sum(-1)


class _DictPolicy(nn.Module):
    def forward(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
        h = torch.relu(x) * 2
        return {"action": torch.tanh(h), "value": h.sum(-1)}


def test_an_output_is_named_by_its_key_in_what_the_model_returns(tmp_path):
    """A policy returns {"action": ..., "value": ...}: "output 1" alone made the user count
    the dict's keys. check and reduce's account of the original name it; a tuple's index
    is its name already."""
    from minimize.program.model import output_paths
    from tests.conftest import save_program

    x = torch.randn(4, 8)
    model, inputs = save_program(_DictPolicy().eval(), (x,), tmp_path)
    r = check_here(str(model), "--inputs", str(inputs), "--oracle", "mismatch", "--backend",
                   plugin("every_output_off_with_tanh"))
    assert r.returncode == 1 and "MISMATCH: output 1 ['value'] differs from eager" in r.stdout, r.stdout + r.stderr
    tuple_ep = torch.export.export(nn.Sequential(nn.ReLU()), (x,))
    assert output_paths(tuple_ep, ["relu"]) == []
    dict_ep = torch.export.export(_DictPolicy(), (x,))
    assert output_paths(dict_ep, [s.arg.name for s in dict_ep.graph_signature.output_specs]) == ["['action']", "['value']"]


class _InputAndNoneFirst(nn.Module):
    def forward(self, x):
        return x.sin(), x, None, (x * 2).argmax(-1)


def test_a_tuple_output_after_an_input_or_none_is_numbered_as_the_model_returns_it(tmp_path):
    """A trial: (x.sin(), x, None, argmax) with argmax off was "output 1", the slice's
    number (no slice returns x or None); the user's is 3."""

    x = torch.randn(2, 3)
    program = cpu_program(_InputAndNoneFirst(), x)
    assert program.output_names == ["", "(the model's output 3)"]


class _Nested(nn.Module):
    def forward(self, x):
        return (x.sin(), x), (x * 2).cos()


def test_a_nested_tuples_outputs_are_named_by_their_paths():
    """The review: ((sin, x), cos) named cos "(the model's output 2)", its flat index; the
    model's own is out[1]."""

    x = torch.randn(2, 3)
    program = cpu_program(_Nested(), x)
    assert program.output_names == ["[0][0]", "[1]"]


class _WritesInPlace(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("ema", torch.zeros(3))

    def forward(self, x, y):
        self.ema.mul_(0.9).add_(x.exp() * 0.1)
        y.mul_(2)
        return x.sin()


def test_a_value_written_in_place_is_named_by_what_it_updates():
    """A bug hunt: the only value off was a buffer's update (an EMA), named "output 1" of a
    model that returns one output. The program returns each value written in place after
    the model's own outputs: named by the buffer or input it updates."""
    program = cpu_program(_WritesInPlace(), torch.randn(3), torch.randn(3))
    assert program.output_names == ["", "(the update of buffer ema, written in place)",
                                    "(the update of input y, written in place)"], program.output_names


class CountsBig(nn.Module):
    """Inductor's int64 arange * 1e9 (pytorch/pytorch#175966), seen only through an .item()."""

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, int]:
        big = torch.arange(24, dtype=torch.int64) * 1_000_000_000
        return x * 2, (big > 5_000_000_000).sum().item()


def test_a_bug_seen_through_an_item_reduces_to_its_cause(tmp_path):
    """A hunt: an .item() output was judged exactly and with no size, so no cut's tensor
    output matched it; the reduction stopped at 5 nodes (arange, mul, gt, sum, item) and said
    1-minimal. A number is judged as a 0-d tensor now: it ends at the 2-node cause, real Inductor."""
    x = torch.randn(24)
    ep = torch.export.export(CountsBig(), (x,))
    torch.export.save(ep, model := tmp_path / "model.pt2")
    torch.save(((x,), {}), inputs := tmp_path / "inputs.pt")
    out = tmp_path / "out"
    r = run_cli("reduce", str(model), "--inputs", str(inputs), "--oracle", "mismatch", "--backend", "inductor",
                "--out", str(out))
    assert r.returncode == 0, r.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["final_nodes"] == 2, summary["final_nodes"]
    assert summary["repro_alone"]["status"] == "REPRODUCED", summary["repro_alone"]
