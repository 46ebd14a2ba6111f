"""The one domain error type: the CLI turns it into a one-line message and exit code 2."""

import re


class TrtminError(Exception):
    """A problem with the user's input or environment, with the fix in its message."""


class MissingPackageError(TrtminError):
    """A backend's package (tensorrt, torch_tensorrt, executorch, ...) is not installed."""


class NotRunHere(Exception):
    """A backend built the candidate but cannot run it on this machine (TensorRT without a
    GPU parses and builds only): the build passed, and no run was judged."""


def first_line(error: BaseException | str, limit: int = 200) -> str:
    """An error's first non-empty line for a one-line message, cut at a word (with "...")
    rather than mid-word, or the exception's type where it says nothing."""
    text = str(error).strip()
    line = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    if not line:
        return type(error).__name__ if isinstance(error, BaseException) else ""
    if len(line) <= limit:
        return line
    cut = line[:limit].rsplit(" ", 1)[0]
    return (cut if len(cut) > limit // 2 else line[:limit]) + "..."


def error_chain(error: BaseException, limit: int = 16) -> list[BaseException]:
    """`error` and what led to it, cause or context (a wrapper raised `from None`, as
    Dynamo's rewrap, keeps its context), at most `limit`: a cycle ends there."""
    chain: list[BaseException] = []
    e: BaseException | None = error
    while e is not None and len(chain) < limit:
        chain.append(e)
        e = e.__cause__ or e.__context__
    return chain


def kind_of(value: object) -> str:
    """A value's type with its article, for a message: "an int", "a dict", "None"."""
    if value is None:
        return "None"
    name = type(value).__name__
    return f"{'an' if name[0].lower() in 'aeiou' else 'a'} {name}"


def without_colours(text: str) -> str:
    """A compiler's words without the terminal's colour codes it printed them with (torch's
    bold, torch.onnx's cyan). Repro scripts hold the same line (onnx_export.export_error)."""
    return re.sub(r"\x1b\[[0-9;]*m", "", text)


# the folders a backend's files live in while it runs (base.scratch_folder's, a script's
# mkdtemp): gone when a reader sees the message, where the file's name alone says what it is
_SCRATCH_FOLDER = re.compile(r"(?<![^\s'\"(=:])(?:/[^\s/'\"()]+)*/(?:trtmin|repro)-(?:et|trt|onnx|cmd)-[a-z0-9_]{8}/")


def without_scratch_folders(text: str) -> str:
    """A compiler's words as a reader gets them: "Load model from model.onnx failed", not
    from /tmp/trtmin-state-3354-q9/scratch/trtmin-onnx-xi44/model.onnx, a folder that
    was gone when the run ended (and is another in each run)."""
    return _SCRATCH_FOLDER.sub("", text)


FLOAT64_FAILED = "the float64 run: "  # an invalid verdict's message prefix: eager ran, its float64 run did not
SETTING_FAILED = "a setting: "  # one's prefix where a backend setting cannot be honoured for the program


class SettingNotHonoured(RuntimeError):
    """A backend setting that cannot be honoured for this program (an ONNX opset the
    exporter cannot convert it to): no verdict on the candidate (invalid, never the bug),
    and for the original, the setting's mistake. Its message says the setting and the fix."""


def unjudgeable(exc_type: str, message: str) -> TrtminError:
    """The error for an original program that cannot be judged: eager PyTorch fails on it,
    its float64 run does (--reference float64: an op with no float64 kernel), or the
    backend cannot honour a setting for it (SettingNotHonoured)."""
    if message.startswith(SETTING_FAILED):
        return TrtminError(message.removeprefix(SETTING_FAILED))
    if message.startswith(FLOAT64_FAILED):
        return TrtminError(f"the float64 run of this program fails ({exc_type}: "
                           f"{first_line(message.removeprefix(FLOAT64_FAILED))}); drop --reference float64")
    return TrtminError(f"eager PyTorch fails on this program ({exc_type}: {first_line(message)}); "
                       "trtmin needs a program that runs in eager mode")


DISK_FULL = ("No space left on device", "Disk quota exceeded")  # ENOSPC, EDQUOT: as strerror and compilers say them


def disk_full(message: str) -> TrtminError | None:
    """The error for a compile or run that failed because a disk filled up (the temporary
    folder, a compiler's cache), or None. It is no verdict on the program: journaled, every
    later candidate "failed otherwise", and the run ended unreduced, calling that 1-minimal.
    Any line of the error counts (a C++ compiler's "fatal error: ...: No space left on
    device" is deep in Inductor's): a wrong stop names its line, a missed one is a wrong
    result without a word."""
    said = next((line.strip() for line in message.splitlines() if any(w in line for w in DISK_FULL)), None)
    if said is None:
        return None
    import tempfile
    return TrtminError(f"a disk is full ({first_line(said)}); free space there (the temporary folder is "
                       f"{tempfile.gettempdir()}; TMPDIR=DIR moves it), then run again (a reduction goes on with "
                       "--resume, from the verdicts before it)")


def write_failure(what: str, e: OSError, then: str) -> TrtminError:
    """A write that failed, in one line, with the fix its cause asks for: "free space" for
    a full disk only; a permission refused, or a file gone that was to be copied (a plugin
    file deleted mid-run), each names the file. `then`: how to go on, in this folder (its
    journal is what a --resume replays: another --out would start over)."""
    import errno

    name = str(e.filename) if e.filename else what
    named = f": {e.filename}" if e.filename and str(e.filename) not in what else ""
    if e.errno in (errno.ENOSPC, errno.EDQUOT):  # the disk written to: a copy's error names its source
        fix, named = "free space on its disk", ""
    elif e.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        fix = f"fix the permissions of {name} (or the disk's, if it is mounted read-only)"
    elif e.errno == errno.ENOENT:
        fix = f"put back {name}"
    else:
        fix = "mend what the error names"
    return TrtminError(f"cannot write {what} ({e.strerror or e}{named}); {fix}, then {then}")
