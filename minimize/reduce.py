"""The reduce job: check the original, shrink it, write the outputs.

Every verdict is journaled in --out as it arrives (minimize/emit/journal.py), so an
interrupted run continues with `--resume` and reaches the same repro.
"""

from __future__ import annotations

import math
import operator
import os
import re
import threading
import time
from collections import Counter
from concurrent.futures import Future
from contextlib import ExitStack
from pathlib import Path
from typing import Any, Callable, Mapping

import torch

from minimize.emit.outputs import atomic_write, undelegated_of, write_extra_script, write_outputs
from oracles.out_folder import emitted_names, file_digest
from minimize.emit.journal import Journal
from minimize.emit.run_header import header_before_loading, plugin_changed
from minimize.program.libraries import uses_custom_ops
from minimize.emit.out_dir import JOURNAL, check_out_dir, held_by_this_run, journaled_verdicts, keep_edited
from minimize.program.candidate import Candidate, make
from minimize.search import CHECK_STATIC_SIZES, CHECKS, DONE, READ_VALUES_OFF
from minimize.search.problem import ReductionProblem, Rules
from minimize.program.casts import out_of_range_casts
from minimize.program.model import Program, Slice, fed_from_eager, random_draws_note
from minimize.search.scheduler import counted, run_reduction
from minimize.emit.script import ReproInfo, environment
from minimize.run.session import Options, Session
from minimize.emit.verify import run_alone
from minimize.run.workers import Workers
from oracles.backend_names import parse_backend
from oracles.backends import resolve
from oracles.backends.onnx_export import OnnxExportError
from oracles.errors import TrtminError, first_line, unjudgeable, without_scratch_folders, write_failure
from oracles.environment import package_version
from oracles.reference import ERROR_RATIO
from oracles.verdict import (VALUE_ORACLES, Signature, Verdict, answers, needs_child, output_dtype,
                             precision_note)


def digest_in_background(path: Path) -> Future[str]:
    """file_digest(path) on a daemon thread: hashlib and file reads release the GIL, so a
    policy's gigabytes are hashed on another core while torch loads the program. Its
    error, if any, is raised where the result is asked for; a daemon thread does not hold
    the process at exit (a model refused as it loads exits at once)."""
    done: Future[str] = Future()

    def run() -> None:
        try:
            done.set_result(file_digest(path))
        except BaseException as e:  # noqa: BLE001 - handed to whoever asks for the result
            done.set_exception(e)
    threading.Thread(target=run, name="trtmin-hash", daemon=True).start()
    return done


def _header(known: dict[str, Any], session: Session, model_sha256: Future[str]) -> dict[str, Any]:
    """The whole header: `known` (header_before_loading), the model by its file's contents
    and by its program (Program.digest: where both journals have that, a re-export of the
    same code resumes), the example inputs it ran on without --inputs, torch by its version.
    The model file's hash comes from a thread that ran while the program loaded."""
    return {"model_sha256": model_sha256.result(), "program_sha256": session.program.digest(), **known,
            "example_inputs_sha256": session.example_inputs_sha256, "torch": torch.__version__,
            "dead_values_cut": session.program.dead_values_cut}


def reduce(opts: Options, out: Path, resume: bool = False, force: bool = False,
           on_change: Callable[[ReductionProblem], None] | None = None,
           log: Callable[[str], None] = lambda s: None, workers: Workers | None = None,
           on_phase: Callable[[str], None] = lambda s: None,
           known: Callable[[], dict[str, Any]] | None = None,
           known_bugs: Callable[[Path, dict[str, Any]], list[dict[str, Any]]] | None = None) -> dict[str, Any]:
    """`workers`: started already for `opts` (the CLI starts them before importing torch);
    the session stops them. The caller stops them if this fails before the session.
    `known`: header_before_loading(opts), where the caller has it already (it hashes the
    inputs file: a policy's gigabytes once, not again here). `known_bugs`: the saved repros
    the result looks like, asked as the outputs are written (the CLI reads the suite)."""
    check_out_dir(out, resume, force)
    t0 = time.monotonic()
    had_journal = journaled_verdicts(out / JOURNAL) > 0
    if resume and not had_journal:  # interrupted before its first verdict (or never run): nothing to replay
        log(f"nothing is journaled in {out} yet: starting the run afresh")
        resume, force = False, True  # over what an interrupted --force had not yet replaced, as it would have
    nothing_to_reduce = False
    match = re.compile(opts.match) if opts.match else None
    known_header = known() if known is not None else header_before_loading(opts)
    with ExitStack() as held:
        held.enter_context(held_by_this_run(out))  # one run at a time in a folder (the CLI holds it already)
        model_sha256 = digest_in_background(opts.model)
        session = held.enter_context(Session(opts, workers, on_phase))  # it says what is wrong with a missing or damaged model
        header = _header(known_header, session, model_sha256)
        load_seconds = time.monotonic() - t0
        log(f"loaded {opts.model}: {len(session.program.nodes)} call nodes; checking the original")
        on_phase(f"checking the original: its first compile on {session.backend.describe()}")
        notes = session.notes()
        for note in notes.values():
            log(f"note: {note}")
        check_out_dir(out, resume, force)  # again: a run without the lock (an older trtmin) may have written there
        if force or resume:  # the user's edits to the finished run's files, and files of its names it did not write, stay
            for name, kept, edited in keep_edited(out, edited_too=force):  # (--resume alone refused edits)
                log(f"note: {name} was {'edited since trtmin wrote it' if edited else 'not written by the run there'}; "
                    f"{'--force' if force else '--resume'} keeps that copy as {kept}")
        # --force over a run: its journal back where this one finds nothing to reduce (the
        # corrected command goes on over it, its outputs still theirs)
        earlier = (out / JOURNAL).read_bytes() if force and not resume and had_journal else None
        earlier_mtime_ns = (out / JOURNAL).stat().st_mtime_ns if earlier is not None else 0
        journal = Journal(out, header, resume)
        if resume:
            n = len(journal.cache)
            log(f"resuming: replaying {n} journaled verdict{'s' * (n != 1)} (the oracle calls count only those "
                "the search asks for: a --jobs run journals its speculative runs too)")
            if journal.damaged:
                lines = ", ".join(map(str, journal.damaged[:5])) + (" ..." if len(journal.damaged) > 5 else "")
                log(f"note: {len(journal.damaged)} line{'s' if len(journal.damaged) > 1 else ''} of {JOURNAL} "
                    f"({lines}) {'hold' if len(journal.damaged) > 1 else 'holds'} no verdict (damaged); "
                    f"{'their candidates are' if len(journal.damaged) > 1 else 'its candidate is'} asked again")

        def check(v: Verdict) -> None:
            nonlocal nothing_to_reduce
            try:
                mistake = session.setup_problem(v) if v.kind in ("crash", "hang") else None
                if mistake:
                    raise TrtminError(f"{mistake} (the original program, on {session.backend.describe()})")
                _require_failure(opts, v, match, session.program)
                if problem.min_failures > problem.original_failures:  # no candidate could be held to it
                    raise TrtminError(f"the original fails {problem.original_failures} of {opts.repeat} runs, fewer "
                                      f"than --min-failures {problem.min_failures}: no candidate would be kept; pass "
                                      f"--min-failures {problem.original_failures} or less, or leave it out")
            except TrtminError:
                nothing_to_reduce = True
                raise
            if opts.repeat > 1:
                log(f"the original fails {problem.original_failures} of {opts.repeat} runs; a candidate "
                    f"must fail {problem.min_failures} of {opts.repeat}")
            precision = precision_note(v, opts.reference)
            if precision:  # rounding alone is a mismatch there, and a reduction may end at it
                problem.notes["precision"] = precision
                log(f"note: {precision}")

        problem = _new_problem(opts, session, journal, match, check, on_change)
        problem.notes.update(notes)
        if opts.jobs > 1:  # the original's check may share its batch with a slower speculative candidate
            _say_the_originals_verdict(session, problem, on_phase)
        original_nodes = len(problem.current.nodes)  # each kept node is one call node of its slice
        try:
            run_reduction(problem)
            backend = _final_backend(opts, session, problem.current.settings)  # only the settings the bug needs
            info, final, values, summary = _result(opts, session, problem, backend, original_nodes, journal.digest,
                                                   t0)  # its check of static sizes is journaled too
        except TrtminError:
            if nothing_to_reduce and not had_journal:  # no run to resume: the folder stays free for the next
                journal.close()
                _forget_run(out)
            elif nothing_to_reduce and earlier is not None:
                journal.close()
                atomic_write(out / JOURNAL, earlier)
            raise
        except KeyboardInterrupt:  # before this run's first verdict, --force has replaced nothing yet
            journal.close()
            if earlier is not None and journaled_verdicts(out / JOURNAL) == 0:
                atomic_write(out / JOURNAL, earlier)
                os.utime(out / JOURNAL, ns=(earlier_mtime_ns, earlier_mtime_ns))  # the earlier run's, as it was
            raise
        finally:
            journal.close()
        summary["timing"]["load_seconds"] = round(load_seconds, 2)  # the model: load, eager values, state
        summary["program_sha256"] = header["program_sha256"]  # repros match: another bug cut from the same program
        # --resume: the verdicts replayed from the journal, not asked again (evaluations counts this run's)
        summary["timing"]["replayed_verdicts"] = len(journal.cache) if resume else 0
        if journal.session > 1:  # what the whole run cost: the earlier sessions, each up to its last verdict
            summary["timing"].update(sessions=journal.session,
                                     earlier_sessions_seconds=round(journal.earlier_seconds, 2))
        changed = plugin_changed(opts, header.get("plugin_sha256"))  # the journal holds every verdict: none lost
        if changed:
            raise TrtminError(changed)
        if not journal.still_in_place():  # the folder was removed mid-run: results there would be no run's
            raise TrtminError(f"--out {out} lost this run's {JOURNAL} during the run (the folder was removed or "
                              "emptied): nothing is written, as its files would belong to no run, or to another; "
                              "run the command again")
        _write(out, opts, backend, problem.current, info, final, values, summary, log, on_phase, known_bugs)
        return summary


def _timed_out_note(problem: ReductionProblem, opts: Options) -> str | None:
    """Candidates that ran past --timeout under another oracle than hang: each counted as not
    the bug, which a busy machine may have made so (a 1,300-node window of a long run took
    290 s of the 300: a hunt). Said, with the fix; None where none did."""
    if opts.oracle == "hang":
        return None
    n = sum(any(v.kind == "hang" for v in runs) for runs in problem.cache.values())
    if not n:
        return None
    return (f"{n} candidate{'s' if n > 1 else ''} ran past --timeout {opts.timeout:g} s and counted as not the bug; "
            "on a busy machine that may have kept a larger result: a longer --timeout tells")


def _say_the_originals_verdict(session: Session, problem: ReductionProblem, on_phase: Callable[[str], None]) -> None:
    """With --jobs, the original's check runs in a batch beside a speculative candidate, and
    the search goes on when the batch ends: the live line kept saying "checking the original"
    for a minute after its verdict had landed (a hunt, 1,808 nodes on Inductor). It says the
    verdict as it lands, and what is still awaited."""
    original, record = problem.current, session.on_verdict

    def landed(cand: Candidate, runs: list[Verdict]) -> None:
        if record is not None:
            record(cand, runs)
        if cand == original and problem.first_verdict is None:  # --repeat: a failing run, if any, says it
            said = next((v for v in runs if v.kind != "pass"), runs[0]).describe()
            on_phase(f"the original: {without_scratch_folders(said)[:100]}; the search goes on when the candidates "
                     "compiled beside it are in")

    session.on_verdict = landed


def _new_problem(opts: Options, session: Session, journal: Journal, match: re.Pattern[str] | None,
                 check: Callable[[Verdict], None],
                 on_change: Callable[[ReductionProblem], None] | None) -> ReductionProblem:
    """The reduction problem of this run: the session's oracle, the journal's verdicts
    replayed, what the backend and the options allow the passes."""
    backend = session.backend
    session.on_verdict = journal.record  # as each candidate's runs land, not when their batch ends
    problem = ReductionProblem(session.program, session.evaluate, rules_of(opts, backend, match),
                               settings=opts.settings, jobs=opts.jobs,
                               partitions=session.partitions if backend.reports_partitions else None,
                               on_change=on_change, check_original=check)
    problem.preload(journal.cache)
    return problem


def rules_of(opts: Options, backend: Any, match: re.Pattern[str] | None) -> Rules:
    """What the options and the backend (an instance or its class) let a reduction do:
    one place, for reduce and bench/replay_journal.py."""
    return Rules(match=match, any_failure=opts.any_failure, min_failures=opts.min_failures,
                 localize=opts.localize and opts.oracle in VALUE_ORACLES, locate_from_errors=opts.localize,
                 generate_values=opts.generate_values, op_fallback_setting=backend.op_fallback_setting,
                 lowering_toggles=tuple(backend.lowering_toggles), rewrite_words=backend.rewrite_words)


def _result(opts: Options, session: Session, problem: ReductionProblem, backend: Any, original_nodes: int,
            journal_digest: str, t0: float) -> tuple[ReproInfo, Slice, dict[str, Any], dict[str, Any]]:
    """What the reduction found, for the outputs: the script's facts, the final slice, the
    values it runs on (made ones included) and summary.json."""
    assert problem.first_verdict is not None
    original = problem.first_verdict.named(session.program.output_names)  # as the user's model names it
    found = problem.current
    needed_settings, generated, sizes = found.settings, dict(found.made), dict(found.sizes or ())
    replaced = {name: make(expr).to(opts.device) for name, expr in generated.items()}
    final = session.program.materialize(found.nodes, replaced=replaced, sizes=sizes)
    values = session.program.values_as_fed(final, replaced)  # what the final verdict ran on
    reads = {session.program.nodes[i].name for i in found.nodes} | set(final.input_names)
    if not any(n.name in reads for n in session.program.random_draws):
        problem.notes.pop("random_draws", None)  # the original's: the program left neither draws nor reads a draw
    final_verdict = problem.verdict(found)
    dynamic = _needed_dynamic(problem, found, _kept_dynamic(session, final.input_names, values))
    delegation, took_none = _delegation_note(session, found, static=not dynamic)
    if delegation:
        problem.notes["delegation"] = delegation
    emitted_undelegated = _emitted_undelegated(opts, session, found, static=not dynamic)
    exported, exporters = _exported_model_note(session, found, final_verdict, static=not dynamic)
    if exported:
        problem.notes["exported_model"] = exported
    if exporters or final_verdict.exc_type == OnnxExportError.__name__:
        problem.notes["fixed_by"] = "onnxscript"  # torch.onnx's lowerings: onnxscript's torch_lib (repros add's example)
    moved = _symptom_moved(original, final_verdict)
    if moved:
        problem.notes["original_symptom"] = moved
    shrank = _mismatch_shrank(original, final_verdict)
    if shrank:
        problem.notes["shrank"] = shrank
    undefined = _undefined_cast_note(final, values, final_verdict)
    if undefined:
        problem.notes["undefined_cast"] = undefined
    timed_out = _timed_out_note(problem, opts)
    if timed_out:
        problem.notes["timed_out"] = timed_out
    precision = None if "precision" in problem.notes else precision_note(final_verdict, opts.reference)
    if precision:  # the original's output was float32, the reduced one's is bf16 (an autocast region's)
        problem.notes["precision"] = precision
    read_off = None if session.backend.oracle_problem("mismatch") else _read_values_off(session.program, problem, found)
    if read_off:
        problem.notes["read_off"] = read_off[0]
    seconds = time.monotonic() - t0
    summary = _summary(opts, problem, original, final_verdict, original_nodes, final.call_nodes, seconds,
                       session.pool.restarts)
    summary["timing"]["load"] = session.load_phases
    summary["timing"]["worker_start"] = session.pool.first_start_phases  # seconds by step, imports to state
    summary["timing"]["forked_workers"] = session.pool.forked  # of the workers started, from the zygote
    summary["flakiness"] = {"repeat": opts.repeat, "original_failures": problem.original_failures,
                            "final_failures": problem.failures(found),
                            "min_failures": problem.min_failures}
    info = ReproInfo(
        title=f"{backend.describe_shared()} "
              f"{session.backend.failure_words(final_verdict) or _kind_words(final_verdict, opts.device)}: "
              f"{ops_in_title(sorted({op_name(n) for n in final.gm.graph.nodes if _titled(n)}))}",
        source_model=opts.model.name, original_nodes=original_nodes, final_nodes=final.call_nodes,
        oracle_calls=problem.counters.oracle_calls, oracle=opts.oracle,
        verdict=final_verdict, signature=problem.signature, match=opts.match, atol=opts.atol, rtol=opts.rtol,
        reference=opts.reference, device=opts.device, timeout=opts.timeout, memory_limit_mb=opts.memory_limit_mb,
        imports=tuple(opts.imports) if uses_custom_ops(final.gm.graph) else (),  # else SKIPPED for nothing
        dynamic=dynamic,
        needs_subprocess=needs_child(final_verdict))
    if final_verdict.extra.get("native_errors"):  # the compiler's words behind its error code
        summary["native_errors"] = final_verdict.extra["native_errors"]
    summary["settings"] = {"given": opts.settings, "needed": dict(needed_settings)}
    original = session.program.values
    kept = {n for n, t in replaced.items() if _leading_slice(t, original[n])}  # shrunk, not made: their own values
    summary["generated_values"] = final.by_attribute({n: e for n, e in generated.items() if n not in kept})  # as
    summary["sliced_values"] = sorted(final.by_attribute({n: "" for n in kept}))  # repro.py names them
    summary["shrunk_shapes"] = final.by_attribute({n: [list(session.program.values[n].shape), list(t.shape)]
                                                   for n, t in replaced.items()
                                                   if t.shape != session.program.values[n].shape})
    summary["shrunk_sizes"] = {str(k): v for k, v in sizes.items()}  # in the graph's size arguments
    summary["dynamic"] = {n: {str(d): list(b) for d, b in dims.items()} for n, dims in info.dynamic.items()}
    summary["diagnosis"] = session.notes_on({k: v for k, v in problem.notes.items() if not k.startswith("_")},
                                            final, final_verdict)  # _: passes' own
    if "_first_off_node" in problem.notes and problem.notes["_first_off_node"] not in found.nodes:
        summary["diagnosis"]["first_off_value_cut"] = True  # the value that showed first is not in the result
    summary["one_minimal"] = bool((problem.notes.get("one_minimal") or {}).get("proven"))
    undelegated = session.backend.undelegated if took_none else None  # tells whose bug it is: run it too
    summary["emitted"] = list(opts.emit) + ([undelegated] if undelegated and undelegated not in opts.emit else [])
    if undelegated:  # its script, run alone, tells whose bug it is: report.md says so under what fails
        summary["undelegated"] = undelegated
    if emitted_undelegated:  # an --emit's delegate that took nothing: its script's verdict is another's
        summary["emitted_undelegated"] = emitted_undelegated
    if read_off:  # what repros match compares with the suite too: the cause may be a saved bug
        summary["read_off"] = read_off[1]
    summary["journal_header_sha256"] = journal_digest  # repros add: these outputs are this journal's run
    return info, final, values, summary


def _write(out: Path, opts: Options, backend: Any, found: Candidate, info: ReproInfo, final: Slice,
           values: dict[str, Any], summary: dict[str, Any], log: Callable[[str], None],
           on_phase: Callable[[str], None],
           known_bugs: Callable[[Path, dict[str, Any]], list[dict[str, Any]]] | None = None) -> None:
    """repro.py (run alone once, unless --no-verify), report.md, summary.json and the --emit
    scripts of the candidate found, with `backend`: only the settings the bug needs;
    `known_bugs`: the saved repros it looks like (the CLI's: it reads the suite)."""
    needed_settings, generated = dict(found.settings), dict(found.made)

    def verify(script: Path) -> dict[str, Any]:
        log("running repro.py alone, in a new process, as a maintainer will")
        on_phase("running repro.py alone")  # at 80 columns the result beside it shows whole
        return run_alone(script, opts.timeout)

    def others() -> dict[str, dict[str, Any]]:  # each --emit script, run alone too: which backends have the bug
        ran = {}
        for spec in list(summary["emitted"]):  # --emit's, and the backend without its delegate where it took nothing
            try:
                path = write_extra_script(out, info, final, values, spec, needed_settings, generated,
                                          reduced_with=backend.describe_shared(),  # no user folder
                                          ran_as=_ran_as(spec, opts.backend, backend.describe_shared(), summary))
            except OSError:  # a full disk, say: write_outputs's caller says so, and --resume writes them
                raise
            except Exception as e:  # noqa: BLE001 - torch.onnx's export for tensorrt's, say: the rest stands
                summary["emitted"].remove(spec)  # its files are not among those written (write_outputs)
                summary.setdefault("emit_failed", {})[spec] = f"{type(e).__name__}: {first_line(e, 300)}"
                log(f"note: no script for {spec}: {summary['emit_failed'][spec]}")
                continue
            if opts.verify:
                log(f"running {path.name} alone, for {spec}")
                on_phase(f"running {path.name} alone")
                ran[path.name] = run_alone(path, opts.timeout)
        return ran

    try:
        write_outputs(out, info, final, values, backend, summary, verify if opts.verify else None, generated, others,
                      known_bugs, on_phase)
    except OSError as e:  # a full disk, say: every verdict is in the journal, so nothing is lost
        raise write_failure(f"the results into {out}", e, "rerun with --resume (it replays the journal, no oracle "
                            "call)") from None


def _leading_slice(made: Any, original: Any) -> bool:
    """Whether a made value is the original's first values along each dim (a small tensor
    written inline, cut as its size shrank: minimize/search/passes/shapes.py), not values
    the script makes up."""
    if not (isinstance(made, torch.Tensor) and isinstance(original, torch.Tensor)) or made.dim() != original.dim() \
            or any(m > o for m, o in zip(made.shape, original.shape)):
        return False
    cut = original[tuple(slice(0, m) for m in made.shape)]
    return made.dtype == cut.dtype and bool(torch.isclose(made.cpu(), cut.cpu(), rtol=0, atol=0, equal_nan=True).all())


def _symptom_moved(original: Verdict, final: Verdict) -> str | None:
    """Where the reduced program's mismatch is not the one the user saw (another dtype, or
    more than 100x larger: the cut kept an upstream cause, whose own output shows it), the
    original's words, so that the user can tie the result to their symptom."""
    if original.kind != "mismatch" or final.kind != "mismatch":
        return None
    before, after = output_dtype(original), output_dtype(final)
    grew = (original.max_abs or 0) > 0 and (final.max_abs or 0) > 100 * (original.max_abs or 0)
    if not grew and not (before and after and before != after):
        return None
    return (f"the original program failed as {original.describe()}; the program left, a cause upstream of that "
            f"output, fails in its own ({after or 'its dtype'}, max abs "
            f"{'n/a' if final.max_abs is None else format(final.max_abs, '.4g')})")


def _undefined_cast_note(final: Slice, values: dict[str, Any], verdict: Verdict) -> str | None:
    """Where a value bug's program casts floats the integer type cannot hold (run eagerly on
    the values the final verdict ran on), words that say the backend's other result may be
    no bug: C++ leaves that cast undefined, eager PyTorch with it (a maintainer's hunt:
    Inductor's -128 for eager's 120 of an int8 cast of 200-odd, titled Inductor's bug)."""
    if verdict.kind not in VALUE_ORACLES:
        return None
    try:
        casts = out_of_range_casts(final.gm, [values[name] for name in final.input_names])
    except Exception:  # noqa: BLE001 - a caveat only: an eager run that fails here says nothing of the bug
        return None
    if not casts:
        return None
    cast, dtype_name = casts[0], lambda d: str(d).removeprefix("torch.")
    info = torch.iinfo(cast.target)
    held = f"values from {cast.low:.4g} to {cast.high:.4g}" + (" and NaN" if cast.nan else "")
    return (f"`{cast.node}` casts {dtype_name(cast.source)} {held} to {dtype_name(cast.target)}, whose range is "
            f"[{info.min}, {info.max}]: C++ leaves a cast out of range undefined, eager PyTorch's kernels with it, "
            "so the backend's other result may be no bug; clamp into range before the cast and check again "
            "before filing it")


SHRANK_FACTOR = 100  # a reduced mismatch this many times smaller than the original's is said


def _mismatch_shrank(original: Verdict, final: Verdict) -> str | None:
    """Where the reduced program's mismatch is far smaller than the original's, words that
    say so and how to hold the search to the original's size: the signature lets a mismatch
    fall by up to 3 decades (upstream drift cut away), so a smaller bug met on the way (a
    bf16 conv's rounding where a layer_norm carried the error) may be what is left. Under
    --reference float64, a bug left within Signature.RATIO_MARGIN of eager's own error is
    said to be near the threshold: other values may not show it."""
    if original.kind != "mismatch" or final.kind != "mismatch" or not original.max_abs or not final.max_abs:
        return None
    said = []
    ratio, was = final.extra.get("ratio"), original.extra.get("ratio")
    if ratio is not None and ratio < Signature.RATIO_MARGIN:  # --reference float64: the bug's own size
        said.append(f"the program left is off by {ratio:.3g}x eager's own error from float64, near the "
                    f"{ERROR_RATIO:g}x that makes a bug" + (f" (the original: {was:.3g}x)" if was else "") +
                    ": other values may show none; run repro.py on other inputs before filing it")
    if (math.isfinite(original.max_abs) and math.isfinite(final.max_abs)  # a NaN lost: no size to compare
            and output_dtype(original) == output_dtype(final) and final.max_abs * SHRANK_FACTOR <= original.max_abs):
        said.append(f"the program left is off by {final.max_abs:.4g}, {original.max_abs / final.max_abs:.0f}x less "
                    f"than the original's {original.max_abs:.4g}: it may be another, smaller bug met on the way; to "
                    f"hold the reduction to errors of the original's size, rerun with --atol {original.max_abs / 10:.2g}")
    return "; and ".join(said) or None


def ops_in_title(ops: list[str], limit: int = 120) -> str:
    """The ops, comma-separated, as many whole names as fit in `limit` characters and then how
    many more: a name cut in the middle read as another op, and one left out as none."""
    shown = ", ".join(ops)
    for k in range(len(ops) - 1, 0, -1):
        if len(shown) <= limit:
            break
        shown = f"{', '.join(ops[:k])} and {len(ops) - k} more"
    return shown


def _final_backend(opts: Options, session: Session, settings: Mapping[str, Any]) -> Any:
    """The backend with only the settings the bug needs (the settings pass drops the rest):
    the one repro.py, the report and its title name."""
    return session.backend if dict(settings) == opts.settings else resolve(opts.backend, dict(settings))


def _kept_dynamic(session: Session, names: list[str], values: dict[str, Any]) -> dict[str, dict[int, Any]]:
    """The final inputs' dims the compile kept dynamic: the program's, where the backend keeps
    them, of a size above 1 (torch specializes 0 and 1; a shrunk size may be 1)."""
    if not session.backend.keeps_dynamic:
        return {}
    kept = {n: {d: b for d, b in session.program.dynamic.get(n, {}).items()
                if isinstance(values[n], torch.Tensor) and d < values[n].dim() and values[n].shape[d] > 1}
            for n in names}
    return {n: dims for n, dims in kept.items() if dims}


def _needed_dynamic(problem: ReductionProblem, found: Candidate,
                    kept: dict[str, dict[int, Any]]) -> dict[str, dict[int, Any]]:
    """The dynamic dims repro.py must keep: none where the final program, compiled with
    static sizes, fails the same way (one more oracle call, --repeat runs), which spares
    the script its dynamic marks (some 40 lines) and tells the maintainer the sizes being
    dynamic is not the bug; else those the compile kept. Said in report.md's Diagnosis."""
    if not kept:
        return kept
    problem.current_pass = "static sizes"  # on the live line while it compiles
    with counted(problem, CHECK_STATIC_SIZES):
        static = problem.failures(found.but(static=True)) >= problem.min_failures  # journaled: a --resume replays it
        problem.counters.accepted += static  # the static form is taken: its row says so, as made values' does
    problem.current_pass = DONE
    if static:
        problem.notes["static"] = ("the program was exported with dynamic sizes, and the bug shows with them "
                                   "static too (one call): repro.py compiles it with static sizes")
        return {}
    problem.notes["static"] = ("the bug needs the dynamic sizes the program was exported with: compiled with "
                               "static sizes it does not show (one call)")
    return kept


def _delegation_note(session: Session, found: Candidate, static: bool) -> tuple[str | None, bool]:
    """What the delegate did not take of the reduced program (ExecuTorch's XNNPACK): a bug in
    an op it left runs in ExecuTorch's portable kernels, and is theirs; and whether it took
    none (then the script for the backend without it, `Backend.undelegated`, is written and
    run alone too, which tells). One lowering, no run, with static sizes where repro.py has them."""
    said = session.delegation(found, static)
    if not said or not said["not_delegated"]:
        return None, False
    ops = ", ".join(f"`{op}`" for op in said["not_delegated"])
    if said["delegated"]:
        return f"{ops} not delegated: ExecuTorch ran them on its portable kernels, the rest in the delegate", False
    alone = session.backend.undelegated
    return (f"the delegate took none of the program's ops: ExecuTorch ran {ops} on its portable kernels, so the "
            "bug is likely theirs, not the delegate's" + (f" (`{emitted_names(alone)[0]}`, for {alone}, tells)"
                                                          if alone else "")), True


def _exported_model_note(session: Session, found: Candidate, final: Verdict, static: bool) -> tuple[str | None, bool]:
    """Whose a wrong value of a backend that runs torch.onnx's export is (ONNX Runtime,
    TensorRT): the same export run by ONNX's reference evaluator (one call). Where it computes
    the bug too, the exported model is wrong, and the bug is likely torch.onnx's lowering,
    not the runtime's (a hunt: ORT's SDPA rows of an all-False mask, titled as ORT's); where it
    matches eager, the runtime runs a right model wrong. A crash that says the model is invalid
    (ORT's INVALID_GRAPH on a bf16 Conv) asks onnx.checker: where it refuses the export too,
    torch.onnx's. The note (None for other bugs and backends, and where the evaluator cannot
    run it), and whether it says the bug is torch.onnx's."""
    refused = final.kind == "crash" and "invalid" in final.message.lower()  # ORT's INVALID_GRAPH, TensorRT's INVALID_NODE
    if final.kind not in ("mismatch", "nan") and not refused:
        return None, False
    said = session.exporter_control(found, static)
    spec = session.backend.spec
    if said is not None and said.exc_type == "InvalidOnnxModel":
        return (f"onnx.checker (onnx {package_version('onnx')}) refuses the exported model too ("
                f"{first_line(said.message)}): torch.onnx made an invalid ONNX model, so the bug is likely "
                f"torch.onnx's, not {spec}'s"), True
    if said is None or refused or not (said.kind == "pass" or Signature.of(final).matches(
            said, counts=lambda output: output == final.output)):  # the same output off, by the bug's size
        return None, False
    evaluator = f"ONNX's reference evaluator (onnx {package_version('onnx')}), run on the same exported model,"
    if said.kind == "pass":
        return f"{evaluator} matches eager PyTorch: the model torch.onnx made is right, and {spec} computes it wrong", False
    off = f"max abs {said.max_abs:.4g}" if said.max_abs is not None else said.kind
    return (f"{evaluator} differs from eager PyTorch too ({off}): the model torch.onnx made computes "
            f"otherwise than PyTorch, so the bug is likely torch.onnx's lowering, not {spec}'s"), True


def _ran_as(spec: str, reduced_with: str, shown: str, summary: dict[str, Any]) -> str | None:
    """What an emitted script for `spec` runs that the reduction ran too, as its title names
    it: the backend itself (`shown`); the portable kernels where XNNPACK took none of the ops,
    whichever of the two the reduction ran; else None (`spec` never ran the bug)."""
    if spec == reduced_with:
        return shown
    if spec == summary.get("undelegated"):  # --backend executorch:xnnpack took none: the portable kernels'
        return spec
    if spec in (summary.get("emitted_undelegated") or {}) and reduced_with == undelegated_of(spec):
        return shown  # --emit executorch:xnnpack beside --backend executorch:portable, taking none: the same kernels
    return None


def _emitted_undelegated(opts: Options, session: Session, found: Candidate, static: bool) -> dict[str, list[str]]:
    """Of the --emit backends with a delegate (executorch:xnnpack beside --backend
    executorch:portable), those whose delegate takes none of the reduced program's ops, with
    the ops their script then runs on ExecuTorch's portable kernels: its REPRODUCED is
    theirs, which report.md says beside it. One lowering each, in a worker, no run."""
    said = {spec: session.delegation(found, static, backend=spec) for spec in opts.emit if spec != opts.backend}
    return {spec: d["not_delegated"] for spec, d in said.items() if d and not d["delegated"] and d["not_delegated"]}


def op_name(node: Any) -> str:
    """How a title or a note names a node's op: `remainder.Scalar`, not `aten.remainder.Scalar`,
    nor `<built-in function getitem>`."""
    if isinstance(node.target, torch._ops.OpOverload):
        return str(node.target).removeprefix("aten.")
    return getattr(node.target, "__name__", None) or str(node.target)


def _kind_words(verdict: Verdict, device: str) -> str:
    """The title's words for a failure: "mismatch on cpu", and what a mismatch lost where
    eager's NaN or inf came back finite ("mismatch on cpu, NaN lost": a maintainer's hunt
    read ONNX Runtime's ReduceMax dropping NaN as any wrong value)."""
    lost = verdict.extra.get("lost") if verdict.kind == "mismatch" else None
    return f"{verdict.kind} on {device}" + (f", {lost['eager']} lost" if isinstance(lost, dict) and lost.get("eager")
                                            else "")


def _titled(node: Any) -> bool:
    """A call node the title names: not a getitem, which only picks one of an op's values."""
    return node.op == "call_function" and node.target is not operator.getitem


def _read_values_off(program: Any, problem: ReductionProblem, found: Candidate) -> tuple[str, dict[str, Any]] | None:
    """For a crash of two ops or more: the ops before the last ones (those no kept op reads)
    compiled alone, one call, and, if they already compute other values, the words of what
    differs from eager and {"ops": {ATen op: count}, "verdict": its line}. A maintainer read ExecuTorch's "embedding: indices_ptr[0] -7 < 0" as a user's
    negative index, where the remainder before it gives -7 for eager's 5: its bug. Not
    asked where the backend cannot judge values here (TensorRT without a GPU builds alone)."""
    if problem.signature.kind != "crash" or len(found.nodes) < 2:
        return None
    kept = set(found.nodes)
    read = {program.index.get(dep.name) for i in kept for dep in program.nodes[i].all_input_nodes}
    before = program.normalize(kept & read)
    if not before or any(fed_from_eager(program.nodes[i]) for i in before):  # a draw's values differ by chance
        return None
    read_before = {dep.name for i in before for dep in program.nodes[i].all_input_nodes}  # inputs and weights
    with counted(problem, READ_VALUES_OFF):
        v = problem.verdict(found.but(nodes=before, made={k: e for k, e in found.made if k in read_before}))
    if v.kind not in ("mismatch", "nan"):
        return None
    ops = ", ".join(dict.fromkeys(op_name(program.nodes[i]) for i in before))
    first = v.extra.get("first_off") or {}
    at = (f"; at {first['index'][0]}: eager {first['eager'][0]}, backend {first['backend'][0]}"
          if first.get("index") and first.get("eager") and first.get("backend") else "")
    words = f"the ops before the failing ones ({ops}), compiled alone, already differ from eager: {v.describe()}{at}"
    return words, {"ops": dict(Counter(str(program.nodes[i].target) for i in before
                                       if isinstance(program.nodes[i].target, torch._ops.OpOverload))),
                   "verdict": v.describe()}


def _forget_run(out: Path) -> None:
    """The journal of a run whose original program does not fail: there is nothing to
    resume, and left there it would make the corrected command's folder 'hold another run'."""
    (out / JOURNAL).unlink(missing_ok=True)  # the folder, if this run made it, goes with the lock


def _require_failure(opts: Options, v: Verdict, match: re.Pattern[str] | None, program: Program) -> None:
    """Refuses an original that does not fail as asked, saying what to change."""
    if v.kind == "invalid":
        raise unjudgeable(v.exc_type, v.message)
    if not answers(v, opts.oracle, match):  # the original as asked; --any-failure is for the candidates
        how = (f"fails otherwise than --match {opts.match!r} asks" if v.failed and v.kind == opts.oracle and match
               else f"does not fail the {opts.oracle} oracle")
        raise TrtminError(f"the original program {how} on {opts.backend} ({v.describe()}); nothing to reduce: "
                          f"{_refusal_hint(opts, v, program)}")


def _refusal_hint(opts: Options, v: Verdict, program: Program) -> str:
    """What to change where the original does not fail as asked: a longer --timeout, the
    oracle it does fail, --match; none where its values read random draws (a difference by
    chance, which check too calls no failure)."""
    if program.off_by_chance(v.kind, v.output):
        return f"it compiled and ran (its values are not judged: {random_draws_note(program, fed=False)})"
    if v.kind == "hang" and opts.oracle != "hang":
        return (f"no result within --timeout {opts.timeout:g} s: if the compile is only slow (a big graph), raise "
                "--timeout; if it never ends, try --oracle hang")
    if v.failed and v.kind != opts.oracle:  # and, for a bf16 mismatch, the rounding it may be (check says it too)
        precision = precision_note(v, opts.reference)  # a mismatch's alone
        return f"it fails as {v.kind} instead; try --oracle {v.kind}" + (f" (but {precision})" if precision else "")
    if not v.failed:
        return (f"check --backend, --device{' and the tolerances' if opts.oracle == 'mismatch' else ''}"
                + (", or, if it fails only sometimes, measure it with trtmin check --repeat 10 and reduce "
                   "with --repeat" if opts.repeat == 1 else ""))
    return (f"its error does not match --match {opts.match!r} (a failure that comes first, as the parser's before "
            "the builder's, hides a later one: cut the model before it, or reduce this one first)")


def _summary(opts: Options, problem: ReductionProblem, original: Verdict, final: Verdict,
             original_nodes: int, final_nodes: int, seconds: float, restarts: int) -> dict[str, Any]:
    assert problem.signature is not None
    return {
        "model": opts.model.name,
        "backend": opts.backend,
        "device": opts.device,
        "oracle": opts.oracle,
        "signature": problem.signature.text(),
        "original_verdict": original.describe(),
        "final_verdict": final.describe(),
        "original_nodes": original_nodes,
        "final_nodes": final_nodes,
        "oracle_calls": problem.counters.oracle_calls,
        "accepted_steps": problem.counters.accepted,
        "invalid_candidates": problem.counters.invalid,
        "passes": {name: {"calls": s.calls, "accepted": s.accepted, "removed": s.removed}
                   for name, s in problem.pass_stats.items()},
        "check_rows": [name for name in CHECKS if name in problem.pass_stats],  # of "passes": checks, not passes
        "environment": {k: v for k, v in environment(parse_backend(opts.backend).packages(())).items() if k != "os"},
        "timing": {  # everything that may differ between runs and --jobs values
            "seconds": round(seconds, 2),
            "oracle_seconds": round(problem.counters.oracle_seconds, 2),
            "trtmin_seconds": round(seconds - problem.counters.oracle_seconds, 2),
            "evaluations": problem.counters.evaluations,
            "batches": problem.counters.batches,
            "first_batch_seconds": round(problem.counters.first_batch_seconds, 2),
            "jobs": opts.jobs,
            "worker_restarts": restarts,
            "pass_seconds": {name: round(s.seconds, 2) for name, s in problem.pass_stats.items()},
        },
        "seconds": round(seconds, 2),
    }
