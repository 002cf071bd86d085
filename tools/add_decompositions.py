"""One-time: write the decompositions (and signatures of seed-only ops) into optable.yaml.

Kept for provenance; the YAML is the source of truth and is edited by hand afterwards.
Each decomposition carries a one-line math comment; ``when`` limits it to the attribute
values / dtypes for which it is exact.
"""
from __future__ import annotations

import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
from extend_tables import HEADER, reorder  # noqa: E402
from ingest_seeds import dump  # noqa: E402


def s(op, ins, out, **attrs):
    d = {"op": op, "in": ins, "out": out}
    if attrs:
        d["attrs"] = attrs
    return d


UNARY_F = {"inputs": [{"name": "X", "type": "T"}], "outputs": [{"name": "Y", "type": "T"}],
           "types": {"T": ["float"]}}


def sig(inputs, outputs, attrs=None, types=None):
    d = {"inputs": inputs}
    if attrs:
        d["attributes"] = attrs
    d["outputs"] = outputs
    d["types"] = types or {"T": ["float"]}
    return d


SIGNATURES = {
    "root": sig([{"name": "X", "type": "T"}, {"name": "exponent", "type": "T"}], [{"name": "Y", "type": "T"}]),
    "not_equal": sig([{"name": "A", "type": "T"}, {"name": "B", "type": "T"}], [{"name": "C", "type": "T1"}],
                     types={"T": ["all"], "T1": ["bool"]}),
    "affine": sig([{"name": "X", "type": "T"}], [{"name": "Y", "type": "T"}],
                  [{"name": "alpha", "type": "float", "default": 1.0}, {"name": "beta", "type": "float", "default": 0.0}]),
    "scaled_tanh": sig([{"name": "X", "type": "T"}], [{"name": "Y", "type": "T"}],
                       [{"name": "alpha", "type": "float", "default": 1.0}, {"name": "beta", "type": "float", "default": 1.0}]),
    "parametric_softplus": sig([{"name": "X", "type": "T"}], [{"name": "Y", "type": "T"}],
                               [{"name": "alpha", "type": "float", "default": 1.0},
                                {"name": "beta", "type": "float", "default": 1.0}]),
    "cos_grad": sig([{"name": "dx", "type": "T"}, {"name": "X", "type": "T"}], [{"name": "Y", "type": "T"}]),
    "threshold": sig([{"name": "X", "type": "T"}], [{"name": "Y", "type": "T"}],
                     [{"name": "min_value", "type": "float", "required": True}], types={"T": ["numeric"]}),
    "reverse": sig([{"name": "input", "type": "T"}], [{"name": "output", "type": "T"}],
                   [{"name": "axes", "type": "ints", "required": True}], types={"T": ["all"]}),
    "bit_count": sig([{"name": "X", "type": "T"}], [{"name": "Y", "type": "T"}], types={"T": ["unsigned", "signed"]}),
}

DECOMPOSITIONS = {
    "hard_swish": ("hard_swish(x) = x * hard_sigmoid(x; alpha=1/6, beta=0.5)",
                   [s("hard_sigmoid", ["X"], "hs", alpha=0.16666667, beta=0.5), s("mul", ["X", "hs"], "Y")], None),
    "hard_sigmoid": ("hard_sigmoid(x) = clip(alpha*x + beta, 0, 1)",
                     [s("mul", ["X", "@alpha"], "ax"), s("add", ["ax", "@beta"], "axb"), s("clip", ["axb", 0, 1], "Y")], None),
    "softplus": ("softplus(x) = log(exp(x) + 1)", [s("exp", ["X"], "e"), s("add", ["e", 1], "e1"), s("log", ["e1"], "Y")], None),
    "softsign": ("softsign(x) = x / (1 + |x|)",
                 [s("abs", ["input"], "a"), s("add", ["a", 1], "a1"), s("div", ["input", "a1"], "output")], None),
    "selu": ("selu(x) = gamma * (x if x > 0 else alpha*(exp(x)-1))",
             [s("exp", ["X"], "e"), s("sub", ["e", 1], "em1"), s("mul", ["em1", "@alpha"], "neg"),
              s("greater", ["X", 0], "pos"), s("where", ["pos", "X", "neg"], "sel"), s("mul", ["sel", "@gamma"], "Y")], None),
    "elu": ("elu(x) = x if x >= 0 else alpha*(exp(x)-1)",
            [s("exp", ["X"], "e"), s("sub", ["e", 1], "em1"), s("mul", ["em1", "@alpha"], "neg"),
             s("less", ["X", 0], "isneg"), s("where", ["isneg", "neg", "X"], "Y")], None),
    "celu": ("celu(x) = max(0, x) + min(0, alpha*(exp(x/alpha)-1))",
             [s("div", ["X", "@alpha"], "xa"), s("exp", ["xa"], "e"), s("sub", ["e", 1], "em1"),
              s("mul", ["em1", "@alpha"], "n"), s("min", ["n", 0], "nmin"), s("max", ["X", 0], "pmax"),
              s("add", ["pmax", "nmin"], "Y")], None),
    "gelu": ("gelu(x) = x * 0.5 * (1 + erf(x / sqrt(2)))  (approximate='none')",
             [s("div", ["X", 1.4142135623730951], "xs"), s("erf", ["xs"], "er"), s("add", ["er", 1], "er1"),
              s("mul", ["X", "er1"], "xe"), s("mul", ["xe", 0.5], "Y")], {"attrs": {"approximate": "none"}}),
    "sigmoid": ("sigmoid(x) = 1 / (1 + exp(-x))",
                [s("neg", ["X"], "nx"), s("exp", ["nx"], "e"), s("add", ["e", 1], "e1"), s("reciprocal", ["e1"], "Y")], None),
    "swish": ("swish(x) = x * sigmoid(alpha*x)",
              [s("mul", ["X", "@alpha"], "ax"), s("sigmoid", ["ax"], "sg"), s("mul", ["X", "sg"], "Y")], None),
    "mish": ("mish(x) = x * tanh(softplus(x))",
             [s("softplus", ["X"], "sp"), s("tanh", ["sp"], "t"), s("mul", ["X", "t"], "Y")], None),
    "leaky_relu": ("leaky_relu(x) = x if x >= 0 else alpha*x",
                   [s("mul", ["X", "@alpha"], "ax"), s("less", ["X", 0], "isneg"), s("where", ["isneg", "ax", "X"], "Y")], None),
    "thresholded_relu": ("thresholded_relu(x) = x if x > alpha else 0",
                         [s("greater", ["X", "@alpha"], "gt"), s("where", ["gt", "X", 0], "Y")], None),
    "relu": ("relu(x) = max(x, 0)", [s("max", ["X", 0], "Y")], None),
    "prelu": ("prelu(x, slope) = x if x >= 0 else slope*x",
              [s("mul", ["X", "slope"], "sx"), s("less", ["X", 0], "isneg"), s("where", ["isneg", "sx", "X"], "Y")], None),
    "shrink": ("shrink(x) = x+bias if x < -lambd; x-bias if x > lambd; else 0",
               [s("neg", ["@lambd"], "nl"), s("less", ["input", "nl"], "lo"), s("greater", ["input", "@lambd"], "hi"),
                s("add", ["input", "@bias"], "xpb"), s("sub", ["input", "@bias"], "xmb"),
                s("where", ["hi", "xmb", 0], "h"), s("where", ["lo", "xpb", "h"], "output")], None),
    "log_softmax": ("log_softmax(x) = (x - max(x)) - log(sum(exp(x - max(x))))",
                    [s("reduce_max", ["input", "@axis:1d"], "m", keepdims=1), s("sub", ["input", "m"], "sh"),
                     s("exp", ["sh"], "e"), s("reduce_sum", ["e", "@axis:1d"], "se", keepdims=1), s("log", ["se"], "lse"),
                     s("sub", ["sh", "lse"], "output")], None),
    "softmax": ("softmax(x) = exp(x - max(x)) / sum(exp(x - max(x)))",
                [s("reduce_max", ["input", "@axis:1d"], "m", keepdims=1), s("sub", ["input", "m"], "sh"),
                 s("exp", ["sh"], "e"), s("reduce_sum", ["e", "@axis:1d"], "se", keepdims=1),
                 s("div", ["e", "se"], "output")], None),
    "mean": ("mean(x1..xn) = sum(x1..xn) / n", [s("sum", ["data_0..."], "total"), s("div", ["total", "#data_0"], "mean")], None),
    "reduce_l2": ("reduce_l2(x) = sqrt(reduce_sum_square(x))",
                  [s("reduce_sum_square", ["data", "axes"], "ss", keepdims="@keepdims", noop_with_empty_axes="@noop_with_empty_axes"),
                   s("sqrt", ["ss"], "reduced")], None),
    "reduce_l1": ("reduce_l1(x) = reduce_sum(|x|)",
                  [s("abs", ["data"], "a"),
                   s("reduce_sum", ["a", "axes"], "reduced", keepdims="@keepdims", noop_with_empty_axes="@noop_with_empty_axes")], None),
    "reduce_sum_square": ("reduce_sum_square(x) = reduce_sum(x*x)",
                          [s("mul", ["data", "data"], "sq"),
                           s("reduce_sum", ["sq", "axes"], "reduced", keepdims="@keepdims", noop_with_empty_axes="@noop_with_empty_axes")], None),
    "reduce_log_sum": ("reduce_log_sum(x) = log(reduce_sum(x))",
                       [s("reduce_sum", ["data", "axes"], "rs", keepdims="@keepdims", noop_with_empty_axes="@noop_with_empty_axes"),
                        s("log", ["rs"], "reduced")], None),
    "reduce_log_sum_exp": ("reduce_log_sum_exp(x) = log(reduce_sum(exp(x)))",
                           [s("exp", ["data"], "e"),
                            s("reduce_sum", ["e", "axes"], "rs", keepdims="@keepdims", noop_with_empty_axes="@noop_with_empty_axes"),
                            s("log", ["rs"], "reduced")], {"dtype_kind": ["float"]}),
    "trunc_mod": ("trunc_mod(a, b) = a - b*trunc(a/b), trunc(q) = sign(q)*floor(|q|)  (floats)",
                  [s("div", ["A", "B"], "q"), s("abs", ["q"], "aq"), s("floor", ["aq"], "faq"), s("sign", ["q"], "sq"),
                   s("mul", ["sq", "faq"], "tq"), s("mul", ["B", "tq"], "btq"), s("sub", ["A", "btq"], "C")],
                  {"dtype_kind": ["float"]}),
    "floor_mod": ("floor_mod(a, b) = r + b if r != 0 and sign(r) != sign(b) else r, r = trunc_mod(a, b)",
                  [s("trunc_mod", ["A", "B"], "r"), s("mul", ["r", "B"], "rb"), s("less", ["rb", 0], "opp"),
                   s("add", ["r", "B"], "rpb"), s("where", ["opp", "rpb", "r"], "C")], {"dtype_kind": ["float"]}),
    "not_equal": ("not_equal(a, b) = not(equal(a, b))", [s("equal", ["A", "B"], "eq"), s("logical_not", ["eq"], "C")], None),
    "greater_equal": ("greater_equal(a, b) = greater(a, b) or equal(a, b)",
                      [s("greater", ["A", "B"], "gt"), s("equal", ["A", "B"], "eq"), s("logical_or", ["gt", "eq"], "C")], None),
    "less_equal": ("less_equal(a, b) = less(a, b) or equal(a, b)",
                   [s("less", ["A", "B"], "lt"), s("equal", ["A", "B"], "eq"), s("logical_or", ["lt", "eq"], "C")], None),
    "logical_xor": ("logical_xor(a, b) = not_equal(a, b) on booleans", [s("not_equal", ["A", "B"], "C")], None),
    "root": ("root(x, n) = pow(x, 1/n)", [s("reciprocal", ["exponent"], "r"), s("pow", ["X", "r"], "Y")], None),
    "affine": ("affine(x) = alpha*x + beta", [s("mul", ["X", "@alpha"], "ax"), s("add", ["ax", "@beta"], "Y")], None),
    "scaled_tanh": ("scaled_tanh(x) = alpha * tanh(beta*x)",
                    [s("mul", ["X", "@beta"], "bx"), s("tanh", ["bx"], "t"), s("mul", ["t", "@alpha"], "Y")], None),
    "parametric_softplus": ("parametric_softplus(x) = alpha * softplus(beta*x)",
                            [s("mul", ["X", "@beta"], "bx"), s("softplus", ["bx"], "sp"), s("mul", ["sp", "@alpha"], "Y")], None),
    "cos_grad": ("cos_grad(dx, x) = -sin(x) * dx  (d/dx cos x = -sin x)",
                 [s("sin", ["X"], "sn"), s("mul", ["sn", "dx"], "p"), s("neg", ["p"], "Y")], None),
    "threshold": ("threshold(x) = max(x, min_value)", [s("max", ["X", "@min_value"], "Y")], None),
    "reciprocal": ("reciprocal(x) = 1 / x", [s("div", [1, "X"], "Y")], None),
    "neg": ("neg(x) = 0 - x", [s("sub", [0, "X"], "Y")], None),
    "tan": ("tan(x) = sin(x) / cos(x)", [s("sin", ["input"], "sn"), s("cos", ["input"], "cs"), s("div", ["sn", "cs"], "output")], None),
    "sinh": ("sinh(x) = (exp(x) - exp(-x)) / 2",
             [s("exp", ["input"], "ep"), s("neg", ["input"], "nx"), s("exp", ["nx"], "en"), s("sub", ["ep", "en"], "d"),
              s("mul", ["d", 0.5], "output")], None),
    "cosh": ("cosh(x) = (exp(x) + exp(-x)) / 2",
             [s("exp", ["input"], "ep"), s("neg", ["input"], "nx"), s("exp", ["nx"], "en"), s("add", ["ep", "en"], "d"),
              s("mul", ["d", 0.5], "output")], None),
    "asinh": ("asinh(x) = log(x + sqrt(x*x + 1))",
              [s("mul", ["input", "input"], "x2"), s("add", ["x2", 1], "x21"), s("sqrt", ["x21"], "r"),
               s("add", ["input", "r"], "a"), s("log", ["a"], "output")], None),
    "acosh": ("acosh(x) = log(x + sqrt(x*x - 1))",
              [s("mul", ["input", "input"], "x2"), s("sub", ["x2", 1], "x21"), s("sqrt", ["x21"], "r"),
               s("add", ["input", "r"], "a"), s("log", ["a"], "output")], None),
    "atanh": ("atanh(x) = log((1 + x) / (1 - x)) / 2",
              [s("add", ["input", 1], "p"), s("sub", [1, "input"], "m"), s("div", ["p", "m"], "q"), s("log", ["q"], "l"),
               s("mul", ["l", 0.5], "output")], None),
    "lp_normalization": ("lp_normalization(x) = x / sqrt(sum(x*x, axis))  (p=2)",
                         [s("reduce_sum_square", ["input", "@axis:1d"], "ss", keepdims=1), s("sqrt", ["ss"], "n"),
                          s("div", ["input", "n"], "output")], {"attrs": {"p": 2}}),
    "mean_variance_normalization": (
        "mvn(x) = (x - E[x]) / (sqrt(E[(x - E[x])^2]) + 1e-9) over axes",
        [s("reduce_mean", ["X", "@axes"], "m", keepdims=1), s("sub", ["X", "m"], "d"), s("mul", ["d", "d"], "d2"),
         s("reduce_mean", ["d2", "@axes"], "v", keepdims=1), s("sqrt", ["v"], "sd"), s("add", ["sd", 1e-9], "sde"),
         s("div", ["d", "sde"], "Y")], None),
    "layer_normalization": (
        "layer_norm(x) = (x - mean) / sqrt(var + eps) * scale + bias over the last axis",
        [s("reduce_mean", ["X", {"value": [-1], "dtype": "int64"}], "m", keepdims=1), s("sub", ["X", "m"], "d"),
         s("mul", ["d", "d"], "d2"), s("reduce_mean", ["d2", {"value": [-1], "dtype": "int64"}], "v", keepdims=1),
         s("add", ["v", "@epsilon"], "ve"), s("sqrt", ["ve"], "sd"), s("div", ["d", "sd"], "n"),
         s("mul", ["n", "Scale"], "ns"), s("add", ["ns", "B"], "Y")], {"attrs": {"axis": -1}, "present": ["B"]}),
    "size": ("size(x) = reduce_prod(shape(x))",
             [s("shape", ["data"], "shp"), s("reduce_prod", ["shp"], "size", keepdims=0)], None),
    "depth_to_space": (
        "depth_to_space(x) (DCR) = reshape(transpose(reshape(x, [n, b, b, c/b^2, h, w]), [0, 3, 4, 1, 5, 2]), "
        "[n, c/b^2, h*b, w*b])",
        [s("shape", ["input"], "shp"),
         s("slice", ["shp", {"value": [0], "dtype": "int64"}, {"value": [1], "dtype": "int64"}], "n"),
         s("slice", ["shp", {"value": [1], "dtype": "int64"}, {"value": [2], "dtype": "int64"}], "c"),
         s("slice", ["shp", {"value": [2], "dtype": "int64"}, {"value": [3], "dtype": "int64"}], "h"),
         s("slice", ["shp", {"value": [3], "dtype": "int64"}, {"value": [4], "dtype": "int64"}], "w"),
         s("mul", ["@blocksize:1d", "@blocksize:1d"], "bb"), s("div", ["c", "bb"], "c2"),
         s("concat", ["n", "@blocksize:1d", "@blocksize:1d", "c2", "h", "w"], "shape6", axis=0),
         s("reshape", ["input", "shape6"], "x6"), s("transpose", ["x6"], "t6", perm=[0, 3, 4, 1, 5, 2]),
         s("mul", ["h", "@blocksize:1d"], "hb"), s("mul", ["w", "@blocksize:1d"], "wb"),
         s("concat", ["n", "c2", "hb", "wb"], "shape4", axis=0), s("reshape", ["t6", "shape4"], "output")],
        {"attrs": {"mode": "DCR"}}),
    "space_to_depth": (
        "space_to_depth(x) = reshape(transpose(reshape(x, [n, c, h/b, b, w/b, b]), [0, 3, 5, 1, 2, 4]), "
        "[n, c*b^2, h/b, w/b])",
        [s("shape", ["input"], "shp"),
         s("slice", ["shp", {"value": [0], "dtype": "int64"}, {"value": [1], "dtype": "int64"}], "n"),
         s("slice", ["shp", {"value": [1], "dtype": "int64"}, {"value": [2], "dtype": "int64"}], "c"),
         s("slice", ["shp", {"value": [2], "dtype": "int64"}, {"value": [3], "dtype": "int64"}], "h"),
         s("slice", ["shp", {"value": [3], "dtype": "int64"}, {"value": [4], "dtype": "int64"}], "w"),
         s("div", ["h", "@blocksize:1d"], "hb"), s("div", ["w", "@blocksize:1d"], "wb"),
         s("concat", ["n", "c", "hb", "@blocksize:1d", "wb", "@blocksize:1d"], "shape6", axis=0),
         s("reshape", ["input", "shape6"], "x6"), s("transpose", ["x6"], "t6", perm=[0, 3, 5, 1, 2, 4]),
         s("mul", ["@blocksize:1d", "@blocksize:1d"], "bb"), s("mul", ["c", "bb"], "cbb"),
         s("concat", ["n", "cbb", "hb", "wb"], "shape4", axis=0), s("reshape", ["t6", "shape4"], "output")], None),
    "clip": ("clip(x, lo, hi) = min(max(x, lo), hi)  (both bounds given)",
             [s("max", ["input", "min"], "lo"), s("min", ["lo", "max"], "output")], {"present": ["min", "max"]}),
}

ERRATA = {
    "cos_grad": {"field": "formula", "seed": "cosineGrad(dx, x) = mul(sin(x), dx)",
                 "verified": "cosineGrad(dx, x) = mul(neg(sin(x)), dx)",
                 "note": "d/dx cos(x) = -sin(x); torch.autograd on torch.cos at x=0.5 with dx=1 gives -0.4794 = -sin(0.5). "
                         "The seed formula lacks the minus sign.",
                 "source": "execution:pytorch"},
}


def main() -> int:
    path = ROOT / "optable.yaml"
    doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    by_id = {o["id"]: o for o in doc["ops"]}
    for op_id, sg in SIGNATURES.items():
        by_id[op_id]["signature"] = sg
    for op_id, (comment, body, when) in DECOMPOSITIONS.items():
        d = {"comment": comment}
        if when:
            d["when"] = when
        d["body"] = body
        by_id[op_id]["decomposition"] = d
    for op_id, e in ERRATA.items():
        errs = by_id[op_id].setdefault("errata", [])
        if not any(x.get("field") == e["field"] for x in errs):
            errs.append(e)
    thr = by_id["threshold"]["backends"].get("onnx")
    if thr and thr["status"] == "native":
        thr["status"] = "composite"
        thr["notes"] = "Max(X, constant min_value): ONNX Max takes no attribute, so the threshold is a constant input."
    doc["ops"] = [reorder(o) for o in doc["ops"]]
    path.write_text(dump(doc, HEADER), encoding="utf-8")
    print(f"signatures {len(SIGNATURES)}, decompositions {len(DECOMPOSITIONS)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
