"""repro.py: the standalone script that compiles the reduced graph and judges it.

Everything it needs is written into it (the graph as a Repro module, its inputs and
weights as expressions or a tensors file beside it, the checks the oracle used), so it
runs with torch and the compiler alone, never trtmin.
"""

from __future__ import annotations

import platform
import re
import textwrap
from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence

import torch
import torch.fx as fx

import minimize
from minimize.program.candidate import INLINE_MAX_ELEMENTS
from minimize.program.inputs import is_row_major
from minimize.program.libraries import IMPORT_COPY_PREFIX, import_copies
from minimize.program.literals import odd_nans, tensor_literal
from oracles.address_space import address_space_source
from oracles.backends.base import Backend
from oracles.errors import without_colours, without_scratch_folders
from oracles.reference import ERROR_RATIO
from oracles.script_checks import OUTCOMES, check_source, error_pattern, message_pattern, tagged_source
from oracles.script_child import CHILD_SOURCE
from oracles.verdict import Signature, Verdict, signal_of


INPUTS_FILE = "repro_inputs.pt"


def nodes(n: int) -> str:
    """"1 call node", "3 call nodes"."""
    return f"{n} call node" + ("" if n == 1 else "s")


def calls(n: int) -> str:
    """"1 oracle call", "5 oracle calls"."""
    return f"{n} oracle call" + ("" if n == 1 else "s")


def environment(packages: Sequence[str] = ()) -> dict[str, str]:
    """What a run records of where it ran (summary.json): with the versions of the installed
    compilers, and of `packages` (a plugin's), which `repros add` keeps as first_seen."""
    from oracles.environment import KEY_PACKAGES, NOT_INSTALLED, package_version
    env = {"trtmin": minimize.version(), "torch": torch.__version__, "python": platform.python_version(),
           "os": platform.platform(), "cuda": str(torch.version.cuda or "none")}
    for package in dict.fromkeys((*KEY_PACKAGES, *packages)):
        version = env.get(package) or package_version(package)
        if version != NOT_INSTALLED:
            env[package] = version
    if torch.cuda.is_available():
        env["gpu"] = torch.cuda.get_device_name(0)
    return env


@dataclass
class ReproInfo:
    title: str
    source_model: str
    original_nodes: int
    final_nodes: int
    oracle_calls: int
    oracle: str
    verdict: Verdict
    signature: Signature
    match: str | None
    atol: float
    rtol: float
    device: str
    needs_subprocess: bool  # signal deaths and hangs must be caught from a parent process
    timeout: float
    reference: str = "eager"  # "float64": a mismatch is judged against eager's own error (oracles/reference.py)
    memory_limit_mb: int | None = None  # --memory-limit: the script sets it too (oracles/address_space.py)
    imports: tuple[str, ...] = ()  # --import: libraries registering the program's custom ops, imported first
    # {input name: {dim: (min, max or None)}}: the sizes the program was exported with as dynamic
    dynamic: dict[str, dict[int, tuple[int, int | None]]] = field(default_factory=dict)


def forward_source(gm: fx.GraphModule) -> str:
    """The graph's forward as fx writes it, less fx's "x = None" frees, with devices spelled
    torch.device('cuda', 0) rather than fx's device(type='cuda', index=0), and keyword
    arguments as PEP 8 writes them (dtype=torch.uint8, where fx writes dtype = torch.uint8)."""
    src = gm.graph.python_code(root_module="self").src
    lines = []
    for line in src.strip().splitlines():
        line = re.sub(r";\s+(\w+ = )+None$", "", line)
        line = re.sub(r"(?<![\w.])device\(type='(\w+)'(?:, index=(\d+))?\)",
                      lambda m: f"torch.device({m[1]!r}{', ' + m[2] if m[2] else ''})", line)
        target, eq, value = line.partition(" = ")  # the statement's own `=` stays spaced
        if eq:
            line = target + eq + re.sub(r"([(,] ?)(\w+) = ", r"\1\2=", value)
        lines.append(line)
    return "\n".join(lines)


ATTRIBUTE_READ = re.compile(r"^\s*(\w+) = self\.(\w+)$")  # fx's line per weight a forward reads: `w = self.w`


def read_from_self(line: str, reads: dict[str, str]) -> str:
    """`line` with each use of a name in `reads` (local name -> attribute) read from self
    (`self.w`): a use, not a keyword (`w=`), nor part of a longer name or of a string."""
    if not reads:
        return line
    use = re.compile(r"(?<![\w.'\"])(" + "|".join(map(re.escape, reads)) + r")\b(?!=)")
    return use.sub(lambda m: "self." + reads[m[1]], line)


def inline_attribute_reads(forward: str) -> str:
    """`forward` without fx's line per weight it reads (`w = self.w`): each use reads
    `self.w` itself, as report.md's snippet does (a program of 6 weights: 6 lines less)."""
    reads: dict[str, str] = {}
    lines = []
    for line in forward.splitlines():
        read = ATTRIBUTE_READ.match(line)
        if read:
            reads[read[1]] = read[2]
        else:
            lines.append(read_from_self(line, reads))
    return "\n".join(lines)


def tensor_expressions(values: dict[str, Any], generated: dict[str, str] | None,
                       big: dict[str, torch.Tensor]) -> dict[str, str]:
    """The expression that makes each value in repro.py: generated ones as the expression
    (minimize/search/passes/values.py), small ones inline, the other large ones read from
    `tensors`, the file beside the script (added to `big`). A tensor of other strides than
    a new one's (a user's channels_last input, its weights) goes to the file too, which
    keeps them (a literal is row-major): the workers ran on that layout."""
    made = generated or {}

    def value(name: str, v: Any) -> str:
        if name in made:
            return made[name]
        if isinstance(v, torch.Tensor) and (v.numel() > INLINE_MAX_ELEMENTS or v.is_complex() or not is_row_major(v)
                                            or odd_nans(v)):  # the file keeps a NaN's bits
            v = v.detach().cpu()  # a copy where the layout is another or the storage is larger (a view: torch.save
            whole = v.untyped_storage().nbytes() == v.numel() * v.element_size()  # writes all its storage)
            copy = v if is_row_major(v) and whole else v.clone()  # clone keeps a dense layout
            big[name] = copy if copy.stride() == v.stride() else v  # a strided slice: as it is, its storage too
            return f"tensors[{name!r}]"
        return tensor_literal(v)
    return {name: value(name, v) for name, v in values.items()}


def tensors_source(inputs: dict[str, Any], constants: dict[str, Any],
                   generated: dict[str, str] | None = None) -> tuple[str, str, dict[str, torch.Tensor]]:
    """Source of Repro.__init__ (the weights) and make_inputs(), and the tensors that go
    to the file beside the script."""
    big: dict[str, torch.Tensor] = {}
    load = f"torch.load(os.path.join(os.path.dirname(os.path.realpath(__file__)), {INPUTS_FILE!r}), weights_only=True)"
    weight_exprs = tensor_expressions(constants, generated, big)
    input_exprs = tensor_expressions(inputs, generated, big)
    weights = [f"        self.register_buffer({n!r}, {e})" for n, e in weight_exprs.items()]
    init = ""
    if weights:
        uses_file = any(n in big for n in constants)
        init = ("    def __init__(self):\n        super().__init__()\n"
                + (f"        tensors = {load}\n" if uses_file else "") + "\n".join(weights) + "\n\n")
    if not input_exprs:
        return init, "def make_inputs():\n    return []\n", big
    file_line = f"    tensors = {load}\n" if any(n in big for n in inputs) else ""
    labels = [n + (f" (strides {tuple(v.stride())}: the layout it was given)"  # the file keeps it
                   if isinstance(v, torch.Tensor) and not is_row_major(v) else "") for n, v in inputs.items()]
    one_line = f"    return [{', '.join(input_exprs.values())}]  # {', '.join(labels)}"
    # else one input a line, each named, aligned under the first (no lines of brackets alone)
    lead, last = "    return [", len(input_exprs) - 1
    body = one_line if len(one_line) <= 110 else "\n".join(
        f"{lead if i == 0 else ' ' * len(lead)}{e}{']' if i == last else ','}  # {label}"
        for i, (e, label) in enumerate(zip(input_exprs.values(), labels)))
    return init, "def make_inputs():\n" + file_line + body + "\n", big


HEADER = '''"""{about}
Exit 1 REPRODUCED, 0 FIXED, 2 SKIPPED, 3 CHANGED. TRTMIN_BACKEND=eager: eager PyTorch for the backend (FIXED).{memory_words}"""
{std_imports}
try:
    import torch
except ImportError:  # no torch: cannot run here, which is no verdict on the bug
    sys.exit(print("SKIPPED: torch cannot be imported") or 2)
'''


# The memory limit the reduction ran under (--memory-limit), set as trtmin's workers set it,
# with their functions (oracles/address_space.py): the bug is an allocation over it.
MEMORY_FUNCTIONS = '''
def limit_memory():
    """RLIMIT_AS of MEMORY_LIMIT_MB for the backend call, as trtmin's workers had it: None once
    set, else why it cannot be (the script then cannot judge the bug here)."""
    limit = f"the reduction's memory limit ({MEMORY_LIMIT_MB} MiB of address space, RLIMIT_AS)"
    try:
        mapped = set_address_limit(MEMORY_LIMIT_MB * 2**20)
    except ImportError:  # no resource module (Windows): unlimited, an OOM bug would pass as FIXED
        return f"the bug needs {limit}, and this platform cannot set one (no resource module)"
    except (ValueError, OSError) as e:  # a lower hard limit is set already (ulimit -v)
        return f"{limit} cannot be set here: {e}"
    if mapped is not None:
        return (f"{limit} is below what this process maps before the backend call ({mapped >> 20} MiB); "
                f"to run it anyway, set MEMORY_LIMIT_MB to at least {mib_to_ask(mapped)}")
    return None
'''


def script_features(info: ReproInfo, part: Any, pattern: str, dynamic: bool, numbers: bool = False) -> set[str]:
    """The tagged parts of minimize/emit/repro_main.py and oracles/script_checks.py this bug
    needs; `numbers`: the program returns Python numbers (an .item())."""
    wanted = {"numbers": numbers, "cuda": info.device.startswith("cuda") and not (part.outputs_on_host or part.exits_when_fixed),
              "requires": bool(part.requires),
              "plugin": part.load_body.strip() != "return None", "dynamic": dynamic,
              "float64": info.reference == "float64", "pattern": bool(pattern), "child": info.needs_subprocess,
              "memory": bool(info.memory_limit_mb), "dynamo": info.needs_subprocess or bool(info.memory_limit_mb),
              "failure": info.signature.kind not in OUTCOMES,  # a crash, OOM or hang: no values to judge
              "nan": info.signature.kind == "nan",  # another count of outputs is a mismatch: another failure
              "wrapped": info.verdict.kind == "crash" and info.verdict.exc_type == "Exception",  # a pass manager's
              "direct": part.raises_own_error,  # the error to match is the one compile_backend raises
              "logged": bool(info.signature.cause and pattern) and not info.needs_subprocess and not part.raises_own_error,
              "stack": info.verdict.kind in ("crash", "oom") and not info.needs_subprocess and not part.raises_own_error}
    return {name for name, on in wanted.items() if on}


def output_values(gm: fx.GraphModule) -> list[Any]:
    """What the graph returns, flattened: each output node's recorded example value (a fake
    tensor; None where the graph records none) or the constant it returns."""
    return [out.meta.get("val") if isinstance(out, fx.Node) else out
            for node in gm.graph.find_nodes(op="output") for out in torch.utils._pytree.tree_leaves(node.args[0])]


def io_dtypes(gm: fx.GraphModule, inputs: Iterable[Any]) -> frozenset[Any]:
    """The dtypes of the program's tensor inputs and outputs; None for an output whose
    value the graph does not record (a script form that cannot hold some dtype then takes
    the general form)."""
    dtypes: set[Any] = {value.dtype for value in inputs if isinstance(value, torch.Tensor)}
    dtypes.update(value.dtype if isinstance(value, torch.Tensor) else None if value is None else type(value)
                  for value in output_values(gm))
    return frozenset(dtypes)


def script_pattern(info: ReproInfo, backends_own: str | None = None) -> str:
    """A script's ERROR_PATTERN. A death by a signal: the signal's name ("SIGSEGV"), for the
    script's child sees how the process ended, not the Python site the worker's fault handler
    told, which a user's --match may name. Else the user's --match; a death by an exit code:
    its words; else the pattern the backend's script form needs (`backends_own`,
    ScriptPart.error_pattern), or the signature's."""
    if info.needs_subprocess and info.verdict.kind == "crash":
        if info.verdict.exc_type == "Signal":
            return re.escape(signal_of(info.verdict.message))
        if not info.match:
            return re.escape(info.verdict.message)
    return backends_own if backends_own and not info.match else error_pattern(info.signature, info.match)


def retitled(title: str, shown: str, name: str | None) -> str:
    """`title` with the backend it opens with (`shown`, as titles show it) traded for `name`,
    or dropped where `name` is None; as it is where it opens with another."""
    if not title.startswith(shown + " "):
        return title
    rest = title[len(shown) + 1:]
    return f"{name} {rest}" if name else rest


def sentence(text: str) -> str:
    """text ended with one full stop: none added after its own, or after the "..." of a
    message cut short (which a strip of full stops would take away)."""
    return text if text.endswith(".") else text + "."


def render_script(info: ReproInfo, gm: fx.GraphModule, inputs: dict[str, Any], constants: dict[str, Any],
                  backend: Backend, generated: dict[str, str] | None = None) -> tuple[str, dict[str, torch.Tensor]]:
    """repro.py's text and the tensors for the file beside it. The program and the backend
    call come first, then the constants, then the checks and the run (real functions,
    copied with only the parts this bug needs)."""
    from minimize.emit import repro_main
    env = environment()
    dynamic = _dynamic_parts(info, list(inputs))
    part = backend.script_part_for(info.verdict, dynamic=bool(dynamic), io_dtypes=io_dtypes(gm, inputs.values()))
    init_src, inputs_src, big = tensors_source(inputs, constants, generated)
    forward_src = inline_attribute_reads(forward_source(gm))
    pattern = script_pattern(info, part.error_pattern)
    returns_numbers = any(v is not None and not isinstance(v, torch.Tensor) for v in output_values(gm))
    on = script_features(info, part, pattern, bool(dynamic), returns_numbers)
    program = forward_src + init_src + inputs_src
    gpu = f" ({env['gpu']})" if "gpu" in env else ""
    cut = (f"cut no node of {info.source_model} ({nodes(info.final_nodes)})" if info.original_nodes == info.final_nodes
           else f"cut {info.source_model} from {info.original_nodes} to {nodes(info.final_nodes)}")
    about = (f"{info.title}: {sentence(info.verdict.describe())} trtmin {env['trtmin']} {cut} in "
             f"{calls(info.oracle_calls)} on torch {env['torch']}, device {info.device}{gpu}{reference_words(info)}.")
    copies = import_copies(info.imports)
    std = ["os", "sys", *(["importlib"] if "dynamo" in on or info.imports else []),
           *(["importlib.util"] if copies else []),
           *(["re"] if on & {"pattern", "child"} else []),
           *(["subprocess"] if "child" in on else []), *(["traceback"] if "stack" in on else []),
           *(["tempfile"] if "logged" in on else [])]
    head = HEADER.format(about=_docstring_text(textwrap.fill(about, 110, break_on_hyphens=False)),
                         memory_words=_memory_words(info),
                         std_imports="\n".join(f"import {m}" for m in sorted(set(std))))
    head += ("from torch import device  # the graph below writes devices as device(type=...)\n"
             if re.search(r"(?<![\w.])device\(", program) else "") + _libraries_source(info, copies)
    backend_arg = ", backend" if "plugin" in on else ""
    kernels = "".join(f"__import__({m!r})  # the kernels of some of the program's ops, loaded on import\n    "
                      for m in backend.program_imports(gm))
    constants_src = "".join([
        'inf, nan = float("inf"), float("nan")\n' if re.search(r"\b(inf|nan)\b", program) else "",
        (f"DEVICE, ATOL, RTOL = {info.device!r}, {info.atol!r}, {info.rtol!r}\n" if info.signature.kind == "mismatch"
         else f"DEVICE = {info.device!r}\n"),
        f"REQUIRES = {part.requires!r}  # packages the backend imports (\"a|b\": either); `trtmin repros run` reads it: SKIPPED at once without them\n" if part.requires else "",
        f"ERROR_PATTERN = {pattern!r}  # the failure's text, as a regex\n" if on & {"pattern", "child"} else "",
        (f"LOGGED_PATTERN = {message_pattern(info.signature.cause)!r}  # the first error line the runtime "
         "logged (to stderr), as a regex\n" if "logged" in on else ""),
        dynamic.get("constant", ""),
        (f"MEMORY_LIMIT_MB = {info.memory_limit_mb!r}  # the reduction's --memory-limit (RLIMIT_AS), "
         "set before the backend is called\n" if info.memory_limit_mb else "")])
    sections = [
        head + constants_src,
        f"\nclass Repro(torch.nn.Module):\n{init_src}{textwrap.indent(forward_src, '    ')}\n",
        f"def compile_backend(module, inputs{backend_arg}):\n    {kernels}{part.compile_body}\n",
        inputs_src,
        *part.imports,
    ]
    if "plugin" in on:
        sections.append(f"def load_backend():\n    {part.load_body}\n")
    sections.append(check_source(info.signature, "float64" in on, "numbers" in on).strip() + "\n")
    if dynamic:
        sections.append(dynamic["functions"].strip() + "\n")
    if "child" in on:
        sections.append(_child_functions(info).strip() + "\n")
    if "memory" in on:
        sections.append(MEMORY_FUNCTIONS.strip() + "\n\n\n" + address_space_source().strip() + "\n")
    sections.append(tagged_source(repro_main.main, on, docstring=False))
    entry = tagged_source(repro_main.entry, on, docstring=False)
    sections.append('if __name__ == "__main__":\n' + entry.split("\n", 1)[1])  # entry's body
    return "\n\n".join(s.strip("\n") + "\n" for s in sections if s.strip()).replace("\n\n\n\n", "\n\n\n"), big


def _dynamic_parts(info: ReproInfo, input_names: list[str]) -> dict[str, str]:
    """The script's parts for the dims the program was exported with as dynamic: a table by
    input position and the functions that mark inputs with it and clone them with their
    marks. Empty for a static program."""
    table = {i: info.dynamic[name] for i, name in enumerate(input_names) if info.dynamic.get(name)}
    if not table:
        return {}
    from oracles.backends.onnx_export import script_source
    from oracles.dynamic import clone_marked, mark_dynamic
    return {
        "constant": f"DYNAMIC = {table!r}  # input -> {{dim: (min, max)}}: sizes the program was exported "
                    "with as dynamic (torch.export.Dim); the compile keeps them dynamic\n",
        "functions": script_source(mark_dynamic, clone_marked)}


def _libraries_source(info: ReproInfo, copied: dict[str, Any]) -> str:
    """Imports of the libraries that register the program's custom ops (trtmin --import);
    the modules of the user's own folder (and those they import of it) from their copies
    beside the script (`copied`: import_copies), else where Python finds them."""
    if not info.imports:
        return ""
    copies = {name[len(IMPORT_COPY_PREFIX):-3]: name for name in copied}
    finder = "" if not copies else (
        f"\n_copies = {copies!r}  # your modules, copied beside this script by trtmin\n\n\n"
        "class _Copies:  # `import NAME` of one of them finds its copy, as it found the file where trtmin ran\n"
        "    def find_spec(self, name, search_path=None, target=None):\n"
        "        path = os.path.join(os.path.dirname(os.path.realpath(__file__)), _copies[name]) if name in _copies else ''\n"
        "        return importlib.util.spec_from_file_location(name, path) if os.path.isfile(path) else None\n\n\n"
        "sys.meta_path.insert(0, _Copies())\n")
    return (f"{finder}\nfor _library in {list(info.imports)!r}:  # they register the program's custom ops\n"
            "    try:\n        importlib.import_module(_library)\n"
            "    except Exception as exc:  # not installed here: cannot run, which is no verdict on the bug\n"
            "        print(f\"SKIPPED: {_library}, which registers the program's custom ops, cannot be imported: "
            "{exc}\")\n        sys.exit(2)\n")


def reference_words(info: ReproInfo) -> str:
    return (f", off only beyond {ERROR_RATIO:g}x eager's own error from a float64 run"
            if info.reference == "float64" else "")


def _docstring_text(text: str) -> str:
    """Text for the script's docstring: an error message or a command may hold backslashes
    (a Windows path, a regex: '\\x' then no hex digits is a SyntaxError), three quotes, a
    terminal's colours, or a control byte (a NUL: "source code cannot contain null bytes"),
    written as its escape."""
    text = re.sub(r"[\x00-\x08\x0b-\x1f\x7f]", lambda m: f"\\x{ord(m.group()):02x}",
                  without_scratch_folders(without_colours(text)))
    return text.replace("\\", "\\\\").replace('"""', '\\"""')


def _memory_words(info: ReproInfo) -> str:
    if not info.memory_limit_mb:
        return ""
    return (f"\nThe backend is called under {info.memory_limit_mb} MiB of address space (RLIMIT_AS), the reduction's\n"
            "--memory-limit: a host allocation over it fails. The eager control runs under it too;\n"
            "where it cannot be set (no `resource` module, as on Windows) the script prints SKIPPED.")


def _child_functions(info: ReproInfo) -> str:
    if not info.needs_subprocess:
        return ""
    hang = info.oracle == "hang"
    verdict = (f"REPRODUCED: no result within {info.timeout:g} s (hang)", 1) if hang else ("CHANGED: hangs now", 3)
    return (f"\nCHILD_TIMEOUT_S = {info.timeout!r}\nHANG_VERDICT = {verdict!r}\n"
            f"DEATH_PATTERN = ERROR_PATTERN or \"$^\"  # how the reduced bug ended the process\n{CHILD_SOURCE}")
