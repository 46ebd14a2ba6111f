"""Live progress for long reductions: what it is doing, nodes left, oracle calls, accepted
steps, elapsed; from the command's first second (it imports rich alone, not torch).
Without a terminal (a log file, CI, a batch job) rich draws no live line, so the same
state is printed as a plain line every HEARTBEAT_S while the run lasts: a reduction whose
compiles take minutes is not silent for an hour. A run that ends sooner prints none (its
one-line errors stay one line)."""

from __future__ import annotations

import os
import threading
import time
from typing import TYPE_CHECKING, Any, Callable

from rich.console import Console
from rich.live import Live
from rich.text import Text

from minimize.search import DONE

if TYPE_CHECKING:
    from minimize.search.problem import ReductionProblem


HEARTBEAT_S = 60.0  # without a terminal: a plain line of the state this often
WAITING_S = 5.0  # a call out this long is said on the line, counting


class PipeReaderGone:
    """stdout or stderr for a run that outlives its reader: `trtmin reduce ... 2>&1 | head`
    closes the pipe after a few lines, and a write then raises BrokenPipeError, which ended
    the run before report.md was whole. Once the reader is gone, writes are dropped (the
    descriptor goes to /dev/null, for the interpreter's own last flush) and the run finishes
    its files. Everything else is the wrapped stream's."""

    def __init__(self, stream: Any):
        self._stream = stream
        self.gone = False

    def write(self, text: str) -> int:
        if not self.gone:
            try:
                return self._stream.write(text)
            except BrokenPipeError:
                self._drop()
        return len(text)

    def flush(self) -> None:
        if not self.gone:
            try:
                self._stream.flush()
            except BrokenPipeError:
                self._drop()

    def _drop(self) -> None:
        self.gone = True
        try:
            null = os.open(os.devnull, os.O_WRONLY)
            os.dup2(null, self._stream.fileno())
            os.close(null)
        except (OSError, ValueError):  # no descriptor of its own: nothing will flush into the pipe
            pass

    def __getattr__(self, name: str) -> Any:  # isatty, fileno, encoding, ...: the stream's
        return getattr(self._stream, name)


def redraws(console: Console) -> bool:
    """Whether a live line may be redrawn in place on this console: a terminal that can (not
    TERM=dumb), and a real one (not a pipe that FORCE_COLOR calls a terminal: its redraws
    would fill a CI log). Elsewhere the screens print plain lines."""
    try:
        return console.is_interactive and bool(console.file.isatty())
    except (AttributeError, ValueError):  # closed, or no such method
        return False


def live_line(renderable: Any, console: Console) -> Live | None:
    """A line that redraws `renderable` (its __rich__) in place, where the console redraws;
    None elsewhere, where the screens print plain lines."""
    return Live(renderable, console=console, refresh_per_second=4, transient=True) if redraws(console) else None


def clock(seconds: float) -> str:
    """"2:05": minutes and seconds, the start of each live line."""
    return f"{int(seconds // 60)}:{int(seconds % 60):02d}"


class ProgressView:
    def __init__(self, console: Console):
        self.console = console
        self.t0 = self.said = self.last_verdict = time.monotonic()
        self.problem: "ReductionProblem | None" = None  # read at each refresh: a pass that starts shows at once
        self.doing: str | None = None  # a phase outside the search (start-up, the original, verifying)
        self.live = live_line(self, console)  # else a plain line each HEARTBEAT_S
        self.start_nodes: int | None = None
        self._counted: tuple[tuple[int, ...] | None, int] = (None, 0)  # (the candidate's nodes, its count)
        self._stop = threading.Event()
        self._beat = None if self.live is not None else threading.Thread(target=self._heartbeat, daemon=True)

    def _heartbeat(self) -> None:
        """Without a terminal: the state as a plain line each HEARTBEAT_S, also while one
        oracle call is out for minutes."""
        while not self._stop.wait(min(HEARTBEAT_S, 5.0)):
            if time.monotonic() - self.said >= HEARTBEAT_S:
                self.said = time.monotonic()
                self.console.print(self.__rich__(), highlight=False)

    def __rich__(self) -> Text:
        """Rendered at every refresh, so the clock runs while an oracle call (an engine build
        of minutes) is out, not only when a verdict comes in."""
        now = time.monotonic()
        at = f"{clock(now - self.t0)} | "
        line = self._state()
        if self.doing is not None:
            text = Text.assemble(at, (self.doing, "bold"), Text.assemble(" | ", line) if line is not None else "")
        elif line is not None:  # a call out for long (an engine build, a hang's timeout) says so
            out = now - self.last_verdict
            text = Text.assemble(at, line, f" | waiting {out:.0f} s for a verdict" if out >= WAITING_S else "")
        else:
            return Text("")
        # the clock first and the end cut, at a width the terminal holds: at 80 columns the
        # clock (the only thing that moves while a call is out) was cut, last on the line
        text.no_wrap, text.overflow = True, "ellipsis"
        return text

    def _state(self) -> Text | None:
        """The search's state now: the pass (and whether it is localizing) as it runs, not
        as it was at the last verdict: a localization compile of minutes is labelled as one."""
        p = self.problem
        if p is None:
            return None
        if p.current_pass == DONE:  # the search has ended: its result, not the last pass, while the files are written
            return Text.assemble(("reduced ", "bold"), f"call nodes {self.start_nodes} -> ",
                                 (f"{self._nodes_now(p)}", "bold green"), f" | oracle calls {p.counters.oracle_calls}")
        return Text.assemble(
            ("reducing ", "bold"), (f"[{p.current_pass}] ", "cyan"),
            f"call nodes {self.start_nodes} -> ", (f"{self._nodes_now(p)}", "bold green"),
            f" | oracle calls {p.counters.oracle_calls}",
            f" | accepted {p.counters.accepted}",
        )

    def _nodes_now(self, p: "ReductionProblem") -> int:
        """The current candidate's call nodes as its script counts them (`done:` says the same
        number): its kept nodes and the getitems of an op of several values it returns whole."""
        if self._counted[0] is not p.current.nodes:
            self._counted = (p.current.nodes, p.program.call_nodes_of(p.current.nodes))
        return self._counted[1]

    def __enter__(self) -> "ProgressView":
        if self.live is not None:
            self.live.__enter__()
        if self._beat is not None:
            self._beat.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        if self._beat is not None:
            self._beat.join()
        if self.live is not None:
            self.live.__exit__(*exc)

    def phase(self, doing: str) -> None:
        """What trtmin does now, outside the search; the next search step replaces it."""
        self.doing = doing
        if self.live is not None:
            self.live.refresh()

    def update(self, p: "ReductionProblem") -> None:
        self.doing, self.last_verdict = None, time.monotonic()
        if self.start_nodes is None:
            self.start_nodes = len(p.current.nodes)
        self.problem = p
        if self.live is not None:
            self.live.refresh()

    def log(self, message: str) -> None:
        self.said = time.monotonic()
        self.console.print(message, highlight=False, markup=False)  # a compiler's words may hold [brackets]


class RunningRepros:
    """`repros run`'s screen: a row as each repro finishes (`print_row`) and, where the
    console redraws, a live line under them with the clock and how many of the `total` are
    done, so the first seconds of a slow repro are not blank, nor the end unknown."""

    def __init__(self, console: Console, print_row: Callable[[Any], None], total: int):
        self.t0, self.done, self.total, self.print_row = time.monotonic(), 0, total, print_row
        self.live = live_line(self, console)

    def __rich__(self) -> Text:
        return Text(f"{clock(time.monotonic() - self.t0)} | running repros: {self.done} of {self.total} done", no_wrap=True,
                    overflow="ellipsis")

    def finished(self, result: Any) -> None:
        self.done += 1
        self.print_row(result)

    def __enter__(self) -> "RunningRepros":
        if self.live is not None:
            self.live.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.live is not None:
            self.live.__exit__(*exc)
