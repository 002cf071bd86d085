"""Prover of the ``ncnn`` column: writes the cell's snippet as the layer lines of an ncnn
``.param`` file, loads it in ``ncnn.Net`` (CPU, one thread) and runs it on the sample.

The snippet (one line, the one snippet grammar of translator/table/snippets.py) is one or more
segments separated by ``;``; each is a layer

    Type bottom... -> top... id=value... +weight...

or the directive ``batch {X},{Y}`` (below). ``Type`` is the ncnn layer type (``UnaryOp``,
``BinaryOp``, ``Convolution1D``...); bottoms and tops are blob names: an input port
placeholder (``{X}``, ``{inputs...}``), a blob of an earlier layer of the snippet, or the op's
output port names (``Y``, ``output``...): the proof extracts the op's outputs under those
names, in signature order (a variadic output port ``outputs`` as ``outputs_0``,
``outputs_1``...; the top ``outputs*N`` writes N of them). ``id=value`` is an ncnn
parameter: ``value`` is a literal or a small expression (no spaces) over ``{@attr}`` (the
node's attribute, else the signature default) and the input ports (their sample values),
with these helpers:

``at(v, i, default)``     ``v[i]``, or ``default`` when ``v`` is None or too short
``dflt(v, d)``            ``v``, or ``d`` when ``v`` is None
``pick(v, k0, v0, ...)``  the value paired with ``v`` (string enums: ``pick({@mode},'DCR',1,'CRD',0)``)
``isnone(v)`` ``lst(v)``  1 when ``v`` is None; ``v`` as a list of numbers ([] for None)
``prod(v)`` ``chars(s)``  the product of ``v``; the character codes of ``s``
``W(x) H(x) D(x) C(x)``   the ncnn w/h/d/c extent of the input ``x`` as the proof feeds it (-233 absent)
``sw(v) sh(v) sd(v) sc(v)``  the w/h/d/c entry of the shape vector ``v`` (-233 absent)
``order(perm, rank)``     ONNX ``perm`` as Permute's order_type
``lead(s, r)`` ``reps(s, t)``  ``s`` with leading 1s up to rank r; Tile repeats broadcasting ``s`` to ``t``
``padv(pads, side)``      ONNX ``pads`` as Padding's ``'top'``, ``'left'``, ``'front'``... amount
``f(v)``                  ``float(v)`` (an ncnn float parameter must be written as a float)
``len``, ``int``, ``min``, ``max``, ``abs``, ``sum``, ``list``, ``range``; ``x.shape``, ``x.size``

A list value is written as an ncnn array parameter (``-23300-id=n,v...``). ``+{port}``
appends that input's values (float32) to the layer's weights in the ``.bin`` (the layers'
raw ``load(n, 1)`` weights: norms' gamma/beta, BatchNorm's statistics); ``+0:{port}`` writes
a ``load(n, 0)`` weight (a 4-byte raw-float32 tag first: convolution kernels). An input used
as a bottom is an ``Input`` blob, or a ``MemoryData`` blob when the sample makes it a
constant. A blob read by several layers goes through a ``Split`` layer, as ncnn's
converters write it (an ncnn blob has one consumer).

Layout: an ncnn blob has at most 4 dimensions and no batch: a sample tensor of shape
(2, 3, 4) is fed as c=2, h=3, w=4 (every dimension kept, so the ONNX-like axes equal the
ncnn axes, both counted from the outermost). ``batch {X}`` marks inputs whose first
dimension is the batch of an NC... tensor (conv, pooling, norms over channels): that
dimension is dropped from the blob and the net runs once per batch item, the outputs
stacked, which is how an ncnn program runs a batch (the parameters then see one item:
``C({X})`` is its channel count). Every blob is float32 (ncnn's blob interface), so the
column's float cells are constrained to float32; an op whose reference output is bool gets
ncnn's 0/1 float mask, checked to hold only 0 and 1 before it is read as bool. An ncnn
result that drops or adds size-1 dimensions (a global pooling's 1-D blob of channels) is
read in the reference's shape when the other dimensions agree.

``provable`` requires every name of the cell to be the type of some layer of the snippet,
and ``run`` checks that the loaded net has those layer types.
"""
from __future__ import annotations

import ast
import os
import re
import tempfile
from typing import Any

import numpy as np

from . import ProofError, dist_version, importable, sample_node

API = "ncnn"
EXTRA = "ncnn"


def missing() -> str | None:
    return importable("ncnn", hint="pip install 'opbridge[ncnn]'")


def version() -> str:
    return dist_version("ncnn") or "ncnn (unknown version)"


def resolves(name: str) -> bool:
    """A layer type registered in the installed ncnn (``ncnn.layer_to_index``)."""
    try:
        import ncnn
    except Exception:  # noqa: BLE001
        return False
    return bool(re.fullmatch(r"[A-Za-z0-9]+", name or "")) and ncnn.layer_to_index(name) >= 0


def segments(text: str) -> list[str]:
    return [t.strip() for t in text.split(";") if t.strip()]


def provable(op, cell) -> bool:
    text = getattr(cell, "snippet", None)
    if not text or op.signature is None:
        return False
    types = {layer.split()[0] for layer in segments(text) if layer.split()[0] != "batch"}
    return all(n in types for n in cell.names)


# --------------------------------------------------------------------------- expressions
def _at(v, i, default=None):
    if v is None:
        return default
    v = list(np.asarray(v).reshape(-1).tolist()) if not isinstance(v, (list, tuple)) else list(v)
    return v[i] if -len(v) <= i < len(v) else default


def _pick(v, *pairs):
    for k, val in zip(pairs[::2], pairs[1::2]):
        if v == k:
            return val
    raise ProofError(f"no ncnn value for {v!r} (known: {list(pairs[::2])})")


def _extent(k):
    def get(x):
        shape = np.asarray(x).shape
        r = len(shape)
        order = {1: "w", 2: "hw", 3: "chw", 4: "cdhw"}.get(r, "")
        return int(shape[order.index(k)]) if k in order else -233
    return get


def _isnone(v):
    return 1 if v is None else 0


def _lst(v):
    if v is None:
        return []
    return [int(x) if float(x).is_integer() else float(x) for x in np.asarray(v).reshape(-1).tolist()]


def _prod(v):
    return int(np.prod(_lst(v))) if v is not None else 1


def _chars(text):
    return [ord(ch) for ch in str(text)]


#: Permute order types by rank (operators.md#permute), named innermost first as ncnn does
_ORDERS = {2: ["WH", "HW"], 3: ["WHC", "HWC", "WCH", "CWH", "HCW", "CHW"],
           4: ["WHDC", "HWDC", "WDHC", "DWHC", "HDWC", "DHWC", "WHCD", "HWCD", "WCHD", "CWHD", "HCWD", "CHWD",
               "WDCH", "DWCH", "WCDH", "CWDH", "DCWH", "CDWH", "HDCW", "DHCW", "HCDW", "CHDW", "DCHW", "CDHW"]}


def _order(perm, rank):
    """ONNX ``perm`` (output dim i is input dim perm[i], outermost first) as a Permute order_type."""
    letters = {2: "HW", 3: "CHW", 4: "CDHW"}[int(rank)]
    perm = list(range(int(rank)))[::-1] if perm is None else [int(p) % int(rank) for p in perm]
    return _ORDERS[int(rank)].index("".join(letters[p] for p in reversed(perm)))


def _padv(pads, side):
    """ONNX ``pads`` (begins then ends, outermost first) as the Padding side ``side``."""
    v = _lst(pads)
    r = len(v) // 2
    dims = {1: "w", 2: "hw", 3: "chw", 4: "cdhw"}[r]
    which = {"top": ("h", 0), "bottom": ("h", 1), "left": ("w", 0), "right": ("w", 1),
             "front": ("c" if r == 3 else "d", 0), "behind": ("c" if r == 3 else "d", 1)}
    if r == 4 and (v[0] or v[4]):
        raise ProofError("Padding cannot pad the channel dimension of a 4-D blob")
    d, end = which[side]
    return v[dims.index(d) + end * r] if d in dims else 0


def _sdim(k):
    def get(v):
        v = _lst(v)
        order = {1: "w", 2: "hw", 3: "chw", 4: "cdhw"}.get(len(v), "")
        return v[order.index(k)] if k in order else -233
    return get


def _lead(shape, r):
    """``shape`` with 1s in front up to rank ``r`` (numpy broadcasting's alignment)."""
    v = _lst(shape)
    return [1] * (int(r) - len(v)) + v


def _reps(shape, target):
    """Tile repeats broadcasting ``shape`` to ``target`` (both aligned to the longer rank)."""
    r = max(len(_lst(shape)), len(_lst(target)))
    return [t if s == 1 else 1 for s, t in zip(_lead(shape, r), _lead(target, r))]


def _dflt(v, d):
    return d if v is None else v


_FUNCS = {"lead": _lead, "reps": _reps, "dflt": _dflt, "isnone": _isnone, "lst": _lst, "prod": _prod,
          "chars": _chars, "order": _order, "padv": _padv, "at": _at, "pick": _pick,
          "sw": _sdim("w"), "sh": _sdim("h"), "sd": _sdim("d"), "sc": _sdim("c"),
          "W": _extent("w"), "H": _extent("h"), "D": _extent("d"), "C": _extent("c"),
          "f": float, "len": len, "int": int, "min": min, "max": max, "abs": abs, "sum": sum, "list": list,
          "range": range}
_NODES = (ast.Expression, ast.Constant, ast.List, ast.Tuple, ast.UnaryOp, ast.USub, ast.UAdd, ast.BinOp,
          ast.Add, ast.Sub, ast.Mult, ast.Div, ast.FloorDiv, ast.Mod, ast.Subscript, ast.Call, ast.Name, ast.Load,
          ast.Slice, ast.Attribute)


def evaluate(expr: str, env: dict[str, Any]) -> Any:
    tree = ast.parse(expr, mode="eval")
    for n in ast.walk(tree):
        if not isinstance(n, _NODES):
            raise ProofError(f"{expr!r}: {type(n).__name__} is not allowed in an ncnn parameter")
        if isinstance(n, ast.Attribute) and n.attr not in ("shape", "size", "ndim"):
            raise ProofError(f"{expr!r}: attribute {n.attr!r} is not allowed")
        if isinstance(n, ast.Name) and n.id not in env and n.id not in _FUNCS and n.id != "None":
            raise ProofError(f"{expr!r}: unknown name {n.id!r}")
    return eval(compile(tree, "<ncnn param>", "eval"), {"__builtins__": {}}, {**_FUNCS, **env})  # noqa: S307


def _num(v) -> str:
    if isinstance(v, (bool, np.bool_)):
        return str(int(v))
    if isinstance(v, (int, np.integer)):
        return str(int(v))
    if isinstance(v, (float, np.floating)):
        s = repr(float(v))
        return s if ("." in s or "e" in s or "inf" in s or "nan" in s) else s + ".0"
    raise ProofError(f"ncnn parameter value {v!r} is neither a number nor a list of numbers")


def param_entry(key: int, v) -> str:
    if isinstance(v, np.ndarray):
        v = v.tolist()
    if isinstance(v, (list, tuple)):
        vals = list(v)
        return f"{-23300 - key}={','.join([str(len(vals))] + [_num(x) for x in vals])}"
    return f"{key}={_num(v)}"


# --------------------------------------------------------------------------- snippet expansion
class _Binder:
    def value(self, v) -> str:
        return "None" if v is None else v.name

    def attr(self, name: str, value: Any) -> str:
        return _lit(value)

    def dtype(self, dtype_id: str) -> str:
        raise ProofError(f"an ncnn snippet has no dtype spelling ({dtype_id})")


def _lit(v: Any) -> str:
    if isinstance(v, (list, tuple)):
        return "[" + ",".join(_lit(x) for x in v) + "]"
    if isinstance(v, str):
        return repr(v)
    if isinstance(v, np.ndarray):
        return _lit(v.tolist())
    if isinstance(v, float):
        return repr(v)
    return repr(v)


def _blob(x: np.ndarray) -> np.ndarray:
    a = np.ascontiguousarray(np.asarray(x), dtype=np.float32)
    if a.ndim == 0:
        a = a.reshape(1)
    if a.ndim > 4:
        raise ProofError(f"an ncnn blob has at most 4 dimensions (got shape {a.shape})")
    return a


def _expand(op, cell, sample) -> tuple[str, list[str]]:
    """The snippet filled in for the sample: (layer lines, the inputs named by ``batch``)."""
    from ..table.snippets import SnippetError, expand

    try:
        text = expand(cell.snippet, sample_node(op, sample, "x"), op, _Binder())
    except SnippetError as e:
        raise ProofError(str(e)) from e
    text = text.replace(", ", ",")
    segs = segments(text)
    batched = [b for seg in segs if seg.split()[0] == "batch" for t in seg.split()[1:] for b in t.split(",") if b]
    return ";".join(seg for seg in segs if seg.split()[0] != "batch"), batched


def _build(op, cell, sample, feeds: dict[str, np.ndarray],
           env: dict[str, Any]) -> tuple[str, bytes, list[str], list[str]]:
    """(.param text, .bin bytes, input blob names, output blob names)."""
    text, _ = _expand(op, cell, sample)
    consts = {f"x{i}" for i in (sample.const or ())}
    weights = bytearray()
    defined: set[str] = set()
    used: list[str] = []
    layers: list[list] = []  # [type, name, bottoms, tops, params]
    for k, layer in enumerate(segments(text.replace(", ", ","))):
        toks = layer.split()
        if "->" not in toks:
            raise ProofError(f"layer {layer!r}: no '->' between bottoms and tops")
        ltype = toks[0]
        arrow = toks.index("->")
        bottoms = [b for t in toks[1:arrow] for b in t.split(",") if b]
        rest = toks[arrow + 1:]
        tops = []
        for t in rest:
            if "=" in t or t.startswith("+"):
                continue
            if "*" in t:  # ``name*N``: N tops name_0 .. name_{N-1} (a variadic output)
                stem, n = t.split("*", 1)
                tops += [f"{stem}_{i}" for i in range(int(evaluate(n, env)))]
            else:
                tops.append(t)
        params = []
        for t in rest:
            if t.startswith("+"):
                tagged = t.startswith("+0:")  # a ``load(n, 0)`` weight: a 4-byte tag (0: raw float32) first
                name = t[3:] if tagged else t[1:]
                if name not in feeds:
                    raise ProofError(f"weight {t!r}: no such input")
                if tagged:
                    weights += b"\0\0\0\0"
                weights += np.ascontiguousarray(feeds[name], dtype="<f4").tobytes()
            elif "=" in t:
                key, expr = t.split("=", 1)
                params.append(param_entry(int(key), evaluate(expr, env)))
        for b in bottoms:
            if b not in defined and b not in used:
                used.append(b)
        layers.append([ltype, f"l{k}_{ltype.lower()}", bottoms, tops, params])
        defined.update(tops)
    outs = []
    for p in op.signature.outputs:
        if p.name in defined:
            outs.append(p.name)
        else:  # a variadic output: its values are the blobs ``name_0``, ``name_1``...
            pat = re.compile(re.escape(p.name) + r"_(\d+)")
            many = sorted((int(m.group(1)), b) for b in defined if (m := pat.fullmatch(b)))
            outs += [b for _, b in many]
    if not outs:
        raise ProofError(f"the snippet makes none of {op.id}'s outputs ({[p.name for p in op.signature.outputs]})")
    inputs: list[str] = []
    head: list[list] = []
    bin_head = bytearray()
    for b in used:
        if b not in feeds:
            raise ProofError(f"blob {b!r} is neither an input nor made by an earlier layer")
        a = feeds[b]
        if b in consts:
            shape = {1: (a.shape[0],), 2: (a.shape[1], a.shape[0]), 3: (a.shape[2], a.shape[1], 0, a.shape[0]),
                     4: (a.shape[3], a.shape[2], a.shape[1], a.shape[0])}[a.ndim]
            ps = [f"{kk}={v}" for kk, v in zip((0, 1, 11, 2), shape) if v]
            head.append(["MemoryData", f"c_{b}", [], [b], ps])
            bin_head += np.ascontiguousarray(a, dtype="<f4").tobytes()
        else:
            head.append(["Input", f"in_{b}", [], [b], []])
            inputs.append(b)
    # an ncnn blob has one consumer: a blob read several times goes through a Split layer
    # (as ncnn's converters write it); an extracted output counts as a reader
    order = head + layers
    readers: dict[str, int] = {}
    for lay in order:
        for b in lay[2]:
            readers[b] = readers.get(b, 0) + 1
    for o in outs:
        readers[o] = readers.get(o, 0) + 1
    final: list[list] = []
    copies: dict[str, list[str]] = {}
    for lay in order:
        lay[2] = [copies[b].pop(0) if b in copies else b for b in lay[2]]
        final.append(lay)
        for t in lay[3]:
            if readers.get(t, 0) > 1:
                copies[t] = [f"{t}_sp{i}" for i in range(readers[t])]
                final.append(["Split", f"split_{t}", [t], list(copies[t]), []])
    outs = [copies[o].pop(0) if o in copies else o for o in outs]
    lines = [" ".join([t, n, str(len(bs)), str(len(ts)), *bs, *ts, *ps]) for t, n, bs, ts, ps in final]
    nblobs = len({b for lay in final for b in lay[2] + lay[3]})
    param = "7767517\n" + f"{len(lines)} {nblobs}\n" + "\n".join(lines) + "\n"
    return param, bytes(bin_head + weights), inputs, outs


def fp32_net() -> Any:
    """An empty ``ncnn.Net`` on the CPU, one thread, fp32 end to end (no fp16/bf16 storage or
    arithmetic): how the proofs, and the node-test peer pnnx's files, are run."""
    import ncnn

    net = ncnn.Net()
    net.opt.use_vulkan_compute = False
    net.opt.num_threads = 1
    for flag in ("use_fp16_storage", "use_fp16_arithmetic", "use_fp16_packed", "use_bf16_storage", "use_bf16_packed"):
        if hasattr(net.opt, flag):
            setattr(net.opt, flag, False)
    return net


def open_net(param_path: str, bin_path: str, threads: int = 1) -> Any:
    """An ``ncnn.Net`` of the two files, fp32 on the CPU (a refusal of either file raises)."""
    net = fp32_net()
    net.opt.num_threads = threads
    if net.load_param(str(param_path)) != 0:
        raise ValueError(f"ncnn rejected {os.path.basename(param_path)}")
    if net.load_model(str(bin_path)) != 0:
        raise ValueError(f"ncnn rejected {os.path.basename(bin_path)}")
    return net


def extract(net: Any, feeds: dict[str, np.ndarray], blobs: list[str]) -> list[np.ndarray]:
    """Feed ``feeds`` (blob → array in the blob's shape) to ``net`` and read ``blobs`` back
    (a RuntimeError names a blob ncnn could not compute)."""
    import ncnn

    ex = net.create_extractor()
    mats = [ncnn.Mat(np.ascontiguousarray(a, dtype=np.float32).reshape(a.shape if a.ndim else (1,))).clone()
            for a in feeds.values()]  # own, aligned copies: in-place layers write them
    for b, m in zip(feeds, mats):
        ex.input(b, m)
    res = []
    for o in blobs:
        rc, m = ex.extract(o)
        if rc != 0:
            raise RuntimeError(f"ncnn failed computing blob {o!r} (rc={rc})")
        res.append(np.array(m, copy=True))
        del m
    del ex, mats
    return res


def _run_once(op, cell, sample, feeds: dict[str, np.ndarray], env: dict[str, Any]) -> list[np.ndarray]:
    param, weights, inputs, outs = _build(op, cell, sample, feeds, env)
    with tempfile.TemporaryDirectory(prefix="opbridge-ncnn-") as d:
        pp, bp = os.path.join(d, "op.param"), os.path.join(d, "op.bin")
        with open(pp, "w") as fh:
            fh.write(param)
        with open(bp, "wb") as fh:
            fh.write(weights)
        net = fp32_net()
        if net.load_param(pp) != 0:
            raise ProofError(f"ncnn rejected the .param:\n{param}")
        if net.load_model(bp) != 0:  # also creates the layers' pipelines (needed even without weights)
            raise ProofError(f"ncnn rejected the .bin of:\n{param}")
        types = {layer.type for layer in net.layers()}
        lost = [n for n in cell.names if n not in types]
        if lost:
            raise ProofError(f"the loaded net has no layer of type {lost}: {sorted(types)}")
        try:
            res = extract(net, {b: feeds[b] for b in inputs}, outs)
        except RuntimeError as e:
            raise ProofError(f"{e} from:\n{param}") from e
        net.clear()
    return res


def _fit(got: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """ncnn's blob has no batch and at most 4 dims: read it in the reference's shape when the
    two shapes agree up to size-1 dimensions (the same row-major element order)."""
    if got.shape == tuple(shape):
        return got
    if [d for d in got.shape if d != 1] == [d for d in shape if d != 1]:
        return got.reshape(shape)
    return got


def run(op, cell, sample) -> list[np.ndarray]:
    from .. import reference

    with np.errstate(all="ignore"):
        ref = reference.get(op.id)(*sample.inputs, **sample.attrs)
    ref = list(ref) if isinstance(ref, tuple) else [ref]
    if sample.outputs is not None:
        ref = ref[: sample.outputs]
    feeds = {f"x{i}": _blob(x) for i, x in enumerate(sample.inputs) if x is not None}
    env = {f"x{i}": np.asarray(x) for i, x in enumerate(sample.inputs) if x is not None}
    _, batched = _expand(op, cell, sample)
    try:
        if batched:
            sizes = {env[b].shape[0] for b in batched if b in env}
            if len(sizes) != 1:
                raise ProofError(f"the batched inputs {batched} disagree on the batch size ({sizes})")
            per = []
            for n in range(sizes.pop()):
                f, e = dict(feeds), dict(env)
                for b in batched:
                    f[b], e[b] = _blob(env[b][n]), env[b][n]
                per.append(_run_once(op, cell, sample, f, e))
            outs = [np.stack([p[k] for p in per]) for k in range(len(per[0]))]
        else:
            outs = _run_once(op, cell, sample, feeds, env)
    except ProofError:
        raise
    except Exception as e:  # noqa: BLE001 - the runtime's rejection is the proof's result
        raise ProofError(f"ncnn failed: {type(e).__name__}: {e}") from e
    res = []
    for g, e in zip(outs, ref):
        e = np.asarray(e)
        g = _fit(g, e.shape)
        if e.dtype.kind == "b":
            if not np.isin(g, (0.0, 1.0)).all():
                raise ProofError(f"{op.id}: the 0/1 mask holds other values: {np.unique(g)[:8]}")
            g = g != 0
        elif e.dtype != g.dtype and e.dtype.kind == "f":
            g = g.astype(e.dtype)
        res.append(g)
    return res
