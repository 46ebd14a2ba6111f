"""Verdicts and failure signatures.

A verdict says what happened to one candidate on one backend. Its signature is what
must stay the same for a candidate to count as "the same bug" (docs/design.md#a-reduction-end-to-end).
"""

from __future__ import annotations

import math
import re
from dataclasses import asdict, dataclass, field
from typing import Any, Callable

# Verdict kinds. "pass" means the backend behaved like eager; "invalid" means the
# candidate itself is broken (eager fails on it), which is never the bug.
KINDS = ("pass", "crash", "nan", "mismatch", "oom", "hang", "invalid")
ORACLES = ("crash", "nan", "mismatch", "oom", "hang")
VALUE_ORACLES = ("nan", "mismatch")  # judged by comparing values with eager PyTorch's
ERROR_ORACLES = ("crash", "oom")  # judged by an error, whose 'Type: message' --match may ask for


@dataclass(frozen=True)
class Verdict:
    kind: str
    exc_type: str = ""
    message: str = ""
    # mismatch / nan details: which output, how far off
    output: int | None = None
    max_abs: float | None = None
    max_rel: float | None = None
    detail: str = ""
    extra: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)

    @property
    def failed(self) -> bool:
        return self.kind not in ("pass", "invalid")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @staticmethod
    def from_dict(d: dict[str, Any]) -> "Verdict":
        return Verdict(**d)

    def named(self, names: list[str]) -> "Verdict":
        """This verdict with its output's place in what the model returns (Program.output_names:
        `['action']`), for what is said of the user's own program; the same where none."""
        if self.output is None or not 0 <= self.output < len(names):
            return self
        return Verdict(**{**self.to_dict(), "extra": {**self.extra, "output_name": names[self.output]}})

    def lost_words(self) -> str:
        """A mismatch where eager's NaN or inf came back finite, in those words: "max abs
        inf" read as an overflow where the bug is an op that drops NaN (ONNX Runtime's
        ReduceMax, ExecuTorch's max_pool2d). Empty for any other verdict."""
        lost = self.extra.get("lost")
        if self.kind != "mismatch" or not lost:
            return ""
        count, word, off = lost["count"], lost["eager"], lost["off"]
        if count == off:
            return f"is finite where eager's is {word}"
        return f"is finite at {count} value{'s' if count > 1 else ''} where eager's is {word}, and off at others"

    def describe(self) -> str:
        """One human line, used by `trtmin check` and the report."""
        if self.kind == "pass":
            return f"PASS: {self.message}" if self.message else "PASS: the backend matches eager PyTorch"
        if self.kind == "invalid":
            return f"INVALID: eager PyTorch itself fails: {self.exc_type}: {self.message}"
        output = f"output {self.output}" + (f" {self.extra['output_name']}" if self.extra.get("output_name") else "")
        if self.kind == "mismatch":
            if self.lost_words():
                return f"MISMATCH: {output} {self.lost_words()}{_sep(self.detail)}"
            rel = f" (max rel {_fmt(self.max_rel)})" if self.max_rel is not None and math.isfinite(self.max_rel) else ""
            return f"MISMATCH: {output} differs from eager by max abs {_fmt(self.max_abs)}{rel}{_sep(self.detail)}"
        if self.kind == "nan":
            return f"NAN: {output} has non-finite values where eager is finite{_sep(self.detail)}"
        if self.kind == "hang":
            return f"HANG: {self.message}"
        first = leading_line(self.message)
        return f"{self.kind.upper()}: {self.exc_type}: {first[:300]}{'...' if len(first) > 300 else ''}"


def _fmt(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.4g}"


def _sep(detail: str) -> str:
    return f" ({detail})" if detail else ""


# What normalize_message writes in place of what a cut or a run changes, and the regex that
# stands for it in a script's error pattern (script_checks.message_pattern)
PLACEHOLDERS = {"<_n>": r"(?:_\d+)?", "<onnx_node>": r"node_\w+", "<n>": r"\d+", "<addr>": r"0x[0-9a-fA-F]+", "<path>/": r"\S*/",
                "<nodes>": r"[^\]]*", "<value>": r"[^)]*",
                "<types>": r"[A-Z][A-Z0-9_]*(?:\s*\|\s*[A-Z][A-Z0-9_]*)*(?:\s*\|)?", "<set>": r"\{[^{}]*\}"}

# A union of types (onnxscript's "TRealOrUInt8=UINT8 | INT32 | INT8 | ...", two or more), listed
# from a set in an order each process draws anew (PYTHONHASHSEED): one bug, whatever the order.
# Made generic first, before the dtype names in it are kept.
_TYPE_UNION = re.compile(r"\b[A-Z][A-Z0-9_]*(?:\s*\|\s*[A-Z][A-Z0-9_]*)+\b(?:\s*\|(?=\.\.\.|\s*$))?")

# A Python set of names ("Missing out variants: {'quantized_decomposed::dequantize_per_tensor',
# ...}", ExecuTorch's), also listed in an order each process draws anew: one bug, whatever
# the order, and whichever of the names a cut keeps.
_NAME_SET = re.compile(r"""\{(['"])[^'"{}]*\1(?:, (['"])[^'"{}]*\2)*\}""")

# A file's folders: another machine's. Made generic first, before the dtype names kept (a
# folder's "trt-fp16" is none).
_PATH = re.compile(r"(/[\w.\-]+)+/([\w.\-]+)")

_NORMALIZERS = [
    # names a cut changes, where the words around them name the failure: TensorRT's fused
    # region by its first and last node ({ForeignNode[c_bias...node_tanh]} cannot be
    # quantized), ONNX Runtime's value by its producer ("input parameter (_to_copy) of
    # operator (Pow)": "(to)" where the producer is cut and the value fed in)
    (re.compile(r"ForeignNode\[[^\]]*\]"), "ForeignNode[<nodes>]"),
    (re.compile(r"\b((?:in|out)put parameter) \([^)]*\)"), r"\1 (<value>)"),
    # an ONNX node's name (torch.onnx names it after its fx node: node_view, node_view_9) counts
    # its op's earlier nodes, which a cut renumbers: the same node with or without a suffix
    (re.compile(r"\b(node_[A-Za-z]\w*?)(?:_\d+)?\b"), r"\1<_n>"),
    (re.compile(r"0x[0-9a-fA-F]+"), "<addr>"),
    (re.compile(r"\d+"), "<n>"),
    (re.compile(r"\s+"), " "),
]


# Where a compiler's words name the operator, the ONNX node's name is any name (torch.onnx
# names a node after the fx node, node_view, or after the ONNX op it made, node_Reshape_21, as
# a cut changes the graph around it): one bug, not two (a hunt's 10-D reshape stopped at 2
# nodes, a bf16 Conv at 2). TensorRT's parser: "In node 0 with name: node_view and operator:
# Reshape"; ONNX Runtime's checker: "of operator (Conv) in node (node_Conv_8)", its run:
# "while running Conv node. Name:'node_Conv_8'", its kernels: "Could not find an
# implementation for Mish(18) node with name 'node_mish'".
_NODE_BESIDE_OPERATOR = [re.compile(r"\bwith name: (node_\w+) and operator: \w"),
                         re.compile(r"\boperator \(\w+\) in node \((node_\w+)\)"),
                         re.compile(r"\brunning \w+ node\. Name:'(node_\w+)'"),
                         re.compile(r"\bfor \w+\(\d+\) node with name '(node_\w+)'")]


# A dtype's name holds a width, which is no count: tensor(int8) and tensor(int64) are two bugs.
_DTYPE_NAME = re.compile(r"(?i)\bk?(?:u?int|float|bfloat|complex|fp|bf|tf)(?:4|8|16|32|64|128)(?:_e\dm\d\w*)?\b")


# An error code names the failure, where an address or a count does not: ExecuTorch's
# "execute() failed with error 0x12", "error: 0x:1", TensorRT's "Error Code 3: API Usage
# Error", a CUDA "error 700". Kept as they are; another code is another bug.
_ERROR_CODE = re.compile(r"(?i)\berror(?:\s+code)?\s*[:=]?\s*(?:0x:?[0-9a-f]+|\d+)\b")


def normalize_message(message: str) -> str:
    """The leading line (leading_line), with numbers, addresses, paths and ONNX node names'
    counters made generic (the whole name where the words name the operator), error codes
    and dtype names kept.

    `KeyError: 'buf12'` and `KeyError: 'buf3'` are the same bug; an error about a
    different op is not, and neither is another error code. 300 characters, as the
    verdict line shows: TensorRT's words come after 200 of its own prefixes ("building
    the engine failed: IBuilder::buildSerializedNetwork: Error Code 1: Myelin
    ([myelin_graph.h:<n>: ...] ... CHECK(false) failed. Strided & Dilated Deconv not
    supported by cuDNN"), and a cut at 200 kept "Strid" of them.
    """
    line = leading_line(message)
    for named in _NODE_BESIDE_OPERATOR:
        if (parsed := named.search(line)) is not None:
            line = re.sub(rf"\b{re.escape(parsed.group(1))}\b", "<onnx_node>", line)
    line = _PATH.sub(r"<path>/\2", _NAME_SET.sub("<set>", _TYPE_UNION.sub("<types>", line)))
    kept: list[str] = []

    def keep(found: re.Match[str]) -> str:  # out of the normalizers' way, where it stands, as a character none touches
        kept.append(found.group(0))
        return chr(0xE000 + len(kept) - 1)

    line = _DTYPE_NAME.sub(keep, _ERROR_CODE.sub(keep, line))
    for pattern, repl in _NORMALIZERS:
        line = pattern.sub(repl, line)
    for i, token in enumerate(kept):
        line = line.replace(chr(0xE000 + i), token)
    cut = line[:300]
    opened = cut.rfind("<")
    if opened >= 0 and any(line.startswith(token, opened) and opened + len(token) > len(cut)
                           for token in PLACEHOLDERS):
        cut = cut[:opened]  # not half a placeholder: the script's pattern would need "<pa" literally
    return cut


def leading_line(message: str) -> str:
    """A message's first non-empty line, and the next where the first only leads to an op it
    names: ExecuTorch's "...with mismatched dtypes:" then "Operator: <EdgeOpOverload: ...>".
    Not any line after a ":" (Triton's "at 5:11:" leads to a kernel whose name each cut changes)."""
    lines = [ln.strip() for ln in message.splitlines() if ln.strip()][:2]
    leads = len(lines) == 2 and lines[0].endswith(":") and lines[1].startswith("Operator: ")
    return " ".join(lines) if leads else "".join(lines[:1])


def signal_of(message: str) -> str:
    """The signal's name in a worker's death verdict (oracles/worker.py death_verdict),
    without the site the fault handler told: "SIGSEGV"."""
    return message.partition(" in ")[0]


def crash_words(v: "Verdict") -> str:
    """A crash's message as its signature keeps it: normalized (numbers, paths), but a
    death's site as it is: "_lower_conv2d" and "_lower_conv3d" are two places."""
    return v.message if v.exc_type == "Signal" else normalize_message(v.message)


def native_cause(v: "Verdict") -> str:
    """The first line the compiler logged of a crash it raised with a bare code (ExecuTorch's
    "[XNNCompiler.cpp:664] Failed to define tensor 0 with code: xnn_status_unsupported_parameter"
    behind "error: 0x:1"), normalized as messages are; "" where it logged none."""
    native = v.extra.get("native_errors") or []
    return normalize_message(native[0]) if native else ""


def same_death(original: str, other: str) -> bool:
    """Two deaths by a signal are one bug where the signal is the same and so is the site,
    if both have one: a crash in a thread with no Python frame (a compiler's thread pool)
    has none, and which thread faults may vary from run to run."""
    (sig, _, site), (other_sig, _, other_site) = original.partition(" in "), other.partition(" in ")
    return sig == other_sig and (not site or not other_site or site == other_site)


def mismatch_decade(max_abs: float | None) -> int:
    if not max_abs or not math.isfinite(max_abs):
        return 99
    return math.floor(math.log10(max_abs))


def needs_child(v: Verdict) -> bool:
    """Whether a script must run the backend in a child process to judge `v`: a hang (the
    child is killed at the timeout) or a death that ends the process (a signal, an exit)."""
    return v.kind == "hang" or v.exc_type in ("Signal", "ProcessExit")


def failing_outputs(v: Verdict) -> list[tuple[int | None, float | None, float | None]]:
    """(output, max abs, error ratio) of each output a mismatch or NaN verdict finds off:
    extra["off"] where several are (oracles/checks.summarize), else the one it names. The
    ratio: its error from the float64 run over eager's own (--reference float64), else None."""
    return [(o[0], o[1], o[2] if len(o) > 2 else None)
            for o in v.extra.get("off") or [(v.output, v.max_abs, v.extra.get("ratio"))]]


def answers(v: Verdict, oracle: str, match: re.Pattern[str] | str | None = None, any_failure: bool = False) -> bool:
    """The one judge of whether a verdict is the failure the user asks about (check, reduce,
    every candidate through Signature.matches): the oracle's kind, with its
    'Type: message' taken by --match where it has one (crash, oom); with --any-failure,
    any failure at all."""
    if any_failure:
        return v.failed
    if v.kind != oracle:
        return False
    if match is None or v.kind not in ERROR_ORACLES:
        return True
    said = [f"{v.exc_type}: {v.message}"] + ([f"Signal: {signal_of(v.message)}"] if v.exc_type == "Signal" else [])
    return any(re.search(match, text) is not None for text in said)  # a death: with its site, or the signal alone


@dataclass(frozen=True)
class Signature:
    """What stays fixed across a reduction."""

    kind: str
    exc_type: str = ""
    message: str = ""
    decade: int | None = None  # mismatch only: order of magnitude of the original error
    ratio: float | None = None  # mismatch under --reference float64: the original's error over eager's own
    cause: str = ""  # crash only: the compiler's first native error line, normalized (native_cause)

    @staticmethod
    def of(v: Verdict) -> "Signature":
        if v.kind == "crash":
            return Signature("crash", v.exc_type, crash_words(v), cause=native_cause(v))
        if v.kind == "mismatch":
            return Signature("mismatch", decade=mismatch_decade(v.max_abs), ratio=v.extra.get("ratio"))
        return Signature(v.kind)

    # A mismatch may shrink as upstream drift is cut away, but one that falls by more
    # than this many decades is treated as a different (rounding-sized) bug.
    MISMATCH_DECADES = 3
    # Under --reference float64 the error over eager's own names the bug's size: a candidate
    # must keep it no more than a decade below the original's, and at least the original's or this
    # (twice the ratio that makes a bug): a rounding-sized conv met on the way (4x where a
    # var's overflow was 150x) is another bug, and a shrink that leaves a 2.9x bug at 2.02x
    # leaves a repro that fails on half the seeds.
    RATIO_MARGIN = 4.0

    def holds_ratio(self, ratio: float | None) -> bool:
        """Whether a candidate's error ratio is this mismatch's size (True where either has none):
        no more than a decade below the original's, nor below 0.9x the lesser of it and
        RATIO_MARGIN (the slack: the original's own reruns, --repeat's, vary a little)."""
        if self.ratio is None or ratio is None:
            return True
        return ratio >= max(self.ratio / 10, 0.9 * min(self.ratio, self.RATIO_MARGIN))

    def matches(self, v: Verdict, match: re.Pattern[str] | None = None, any_failure: bool = False,
                counts: Callable[[int | None], bool] | None = None) -> bool:
        """Whether `v` is this bug. `counts`: which of a value verdict's failing outputs may
        show it (the reduction's: those upstream of the original's failing output); None: any."""
        if not answers(v, self.kind, match, any_failure):
            return False
        if any_failure:
            return True
        if self.kind == "crash" and self.exc_type == v.exc_type == "Signal":
            return same_death(self.message, v.message)
        if self.kind == "crash":  # and where the compiler logged why, the same why: one error code hides many
            return (v.exc_type, crash_words(v)) == (self.exc_type, self.message) and native_cause(v) == self.cause
        if self.kind not in VALUE_ORACLES:
            return True
        off = [(size, ratio) for output, size, ratio in failing_outputs(v) if counts is None or counts(output)]
        if self.kind == "mismatch" and self.decade is not None:
            return any(mismatch_decade(size) >= self.decade - self.MISMATCH_DECADES and self.holds_ratio(ratio)
                       for size, ratio in off)
        return bool(off)

    def text(self) -> str:
        if self.kind == "crash":
            return f"crash: {self.exc_type}: {self.message}" + (f" (logged: {self.cause})" if self.cause else "")
        if self.kind == "mismatch":
            return f"mismatch: max abs error ~1e{self.decade}" + (f", {self.ratio:.3g}x eager's own" if self.ratio else "")
        return self.kind

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


# The gap between 1 and the next value of each dtype (torch.finfo(dtype).eps) whose rounding
# precision_note measures: not bf16 or fp16, where 32 steps at the output's scale hold real
# bugs (a planted x1.5 was 21 bf16 steps); their own note, and --reference float64, judge those
FLOAT_STEPS = {"float64": 2.0 ** -52, "float32": 2.0 ** -23, "complex128": 2.0 ** -52, "complex64": 2.0 ** -23}
ROUNDING_STEPS = 32  # a largest difference within this many steps at the output's scale is rounding's size


def precision_note(v: Verdict, reference: str) -> str | None:
    """What to say of a mismatch whose size rounding alone gives: a bfloat16 or float16
    output judged against eager alone (low_precision_note), or, in float32 or float64, a
    largest difference within ROUNDING_STEPS steps of its dtype at the output's scale (the
    largest |eager| value there): another order of a kernel's sums differs from eager that
    much, and only tolerances set tighter than that (--atol 0 --rtol 0) call it a mismatch."""
    low = low_precision_note(v) if reference == "eager" else None
    if low:
        return low
    dtype, scale = output_dtype(v), v.extra.get("scale")
    if dtype in FLOAT_STEPS and scale and v.max_abs is not None:
        steps = v.max_abs / (FLOAT_STEPS[dtype] * scale)
        if steps <= ROUNDING_STEPS:
            return (f"the largest difference, {v.max_abs:.3g}, is {steps:.2g} steps of {dtype} at the "
                    f"output's scale (its largest value, {scale:.3g}): the size of rounding, which another order "
                    "of a kernel's sums gives, rarely a bug; loosen --atol and --rtol unless you mean it")
    return None


def low_precision_note(v: Verdict) -> str | None:
    """What to say of a mismatch in a bfloat16 or float16 output judged against eager alone:
    there rounding alone differs from eager, which --reference float64 tells from a bug."""
    dtype = output_dtype(v)
    return (f"the mismatch is in a {dtype} output, where rounding alone differs from eager: "
            "`--reference float64` counts only errors beyond twice eager's own") if dtype in ("bfloat16", "float16") \
        else None


# how a mismatch's detail names its output's dtype (oracles/checks.py: "(3 of 4 values off, dtype float32)")
DTYPE_WORDS = re.compile(r"\bdtype (\w+)")


def output_dtype(v: Verdict) -> str | None:
    """A mismatch's output dtype, as its detail names it (DTYPE_WORDS)."""
    found = DTYPE_WORDS.search(v.detail) if v.kind == "mismatch" else None
    return found.group(1) if found else None
