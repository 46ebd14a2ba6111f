"""Programs that draw random numbers (a diffusion policy's starting noise): for oracles
that compare values with eager's, eager draws them once, seeded, and the compiled
program gets them as inputs; a compiler's own draws could never match."""

from __future__ import annotations

import torch
from torch import nn

from minimize.program.model import Program
from tests.conftest import plugin, save_program
from tests.helpers import cpu_program, run_cli, run_cli_here


class Denoiser(nn.Module):
    """Encode the observation, draw noise, denoise it in 3 steps."""

    def __init__(self):
        super().__init__()
        self.enc, self.den = nn.Linear(8, 8), nn.Linear(16, 8)

    def forward(self, obs):
        h = torch.tanh(self.enc(obs))
        a = torch.randn(4, 8)
        for _ in range(3):
            a = a - 0.1 * self.den(torch.cat([a, h], -1))
        return torch.exp(a * 2).sum(-1)


def _program(fixed_random: bool) -> Program:
    torch.manual_seed(0)
    x = torch.randn(4, 8)
    return cpu_program(Denoiser().eval(), x, fixed_random=fixed_random)


def test_draws_are_fed_in_for_value_oracles_and_kept_for_the_others():
    fed, kept = _program(True), _program(False)
    assert [str(n.target) for n in fed.random_draws] == ["aten.randn.default"]
    assert not any("randn" in str(n.target) for n in fed.nodes)
    assert any("randn" in str(n.target) for n in kept.nodes)  # a compiler may crash on lowering it
    # the whole program's slice reads the draw as an input, with the value eager drew
    whole = fed.materialize(fed.all_kept())
    assert fed.random_draws[0].name in whole.input_names
    # seeded: every run of trtmin draws the same numbers (--resume replays verdicts on them)
    torch.manual_seed(123)
    again = _program(True)
    name = fed.random_draws[0].name
    assert torch.equal(fed.values[name], again.values[name])


def test_eager_and_a_correct_compiler_agree_with_eager_on_a_noisy_program(tmp_path):
    model, inputs = save_program(Denoiser().eval(), (torch.randn(4, 8),), tmp_path)
    for backend in ("eager", "inductor"):
        r = run_cli_here("check", str(model), "--inputs", str(inputs), "--oracle", "mismatch", "--backend", backend)
        assert r.returncode == 0, r.stdout + r.stderr[-2000:]  # both failed against eager's own draw before
        assert "draws random numbers (aten.randn.default x1)" in r.stderr
    r = run_cli_here("check", str(model), "--inputs", str(inputs), "--oracle", "mismatch",
                     "--backend", plugin("mismatch_mul_exp"))
    assert r.returncode == 1 and "MISMATCH" in r.stdout, r.stdout + r.stderr[-2000:]  # a real bug still shows


class Attention(nn.Module):
    """Attention as every exported model has it (dropout_p=0), then a dropout: an op tagged
    as drawing random numbers only draws where its probability is not 0 and it trains."""

    def __init__(self, attention_p: float, dropout_p: float):
        super().__init__()
        self.attention_p, self.drop = attention_p, nn.Dropout(dropout_p)

    def forward(self, q, k, v):
        out = nn.functional.scaled_dot_product_attention(q, k, v, dropout_p=self.attention_p)
        return self.drop(out).exp()


def _attention_draws(attention_p: float, dropout_p: float, train: bool) -> list[str]:
    qkv = [torch.randn(1, 2, 6, 4) for _ in range(3)]
    module = Attention(attention_p, dropout_p).train(train)
    program = Program(torch.export.export(module, tuple(qkv)), qkv, fixed_random=True)
    return sorted(str(n.target) for n in program.random_draws)


def test_attention_without_dropout_is_no_draw_and_stays_in_the_graph():
    """Fed in as a draw, the attention a bug is in left the graph: the block-causal mask
    case's original "did not fail" (bench/cases/block_causal_rope.py)."""
    assert _attention_draws(0.0, 0.5, train=False) == []
    assert _attention_draws(0.0, 0.0, train=True) == []
    assert _attention_draws(0.1, 0.0, train=False) == ["aten.scaled_dot_product_attention.default"]
    assert _attention_draws(0.0, 0.5, train=True) == ["aten.dropout.default"]


def test_a_bug_in_attention_is_seen_by_the_value_oracles(tmp_path):
    """The whole path: a compiler that gets attention wrong fails the mismatch oracle (the
    attention, fed in as a draw, used to leave the graph, and the check said PASS)."""
    qkv = tuple(torch.randn(1, 2, 6, 4) for _ in range(3))
    model, inputs = save_program(Attention(0.0, 0.1).eval(), qkv, tmp_path)
    r = run_cli_here("check", str(model), "--inputs", str(inputs), "--oracle", "mismatch",
                     "--backend", plugin("mismatch_on_attention"))
    assert r.returncode == 1 and "MISMATCH" in r.stdout, r.stdout + r.stderr[-2000:]
    assert "draws random numbers" not in r.stderr


def test_the_report_speaks_of_draws_only_where_the_reduced_program_has_them(tmp_path):
    """The planted mul -> exp reads the denoised value, not the draw: the screen notes the
    original's draw, and report.md's Diagnosis no longer does (it described a randn that the
    2-node program has not). Without --inputs, and with no example inputs in the model file,
    both say the inputs were made, not the user's."""
    ep = torch.export.export(Denoiser().eval(), (torch.randn(4, 8),))
    ep.example_inputs = None  # an export saved without them: trtmin makes inputs
    model = tmp_path / "model.pt2"
    torch.export.save(ep, str(model))
    out = tmp_path / "out"
    r = run_cli("reduce", str(model), "--oracle", "mismatch", "--backend", plugin("mismatch_mul_exp"),
                "--out", str(out), "--no-verify")
    assert r.returncode == 0 and "draws random numbers (aten.randn.default x1)" in r.stderr, r.stderr[-2000:]
    assert "note: no --inputs: the program ran on inputs made from its example shapes" in r.stderr, r.stderr
    report = (out / "report.md").read_text()
    assert "torch.ops.aten.randn" not in (out / "repro.py").read_text() and "Random draws" not in report, report
    assert "- Inputs: no --inputs: the program ran on inputs made" in report, report


class Uninitialized(nn.Module):
    def forward(self, x):
        return x + torch.empty_like(x)


class OnlyDraws(nn.Module):
    def forward(self, p):
        return torch.multinomial(p, 4, replacement=True)


def test_uninitialized_memory_is_fed_in_as_draws_are(tmp_path):
    """A trial: `x + torch.empty_like(x)` FAILS (nan) on Inductor 3 runs of 3, and reduced to
    `empty` alone, whose repro.py said REPRODUCED: eager's and the compiler's garbage differ
    by chance. The allocation's value is eager's, fed in; no bug is left to find."""
    torch.manual_seed(0)
    x = torch.randn(64, 64)
    program = cpu_program(Uninitialized(), x, fixed_random=True)
    assert [str(n.target) for n in program.random_draws] == ["aten.empty_like.default"]
    assert not any("empty" in str(n.target) for n in program.nodes)
    model, inputs = save_program(Uninitialized(), (x,), tmp_path)
    for oracle in ("mismatch", "nan"):
        r = run_cli_here("check", str(model), "--inputs", str(inputs), "--oracle", oracle, "--backend", "inductor")
        assert r.returncode == 0 and "does not fail" in r.stdout, r.stdout + r.stderr[-2000:]
        assert "leaves memory uninitialized (aten.empty_like.default x1)" in r.stderr, r.stderr[-2000:]


def test_a_program_of_draws_alone_is_said_so_not_called_empty(tmp_path):
    """multinomial alone: fed in, no op is left, and the refusal said the graph has no call
    nodes. Under --oracle crash, its compiled draws were compared with eager's and the user
    sent to --oracle mismatch, which then refused."""
    model, inputs = save_program(OnlyDraws(), (torch.softmax(torch.randn(2, 8), -1),), tmp_path)
    r = run_cli_here("check", str(model), "--inputs", str(inputs), "--oracle", "mismatch", "--backend", "eager")
    assert r.returncode == 2 and "each op of it makes values no compiler can match eager's " \
        "(aten.multinomial.default: random draws or uninitialized memory)" in r.stderr, r.stderr[-2000:]
    r = run_cli_here("check", str(model), "--inputs", str(inputs), "--oracle", "crash", "--backend", "inductor")
    assert r.returncode == 0 and "it compiled and ran (its values are not judged: the program draws random " \
        "numbers (aten.multinomial.default x1)" in r.stdout and "--oracle mismatch" not in r.stdout, r.stdout
    r = run_cli_here("reduce", str(model), "--inputs", str(inputs), "--oracle", "crash", "--backend", "inductor",
                     "--out", str(tmp_path / "out"))  # reduce's refusal says the same, not "try --oracle mismatch"
    said = r.stderr.strip().splitlines()[-1]
    assert r.returncode == 2 and "nothing to reduce: it compiled and ran (its values are not judged: the program " \
        "draws random numbers" in said and "--oracle mismatch" not in said, r.stderr[-2000:]


class DrawAndBug(nn.Module):
    def forward(self, x):
        return x + torch.rand_like(x), torch.exp(x * 2)


def test_a_real_mismatch_beside_a_draw_is_still_named_under_the_crash_oracle(tmp_path):
    """The review: any draw anywhere turned every mismatch into 'not judged' under --oracle
    crash. Only an output that reads a draw is; an exp of a mul off on another output is
    named, with the oracle that asks about it (exit 3)."""
    model, inputs = save_program(DrawAndBug(), (torch.randn(4, 8),), tmp_path)
    r = run_cli_here("check", str(model), "--inputs", str(inputs), "--oracle", "crash", "--backend",
                     plugin("mismatch_mul_exp"))
    assert r.returncode == 3 and "but: MISMATCH: output 1" in r.stdout and "--oracle mismatch asks about that" \
        in r.stdout, r.stdout + r.stderr[-2000:]
