"""Ctrl-C that a library swallowed is still a Ctrl-C.

Python turns SIGINT into KeyboardInterrupt wherever the main thread is. During the CLI's
first half second that is inside some library's import, and some catch everything there
(measured: an interrupt 0.4-0.5 s into `trtmin check` was lost, and the command ran to its
end). The handler also remembers the signal, and `check()`, called before each batch of
oracle calls, raises it again.
"""

from __future__ import annotations

import signal
import time
from types import FrameType

_seen = False
_signal = signal.SIGINT  # the last stop signal that came: the exit code says which
_first_at = 0.0  # when the first stop signal came (time.monotonic)
_repeats = 0  # stop signals soon after the first: the second is let pass, the third stops at once
REPEAT_WINDOW_S = 1.0  # a second stop this soon after the first is the same stop, sent twice


def install() -> None:
    """Only over Python's own handler: a SIGINT the shell ignores (a background job) stays ignored."""
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        signal.signal(signal.SIGINT, on_signal)


def on_signal(signum: int, frame: FrameType | None) -> None:
    """SIGINT's handler, and SIGTERM's and SIGHUP's where the CLI stops on them as on Ctrl-C.
    A second stop while the first one's clean-up runs is let pass: `timeout -s INT` signals
    the process and then its group, and an impatient second Ctrl-C came 2 ms after the first;
    raised inside the clean-up, it lost `repros run`'s finished results (5 of 6 tries). A
    third stops as the first did, and so does a second that comes later (the first may have
    been swallowed by a library: the user presses again)."""
    global _seen, _signal, _repeats, _first_at
    now = time.monotonic()
    if _seen and now - _first_at < REPEAT_WINDOW_S:
        _repeats += 1
        if _repeats == 1:
            return
    elif not _seen:
        _first_at = now
    _seen, _signal = True, signal.Signals(signum)
    raise KeyboardInterrupt


def exit_code() -> int:
    """128 + the signal that stopped the command, as a shell reports it: 130 for Ctrl-C, 143
    for SIGTERM (a CI cancel, timeout(1)), 129 for SIGHUP."""
    return 128 + int(_signal)


def seen() -> bool:
    """Whether a Ctrl-C came: an error after it may be only the Ctrl-C, turned into another
    exception by the library it hit (an import inside torch.export.load raised RecursionError)."""
    return _seen


def check() -> None:
    """Raise the Ctrl-C that came, if one came, wherever it was swallowed."""
    if _seen:
        raise KeyboardInterrupt
