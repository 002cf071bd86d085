"""Seeded hostile and broken inputs for the CLI: one ``Case`` per (model file, command).

Four families, each a list of generators drawn from one ``random.Random(seed)``:

* ``corrupt``: a valid model's bytes flipped, truncated, padded, emptied or replaced;
* ``mutate``: a valid model's graph edited into an invalid or unusual one (attribute
  values, dtypes, shapes, wiring, duplicate producers/outputs, IR/opset versions,
  external-data fields, recursive local functions, Loop bodies);
* ``hostile``: valid models whose every name (tensors, nodes, graph, doc strings,
  producer, metadata, the file name) tries to break out of a literal, fake terminal
  output, collide case-insensitively or hit a runtime's reserved word;
* ``bomb``: resource bombs (Range/ConstantOfShape/Expand/Tile/Loop/declared inputs of
  2^40 elements).

Every payload that would execute writes a canary file named ``PWNED`` in the case's
folder, so code execution is a file the runner can see.
"""
from __future__ import annotations

import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from translator.compile.target import names

ROOT = Path(__file__).resolve().parents[2]
TINY_CNN = ROOT / "examples" / "models" / "tiny_cnn.onnx"
TARGETS = tuple(names(include_reference=False))
OPSET = 17

#: breaks out of a literal / a comment / a docstring if spliced raw; all touch ./PWNED
PAYLOADS = (
    '"""\n__import__("os").system("touch PWNED")\n"""',
    "x'); __import__('os').system('touch PWNED'); ('",
    'x"); __import__("os").system("touch PWNED") #',
    "\\\n__import__('os').system('touch PWNED')",
    "y\x1b[2J\x1b[H\nFAKE: ok",
    "\u202eevil\u2028__import__('os').system('touch PWNED')",
    "{{ 7*7 }}{% raw %}",
    "a" * 3000,
)
RESERVED = ("tuple", "self", "class", "input", "__init__", "np", "tf", "torch", "mb", "ops", "W", "w", "os", "sys",
            "lambda", "None", "True", "forward", "build", "main", "print", "serving_default")


@dataclass
class Case:
    """One run: write ``files`` into a fresh folder, then run ``argv`` (``{model}`` and
    ``{out}`` replaced by paths in that folder)."""

    id: str
    family: str
    files: dict[str, bytes]
    model: str
    argv: list[str]
    target: str | None = None
    notes: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


# ----------------------------------------------------------------------------- valid bases
def _vi(name: str, dtype: int, shape: list[Any]) -> Any:
    return helper.make_tensor_value_info(name, dtype, shape)


def _model(nodes: list[Any], inputs: list[Any], outputs: list[Any], inits: list[Any] = (), name: str = "g",
           opset: int = OPSET, **kw: Any) -> onnx.ModelProto:
    g = helper.make_graph(nodes, name, inputs, outputs, initializer=list(inits))
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], **kw)


def base_relu(rng: random.Random) -> onnx.ModelProto:
    return _model([helper.make_node("Relu", ["x"], ["h"], name="r"), helper.make_node("Neg", ["h"], ["y"], name="n")],
                  [_vi("x", TensorProto.FLOAT, [2, 3])], [_vi("y", TensorProto.FLOAT, [2, 3])])


def base_cnn(rng: random.Random) -> onnx.ModelProto:
    return onnx.load(str(TINY_CNN))


def base_shape(rng: random.Random) -> onnx.ModelProto:
    shape = numpy_helper.from_array(np.array([3, 4], np.int64), "shape")
    idx = numpy_helper.from_array(np.array([0, 2], np.int64), "idx")
    nodes = [helper.make_node("Reshape", ["x", "shape"], ["r"], name="reshape"),
             helper.make_node("Transpose", ["r"], ["t"], perm=[1, 0], name="transpose"),
             helper.make_node("Gather", ["t", "idx"], ["g"], axis=0, name="gather"),
             helper.make_node("Concat", ["g", "g"], ["c"], axis=1, name="concat"),
             helper.make_node("Softmax", ["c"], ["y"], axis=-1, name="softmax")]
    return _model(nodes, [_vi("x", TensorProto.FLOAT, [2, 6])], [_vi("y", TensorProto.FLOAT, [2, 6])], [shape, idx])


def base_matmul(rng: random.Random) -> onnx.ModelProto:
    w = numpy_helper.from_array(np.arange(12, dtype=np.float32).reshape(4, 3) / 10, "w")
    b = numpy_helper.from_array(np.ones(3, np.float32), "b")
    nodes = [helper.make_node("MatMul", ["x", "w"], ["m"], name="mm"), helper.make_node("Add", ["m", "b"], ["a"], name="add"),
             helper.make_node("Tanh", ["a"], ["y"], name="tanh")]
    return _model(nodes, [_vi("x", TensorProto.FLOAT, [2, 4])], [_vi("y", TensorProto.FLOAT, [2, 3])], [w, b])


def base_pad_slice(rng: random.Random) -> onnx.ModelProto:
    c = lambda n, v: numpy_helper.from_array(np.array(v, np.int64), n)  # noqa: E731
    nodes = [helper.make_node("Pad", ["x", "pads"], ["p"], mode="constant", name="pad"),
             helper.make_node("Slice", ["p", "starts", "ends", "axes", "steps"], ["s"], name="slice"),
             helper.make_node("MaxPool", ["s"], ["y"], kernel_shape=[2, 2], strides=[1, 1], name="pool")]
    return _model(nodes, [_vi("x", TensorProto.FLOAT, [1, 2, 4, 4])], [_vi("y", TensorProto.FLOAT, None)],
                  [c("pads", [0, 0, 1, 1, 0, 0, 1, 1]), c("starts", [1, 1]), c("ends", [5, 5]), c("axes", [2, 3]),
                   c("steps", [1, 1])])


def base_loop(rng: random.Random) -> onnx.ModelProto:
    body = helper.make_graph([helper.make_node("Add", ["acc_in", "one"], ["acc_out"], name="inc"),
                              helper.make_node("Identity", ["cond_in"], ["cond_out"], name="keep")], "body",
                             [_vi("i", TensorProto.INT64, []), _vi("cond_in", TensorProto.BOOL, []),
                              _vi("acc_in", TensorProto.FLOAT, [2])],
                             [_vi("cond_out", TensorProto.BOOL, []), _vi("acc_out", TensorProto.FLOAT, [2])],
                             initializer=[numpy_helper.from_array(np.ones(2, np.float32), "one")])
    nodes = [helper.make_node("Loop", ["trip", "cond", "x"], ["y"], body=body, name="loop")]
    return _model(nodes, [_vi("x", TensorProto.FLOAT, [2])], [_vi("y", TensorProto.FLOAT, [2])],
                  [numpy_helper.from_array(np.array(5, np.int64), "trip"),
                   numpy_helper.from_array(np.array(True), "cond")])


def base_int(rng: random.Random) -> onnx.ModelProto:
    nodes = [helper.make_node("Add", ["a", "b"], ["s"], name="add"), helper.make_node("Cast", ["s"], ["f"], to=TensorProto.FLOAT, name="cast"),
             helper.make_node("Where", ["c", "f", "f"], ["y"], name="where")]
    return _model(nodes, [_vi("a", TensorProto.INT64, [3]), _vi("b", TensorProto.INT64, [3]),
                          _vi("c", TensorProto.BOOL, [3])], [_vi("y", TensorProto.FLOAT, [3])])


BASES: tuple[Callable[[random.Random], onnx.ModelProto], ...] = (base_relu, base_cnn, base_shape, base_matmul,
                                                                 base_pad_slice, base_loop, base_int)


# ----------------------------------------------------------------------------- commands
def _command(rng: random.Random, i: int) -> tuple[list[str], str | None]:
    r = rng.random()
    if r < 0.78:
        t = TARGETS[i % len(TARGETS)]
        return ["convert", "{model}", "--to", t, "-o", "{out}", "--json"], t
    if r < 0.9:
        return ["report", "{model}", "--json"], None
    t = TARGETS[i % len(TARGETS)]
    return ["check", "{model}", "--backends", f"numpy,{t}", "--json"], t


def _bytes(m: onnx.ModelProto) -> bytes:
    return m.SerializeToString()


# ----------------------------------------------------------------------------- corrupt
def corrupt(rng: random.Random) -> tuple[dict[str, bytes], str]:
    data = bytearray(_bytes(rng.choice(BASES)(rng)))
    how = rng.choice(["flip", "flip", "truncate", "pad", "empty", "garbage", "text", "prefix"])
    if how == "flip":
        for _ in range(rng.randint(1, 24)):
            data[rng.randrange(len(data))] = rng.randrange(256)
    elif how == "truncate":
        data = data[: rng.randrange(1, len(data))]
    elif how == "pad":
        data += bytes(rng.randrange(256) for _ in range(rng.randint(1, 64)))
    elif how == "empty":
        data = bytearray()
    elif how == "garbage":
        data = bytearray(rng.randrange(256) for _ in range(rng.randint(1, 4096)))
    elif how == "text":
        data = bytearray(b'{"graph": {"node": []}}\n')
    else:
        data = bytearray(b"\x0a\xff\xff\xff\xff\x0f") + data
    return {"model.onnx": bytes(data)}, how


# ----------------------------------------------------------------------------- mutate
_INT_VALUES = (0, -1, -2, 2 ** 31, -(2 ** 31), 2 ** 40, 7, 1 << 62)


def _mut_attr(m: onnx.ModelProto, rng: random.Random) -> str:
    nodes = [n for n in m.graph.node if n.attribute]
    if not nodes:
        return "no attribute"
    n = rng.choice(nodes)
    a = rng.choice(list(n.attribute))
    if a.type == onnx.AttributeProto.INT:
        a.i = rng.choice(_INT_VALUES)
    elif a.type == onnx.AttributeProto.INTS:
        vals = list(a.ints)
        choice = rng.random()
        if choice < 0.4 and vals:
            vals[rng.randrange(len(vals))] = rng.choice(_INT_VALUES)
        elif choice < 0.7:
            vals = vals[:-1] if vals else [0]
        else:
            vals = vals + [rng.choice(_INT_VALUES)]
        del a.ints[:]
        a.ints.extend(vals)
    elif a.type == onnx.AttributeProto.FLOAT:
        a.f = rng.choice([float("nan"), float("inf"), -1e38, 0.0])
    elif a.type == onnx.AttributeProto.STRING:
        a.s = rng.choice([b"", b"bogus", b"\x00\xff"])
    else:  # a graph or tensor: change its type tag, the value is then missing
        a.type = onnx.AttributeProto.FLOAT
    return f"attribute {n.op_type}.{a.name}"


def _mut_dtype(m: onnx.ModelProto, rng: random.Random) -> str:
    vals = list(m.graph.input) + list(m.graph.output)
    v = rng.choice(vals)
    v.type.tensor_type.elem_type = rng.choice([0, 8, 16, 10, 99, 23, 2])
    return f"dtype of {v.name}"


def _mut_shape(m: onnx.ModelProto, rng: random.Random) -> str:
    v = rng.choice(list(m.graph.input))
    dims = v.type.tensor_type.shape.dim
    if not dims:
        return "rank 0"
    d = dims[rng.randrange(len(dims))]
    choice = rng.choice(["zero", "neg", "huge", "sym", "drop"])
    if choice == "zero":
        d.dim_value = 0
    elif choice == "neg":
        d.dim_value = -3
    elif choice == "huge":
        d.dim_value = 2 ** 40
    elif choice == "sym":
        d.dim_param = "N"
    else:
        del dims[-1]
    return f"shape of {v.name}: {choice}"


def _mut_wiring(m: onnx.ModelProto, rng: random.Random) -> str:
    g = m.graph
    n = rng.choice(list(g.node))
    choice = rng.choice(["undefined_input", "drop_input", "extra_input", "self_loop", "op_type", "domain",
                         "dup_producer", "dup_output", "no_outputs", "empty_graph", "cycle"])
    if choice == "undefined_input" and n.input:
        n.input[rng.randrange(len(n.input))] = "nowhere"
    elif choice == "drop_input" and n.input:
        del n.input[-1]
    elif choice == "extra_input":
        n.input.append(g.input[0].name)
    elif choice == "self_loop" and n.input and n.output:
        n.input[0] = n.output[0]
    elif choice == "op_type":
        n.op_type = rng.choice(["Conv", "Gemm", "Split", "TopK", "NonExistentOp", "Loop", "If", "Resize", "Einsum"])
    elif choice == "domain":
        n.domain = rng.choice(["com.evil", "ai.onnx.ml", "com.microsoft"])
    elif choice == "dup_producer":
        g.node.append(onnx.NodeProto(op_type="Identity", input=[g.input[0].name], output=[n.output[0]], name="dup"))
    elif choice == "dup_output":
        g.output.append(g.output[0])
    elif choice == "no_outputs":
        del g.output[:]
    elif choice == "empty_graph":
        del g.node[:]
    elif choice == "cycle" and len(g.node) >= 2 and g.node[0].input:
        g.node[0].input[0] = g.node[-1].output[0]
    return f"wiring: {choice}"


def _mut_versions(m: onnx.ModelProto, rng: random.Random) -> str:
    choice = rng.choice(["ir99", "ir1", "opset99", "opset1", "no_opset", "dup_opset"])
    if choice == "ir99":
        m.ir_version = 99
    elif choice == "ir1":
        m.ir_version = 1
    elif choice == "opset99":
        m.opset_import[0].version = 99
    elif choice == "opset1":
        m.opset_import[0].version = 1
    elif choice == "no_opset":
        del m.opset_import[:]
    else:
        m.opset_import.append(helper.make_opsetid("", 9))
    return f"versions: {choice}"


def _mut_external(m: onnx.ModelProto, rng: random.Random, files: dict[str, bytes]) -> str:
    inits = list(m.graph.initializer)
    if not inits:
        w = numpy_helper.from_array(np.ones(3, np.float32), "extw")
        m.graph.initializer.append(w)
        inits = [m.graph.initializer[-1]]
    t = rng.choice(inits)
    raw = numpy_helper.to_array(t).tobytes()
    files["weights.bin"] = raw
    t.ClearField("raw_data")
    for f in ("float_data", "int64_data", "int32_data", "double_data"):
        t.ClearField(f)
    t.data_location = TensorProto.EXTERNAL
    entries = {"location": "weights.bin", "offset": "0", "length": str(len(raw))}
    choice = rng.choice(["escape", "absolute", "nul", "neg_offset", "float_offset", "huge_length", "short_length",
                         "missing_file", "huge_dims", "undefined_dtype", "symlink_name", "ok"])
    if choice == "escape":
        entries["location"] = "../" * 6 + "etc/hostname"
    elif choice == "absolute":
        entries["location"] = "/etc/hostname"
    elif choice == "nul":
        entries["location"] = "weights.bin\x00.txt"
    elif choice == "neg_offset":
        entries["offset"] = "-8"
    elif choice == "float_offset":
        entries["offset"] = "1.5"
    elif choice == "huge_length":
        entries["length"] = str(2 ** 50)
    elif choice == "short_length":
        entries["length"] = "1"
    elif choice == "missing_file":
        entries["location"] = "absent.bin"
    elif choice == "huge_dims":
        del t.dims[:]
        t.dims.extend([2 ** 20, 2 ** 20])
    elif choice == "undefined_dtype":
        t.data_type = 0
    elif choice == "symlink_name":
        entries["location"] = "sub/../../weights.bin"
    del t.external_data[:]
    for k, v in entries.items():
        t.external_data.append(onnx.StringStringEntryProto(key=k, value=v))
    return f"external data: {choice}"


def _mut_function(m: onnx.ModelProto, rng: random.Random) -> str:
    recursive = rng.random() < 0.7
    fn = helper.make_function("local", "f", ["a"], ["b"],
                              [helper.make_node("f" if recursive else "Relu", ["a"], ["b"], domain="local" if recursive else "")],
                              [helper.make_opsetid("", OPSET), helper.make_opsetid("local", 1)])
    m.functions.append(fn)
    m.opset_import.append(helper.make_opsetid("local", 1))
    g = m.graph
    last = g.node[-1]
    g.node.append(helper.make_node("f", [last.output[0]], ["f_out"], domain="local", name="call_f"))
    g.output[0].name = "f_out"
    return "local function: " + ("recursive" if recursive else "plain")


def _mut_loop_body(m: onnx.ModelProto, rng: random.Random) -> str:
    body = m.graph.node[0].attribute[0].g
    choice = rng.choice(["drop_body_input", "undefined_in_body", "drop_body_output"])
    if choice == "drop_body_input":
        del body.input[-1]
    elif choice == "undefined_in_body":
        body.node[0].input[0] = "nowhere"
    else:
        del body.output[-1]
    return f"loop body: {choice}"


def mutate(rng: random.Random) -> tuple[dict[str, bytes], str]:
    files: dict[str, bytes] = {}
    kind = rng.choice(["attr", "attr", "dtype", "shape", "wiring", "wiring", "versions", "external", "function", "loop"])
    base = base_loop if kind == "loop" else rng.choice(BASES)
    m = base(rng)
    if kind == "attr":
        note = _mut_attr(m, rng)
    elif kind == "dtype":
        note = _mut_dtype(m, rng)
    elif kind == "shape":
        note = _mut_shape(m, rng)
    elif kind == "wiring":
        note = _mut_wiring(m, rng)
    elif kind == "versions":
        note = _mut_versions(m, rng)
    elif kind == "external":
        note = _mut_external(m, rng, files)
    elif kind == "function":
        note = _mut_function(m, rng)
    else:
        note = _mut_loop_body(m, rng)
    files["model.onnx"] = _bytes(m)
    return files, note


# ----------------------------------------------------------------------------- hostile names
def _rename_everywhere(m: onnx.ModelProto, mapping: dict[str, str]) -> None:
    def ren(x: str) -> str:
        return mapping.get(x, x)

    g = m.graph
    for coll in (g.input, g.output, g.value_info):
        for v in coll:
            v.name = ren(v.name)
    for t in g.initializer:
        t.name = ren(t.name)
    for n in g.node:
        n.input[:] = [ren(x) for x in n.input]
        n.output[:] = [ren(x) for x in n.output]


def hostile(rng: random.Random) -> tuple[dict[str, bytes], str, str]:
    m = rng.choice((base_relu, base_matmul, base_shape, base_int, base_cnn))(rng)
    g = m.graph
    names = sorted({x for n in g.node for x in list(n.input) + list(n.output) if x} | {i.name for i in g.input})
    choice = rng.choice(["payload", "payload", "reserved", "case", "meta", "filename"])
    mapping: dict[str, str] = {}
    if choice == "payload":
        for i, n in enumerate(names):
            mapping[n] = f"{rng.choice(PAYLOADS)}#{i}"
    elif choice == "reserved":
        pool = list(RESERVED)
        rng.shuffle(pool)
        for i, n in enumerate(names):
            mapping[n] = pool[i % len(pool)] + ("" if i < len(pool) else f"_{i}")
    elif choice == "case":  # names that differ only by case (x / X), and sanitize to the same identifier
        for i, n in enumerate(names):
            mapping[n] = ("x" if i % 2 == 0 else "X") + ("" if i < 2 else f".{i // 2}" if i % 2 else f"-{i // 2}")
    _rename_everywhere(m, mapping)
    if choice in ("meta", "payload"):
        p = rng.choice(PAYLOADS)
        g.name = p
        g.doc_string = p
        m.doc_string = p
        m.producer_name = p
        m.producer_version = p
        m.domain = p
        for n in g.node:
            n.name = rng.choice(PAYLOADS)
            n.doc_string = p
        del m.metadata_props[:]
        m.metadata_props.append(onnx.StringStringEntryProto(key=p, value=p))
    file_name = "model.onnx"
    if choice == "filename" or rng.random() < 0.25:
        file_name = rng.choice([
            'x"""; __import__("os").system("touch PWNED") #.onnx',
            "x'); __import__('os').system('touch PWNED'); ('.onnx",
            "-rf --to.onnx", "\x1b[2Jmodel\n.onnx", "tuple.onnx", "m o d e l.onnx", "é.onnx",
        ])
    return {file_name: _bytes(m)}, choice, file_name


# ----------------------------------------------------------------------------- bombs
def bomb(rng: random.Random) -> tuple[dict[str, bytes], str]:
    big = 2 ** 40
    c = lambda n, v, dt=np.int64: numpy_helper.from_array(np.array(v, dt), n)  # noqa: E731
    choice = rng.choice(["range", "constant_of_shape", "expand", "tile", "loop", "input_dims", "initializer_dims",
                         "resize", "pad"])
    x = _vi("x", TensorProto.FLOAT, [2])
    if choice == "range":
        m = _model([helper.make_node("Range", ["s", "l", "d"], ["r"]), helper.make_node("Cast", ["r"], ["y"], to=1)],
                   [x], [_vi("y", TensorProto.FLOAT, None)], [c("s", 0), c("l", big), c("d", 1)])
    elif choice == "constant_of_shape":
        m = _model([helper.make_node("ConstantOfShape", ["sh"], ["k"]), helper.make_node("Add", ["k", "x"], ["y"])],
                   [x], [_vi("y", TensorProto.FLOAT, None)], [c("sh", [2 ** 20, 2 ** 20, 2])])
    elif choice == "expand":
        m = _model([helper.make_node("Expand", ["x", "sh"], ["y"])], [x], [_vi("y", TensorProto.FLOAT, None)],
                   [c("sh", [2 ** 21, 2 ** 20, 2])])
    elif choice == "tile":
        m = _model([helper.make_node("Tile", ["x", "rep"], ["y"])], [x], [_vi("y", TensorProto.FLOAT, None)],
                   [c("rep", [2 ** 40])])
    elif choice == "loop":
        m = base_loop(rng)
        for t in m.graph.initializer:
            if t.name == "trip":
                t.CopyFrom(c("trip", big))
    elif choice == "input_dims":
        m = _model([helper.make_node("Relu", ["x"], ["y"])], [_vi("x", TensorProto.FLOAT, [2 ** 20, 2 ** 20])],
                   [_vi("y", TensorProto.FLOAT, [2 ** 20, 2 ** 20])])
    elif choice == "initializer_dims":
        t = onnx.TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[2 ** 20, 2 ** 20])
        m = _model([helper.make_node("Add", ["x", "w"], ["y"])], [x], [_vi("y", TensorProto.FLOAT, None)], [t])
    elif choice == "resize":
        m = _model([helper.make_node("Resize", ["x4", "", "scales"], ["y"], mode="nearest")],
                   [_vi("x4", TensorProto.FLOAT, [1, 1, 2, 2])], [_vi("y", TensorProto.FLOAT, None)],
                   [c("scales", [1.0, 1.0, 2.0 ** 20, 2.0 ** 20], np.float32)])
    else:
        m = _model([helper.make_node("Pad", ["x", "pads"], ["y"])], [x], [_vi("y", TensorProto.FLOAT, None)],
                   [c("pads", [0, big])])
    return {"model.onnx": _bytes(m)}, choice


# ----------------------------------------------------------------------------- the plan
FAMILIES = ("corrupt", "mutate", "hostile", "bomb")
WEIGHTS = (0.25, 0.4, 0.2, 0.15)


def generate(n: int, seed: int = 0) -> list[Case]:
    """``n`` cases, the same for the same seed (each case from its own sub-seed)."""
    out = []
    for i in range(n):
        rng = random.Random(f"{seed}:{i}")
        family = rng.choices(FAMILIES, WEIGHTS)[0]
        model = "model.onnx"
        if family == "corrupt":
            files, note = corrupt(rng)
        elif family == "mutate":
            files, note = mutate(rng)
        elif family == "hostile":
            files, note, model = hostile(rng)
        else:
            files, note = bomb(rng)
        argv, target = _command(rng, i)
        out.append(Case(f"{i:05d}-{family}", family, files, model, argv, target, note))
    return out
