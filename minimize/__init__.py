"""minimize: make a failing program smaller while it keeps failing the same way."""

__version__ = "0.1.0"
