"""Hand-computed checks of the tricky semantics in the NumPy reference: data movement,
indexing, convolution / pooling, resize, recurrences, control flow, sequences, strings."""
from __future__ import annotations

import math

import numpy as np
import pytest

from translator import reference


def ref(op_id: str):
    fn = reference.get(op_id)
    assert fn is not None, f"no reference for {op_id}"
    return fn


def i64(*v):
    return np.array(v, dtype=np.int64)


# ---------------------------------------------------------------- shape / data movement

def test_slice_clamps_and_negative_steps():
    x = np.arange(10)
    # start -1 -> 9, end far before the front: walks down to index 0
    assert ref("slice")(x, i64(-1), i64(-100), None, i64(-3)).tolist() == [9, 6, 3, 0]
    # start beyond the end is clamped to dim - 1 for a negative step
    assert ref("slice")(x, i64(20), i64(2), None, i64(-1)).tolist() == [9, 8, 7, 6, 5, 4, 3]
    # positive step: both ends clamp to [0, dim]
    assert ref("slice")(x, i64(-100), i64(100), i64(0), i64(4)).tolist() == [0, 4, 8]


def test_reshape_zero_copies_dim_unless_allowzero():
    x = np.zeros((2, 3, 4), dtype=np.float32)
    assert ref("reshape")(x, i64(0, -1)).shape == (2, 12)
    empty = np.zeros((0, 3), dtype=np.float32)
    assert ref("reshape")(empty, i64(3, 0), allowzero=1).shape == (3, 0)


def test_split_num_outputs_uneven_last_chunk_smaller():
    parts = ref("split")(np.arange(7), num_outputs=3)
    assert [p.tolist() for p in parts] == [[0, 1, 2], [3, 4, 5], [6]]
    parts = ref("split")(np.arange(6), i64(1, 5))
    assert [p.tolist() for p in parts] == [[0], [1, 2, 3, 4, 5]]


def test_pad_modes_and_negative_pads():
    x = np.array([1, 2, 3, 4], dtype=np.float32)
    # crop one at the end first, then reflect two at the front (edge not repeated)
    assert ref("pad")(x, i64(2, -1), mode="reflect").tolist() == [3, 2, 1, 2, 3]
    assert ref("pad")(x[:3], i64(1, 2), mode="wrap").tolist() == [3, 1, 2, 3, 1, 2]
    assert ref("pad")(x[:2], i64(1, 1), mode="edge").tolist() == [1, 1, 2, 2]
    m = np.ones((2, 2), dtype=np.int32)
    out = ref("pad")(m, i64(1, 0), np.array(7, dtype=np.int32), i64(-1))
    assert out.tolist() == [[7, 1, 1], [7, 1, 1]] and out.dtype == np.int32


def test_range_counts_and_float16_stash_type():
    out = ref("range")(np.array(10, np.int32), np.array(4, np.int32), np.array(-2, np.int32))
    assert out.tolist() == [10, 8, 6] and out.dtype == np.int32
    assert ref("range")(i64(3)[0], i64(9)[0], i64(3)[0]).tolist() == [3, 6]
    s, lim, d = (np.array(v, dtype=np.float16) for v in (2048, 2052, 1))
    # stash_type=1 (default): computed in float32, each value rounded once (ties to even)
    assert ref("range")(s, lim, d).tolist() == [2048, 2048, 2050, 2052]
    # stash_type=0: successive float16 additions, 2048 + 1 rounds back to 2048
    assert ref("range")(s, lim, d, stash_type=0).tolist() == [2048, 2048, 2048, 2048]


def test_shape_start_end_clip():
    x = np.zeros((2, 3, 4, 5))
    assert ref("shape")(x, start=-3, end=-1).tolist() == [3, 4]
    assert ref("shape")(x, start=-10, end=10).tolist() == [2, 3, 4, 5]
    assert ref("shape")(x).dtype == np.int64


def test_depth_to_space_modes_and_inverse():
    x = np.arange(8).reshape(1, 8, 1, 1)
    dcr = ref("depth_to_space")(x, blocksize=2)
    crd = ref("depth_to_space")(x, blocksize=2, mode="CRD")
    assert dcr[0].tolist() == [[[0, 2], [4, 6]], [[1, 3], [5, 7]]]
    assert crd[0].tolist() == [[[0, 1], [2, 3]], [[4, 5], [6, 7]]]
    assert np.array_equal(ref("space_to_depth")(dcr, blocksize=2), x)
    assert np.array_equal(ref("space_to_depth")(crd, blocksize=2, mode="CRD"), x)


def test_reverse_sequence_and_reverse():
    x = np.arange(16, dtype=np.float32).reshape(4, 4)
    out = ref("reverse_sequence")(x, i64(1, 2, 3, 4), batch_axis=0, time_axis=1)
    assert out.tolist() == [[0, 1, 2, 3], [5, 4, 6, 7], [10, 9, 8, 11], [15, 14, 13, 12]]
    assert ref("reverse")(np.arange(6).reshape(2, 3), i64(1)).tolist() == [[2, 1, 0], [5, 4, 3]]


def test_center_crop_pad_rounding():
    x = np.array([1, 2, 3, 4])
    assert ref("center_crop_pad")(x, i64(2)).tolist() == [2, 3]
    assert ref("center_crop_pad")(x, i64(3)).tolist() == [1, 2, 3]  # start rounded down
    assert ref("center_crop_pad")(x[:2], i64(5)).tolist() == [0, 1, 2, 0, 0]  # odd pad extra at end


# ---------------------------------------------------------------- indexing

def test_gather_negative_indices_and_gather_nd_batch_dims():
    assert ref("gather")(np.array([10, 20, 30]), i64(-1, 0)).tolist() == [30, 10]
    data = np.arange(8).reshape(2, 2, 2)
    assert ref("gather_nd")(data, i64(1, 0).reshape(2, 1), batch_dims=1).tolist() == [[2, 3], [4, 5]]


def test_scatter_elements_duplicate_indices_reduce():
    data = np.array([[1.0, 2.0, 3.0, 4.0, 5.0]], dtype=np.float32)
    idx = i64(1, 1).reshape(1, 2)
    upd = np.array([[1.1, 2.1]], dtype=np.float32)
    assert np.allclose(ref("scatter_elements")(data, idx, upd, axis=1, reduction="add"), [[1, 5.2, 3, 4, 5]])
    assert np.allclose(ref("scatter_elements")(data, idx, upd, axis=1, reduction="mul"), [[1, 4.62, 3, 4, 5]])
    # without reduction the later update wins
    assert np.allclose(ref("scatter_elements")(data, idx, upd, axis=1), [[1, 2.1, 3, 4, 5]])


def test_tensor_scatter_circular_wraps():
    past = np.zeros((1, 4, 1), dtype=np.float32)
    upd = np.array([1, 2, 3], dtype=np.float32).reshape(1, 3, 1)
    out = ref("tensor_scatter")(past, upd, i64(2), mode="circular")
    assert out.reshape(-1).tolist() == [3, 0, 1, 2]


def test_top_k_ties_keep_lower_index_first():
    x = np.array([3, 1, 3, 2, 3], dtype=np.float32)
    v, i = ref("top_k")(x, i64(2))
    assert v.tolist() == [3, 3] and i.tolist() == [0, 2] and i.dtype == np.int64
    v, i = ref("top_k")(x, i64(2), largest=0)
    assert v.tolist() == [1, 2] and i.tolist() == [1, 3]
    big = np.array([0, 2**64 - 1, 5], dtype=np.uint64)  # no negation tricks on unsigned types
    assert ref("top_k")(big, i64(1))[1].tolist() == [1]


def test_unique_unsorted_keeps_first_occurrence_order():
    y, first, inverse, counts = ref("unique")(np.array([2, 1, 1, 3, 4, 3]), sorted=0)
    assert y.tolist() == [2, 1, 3, 4]
    assert first.tolist() == [0, 1, 3, 4]
    assert inverse.tolist() == [0, 1, 1, 2, 3, 2]
    assert counts.tolist() == [1, 2, 2, 1]


def test_one_hot_negative_and_out_of_range_indices():
    out = ref("one_hot")(i64(0, -1, 3, 5), np.array(4.0), np.array([0, 5], dtype=np.int32))
    assert out.tolist() == [[5, 0, 0, 0], [0, 0, 0, 5], [0, 0, 0, 5], [0, 0, 0, 0]]
    assert out.dtype == np.int32
    assert ref("one_hot")(i64(1, 2), i64(3), i64(0, 1), axis=0).tolist() == [[0, 0], [1, 0], [0, 1]]


def test_trilu_and_eye_like():
    ones = np.ones((3, 3), dtype=np.int32)
    assert ref("trilu")(ones, i64(-1)).tolist() == [[1, 1, 1], [1, 1, 1], [0, 1, 1]]
    assert ref("trilu")(ones, i64(1), upper=0).tolist() == [[1, 1, 0], [1, 1, 1], [1, 1, 1]]
    eye = ref("eye_like")(np.zeros((2, 3), dtype=np.float32), dtype=7, k=1)  # 7 = ONNX INT64
    assert eye.tolist() == [[0, 1, 0], [0, 0, 1]] and eye.dtype == np.int64


# ---------------------------------------------------------------- conv / pool

def test_conv_transpose_stride_and_pads():
    x = np.array([1, 2, 3], dtype=np.float32).reshape(1, 1, 3)
    w = np.ones((1, 1, 2), dtype=np.float32)
    assert ref("conv_transpose")(x, w, strides=[2]).reshape(-1).tolist() == [1, 1, 2, 2, 3, 3]
    assert ref("conv_transpose")(x, w, strides=[2], pads=[1, 1]).reshape(-1).tolist() == [1, 2, 2, 3]


def test_qlinear_conv_rounds_half_to_even():
    x = np.array(2, dtype=np.uint8).reshape(1, 1, 1, 1)
    half = np.float32(0.5)
    zp = np.uint8(0)
    for wv, expected in ((5, 2), (7, 4)):  # 2.5 -> 2, 3.5 -> 4
        w = np.array(wv, dtype=np.uint8).reshape(1, 1, 1, 1)
        y = ref("qlinear_conv")(x, half, zp, w, half, zp, np.float32(1.0), zp)
        assert y.reshape(-1).tolist() == [expected] and y.dtype == np.uint8


def test_causal_conv_with_state():
    x = np.array([1, 2, 3], dtype=np.float32).reshape(1, 1, 3)
    w = np.array([1, 10], dtype=np.float32).reshape(1, 1, 2)
    y, state = ref("causal_conv_with_state")(x, w, None, np.array([[[5.0]]], dtype=np.float32))
    assert y.reshape(-1).tolist() == [15, 21, 32] and state.reshape(-1).tolist() == [3]


def test_max_pool_indices_include_batch_channel_and_storage_order():
    x = np.array([[1, 4], [3, 2]], dtype=np.float32).reshape(1, 1, 2, 2)
    y, idx = ref("max_pool")(x, kernel_shape=[2, 2])
    assert y.reshape(-1).tolist() == [4] and idx.reshape(-1).tolist() == [1]
    assert ref("max_pool")(x, kernel_shape=[2, 2], storage_order=1)[1].reshape(-1).tolist() == [2]
    two = np.stack([x[0, 0], np.array([[0, 1], [9, 2]], dtype=np.float32)]).reshape(1, 2, 2, 2)
    assert ref("max_pool")(two, kernel_shape=[2, 2])[1].reshape(-1).tolist() == [1, 6]


def test_average_pool_count_include_pad_and_ceil_mode():
    x = np.array([1, 2, 3], dtype=np.float32).reshape(1, 1, 3)
    excl = ref("average_pool")(x, kernel_shape=[3], pads=[1, 1]).reshape(-1)
    incl = ref("average_pool")(x, kernel_shape=[3], pads=[1, 1], count_include_pad=1).reshape(-1)
    assert np.allclose(excl, [1.5, 2, 2.5]) and np.allclose(incl, [1, 2, 5 / 3])
    y = ref("average_pool")(np.arange(1, 6, dtype=np.float32).reshape(1, 1, 5), kernel_shape=[2], strides=[2],
                            ceil_mode=1)
    assert y.reshape(-1).tolist() == [1.5, 3.5, 5.0]  # the last window only covers one element
    assert ref("sum_pool")(x, kernel_shape=[2]).reshape(-1).tolist() == [3, 5]


# ---------------------------------------------------------------- resize / sampling

def test_resize_nearest_modes_round_halves():
    x = np.array([1, 2], dtype=np.float32)
    up = np.array([2.0], dtype=np.float32)
    # asymmetric: source 0, .5, 1, 1.5
    assert ref("resize")(x, None, up, coordinate_transformation_mode="asymmetric").tolist() == [1, 1, 2, 2]
    assert ref("resize")(x, None, up, coordinate_transformation_mode="asymmetric",
                         nearest_mode="round_prefer_ceil").tolist() == [1, 2, 2, 2]
    # half_pixel (default): source -.25, .25, .75, 1.25
    assert ref("resize")(x, None, up).tolist() == [1, 1, 2, 2]


def test_resize_linear_half_pixel_clamps_at_edges():
    x = np.array([1, 2], dtype=np.float32)
    out = ref("resize")(x, None, np.array([2.0], dtype=np.float32), mode="linear")
    assert np.allclose(out, [1, 1.25, 1.75, 2])


def test_grid_sample_nearest_rounds_half_to_even():
    x = np.array([0, 1, 2, 3], dtype=np.float32).reshape(1, 1, 1, 4)
    grid = np.array([[0.0, 0.0], [-0.5, 0.0]], dtype=np.float32).reshape(1, 1, 2, 2)
    # align_corners=0: x = ((g + 1) * 4 - 1) / 2 -> 1.5 and 0.5 -> indices 2 and 0
    assert ref("grid_sample")(x, grid, mode="nearest").reshape(-1).tolist() == [2, 0]


def test_non_max_suppression_keeps_iou_equal_to_threshold():
    boxes = np.array([[[0, 0, 1, 1], [0, 0, 1, 1], [0, 0, 1, 2]]], dtype=np.float32)
    scores = np.array([[[0.9, 0.8, 0.7]]], dtype=np.float32)
    keep_all = ref("non_max_suppression")(boxes, scores, i64(10), np.array([1.0], np.float32))
    assert keep_all.tolist() == [[0, 0, 0], [0, 0, 1], [0, 0, 2]]
    # IoU of box 2 with box 0 is exactly 0.5: kept; box 1 (IoU 1) is suppressed
    half = ref("non_max_suppression")(boxes, scores, i64(10), np.array([0.5], np.float32))
    assert half.tolist() == [[0, 0, 0], [0, 0, 2]]
    assert ref("non_max_suppression")(boxes, scores).shape == (0, 3)  # default: no boxes


# ---------------------------------------------------------------- recurrences

def test_rnn_and_gru_single_step():
    x = np.ones((1, 1, 1), dtype=np.float32)
    w = np.ones((1, 1, 1), dtype=np.float32)
    r = np.zeros((1, 1, 1), dtype=np.float32)
    y, h = ref("rnn")(x, w, r)
    assert np.isclose(h.item(), math.tanh(1.0)) and y.shape == (1, 1, 1, 1)
    # GRU with zero weights: z = 0.5, candidate = tanh(0) = 0 -> h = 0.5 * h0
    w3, r3 = np.zeros((1, 3, 1), np.float32), np.zeros((1, 3, 1), np.float32)
    _, h = ref("gru")(x, w3, r3, None, None, np.full((1, 1, 1), 1.0, np.float32))
    assert np.isclose(h.item(), 0.5)


def test_linear_attention_update_rules():
    q, k, v = (np.array(val, dtype=np.float32).reshape(1, 1, 1) for val in (2, 3, 4))
    kw = dict(q_num_heads=1, kv_num_heads=1, scale=1.0)
    out, s = ref("linear_attention")(q, k, v, update_rule="linear", **kw)
    assert out.item() == 24 and s.item() == 12
    past = np.full((1, 1, 1, 1), 2.0, np.float32)
    decay = np.full((1, 1, 1), math.log(0.5), np.float32)
    out, s = ref("linear_attention")(q, k, v, past, decay, update_rule="gated", **kw)
    assert np.isclose(s.item(), 13) and np.isclose(out.item(), 26)
    beta = np.full((1, 1, 1), 0.5, np.float32)
    out, s = ref("linear_attention")(q, k, v, past, None, beta, update_rule="delta", **kw)
    assert np.isclose(s.item(), -1) and np.isclose(out.item(), -2)  # 2 + .5 * 3 * (4 - 6)


# ---------------------------------------------------------------- control flow, sequences

def test_loop_trip_count_and_scan_outputs():
    def body(i, cond, v):
        return [cond, v + i, v + i]

    final, scanned = ref("loop")(i64(3)[0], np.array(True), i64(0)[0], body=body)
    assert final == 3 and scanned.tolist() == [0, 1, 3]
    (final,) = ref("loop")(i64(3)[0], np.array(False), i64(7)[0], body=lambda i, c, v: [c, v + 1])[:1]
    assert final == 7  # cond false: no iteration


def test_scan_reverse_input_and_prepended_output():
    def body(acc, x):
        s = acc + x
        return [s, s]

    xs = np.array([1, 2, 3], dtype=np.float32)
    zero = np.array(0, dtype=np.float32)
    final, partial = ref("scan")(zero, xs, body=body, num_scan_inputs=1, scan_input_directions=[1])
    assert final == 6 and partial.tolist() == [3, 5, 6]
    _, partial = ref("scan")(zero, xs, body=body, num_scan_inputs=1, scan_output_directions=[1])
    assert partial.tolist() == [6, 3, 1]


def test_sequence_positions_and_split_to_sequence():
    a, b, c = (np.array(v) for v in (1, 2, 3))
    seq = ref("sequence_construct")(a, b)
    seq = ref("sequence_insert")(seq, c, i64(-1)[0])  # before the last one
    assert [int(t) for t in seq] == [1, 3, 2]
    assert int(ref("sequence_at")(seq, i64(-1)[0])) == 2
    assert [int(t) for t in ref("sequence_erase")(seq)] == [1, 3]
    parts = ref("split_to_sequence")(np.arange(5), np.array(2))
    assert [p.tolist() for p in parts] == [[0, 1], [2, 3], [4]]
    parts = ref("split_to_sequence")(np.arange(2), keepdims=0)
    assert [p.shape for p in parts] == [(), ()]
    assert ref("optional_has_element")(None).item() is False


# ---------------------------------------------------------------- strings

def test_string_split_whitespace_vs_delimiter():
    x = np.array(["a  b", "c"], dtype=object)
    y, z = ref("string_split")(x)
    assert y.tolist() == [["a", "b"], ["c", ""]] and z.tolist() == [2, 1]
    y, z = ref("string_split")(x, delimiter=" ")
    assert y.tolist() == [["a", "", "b"], ["c", "", ""]] and z.tolist() == [3, 1]
    y, _ = ref("string_split")(np.array(["a b c"], dtype=object), delimiter=" ", maxsplit=1)
    assert y.tolist() == [["a", "b c"]]


def test_string_normalizer_stopwords_case_insensitive():
    x = np.array(["Monday", "tuesday", "MONDAY"], dtype=object)
    out = ref("string_normalizer")(x, case_change_action="UPPER", stopwords=["monday"])
    assert out.tolist() == ["TUESDAY"]
    assert ref("string_normalizer")(x.reshape(1, 3), stopwords=["monday", "tuesday"]).tolist() == [[""]]


def test_tfidf_skip_grams():
    kw = dict(max_gram_length=2, min_gram_length=1, mode="TF", ngram_counts=[0, 1], ngram_indexes=[0, 1],
              pool_int64s=[1, 1, 2])  # 1-gram (1,), 2-gram (1, 2)
    x = i64(1, 3, 2)
    assert ref("tfidf_vectorizer")(x, max_skip_count=0, **kw).tolist() == [1, 0]
    assert ref("tfidf_vectorizer")(x, max_skip_count=1, **kw).tolist() == [1, 1]  # (1, _, 2)


# ---------------------------------------------------------------- misc

def test_dropout_inference_and_seeded_training():
    x = np.arange(1, 9, dtype=np.float32)
    y, mask = ref("dropout")(x, np.array(0.5, np.float32))
    assert np.array_equal(y, x) and mask.all()
    y1, m1 = ref("dropout")(x, np.array(0.5, np.float32), np.array(True), seed=3)
    y2, m2 = ref("dropout")(x, np.array(0.5, np.float32), np.array(True), seed=3)
    assert np.array_equal(y1, y2) and np.array_equal(m1, m2) and m1.dtype == np.bool_
    assert np.allclose(y1, np.where(m1, x * 2, 0))


@pytest.mark.parametrize("value, dtype", [(None, np.float32), (np.array([7], np.int32), np.int32)])
def test_constant_of_shape(value, dtype):
    out = ref("constant_of_shape")(i64(2, 3), value=value)
    assert out.shape == (2, 3) and out.dtype == dtype
    assert ref("constant_of_shape")(np.zeros(0, np.int64)).shape == ()
