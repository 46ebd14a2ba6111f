"""Seconds by step of a start-up, for summary.json timing (`load`, `worker_start`)."""

from __future__ import annotations

import time


class StepClock:
    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self._since = time.monotonic()

    def step(self, name: str) -> None:
        """The step `name` ends now; the next one starts."""
        now = time.monotonic()
        self.seconds[name] = round(now - self._since, 2)
        self._since = now
