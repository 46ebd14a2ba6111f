"""One oracle session: a prepared program, its worker pool, and verdicts for candidates.

Shared by `trtmin check` and `trtmin reduce`.
"""

from __future__ import annotations

from typing import Any, Callable, Collection

from minimize.run import interrupts
from minimize.run.heap import collect_parked, gc_paused
from minimize.program.inputs import (MADE_INPUTS_NOTE, SAVED_INPUTS_NOTE, dead_code_note, in_place_note, in_place_ops,
                                     load_inputs, make_inputs, may_have_become, prepare, saved_example_inputs,
                                     to_device, values_digest)
from minimize.program.libraries import import_libraries
from minimize.program.candidate import Candidate
from minimize.options import Options
from minimize.program.model import ONE_OP_PROGRAMS, Program, Slice, load_exported, random_draws_note
from minimize.run.steps import StepClock
from minimize.run.worker_side import save_state
from minimize.run.workers import Workers
from oracles.backends import BUILTIN, resolve
from oracles.backends.base import Backend
from oracles.backends.plugin import PluginBackend
from oracles.errors import TrtminError, disk_full
from oracles.verdict import ORACLES, VALUE_ORACLES, Signature, Verdict

__all__ = ["Options", "Session"]

ONE_OP_TIMEOUT_S = 120.0  # a one-op control that takes longer tells nothing (--timeout, if lower, rules)


def _verdict(result: dict[str, Any]) -> Verdict:
    """A worker's answer to an oracle job as a Verdict, less its request for a fresh process."""
    return Verdict.from_dict({k: v for k, v in result.items() if k != "restart"})


class Session:
    def __init__(self, opts: Options, workers: Workers | None = None,
                 on_phase: Callable[[str], None] = lambda phase: None):
        """`workers`: already started for these options (the CLI starts them before it
        imports torch); the session stops them when it ends, or fails to start. `on_phase`:
        the live screen's line for each step that may take long."""
        self.workers = workers
        try:
            self._prepare(opts, on_phase)
        except BaseException:
            if self.workers is not None:
                self.workers.close()
            raise

    def _prepare(self, opts: Options, on_phase: Callable[[str], None]) -> None:
        if opts.oracle not in ORACLES:
            raise TrtminError(f"unknown oracle {opts.oracle!r}; use one of {', '.join(ORACLES)}")
        self.opts = opts
        self._one_op: list[Verdict] | None = None  # the one-op controls' verdicts (setup_problem), once asked
        # each candidate's runs as they land (reduce's journal); the batch's answer is evaluate's
        self.on_verdict: Callable[[Candidate, list[Verdict]], None] | None = None
        self.backend = resolve(opts.backend, opts.settings)
        kind = opts.device.split(":")[0]
        if kind not in self.backend.devices:
            raise TrtminError(f"backend {opts.backend} runs with --device {' or '.join(self.backend.devices)}, "
                              f"not {opts.device}; pass --device {self.backend.devices[0]}")
        problem = self.backend.oracle_problem(opts.oracle)
        if problem:
            raise TrtminError(problem)
        if isinstance(self.backend, PluginBackend):  # its module's own code runs here: it may take long, or hang
            on_phase(f"importing the plugin {self.backend.parsed.shown} (its module's top-level code)")
            self.backend.validate()  # a missing file or function is a one-line error, here
        on_phase(f"loading {opts.model.name}: the program and eager's values")
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
        # the journal's record of inputs no --inputs file names: the example ones saved in the .pt2
        self.example_inputs_sha256 = values_digest(saved) if saved is not None else None
        clock.step("load_model")
        self.in_place = in_place_ops(ep)  # made functional by prepare: said as a note
        prepared = prepare(ep, opts.device)
        clock.step("prepare")
        self.program = Program(prepared, to_device(user_inputs, opts.device), device=opts.device,
                               fixed_random=opts.oracle in VALUE_ORACLES)
        clock.step("eager_values")
        if not self.program.nodes and self.program.random_draws:  # each op's values fed in: none left
            ops = ", ".join(sorted({str(n.target) for n in self.program.random_draws}))
            raise TrtminError(f"{opts.model}: each op of it makes values no compiler can match eager's ({ops}: "
                              f"random draws or uninitialized memory); --oracle {opts.oracle} feeds eager's in, which "
                              "leaves nothing to compile; --oracle crash compiles them as they are")
        if not self.program.nodes:  # no candidate to make: a reduce raised "empty candidate", a check died
            raise TrtminError(f"{opts.model} computes nothing: its graph has no call nodes (it returns its inputs "
                              "or constants as they are), so no compiler has anything to get wrong; export the "
                              "module whose compile fails")
        save_state(self.program, self.workers.state_dir, opts.imports)
        clock.step("save_state")

    def notes(self) -> dict[str, str]:
        """What check and reduce say before the first verdict, by report.md's keys: how the
        backend judges here, that the inputs were made (no --inputs), that the program draws
        random values, and that a backend of static shapes drops the export's dynamic sizes."""
        found = {"backend": self.backend.note(), "made_inputs": self.inputs_note,
                 "random_draws": random_draws_note(self.program), "static": self._static_note(),
                 "in_place": in_place_note(self.in_place), "dead": dead_code_note(self.program)}
        return {key: note for key, note in found.items() if note}

    def _static_note(self, among: Collection[str] | None = None) -> str | None:
        """The export's dynamic dims a backend that builds static shapes (TensorRT through
        ONNX: no optimization profile) does not keep: a bug of symbolic sizes cannot show.
        `among`: only those of these inputs (a result's: report.md names no input its
        repro does not read)."""
        if self.backend.keeps_dynamic or not self.program.dynamic:
            return None
        inputs = ([n.name for n in self.program.placeholders] if among is None else list(among))  # cut values too
        inputs = [name for name in inputs if self.program.dynamic.get(name)]
        if not inputs:
            return None
        dims = ", ".join(f"{name} dim {d}" for name in inputs for d in sorted(self.program.dynamic[name]))
        return (f"the program was exported with dynamic sizes ({dims}); backend {self.opts.backend} builds each "
                "candidate with the inputs' own sizes, so a bug that needs them dynamic does not show here")

    def notes_on(self, notes: dict[str, Any], result: Slice, verdict: Verdict | None = None) -> dict[str, Any]:
        """`notes` with the run's caveats narrowed to what bears on `result` and its `verdict`:
        the backend's of that failure (TensorRT without a GPU: one that names CUDA may be the
        GPU's absence, its `doubt` too), the static sizes of its own inputs (cut values too), the in-place ops
        only where it holds an op one of them may have become (a crash on a permute is no news
        of a masked_fill_), and no word of dead code, which no result holds."""
        notes = {key: note for key, note in notes.items() if key != "dead"}
        if "backend" in notes and verdict is not None:
            notes["backend"] = self.backend.note(verdict) or notes["backend"]
        doubt = self.backend.doubt(verdict) if verdict is not None else None
        if doubt:
            notes["doubt"] = doubt
        if "static" in notes and not self.backend.keeps_dynamic:  # the session's note, not the reduction's
            narrowed = self._static_note(result.input_names)
            notes.pop("static") if narrowed is None else notes.update(static=narrowed)
        ops = [str(n.target) for n in result.gm.graph.nodes if n.op == "call_function"]
        if "in_place" in notes and not any(may_have_become(op, ops) for op in self.in_place):
            notes.pop("in_place")
        return notes

    def evaluate(self, cands: list[Candidate]) -> list[list[Verdict]]:
        """Each candidate's runs (--repeat of them), each in a fresh compile; each candidate's
        runs go to `on_verdict` (the journal) as soon as they are all in, not when the batch
        ends: a stop while a slower candidate of it runs (a speculative one) loses none."""
        interrupts.check()
        n = self.opts.repeat
        jobs = [job for cand in cands for job in [cand.job()] * n]
        verdicts: list[Verdict | None] = [None] * len(jobs)
        left = [n] * len(cands)

        def landed(j: int, result: Any) -> None:
            v = verdicts[j] = _verdict(result)
            full = disk_full(v.message) if v.kind != "pass" else None
            if full is not None:  # a full disk is no verdict: stopped before the journal keeps it
                raise full
            i = j // n  # the candidate's, whose runs are jobs i*n .. i*n+n-1
            left[i] -= 1
            if not left[i] and self.on_verdict is not None:
                self.on_verdict(cands[i], verdicts[i * n:(i + 1) * n])  # type: ignore[arg-type]

        self.pool.run(jobs, while_waiting=collect_parked, on_result=landed)
        return [verdicts[i * n:(i + 1) * n] for i in range(len(cands))]  # type: ignore[misc]

    def delegation(self, cand: Candidate, static: bool = False, backend: str | None = None) -> dict[str, Any] | None:
        """Which of a candidate's ops the backend's delegate takes (Backend.delegation), from
        a lowering in a worker, no run, with static sizes where repro.py has them; None where
        the backend delegates nothing or cannot say. `backend`: another's (an --emit's), with
        its defaults."""
        kind = BUILTIN.get(backend, Backend) if backend else type(self.backend)  # not built here: it may not run here
        if kind.delegation is Backend.delegation:
            return None
        result = self._ask(cand, "delegation", static, **({"backend": backend} if backend else {}))
        return result.get("delegation") if isinstance(result, dict) else None

    def exporter_control(self, cand: Candidate, static: bool = False) -> Verdict | None:
        """The candidate's verdict with its ONNX export run by the spec in place of the backend
        (Backend.exporter_control: ONNX's reference evaluator), in a worker, one call; None
        where the backend exports no ONNX model."""
        if type(self.backend).exporter_control is Backend.exporter_control:
            return None
        result = self._ask(cand, "exporter_control", static)
        return _verdict(result) if isinstance(result, dict) and result.get("kind") else None

    def _ask(self, cand: Candidate, question: str, static: bool, **more: str) -> Any:
        """A worker's answer to a question about a candidate that is no oracle call of the
        search (worker_side's job of that key), with static sizes where repro.py has them."""
        interrupts.check()
        return self.pool.run([{**cand.but(mark_all=False).job(), question: True, "static": static, **more}])[0]

    def setup_problem(self, v: Verdict) -> str | None:
        """Why the original's crash is the set-up's mistake, not a compiler's bug (what to
        fix), or None. The backend's own checks first (a module not installed, a plugin that
        returns no callable, a --set TensorRT refuses); then, where the backend runs the
        user's own code (a plugin, a command) or the failure is a hang (a --timeout too short
        for any compile), two one-op programs (x + 1, x * 2) in workers, once a session:
        failing the same way on both, the failure does not depend on the model, and a
        reduction would end at one node and call it a bug (a converter bug of add's own fails
        on x + 1 alone). Each control gets at most ONE_OP_TIMEOUT_S (--timeout, if lower), a
        hang's --timeout itself."""
        problem = self.backend.setup_problem(v.message)
        whose = self.backend.own_code()
        if problem or not (whose or v.kind == "hang"):  # a built-in backend's hang: is --timeout too short for any?
            return problem
        if self._one_op is None:
            self._one_op = []
            for which in ONE_OP_PROGRAMS:  # one after the other: most bugs pass the first, and end it
                interrupts.check()
                limit = self.opts.timeout if v.kind == "hang" else ONE_OP_TIMEOUT_S  # a hang: by the user's measure
                result = self.pool.run([{"one_op": which, "timeout_s": limit}])[0]
                self._one_op.append(_verdict(result))
                if not Signature.of(v).matches(self._one_op[-1]):
                    break
        if len(self._one_op) < len(ONE_OP_PROGRAMS) or not all(map(Signature.of(v).matches, self._one_op)):
            return None
        control = self._one_op[0]
        if v.kind == "hang" and not whose:  # a fresh worker's first compile (torch.onnx's set-up, say) took longer
            return (f"one-op programs ({', '.join(ONE_OP_PROGRAMS)}) run past --timeout {self.opts.timeout:g} s too, "
                    "each in a fresh worker as every run after a hang is: the timeout is shorter than this backend's "
                    "first compile of any program, not a hang of your model's; raise --timeout")
        said = control.message.splitlines()[0][:200] if control.message.strip() else control.exc_type
        return (f"{whose} fails the same way on one-op programs ({', '.join(ONE_OP_PROGRAMS)}): {said}; its failure "
                "does not depend on your model (it is its own, or its set-up's): fix it, no compiler's bug to reduce")

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

