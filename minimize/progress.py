"""Live progress for long reductions: what it is doing, nodes left, oracle calls, accepted
steps, elapsed; from the command's first second (it imports rich alone, not torch)."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.live import Live
from rich.text import Text

if TYPE_CHECKING:
    from minimize.search.problem import ReductionProblem


class ProgressView:
    def __init__(self, console: Console):
        self.console = console
        self.t0 = time.monotonic()
        self.line: Text | None = None  # the state at the last change; the clock is added at each refresh
        self.doing: str | None = None  # a phase outside the search (start-up, the original, verifying)
        self.live = Live(self, console=console, refresh_per_second=4, transient=True)
        self.start_nodes: int | None = None

    def __rich__(self) -> Text:
        """Rendered at every refresh, so the clock runs while an oracle call (an engine build
        of minutes) is out, not only when a verdict comes in."""
        elapsed = time.monotonic() - self.t0
        clock = f" | {int(elapsed // 60)}:{int(elapsed % 60):02d}"
        if self.doing is not None:
            counts = Text.assemble(" | ", self.line) if self.line is not None else ""
            return Text.assemble((self.doing, "bold"), counts, clock)
        return Text.assemble(self.line, clock) if self.line is not None else Text("")

    def __enter__(self) -> "ProgressView":
        self.live.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.live.__exit__(*exc)

    def phase(self, doing: str) -> None:
        """What trtmin does now, outside the search; the next search step replaces it."""
        self.doing = doing
        self.live.refresh()

    def update(self, p: "ReductionProblem") -> None:
        self.doing = None
        nodes = len(p.current.nodes)
        if self.start_nodes is None:
            self.start_nodes = nodes
        self.line = Text.assemble(
            ("reducing ", "bold"), (f"[{p.current_pass}] ", "cyan"),
            f"call nodes {self.start_nodes} -> ", (f"{nodes}", "bold green"),
            f" | oracle calls {p.counters.oracle_calls}",
            f" | accepted {p.counters.accepted}",
        )
        self.live.refresh()

    def log(self, message: str) -> None:
        self.console.print(message, highlight=False)
