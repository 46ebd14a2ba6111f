"""One oracle session: a prepared program, its worker pool, and verdicts for candidates.

Shared by `trtmin check` and `trtmin reduce`.
"""

from __future__ import annotations

from typing import Any

from minimize.run import interrupts
from minimize.run.heap import collect_parked, gc_paused
from minimize.program.inputs import (MADE_INPUTS_NOTE, SAVED_INPUTS_NOTE, load_inputs, make_inputs, prepare,
                                     saved_example_inputs, to_device)
from minimize.program.libraries import import_libraries
from minimize.program.candidate import Candidate
from minimize.options import Options
from minimize.program.model import Program, load_exported, random_draws_note
from minimize.run.steps import StepClock
from minimize.run.worker_side import save_state
from minimize.run.workers import Workers
from oracles.backends import resolve
from oracles.backends.base import Backend
from oracles.backends.plugin import PluginBackend
from oracles.errors import TrtminError
from oracles.verdict import ORACLES, VALUE_ORACLES, Signature, Verdict

__all__ = ["Options", "Session"]


class Session:
    def __init__(self, opts: Options, workers: Workers | None = None):
        """`workers`: already started for these options (the CLI starts them before it
        imports torch); the session stops them when it ends, or fails to start."""
        self.workers = workers
        try:
            self._prepare(opts)
        except BaseException:
            if self.workers is not None:
                self.workers.close()
            raise

    def _prepare(self, opts: Options) -> None:
        if opts.oracle not in ORACLES:
            raise TrtminError(f"unknown oracle {opts.oracle!r}; use one of {', '.join(ORACLES)}")
        self.opts = opts
        self._one_op: Verdict | None = None  # the one-op control's verdict (setup_problem), once asked
        self.backend = resolve(opts.backend, opts.settings)
        kind = opts.device.split(":")[0]
        if kind not in self.backend.devices:
            raise TrtminError(f"backend {opts.backend} runs with --device {' or '.join(self.backend.devices)}, "
                              f"not {opts.device}; pass --device {self.backend.devices[0]}")
        problem = self.backend.oracle_problem(opts.oracle)
        if problem:
            raise TrtminError(problem)
        if isinstance(self.backend, PluginBackend):
            self.backend.validate()  # a missing file or function is a one-line error, here
        self.workers = self.workers or Workers(opts)  # their start overlaps loading the model (they wait for the state)
        self.pool = self.workers.pool
        clock = StepClock()
        self.load_phases = clock.seconds  # for summary.json timing.load
        # Only the load: run_decompositions and the eager values make garbage to free. Its
        # one collection (0.27 s at 5,112 nodes) runs while the first oracle call does.
        import_libraries(opts.imports)
        with gc_paused(collect=False):
            ep = load_exported(opts.model)
        saved = None if opts.inputs else saved_example_inputs(ep)  # the arguments export was given, if kept
        user_inputs = load_inputs(opts.inputs, ep) if opts.inputs else saved if saved is not None else make_inputs(ep)
        self.inputs_note = None if opts.inputs else SAVED_INPUTS_NOTE if saved is not None else MADE_INPUTS_NOTE
        clock.step("load_model")
        self.ep = prepare(ep, opts.device)
        clock.step("prepare")
        self.program = Program(self.ep, to_device(user_inputs, opts.device), device=opts.device,
                               fixed_random=opts.oracle in VALUE_ORACLES)
        self.user_inputs = user_inputs
        clock.step("eager_values")
        save_state(self.program, self.workers.state_dir, opts.imports)
        clock.step("save_state")

    def notes(self) -> dict[str, str]:
        """What check and reduce say before the first verdict, by report.md's keys: how the
        backend judges here, that the inputs were made (no --inputs), that the program draws
        random values."""
        found = {"backend": self.backend.note(), "made_inputs": self.inputs_note,
                 "random_draws": random_draws_note(self.program)}
        return {key: note for key, note in found.items() if note}

    def evaluate(self, cands: list[Candidate]) -> list[list[Verdict]]:
        """Each candidate's runs (--repeat of them), each in a fresh compile."""
        interrupts.check()
        n = self.opts.repeat
        jobs = [job for cand in cands for job in [cand.job()] * n]
        results = self.pool.run(jobs, while_waiting=collect_parked)
        verdicts = [Verdict.from_dict({k: v for k, v in r.items() if k != "restart"}) for r in results]
        return [verdicts[i * n:(i + 1) * n] for i in range(len(cands))]

    def delegation(self, cand: Candidate) -> dict[str, Any] | None:
        """Which of a candidate's ops the backend's delegate takes (Backend.delegation), from
        a lowering in a worker, no run; None where the backend delegates nothing or cannot say."""
        if type(self.backend).delegation is Backend.delegation:
            return None
        interrupts.check()
        result = self.pool.run([{**cand.but(mark_all=False).job(), "delegation": True}])[0]
        return result.get("delegation") if isinstance(result, dict) else None

    def evaluate_static(self, cand: Candidate) -> list[Verdict]:
        """A candidate's runs (--repeat of them) compiled with static sizes: the program's
        dynamic dims (torch.export.Dim) not marked. Not cached: the candidate's own runs keep them."""
        interrupts.check()
        results = self.pool.run([{**cand.job(), "static": True}] * self.opts.repeat, while_waiting=collect_parked)
        return [Verdict.from_dict({k: v for k, v in r.items() if k != "restart"}) for r in results]

    def setup_problem(self, v: Verdict) -> str | None:
        """Why the original's crash is the set-up's mistake, not a compiler's bug (what to
        fix), or None. The backend's own checks first (a module not installed, a plugin that
        returns no callable, a --set TensorRT refuses); then, where the backend runs the
        user's own code (a plugin, a command), one run of a one-op program (x + 1) in a
        worker: failing the same way there, the failure does not depend on the model, and a
        reduction would end at one node and call it a bug."""
        problem = self.backend.setup_problem(v.message)
        whose = self.backend.own_code()
        if problem or not whose:
            return problem
        if self._one_op is None:  # once a session, whatever --repeat shows
            interrupts.check()
            result = self.pool.run([{"one_op": True}])[0]
            self._one_op = Verdict.from_dict({k: x for k, x in result.items() if k != "restart"})
        control = self._one_op
        if not Signature.of(v).matches(control):
            return None
        said = control.message.splitlines()[0][:200] if control.message.strip() else control.exc_type
        return (f"{whose} fails the same way on a one-op program (x + 1): {said}; its failure does not depend on "
                "your model (it is its own, or its set-up's): fix it, no compiler's bug to reduce")

    def partitions(self, cand: Candidate) -> list[list[str]]:
        """The backend's compiled partitions (engines) of a candidate, as node names; []
        when the backend does not report them."""
        if not self.backend.reports_partitions:
            return []
        job = cand.but(mark_all=False).job()
        result = self.pool.run([{**job, "partitions": True}])[0]
        return result.get("partitions", []) if isinstance(result, dict) else []

    def close(self) -> None:
        self.workers.close()

    def __enter__(self) -> "Session":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

