"""Partition-aware reduction through a runnable engine compiler (tests/plugins/partitioned.py):
engine isolation, settings bisection and op-type bisection, as they run for Torch-TensorRT."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from torch import nn

from tests.conftest import save_program
from tests.helpers import cpu_program, run_cli, run_repro

PLUGIN = Path(__file__).resolve().parent / "plugins" / "partitioned.py"


class ThreeEngines(nn.Module):
    """relu has no converter, so the compiler builds 3 engines; softmax is in the second."""

    def __init__(self) -> None:
        super().__init__()
        self.l1, self.l2, self.l3 = nn.Linear(8, 16), nn.Linear(16, 16), nn.Linear(16, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.relu(self.l1(x) * 2 + 1)
        h = torch.relu(torch.softmax(self.l2(h), -1) * h + h)
        return torch.sigmoid(self.l3(h))


@pytest.fixture(scope="module")
def reduced(tmp_path_factory) -> Path:
    torch.manual_seed(0)
    folder = tmp_path_factory.mktemp("parts")
    model, inputs = save_program(ThreeEngines().eval(), (torch.randn(4, 8),), folder)
    out = folder / "out"
    r = run_cli("reduce", str(model), "--inputs", str(inputs), "--oracle", "mismatch", "--backend",
                f"{PLUGIN}:compile", "--set", "fast_softmax=true", "--set", "optimization_level=5",
                "--set", "workspace_mb=512", "--emit", "inductor", "--out", str(out), "--no-verify")
    assert r.returncode == 0, r.stderr[-3000:]
    return out


def test_engine_isolation_finds_the_failing_engine(reduced):
    s = json.loads((reduced / "summary.json").read_text())
    assert s["diagnosis"]["failing_engine"].startswith("engine 1 of 3")
    assert s["passes"]["isolate_partition"]["accepted"] == 1
    assert s["final_nodes"] == 1 and "softmax" in (reduced / "repro.py").read_text()


def test_settings_bisection_keeps_only_what_the_bug_needs(reduced):
    s = json.loads((reduced / "summary.json").read_text())
    assert s["settings"]["needed"] == {"fast_softmax": "true"}
    assert s["diagnosis"]["settings_dropped"] == ["optimization_level", "workspace_mb"]
    script = (reduced / "repro.py").read_text()
    assert "'fast_softmax': True" in script and "optimization_level" not in script
    r = run_repro(reduced)
    assert r.returncode == 1 and r.stdout.startswith("REPRODUCED"), r.stdout + r.stderr[-2000:]
    # the plugin's setting is the plugin's: the script emitted for Inductor goes without it
    emitted = (reduced / "repro_inductor.py").read_text()
    assert 'torch.compile(module, backend="inductor")' in emitted and "fast_softmax" not in emitted


def test_op_type_bisection_names_the_culprit_converter(reduced):
    s = json.loads((reduced / "summary.json").read_text())
    assert s["diagnosis"]["culprit_ops"] == ["aten.softmax.int"]
    # one op type, one question (forced to PyTorch, is the bug gone?): with none forced, the
    # candidate is the current one, whose bug is known to stay
    assert s["passes"]["bisect_op_fallback"]["calls"] == 1, s["passes"]
    assert "Culprit converter: forcing `aten.softmax.int` to run in PyTorch" in (reduced / "report.md").read_text()


def test_with_workers_the_partition_passes_reach_the_same_repro(reduced, tmp_path):
    """Speculation stops where the reduction needs the engines of a candidate not yet
    compiled (a replay cannot know them) and goes on once they are known: settings and
    op-type bisection under --jobs give the same repro in fewer rounds."""
    s1 = json.loads((reduced / "summary.json").read_text())
    model, inputs = reduced.parent / "model.pt2", reduced.parent / "model_inputs.pt"
    out = tmp_path / "j2"
    r = run_cli("reduce", str(model), "--inputs", str(inputs), "--oracle", "mismatch", "--backend",
                f"{PLUGIN}:compile", "--set", "fast_softmax=true", "--set", "optimization_level=5",
                "--set", "workspace_mb=512", "--out", str(out), "--jobs", "2", "--no-verify")
    assert r.returncode == 0, r.stderr[-3000:]
    s2 = json.loads((out / "summary.json").read_text())
    # the first run also wrote --emit inductor's script: what was emitted is no result of the reduction
    strip = lambda s: {k: v for k, v in s.items()  # noqa: E731
                       if k not in ("timing", "seconds", "emitted", "files", "written_sha256",
                                     "journal_header_sha256")}  # each run names itself
    assert strip(s1) == strip(s2) and s1["emitted"] == ["inductor"]
    assert set(s1["files"]) - set(s2["files"]) == {"repro_inductor.py"}
    assert (reduced / "repro.py").read_bytes() == (out / "repro.py").read_bytes()
    assert s2["timing"]["batches"] < s1["timing"]["batches"]


class Gated(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.l1, self.l2 = nn.Linear(8, 8), nn.Linear(8, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.l2(torch.tanh(self.l1(x)) * x)


def test_a_bug_in_lowering_is_named_by_the_option_that_turns_it_off(tmp_path: Path) -> None:
    """A bug no op fallback removes (a lowering pass rewrites tanh before partitioning, as
    Torch-TensorRT's attn_bias_is_causal rewrites attention masks): the diagnosis says so
    and names the lowering option whose other value makes it vanish."""
    torch.manual_seed(0)
    model, inputs = save_program(Gated().eval(), (torch.randn(4, 8),), tmp_path)
    out = tmp_path / "out"
    r = run_cli("reduce", str(model), "--inputs", str(inputs), "--oracle", "mismatch", "--backend",
                f"{PLUGIN}:compile", "--out", str(out), "--no-verify")
    assert r.returncode == 0, r.stderr[-3000:]
    s = json.loads((out / "summary.json").read_text())
    assert s["final_nodes"] == 1 and "tanh" in (out / "repro.py").read_text()
    assert s["diagnosis"]["culprit_ops"] == "the bug remains with every op type forced to PyTorch"
    assert s["diagnosis"]["lowering"].endswith("it vanishes with --set tanh_as_sigmoid=false"), s["diagnosis"]
    assert "- Lowering: the bug is in the compiler's rewrite of the whole graph (its lowering" in (out / "report.md").read_text()


@pytest.mark.parametrize("toggled, note", [
    ("pass", "it vanishes with --set lowering_pass=false"),
    ("crash", "with --set lowering_pass=false this bug is gone, but the compiler fails another way: CRASH: E: other"),
])
def test_lowering_toggle_says_whether_the_bug_vanished_or_changed(toggled: str, note: str) -> None:
    """In-process, with a pure oracle: a toggle that takes the bug away is named as its cause
    only where the program then passes; where it fails another way (Torch-TensorRT-RTX 2.11
    with attn_bias_is_causal=false crashes in add_cast on the video policy), the note says so."""
    from minimize.search.passes.partitions import lowering_toggle
    from oracles.verdict import Verdict
    from tests.helpers import reduce_with

    def verdict(cand) -> Verdict:
        if ("lowering_pass", "false") in cand.settings:
            return Verdict("pass") if toggled == "pass" else Verdict("crash", "E", "other")
        return Verdict("mismatch", output=0, max_abs=1.0)

    def passes(problem) -> None:
        problem.establish_original()  # the bug, as the reduction saw it first
        lowering_toggle(problem)

    problem = reduce_with(_host_program(), verdict, passes, lowering_toggles=(("lowering_pass", "false"),))
    assert problem.notes["lowering"].endswith(note), problem.notes


def _host_program():
    """The tests' 18-node host, for a pass run in this process (tests.helpers.reduce_with)."""
    from tests.conftest import Host
    return cpu_program(Host().eval(), torch.randn(4, 8))


def test_one_setting_the_bug_does_not_need_is_dropped_from_the_repro_too():
    """--set a=1 --set b=2 where the bug needs a alone: the report's "dropped b" and the
    candidate the repro is written from agree (they did not where one setting was left out)."""
    from minimize.search.passes.partitions import bisect_settings
    from oracles.verdict import Verdict
    from tests.helpers import reduce_with

    def passes(problem) -> None:
        problem.establish_original()
        bisect_settings(problem)

    problem = reduce_with(_host_program(), lambda c: Verdict("crash", "E", "bug") if ("a", "1") in c.settings
                          else Verdict("pass"), passes, settings={"a": "1", "b": "2"})
    assert problem.notes["settings_dropped"] == ["b"] and problem.current.settings == (("a", "1"),)


def test_the_failing_engine_is_numbered_among_all_the_compilers_engines():
    """Engine 0 holds nothing of the candidate (no cut to try): the failing one is still
    "engine 2 of 3", as the compiler numbers them, not the 2nd of those tried."""
    from minimize.search.passes.partitions import isolate_partition
    from oracles.verdict import Verdict
    from tests.helpers import reduce_with
    parts: list[list[str]] = []

    def passes(problem) -> None:
        problem.establish_original()
        names = [problem.program.nodes[i].name for i in problem.current.nodes]
        parts[:] = [["not_a_node_of_ours"], names[:9], names[9:]]
        isolate_partition(problem)

    problem = reduce_with(_host_program(), lambda c: Verdict("crash", "E", "bug") if 17 in c.nodes or len(c.nodes) > 12
                          else Verdict("pass"), passes, partitions=lambda cand: parts)
    assert problem.notes["failing_engine"].startswith("engine 2 of 3 "), problem.notes
