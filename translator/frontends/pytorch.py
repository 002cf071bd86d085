"""PyTorch → IR: ``torch.export`` → core ATen (the default decompositions) → IR ops.

Sources: a ``torch.nn.Module`` (with ``example_inputs``), a ``torch.export.ExportedProgram``,
a ``.pt2`` file written by ``torch.export.save`` (read with ``torch.export.load``, not
pickle), or a ``pkg.module:factory`` string (the factory is imported and called with no
arguments; it returns the module).

``example_inputs`` (needed for a module): an ``.npz`` path (arrays matched to ``forward``'s
parameters by name when every key is one, else in the file's order), a tuple/list of
tensors or arrays, or a dict by parameter name. ``dynamic_shapes`` is passed to
``torch.export.export``; a ``torch.export.Dim`` becomes a symbolic dimension (its name) in
the IR's input types.

Every ATen op is mapped through the table (``Tables.reverse_index("pytorch")``: the
pytorch cells' ``reads``); the handlers in ``pytorch_ops.py`` translate its arguments into
the IR op's attributes. Parameters, buffers and lifted constants become IR constants.
Inputs keep ``forward``'s parameter names; outputs are ``output`` / ``output_<i>`` (the
module's outputs flattened as ``torch.utils._pytree`` flattens them).
"""
from __future__ import annotations

import os
import re
from typing import Any

import numpy as np

from ..table.errors import FrontendError, OpbridgeError
from ..ir.graph import Graph, Model, TensorType, Value

#: the frontend contract (translator/frontends/__init__.py)
NAME = "pytorch"


def _torch_version() -> str:
    try:
        from importlib.metadata import version

        return version("torch")
    except Exception:  # noqa: BLE001 - not installed
        return "(not installed)"


RUNTIME = f"PyTorch {_torch_version()} eager"

_FACTORY_RE = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")
#: modules made by a factory string, so that load and run_source see the same weights
_MADE: dict[str, Any] = {}


# ---------------------------------------------------------------------------- detection
def _class_names(x: Any) -> list[tuple[str, str]]:
    return [(getattr(c, "__module__", "") or "", c.__name__) for c in type(x).__mro__]


def _is_module(x: Any) -> bool:
    return any(m.startswith("torch.nn") and n == "Module" for m, n in _class_names(x))


def _is_exported(x: Any) -> bool:
    return any(m.startswith("torch.export") and n == "ExportedProgram" for m, n in _class_names(x))


def matches(source: Any) -> bool:
    if isinstance(source, (str, os.PathLike)):
        s = str(source)
        if s.lower().endswith(".pt2"):
            return True
        return bool(_FACTORY_RE.match(s)) and not os.path.exists(s)
    return _is_module(source) or _is_exported(source)


def _where(source: Any) -> str:
    return str(source) if isinstance(source, (str, os.PathLike)) else type(source).__name__


# ---------------------------------------------------------------------------- the source object
def _resolve(source: Any) -> Any:
    """The module or ExportedProgram that ``source`` names."""
    import importlib

    where = _where(source)
    if isinstance(source, (str, os.PathLike)):
        s = str(source)
        if s.lower().endswith(".pt2"):
            if s in _MADE:
                return _MADE[s]
            if not os.path.isfile(s):
                raise FrontendError("bad_model", "file not found", where=s)
            import torch

            try:
                ep = torch.export.load(s)
            except Exception as exc:  # noqa: BLE001 - torch's own reason, one line
                raise FrontendError("bad_model", f"torch.export.load failed: {_first_line(exc)}", where=s) from None
            _MADE[s] = ep
            return ep
        if s in _MADE:
            return _MADE[s]
        mod_name, fn_name = s.split(":")
        try:
            mod = importlib.import_module(mod_name)
        except Exception as exc:  # noqa: BLE001
            raise FrontendError("bad_model", f"cannot import {mod_name!r}: {_first_line(exc)}", where=s) from None
        fn = getattr(mod, fn_name, None)
        if fn is None or not callable(fn):
            raise FrontendError("bad_model", f"{mod_name!r} has no callable {fn_name!r}", where=s)
        try:
            obj = fn()
        except Exception as exc:  # noqa: BLE001
            raise FrontendError("bad_model", f"{fn_name}() raised {type(exc).__name__}: {_first_line(exc)}",
                                where=s) from None
        if not (_is_module(obj) or _is_exported(obj)):
            raise FrontendError("bad_model", f"{fn_name}() returned a {type(obj).__name__}, not a torch.nn.Module",
                                where=s)
        _MADE[s] = obj
        return obj
    if _is_module(source) or _is_exported(source):
        return source
    raise FrontendError("bad_model", "not a PyTorch module", where=where)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    for line in text.splitlines():
        if line.strip():
            return " ".join(line.split())[:300]
    return type(exc).__name__


def forward_names(obj: Any) -> list[str]:
    """The module's user input names: ``forward``'s positional parameters (an
    ExportedProgram: its user inputs)."""
    if _is_exported(obj):
        from torch.export.graph_signature import InputKind

        return [s.arg.name for s in obj.graph_signature.input_specs if s.kind == InputKind.USER_INPUT]
    import inspect

    try:
        params = inspect.signature(obj.forward).parameters.values()
    except (TypeError, ValueError):
        return []
    return [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]


def _example_args(obj: Any, example_inputs: Any, where: str) -> tuple[Any, ...]:
    import torch

    def tensor(a: Any) -> Any:
        if isinstance(a, torch.Tensor):
            return a
        if isinstance(a, np.ndarray) or np.isscalar(a):
            return torch.from_numpy(np.array(a))
        return a

    names = forward_names(obj)
    if example_inputs is None:
        raise FrontendError("bad_model", "a PyTorch module needs example inputs (--example-inputs inputs.npz, or "
                            "opbridge.convert(module, (x,), ...))", where=where)
    if isinstance(example_inputs, (str, os.PathLike)):
        try:
            with np.load(str(example_inputs), allow_pickle=False) as z:
                arrays = {k: z[k] for k in z.files}
        except (OSError, ValueError) as exc:
            raise FrontendError("bad_model", f"cannot read example inputs {str(example_inputs)!r}: {exc}",
                                where=where) from None
        example_inputs = arrays
    if isinstance(example_inputs, dict):
        keys = list(example_inputs)
        if keys and all(k in names for k in keys):
            missing = [n for n in names[:max(names.index(k) for k in keys) + 1] if n not in example_inputs]
            if missing:
                raise FrontendError("bad_model", f"example inputs lack {missing} (forward takes {names})", where=where)
            ordered = [example_inputs[n] for n in names if n in example_inputs]
        else:
            ordered = [example_inputs[k] for k in keys]
        return tuple(tensor(a) for a in ordered)
    if isinstance(example_inputs, (list, tuple)):
        return tuple(tensor(a) for a in example_inputs)
    return (tensor(example_inputs),)


def export(source: Any, example_inputs: Any = None, dynamic_shapes: Any = None) -> Any:
    """``source`` as a core-ATen ExportedProgram (the default decompositions applied)."""
    import torch

    where = _where(source)
    obj = _resolve(source)
    if _is_exported(obj):
        ep = obj
    else:
        args = _example_args(obj, example_inputs, where)
        try:
            ep = torch.export.export(obj.eval(), args, dynamic_shapes=dynamic_shapes)
        except Exception as exc:  # noqa: BLE001 - torch's reason, first line
            raise FrontendError("bad_model", f"torch.export failed: {type(exc).__name__}: {_first_line(exc)}",
                                where=where) from None
    try:
        return ep.run_decompositions()
    except Exception as exc:  # noqa: BLE001
        raise FrontendError("bad_model", f"torch decompositions failed: {type(exc).__name__}: {_first_line(exc)}",
                            where=where) from None


# ---------------------------------------------------------------------------- graph walk
from .pytorch_ops import torch_dtype_id  # noqa: E402 - re-exported


def _sym_names(ep: Any, dynamic_shapes: Any, user_nodes: list[Any], names: list[str]) -> dict[str, str]:
    """Symbolic dims (``s77``) → the ``torch.export.Dim`` names the caller gave them."""
    out: dict[str, str] = {}
    if dynamic_shapes is None:
        return out
    specs: list[Any]
    if isinstance(dynamic_shapes, dict):
        specs = [dynamic_shapes.get(n) for n in names]
    else:
        specs = list(dynamic_shapes)
    for node, spec in zip(user_nodes, specs):
        val = node.meta.get("val")
        if spec is None or not hasattr(val, "shape"):
            continue
        items = spec.items() if isinstance(spec, dict) else enumerate(spec)
        for axis, dim in items:
            name = getattr(dim, "__name__", None)
            if name and axis < len(val.shape):
                s = str(val.shape[axis])
                if re.fullmatch(r"[a-z]\d+", s):
                    out[s] = name
    return out


def load(source: Any, **opts: Any) -> Model:
    """The IR of a PyTorch module / ExportedProgram / .pt2 / ``pkg.module:factory``."""
    from torch.export.graph_signature import InputKind

    from ..ir.gcpause import gc_paused
    from ..table.loader import load_tables
    from .pytorch_ops import Ctx, unmapped

    where = _where(source)
    dynamic_shapes = opts.get("dynamic_shapes")
    ep = export(source, opts.get("example_inputs"), dynamic_shapes)
    gm = ep.graph_module
    tables = load_tables()
    nodes = list(gm.graph.nodes)
    missing = unmapped(nodes, tables)
    if missing:
        first, ops = missing
        raise FrontendError("unsupported_op", f"ATen op(s) with no IR op in optable.yaml: {', '.join(ops)}",
                            node=first, op=ops[0], where=where)
    specs = {s.arg.name: s for s in ep.graph_signature.input_specs if hasattr(s.arg, "name")}
    user = [n for n in nodes if n.op == "placeholder" and specs.get(n.name) is not None
            and specs[n.name].kind == InputKind.USER_INPUT]
    obj = _resolve(source)
    names = forward_names(obj) if not _is_exported(obj) else [n.name for n in user]
    sym = _sym_names(ep, dynamic_shapes, user, names)
    g = Graph("main")
    out_node = next(n for n in nodes if n.op == "output")
    from torch.export.graph_signature import OutputKind

    kinds = [o.kind for o in ep.graph_signature.output_specs]
    out_args = [a for a, k in zip(list(out_node.args[0]), kinds) if k == OutputKind.USER_OUTPUT]
    out_names = ["output"] if len(out_args) == 1 else [f"output_{i}" for i in range(len(out_args))]
    for n in out_names:
        g.unique_name(n)  # reserved: the outputs are renamed at the end
    ctx = Ctx(g, tables, where, sym)
    state = dict(ep.state_dict)
    state.update(getattr(ep, "constants", {}) or {})
    with gc_paused():
        user_i = 0
        for node in nodes:
            if node.op != "placeholder":
                continue
            spec = specs.get(node.name)
            val = node.meta.get("val")
            if spec is not None and spec.kind == InputKind.USER_INPUT:
                name = names[user_i] if user_i < len(names) else node.name
                user_i += 1
                if not hasattr(val, "shape"):  # a python value the export specialized on
                    ctx.env[node.name] = val
                    continue
                ctx.env[node.name] = g.add_input(name, ctx.type_of(val))
            else:
                target = getattr(spec, "target", None) if spec is not None else None
                t = state.get(target) if target is not None else None
                if t is None:
                    raise FrontendError("bad_model", f"no value for {spec.kind.name if spec else 'placeholder'} "
                                        f"{target or node.name!r}", node=node.name, where=where)
                ctx.env[node.name] = ctx.const_tensor(t, node.name)
        try:
            for node in nodes:
                if node.op == "call_function":
                    ctx.convert(node)
                elif node.op in ("get_attr", "call_module", "call_method"):
                    raise FrontendError("unsupported_op", f"FX {node.op} node {node.target!r} is not supported",
                                        node=node.name, where=where)
        except FrontendError:
            raise
        except OpbridgeError as exc:
            raise FrontendError(exc.code, exc.detail, node=exc.node or ctx.node_name or None, op=exc.op,
                                where=where) from None
        except Exception as exc:  # noqa: BLE001 - a handler's failure on an unexpected argument form
            raise FrontendError("bad_model", f"{type(exc).__name__}: {_first_line(exc)}",
                                node=ctx.node_name or None, op=ctx.aten or None, where=where) from None
        for name, arg in zip(out_names, out_args):
            v = ctx.output_value(arg)
            if v.producer is None or v in g.outputs:  # an input, constant or repeated output: a node of its own
                v = g.add_node("identity", [v], {}, outputs=[name], name=name, types=[v.type]).outputs[0]
            v.name = name
            g.outputs.append(v)
    meta = {"opbridge.source_runtime": RUNTIME}
    return Model(g, source=where, source_format=NAME, metadata=meta)


def _ordered_feeds(obj: Any, feeds: dict[str, Any]) -> list[Any]:
    names = forward_names(obj)
    if names and all(n in feeds for n in names[:len(feeds)]):
        return [feeds[n] for n in names if n in feeds]
    return list(feeds.values())


def run_source(source: Any, feeds: dict[str, Any], names: list[str], **opts: Any) -> list[Any]:
    """The module run eagerly by PyTorch on ``feeds`` (in ``forward``'s parameter order);
    the outputs flattened (``torch.utils._pytree``) in the IR's order."""
    from . import SourceUnavailable

    try:
        import torch
    except ImportError:
        raise SourceUnavailable("torch is not installed") from None
    import torch.utils._pytree as pytree

    try:
        obj = _resolve(source)
    except FrontendError as exc:
        raise SourceUnavailable(str(exc)) from None
    fn = obj.module() if _is_exported(obj) else obj.eval()
    args = [torch.from_numpy(np.array(a, copy=True)) for a in _ordered_feeds(obj, feeds)]
    try:
        with torch.no_grad():
            out = fn(*args)
    except Exception as exc:  # noqa: BLE001 - the module's own failure on these inputs
        raise SourceUnavailable(f"eager PyTorch cannot run the source: {type(exc).__name__}: "
                                f"{_first_line(exc)}") from None
    leaves = pytree.tree_leaves(out)
    res = []
    for x in leaves:
        if isinstance(x, torch.Tensor):
            x = x.detach().cpu()
            if x.dtype == torch.bfloat16:
                x = x.float()
            res.append(x.numpy())
        else:
            res.append(np.asarray(x))
    if len(res) != len(names):
        raise SourceUnavailable(f"the module returned {len(res)} outputs, the IR has {len(names)}")
    return res


__all__ = ["NAME", "RUNTIME", "matches", "load", "run_source", "export", "forward_names", "torch_dtype_id",
           "TensorType", "Value"]
