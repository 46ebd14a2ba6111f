"""minimize: make a failing program smaller while it keeps failing the same way."""

__version__ = "0.1.0"


def version() -> str:
    """__version__ with the commit of the checkout trtmin runs from (oracles.environment)."""
    from oracles.environment import trtmin_version

    return trtmin_version(__version__)
