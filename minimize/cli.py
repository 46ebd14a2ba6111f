"""The command line. Thin: it parses options, calls the jobs, and turns TrtminError into
one red line and exit code 2 (docs/design.md, Conventions). The only module that imports typer.
"""

from __future__ import annotations

import functools
import signal
import os
import sys
import time
import warnings
from enum import Enum
from pathlib import Path
from typing import Annotated, Any, Optional, Sequence

import typer
from rich.console import Console
from rich.markup import escape

from minimize.run import interrupts
from minimize.arguments import build_options, check_jobs, check_numbers, check_timeout, jobs_note
from minimize.program.libraries import checked_imports
from minimize.emit.out_dir import (JOURNAL, check_reads_outside, check_out_dir, earlier_runs_files, finished_run,
                                   held_by_this_run, journaled_verdicts)
from minimize.emit.run_header import check_resumable, header_before_loading
from oracles import bytecode
from oracles.backend_names import check_compile_on
from oracles.errors import TrtminError, unjudgeable, without_scratch_folders
from oracles.verdict import answers
from oracles.worker import exit_now

# typer 0.29's help shows a flag's type (<bool>) as though it took a value; a flag takes
# none, so its type column stays empty (--resume, --verify/--no-verify, --help). And an
# argument's beside its name (`NAME <list[str]>`, `OUT_DIR <path>`): the name says it. Older
# typers (0.12 on the GPU machine) have no such column, nor these methods.
_option_type = getattr(typer.core.TyperOption, "display_type_rich", None)
if _option_type is not None:
    typer.core.TyperOption.display_type_rich = (  # type: ignore[method-assign]
        lambda self, ctx: None if self.is_flag else _option_type(self, ctx))
_argument_type = getattr(typer.core.TyperArgument, "display_type_rich", None)
if _argument_type is not None:
    typer.core.TyperArgument.display_type_rich = (  # type: ignore[method-assign]
        lambda self, ctx: None if self.metavar else _argument_type(self, ctx))

app = typer.Typer(rich_markup_mode="rich", no_args_is_help=True, add_completion=False,
                  help="Minimize deep-learning compiler bugs into tiny standalone repro scripts.")
err = Console(stderr=True, soft_wrap=True)  # a line that is not a terminal's stays one line


def _version(value: bool) -> None:
    if value:
        from minimize import version
        print(f"trtmin {version()}")
        raise typer.Exit(0)


@app.callback()
def _options(version: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True,
                                                   help="Print trtmin's version and exit.")] = False) -> None:
    """Minimize deep-learning compiler bugs into tiny standalone repro scripts."""


class Oracle(str, Enum):
    crash = "crash"
    nan = "nan"
    mismatch = "mismatch"
    oom = "oom"
    hang = "hang"


class Reference(str, Enum):
    eager = "eager"
    float64 = "float64"


BACKEND_HELP = ("Which compiler: inductor, torch_tensorrt, tensorrt (ONNX -> TensorRT), onnxruntime, "
                "executorch:xnnpack|portable|cuda|tensorrt, eager; a plugin [bold]path/to/file.py:fn[/] (a "
                "torch.compile backend); or [bold]'cmd:python run.py {model} {inputs} {outputs}'[/]. "
                "[yellow]A plugin or command runs your code[/] (docs/reference.md).")

ModelArg = Annotated[Path, typer.Argument(metavar="MODEL.pt2", help="The exported program, written by "
                                                                   "torch.export.save.", show_default=False)]
OracleOpt = Annotated[Optional[Oracle], typer.Option(rich_help_panel="The question", help="What counts as the bug (required): crash, nan, mismatch, "
                                                     "oom or hang.", show_default=False)]
BackendOpt = Annotated[Optional[str], typer.Option("--backend", rich_help_panel="The question", metavar="BACKEND", help=BACKEND_HELP + " Required.",
                                                   show_default=False)]
InputsOpt = Annotated[Optional[Path], typer.Option("--inputs", metavar="FILE", rich_help_panel="The question", help="A torch.save'd file of the arguments as given to "
                                                   "torch.export.export: a tuple (args) or (args, kwargs), with dicts "
                                                   "and lists inside as the model takes them (loaded with "
                                                   "weights_only=True). Default: the example inputs the .pt2 "
                                                   "keeps (those export was given), else seeded ones made from the "
                                                   "program's shapes.")]
MatchOpt = Annotated[Optional[str], typer.Option("--match", metavar="REGEX", rich_help_panel="The question", help="Regex on 'ExceptionType: message' that the failure must match.")]
AtolOpt = Annotated[float, typer.Option("--atol", metavar="ABS", rich_help_panel="Tolerance", help="Absolute tolerance of the mismatch oracle.")]
RtolOpt = Annotated[float, typer.Option("--rtol", metavar="REL", rich_help_panel="Tolerance", help="Relative tolerance of the mismatch oracle.")]
ReferenceOpt = Annotated[Reference, typer.Option(rich_help_panel="Tolerance", help="For a mismatch: [bold]float64[/] also runs the program in float64 "
                         "and counts a difference from eager only where the backend is more than twice as far from "
                         "that run as eager is (for bf16 and fp16 programs, whose rounding alone exceeds any atol).")]
TimeoutOpt = Annotated[float, typer.Option("--timeout", metavar="SECONDS", rich_help_panel="Flaky, slow or heavy compilers", help="Seconds one oracle call may take before it counts as a hang.")]
DeviceOpt = Annotated[str, typer.Option("--device", metavar="DEVICE", rich_help_panel="The question", help="cpu, cuda or cuda:N: where the program and the backend run.")]
RepeatOpt = Annotated[int, typer.Option("--repeat", rich_help_panel="Flaky, slow or heavy compilers", metavar="N", help="Run each candidate this many times (flaky compilers); "
                     "the original's failure rate is measured first.")]
CheckRepeatOpt = Annotated[int, typer.Option("--repeat", rich_help_panel="Flaky, slow or heavy compilers", metavar="N", help="Run the program this many times, each "
                          "in a fresh compile, and say in how many it fails (flaky compilers).")]
ImportOpt = Annotated[Optional[list[str]], typer.Option("--import", metavar="MODULE", rich_help_panel="The question", help="A library to import before the program "
                      "is loaded, which registers its custom ops (repeatable), e.g. natten; repro.py imports it too.")]
MemoryLimitOpt = Annotated[Optional[int], typer.Option("--memory-limit", metavar="MIB", rich_help_panel="Flaky, slow or heavy compilers", help="MiB of address space per worker (RLIMIT_AS); "
                          "going over it is an oom verdict, not the end of trtmin (reduce: repro.py sets it too).")]
SetOpt = Annotated[Optional[list[str]], typer.Option("--set", metavar="KEY=VALUE", rich_help_panel="The question", help="A backend setting KEY=VALUE (repeatable), e.g. "
                   "Torch-TensorRT's min_block_size=1, or for inductor mode, dynamic, fullgraph or any "
                   "torch._inductor.config name (max_autotune=true). Unknown keys are refused.")]


def _progress_saved(out: Path, started: float, resume: bool) -> bool:
    """Whether an interrupted run leaves verdicts to resume: its journal (the one it resumed,
    or one it wrote itself, not an earlier run's) holds at least one."""
    try:
        fresh = (out / JOURNAL).stat().st_mtime >= started - 1  # whole-second mtimes on some file systems
    except OSError:
        return False
    return (resume or fresh) and journaled_verdicts(out / JOURNAL) > 0


def _written_before(path: Path, when: float) -> bool:
    try:
        return path.stat().st_mtime < when
    except OSError:
        return False


def _stop_like_ctrl_c() -> None:
    """SIGTERM (a CI cancel, timeout(1)) and SIGHUP (a closed terminal, a dropped ssh) stop
    like Ctrl-C: workers and child processes ended, the journal kept, temporary state
    removed. A signal the caller ignores (nohup) stays ignored."""
    for sig in (signal.SIGTERM, signal.SIGHUP):
        if signal.getsignal(sig) is not signal.SIG_IGN:
            signal.signal(sig, interrupts.on_signal)


def _report(e: TrtminError) -> int:
    """One line for a domain error, and the exit code: 2, or 130 after a Ctrl-C (the error
    may be the Ctrl-C's, dressed as another exception by the library it hit)."""
    if interrupts.seen():
        return _say_interrupted("[yellow]interrupted[/]")
    err.print(f"[red]error:[/] {escape(str(e))}", highlight=False)  # a compiler's [file.h:12: fn] stays
    return 2


_interruption_said = False


def _say_interrupted(line: str) -> int:
    """Print what an interruption left (once: run() adds a bare "interrupted" where a
    command said nothing), and return the exit code for the signal that came."""
    global _interruption_said
    err.print(line)
    _interruption_said = True
    return interrupts.exit_code()


def _fail(e: TrtminError) -> None:
    raise typer.Exit(_report(e))


@app.command()
def reduce(
    model: ModelArg,
    oracle: OracleOpt = None,
    backend: BackendOpt = None,
    inputs: InputsOpt = None,
    device: DeviceOpt = "cpu",
    set_: SetOpt = None,
    import_: ImportOpt = None,
    match: MatchOpt = None,
    out: Annotated[Path, typer.Option("--out", "-o", metavar="DIR", rich_help_panel="Output", help="Folder for repro.py, report.md, summary.json and reduced.pt2.")] = Path("trtmin-out"),
    resume: Annotated[bool, typer.Option("--resume", rich_help_panel="Output", help="Continue an interrupted run in --out.")] = False,
    force: Annotated[bool, typer.Option("--force", rich_help_panel="Output", help="Replace the results of another run in --out.")] = False,
    emit: Annotated[Optional[list[str]], typer.Option("--emit", metavar="BACKEND", rich_help_panel="Output", help="Also write the script for another backend (repeatable): "
                    "[bold]tensorrt[/] writes a TensorRT-only script (tensorrt + numpy, .onnx, .npz); "
                    "torch_tensorrt, executorch:xnnpack, ... write repro_<name>.py.")] = None,
    verify: Annotated[bool, typer.Option(rich_help_panel="Output", help="At the end, run repro.py alone in a new process, as a maintainer "
                      "will, and say what it printed (one compile of the reduced program).")] = True,
    atol: AtolOpt = 1e-3,
    rtol: RtolOpt = 1e-3,
    reference: ReferenceOpt = Reference.eager,
    jobs: Annotated[Optional[int], typer.Option("--jobs", "-j", metavar="N", rich_help_panel="Search", help="Oracle calls run at once, in isolated workers (default: one per "
                    "visible GPU with --device cuda, each pinned to its GPU; else 1). The result is the same for any value.")] = None,
    localize: Annotated[bool, typer.Option(rich_help_panel="Search", help="For mismatch and nan: first compile the program with every value "
                        "an output and start the search at the first value that is off (one call; saves most of "
                        "the bisection when the bug survives the extra outputs). For a crash: start where the "
                        "compiler's error says it failed (free; fx-based compilers such as Inductor and "
                        "Torch-TensorRT name the node).")] = True,
    generate_values: Annotated[bool, typer.Option(rich_help_panel="Search", help="Once the graph is minimal, try seeded random tensors of the "
                               "same shape, dtype and scale for its large inputs and weights, and keep those the "
                               "bug does not need: the script makes them, and repro_inputs.pt shrinks or goes "
                               "(1 to 5 oracle calls); then shrink their sizes the bug does not need to 2 "
                               "(0 to 5 calls). Off: every original value and shape is kept.")] = True,
    any_failure: Annotated[bool, typer.Option("--any-failure", rich_help_panel="Search", help="Accept a candidate that fails in any way, not only as the original does (the original must still fail as --oracle and --match ask).")] = False,
    timeout: TimeoutOpt = 300.0,
    repeat: RepeatOpt = 1,
    min_failures: Annotated[Optional[int], typer.Option("--min-failures", metavar="N", rich_help_panel="Flaky, slow or heavy compilers", help="Of --repeat runs, how many must fail for a candidate "
                            "to count (default: all where the original failed all; else half as many as it failed, "
                            "rounded up).")] = None,
    memory_limit: MemoryLimitOpt = None,
) -> None:
    """Shrink MODEL while it keeps failing the same way; write a standalone repro.py."""
    from minimize.run.workers import Workers
    console = Console(stderr=True, soft_wrap=True)
    _stop_like_ctrl_c()
    started = time.time()
    suite_notes: list[str] = []  # what the known-bug check says of the suites it read, said at the end
    try:
        oracle, backend = the_question(oracle, backend, "reduce")
        check_numbers(atol, rtol, timeout, repeat, memory_limit)
        if min_failures is not None and not 1 <= min_failures <= repeat:
            raise TrtminError(f"--min-failures {min_failures} must be between 1 and --repeat ({repeat})")
        # the options' own mistakes first (a --device typo), then --out: the fix for --out
        # (--force, --resume) must not lead to a rerun that fails on the next flag
        opts = build_options(model, oracle.value, backend, inputs, match, atol, rtol, timeout, device, jobs, any_failure,
                             set_, emit, reference.value, repeat=repeat, min_failures=min_failures,
                             memory_limit_mb=memory_limit, imports=checked_imports(import_), localize=localize,
                             verify=verify, generate_values=generate_values)
        known = functools.cache(lambda: header_before_loading(opts))  # it hashes the inputs: once, where asked
        _check_out_not_in_a_suite(out)
        check_reads_outside(out, backend, model, inputs)  # first: --force, which the next may ask for, would not mend it
        check_out_dir(out, resume, force, known)  # before any worker starts or the model loads
        note = jobs_note(opts.jobs, opts.device)
        if note:
            console.print(f"[yellow]note[/]: {escape(note)}", highlight=False, soft_wrap=True)
        with held_by_this_run(out):  # a folder in use is said before torch loads
            if resume and journaled_verdicts(out / JOURNAL):
                check_resumable(out, known())  # other options or inputs: said at once, before any worker starts
            # the workers first: their start, not the imports below, is the path to the first call
            with Workers(opts) as workers:
                from minimize.progress import ProgressView  # rich alone: a live line from the first second
                with ProgressView(console) as view:
                    view.phase(f"starting: workers, torch, and {model.name}")
                    from minimize.reduce import reduce as run_reduce
                    summary = run_reduce(opts, out, resume=resume, force=force, on_change=view.update, log=view.log,
                                         workers=workers, on_phase=view.phase, known=known,
                                         known_bugs=lambda out_dir, summary: _known_bugs(out_dir, summary, suite_notes))
    except TrtminError as e:
        _fail(e)
    except KeyboardInterrupt:
        saved = _progress_saved(out, started, resume)
        if saved and finished_run(out):  # stopped while --emit's scripts ran alone
            code = _say_interrupted("[yellow]interrupted[/] after the results were written (repro.py, report.md, "
                                    "summary.json); the same command with --resume writes them again"
                                    + (", running the --emit scripts alone too" if emit else ""))
        elif saved:
            earlier = [  # --force over a run made otherwise: its files, older than this
                name for name in earlier_runs_files(out, []) if _written_before(out / name, started)]
            code = _say_interrupted("[yellow]interrupted[/]: progress is saved; continue with the same command and --resume"
                                    + (f" ({', '.join(earlier)} there {'are' if len(earlier) > 1 else 'is'} an earlier run's until this one ends)"
                                       if earlier else ""))
        else:
            code = _say_interrupted("[yellow]interrupted[/] before the first verdict: nothing to resume; run the command again")
        raise typer.Exit(code)
    _print_result(console, summary, out, time.time() - started, suite_notes)
    alone = summary.get("repro_alone")
    if alone is not None and alone["status"] != "REPRODUCED":  # the WARNING said why: a script or CI must see it
        raise typer.Exit(1)


@app.command()
def check(
    model: ModelArg,
    oracle: OracleOpt = None,
    backend: BackendOpt = None,
    inputs: InputsOpt = None,
    device: DeviceOpt = "cpu",
    set_: SetOpt = None,
    import_: ImportOpt = None,
    match: MatchOpt = None,
    atol: AtolOpt = 1e-3,
    rtol: RtolOpt = 1e-3,
    reference: ReferenceOpt = Reference.eager,
    timeout: TimeoutOpt = 300.0,
    repeat: CheckRepeatOpt = 1,
    memory_limit: MemoryLimitOpt = None,
) -> None:
    """Run MODEL once on the backend and print one verdict. Exit 1 if it fails the oracle, 0 if not, 3 if it fails otherwise."""
    from minimize.run.workers import Workers
    try:
        oracle, backend = the_question(oracle, backend, "check")
        check_numbers(atol, rtol, timeout, repeat, memory_limit)
        opts = build_options(model, oracle.value, backend, inputs, match, atol, rtol, timeout, device, settings=set_,
                             reference=reference.value, repeat=repeat, memory_limit_mb=memory_limit,
                             imports=checked_imports(import_))
        with Workers(opts) as workers:  # before torch is imported (see reduce)
            from minimize.progress import ProgressView  # the one call may be a TensorRT build of minutes
            with ProgressView(err) as view:
                view.phase(f"starting: workers, torch, and {model.name}")
                from minimize.run.session import Session
                with Session(opts, workers, view.phase) as session:
                    from minimize.program.candidate import Candidate
                    for note in session.notes().values():
                        view.log(f"note: {note}")
                    view.phase(f"checking: {model.name} on {session.backend.describe()}"
                               + (f", {repeat} runs" if repeat > 1 else ""))
                    whole = session.program.normalize(session.program.all_kept())
                    runs = session.evaluate([Candidate(whole, tuple(sorted(opts.settings.items())))])[0]
                    runs = [v.named(session.program.output_names) for v in runs]  # output 1 ['action']
                    crashes = {v.message: v for v in runs if v.kind in ("crash", "hang")}.values()  # --repeat: each once
                    mistake = next(filter(None, map(session.setup_problem, crashes)), None)
                    if mistake:  # the set-up's, not the compiler's: as reduce refuses it (minimize/reduce.py)
                        raise TrtminError(f"{mistake} (the program, on {session.backend.describe()})")
    except TrtminError as e:
        _fail(e)
    if repeat > 1:
        return _print_flakiness(runs, oracle, match)
    v = runs[0]
    if v.kind == "invalid":
        _fail(unjudgeable(v.exc_type, v.message))
    fails = answers(v, oracle.value, match)
    where = f"{backend} on {device}"
    from oracles.verdict import precision_note
    precision = precision_note(v, reference.value)  # a mismatch's alone: the note reduce gives too (minimize/reduce.py)
    if fails:
        print(f"FAILS ({oracle.value}) {where}: {v.describe()}")
        for line in v.extra.get("native_errors") or []:  # the compiler's words behind a bare error code
            print(f"logged: {line}")
        if precision:
            print(f"note: {precision}", file=sys.stderr)
        raise typer.Exit(1)
    if v.kind == oracle.value:  # it fails as asked, but --match does not take its message
        print(f"does not fail the {oracle.value} oracle {where} as --match {match!r} asks: {v.describe()}")
    elif session.program.off_by_chance(v.kind, v.output):
        from minimize.program.model import random_draws_note  # the crash oracle compiles them as they are
        print(f"does not fail the {oracle.value} oracle {where}: it compiled and ran (its values are not judged: "
              f"{random_draws_note(session.program, fed=False)})")
        raise typer.Exit(0)  # no failure seen: a difference in such values is none
    elif v.failed:  # as reduce's refusal says it: the oracle that asks about this failure
        print(f"does not fail the {oracle.value} oracle {where}, but: {v.describe()}; "
              f"--oracle {v.kind} asks about that")
        if precision:  # a bf16 difference sent to --oracle mismatch: the rounding it may be, said as FAILS says it
            print(f"note: {precision}", file=sys.stderr)
    elif v.message:  # built and not run here (TensorRT without a GPU)
        print(f"does not fail the {oracle.value} oracle {where}: {v.message}; the bug does not reproduce here")
    elif v.detail:  # a difference within eager's own error (--reference float64)
        print(f"does not fail the {oracle.value} oracle {where}: {v.detail}; the bug does not reproduce here")
    else:
        tolerance = f" (atol {atol:g}, rtol {rtol:g})" if oracle is Oracle.mismatch else ""
        print(f"does not fail the {oracle.value} oracle {where}: the backend matches eager PyTorch"
              f"{tolerance}; the bug does not reproduce here")
    if v.failed:  # a compiler that crashes where the mismatch was asked about is no pass (`check || alert`)
        raise typer.Exit(3)
    raise typer.Exit(0)


def seconds_parts(summary: dict[str, Any], seconds: float) -> list[tuple[float, str]]:
    """Where the command's `seconds` went, in parts that add up to them: the reduction, the
    runs alone of repro.py and of the --emit scripts, and the rest (the workers' start, the
    files written)."""
    timing = summary.get("timing", {})
    alone = timing.get("repro_alone_seconds") or 0.0
    emitted = sum(v for k, v in timing.items() if k.endswith("_alone_seconds") and k != "repro_alone_seconds")
    return [(summary["seconds"], "loading and reducing"), (alone, "running repro.py alone"),
            (emitted, "running the other backends' scripts alone"),
            (seconds - summary["seconds"] - alone - emitted, "starting and writing the files")]


def _print_result(console: Console, summary: dict[str, Any], out: Path, seconds: float,
                  suite_notes: Sequence[str] = ()) -> None:
    """The end of a reduction on screen: sizes, the bug, 1-minimal, the passes that ran, what
    repro.py printed alone, the files, a known bug it looks like. `seconds`: the command's wall time."""
    from minimize.emit.script import calls, nodes  # torch is loaded by now
    known = summary.get("known_bugs") or []  # found as the outputs were written, into report.md
    parts = f" ({', '.join(f'{s:.0f} s {what}' for s, what in seconds_parts(summary, seconds) if s >= 0.5)})"
    console.print(f"[green]done[/]: {summary['original_nodes']} -> {nodes(summary['final_nodes'])} in "
                  f"{calls(summary['oracle_calls'])}, {seconds:.0f} s{parts}")
    timing = summary.get("timing") or {}
    if timing.get("sessions"):  # --resume: the time above is this command's; the earlier ones' up to their last verdict
        console.print(f"the run's {timing['sessions']} sessions with verdicts: {timing['earlier_sessions_seconds'] + seconds:.0f} s "
                      f"in all, each earlier one to its last verdict; "
                      f"{timing['replayed_verdicts']} verdict{'' if timing['replayed_verdicts'] == 1 else 's'} replayed from "
                      "the journal", highlight=False)
    console.print(f"bug: {without_scratch_folders(summary['final_verdict'])}", highlight=False, markup=False)
    if summary.get("native_errors"):  # the cause, where the error itself is a bare code
        console.print(f"logged: {summary['native_errors'][0]}", highlight=False, markup=False)
    notes = summary.get("diagnosis") or {}
    if notes.get("precision"):  # said at the start too, but a rounding-sized result must not read as a bug at the end
        console.print(f"[yellow]but[/]: {escape(notes['precision'])}", highlight=False)
    if notes.get("delegation"):  # a bug in what the delegate left is the portable kernels', not the delegate's
        console.print(f"note: {notes['delegation'].replace('`', '')}", highlight=False, markup=False)
    if notes.get("exported_model"):  # an ONNX backend's wrong value may be the exporter's, not the runtime's
        console.print(f"note: {notes['exported_model']}", highlight=False, markup=False)
    if notes.get("doubt"):  # the failure may be no bug (TensorRT's CUDA error without a GPU)
        console.print(f"[yellow]but[/]: {escape(notes['doubt'])}", highlight=False)
    if notes.get("read_off"):  # the failing op may be innocent: what it reads is off already
        console.print(f"[yellow]but[/]: {escape(notes['read_off'])}", highlight=False)
    if notes.get("timed_out"):  # a candidate's timeout is no verdict on the bug: the result may depend on the load
        console.print(f"[yellow]but[/]: {escape(notes['timed_out'])}", highlight=False)
    if notes.get("undefined_cast"):  # eager's own answer is undefined there: the backend's may be no bug
        console.print(f"[yellow]but[/]: {escape(notes['undefined_cast'])}", highlight=False)
    if notes.get("shrank"):  # a bug of another size may be left: the user must not file it as theirs unwarned
        console.print(f"[yellow]but[/]: {escape(notes['shrank'])}", highlight=False)
    if notes.get("original_symptom"):  # the user's own symptom, where the bug left shows otherwise
        console.print(f"was: {without_scratch_folders(summary['original_verdict'])}", highlight=False, markup=False)
    minimal = notes.get("one_minimal") or {}
    if minimal.get("proven") and not minimal.get("cuts_tried"):
        console.print("1-minimal: yes, a single op is left")
    else:
        console.print("1-minimal: " + ("yes, no single call node can be cut" if minimal.get("proven") else
                                       "not proven") + f" ({minimal.get('cuts_tried', 0)} one-node cuts tried, "
                                                       "with the program's own values)")
    rows = [f"  {name:<22} calls {s['calls']:>4}  accepted {s['accepted']:>3}  removed {s['removed']:>5}"
            for name, s in summary["passes"].items() if s["calls"] or s["removed"]]  # the passes that ran
    console.print("per pass:\n" + "\n".join(rows), highlight=False)
    alone = summary.get("repro_alone")
    if alone is not None:
        from minimize.emit.verify import report_line
        line = report_line(alone, (summary.get("flakiness") or {}).get("repeat", 1))
        console.print(f"[yellow]{escape(line)}[/]" if line.startswith("WARNING") else escape(line), highlight=False)
    from oracles.out_folder import emitted_names
    others = [emitted_names(spec)[0] for spec in summary.get("emitted", [])]  # --emit: each backend's script
    ran = summary.get("emitted_alone") or {}
    took_none = {emitted_names(spec)[0] for spec in summary.get("emitted_undelegated") or {}}
    said = ", ".join((f"{name} {ran[name]['status']}" if name in ran else name)
                     + (" (its delegate takes no op: ExecuTorch's portable kernels run it)" if name in took_none else "")
                     for name in others)
    console.print(f"wrote {out}/repro.py, report.md, summary.json"
                  + (f"; for other backends ({'run alone' if ran else 'not run'}): {said}" if others else ""),
                  highlight=False, markup=False)
    if summary.get("reduced_pt2_error"):  # the script is the deliverable, but the user may look for the program
        console.print(f"[yellow]note[/]: reduced.pt2 (the reduced program) was not written: "
                      f"{escape(str(summary['reduced_pt2_error']))}", highlight=False)
    for match in known:
        console.print(f"[yellow]note[/]: {escape(match['line'])}: {escape(run_command(match))} checks it",
                      highlight=False)
    for note in suite_notes:  # $TRTMIN_SUITE names no suite: the team's known bugs were not read
        console.print(f"[yellow]note[/]: {escape(note)}", highlight=False)
    earlier = earlier_runs_files(out, summary.get("files", []))
    if earlier:
        console.print(f"[yellow]note[/]: {escape(', '.join(earlier))} in {escape(str(out))} are from an earlier run, "
                      "not this one (a run writes over trtmin's files, it deletes none); `repros add` leaves them out",
                      highlight=False)


def _check_out_not_in_a_suite(out: Path) -> None:
    """An --out folder in the shipped suite or $TRTMIN_SUITE's would be an entry without a
    manifest there (an ERROR row of every run); `repros add` is the way in."""
    from repros.suite import default_roots, suite_words
    try:
        inside = next((s for s in default_roots() if out.resolve().parent == s.resolve()), None)
    except (OSError, RuntimeError):  # a link loop, a ~user that is none: held_by_this_run says what is wrong
        return
    if inside is not None:
        raise TrtminError(f"--out {out} is in the repro suite {inside}; reduce into a folder outside it, then save "
                          f"the result with `trtmin repros add OUT --name NAME{suite_words(inside)}`")


def _known_bugs(out: Path, summary: dict[str, Any], notes: list[str] | None = None) -> list[dict[str, Any]]:
    """The saved repros a reduction looks like (the same bug first, then related ones), for
    report.md, under what fails, and the screen, before the user files a duplicate. Asked
    while the outputs are written (reduce's `known_bugs`), so report.md and summary.json
    are written whole, once: {name, line, same, other_ops, where}."""
    from repros.match import compare
    from repros.suite import SHIPPED_SUITE, SUITE_VARIABLE
    said = notes if notes is not None else []  # what the end of the run says of the suites read
    try:
        try:
            found = compare(out, summary=summary)[0]
        except TrtminError as e:  # $TRTMIN_SUITE names no suite: said, and the shipped one read alone
            if not os.environ.get(SUITE_VARIABLE, "").strip():
                return []
            said.append(f"{e}; compared with the shipped suite alone")  # at the end: the live line swallows
            found = compare(out, SHIPPED_SUITE, summary=summary)[0] if SHIPPED_SUITE.is_dir() else []  # a print now
    except TrtminError:
        return []
    except Exception as e:  # noqa: BLE001 - a damaged suite: the reduction's results are written, keep them
        said.append(f"the saved suite could not be compared with ({type(e).__name__}: {e})")
        return []
    shipped = {m.name: m.path.parent.resolve() == SHIPPED_SUITE.resolve() for m in found}
    return [{"name": m.name, "line": m.line(), "same": not m.otherwise, "other_ops": m.other_ops, "shipped": shipped[m.name],
             "where": (f"`repros/suite/{m.name}`" if shipped[m.name]
                       else f"`{m.name}` in the suite ${SUITE_VARIABLE} names")}  # a team's: its own folder
            for m in found]


def run_command(known: dict[str, Any]) -> str:
    """The command that runs a known bug's saved repro here, with --suite where it is not in
    the suite the repros commands read (for the screen: report.md holds no path of this machine)."""
    from repros.suite import SHIPPED_SUITE, default_root, suite_words
    return f"trtmin repros run {known['name']}" + suite_words(SHIPPED_SUITE if known.get("shipped") else default_root())


def the_question(oracle: Optional[Oracle], backend: Optional[str], command: str) -> tuple[Oracle, str]:
    """--oracle and --backend are the question the user asks: no default stands in for them."""
    if oracle is None or backend is None:
        missing = " and ".join(f for f, v in (("--oracle", oracle), ("--backend", backend)) if v is None)
        raise TrtminError(f"{missing} {'is' if ' and ' not in missing else 'are'} required: what the compiler does "
                          "wrong (--oracle crash, nan, mismatch, oom or hang) and which compiler (--backend inductor, "
                          f"torch_tensorrt, tensorrt, onnxruntime, executorch:xnnpack, ...); e.g. trtmin {command} "
                          "model.pt2 --oracle mismatch --backend inductor")
    return oracle, backend


def _print_flakiness(runs: list, oracle: Oracle, match: Optional[str]) -> None:
    fails = [v for v in runs if answers(v, oracle.value, match)]
    if fails:
        print(f"FAILS ({oracle.value}) in {len(fails)} of {len(runs)} runs: {fails[0].describe()}")
        raise typer.Exit(1)
    failed = [v for v in runs if v.failed and v.kind != "invalid"]
    but = f", but {len(failed)} fail otherwise: {failed[0].describe()}" if failed else ""
    print(f"does not fail the {oracle.value} oracle{'' if match is None else f' as --match {match!r} asks'} "
          f"in any of {len(runs)} runs{but}")
    raise typer.Exit(3 if failed else 0)


@app.command()
def env() -> None:
    """Print the environment in the shape of Torch-TensorRT's bug report template."""
    from oracles.environment import collect_environment, format_environment
    print(format_environment(collect_environment()))


repros_app = typer.Typer(rich_markup_mode="rich", no_args_is_help=True,
                         help="The saved-repro suite: which bugs still reproduce here, on this release.")
app.add_typer(repros_app, name="repros")
SuiteOpt = Annotated[Optional[Path], typer.Option("--suite", metavar="DIR", help="The suite folder (default: $TRTMIN_SUITE where it is set, else the repros/suite shipped with trtmin).")]


@repros_app.command("add")
def repros_add(
    out_dir: Annotated[Path, typer.Argument(metavar="OUT_DIR", help="A `trtmin reduce` output folder.")],
    name: Annotated[str, typer.Option("--name", metavar="NAME", help="The repro's folder name in the suite.")],
    suite: SuiteOpt = None,
    force: Annotated[bool, typer.Option("--force", rich_help_panel="Output", help="Replace the repro of that name (trtmin's files in its folder; your own files there stay).")] = False,
    duplicate: Annotated[bool, typer.Option("--duplicate", rich_help_panel="Output", help="Save it even where it looks like a saved repro (the same bug).")] = False,
    upstream: Annotated[Optional[list[str]], typer.Option("--upstream", metavar="URL", help="An upstream issue or PR URL (repeatable).")] = None,
    title: Annotated[Optional[str], typer.Option("--title", metavar="TEXT", help="What the bug is, in one line (default: report.md's title).")] = None,
) -> None:
    """Save a reduce output into the suite, with a manifest."""
    from oracles.out_folder import EDITED
    from repros.suite import (UPSTREAM_URL, add_repro, check_repro_name, default_root, kept_fields, readable_manifest,
                              users_files)
    root = suite or default_root()
    old, new_suite = root / name, not root.exists()
    try:
        check_repro_name(name)
        existed, previous = old.exists(), readable_manifest(old)
        kept = kept_fields(previous, old, title is not None, bool(upstream)) if previous and force else []  # before
        mine = [p.name for p in users_files(old, out_dir)] if existed and force and old.is_dir() else []  # it goes
        # (those of a name the new entry has too are kept as NAME.edited, said below)
        before = {p.name for p in old.iterdir()} if existed and old.is_dir() else set()
        for url in upstream or ():  # the option's mistake, named as the option (not as the manifest's field)
            if not UPSTREAM_URL.match(url):
                raise TrtminError(f"--upstream {url!r} is not an http(s) URL; give the issue's or PR's address, e.g. "
                                  "--upstream https://github.com/pytorch/pytorch/issues/175966")
        if title is not None and (not title.strip() or "\n" in title):
            raise TrtminError("--title: give one non-empty line, e.g. --title 'uint8 input permuted before a cast fails'")
        path = add_repro(out_dir, name, suite, force=force, duplicate=duplicate, upstream=tuple(dict.fromkeys(upstream or ())),
                         title=title)  # a link given twice, once
    except TrtminError as e:
        _fail(e)
    said = f"saved {path}"
    if existed and force:
        said += f", in place of the repro there ({previous.title if previous else old.name})"
        said += f"; kept from its manifest: {', '.join(kept)}, and its notes" if kept else ""
        said += f"; kept your files there: {', '.join(mine)}" if mine else ""
        edited = sorted(p.name for p in path.iterdir() if EDITED.search(p.name) and p.name not in before)
        said += f"; kept its hand-written or edited files as {', '.join(edited)}" if edited else ""
    print(said + (f"\n{root} did not exist: it is a new suite, with this repro alone" if new_suite else ""))
    from repros.match import compare
    for related in (m for m in compare(path, suite)[0] if m.otherwise):  # worth a line in each one's notes
        print(f"{name} {related.line()}")
    _warn_if_it_did_not_reproduce_alone(path, name, suite)


def _warn_if_it_did_not_reproduce_alone(entry: Path, name: str, suite: Optional[Path]) -> None:
    """A repro whose script, run alone after the reduction, did not say REPRODUCED (a flaky
    compiler, a file it lacked) is saved, as asked, but said: the suite would mark it NOT as
    expected from its first run."""
    import json
    try:
        alone = json.loads((entry / "summary.json").read_text()).get("repro_alone") or {}
    except (OSError, ValueError):
        return
    if isinstance(alone, dict) and alone.get("status") not in (None, "REPRODUCED", "SKIPPED"):
        from repros.suite import suite_words
        err.print(f"[yellow]warning[/]: run alone after the reduction, its repro.py printed "
                  f"`{escape(str(alone.get('line') or alone['status'])[:300])}`, not REPRODUCED: `trtmin repros run "
                  f"{escape(name)}{escape(suite_words(entry.parent))}` tells whether it reproduces now", highlight=False)


def _print_row(result: Any) -> None:
    """One line per repro as it finishes (the table comes at the end)."""
    ok = "" if result.ok else "  (NOT as expected)"
    err.print(f"{result.status:<10} {result.name}  {result.seconds:.1f} s{ok}", highlight=False, markup=False)


@repros_app.command("list")
def repros_list(suite: SuiteOpt = None) -> None:
    """The saved repros, one a line: name, backend, oracle, device, what is expected, title."""
    from repros.suite import find_repros, suite_named
    try:
        repros = find_repros(suite)
    except TrtminError as e:
        _fail(e)
    width = max((len(r.name) for r in repros), default=0)
    for r in repros:
        m = r.manifest
        when = "".join(f", {status} where {cond.text}" for cond, status in m.expected_when) if m else ""
        about = (f"{m.backend} {m.oracle} on {m.device}, {m.expected}{when}: {m.title}" if m is not None
                 and r.problem is None else f"cannot run: {r.problem}")
        print(f"{r.name:<{width}}  {about}")
    if not repros:
        print(f"no repros in {suite_named(suite)}")
    raise typer.Exit(1 if any(r.problem for r in repros) else 0)


@repros_app.command("match")
def repros_match(
    out_dir: Annotated[Path, typer.Argument(metavar="OUT_DIR", help="A reduce output folder (repro.py and summary.json).")],
    suite: Annotated[Optional[Path], typer.Option("--suite", metavar="DIR", help="The one suite folder to compare with (default: $TRTMIN_SUITE's where it is set, and the repros/suite shipped with trtmin).")] = None,
) -> None:
    """Say which saved repros a reduction looks like (the same ops, backend and failure), and which are related (the same ops and backend, another failure, or the same ops by other overloads); exit 1 if one is the same bug, 0 if none."""
    from repros.match import compare, fingerprint
    from repros.suite import check_same_run, not_a_reduction_fix, read_summary
    try:
        if not out_dir.is_dir():
            raise TrtminError(f"{out_dir} is not a folder; pass the --out folder of a reduce")
        if not (out_dir / "summary.json").is_file() and (out_dir / JOURNAL).exists():  # begun, not finished
            raise TrtminError(f"{out_dir} has no summary.json yet: {not_a_reduction_fix(out_dir)}")
        summary = read_summary(out_dir) if (out_dir / "summary.json").is_file() else None
        if fingerprint(out_dir) is None:
            raise TrtminError(f"{out_dir} holds no reduction to compare (repro.py and summary.json of trtmin reduce, "
                              "with ATen ops in its graph); pass the --out folder of a reduce")
        check_same_run(out_dir, summary)  # not an earlier run's results
        found, blind, unread = compare(out_dir, suite)
    except TrtminError as e:
        _fail(e)
    for match in found:
        print(match.line())
    same = [m for m in found if not m.otherwise]
    if not same:
        print(f"no saved repro matches {out_dir}" + (" (only related ones, above)" if found else ""))
    for left, why in ((blind, "of this backend with no summary.json of trtmin reduce to compare (hand-written, or "
                               "the file is gone)"),
                      (unread, "whose manifest.toml does not read (`trtmin repros list` says why)")):
        if left:
            names = ", ".join(left[:3]) + (f" and {len(left) - 3} more" if len(left) > 3 else "")
            print(f"not compared: {len(left)} saved repro{'s' if len(left) > 1 else ''} {why}: {names}")
    raise typer.Exit(1 if same else 0)


@repros_app.command("run")
def repros_run(
    names: Annotated[Optional[list[str]], typer.Argument(metavar="NAME", help="Repros to run, by name or shell pattern ('trt_*'; default: all).")] = None,
    suite: SuiteOpt = None,
    json_file: Annotated[Optional[Path], typer.Option("--json", metavar="FILE", help="Write the results here, for `repros table` ('-': to stdout, the table to stderr).")] = None,
    device_label: Annotated[Optional[str], typer.Option("--device-label", metavar="LABEL", help="The column name for this machine (default: GPU name or cpu).")] = None,
    timeout: Annotated[float, typer.Option("--timeout", metavar="SECONDS", help="Seconds each repro may run.")] = 600.0,
    strict_skips: Annotated[bool, typer.Option(help="A repro that cannot run here (no GPU, a missing package) "
                            "counts as not ok: for machines that should run everything.")] = False,
    jobs: Annotated[int, typer.Option("--jobs", "-j", metavar="N", help="Repros run at a time, each in its own process "
                    "(repros that share one GPU may need 1).")] = 1,
) -> None:
    """Run each saved repro in its own process; exit 1 if any status differs from its manifest.
    TRTMIN_BACKEND=eager runs the control: every repro must then say FIXED."""
    from rich.console import Console as RichConsole

    from oracles.environment import NOT_INSTALLED
    from repros.suite import find_repros, suite_named
    from repros.runner import (Interrupted, environment, exit_code, json_text, render_table, run_repros, suite_packages,
                               summary_line, write_json)
    _stop_like_ctrl_c()  # a CI cancel must not leave the running repro behind
    not_finished: list[str] | None = None
    try:
        check_timeout(timeout, example=600)
        if json_file is not None and str(json_file) != "-":
            check_json_file(json_file)  # before the run, not after minutes of it
        control = os.environ.get("TRTMIN_BACKEND", "")
        if control not in ("", "eager"):
            raise TrtminError(f"TRTMIN_BACKEND={control!r}: the control run takes eager alone (TRTMIN_BACKEND=eager); "
                              "unset it to run the backends")
        if control != "eager":
            check_compile_on(None)
        check_jobs(jobs, "repros")
        if device_label is not None and not device_label.strip():  # the GPU's name had been taken in silence
            raise TrtminError("--device-label is empty: name this machine's column (e.g. --device-label h100-cu130), "
                              "or leave the option out for the GPU's name")
        try:
            from minimize.progress import RunningRepros  # rich alone
            total = len(find_repros(suite, names or None))  # an unknown name: said here, before any runs
            with RunningRepros(err, _print_row, total) as running:  # on a terminal, a live line: the clock, done of all
                results = run_repros(suite, names or None, timeout, device_label, strict_skips=strict_skips,
                                     jobs=jobs, on_result=running.finished)
        except Interrupted as stop:  # what finished is shown and written, marked as a part
            results, not_finished = stop.results, stop.not_finished
        if not results and not_finished is None:
            raise TrtminError(f"no repros in {suite_named(suite)}; save one there with "
                              "trtmin repros add OUT --name NAME --suite ...")
    except TrtminError as e:
        _fail(e)
    to_stdout = str(json_file) == "-"  # the JSON is stdout's, for a pipe: the table goes to stderr
    stream = sys.stderr if to_stdout else sys.stdout
    console = RichConsole(file=stream, width=None if stream.isatty() else 160)
    env = environment(device_label, suite_packages(suite, names or None))
    if results:
        console.print(render_table(results))
        console.print(summary_line(results, not_finished), highlight=False, markup=False, soft_wrap=True)  # a line
    console.print(f"on {env['device_label']}: " + ", ".join(f"{name} {version}" for name, version in env["versions"].items()
                                                           if version != NOT_INSTALLED), highlight=False, soft_wrap=True)
    if to_stdout:
        sys.stdout.write(json_text(results, env, not_finished))
    elif json_file:
        try:
            write_json(json_file, results, env, not_finished)
        except OSError as e:  # its folder went or turned read-only while the repros ran
            _fail(TrtminError(f"--json {json_file} could not be written ({e.strerror or e}); the table above holds "
                              "the results"))
    if not_finished is not None:
        wrote = f"; {json_file} holds the {len(results)} finished" if json_file and not to_stdout else ""
        many = "s" if len(not_finished) != 1 else ""
        raise typer.Exit(_say_interrupted(f"[yellow]interrupted[/]: {len(not_finished)} repro{many} not finished "
                                          f"({', '.join(not_finished)}){wrote}"))
    raise typer.Exit(exit_code(results))


def check_json_file(path: Path) -> None:
    """Refuse, in one line, a --json file that cannot be written: a folder, a missing or
    read-only folder above it (tried by writing there, as root may be refused too), or a
    file there already that no `repros run --json` wrote (the user's, a suite's manifest)."""
    import json
    import tempfile

    from repros.runner import JSON_FORMAT
    if path.is_dir():
        raise TrtminError(f"--json {path} is a folder; name a file, e.g. --json {path / 'run.json'}")
    if os.path.lexists(path) and not (path.is_file() and not path.is_symlink() and path.stat().st_size == 0):  # mktemp's
        try:
            earlier = json.loads(path.read_bytes()) if path.is_file() else None
        except (OSError, ValueError):
            earlier = None
        if not (isinstance(earlier, dict) and earlier.get("format") == JSON_FORMAT):  # as `repros table` reads it
            raise TrtminError(f"--json {path} exists and is no run file of `trtmin repros run`; it is kept: name "
                              "another file, or remove it first")
    try:  # as pytest's --junitxml: a CI job names out/results.json before out/ exists
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise TrtminError(f"--json {path}: its folder {path.parent} cannot be made ({e.strerror or e}); name a file "
                          "in another folder") from None
    try:
        with tempfile.NamedTemporaryFile(dir=path.parent, prefix=f".{path.name}.", suffix=".check"):
            pass
    except OSError as e:
        raise TrtminError(f"--json {path} cannot be written ({e.strerror or e}); name a file in another folder") from None


@repros_app.command("table")
def repros_table(files: Annotated[list[Path], typer.Argument(metavar="FILE", help="JSON files from `repros run --json`.")]) -> None:
    """Merge runs from several machines into one markdown matrix (repros x devices)."""
    from repros.table import merge_tables
    try:
        print(merge_tables(files))
    except TrtminError as e:
        _fail(e)


def _usage_path(ctx: object, argv: list[str]) -> str:
    """`trtmin repros run`, not `trtmin`, for an error the group's context raised while the
    subcommand's options were read (`--json` without its value)."""
    if ctx is None:  # raised before any context (an option without its value): from the top
        path, command = "trtmin", typer.main.get_command(app)
    else:
        path, command = getattr(ctx, "command_path", "trtmin"), getattr(ctx, "command", None)
    for word in argv:
        sub = getattr(command, "commands", {}).get(word)
        if sub is None:
            break
        path, command = f"{path} {word}", sub
    return path


# click's UsageError, wherever this typer keeps its click (0.29 vendors one): BadParameter's base
USAGE_ERROR: type[Exception] = next(c for c in typer.BadParameter.__mro__ if c.__name__ == "UsageError")


def run(argv: list[str]) -> object:
    """The exit code of the command line `argv`: usage and domain errors as one line, no
    traceback. main() adds what a process of its own needs (signal handlers, the fast exit);
    the tests call this in-process for errors found before any worker starts."""
    try:
        code: object = app(args=argv, prog_name="trtmin", standalone_mode=False)  # usage errors are raised
    except USAGE_ERROR as e:
        if e.ctx is not None and not e.ctx.args and not e.ctx.params and type(e).__name__ == "NoArgsIsHelpError":
            e.show()  # a bare `trtmin` or `trtmin repros`: the help
        else:  # one line, as for every other bad input, not typer's boxed panel
            where = _usage_path(e.ctx, argv)
            message = e.format_message().replace("Value error, ", "").rstrip(".")
            err.print(f"[red]error:[/] {escape(message)}; see {where} --help", highlight=False)
        code = 2
    except typer.Abort:  # end of input at a prompt
        code = _say_interrupted("[yellow]interrupted[/]")
    except TrtminError as e:  # a last net: no traceback for domain errors
        code = _report(e)
    except SystemExit as e:
        code = e.code
    if code == 130 and not _interruption_said:  # typer's answer to a Ctrl-C no command caught (check, list...)
        code = _say_interrupted("[yellow]interrupted[/]")
    return code


def main() -> None:
    # torch's own deprecation chatter (pytree LeafSpec, ...) is not the user's problem
    warnings.filterwarnings("ignore", category=FutureWarning)
    warnings.filterwarnings("ignore", category=UserWarning, module=r"torch\..*")
    bytecode.enable()  # before torch is imported: seconds per process on installs without bytecode
    interrupts.install()
    from minimize.progress import PipeReaderGone
    sys.stdout, sys.stderr = PipeReaderGone(sys.stdout), PipeReaderGone(sys.stderr)  # `| head` ends no run
    code = run(sys.argv[1:])
    if code is None or isinstance(code, int):
        exit_now(code or 0)  # outputs written, workers stopped: the interpreter's teardown is only waiting
    sys.exit(code)


if __name__ == "__main__":
    main()
