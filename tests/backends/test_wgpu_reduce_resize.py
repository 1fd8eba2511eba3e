"""GPU kernels of the reduce, softmax and resize families, past what tests/ops covers: long rows
(llvmpipe stops an invocation's loops after 65535 iterations), NaN, integer and bool tensors,
rounding ties of nearest resizing, what the kernels refuse, and resizing without compiling."""
import numpy as np
import onnx
import pytest
from helpers import Const, check_op, gpu_adapters, make_model, session_for
from onnx import TensorProto, helper
from wgnn.models.format import model_to_bytes, read_model

import wgnn

pytestmark = pytest.mark.skipif(not gpu_adapters(), reason="no GPU adapter (install mesa-vulkan-drivers)")
ADAPTERS = [f"wgpu:{a['index']}" for a in gpu_adapters()]
rng = np.random.default_rng(0)


def against_numpy(op_type, inputs, attrs=None, *, opset=18, rtol=1e-4, atol=1e-5):
    """Run one node on the numpy backend and on every adapter; returns the GPU sessions' fallbacks."""
    model = read_model(model_to_bytes(wgnn.convert(make_model(op_type, inputs, attrs, opset=opset))))
    feeds = {f"in{i}": x for i, x in enumerate(inputs) if x is not None and not isinstance(x, Const)}
    want = session_for(model, "numpy").run(None, feeds)
    fallbacks = []
    for backend in ADAPTERS:
        session = session_for(model, backend)
        for got, expected in zip(session.run(None, feeds), want):
            assert got.dtype == expected.dtype and got.shape == expected.shape
            np.testing.assert_allclose(got, expected, rtol=rtol, atol=atol, equal_nan=True, err_msg=backend)
        fallbacks += [reason for f in session.report()["fallbacks"] for reason in f["reasons"]]
    return fallbacks


def test_long_rows_past_the_loop_limit():
    # 100000 elements per output: a plain loop over them would stop at 65535 on llvmpipe.
    x = rng.standard_normal((2, 100000)).astype(np.float32)
    check_op("ReduceSum", [x, Const(np.array([1], np.int64))], opset=18, rtol=1e-4, atol=1e-3)
    check_op("ReduceLogSumExp", [x.T.copy(), Const(np.array([0], np.int64))], opset=18, rtol=1e-4, atol=1e-4)
    check_op("ArgMin", [x], {"axis": 1}, opset=13)
    check_op("Softmax", [x[:, :70000]], {"axis": 1}, opset=13, rtol=1e-4, atol=1e-7)
    ones = np.ones((1000, 2, 100), np.float32)  # axes 0 and 2: the longest reduced dim is walked
    check_op("ReduceSum", [ones, Const(np.array([0, 2], np.int64))], opset=18)


def test_too_long_rows_are_refused():
    # Softmax, Reduce and ArgReduce give a row (an output) a workgroup: 64 times longer rows run on the GPU.
    x = rng.standard_normal(1_400_000).astype(np.float32)
    reasons = against_numpy("Softmax", [x], {"axis": 0}, opset=13, atol=1e-9)
    assert reasons and all("multi-pass" in r for r in reasons), reasons
    from types import SimpleNamespace

    from wgnn.backends.wgpu.reduce import ReduceGpu
    from wgnn.engine.ops.base import TensorSpec

    def reduce_max(elements):
        return SimpleNamespace(input_specs=[TensorSpec((elements,), "float32")],
                               output_specs=[TensorSpec((1,), "float32")],
                               attrs={"kind": "max", "axes": [0], "noop_with_empty_axes": 0})

    assert ReduceGpu.unsupported_reason(reduce_max(20_000_000)) is None
    assert "multi-pass" in ReduceGpu.unsupported_reason(reduce_max(40_000_000))
    from wgnn.backends.wgpu.reduce import ArgReduceGpu

    def arg_max(elements):
        return SimpleNamespace(input_specs=[TensorSpec((elements,), "float32")], output_specs=[TensorSpec((), "int64")],
                               attrs={"kind": "max", "axis": 0, "select_last_index": 0})

    assert ArgReduceGpu.unsupported_reason(arg_max(3_000_000)) is None
    assert "multi-pass" in ArgReduceGpu.unsupported_reason(arg_max(4_000_000))


def test_nan_like_numpy():
    x = rng.standard_normal((3, 4, 5)).astype(np.float32)
    x[0, 1, 2] = x[2, 3, 0] = x[2, 3, 4] = np.nan
    for op in ("ReduceMax", "ReduceMin", "ReduceSum"):
        assert not against_numpy(op, [x, Const(np.array([2], np.int64))], opset=18)
    for op in ("ArgMax", "ArgMin"):
        for last in (0, 1):
            assert not against_numpy(op, [x], {"axis": -1, "select_last_index": last}, opset=13)
    assert not against_numpy("Hardmax", [x], {"axis": -1}, opset=13)


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_integer_reductions(dtype):
    x = rng.integers(-9, 10, (3, 7, 4)).astype(dtype)
    for op in ("ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceSumSquare"):
        reasons = against_numpy(op, [x, Const(np.array([0, 2], np.int64))], {"keepdims": 0})
        # int64 sums can pass int32, so they run on numpy; max/min only select values
        summing = dtype == np.int64 and op not in ("ReduceMax", "ReduceMin")
        assert (bool(reasons) and all("wrap silently" in r for r in reasons)) if summing else not reasons
    squares = np.array([[3, 4], [5, 12], [20, 21], [0, 0], [1, 1]], dtype)  # perfect squares: exact isqrt
    assert bool(against_numpy("ReduceL2", [squares, Const(np.array([1], np.int64))])) == (dtype == np.int64)
    assert not against_numpy("ReduceMax", [np.zeros((2, 0, 3), np.int32), Const(np.array([1], np.int64))])


def test_empty_int64_max_does_not_fit():
    reasons = against_numpy("ReduceMax", [np.zeros((2, 0), np.int64), Const(np.array([1], np.int64))])
    assert reasons and all("does not fit" in r for r in reasons)


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.bool_])
def test_resize_nearest_gathers_integers_and_bools(dtype):
    x = rng.integers(-50, 50, (2, 3, 4, 5)).astype(dtype)
    scales = Const(np.array([1, 1, 1.7, 0.6], np.float32))
    assert not against_numpy("Resize", [x, None, scales, None], {"mode": "nearest"}, opset=19)
    assert not against_numpy("Resize", [x, None, scales, None],
                             {"mode": "nearest", "nearest_mode": "floor", "exclude_outside": 1}, opset=19)
    roi = Const(np.array([-0.2, 0.1, 0.9, 1.3], np.float32))
    crop = {"mode": "nearest", "coordinate_transformation_mode": "tf_crop_and_resize", "extrapolation_value": 3.0,
            "axes": [2, 3]}
    assert not against_numpy("Resize", [x, roi, None, Const(np.array([5, 6], np.int64))], crop, opset=19)


def test_resize_integer_linear_is_refused():
    x = rng.integers(-50, 50, (1, 2, 4, 5)).astype(np.int32)
    reasons = against_numpy("Resize", [x, None, Const(np.array([1, 1, 2, 2], np.float32)), None],
                            {"mode": "linear"}, opset=19)
    assert reasons and all("float64" in r for r in reasons)


@pytest.mark.parametrize("nearest_mode", ["round_prefer_floor", "round_prefer_ceil", "floor", "ceil"])
def test_resize_nearest_near_ties(nearest_mode):
    # float32 1.7 makes (y + 0.5) / scale land 1e-7 below a .5 tie at y = 8 (an f32 formula rounds it
    # onto the tie); scale 2.5 and 0.5 give exact ties and integers.
    x = rng.standard_normal((1, 2, 10, 400)).astype(np.float32)
    for scales in ([1, 1, 1.7, 1.7], [1, 1, 2.5, 0.5], [1, 1, 0.5, 2.5]):
        for mode in ("half_pixel", "asymmetric", "align_corners", "pytorch_half_pixel"):
            attrs = {"mode": "nearest", "nearest_mode": nearest_mode, "coordinate_transformation_mode": mode}
            assert not against_numpy("Resize", [x, None, Const(np.array(scales, np.float32)), None], attrs, opset=19)


def test_resize_float64_noise_ties_are_refused():
    # half_pixel_symmetric adds an offset computed in float64: coordinates that are integers in
    # exact arithmetic come out a few 1e-16 off, and the numpy backend floors by that noise.
    x = rng.standard_normal((1, 1, 33)).astype(np.float32)
    attrs = {"mode": "nearest", "nearest_mode": "floor", "coordinate_transformation_mode": "half_pixel_symmetric"}
    reasons = against_numpy("Resize", [x, None, Const(np.array([1, 1, 0.5], np.float32)), None], attrs, opset=19)
    assert reasons and all("tie" in r for r in reasons)


def test_resize_four_axes_and_refusals():
    x = rng.standard_normal((2, 3, 4, 3, 5)).astype(np.float32)
    for mode in ("nearest", "linear", "cubic"):
        sizes = Const(np.array([2, 5, 3, 4, 2], np.int64))  # the batch axis stays: 4 resampled axes
        assert not against_numpy("Resize", [x, None, None, sizes], {"mode": mode}, opset=19, atol=1e-4)
    reasons = against_numpy("Resize", [x, None, None, Const(np.array([1, 5, 3, 4, 2], np.int64))],
                            {"mode": "nearest"}, opset=19)
    assert reasons and all("5 resampled axes" in r for r in reasons)
    wide = rng.standard_normal((1, 1, 200, 200)).astype(np.float32)
    reasons = against_numpy("Resize", [wide, None, Const(np.array([1, 1, 0.02, 0.02], np.float32)), None],
                            {"mode": "cubic", "antialias": 1}, opset=19)
    assert reasons and all("taps" in r for r in reasons)


def test_resize_extrapolation_with_exclude_outside():
    # The numpy backend extrapolates per axis in its order, then later axes weigh that value.
    x = rng.standard_normal((2, 3, 6, 7)).astype(np.float32)
    roi = Const(np.array([-0.4, 0.3, 1.2, 0.6], np.float32))
    for mode in ("nearest", "linear", "cubic"):
        attrs = {"mode": mode, "coordinate_transformation_mode": "tf_crop_and_resize", "extrapolation_value": -2.5,
                 "exclude_outside": 1, "axes": [2, 3], "nearest_mode": "floor"}
        for sizes in ([9, 4], [3, 11]):
            assert not against_numpy("Resize", [x, roi, None, Const(np.array(sizes, np.int64))], attrs, opset=19,
                                     atol=1e-4)


def test_new_shapes_compile_nothing():
    from wgnn.backends.wgpu.loader import pipeline_cache

    x_info = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, "H", "W"])
    nodes = [helper.make_node("Resize", ["x", "", "scales"], ["r"], mode="linear"),
             helper.make_node("Softmax", ["r"], ["s"], axis=1),
             helper.make_node("ReduceMean", ["s", "axes"], ["m"], keepdims=0),
             helper.make_node("ArgMax", ["m"], ["y"], axis=1)]
    inits = [onnx.numpy_helper.from_array(np.array([1, 1, 2, 1.5], np.float32), "scales"),
             onnx.numpy_helper.from_array(np.array([3], np.int64), "axes")]
    graph = helper.make_graph(nodes, "chain", [x_info], [helper.make_tensor_value_info("y", TensorProto.INT64, None)],
                              inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]).SerializeToString()
    reference = wgnn.InferenceSession(model, providers=["numpy"])
    for adapter in range(len(ADAPTERS)):
        session = wgnn.InferenceSession(model, config=wgnn.Config(providers=("wgpu", "numpy"), adapter=adapter))
        cache = pipeline_cache(session.session.backends[0].context)
        compiled = None
        for shape in [(1, 3, 4, 5), (2, 3, 7, 3), (3, 3, 1, 9)]:
            x = rng.standard_normal(shape).astype(np.float32)
            np.testing.assert_array_equal(session.run(None, {"x": x})[0], reference.run(None, {"x": x})[0])
            assert not session.report()["fallbacks"]
            compiled = cache.compiled if compiled is None else compiled
        assert cache.compiled == compiled
