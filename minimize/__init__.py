"""minimize: make a failing program smaller while it keeps failing the same way."""

from functools import lru_cache

__version__ = "0.1.0"


@lru_cache(maxsize=1)
def version() -> str:
    """__version__, and the commit where trtmin runs from a git checkout (every commit is
    0.1.0): "0.1.0 (git 070e4f1)". A report names the trtmin that wrote it, so a result
    that changes between two checkouts can be told apart. Read from .git's files: no git
    needed, nothing run."""
    from pathlib import Path

    git = Path(__file__).resolve().parent.parent / ".git"
    try:
        if git.is_file():  # a worktree: "gitdir: /path/.git/worktrees/name"
            git = Path(git.read_text().split(":", 1)[1].strip())
        head = (git / "HEAD").read_text().strip()
        if head.startswith("ref: "):
            ref = head[5:]
            common = Path((git / "commondir").read_text().strip()) if (git / "commondir").exists() else Path(".")
            common = common if common.is_absolute() else git / common
            loose = common / ref
            head = loose.read_text().strip() if loose.exists() else next(
                line.split()[0] for line in (common / "packed-refs").read_text().splitlines()
                if line.endswith(" " + ref))
    except (OSError, IndexError, StopIteration):
        return __version__
    return f"{__version__} (git {head[:7]})" if len(head) >= 7 else __version__
