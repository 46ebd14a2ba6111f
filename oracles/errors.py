"""The one domain error type: the CLI turns it into a one-line message and exit code 2."""


class TrtminError(Exception):
    """A problem with the user's input or environment, with the fix in its message."""


class MissingPackageError(TrtminError):
    """A backend's package (tensorrt, torch_tensorrt, executorch, ...) is not installed."""


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
