"""The Program model: a loaded `.pt2`, its eager intermediates, and cut-to-input slicing.

A candidate is a set of kept call nodes (indices into `Program.nodes`, topological
order). Every value a kept node reads that no kept node computes becomes a graph
input, fed with the value eager PyTorch computed for it (docs/design.md#the-candidate), so the
failing region is isolated from upstream numeric drift. A candidate's outputs are its
sinks plus the program's own outputs that it keeps.
"""

from __future__ import annotations

import hashlib
import keyword
import logging
import operator
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import torch
import torch.fx as fx
import torch.utils._pytree as pytree
from torch.export import ExportedProgram
from torch.export.graph_signature import InputKind, OutputKind
from torch.fx.experimental.symbolic_shapes import free_unbacked_symbols

from minimize.program.fast_load import fast_schema_decoding
from minimize.program.inputs import row_major, tensor_bytes
from minimize.program.libraries import unresolved_op
from minimize.program.peek import check_model_file, saved_with_torch
from oracles.checks import flatten_outputs
from oracles.errors import TrtminError, first_line


@dataclass
class Slice:
    """A materialized candidate: a runnable graph and the names of what feeds it."""

    gm: fx.GraphModule
    input_names: list[str]
    output_names: list[str]
    constant_names: list[str]  # weights the graph reads as attributes (get_attr), not inputs
    attributes: dict[str, str] = field(default_factory=dict)  # weight -> its attribute's name, where they differ

    def weights(self, values: Mapping[str, Any]) -> dict[str, Any]:
        """{attribute name: value} of the weights, as a script registers them."""
        return {self.attributes.get(n, n): values[n] for n in self.constant_names}

    def by_attribute(self, named: Mapping[str, Any] | None) -> dict[str, Any]:
        """`named` (by node name) with each weight's key its attribute name."""
        return {self.attributes.get(n, n): v for n, v in (named or {}).items()}

    @property
    def call_nodes(self) -> int:
        return count_call_nodes(self.gm.graph)


def count_call_nodes(graph: fx.Graph) -> int:
    return sum(1 for n in graph.nodes if n.op == "call_function")


def load_exported(path: Path) -> ExportedProgram:
    """torch.export.load with errors a user can act on."""
    check_model_file(path)
    # torch.export logs a traceback before raising, and its deserializer a warning a symbol
    # (u1, u3, ... of each .item()) that the graph no longer holds: kept, not shown
    quiet = _export_loggers()
    logged = _Kept()
    before = [(q.handlers, q.propagate, q.level) for q in quiet]
    for q in quiet:
        q.handlers, q.propagate = [logged], False
        q.setLevel(logging.WARNING)
    try:
        with fast_schema_decoding():
            return torch.export.load(str(path))
    except Exception as e:  # torch raises many types for damaged archives
        saved, op = saved_with_torch(path), unresolved_op(e, logged.text)
        said = _error_logged(logged.text) if "warnings above" in str(e) else None  # the warnings we kept quiet
        said = said or f"{type(e).__name__}: {first_line(e)}"
        if saved and _release(saved) != _release(torch.__version__):  # an op or schema this torch lacks, most likely
            why = f"it uses {op}, which this torch lacks" if op else said
            raise TrtminError(f"{path} was saved with torch {saved} and this is torch {torch.__version__}, which cannot "
                              f"load it ({why}); run trtmin with torch {_release(saved)}, or export the model again "
                              "with this one") from None
        if op:
            library = ("--import torch.ao.quantization.fx._decomposed (torch's own, for PT2E quantization's ops)"
                       if op.startswith("quantized_decomposed::") else "--import MODULE with the library that defines it")
            raise TrtminError(f"{path} uses the custom op {op}, which nothing imported here registers; pass "
                              f"{library}") from None
        if "wrap_with_set_grad_enabled" in str(e):  # torch 2.13 writes such a region that it cannot read back
            raise TrtminError(f"{path} could not be loaded: torch.export.load cannot read back the `with "
                              f"torch.set_grad_enabled(...)` region of its forward ({type(e).__name__}: {first_line(e)}; "
                              "torch's own bug); write it as `with torch.no_grad():` and export again") from None
        if "wrap_with_autocast" in str(e):  # a region inside an autocast one: torch 2.13 cannot read it back either
            raise TrtminError(f"{path} could not be loaded: torch.export.load cannot read back the `torch.autocast` "
                              f"region of its forward ({type(e).__name__}: {first_line(e)}; torch's own bug, with a "
                              "no_grad region inside it); save the program with its regions inlined: "
                              "torch.export.save(ep.run_decompositions({}), ...)") from None
        raise TrtminError(f"{path} could not be loaded as an exported program ({said}); "
                          "re-export it with torch.export.export and torch.export.save") from None
    finally:
        for q, (handlers, propagate, level) in zip(quiet, before):
            q.handlers, q.propagate = handlers, propagate
            q.setLevel(level)


def _error_logged(text: str) -> str | None:
    """The last `SomeError: words` line of what torch.export logged ("please check the
    warnings above", says its error, of warnings trtmin keeps off the screen), or None."""
    found = re.findall(r"\b((?:\w+\.)*(\w+(?:Error|Exception)): (.+))$", text, re.M)
    return f"{found[-1][1]}: {found[-1][2].strip()}" if found else None


def _release(version: str) -> str:
    """"2.13" of "2.13.0+cpu": releases that differ there may not read each other's archives."""
    return ".".join(version.split("+")[0].split(".")[:2])


def _export_loggers() -> list[logging.Logger]:
    """torch.export's loggers, and its modules' own: torch's logging set-up gives some of
    them (torch._export.serde.serialize) handlers of their own, which a parent's cannot quiet."""
    roots = ("torch.export", "torch._export")
    names = dict.fromkeys((*roots, *logging.root.manager.loggerDict))  # a name once: each is restored once
    return [logging.getLogger(n) for n in names if n in roots or n.startswith(tuple(r + "." for r in roots))]


class _Kept(logging.Handler):
    """What a logger said, with its tracebacks, as text."""

    def __init__(self) -> None:
        super().__init__()
        self.text = ""

    def emit(self, record: logging.LogRecord) -> None:
        self.text += logging.Formatter().format(record) + "\n"


def draws_random(node: fx.Node) -> bool:
    """randn, rand_like, bernoulli, dropout...: a compiler draws its own numbers, which no
    comparison with eager's can judge. Not an op that is tagged so for a dropout it does not
    do: attention with dropout_p=0 (every exported model in eval) or a dropout with p=0 or
    train=False draws nothing, and fed in, the attention a bug is in would leave the graph."""
    if torch.Tag.nondeterministic_seeded not in getattr(node.target, "tags", ()):
        return False
    values = _argument_values(node)
    return not (any(values.get(k) == 0 for k in ("dropout_p", "p"))
                or any(values.get(k) is False for k in ("train", "training")))


# Ops whose values are whatever the allocator hands back: eager's and a compiler's differ
# by chance (a trial reduced `x + torch.empty_like(x)` to `empty` alone and called it a bug).
UNINITIALIZED_OPS = frozenset({"empty", "empty_like", "new_empty", "empty_strided", "new_empty_strided",
                               "empty_permuted"})


def uninitialized(node: fx.Node) -> bool:
    """torch.empty and its kin: memory no one has written, which no comparison can judge."""
    packet = getattr(node.target, "_overloadpacket", None)
    return getattr(node.target, "namespace", None) == "aten" and getattr(packet, "__name__", "") in UNINITIALIZED_OPS


def fed_from_eager(node: fx.Node) -> bool:
    """A value the compiled program must be fed eager's of, for a value oracle: a random
    draw or uninitialized memory."""
    return draws_random(node) or uninitialized(node)


def _argument_values(node: fx.Node) -> dict[str, Any]:
    """The node's arguments by schema name, defaults included; {} without a schema."""
    schema = getattr(node.target, "_schema", None)
    if schema is None:
        return {}
    values = {}
    for i, arg in enumerate(schema.arguments):
        if i < len(node.args):
            values[arg.name] = node.args[i]
        elif arg.name in node.kwargs:
            values[arg.name] = node.kwargs[arg.name]
        elif arg.has_default_value():
            values[arg.name] = arg.default_value
    return values


def random_draws_note(program: "Program", fed: bool = True) -> str | None:
    """What the user is told when random draws are fed in (Program's fixed_random), or,
    `fed` False, that the program has such values, which a compiler makes its own."""
    if not (program.random_draws and (program.fixed_random or not fed)):
        return None
    said = []
    for kind, empty in (("draws random numbers", False), ("leaves memory uninitialized", True)):
        counts = Counter(str(n.target) for n in program.random_draws if uninitialized(n) == empty)
        said += [f"{kind} ({', '.join(f'{op} x{k}' for op, k in counts.items())})"] if counts else []
    if not fed:
        return f"the program {' and '.join(said)}, and a compiler's values of those cannot match eager's"
    return (f"the program {' and '.join(said)}: eager PyTorch makes these values once (draws seeded) and the "
            "compiled program gets them as inputs, since a compiler's own cannot match eager's")


def _is_reducible(node: fx.Node) -> bool:
    """Call nodes that compute a value. Assertion ops (no return value) are dropped."""
    if node.op != "call_function":
        return False
    schema = getattr(node.target, "_schema", None)
    return not (schema is not None and len(schema.returns) == 0)


def _live_names(graph: fx.Graph, user_outputs: set[str]) -> set[str]:
    """The nodes whose values reach the program's outputs: returned (the output node reads
    them: a buffer's write-back too), or read by a live node. A value read only by dead ones,
    or only by an assertion (trtmin drops those: `_assert_tensor_metadata` of a dead cast),
    is dead too, however long the chain."""
    live: set[str] = set()
    for n in reversed(graph.nodes):  # each node's users come after it
        if n.name in user_outputs or any(u.op == "output" or u.name in live for u in n.users):
            live.add(n.name)
    return live


def is_symbolic_size(value: Any) -> bool:
    """Whether `value` is a size that follows a dim exported as dynamic (a SymInt of a
    symbol), not a number and not a data-dependent size (x[x > 0]): fed in, a cut value
    of that has a size of its own."""
    return isinstance(value, torch.SymInt) and not value.node.expr.is_number \
        and not free_unbacked_symbols(value.node.expr)


def dynamic_bounds(graph: fx.Graph) -> dict[str, dict[int, tuple[int, int | None]]]:
    """The dims each value has symbolic because the program was exported with them dynamic
    (or they follow from such a dim: a cat of two, a reshape), with their bounds: {name:
    {dim: (min, max or None)}}. A candidate that reads the value as an input keeps those
    dims dynamic."""
    found: dict[str, dict[int, tuple[int, int | None]]] = {}
    for n in graph.nodes:
        val = n.meta.get("val")
        if n.op not in ("placeholder", "call_function") or not isinstance(val, torch.Tensor):
            continue
        dims = {}
        for d, size in enumerate(val.shape):
            if is_symbolic_size(size):
                bounds = size.node.shape_env.bound_sympy(size.node.expr)
                dims[d] = (int(bounds.lower), int(bounds.upper) if bounds.upper.is_Integer else None)  # int_oo: none
        if dims:
            found[n.name] = dims
    return found


def output_paths(ep: ExportedProgram, returned: Sequence[str]) -> list[str]:
    """For each value the whole program's slice returns (node names, one per flattened
    output), its place in what the model returns, where the slice's number alone would
    mislead: a dict's or dataclass's key (`['action']`, `.logits`: "output 1" alone says
    little about a policy's {"action": ..., "log_prob": ...}); in a tuple, the model's own
    index where the slice's differs (the model returns an input or None before it, which
    no slice returns: "output 1 (the model's output 3)"); a buffer's or an input's new value
    written in place, which the model does not return, by its name ("(the update of buffer
    ema)": "output 1" of a model of one output named nothing); "" where the number is the
    name, or the value is none of these. [] where the spec cannot be read."""
    spec = getattr(ep.call_spec, "out_spec", None)
    specs = ep.graph_signature.output_specs
    user = [getattr(s.arg, "name", "") for s in specs if s.kind == OutputKind.USER_OUTPUT]
    if spec is None or spec.num_leaves != len(user):
        return []
    written = {getattr(s.arg, "name", ""): f"(the update of {kind} {s.target}, written in place)" for s in specs
               for kind in [{OutputKind.BUFFER_MUTATION: "buffer", OutputKind.USER_INPUT_MUTATION: "input"}.get(s.kind)]
               if kind and s.target}
    tree = pytree.tree_unflatten(list(range(len(user))), spec)
    paths = [pytree.keystr(path) for path, _ in pytree.tree_flatten_with_path(tree)[0]]
    keyed = any(not re.fullmatch(r"(\[\d+\])*", p) for p in paths)
    nested = any(p.count("[") > 1 for p in paths)  # ((a, b), c): c is [1], not the third
    places = []
    for j, name in enumerate(returned):
        k = user.index(name) if name and name in user else None
        places.append(written.get(name, "") if k is None else paths[k] if keyed or nested else "" if k == j
                      else f"(the model's output {k})")
    return places if any(places) else []


class Program:
    """An exported program, functionalized, with every node's eager value captured."""

    def __init__(self, ep: ExportedProgram, user_inputs: Sequence[Any], device: str = "cpu",
                 fixed_random: bool = False):
        """fixed_random: random draws are never compiled: eager draws them once (seeded)
        and they feed the rest as inputs, for oracles that compare values with eager's."""
        sig = ep.graph_signature
        user_outputs = list(dict.fromkeys(s.arg.name for s in sig.output_specs  # in the order the model returns them
                                          if s.kind == OutputKind.USER_OUTPUT and hasattr(s.arg, "name")))
        # Parameters, buffers and constants stay weights in every slice (get_attr), as in
        # the user's model: a compiler treats a weight input differently (XNNPACK folds a
        # BatchNorm into a Linear only when its weight is a constant).
        constants = {s.arg.name for s in sig.input_specs
                     if s.kind in (InputKind.PARAMETER, InputKind.BUFFER, InputKind.CONSTANT_TENSOR)}
        self._setup(ep.graph_module.graph, user_outputs, constants, device, fixed_random,
                    weight_attributes(ep, constants))
        self.values = self._capture(ep, user_inputs)
        self.output_names = output_paths(ep, [name for name in self.whole_outputs()
                                              for _ in flatten_outputs(self.values[name])])
        self.dynamic = dynamic_bounds(ep.graph_module.graph)

    def digest(self) -> str | None:
        """sha256 of what a reduction reads of the model: the graph's code, every input's
        shape and dtype (made inputs follow them), its dynamic sizes and its weights. Not
        the file's bytes: a .pt2's stack traces hold the absolute path of the source it was
        traced from, so the same code exported from another folder differs there and not
        here (a journal resumes on it). None where a weight is not plain bytes (quantized:
        its scales are elsewhere): then the file's bytes decide."""
        h = hashlib.sha256(self.graph.python_code("self").src.encode())
        h.update(repr(sorted(self.dynamic.items())).encode())
        for n in self.placeholders:
            val = n.meta.get("val")
            h.update(f"\n{n.name} {getattr(val, 'dtype', '')} {tuple(getattr(val, 'shape', ()))}".encode())
        for name in sorted(self.constants):
            value = self.values[name]
            data = tensor_bytes(value) if isinstance(value, torch.Tensor) else None
            if data is None:
                return None
            h.update(f"\n{name}\n".encode())
            h.update(data)
        return h.hexdigest()

    @classmethod
    def restore(cls, graph: fx.Graph, user_outputs: list[str], constants: set[str], values: dict[str, Any],
                device: str, fixed_random: bool = False,
                dynamic: dict[str, dict[int, tuple[int, int | None]]] | None = None,
                attributes: dict[str, str] | None = None) -> "Program":
        """A worker's copy: the graph and the eager values the main process captured."""
        program = cls.__new__(cls)
        program._setup(graph, user_outputs, constants, device, fixed_random, attributes or {})
        program.values = values
        program.dynamic = dynamic or {}
        program.output_names = []  # the main process names outputs in what it says
        return program

    def _setup(self, graph: fx.Graph, user_outputs: list[str], constants: set[str], device: str,
               fixed_random: bool, attributes: dict[str, str]) -> None:
        self.device = device
        self.attributes = attributes  # weight -> its attribute's name in a slice, where they differ
        self.fixed_random = fixed_random
        self.random_draws = [n for n in graph.nodes if n.op == "call_function" and fed_from_eager(n)]
        self.graph = graph
        self.user_outputs = set(user_outputs)
        self.output_order = user_outputs  # a slice returns these first, in this order (outputs_of)
        self._output_rank = {name: r for r, name in enumerate(user_outputs)}
        self.constants = constants
        self.placeholders = [n for n in graph.nodes if n.op == "placeholder"]
        self._placeholder_names = {n.name for n in self.placeholders}
        # Dead values (an unused getitem of batch_norm's saved statistics, a causal mask's
        # torch.full whose triu nothing reads) are never kept: as candidate outputs they
        # would be compared for nothing, and named as outputs the model does not return.
        live = _live_names(graph, self.user_outputs)
        self.nodes: list[fx.Node] = [n for n in graph.nodes if _is_reducible(n) and n.name in live
                                     and not (fixed_random and fed_from_eager(n))]
        dead = [n for n in graph.nodes if _is_reducible(n) and n.name not in live]
        self.dead = [n for n in dead if n.target is not operator.getitem]  # an unused getitem is no code of the user's
        # what trtmin before 79784f4 kept (a dead value some node reads): a journal of then
        # numbers the nodes otherwise (the run header's dead_values_cut)
        self.dead_values_cut = sum(1 for n in dead if n.users and not (fixed_random and fed_from_eager(n)))
        self.index = {n.name: i for i, n in enumerate(self.nodes)}
        self._symbolic_sizes = {i for i, n in enumerate(self.nodes) if is_symbolic_size(n.meta.get("val"))}
        # users restricted to reducible nodes, for sink computation
        self._users = {n.name: [self.index[u.name] for u in n.users if u.name in self.index] for n in self.nodes}

    # ---- eager intermediates -------------------------------------------------------
    def _capture(self, ep: ExportedProgram, user_inputs: Sequence[Any]) -> dict[str, Any]:
        args = [a.detach() if isinstance(a, torch.Tensor) else a for a in lifted_args(ep, user_inputs)]
        interp = fx.Interpreter(ep.graph_module, garbage_collect_values=False)
        torch.manual_seed(0)  # the same random draws in every run of trtmin: --resume replays verdicts on them
        with torch.no_grad():
            try:
                interp.run(*args)
            except Exception as e:
                raise TrtminError(f"eager PyTorch fails on this program ({type(e).__name__}: {first_line(e)}); "
                                  "trtmin needs a program that runs in eager mode to compare against") from None
        return {n.name: v for n, v in interp.env.items() if n.op in ("placeholder", "call_function")}

    # ---- slicing ---------------------------------------------------------------------
    def all_kept(self) -> tuple[int, ...]:
        return tuple(range(len(self.nodes)))

    def normalize(self, kept: Iterable[int]) -> tuple[int, ...]:
        """Canonical form: sorted; a symbolic size a kept node reads (sym_size of a dynamic
        dim, or arithmetic on one) is kept too, and a getitem whose source is cut is cut. Fed
        in as a number, such a size pins the dim it stands for (the export specializes a dim
        the ops fix): the candidate would be a static program with dynamic marks, which
        reduced.pt2 cannot hold, where the user's failed with a dynamic size."""
        keep = set(kept)
        if self._symbolic_sizes:
            stack = list(keep)
            while stack:
                for dep in self.nodes[stack.pop()].all_input_nodes:
                    j = self.index.get(dep.name)
                    if j in self._symbolic_sizes and j not in keep:
                        keep.add(j)
                        stack.append(j)
        for i in sorted(keep):
            n = self.nodes[i]
            if n.target is operator.getitem and isinstance(n.args[0], fx.Node):
                src = self.index.get(n.args[0].name)
                if src is None or src not in keep:
                    keep.discard(i)
        return tuple(sorted(keep))

    def outputs_of(self, kept: Sequence[int]) -> list[int]:
        """The slice's outputs, in the order it returns them: the model's own outputs in the
        model's order ("output 0" means what it means to the user), then the values only
        the cut nodes read, in graph order."""
        keep = set(kept)
        sinks = [i for i in kept
                 if not any(u in keep for u in self._users[self.nodes[i].name])
                 or self.nodes[i].name in self.user_outputs]
        return sorted(sinks, key=lambda i: self._output_rank.get(self.nodes[i].name, len(self._output_rank)))

    def materialize(self, kept: Sequence[int], mark_all: bool = False,
                    replaced: Mapping[str, Any] | None = None, sizes: Mapping[int, int] | None = None) -> Slice:
        """The runnable slice of `kept`. mark_all: every kept node with a tensor value
        is an output too, in topological order (for localization, minimize/search/localize.py).
        replaced: weights to use in place of the program's (minimize/search/passes/values.py).
        sizes: numbers to write in place of others in the nodes' size arguments
        (minimize/search/passes/shapes.py)."""
        kept = self.normalize(kept)
        if not kept:
            raise ValueError("empty candidate")
        keep_names = {self.nodes[i].name for i in kept}
        graph = fx.Graph()
        env: dict[str, fx.Node] = {}
        inputs: list[str] = []
        constants: list[str] = []
        externals = [dep for i in kept for dep in self.nodes[i].all_input_nodes if dep.name not in keep_names]
        # Placeholders first, in order of first use, so the signature is deterministic.
        for dep in externals:
            if dep.name not in env and dep.name not in self.constants:
                env[dep.name] = graph.placeholder(dep.name)
                env[dep.name].meta["val"] = dep.meta.get("val")
                inputs.append(dep.name)
        for dep in externals:
            if dep.name not in env:
                env[dep.name] = graph.get_attr(self.attributes.get(dep.name, dep.name))
                env[dep.name].meta["val"] = dep.meta.get("val")
                constants.append(dep.name)
        for i in kept:
            n = self.nodes[i]
            env[n.name] = graph.node_copy(n, lambda a: env[a.name])
            if sizes:
                env[n.name].args, env[n.name].kwargs = resized_arguments(env[n.name], sizes)
        sinks = self.outputs_of(kept)
        if mark_all:  # in graph order: localization maps each output back to its node by name
            outs = [self.nodes[i].name for i in kept
                    if i in sinks or isinstance(self.values.get(self.nodes[i].name), torch.Tensor)]
        else:
            outs = [self.nodes[i].name for i in sinks]
        graph.output(tuple(value for o in outs for value in self._returned(graph, env[o], o)))
        root = torch.nn.Module()
        for name in constants:
            root.register_buffer(self.attributes.get(name, name), (replaced or {}).get(name, self.values[name]))
        gm = fx.GraphModule(root, graph)
        return Slice(gm, inputs, outs, constants, {n: self.attributes[n] for n in constants if n in self.attributes})

    def call_nodes_of(self, kept: Sequence[int]) -> int:
        """The call nodes of the slice of `kept` (normalized), as its graph counts them
        (Slice.call_nodes), without building it: each kept node, and a getitem for each value
        of an op of several values that it returns (_returned)."""
        return len(kept) + sum(len(self._items_returned(self.nodes[i]) or ()) for i in self.outputs_of(kept))

    def _items_returned(self, node: fx.Node) -> list[int] | None:
        """Which values of an op of several values a slice returning it returns, by a getitem
        each (_returned): those the program reads (median.dim's values, not its unused
        indices: counted, "2 -> 3 call nodes"; and compared, for nothing), else all; None
        for any other node, returned as it is."""
        value = self.values.get(node.name)
        if node.target is operator.getitem or not isinstance(value, (tuple, list)):
            return None
        read = sorted({u.args[1] for u in node.users if u.target is operator.getitem and u.name in self.index
                       and isinstance(u.args[1], int)})
        return read or list(range(len(value)))

    def _returned(self, graph: fx.Graph, node: fx.Node, name: str) -> list[fx.Node]:
        """What a slice returns of an output node: the node, or, for an op of several
        values (max.dim, batch norm's) whose getitems were cut, each value the program reads
        by getitem. The tuple itself would be one nested output: repro.py's eager half
        returned 1 output against the compiler's 2, said REPRODUCED for that, and its eager
        control failed."""
        original = self.nodes[self.index[name]]  # node is the slice's copy
        indices = self._items_returned(original)
        if indices is None:
            return [node]
        value, val = self.values[original.name], node.meta.get("val")
        items = []
        for k in indices:
            item = graph.call_function(operator.getitem, (node, k))
            item.meta["val"] = val[k] if isinstance(val, (tuple, list)) and k < len(val) else value[k]
            items.append(item)
        return items

    def whole_outputs(self) -> list[str]:
        """The names of the nodes the whole program's slice returns, in its order."""
        return [self.nodes[i].name for i in self.outputs_of(self.normalize(self.all_kept()))]

    def cone(self, sink: int, within: Iterable[int] | None = None) -> tuple[int, ...]:
        """The nodes of `within` (default: all) that node `sink` depends on, itself included."""
        keep = set(range(len(self.nodes)) if within is None else within)
        seen, stack = {sink}, [sink]
        while stack:
            for dep in self.nodes[stack.pop()].all_input_nodes:
                i = self.index.get(dep.name)
                if i is not None and i in keep and i not in seen:
                    seen.add(i)
                    stack.append(i)
        return self.normalize(seen)

    def output_reads_draws(self, output: int) -> bool:
        """Whether the whole program's flattened output `output` depends on a random draw or
        uninitialized memory (random_draws) that is compiled, not fed in (--oracle crash):
        its value differs between eager and a compiler by chance."""
        leaves = self.leaf_nodes(self.whole_outputs())
        if not 0 <= output < len(leaves):
            return bool(self.random_draws)
        compiled = {self.index[n.name] for n in self.random_draws if n.name in self.index}
        return not compiled.isdisjoint(self.cone(leaves[output]))

    def off_by_chance(self, kind: str, output: int | None) -> bool:
        """Whether a verdict of this kind on this output (a mismatch or NaN of the whole
        program, the random draws compiled as they are) says nothing: its value reads a draw."""
        return kind in ("mismatch", "nan") and not self.fixed_random and output is not None \
            and self.output_reads_draws(output)

    def leaf_nodes(self, output_names: Sequence[str]) -> list[int]:
        """The node each flattened output comes from, for outputs that are these nodes'
        values (a node may return several tensors: those _returned returns), in the order
        outputs are compared."""
        def count(name: str) -> int:
            items = self._items_returned(self.nodes[self.index[name]])
            return len(flatten_outputs(self.values[name])) if items is None else len(items)
        return [self.index[name] for name in output_names for _ in range(count(name))]

    def inputs_for(self, s: Slice, replaced: Mapping[str, Any] | None = None) -> list[Any]:
        """The slice's input values. A cut value is fed with row-major strides, as repro.py
        makes it, not with the strides eager gave it: Torch-TensorRT refuses a view's
        outright ("Tensor does not have a supported memory format"), ExecuTorch fails on
        nonzero's (3, 1) of strides (1, 3) ("different dim orders"), each a crash that is
        not the bug and that repro.py cannot show. The model's own inputs stay as the user
        gave them, layout too (repro.py keeps it: a channels_last input may be the bug)."""
        own = self._placeholder_names
        values = [(replaced or {}).get(name, self.values[name]) for name in s.input_names]
        return [row_major(v) if name not in own and isinstance(v, torch.Tensor) else v
                for name, v in zip(s.input_names, values)]

    def values_as_fed(self, s: Slice, replaced: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """Every value by node name as the slice's run saw it, for repro.py to write: the
        `replaced` ones in place of the program's, and the slice's inputs as inputs_for feeds
        them (a cut value row-major, not with eager's strides)."""
        return {**self.values, **(replaced or {}), **dict(zip(s.input_names, self.inputs_for(s, replaced)))}

    def module_path(self, i: int) -> tuple[str, ...]:
        """The nn.Module nesting of node i (outermost first), for coarse passes."""
        stack = self.nodes[i].meta.get("nn_module_stack") or {}
        return tuple(path for path, _ in stack.values() if path)


# The arguments that hold a tensor's size, by their name in the op's schema: view's and
# expand's size, reshape's shape, layer_norm's normalized_shape, full's and zeros' size. Not
# every int list: permute's and sum's dims are positions, not sizes.
SIZE_ARGUMENTS = frozenset({"size", "shape", "normalized_shape"})


def size_arguments(node: fx.Node) -> list[tuple[int | str, list[Any]]]:
    """The node's size arguments, as (position or keyword, value)."""
    schema = getattr(node.target, "_schema", None)
    if schema is None:
        return []
    found: list[tuple[int | str, list[Any]]] = []
    for i, arg in enumerate(schema.arguments):
        if arg.name not in SIZE_ARGUMENTS or str(arg.type) not in ("List[int]", "List[SymInt]"):
            continue
        if not arg.kwarg_only and i < len(node.args) and isinstance(node.args[i], (list, tuple)):
            found.append((i, list(node.args[i])))
        elif isinstance(node.kwargs.get(arg.name), (list, tuple)):
            found.append((arg.name, list(node.kwargs[arg.name])))
    return found


def resized_arguments(node: fx.Node, sizes: Mapping[int, int]) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """The node's args and kwargs with each number of its size arguments in `sizes` replaced."""
    args, kwargs = list(node.args), dict(node.kwargs)
    for where, value in size_arguments(node):
        new = [sizes.get(x, x) if type(x) is int else x for x in value]
        if isinstance(where, int):
            args[where] = new
        else:
            kwargs[where] = new
    return tuple(args), kwargs


def weight_attributes(ep: ExportedProgram, constants: set[str]) -> dict[str, str]:
    """{weight: the attribute a slice reads it from}: its name in the user's module (the
    state dict's `0.weight`, dots as underscores, as ExecuTorch writes its own), not the
    placeholder's (`p_0_weight`). Compilers may depend on it: ExecuTorch 1.4's XNNPACK
    BatchNorm fusion fails on a weight whose name starts with a digit, a top-level
    nn.Sequential's. Export's name stays where that one is taken twice, by a node, by
    fx.GraphModule itself (`training`, `graph`, `code`), or is a keyword (`lambda`)."""
    wanted = {s.arg.name: s.target.replace(".", "_") for s in ep.graph_signature.input_specs
              if s.arg.name in constants and s.target}
    counts: dict[str, int] = {}
    for attribute in wanted.values():
        counts[attribute] = counts.get(attribute, 0) + 1
    nodes, module = {n.name for n in ep.graph.nodes}, fx.GraphModule(torch.nn.Module(), fx.Graph())
    return {name: attribute for name, attribute in wanted.items() if attribute != name and counts[attribute] == 1
            and attribute not in nodes and not hasattr(module, attribute) and not keyword.iskeyword(attribute)}


def lifted_args(ep: ExportedProgram, user_inputs: Sequence[Any]) -> list[Any]:
    """Placeholder values for ep.graph_module: parameters, buffers, constants, user inputs."""
    user = iter(user_inputs)
    args = []
    for spec in ep.graph_signature.input_specs:
        if spec.kind == InputKind.USER_INPUT:
            args.append(next(user))
        elif spec.kind in (InputKind.PARAMETER, InputKind.BUFFER):
            args.append(ep.state_dict[spec.target] if spec.target in ep.state_dict else ep.constants[spec.target])
        elif spec.kind == InputKind.CONSTANT_TENSOR:
            args.append(ep.constants[spec.target])
        elif spec.kind == InputKind.TOKEN:  # made by functionalizing an effectful op: name it, not the token
            effects = sorted({str(n.args[1]) for n in ep.graph.nodes if n.op == "call_function"
                              and n.target is torch.ops.higher_order.with_effects and len(n.args) > 1})
            raise TrtminError(f"the program calls {', '.join(effects) or 'an op'} for its side effect (a print, a "
                              "custom op's), which torch.export threads through a token trtmin cannot feed yet; "
                              "export the model without that call")
        else:
            raise TrtminError(f"input {spec.arg.name} is a {spec.kind.name}, which trtmin cannot feed yet; "
                              "export the model without custom objects")
    return args


class _Add(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + 1


class _Mul(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * 2


ONE_OP_PROGRAMS = {"x + 1": _Add, "x * 2": _Mul}  # two: a bug of add's own fails on x + 1 alone


def one_op_candidate(device: str, which: str = "x + 1") -> tuple[fx.GraphModule, list[Any]]:
    """One of the smallest programs (ONE_OP_PROGRAMS) on a 2x2 tensor, as a backend gets a
    candidate: the controls that tell a plugin's or a command's own mistake (it fails on any
    program) from a compiler's bug (Session.setup_problem)."""
    x = torch.ones(2, 2, device=device)
    program = Program(torch.export.export(ONE_OP_PROGRAMS[which](), (x,)).run_decompositions({}), [x], device=device)
    piece = program.materialize(program.all_kept())
    return piece.gm, program.inputs_for(piece)
