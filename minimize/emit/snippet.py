"""The reduced program as a few lines of eager PyTorch, for the top of report.md.

A maintainer reads an issue before running anything: our users' own reports show a bug
as five lines (`mask = ...; out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
# TRT differs by 1.01`), not as a 200-line harness. The snippet is the same graph as
repro.py's `Repro.forward`, with its inputs and weights made the way repro.py makes them,
flattened into straight-line code that runs as it is in eager PyTorch (beside
repro_inputs.pt where the script uses it). repro.py stays the thing that compiles and
judges it; the report folds it below.
"""

from __future__ import annotations

import io
import keyword
import re
import textwrap
import tokenize
from typing import Iterable

from minimize.emit.script import ATTRIBUTE_READ, read_from_self
from oracles.backends.base import SnippetCall

MAX_LINES = 40  # a longer graph is read in repro.py itself
# What the snippet itself names at its top level, beside the inputs and weights it assigns there
OWN_NAMES = frozenset({"torch", "device", "inf", "nan", "tensors", "F", "f", "out", "got"})
# Globals fx's code itself reads: an input of such a name is aliased (`inf_1 = inf`) and the
# bare name stays the global (`-inf`, `torch.ops`), so no renaming can tell them apart
FX_GLOBALS = frozenset({"torch", "device", "inf", "nan"})


def bound_names(lines: Iterable[str]) -> set[str]:
    """The names statements bind at their top level: assigned (`a, b = ...`, `x := ...`)
    or imported (`import a.b as c`, `from a import b`)."""
    names: set[str] = set()
    for line in lines:
        imported = re.match(r"\s*(?:from\s+\S+\s+)?import\s+(.+)", line)
        if imported:
            names |= {part.split(" as ")[-1].strip().split(".")[0] for part in imported[1].split(",")}
            continue
        assigned = re.match(r"\s*([A-Za-z_][\w\s,]*?)\s*=(?!=)", line)
        names |= {n.strip() for n in assigned[1].split(",")} if assigned else set()
        names |= set(re.findall(r"([A-Za-z_]\w*)\s*:=", line))
    return names


def taken_names(call: SnippetCall | None, libraries: tuple[str, ...] = ()) -> set[str]:
    """The names the snippet binds at its top level besides the inputs and weights: its own,
    the --import libraries', and those of the backend's call lines."""
    lines = [*(f"import {m}" for m in libraries), *((*call.imports, *call.setup, call.last) if call else ())]
    return OWN_NAMES | bound_names(lines)


def renamed_apart(forward: str, names: Iterable[str], taken: Iterable[str]) -> tuple[str, dict[str, str]]:
    """`forward` with each of `names` that is in `taken` (the snippet's own names) renamed to
    a fresh one (`f` -> `f_`), and the renaming. Where it is a variable: as a weight read
    (`self.f`) too, but not as another object's attribute (`x.f`) or a keyword (`f=1`). So an
    input named `f` or `tensors` keeps its snippet, as `f_`; one named as a global of fx's
    code (FX_GLOBALS: `inf`, `torch`) is left, and gets none."""
    clash = (set(names) & set(taken)) - FX_GLOBALS
    if not clash:
        return forward, {}
    tokens = list(tokenize.generate_tokens(io.StringIO(forward).readline))
    used = {t.string for t in tokens if t.type == tokenize.NAME} | set(names) | set(taken)
    renames: dict[str, str] = {}
    for name in sorted(clash):
        new = name + "_"
        while new in used or keyword.iskeyword(new):
            new += "_"
        renames[name] = new
        used.add(new)
    depth, out, before = 0, [], ["", ""]  # before: the last two tokens that are code (no line break in brackets)
    for i, tok in enumerate(tokens):
        depth += tok.string in "([{" if tok.type == tokenize.OP else 0
        depth -= tok.string in ")]}" if tok.type == tokenize.OP else 0
        after = tokens[i + 1].string if i + 1 < len(tokens) else ""
        variable = before[1] != "." or before == ["self", "."]
        keyword_argument = depth > 0 and after == "=" and before[1] in ("(", ",")
        if tok.type == tokenize.NAME and tok.string in renames and variable and not keyword_argument:
            tok = tok._replace(string=renames[tok.string])
        out.append(tok)
        if tok.type not in (tokenize.NL, tokenize.COMMENT):
            before = [before[1], tok.string]
    return tokenize.untokenize(out), renames


def snippet_source(forward: str, tensors: dict[str, tuple[str, bool]], loads_file: str | None,
                   device: str, failure: str, call: SnippetCall | None = None, params: tuple[str, ...] = (),
                   compare: str = "", libraries: tuple[str, ...] = ()) -> str | None:
    """`forward`: Repro.forward's source; `tensors`: each input's and weight's name, in
    that order, with the expression that makes it and whether it is a tensor (moved to
    `device`); `loads_file`: the tensors file the expressions read, if any; `failure`:
    what the compiler does with it; `call`: the backend's compile of the graph `f`, where
    it has one as short as `torch.compile(f, backend="inductor")` (else the failure is a
    comment), with `params`, the program's inputs, as f's arguments; `compare`: the
    statement after the call that raises where `got` is off (a mismatch), so that running
    the snippet shows the bug, with the failure as its comment; `libraries`: the modules
    that register the program's custom ops (--import), imported first. None where the graph
    is not straight-line code (a higher-order op's subgraph lives on `self`) or is too
    long to be read here."""
    if not all(name.isidentifier() for name in tensors):  # a weight named `0_weight`, as its nn.Sequential names it
        return None
    if set(tensors) & taken_names(call, libraries):
        return None  # an input named f or tensors would be overwritten by the snippet's own, or overwrite it
    lines = textwrap.dedent("\n".join(forward.splitlines()[1:])).splitlines()  # without `def forward(...)`
    body = []
    for line in lines:
        read = ATTRIBUTE_READ.match(line)
        if read and read.group(2) in tensors:
            if read.group(1) != read.group(2):
                body.append(f"{read.group(1)} = {read.group(2)}")
            continue
        if "self." in line:
            return None
        body.append(line)
    if not body or not body[-1].startswith("return ") or len(body) + len(tensors) > MAX_LINES:
        return None
    move = "" if device == "cpu" else f".to({device!r})"
    made = [f"{name} = {_operand(expr) + move if is_tensor and move else expr}" for name, (expr, is_tensor) in tensors.items()]
    if call:  # the graph as f, run eagerly and by the backend
        args = ", ".join(params)
        if call.module:  # an nn.Module, for a compiler that exports it first
            define = _module_form(body, params, [n for n, (_, is_tensor) in tensors.items()
                                                 if is_tensor and n not in params])
        else:
            define = [f"def f({args}):", *(f"    {line}" for line in body), "", ""]
        given = f"[{args}]" if call.takes_list else args
        last = call.last or f"got = {call.compiled}({given})"
        shown = [last, f"{compare}  # {failure}"] if compare else [f"{last}  # {failure}"]
        ending = ["", "", *define, f"out = f({args})  # eager", *call.setup, *shown]
    else:
        body[-1] = f"out = {body[-1].removeprefix('return ')}  # {failure}"
        ending = body
    text = "\n".join(made + ending).lstrip("\n")
    head = ["import torch", *(f"import {m}  # registers the program's custom ops or their kernels" for m in libraries),
            *(call.imports if call else ())]
    if re.search(r"(?<![\w.])device\(", text):
        head.append("from torch import device")
    if re.search(r"\b(inf|nan)\b", text):
        head.append('inf, nan = float("inf"), float("nan")')
    if loads_file:
        head.append(f"tensors = torch.load({loads_file!r}, weights_only=True)  # run in repro.py's folder")
    return "\n".join(head) + ("\n\n\n" if text.startswith(("def ", "class ")) else "\n\n") + text


def _module_form(body: list[str], params: tuple[str, ...], weights: list[str]) -> list[str]:
    """The graph as class F, its weights buffers of it as in repro.py's Repro: exported,
    they stay weights (a compiler may fuse them, as XNNPACK folds batch_norm into linear),
    where a tensor the forward only reads from outside would be a constant."""
    if weights:
        init = ["    def __init__(self, **weights):", "        super().__init__()",
                "        for name, weight in weights.items():", "            self.register_buffer(name, weight)", ""]
        body = [read_from_self(line, {w: w for w in weights}) for line in body]
    else:
        init = []
    return ["class F(torch.nn.Module):", *init, f"    def forward(self{''.join(', ' + p for p in params)}):",
            *(f"        {line}" for line in body), "", "", f"f = F({', '.join(f'{w}={w}' for w in weights)})"]


def _operand(expr: str) -> str:
    """`expr` as the operand of a method call: in parentheses where an operator outside any
    bracket binds looser (`torch.rand(...) < 0.75` then `.to('cuda')` is a comparison
    with `0.75.to('cuda')`)."""
    depth, quote = 0, ""
    for ch in expr:
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif depth == 0 and ch in " <>=+-*/%&|^~":
            return f"({expr})"
    return expr
