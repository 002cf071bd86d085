"""The validation stage: an ONNX model is checked before anything reads it.

``validate_model(proto, base_dir, path)`` runs first in ``from_proto`` (before shape
inference, conversion, a reference run or an emitter), so a broken or hostile file is
refused with one line naming the file, the node/op/tensor and why, with a reason code:

* versions: the IR version and the default-domain opset must be ones the installed
  ``onnx`` knows (``onnx.IR_VERSION``, ``onnx.defs.onnx_opset_version()``);
* structure: the main graph has outputs (none at all is an empty graph), lists no output
  twice; in every graph (subgraphs and model-local functions too) every value has one
  producer (a node output is not also an input, an initializer or another node's output);
  model-local functions do not call themselves (directly or through others);
* tensors: a defined element type, non-negative dims, a declared size within the memory
  budget (``too_large``, ``translator/table/budget.py``); external data with a location that is
  relative, free of NUL and inside the model's folder, ``offset``/``length`` non-negative
  integers, ``length`` equal to dims x item size (onnxruntime refuses the model
  otherwise), and a file holding ``offset + size`` bytes (``missing_external_data``);
* the ONNX checker (structure) and ONNX shape inference in strict mode (what
  ``check_model(full_check=True)`` runs), on a view of the model in which weights are
  graph inputs of the same type: external data is checked above (the checker would look
  for it relative to the working directory) and large weights are not copied. Two checker
  rules are not applied: a main-graph value's tensor type without a ``shape`` (unknown
  rank, which onnxruntime accepts), and inference errors raised inside the function body
  of a standard ONNX op (ONNX's own expansion, e.g. MeanVarianceNormalization-13's). Ops
  or domains ONNX does not know are left to the frontend, which names them with
  ``unsupported_op``/``unknown_domain``. Both run in a worker process
  (``_checker_worker.py``): ONNX's C++ aborts or crashes on some invalid models, which
  is then a refusal naming the signal instead of a dead opbridge.
"""
from __future__ import annotations

import math
import os
import re
import threading
import time
from pathlib import Path
from typing import Any, Iterator

from ..table import budget
from ..table.errors import FrontendError

#: seconds the ONNX checker and shape inference may take (in their worker process)
CHECKER_TIMEOUT = 300.0
#: floating-point initializers at least this large (serialized) are weights: graph inputs in the checker's view
_WEIGHT_BYTES = 4096
_DIGITS = re.compile(r"[0-9]+")


def _fail(code: str, detail: str, where: str, node: str | None = None, op: str | None = None) -> FrontendError:
    return FrontendError(code, detail, node=node, op=op, where=where)


def _node_label(node: Any, i: int) -> str:
    return node.name or f"#{i}"


# ---------------------------------------------------------------------------- walking the model
def _attr_values(node: Any, kind: str) -> Iterator[Any]:
    """The values a node's attributes of ``kind`` (``GRAPH``, ``TENSOR``) hold, single or listed."""
    import onnx

    one, many = getattr(onnx.AttributeProto, kind), getattr(onnx.AttributeProto, kind + "S")
    field = {"GRAPH": ("g", "graphs"), "TENSOR": ("t", "tensors")}[kind]
    for a in node.attribute:
        if a.type == one:
            yield getattr(a, field[0])
        elif a.type == many:
            yield from getattr(a, field[1])


def _subgraphs(node: Any) -> Iterator[Any]:
    return _attr_values(node, "GRAPH")


def _attr_tensors(node: Any) -> Iterator[Any]:
    return _attr_values(node, "TENSOR")


# ---------------------------------------------------------------------------- versions & structure
def _check_versions(proto: Any, where: str) -> None:
    import onnx
    import onnx.defs

    if proto.ir_version > onnx.IR_VERSION:
        raise _fail("bad_model", f"IR version {proto.ir_version} is newer than the newest the installed onnx "
                    f"{onnx.__version__} knows ({onnx.IR_VERSION})", where)
    newest = onnx.defs.onnx_opset_version()
    try:
        known = dict(onnx.defs.C.schema_version_map())  # domain -> (oldest, newest) opset
    except Exception:  # noqa: BLE001 - not exposed by this onnx: the default domain is still checked
        known = {}
    seen: set[str] = set()
    for o in proto.opset_import:
        dom = o.domain or ""
        if dom in seen or (dom in ("", "ai.onnx") and ({"", "ai.onnx"} & seen)):
            raise _fail("bad_model", f"opset of domain {dom or 'ai.onnx'!r} imported twice", where)
        seen.add(dom)
        if dom in ("", "ai.onnx") and not 1 <= o.version <= newest:
            raise _fail("bad_model", f"opset {o.version} is outside the range the installed onnx "
                        f"{onnx.__version__} knows (1..{newest})", where)
        hi = known.get(dom, (None, None))[1]
        if dom not in ("", "ai.onnx") and hi is not None and not 1 <= o.version <= hi:
            raise _fail("bad_model", f"opset {o.version} of domain {dom!r} is outside the range the installed onnx "
                        f"{onnx.__version__} knows (1..{hi})", where)


def _check_outputs(g: Any, where: str) -> None:
    if not len(g.output):
        if not len(g.node):
            raise _fail("bad_model", "the graph is empty (no nodes, no outputs)", where)
        raise _fail("bad_model", "the graph has no outputs", where)
    seen: set[str] = set()
    for vo in g.output:
        if not vo.name:
            raise _fail("bad_model", "a graph output has no name", where)
        if vo.name in seen:
            raise _fail("bad_model", f"graph output {vo.name!r} is listed twice", where)
        seen.add(vo.name)


def _check_ssa(g: Any, where: str, what: str) -> None:
    """Every value of graph ``g`` has one producer: an input, an initializer or one node."""
    origin: dict[str, str] = {}
    for vi in g.input:
        if vi.name in origin:
            raise _fail("bad_model", f"{what}: input {vi.name!r} is listed twice", where)
        origin[vi.name] = "a graph input"
    inits: set[str] = set()
    for t in g.initializer:
        if t.name in inits:
            raise _fail("bad_model", f"{what}: initializer {t.name!r} is defined twice", where)
        inits.add(t.name)
        origin.setdefault(t.name, "an initializer")
    for i, node in enumerate(g.node):
        label = _node_label(node, i)
        if node.op_type == "Split" and (node.domain or "") in ("", "ai.onnx"):
            n_out = [a.i for a in node.attribute if a.name == "num_outputs"]
            if n_out and n_out[0] != len(node.output):
                raise _fail("bad_model", f"{what}: num_outputs {n_out[0]} but {len(node.output)} outputs", where,
                            node=label, op=node.op_type)
        for name in node.output:
            if not name:
                continue
            prev = origin.get(name)
            if prev is not None:
                raise _fail("bad_model", f"{what}: value {name!r} is written by this node and by {prev} "
                            "(a value has one producer)", where, node=label, op=node.op_type)
            origin[name] = f"node {label!r}"


def _check_function_recursion(proto: Any, where: str) -> None:
    funcs = {(f.domain, f.name): f for f in proto.functions}
    if not funcs:
        return

    def calls(nodes: Any) -> Iterator[tuple[str, str]]:
        for n in nodes:
            key = (n.domain or "", n.op_type)
            if key in funcs:
                yield key
            for sub in _subgraphs(n):
                yield from calls(sub.node)

    edges = {k: set(calls(f.node)) for k, f in funcs.items()}
    state: dict[tuple[str, str], int] = {}  # 1 on the stack, 2 done

    for root in edges:
        if state.get(root):
            continue
        stack = [(root, iter(edges[root]))]
        state[root] = 1
        while stack:
            key, it = stack[-1]
            nxt = next(it, None)
            if nxt is None:
                state[key] = 2
                stack.pop()
            elif state.get(nxt) == 1:
                cycle = [k for k, _ in stack][[k for k, _ in stack].index(nxt):] + [nxt]
                names = " -> ".join(f"{d + '.' if d else ''}{n}" for d, n in cycle)
                raise _fail("bad_model", f"model-local function calls itself ({names})", where, op=nxt[1])
            elif not state.get(nxt):
                state[nxt] = 1
                stack.append((nxt, iter(edges[nxt])))


# ---------------------------------------------------------------------------- tensors
def _bits(data_type: int) -> int | None:
    """Bits per element of a packed sub-byte type (int4, uint4, float4e2m1, int2, uint2), else None."""
    import onnx

    T = onnx.TensorProto
    for name, bits in (("INT4", 4), ("UINT4", 4), ("FLOAT4E2M1", 4), ("INT2", 2), ("UINT2", 2)):
        if getattr(T, name, None) == data_type:
            return bits
    return None


def _storage(t: Any, label: str, where: str, node: str | None) -> tuple[int, int | None]:
    """(elements, bytes of raw storage or None for strings) of tensor ``t``'s declared type and dims."""
    import onnx
    from onnx import helper

    T = onnx.TensorProto
    if t.data_type == T.UNDEFINED or t.data_type not in T.DataType.values():
        raise _fail("bad_model", f"{label} has an undefined element type ({t.data_type})", where, node=node)
    dims = list(t.dims)
    if any(d < 0 for d in dims):
        raise _fail("bad_model", f"{label} has a negative dimension in {tuple(dims)}", where, node=node)
    n = math.prod(dims)
    if t.data_type == T.STRING:
        budget.check_tensor(n, None, label, node=node, where=where)
        return n, None
    bits = _bits(t.data_type)
    if bits is not None:
        nbytes, itemsize = (n * bits + 7) // 8, 1
    else:
        try:
            itemsize = helper.tensor_dtype_to_np_dtype(t.data_type).itemsize
        except Exception:  # noqa: BLE001 - a type with no NumPy counterpart: the frontend names it
            return n, None
        nbytes = n * itemsize
    budget.check_tensor(n, itemsize, label, node=node, where=where)
    return n, nbytes


def _check_external(t: Any, label: str, nbytes: int | None, base_dir: Path, where: str, node: str | None) -> None:
    if nbytes is None:
        raise _fail("bad_model", f"{label}: external data of element type {t.data_type} (strings) is not supported",
                    where, node=node)
    info: dict[str, str] = {}
    for e in t.external_data:
        if e.key in info:
            raise _fail("bad_model", f"{label}: external data field {e.key!r} given twice", where, node=node)
        info[e.key] = e.value
    loc = info.get("location")
    if not loc:
        raise _fail("missing_external_data", f"{label} has external data without a location", where, node=node)
    if "\0" in loc:
        raise _fail("bad_model", f"{label}: external data location {loc!r} contains a NUL character", where, node=node)
    if os.path.isabs(loc) or loc.startswith(("/", "\\")) or re.match(r"^[A-Za-z]:", loc):
        raise _fail("bad_model", f"{label}: external data location {loc!r} is an absolute path "
                    "(it must be relative to the model's folder)", where, node=node)
    for key in ("offset", "length"):
        v = info.get(key)
        if v is not None and not _DIGITS.fullmatch(v.strip()):
            raise _fail("bad_model", f"{label}: external data {key} {v!r} is not a non-negative integer", where, node=node)
    offset = int(info.get("offset", "0").strip() or 0)
    if "length" in info and int(info["length"].strip()) != nbytes:
        raise _fail("bad_model", f"{label}: external data length {int(info['length'].strip())} does not match its "
                    f"dims {tuple(t.dims)} ({nbytes} bytes)", where, node=node)
    base = base_dir.resolve()
    try:
        file = (base / loc).resolve()
    except (OSError, RuntimeError, ValueError) as exc:
        raise _fail("bad_model", f"{label}: external data location {loc!r} cannot be resolved: {exc}", where,
                    node=node) from None
    if base not in file.parents:
        raise _fail("bad_model", f"{label}: external data path {loc!r} escapes the model's folder", where, node=node)
    if not file.is_file():
        raise _fail("missing_external_data", f"{label}: external data file {loc!r} not found next to the model",
                    where, node=node)
    size = file.stat().st_size
    if offset + nbytes > size:
        raise _fail("missing_external_data", f"{label}: external data file {loc!r} holds {size} bytes, the tensor "
                    f"needs {offset + nbytes} (offset {offset} + {nbytes})", where, node=node)


def _check_tensor(t: Any, label: str, base_dir: Path, where: str, node: str | None = None) -> bool:
    """Checks one tensor; returns whether its data is external."""
    import onnx

    _, nbytes = _storage(t, label, where, node)
    if t.data_location == onnx.TensorProto.EXTERNAL:
        _check_external(t, label, nbytes, base_dir, where, node)
        return True
    return False


# ---------------------------------------------------------------------------- the ONNX checker
def _checker_view(proto: Any) -> Any:
    """The model with its weights (external, or large floating-point or 8/16/4-bit initializers
    of the main graph: never shape data) turned into graph inputs of the same type: what the
    checker and inference need, and what fits the worker's memory cap however large the model."""
    import onnx

    T = onnx.TensorProto
    weight_types = {T.FLOAT, T.DOUBLE, T.FLOAT16, T.BFLOAT16, T.INT8, T.UINT8, T.INT16, T.UINT16, T.INT4, T.UINT4,
                    T.FLOAT8E4M3FN, T.FLOAT8E4M3FNUZ, T.FLOAT8E5M2, T.FLOAT8E5M2FNUZ}
    m = onnx.ModelProto()
    m.ir_version = proto.ir_version
    m.opset_import.extend(proto.opset_import)
    m.metadata_props.extend(proto.metadata_props)
    m.functions.extend(proto.functions)
    src, g = proto.graph, m.graph
    g.name = src.name or "main"
    g.node.extend(src.node)
    g.input.extend(src.input)
    g.output.extend(src.output)
    g.value_info.extend(src.value_info)
    g.sparse_initializer.extend(src.sparse_initializer)
    listed = {vi.name for vi in src.input}
    for t in src.initializer:
        if t.data_location == T.EXTERNAL or (t.data_type in weight_types and t.ByteSize() >= _WEIGHT_BYTES):
            if t.name not in listed:
                g.input.append(onnx.helper.make_tensor_value_info(t.name, t.data_type, list(t.dims)))
        else:
            g.initializer.append(t)
    return m


def _one_line(msg: str) -> str:
    return " ".join(msg.split())


_OP_AT = re.compile(r"\(op_type:([A-Za-z0-9_.]+)(?:, node name: ([^)]*))?\)")
_LEFT_TO_FRONTEND = ("No Op registered for", "No opset import for domain", "is not a registered function/op",
                     "No schema registered", "Unsupported domain", "not registered")


class _Worker:
    """The checker process (``_checker_worker.py``), started on first use and again after a crash."""

    def __init__(self) -> None:
        self.proc: Any = None
        self.lock = threading.Lock()

    def _start(self) -> Any:
        import subprocess
        import sys

        # -P / -I: the script's folder (which holds frontends/onnx.py) must not shadow the onnx package
        safe = "-P" if sys.version_info >= (3, 11) else "-I"
        return subprocess.Popen([sys.executable, safe, "-u", str(Path(__file__).with_name("_checker_worker.py"))],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)

    def _stop(self) -> None:
        if self.proc is not None:
            try:
                self.proc.kill()
                self.proc.wait()
            except OSError:
                pass
            self.proc = None

    def _read(self, n: int, deadline: float) -> bytes | None:
        import select

        fd, buf = self.proc.stdout.fileno(), b""
        while len(buf) < n:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                raise TimeoutError
            chunk = os.read(fd, n - len(buf))
            if not chunk:
                return None
            buf += chunk
        return buf

    def check(self, data: bytes) -> dict[str, Any]:
        """The worker's reply for a serialized view; ``{"crash": why}`` when it died on it."""
        import json

        with self.lock:
            if self.proc is None or self.proc.poll() is not None:
                self.proc = self._start()
            deadline = time.monotonic() + CHECKER_TIMEOUT
            try:
                self.proc.stdin.write(len(data).to_bytes(8, "little") + data)
                self.proc.stdin.flush()
                head = self._read(8, deadline)
                body = self._read(int.from_bytes(head, "little"), deadline) if head is not None else None
            except TimeoutError:
                self._stop()
                return {"crash": f"did not finish in {CHECKER_TIMEOUT:g} s"}
            except (BrokenPipeError, OSError):
                body = None
            if body is None:
                code = self.proc.wait()
                self.proc = None
                import signal

                why = (f"signal {signal.Signals(-code).name}" if code < 0 and -code in signal.Signals._value2member_map_
                       else f"exit status {code}")
                return {"crash": f"crashed on this model ({why})"}
            return json.loads(body)


_WORKER = _Worker()


def _run_checker(proto: Any, where: str) -> None:
    """The ONNX checker, then strict shape inference, on the model's weight-free view, in a
    worker process (``_checker_worker.py``): both abort or crash the process on some invalid
    models, which must be a refusal, not a dead opbridge. ``OPBRIDGE_CHECKER_IN_PROCESS=1``
    (or a failure to start the worker) runs them here instead."""
    import onnx.defs

    from ._checker_worker import check_view

    view = _checker_view(proto)
    reply: dict[str, Any] | None = None
    if not os.environ.get("OPBRIDGE_CHECKER_IN_PROCESS"):
        try:
            reply = _WORKER.check(view.SerializeToString())
        except OSError:
            reply = None  # no worker here (a sandbox without subprocesses): in process
    if reply is None:
        reply = check_view(view)
    if reply.get("ok"):
        return
    if "crash" in reply:
        raise _fail("bad_model", f"the ONNX checker/shape inference {reply['crash']}", where)
    msg = reply.get("message", "")
    if msg.startswith("MemoryError"):  # the worker's address-space cap (_checker_worker.MEMORY_MB)
        from ._checker_worker import MEMORY_MB

        raise _fail("bad_model", f"ONNX shape inference needs more than its {MEMORY_MB} MB: a value it computes "
                    "from the model's constants is too large (e.g. a Range or ConstantOfShape of a huge size)", where)
    if any(s in msg for s in _LEFT_TO_FRONTEND):
        return  # an op or domain ONNX does not know: the frontend names it with its own code
    if reply.get("stage") == "checker":
        m = re.search(r"Bad node spec for node\. Name:\s*(.*?)\s*OpType:\s*(\S+)", msg)
        reason = msg.split("==>")[0].strip().removeprefix("ValidationError: ")
        raise _fail("bad_model", f"ONNX checker: {reason}", where, node=(m.group(1) or None) if m else None,
                    op=m.group(2) if m else None)
    found = _OP_AT.findall(msg)
    if len(found) >= 2 and onnx.defs.has(found[0][0]):
        return  # an error inside the function body of a standard op: ONNX's expansion, not the model
    op, node = (found[-1][0], found[-1][1] or None) if found else (None, None)
    last = list(_OP_AT.finditer(msg))
    reason = msg[last[-1].end():].lstrip(": ") if last else msg.removeprefix("InferenceError: ")
    raise _fail("bad_model", f"ONNX shape inference: {reason or msg}", where, node=node, op=op)


# ---------------------------------------------------------------------------- entry point
def validate_model(proto: Any, base_dir: str | os.PathLike[str] = ".", path: str = "<model>",
                   checker: bool = True) -> None:
    """Refuse an invalid or over-budget model with a ``FrontendError`` (see the module doc)."""
    where = path
    base = Path(base_dir)
    _check_versions(proto, where)
    if not proto.HasField("graph"):
        raise _fail("bad_model", "the model has no graph", where)
    _check_outputs(proto.graph, where)
    _check_function_recursion(proto, where)
    nested_external = False

    def walk(g: Any, what: str, top: bool) -> None:
        nonlocal nested_external
        _check_ssa(g, where, what)
        for t in g.initializer:
            ext = _check_tensor(t, f"{what}: initializer {t.name!r}", base, where)
            nested_external |= ext and not top
        for i, node in enumerate(g.node):
            label = _node_label(node, i)
            for t in _attr_tensors(node):
                nested_external |= _check_tensor(t, f"{what}: tensor attribute of {node.op_type}", base, where, label)
            for sub in _subgraphs(node):
                walk(sub, f"subgraph {sub.name or '?'!r} of node {label!r}", False)

    walk(proto.graph, f"graph {proto.graph.name or 'main'!r}", True)
    for f in proto.functions:
        fake = type("F", (), {"input": [], "initializer": [], "node": f.node, "output": [], "value_info": []})
        walk(fake, f"function {f.name!r}", False)
    _check_constant_ranges(proto.graph, where)
    if checker and not nested_external:
        _run_checker(proto, where)


def _check_constant_ranges(g: Any, where: str) -> None:
    """A ``Range`` of constant start, limit and delta is held to the element budget before ONNX's
    shape inference, whose data propagation would build the values one by one up to its memory
    cap (6 s of a fuzz run's bomb, ``Range(0, 2**40)``) before failing."""
    import math

    from onnx import numpy_helper

    consts: dict[str, Any] = {}
    for t in g.initializer:
        if t.data_location != 1 and len(t.dims) <= 1 and math.prod(t.dims) == 1:
            consts[t.name] = t
    for node in g.node:
        if node.op_type == "Constant" and node.output:
            for a in node.attribute:
                if a.name == "value" and len(a.t.dims) <= 1 and math.prod(a.t.dims) == 1:
                    consts[node.output[0]] = a.t
    for i, node in enumerate(g.node):
        if node.op_type != "Range" or node.domain not in ("", "ai.onnx") or len(node.input) != 3 or \
                not all(x in consts for x in node.input):
            continue
        try:
            start, limit, delta = (float(numpy_helper.to_array(consts[x]).reshape(-1)[0]) for x in node.input)
        except Exception:  # noqa: BLE001 - an unreadable scalar: the checker names it
            continue
        if delta == 0 or not all(math.isfinite(v) for v in (start, limit, delta)):
            continue
        n = max(math.ceil((limit - start) / delta), 0)
        budget.check_tensor(n, None, f"Range from {start:g} to {limit:g} by {delta:g}", node=_node_label(node, i),
                            op="range", where=where)
