"""The scatter family (GatherElements, GatherND, ScatterElements, ScatterND, Scatter, OneHot,
EyeLike, Trilu, CumSum, ReverseSequence) on every backend against onnx.reference, or onnxruntime
where the reference lacks a form (indices smaller than data, repeated scatter targets)."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(__file__)))
import numpy as np
import pytest
from helpers import Const, check_op, gpu_adapters, make_model, run_wgnn, session_for

import wgnn

rng = np.random.default_rng(7)
GPUS = [f"wgpu:{a['index']}" for a in gpu_adapters()]


def rand(*shape, dtype=np.float32):
    if np.issubdtype(dtype, np.integer):
        return rng.integers(-50, 50, shape).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


def idx(low, high, shape, dtype=np.int64):
    return rng.integers(low, high, shape).astype(dtype)


def feeds_of(inputs):
    return {f"in{i}": np.asarray(x) for i, x in enumerate(inputs) if x is not None and not isinstance(x, Const)}


def run_on(backend, op_type, inputs, attrs=None, *, opset=18):
    """wgnn alone on one backend (for inputs the references reject)."""
    model = make_model(op_type, inputs, attrs, opset=opset)
    return run_wgnn(model, feeds_of(inputs), backend)[0]


# ------------------------------------------------------------------------------ GatherElements
@pytest.mark.parametrize("shape,axis", [((7,), 0), ((4, 5), 1), ((4, 5), -2), ((2, 3, 5), 1),
                                        ((2, 1, 3, 5), -1), ((2, 3, 1, 4), 2)])
def test_gather_elements(shape, axis):
    dim = shape[axis]
    ishape = list(shape)
    ishape[axis] = 3
    # onnx.reference mishandles negative axes here: onnxruntime is the reference.
    check_op("GatherElements", [rand(*shape), idx(-dim, dim, ishape)], {"axis": axis}, opset=13, reference="ort")
    check_op("GatherElements", [rand(*shape, dtype=np.int64), Const(idx(-dim, dim, ishape, np.int32))],
             {"axis": axis}, opset=11, reference="ort")


def test_gather_elements_smaller_indices_and_bool():
    # onnxruntime accepts indices smaller than data outside the axis (onnx.reference does not).
    check_op("GatherElements", [rand(4, 6, 3), idx(-6, 6, (2, 5, 1))], {"axis": 1}, reference="ort")
    x = rand(3, 5) > 0
    check_op("GatherElements", [x, idx(0, 3, (2, 5))], {"axis": 0}, reference="ort")
    check_op("GatherElements", [rand(3, 4), np.zeros((3, 0), np.int64)], {"axis": 1}, opset=13)


def test_gather_elements_out_of_range():
    with pytest.raises(wgnn.ShapeError, match="index along axis 1 5 is out of range"):
        run_on("numpy", "GatherElements", [rand(2, 5), Const(np.array([[0, 5]], np.int64))], {"axis": 1})
    with pytest.raises(wgnn.InputError, match=r'GatherElements "\w+": index along axis 0 -4 is out of range'):
        run_on("numpy", "GatherElements", [rand(3, 2), np.array([[1, -4]], np.int64)])


# ------------------------------------------------------------------------------------ GatherND
@pytest.mark.parametrize("opset", [11, 13])
def test_gather_nd(opset):
    x = rand(4, 3, 5, 2)
    check_op("GatherND", [x, idx(-4, 4, (6, 1))], opset=opset)  # whole (3, 5, 2) slices
    check_op("GatherND", [x, idx(0, 3, (2, 3, 2), np.int32)], opset=opset)
    check_op("GatherND", [x, Const(np.array([[1, 2, -1, 0], [3, 0, 4, 1]], np.int64))], opset=opset)  # elements
    check_op("GatherND", [rand(7, dtype=np.int64), idx(-7, 7, (5, 1))], opset=opset)
    check_op("GatherND", [rand(3, 1), idx(0, 1, (1, 2))], opset=opset)


@pytest.mark.parametrize("batch_dims", [1, 2])
def test_gather_nd_batch_dims(batch_dims):
    x = rand(2, 3, 4, 5)
    lead, dim, pair = x.shape[:batch_dims], x.shape[batch_dims], min(x.shape[batch_dims:batch_dims + 2])
    check_op("GatherND", [x, idx(-dim, dim, lead + (3, 1))], {"batch_dims": batch_dims}, opset=12)
    check_op("GatherND", [x.astype(np.int64), idx(0, pair, lead + (2,))], {"batch_dims": batch_dims}, opset=13)
    check_op("GatherND", [x, Const(idx(0, pair, lead + (2, 2, 2), np.int32))], {"batch_dims": batch_dims},
             opset=13)


def test_gather_nd_errors():
    with pytest.raises(wgnn.ShapeError, match=r"last indices dim \(4\) must lie in \[1, 3\]"):
        run_on("numpy", "GatherND", [rand(2, 3, 4), idx(0, 1, (2, 4))])
    with pytest.raises(wgnn.InputError, match=r'GatherND "\w+": index 3 is out of range \[-3, 3\)'):
        run_on("numpy", "GatherND", [rand(2, 3, 4), np.array([[1, 3]], np.int64)])


# ------------------------------------------------------------------------------ ScatterElements
REDUCTIONS = ["none", "add", "mul", "max", "min"]


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_scatter_elements_reductions(reduction):
    # Updates twice as long as the axis: targets repeat, applied in index order.
    data = rand(3, 4, 5)
    check_op("ScatterElements", [data, idx(-4, 4, (3, 8, 5)), rand(3, 8, 5)], {"axis": 1, "reduction": reduction},
             reference="ort")
    data = rand(6, 3, dtype=np.int64)
    check_op("ScatterElements", [data, Const(idx(0, 6, (9, 2), np.int32)), rand(9, 2, dtype=np.int64)],
             {"axis": 0, "reduction": reduction}, reference="ort")


@pytest.mark.parametrize("shape,axis", [((7,), 0), ((4, 5), -1), ((2, 3, 5), 0), ((2, 1, 3, 5), 2)])
def test_scatter_elements_shapes(shape, axis):
    dim = shape[axis]
    ishape = list(shape)
    ishape[axis] = 1  # one update per line: no repeats, so the ONNX reference applies
    check_op("ScatterElements", [rand(*shape), idx(-dim, dim, ishape), rand(*ishape)], {"axis": axis}, opset=13)
    check_op("ScatterElements", [rand(*shape) > 0, idx(0, dim, ishape, np.int32), rand(*ishape) > 0],
             {"axis": axis}, opset=11, reference="ort")


@pytest.mark.parametrize("opset", [9, 10])
def test_scatter_old(opset):
    data = rand(4, 5)
    check_op("Scatter", [data, idx(-4, 4, (2, 5)), rand(2, 5)], {"axis": 0}, opset=opset, reference="ort")
    check_op("Scatter", [data, Const(np.array([[1, 3]], np.int64)), rand(1, 2)], opset=opset, reference="ort")


def test_scatter_elements_opsets():
    data, indices, updates = rand(4, 3), np.array([[1, 0, 2], [3, 1, 0]], np.int64), rand(2, 3)
    check_op("ScatterElements", [data, indices, updates], opset=11)
    check_op("ScatterElements", [data, indices, updates], {"reduction": "mul"}, opset=16)
    check_op("ScatterElements", [data, indices, updates], {"reduction": "max"}, opset=18)


def test_scatter_elements_out_of_range():
    with pytest.raises(wgnn.ShapeError, match="index along axis 0 4 is out of range"):
        run_on("numpy", "ScatterElements", [rand(4, 2), Const(np.array([[4, 0]], np.int64)), rand(1, 2)])
    with pytest.raises(wgnn.InputError, match=r'ScatterElements "\w+": index along axis 1 -3 is out of range'):
        run_on("numpy", "ScatterElements", [rand(4, 2), np.array([[1, -3]], np.int64), rand(1, 2)], {"axis": 1})


# ------------------------------------------------------------------------------------ ScatterND
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_scatter_nd_reductions(reduction):
    data = rand(5, 3, 4)
    # Row slices with repeated targets, run-time indices (one invocation walks every tuple).
    check_op("ScatterND", [data, idx(-5, 5, (7, 1)), rand(7, 3, 4)], {"reduction": reduction}, reference="ort")
    # Element updates, constant distinct indices (one invocation per tuple on the GPU).
    flat = rng.permutation(60)[:11]
    points = np.stack(np.unravel_index(flat, (5, 3, 4)), -1).astype(np.int64)
    check_op("ScatterND", [data.astype(np.int64), Const(points), rand(11, dtype=np.int64)], {"reduction": reduction},
             reference="ort")


@pytest.mark.parametrize("opset", [11, 13, 16, 18])
def test_scatter_nd_shapes(opset):
    data = rand(4, 3, 5)
    check_op("ScatterND", [data, Const(np.array([[[0, 2]], [[3, -1]]], np.int64)), rand(2, 1, 5)], opset=opset)
    check_op("ScatterND", [rand(9), np.array([[4], [-1], [0]], np.int64), rand(3)], opset=opset)
    check_op("ScatterND", [data, np.array([[1, 0, 4]], np.int64), rand(1)], opset=opset)
    check_op("ScatterND", [rand(2, 1, 3, 2, dtype=np.int64), Const(np.array([[1]], np.int32)),
                           rand(1, 1, 3, 2, dtype=np.int64)], opset=opset)


def test_scatter_nd_repeats_are_deterministic():
    """Many updates onto few targets: every backend gives the in-order sum bit for bit."""
    data = rand(3, 2)
    indices = idx(0, 3, (40, 2)) % np.array([3, 2])
    updates = rand(40)
    expected = data.copy()
    for (i, j), u in zip(indices, updates, strict=True):
        expected[i, j] += u
    for backend in ["numpy", *GPUS]:
        got = run_on(backend, "ScatterND", [data, indices, updates], {"reduction": "add"})
        np.testing.assert_array_equal(got, expected, err_msg=backend)


def test_scatter_nd_errors():
    with pytest.raises(wgnn.ShapeError, match="updates shape"):
        run_on("numpy", "ScatterND", [rand(4, 3), idx(0, 4, (2, 1)), rand(2, 4)])
    with pytest.raises(wgnn.InputError, match=r'ScatterND "\w+": index 4 is out of range \[-4, 4\)'):
        run_on("numpy", "ScatterND", [rand(4, 3), np.array([[0], [4]], np.int64), rand(2, 3)])


# ---------------------------------------------------------------------------------------- OneHot
@pytest.mark.parametrize("axis", [-1, 0, 1, -2, -3])
def test_one_hot_axes(axis):
    indices = np.array([[1, -1, 4], [0, 7, -5]], np.int64)  # 7 and -5 lie outside [-4, 4): all off
    check_op("OneHot", [indices, Const(np.array(4, np.int64)), np.array([-2, 3], np.float32)], {"axis": axis},
             opset=11)


def test_one_hot_types_and_opsets():
    values = np.array([0, 1], np.int64)
    check_op("OneHot", [idx(-3, 5, (3, 1, 2), np.int32), Const(np.array(5, np.int64)), values], opset=11)
    check_op("OneHot", [idx(-3, 5, (3, 1, 2), np.int32), Const(np.array([5.0], np.float32)),
                        np.array([0, 1], np.float32)], opset=11, reference="ort")  # onnx.reference: 0-d depth
    check_op("OneHot", [np.array([0.7, 2.2, -1.5], np.float32), Const(np.array(3.0, np.float32)),
                        np.array([0.5, 1.0], np.float32)], {"axis": 0}, opset=11,
             reference="ort")  # float indices cast to int64 (ONNX spec); onnx.reference compares floats
    check_op("OneHot", [idx(0, 6, (5,)), Const(np.array(6, np.int64)), np.array([1.0, 0.0], np.float32)], opset=9)
    check_op("OneHot", [idx(0, 9, (3, 4)), Const(np.array(9, np.int64)), np.array([0.0, 1.0], np.float32)],
             {"axis": 1}, opset=11)


def test_one_hot_runtime_depth():
    """depth fed at run time: the session plans the op once it is known (a sync point)."""
    check_op("OneHot", [idx(-3, 3, (2, 3)), np.array(3, np.int64), np.array([0, 1], np.float32)], opset=11)


# --------------------------------------------------------------------------------------- EyeLike
@pytest.mark.parametrize("k", [0, 1, -2, 4, -7, 99])
def test_eye_like(k):
    check_op("EyeLike", [rand(4, 6)], {"k": k}, opset=9)
    check_op("EyeLike", [rand(5, 3, dtype=np.int64)], {"k": k}, opset=22)


def test_eye_like_dtype():
    check_op("EyeLike", [rand(3, 5)], {"dtype": 7}, opset=9)  # int64
    check_op("EyeLike", [rand(4, 4, dtype=np.int32)], {"dtype": 1, "k": -1}, opset=22)  # float32
    check_op("EyeLike", [rand(1, 1)], opset=9)


# ----------------------------------------------------------------------------------------- Trilu
@pytest.mark.parametrize("upper", [0, 1])
@pytest.mark.parametrize("k", [0, 1, -1, 3, -4, 9, -9])
def test_trilu(upper, k):
    check_op("Trilu", [rand(4, 6), Const(np.array(k, np.int64))], {"upper": upper}, opset=14)
    check_op("Trilu", [rand(2, 3, 5, 3, dtype=np.int64), np.array(k, np.int64)], {"upper": upper}, opset=14)


def test_trilu_default_k_and_edges():
    check_op("Trilu", [rand(3, 5, 4)], opset=14)
    check_op("Trilu", [rand(2, 1, 5)], {"upper": 0}, opset=14)
    check_op("Trilu", [rand(3, 5, 4), Const(np.array(2 ** 40, np.int64))], {"upper": 0}, opset=14)
    check_op("Trilu", [rand(3, 5, 4), Const(np.array(-(2 ** 40), np.int64))], opset=14)
    check_op("Trilu", [rand(0, 3)], opset=14)


# ---------------------------------------------------------------------------------------- CumSum
@pytest.mark.parametrize("exclusive", [0, 1])
@pytest.mark.parametrize("reverse", [0, 1])
def test_cumsum_modes(exclusive, reverse):
    attrs = {"exclusive": exclusive, "reverse": reverse}
    check_op("CumSum", [rand(3, 7, 2), Const(np.array(1, np.int64))], attrs, opset=14)
    check_op("CumSum", [rand(9), Const(np.array(0, np.int32))], attrs, opset=11)
    check_op("CumSum", [rand(1, 4), Const(np.array([-2], np.int64))], attrs, opset=14, reference="ort")
    check_op("CumSum", [rand(2, 3, 1, 5, dtype=np.int64), Const(np.array(-1, np.int64))], attrs, opset=14)


@pytest.mark.parametrize("axis", [0, 1, 2, -3, -1])
def test_cumsum_runtime_axis(axis):
    """The axis fed at run time: the GPU kernel reads it from its tensor."""
    check_op("CumSum", [rand(4, 3, 5), np.array(axis, np.int64)], {"reverse": 1}, opset=14)
    check_op("CumSum", [rand(2, 5, 3, dtype=np.int32), np.array(axis, np.int32)], {"exclusive": 1}, opset=14)


def test_cumsum_errors_and_bad_runtime_axis():
    with pytest.raises(wgnn.ShapeError, match="axis 2 is out of range"):
        run_on("numpy", "CumSum", [rand(3, 4), Const(np.array(2, np.int64))], opset=14)
    with pytest.raises(wgnn.InputError, match=r'CumSum "\w+": axis -3 is out of range'):
        run_on("numpy", "CumSum", [rand(3, 4), np.array(-3, np.int64)], opset=14)
    for backend in GPUS:  # documented: zeros
        got = run_on(backend, "CumSum", [rand(3, 4), np.array(5, np.int64)], opset=14)
        np.testing.assert_array_equal(got, np.zeros((3, 4), np.float32))


@pytest.mark.skipif(not GPUS, reason="no GPU adapter")
def test_cumsum_long_axis_respects_the_loop_budget():
    """An axis past llvmpipe's loop budget runs on the CPU there, reported as a fallback."""
    x = idx(-3, 4, (2, 61000), np.int32)
    model = make_model("CumSum", [x, Const(np.array(1, np.int64))], opset=14)
    for backend in GPUS:
        session = session_for(wgnn.convert(model), backend)
        np.testing.assert_array_equal(session.run(None, {"in0": x})[0], np.cumsum(x, 1, dtype=np.int32))
        reasons = [r for f in session.report()["fallbacks"] for r in f["reasons"]]
        if "llvmpipe" in session.session.backends[0].context.info.name.lower():
            assert any("loop iterations" in r for r in reasons), reasons
    check_op("CumSum", [x[:, :3000], Const(np.array(-1, np.int64))], opset=14)


@pytest.mark.skipif(not GPUS, reason="no GPU adapter")
def test_scatter_nd_many_updates():
    """21000 element updates: run-time indices need one invocation walking them all (past
    llvmpipe's loop budget: CPU there); constant distinct indices get an invocation each."""
    data = np.zeros((150, 150), np.int32)
    flat = rng.permutation(data.size)[:21000]
    indices = np.stack(np.unravel_index(flat, data.shape), -1).astype(np.int64)
    updates = rng.integers(1, 9, 21000).astype(np.int32)
    expected = data.copy()
    expected.reshape(-1)[flat] = updates
    for backend in GPUS:
        for given in (indices, Const(indices)):
            model = make_model("ScatterND", [data, given, updates])
            session = session_for(wgnn.convert(model), backend)
            np.testing.assert_array_equal(session.run(None, feeds_of([data, given, updates]))[0], expected)
            reasons = [r for f in session.report()["fallbacks"] for r in f["reasons"]]
            if isinstance(given, Const):
                assert not reasons
            elif "llvmpipe" in session.session.backends[0].context.info.name.lower():
                assert any("loop iterations" in r for r in reasons), reasons


# ------------------------------------------------------------------------------- ReverseSequence
@pytest.mark.parametrize("shape,batch_axis", [((4, 3), 1), ((3, 5), 0), ((5, 2, 3), 1), ((2, 4, 3, 2), 0)])
def test_reverse_sequence(shape, batch_axis):
    time_axis = 1 - batch_axis
    steps, batch = shape[time_axis], shape[batch_axis]
    lens = rng.integers(0, steps + 1, batch).astype(np.int64)
    lens[0] = steps
    attrs = {"batch_axis": batch_axis, "time_axis": time_axis}
    check_op("ReverseSequence", [rand(*shape), lens], attrs, opset=10)
    check_op("ReverseSequence", [rand(*shape, dtype=np.int64), Const(lens.astype(np.int32))], attrs, opset=10)


def test_reverse_sequence_errors():
    with pytest.raises(wgnn.ShapeError, match="sequence length 5 is out of range"):
        run_on("numpy", "ReverseSequence", [rand(4, 2), Const(np.array([5, 1], np.int64))], opset=10)
    with pytest.raises(wgnn.InputError, match=r'ReverseSequence "\w+": sequence length -1 is out of range'):
        run_on("numpy", "ReverseSequence", [rand(4, 2), np.array([2, -1], np.int64)], opset=10)


# --------------------------------------------------------------------------------------- empty
def test_empty_tensors():
    check_op("CumSum", [rand(0, 3), Const(np.array(0, np.int64))], {"exclusive": 1}, opset=14)
    check_op("CumSum", [rand(3, 0), np.array(1, np.int64)], {"reverse": 1}, opset=14)
    check_op("GatherND", [rand(3, 4), np.zeros((0, 1), np.int64)], opset=13)
    check_op("ScatterND", [rand(3, 4), np.zeros((0, 1), np.int64), rand(0, 4)], opset=13)
    check_op("ScatterElements", [rand(3, 4), np.zeros((0, 4), np.int64), rand(0, 4)], opset=13)
    check_op("OneHot", [np.zeros((2, 0), np.int64), Const(np.array(3, np.int64)), np.array([0, 1], np.float32)],
             opset=11)
    check_op("ReverseSequence", [rand(0, 2), np.array([0, 0], np.int64)], opset=10, reference="ort")


# ------------------------------------------------------------------------------------- resizes
@pytest.mark.skipif(not GPUS, reason="no GPU adapter")
def test_new_shapes_compile_nothing():
    from onnx import TensorProto, helper
    from wgnn.backends.wgpu.loader import pipeline_cache

    nodes = [helper.make_node("CumSum", ["x", "axis"], ["c"]),
             helper.make_node("Trilu", ["c"], ["t"], upper=0),
             helper.make_node("ScatterND", ["t", "i", "u"], ["y"], reduction="add")]
    graph = helper.make_graph(nodes, "chain", [
        helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", "M"]),
        helper.make_tensor_value_info("axis", TensorProto.INT64, []),
        helper.make_tensor_value_info("i", TensorProto.INT64, ["K", 1]),
        helper.make_tensor_value_info("u", TensorProto.FLOAT, ["K", "M"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]).SerializeToString()
    reference = wgnn.InferenceSession(model, providers=["numpy"])
    for backend in GPUS:
        session = session_for(model, backend)
        cache = pipeline_cache(session.session.backends[0].context)
        compiled = None
        for n, m, k in [(3, 4, 2), (5, 2, 7), (1, 6, 1)]:
            feeds = {"x": rand(n, m), "axis": np.array(1, np.int64), "i": idx(0, n, (k, 1)), "u": rand(k, m)}
            np.testing.assert_allclose(session.run(None, feeds)[0], reference.run(None, feeds)[0], rtol=1e-5)
            assert not session.report()["fallbacks"]
            compiled = cache.compiled if compiled is None else compiled
        assert cache.compiled == compiled
