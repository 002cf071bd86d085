#!/usr/bin/env python3
"""Extract the parameter-level facts of seeds 001, 003 and 004 into YAML fragments.

Writes (under tools/fragments/):

* ``dml_descriptors.yaml`` -- every DirectML operator descriptor documented by seed 003
  (a C++ wrapper documentation whose ``XxxOperatorDesc`` structs mirror the
  ``DML_XXX_OPERATOR_DESC`` structs of ``directml.h``), parsed automatically:
  ``DML_OPERATOR_X: {desc: DML_X_OPERATOR_DESC, fields: [...], ...}``.
* ``seed_params.yaml`` -- per-ONNX-operator backend cells (``optable.yaml`` cell keys
  only: status, name, seed, attrs, dtypes, rank, notes, source), keyed by the ONNX op
  type (``_other:<id>`` when the seed row has no ONNX counterpart).  Built from

  - seed 004 (parameter mapping across NNAPI/MPS/DirectML/BNNS/oneDNN/clDNN/ONNX):
    hand-curated below in ``SEED004`` (the seed is a flattened spreadsheet whose
    column boundaries are lost, so it cannot be parsed reliably);
  - seed 003: descriptor fields parsed from the seed, ONNX attribute mapping curated in
    ``DML_ONNX``;
  - seed 001 (Russian DirectML DML_REDUCE_OPERATOR_DESC page): the per-feature-level
    tensor support tables are parsed automatically.
* ``seed_params_errata.yaml`` -- op-level errata suggested by the cross-check of the
  seeds against each other and against ``directml.h``.
* ``seed004_dtypes.yaml`` -- the three tensor-type rows at the top of seed 004.

Conventions: a cell that extends an existing seed-000 cell carries only the extra keys
plus ``source`` (no ``status``); a cell that is new carries ``status`` (and ``name`` when
native).  ``attrs`` maps an IR (ONNX, snake_case) attribute name to the backend's
parameter, or to a short note such as "implicit (...)" / "not supported".

Run:  python tools/ingest_params.py [--seeds /work/shared/seeds] [--check]
"""
from __future__ import annotations

import argparse
import re
import sys
from collections import OrderedDict
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
OUT_DIR = ROOT / "tools" / "fragments"
DEFAULT_SEEDS = Path("/work/shared/seeds")
SEED_FILES = {
    "000": "000_a8407906b74b71ae.txt",
    "001": "001_26954b91e27ea1ab.txt",
    "003": "003_f4b7c42a08ecfb0e.txt",
    "004": "004_d739728dea1fd2fb.txt",
}
CELL_ORDER = ("status", "name", "seed", "attrs", "dtypes", "rank", "notes", "source", "verified")
API_ORDER = ("onnx", "dml", "bnns", "mps", "onednn", "nnapi", "cldnn")   # TABLES.md column order

# --------------------------------------------------------------------------------------
# DirectML operator type names (enum DML_OPERATOR_TYPE, the part up to DML_TARGET_VERSION
# 0x2000, which covers everything seed 003 documents).  Used to validate the names derived
# from the seed's C++ class names.
KNOWN_DML_OPERATORS = set("""
ELEMENT_WISE_IDENTITY ELEMENT_WISE_ABS ELEMENT_WISE_ACOS ELEMENT_WISE_ADD ELEMENT_WISE_ASIN
ELEMENT_WISE_ATAN ELEMENT_WISE_CEIL ELEMENT_WISE_CLIP ELEMENT_WISE_COS ELEMENT_WISE_DIVIDE
ELEMENT_WISE_EXP ELEMENT_WISE_FLOOR ELEMENT_WISE_LOG ELEMENT_WISE_LOGICAL_AND
ELEMENT_WISE_LOGICAL_EQUALS ELEMENT_WISE_LOGICAL_GREATER_THAN ELEMENT_WISE_LOGICAL_LESS_THAN
ELEMENT_WISE_LOGICAL_NOT ELEMENT_WISE_LOGICAL_OR ELEMENT_WISE_LOGICAL_XOR ELEMENT_WISE_MAX
ELEMENT_WISE_MEAN ELEMENT_WISE_MIN ELEMENT_WISE_MULTIPLY ELEMENT_WISE_POW
ELEMENT_WISE_CONSTANT_POW ELEMENT_WISE_RECIP ELEMENT_WISE_SIN ELEMENT_WISE_SQRT
ELEMENT_WISE_SUBTRACT ELEMENT_WISE_TAN ELEMENT_WISE_THRESHOLD ELEMENT_WISE_QUANTIZE_LINEAR
ELEMENT_WISE_DEQUANTIZE_LINEAR ACTIVATION_ELU ACTIVATION_HARDMAX ACTIVATION_HARD_SIGMOID
ACTIVATION_IDENTITY ACTIVATION_LEAKY_RELU ACTIVATION_LINEAR ACTIVATION_LOG_SOFTMAX
ACTIVATION_PARAMETERIZED_RELU ACTIVATION_PARAMETRIC_SOFTPLUS ACTIVATION_RELU
ACTIVATION_SCALED_ELU ACTIVATION_SCALED_TANH ACTIVATION_SIGMOID ACTIVATION_SOFTMAX
ACTIVATION_SOFTPLUS ACTIVATION_SOFTSIGN ACTIVATION_TANH ACTIVATION_THRESHOLDED_RELU
CONVOLUTION GEMM REDUCE AVERAGE_POOLING LP_POOLING MAX_POOLING ROI_POOLING SLICE CAST SPLIT
JOIN PADDING VALUE_SCALE_2D UPSAMPLE_2D GATHER SPACE_TO_DEPTH DEPTH_TO_SPACE TILE TOP_K
BATCH_NORMALIZATION MEAN_VARIANCE_NORMALIZATION LOCAL_RESPONSE_NORMALIZATION
LP_NORMALIZATION RNN LSTM GRU
ELEMENT_WISE_SIGN ELEMENT_WISE_IS_NAN ELEMENT_WISE_ERF ELEMENT_WISE_SINH ELEMENT_WISE_COSH
ELEMENT_WISE_TANH ELEMENT_WISE_ASINH ELEMENT_WISE_ACOSH ELEMENT_WISE_ATANH ELEMENT_WISE_IF
ELEMENT_WISE_ADD1 ACTIVATION_SHRINK MAX_POOLING1 MAX_UNPOOLING DIAGONAL_MATRIX
SCATTER_ELEMENTS ONE_HOT RESAMPLE
""".split())

# Seed-003 class names whose DirectML name is not the mechanical CamelCase -> SNAKE_CASE
# conversion, or whose heading in the seed is wrong.
CLASS_TO_DML_OVERRIDES = {
    "ElementWiseReciprocalOperatorDesc": "ELEMENT_WISE_RECIP",
}
# The DirectML descriptor struct is not always DML_<op>_OPERATOR_DESC.
DESC_OVERRIDES = {
    # directml.h: struct DML_SCATTER_OPERATOR_DESC; DML_SCATTER_ELEMENTS_OPERATOR_DESC is an
    # alias added with DML_TARGET_VERSION 0x2100 (and DML_OPERATOR_SCATTER an enum alias).
    "SCATTER_ELEMENTS": "DML_SCATTER_OPERATOR_DESC",
}
_TOKEN_FIXES = [
    ("ReLU", "Relu"), ("TanH", "Tanh"), ("SinH", "Sinh"), ("CosH", "Cosh"),
    ("SoftMax", "Softmax"), ("HardMax", "Hardmax"), ("SoftPlus", "Softplus"),
    ("SoftSign", "Softsign"), ("IsNaN", "IsNan"), ("UpSample", "Upsample"),
    ("2D", "_2d"), ("LPPooling", "LpPooling"), ("LPNormalization", "LpNormalization"),
    ("ROIPooling", "RoiPooling"),
]

# Cross-check of seed 003 against directml.h (DML_TARGET_VERSION 0x6400 header, structs of
# the 1.x/2.0 feature levels).  Field *order* in the seed follows the wrapper constructors,
# which the seed says may differ from the struct order, so only names are compared.
DESCRIPTOR_ERRATA = {
    "ElementWiseClipOperatorDesc": {
        "header_fields": ["InputTensor", "OutputTensor", "ScaleBias", "Min", "Max"],
        "note": "The seed's constructor table omits Min and Max although its formula "
                "max(Min, min(x, Max)) uses them; directml.h has FLOAT Min, FLOAT Max.",
    },
    "ActivationIdentityOperatorDesc": {
        "header_fields": ["InputTensor", "OutputTensor"],
        "note": "The seed lists alpha (0.2) and beta (0.5), copied from the hard-sigmoid "
                "entry; DML_ACTIVATION_IDENTITY_OPERATOR_DESC has no Alpha/Beta.",
    },
    "SplitOperatorDesc": {
        "header_fields": ["InputTensor", "OutputCount", "OutputTensors", "Axis"],
        "note": "The seed calls the count outputTensorCount; the struct field is OutputCount.",
    },
    "JoinOperatorDesc": {
        "header_fields": ["InputCount", "InputTensors", "OutputTensor", "Axis"],
        "note": "The seed calls the count inputTensorCount; the struct field is InputCount "
                "(seed 004 also writes DML_JOIN_OPERATOR_DESC.InputCount).",
    },
    "BatchNormalizationOperatorDesc": {
        "header_fields": ["InputTensor", "MeanTensor", "VarianceTensor", "ScaleTensor",
                          "BiasTensor", "OutputTensor", "Spatial", "Epsilon", "FusedActivation"],
        "note": "The seed omits the BOOL Spatial field of DML_BATCH_NORMALIZATION_OPERATOR_DESC.",
    },
    "ActivationShrinkOperatorDesc": {
        "note": "The seed says it derives from UnaryOperatorWithScaleBiasDesc but lists no "
                "scaleBias parameter; DML_ACTIVATION_SHRINK_OPERATOR_DESC has no ScaleBias.",
    },
    "ActivationScaledELUOperatorDesc": {
        "note": "The seed describes gamma as 'The beta coefficient'; the field is Gamma.",
    },
}
# The second "ActivationHardSigmoidOperatorDesc" heading of seed 003 documents
# f(x) = Alpha * x + Beta with defaults 1.0 / 0: that is DML_ACTIVATION_LINEAR.
DUPLICATE_HEADING_FIX = {("ActivationHardSigmoidOperatorDesc", 2): "ActivationLinearOperatorDesc"}
DESCRIPTOR_ERRATA["ActivationLinearOperatorDesc"] = {
    "note": "Seed 003 heads this entry 'ActivationHardSigmoidOperatorDesc' (a duplicate "
            "heading); its formula f(x) = Alpha * x + Beta and defaults 1.0 / 0 are those "
            "of DML_ACTIVATION_LINEAR_OPERATOR_DESC.",
}

_STRUCTURAL = {"BaseOperatorDesc", "UnaryOperatorDesc", "UnaryOperatorWithScaleBiasDesc",
               "BinaryOperatorDesc"}
_PARAM_RE = re.compile(r"^(?P<name>[A-Za-z]\w*) (?P<type>const [\w:]+\*|[\w:]+\*?) (?P<desc>.*)$")
_PARAM_RENAMES = {"inputTensorA": "ATensor", "inputTensorB": "BTensor", "roiTensor": "ROITensor"}


def class_to_dml(cls: str) -> str:
    if cls in CLASS_TO_DML_OVERRIDES:
        return CLASS_TO_DML_OVERRIDES[cls]
    s = cls[: -len("OperatorDesc")]
    for a, b in _TOKEN_FIXES:
        s = s.replace(a, b)
    s = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", s)
    return s.replace("__", "_").upper()


def field_name(param: str) -> str:
    if param in _PARAM_RENAMES:
        return _PARAM_RENAMES[param]
    return param[0].upper() + param[1:]


def parse_seed003(text: str) -> list[dict]:
    """Every ``XxxOperatorDesc`` section with its constructor parameter table."""
    lines = text.split("\n")
    heads = [i for i, l in enumerate(lines) if re.fullmatch(r"[A-Za-z0-9]+OperatorDesc", l.strip())]
    seen: dict[str, int] = {}
    out = []
    for k, i in enumerate(heads):
        cls = lines[i].strip()
        end = heads[k + 1] if k + 1 < len(heads) else len(lines)
        seen[cls] = seen.get(cls, 0) + 1
        heading = cls
        cls = DUPLICATE_HEADING_FIX.get((cls, seen[cls]), cls)
        body = lines[i + 1:end]
        summary = next((l.strip() for l in body if l.strip()), "")
        params = []
        try:
            t = next(j for j, l in enumerate(body) if l.strip() == "Parameter Type Description")
        except StopIteration:
            t = None
        if t is not None:
            for l in body[t + 1:]:
                if not l.strip():
                    break
                m = _PARAM_RE.match(l.strip())
                if not m:
                    raise ValueError(f"seed 003 line {i + 1}: cannot parse parameter row {l!r}")
                params.append((m["name"], m["type"]))
        derived = next((l.strip()[len("Derived from "):-1] for l in body
                        if l.startswith("Derived from ")), None)
        out.append(dict(cls=cls, heading=heading, line=i + 1, summary=summary, params=params,
                        derived=derived, in_place=any("in-place execution" in l for l in body)))
    return out


def build_descriptors(entries: list[dict]) -> "OrderedDict[str, dict]":
    result: OrderedDict[str, dict] = OrderedDict()
    for e in entries:
        if e["cls"] in _STRUCTURAL:
            continue
        op = class_to_dml(e["cls"])
        if op not in KNOWN_DML_OPERATORS:
            raise ValueError(f"seed 003 line {e['line']}: {e['cls']} -> {op} is not a DML operator")
        key = f"DML_OPERATOR_{op}"
        if key in result:
            raise ValueError(f"duplicate descriptor {key} (seed 003 line {e['line']})")
        d: dict = {"desc": DESC_OVERRIDES.get(op, f"DML_{op}_OPERATOR_DESC")}
        d["fields"] = [field_name(p) for p, _ in e["params"]]
        d["seed_types"] = {field_name(p): t for p, t in e["params"]}
        d["seed_class"] = e["cls"] if e["cls"] == e["heading"] else f"{e['heading']} (sic; = {e['cls']})"
        d["seed_line"] = e["line"]
        d["summary"] = e["summary"]
        if e["in_place"]:
            d["in_place"] = True
        err = DESCRIPTOR_ERRATA.get(e["cls"])
        if err:
            if "header_fields" in err:
                d["header_fields"] = err["header_fields"]
            d["errata"] = err["note"]
        result[key] = d
    return result


# --------------------------------------------------------------------------------------
# Seed 001: DML_REDUCE_OPERATOR_DESC tensor support per DML_REDUCE_FUNCTION group and
# feature level.
REDUCE_FUNC_TO_ONNX = {
    "ARGMAX": "ArgMax", "ARGMIN": "ArgMin", "AVERAGE": "ReduceMean", "L1": "ReduceL1",
    "L2": "ReduceL2", "LOG_SUM": "ReduceLogSum", "LOG_SUM_EXP": "ReduceLogSumExp",
    "MAX": "ReduceMax", "MIN": "ReduceMin", "MULTIPLY": "ReduceProd", "SUM": "ReduceSum",
    "SUM_SQUARE": "ReduceSumSquare",
}
DTYPE_IDS = {"FLOAT32": "float32", "FLOAT16": "float16", "INT64": "int64", "INT32": "int32",
             "INT16": "int16", "INT8": "int8", "UINT64": "uint64", "UINT32": "uint32",
             "UINT16": "uint16", "UINT8": "uint8"}
DTYPE_ORDER = list(DTYPE_IDS.values())


def _rank(txt: str) -> dict:
    txt = txt.strip()
    m = re.fullmatch(r"От (\d+) до (\d+)", txt)        # "from N to M"
    if m:
        return {"min": int(m[1]), "max": int(m[2])}
    if re.fullmatch(r"\d+", txt):
        return {"min": int(txt), "max": int(txt)}
    raise ValueError(f"seed 001: unknown dimension count {txt!r}")


def parse_seed001(text: str) -> dict[str, list[dict]]:
    """function -> [{level, input: {rank, dtypes}, output: {rank, dtypes}}], newest level first."""
    groups: dict[str, list[dict]] = {}
    current: list[str] | None = None
    level = None
    for raw in text.split("\n"):
        line = raw.strip()
        if re.fullmatch(r"[A-Z0-9_]+(, [A-Z0-9_]+)*( и [A-Z0-9_]+)?", line) and "FEATURE" not in line:
            current = re.split(r", | и ", line)            # "и" = "and"
            for f in current:
                if f not in REDUCE_FUNC_TO_ONNX:
                    raise ValueError(f"seed 001: unknown reduce function {f!r}")
                groups.setdefault(f, [])
            continue
        m = re.fullmatch(r"(DML_FEATURE_LEVEL_\d+_\d+) и выше", line)   # "... and above"
        if m and current:
            level = m[1]
            for f in current:
                groups[f].append({"level": level})
            continue
        if current and level and line.startswith(("InputTensor |", "OutputTensor |")):
            cells = [c.strip() for c in line.split("|")]
            which = "input" if cells[0] == "InputTensor" else "output"
            types = [DTYPE_IDS[t.strip()] for t in cells[3].split(",")]
            for f in current:
                groups[f][-1][which] = {"rank": _rank(cells[2]), "dtypes": types}
    for f, levels in groups.items():
        for lv in levels:
            if "input" not in lv or "output" not in lv:
                raise ValueError(f"seed 001: {f} {lv['level']}: incomplete table")
    return groups


def _fmt_types(ts) -> str:
    return ", ".join(t for t in DTYPE_ORDER if t in ts)


def _fmt_rank(r: dict) -> str:
    return f"rank {r['min']}" if r["min"] == r["max"] else f"rank {r['min']}-{r['max']}"


def reduce_cell(func: str, levels: list[dict]) -> dict:
    newest = levels[0]
    arg = func in ("ARGMAX", "ARGMIN")
    parts = []
    prev = None
    for lv in reversed(levels):                          # oldest first
        inp, out = lv["input"], lv["output"]
        if prev is None:
            s = f"{lv['level']}: {_fmt_rank(inp['rank'])}; input {_fmt_types(inp['dtypes'])}"
            if arg:
                s += f"; output {_fmt_types(out['dtypes'])}"
        else:
            bits = []
            if inp["rank"] != prev["input"]["rank"]:
                bits.append(_fmt_rank(inp["rank"]))
            added = [t for t in inp["dtypes"] if t not in prev["input"]["dtypes"]]
            if added:
                bits.append(f"input {'/'.join(t for t in DTYPE_ORDER if t in added)} added")
            if arg:
                oadded = [t for t in out["dtypes"] if t not in prev["output"]["dtypes"]]
                if oadded:
                    bits.append(f"output {'/'.join(t for t in DTYPE_ORDER if t in oadded)} added")
            s = f"{lv['level']}: " + (", ".join(bits) if bits else "no change")
        parts.append(s)
        prev = lv
    notes = (f"DML_OPERATOR_REDUCE with Function = DML_REDUCE_FUNCTION_{func} "
             "(DML_REDUCE_OPERATOR_DESC {Function, InputTensor, OutputTensor, AxisCount, Axes}; "
             "operator available since DML_FEATURE_LEVEL_1_0). Tensor support by feature level: "
             + "; ".join(parts) + ". ")
    if arg:
        notes += ("Output is always an integer tensor (" + _fmt_types(newest["output"]["dtypes"])
                  + " at the newest level; uint32 only before DML_FEATURE_LEVEL_3_0). "
                  "Seed 001: DML_FEATURE_LEVEL_3_0 introduced standalone operators replacing "
                  "DML_REDUCE_FUNCTION_ARGMAX/ARGMIN (the seed does not name them; directml.h: "
                  "DML_OPERATOR_ARGMAX / DML_OPERATOR_ARGMIN).")
    else:
        notes += "Input and output data types must match."
    notes += (" Output DimensionCount equals the input's; reduced axes have size 1, so "
              "keepdims = 0 is a reshape of the output tensor description.")
    return {
        "attrs": {"axes": "Axes (count in AxisCount; values in [0, rank-1])",
                  "keepdims": "implicit: always kept (reduced dims have size 1)"}
        if not arg else
        {"axis": "Axes (single axis, AxisCount = 1)",
         "keepdims": "implicit: always kept (reduced dim has size 1)",
         "select_last_index": "not represented"},
        "dtypes": [t for t in DTYPE_ORDER if t in newest["input"]["dtypes"]],
        "rank": dict(newest["input"]["rank"]),
        "notes": notes,
        "source": "seed:001",
    }


# --------------------------------------------------------------------------------------
# Seed 003 -> dml cells of ONNX ops.  key -> (descriptor op(s), attrs, extra notes, extra keys)
D = "DML_OPERATOR_"
PADS = "StartPadding = pads[:n] (begin values), EndPadding = pads[n:] (end values)"
DML_ONNX: list[tuple[str, list[str], dict, str, dict]] = [
    ("Identity", ["ELEMENT_WISE_IDENTITY", "ACTIVATION_IDENTITY"], {}, "", {}),
    ("Abs", ["ELEMENT_WISE_ABS"], {}, "", {}),
    ("Acos", ["ELEMENT_WISE_ACOS"], {}, "", {}),
    ("Add", ["ELEMENT_WISE_ADD", "ELEMENT_WISE_ADD1"], {},
     "DML_ELEMENT_WISE_ADD1 (directml.h: DML_TARGET_VERSION >= 0x2000) adds an optional FusedActivation.", {}),
    ("Asin", ["ELEMENT_WISE_ASIN"], {}, "", {}),
    ("Atan", ["ELEMENT_WISE_ATAN"], {}, "", {}),
    ("Ceil", ["ELEMENT_WISE_CEIL"], {}, "", {}),
    ("Clip", ["ELEMENT_WISE_CLIP"], {"min": "Min", "max": "Max"},
     "f(x) = max(Min, min(x, Max)); ONNX Clip-6 has min/max attributes, Clip-11+ takes them as "
     "optional inputs (constant values needed here).", {}),
    ("Cos", ["ELEMENT_WISE_COS"], {}, "", {}),
    ("Div", ["ELEMENT_WISE_DIVIDE"], {}, "", {}),
    ("Exp", ["ELEMENT_WISE_EXP"], {}, "", {}),
    ("Floor", ["ELEMENT_WISE_FLOOR"], {}, "", {}),
    ("Log", ["ELEMENT_WISE_LOG"], {}, "NaN for negative x, -inf for 0.", {}),
    ("And", ["ELEMENT_WISE_LOGICAL_AND"], {}, "Result 1 for true, 0 for false.", {}),
    ("Equal", ["ELEMENT_WISE_LOGICAL_EQUALS"], {}, "Result 1 for true, 0 for false.", {}),
    ("Greater", ["ELEMENT_WISE_LOGICAL_GREATER_THAN"], {}, "Result 1 for true, 0 for false.", {}),
    ("Less", ["ELEMENT_WISE_LOGICAL_LESS_THAN"], {}, "Result 1 for true, 0 for false.", {}),
    ("Not", ["ELEMENT_WISE_LOGICAL_NOT"], {}, "", {}),
    ("Or", ["ELEMENT_WISE_LOGICAL_OR"], {}, "", {}),
    ("Xor", ["ELEMENT_WISE_LOGICAL_XOR"], {}, "", {}),
    ("Max", ["ELEMENT_WISE_MAX"], {}, "Binary: the variadic ONNX Max is a chain of these.", {}),
    ("Mean", ["ELEMENT_WISE_MEAN"], {}, "Binary f(a, b) = (a + b) / 2: a left-to-right chain is NOT the "
     "mean of 3+ inputs (mean(mean(a, b), c) weighs c by 1/2); only a balanced tree with a "
     "power-of-2 input count is exact, otherwise sum and divide.", {}),
    ("Min", ["ELEMENT_WISE_MIN"], {}, "Binary: the variadic ONNX Min is a chain of these.", {}),
    ("Pow", ["ELEMENT_WISE_POW", "ELEMENT_WISE_CONSTANT_POW"], {},
     "Negative bases only for integral exponent values (else NaN); exact when input and exponent "
     "are both integral. DML_ELEMENT_WISE_CONSTANT_POW_OPERATOR_DESC takes a scalar FLOAT Exponent.", {}),
    ("Reciprocal", ["ELEMENT_WISE_RECIP"], {}, "Seed 003 calls it ElementWiseReciprocalOperatorDesc.", {}),
    ("Sin", ["ELEMENT_WISE_SIN"], {}, "", {}),
    ("Sqrt", ["ELEMENT_WISE_SQRT"], {}, "", {}),
    ("Sub", ["ELEMENT_WISE_SUBTRACT"], {}, "", {}),
    ("Tan", ["ELEMENT_WISE_TAN"], {}, "", {}),
    ("QuantizeLinear", ["ELEMENT_WISE_QUANTIZE_LINEAR"], {"axis": "implicit (ScaleTensor/ZeroPointTensor "
     "shaped/broadcast to InputTensor)"},
     "f = clamp(round(input / scale) + zeroPoint, Min, Max): [0, 255] for uint8 output, [-128, 127] for "
     "int8. ScaleTensor must be float32 if InputTensor is int32, else the input's type; scale 0 is "
     "undefined behaviour. ZeroPointTensor is optional in directml.h.", {}),
    ("DequantizeLinear", ["ELEMENT_WISE_DEQUANTIZE_LINEAR"], {"axis": "implicit (ScaleTensor/ZeroPointTensor "
     "shaped/broadcast to InputTensor)"},
     "f = (input - zeroPoint) * scale.", {}),
    ("Elu", ["ACTIVATION_ELU"], {"alpha": "Alpha"}, "Alpha default 1.0 (as ONNX).", {}),
    ("Hardmax", ["ACTIVATION_HARDMAX"], {"axis": "implicit: last dimension (input effective rank <= 2)"},
     "1 for the first maximum of each row, 0 elsewhere. InputTensor effective rank (DimensionCount "
     "without leading 1s) must be <= 2, e.g. [1, 1, BatchCount, Width].", {}),
    ("HardSigmoid", ["ACTIVATION_HARD_SIGMOID"], {"alpha": "Alpha", "beta": "Beta"},
     "f(x) = max(0, min(Alpha * x + Beta, 1)); defaults 0.2 / 0.5 (as ONNX).", {}),
    ("LeakyRelu", ["ACTIVATION_LEAKY_RELU"], {"alpha": "Alpha"}, "Alpha default 0.01 (as ONNX).", {}),
    ("_other:affine", ["ACTIVATION_LINEAR"], {"alpha": "Alpha", "beta": "Beta"},
     "f(x) = Alpha * x + Beta, defaults 1.0 / 0 (seed 003 heads this entry "
     "'ActivationHardSigmoidOperatorDesc' by mistake).", {}),
    ("LogSoftmax", ["ACTIVATION_LOG_SOFTMAX"], {"axis": "implicit: last dimension (input effective rank <= 2)"},
     "InputTensor effective rank must be <= 2, e.g. [1, 1, BatchCount, Width].", {}),
    ("PRelu", ["ACTIVATION_PARAMETERIZED_RELU"], {}, "slope input -> SlopeTensor (same sizes as the input, "
     "broadcast via strides).", {}),
    ("_other:parametric_softplus", ["ACTIVATION_PARAMETRIC_SOFTPLUS"], {"alpha": "Alpha", "beta": "Beta"},
     "f(x) = Alpha * log(1 + exp(Beta * x)).", {}),
    ("Relu", ["ACTIVATION_RELU"], {}, "", {}),
    ("Selu", ["ACTIVATION_SCALED_ELU"], {"alpha": "Alpha", "gamma": "Gamma"},
     "Defaults Alpha 1.67326319217681884765625, Gamma 1.05070102214813232421875 (as ONNX).", {}),
    ("_other:scaled_tanh", ["ACTIVATION_SCALED_TANH"], {"alpha": "Alpha", "beta": "Beta"},
     "f(x) = Alpha * tanh(Beta * x); seed 003 defaults 1.0 / 0.5.", {}),
    ("Sigmoid", ["ACTIVATION_SIGMOID"], {}, "", {}),
    ("Softmax", ["ACTIVATION_SOFTMAX"], {"axis": "implicit: last dimension (input effective rank <= 2)"},
     "InputTensor effective rank (DimensionCount without leading 1s) must be <= 2, e.g. "
     "[1, 1, BatchCount, Width].", {}),
    ("Softplus", ["ACTIVATION_SOFTPLUS"], {},
     "f(x) = log(1 + exp(Steepness * x)) / Steepness; ONNX Softplus is Steepness = 1.0 (the default; "
     "Steepness may not be below 1.0).", {}),
    ("Softsign", ["ACTIVATION_SOFTSIGN"], {}, "", {}),
    ("Tanh", ["ACTIVATION_TANH", "ELEMENT_WISE_TANH"], {}, "", {}),
    ("ThresholdedRelu", ["ACTIVATION_THRESHOLDED_RELU"], {"alpha": "Alpha"}, "Alpha default 1.0 (as ONNX).", {}),
    ("Conv", ["CONVOLUTION"],
     {"strides": "Strides", "dilations": "Dilations", "pads": PADS, "group": "GroupCount",
      "kernel_shape": "implicit (FilterTensor sizes)"},
     "ONNX Conv = Mode DML_CONVOLUTION_MODE_CROSS_CORRELATION, Direction "
     "DML_CONVOLUTION_DIRECTION_FORWARD (CROSS_CORRELATION is the seed's C++ wrapper default; in "
     "directml.h the zero enum value is DML_CONVOLUTION_MODE_CONVOLUTION). DimensionCount = 2 for a 4-D InputTensor, 3 for 5-D; "
     "it sizes Strides, Dilations, StartPadding, EndPadding, OutputPadding. BiasTensor optional. "
     "Depthwise: GroupCount = input channel count.", {"rank": {"min": 4, "max": 5}}),
    ("ConvTranspose", ["CONVOLUTION"],
     {"strides": "Strides", "dilations": "Dilations", "pads": PADS, "group": "GroupCount",
      "output_padding": "OutputPadding", "kernel_shape": "implicit (FilterTensor sizes)",
      "output_shape": "not represented (derive pads / OutputPadding)"},
     "Direction = DML_CONVOLUTION_DIRECTION_BACKWARD (transposed convolution); StartPadding/EndPadding "
     "are interpreted according to Direction; OutputPadding zero-pads the end of each spatial output "
     "dimension. DimensionCount = 2 (4-D) or 3 (5-D).", {"rank": {"min": 4, "max": 5}}),
    ("Gemm", ["GEMM"], {"alpha": "Alpha", "beta": "Beta", "transA": "TransA", "transB": "TransB"},
     "Output = FusedActivation(Alpha * TransA(A) x TransB(B) + Beta * C); CTensor optional (0 when "
     "absent, Beta then ignored). Requires 4-D tensors [BatchCount, ChannelCount, M, K] x "
     "[BatchCount, ChannelCount, K, N] (2-D ONNX operands get leading 1s); TransA/TransB are "
     "DML_MATRIX_TRANSFORM_NONE / _TRANSPOSE.", {"name": D + "GEMM", "rank": {"min": 4, "max": 4}}),
    ("MatMul", ["GEMM"], {},
     "As a DML_GEMM with TransA = TransB = NONE, Alpha = 1, no CTensor; 4-D tensors only "
     "[BatchCount, ChannelCount, M, K] x [BatchCount, ChannelCount, K, N] (BatchCount * ChannelCount "
     "independent products), so higher-rank batches must be folded.", {"name": D + "GEMM"}),
    ("AveragePool", ["AVERAGE_POOLING"],
     {"strides": "Strides", "kernel_shape": "WindowSize", "pads": PADS,
      "count_include_pad": "IncludePadding"},
     "Spatial arrays are [Height, Width] (DimensionCount 2, 4-D input) or [Depth, Height, Width] "
     "(DimensionCount 3, 5-D input). No ceil_mode, dilations or fused activation field.",
     {"rank": {"min": 4, "max": 5}}),
    ("LpPool", ["LP_POOLING"],
     {"strides": "Strides", "kernel_shape": "WindowSize", "pads": PADS, "p": "P"},
     "Y = (X1^P + ... + Xn^P)^(1/P) over the window; P usually 1 or 2. Spatial arrays [Height, Width] "
     "or [Depth, Height, Width].", {"rank": {"min": 4, "max": 5}}),
    ("MaxPool", ["MAX_POOLING", "MAX_POOLING1"],
     {"strides": "Strides", "kernel_shape": "WindowSize", "pads": PADS},
     "Spatial arrays [Height, Width] or [Depth, Height, Width]. DML_MAX_POOLING1_OPERATOR_DESC adds "
     "OutputIndicesTensor (the ONNX Indices output: zero-based indices into the input seen as a "
     "flat array; ties keep the first). Neither descriptor has dilations, ceil_mode or "
     "storage_order. Output size: (InputSize + StartPadding + EndPadding - WindowSize) / Strides + 1.",
     {"rank": {"min": 4, "max": 5}}),
    ("MaxRoiPool", ["ROI_POOLING"], {"spatial_scale": "SpatialScale", "pooled_shape": "PooledSize"},
     "ROITensor [1, 1, NumROIs, 5] with rows [BatchID, x1, y1, x2, y2] (inclusive corners). "
     "PooledSize is a DML_SIZE_2D (the struct declares Width, Height; the seed text says "
     "'(height, width)').", {}),
    ("Slice", ["SLICE"],
     {"starts": "Offsets", "steps": "Strides", "ends": "Sizes (element counts = output sizes)",
      "axes": "implicit: DimensionCount covers every dimension"},
     "Offsets/Sizes/Strides per dimension, in elements; reads must stay in bounds; Sizes must equal "
     "the output sizes. DimensionCount must match the tensors (1 to 8). Strides are unsigned here, "
     "so negative steps are not representable in this descriptor. starts/ends/axes are Slice-1 "
     "attributes; from Slice-10 they and steps are inputs (constant values needed).", {"rank": {"min": 1, "max": 8}}),
    ("Cast", ["CAST"], {"to": "implicit (OutputTensor DataType)"}, "", {}),
    ("Split", ["SPLIT"], {"axis": "Axis", "split": "implicit (split-axis sizes of OutputTensors)"},
     "Output split-axis sizes must sum to the input's. Seed 003 names the count outputTensorCount; "
     "the field is OutputCount.", {}),
    ("Concat", ["JOIN"], {"axis": "Axis"},
     "Inputs must match except on the join axis (non-zero sizes). Seed 003 names the count "
     "inputTensorCount; the field is InputCount.", {}),
    ("Pad", ["PADDING"],
     {"mode": "PaddingMode", "pads": PADS + " (all dimensions)", "value": "PaddingValue"},
     "DimensionCount must equal the tensor rank. PaddingValue is a FLOAT, truncated for non-float "
     "tensors (10.6 -> 10). Pad-2 has mode/pads/value attributes; Pad-11+ takes pads and "
     "constant_value as inputs.", {}),
    ("Upsample", ["UPSAMPLE_2D"],
     {"scales": "ScaleSize (integer Height/Width factors, last 2 dims only)", "mode": "InterpolationMode"},
     "Only the last 2 dimensions (height, width) can be upsampled, by UINT factors; NCHW or NCDHW "
     "(other layouts via strides). InterpolationMode: NEAREST_NEIGHBOR or LINEAR. scales is an "
     "attribute in Upsample-7, an input in Upsample-9.",
     {"rank": {"min": 4, "max": 5}}),
    ("Gather", ["GATHER"], {"axis": "Axis"},
     "IndicesTensor DimensionCount must match the input's (IndexDimensions = number of meaningful "
     "trailing index dims). Negative indices allowed with a signed index type; out-of-range indices "
     "give undefined values but are clamped to the input's memory.", {}),
    ("SpaceToDepth", ["SPACE_TO_DEPTH"], {"blocksize": "BlockSize"},
     "4-D [Batch, Channels, Height, Width].", {"rank": {"min": 4, "max": 4}}),
    ("DepthToSpace", ["DEPTH_TO_SPACE"], {"blocksize": "BlockSize", "mode": "not represented in this descriptor"},
     "4-D [BatchCount, InputChannelCount, InputHeight, InputWidth]; output channels "
     "InputChannelCount / (BlockSize * BlockSize).", {"rank": {"min": 4, "max": 4}}),
    ("Tile", ["TILE"], {"repeats": "Repeats (RepeatsCount = input rank)"},
     "Output size[i] = input size[i] * Repeats[i]; Repeats > 0. ONNX repeats is an input "
     "(constant values needed).", {}),
    ("TopK", ["TOP_K"], {"axis": "Axis", "k": "K",
                         "largest": "implicit: largest only", "sorted": "implicit: sorted descending"},
     "Values sorted largest to smallest; indices relative to the start of each sequence; ties are "
     "ordered by ascending index. Seed: k > 0 and less than the axis length. k is an attribute "
     "in TopK-1, an input from TopK-10.", {}),
    ("BatchNormalization", ["BATCH_NORMALIZATION"], {"epsilon": "Epsilon", "spatial": "Spatial (not in seed 003)"},
     "Output = Scale * (Input - Mean) / sqrt(Variance + Epsilon) + Bias, optional FusedActivation; "
     "inference form (momentum / training outputs not represented).", {}),
    ("MeanVarianceNormalization", ["MEAN_VARIANCE_NORMALIZATION"],
     {"across_channels": "CrossChannel", "normalize_variance": "NormalizeVariance",
      "axes": "CrossChannel = false: [H, W]; true: [C, H, W] (other axes sets not representable)"},
     "Seed 003 documents the original DML_MEAN_VARIANCE_NORMALIZATION_OPERATOR_DESC (seed 000 names "
     "DML_OPERATOR_MEAN_VARIANCE_NORMALIZATION1, whose Axes field is not in seed 003). across_channels/"
     "normalize_variance are attributes of the experimental ONNX MVN-1 (no longer in the onnx "
     "package); MVN-9+ has axes (default [0, 2, 3], which "
     "includes the batch axis and so differs from both CrossChannel settings). Optional Scale/Bias "
     "tensors, Epsilon (1e-5 recommended), FusedActivation. 4-D [Batch, Channel, Height, Width].",
     {"rank": {"min": 4, "max": 4}}),
    ("LRN", ["LOCAL_RESPONSE_NORMALIZATION"],
     {"size": "LocalSize", "alpha": "Alpha", "beta": "Beta", "bias": "Bias"},
     "CrossChannel = true for ONNX LRN (sums across channels). b_c = a_c * (k + alpha/n * sum a^2)^-beta. "
     "Recommended defaults Alpha 0.0001, Beta 0.75, Bias 1 (as ONNX). 4-D input.",
     {"rank": {"min": 4, "max": 4}}),
    ("LpNormalization", ["LP_NORMALIZATION"], {"axis": "Axis", "p": "P"},
     "P is 1 or 2; Epsilon (1e-5 recommended) has no ONNX attribute.", {}),
    ("RNN", ["RNN"], {"direction": "Direction", "activations": "ActivationDescs (ActivationDescCount)",
                      "hidden_size": "implicit (tensor sizes)"},
     "Tensors are 4-D packed: X [1, seq_length, batch_size, input_size], W [1, num_directions, "
     "hidden_size, input_size], R [1, num_directions, hidden_size, hidden_size], B [1, 1, "
     "num_directions, 2*hidden_size]; one activation per direction. No clip / activation_alpha / "
     "activation_beta fields.", {"status": "native", "name": D + "RNN"}),
    ("LSTM", ["LSTM"], {"direction": "Direction", "activations": "ActivationDescs (ActivationDescCount)",
                        "clip": "ClipThreshold (with UseClipThreshold = true)",
                        "input_forget": "CoupleInputForget", "hidden_size": "implicit (tensor sizes)"},
     "4-D packed tensors: W [1, num_directions, 4*hidden_size, input_size], R [1, num_directions, "
     "4*hidden_size, hidden_size], B [1, 1, num_directions, 8*hidden_size], P (peephole) [1, 1, "
     "num_directions, 3*hidden_size]; gate order iofc; f, g, h activations per direction.",
     {"status": "native", "name": D + "LSTM"}),
    ("GRU", ["GRU"], {"direction": "Direction", "activations": "ActivationDescs (ActivationDescCount)",
                      "linear_before_reset": "LinearBeforeReset", "hidden_size": "implicit (tensor sizes)"},
     "4-D packed tensors: W [1, num_directions, 3*hidden_size, input_size], R [1, num_directions, "
     "3*hidden_size, hidden_size], B [1, 1, num_directions, 6*hidden_size]; gate order zrh; f, g "
     "activations per direction. No clip field.", {"status": "native", "name": D + "GRU"}),
    ("Sign", ["ELEMENT_WISE_SIGN"], {}, "", {}),
    ("IsNaN", ["ELEMENT_WISE_IS_NAN"], {}, "Returns 1 for NaN (IEEE-754), else 0.", {}),
    ("Erf", ["ELEMENT_WISE_ERF"], {}, "", {}),
    ("Sinh", ["ELEMENT_WISE_SINH"], {}, "", {}),
    ("Cosh", ["ELEMENT_WISE_COSH"], {}, "", {}),
    ("Asinh", ["ELEMENT_WISE_ASINH"], {}, "", {}),
    ("Acosh", ["ELEMENT_WISE_ACOSH"], {}, "", {}),
    ("Atanh", ["ELEMENT_WISE_ATANH"], {}, "", {}),
    ("Where", ["ELEMENT_WISE_IF"], {}, "Non-zero ConditionTensor elements select ATensor, zero selects BTensor.", {}),
    ("Shrink", ["ACTIVATION_SHRINK"], {"bias": "Bias", "lambd": "Threshold"},
     "Defaults Bias 0.0, Threshold 0.5 (as ONNX).", {}),
    ("MaxUnpool", ["MAX_UNPOOLING"],
     {"kernel_shape": "implicit (OutputTensor sizes)", "strides": "implicit (OutputTensor sizes)",
      "pads": "implicit (OutputTensor sizes)"},
     "Scatters InputTensor values to OutputTensor at IndicesTensor (zero-based flat indices, as "
     "produced by MAX_POOLING1 OutputIndicesTensor); other outputs are 0. 4-D [Batch, Channel, "
     "Height, Width]. Seed 000 marks DML MaxUnpool as '---' (not available).",
     {"status": "native", "name": D + "MAX_UNPOOLING", "rank": {"min": 4, "max": 4}}),
    ("EyeLike", ["DIAGONAL_MATRIX"], {"k": "Offset", "dtype": "implicit (OutputTensor DataType)"},
     "OutputTensor[i, i + Offset] = Value (default 1.0), 0 elsewhere; leading dims before the last "
     "two are batch. Value is a FLOAT, truncated for integer tensors. No input tensor: the output "
     "shape comes from the OutputTensor description.", {}),
    ("ScatterElements", ["SCATTER_ELEMENTS"], {"axis": "Axis"},
     "Negative indices count from the end of the axis; overlapping indices: unspecified winner. "
     "No reduction attribute.", {}),
    ("_other:threshold", ["ELEMENT_WISE_THRESHOLD"], {},
     "f(x) = max(x, Min) (optional ScaleBias applied first); FLOAT Min. Not ThresholdedRelu. "
     "(ids.tsv: op id 'threshold', whose seed-000 ONNX cell says Max.)", {}),
    ("_other:scale", ["VALUE_SCALE_2D"], {},
     "f(x) = x * Scale + Bias[c]: FLOAT Scale, per-channel Bias array (ChannelCount must be 1 or 3 "
     "and match the channel dimension); 4-D [BatchCount, ChannelCount, Height, Width]. (ids.tsv: op "
     "id 'scale', 'Scale Signal'; ONNX's deprecated ImageScaler has these scale/bias semantics.)",
     {"status": "native", "name": D + "VALUE_SCALE_2D", "rank": {"min": 4, "max": 4}}),
]


# --------------------------------------------------------------------------------------
# Seed 004, hand-curated.  Cell text stays close to the seed; "(sic)" marks seed slips.
NNAPI_SHIFT = ("Input positions as written in seed 004; NNAPI has two signatures and "
               "{pos} are the implicit-padding positions, {exp} the explicit-padding ones "
               "(the explicit-padding signature shifts the later inputs by 3).")
SEED004 = yaml.safe_load(r"""
Conv:
  nnapi:
    status: native
    name: ANEURALNETWORKS_CONV_2D
    attrs:
      pads: "input[3:6]: explicit padding left, right, top, bottom"
      auto_pad: "input[3]: implicit padding scheme SAME or VALID"
      strides: "input[4:5]: stride_width, stride_height"
      dilations: "input[11:12]: dilation_width, dilation_height"
      kernel_shape: "implicit (filter input[1] dims)"
    rank: {min: 4, max: 4}
    notes: >-
      NHWC. input[0] [batches, height, width, depth_in]; filter input[1] [depth_out,
      filter_height, filter_width, depth_in]; bias input[2] [depth_out]; fused activation
      input[6]: RELU, RELU1, RELU6; output[0] [batches, out_height, out_width, depth_out].
      @NNAPI_CONV@
  mps:
    status: native
    name: [MPSCNNConvolutionNode, MPSCNNConvolutionDescriptor]
    seed: "MPSCNNConvolutionNode + MPSCNNConvolutionDescriptor"
    attrs:
      strides: "MPSCNNConvolutionDescriptor.strideInPixelsX / strideInPixelsY"
      dilations: "MPSCNNConvolutionDescriptor.dilationRateX / dilationRateY"
      kernel_shape: "MPSCNNConvolutionDescriptor.kernelWidth / kernelHeight"
      pads: "MPSCNNConvolutionNode.offset.{x, y}"
      auto_pad: "not supported? (seed)"
    rank: {min: 4, max: 4}
    notes: >-
      NHWC MPSImage (MPSImageDescriptor {numberOfImages, featureChannels, width, height},
      MPSImageFeatureChannelFormatFloat16); sourceImage/destinationImage of MPSNNGraph.encode.
      Channels: MPSCNNConvolutionDescriptor.inputFeatureChannels / outputFeatureChannels.
      Weights weight[outputChannels][kernelHeight][kernelWidth][inputChannels / groups] from
      MPSCNNConvolutionDataSource.weights; bias MPSCNNConvolutionDataSource.biasTerms. Fused
      activation MPSCNNConvolutionDescriptor.neuron (MPSCNNNeuronReLU, MPSCNNNeuronReLUN); RELU1
      (min(1, max(-1, x))) not supported. Seed doubts that right/bottom explicit padding is
      supported ("not supported?").
    source: seed:004
  dml:
    attrs:
      strides: Strides
      dilations: Dilations
      pads: "StartPadding {top, left} / EndPadding {bottom, right}"
      auto_pad: "not supported? (seed): give explicit StartPadding/EndPadding"
    notes: >-
      Seed 004: DML_OPERATOR_CONVOLUTION + DML_CONVOLUTION_OPERATOR_DESC; InputTensor 4-D NCHW;
      FilterTensor [depth_out, depth_in, filter_height, filter_width] with
      DML_TENSOR_FLAG_OWNED_BY_DML; BiasTensor 4-D [1, depth_out, 1, 1]; fused activation
      DML_OPERATOR_ACTIVATION_RELU, RELU1/RELU6 as DML_OPERATOR_ELEMENT_WISE_CLIP {-1, 1} / {0, 6};
      the seed writes Strides/Dilations as {width, height} (see errata: the arrays follow tensor
      dimension order, height first).
  bnns:
    status: native
    name: BNNSFilterCreateConvolutionLayer
    attrs:
      strides: "BNNSConvolutionLayerParameters.x_stride / y_stride"
      pads: "BNNSConvolutionLayerParameters.x_padding / y_padding (symmetric only)"
      auto_pad: "not supported"
      kernel_shape: "BNNSConvolutionLayerParameters.k_width / k_height"
      dilations: "not supported"
    notes: >-
      BNNSImageStackDescription: P(c, x, y) at data[x + row_stride * y + image_stride * c],
      row_stride = width, image_stride = row_stride * height (NCHW). Channels
      BNNSConvolutionLayerParameters.in_channels / out_channels; weight (o, i, kx, ky) at
      weights[kx + k_width * (ky + k_height * (i + in_channels * o))]; bias
      BNNSConvolutionLayerParameters.bias. Padding: left = right and top = bottom only. Fused
      activation BNNSActivationFunctionRectifiedLinear or BNNSActivationFunctionClamp
      (min(max(x, alpha), beta)). Depthwise convolution not supported.
  onednn:
    status: native
    name: convolution_forward
    attrs:
      strides: "strides: [stride_width, stride_height] (sic, seed order)"
      dilations: "dilates: [dilation_width, dilation_height] (sic, seed order)"
      pads: "padding_l [top, left] / padding_r [bottom, right]"
      auto_pad: "not supported"
      kernel_shape: "implicit (weights_desc)"
    notes: >-
      convolution_forward::desc: src_desc 4-D NCHW, weights_desc [depth_out, depth_in,
      filter_height, filter_width], bias_desc, dst_desc. Fused activation via
      post_ops::append_eltwise (eltwise_relu, eltwise_bounded_relu). Depthwise: weights format
      dnnl_hwigo with group size = number of filters. Not in the seed: oneDNN counts dilation
      from 0 (dilates = ONNX dilations - 1).
  cldnn:
    status: native
    name: cldnn_convolution_desc
    attrs:
      strides: stride
      dilations: dilation
      pads: input_offset
      auto_pad: "not supported"
      group: "split (depthwise: split = depth_out)"
    notes: >-
      cldnn_convolution_desc.input 4-D NHWC or NCHW; weights cldnn_convolution_desc.weights; bias
      cldnn_convolution_desc.bias; output size via with_output_size / output_size. Fused
      activation with_activation; RELU1 and RELU6 not supported.
  onnx:
    notes: >-
      X [N, C, H, W] (also N-D [N, C, D1, ..., Dn]); W [M, C/group, kH, kW] (or M x C/group x
      k1 x ... x kn); B 1-D [M]. pads = [x1_begin, x2_begin, ..., x1_end, x2_end, ...], i.e.
      [top, left, bottom, right] for 2-D (the seed's "[top, bottom, left, right]" is wrong).
      auto_pad (NOTSET, SAME_UPPER, SAME_LOWER, VALID) is deprecated, and SAME_UPPER/SAME_LOWER
      have no mapping in the other APIs. No fused activation (not needed at IR level).

_other:depthwise_conv2d:
  nnapi:
    status: native
    name: ANEURALNETWORKS_DEPTHWISE_CONV_2D
    attrs:
      depth_multiplier: "input[6] (implicit-padding position; 9 with explicit padding)"
    notes: Other inputs as ANEURALNETWORKS_CONV_2D.
  mps:
    status: native
    name: [MPSCNNConvolutionNode, MPSCNNDepthWiseConvolutionDescriptor]
    seed: "MPSCNNConvolutionNode + MPSCNNDepthWiseConvolutionDescriptor"
    attrs:
      depth_multiplier: MPSCNNDepthWiseConvolutionDescriptor.channelMultiplier
    notes: Only multiplier 1 tested (seed).
  dml:
    status: native
    name: DML_OPERATOR_CONVOLUTION
    seed: "DML_OPERATOR_CONVOLUTION + DML_CONVOLUTION_OPERATOR_DESC, GroupCount = in_channels"
    attrs:
      group: "GroupCount = in_channels"
  bnns:
    status: unavailable
    seed: "[Note]: not supported"
  onednn:
    status: native
    name: convolution_forward
    notes: weights_format = dnnl_hwigo and group size = number of filters.
  cldnn:
    status: native
    name: cldnn_convolution_desc
    attrs:
      group: "split = depth_out"
  onnx:
    status: native
    name: Conv
    attrs:
      group: "= in_channels"
    notes: >-
      Depth multiplier K: out_channels = K * in_channels. Not well documented in the ONNX docs
      (seed cites tf2onnx tfonnx.py). The seed's depth-multiplier row has one cell fewer than
      columns, so the "not supported" / "only multiplier 1" notes of DML, BNNS, oneDNN and
      clDNN cannot be assigned reliably.

AveragePool:
  nnapi:
    status: native
    name: ANEURALNETWORKS_AVERAGE_POOL_2D
    attrs:
      pads: "input[1:4]: explicit padding left, right, top, bottom"
      auto_pad: "input[1]: implicit padding scheme SAME or VALID"
      strides: "input[2:3]: stride_width, stride_height"
      kernel_shape: "input[4:5]: filter_width, filter_height"
    rank: {min: 4, max: 4}
    notes: >-
      NHWC input[0] [batches, height, width, depth_in]; fused activation input[6]: RELU, RELU1,
      RELU6; output[0] [batches, out_height, out_width, depth]. @NNAPI_POOL@
  mps:
    status: native
    name: MPSCNNPoolingAverageNode
    attrs:
      pads: "MPSCNNPoolingAverageNode.offset.{x, y}"
      auto_pad: "not supported"
      strides: "MPSCNNPoolingAverageNode.strideInPixelsX / strideInPixelsY"
      kernel_shape: "MPSCNNPoolingAverageNode.kernelWidth / kernelHeight"
    rank: {min: 4, max: 4}
    notes: NHWC MPSImage. Right/bottom explicit padding not supported. No fused activation.
  dml:
    attrs:
      pads: "StartPadding {top, left} / EndPadding {bottom, right}"
      strides: Strides
      kernel_shape: WindowSize
    notes: >-
      Seed 004: DML_OPERATOR_AVERAGE_POOLING + DML_AVERAGE_POOLING_OPERATOR_DESC, 4-D NCHW; it
      writes Strides {stride_width, stride_height} and WindowSize {filter_width, filter_height}
      (seed 003: [Height, Width]). Seed 004 lists a fused activation (ACTIVATION_RELU,
      ELEMENT_WISE_CLIP) but the descriptor has no FusedActivation field: it is a separate operator.
  bnns:
    status: native
    name: BNNSFilterCreatePoolingLayer
    seed: "BNNSFilterCreatePoolingLayer, BNNSPoolingLayerParameters.BNNSPoolingFunction = BNNSPoolingAverage"
    attrs:
      pads: "BNNSPoolingLayerParameters.x_padding / y_padding"
      auto_pad: "not supported"
      strides: "BNNSPoolingLayerParameters.x_stride / y_stride"
      kernel_shape: "BNNSPoolingLayerParameters.k_width / k_height"
    notes: >-
      Pooling function BNNSPoolingAverage. Right/bottom explicit padding not supported. Fused
      activation BNNSActivationFunctionRectifiedLinear or BNNSActivationFunctionClamp. Image-stack
      layout as for convolution (the seed writes "NCWH" here, NCHW elsewhere).
  onednn:
    status: native
    name: dnnl_pooling_forward
    seed: "dnnl_pooling_forward, alg kind = dnnl_pooling_avg"
    attrs:
      pads: "padding_l [top, left] / padding_r [bottom, right]"
      auto_pad: "not supported"
      strides: "strides: [stride_width, stride_height] (sic, seed order)"
      kernel_shape: "kernel: [filter_width, filter_height] (sic, seed order)"
    notes: >-
      alg kind dnnl_pooling_avg; src_desc / dst_desc of pooling_forward::desc, 4-D NCHW (the seed
      says "kernel of convolution_forward::desc", a slip for pooling_forward::desc). Fused
      activation via post_ops::append_eltwise (eltwise_relu, eltwise_bounded_relu).
  cldnn:
    status: native
    name: cldnn_pooling_desc
    seed: "cldnn_pooling_desc.mode = cldnn_pooling_average"
    attrs:
      pads: input_offset
      auto_pad: "not supported"
      strides: stride
      kernel_shape: size
    notes: >-
      mode = cldnn_pooling_average; input 4-D NHWC or NCHW; output size via with_output_size /
      output_size. No fused activation.
  onnx:
    notes: >-
      X [N, C, H, W] (also N-D). kernel_shape [kH, kW]; strides [stride_h, stride_w]; pads as for
      Conv ([top, left, bottom, right] for 2-D; the seed's "[top, bottom, left, right]" is wrong);
      auto_pad deprecated, SAME_UPPER/SAME_LOWER not mapped.

MaxPool:
  nnapi:
    status: native
    name: ANEURALNETWORKS_MAX_POOL_2D
    attrs:
      pads: "input[1:4]: explicit padding left, right, top, bottom"
      auto_pad: "input[1]: implicit padding scheme SAME or VALID"
      strides: "input[2:3]: stride_width, stride_height"
      kernel_shape: "input[4:5]: filter_width, filter_height"
    rank: {min: 4, max: 4}
    notes: Other parameters as AVERAGE_POOL_2D (seed). @NNAPI_POOL@
  mps:
    status: native
    name: MPSCNNPoolingMaxNode
    attrs:
      pads: "MPSCNNPoolingMaxNode.offset.{x, y}"
      auto_pad: "not supported"
      strides: "MPSCNNPoolingMaxNode.strideInPixelsX / strideInPixelsY"
      kernel_shape: "MPSCNNPoolingMaxNode.kernelWidth / kernelHeight"
    rank: {min: 4, max: 4}
    notes: Parameters as for MPSCNNPoolingAverageNode (seed says "same as Average Pooling 2D").
  dml:
    attrs:
      pads: "StartPadding {top, left} / EndPadding {bottom, right}"
      strides: Strides
      kernel_shape: WindowSize
    notes: >-
      Seed 004: DML_OPERATOR_MAX_POOLING + DML_MAX_POOLING_OPERATOR_DESC; other parameters as
      average pooling.
  bnns:
    status: native
    name: BNNSFilterCreatePoolingLayer
    seed: "BNNSFilterCreatePoolingLayer, BNNSPoolingLayerParameters.BNNSPoolingFunction = BNNSPoolingMax"
    attrs:
      pads: "BNNSPoolingLayerParameters.x_padding / y_padding"
      auto_pad: "not supported"
      strides: "BNNSPoolingLayerParameters.x_stride / y_stride"
      kernel_shape: "BNNSPoolingLayerParameters.k_width / k_height"
    notes: Pooling function BNNSPoolingMax; other parameters as average pooling.
  onednn:
    status: native
    name: dnnl_pooling_forward
    seed: "dnnl_pooling_forward, alg kind = dnnl_pooling_max"
    attrs:
      pads: "padding_l [top, left] / padding_r [bottom, right]"
      auto_pad: "not supported"
      strides: strides
      kernel_shape: kernel
    notes: alg kind dnnl_pooling_max; other parameters as average pooling.
  cldnn:
    status: native
    name: cldnn_pooling_desc
    seed: "cldnn_pooling_desc.mode = cldnn_pooling_max"
    attrs:
      pads: input_offset
      auto_pad: "not supported"
      strides: stride
      kernel_shape: size
    notes: mode = cldnn_pooling_max; other parameters as average pooling.
  onnx:
    notes: >-
      Other parameters as AveragePool. Attribute storage_order is not mapped
      (https://github.com/onnx/onnx/issues/1370); the optional output Indices is not mapped.

Softmax:
  nnapi:
    status: native
    name: ANEURALNETWORKS_SOFTMAX
    notes: >-
      input[0] 2-D or 4-D (NHWC); beta input[1] (float32 scalar); output[0] same shape as input0.
  mps:
    status: native
    name: MPSCNNSoftMaxNode
    notes: sourceImage 2-D or 4-D (NHWC); destinationImage NHWC; only beta = 1.0.
  dml:
    notes: >-
      Seed 004: DML_OPERATOR_ACTIVATION_SOFTMAX + DML_ACTIVATION_SOFTMAX_OPERATOR_DESC, 4-D NCHW
      InputTensor/OutputTensor; only beta = 1.0.
  bnns:
    status: native
    name: BNNSFilterCreateVectorActivationLayer
    seed: "BNNSFilterCreateVectorActivationLayer, BNNSActivation = BNNSActivationFunctionSoftmax"
    notes: >-
      Activation BNNSActivationFunctionSoftmax; beta via BNNSActivation.beta. Input/output
      BNNSVectorDescription {size, data_type, data_scale, data_bias}, size = vector dimension.
  onednn:
    status: native
    name: dnnl_softmax_forward_desc
    attrs:
      axis: softmax_axis
    notes: data_desc of dnnl_softmax_forward_desc; only beta = 1.0.
  cldnn:
    status: native
    name: cldnn_softmax_desc
    rank: {max: 4}
    notes: Up to 4-D (NHWC or NCHW); output size via with_output_size / output_size; only beta = 1.0.
  onnx:
    notes: >-
      Input "input" is coerced to 2-D [batch_size, input_feature_dimensions] around attribute axis
      (the docs call it "X": https://github.com/onnx/onnx/issues/1369; coercion is the pre-opset-13
      semantics). No beta.

Add:
  nnapi:
    status: native
    name: ANEURALNETWORKS_ADD
    rank: {max: 4}
    notes: input[0], input[1] up to 4-D; fused activation input[2] (RELU, RELU1, RELU6); no scale/bias.
  mps:
    status: native
    name: MPSNNAdditionNode
    seed: MPSCNNAddNode
    rank: {max: 4}
    notes: >-
      primaryImage / secondaryImage of MPSNNGraph.encode, up to 4-D. Scales primaryScale /
      secondaryScale and bias (the seed writes MPSCNNArithmeticNode.{primaryScale, secondaryScale}
      and .bias; they are properties of MPSNNBinaryArithmeticNode and of the MPSCNNArithmetic
      kernels). No fused activation. The seed's class MPSCNNAddNode does not exist: the graph
      node is MPSNNAdditionNode (kernel MPSCNNAdd).
    source: [seed:004, "doc:https://developer.apple.com/documentation/metalperformanceshaders/mpsnnbinaryarithmeticnode"]
  dml:
    notes: >-
      Seed 004: DML_OPERATOR_ELEMENT_WISE_ADD + DML_ELEMENT_WISE_ADD_OPERATOR_DESC, 4-D NCHW
      (the seed writes .InputTensor; the fields are ATensor/BTensor). No scale/bias. Fused
      activation: DML_OPERATOR_ACTIVATION_RELU, ELEMENT_WISE_CLIP {-1, 1} / {0, 6}.
  bnns:
    status: native
    name: vDSP_vadd
    notes: An Accelerate vDSP function, not a BNNS layer. No scale/bias.
  onednn:
    status: native
    name: dnnl_sum_primitive_desc
    notes: >-
      Sources src[0..n-1] (dnnl_query_src_md), dst_desc; scales: a vector of scale factors, one
      per source.
  cldnn:
    status: native
    name: cldnn_eltwise_desc
    seed: "cldnn_eltwise_desc.mode = cldnn_eltwise_sum"
    notes: >-
      mode = cldnn_eltwise_sum; input (size = 2), 4-D NHWC or NCHW; fused activation
      with_activation (RELU1, RELU6 not supported); no scale/bias.
  onnx:
    notes: Inputs A and B, output C; no limit on tensor rank.

Mul:
  nnapi:
    status: native
    name: ANEURALNETWORKS_MUL
    rank: {max: 4}
    notes: input[0], input[1] up to 4-D; fused activation input[2] (RELU, RELU1, RELU6); no scale/bias.
  mps:
    status: native
    name: MPSNNMultiplicationNode
    rank: {max: 4}
    notes: >-
      primaryImage / secondaryImage up to 4-D; scales primaryScale / secondaryScale and bias
      (seed: MPSCNNArithmeticNode.*, see Add); no fused activation.
  dml:
    notes: >-
      Seed 004: DML_OPERATOR_ELEMENT_WISE_MULTIPLY + DML_ELEMENT_WISE_MULTIPLY_OPERATOR_DESC, 4-D
      NCHW. Fused activation: DML_OPERATOR_ACTIVATION_RELU, ELEMENT_WISE_CLIP {-1, 1} / {0, 6}.
  bnns:
    status: native
    name: vDSP_vmul
    notes: An Accelerate vDSP function, not a BNNS layer.
  onednn:
    status: unavailable
    seed: "[Note]: not supported"
  cldnn:
    status: native
    name: cldnn_eltwise_desc
    seed: "cldnn_eltwise_desc.mode = cldnn_eltwise_prod"
    notes: >-
      mode = cldnn_eltwise_prod; input (size = 2), 4-D NHWC or NCHW; fused activation
      with_activation (RELU1, RELU6 not supported); no scale/bias.
  onnx:
    notes: Inputs A and B, output C; no limit on tensor rank.

Concat:
  nnapi:
    status: native
    name: ANEURALNETWORKS_CONCATENATION
    attrs:
      axis: "input[n] (after the n input tensors)"
    notes: input[0 .. n-1] the n input tensors; output[0] the result.
  mps:
    status: native
    name: MPSNNConcatenationNode
    attrs:
      axis: "implicit: feature channels (depth) only"
    notes: MPSNNImageNode inputs; output 4-D NHWC.
  dml:
    attrs:
      axis: Axis
    notes: >-
      Seed 004: DML_OPERATOR_JOIN + DML_JOIN_OPERATOR_DESC {InputTensors, InputCount, Axis,
      OutputTensor}, 4-D NCHW output.
  bnns:
    status: unavailable
    seed: "[Note]: not supported"
    notes: >-
      Workaround: memcpy, since BNNS stores pixels by channel (seed: "when the concatenation axis is
      4, it means concatenation by channel").
  onednn:
    status: native
    name: dnnl_concat_primitive_desc
    attrs:
      axis: concat_dimension
    notes: Sources src[0..n-1] (dnnl_query_src_md), dst (dnnl_query_dst_md, 0).
  cldnn:
    status: native
    name: cldnn_concatenation_desc
    attrs:
      axis: axis
    notes: cldnn_concatenation_desc.input (2 to n inputs).
  onnx:
    notes: Inputs "inputs" (list of tensors), attribute axis, output concat_result.

Reshape:
  nnapi:
    status: native
    name: ANEURALNETWORKS_RESHAPE
    rank: {max: 4}
    notes: input[0] up to 4-D; output shape input[1] (1-D int32 tensor); output[0].
  mps:
    status: native
    name: MPSNNReshape
    rank: {max: 4}
    notes: >-
      Output shape given by the destination image; up to 4-D. (MPSNNReshape is the kernel; the
      graph node is MPSNNReshapeNode.)
  dml:
    notes: >-
      Seed 004: DML_OPERATOR_CAST + DML_CAST_OPERATOR_DESC {InputTensor, OutputTensor}, output
      shape given by the destination tensor (a same-type cast copying into a differently shaped
      tensor description; seed 000 instead says no operator is needed, only a new TENSOR_DESC).
  bnns:
    status: unavailable
    seed: "[Note]: not supported"
  onednn:
    status: native
    name: dnnl_reorder_primitive_desc
    notes: src_desc / dst_desc of the reorder; output shape given by the destination.
  cldnn:
    status: native
    name: cldnn_reshape_desc
    notes: cldnn_reshape_desc.input 4-D {N, C, H, W}; target shape cldnn_reshape_desc.output_shape.
  onnx:
    notes: Inputs data and shape (tensor(int64)); output reshaped.

_other:fully_connected:
  nnapi:
    status: native
    name: ANEURALNETWORKS_FULLY_CONNECTED
    rank: {min: 2}
    notes: >-
      input[0] rank >= 2; weights input[1] 2-D; bias input[2] 1-D; fused activation input[3]
      (RELU, RELU1, RELU6); output[0].
  mps:
    status: native
    name: MPSCNNFullyConnectedNode
    notes: >-
      Input reshaped to MPSImageDescriptor {1, 1, product(dimensions) / weights[1], weights[1]};
      weights as MPSCNNConvolutionDescriptor {1, 1, weights[0], weights[1]} +
      MPSCNNConvolutionDataSource.weights; bias MPSCNNConvolutionDataSource.biasTerms (size =
      outputFeatureChannels); output {1, 1, output_size, outputFeatureChannels}; fused activation
      MPSCNNConvolutionDescriptor.neuron (MPSCNNNeuronReLU, MPSCNNNeuronReLUN).
  dml:
    status: native
    name: DML_OPERATOR_GEMM
    seed: "DML_OPERATOR_GEMM + DML_GEMM_OPERATOR_DESC"
    notes: >-
      Input reshaped {n, c, h, w} -> {1, 1, input_batch_size, input_size} (the seed calls it
      DML_GEMM_OPERATOR_DESC.InputTensor; the field is ATensor); weights BTensor; bias CTensor
      with sizes {1, 1, output_batch_size, output_num_units} and strides {1, 1, 0, 1} (broadcast
      over the batch); fused activation DML_OPERATOR_ACTIVATION_RELU, ELEMENT_WISE_CLIP {-1, 1} /
      {0, 6}.
  bnns:
    status: native
    name: BNNSFilterCreateFullyConnectedLayer
    notes: >-
      Input/output BNNSVectorDescriptor (vector of size elements of data_type); weights
      BNNSFullyConnectedLayerParameters.weights; bias .bias; fused activation .activation.
  onednn:
    status: native
    name: dnnl_inner_product_forward_desc
    notes: >-
      Input logical order nc {input_batch_size, input_size}; weights oi {num_units, input_size};
      bias 1-D {bias_num_units}; output nc {output_batch_size, output_num_units}; fused activation
      post_ops::append_eltwise (eltwise_relu, eltwise_bounded_relu).
  cldnn:
    status: native
    name: cldnn_fully_connected_desc
    notes: >-
      Input reshaped to 2-D; weights cldnn_fully_connected_desc.weights; bias .bias; output_shape;
      fused activation with_activation (RELU1, RELU6 not supported).

Resize:
  nnapi:
    status: native
    name: ANEURALNETWORKS_RESIZE_BILINEAR
    attrs:
      mode: "implicit: bilinear"
    rank: {min: 4, max: 4}
    notes: input[0] 4-D; output height input[1], output width input[2]; output[0].
  mps:
    status: native
    name: MPSCNNUpsamplingBilinearNode
    attrs:
      mode: "implicit: bilinear"
    rank: {min: 4, max: 4}
    notes: Output height and width must be integral multiples of the input's.
  dml:
    notes: >-
      Seed 004 ("Resize Bilinear"): DML_OPERATOR_UPSAMPLE_2D + DML_UPSAMPLE_2D_OPERATOR_DESC, 4-D
      NCHW; output height and width must be integral multiples of the input's (seed 000 maps Resize
      to DML_OPERATOR_RESAMPLE and Upsample to DML_OPERATOR_UPSAMPLE_2D).
  bnns:
    status: composite
    name: [vImageVerticalShear, vImageHorizontalShear]
    seed: vImageVerticalShear and vImageHorizontalShear
    notes: Accelerate vImage functions on vImage_Buffer (output size vImage_Buffer.height / .width).
  onednn:
    status: native
    name: dnnl_resampling_forward_desc
    seed: "dnnl_resampling_forward_desc, alg_kind = dnnl_resampling_linear"
    attrs:
      mode: "alg_kind = dnnl_resampling_linear"
    notes: src_desc / dst_desc of resampling_forward_desc.
  cldnn:
    status: unavailable
    seed: "[Note]: not supproted. (could implement by cldnn_custom_gpu_primitive_desc for custom opencl kernel)"

Transpose:
  nnapi:
    status: native
    name: ANEURALNETWORKS_TRANSPOSE
    attrs:
      perm: "optional 1-D tensor input (input[1])"
    notes: input[0] n-D; output[0] same type as input0.

_other:batch_to_space_nd:
  nnapi:
    status: native
    name: ANEURALNETWORKS_BATCH_TO_SPACE_ND
    notes: >-
      input[0] n-D tensor to reshape; block sizes input[1] (1-D tensor); input[2] optional boolean
      scalar; output[0] same type as input0.

Max:
  nnapi:
    status: native
    name: ANEURALNETWORKS_MAXIMUM
    notes: >-
      Two inputs of the same type with compatible dimensions (binary; ONNX Max is variadic);
      output[0] same type as input0.

Tanh:
  nnapi:
    status: native
    name: ANEURALNETWORKS_TANH
    notes: input[0] a tensor; output[0] same shape.

ArgMax:
  nnapi:
    status: native
    name: ANEURALNETWORKS_ARGMAX
    attrs:
      axis: "input[1] (int32 scalar)"
      keepdims: "implicit: 0 (output rank n-1)"
    notes: input[0] n-D; output[0] (n-1)-D int32.
  mps:
    status: native
    name: MPSNNReductionFeatureChannelsArgumentMaxNode
    attrs:
      axis: "implicit: feature channels (depth) only"
  dml:
    notes: >-
      Seed 004: DML_OPERATOR_REDUCE + DML_REDUCE_OPERATOR_DESC, 4-D NCHW, output
      DML_TENSOR_DATA_TYPE_UINT32 (the seed writes the axis as DML_REDUCE_OPERATOR_DESC.Axis and the
      output as .InputTensor; the fields are Axes/AxisCount and OutputTensor).
  cldnn:
    status: native
    name: cldnn_arg_max_min_desc
    attrs:
      axis: axis
    notes: cldnn_arg_max_min_desc.input / .output.

Sigmoid:
  nnapi:
    status: native
    name: ANEURALNETWORKS_LOGISTIC
    notes: input[0] a tensor; output[0] same shape.
  mps:
    status: native
    name: MPSCNNNeuronSigmoidNode
  dml:
    notes: >-
      Seed 004: DML_OPERATOR_ACTIVATION_SIGMOID + DML_ACTIVATION_SIGMOID_OPERATOR_DESC, 4-D NCHW (its
      input/output rows say DML_REDUCE_OPERATOR_DESC, a copy slip).
  bnns:
    status: native
    name: BNNSFilterCreateVectorActivationLayer
    seed: "BNNSFilterCreateVectorActivationLayer, BNNSActivation = BNNSActivationSigmod"
    notes: >-
      Activation function sigmoid (the seed's "BNNSActivationSigmod" is a typo; the enum is
      BNNSActivationFunctionSigmoid). BNNSVectorDescription input/output.
  onednn:
    status: native
    name: dnnl_eltwise_forward_desc
    seed: "dnnl_eltwise_forward_desc, alg_kind = dnnl_eltwise_logistic"
    notes: alg_kind = dnnl_eltwise_logistic.
  cldnn:
    status: native
    name: cldnn_activation_desc
    seed: "cldnn_activation_desc with activation_desc.activation_func = activation_logistic"
    notes: activation_func = activation_logistic; 4-D {N, C, H, W}.

PRelu:
  nnapi:
    status: native
    name: ANEURALNETWORKS_PRELU
  mps:
    status: native
    name: MPSCNNNeuronPReLUNode
  dml:
    notes: >-
      Seed 004: DML_OPERATOR_ACTIVATION_PARAMETERIZED_RELU +
      DML_ACTIVATION_PARAMETERIZED_RELU_OPERATOR_DESC, 4-D NCHW (its input row says
      DML_REDUCE_OPERATOR_DESC, a copy slip).
  cldnn:
    status: native
    name: cldnn_activation_desc
    seed: "cldnn_activation_desc with activation_desc.activation_func = activation_relu_negative_slope"
    notes: activation_func = activation_relu_negative_slope.
""")


def _subst(cells: dict) -> None:
    conv = NNAPI_SHIFT.format(pos="input[4:5] (strides) and input[6] (fused activation)",
                              exp="input[3:6] (padding) and input[11:12] (dilations; 8:9 with implicit padding)")
    pool = NNAPI_SHIFT.format(pos="input[1] (scheme), input[2:3], input[4:5] and input[6]",
                              exp="input[1:4] (padding)")
    for op in cells.values():
        for cell in op.values():
            if isinstance(cell.get("notes"), str):
                cell["notes"] = cell["notes"].replace("@NNAPI_CONV@", conv).replace("@NNAPI_POOL@", pool)


# --------------------------------------------------------------------------------------
def _add_source(cell: dict, src) -> None:
    cur = cell.get("source")
    cur = [] if cur is None else ([cur] if isinstance(cur, str) else list(cur))
    for s in ([src] if isinstance(src, str) else src):
        if s not in cur:
            cur.append(s)
    cell["source"] = cur[0] if len(cur) == 1 else cur


def merge_cell(base: dict, extra: dict) -> dict:
    """Combine two partial cells of the same (op, api): attrs union, notes concatenated."""
    out = dict(base)
    for k, v in extra.items():
        if k == "source":
            continue
        if k == "attrs":
            attrs = dict(out.get("attrs") or {})
            for a, val in v.items():
                if a in attrs and attrs[a] != val:
                    attrs[a] = f"{attrs[a]}; {val}" if isinstance(attrs[a], str) else attrs[a]
                else:
                    attrs.setdefault(a, val)
            out["attrs"] = attrs
        elif k == "notes":
            out["notes"] = (out["notes"] + " " + v) if out.get("notes") else v
        elif k in ("rank", "dtypes", "name", "status", "seed"):
            if k in out and out[k] != v:
                if k == "rank":   # keep the wider, more specific statement (seed 003/001)
                    out[k] = v
                elif k == "name":
                    raise ValueError(f"conflicting names {out[k]!r} / {v!r}")
                else:
                    out[k] = v
            else:
                out[k] = v
        else:
            out[k] = v
    _add_source(out, base.get("source", []))
    _add_source(out, extra["source"])
    return out


def _ordered(cell: dict) -> dict:
    return {k: cell[k] for k in CELL_ORDER if k in cell}


def build_dml_cells(descs: "OrderedDict[str, dict]") -> dict[str, dict]:
    cells: dict[str, dict] = {}
    for key, ops, attrs, note, extra in DML_ONNX:
        parts = []
        for op in ops:
            d = descs[D + op]
            fields = d.get("header_fields") or d["fields"]
            order = "directml.h" if d.get("header_fields") else "seed 003 constructor order"
            parts.append(f"{d['desc']} {{{', '.join(fields)}}} ({order})")
        notes = "; ".join(parts) + "."
        if note:
            notes += " " + note
        cell: dict = {}
        cell.update({k: v for k, v in extra.items() if k in ("status", "name")})
        if attrs:
            cell["attrs"] = dict(attrs)
        if "rank" in extra:
            cell["rank"] = extra["rank"]
        cell["notes"] = notes
        cell["source"] = "seed:003"
        cells[key] = cell
    return cells


def build(seeds: Path) -> tuple[dict, "OrderedDict[str, dict]", dict]:
    t003 = (seeds / SEED_FILES["003"]).read_text(encoding="utf-8")
    t001 = (seeds / SEED_FILES["001"]).read_text(encoding="utf-8")
    descs = build_descriptors(parse_seed003(t003))
    reduce_levels = parse_seed001(t001)

    ops: dict[str, dict] = {}
    s004 = {k: {api: dict(c) for api, c in v.items()} for k, v in SEED004.items()}
    _subst(s004)
    for key, apis in s004.items():
        for api, cell in apis.items():
            cell.setdefault("source", "seed:004")
            ops.setdefault(key, {})[api] = cell
    for key, cell in build_dml_cells(descs).items():
        cur = ops.setdefault(key, {}).get("dml")
        ops[key]["dml"] = merge_cell(cur, cell) if cur else cell
    for func, levels in reduce_levels.items():
        key = REDUCE_FUNC_TO_ONNX[func]
        cell = reduce_cell(func, levels)
        _add_source(cell, "seed:003")            # Axes/AxisCount mapping also in seed 003
        cur = ops.setdefault(key, {}).get("dml")
        ops[key]["dml"] = merge_cell(cur, cell) if cur else cell

    out: dict = {}
    for key in sorted(ops, key=lambda k: (k.startswith("_other:"), k.lower())):
        out[key] = {api: _ordered(ops[key][api]) for api in API_ORDER if api in ops[key]}
    return out, descs, reduce_levels


ERRATA = yaml.safe_load(r"""
Gemm:
- field: backends.dml.name
  seed: DML_OPERATOR_MATRIX_GEMM
  verified: DML_OPERATOR_GEMM
  note: >-
    Seed 000 names the DirectML operator DML_OPERATOR_MATRIX_GEMM, which is not a member of
    DML_OPERATOR_TYPE; seed 003 (GEMMOperatorDesc) and seed 004 (DML_OPERATOR_GEMM +
    DML_GEMM_OPERATOR_DESC) and directml.h use DML_OPERATOR_GEMM.
  source: seed:004
MatMul:
- field: backends.dml.name
  seed: DML_OPERATOR_MATRIX_GEMM
  verified: DML_OPERATOR_GEMM
  note: As for Gemm.
  source: seed:003
MaxUnpool:
- field: backends.dml
  seed: "---"
  verified: DML_OPERATOR_MAX_UNPOOLING
  note: >-
    Seed 000 marks DirectML MaxUnpool unavailable, but seed 003 documents MaxUnpoolingOperatorDesc
    (DML_OPERATOR_MAX_UNPOOLING, in directml.h since DML_TARGET_VERSION 0x2000).
  source: seed:003
Conv:
- field: backends.onnx.notes
  seed: "for 2D image, it's [top, bottom, left, right]"
  verified: "[top, left, bottom, right]"
  note: >-
    Seed 004's own description of pads is [x1_begin, x2_begin, ..., x1_end, x2_end, ...], which
    for 2-D is [top, left, bottom, right]; the same slip appears in the pooling rows.
  source: seed:004
- field: backends.dml.attrs
  seed: "DML_CONVOLUTION_OPERATOR_DESC.Strides {stride_width, stride_height}"
  verified: "[stride_height, stride_width] (tensor dimension order)"
  note: >-
    Seed 003 gives the DirectML spatial arrays as [Height, Width] / [Depth, Height, Width]; seed
    004 writes them width first (Strides, Dilations, WindowSize). The same applies to the oneDNN
    strides/dilates/kernel arrays, which seed 004 also lists width first.
  source: seed:003
- field: backends.nnapi.attrs
  seed: "stride input[4:5], fused activation input[6], dilation input[11:12], padding input[3:6]"
  verified: "implicit padding: 3 scheme, 4-5 strides, 6 activation, 8-9 dilations; explicit: 3-6 padding, 7-8 strides, 9 activation, 11-12 dilations"
  note: Seed 004 mixes the input positions of NNAPI's two CONV_2D signatures.
  source: seed:004
ArgMax:
- field: backends.dml.notes
  seed: "DML_REDUCE_OPERATOR_DESC.Axis; output DML_REDUCE_OPERATOR_DESC.InputTensor {DML_TENSOR_DATA_TYPE_UINT32}"
  verified: "DML_REDUCE_OPERATOR_DESC.Axes / AxisCount; output OutputTensor"
  note: Seed 004 slips; seed 003 and seed 001 give Axes/AxisCount.
  source: seed:003
ReduceSum:
- field: notes
  seed: "Пример 3 ... [[21]] // sum({1, 2, 3, 3, 0, 4, 2, 5, 2})"
  verified: "sum({1, 2, 3, 3, 0, 4, 2, 4, 2}) = 21"
  note: Seed 001's third example lists a 5 that is not in the input tensor (the total 21 is right).
  source: seed:001
Add:
- field: backends.mps.name
  seed: MPSCNNAddNode
  verified: MPSNNAdditionNode
  note: >-
    MPSCNNAddNode is not an MPS class; the MPSNNGraph node is MPSNNAdditionNode (kernel MPSCNNAdd);
    primaryScale/secondaryScale/bias are properties of MPSNNBinaryArithmeticNode / MPSCNNArithmetic,
    not of an "MPSCNNArithmeticNode".
  source: "doc:https://developer.apple.com/documentation/metalperformanceshaders/mpsnnbinaryarithmeticnode"
Reshape:
- field: backends.dml
  seed: "DML_OPERATOR_CAST + DML_CAST_OPERATOR_DESC (seed 004)"
  verified: null
  note: >-
    Seed 004 uses a same-type DML_OPERATOR_CAST to copy into a differently shaped tensor; seed 000
    says no operator is needed (only a new TENSOR_DESC). Both are valid strategies; they disagree
    on whether a DML operator is dispatched.
  source: seed:004
""")


def seed004_dtypes() -> dict:
    return yaml.safe_load(r"""
float32:
  nnapi: {status: native, name: ANEURALNETWORKS_TENSOR_FLOAT32, source: seed:004}
  mps: {status: native, name: MPSImageFeatureChannelFormatFloat32, notes: "MPS uses float16 internally (seed 004).", source: seed:004}
  bnns: {status: native, name: BNNSDataTypeFloat32, source: seed:004}
  onednn: {status: native, name: "memory::data_type::f32", seed: "memory::data_type:f32", source: seed:004}
  cldnn: {status: native, name: cldnn_f32, source: seed:004}
float16:
  nnapi: {status: native, name: ANEURALNETWORKS_TENSOR_FLOAT16, source: seed:004}
  mps: {status: native, name: MPSImageFeatureChannelFormatFloat16, source: seed:004}
  bnns: {status: native, name: BNNSDataTypeFloat16, source: seed:004}
  onednn: {status: native, name: "memory::data_type::f16", seed: "memory::data_type:f16", source: seed:004}
  cldnn: {status: native, name: cldnn_f16, source: seed:004}
_other:quant8:
  nnapi: {status: native, name: ANEURALNETWORKS_TENSOR_QUANT8_ASYMM, notes: "real_value = (integer_value - zeroPoint) * scale; uint8 storage.", source: seed:004}
  mps: {status: unavailable, seed: "[Note]: not supported", source: seed:004}
  dml: {status: native, name: DML_TENSOR_DATA_TYPE_UINT8, notes: "Plain uint8 tensor; quantization is done by operators.", source: seed:004}
  bnns: {status: unavailable, seed: "[Note]: not supported", source: seed:004}
  onednn: {status: native, name: "memory::data_type::s8", seed: "memory::data_type:s8", notes: "Signed int8, unlike NNAPI's unsigned asymmetric type.", source: seed:004}
  cldnn: {status: unavailable, seed: "[Note]: not supported", source: seed:004}
""")


HEADERS = {
    "seed_params.yaml": """\
# Keys: ONNX op type (or _other:<id> when the seed row has no ONNX counterpart) -> API key ->
# partial optable.yaml cell.  A cell without `status` extends an existing seed-000 cell.
# attrs: IR (ONNX) attribute -> the API's parameter, or a note ("implicit ...", "not supported").
# DirectML field lists in notes follow seed 003's constructor order unless marked directml.h.
""",
    "dml_descriptors.yaml": """\
# DML_OPERATOR_<X> -> descriptor struct and its fields as documented by seed 003 (a C++ wrapper
# whose XxxOperatorDesc structs are binary compatible with directml.h's DML_XXX_OPERATOR_DESC).
# fields: seed constructor order with names in directml.h spelling (the seed says constructor
# order may differ from struct order); seed_types: the wrapper's C++ types; header_fields/errata:
# where the seed disagrees with directml.h (checked by hand against DML_TARGET_VERSION 0x6400).
""",
    "seed_params_errata.yaml": """\
# Suggested op-level errata (optable.yaml `errata` entries), keyed by ONNX op type.
""",
    "seed004_dtypes.yaml": """\
# Tensor-type rows of seed 004, keyed by dtype id (dtypes.yaml) -> API key -> cell.  The DML and
# ONNX names of float32/float16 agree with seed 000 and are left out.
""",
}


def dump(data, path: Path, seeds: str) -> None:
    head = (f"# Generated by tools/ingest_params.py from seed(s) {seeds}; edit the curated tables in\n"
            "# the script and re-run it rather than editing this file.\n" + HEADERS[path.name])
    class _Dumper(yaml.SafeDumper):
        pass

    def _str(dumper, s):
        style = ">" if len(s) > 90 else None
        return dumper.represent_scalar("tag:yaml.org,2002:str", s, style=style)

    _Dumper.add_representer(str, _str)
    text = yaml.dump(data, Dumper=_Dumper, sort_keys=False, allow_unicode=True, width=96,
                     default_flow_style=False)
    path.write_text(head + text, encoding="utf-8")
    if yaml.safe_load(path.read_text(encoding="utf-8")) != data:
        raise AssertionError(f"{path}: YAML round trip changed the data")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", type=Path, default=DEFAULT_SEEDS)
    ap.add_argument("--out", type=Path, default=OUT_DIR)
    ap.add_argument("--check", action="store_true", help="only print the coverage summary")
    args = ap.parse_args(argv)
    params, descs, _ = build(args.seeds)
    if not args.check:
        args.out.mkdir(parents=True, exist_ok=True)
        dump(params, args.out / "seed_params.yaml", "001, 003, 004")
        dump(dict(descs), args.out / "dml_descriptors.yaml", "003")
        dump(ERRATA, args.out / "seed_params_errata.yaml", "000, 001, 003, 004")
        dump(seed004_dtypes(), args.out / "seed004_dtypes.yaml", "004")
    per_api: dict[str, int] = {}
    per_api_other: dict[str, int] = {}
    for key, apis in params.items():
        for api in apis:
            tgt = per_api_other if key.startswith("_other:") else per_api
            tgt[api] = tgt.get(api, 0) + 1
    print(f"descriptors: {len(descs)}; op keys: {len(params)} "
          f"({sum(not k.startswith('_other:') for k in params)} ONNX)")
    for api in API_ORDER:
        print(f"  {api:7s} ONNX ops {per_api.get(api, 0):3d}   _other {per_api_other.get(api, 0)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
