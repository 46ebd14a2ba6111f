"""The one domain error type: the CLI turns it into a one-line message and exit code 2."""


class TrtminError(Exception):
    """A problem with the user's input or environment, with the fix in its message."""


class MissingPackageError(TrtminError):
    """A backend's package (tensorrt, torch_tensorrt, executorch, ...) is not installed."""
