"""Select family: TopK, NonZero, Compress, NonMaxSuppression and Einsum.

Reference: onnx.reference throughout. NonZero, Compress and NonMaxSuppression have data-dependent
output shapes: with constant deciding inputs they fold; fed as graph inputs they run at the
session's run-time sync point.
"""
import numpy as np
import pytest
from helpers import Const, check_op, gpu_adapters, make_model, run_wgnn, session_for

import wgnn

rng = np.random.default_rng(0)
# Few distinct values: many ties, which TopK must order by index.
DUPS = rng.integers(0, 4, (2, 5, 7)).astype(np.float32)
TOL = {"rtol": 1e-4, "atol": 1e-5}


def k_of(k: int) -> Const:
    return Const(np.array([k], np.int64))


# ------------------------------------------------------------------------------------ TopK
@pytest.mark.parametrize("largest", [0, 1])
@pytest.mark.parametrize("axis", [-1, 1, 0, -3])
def test_topk_ties_every_k(axis, largest):
    length = DUPS.shape[axis]
    for k in sorted({1, 2, length}):
        values, indices = check_op("TopK", [DUPS, k_of(k)], {"axis": axis, "largest": largest}, outputs=2,
                                   opset=11)
        assert indices.dtype == np.int64 and values.shape[axis] == k


def test_topk_sorted_flag_and_int64():
    x = rng.integers(-3, 3, (3, 6)).astype(np.int64)
    check_op("TopK", [x, k_of(4)], {"sorted": 0}, outputs=2, opset=11)
    check_op("TopK", [x, k_of(3)], {"largest": 0, "axis": -2}, outputs=2, opset=11)


def test_topk_opset_forms():
    check_op("TopK", [DUPS], {"axis": 1, "k": 3}, outputs=2, opset=1)  # k is an attribute
    check_op("TopK", [DUPS, k_of(3)], {"axis": -1}, outputs=2, opset=10)  # k input, always largest
    check_op("TopK", [DUPS, k_of(2)], {"axis": 2, "largest": 0}, outputs=2, opset=24)


def test_topk_k_zero_and_long_rows():
    check_op("TopK", [DUPS, k_of(0)], {"axis": 1}, outputs=2, opset=11)
    # 301 elements per row: the GPU kernel's 8-wide loop and its remainder.
    long = rng.integers(-20, 20, (3, 301)).astype(np.float32)
    check_op("TopK", [long, k_of(5)], {}, outputs=2, opset=11)
    check_op("TopK", [long, k_of(7)], {"largest": 0}, outputs=2, opset=11)


def test_topk_partition_matches_the_whole_sort():
    """numpy's TopK by partition (rows PARTITION_RATIO times longer than k) against the whole stable
    sort it replaces: ties by index, NaN the largest, infinities, signed zeros, integers."""
    from wgnn.backends.numpy.select import topk_order, topk_rows

    special = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, 1.0, 2.0], np.float32)
    draw = np.random.default_rng(8)
    for trial in range(1200):
        n, rows = int(draw.integers(1, 60)), int(draw.integers(1, 5))
        k = int(draw.integers(1, n + 1))
        x = [draw.integers(-3, 3, (rows, n)).astype(np.float32), draw.standard_normal((rows, n)).astype(np.float16),
             draw.integers(-5, 5, (rows, n)).astype(np.int64), draw.choice(special, (rows, n))][trial % 4]
        for largest in (True, False):
            values, indices = topk_rows(x, k, largest)
            want = topk_order(x, 1, largest)[:, :k]
            np.testing.assert_array_equal(indices, want, err_msg=f"{x} k={k} largest={largest}")
            np.testing.assert_array_equal(values, np.take_along_axis(x, want, 1))


def test_topk_long_rows_every_axis():
    # Rows long enough for the partition, along every axis, with ties and NaN, against onnxruntime.
    x = rng.integers(-4, 4, (3, 40, 2, 24)).astype(np.float32)
    x[0, 3, 1, 5] = x[2, 7, 0, 0] = np.nan
    for axis, k in ((1, 3), (3, 5), (-1, 1), (1, 10)):
        for largest in (0, 1):
            check_op("TopK", [x, k_of(k)], {"axis": axis, "largest": largest}, outputs=2, opset=11, reference="ort")


def test_topk_past_the_loop_budget_falls_back():
    # k * length passes exceed llvmpipe's loop limit: the GPU refuses and numpy runs it.
    x = rng.standard_normal((2, 1200)).astype(np.float32)
    check_op("TopK", [x, k_of(500)], {}, outputs=2, opset=11, allow_fallback=True)
    model = wgnn.convert(make_model("TopK", [x, k_of(500)], {}, outputs=2, opset=11))
    for adapter in gpu_adapters():
        if "llvmpipe" in adapter["name"]:
            session = session_for(model, f"wgpu:{adapter['index']}")
            session.run(None, {"in0": x})
            assert "loop iterations" in str(session.report()["fallbacks"])


def test_topk_bad_k():
    model = make_model("TopK", [DUPS, k_of(9)], {"axis": 1}, outputs=2, opset=11)
    with pytest.raises(wgnn.ShapeError, match="k = 9"):
        run_wgnn(model, {"in0": DUPS})


# --------------------------------------------------------------------------------- NonZero
@pytest.mark.parametrize("x", [
    np.array([[1, 0, 3], [0, 0, -2]], np.int64),
    (rng.integers(0, 2, (2, 3, 5)) * rng.standard_normal((2, 3, 5))).astype(np.float32),
    rng.random((4, 5)) > 0.5,
    np.zeros((3, 2), np.float32),
    np.array([0.0, 2.5, 0.0, -1.0], np.float32),
    np.array(3.0, np.float32),
], ids=["int64", "float3d", "bool", "all_zero", "1d", "scalar"])
def test_nonzero(x):
    check_op("NonZero", [Const(x)], opset=13)


def test_nonzero_graph_input():
    check_op("NonZero", [np.array([[1, 0], [0, 2]], np.float32)], opset=13)


# -------------------------------------------------------------------------------- Compress
@pytest.mark.parametrize("axis", [0, 1, -1, None])
def test_compress(axis):
    length = DUPS.size if axis is None else DUPS.shape[axis]
    for condition in ([False, True], rng.random(length) > 0.4, np.zeros(length, bool)):
        attrs = {} if axis is None else {"axis": axis}
        # The condition may be shorter than the axis; the data is a graph input, so this runs
        # through Raster regions (the GPU's raster kernel) once the condition is known.
        check_op("Compress", [DUPS, Const(np.array(condition, bool))], attrs, opset=11)


def test_compress_many_runs_and_opset9():
    # Alternating entries: more runs than Raster regions pay for: the numpy kernel runs instead.
    x = rng.standard_normal((3, 40)).astype(np.float32)
    check_op("Compress", [x, Const(np.arange(40) % 2 == 0)], {"axis": 1}, opset=11)
    check_op("Compress", [x, Const(np.array([False, True, True]))], {"axis": 0}, opset=9)
    check_op("Compress", [Const(x), Const(np.arange(40) % 3 == 0)], {"axis": -1}, opset=11)


def test_compress_graph_input_condition():
    check_op("Compress", [DUPS, np.array([True, False, True, True, False])], {"axis": 1}, opset=11)


# ---------------------------------------------------------------------- NonMaxSuppression
BOXES = np.array([[[0.0, 0.0, 1.0, 1.0], [0.0, 0.1, 1.0, 1.1], [0.0, -0.1, 1.0, 0.9],
                   [0.0, 10.0, 1.0, 11.0], [1.0, 10.1, 0.0, 11.1], [0.0, 100.0, 1.0, 101.0]]], np.float32)
SCORES = np.array([[[0.9, 0.75, 0.6, 0.95, 0.5, 0.3]]], np.float32)


def nms(boxes, scores, max_boxes=None, iou=None, score=None, **attrs):
    inputs = [Const(boxes), Const(scores),
              None if max_boxes is None else Const(np.array([max_boxes], np.int64)),
              None if iou is None else Const(np.array([iou], np.float32)),
              None if score is None else Const(np.array([score], np.float32))]
    while inputs[-1] is None:
        inputs.pop()
    # onnx.reference cannot run NMS without max_output_boxes_per_class: onnxruntime then.
    reference = "ort" if max_boxes is None else "onnx"
    return check_op("NonMaxSuppression", inputs, attrs, opset=11, reference=reference)[0]


def test_nms_corners():
    nms(BOXES, SCORES, 3, 0.5)
    nms(BOXES, SCORES, 3, 0.5, 0.4)  # score threshold
    nms(BOXES, SCORES, 10, 0.0)  # every overlap suppresses
    nms(BOXES, SCORES)  # no max_output_boxes_per_class: nothing selected
    nms(BOXES, SCORES, 0, 0.5)


def test_nms_center_point_and_equal_scores():
    centers = np.array([[[0.5, 0.5, 1.0, 1.0], [0.5, 0.6, 1.0, 1.0], [0.5, 0.4, 1.0, 1.0],
                         [0.5, 10.5, 1.0, 1.0], [0.5, 10.6, 1.0, 1.0], [0.5, 100.5, 1.0, 1.0]]], np.float32)
    nms(centers, SCORES, 3, 0.5, center_point_box=1)
    # Equal scores: the lower box index wins.
    equal = np.full((1, 1, 6), 0.7, np.float32)
    out = nms(BOXES, equal, 6, 0.3)
    assert out[0].tolist() == [0, 0, 0]


def test_nms_batches_and_classes():
    boxes = rng.uniform(0, 10, (2, 9, 4)).astype(np.float32)
    scores = rng.integers(0, 4, (2, 3, 9)).astype(np.float32) / 4  # many equal scores
    nms(boxes, scores, 4, 0.2)
    nms(boxes, scores, 100, 0.6, 0.2)
    nms(boxes[:, :0], scores[:, :, :0], 5, 0.5)  # no boxes at all


def test_nms_graph_inputs():
    check_op("NonMaxSuppression", [BOXES, SCORES, Const(np.array([3], np.int64)),
                                   Const(np.array([0.5], np.float32))], opset=11)


# ---------------------------------------------------------------------------------- Einsum
def einsum_ops(equation: str, operands: list) -> list[str]:
    model = make_model("Einsum", operands, {"equation": equation}, opset=12)
    return [node.op_type for node in wgnn.convert(model).graph.nodes]


LOWERED = [
    ("ij,jk->ik", [(3, 4), (4, 5)]),
    ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]),
    ("bhqd,bhkd->bhqk", [(2, 3, 4, 5), (2, 3, 6, 5)]),
    ("ij->ji", [(3, 5)]),
    ("ij->i", [(3, 5)]),
    ("i,j->ij", [(3,), (5,)]),
    ("ii->i", [(4, 4)]),
    ("ii", [(3, 3)]),
    ("i,i->", [(7,), (7,)]),
    ("ji,kj->ik", [(4, 3), (5, 4)]),
    ("abc,cd->abd", [(2, 3, 4), (4, 5)]),
    ("abcd,cdef->abef", [(2, 3, 4, 5), (4, 5, 2, 3)]),
    ("bij,bij->b", [(2, 3, 4), (2, 3, 4)]),
    ("ij,ij->ij", [(3, 4), (1, 4)]),
    ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 5)]),
    ("iij->ji", [(3, 3, 2)]),
    ("...ij,...jk->...ik", [(2, 1, 3, 4), (5, 4, 2)]),
    ("...ii->...i", [(2, 3, 3)]),
    ("bn,anm,bm->ba", [(2, 3), (4, 3, 5), (2, 5)]),
    ("ij", [(3, 4)]),
    ("ba", [(3, 4)]),
]


@pytest.mark.parametrize("equation,shapes", LOWERED, ids=[e for e, _ in LOWERED])
def test_einsum_lowered(equation, shapes):
    operands = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    check_op("Einsum", operands, {"equation": equation}, opset=12, **TOL)
    assert "Einsum" not in einsum_ops(equation, operands)


def test_einsum_lowered_ops():
    x, y = np.zeros((2, 3, 4, 5), np.float32), np.zeros((2, 3, 6, 5), np.float32)
    assert einsum_ops("bhqd,bhkd->bhqk", [x, y]) == ["MatMul"]  # B read transposed (trans_b)
    assert einsum_ops("ij,jk->ik", [x[0, 0], y[0, 0, :5]]) == ["MatMul"]


def test_einsum_fallback_forms():
    # A contracted label broadcasting a size-1 dim: numpy's einsum runs it (no GPU kernel).
    a, b = rng.standard_normal((1, 3)).astype(np.float32), rng.standard_normal((2, 3)).astype(np.float32)
    check_op("Einsum", [a, b], {"equation": "ij,ij->"}, opset=12, **TOL)
    assert einsum_ops("ij,ij->", [a, b]) == ["Einsum"]
    # numpy's rule: an explicit output must keep the ellipsis dims.
    c = rng.standard_normal((2, 3, 4)).astype(np.float32)
    with pytest.raises(wgnn.ConversionError, match="ellipsis"):
        einsum_ops("...i,...i->i", [c, c])


def test_einsum_int64_and_constants():
    a = rng.integers(-5, 5, (3, 4)).astype(np.int64)
    b = rng.integers(-5, 5, (4, 2)).astype(np.int64)
    check_op("Einsum", [a, Const(b)], {"equation": "ij,jk->ik"}, opset=12)
    check_op("Einsum", [Const(a), Const(b)], {"equation": "ij,jk"}, opset=12)  # folded at conversion


def test_einsum_unknown_ellipsis_rank_keeps_the_op():
    import onnx
    from onnx import helper

    node = helper.make_node("Einsum", ["a", "b"], ["y"], equation="...ij,...jk->...ik")
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("a", onnx.TensorProto.FLOAT, None),
                                            helper.make_tensor_value_info("b", onnx.TensorProto.FLOAT, None)],
                              [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 12)])
    model.ir_version = 8
    assert [n.op_type for n in wgnn.convert(model).graph.nodes] == ["Einsum"]
    a = rng.standard_normal((2, 3, 4)).astype(np.float32)
    b = rng.standard_normal((2, 4, 5)).astype(np.float32)
    out = wgnn.InferenceSession(wgnn.convert(model)).run(None, {"a": a, "b": b})[0]
    np.testing.assert_allclose(out, np.einsum("...ij,...jk->...ik", a, b), rtol=1e-5, atol=1e-6)


def test_einsum_lowering_follows_symbolic_dims():
    # The merged and split label groups take their sizes from Shape ops folded at each resize.
    import onnx
    from onnx import helper

    node = helper.make_node("Einsum", ["a", "b"], ["y"], equation="abc,cd->abd")
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("a", onnx.TensorProto.FLOAT, ["n", "m", 4]),
                                            helper.make_tensor_value_info("b", onnx.TensorProto.FLOAT, [4, 3])],
                              [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 12)])
    model.ir_version = 8
    converted = wgnn.convert(model)
    assert "Einsum" not in [n.op_type for n in converted.graph.nodes]
    b = rng.standard_normal((4, 3)).astype(np.float32)
    for backend in ("numpy", "wgpu"):
        if backend == "wgpu" and not wgnn.adapters():
            continue
        session = wgnn.InferenceSession(converted, providers=[backend, "numpy"] if backend == "wgpu" else [backend])
        for shape in ((2, 3, 4), (1, 5, 4)):
            a = rng.standard_normal(shape).astype(np.float32)
            out = session.run(None, {"a": a, "b": b})[0]
            np.testing.assert_allclose(out, np.einsum("abc,cd->abd", a, b), rtol=1e-4, atol=1e-5)
