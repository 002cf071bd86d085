"""Development driver: run the NumPy reference directly on the ONNX node tests.

A stand-in until the real ONNX frontend exists: maps each ONNX node to an IR op id via
``tools/onnx_ops.tsv`` (Mod by ``fmod``, BitShift by ``direction``), evaluates it with
``translator.reference`` and compares with the expected outputs (rtol 1e-3, atol 1e-5;
exact for ints/bools/strings). No opset upgrades are done here.

    python tools/ref_nodetests.py [--cases REGEX] [--ops op1,op2] [-v]
"""
from __future__ import annotations

import argparse
import csv
import re
import sys
import traceback
from pathlib import Path

import numpy as np
import onnx
from onnx import helper, numpy_helper

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from translator import reference  # noqa: E402

MAP = {r["onnx"]: r["ir_ids"].split(",") for r in csv.DictReader(open(Path(__file__).with_name("onnx_ops.tsv")), delimiter="\t")}


def ir_op(node: onnx.NodeProto) -> tuple[str, dict]:
    attrs = {a.name: a for a in node.attribute}
    if node.op_type == "Mod":
        fmod = helper.get_attribute_value(attrs.pop("fmod")) if "fmod" in attrs else 0
        return ("trunc_mod" if fmod else "floor_mod"), attrs
    if node.op_type == "BitShift":
        d = helper.get_attribute_value(attrs.pop("direction"))
        return ("bit_shift_left" if d in (b"LEFT", "LEFT") else "bit_shift_right"), attrs
    ids = MAP.get(node.op_type)
    if not ids:
        raise KeyError(f"unknown op {node.op_type}")
    return ids[0], attrs


def attr_value(a: onnx.AttributeProto, env: dict):
    if a.type == onnx.AttributeProto.GRAPH:
        return make_body(a.g, env)
    if a.type == onnx.AttributeProto.GRAPHS:
        return [make_body(g, env) for g in a.graphs]
    if a.type == onnx.AttributeProto.TENSOR:
        return numpy_helper.to_array(a.t)
    v = helper.get_attribute_value(a)
    if isinstance(v, bytes):
        return v.decode()
    if isinstance(v, list) and v and isinstance(v[0], bytes):
        return [x.decode() for x in v]
    return v


def make_body(g: onnx.GraphProto, outer: dict):
    def body(*inputs):
        env = dict(outer)
        for vi, x in zip(g.input, inputs):
            env[vi.name] = x
        for init in g.initializer:
            env[init.name] = numpy_helper.to_array(init)
        run_nodes(g.node, env)
        return [env[o.name] for o in g.output]
    return body


def run_nodes(nodes, env: dict) -> None:
    for node in nodes:
        op, attrs = ir_op(node)
        fn = reference.get(op)
        if fn is None:
            raise NotImplementedError(f"no reference for {op}")
        ins = [env[n] if n else None for n in node.input]
        kw = {k: attr_value(a, env) for k, a in attrs.items()}
        res = fn(*ins, **kw)
        if not isinstance(res, tuple):
            res = (res,)
        for name, val in zip(node.output, res):
            if name:
                env[name] = val


def close(expected, got) -> bool:
    if isinstance(expected, list):
        return isinstance(got, list) and len(got) == len(expected) and all(close(e, g) for e, g in zip(expected, got))
    if expected is None:
        return got is None
    got = np.asarray(got)
    expected = np.asarray(expected)
    if expected.shape != got.shape:
        return False
    if expected.dtype.kind in "fc" or str(expected.dtype) in ("bfloat16",) or expected.dtype.kind == "V":
        try:
            return np.allclose(got.astype(np.float64), expected.astype(np.float64), rtol=1e-3, atol=1e-5, equal_nan=True)
        except (TypeError, ValueError):
            return False
    if got.dtype != expected.dtype and expected.dtype.kind not in "OSU":
        return False
    return np.array_equal(got, expected)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cases")
    ap.add_argument("--ops", help="only cases whose nodes are all among these IR ops")
    ap.add_argument("-v", action="store_true")
    a = ap.parse_args()
    from onnx.backend.test.loader import load_model_tests

    import warnings
    warnings.filterwarnings("ignore")
    ops = set(a.ops.split(",")) if a.ops else None
    counts = {"pass": 0, "fail": 0, "error": 0, "unsupported": 0}
    for case in load_model_tests(kind="node"):
        if a.cases and not re.search(a.cases, case.name):
            continue
        g = case.model.graph
        try:
            node_ops = [ir_op(n)[0] for n in g.node]
        except Exception:
            node_ops = ["?"]
        if ops is not None and not set(node_ops) <= ops:
            continue
        status, why = "pass", ""
        for inputs, expected in case.data_sets:
            env = {}
            for init in g.initializer:
                env[init.name] = numpy_helper.to_array(init)
            for vi, x in zip([i for i in g.input if i.name not in env], inputs):
                env[vi.name] = x
            try:
                with np.errstate(all="ignore"):
                    run_nodes(g.node, env)
                outs = [env[o.name] for o in g.output]
                if not all(close(e, o) for e, o in zip(expected, outs)):
                    status, why = "fail", "mismatch"
            except NotImplementedError as e:
                status, why = "unsupported", str(e)
            except Exception as e:  # noqa: BLE001 - a dev driver reports everything
                status, why = "error", f"{type(e).__name__}: {e}"
                if a.v:
                    traceback.print_exc()
            if status != "pass":
                break
        counts[status] += 1
        if status != "pass" and (a.v or status in ("fail", "error")):
            print(f"{status:12s} {case.name}: {why[:200]}")
    print(counts)
    return 0


if __name__ == "__main__":
    sys.exit(main())
