#!/usr/bin/env python3
"""Ingest seed 000 (the cross-API operator/datatype table) into the two tables.

Reads ``/work/shared/seeds/000_a8407906b74b71ae.txt`` (override with ``--seed``) and
writes, deterministically:

* ``optable.yaml``  - one entry per operator row of the seed, in seed order;
* ``dtypes.yaml``   - one entry per datatype row (27);
* ``tools/ids.tsv`` - the stable op ids (id, title, category, onnx, seed_line).

The seed is a markdown-ish table copied from a web page, see ``docs/TABLES.md`` for
the schema of the output.  Its irregularities are handled by explicit, commented
fix-ups below (search for ``FIXUP``); every other cell goes through a small set of
generic rules, and a cell that matches no rule is an error (so nothing is silently
misread).  Seed errors that were checked against a reference are written as
``errata`` entries; the checks that can run cheaply (ONNX reference evaluator,
onnxruntime, numpy, ml_dtypes, ONNX schemas) are re-run by this script and asserted.

Run:  python tools/ingest_seeds.py            (from the repository root or anywhere)
"""
from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_SEED = ROOT.parent / "shared" / "seeds" / "000_a8407906b74b71ae.txt"
SOURCE = "seed:000"

#: Seed-000 API columns in seed order (docs/TABLES.md); clDNN is not in this seed.
API_KEYS = ("webnn", "onnx", "dml", "xnnpack", "stablehlo", "tosa", "numpy", "tensorflow", "tflite",
            "pytorch", "coreml", "bnns", "mps", "mlx", "ncnn", "cntk", "openvino", "onednn", "nnapi")

#: Seed text meaning "explicitly not available".
UNAVAILABLE_RAW = {"NA", "x", "---", "ONNX NA"}

IDENT = r"[A-Za-z_][A-Za-z0-9_.:]*"
IDENT_RE = re.compile(rf"^{IDENT}$")


# =========================================================================== seed reading
def read_lines(seed: Path) -> list[str]:
    """Physical lines, 1-based as ``lines[n-1]``; split on '\\n' only (like awk/sed)."""
    return seed.read_text(encoding="utf-8").split("\n")


# =========================================================================== datatypes
#: Seed datatype Name -> dtype id.
DTYPE_IDS = {
    "uint1": "uint1", "uint4": "uint4", "uint8": "uint8", "uint16": "uint16", "uint32": "uint32",
    "uint48": "uint48", "uint64": "uint64", "int4": "int4", "int8": "int8", "int16": "int16",
    "int32": "int32", "int48": "int48", "int64": "int64",
    "float8f3e4s1Fn": "float8e4m3fn", "float8f3e4s1FnUz": "float8e4m3fnuz",
    "float8f2e5s1": "float8e5m2", "float8f2e5s1FnUz": "float8e5m2fnuz",
    "float8f2e5bias4s1FnUz": "float8e4m3b11fnuz",
    "float16f10e5s1 IEEE": "float16", "float16f7e8s1 Brain": "bfloat16",
    "float32f23e8s1 IEEE": "float32", "float64f52e11s1 IEEE": "float64",
    "float16 x 2": "complex32", "float32 x 2": "complex64", "float64 x 2": "complex128",
    "bool8": "bool", "string8": "string",
}


def _int_facts(bits: int, signed: bool, numpy_name: str | None) -> dict[str, Any]:
    kind = "int" if signed else "uint"
    layout = {"sign": 1 if signed else 0, "integer": bits - 1 if signed else bits}
    return {"kind": kind, "bits": bits, "layout": layout, "numpy": numpy_name}


def _float_facts(bits: int, exp: int, frac: int, bias: int, nan: bool, inf: bool, negzero: bool,
                 numpy_name: str | None) -> dict[str, Any]:
    return {"kind": "float", "bits": bits,
            "layout": {"sign": 1, "exponent": exp, "fraction": frac, "bias": bias},
            "nan": nan, "inf": inf, "negative_zero": negzero, "numpy": numpy_name}


#: Facts per dtype id: IEEE-754 / OCP-FP8 / ml_dtypes definitions.  Checked against numpy
#: and ml_dtypes by ``check_dtype_facts`` when the numpy type exists.
DTYPE_FACTS: dict[str, dict[str, Any]] = {
    "uint1": _int_facts(1, False, "ml_dtypes.uint1"),
    "uint4": _int_facts(4, False, "ml_dtypes.uint4"),
    "uint8": _int_facts(8, False, "uint8"),
    "uint16": _int_facts(16, False, "uint16"),
    "uint32": _int_facts(32, False, "uint32"),
    "uint48": _int_facts(48, False, None),      # no numpy / ml_dtypes type
    "uint64": _int_facts(64, False, "uint64"),
    "int4": _int_facts(4, True, "ml_dtypes.int4"),
    "int8": _int_facts(8, True, "int8"),
    "int16": _int_facts(16, True, "int16"),
    "int32": _int_facts(32, True, "int32"),
    "int48": _int_facts(48, True, None),        # no numpy / ml_dtypes type
    "int64": _int_facts(64, True, "int64"),
    "float8e4m3fn": _float_facts(8, 4, 3, 7, True, False, True, "ml_dtypes.float8_e4m3fn"),
    "float8e4m3fnuz": _float_facts(8, 4, 3, 8, True, False, False, "ml_dtypes.float8_e4m3fnuz"),
    "float8e5m2": _float_facts(8, 5, 2, 15, True, True, True, "ml_dtypes.float8_e5m2"),
    "float8e5m2fnuz": _float_facts(8, 5, 2, 16, True, False, False, "ml_dtypes.float8_e5m2fnuz"),
    "float8e4m3b11fnuz": _float_facts(8, 4, 3, 11, True, False, False, "ml_dtypes.float8_e4m3b11fnuz"),
    "float16": _float_facts(16, 5, 10, 15, True, True, True, "float16"),
    "bfloat16": _float_facts(16, 8, 7, 127, True, True, True, "ml_dtypes.bfloat16"),
    "float32": _float_facts(32, 8, 23, 127, True, True, True, "float32"),
    "float64": _float_facts(64, 11, 52, 1023, True, True, True, "float64"),
    "complex32": {"kind": "complex", "bits": 32, "nan": True, "inf": True, "negative_zero": True,
                  "numpy": "ml_dtypes.complex32"},
    "complex64": {"kind": "complex", "bits": 64, "nan": True, "inf": True, "negative_zero": True,
                  "numpy": "complex64"},
    "complex128": {"kind": "complex", "bits": 128, "nan": True, "inf": True, "negative_zero": True,
                   "numpy": "complex128"},
    "bool": {"kind": "bool", "bits": 8, "numpy": "bool"},
    "string": {"kind": "string", "bits": None, "numpy": "str_"},
}

DTYPE_ALIASES = {
    "float16": ["half", "f16", "fp16"], "bfloat16": ["bf16"], "float32": ["float", "f32", "fp32"],
    "float64": ["double", "f64", "fp64"], "complex64": ["cfloat"], "complex128": ["cdouble"],
    "float8e4m3fn": ["f8e4m3fn"], "float8e4m3fnuz": ["f8e4m3fnuz"], "float8e5m2": ["f8e5m2"],
    "float8e5m2fnuz": ["f8e5m2fnuz"], "float8e4m3b11fnuz": ["f8e4m3b11fnuz"],
}

DTYPE_NOTES = {
    "complex32": ["Two float16 components (real, imaginary); seed Name 'float16 x 2'."],
    "complex64": ["Two float32 components (real, imaginary); seed Name 'float32 x 2'."],
    "complex128": ["Two float64 components (real, imaginary); seed Name 'float64 x 2'."],
    "bool": ["One byte per element; any nonzero byte is true (seed details)."],
    "string": ["numpy holds the values as str_ (fixed width) or object arrays; ONNX runtimes return object arrays."],
}


def parse_dtype_rows(lines: list[str]) -> list[dict[str, Any]]:
    """Seed lines 3-29: the datatype table (header line 1, separator line 2)."""
    rows = []
    for n in range(3, 30):
        cells = [c.strip() for c in lines[n - 1].split("|")]
        assert cells[-1] == "", f"line {n}: datatype row must end with '|'"
        cells = cells[:-1]
        # FIXUP: rows without a Details cell (the uint rows and the three complex
        # 'floatNN x 2' rows) have one trailing empty cell instead; their first API cell
        # (WebNN) directly follows the Name.  Alignment check: 'float16 x 2' then puts
        # MPSDataType.complexFloat16 in the MPS column and uint8 puts numpy.uint8 in NumPy.
        if cells[-1] == "":
            cells = cells[:-1]
            cat, name, details, rest = cells[0], cells[1], None, cells[2:]
        else:
            cat, name, details, rest = cells[0], cells[1], cells[2], cells[3:]
        assert len(rest) == len(API_KEYS) + 1, f"line {n}: {len(rest)} API cells"
        assert rest[-1] == "?", f"line {n}: '(for future additions)' column is not '?'"
        rows.append({"line": n, "category": cat, "name": name, "details": details,
                     "api": dict(zip(API_KEYS, rest[:-1]))})
    assert len(rows) == 27
    return rows


def dtype_cell(key: str, raw: str) -> dict[str, Any] | None:
    """One datatype API cell -> backends cell (None for '?')."""
    if raw == "?":
        return None
    if raw in UNAVAILABLE_RAW:
        return cell("unavailable", seed=raw)
    notes = None
    m = re.match(r"^(.*?) \((.+)\)$", raw)  # 'i1 (bool)', 'BNNSDataTypeBoolean (bit size?)'
    text = raw
    if m:
        text, notes = m.group(1), m.group(2)
    if key == "onnx":
        m = re.match(r"^ONNX\.TensorProto\.DataType\.(\w+)$", text)
        assert m, raw
        return cell("native", [m.group(1)], seed=raw, notes=notes)
    parts = [p.strip() for p in text.split(" / ")]  # 'numpy.uint8 / ubyte': the type and its aliases
    # 'numpy.uint8 / ubyte' -> numpy.uint8, numpy.ubyte (aliases live in the same module)
    module = parts[0].rsplit(".", 1)[0] if "." in parts[0] else ""
    names = [parts[0]] + [p if ("." in p or not module) else f"{module}.{p}" for p in parts[1:]]
    for nm in names:
        assert IDENT_RE.match(nm), f"unexpected datatype cell {raw!r}"
    if key == "numpy":
        import numpy as np
        missing = [nm for nm in names if not hasattr(np, nm.split(".", 1)[1])]
        if missing:
            extra = f"not in numpy {np.__version__}: {', '.join(missing)} (removed in NumPy 2.0)"
            notes = f"{notes}; {extra}" if notes else extra
    return cell("native", names, seed=None if names == [raw] else raw, notes=notes)


DTYPE_ERRATA: dict[str, list[dict[str, Any]]] = {
    "uint64": [{
        "field": "category", "seed": "Integer Signed", "verified": "Integer Unsigned",
        "note": "uint64 is unsigned (numpy.iinfo(numpy.uint64).min == 0); every API cell of the row names an unsigned type.",
        "source": "numpy.iinfo",
    }],
    "float8e4m3b11fnuz": [{
        "field": "details", "seed": "frac=2 exp=5 sign=1 (1) TODO: Figure out details",
        "verified": "frac=3 exp=4 sign=1 bias=11, has nan (single NaN 0x80), no inf, no negative zero",
        "note": "The row's StableHLO cell f8E4M3B11FNUZ and ml_dtypes.float8_e4m3b11fnuz agree: "
                "finfo nmant=3, nexp=4, minexp=-10 (bias 11); 0x80 decodes to NaN; -0.0 rounds to +0.0. "
                "The seed Name 'float8f2e5bias4s1FnUz' is kept as title.",
        "source": "ml_dtypes.finfo(ml_dtypes.float8_e4m3b11fnuz); StableHLO type name",
    }],
}


def check_dtype_facts() -> list[str]:
    """Cross-check DTYPE_FACTS against numpy / ml_dtypes; returns a list of problems."""
    import ml_dtypes
    import numpy as np
    problems = []
    for did, f in DTYPE_FACTS.items():
        name = f.get("numpy")
        if not name:
            continue
        t = getattr(ml_dtypes, name.split(".", 1)[1]) if name.startswith("ml_dtypes.") else getattr(np, name)
        dt = np.dtype(t)
        if f["kind"] in ("int", "uint"):
            info = ml_dtypes.iinfo(dt) if name.startswith("ml_dtypes.") else np.iinfo(dt)
            if info.bits != f["bits"] or (info.min < 0) != (f["kind"] == "int"):
                problems.append(f"{did}: iinfo bits={info.bits} min={info.min}")
        elif f["kind"] == "float":
            fi = ml_dtypes.finfo(dt) if name.startswith("ml_dtypes.") else np.finfo(dt)
            lay = f["layout"]
            if (fi.bits, fi.nexp, fi.nmant, 1 - fi.minexp) != (f["bits"], lay["exponent"], lay["fraction"], lay["bias"]):
                problems.append(f"{did}: finfo bits={fi.bits} nexp={fi.nexp} nmant={fi.nmant} minexp={fi.minexp}")
            with np.errstate(all="ignore"):
                probe = np.array([np.inf, -0.0, np.nan], np.float32).astype(dt).astype(np.float32)
            if bool(np.isinf(probe[0])) != f["inf"]:
                problems.append(f"{did}: inf representable={bool(np.isinf(probe[0]))}")
            if bool(np.signbit(probe[1])) != f["negative_zero"]:
                problems.append(f"{did}: negative zero representable={bool(np.signbit(probe[1]))}")
            if bool(np.isnan(probe[2])) != f["nan"]:
                problems.append(f"{did}: nan representable={bool(np.isnan(probe[2]))}")
        elif f["kind"] == "complex":
            if dt.itemsize * 8 != f["bits"] or dt.kind not in "cVW":
                problems.append(f"{did}: numpy itemsize={dt.itemsize} kind={dt.kind}")
    return problems


def build_dtypes(lines: list[str]) -> tuple[list[dict[str, Any]], int]:
    out, seed_cells = [], 0
    for row in parse_dtype_rows(lines):
        did = DTYPE_IDS[row["name"]]
        f = DTYPE_FACTS[did]
        d: dict[str, Any] = {"id": did, "title": row["name"], "category": row["category"]}
        if row["details"] is not None:
            d["details"] = row["details"]
        # errata: the table holds the verified value, the erratum the seed value
        for e in DTYPE_ERRATA.get(did, []):
            assert d[e["field"]] == e["seed"], (did, e)
            d[e["field"]] = e["verified"]
        d["kind"], d["bits"] = f["kind"], f["bits"]
        for k in ("layout", "nan", "inf", "negative_zero"):
            if k in f:
                d[k] = f[k]
        d["numpy"] = f["numpy"]
        if did in DTYPE_ALIASES:
            d["aliases"] = DTYPE_ALIASES[did]
        if did in DTYPE_NOTES:
            d["notes"] = DTYPE_NOTES[did]
        backends = {}
        for key in API_KEYS:
            raw = row["api"][key]
            if raw != "?":
                seed_cells += 1
            c = dtype_cell(key, raw)
            if c is not None:
                backends[key] = c
        errata = list(DTYPE_ERRATA.get(did, []))
        # FIXUP (erratum): ONNX gained INT4/UINT4 in onnx 1.16; the seed's 'x' predates it.
        if did in ("int4", "uint4"):
            import onnx
            enum = did.upper()
            if hasattr(onnx.TensorProto, enum):
                errata.append({"field": "backends.onnx", "seed": "x", "verified": f"TensorProto.{enum}",
                               "note": f"onnx {onnx.__version__} defines onnx.TensorProto.{enum} "
                                       f"(= {getattr(onnx.TensorProto, enum)}); the seed predates it.",
                               "source": f"introspect:onnx {onnx.__version__}"})
                backends["onnx"] = cell("native", [enum], seed="x",
                                        notes="seed says x (not available); corrected, see errata",
                                        verified=f"onnx {onnx.__version__} TensorProto")
        if errata:
            d["errata"] = errata
        d["backends"] = backends
        out.append(d)
    return out, seed_cells


# =========================================================================== operators
#: Seed line of each operator record's first line -> stable op id (see tools/ids.tsv).
OP_IDS: dict[int, str] = {
    32: "elementwise_generic", 35: "identity", 37: "constant", 39: "constant_of_shape", 41: "add",
    43: "sub", 45: "mul", 47: "div", 49: "reciprocal", 51: "trunc_mod", 53: "floor_mod", 55: "pow",
    57: "root", 60: "sqrt", 63: "exp", 66: "log", 72: "abs", 74: "neg", 77: "ceil", 79: "floor",
    81: "clip", 83: "erf", 86: "is_nan", 92: "is_inf", 98: "sign", 100: "equal", 102: "not_equal",
    104: "greater", 106: "less", 108: "greater_equal", 110: "less_equal", 112: "bitwise_not",
    114: "bitwise_and", 116: "bitwise_or", 118: "bitwise_xor", 120: "bit_shift_left",
    122: "bit_shift_right", 124: "bit_count", 127: "logical_not", 129: "logical_and", 131: "logical_or",
    133: "logical_xor", 135: "sin", 137: "cos", 139: "tan", 141: "asin", 143: "acos", 145: "atan",
    147: "sinh", 149: "cosh", 151: "tanh", 157: "scaled_tanh", 159: "acosh", 162: "asinh", 165: "atanh",
    168: "cos_grad", 171: "sum", 173: "mean", 175: "max", 177: "threshold", 180: "min",
    182: "quantize_linear", 187: "dequantize_linear", 192: "sigmoid", 196: "hard_sigmoid",
    199: "hard_swish", 203: "relu", 206: "leaky_relu", 209: "prelu", 213: "thresholded_relu", 216: "elu",
    222: "selu", 227: "gelu", 230: "softmax", 267: "log_softmax", 276: "hardmax", 279: "softsign",
    281: "softplus", 283: "parametric_softplus", 286: "affine", 289: "shrink", 305: "random_normal",
    307: "random_normal_like", 309: "random_uniform", 319: "multinomial", 320: "eye_like", 333: "trilu",
    335: "gemm", 341: "matmul", 348: "conv", 380: "conv_transpose", 381: "cast", 383: "transpose",
    395: "expand", 406: "broadcast_dimensions", 431: "reshape", 438: "flatten", 455: "squeeze",
    477: "unsqueeze", 495: "reshape_from_axes", 511: "reshape_to_axes", 527: "tile", 539: "split",
    540: "slice", 561: "concat", 577: "gather", 578: "gather_elements", 602: "gather_nd",
    604: "scatter_elements", 625: "scatter_nd", 627: "pad", 628: "space_to_depth", 638: "depth_to_space",
    659: "shape", 662: "size", 666: "element_count_along_axes", 670: "one_hot", 689: "top_k",
    694: "where", 700: "compress", 701: "reverse", 716: "pool_generic", 746: "sum_pool",
    751: "average_pool", 756: "global_average_pool", 768: "max_pool", 772: "global_max_pool",
    775: "max_unpool", 776: "lp_pool", 781: "global_lp_pool", 789: "max_roi_pool", 790: "reduce_generic",
    793: "reduce_sum", 797: "reduce_mean", 802: "reduce_prod", 806: "reduce_log_sum",
    810: "reduce_log_sum_exp", 814: "reduce_sum_square", 818: "reduce_l1", 822: "reduce_l2",
    826: "reduce_max", 830: "reduce_min", 834: "arg_max", 836: "arg_min", 838: "resize", 847: "upsample",
    849: "if", 853: "loop", 854: "scan", 855: "mean_variance_normalization",
    889: "instance_normalization", 919: "layer_normalization", 929: "batch_normalization", 955: "lrn",
    972: "lp_normalization", 978: "non_zero", 990: "tfidf_vectorizer",
    # records without API cells (see parse_tail)
    992: "einsum", 1039: "gru", 1048: "lstm", 1059: "dropout", 1062: "scale",
}

#: The ONNX op name to list in ids.tsv for rows whose seed has no ONNX cell (tail rows).
ONNX_HINTS = {"einsum": "Einsum", "gru": "GRU", "lstm": "LSTM", "dropout": "Dropout"}

#: End of an operator record: the Precision cell followed by a long run of empty cells.
RECORD_END = re.compile(r"\|\s*\|{10,}\s*$")
PRECISIONS = {"Exact", "1 ULP", "2 ULP", "< 1 ULP", "< N-1 ULP", "Precision TBD", "Unpredictable",
              "<= Mul precision"}

OP_SECTION_FIRST = 32   # line 30 is the header, 31 the separator
EINSUM_LINE = 992       # first line of the last, unterminated record


def parse_op_records(lines: list[str]) -> list[dict[str, Any]]:
    """Split lines 32..991 into records and each record into cells.

    A record runs from its first line ('Category | Name | formula...') to the line that
    ends with '| Precision | |||||...'.  The formula cell may span lines and contain '|'
    and '||' (bitwise/logical or), but the 19 API cells and the Precision cell never do,
    so the record text is split from the right: the last 20 '|'-separated cells are the
    19 API cells and Precision, and the rest is 'Category | Name | formula', split on
    the first two '|'.  This handles API cells on a line of their own, records that fit
    on one line (e.g. 'Convolve Tranposed', 'Random Multinomial') and API cells that
    wrap over two lines (e.g. 'Quantize Linear').  The 'NA | NA | ...' lines are the API
    lines of the generic/helper records ('Elementwise Generic', 'Broadcast Dimensions').
    """
    records, start, buf = [], None, []
    for n in range(OP_SECTION_FIRST, EINSUM_LINE):
        line = lines[n - 1]
        if start is None:
            start, buf = n, []
        buf.append(line)
        if RECORD_END.search(line):
            text = RECORD_END.sub("", "\n".join(buf))
            parts = text.rsplit("|", 20)
            head = parts[0].split("|", 2)
            assert len(head) == 3, f"record at line {start}: no 'Category | Name | formula'"
            api = [p.strip() for p in parts[1:20]]
            precision = parts[20].strip()
            assert precision in PRECISIONS, f"record at line {start}: precision {precision!r}"
            records.append({"line": start, "end": n, "category": head[0].strip(), "title": head[1].strip(),
                            "formula": clean_formula(head[2]), "precision": precision,
                            "api": dict(zip(API_KEYS, api))})
            start = None
    assert start is None, f"unterminated record at line {start}"
    return records


def clean_formula(text: str) -> str | None:
    """Formula cell text: outer whitespace stripped, trailing spaces of lines removed
    (so YAML can use a literal block); otherwise verbatim, '|' characters included."""
    lines = [l.rstrip() for l in text.strip("\n").split("\n")]
    out = "\n".join(lines).strip()
    return out or None


def parse_tail(lines: list[str]) -> list[dict[str, Any]]:
    """FIXUP: the end of the seed (lines 992-1064) is truncated and irregular.

    * 992-1008: 'Aggregate | Einstein Summation |' and its formula cell, closed by the
      lone '|' on line 1008; then, instead of API cells, lines 1009-1038 hold an embedded
      einsum sub-table ('Call signature | NumPy equivalent | Description') that belongs
      to the same cell.  The record never gets API cells or a Precision cell.
    * 1039-1064: formula text of further rows whose Category/Name/API cells were lost in
      the copy: GRU gate equations (1039-1047), LSTM gate equations (1048-1058), Dropout
      (1059 up to '...per element.' on 1062), then a scale signal / scale+bias formula
      (rest of 1062 to the unterminated 1064).  Titles and categories of these rows are
      inferred from the formulas and marked so in notes.
    """
    n_lines = len(lines)
    assert n_lines == 1064, f"seed has {n_lines} lines; the tail fix-up expects 1064"
    assert lines[EINSUM_LINE - 1].startswith("Aggregate | Einstein Summation |")
    assert lines[1008 - 1].strip() == "|" and lines[1009 - 1].startswith("Call signature | NumPy equivalent")
    assert lines[1039 - 1].startswith("Z = Activation1(") and lines[1048 - 1].startswith("I = Activation1f(")
    assert lines[1059 - 1].startswith("f(X, ratio) = select(")
    split_at = lines[1062 - 1].index("function scaleSignal")

    def block(a: int, b: int) -> str:
        return "\n".join(lines[a - 1:b])

    einsum_formula = clean_formula(block(993, 1007) + "\n\n" + block(1009, 1038))
    truncated = ("Seed row truncated: only the formula text (lines {a}-{b}) survived the copy; "
                 "title and category are inferred from it and the seed has no API cells for it.")
    return [
        {"line": 992, "category": "Aggregate", "title": "Einstein Summation", "formula": einsum_formula,
         "precision": None, "api": {},
         "notes": ["The seed record is unterminated: it has no API cells and no Precision cell.",
                   "The einsum sub-table of seed lines 1009-1038 (call signature -> NumPy equivalent) "
                   "belongs to this record and is kept at the end of the formula."]},
        {"line": 1039, "category": "Recurrent", "title": "Gated Recurrent Unit",
         "formula": clean_formula(block(1039, 1047)), "precision": None, "api": {},
         "notes": [truncated.format(a=1039, b=1047)]},
        {"line": 1048, "category": "Recurrent", "title": "Long Short-Term Memory",
         "formula": clean_formula(block(1048, 1058)), "precision": None, "api": {},
         "notes": [truncated.format(a=1048, b=1058)]},
        {"line": 1059, "category": "Elementwise, Random", "title": "Dropout",
         "formula": clean_formula(block(1059, 1061) + "\n" + lines[1062 - 1][:split_at]),
         "precision": None, "api": {},
         "notes": [truncated.format(a=1059, b=1062)]},
        {"line": 1062, "category": "Elementwise Math", "title": "Scale Signal",
         "formula": clean_formula(lines[1062 - 1][split_at:] + "\n" + block(1063, 1064)),
         "precision": None, "api": {},
         "notes": [truncated.format(a=1062, b=1064),
                   "Lines 1063-1064 add a per-channel bias (bias reshaped to [1,C,1,1], like the former "
                   "ONNX ImageScaler); they may be the remains of a separate scale-and-bias row."]},
    ]


# --------------------------------------------------------------------------- cells
def cell(status: str, names: list[str] | None = None, *, seed: str | None = None,
         attrs: dict[str, Any] | None = None, notes: str | None = None,
         verified: str | None = None, also: str | None = None) -> dict[str, Any]:
    """A backends cell with keys in docs/TABLES.md order.  ``also``: a second source
    (introspect:/doc:) for cells corrected by an erratum."""
    c: dict[str, Any] = {"status": status}
    if names:
        c["name"] = names[0] if len(names) == 1 else list(names)
    if seed is not None:
        c["seed"] = seed
    if attrs:
        c["attrs"] = attrs
    if notes:
        c["notes"] = notes
    c["source"] = [SOURCE, also] if also else SOURCE
    if verified:
        c["verified"] = verified
    return c


def _attr_value(v: str) -> Any:
    return int(v) if re.fullmatch(r"-?\d+", v) else v


def generic_op_cell(key: str, raw: str) -> dict[str, Any] | None:
    """The generic rules; returns None when no rule applies (the cell needs an override)."""
    if raw in UNAVAILABLE_RAW:
        return cell("unavailable", seed=raw)
    m = re.match(r"^NA[, ]\s*(.+)$", raw)          # 'NA, just rearrange the TENSOR_DESC'
    if m:
        return cell("unavailable", seed=raw, notes=m.group(1))
    if IDENT_RE.match(raw):
        return cell("native", [raw])
    m = re.match(rf"^({IDENT}) (\w+) ?= ?(\w+)$", raw)   # 'Mod fmod=0', 'BitShift direction = LEFT'
    if m:
        return cell("native", [m.group(1)], seed=raw, attrs={m.group(2): _attr_value(m.group(3))})
    m = re.match(rf"^({IDENT}) via repeated inputs$", raw)   # binary DML op chained over N inputs
    if m:
        return cell("composite", [m.group(1)], seed=raw, notes="applied repeatedly over the inputs")
    m = re.match(r"^(DML_OPERATOR_REDUCE) with (DML_REDUCE_FUNCTION_\w+)$", raw)
    if m:
        return cell("native", [m.group(1)], seed=raw, attrs={"Function": m.group(2)})
    m = re.match(r"^(DML_OPERATOR_CONVOLUTION) with (DML_CONVOLUTION_MODE_\w+) and (DML_CONVOLUTION_DIRECTION_\w+)$", raw)
    if m:
        return cell("native", [m.group(1)], seed=raw, attrs={"Mode": m.group(2), "Direction": m.group(3)})
    m = re.match(rf"^({IDENT}) \((.+)\)$", raw)      # 'DML_OPERATOR_LP_NORMALIZATION (1D)'
    if m:
        return cell("native", [m.group(1)], seed=raw, notes=m.group(2))
    m = re.match(rf"^({IDENT}) (with .+)$", raw)     # 'DML_OPERATOR_SLICE1 with negative strides'
    if m:
        return cell("native", [m.group(1)], seed=raw, notes=m.group(2))
    m = re.match(rf"^({IDENT}) (?:/|or) ({IDENT})$", raw)   # 'maxPool2d / reduceMax', 'A or B': alternatives
    if m:
        return cell("native", [m.group(1), m.group(2)], seed=raw)
    return None


def _composite(names: list[str], raw: str, notes: str | None = None) -> dict[str, Any]:
    return cell("composite", names, seed=raw, notes=notes)


#: FIXUP: cells that the generic rules cannot read, keyed by (op id, API key) and
#: checked against the raw seed text (an override whose raw text no longer matches
#: the seed is an error).  Value: (raw seed text, cell).
CELL_OVERRIDES: dict[tuple[str, str], tuple[str, dict[str, Any]]] = {
    # --- WebNN: compositions and non-op spellings
    ("constant_of_shape", "webnn"): ("constant+expand", _composite(["constant", "expand"], "constant+expand")),
    ("root", "webnn"): ("reciprocal and pow", _composite(["reciprocal", "pow"], "reciprocal and pow")),
    ("not_equal", "webnn"): ("not(equal())", _composite(["logicalNot", "equal"], "not(equal())")),
    ("sum", "webnn"): ("add repeated", _composite(["add"], "add repeated", "applied repeatedly over the inputs")),
    ("mean", "webnn"): ("add repeated and div",
                        _composite(["add", "div"], "add repeated and div", "add applied repeatedly, then div by the input count")),
    ("max", "webnn"): ("max repeated", _composite(["max"], "max repeated", "applied repeatedly over the inputs")),
    ("depth_to_space", "webnn"): ("reshape and transpose",
                                  _composite(["reshape", "transpose"], "reshape and transpose")),
    ("shape", "webnn"): ("MLOperandDescriptor::dimensions",
                         cell("native", ["MLOperandDescriptor::dimensions"],
                              notes="operand descriptor property read at graph-build time, not a graph op")),
    ("size", "webnn"): ("product(MLOperandDescriptor::dimensions)",
                        _composite(["MLOperandDescriptor::dimensions"], "product(MLOperandDescriptor::dimensions)",
                                   "the caller multiplies the descriptor dimensions")),
    ("element_count_along_axes", "webnn"): ("product(MLOperandDescriptor::dimensions)",
                                            _composite(["MLOperandDescriptor::dimensions"],
                                                       "product(MLOperandDescriptor::dimensions)",
                                                       "the caller multiplies the descriptor dimensions of the axes")),
    # --- 'reshape (plus caller logic)': reshape with a shape the caller computes
    **{(oid, "webnn"): ("reshape (plus caller logic)",
                        _composite(["reshape"], "reshape (plus caller logic)", "the caller computes the new shape"))
       for oid in ("flatten", "squeeze", "unsqueeze", "reshape_from_axes", "reshape_to_axes")},
    **{(oid, "onnx"): ("Reshape plus caller logic",
                       _composite(["Reshape"], "Reshape plus caller logic", "the caller computes the new shape"))
       for oid in ("reshape_from_axes", "reshape_to_axes")},
    # --- ONNX
    ("not_equal", "onnx"): ("Not and Equal", _composite(["Not", "Equal"], "Not and Equal")),
    ("cos_grad", "onnx"): ("Composed", _composite(["Sin", "Mul"], "Composed",
                                                  "composed as Mul(Sin(x), dx) per the seed formula")),
    ("quantize_linear", "onnx"): ("QuantizeLinear com.microsoft QuantizeLinear",
                                  cell("native", ["QuantizeLinear", "com.microsoft.QuantizeLinear"],
                                       seed="QuantizeLinear com.microsoft QuantizeLinear")),
    ("dequantize_linear", "onnx"): ("DequantizeLinear com.microsoft DequantizeLinear",
                                    cell("native", ["DequantizeLinear", "com.microsoft.DequantizeLinear"],
                                         seed="DequantizeLinear com.microsoft DequantizeLinear")),
    ("random_uniform", "onnx"): ("RandomUniform RandomUniformLike",
                                 cell("native", ["RandomUniform", "RandomUniformLike"],
                                      seed="RandomUniform RandomUniformLike")),
    ("scatter_elements", "onnx"): ("ScatterElements torch.tensor.scatter_",
                                   cell("native", ["ScatterElements"], seed="ScatterElements torch.tensor.scatter_",
                                        notes="the seed cell also names torch.tensor.scatter_ (PyTorch), see op notes")),
    ("reverse", "onnx"): ("Reverse (Reverted)",
                          cell("unavailable", seed="Reverse (Reverted)",
                               notes="an ONNX Reverse op was proposed and reverted; not in onnx.defs")),
    # --- DirectML: compositions and alternatives
    ("root", "dml"): ("DML_OPERATOR_ELEMENT_WISE_RECIP & POW",
                      _composite(["DML_OPERATOR_ELEMENT_WISE_RECIP", "DML_OPERATOR_ELEMENT_WISE_POW"],
                                 "DML_OPERATOR_ELEMENT_WISE_RECIP & POW")),
    ("not_equal", "dml"): ("DML_OPERATOR_ELEMENT_WISE_LOGICAL_NOT and EQUALS",
                           _composite(["DML_OPERATOR_ELEMENT_WISE_LOGICAL_NOT", "DML_OPERATOR_ELEMENT_WISE_LOGICAL_EQUALS"],
                                      "DML_OPERATOR_ELEMENT_WISE_LOGICAL_NOT and EQUALS")),
    ("cos_grad", "dml"): ("DML_OPERATOR_ELEMENT_WISE_SIN & DML_OPERATOR_ELEMENT_WISE_MULTIPLY",
                          _composite(["DML_OPERATOR_ELEMENT_WISE_SIN", "DML_OPERATOR_ELEMENT_WISE_MULTIPLY"],
                                     "DML_OPERATOR_ELEMENT_WISE_SIN & DML_OPERATOR_ELEMENT_WISE_MULTIPLY")),
    ("neg", "dml"): ("DML_OPERATOR_ELEMENT_WISE_NEGATE DML_OPERATOR_ELEMENT_WISE_IDENTITY with scale = -1",
                     cell("native", ["DML_OPERATOR_ELEMENT_WISE_NEGATE", "DML_OPERATOR_ELEMENT_WISE_IDENTITY"],
                          seed="DML_OPERATOR_ELEMENT_WISE_NEGATE DML_OPERATOR_ELEMENT_WISE_IDENTITY with scale = -1",
                          notes="alternatively DML_OPERATOR_ELEMENT_WISE_IDENTITY with scale = -1")),
    ("affine", "dml"): ("DML_OPERATOR_ACTIVATION_LINEAR DML_OPERATOR_ELEMENT_WISE_IDENTITY with scale and bias",
                        cell("native", ["DML_OPERATOR_ACTIVATION_LINEAR", "DML_OPERATOR_ELEMENT_WISE_IDENTITY"],
                             seed="DML_OPERATOR_ACTIVATION_LINEAR DML_OPERATOR_ELEMENT_WISE_IDENTITY with scale and bias",
                             notes="alternatively DML_OPERATOR_ELEMENT_WISE_IDENTITY with scale and bias")),
    ("instance_normalization", "dml"): (
        "DML_OPERATOR_MEAN_VARIANCE_NORMALIZATION1 with axes = [2,3,4,...] excluding (N,C) "
        "DML_OPERATOR_MEAN_VARIANCE_NORMALIZATION with acrossChannels=false normalizeVariance=true scale and bias provided",
        cell("native", ["DML_OPERATOR_MEAN_VARIANCE_NORMALIZATION1", "DML_OPERATOR_MEAN_VARIANCE_NORMALIZATION"],
             seed="DML_OPERATOR_MEAN_VARIANCE_NORMALIZATION1 with axes = [2,3,4,...] excluding (N,C) "
                  "DML_OPERATOR_MEAN_VARIANCE_NORMALIZATION with acrossChannels=false normalizeVariance=true scale and bias provided",
             notes="MEAN_VARIANCE_NORMALIZATION1 with axes = [2,3,4,...] (excluding N,C); or "
                   "MEAN_VARIANCE_NORMALIZATION with acrossChannels=false, normalizeVariance=true, scale and bias provided")),
    ("layer_normalization", "dml"): (
        "DML_OPERATOR_MEAN_VARIANCE_NORMALIZATION1 with axes = [firstAxis, firstAxis+1, ..., input.rank - 1]. "
        "DML_OPERATOR_MEAN_VARIANCE_NORMALIZATION with acrossChannels=false normalizeVariance=true scale and bias provided",
        cell("native", ["DML_OPERATOR_MEAN_VARIANCE_NORMALIZATION1", "DML_OPERATOR_MEAN_VARIANCE_NORMALIZATION"],
             seed="DML_OPERATOR_MEAN_VARIANCE_NORMALIZATION1 with axes = [firstAxis, firstAxis+1, ..., input.rank - 1]. "
                  "DML_OPERATOR_MEAN_VARIANCE_NORMALIZATION with acrossChannels=false normalizeVariance=true scale and bias provided",
             notes="MEAN_VARIANCE_NORMALIZATION1 with axes = [firstAxis, ..., input.rank - 1]; or "
                   "MEAN_VARIANCE_NORMALIZATION with acrossChannels=false, normalizeVariance=true, scale and bias provided")),
    ("reduce_generic", "dml"): ("DML_OPERATOR_REDUCE with DML_REDUCE_FUNCTION",
                                cell("native", ["DML_OPERATOR_REDUCE"], seed="DML_OPERATOR_REDUCE with DML_REDUCE_FUNCTION",
                                     notes="with any DML_REDUCE_FUNCTION")),
    # --- CoreML: the seed names NeuralNetwork (pre-MIL) layer messages; the column holds MIL op names
    ("logical_not", "coreml"): ("LogicalNotLayerParams",
                                cell("native", ["logical_not"], seed="LogicalNotLayerParams",
                                     notes="seed names the NeuralNetwork layer LogicalNotLayerParams; MIL op logical_not",
                                     verified="coremltools 9.0 MIL op registry")),
    ("lp_normalization", "coreml"): ("L2NormalizeLayerParams (3D rightmost)",
                                     cell("native", ["l2_norm"], seed="L2NormalizeLayerParams (3D rightmost)",
                                          notes="seed names the NeuralNetwork layer L2NormalizeLayerParams; MIL op l2_norm; "
                                                "p = 2 only, over the 3 rightmost axes",
                                          verified="coremltools 9.0 MIL op registry")),
}


# --------------------------------------------------------------------------- errata
def _mod_evidence() -> dict[str, Any]:
    """Run ONNX Mod (fmod=0 and fmod=1) and numpy on Mod(-7, 3) and Mod(7, -3)."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper
    from onnx.reference import ReferenceEvaluator

    a = np.array([-7.0, 7.0], np.float32)
    b = np.array([3.0, -3.0], np.float32)
    ev: dict[str, Any] = {"onnx": onnx.__version__, "numpy": np.__version__}

    def model(fmod: int, elem: int) -> onnx.ModelProto:
        node = helper.make_node("Mod", ["A", "B"], ["C"], fmod=fmod)
        g = helper.make_graph([node], "mod", [helper.make_tensor_value_info(x, elem, [2]) for x in "AB"],
                              [helper.make_tensor_value_info("C", elem, [2])])
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
        m.ir_version = 8
        return m

    # fmod=0 is defined for integers only (float inputs require fmod=1)
    m0, m1 = model(0, TensorProto.INT32), model(1, TensorProto.FLOAT)
    ai, bi = a.astype(np.int32), b.astype(np.int32)
    ev["ref0"] = ReferenceEvaluator(m0).run(None, {"A": ai, "B": bi})[0].tolist()
    ev["ref1"] = ReferenceEvaluator(m1).run(None, {"A": a, "B": b})[0].tolist()
    try:
        import onnxruntime as ort
        ev["ort"] = ort.__version__
        ev["ort0"] = ort.InferenceSession(m0.SerializeToString(), providers=["CPUExecutionProvider"]).run(
            None, {"A": ai, "B": bi})[0].tolist()
        ev["ort1"] = ort.InferenceSession(m1.SerializeToString(), providers=["CPUExecutionProvider"]).run(
            None, {"A": a, "B": b})[0].tolist()
    except ImportError:
        ev["ort"] = None
    ev["np_mod"] = np.mod(a, b).tolist()
    ev["np_fmod"] = np.fmod(a, b).tolist()
    ev["floor_f"] = (a - b * np.floor(a / b)).tolist()
    ev["trunc_f"] = (a - b * np.trunc(a / b)).tolist()
    # The verified truth that the errata below record:
    assert ev["ref0"] == [2, -2] and ev["np_mod"] == ev["floor_f"] == [2.0, -2.0], ev
    assert ev["ref1"] == [-1.0, 1.0] and ev["np_fmod"] == ev["trunc_f"] == [-1.0, 1.0], ev
    if ev["ort"]:
        assert ev["ort0"] == ev["ref0"] and ev["ort1"] == ev["ref1"], ev
    desc = onnx.defs.get_schema("Mod").attributes["fmod"].description
    assert "floor (0)" in desc and "truncation (1)" in desc, desc
    ev["fmod_doc"] = desc.strip()
    return ev


def _run_binary(op_type: str, a: Any, b: Any) -> list[Any]:
    """Run a two-input ONNX op with the reference evaluator."""
    from onnx import helper
    from onnx.reference import ReferenceEvaluator
    node = helper.make_node(op_type, ["A", "B"], ["C"])
    return ReferenceEvaluator(node).run(None, {"A": a, "B": b})[0].tolist()


def _schema_exists(name: str) -> bool:
    import onnx.defs
    try:
        onnx.defs.get_schema(name)
        return True
    except onnx.defs.SchemaError:
        return False


def op_errata(ops: dict[str, dict[str, Any]]) -> None:
    """Record verified corrections (mutates ``ops``: fields, cells and ``errata``)."""
    import numpy as np
    import onnx

    def add(oid: str, **e: Any) -> None:
        entry = {k: e[k] for k in ("field", "seed", "verified", "note", "source") if k in e}
        ops[oid].setdefault("errata", []).append(entry)

    def replace_formula(oid: str, old: str, new: str) -> str:
        f = ops[oid]["formula"]
        assert f.count(old) == 1, (oid, old)
        ops[oid]["formula"] = f.replace(old, new)
        return f

    ort_txt = lambda ev: f", onnxruntime {ev['ort']}" if ev.get("ort") else ""  # noqa: E731
    ev = _mod_evidence()
    src = f"onnx {ev['onnx']} onnx.reference{ort_txt(ev)}, numpy {ev['numpy']}; ONNX Mod schema"
    example = (f"Mod(-7, 3) and Mod(7, -3): fmod=0 gives {ev['ref0']} (= numpy.mod = x - y*floor(x/y), sign of the "
               f"divisor); fmod=1 gives {ev['ref1']} (= numpy.fmod = C fmod = x - y*trunc(x/y), sign of the dividend). "
               f"ONNX schema: \"{ev['fmod_doc']}\"")

    # -- Modulus Truncate: the seed gives the floor formula and fmod=0 (swapped with Modulus Floor)
    old_t = "x - (y * floor(x / y))) // Result sign follows divisor sign."
    new_t = "x - (y * trunc(x / y))) // Result sign follows dividend sign."
    replace_formula("trunc_mod", old_t, new_t)
    add("trunc_mod", field="formula", seed=old_t, verified=new_t,
        note="Truncated modulus is x - y*trunc(x/y) (C fmod), whose sign follows the dividend. " + example, source=src)
    ops["trunc_mod"]["backends"]["onnx"] = cell("native", ["Mod"], seed="Mod fmod=0", attrs={"fmod": 1},
                                                notes="seed says fmod=0; corrected, see errata",
                                                also="execution:onnxruntime" if ev.get("ort") else None)
    add("trunc_mod", field="backends.onnx.attrs", seed="Mod fmod=0", verified="Mod fmod=1",
        note="ONNX Mod with fmod=0 is the floor (Python-style) modulus; truncation needs fmod=1. " + example, source=src)
    old_f = "x - (y * trunc(x / y)) // Result sign follows dividend sign."
    new_f = "x - (y * floor(x / y))) // Result sign follows divisor sign."
    replace_formula("floor_mod", old_f, new_f)
    add("floor_mod", field="formula", seed=old_f, verified=new_f,
        note="Floored modulus is x - y*floor(x/y) (numpy.mod, Python %), whose sign follows the divisor "
             "(the seed line also lacks a closing parenthesis). " + example, source=src)
    ops["floor_mod"]["backends"]["onnx"] = cell("native", ["Mod"], seed="Mod fmod=1", attrs={"fmod": 0},
                                                notes="seed says fmod=1; corrected, see errata",
                                                also="execution:onnxruntime" if ev.get("ort") else None)
    add("floor_mod", field="backends.onnx.attrs", seed="Mod fmod=1", verified="Mod fmod=0",
        note="ONNX Mod with fmod=1 is the truncated (C fmod) modulus; floor needs fmod=0 "
             "(integer inputs only; float inputs require fmod=1). " + example, source=src)

    # -- comparisons: the 'or equal' rows reuse the strict comparison
    for oid, old, new, onnx_op in (("greater_equal", "(x, y) => (x > y)", "(x, y) => (x >= y)", "GreaterOrEqual"),
                                   ("less_equal", "(x, y) => (x < y)", "(x, y) => (x <= y)", "LessOrEqual")):
        replace_formula(oid, old, new)
        a, b = np.array([1, 2, 3], np.float32), np.array([2, 2, 2], np.float32)
        res = _run_binary(onnx_op, a, b)
        strict = ((a > b) if oid == "greater_equal" else (a < b)).tolist()
        assert res == ((a >= b) if oid == "greater_equal" else (a <= b)).tolist() != strict, (onnx_op, res)
        add(oid, field="formula", seed=old, verified=new,
            note=f"The seed formula is the strict comparison; ONNX {onnx_op} (and the row's DML cell "
                 f"..._OR_EQUAL) includes equality: {onnx_op}([1,2,3], [2,2,2]) = {res}, "
                 f"the seed formula would give {strict}.",
            source=f"onnx {onnx.__version__} onnx.reference")

    # -- Clamp: min and max swapped
    old_c, new_c = "min(max(x, maxValue), minValue)", "min(max(x, minValue), maxValue)"
    replace_formula("clip", old_c, new_c)
    x = np.array([-5.0, 0.0, 5.0])
    seed_val = np.minimum(np.maximum(x, 1.0), -1.0).tolist()
    clip_val = np.clip(x, -1.0, 1.0).tolist()
    add("clip", field="formula", seed=old_c, verified=new_c,
        note=f"With minValue=-1, maxValue=1 and x=[-5,0,5] the seed formula gives {seed_val}; clamping "
             f"(ONNX Clip, numpy.clip) gives {clip_val}.", source=f"onnx {onnx.__version__} Clip schema; numpy.clip")

    # -- Hard Swish row points at HardSigmoid
    assert _schema_exists("HardSwish")
    ops["hard_swish"]["backends"]["webnn"] = cell("native", ["hardSwish"], seed="hardSigmoid",
                                                  notes="seed cell says hardSigmoid; corrected, see errata",
                                                  also="doc:https://www.w3.org/TR/webnn/#api-mlgraphbuilder-hard-swish")
    ops["hard_swish"]["backends"]["onnx"] = cell("native", ["HardSwish"], seed="HardSigmoid",
                                                 notes="seed cell says HardSigmoid; corrected, see errata",
                                                 verified=f"onnx {onnx.__version__} schema",
                                                 also=f"introspect:onnx {onnx.__version__}")
    add("hard_swish", field="backends.webnn.name", seed="hardSigmoid", verified="hardSwish",
        note="Copy of the Hard Sigmoid row; WebNN has a dedicated hardSwish op (x * max(0, min(6, x + 3)) / 6). "
             "The row's own formula and DML cell (DML_OPERATOR_ACTIVATION_HARD_SWISH) are hard swish.",
        source="doc:https://www.w3.org/TR/webnn/#api-mlgraphbuilder-hard-swish")
    add("hard_swish", field="backends.onnx.name", seed="HardSigmoid", verified="HardSwish",
        note="ONNX HardSwish: y = x * max(0, min(1, alpha*x + beta)), alpha = 1/6, beta = 0.5, which is "
             "the row's formula; HardSigmoid lacks the multiplication by x.",
        source=f"onnx {onnx.__version__} onnx.defs.get_schema('HardSwish')")

    # -- Batch normalization formula: NumPy part swaps mean and var
    old_b = ("mean = np.var(x, axis=axes, keepdims=True)\nvariance = np.mean(x, axis=axes, keepdims=True)")
    new_b = ("mean = np.mean(x, axis=axes, keepdims=True)\nvariance = np.var(x, axis=axes, keepdims=True)")
    replace_formula("batch_normalization", old_b, new_b)
    add("batch_normalization", field="formula", seed=old_b, verified=new_b,
        note="The NumPy part of the seed formula assigns np.var to mean and np.mean to variance "
             "(the ONNX part just above computes them the right way round).", source="numpy documentation")

    # -- Reduce to Minimum: copy-paste function name
    old_r, new_r = "function reduceMaximum(input, axes, keepDimensions)\nreturn reduceGeneric(input, axes, keepDimensions, min, inf)", \
                   "function reduceMinimum(input, axes, keepDimensions)\nreturn reduceGeneric(input, axes, keepDimensions, min, inf)"
    replace_formula("reduce_min", old_r, new_r)
    add("reduce_min", field="formula", seed="function reduceMaximum(input, axes, keepDimensions)",
        verified="function reduceMinimum(input, axes, keepDimensions)",
        note="Copy of the Reduce to Maximum row's function name; the body reduces with min.",
        source="seed row itself (body and ONNX/DML cells are ReduceMin)")

    # -- Identity row: two cells name identity-matrix constructors, one a non-builtin, one a wrong DML name
    ops["identity"]["backends"]["numpy"] = cell("native", ["numpy.copy"], seed="numpy.identity",
                                                notes="seed cell says numpy.identity; corrected, see errata",
                                                also=f"introspect:numpy {np.__version__}")
    eye = np.identity(3)
    add("identity", field="backends.numpy.name", seed="numpy.identity", verified="numpy.copy",
        note=f"numpy.identity(n) builds an n x n identity matrix (numpy.identity(3).shape == {eye.shape}), "
             f"not an elementwise identity; numpy.copy(x) returns x's values unchanged.",
        source=f"numpy {np.__version__}")
    ops["identity"]["backends"]["mlx"] = cell("unavailable", seed="mlx.identity",
                                              notes="seed names mlx.identity, the identity-matrix constructor; "
                                                    "no elementwise identity op is named, see errata",
                                              also="doc:https://ml-explore.github.io/mlx/build/html/python/_autosummary/mlx.core.identity.html")
    add("identity", field="backends.mlx", seed="mlx.identity", verified="mlx.core.identity is not an elementwise identity",
        note="mlx.core.identity(n) creates a square n x n identity matrix.",
        source="doc:https://ml-explore.github.io/mlx/build/html/python/_autosummary/mlx.core.identity.html")
    ops["identity"]["backends"]["tflite"] = cell("unavailable", seed="tf.identity",
                                                 notes="no IDENTITY builtin operator; the TFLite converter removes "
                                                       "tf.identity from the graph, see errata",
                                                 also="introspect:tensorflow 2.21.0")
    add("identity", field="backends.tflite", seed="tf.identity", verified="no TFLite builtin",
        note="tf.identity is a TensorFlow API, not a TFLite BuiltinOperator; the BuiltinOperator enum of "
             "tensorflow 2.21.0 (tensorflow.lite.python.schema_py_generated) has no IDENTITY member.",
        source="introspect:tensorflow 2.21.0")
    ops["identity"]["backends"]["coreml"] = cell("native", ["identity"], seed="CopyLayerParams",
                                                 notes="seed names the NeuralNetwork layer CopyLayerParams; MIL op identity",
                                                 verified="coremltools 9.0 MIL op registry",
                                                 also="introspect:coremltools 9.0")
    ops["identity"]["backends"]["dml"] = cell(
        "native", ["DML_OPERATOR_ELEMENT_WISE_IDENTITY", "DML_OPERATOR_ACTIVATION_IDENTITY"],
        seed="DML_OPERATOR_ELEMENT_WISE_IDENTITY or DML_ACTIVATION_IDENTITY",
        notes="seed spells the second name DML_ACTIVATION_IDENTITY; corrected, see errata",
        also="doc:https://learn.microsoft.com/en-us/windows/win32/api/directml/ns-directml-dml_activation_identity_operator_desc")
    add("identity", field="backends.dml.name", seed="DML_ACTIVATION_IDENTITY", verified="DML_OPERATOR_ACTIVATION_IDENTITY",
        note="DirectML operator types are DML_OPERATOR_*; the identity activation is described by "
             "DML_ACTIVATION_IDENTITY_OPERATOR_DESC and has operator type DML_OPERATOR_ACTIVATION_IDENTITY.",
        source="doc:https://learn.microsoft.com/en-us/windows/win32/api/directml/ns-directml-dml_activation_identity_operator_desc")

    # -- typos in native names
    for oid, key, seed_name, good in (("where", "tosa", "tola.select", "tosa.select"),
                                      ("non_zero", "onnx", "Nonzero", "NonZero"),
                                      ("tfidf_vectorizer", "onnx", "TfldfVectorizer", "TfIdfVectorizer")):
        c = ops[oid]["backends"][key]
        assert c["name"] == seed_name, (oid, c)
        verified = None
        if key == "onnx":
            assert _schema_exists(good) and not _schema_exists(seed_name), good
            verified = f"onnx {onnx.__version__} schema"
        ops[oid]["backends"][key] = cell("native", [good], seed=seed_name, verified=verified,
                                         notes=f"seed spells it {seed_name}; corrected, see errata",
                                         also=f"introspect:onnx {onnx.__version__}" if key == "onnx" else None)
        add(oid, field=f"backends.{key}.name", seed=seed_name, verified=good,
            note=f"Misspelling: {seed_name} -> {good}." + (" onnx.defs has no schema for the seed spelling." if key == "onnx" else
                                                           " The TOSA dialect prefix is tosa (as in the row's other TOSA cells)."),
            source=f"onnx {onnx.__version__} onnx.defs" if key == "onnx" else "TOSA MLIR dialect naming (tosa.*)")

    # -- Element Count Along Axes: ONNX Size counts every element
    size_doc = onnx.defs.get_schema("Size").doc
    assert "total number of elements" in size_doc, size_doc
    ops["element_count_along_axes"]["backends"]["onnx"] = cell(
        "composite", ["Shape", "Gather", "ReduceProd"], seed="Size",
        notes="seed says Size, which counts all elements; along given axes: ReduceProd(Gather(Shape(x), axes)), see errata",
        also=f"introspect:onnx {onnx.__version__}")
    add("element_count_along_axes", field="backends.onnx", seed="Size", verified="composite Shape, Gather, ReduceProd",
        note="ONNX Size \"outputs a int64 scalar that equals to the total number of elements of the input tensor\"; "
             "it has no axes, so counting along axes needs ReduceProd(Gather(Shape(x), axes)).",
        source=f"onnx {onnx.__version__} Size schema")

    # -- ONNX ops of the seed that onnx.defs no longer knows (experimental ops, removed)
    for oid, name in (("affine", "Affine"), ("scaled_tanh", "ScaledTanh"), ("parametric_softplus", "ParametricSoftplus")):
        assert ops[oid]["backends"]["onnx"]["name"] == name and not _schema_exists(name)
        ops[oid]["backends"]["onnx"] = cell("unavailable", seed=name,
                                            notes=f"{name} was an experimental ONNX op; not in onnx {onnx.__version__} "
                                                  f"onnx.defs, see errata",
                                            also=f"introspect:onnx {onnx.__version__}")
        add(oid, field="backends.onnx", seed=name, verified=f"no {name} schema",
            note=f"onnx.defs.get_schema('{name}') raises SchemaError in onnx {onnx.__version__}: {name} was an "
                 f"experimental op and is no longer part of ONNX.", source=f"onnx {onnx.__version__} onnx.defs")


#: broadcast per ONNX Broadcasting.md (seed 002): elementwise binary / variadic ops are
#: multidirectional; PRelu's slope and Gemm's C are unidirectional; the rest none.
MULTIDIRECTIONAL = {
    "add", "sub", "mul", "div", "pow", "root", "trunc_mod", "floor_mod", "equal", "not_equal", "greater",
    "less", "greater_equal", "less_equal", "bitwise_and", "bitwise_or", "bitwise_xor", "bit_shift_left",
    "bit_shift_right", "logical_and", "logical_or", "logical_xor", "cos_grad", "sum", "mean", "max", "min",
    "where", "expand",
}
UNIDIRECTIONAL = {"prelu", "gemm"}

#: Extra op-level notes (not cell content).
OP_NOTES = {
    "scatter_elements": ["The seed ONNX cell also names torch.tensor.scatter_ (PyTorch torch.Tensor.scatter_)."],
    "eye_like": ["The seed Name 'Diagonal Matrix' is shared with the Trilu row (seed line 333)."],
    "trilu": ["The seed Name 'Diagonal Matrix' is shared with the EyeLike row (seed line 320); "
              "the formula cell is only 'TODO:'."],
    "threshold": ["Not equivalent to ThresholdedRelu (seed note); ONNX Max with a constant minValue."],
    "elementwise_generic": ["Generic header row of the elementwise ops; WebNN..CoreML cells are NA."],
    "broadcast_dimensions": ["Helper computing broadcast output dimensions; the seed marks it NA for most APIs."],
    "pool_generic": ["Generic header row of the pooling ops; the seed has no API cells for it."],
    "reduce_generic": ["Generic header row of the reduction ops."],
}


def build_ops(lines: list[str]) -> tuple[list[dict[str, Any]], int, list[dict[str, Any]]]:
    records = parse_op_records(lines) + parse_tail(lines)
    assert [r["line"] for r in records] == list(OP_IDS), "record start lines differ from OP_IDS"
    ops: dict[str, dict[str, Any]] = {}
    seed_cells = 0
    used_overrides = set()
    for r in records:
        oid = OP_IDS[r["line"]]
        op: dict[str, Any] = {"id": oid, "title": r["title"], "category": r["category"]}
        if r["formula"]:
            op["formula"] = r["formula"]
        if r["precision"]:
            op["precision"] = r["precision"]
        op["broadcast"] = ("multidirectional" if oid in MULTIDIRECTIONAL else
                           "unidirectional" if oid in UNIDIRECTIONAL else "none")
        notes = list(r.get("notes", [])) + OP_NOTES.get(oid, [])
        if notes:
            op["notes"] = notes
        op["seed"] = {"file": "000", "line": r["line"]}
        backends: dict[str, Any] = {}
        for key, raw in r["api"].items():
            if raw == "?":
                continue
            seed_cells += 1
            if (oid, key) in CELL_OVERRIDES:
                expect, c = CELL_OVERRIDES[(oid, key)]
                assert raw == expect, f"override {oid}/{key}: seed text is {raw!r}, override expects {expect!r}"
                used_overrides.add((oid, key))
            else:
                c = generic_op_cell(key, raw)
                assert c is not None, f"line {r['line']} {oid}/{key}: no rule for {raw!r} (add a CELL_OVERRIDES entry)"
            backends[key] = dict(c)
        op["backends"] = backends
        ops[oid] = op
    unused = set(CELL_OVERRIDES) - used_overrides
    assert not unused, f"unused overrides: {sorted(unused)}"
    op_errata(ops)
    # key order of docs/TABLES.md (errata are added last by op_errata)
    order = ("id", "title", "category", "formula", "precision", "broadcast", "aliases", "notes", "errata",
             "seed", "backends")
    out = [{k: op[k] for k in order if k in op} for op in ops.values()]
    for op in out:
        op["backends"] = {k: op["backends"][k] for k in API_KEYS if k in op["backends"]}
        if not op["backends"]:
            del op["backends"]  # rows without any seed cell (einsum and the truncated tail rows)
    return out, seed_cells, records


# =========================================================================== YAML
class _Dumper(yaml.SafeDumper):
    pass


def _str_presenter(dumper: yaml.SafeDumper, data: str) -> yaml.ScalarNode:
    if "\n" in data:
        return dumper.represent_scalar("tag:yaml.org,2002:str", data, style="|")
    return dumper.represent_scalar("tag:yaml.org,2002:str", data)


_Dumper.add_representer(str, _str_presenter)


def dump(doc: dict[str, Any], header: str) -> str:
    text = yaml.dump(doc, Dumper=_Dumper, sort_keys=False, allow_unicode=True, width=100000,
                     default_flow_style=False)
    return header + text


def write_ids(path: Path, ops: list[dict[str, Any]]) -> None:
    rows = ["id\ttitle\tcategory\tonnx\tseed_line"]
    for op in ops:
        c = op.get("backends", {}).get("onnx")
        if c and c["status"] != "unavailable":
            names = c["name"] if isinstance(c["name"], list) else [c["name"]]
            onnx_txt = ",".join(names)
        else:
            onnx_txt = ONNX_HINTS.get(op["id"], "")
        rows.append("\t".join([op["id"], op["title"], op["category"], onnx_txt, str(op["seed"]["line"])]))
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")


def count_cells(doc: dict[str, Any], key: str) -> int:
    return sum(len(e.get("backends") or {}) for e in doc[key])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=Path, default=DEFAULT_SEED)
    ap.add_argument("--out", type=Path, default=ROOT, help="folder for optable.yaml and dtypes.yaml")
    ap.add_argument("--ids", type=Path, default=ROOT / "tools" / "ids.tsv")
    args = ap.parse_args(argv)

    lines = read_lines(args.seed)
    problems = check_dtype_facts()
    if problems:
        print("dtype facts disagree with numpy/ml_dtypes:", *problems, sep="\n  ", file=sys.stderr)
        return 1
    dtypes, dt_seed_cells = build_dtypes(lines)
    ops, op_seed_cells, _ = build_ops(lines)

    header = ("# Generated by tools/ingest_seeds.py from seed 000 ({}); schema: docs/TABLES.md.\n"
              "# Hand edits are allowed once the table is the source of truth; re-running the script overwrites.\n")
    op_text = dump({"schema": 1, "ops": ops}, header.format(args.seed.name))
    dt_text = dump({"schema": 1, "dtypes": dtypes}, header.format(args.seed.name))
    (args.out / "optable.yaml").write_text(op_text, encoding="utf-8")
    (args.out / "dtypes.yaml").write_text(dt_text, encoding="utf-8")
    write_ids(args.ids, ops)

    # ---- sanity check: reload and count
    op_doc = yaml.safe_load((args.out / "optable.yaml").read_text(encoding="utf-8"))
    dt_doc = yaml.safe_load((args.out / "dtypes.yaml").read_text(encoding="utf-8"))
    assert op_doc == {"schema": 1, "ops": ops} and dt_doc == {"schema": 1, "dtypes": dtypes}, "YAML round trip differs"
    n_ops, n_dt = len(op_doc["ops"]), len(dt_doc["dtypes"])
    op_written, dt_written = count_cells(op_doc, "ops"), count_cells(dt_doc, "dtypes")
    n_errata = sum(len(o.get("errata", [])) for o in op_doc["ops"]) + sum(len(d.get("errata", [])) for d in dt_doc["dtypes"])
    print(f"ops: {n_ops} (with at least one non-'?' seed cell: {sum(1 for o in op_doc['ops'] if o.get('backends'))})")
    print(f"dtypes: {n_dt}")
    print(f"op cells: non-'?' seed cells {op_seed_cells}, written {op_written}")
    print(f"dtype cells: non-'?' seed cells {dt_seed_cells}, written {dt_written}")
    print(f"errata: {n_errata}")
    ok = op_seed_cells == op_written and dt_seed_cells == dt_written and n_dt == 27
    print("cell count check:", "OK" if ok else "MISMATCH")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
