"""One-time, idempotent growth of the tables beyond seed 000 (kept for provenance).

1. dtypes ONNX has and the seed lacks (int2, uint2, float4e2m1, float8e8m0, float6*).
2. ops for every ONNX operator (installed onnx, default domain) that no seed row names.
3. ``signature`` of every op with a native ONNX cell, from the newest ONNX schema (the
   IR form), minus attributes the IR op's name carries (Mod ``fmod``, BitShift ``direction``).
4. cells from ``tools/fragments/<api>.yaml`` (library introspection by the fill scripts):
   a fragment cell replaces an absent cell; where a seed cell exists, the verified
   fragment name wins and the seed text stays in ``seed`` with both sources listed.

After this the YAML files are edited by hand; re-running only adds what is missing.
"""
from __future__ import annotations

import csv
import re
import sys
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
from ingest_seeds import dump  # noqa: E402

HEADER = ("# The operator table: the source of truth, edited by hand (schema: docs/TABLES.md).\n"
          "# Provenance: tools/ingest_seeds.py (seed 000), tools/extend_tables.py (ONNX schemas, library\n"
          "# introspection fragments). Verified-by-execution status lives in verified.json (generated).\n")
DT_HEADER = ("# The datatype table: the source of truth, edited by hand (schema: docs/TABLES.md).\n"
             "# Provenance: tools/ingest_seeds.py (seed 000), tools/extend_tables.py (ONNX types).\n")

NEW_DTYPES = [
    # id, title, category, kind, bits, layout, nan, inf, negzero, numpy, onnx enum
    ("uint2", "uint2", "Integer Unsigned", "uint", 2, {"sign": 0, "integer": 2}, None, None, None, "ml_dtypes.uint2", "UINT2"),
    ("int2", "int2", "Integer Signed", "int", 2, {"sign": 1, "integer": 1}, None, None, None, "ml_dtypes.int2", "INT2"),
    ("float4e2m1", "float4f1e2s1", "Float Signed", "float", 4, {"sign": 1, "exponent": 2, "fraction": 1, "bias": 1},
     False, False, True, "ml_dtypes.float4_e2m1fn", "FLOAT4E2M1"),
    ("float6e2m3", "float6f3e2s1", "Float Signed", "float", 6, {"sign": 1, "exponent": 2, "fraction": 3, "bias": 1},
     False, False, True, "ml_dtypes.float6_e2m3fn", "FLOAT6E2M3"),
    ("float6e3m2", "float6f2e3s1", "Float Signed", "float", 6, {"sign": 1, "exponent": 3, "fraction": 2, "bias": 3},
     False, False, True, "ml_dtypes.float6_e3m2fn", "FLOAT6E3M2"),
    ("float8e8m0", "float8f0e8s0 (scale)", "Float Unsigned", "float", 8, {"sign": 0, "exponent": 8, "fraction": 0, "bias": 127},
     True, False, False, "ml_dtypes.float8_e8m0fnu", "FLOAT8E8M0"),
]

CATEGORY = [  # (regex on ONNX op name, category) for ops added from ONNX
    (r"^(Sequence|SplitToSequence|ConcatFromSequence)", "Sequence"),
    (r"^Optional", "Optional"),
    (r"^(String|Regex)", "String"),
    (r"(Window|DFT|STFT|MelWeightMatrix)$", "Signal processing"),
    (r"(Attention|RotaryEmbedding|SwiGLU)$", "Attention"),
    (r"(Normalization)$", "Normalization"),
    (r"(Loss)$", "Loss"),
    (r"^(QLinear|ConvInteger|MatMulInteger|DynamicQuantize)", "Quantization"),
    (r"^(Conv|DeformConv|Col2Im|CausalConv)", "Matrix Multiplication"),
    (r"^(RNN|LinearAttention)$", "Recurrent"),
    (r"^(Bernoulli)$", "Generation, Random"),
    (r"^(Range)$", "Generation"),
    (r"^(AffineGrid|GridSample|RoiAlign|NonMaxSuppression|CenterCropPad|ImageDecoder)$", "Imaging Operators"),
    (r"^(CumSum|CumProd)$", "Scan (prefix reduction)"),
    (r"^(Celu|Mish|Swish)$", "Activation, Elementwise"),
    (r"^(Round|IsNaN|Det)$", "Elementwise Math"),
    (r"^(CastLike|BitCast)$", "Data Conversion, Elementwise"),
    (r"^(ReverseSequence|Scatter|TensorScatter|Unique)$", "Data reorganization"),
]
MULTIDIRECTIONAL = {"Add", "Sub", "Mul", "Div", "Pow", "Mod", "Equal", "Greater", "Less", "GreaterOrEqual",
                    "LessOrEqual", "And", "Or", "Xor", "BitwiseAnd", "BitwiseOr", "BitwiseXor", "BitShift",
                    "Max", "Min", "Sum", "Mean", "Where", "Expand"}


def onnx_schemas() -> dict[str, Any]:
    import onnx.defs

    latest: dict[str, Any] = {}
    for s in onnx.defs.get_all_schemas_with_history():
        if s.domain in ("", "ai.onnx") and (s.name not in latest or s.since_version > latest[s.name].since_version):
            latest[s.name] = s
    return latest


def onnx_version() -> str:
    import onnx

    return onnx.__version__


def add_dtypes(doc: dict[str, Any]) -> int:
    have = {d["id"] for d in doc["dtypes"]}
    src = f"introspect:onnx {onnx_version()}"
    n = 0
    for (did, title, cat, kind, bits, layout, nan, inf, negz, npname, enum) in NEW_DTYPES:
        if did in have:
            continue
        entry: dict[str, Any] = {"id": did, "title": title, "category": cat, "kind": kind, "bits": bits,
                                 "layout": layout}
        for k, v in (("nan", nan), ("inf", inf), ("negative_zero", negz)):
            if v is not None:
                entry[k] = v
        entry["numpy"] = npname
        entry["notes"] = ["Not in seed 000; added from the installed onnx TensorProto.DataType enum."]
        entry["backends"] = {"onnx": {"status": "native", "name": enum, "source": src,
                                      "verified": f"onnx.TensorProto.{enum} exists"}}
        doc["dtypes"].append(entry)
        n += 1
    return n


def _snake_ids() -> dict[str, list[str]]:
    rows = csv.DictReader(open(ROOT / "tools" / "onnx_ops.tsv"), delimiter="\t")
    return {r["onnx"]: r["ir_ids"].split(",") for r in rows}


def add_ops(doc: dict[str, Any], schemas: dict[str, Any]) -> int:
    have_ids = {o["id"] for o in doc["ops"]}
    named = set()
    for o in doc["ops"]:
        c = (o.get("backends") or {}).get("onnx")
        if c and c["status"] == "native":
            names = c["name"] if isinstance(c["name"], list) else [c["name"]]
            named.update(names)
    ids = _snake_ids()
    src = f"introspect:onnx {onnx_version()}"
    n = 0
    for name in sorted(schemas):
        s = schemas[name]
        if name in named or name in ("Upsample", "Scatter"):
            continue  # deprecated ONNX ops are upgraded by the frontend (resize, scatter_elements)
        op_id = ids.get(name, [re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()])[0]
        if op_id in have_ids:
            # a seed row exists without a native ONNX cell (e.g. IsNan spelled wrong): fix the cell
            op = next(o for o in doc["ops"] if o["id"] == op_id)
            cell = op.setdefault("backends", {}).get("onnx")
            fixed = {"status": "native", "name": name, "source": [cell["source"], src] if cell else src,
                     "verified": f"onnx.defs.has({name!r})"}
            if cell and cell.get("name") and cell.get("name") != name:
                fixed["seed"] = cell.get("seed") or (cell["name"] if isinstance(cell["name"], str) else ", ".join(cell["name"]))
                op.setdefault("errata", []).append({
                    "field": "backends.onnx.name", "seed": fixed["seed"], "verified": name,
                    "note": f"ONNX spells the op {name}; {fixed['seed']} is not a registered ONNX op.",
                    "source": src})
            op["backends"]["onnx"] = fixed
            continue
        category = next((c for rx, c in CATEGORY if re.search(rx, name)), "Other")
        entry = {"id": op_id, "title": name, "category": category,
                 "broadcast": "multidirectional" if name in MULTIDIRECTIONAL else "none",
                 "notes": [f"Not in seed 000; added from the ONNX {name}-{s.since_version} schema."],
                 "backends": {"onnx": {"status": "native", "name": name, "source": src,
                                       "verified": f"onnx.defs.has({name!r})"}}}
        doc["ops"].append(entry)
        have_ids.add(op_id)
        n += 1
    return n


ATTR_TYPE = {1: "float", 2: "int", 3: "string", 4: "tensor", 5: "graph", 6: "floats", 7: "ints", 8: "strings",
             9: "tensor", 10: "graph", 11: "tensor", 12: "tensor", 13: "dtype", 14: "dtype"}
DROP_ATTRS = {"floor_mod": {"fmod"}, "trunc_mod": {"fmod"}, "bit_shift_left": {"direction"},
              "bit_shift_right": {"direction"}}


def _onnx_type_map(dt_doc: dict[str, Any]) -> dict[str, str]:
    """'float' (ONNX type string) → dtype id."""
    out: dict[str, str] = {}
    for d in dt_doc["dtypes"]:
        c = (d.get("backends") or {}).get("onnx")
        if c and c["status"] == "native":
            enum = c["name"] if isinstance(c["name"], str) else c["name"][0]
            out[enum.lower()] = d["id"]
    out["float"] = "float32"
    out["double"] = "float64"
    return out


def _type_list(strs: list[str], tmap: dict[str, str]) -> list[str]:
    out: list[str] = []
    for t in strs:
        m = re.fullmatch(r"(?:seq|optional)?\(?(?:seq\()?tensor\((\w+)\)\)*", t)
        if not m:
            continue
        d = tmap.get(m.group(1).lower())
        if d and d not in out:
            out.append(d)
    return out


def signature(op_id: str, s: Any, tmap: dict[str, str]) -> dict[str, Any]:
    import onnx
    from onnx import helper

    F = onnx.defs.OpSchema.FormalParameterOption
    types = {tc.type_param_str: _type_list(list(tc.allowed_type_strs), tmap) for tc in s.type_constraints}

    def ports(params: Any, prefix: str) -> list[dict[str, Any]]:
        out = []
        for i, p in enumerate(params):
            t = p.type_str
            if t not in types:
                concrete = _type_list([t], tmap)
                tv = f"{prefix}{i}"
                types[tv] = concrete or ["all"]
                t = tv
            port: dict[str, Any] = {"name": p.name, "type": t}
            if p.option == F.Optional:
                port["optional"] = True
            if p.option == F.Variadic:
                port["variadic"] = True
            out.append(port)
        return out

    inputs = ports(s.inputs, "I")
    outputs = ports(s.outputs, "O")
    attrs = []
    for name, a in sorted(s.attributes.items()):
        if name in DROP_ATTRS.get(op_id, ()):
            continue
        entry: dict[str, Any] = {"name": name, "type": ATTR_TYPE.get(int(a.type), "string")}
        if a.required:
            entry["required"] = True
        elif a.default_value is not None and a.default_value.type:
            v = helper.get_attribute_value(a.default_value)
            if isinstance(v, bytes):
                v = v.decode()
            if isinstance(v, list):
                v = [x.decode() if isinstance(x, bytes) else x for x in v]
            if isinstance(v, float):
                v = float(f"{v:.9g}")
            if isinstance(v, (int, float, str, list)):
                entry["default"] = v
        attrs.append(entry)
    sig: dict[str, Any] = {"inputs": inputs}
    if attrs:
        sig["attributes"] = attrs
    sig["outputs"] = outputs
    sig["types"] = {k: (v or ["all"]) for k, v in types.items()}
    return sig


def add_signatures(doc: dict[str, Any], dt_doc: dict[str, Any], schemas: dict[str, Any]) -> int:
    tmap = _onnx_type_map(dt_doc)
    n = 0
    for op in doc["ops"]:
        c = (op.get("backends") or {}).get("onnx")
        if not c or c["status"] != "native" or "signature" in op:
            continue
        name = c["name"] if isinstance(c["name"], str) else c["name"][0]
        s = schemas.get(name)
        if s is None:
            continue
        op["signature"] = signature(op["id"], s, tmap)
        n += 1
    return n


def merge_fragments(doc: dict[str, Any]) -> dict[str, int]:
    frag_dir = ROOT / "tools" / "fragments"
    by_id = {o["id"]: o for o in doc["ops"]}
    stats: dict[str, int] = {}
    for api in ("numpy", "pytorch", "tensorflow", "tflite", "coreml", "openvino"):
        f = frag_dir / f"{api}.yaml"
        if not f.is_file():
            continue
        frag = yaml.safe_load(f.read_text(encoding="utf-8")) or {}
        for op_id, cell in frag.items():
            op = by_id.get(op_id)
            if op is None:
                raise SystemExit(f"{f}: unknown op id {op_id!r}")
            backends = op.setdefault("backends", {})
            old = backends.get(api)
            if old is not None and old.get("source") and "introspect:" in str(old.get("source")) and old.get("verified"):
                continue  # already merged
            new = dict(cell)
            if old is not None:
                seed_text = old.get("seed") or (old.get("name") if isinstance(old.get("name"), str) else
                                                ", ".join(old.get("name") or []))
                if seed_text:
                    new["seed"] = seed_text
                olds = old["source"] if isinstance(old["source"], list) else [old["source"]]
                news = new["source"] if isinstance(new["source"], list) else [new["source"]]
                new["source"] = olds + [s for s in news if s not in olds]
            order = ("status", "name", "seed", "attrs", "dtypes", "rank", "notes", "source", "verified")
            backends[api] = {k: new[k] for k in order if k in new}
            stats[api] = stats.get(api, 0) + 1
        # keep API order stable
    from_order = ("webnn", "onnx", "dml", "xnnpack", "stablehlo", "tosa", "numpy", "tensorflow", "tflite", "pytorch",
                  "coreml", "bnns", "mps", "mlx", "ncnn", "cntk", "openvino", "onednn", "nnapi", "cldnn")
    for op in doc["ops"]:
        if "backends" in op:
            op["backends"] = {k: op["backends"][k] for k in from_order if k in op["backends"]}
    return stats


PARAM_ALIASES = {"depthwise_conv2d": "conv", "fully_connected": "gemm"}


def merge_seed_params(doc: dict[str, Any]) -> dict[str, int]:
    """Seeds 004/003/001 (tools/fragments/seed_params.yaml, keyed by ONNX op): attribute mappings,
    descriptor fields, dtype/rank limits. Extends existing cells; ONNX cells only gain notes (their
    ``attrs`` are the fixed attributes the frontend uses to pick an op)."""
    f = ROOT / "tools" / "fragments" / "seed_params.yaml"
    if not f.is_file():
        return {}
    frag = yaml.safe_load(f.read_text(encoding="utf-8")) or {}
    by_id = {o["id"]: o for o in doc["ops"]}
    onnx_to_id: dict[str, str] = {}
    for o in doc["ops"]:
        c = (o.get("backends") or {}).get("onnx")
        if c and c["status"] == "native":
            onnx_to_id.setdefault(c["name"] if isinstance(c["name"], str) else c["name"][0], o["id"])
    stats = {"cells_extended": 0, "cells_added": 0, "cells_without_name_skipped": 0, "ops_added": 0}
    for key, cells in frag.items():
        if key.startswith("_other:"):
            oid = PARAM_ALIASES.get(key[7:], key[7:])
        else:
            oid = onnx_to_id.get(key)
        if oid is None:
            raise SystemExit(f"{f}: no op for key {key!r}")
        if oid not in by_id:
            by_id[oid] = {"id": oid, "title": oid.replace("_", " ").title().replace("Nd", "ND"),
                          "category": "Data reorganization", "broadcast": "none",
                          "notes": ["Not in seed 000; added from seed 004 (NNAPI/clDNN parameter mapping)."],
                          "backends": {}}
            doc["ops"].append(by_id[oid])
            stats["ops_added"] += 1
        backends = by_id[oid].setdefault("backends", {})
        for api, cell in cells.items():
            srcs = cell["source"] if isinstance(cell["source"], list) else [cell["source"]]
            old = backends.get(api)
            if old is not None:
                olds = old["source"] if isinstance(old["source"], list) else [old["source"]]
                if all(x in olds for x in srcs):
                    continue  # merged before
                if cell.get("notes"):
                    old["notes"] = (old.get("notes", "") + " " + cell["notes"]).strip()
                if cell.get("attrs"):
                    if api == "onnx":
                        old["notes"] = (old.get("notes", "") + " Attributes: " +
                                        "; ".join(f"{k}: {v}" for k, v in cell["attrs"].items())).strip()
                    else:
                        old.setdefault("attrs", {}).update(cell["attrs"])
                for k in ("dtypes", "rank"):
                    if k in cell:
                        old[k] = cell[k]
                if cell.get("name") and cell["name"] != old.get("name") and api != "onnx":
                    if "seed" not in old and old.get("name"):
                        old["seed"] = old["name"] if isinstance(old["name"], str) else ", ".join(old["name"])
                    old["name"] = cell["name"]
                    old["status"] = cell.get("status", "native")
                old["source"] = olds + [x for x in srcs if x not in olds]
                stats["cells_extended"] += 1
            else:
                if not cell.get("name") and cell.get("status") != "unavailable":
                    stats["cells_without_name_skipped"] += 1
                    continue
                new = {"status": cell.get("status", "native"), **{k: v for k, v in cell.items() if k != "status"}}
                order = ("status", "name", "seed", "attrs", "dtypes", "rank", "notes", "source", "verified")
                backends[api] = {k: new[k] for k in order if k in new}
                stats["cells_added"] += 1
    return stats


# Seed cells in the target columns that library introspection contradicted (reported by the
# fill scripts; the verified cell is in the table, the seed text stays in its ``seed`` key).
SEED_CELL_ERRATA = [
    ("identity", "tflite", "tf.identity is a TensorFlow API, not a TFLite builtin; the converter drops it (no IDENTITY "
     "builtin exists). Composite: RESHAPE to the input's own shape.", "introspect:tensorflow 2.21.0"),
    ("identity", "coreml", "CopyLayerParams is a NeuralNetwork (pre-MIL) layer; the MIL op is identity.",
     "introspect:coremltools 9.0"),
    ("logical_not", "coreml", "LogicalNotLayerParams is a NeuralNetwork (pre-MIL) layer; the MIL op is logical_not.",
     "introspect:coremltools 9.0"),
    ("lp_normalization", "coreml", "L2NormalizeLayerParams is a NeuralNetwork layer; MIL l2_norm normalizes the three "
     "rightmost dims together with epsilon 1e-6, so LpNormalization is x / reduce_l2_norm(x, axis) (composite).",
     "introspect:coremltools 9.0"),
    ("dequantize_linear", "tensorflow", "tf.quantization.dequantize takes a min/max range and a quantized dtype, not "
     "scale and zero point; the exact composite is cast, subtract, multiply.", "introspect:tensorflow 2.21.0"),
    ("dequantize_linear", "coreml", "constexpr_affine_dequantize (iOS16) only takes constant weights; runtime tensors "
     "use dequantize (iOS17).", "introspect:coremltools 9.0"),
    ("identity", "numpy", "numpy.identity builds an n x n identity matrix; the identity op is numpy.copy.",
     "introspect:numpy 2.4.6"),
    ("broadcast_dimensions", "numpy", "The seed says NA, but numpy.broadcast_shapes computes exactly this.",
     "introspect:numpy 2.4.6"),
    ("broadcast_dimensions", "pytorch", "The seed says NA, but torch.broadcast_shapes computes exactly this.",
     "introspect:torch 2.13.0+cpu"),
    ("broadcast_dimensions", "tensorflow", "The seed says NA, but tf.broadcast_dynamic_shape computes exactly this.",
     "introspect:tensorflow 2.21.0"),
    ("broadcast_dimensions", "tflite", "The seed says NA, but the BROADCAST_ARGS builtin computes exactly this.",
     "introspect:tensorflow 2.21.0"),
]


def add_seed_cell_errata(doc: dict[str, Any]) -> int:
    by_id = {o["id"]: o for o in doc["ops"]}
    n = 0
    for op_id, api, note, source in SEED_CELL_ERRATA:
        op = by_id[op_id]
        cell = op.get("backends", {}).get(api, {})
        field = f"backends.{api}.name"
        errs = op.setdefault("errata", [])
        if any(e.get("field") == field for e in errs):
            continue
        name = cell.get("name")
        errs.append({"field": field, "seed": cell.get("seed", ""), "verified": ", ".join(name) if isinstance(name, list)
                     else (name or cell.get("status", "")), "note": note, "source": source})
        n += 1
    return n


def merge_emitter_fragments(doc: dict[str, Any], only: tuple[str, ...] = ()) -> dict[str, int]:
    """Expected failures (``xfail_<backend>.yaml``) and cell corrections (``cells_<backend>.yaml``)
    found while building the emitters: xfails join the op's ``xfail`` list (deduplicated), a
    correction replaces the backend cell, keeping the previous name as ``seed`` text when it came
    from a seed."""
    frag_dir = ROOT / "tools" / "fragments"
    by_id = {o["id"]: o for o in doc["ops"]}
    stats = {"xfail": 0, "cells": 0}
    for f in sorted(frag_dir.glob("xfail_*.yaml")):
        backend = f.stem[len("xfail_"):]
        if only and backend not in only:
            continue
        for op_id, entries in (yaml.safe_load(f.read_text(encoding="utf-8")) or {}).items():
            if op_id not in by_id:
                raise SystemExit(f"{f}: unknown op id {op_id!r}")
            lst = by_id[op_id].setdefault("xfail", [])
            for e in entries:
                item = {"backend": backend, **({"dtype": e["dtype"]} if e.get("dtype") else {}), "reason": e["reason"]}
                if not any(x.get("backend") == backend and x.get("dtype") == item.get("dtype") for x in lst):
                    lst.append(item)
                    stats["xfail"] += 1
    for f in sorted(frag_dir.glob("cells_*.yaml")):
        backend = f.stem[len("cells_"):]
        if only and backend not in only:
            continue
        for op_id, cell in (yaml.safe_load(f.read_text(encoding="utf-8")) or {}).items():
            if op_id not in by_id:
                raise SystemExit(f"{f}: unknown op id {op_id!r}")
            backends = by_id[op_id].setdefault("backends", {})
            old = backends.get(backend)
            new = dict(cell)
            if old is not None and "seed" in old and "seed" not in new:
                new["seed"] = old["seed"]
            order = ("status", "name", "seed", "attrs", "dtypes", "rank", "notes", "source", "verified")
            backends[backend] = {k: new[k] for k in order if k in new}
            stats["cells"] += 1
    return stats


def merge_dtype_fragments(dt_doc: dict[str, Any]) -> int:
    """``dtypes_<backend>.yaml``: corrections of a backend's dtype column found while building its emitter."""
    by_id = {d["id"]: d for d in dt_doc["dtypes"]}
    n = 0
    for f in sorted((ROOT / "tools" / "fragments").glob("dtypes_*.yaml")):
        backend = f.stem[len("dtypes_"):]
        for did, cell in (yaml.safe_load(f.read_text(encoding="utf-8")) or {}).items():
            if did not in by_id:
                raise SystemExit(f"{f}: unknown dtype {did!r}")
            backends = by_id[did].setdefault("backends", {})
            old = backends.get(backend)
            new = dict(cell)
            if old is not None and "seed" not in new:
                seed = old.get("seed") or old.get("name")
                if seed:
                    new["seed"] = seed if isinstance(seed, str) else ", ".join(seed)
            order = ("status", "name", "seed", "notes", "source", "verified")
            backends[backend] = {k: new[k] for k in order if k in new}
            n += 1
    return n


def reorder(op: dict[str, Any]) -> dict[str, Any]:
    order = ("id", "title", "category", "formula", "precision", "broadcast", "aliases", "notes", "errata", "seed",
             "signature", "decomposition", "tolerance", "xfail", "backends")
    return {k: op[k] for k in order if k in op}


def main() -> int:
    op_path, dt_path = ROOT / "optable.yaml", ROOT / "dtypes.yaml"
    doc = yaml.safe_load(op_path.read_text(encoding="utf-8"))
    dt_doc = yaml.safe_load(dt_path.read_text(encoding="utf-8"))
    schemas = onnx_schemas()
    nd = add_dtypes(dt_doc)
    no = add_ops(doc, schemas)
    ns = add_signatures(doc, dt_doc, schemas)
    stats = merge_fragments(doc) if "--fragments" in sys.argv else {}
    if "--fragments" in sys.argv:
        stats["errata"] = add_seed_cell_errata(doc)
        stats["seed_params"] = merge_seed_params(doc)
    if "--emitter-fragments" in sys.argv:
        only = tuple(a.split("=", 1)[1] for a in sys.argv if a.startswith("--only="))
        stats["emitters"] = merge_emitter_fragments(doc, tuple(x for o in only for x in o.split(",")))
        stats["dtype_cells"] = merge_dtype_fragments(dt_doc)
    doc["ops"] = [reorder(o) for o in doc["ops"]]
    op_path.write_text(dump(doc, HEADER), encoding="utf-8")
    dt_path.write_text(dump(dt_doc, DT_HEADER), encoding="utf-8")
    print(f"dtypes added {nd}; ops added {no}; signatures added {ns}; fragment cells merged {stats}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
