"""The frozen GraphDef of a TensorFlow function → IR (the reading half of ``tensorflow.py``)."""
from __future__ import annotations

import json
from typing import Any, Callable

import numpy as np

from ..table.dtypes import dtype_id, onnx_enum
from ..ir.infer import infer_node
from ..table.errors import FrontendError, OpbridgeError
from ..ir.gcpause import gc_paused
from ..ir.graph import Graph, Model, TensorType, Value
from ..table.loader import Tables

#: graph plumbing: values pass through unchanged
PASSTHROUGH = frozenset({"Identity", "IdentityN", "StopGradient", "Snapshot", "PreventGradient",
                         "EnsureShape", "CheckNumerics"})
#: nodes with no value to read (control edges only)
NO_VALUE = frozenset({"NoOp", "Assert"})
#: never evaluated at load time even when their inputs are constant
NEVER_FOLD = frozenset({"Placeholder", "While", "StatelessWhile", "If", "StatelessIf", "PartitionedCall",
                        "StatefulPartitionedCall"})
#: a folded constant larger than this many elements is still folded (weights are constants anyway)


def _tensor_name(name: str) -> str:
    return name if ":" in name else name + ":0"


def _strip(name: str) -> str:
    return name[:-2] if name.endswith(":0") else name.replace(":", "_")


class Builder:
    """State of one conversion: the IR graph, TF tensor name → IR value / constant."""

    def __init__(self, tables: Tables, path: str) -> None:
        self.tables = tables
        self.path = path
        self.graph = Graph("main")
        self.values: dict[str, Value] = {}
        self.consts: dict[str, np.ndarray] = {}
        self.node_name = ""
        self.reverse = tables.reverse_index("tensorflow")
        self.enum_map = onnx_enum()
        self.functions: dict[str, Any] = {}  # the GraphDef's function library (While bodies)

    def fail(self, code: str, detail: str, op: str | None = None) -> FrontendError:
        return FrontendError(code, detail, node=self.node_name or None, op=op, where=self.path)

    def const(self, array: Any, name: str = "c", dtype: Any = None) -> Value:
        arr = np.asarray(array, dtype=dtype)
        return self.graph.add_constant(f"{self.node_name or 'n'}_{name}", arr, dtype_id(arr.dtype))

    def emit(self, op_id: str, inputs: list[Value | None], attrs: dict[str, Any] | None = None, n: int = 1,
             meta: dict[str, Any] | None = None) -> list[Value]:
        node = self.graph.add_node(op_id, inputs, attrs or {}, outputs=n, name=self.node_name or op_id)
        if meta:
            node.meta.update(meta)
        try:  # typed as it is made: later handlers read static shapes the TF graph may not know
            for v, t in zip(node.outputs, infer_node(node, self.tables, self.enum_map)):
                v.type = t
        except Exception:  # noqa: BLE001 - verification reports it with the node's name
            pass
        return list(node.outputs)

    def transpose(self, v: Value, perm: list[int]) -> Value:
        """``v`` transposed; a transpose of a transpose this frontend made is undone instead."""
        perm = [int(p) for p in perm]
        if perm == list(range(len(perm))):
            return v
        if v.is_const:
            return self.const(np.ascontiguousarray(np.transpose(v.const, perm)), "t")
        p = v.producer
        if p is not None and p.op == "transpose" and p.meta.get("tf_layout"):
            inner = list(p.attrs["perm"])
            if len(inner) == len(perm) and [inner[i] for i in perm] == list(range(len(perm))):
                return p.inputs[0]
        return self.emit("transpose", [v], {"perm": perm}, meta={"tf_layout": True})[0]


def _attr_value(op: Any, name: str) -> Any:
    v = op.get_attr(name)
    if isinstance(v, bytes):
        return v.decode("utf-8", "replace")
    return v


class NodeCtx:
    """What a handler sees of one TF node."""

    def __init__(self, b: Builder, op: Any, inputs: list[str]) -> None:
        self.b = b
        self.op = op
        self.type = op.type
        self.inputs = inputs  # tensor names (control inputs removed)

    def attr(self, name: str, default: Any = None) -> Any:
        try:
            return _attr_value(self.op, name)
        except ValueError:
            return default

    def fail(self, code: str, detail: str) -> FrontendError:
        return self.b.fail(code, detail, op=self.type)

    def c(self, i: int) -> np.ndarray | None:
        return self.b.consts.get(self.inputs[i])

    def ci(self, i: int, what: str = "input") -> np.ndarray:
        """Input ``i`` as a constant (the node needs it so)."""
        arr = self.c(i)
        if arr is None:
            raise self.fail("requires_constant_input", f"{self.type} needs a constant {what} (input {i})")
        return arr

    def x(self, i: int) -> Value:
        name = self.inputs[i]
        v = self.b.values.get(name)
        if v is None:
            arr = self.b.consts.get(name)
            if arr is None:
                raise self.fail("bad_model", f"input {name!r} is not produced")
            v = self.b.values[name] = self.b.graph.add_constant(_strip(name), arr, dtype_id(arr.dtype))
        return v

    def in_shape(self, i: int) -> list[Any] | None:
        """TensorFlow's static shape of input ``i``, its unknown dimensions taken from the IR value's type."""
        t = self.op.inputs[i]
        tf_shape = None if t.shape.rank is None else t.shape.as_list()
        if tf_shape is not None and all(d is not None for d in tf_shape):
            return tf_shape
        arr = self.c(i)
        if arr is not None:
            return list(arr.shape)
        v = self.b.values.get(self.inputs[i])
        ir = v.type.shape if v is not None and v.type.kind == "tensor" else None
        if ir is None or (tf_shape is not None and len(ir) != len(tf_shape)):
            return tf_shape
        if tf_shape is None:
            return list(ir)
        return [d if d is not None else (e if isinstance(e, int) else None) for d, e in zip(tf_shape, ir)]

    def out_shape(self, j: int = 0) -> list[Any] | None:
        t = self.op.outputs[j]
        return None if t.shape.rank is None else t.shape.as_list()

    def static_out(self, j: int = 0) -> list[int]:
        s = self.out_shape(j)
        if s is None or any(d is None for d in s):
            raise self.fail("dynamic_shape", f"{self.type} output {j} has shape {s}; a static shape is needed")
        return [int(d) for d in s]

    def known_in(self, i: int) -> list[int | None]:
        """Input ``i``'s dimensions, None where unknown (the symbolic batch); its rank must be known."""
        s = self.in_shape(i)
        if s is None:
            raise self.fail("dynamic_shape", f"{self.type} input {i} has an unknown rank")
        return [None if d is None else int(d) for d in s]

    def static(self, dims: list[int | None], what: str) -> list[int]:
        """``dims`` (the spatial dims of a conv, say), which must all be known."""
        if any(d is None for d in dims):
            raise self.fail("dynamic_shape", f"{self.type}: the {what} {dims} must be static")
        return [int(d) for d in dims]  # type: ignore[arg-type]

    def static_in(self, i: int) -> list[int]:
        s = self.in_shape(i)
        if s is None or any(d is None for d in s):
            raise self.fail("dynamic_shape", f"{self.type} input {i} has shape {s}; a static shape is needed")
        return [int(d) for d in s]

    def out_np_dtype(self, j: int = 0) -> Any:
        return np.dtype(self.op.outputs[j].dtype.as_numpy_dtype)

    def emit(self, op_id: str, inputs: list[Value | None], attrs: dict[str, Any] | None = None, n: int = 1) -> list[Value]:
        return self.b.emit(op_id, inputs, attrs, n)

    def one(self, op_id: str, inputs: list[Value | None], attrs: dict[str, Any] | None = None) -> Value:
        return self.b.emit(op_id, inputs, attrs, 1)[0]

    def const(self, array: Any, dtype: Any = None, name: str = "c") -> Value:
        return self.b.const(array, name, dtype)

    def transpose(self, v: Value, perm: list[int]) -> Value:
        return self.b.transpose(v, perm)


def _freeze(src: Any) -> tuple[Any, list[str], list[str]]:
    """The function's GraphDef with its variables made constants (TF's own freezing, which
    inlines the function calls; control flow is kept as While/If nodes)."""
    from tensorflow.python.framework import convert_to_constants as c2c

    if getattr(src, "frozen", None) is not None:  # frozen already (a SavedModel read through its MetaGraph)
        gd0, ins, outs = src.frozen
        gd = type(gd0)()
        gd.CopyFrom(gd0)
        return gd, list(ins), list(outs)
    fn = src.fn
    try:  # the GraphDef only: rebuilding a ConcreteFunction from it costs as much again
        data = c2c._FunctionConverterDataInEager(func=fn, lower_control_flow=False, aggressive_inlining=False)
        gd, converted = c2c._replace_variables_by_constants(converter_data=data)
        caps = fn.graph.internal_captures
        gone = {id(caps[i]) for i in converted}
        ins = [t.name for t in fn.inputs if id(t) not in gone]
        outs = [t.name for t in fn.outputs]
    except AttributeError:  # the private names moved: the public API
        frozen = c2c.convert_variables_to_constants_v2(fn, lower_control_flow=False)
        gd = frozen.graph.as_graph_def()
        ins = [t.name for t in frozen.inputs]
        outs = [t.name for t in frozen.outputs]
    return gd, ins, outs


_CALLS = ("PartitionedCall", "StatefulPartitionedCall")


def _flat_index(node: Any, out_arg: str, i: int) -> int:
    """The flat output index of ``node``'s output ``out_arg:i`` (a FunctionDef reference)."""
    from tensorflow.python.framework import op_def_registry

    op_def = op_def_registry.get(node.op)
    if op_def is None:
        raise FrontendError("bad_model", f"function body op {node.op} is not a TensorFlow op", node=node.name)
    offset = 0
    for a in op_def.output_arg:
        if a.name == out_arg:
            return offset + i
        if a.number_attr:
            offset += node.attr[a.number_attr].i
        elif a.type_list_attr:
            offset += len(node.attr[a.type_list_attr].list.type)
        else:
            offset += 1
    raise FrontendError("bad_model", f"op {node.op} has no output {out_arg!r}", node=node.name)


def _inline_calls(gd: Any, outs: list[str]) -> list[str]:
    """Function calls TensorFlow's freezing left in place (``_noinline`` functions, such as
    Keras' XLA-compiled grouped convolution) inlined into the GraphDef; returns ``outs`` renamed."""
    lib = {f.signature.name: f for f in gd.library.function}
    for _ in range(32):  # nesting depth
        calls = [n for n in gd.node if n.op in _CALLS and n.attr["f"].func.name in lib]
        if not calls:
            return outs
        rename: dict[str, str] = {}
        new: list[Any] = []
        call_names = {n.name for n in calls}
        for node in gd.node:
            if node.name not in call_names:
                new.append(node)
                continue
            f = lib[node.attr["f"].func.name]
            prefix = node.name + "/"
            data = [i for i in node.input if not i.startswith("^")]
            args = {a.name: data[k] for k, a in enumerate(f.signature.input_arg)}
            body = {n.name: n for n in f.node_def}

            def ref(r: str, args: dict = args, body: dict = body, prefix: str = prefix) -> str:
                if r in args:
                    return args[r]
                parts = r.split(":")
                idx = _flat_index(body[parts[0]], parts[1], int(parts[2])) if len(parts) == 3 else 0
                return f"{prefix}{parts[0]}" + (f":{idx}" if idx else "")

            for n in f.node_def:
                m = type(n)()
                m.CopyFrom(n)
                m.name = prefix + n.name
                m.device = ""
                del m.input[:]
                m.input.extend(ref(i) for i in n.input if not i.startswith("^"))
                new.append(m)
            for j, oa in enumerate(f.signature.output_arg):
                rename[f"{node.name}:{j}"] = _tensor_name(ref(f.ret[oa.name]))
        for n in new:
            ins = [rename.get(_tensor_name(i), i) for i in n.input if not (i.startswith("^") and i[1:] in call_names)]
            del n.input[:]
            n.input.extend(ins)
        del gd.node[:]
        gd.node.extend(new)
        outs = [rename.get(_tensor_name(t), t) for t in outs]
    raise FrontendError("bad_model", "function calls nested too deeply")


def _spell_out(tf: Any, gd: Any) -> None:
    """TensorFlow ops the table has no cell for but TensorFlow defines as a composition of ops
    that have one, rewritten in the GraphDef before it is read (TensorFlow's shape inference
    then types the parts; the last part keeps the node's name, so its readers are unchanged):

    * ``DivNoNan(x, y) = SelectV2(Equal(y, 0), 0, RealDiv(x, y))`` (0 wherever y is 0, whatever x
      is; Keras' normalizations and ``tf.math.divide_no_nan``).
    """
    new: list[Any] = []
    for node in gd.node:
        if node.op != "DivNoNan":
            new.append(node)
            continue
        dt = node.attr["T"].type
        data = [i for i in node.input if not i.startswith("^")]
        zero, eq, div = (type(node)() for _ in range(3))
        zero.name, zero.op = f"{node.name}/opbridge_zero", "Const"
        zero.attr["dtype"].type = dt
        zero.attr["value"].tensor.CopyFrom(tf.make_tensor_proto(np.zeros((), tf.as_dtype(dt).as_numpy_dtype)))
        eq.name, eq.op = f"{node.name}/opbridge_is_zero", "Equal"
        eq.input.extend([data[1], zero.name])
        eq.attr["T"].type = dt
        div.name, div.op = f"{node.name}/opbridge_div", "RealDiv"
        div.input.extend(data)
        div.attr["T"].type = dt
        sel = type(node)()
        sel.name, sel.op, sel.device = node.name, "SelectV2", node.device
        sel.input.extend([eq.name, zero.name, div.name])
        sel.attr["T"].type = dt
        new.extend([zero, eq, div, sel])
    if len(new) != len(gd.node):
        del gd.node[:]
        gd.node.extend(new)


#: constants with more elements are imported as placeholders of their shape (shape inference
#: needs the shape only; TensorFlow copies every constant it imports)
_BIG = 1024


def _import(tf: Any, gd: Any, light: bool = False) -> Any:
    if light:
        gd2 = type(gd)()
        gd2.versions.CopyFrom(gd.versions)
        gd2.library.CopyFrom(gd.library)
        for node in gd.node:
            n = gd2.node.add()
            t = node.attr["value"].tensor if node.op == "Const" else None
            if t is not None and np.prod([d.size for d in t.tensor_shape.dim]) > _BIG:
                n.name, n.op = node.name, "Placeholder"
                n.attr["dtype"].type = node.attr["dtype"].type
                n.attr["shape"].shape.CopyFrom(t.tensor_shape)
            else:
                n.CopyFrom(node)
        gd = gd2
    g = tf.Graph()
    with g.as_default():
        tf.compat.v1.import_graph_def(gd, name="")
    return g


def _evaluate(tf: Any, gd: Any, wanted: list[str], known: dict[str, np.ndarray]) -> list[np.ndarray]:
    """``wanted`` tensors of constant subgraphs, run by TensorFlow on a graph of just those
    nodes (values already known enter as constants)."""
    by_name = {n.name: n for n in gd.node}
    keep: dict[str, Any] = {}
    roots = {t.split(":")[0] for t in wanted}
    stack = list(roots)
    while stack:
        name = stack.pop()
        if name in keep:
            continue
        node = by_name[name]
        if node.op != "Const" and f"{name}:0" in known and name not in roots:
            c = type(node)()
            c.name, c.op = name, "Const"
            arr = known[f"{name}:0"]
            c.attr["dtype"].type = tf.as_dtype(arr.dtype).as_datatype_enum
            c.attr["value"].tensor.CopyFrom(tf.make_tensor_proto(arr))
            keep[name] = c
            continue
        keep[name] = node
        stack.extend(i.split(":")[0] for i in node.input if not i.startswith("^"))
    sub = type(gd)()
    sub.versions.CopyFrom(gd.versions)
    sub.library.CopyFrom(gd.library)
    for node in gd.node:
        if node.name in keep:
            n = sub.node.add()
            n.CopyFrom(keep[node.name])
            del n.input[:]
            n.input.extend(i for i in keep[node.name].input if not i.startswith("^"))
    g = _import(tf, sub)
    with tf.compat.v1.Session(graph=g) as sess:
        return [np.asarray(a) for a in sess.run(wanted)]


def _example_shapes(opts: dict[str, Any], names: list[str]) -> dict[str, tuple]:
    """Input shapes from ``example_inputs`` (an .npz path, a dict, or a list/tuple of arrays):
    by input name, else in order when there are as many arrays as inputs."""
    ex = opts.get("example_inputs")
    if ex is None:
        return {}
    if isinstance(ex, (str, bytes)) or hasattr(ex, "__fspath__"):
        with np.load(ex, allow_pickle=False) as z:
            shapes = [(k, tuple(z[k].shape)) for k in z.files]
    elif isinstance(ex, dict):
        shapes = [(k, tuple(np.shape(v))) for k, v in ex.items()]
    elif isinstance(ex, (list, tuple)):
        shapes = [(None, tuple(np.shape(v))) for v in ex]
    else:
        shapes = [(None, tuple(np.shape(ex)))]
    by_name = {k: s for k, s in shapes if k is not None}
    if all(n in by_name for n in names):
        return by_name
    if len(shapes) == len(names):
        return {n: s for n, (_, s) in zip(names, shapes)}
    return by_name


#: the symbol of an input's unknown batch (first) dimension, kept dynamic
BATCH = "batch"


def _fix_dims(tf: Any, gd: Any, in_tensors: list[str], names: list[str], opts: dict[str, Any],
              keep_batch: bool = True) -> tuple[dict[str, tuple], set[str]]:
    """Unknown input dimensions made static: from ``example_inputs`` (an .npz path or a dict of
    arrays, by input name), ``dims`` ({input: shape}, or an int for every unknown dimension),
    else an unknown batch (first) dimension is 1; any other unknown dimension is refused. With
    ``keep_batch`` an unknown batch dimension stays unknown (the IR's symbolic ``batch``) unless
    ``dims`` names it; the examples then give the other dimensions only. Returns (input → the
    shape it was fixed to, the inputs whose batch stays symbolic)."""
    dims = opts.get("dims")
    examples = _example_shapes(opts, names)
    by_node = {t.split(":")[0]: n for t, n in zip(in_tensors, names)}
    fixed: dict[str, tuple] = {}
    kept: set[str] = set()
    for node in gd.node:
        if node.op != "Placeholder" or node.name not in by_node:
            continue
        name = by_node[node.name]
        shape = tf.TensorShape(node.attr["shape"].shape)
        if shape.is_fully_defined():
            continue
        explicit = isinstance(dims, int) or isinstance(dims, dict) and name in dims
        batch_free = keep_batch and not explicit and shape.rank and shape.as_list()[0] is None
        if name in examples:
            new = [int(d) for d in examples[name]]
            if batch_free and len(new) == shape.rank:
                new[0] = None  # type: ignore[call-overload]
        elif isinstance(dims, dict) and name in dims:
            new = [int(d) for d in dims[name]]
        elif shape.rank is None:
            raise FrontendError("dynamic_shape", f"input {name!r} has unknown rank; give its shape "
                                "(--example-inputs)", node=node.name)
        elif isinstance(dims, int):
            new = [int(dims) if d is None else int(d) for d in shape.as_list()]
        else:
            s = shape.as_list()
            if any(d is None for d in s[1:]):
                raise FrontendError("dynamic_shape", f"input {name!r} has shape {s}: dimensions other than the batch "
                                    "are unknown; give them (--example-inputs, or dims= in Python)", node=node.name)
            new = [None if d is None and batch_free else 1 if d is None else int(d) for d in s]
        if shape.rank is not None and (len(new) != shape.rank or any(
                d is not None and n is not None and d != n for d, n in zip(shape.as_list(), new))):
            raise FrontendError("bad_option", f"input {name!r}: shape {new} does not fit the signature's "
                                f"{shape.as_list()}", node=node.name)
        node.attr["shape"].shape.CopyFrom(tf.TensorShape(new).as_proto())
        if batch_free and new[0] is None:
            kept.add(name)
        if not (batch_free and new[0] is None) or None in shape.as_list()[1:]:  # what was fixed (a kept batch: None)
            fixed[name] = tuple(new)
    return fixed, kept


def _toposort(gd: Any, wanted: set[str]) -> list[Any]:
    by_name = {n.name: n for n in gd.node}
    order: list[Any] = []
    state: dict[str, int] = {}
    for root in sorted(wanted):
        stack = [(root, False)]
        while stack:
            name, done = stack.pop()
            if done:
                if state.get(name) != 2:
                    state[name] = 2
                    order.append(by_name[name])
                continue
            if state.get(name):
                continue
            state[name] = 1
            stack.append((name, True))
            for inp in reversed(by_name[name].input):
                dep = inp.lstrip("^").split(":")[0]
                if state.get(dep) is None:
                    stack.append((dep, False))
    return order


def quiet_tf() -> Any:
    """TensorFlow, imported with its Python and C++ logging at ERROR."""
    import os

    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import tensorflow as tf

    try:
        tf.get_logger().setLevel("ERROR")
    except Exception:  # noqa: BLE001
        pass
    return tf


def build(src: Any, opts: dict[str, Any], tables: Tables) -> Model:
    """The IR of ``src``'s function, an unknown batch dimension kept as the symbolic ``batch``;
    when the graph cannot be read so (shape arithmetic or an op that needs the batch size), it
    is read again with the batch fixed (to the example's, else 1), and the model says so
    (``metadata["opbridge.fixed_input_shapes"]`` and ``["opbridge.fixed_batch"]``: why)."""
    state: dict[str, Any] = {}
    try:
        return _build(src, opts, tables, True, state)
    except OpbridgeError as exc:
        if not state.get("kept"):  # no batch was kept: that is not why
            raise
        why = f"{exc.code}: {exc.detail}"
    m = _build(src, opts, tables, False, {})
    m.metadata["opbridge.fixed_batch"] = why[:300]
    fixed = m.metadata.get("opbridge.fixed_input_shapes", "")
    m.warnings = (*m.warnings, f"the unknown batch dim is fixed{f' ({fixed})' if fixed else ''}: the graph cannot be "
                               f"read with it symbolic ({why[:200]})")
    return m


def _build(src: Any, opts: dict[str, Any], tables: Tables, keep_batch: bool, state: dict[str, Any]) -> Model:
    from .tensorflow_ops import HANDLERS

    tf = quiet_tf()
    gd, in_tensors, out_tensors = _freeze(src)
    out_tensors = _inline_calls(gd, out_tensors)
    _spell_out(tf, gd)
    try:
        fixed, kept = _fix_dims(tf, gd, in_tensors, src.input_names, opts, keep_batch)
    except FrontendError as exc:
        raise FrontendError(exc.code, exc.detail, node=exc.node, where=src.path) from None
    state["kept"] = kept
    g = _import(tf, gd, light=True)
    out_nodes = {t.split(":")[0] for t in out_tensors}
    order = _toposort(gd, out_nodes)
    b = Builder(tables, src.path)
    b.functions = {f.signature.name: f for f in gd.library.function}
    # which nodes fold: constants, shapes of statically shaped tensors, stateless nodes of those
    foldable: set[str] = set()
    for node in order:
        if node.op in NEVER_FOLD or node.op in NO_VALUE:
            continue
        op = g.get_operation_by_name(node.name)
        if node.op == "Const":
            b.consts[node.name + ":0"] = tf.make_ndarray(node.attr["value"].tensor)
            foldable.add(node.name)
            continue
        if node.op in ("Shape", "Size", "Rank") and op.inputs[0].shape.is_fully_defined():
            s = op.inputs[0].shape.as_list()
            val = {"Shape": s, "Size": int(np.prod(s)), "Rank": len(s)}[node.op]
            b.consts[node.name + ":0"] = np.asarray(val, dtype=op.outputs[0].dtype.as_numpy_dtype)
            foldable.add(node.name)
            continue
        if op.op_def.is_stateful or not node.input:
            continue
        if any(t.dtype in (tf.variant, tf.resource, tf.string) for t in op.outputs):
            continue
        data = [i for i in node.input if not i.startswith("^")]
        if all(i.split(":")[0] in foldable for i in data):
            foldable.add(node.name)
            if node.op in PASSTHROUGH:
                for j, t in enumerate(data if node.op == "IdentityN" else data[:1]):
                    if _tensor_name(t) in b.consts:
                        b.consts[f"{node.name}:{j}"] = b.consts[_tensor_name(t)]
    needed: list[str] = []
    for node in order:
        if node.name in foldable:
            continue
        for i in node.input:
            t = _tensor_name(i)
            if not i.startswith("^") and t.split(":")[0] in foldable and t not in b.consts and t not in needed:
                needed.append(t)
    for t in out_tensors:
        if t.split(":")[0] in foldable and t not in b.consts and t not in needed:
            needed.append(t)
    if needed:
        for t, arr in zip(needed, _evaluate(tf, gd, needed, b.consts)):
            b.consts[t] = arr
    # shape arithmetic over shapes TensorFlow does not know statically (the IR may: folded late)
    shape_math: set[str] = set()
    for node in order:
        if node.name in foldable or node.op in NEVER_FOLD or node.op in NO_VALUE:
            continue
        data = [i for i in node.input if not i.startswith("^")]
        op = g.get_operation_by_name(node.name)
        if any(t.dtype in (tf.variant, tf.resource, tf.string) for t in op.outputs):
            continue
        if node.op in ("Shape", "Size", "Rank") or (
                data and not op.op_def.is_stateful
                and all(i.split(":")[0] in foldable or i.split(":")[0] in shape_math for i in data)):
            shape_math.add(node.name)
    # every unmapped op, reported at once
    unmapped: list[tuple[str, str]] = []
    for node in order:
        if node.name in foldable or node.name in shape_math or node.op in PASSTHROUGH or node.op in NO_VALUE \
                or node.op == "Placeholder":
            continue
        h = HANDLERS.get(node.op)
        if h is None or not any(op_id == h[0] for op_id, _ in b.reverse.get(node.op, ())):
            unmapped.append((node.name, node.op))
    if unmapped:
        types = sorted({t for _, t in unmapped})
        b.node_name = unmapped[0][0]
        raise b.fail("unsupported_op", f"{len(unmapped)} node(s) of TensorFlow op type(s) {', '.join(types)} have no "
                     "IR op in optable.yaml's tensorflow column (reads) or no handler", op=unmapped[0][1])
    placeholders = {t.split(":")[0]: n for t, n in zip(in_tensors, src.input_names)}
    with gc_paused():
        for iname, t in zip(src.input_names, in_tensors):
            op = g.get_operation_by_name(t.split(":")[0])
            tt = op.outputs[0]
            shape = tuple(BATCH if k == 0 and d is None and iname in kept else d for k, d in enumerate(tt.shape.as_list()))
            b.values[_tensor_name(t)] = b.graph.add_input(iname, TensorType(dtype_id(np.dtype(tt.dtype.as_numpy_dtype)),
                                                                             shape))
        for node in order:
            if node.name in foldable or node.op in NO_VALUE:
                continue
            b.node_name = node.name
            if node.op == "Placeholder":
                if node.name not in placeholders:
                    raise b.fail("bad_model", "a placeholder that is not a signature input")
                continue
            data = [_tensor_name(i) for i in node.input if not i.startswith("^")]
            if node.op in PASSTHROUGH:
                for j, t in enumerate(data if node.op == "IdentityN" else data[:1]):
                    _alias(b, f"{node.name}:{j}", t)
                continue
            op = g.get_operation_by_name(node.name)
            if node.name in shape_math and _fold_late(tf, b, node, op, data):
                continue
            if node.op not in HANDLERS:
                raise b.fail("unsupported_op", f"TensorFlow op {node.op} has no IR op (shape arithmetic whose "
                             "shapes are not static)", op=node.op)
            ctx = NodeCtx(b, op, data)
            outs = _run_handler(HANDLERS[node.op][1], ctx)
            for j, v in enumerate(outs):
                if v is None:
                    continue
                name = f"{node.name}:{j}"
                b.values[name] = v
                _set_type(v, op.outputs[j], node.name if j == 0 else f"{node.name}_{j}")
        b.node_name = ""
        if isinstance(src.fn.structured_outputs, dict):
            out_names = sorted(src.fn.structured_outputs)
        else:
            out_names = src.output_names
        for name, t in zip(out_names, out_tensors):
            t = _tensor_name(t)
            if t in b.values:
                v = b.values[t]
            else:
                v = NodeCtx(b, g.get_tensor_by_name(t).op, [t]).x(0)
            b.node_name = name
            out = b.emit("identity", [v])[0]
            out.name = name
            out.type = v.type
            b.graph.outputs.append(out)
    _rename_outputs(b.graph, out_names)
    meta = {"opbridge.output_order": json.dumps(out_names)}
    if fixed:
        meta["opbridge.fixed_input_shapes"] = json.dumps({k: list(v) for k, v in fixed.items()})
    return Model(b.graph, source=src.path, source_format="tensorflow", metadata=meta)


def _fold_late(tf: Any, b: Builder, node: Any, op: Any, data: list[str]) -> bool:
    """Shape arithmetic folded during the walk, once the IR knows the shapes TensorFlow did not."""
    if node.op in ("Shape", "Size", "Rank"):
        v = b.values.get(data[0])
        s = v.type.shape if v is not None else None
        if s is None or not all(isinstance(d, int) for d in s):
            return False
        val = {"Shape": list(s), "Size": int(np.prod(s)), "Rank": len(s)}[node.op]
        b.consts[f"{node.name}:0"] = np.asarray(val, dtype=op.outputs[0].dtype.as_numpy_dtype)
        return True
    if not all(t in b.consts for t in data):
        return False
    if node.op in PASSTHROUGH:
        b.consts[f"{node.name}:0"] = b.consts[data[0]]
        return True
    sub = tf.compat.v1.GraphDef()
    for k, t in enumerate(data):
        c = sub.node.add()
        c.name, c.op = f"in{k}", "Const"
        arr = b.consts[t]
        c.attr["dtype"].type = tf.as_dtype(arr.dtype).as_datatype_enum
        c.attr["value"].tensor.CopyFrom(tf.make_tensor_proto(arr))
    n = sub.node.add()
    n.CopyFrom(node)
    del n.input[:]
    n.input.extend(f"in{k}" for k in range(len(data)))
    g = _import(tf, sub)
    outs = [f"{node.name}:{j}" for j in range(len(op.outputs))]
    with tf.compat.v1.Session(graph=g) as sess:
        for t, arr in zip(outs, sess.run(outs)):
            b.consts[t] = np.asarray(arr)
    return True


def _alias(b: Builder, out: str, inp: str) -> None:
    if inp in b.values:
        b.values[out] = b.values[inp]
    elif inp in b.consts:
        b.consts[out] = b.consts[inp]
    else:
        raise b.fail("bad_model", f"input {inp!r} is not produced")


def _run_handler(fn: Callable[[NodeCtx], list[Value | None]], ctx: NodeCtx) -> list[Value | None]:
    try:
        return fn(ctx)
    except FrontendError:
        raise
    except Exception as exc:  # noqa: BLE001 - one line naming the node
        msg = " ".join(str(exc).split())[:300]
        raise ctx.fail("bad_model", f"cannot translate {ctx.type}: {type(exc).__name__}: {msg}") from None


def _set_type(v: Value, t: Any, name: str) -> None:
    if v.producer is None or v.is_const:
        return
    try:
        dt = dtype_id(np.dtype(t.dtype.as_numpy_dtype))
    except Exception:  # noqa: BLE001 - resource / variant tensors
        return
    shape = None if t.shape.rank is None else tuple(t.shape.as_list())
    if shape is not None and None in shape:
        shape = v.type.shape if v.type.shape is not None and len(v.type.shape) == len(shape) else None
    v.type = TensorType(dt, shape)


def _rename_outputs(g: Graph, names: list[str]) -> None:
    """The graph's outputs carry the signature's names (the names were reserved last: free them)."""
    taken = {v.name: v for v in g.values()}
    for v, want in zip(g.outputs, names):
        if v.name != want:
            other = taken.get(want)
            if other is not None and other is not v:
                other.name = g.unique_name(want + "_inner")
            v.name = want
        g._names.add(want)
