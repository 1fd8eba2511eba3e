import numpy as np
import pytest
from helpers import Const, assert_close, check_op, make_model, run_wgnn
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator
from wgnn.backends.numpy import compiled
from wgnn.backends.numpy import resize as numpy_resize

import wgnn

rng = np.random.default_rng(0)
X = rng.standard_normal((2, 3, 4, 5)).astype(np.float32)  # batch 2, C = 3
TOL = {"rtol": 1e-4, "atol": 1e-5}
CUBIC_TOL = {"rtol": 1e-4, "atol": 1e-4}  # 4x4 taps with weights outside [0, 1] accumulate float32 error

COORDINATE_MODES = ["half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners", "asymmetric",
                    "tf_crop_and_resize"]
NEAREST_MODES = ["round_prefer_floor", "round_prefer_ceil", "floor", "ceil"]
COMBOS = ([("nearest", c, n) for c in COORDINATE_MODES for n in NEAREST_MODES]
          + [(m, c, None) for m in ("linear", "cubic") for c in COORDINATE_MODES])
# scales (or sizes) for the 2x3x4x5 input: up, down, mixed non-integer, sizes, sizes of 1
CASES = {
    "up": ("scales", [1, 1, 1.7, 2.5]),
    "down": ("scales", [1, 1, 0.6, 0.45]),
    "mixed": ("scales", [1, 1, 0.6, 1.7]),
    "sizes": ("sizes", [2, 3, 7, 3]),
    "to_one": ("sizes", [2, 3, 1, 1]),  # the special cases of output length 1
}
ROI = np.array([0, 0, 0.2, 0.1, 1, 1, 0.9, 1.2], np.float32)  # the last end lies outside: extrapolation


def resize_inputs(x, kind, values, roi=None):
    scales = Const(np.array(values, np.float32)) if kind == "scales" else None
    sizes = Const(np.array(values, np.int64)) if kind == "sizes" else None
    return [x, None if roi is None else Const(roi), scales, sizes]


def check_ort(op_type, inputs, attrs=None, **options):
    """check_op against onnxruntime (where onnx.reference is wrong or cannot run the case)."""
    return check_op(op_type, inputs, attrs, reference="ort", **options)

@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize(("mode", "coordinate_mode", "nearest_mode"), COMBOS)
def test_resize_modes(mode, coordinate_mode, nearest_mode, case):
    attrs = {"mode": mode, "coordinate_transformation_mode": coordinate_mode}
    if nearest_mode:
        attrs["nearest_mode"] = nearest_mode
    roi = ROI if coordinate_mode == "tf_crop_and_resize" else None
    if roi is not None:
        attrs["extrapolation_value"] = -3.0
    check_op("Resize", resize_inputs(X, *CASES[case], roi), attrs, opset=19,
             **(CUBIC_TOL if mode == "cubic" else TOL))


@pytest.mark.parametrize("mode", ["nearest", "linear", "cubic"])
def test_resize_axes_attribute(mode):
    tol = CUBIC_TOL if mode == "cubic" else TOL
    check_op("Resize", [X, None, Const(np.array([0.6, 1.7], np.float32)), None], {"mode": mode, "axes": [2, 3]},
             opset=18, **tol)
    # onnx.reference cannot transpose with negative axes: onnxruntime checks those.
    check_ort("Resize", [X, None, None, Const(np.array([7], np.int64))], {"mode": mode, "axes": [-2]}, opset=18, **tol)
    roi = Const(np.array([0.1, 0.9], np.float32))
    check_op("Resize", [X, roi, None, Const(np.array([4], np.int64))],
             {"mode": mode, "axes": [3], "coordinate_transformation_mode": "tf_crop_and_resize"}, opset=18, **tol)


@pytest.mark.parametrize("nearest_mode", NEAREST_MODES)
def test_resize_nearest_channel_axis_5d(nearest_mode):
    x = rng.standard_normal((2, 3, 4, 3, 5)).astype(np.float32)
    check_op("Resize", [x, None, Const(np.array([1, 2.0, 0.5, 1.5, 1], np.float32)), None],
             {"mode": "nearest", "nearest_mode": nearest_mode, "coordinate_transformation_mode": "asymmetric"},
             opset=19)
    check_op("Resize", [x, None, None, Const(np.array([1, 5, 3, 3, 2], np.int64))],
             {"mode": "nearest", "nearest_mode": nearest_mode}, opset=19)


@pytest.mark.parametrize("mode", ["linear", "cubic"])
def test_resize_nd_some_axes(mode):
    # 3-D: the first and last axes resampled, the middle one kept; and a 1-D signal.
    x = rng.standard_normal((3, 4, 6)).astype(np.float32)
    tol = CUBIC_TOL if mode == "cubic" else TOL
    check_op("Resize", [x, None, Const(np.array([1.7, 1, 0.5], np.float32)), None], {"mode": mode}, opset=19, **tol)
    check_op("Resize", [x[0, 0], None, None, Const(np.array([11], np.int64))],
             {"mode": mode, "coordinate_transformation_mode": "align_corners"}, opset=19, **tol)


@pytest.mark.parametrize("coordinate_mode", ["half_pixel", "align_corners", "tf_crop_and_resize"])
@pytest.mark.parametrize("a", [-0.75, -0.5])
def test_resize_cubic_exclude_outside(coordinate_mode, a):
    attrs = {"mode": "cubic", "exclude_outside": 1, "cubic_coeff_a": a,
             "coordinate_transformation_mode": coordinate_mode}
    roi = ROI if coordinate_mode == "tf_crop_and_resize" else None
    for kind, values in CASES.values():
        check_op("Resize", resize_inputs(X, kind, values, roi), attrs, opset=19, **CUBIC_TOL)


def test_resize_nearest_exclude_outside():
    check_op("Resize", resize_inputs(X, "scales", [1, 1, 1.7, 2.5]),
             {"mode": "nearest", "nearest_mode": "floor", "exclude_outside": 1}, opset=19)


def test_resize_tf_crop_and_resize():
    roi = np.array([0, 0, -0.3, 0.25, 1, 1, 0.8, 0.75], np.float32)
    for mode in ("nearest", "linear", "cubic"):
        tol = CUBIC_TOL if mode == "cubic" else TOL
        attrs = {"mode": mode, "coordinate_transformation_mode": "tf_crop_and_resize", "extrapolation_value": 7.5}
        check_op("Resize", [X, Const(roi), None, Const(np.array([2, 3, 5, 4], np.int64))], attrs, opset=19, **tol)
        check_op("Resize", [X, Const(roi), None, Const(np.array([2, 3, 1, 1], np.int64))], attrs, opset=19, **tol)


@pytest.mark.parametrize("policy", ["not_larger", "not_smaller"])
@pytest.mark.parametrize("mode", ["nearest", "linear"])
def test_resize_keep_aspect_ratio(policy, mode):
    check_op("Resize", [X, None, None, Const(np.array([7, 7], np.int64))],
             {"mode": mode, "axes": [2, 3], "keep_aspect_ratio_policy": policy}, opset=18, **TOL)
    check_op("Resize", [X, None, None, Const(np.array([3, 9, 9, 3], np.int64))],
             {"mode": mode, "keep_aspect_ratio_policy": policy}, opset=18, **TOL)


@pytest.mark.parametrize("mode", ["linear", "cubic"])
def test_resize_antialias(mode):
    x = rng.standard_normal((1, 2, 9, 11)).astype(np.float32)
    for scales in ([1, 1, 0.5, 0.3], [1, 1, 0.8, 1.5]):
        check_op("Resize", [x, None, Const(np.array(scales, np.float32)), None], {"mode": mode, "antialias": 1},
                 opset=18, **CUBIC_TOL)
    check_op("Resize", [x, None, None, Const(np.array([4, 3], np.int64))],
             {"mode": mode, "antialias": 1, "axes": [2, 3], "exclude_outside": 1}, opset=18, **CUBIC_TOL)


def test_resize_integer_input():
    x = rng.integers(0, 256, (1, 3, 4, 5)).astype(np.uint8)
    check_op("Resize", resize_inputs(x, "scales", [1, 1, 1.7, 2.5]), {"mode": "nearest"}, opset=19)
    check_op("Resize", resize_inputs(x, "scales", [1, 1, 0.6, 1.7]), {"mode": "linear"}, opset=19)
    check_op("Resize", resize_inputs(x, "sizes", [1, 3, 9, 4]), {"mode": "cubic"}, opset=19)


def test_resize_opset_11_and_13_forms():
    empty = Const(np.zeros(0, np.float32))
    check_op("Resize", [X, empty, Const(np.array([1, 1, 1.7, 0.6], np.float32))], {"mode": "linear"}, opset=11, **TOL)
    check_op("Resize", [X, empty, empty, Const(np.array([2, 3, 3, 8], np.int64))], {"mode": "cubic"}, opset=11,
             **CUBIC_TOL)
    check_op("Resize", [X, Const(ROI), Const(np.array([1, 1, 1.5, 1.5], np.float32))],
             {"mode": "linear", "coordinate_transformation_mode": "tf_crop_and_resize"}, opset=11, **TOL)
    check_op("Resize", [X, None, Const(np.array([1, 1, 2, 2], np.float32))], {"mode": "nearest"}, opset=13)
    check_op("Resize", [X, empty, empty, Const(np.array([2, 3, 2, 9], np.int64))], {"mode": "nearest"}, opset=13)


def test_resize_tf_half_pixel_for_nn():
    check_ort("Resize", [X, Const(np.zeros(0, np.float32)), Const(np.array([1, 1, 1.7, 0.6], np.float32))],
              {"mode": "nearest", "coordinate_transformation_mode": "tf_half_pixel_for_nn"}, opset=11)


@pytest.mark.parametrize("mode", ["nearest", "linear"])
def test_resize_opset_10(mode):
    for scales in ([1, 1, 0.6, 1.7], [1, 1, 2, 3], [1, 1, 0.5, 0.45]):
        check_ort("Resize", [X, Const(np.array(scales, np.float32))], {"mode": mode}, opset=10)


def test_upsample_9_nearest():
    check_op("Upsample", [X, Const(np.array([1, 1, 2, 3], np.float32))], {"mode": "nearest"}, opset=9)
    check_op("Upsample", [X, Const(np.array([1, 2, 1, 2], np.float32))], {"mode": "nearest"}, opset=9)


@pytest.mark.parametrize("mode", ["nearest", "linear"])
def test_upsample_fractional(mode):
    check_ort("Upsample", [X, Const(np.array([1, 1, 1.5, 2.5], np.float32))], {"mode": mode}, opset=9)
    check_ort("Upsample", [X], {"mode": mode, "scales": [1.0, 1.0, 1.7, 2.0]}, opset=7)


def test_resize_scales_known_only_at_run_time():
    # Scales fed as data: a sync point plans the Resize once their values are known.
    check_op("Resize", [X, None, np.array([1, 1, 2, 2], np.float32)], {"mode": "nearest"}, opset=19)


def test_resize_bad_inputs():
    both = [X, None, Const(np.array([1, 1, 2, 2], np.float32)), Const(np.array([2, 3, 8, 10], np.int64))]
    with pytest.raises(wgnn.ShapeError, match="not both"):
        run_wgnn(make_model("Resize", both, {"mode": "nearest"}, opset=19), {"in0": X})
    wrong = [X, None, Const(np.array([2, 2], np.float32)), None]
    with pytest.raises(wgnn.ShapeError, match="one per resized axis"):
        run_wgnn(make_model("Resize", wrong, {"mode": "nearest"}, opset=19), {"in0": X})
    antialias = [X, None, Const(np.array([1, 1, 0.5, 0.5], np.float32)), None]
    with pytest.raises(wgnn.ShapeError, match="antialias"):
        run_wgnn(make_model("Resize", antialias, {"mode": "nearest", "antialias": 1}, opset=19), {"in0": X})


def test_resize_output_dtype_and_empty_batch():
    x = np.zeros((0, 3, 4, 5), np.float32)
    out = check_op("Resize", [x, None, Const(np.array([1, 1, 2, 0.5], np.float32)), None], {"mode": "linear"},
                   opset=19)[0]
    assert out.shape == (0, 3, 8, 2)
    assert out.dtype == np.float32


def test_resize_sizes_computed_at_resize():
    # sizes = Shape(x) * [1, 1, 2, 3]: known once the input shape is, and recomputed per shape.
    x_info = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, "H", "W"])
    nodes = [helper.make_node("Shape", ["x"], ["shape"]), helper.make_node("Mul", ["shape", "k"], ["sizes"]),
             helper.make_node("Resize", ["x", "", "", "sizes"], ["y"], mode="linear")]
    y_info = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    graph = helper.make_graph(nodes, "dynamic_resize", [x_info], [y_info],
                              [numpy_helper.from_array(np.array([1, 1, 2, 3], np.int64), "k")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)])
    session = wgnn.InferenceSession(wgnn.convert(model), providers=["numpy"])
    reference = ReferenceEvaluator(model)
    for shape in [(1, 3, 4, 5), (2, 3, 3, 2)]:
        x = rng.standard_normal(shape).astype(np.float32)
        assert_close(session.run(None, {"x": x})[0], reference.run(None, {"x": x})[0], what=f"Resize {shape}", **TOL)


# ---------------------------------------------------------------------------- numpy's compiled loop
needs_numba = pytest.mark.skipif(compiled._numba() is None, reason="numba is not installed (pip install wgnn[cpu])")
# (input shape, "scales" / "sizes", values, attributes): W then H or H then W first (the plan's
# order), 2 to 4 taps, down and up, rank 5, single rows and columns, channels not a multiple of 4
COMPILED_CASES = {
    "linear-2x-half-pixel": ((1, 8, 16, 16), "scales", [1, 1, 2, 2], {"mode": "linear"}),
    "cubic-up-height-first": ((2, 3, 4, 5), "scales", [1, 1, 1.7, 2.5], {"mode": "cubic"}),
    "linear-antialias-down": ((2, 3, 9, 11), "sizes", [2, 3, 4, 5], {"mode": "linear", "antialias": 1}),
    "align-corners-mixed": ((1, 5, 5, 6), "sizes", [1, 5, 11, 3],
                            {"mode": "linear", "coordinate_transformation_mode": "align_corners"}),
    "cubic-exclude-outside-5d": ((2, 2, 3, 4, 5), "scales", [1, 1, 1, 0.6, 1.7],
                                 {"mode": "cubic", "exclude_outside": 1, "cubic_coeff_a": -0.5}),
    "one-row-to-three": ((1, 3, 1, 7), "sizes", [1, 3, 3, 1], {"mode": "linear"}),
}


def resize_execution(session):
    (ex,) = [ex for segment in session.session.segments for step, ex in segment.steps if step.op.op_type == "Resize"]
    return ex


def numpy_sessions(model, monkeypatch):
    """The numpy backend's session of model without compiled loops, then one with (numba started
    first, as another step of a model would)."""
    monkeypatch.setenv(compiled.COMPILED_ENV, "0")
    plain = wgnn.InferenceSession(model, providers=["numpy"])
    monkeypatch.delenv(compiled.COMPILED_ENV)
    compiled.loops()
    return plain, wgnn.InferenceSession(model, providers=["numpy"])


@needs_numba
@pytest.mark.parametrize("case", COMPILED_CASES.values(), ids=COMPILED_CASES.keys())
def test_compiled_loop_gives_the_numpy_passes_values(case, monkeypatch):
    """A small float32 resize of the last two axes runs as one compiled loop once numba runs: the
    numpy passes' floats bit for bit (the same products summed in the same order), and so within
    the reference's tolerance."""
    shape, kind, values, attrs = case
    x = rng.standard_normal(shape).astype(np.float32)
    x[0, 0, 0, 0] = np.inf  # an infinite input spreads as the passes spread it (NaN where weighted by 0)
    model = wgnn.convert(make_model("Resize", resize_inputs(x, kind, values), attrs, opset=19))
    plain, fast = numpy_sessions(model, monkeypatch)
    assert resize_execution(plain).variant() == "numpy"
    assert resize_execution(fast).variant() == "compiled loop (resize_planes)"
    want, got = plain.run(None, {"in0": x})[0], fast.run(None, {"in0": x})[0]
    np.testing.assert_array_equal(got, want)
    x[0, 0, 0, 0] = 1.0
    reference = ReferenceEvaluator(make_model("Resize", resize_inputs(x, kind, values), attrs, opset=19))
    assert_close(fast.run(None, {"in0": x})[0], reference.run(None, {"in0": x})[0], what="compiled Resize",
                 **CUBIC_TOL)


@needs_numba
@pytest.mark.parametrize("case", ["large", "nearest", "crop", "channels", "float64"])
def test_other_resizes_keep_the_numpy_passes(case, monkeypatch):
    """Outputs past COMPILED_RESIZE_SIZE (the passes' large numpy calls win there), nearest
    copies, tf_crop_and_resize's extrapolation, a resampled channel axis and float64 stay numpy."""
    side = int(np.sqrt(numpy_resize.COMPILED_RESIZE_SIZE / 2)) + 1
    x = rng.standard_normal({"large": (1, 2, side, side)}.get(case, (1, 3, 4, 5)))
    x = x.astype(np.float64 if case == "float64" else np.float32)
    scales, attrs, roi = [1, 1, 2, 2], {"mode": "linear"}, None
    if case == "nearest":
        attrs = {"mode": "nearest"}
    elif case == "crop":
        attrs, roi = {"mode": "linear", "coordinate_transformation_mode": "tf_crop_and_resize"}, ROI
    elif case == "channels":
        scales = [1, 2, 2, 2]
    onnx_model = make_model("Resize", resize_inputs(x, "scales", scales, roi), attrs, opset=19)
    plain, session = numpy_sessions(wgnn.convert(onnx_model), monkeypatch)
    assert resize_execution(session).variant() == "numpy"
    np.testing.assert_array_equal(session.run(None, {"in0": x})[0], plain.run(None, {"in0": x})[0])
