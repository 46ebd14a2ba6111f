"""The model file and the inputs file, read without torch: a file that is no .pt2, or inputs
of a wrong shape or dtype, are refused in a fraction of a second, before torch's import
(3 s here) and any worker.

Both files are zip archives: the .pt2 holds the exported program as JSON
(`models/model.json`: the user inputs' names, sizes and dtypes, and the pytree spec its
call's (args, kwargs) flatten by, so a batch dict is checked too), torch.save's file a
pickle whose tensors are rebuilt by `torch._utils._rebuild_tensor_v2` from a typed
storage. Anything either reader does not know (another archive version, a namedtuple or
dataclass in the spec, a tensor subclass) is left to the full check
(minimize/program/inputs.py), which says the same words: this one only answers early where
it is sure.
"""

from __future__ import annotations

import difflib
import json
import pickle
import re
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

from oracles.errors import TrtminError, kind_of

# torch/_export/serde/schema.py ScalarType -> torch's dtype name
_SCHEMA_DTYPES = {1: "uint8", 2: "int8", 3: "int16", 4: "int32", 5: "int64", 6: "float16", 7: "float32",
                  8: "float64", 9: "complex32", 10: "complex64", 11: "complex128", 12: "bool", 13: "bfloat16"}
# torch.save's typed storage classes -> dtype name
_STORAGE_DTYPES = {"ByteStorage": "uint8", "CharStorage": "int8", "ShortStorage": "int16", "IntStorage": "int32",
                   "LongStorage": "int64", "HalfStorage": "float16", "FloatStorage": "float32",
                   "DoubleStorage": "float64", "BoolStorage": "bool", "BFloat16Storage": "bfloat16",
                   "ComplexFloatStorage": "complex64", "ComplexDoubleStorage": "complex128"}


_SYMBOL = re.compile(r"^Symbol\('(\w+)'")  # a dim that is a Dim itself ("Symbol('s28', positive=True, ...)")


@dataclass(frozen=True)
class TensorShape:
    """A tensor as a file describes it: its sizes (None: a dynamic dim) and dtype name; a
    program's input, the symbol of each dim that is a torch.export.Dim itself (None: static,
    or an expression of one, which the torch check reads)."""
    sizes: tuple[int | None, ...]
    dtype: str | None
    dims: tuple[str | None, ...] = field(default=(), compare=False)  # the program's side alone


def _model_json(pt2: Path) -> dict[str, Any] | None:
    """The archive's serialized program (models/model.json), or None."""
    try:
        with zipfile.ZipFile(pt2) as z:
            names = [n for n in z.namelist() if n.endswith("/models/model.json")]
            if len(names) != 1:
                return None
            data = json.loads(z.read(names[0]))
            return data if isinstance(data, dict) else None
    except (OSError, KeyError, TypeError, ValueError, zipfile.BadZipFile):
        return None


def _graph_module(pt2: Path) -> dict[str, Any] | None:
    """The archive's serialized graph module, or None."""
    graph_module = (_model_json(pt2) or {}).get("graph_module")
    return graph_module if isinstance(graph_module, dict) else None


def saved_with_torch(pt2: Path) -> str | None:
    """The torch release that saved the archive (model.json's torch_version), or None."""
    version = (_model_json(pt2) or {}).get("torch_version")
    return version if isinstance(version, str) and version else None


def program_inputs(pt2: Path, graph_module: dict[str, Any] | None = None) -> list[tuple[str, TensorShape | None]] | None:
    """The program's user inputs in order (None for one that is not a tensor), or None
    where the archive is not one this reader knows."""
    graph_module = graph_module or _graph_module(pt2)
    if graph_module is None:
        return None
    try:
        tensors = graph_module["graph"]["tensor_values"]
        found: list[tuple[str, TensorShape | None]] = []
        for spec in graph_module["signature"]["input_specs"]:
            if "constant_input" in spec:  # a None or a number given to export: an input the full check counts
                found.append((spec["constant_input"].get("name", ""), None))
                continue
            if "user_input" not in spec:
                continue
            arg = spec["user_input"]["arg"]
            if "as_tensor" not in arg:  # an int, a float...: the full check reads it
                found.append(("", None))
                continue
            name = arg["as_tensor"]["name"]
            meta = tensors[name]
            sizes = tuple(s["as_int"] if "as_int" in s else None for s in meta["sizes"])
            dims = tuple(m.group(1) if (m := _SYMBOL.match(str(s.get("as_expr", {}).get("expr_str", "")))) else None
                         for s in meta["sizes"])
            found.append((name, TensorShape(sizes, _SCHEMA_DTYPES.get(meta["dtype"]), dims)))
        return found
    except (KeyError, TypeError, ValueError, AttributeError, StopIteration):
        return None


def _root_signature(graph_module: dict[str, Any]) -> dict[str, Any]:
    """The serialized call signature of the program's root module (fqn ""); KeyError,
    TypeError or StopIteration where the archive holds none."""
    return next(m for m in graph_module["module_call_graph"] if m["fqn"] == "")["signature"]


def program_arg_names(graph_module: dict[str, Any]) -> list[str]:
    """forward's parameter names, as torch.export serialized them (forward_arg_names), or []."""
    try:
        return [str(n) for n in _root_signature(graph_module).get("forward_arg_names") or ()]
    except (KeyError, TypeError, AttributeError, StopIteration):
        return []


def program_call_spec(graph_module: dict[str, Any]) -> dict[str, Any] | None:
    """How the program's call arguments (args, kwargs) flatten to its inputs: the pytree
    TreeSpec torch.export serialized as JSON (format 1), or None."""
    try:
        version, spec = json.loads(_root_signature(graph_module)["in_spec"])
        return spec if version == 1 else None
    except (KeyError, TypeError, ValueError, StopIteration):
        return None


_SEQUENCES = {"builtins.tuple": tuple, "builtins.list": list}
_DICTS = ("builtins.dict", "collections.OrderedDict", "collections.defaultdict")


def flatten_serialized_up_to(spec: dict[str, Any], tree: Any) -> list[Any]:
    """torch.utils._pytree's TreeSpec.flatten_up_to on the serialized spec, for the builtin
    containers: ValueError where `tree` has another structure, UnknownToReader where the spec
    holds a type this reader does not know (a namedtuple, a dataclass). A list stands for a
    tuple and a tuple for a list (as any dict for another): the model indexes either alike."""
    try:
        kind, children = spec["type"], spec["children_spec"]
    except (KeyError, TypeError):  # a spec of another shape: unknown, not another structure
        raise UnknownToReader(repr(spec)[:80]) from None
    if kind is None:
        return [tree]
    if kind in _SEQUENCES:
        if not isinstance(tree, (tuple, list)) or len(tree) != len(children):
            raise ValueError(kind)
        items = list(tree)
    elif kind in _DICTS:  # any two of these match each other, by their keys
        try:
            keys = json.loads(spec["context"])
        except (KeyError, TypeError, ValueError):
            raise UnknownToReader(repr(spec)[:80]) from None
        if not isinstance(tree, dict) or len(tree) != len(keys) or set(tree) != set(keys):
            raise ValueError(kind)
        items = [tree[k] for k in keys]
    else:
        raise UnknownToReader(str(kind))
    return [leaf for child, item in zip(children, items) for leaf in flatten_serialized_up_to(child, item)]


def flatten_like_export(loaded: Any, count: int, flatten: Callable[[tuple[Any, Any]], list[Any]] | None,
                        leaf: type, names: Sequence[str] = (), arg_names: Sequence[str] = ()) -> list[Any] | None:
    """The user inputs an inputs file holds, in the program's order, or None where it holds
    none of the forms: the inputs flat (what earlier versions asked for), or the call's
    arguments, which `flatten` (the program's input spec, flatten_up_to on (args, kwargs))
    flattens. `leaf`: a lone value of that type stands for the tuple of it. Shared by the
    full check (torch's spec, torch.Tensor) and the early one (the serialized spec, TensorShape).
    `names`: the program's inputs; a dict of exactly those, of values, holds them by name.
    `arg_names`: forward's parameters (forward_arg_names); a dict of exactly those holds the
    arguments by name, as a call would pass them ({"batch": batch} for forward(batch))."""
    if isinstance(loaded, leaf):
        loaded = (loaded,)
    if isinstance(loaded, dict) and names and set(loaded) == set(names) and not any(map(is_container,
                                                                                      loaded.values())):
        return [loaded[name] for name in names]
    if isinstance(loaded, (tuple, list)) and len(loaded) == count and not any(map(is_container, loaded)):
        return list(loaded)
    if flatten is None:
        return None
    calls: list[tuple[Any, Any]] = []
    if isinstance(loaded, (tuple, list)):
        if len(loaded) == 2 and isinstance(loaded[0], (tuple, list)) and isinstance(loaded[1], dict):
            calls.append((tuple(loaded[0]), loaded[1]))  # (args, kwargs)
        calls.append((tuple(loaded), {}))
    elif isinstance(loaded, dict):
        calls += [((), loaded), ((loaded,), {})]  # the kwargs, or the one argument (a batch dict)
        if arg_names and set(loaded) == set(arg_names):  # by parameter name: the first k positional, the rest kwargs
            calls += [(tuple(loaded[n] for n in arg_names[:k]), {n: loaded[n] for n in arg_names[k:]})
                      for k in range(len(arg_names), -1, -1)]
    for call in calls:
        try:
            leaves = flatten(call)
        except (ValueError, TypeError, KeyError):  # another structure: try the next form
            continue
        if len(leaves) == count and not any(map(is_container, leaves)):  # a leaf the spec has is a value
            return list(leaves)
    return None


class _Storage:
    def __init__(self, dtype: str | None) -> None:
        self.dtype = dtype


class UnknownToReader(Exception):
    """What this reader does not rebuild: a global in the pickle, a container in the spec."""


class _ShapeUnpickler(pickle.Unpickler):
    """Rebuilds torch.save's tensors as TensorShapes; refuses every other global."""

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) == ("torch._utils", "_rebuild_tensor_v2"):
            return lambda storage, offset, size, *rest: TensorShape(tuple(size), storage.dtype)
        if (module, name) == ("collections", "OrderedDict"):
            return dict
        if module == "torch" and name in _STORAGE_DTYPES:
            return name
        raise UnknownToReader(f"{module}.{name}")

    def persistent_load(self, pid: Any) -> Any:
        if isinstance(pid, tuple) and len(pid) >= 2 and pid[0] == "storage":
            return _Storage(_STORAGE_DTYPES.get(pid[1]) if isinstance(pid[1], str) else None)
        raise UnknownToReader(repr(pid))


def saved_inputs(path: Path) -> Any | None:
    """What torch.save wrote to `path`, tensors as TensorShapes, or None where this reader
    cannot tell. numpy arrays, which torch.load(weights_only=True) refuses, are refused here
    in its words (they took 4 s, after torch's import)."""
    try:
        with zipfile.ZipFile(path) as z:
            names = [n for n in z.namelist() if n.endswith("/data.pkl")]
            if len(names) != 1:
                return None
            return _ShapeUnpickler(z.open(names[0])).load()
    except UnknownToReader as e:
        if str(e).startswith("numpy"):
            raise unloadable_inputs_error(path, str(e)) from None
        return None
    except Exception:  # noqa: BLE001 - any surprise: the full check, with torch, decides
        return None


def unloadable_inputs_error(path: Path, global_name: str) -> TrtminError:
    """An inputs file holding an object torch.load(weights_only=True) does not make (its
    pickle's global `global_name`): which, and what to do."""
    what, fix = (("numpy arrays", "convert them with torch.from_numpy") if global_name.startswith("numpy") else
                 (f"an object that needs {global_name}", "keep only tensors, numbers and tuples, lists or dicts of them"))
    return TrtminError(f"inputs file {path} holds {what}, which torch.load(weights_only=True) does not load; "
                       f"{fix}, then save the arguments again with torch.save")


def _plain(loaded: Any) -> list[TensorShape] | None:
    """The tensors where the file holds them in the plain forms: the tensors flat, or
    (args, {}) of tensors alone. Other forms go to the full check."""
    if isinstance(loaded, TensorShape):
        loaded = (loaded,)
    if (isinstance(loaded, (tuple, list)) and len(loaded) == 2 and isinstance(loaded[0], (tuple, list))
            and loaded[1] == {}):
        loaded = loaded[0]
    if isinstance(loaded, (tuple, list)) and all(isinstance(x, TensorShape) for x in loaded):
        return list(loaded)
    return None


def is_container(x: Any) -> bool:
    return isinstance(x, (tuple, list, dict))


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def describe(x: Any, top: bool = True) -> str:
    """A short picture of an inputs file's structure for an error: '2 inputs', 'args of 1
    input and no kwargs', 'a tuple of 1 (a dict of 2 ('a', 'b'))'."""
    if isinstance(x, dict):
        return f"a dict of {len(x)} ({', '.join(repr(k) for k in list(x)[:4])}{', ...' if len(x) > 4 else ''})"
    if not isinstance(x, (tuple, list)):
        return "a Tensor" if isinstance(x, TensorShape) else kind_of(x)  # read here without torch
    if top and len(x) == 2 and isinstance(x[0], (tuple, list)) and isinstance(x[1], dict):  # (args, kwargs)
        kwargs = _count(len(x[1]), "kwarg") if x[1] else "no kwargs"
        return f"args of {describe(x[0]) if x[0] else 'no input'} and {kwargs}"
    if not any(map(is_container, x)):
        return _count(len(x), "input") if top else f"a {type(x).__name__} of {len(x)}"
    inner = "; ".join(describe(v, top=False) for v in x[:3]) + ("; ..." if len(x) > 3 else "")
    return f"a {type(x).__name__} of {len(x)} ({inner})"


def _leaf_count(tree: Any) -> int:
    if isinstance(tree, dict):
        return sum(map(_leaf_count, tree.values()))
    return sum(map(_leaf_count, tree)) if isinstance(tree, (tuple, list)) else 1


def _spec_leaf_count(spec: dict[str, Any]) -> int:
    children = spec.get("children_spec") or []
    return sum(map(_spec_leaf_count, children)) if spec.get("type") else 1


def _spec_words(spec: dict[str, Any]) -> str:
    """One argument of a serialized pytree spec, as the program takes it: 'a dict of
    'image', 'state'', 'a tuple of 2', 'a tensor'."""
    kind, children = spec.get("type"), spec.get("children_spec") or []
    if kind in _DICTS:
        try:
            return f"a dict of {', '.join(map(repr, json.loads(spec['context'])))}"
        except (KeyError, TypeError, ValueError):
            return "a dict"
    if kind in _SEQUENCES:
        return f"a {kind.split('.')[-1]} of {len(children)}"
    return "a tensor" if not kind else f"a {kind.split('.')[-1]}"


def wrong_inputs_error(path: Path, loaded: Any, names: list[str], spec: dict[str, Any] | None = None) -> TrtminError:
    """The error for an inputs file whose structure or count is not the program's inputs;
    with the program's call spec (serialized, as program_call_spec reads it), where the
    file's arguments first depart from it: a key it does not take, one it lacks, a count."""
    where = call_difference(spec, loaded) if spec else None
    if where:
        return TrtminError(f"inputs file {path}: {where}; save the arguments as given to torch.export.export "
                           "(a tuple, or (args, kwargs))")
    return TrtminError(f"inputs file {path} holds {describe(loaded)} but the program takes "
                       f"{_count(len(names), 'input')} ({', '.join(names)}); save the arguments as given to "
                       "torch.export.export (a tuple, or (args, kwargs)), or these inputs in this order")


def call_difference(spec: dict[str, Any], loaded: Any) -> str | None:
    """Where saved arguments, (args, kwargs) or args alone, first depart from the program's
    call spec, in words; None where no such difference is found."""
    try:
        args_spec, kwargs_spec = spec["children_spec"]
        keywords = json.loads(kwargs_spec["context"]) if kwargs_spec.get("context") else []
    except (KeyError, TypeError, ValueError):
        return None
    if not isinstance(loaded, (tuple, list)):
        return None
    if len(loaded) == 2 and isinstance(loaded[0], (tuple, list)) and isinstance(loaded[1], dict):
        args, kwargs = loaded
        strays = [k for k in kwargs if k not in keywords]
        if strays and len(args) < len(args_spec.get("children_spec") or []):
            return (f"args holds {len(args)} and the program takes {len(args_spec['children_spec'])}, and kwargs "
                    f"has {strays[0]!r}, which it does not take by keyword: it was exported as a positional argument; put "
                    "it in args, in its place")
        return structure_difference(args_spec, args, "args") or structure_difference(kwargs_spec, kwargs, "kwargs")
    if keywords:
        return (f"it holds {describe(loaded)}, the args alone, and the program also takes keyword arguments "
                f"({', '.join(map(str, keywords))})")
    return structure_difference(args_spec, loaded, "args")


def structure_difference(spec: dict[str, Any], tree: Any, where: str) -> str | None:
    """The first place `tree` departs from a serialized pytree spec (builtin containers) in
    its keys or its kinds of container, named by its path (args[0]['image']); None where it
    does not, where a count differs and the flat count too (the caller's words say it), or
    the spec is unknown; a count that differs where the flat count agrees is said here."""
    kind, children = spec.get("type"), spec.get("children_spec") or []
    if kind in _SEQUENCES:
        if not isinstance(tree, (tuple, list)):
            return f"{where} is {describe(tree, top=False)}, and the program takes a {kind.split('.')[-1]}"
        if len(tree) != len(children):  # a count: wrong_inputs_error's own words name the inputs, unless
            if _leaf_count(tree) != _spec_leaf_count(spec):  # the flat count agrees (tensors grouped otherwise)
                return None
            return (f"{where} holds {len(tree)} and the program takes {len(children)}: "
                    + ", ".join(_spec_words(c) for c in children))
        return next((d for i, (c, t) in enumerate(zip(children, tree))
                     if (d := structure_difference(c, t, f"{where}[{i}]"))), None)
    if kind in _DICTS:
        try:
            keys = json.loads(spec["context"])
        except (KeyError, TypeError, ValueError):
            return None
        if not isinstance(tree, dict):
            return f"{where} is {describe(tree, top=False)}, and the program takes a dict of {', '.join(map(repr, keys))}"
        strays, lacking = [k for k in tree if k not in keys], [k for k in keys if k not in tree]
        if strays:  # a near name only among those not given: one given already is no typo of it
            near = difflib.get_close_matches(str(strays[0]), [str(k) for k in lacking], n=1)
            dropped = "; an argument left out of torch.export.export is fixed in the program, no input" \
                if where == "kwargs" else ""
            return (f"{where} has {strays[0]!r}, which the program does not take "
                    + (f"(did you mean {near[0]!r}?{dropped})" if near
                       else f"(it takes {', '.join(map(repr, keys)) or 'none'}{dropped})"))
        if lacking:
            return f"{where} lacks {lacking[0]!r}, which the program takes"
        return next((d for k, c in zip(keys, children) if (d := structure_difference(c, tree[k], f"{where}[{k!r}]"))),
                    None)
    return None


def input_places(spec: dict[str, Any] | None) -> list[str]:
    """Each program input's place in the call's arguments as the user wrote them
    ("args[0]['observation.image']", "kwargs['state']"), in the program's order, from its
    serialized call spec; [] where the spec is unknown."""
    def places(node: dict[str, Any], where: str) -> list[str]:
        kind, children = node.get("type"), node.get("children_spec") or []
        if kind is None:
            return [where]
        keys = json.loads(node["context"]) if kind in _DICTS else range(len(children)) if kind in _SEQUENCES else None
        if keys is None:
            raise UnknownToReader(str(kind))
        return [p for k, child in zip(keys, children) for p in places(child, f"{where}[{k!r}]")]
    try:
        args_spec, kwargs_spec = spec["children_spec"] if spec else ()
        return places(args_spec, "args") + places(kwargs_spec, "kwargs")
    except (KeyError, TypeError, ValueError, UnknownToReader):
        return []


def input_words(name: str, places: list[str], index: int) -> str:
    """An input as the user knows it: its key in a dict of the arguments (the program's flat
    name, batch_observation_image, is not what they wrote), else the program's name."""
    place = places[index] if index < len(places) else ""
    return f"input {place}" if "['" in place else f"input {name!r}"


def wrong_dtype_error(path: Path, input: str, got: str, want: str) -> TrtminError:
    """One input (`input_words`) of another dtype (`got`, `want`: 'torch.float32')."""
    return TrtminError(f"{input} in {path} is {got}, the program expects {want}; convert it with .to({want})")


def wrong_shape_error(path: Path, input: str, got: tuple[int, ...], want: tuple[int | None, ...]) -> TrtminError:
    """One input (`input_words`) of another shape; `want` has None where the program's size is dynamic."""
    shape = "(" + ", ".join("?" if w is None else str(w) for w in want) + ("," if len(want) == 1 else "") + ")"
    return TrtminError(f"{input} in {path} has shape {tuple(got)}, the program expects {shape}; save inputs of the "
                       "shape it was exported with, or export again with dynamic_shapes for the sizes that vary")


def outside_range_error(path: Path, which: str, size: int, dim: int, low: int, high: int | None) -> TrtminError:
    """A dynamic dim's size outside the range its Dim was exported with (None: no upper end)."""
    return TrtminError(f"{which} in {path} has size {size} in dim {dim}, outside the range the program was exported "
                       f"for ({low} to {'any' if high is None else high}); pass a size in that range, or export again "
                       "with a wider torch.export.Dim")


def unequal_sizes_error(path: Path, which: str, size: int, dim: int, first: tuple[str, int, int]) -> TrtminError:
    """Two sizes for one Dim two inputs share; `first`: (input_words, dim, size) of the first."""
    return TrtminError(f"{which} in {path} has size {size} in dim {dim}, and {first[0].removeprefix('input ')} size "
                       f"{first[2]} in dim {first[1]}: the program was exported with one size for both (the same "
                       "torch.export.Dim); pass equal sizes")


def _dim_ranges(program: dict[str, Any]) -> dict[str, tuple[int, int | None]]:
    """Each Dim symbol's exported range (None: no upper end), from model.json's
    range_constraints; empty where unread."""
    ranges = {}
    constraints = program.get("range_constraints")
    for symbol, bounds in (constraints.items() if isinstance(constraints, dict) else ()):
        low, high = (bounds.get("min_val"), bounds.get("max_val")) if isinstance(bounds, dict) else (None, None)
        if isinstance(low, int):  # an unbounded end is written otherwise ("int_oo", a float)
            ranges[symbol] = (low, high if isinstance(high, int) and high < 2 ** 62 else None)
    return ranges


def check_inputs_early(model: Path, inputs: Path) -> None:
    """Refuse inputs of another count, shape or dtype than the program's, in the full check's
    words, where both files can be read without torch; else leave it to that check. A file of
    tensors alone holds the program's inputs flat only if it holds as many: no other form of
    the arguments flattens to more or fewer tensors (minimize/program/inputs.py)."""
    check_inputs_file(inputs)
    program = _model_json(model) or {}
    graph_module = program.get("graph_module") if isinstance(program.get("graph_module"), dict) else None
    wanted = program_inputs(model, graph_module) if graph_module else None
    loaded = saved_inputs(inputs) if wanted else None
    if not wanted or loaded is None:
        return
    names = [name for name, _ in wanted]
    named = all(names)  # an int input has no name here: the full check words it
    call_spec = program_call_spec(graph_module)
    spec = call_spec if isinstance(loaded, (tuple, list, dict)) else None
    flat = _plain(loaded)
    if flat is None:  # a nested form (a batch dict, (args, kwargs) with containers): as the call spec flattens it
        try:
            flat = flatten_like_export(loaded, len(wanted), spec and (lambda call: flatten_serialized_up_to(spec, call)),
                                       TensorShape, names if named else (), program_arg_names(graph_module))
        except UnknownToReader:
            return
        if flat is None:
            if spec and named:  # none of the forms fits: the full check says the same
                raise wrong_inputs_error(inputs, loaded, names, spec)
            return
    if len(flat) != len(wanted):
        if named:
            raise wrong_inputs_error(inputs, loaded, names, spec)
        return
    places, ranges = input_places(call_spec), _dim_ranges(program)
    firsts: dict[str, tuple[str, int, int]] = {}  # a Dim's symbol -> the first input, dim and size given
    for index, ((name, want), got) in enumerate(zip(wanted, flat)):  # in the order inputs.py's load_inputs checks
        if want is None or not isinstance(got, TensorShape):  # a number: the full check reads it
            continue
        which = input_words(name, places, index)
        if want.dtype and got.dtype and want.dtype != got.dtype:
            raise wrong_dtype_error(inputs, which, f"torch.{got.dtype}", f"torch.{want.dtype}")
        if len(got.sizes) != len(want.sizes) or any(w is not None and w != g for w, g in zip(want.sizes, got.sizes)):
            raise wrong_shape_error(inputs, which, got.sizes, want.sizes)
        for dim, (symbol, size) in enumerate(zip(want.dims, got.sizes)):  # as its _check_dynamic_sizes
            if symbol is None:
                continue
            low, high = ranges.get(symbol, (0, None))
            if size < low or (high is not None and size > high):
                raise outside_range_error(inputs, which, size, dim, low, high)
            first = firsts.setdefault(symbol, (which, dim, size))
            if first[2] != size:
                raise unequal_sizes_error(inputs, which, size, dim, first)


def check_model_file(path: Path, inputs: Path | None = None) -> None:
    """The model file's own mistakes, found without torch: missing, a folder, unreadable,
    another format users mistake for a .pt2 (with `inputs`, the two files given the other
    way round), or no zip archive at all."""
    if not path.exists():
        raise TrtminError(f"{path}: no such file; pass the .pt2 written by torch.export.save")
    if path.is_dir():
        raise TrtminError(f"{path} is a folder; pass the .pt2 file written by torch.export.save")
    if not path.is_file():  # a FIFO would block the read below for ever; a device is no archive
        raise TrtminError(f"{path} is not a regular file (a pipe or a device); pass the .pt2 file written by "
                          "torch.export.save")
    try:
        with open(path, "rb") as f:
            f.read(1)
    except OSError as e:
        raise TrtminError(f"{path}: cannot read it ({e.strerror}); check its permissions") from None
    other = _other_format(path)
    if other and other.startswith("a file written by torch.save") and inputs is not None and _is_program(inputs):
        raise TrtminError(f"{path} is a file written by torch.save and --inputs {inputs} a program saved by "
                          f"torch.export.save: the two look swapped; pass {inputs} first, then --inputs {path}")
    if other:
        raise TrtminError(f"{path} is {other}, not a program saved by torch.export.save; trtmin reduces the "
                          "exported program: ep = torch.export.export(model, args), then "
                          "torch.export.save(ep, 'model.pt2')")
    if not zipfile.is_zipfile(path):
        raise TrtminError(f"{path} is not a .pt2 archive (truncated or another format); "
                          "re-save it with torch.export.save(ep, path)")


def _is_program(path: Path) -> bool:
    """Whether `path` is torch.export's archive (an --inputs file that is the model);
    unreadable or not a file: no (its own check says why)."""
    try:
        return path.is_file() and _other_format(path, exported="program") == "program"
    except OSError:
        return False


def check_inputs_file(path: Path) -> None:
    """An inputs file that is a program, not its arguments (the model passed twice, or a
    compiled one), named without torch: torch.load would say "checkpoint corrupted" 8 s later."""
    if path.stat().st_size == 0:
        raise TrtminError(f"--inputs {path} is empty; save the model's arguments into it with torch.save(args, path)")
    other = _other_format(path, exported="a program saved by torch.export.save")
    if other and not other.startswith("a file written by torch.save"):
        raise TrtminError(f"--inputs {path} is {other}, not the model's inputs; pass the file "
                          "torch.save(args, path) wrote of the arguments given to torch.export.export")
    with open(path, "rb") as f:
        head = f.read(512)
    if head.startswith(b"\x80") or zipfile.is_zipfile(path):  # torch.save writes a zip, or a pickle (legacy format)
        return
    if head.startswith(b"PK\x03\x04"):  # its zip, the end gone
        raise TrtminError(f"--inputs {path} is cut short or damaged (a zip archive without its end, as torch.save "
                          "writes them); save the model's arguments again with torch.save(args, path)")
    what = ("a NumPy array (numpy.save)" if head.startswith(b"\x93NUMPY") else
            "text" if all(32 <= b < 127 or b in b"\t\r\n" for b in head) else "of another format")
    raise TrtminError(f"--inputs {path} is {what}, not a file torch.save wrote; save the model's arguments "
                      "with torch.save(args, path), args as given to torch.export.export")


def _other_format(path: Path, exported: str | None = None) -> str | None:
    """What a file that users mistake for a .pt2 is: the compiled program a bug report starts
    from (an ExecuTorch .pte, an engine), or the other archives torch writes. `exported`:
    the words for torch.export's own archive (None: it is no other format, as for --model)."""
    with open(path, "rb") as f:
        head = f.read(8)
    if head[4:6] == b"ET":  # a flatbuffer's file identifier: ExecuTorch's "ET12"
        return "an ExecuTorch program (.pte), already lowered"
    names = {".onnx": "an ONNX model", ".engine": "a TensorRT engine", ".plan": "a TensorRT engine",
             ".trt": "a TensorRT engine"}
    if names.get(path.suffix.lower()):
        return names[path.suffix.lower()]
    if not zipfile.is_zipfile(path):
        return None
    try:
        with zipfile.ZipFile(path) as z:
            files = z.namelist()
    except zipfile.BadZipFile:  # damaged: torch.export.load's error says so
        return None
    if any(f.endswith("/archive_format") or "/models/" in f or f.endswith("serialized_exported_program.json")
           for f in files):
        return exported  # torch.export's own archive, of whatever version: its loader says what is wrong
    if any("/code/" in f for f in files):
        return "a TorchScript archive (torch.jit.save)"
    if any(f.endswith("/data.pkl") for f in files):
        return "a file written by torch.save (a module, a state_dict or tensors)"
    if files and all(f.endswith(".npy") for f in files):
        return "a NumPy archive (numpy.savez)"
    return None
