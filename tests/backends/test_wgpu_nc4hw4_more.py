"""NC4HW4 Resize, ConvTranspose and Raster (backends/wgpu/resize.py, conv.py, raster.py): each kernel
against the numpy backend on odd shapes, on every adapter and both storages (and fp16 storage),
the steps really running NC4HW4 (a 1x1 MaxPool, which prefers NC4HW4, feeds them), the linear
paths where the NC4HW4 one does not apply, zoo:unet without conversions, and resizes that compile
nothing."""
import numpy as np
import onnxruntime as ort
import pytest
from helpers import gpu_adapters
from onnx import TensorProto, helper, numpy_helper
from wgnn.backends.wgpu.loader import pipeline_cache
from wgnn.models.zoo import build, example_inputs

import wgnn

ADAPTERS = gpu_adapters()
pytestmark = pytest.mark.skipif(not ADAPTERS, reason="no GPU adapter (install mesa-vulkan-drivers)")
TARGETS = [(a["index"], storage) for a in ADAPTERS for storage in ("buffer", "texture")]
TARGET_IDS = [f"wgpu{a}-{s}" for a, s in TARGETS]
# fp16 storage: textures everywhere, f16 buffers where the adapter has shader-f16.
HALF_TARGETS = [(a["index"], storage) for a in ADAPTERS for storage in ("texture", "buffer")
                if storage == "texture" or "shader-f16" in a["features"]]
HALF_IDS = [f"wgpu{a}-{s}-fp16" for a, s in HALF_TARGETS]
rng = np.random.default_rng(11)


def r(*shape, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def value(name: str, shape=None):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


def graph_model(nodes, inputs: dict[str, tuple], initializers: dict[str, np.ndarray], outputs=("y",), opset=19):
    """A model of `nodes`; inputs name -> shape (entries may be symbolic)."""
    inits = [numpy_helper.from_array(v, k) for k, v in initializers.items()]
    graph = helper.make_graph(nodes, "t", [value(k, s) for k, s in inputs.items()], [value(o) for o in outputs],
                              inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def nc4hw4(name: str, out: str):
    """A 1x1 MaxPool: an identity that prefers NC4HW4, so the op after it reads NC4HW4."""
    return helper.make_node("MaxPool", [name], [out], kernel_shape=[1, 1])


def layouts(sess) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for segment in sess.session.segments:
        for step, execution in segment.steps:
            if step.op.op_type != "Convert":
                found.setdefault(step.op.op_type, []).append(execution.layout)
    return found


def kernels(sess, op_type: str) -> list[str]:
    return [d.kernel.path for segment in sess.session.segments for step, ex in segment.steps
            if step.op.op_type == op_type for d in ex.dispatches]


def check(model, feeds, adapter, storage, expect: dict[str, str], *, precision="fp32", rtol=1e-4, atol=1e-5):
    """GPU only (a refusal raises instead of falling back) against the numpy backend; op layouts."""
    want = wgnn.InferenceSession(model, providers=["numpy"]).run(None, feeds)
    config = wgnn.Config(providers=("wgpu",), adapter=adapter, storage=storage, precision=precision)
    sess = wgnn.InferenceSession(model, config=config)
    got = sess.run(None, feeds)
    for g, w in zip(got, want, strict=True):
        assert g.shape == w.shape and g.dtype == w.dtype
        np.testing.assert_allclose(g, w, rtol=rtol, atol=atol)
    found = layouts(sess)
    for op, layout in expect.items():
        assert found[op] == [layout] * len(found[op]), f"{op} ran {found[op]}, expected {layout}"
    return sess


# --------------------------------------------------------------------------------------- Resize
def resize_model(shape, attrs, *, scales=None, sizes=None, roi=None, pooled=True):
    """[MaxPool 1x1 ->] Resize; scales / sizes / roi as initializers."""
    inits, names = {}, ["", "", ""]
    for i, (key, v, dtype) in enumerate((("roi", roi, np.float32), ("scales", scales, np.float32),
                                         ("sizes", sizes, np.int64))):
        if v is not None:
            inits[key] = np.array(v, dtype)
            names[i] = key
    source = "p" if pooled else "x"
    nodes = ([nc4hw4("x", "p")] if pooled else []) + [helper.make_node("Resize", [source, *names], ["y"], **attrs)]
    return graph_model(nodes, {"x": shape}, inits)


RESIZE_CASES = {
    # name: (input shape, attrs, scales, sizes, roi)
    "linear_half_pixel_x2_c5_batch2": ((2, 5, 7, 9), {"mode": "linear"}, [1, 1, 2, 2], None, None),
    "linear_align_corners_x1.5_c13": ((1, 13, 5, 7), {"mode": "linear", "coordinate_transformation_mode":
                                                       "align_corners"}, [1, 1, 1.5, 1.5], None, None),
    "linear_asymmetric_sizes_c3": ((1, 3, 6, 5), {"mode": "linear", "coordinate_transformation_mode": "asymmetric"},
                                   None, [1, 3, 11, 4], None),
    "linear_down_pytorch_half_pixel": ((2, 5, 9, 11), {"mode": "linear", "coordinate_transformation_mode":
                                                       "pytorch_half_pixel"}, [1, 1, 0.6, 0.45], None, None),
    "linear_h_only": ((1, 5, 4, 7), {"mode": "linear"}, [1, 1, 2.5, 1], None, None),
    "linear_antialias_down": ((1, 6, 13, 12), {"mode": "linear", "antialias": 1}, [1, 1, 0.4, 0.7], None, None),
    "nearest_asymmetric_floor_x2": ((2, 5, 7, 9), {"mode": "nearest", "coordinate_transformation_mode": "asymmetric",
                                                   "nearest_mode": "floor"}, [1, 1, 2, 2], None, None),
    "nearest_half_pixel_round_prefer_floor_x1.5": ((1, 13, 5, 7), {"mode": "nearest"}, [1, 1, 1.5, 1.5], None, None),
    "nearest_align_corners_round_prefer_ceil": ((1, 3, 7, 6), {"mode": "nearest", "nearest_mode": "round_prefer_ceil",
                                                               "coordinate_transformation_mode": "align_corners"},
                                                None, [1, 3, 11, 13], None),
    "nearest_ceil_down_exclude_outside": ((2, 5, 9, 8), {"mode": "nearest", "nearest_mode": "ceil",
                                                         "exclude_outside": 1}, [1, 1, 0.6, 0.5], None, None),
    # ceil rounds the last positions past the edge: exclude_outside zeroes them.
    "nearest_asymmetric_ceil_exclude_outside_x2.5": ((1, 5, 4, 3), {"mode": "nearest", "nearest_mode": "ceil",
                                                                   "coordinate_transformation_mode": "asymmetric",
                                                                   "exclude_outside": 1}, [1, 1, 2.5, 2.5], None,
                                                     None),
    "cubic_half_pixel_x1.5": ((1, 5, 6, 7), {"mode": "cubic"}, [1, 1, 1.5, 1.5], None, None),
    "cubic_align_corners_exclude_outside": ((1, 3, 5, 6), {"mode": "cubic", "exclude_outside": 1,
                                                           "coordinate_transformation_mode": "align_corners"},
                                            [1, 1, 2, 2], None, None),
    "crop_and_resize_extrapolation": ((2, 5, 6, 7), {"mode": "linear", "extrapolation_value": -2.5,
                                                     "coordinate_transformation_mode": "tf_crop_and_resize"},
                                      None, [2, 5, 9, 4], [0, 0, -0.4, 0.3, 1, 1, 1.2, 0.6]),
    "crop_and_resize_nearest_w_first": ((1, 5, 6, 7), {"mode": "nearest", "extrapolation_value": 1.5,
                                                       "exclude_outside": 1, "nearest_mode": "floor",
                                                       "coordinate_transformation_mode": "tf_crop_and_resize"},
                                        None, [1, 5, 9, 3], [0, 0, -0.4, 0.3, 1, 1, 1.2, 0.6]),
}


@pytest.mark.parametrize(("adapter", "storage"), TARGETS, ids=TARGET_IDS)
@pytest.mark.parametrize("case", list(RESIZE_CASES))
def test_resize_runs_nc4hw4(case, adapter, storage):
    shape, attrs, scales, sizes, roi = RESIZE_CASES[case]
    model = resize_model(shape, attrs, scales=scales, sizes=sizes, roi=roi)
    tolerance = {"atol": 1e-4} if attrs["mode"] == "cubic" or attrs.get("antialias") else {}
    sess = check(model, {"x": r(*shape)}, adapter, storage, {"Pool": "nc4hw4", "Resize": "nc4hw4"}, **tolerance)
    assert kernels(sess, "Resize") == ["resize/resize_nc4hw4.wgsl"]
    assert sess.report()["conversions"] == 1  # x in; y is downloaded from NC4HW4


@pytest.mark.parametrize("adapter", [a["index"] for a in ADAPTERS])
@pytest.mark.parametrize("case", ["linear_half_pixel_x2_c5_batch2", "nearest_align_corners_round_prefer_ceil",
                                  "crop_and_resize_extrapolation", "cubic_half_pixel_x1.5"])
def test_resize_of_linear_input_runs_the_spatial_kernel_linear(case, adapter):
    """A linear input stays linear (no conversion), through the same kernel's linear accessors."""
    shape, attrs, scales, sizes, roi = RESIZE_CASES[case]
    model = resize_model(shape, attrs, scales=scales, sizes=sizes, roi=roi, pooled=False)
    tolerance = {"atol": 1e-4} if attrs["mode"] == "cubic" else {}
    sess = check(model, {"x": r(*shape)}, adapter, "buffer", {"Resize": "linear"}, **tolerance)
    assert kernels(sess, "Resize") == ["resize/resize_nc4hw4.wgsl"]
    assert sess.report()["conversions"] == 0


@pytest.mark.parametrize("adapter", [a["index"] for a in ADAPTERS])
def test_resize_of_channels_or_other_ranks_keeps_the_general_kernel(adapter):
    x = r(2, 6, 5, 7)
    model = resize_model(x.shape, {"mode": "linear"}, scales=[1, 0.5, 2, 1])
    sess = check(model, {"x": x}, adapter, "buffer", {"Resize": "linear"})
    assert kernels(sess, "Resize") == ["resize/resize.wgsl"]
    model = graph_model([helper.make_node("Resize", ["x", "", "scales"], ["y"], mode="linear")], {"x": (2, 5, 7)},
                        {"scales": np.array([1, 1, 2], np.float32)})
    sess = check(model, {"x": r(2, 5, 7)}, adapter, "buffer", {"Resize": "linear"})
    assert kernels(sess, "Resize") == ["resize/resize.wgsl"]


# -------------------------------------------------------------------------------- ConvTranspose
def transpose_model(x_shape, w, bias=None, activation="", **attrs):
    """MaxPool 1x1 -> ConvTranspose (weights and bias as initializers), converted to wgnn's IR
    (optionally with a fused activation set on the IR node)."""
    inits = {"w": w} | ({"b": bias} if bias is not None else {})
    node = helper.make_node("ConvTranspose", ["p", "w"] + (["b"] if bias is not None else []), ["y"], **attrs)
    model = wgnn.convert(graph_model([nc4hw4("x", "p"), node], {"x": x_shape}, inits, opset=17))
    if activation:
        (ir,) = [n for n in model.graph.nodes if n.op_type == "ConvTranspose"]
        ir.attrs.update(activation=activation, activation_alpha=0.2, activation_beta=0.0)
    return model


TRANSPOSE_CASES = {
    # name: (x shape, w shape, bias, attrs)
    "c5to3_stride2_pads_output_padding": ((2, 5, 7, 6), (5, 3, 3, 3), True,
                                          {"strides": [2, 2], "pads": [1, 0, 0, 1], "output_padding": [1, 1]}),
    "c3to13_stride2_k2": ((1, 3, 5, 7), (3, 13, 2, 2), True, {"strides": [2, 2]}),
    "c13to5_stride_2x3_dilation": ((1, 13, 4, 5), (13, 5, 3, 2), False,
                                   {"strides": [2, 3], "dilations": [2, 1], "pads": [2, 1, 1, 0]}),
    "c5to5_stride1": ((2, 5, 5, 9), (5, 5, 3, 3), True, {"pads": [1, 1, 1, 1]}),
    "groups2_c8to8": ((1, 8, 5, 6), (8, 4, 3, 3), True, {"group": 2, "strides": [2, 2], "pads": [1, 1, 1, 1]}),
    "same_upper_stride2": ((1, 5, 4, 5), (5, 6, 3, 3), True, {"auto_pad": "SAME_UPPER", "strides": [2, 2]}),
    "output_shape": ((1, 3, 4, 4), (3, 5, 3, 3), False, {"strides": [2, 2], "output_shape": [10, 9]}),
    # 2x2 kernels at strides 2: conv_transpose2x2_nc4hw4.wgsl where every output pixel takes one tap
    "up_c8to6_batch2_no_bias": ((2, 8, 3, 9), (8, 6, 2, 2), False, {"strides": [2, 2]}),
    "up_c4to4_width4": ((1, 4, 2, 4), (4, 4, 2, 2), True, {"strides": [2, 2]}),
    "k2_stride2_output_padding": ((1, 5, 3, 4), (5, 3, 2, 2), True, {"strides": [2, 2], "output_padding": [1, 0]}),
    "k2_stride2_pads": ((1, 5, 3, 4), (5, 3, 2, 2), True, {"strides": [2, 2], "pads": [1, 0, 0, 1]}),
    "k2_stride2_groups2": ((1, 8, 3, 4), (8, 4, 2, 2), True, {"group": 2, "strides": [2, 2]}),
}
UP_CONVOLUTIONS = {"c3to13_stride2_k2", "up_c8to6_batch2_no_bias", "up_c4to4_width4"}


@pytest.mark.parametrize(("adapter", "storage"), TARGETS, ids=TARGET_IDS)
@pytest.mark.parametrize("case", list(TRANSPOSE_CASES))
def test_conv_transpose_runs_nc4hw4(case, adapter, storage):
    x_shape, w_shape, has_bias, attrs = TRANSPOSE_CASES[case]
    model = transpose_model(x_shape, r(*w_shape, scale=0.5), r(w_shape[1] * attrs.get("group", 1)) if has_bias
                            else None, **attrs)
    sess = check(model, {"x": r(*x_shape)}, adapter, storage, {"ConvTranspose": "nc4hw4"}, atol=1e-4)
    expected = "conv_transpose2x2_nc4hw4" if case in UP_CONVOLUTIONS else "conv_transpose_nc4hw4"
    assert kernels(sess, "ConvTranspose") == [f"conv/{expected}.wgsl"]
    assert sess.report()["conversions"] == 1


@pytest.mark.parametrize(("adapter", "storage"), TARGETS, ids=TARGET_IDS)
@pytest.mark.parametrize("activation", ["relu", "leaky_relu", "sigmoid"])
@pytest.mark.parametrize("kernel", [3, 2])  # 2: the 2x2 up-convolution kernel
def test_conv_transpose_fused_activation_keeps_padding_lanes_zero(activation, kernel, adapter, storage):
    model = transpose_model((1, 5, 4, 5), r(5, 6, kernel, kernel, scale=0.5), r(6), activation, strides=[2, 2])
    sess = check(model, {"x": r(1, 5, 4, 5)}, adapter, storage, {"ConvTranspose": "nc4hw4"}, atol=1e-4)
    backend = sess.session.backends[0]
    assert backend.placement("y").layout == "nc4hw4"


@pytest.mark.parametrize("adapter", [a["index"] for a in ADAPTERS])
def test_conv_transpose_stays_linear_for_linear_input_and_partial_groups(adapter):
    # A linear input: the kernel follows it (no conversion either side).
    model = wgnn.convert(graph_model([helper.make_node("ConvTranspose", ["x", "w"], ["y"], strides=[2, 2])],
                                     {"x": (1, 5, 4, 5)}, {"w": r(5, 3, 3, 3)}, opset=17))
    sess = check(model, {"x": r(1, 5, 4, 5)}, adapter, "buffer", {"ConvTranspose": "linear"}, atol=1e-4)
    assert sess.report()["conversions"] == 0
    # Groups of 3 channels cannot be whole slices: linear even after an NC4HW4 producer.
    model = transpose_model((1, 6, 4, 5), r(6, 2, 3, 3), group=2, strides=[2, 2])
    sess = check(model, {"x": r(1, 6, 4, 5)}, adapter, "buffer", {"ConvTranspose": "linear"}, atol=1e-4)
    assert sess.report()["conversions"] == 2


# --------------------------------------------------------------------------------------- Raster
def concat_model(shapes, axis, *, pooled=None):
    """Concat of inputs x0, x1, ...; those in `pooled` (default all) pass a 1x1 MaxPool first."""
    pooled = range(len(shapes)) if pooled is None else pooled
    nodes = [nc4hw4(f"x{i}", f"p{i}") for i in pooled]
    names = [f"p{i}" if i in pooled else f"x{i}" for i in range(len(shapes))]
    nodes.append(helper.make_node("Concat", names, ["y"], axis=axis))
    return graph_model(nodes, {f"x{i}": s for i, s in enumerate(shapes)}, {})


CONCAT_CASES = {
    "channels_3_5_2_batch2": ([(2, 3, 5, 7), (2, 5, 5, 7), (2, 2, 5, 7)], 1),
    "channels_4_4": ([(1, 4, 3, 5), (1, 4, 3, 5)], 1),
    "channels_13_1_6": ([(1, 13, 3, 4), (1, 1, 3, 4), (1, 6, 3, 4)], 1),
    "height": ([(2, 5, 3, 7), (2, 5, 4, 7)], 2),
    "width": ([(1, 5, 3, 2), (1, 5, 3, 9), (1, 5, 3, 1)], 3),
    "batch": ([(1, 3, 4, 5), (2, 3, 4, 5)], 0),
}


@pytest.mark.parametrize(("adapter", "storage"), TARGETS, ids=TARGET_IDS)
@pytest.mark.parametrize("case", list(CONCAT_CASES))
def test_concat_runs_nc4hw4(case, adapter, storage):
    shapes, axis = CONCAT_CASES[case]
    feeds = {f"x{i}": r(*s) for i, s in enumerate(shapes)}
    sess = check(concat_model(shapes, axis), feeds, adapter, storage, {"Raster": "nc4hw4"})
    assert kernels(sess, "Raster") == ["raster/boxes_nc4hw4.wgsl"]
    assert sess.report()["conversions"] == len(shapes)  # the inputs into the MaxPools


@pytest.mark.parametrize(("adapter", "storage"), TARGETS, ids=TARGET_IDS)
def test_concat_of_one_tensor_twice_and_a_linear_input(adapter, storage):
    model = graph_model([nc4hw4("a", "p"), helper.make_node("Concat", ["p", "b", "p"], ["y"], axis=1)],
                        {"a": (2, 3, 4, 5), "b": (2, 2, 4, 5)}, {})
    sess = check(model, {"a": r(2, 3, 4, 5), "b": r(2, 2, 4, 5)}, adapter, storage, {"Raster": "nc4hw4"})
    assert sess.report()["conversions"] == 2  # a into the MaxPool, b into the Concat


def pad_model(shape, pads, value=None, mode="constant"):
    inits = {"pads": np.array(pads, np.int64)}
    names = ["p", "pads"]
    if value is not None:
        inits["value"] = np.array(value, np.float32)
        names.append("value")
    return graph_model([nc4hw4("x", "p"), helper.make_node("Pad", names, ["y"], mode=mode)], {"x": shape}, inits)


PAD_CASES = {
    "asymmetric_hw": ((2, 5, 7, 6), [0, 0, 1, 2, 0, 0, 3, 0], None),
    "fill_value_c13": ((1, 13, 3, 5), [0, 0, 2, 1, 0, 0, 0, 3], 1.5),
    "channels_too": ((1, 3, 4, 5), [0, 1, 1, 0, 0, 2, 0, 1], -0.5),
    "crop_and_pad": ((2, 5, 6, 7), [0, 0, -1, 2, 0, 0, 1, -3], 0.25),
}


@pytest.mark.parametrize(("adapter", "storage"), TARGETS, ids=TARGET_IDS)
@pytest.mark.parametrize("case", list(PAD_CASES))
def test_pad_runs_nc4hw4(case, adapter, storage):
    shape, pads, fill = PAD_CASES[case]
    sess = check(pad_model(shape, pads, fill), {"x": r(*shape)}, adapter, storage, {"Raster": "nc4hw4"})
    assert kernels(sess, "Raster") == ["raster/boxes_nc4hw4.wgsl"]
    assert sess.report()["conversions"] == 1


@pytest.mark.parametrize(("adapter", "storage"), TARGETS, ids=TARGET_IDS)
def test_slice_runs_nc4hw4(adapter, storage):
    inits = {"starts": np.array([1, 2, 1], np.int64), "ends": np.array([6, 5, 100], np.int64),
             "axes": np.array([1, 2, 3], np.int64)}
    model = graph_model([nc4hw4("x", "p"), helper.make_node("Slice", ["p", "starts", "ends", "axes"], ["y"])],
                        {"x": (2, 7, 6, 5)}, inits)
    check(model, {"x": r(2, 7, 6, 5)}, adapter, storage, {"Raster": "nc4hw4"})


@pytest.mark.parametrize(("adapter", "storage"), TARGETS, ids=TARGET_IDS)
def test_other_movement_stays_linear(adapter, storage):
    """Reflect pads (reversed regions) and transposes are no translated boxes: linear raster."""
    sess = check(pad_model((1, 5, 4, 6), [0, 0, 1, 2, 0, 0, 2, 1], mode="reflect"), {"x": r(1, 5, 4, 6)}, adapter,
                 storage, {"Raster": "linear"})
    assert "raster/boxes_nc4hw4.wgsl" not in kernels(sess, "Raster")
    model = graph_model([nc4hw4("x", "p"), helper.make_node("Transpose", ["p"], ["y"], perm=[0, 1, 3, 2])],
                        {"x": (1, 5, 4, 6)}, {})
    check(model, {"x": r(1, 5, 4, 6)}, adapter, storage, {"Raster": "linear"})


# ----------------------------------------------------------------------------------- fp16, resize
def chain_model():
    """Every new NC4HW4 kernel in one graph with symbolic batch and spatial dims: x [N, 5, H, W] ->
    MaxPool 1x1 -> Pad (H + 2, W + 3) -> ConvTranspose (3 channels, 2H + 3 x 2W + 4) -> Slice
    (2H x 2W) -> Concat with the pooled input resized 2x (nearest) along channels (3 + 5 + 3) ->
    Resize 1.5x (linear, align_corners)."""
    nodes = [nc4hw4("x", "p"),
             helper.make_node("Pad", ["p", "pads"], ["padded"], mode="constant"),
             helper.make_node("ConvTranspose", ["padded", "w", "b"], ["t"], strides=[2, 2], pads=[2, 1, 1, 2],
                              output_padding=[1, 0]),
             helper.make_node("Slice", ["t", "starts", "ends", "axes"], ["ts"]),
             helper.make_node("Resize", ["p", "", "double"], ["q"], mode="nearest"),
             helper.make_node("Concat", ["ts", "q", "ts"], ["c"], axis=1),
             helper.make_node("Resize", ["c", "", "scales"], ["y"], mode="linear",
                              coordinate_transformation_mode="align_corners")]
    inits = {"pads": np.array([0, 0, 1, 2, 0, 0, 1, 1], np.int64), "w": r(5, 3, 3, 3, scale=0.5), "b": r(3),
             "starts": np.array([1, 2], np.int64), "ends": np.array([-2, -2], np.int64),
             "axes": np.array([2, 3], np.int64), "double": np.array([1, 1, 2, 2], np.float32),
             "scales": np.array([1, 1, 1.5, 1.5], np.float32)}
    return graph_model(nodes, {"x": ("N", 5, "H", "W")}, inits, opset=19)


@pytest.mark.parametrize(("adapter", "storage"), HALF_TARGETS, ids=HALF_IDS)
def test_fp16_storage(adapter, storage):
    """All new kernels read and write 16-bit feature maps through the same accessors."""
    check(chain_model(), {"x": r(2, 5, 3, 5)}, adapter, storage,
          {"Resize": "nc4hw4", "ConvTranspose": "nc4hw4", "Raster": "nc4hw4"}, precision="fp16", rtol=1e-2, atol=1e-2)


@pytest.mark.parametrize("adapter", [a["index"] for a in ADAPTERS])
def test_a_resize_compiles_nothing(adapter):
    model = chain_model()
    reference = wgnn.InferenceSession(model, providers=["numpy"])
    sess = wgnn.InferenceSession(model, config=wgnn.Config(providers=("wgpu",), adapter=adapter))
    cache = pipeline_cache(sess.session.backends[0].context)
    compiled = None
    for batch, h, w in ((1, 3, 5), (2, 4, 3), (1, 6, 7)):
        feeds = {"x": r(batch, 5, h, w)}
        np.testing.assert_allclose(sess.run(None, feeds)[0], reference.run(None, feeds)[0], rtol=1e-4, atol=1e-4)
        found = layouts(sess)
        assert set(found["Resize"]) == set(found["ConvTranspose"]) == set(found["Raster"]) == {"nc4hw4"}
        assert sess.report()["conversions"] == 1
        if compiled is None:
            compiled = cache.compiled
        assert cache.compiled == compiled, "a resize compiled pipelines"


# ------------------------------------------------------------------------------------------ zoo
@pytest.mark.parametrize("adapter", [a["index"] for a in ADAPTERS])
@pytest.mark.parametrize("options", [{}, {"resize_mode": "nearest"}], ids=["linear", "nearest"])
def test_unet_keeps_feature_maps_nc4hw4(options, adapter):
    model = build("unet", **options)
    reference = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    sess = wgnn.InferenceSession(model, config=wgnn.Config(providers=("wgpu",), adapter=adapter))
    for batch in (1, 2):
        feeds = example_inputs(model, batch, seed=batch)
        for want, have in zip(reference.run(None, feeds), sess.run(None, feeds), strict=True):
            error = float(np.abs(have.astype(np.float64) - want).max() / np.abs(want).max())
            assert error <= 1e-3, f"unet batch {batch}: max rel error {error:.3g}"
        assert sess.report()["conversions"] == 0  # the first conv reads the image as it is
        assert {layout for found in layouts(sess).values() for layout in found} == {"nc4hw4"}
