"""The cmd: backend's command line, split and checked without torch, so that a mistake in it
(a shell operator, a program not found, a mistyped placeholder) is said before anything
heavy loads: `check_backend_name` calls `parse_command` for every cmd: spec."""

from __future__ import annotations

import difflib
import os
import re
import shlex
import shutil

from oracles.backend_names import COMMAND_PREFIX as PREFIX
from oracles.errors import TrtminError

PLACEHOLDERS = ("model", "inputs", "outputs")  # what trtmin replaces in the command, by files' paths


def unquoted_operator(line: str) -> str | None:
    """The first shell operator outside quotes in a command line (`>`, `2>&1`, `&>`, `|`, `;`,
    `&&`): what a shell would do, and exec passes on as an argument. `'>'` quoted is an argument."""
    quote, i = "", 0
    while i < len(line):
        c = line[i]
        if quote:
            quote = "" if c == quote else quote
            i += 2 if c == "\\" and quote == '"' else 1
            continue
        if c in "'\"":
            quote = c
        elif c == "\\":
            i += 1  # an escaped character is an argument's
        elif c in "|;&<>":
            start = i - 1 if i and line[i - 1].isdigit() and (i < 2 or line[i - 2].isspace()) else i  # 2>
            end = i
            while end < len(line) and (line[end] in "|;&<>" or (line[end].isdigit() and line[end - 1] in "&<>")):
                end += 1
            return line[start:end]
        i += 1
    return None


def parse_command(spec: str) -> list[str]:
    """The command's arguments; relative paths to what exists here made absolute."""
    line = spec[len(PREFIX):]
    try:
        args = shlex.split(line)
    except ValueError as e:
        raise TrtminError(f"--backend {spec!r}: the command cannot be split like a shell line ({e}); "
                          "check its quotes") from None
    if not args:
        raise TrtminError("--backend cmd: names no command; write it after cmd:, e.g. "
                          "'cmd:python run.py {model} {inputs} {outputs}'")
    no_shell = ("the command runs without a shell: put what needs one (variables, redirections, pipes) in a "
                "script, or use sh -c '...' with absolute paths inside")
    if re.fullmatch(r"[A-Za-z_]\w*=.*", args[0]):  # VAR=1 python run.py: a shell's assignment
        raise TrtminError(f"--backend {spec!r}: {args[0]} sets a variable, as a shell would; {no_shell}")
    shell = unquoted_operator(line)
    if shell is not None:  # passed to the program as an argument, not done
        raise TrtminError(f"--backend {spec!r}: {shell!r} is shell syntax, which would reach the program as an "
                          f"argument; {no_shell}")
    if shutil.which(args[0]) is None:  # else each call "fails", with exec's error: a bug of nothing
        raise TrtminError(f"--backend {spec!r}: {args[0]}, the command's program, is not found; check its "
                          "spelling, or give its path")
    for name in re.findall(r"(?<!\$)\{(\w+)\}", line):  # {modle}, {input}: passed on as written; not ${var}
        near = difflib.get_close_matches(name, PLACEHOLDERS, n=1, cutoff=0.75)
        if name not in PLACEHOLDERS and near and f"{{{near[0]}}}" not in line:  # {model} twice, once mistyped: fine
            raise TrtminError(f"--backend {spec!r}: {{{name}}} is no placeholder of trtmin's; did you mean "
                              f"{{{near[0]}}}? (they are {{model}}, {{inputs}} and {{outputs}})")
    if not any("{model}" in a for a in args):
        raise TrtminError(f"--backend {spec!r}: the command must take the candidate program as {{model}} "
                          "(a .pt2 written by torch.export.save), e.g. 'cmd:python run.py {model} {inputs}'")
    # abspath, not resolve(): a venv's bin/python is a link to the system's, without the venv
    return [os.path.abspath(a) if "{" not in a and not a.startswith("-") and os.path.exists(a) else a for a in args]
