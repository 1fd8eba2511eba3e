"""The numpy backend's compiled loops (backends/numpy/compiled.py) against onnxruntime, float64
arithmetic and the numpy code they stand in for (WGNN_NUMPY_COMPILED=0). Depthwise convs on the
edges: channels not a multiple of 4, batch > 1, channel multipliers, strides, dilations, asymmetric
and large padding, 1-D convs, every fused activation, a residual, float64, NaN, through every loop
that takes them. Direct float32 convs on the same kinds of edges through both loops, grouped,
with outputs not a multiple of a block's channels, planes under conv_direct's 4 pixels, rows not a
multiple of conv_grid's step. The Relu / Clip epilogue and float32 GELU bit for bit against numpy,
LayerNorm on rows far from zero. numba is a test dependency; where it is missing, only the numpy
plans' checks run."""
import math

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator
from wgnn.backends.numpy import compiled
from wgnn.backends.numpy import conv as numpy_conv

import wgnn

rng = np.random.default_rng(7)
numba_missing = pytest.mark.skipif(compiled._numba() is None, reason="numba is not installed")


def depthwise_model(x_shape, w_shape, attrs, *, bias=True, activation=None, residual=None, dtype=np.float32,
                    group=None, weights_as_inputs=False):
    """Conv (group = channels unless given) [+ residual Add of that shape] [+ activation]: what
    the converter fuses into one Conv step with its residual input and activation attributes.
    weights_as_inputs: the weights and bias are graph inputs "w" and "b", not initializers."""
    elem = TensorProto.DOUBLE if dtype == np.float64 else TensorProto.FLOAT
    w = rng.standard_normal(w_shape).astype(dtype)
    inits = [numpy_helper.from_array(w, "w")]
    inputs = ["x", "w"]
    if bias:
        inits.append(numpy_helper.from_array(rng.standard_normal(w_shape[0]).astype(dtype), "b"))
        inputs.append("b")
    nodes = [helper.make_node("Conv", inputs, ["conv"], group=x_shape[1] if group is None else group, **attrs)]
    last = "conv"
    graph_inputs = [helper.make_tensor_value_info("x", elem, list(x_shape))]
    if weights_as_inputs:
        graph_inputs += [helper.make_tensor_value_info(init.name, elem, list(init.dims)) for init in inits]
        inits = []
    if residual:
        nodes.append(helper.make_node("Add", ["conv", "r"], ["sum"]))
        last = "sum"
        graph_inputs.append(helper.make_tensor_value_info("r", elem, residual))
    if activation == "Clip":
        inits += [numpy_helper.from_array(np.array(bound, dtype), name) for name, bound in (("lo", -0.5), ("hi", 1.5))]
        nodes.append(helper.make_node("Clip", [last, "lo", "hi"], ["y"]))
    elif activation is not None:
        nodes.append(helper.make_node(activation, [last], ["y"]))
    else:
        nodes[-1].output[0] = "y"
    graph = helper.make_graph(nodes, "depthwise", graph_inputs, [helper.make_tensor_value_info("y", elem, None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def run_numpy(model, feeds, monkeypatch, compiled_loop: bool):
    monkeypatch.setenv(compiled.COMPILED_ENV, "1" if compiled_loop else "0")
    session = wgnn.InferenceSession(model.SerializeToString(), providers=["numpy"])
    result = session.run(None, feeds)[0]
    variants = [ex.variant() for segment in session.session.segments for step, ex in segment.steps
                if step.op.op_type == "Conv"]
    return result, variants


def conv_out_size(x_shape, w_shape, attrs, axis: int) -> int:
    """A Conv's output size along spatial axis (-1: the last)."""
    rank = len(x_shape) - 2
    axis %= rank
    pads, strides = attrs.get("pads", [0] * 2 * rank), attrs.get("strides", [1] * rank)
    dilation = attrs.get("dilations", [1] * rank)[axis]
    size = x_shape[2 + axis] + pads[axis] + pads[rank + axis] - dilation * (w_shape[2 + axis] - 1) - 1
    return size // strides[axis] + 1


CASES = [  # x shape, w shape, Conv attributes
    ((2, 5, 7, 6), (5, 1, 3, 3), {"pads": [1, 1, 1, 1]}),
    ((1, 3, 9, 8), (6, 1, 3, 3), {"strides": [2, 2], "pads": [0, 1, 1, 0]}),  # multiplier 2
    ((1, 7, 10, 11), (7, 1, 5, 3), {"strides": [2, 1], "dilations": [2, 1], "pads": [2, 1, 1, 0]}),
    ((3, 2, 5, 4), (2, 1, 3, 3), {"pads": [3, 3, 3, 3]}),  # padding past the kernel: zero rows
    ((1, 6, 13, 12), (6, 1, 3, 3), {"strides": [3, 2], "dilations": [2, 3], "pads": [2, 3, 1, 2]}),  # 3x3, dilated
    ((2, 4, 7, 9), (4, 1, 3, 3), {"strides": [2, 2], "pads": [1, 0, 0, 1]}),  # stride 2, even left pad, odd width
    ((1, 9, 8, 8), (9, 1, 1, 1), {}),
    ((2, 4, 13), (8, 1, 3), {"strides": [2], "pads": [2, 1], "dilations": [2]}),  # 1-D, multiplier 2
    ((1, 144, 8, 8), (144, 1, 3, 3), {"pads": [1, 1, 1, 1]}),  # a MobileNetV2 stage
    ((2, 5, 9, 37), (5, 1, 3, 3), {"pads": [1, 1, 1, 1]}),  # 3x3 rows of 37: the last steps move back
    ((1, 6, 13, 40), (12, 1, 3, 3), {"strides": [2, 2], "pads": [1, 0, 0, 1]}),  # stride 2, multiplier 2
    ((1, 3, 11, 36), (3, 1, 3, 3), {"strides": [2, 2], "pads": [1, 1, 1, 1]}),  # stride 2, odd left pad and width
    ((1, 4, 10, 35), (4, 1, 5, 3), {"dilations": [2, 1], "pads": [4, 1, 4, 1]}),  # 5x3, dilated rows
    ((1, 5, 17, 41), (5, 1, 3, 3), {"strides": [2, 2], "pads": [0, 1, 1, 1]}),  # stride 2: odd sizes, no top pad
    ((2, 20, 14, 14), (20, 1, 3, 3), {"pads": [1, 1, 1, 1]}),  # channel blocks of 16 and 4, planes of 196
    ((1, 17, 9, 9), (17, 1, 3, 3), {"strides": [2, 2], "pads": [0, 0, 0, 0]}),  # 25 pixels: a block's last transpose
]
# Every case through both general loops; through depthwise_rows where its plane qualifies (4 rows
# of 16 pixels or more) and depthwise_channel_blocks where the channel multiplier is 1.
DEPTHWISE_LOOP_CASES = [(*case, loop) for case in CASES for loop in ("depthwise_phases", "depthwise_channels_inner")] \
    + [(*case, "depthwise_rows") for case in CASES
       if len(case[0]) == 4 and conv_out_size(*case, 0) >= 4 and conv_out_size(*case, 1) >= 16] \
    + [(*case, "depthwise_channel_blocks") for case in CASES if case[1][0] == case[0][1]]


def choose_depthwise_loop(loop: str, monkeypatch) -> None:
    """Moves the plane sizes and switches that pick a depthwise loop so that `loop` takes a case."""
    loops = compiled.loops()
    monkeypatch.setattr(loops, "CHANNELS_INNER_PIXELS", 10**9 if loop == "depthwise_channels_inner" else 0)
    monkeypatch.setattr(loops, "DEPTHWISE_CHANNEL_BLOCKS", loop == "depthwise_channel_blocks")
    rows = loop == "depthwise_rows"
    for name in ("DEPTHWISE_ROWS_LOOP_WIDTH", "DEPTHWISE_ROWS_STRIDED_WIDTH"):
        monkeypatch.setattr(loops, name, loops.DEPTHWISE_PIXELS if rows else 10**9)
    monkeypatch.setattr(loops, "DEPTHWISE_ROWS_COVER", 10**9 if rows else 1)


@numba_missing
@pytest.mark.parametrize("x_shape, w_shape, attrs, loop", DEPTHWISE_LOOP_CASES)
@pytest.mark.parametrize("activation", [None, "Relu", "Clip", "Sigmoid"])
def test_compiled_depthwise_against_onnxruntime_and_the_numpy_plan(x_shape, w_shape, attrs, activation, loop,
                                                                   monkeypatch):
    """Every loop on every case it takes: the plane sizes that pick one are moved past the case's."""
    choose_depthwise_loop(loop, monkeypatch)
    model = depthwise_model(x_shape, w_shape, attrs, activation=activation, bias=activation != "Relu")
    feeds = {"x": rng.standard_normal(x_shape).astype(np.float32)}
    want = ort.InferenceSession(model.SerializeToString()).run(None, feeds)[0]
    got, variants = run_numpy(model, feeds, monkeypatch, compiled_loop=True)
    assert variants == [f"depthwise, compiled loop ({loop})"]
    plan, plan_variants = run_numpy(model, feeds, monkeypatch, compiled_loop=False)
    assert plan_variants != variants
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got, plan, rtol=1e-5, atol=1e-5)


@numba_missing
@pytest.mark.parametrize("x_shape, w_shape, attrs, loop", [
    ((1, 16, 20, 20), (16, 1, 3, 3), {"pads": [1, 1, 1, 1]}, "depthwise_channel_blocks"),  # rows of 20
    ((1, 16, 20, 32), (16, 1, 3, 3), {"pads": [1, 1, 1, 1]}, "depthwise_rows"),  # rows of two whole steps
    ((1, 16, 20, 40), (16, 1, 3, 3), {"pads": [1, 1, 1, 1]}, "depthwise_rows"),  # 48 for 40: under 1.5x
    ((1, 16, 20, 36), (16, 1, 3, 3), {"pads": [1, 1, 1, 1]}, "depthwise_rows"),  # 48 for 36
    ((1, 16, 20, 21), (16, 1, 3, 3), {"pads": [1, 1, 1, 1]}, "depthwise_channel_blocks"),  # 32 for 21: past 1.5x
    ((1, 16, 40, 40), (16, 1, 3, 3), {"strides": [2, 2], "pads": [1, 1, 1, 1]}, "depthwise_channel_blocks"),
    ((1, 16, 32, 32), (16, 1, 3, 3), {"strides": [2, 2], "pads": [1, 1, 1, 1]}, "depthwise_rows"),  # 3x3 / 2: 16
    ((1, 16, 48, 48), (16, 1, 5, 5), {"strides": [2, 2], "pads": [2, 2, 2, 2]}, "depthwise_channel_blocks"),
    ((1, 16, 64, 64), (16, 1, 5, 5), {"strides": [2, 2], "pads": [2, 2, 2, 2]}, "depthwise_rows"),  # phases, rows of 32
    ((1, 6, 8, 8), (12, 1, 3, 3), {"pads": [1, 1, 1, 1]}, "depthwise_channels_inner"),  # multiplier 2
    ((1, 6, 20, 20), (12, 1, 3, 3), {"pads": [1, 1, 1, 1]}, "depthwise_phases"),
])
def test_depthwise_loop_by_plane(x_shape, w_shape, attrs, loop, monkeypatch):
    """float32 depthwise convs of channel multiplier 1 take channel blocks but where depthwise_rows's
    steps of 16 fill the output rows: rows of 16+ pixels at stride 1 and 3x3 / 2, 28+ where it
    reads stride phases (a 5x5 / 2), covered by at most 1.5x their width."""
    model = depthwise_model(x_shape, w_shape, attrs, activation="Relu")
    feeds = {"x": rng.standard_normal(x_shape).astype(np.float32)}
    got, variants = run_numpy(model, feeds, monkeypatch, compiled_loop=True)
    assert variants == [f"depthwise, compiled loop ({loop})"]
    want = ort.InferenceSession(model.SerializeToString()).run(None, feeds)[0]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@numba_missing
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("strides, pads", [((2, 2), (1, 1)), ((2, 2), (0, 2)), ((2, 2), (3, 0)), ((1, 1), (1, 2)),
                                           ((3, 2), (2, 1)), ((1, 3), (0, 1))])
@pytest.mark.parametrize("workers", [1, 2, 3])
def test_stride_phases_hold_the_padded_plane(strides, pads, dtype, workers):
    """fill_phase_bands lays each plane's zero-padded copy out as its stride phases: phase (a, b)
    holds the padded elements (a + stride_h * i, b + stride_w * j), each of its workers the rows of
    a band of cell rows. Row widths below, at and past a vector step of pairs (split_pairs, its last
    step moved back), odd and even left pads."""
    loops = compiled.loops()
    for width in (1, 5, 2 * loops.GRID_LANES - 1, 2 * loops.GRID_LANES + 1, 2 * loops.GRID_LANES + 2, 77):
        x = rng.standard_normal((2, 3, 7, width)).astype(dtype)
        kernel = (3, 3)
        out = [(size + pad - k) // stride + 1 for size, pad, k, stride in zip(x.shape[2:], pads, kernel, strides)]
        cells_h, cells_w, _ = loops.phase_grid(x.shape, (2, 3, *out), kernel, np.array(strides), np.ones(2, np.int64),
                                               np.array(pads))
        phases = np.full((2, 3, strides[0] * strides[1], cells_h, cells_w), np.nan, dtype)
        padded = np.zeros((2, 3, cells_h * strides[0], cells_w * strides[1]), dtype)
        padded[:, :, pads[0]:pads[0] + 7, pads[1]:pads[1] + width] = x
        for a in range(strides[0]):  # the padding of the buffer, zeroed once by the plan
            for b in range(strides[1]):
                phases[:, :, a * strides[1] + b][padded[:, :, a::strides[0], b::strides[1]] == 0] = 0
        loops.fill_phase_bands(x, phases, np.array(strides), np.array(pads), workers)
        for a in range(strides[0]):
            for b in range(strides[1]):
                np.testing.assert_array_equal(phases[:, :, a * strides[1] + b],
                                              padded[:, :, a::strides[0], b::strides[1]], err_msg=f"{width} {a} {b}")


def max_pool_model(x_shape, attrs, dtype=np.float32):
    elem = TensorProto.DOUBLE if dtype == np.float64 else TensorProto.FLOAT
    node = helper.make_node("MaxPool", ["x"], ["y"], **attrs)
    graph = helper.make_graph([node], "maxpool", [helper.make_tensor_value_info("x", elem, list(x_shape))],
                              [helper.make_tensor_value_info("y", elem, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


MAX_POOL_CASES = [  # x shape, MaxPool attributes
    ((1, 16, 112, 112), {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}),  # ResNet's
    ((2, 5, 9, 10), {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}),  # odd height, even width
    ((1, 3, 11, 13), {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [0, 1, 1, 0]}),  # even padded span
    ((2, 3, 8, 9), {"kernel_shape": [2, 2], "strides": [2, 2]}),
    ((1, 4, 7, 9), {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]}),  # stride 1
    ((1, 2, 9, 11), {"kernel_shape": [3, 2], "strides": [3, 3], "dilations": [2, 3], "pads": [2, 1, 0, 1]}),
    ((1, 3, 8, 8), {"kernel_shape": [3, 3], "strides": [2, 2], "ceil_mode": 1}),  # windows past the end
    ((2, 3, 17), {"kernel_shape": [3], "strides": [2], "pads": [1, 1]}),  # 1-D
    ((1, 2, 9, 12), {"kernel_shape": [3, 5], "strides": [1, 2], "dilations": [1, 2], "pads": [1, 2, 1, 2]}),
]


@numba_missing
@pytest.mark.parametrize("x_shape, attrs", MAX_POOL_CASES)
def test_compiled_max_pool_against_the_reference_and_the_numpy_plan(x_shape, attrs, monkeypatch):
    """Bit for bit: a maximum is one of its inputs."""
    model = max_pool_model(x_shape, attrs)
    feeds = {"x": rng.standard_normal(x_shape).astype(np.float32)}
    want = ort.InferenceSession(model.SerializeToString()).run(None, feeds)[0]
    results = {}
    for loop in (True, False):
        monkeypatch.setenv(compiled.COMPILED_ENV, "1" if loop else "0")
        session = wgnn.InferenceSession(model.SerializeToString(), providers=["numpy"])
        results[loop] = session.run(None, feeds)[0]
        kernels = [ex.variant() for segment in session.session.segments for _, ex in segment.steps]
        assert kernels == (["compiled loop (max_pool_rows)"] if loop else ["numpy"])
    np.testing.assert_array_equal(results[True], want)
    np.testing.assert_array_equal(results[True], results[False])


@numba_missing
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("threaded", [False, True])
def test_compiled_max_pool_nan_float64_and_threads(dtype, threaded, monkeypatch):
    """NaN anywhere in a window makes its maximum NaN, as np.maximum; float64 compiles its own
    loop; two threads share the planes with one thread's result."""
    x_shape = (3, 7, 40, 41)
    model = max_pool_model(x_shape, {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}, dtype)
    x = rng.standard_normal(x_shape).astype(dtype)
    x[0, 1, 5, 7] = x[2, 6, 0, 0] = x[1, 3, 39, 40] = np.nan
    monkeypatch.setenv(compiled.COMPILED_ENV, "0")
    plan = wgnn.InferenceSession(model.SerializeToString(), providers=["numpy"]).run(None, {"x": x})[0]
    want_threads = threaded_threads(monkeypatch) if threaded else 1
    monkeypatch.setenv(compiled.COMPILED_ENV, "1")
    session = wgnn.InferenceSession(model.SerializeToString(), providers=["numpy"])
    [(_, ex)] = [pair for segment in session.session.segments for pair in segment.steps]
    assert ex.state["pool"].compiled[-1] == want_threads
    got = session.run(None, {"x": x})[0]
    assert np.isnan(got).sum() == np.isnan(plan).sum() > 3
    np.testing.assert_array_equal(got, plan)


@numba_missing
@pytest.mark.parametrize("dtype, width, loop", [(np.float64, 5, "depthwise_channels_inner"),
                                                (np.float32, 32, "depthwise_rows"),
                                                (np.float32, 21, "depthwise_channel_blocks")])
def test_compiled_depthwise_residual_float64_and_nan(dtype, width, loop, monkeypatch):
    """The residual is added before the activation; float64 compiles its own loop, float32 rows
    filled by steps of 16 take depthwise_rows, others channel blocks; NaN passes the clip as in
    numpy and onnx.reference."""
    shape = (2, 3, 6, width)
    model = depthwise_model(shape, (3, 1, 3, 3), {"pads": [1, 1, 1, 1]}, activation="Clip", residual=list(shape),
                            dtype=dtype)
    x = rng.standard_normal(shape).astype(dtype)
    x[1, 2, 3, 3] = np.nan
    feeds = {"x": x, "r": rng.standard_normal(shape).astype(dtype)}
    want = ReferenceEvaluator(model).run(None, feeds)[0]  # onnxruntime has no float64 Conv
    got, variants = run_numpy(model, feeds, monkeypatch, compiled_loop=True)
    assert variants == [f"depthwise, compiled loop ({loop})"] and got.dtype == dtype
    [conv] = [step for segment in wgnn.InferenceSession(model.SerializeToString(), providers=["numpy"]).session.segments
              for step, _ in segment.steps]
    assert conv.inputs[3] == "r" and conv.attrs["activation"] == "clip"  # one step: residual and Clip inside
    assert np.isnan(got[1, 2]).sum() == np.isnan(want[1, 2]).sum() > 0
    tolerance = 1e-12 if dtype == np.float64 else 1e-5
    np.testing.assert_allclose(got, want, rtol=tolerance, atol=tolerance)


@numba_missing
def test_compiled_depthwise_in_fused_blocks(monkeypatch):
    """zoo mobilenetv2's ConvDwPwExpand and ConvDwPw steps run their depthwise stage compiled, and
    the model's output matches the numpy plans' (batch 2 at 32x32, an odd size)."""
    from wgnn.models import zoo

    for size, batch in ((32, 2), (45, 1)):
        model = zoo.build("mobilenetv2", size=size).SerializeToString()
        shape = (batch, 3, size, size)
        feeds = {"input": rng.standard_normal(shape).astype(np.float32)}
        outputs = []
        for compiled_loop in (True, False):
            monkeypatch.setenv(compiled.COMPILED_ENV, "1" if compiled_loop else "0")
            session = wgnn.InferenceSession(model, providers=["numpy"])
            session.session.resize({"input": shape})
            variants = " ".join(ex.variant() for seg in session.session.segments for _, ex in seg.steps)
            assert ("compiled loop" in variants) == compiled_loop
            outputs.append(session.run(None, feeds)[0])
        np.testing.assert_allclose(outputs[0], outputs[1], rtol=1e-4, atol=1e-5)


DIRECT_CASES = [  # x shape, w shape, group, Conv attributes
    ((2, 5, 9, 8), (17, 5, 3, 3), 1, {"pads": [1, 1, 1, 1]}),  # batch 2; 17 outputs: a block of 1 more
    ((1, 3, 23, 21), (16, 3, 7, 7), 1, {"strides": [2, 2], "pads": [3, 3, 3, 3]}),  # a stem, odd sizes
    ((1, 6, 10, 11), (34, 3, 3, 3), 2, {"strides": [2, 1], "dilations": [1, 2], "pads": [0, 2, 1, 0]}),
    ((2, 4, 13), (6, 4, 3), 1, {"strides": [2], "pads": [2, 1], "dilations": [2]}),  # 1-D
    ((1, 8, 6, 7), (12, 8, 1, 1), 1, {"strides": [2, 2]}),  # a strided 1x1 projection
    ((1, 4, 2, 1), (5, 4, 2, 1), 1, {}),  # one output pixel: fewer than a step's four
    ((1, 4, 3, 2), (5, 4, 3, 3), 1, {"pads": [3, 3, 3, 3]}),  # padding past the kernel
    ((1, 16, 20, 20), (64, 16, 3, 3), 1, {"pads": [1, 1, 1, 1]}),  # tiles of pixels, four blocks
    ((2, 5, 9, 37), (7, 5, 3, 3), 1, {"pads": [1, 1, 1, 1]}),  # rows of 37: the last step moves back
    ((1, 6, 12, 40), (10, 3, 3, 5), 2, {"strides": [2, 1], "dilations": [2, 1], "pads": [2, 2, 1, 3]}),
    ((2, 4, 50), (6, 4, 3), 1, {"pads": [1, 2], "dilations": [2]}),  # 1-D rows
    ((1, 3, 18, 18), (8, 3, 3, 3), 1, {}),  # rows of exactly 16 pixels, no padding
    ((2, 4, 21, 40), (9, 4, 3, 3), 1, {"strides": [2, 2], "pads": [1, 1, 1, 1]}),  # stride phases, wide rows
    ((1, 3, 40, 37), (16, 3, 7, 7), 1, {"strides": [2, 2], "pads": [3, 3, 3, 3]}),  # a stem's phases
    ((1, 4, 17, 23), (8, 4, 3, 2), 1, {"strides": [3, 2], "dilations": [2, 3], "pads": [1, 2, 3, 0]}),
    ((1, 6, 7, 7), (8, 6, 3, 3), 1, {"pads": [1, 1, 1, 1]}),  # rows of 7: a step meets up to 3 rows
    ((2, 8, 14, 14), (12, 8, 1, 1), 1, {"strides": [2, 2]}),  # a strided 1x1: conv_direct
    ((1, 12, 9, 35), (20, 12, 3, 3), 1, {"strides": [2, 2], "pads": [1, 1, 1, 1]}),  # 12 channels, rows of 18
    ((2, 8, 12, 20), (8, 8, 3, 3), 1, {"strides": [2, 2], "pads": [0, 1, 1, 0]}),  # rows of 10 (conv_direct)
    ((1, 3, 91, 91), (17, 3, 3, 3), 1, {"pads": [1, 1, 1, 1]}),  # planes of 8281 pixels: a chunk's blocks outer
]


@numba_missing
def test_direct_cases_run_both_orders_of_a_chunk():
    """conv_grid takes a chunk's channel blocks outer on planes of GRID_BLOCKS_OUTER_PIXELS or more,
    inner on smaller ones: the cases hold both, each with several blocks."""
    threshold = compiled.loops().GRID_BLOCKS_OUTER_PIXELS
    several = [(x, w, a) for x, w, _, a in DIRECT_CASES if w[0] > compiled.loops().GRID_CHANNELS]
    planes = {conv_out_size(x, w, a, 0) * conv_out_size(x, w, a, -1) >= threshold
              for x, w, a in several if len(x) == 4}
    assert planes == {False, True}


def group_of(x_shape, w_shape) -> int:
    return x_shape[1] // w_shape[1]


def grid_pixels(x_shape, w_shape, attrs) -> int:
    """The pixels of conv_grid's grid for a case: (out_h - 1) * cells_w + out_w; 0 where the plan
    leaves a strided conv to conv_direct: more input channels per group than a stem's and output
    rows narrower than a step, or a stride phase of the input read by no tap (a strided 1x1 conv)."""
    rank = len(x_shape) - 2
    pads = attrs.get("pads", [0] * 2 * rank)
    strides, dilations = attrs.get("strides", [1] * rank), attrs.get("dilations", [1] * rank)
    stride, dilation = strides[-1], dilations[-1]
    out_h = conv_out_size(x_shape, w_shape, attrs, 0) if rank == 2 else 1
    out_w = conv_out_size(x_shape, w_shape, attrs, -1)
    strided = any(step > 1 for step in strides)
    if (strided and x_shape[1] // group_of(x_shape, w_shape) > numpy_conv.STRIDED_GRID_CHANNELS
            and out_w < compiled.loops().GRID_LANES):
        return 0
    for size, step, gap in zip(w_shape[2:], strides, dilations):
        if len({k * gap % step for k in range(size)}) < step:
            return 0
    if w_shape[2:] == (1,) * rank and stride == 1 and not any(pads) and attrs.get("strides", [1])[0] == 1:
        return out_h * out_w  # the plane as one row
    padded_w = max(x_shape[-1] + pads[rank - 1], (out_w - 1) * stride + (w_shape[-1] - 1) * dilation + 1)
    return (out_h - 1) * -(-padded_w // stride) + out_w


# Every case through conv_direct, and through conv_grid where its grid holds a step's pixels (16 at most).
DIRECT_LOOP_CASES = [(*case, "conv_direct") for case in DIRECT_CASES] + [
    (*case, "conv_grid") for case in DIRECT_CASES if grid_pixels(case[0], case[1], case[3]) >= 16]


@numba_missing
@pytest.mark.parametrize("x_shape, w_shape, group, attrs, loop", DIRECT_LOOP_CASES)
@pytest.mark.parametrize("activation", [None, "Relu", "Clip", "Sigmoid"])
def test_compiled_direct_conv_against_onnxruntime_and_the_numpy_plan(x_shape, w_shape, group, attrs, loop, activation,
                                                                     monkeypatch):
    monkeypatch.setattr(compiled.loops(), "GRID_LOOP_PIXELS", 10**9 if loop == "conv_direct" else 0)
    model = depthwise_model(x_shape, w_shape, attrs, activation=activation, bias=activation != "Relu", group=group)
    feeds = {"x": rng.standard_normal(x_shape).astype(np.float32)}
    want = ort.InferenceSession(model.SerializeToString()).run(None, feeds)[0]
    got, variants = run_numpy(model, feeds, monkeypatch, compiled_loop=True)
    assert variants == [f"direct, compiled loop ({loop})"]
    plan, plan_variants = run_numpy(model, feeds, monkeypatch, compiled_loop=False)
    assert "compiled" not in plan_variants[0]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got, plan, rtol=1e-5, atol=1e-5)


@numba_missing
def test_strided_convs_take_stride_phases_where_steps_stay_in_one_row(monkeypatch):
    """A strided conv of many input channels runs conv_grid over its stride phases where its output
    rows hold a step's GRID_LANES pixels, else conv_direct; both match onnxruntime."""
    lanes = compiled.loops().GRID_LANES
    for width, loop in ((2 * lanes + 3, "conv_grid"), (2 * lanes - 4, "conv_direct")):
        x_shape = (2, 12, 9, width)
        model = depthwise_model(x_shape, (20, 12, 3, 3), {"strides": [2, 2], "pads": [1, 1, 1, 1]},
                                activation="Clip", group=1)
        feeds = {"x": rng.standard_normal(x_shape).astype(np.float32)}
        got, variants = run_numpy(model, feeds, monkeypatch, compiled_loop=True)
        assert variants == [f"direct, compiled loop ({loop})"]
        want = ort.InferenceSession(model.SerializeToString()).run(None, feeds)[0]
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@numba_missing
@pytest.mark.parametrize("width, loop", [(9, "conv_direct"), (21, "conv_grid")])
@pytest.mark.parametrize("weights_as_inputs", [False, True])
def test_compiled_direct_conv_residual_nan_and_weights_given_at_run(width, loop, weights_as_inputs, monkeypatch):
    """Both loops: the residual is added before the Clip; NaN passes the clip as in onnxruntime;
    weights and bias given as inputs are packed on every run (new values each time)."""
    x_shape, w_shape, y_shape = (2, 6, 7, width), (10, 6, 3, 3), (2, 10, 7, width)
    monkeypatch.setattr(compiled.loops(), "GRID_LOOP_PIXELS", 10**9 if loop == "conv_direct" else 0)
    model = depthwise_model(x_shape, w_shape, {"pads": [1, 1, 1, 1]}, activation="Clip", residual=list(y_shape),
                            group=1, weights_as_inputs=weights_as_inputs)
    reference = ort.InferenceSession(model.SerializeToString())
    monkeypatch.setenv(compiled.COMPILED_ENV, "1")
    session = wgnn.InferenceSession(model.SerializeToString(), providers=["numpy"])
    [(conv, ex)] = [pair for segment in session.session.segments for pair in segment.steps]
    assert conv.inputs[3] == "r" and conv.attrs["activation"] == "clip"  # one step: residual and Clip inside
    assert ex.variant() == f"direct, compiled loop ({loop})"
    for _ in range(2):
        x = rng.standard_normal(x_shape).astype(np.float32)
        x[1, 2, 3, 3] = np.nan
        feeds = {"x": x, "r": rng.standard_normal(y_shape).astype(np.float32)}
        if weights_as_inputs:
            feeds |= {"w": rng.standard_normal(w_shape).astype(np.float32),
                      "b": rng.standard_normal(10).astype(np.float32)}
        want, got = reference.run(None, feeds)[0], session.run(None, feeds)[0]
        assert np.isnan(got).sum() == np.isnan(want).sum() > 0
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@numba_missing
@pytest.mark.parametrize("loop, width", [("depthwise_channel_blocks", 7), ("depthwise_rows", 32),
                                         ("depthwise_channels_inner", 7), ("depthwise_phases", 32)])
def test_compiled_depthwise_weights_given_at_run(loop, width, monkeypatch):
    """Depthwise weights and bias given as graph inputs reach every loop on every run (new values
    each time; channel blocks pack them per run), with a residual and a Clip inside the step."""
    x_shape, w_shape = (2, 20, 6, width), (20, 1, 3, 3)
    choose_depthwise_loop(loop, monkeypatch)
    model = depthwise_model(x_shape, w_shape, {"pads": [1, 1, 1, 1]}, activation="Clip", residual=list(x_shape),
                            weights_as_inputs=True)
    reference = ort.InferenceSession(model.SerializeToString())
    monkeypatch.setenv(compiled.COMPILED_ENV, "1")
    session = wgnn.InferenceSession(model.SerializeToString(), providers=["numpy"])
    [(conv, ex)] = [pair for segment in session.session.segments for pair in segment.steps]
    assert conv.inputs[3] == "r" and ex.variant() == f"depthwise, compiled loop ({loop})"
    for _ in range(2):
        feeds = {"x": rng.standard_normal(x_shape).astype(np.float32),
                 "r": rng.standard_normal(x_shape).astype(np.float32),
                 "w": rng.standard_normal(w_shape).astype(np.float32), "b": rng.standard_normal(20).astype(np.float32)}
        np.testing.assert_allclose(session.run(None, feeds)[0], reference.run(None, feeds)[0], rtol=1e-5, atol=1e-5)


def threaded_threads(monkeypatch) -> int:
    """Makes every register-blocked conv loop prepared from here on share its work among two
    threads (where numba's threading layer starts them fast enough); the threads they will use."""
    monkeypatch.setenv(compiled.THREADS_ENV, "2")
    monkeypatch.setattr(compiled, "THREADED_CONV_MULTIPLY_ADDS", 0)
    monkeypatch.setattr(compiled, "THREADED_DEPTHWISE_MULTIPLY_ADDS", 0)
    if compiled.threads() == 1:
        pytest.skip(f"numba's threading layer here is {compiled._numba().threading_layer()}: no threads")
    return compiled.threads()


def run_with_threads(model, feeds):
    """The output of a one-Conv model on numpy, and the threads its conv loop was prepared for."""
    session = wgnn.InferenceSession(model.SerializeToString(), providers=["numpy"])
    [(_, ex)] = [pair for segment in session.session.segments for pair in segment.steps]
    return session.run(None, feeds)[0], ex.state["conv"].threads


THREADED_CASES = [(x, w, g, a, {"activation": "Clip", "group": g}) for x, w, g, a in DIRECT_CASES] + [
    ((2, 4, 300), (6, 4, 3), 1, {"pads": [1, 1]}, {"group": 1}),  # rows of 300: conv_grid's chunks of 128
    ((2, 3, 6, 32), (3, 1, 3, 3), 3, {"pads": [1, 1, 1, 1]}, {"residual": [2, 3, 6, 32]}),  # depthwise_rows
    ((1, 6, 13, 64), (12, 1, 3, 3), 6, {"strides": [2, 2], "pads": [1, 0, 0, 1]}, {"activation": "Relu"}),
    ((2, 20, 6, 21), (20, 1, 3, 3), 20, {"pads": [1, 1, 1, 1]}, {"residual": [2, 20, 6, 21]}),  # channel blocks
    ((2, 4, 30, 64), (4, 1, 5, 5), 4, {"strides": [2, 2], "pads": [2, 2, 2, 2]}, {}),  # depthwise_rows, phases
    ((1, 5, 23, 70), (5, 1, 3, 3), 5, {"dilations": [2, 2], "pads": [2, 2, 2, 2]}, {"activation": "Clip"}),
]


@numba_missing
@pytest.mark.parametrize("x_shape, w_shape, group, attrs, options", THREADED_CASES)
def test_compiled_conv_loops_on_two_threads_give_one_threads_floats(x_shape, w_shape, group, attrs, options,
                                                                     monkeypatch):
    """Two threads claim the tiles, row chunks or planes of a conv one by one; each output element
    is summed by one thread in the same order, so the floats are one thread's, bit for bit (and
    onnxruntime's within rounding). Batch 2, residuals, rows in several chunks included."""
    loops = compiled.loops()
    model = depthwise_model(x_shape, w_shape, attrs, **options)
    feeds = {"x": rng.standard_normal(x_shape).astype(np.float32)}
    if "residual" in options:
        feeds["r"] = rng.standard_normal(options["residual"]).astype(np.float32)
    monkeypatch.setenv(compiled.COMPILED_ENV, "1")
    for grid_pixels_from in (loops.GRID_LANES, 10**9):  # conv_grid where the grid takes it, then conv_direct
        monkeypatch.setattr(loops, "GRID_LOOP_PIXELS", grid_pixels_from)
        monkeypatch.setenv(compiled.THREADS_ENV, "1")
        one, one_threads = run_with_threads(model, feeds)
        count = threaded_threads(monkeypatch)
        two, two_threads = run_with_threads(model, feeds)
        assert (one_threads, two_threads) == (1, count) and count >= 2
        np.testing.assert_array_equal(two, one)
        want = ort.InferenceSession(model.SerializeToString()).run(None, feeds)[0]
        np.testing.assert_allclose(two, want, rtol=1e-5, atol=1e-5)


@numba_missing
@pytest.mark.parametrize("x_shape, w_shape, options", [
    ((2, 24, 9, 10), (20, 24, 1, 1), {"activation": "Relu"}),  # a plane of 90 pixels as one row
    ((1, 6, 3, 5), (10, 6, 1, 1), {"residual": [1, 10, 3, 5], "activation": "Clip"}),  # 15 pixels: conv_direct
])
@pytest.mark.parametrize("threads", [1, 2])
def test_pointwise_convs_take_the_compiled_loops(x_shape, w_shape, options, threads, monkeypatch):
    """1x1 convs (stride 1, no padding) of POINTWISE_LOOP_MULTIPLY_ADDS or more (here moved below
    the cases') run the register-blocked loops, their plane read as one row, on one thread as on
    two, and match onnxruntime and the numpy product; a run capped at one thread gives the
    threaded loop's floats."""
    monkeypatch.setattr(numpy_conv, "POINTWISE_LOOP_MULTIPLY_ADDS", 0)
    model = depthwise_model(x_shape, w_shape, {}, group=1, **options)
    feeds = {"x": rng.standard_normal(x_shape).astype(np.float32)}
    if "residual" in options:
        feeds["r"] = rng.standard_normal(options["residual"]).astype(np.float32)
    want = ort.InferenceSession(model.SerializeToString()).run(None, feeds)[0]
    monkeypatch.setenv(compiled.THREADS_ENV, "1")
    if threads == 2:
        threaded_threads(monkeypatch)
    got, variants = run_numpy(model, feeds, monkeypatch, compiled_loop=True)
    loop = "conv_grid" if math.prod(x_shape[2:]) >= compiled.loops().GRID_LANES else "conv_direct"
    assert variants == [f"direct, compiled loop ({loop})"]
    product, variants = run_numpy(model, feeds, monkeypatch, compiled_loop=False)
    assert variants == ["matmul"]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got, product, rtol=1e-5, atol=1e-5)
    monkeypatch.setenv(compiled.COMPILED_ENV, "1")
    session = wgnn.InferenceSession(model.SerializeToString(), providers=["numpy"])
    session.session.backends[0].loop_cap = 1
    np.testing.assert_array_equal(session.run(None, feeds)[0], got)


def test_numpy_threads_setting(monkeypatch):
    """WGNN_NUMPY_THREADS: a count of 1 or more (1: no threads), else an error naming it; small
    convs keep one thread; a process forked after the loops were imported runs them on one."""
    monkeypatch.setenv(compiled.THREADS_ENV, "two")
    with pytest.raises(ValueError, match="WGNN_NUMPY_THREADS='two'"):
        compiled.threads()
    monkeypatch.setenv(compiled.THREADS_ENV, "0")
    with pytest.raises(ValueError, match="WGNN_NUMPY_THREADS"):
        compiled.threads()
    if compiled._numba() is None:
        return
    monkeypatch.setenv(compiled.THREADS_ENV, "1")
    assert compiled.threads() == 1 and "1 thread" in compiled.describe()
    monkeypatch.setenv(compiled.THREADS_ENV, "2")
    count = compiled.threads()
    assert compiled.threads_for(10**9, 1000) == count and compiled.threads_for(999, 1000) == 1
    assert compiled.workers(count) == count
    monkeypatch.setattr(compiled.loops(), "IMPORTED_BY", -1)  # as in a forked child
    assert compiled.workers(count) == 1


@numba_missing
def test_threaded_convs_run_from_two_python_threads_at_once(monkeypatch):
    """Two sessions with threaded conv loops, each run from its own Python thread at the same
    time (OpenMP gives each calling thread its own team), give their one-thread floats."""
    import threading

    models = [depthwise_model((1, 8, 20, 24), (16, 8, 3, 3), {"pads": [1, 1, 1, 1]}, group=1, activation="Relu"),
              depthwise_model((2, 6, 30, 17), (6, 1, 3, 3), {"pads": [1, 1, 1, 1]})]
    feeds = [{"x": rng.standard_normal((1, 8, 20, 24)).astype(np.float32)},
             {"x": rng.standard_normal((2, 6, 30, 17)).astype(np.float32)}]
    monkeypatch.setenv(compiled.COMPILED_ENV, "1")
    monkeypatch.setenv(compiled.THREADS_ENV, "1")
    want = [run_with_threads(model, feed)[0] for model, feed in zip(models, feeds)]
    threaded_threads(monkeypatch)
    sessions = [wgnn.InferenceSession(model.SerializeToString(), providers=["numpy"]) for model in models]
    assert all(ex.state["conv"].threads > 1 for s in sessions for seg in s.session.segments for _, ex in seg.steps)
    got = [[], []]

    def run(number):
        for _ in range(20):
            got[number].append(sessions[number].run(None, feeds[number])[0])

    threads = [threading.Thread(target=run, args=(number,)) for number in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for number in range(2):
        assert len(got[number]) == 20
        for result in got[number]:
            np.testing.assert_array_equal(result, want[number])


@numba_missing
def test_session_numpy_threads_setting_overrides_the_variable(monkeypatch):
    """Config(numpy_threads=N) sets a session's loop threads whatever WGNN_NUMPY_THREADS says,
    and bad values name the setting."""
    from wgnn.engine.errors import WgnnError

    for bad in (0, -1, "two", 1.5, True):
        with pytest.raises(WgnnError, match="numpy_threads"):
            wgnn.Config(numpy_threads=bad)
    count = threaded_threads(monkeypatch)  # the variable says 2 for every large loop
    model = depthwise_model((1, 8, 20, 24), (16, 8, 3, 3), {"pads": [1, 1, 1, 1]}, group=1)
    feeds = {"x": rng.standard_normal((1, 8, 20, 24)).astype(np.float32)}
    monkeypatch.setenv(compiled.COMPILED_ENV, "1")
    outputs = []
    for setting, want in (("auto", count), (1, 1)):
        session = wgnn.InferenceSession(model.SerializeToString(),
                                        config=wgnn.Config(providers=("numpy",), numpy_threads=setting))
        [(_, ex)] = [pair for segment in session.session.segments for pair in segment.steps]
        assert ex.state["conv"].threads == want
        outputs.append(session.run(None, feeds)[0])
    monkeypatch.setenv(compiled.THREADS_ENV, "1")
    config = wgnn.Config(providers=("numpy",), numpy_threads=2)
    session = wgnn.InferenceSession(model.SerializeToString(), config=config)
    [(_, ex)] = [pair for segment in session.session.segments for pair in segment.steps]
    assert ex.state["conv"].threads == 2
    np.testing.assert_array_equal(outputs[0], outputs[1])
    np.testing.assert_array_equal(session.run(None, feeds)[0], outputs[0])


def test_run_choice_keeps_the_faster_way():
    """A segment's runs use their loops' threads, the last PROBE_RUNS of every PROBE_EVERY one
    thread (a probe: its last run counts), and move to the other way once its last PROBES_TO_SWITCH
    probes were each under SWITCH_BELOW of the current way's median run time (and back); one lucky
    probe or a few preempted runs move nothing."""
    ms = {None: 0.6, 1: 1.0}  # a run's time each way, as the fake clock reports it
    now = [0.0]
    choice = compiled.RunChoice(clock=lambda: now[0])
    every = compiled.PROBE_EVERY

    def runs(count: int) -> list:
        caps = []
        for _ in range(count):
            cap = choice.begin()
            now[0] += ms[cap] / 1000
            choice.end(cap)
            caps.append(cap)
        return caps

    caps = runs(3 * every)
    probe = compiled.PROBE_RUNS
    assert caps.count(1) == 3 * probe and all(caps[n * every - 1 - k] == 1 for n in (1, 2, 3) for k in range(probe))
    assert choice.cap is None
    ms[None] = 1.5  # other load takes the second core: threads lose, past the last probe's 1.0
    caps = runs(every)
    assert choice.cap == 1 and caps.count(1) > every // 2 and caps[-1] is None  # threads are the probe now
    caps = runs(every)
    assert caps.count(None) == probe and choice.cap == 1
    ms[None] = 0.6  # the core is free again: a first probe with threads is not enough,
    runs(every)
    assert choice.cap == 1 and choice.probes[-1] == pytest.approx(0.6e-3)
    runs(every)  # a second one switches back
    assert choice.cap is None
    for lucky in (1.0, 0.5, 1.0, 0.5, 1.0):  # every other one-thread probe lucky: threads stay
        ms[1] = lucky
        runs(every)
        assert choice.cap is None
    ms[1] = 0.5
    runs(2 * every)  # two lucky probes in a row
    assert choice.cap == 1
    for run in range(4 * every):  # every fifth run preempted for 15 ms: the median keeps one thread
        ms[1] = 15.0 if run % 5 == 0 else 0.5
        runs(1)
        assert choice.cap == 1
    assert sum(choice.runs_by_cap.values()) == choice.runs and choice.switches == 3  # what wgnn bench reports


def test_run_choice_counts_a_probes_warm_run():
    """The first run of a probe pays for cold caches on the other core; only the probe's last run
    counts, so a way that is faster once warm wins even though each switch costs its first run."""
    now, last = [0.0], [None]
    choice = compiled.RunChoice(clock=lambda: now[0])
    for _ in range(4 * compiled.PROBE_EVERY):
        cap = choice.begin()
        now[0] += (1.5 if cap is None else 1.0) + (1.0 if cap != last[0] else 0.0)  # threads slow now
        last[0] = cap
        choice.end(cap)
    assert choice.cap == 1


@numba_missing
def test_session_runs_choose_the_loops_thread_cap(monkeypatch):
    """With numpy_threads "auto" and WGNN_NUMPY_THREADS unset, a session whose loops have threads
    times its runs (a RunChoice per numpy segment) and its loops take the run's cap; a set count
    turns that off. The floats are the same under either cap."""
    monkeypatch.delenv(compiled.THREADS_ENV, raising=False)
    monkeypatch.setattr(compiled, "THREADED_CONV_MULTIPLY_ADDS", 0)
    if compiled.threads() == 1:
        pytest.skip("one core, or numba without a fast threading layer: no threads")
    monkeypatch.setenv(compiled.COMPILED_ENV, "1")
    model = depthwise_model((1, 8, 20, 24), (16, 8, 3, 3), {"pads": [1, 1, 1, 1]}, group=1)
    feeds = {"x": rng.standard_normal((1, 8, 20, 24)).astype(np.float32)}
    session = wgnn.InferenceSession(model.SerializeToString(), providers=["numpy"])
    backend = session.session.backends[0]
    [(_, ex)] = [pair for segment in session.session.segments for pair in segment.steps]
    assert backend.threads_per_run and ex.state["conv"].threads > 1
    started = []
    loop = ex.state["conv"].loop
    monkeypatch.setattr(ex.state["conv"], "loop", lambda *args: (started.append(args[-1]), loop(*args)))
    outputs = [session.run(None, feeds)[0] for _ in range(compiled.PROBE_EVERY)]
    [choice] = backend._run_choices.values()
    assert choice.runs == compiled.PROBE_EVERY and backend.loop_cap is None
    probe = compiled.PROBE_RUNS
    assert started.count(1) == probe and started[-probe:] == [1] * probe  # the probe ran on one thread
    assert all(np.array_equal(output, outputs[0]) for output in outputs)
    fixed = wgnn.InferenceSession(model.SerializeToString(), config=wgnn.Config(providers=("numpy",), numpy_threads=2))
    assert not fixed.session.backends[0].threads_per_run
    np.testing.assert_array_equal(fixed.run(None, feeds)[0], outputs[0])


@numba_missing
def test_threaded_conv_runs_in_a_forked_child(monkeypatch):
    """A child forked after its parent ran a threaded conv (GNU OpenMP's threads do not survive a
    fork) runs the same session on one thread and gets the same floats."""
    import os

    threaded_threads(monkeypatch)
    monkeypatch.setenv(compiled.COMPILED_ENV, "1")
    model = depthwise_model((1, 8, 20, 24), (16, 8, 3, 3), {"pads": [1, 1, 1, 1]}, group=1)
    feeds = {"x": rng.standard_normal((1, 8, 20, 24)).astype(np.float32)}
    session = wgnn.InferenceSession(model.SerializeToString(), providers=["numpy"])
    want = session.run(None, feeds)[0]
    child = os.fork()
    if child == 0:  # the child: exit code 0 when its output is the parent's
        try:
            os._exit(0 if np.array_equal(session.run(None, feeds)[0], want) else 1)
        finally:
            os._exit(2)
    _, status = os.waitpid(child, 0)
    assert os.waitstatus_to_exitcode(status) == 0


@numba_missing
@pytest.mark.parametrize("name", ["conv_direct", "conv_grid", "depthwise_rows"])
def test_vectorized_loops_are_compiled_once_and_closed(name, monkeypatch):
    """vectorized_loop compiles one float32 signature and closes the loop to others (a call with
    other types would compile it again without the SLP vectorizer); where numba has no SLP switch,
    convs keep the numpy plans."""
    loops = compiled.loops()
    loop = loops.vectorized_loop(name)
    assert loop is loops.vectorized_loop(name) and len(loop.signatures) == 1
    with pytest.raises(TypeError):
        loop(*[np.zeros((1, 1), np.float64)] * len(loops.VECTORIZED_SIGNATURES[name]))
    monkeypatch.setattr(loops, "can_vectorize", lambda: False)
    model = depthwise_model((1, 3, 8, 8), (4, 3, 3, 3), {"pads": [1, 1, 1, 1]}, group=1)
    feeds = {"x": rng.standard_normal((1, 3, 8, 8)).astype(np.float32)}
    got, variants = run_numpy(model, feeds, monkeypatch, compiled_loop=True)
    assert "compiled" not in variants[0]
    np.testing.assert_allclose(got, ort.InferenceSession(model.SerializeToString()).run(None, feeds)[0],
                               rtol=1e-5, atol=1e-5)


def test_numpy_plans_without_compiled_loops(monkeypatch):
    """WGNN_NUMPY_COMPILED=0 (and a machine without numba) runs the numpy plans."""
    monkeypatch.setenv(compiled.COMPILED_ENV, "0")
    assert not compiled.enabled()
    model = depthwise_model((2, 5, 7, 6), (5, 1, 3, 3), {"pads": [1, 1, 1, 1]}, activation="Clip")
    feeds = {"x": rng.standard_normal((2, 5, 7, 6)).astype(np.float32)}
    want = ort.InferenceSession(model.SerializeToString()).run(None, feeds)[0]
    got, variants = run_numpy(model, feeds, monkeypatch, compiled_loop=False)
    assert "compiled" not in variants[0]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    monkeypatch.setattr(compiled, "_numba", lambda: None)
    monkeypatch.delenv(compiled.COMPILED_ENV)
    assert not compiled.enabled()


@numba_missing
@pytest.mark.parametrize("kind, alpha, beta", [("relu", 0.0, 0.0), ("clip", -0.5, 1.5)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_compiled_conv_epilogue_matches_numpy_clip(kind, alpha, beta, dtype, monkeypatch):
    """The conv / matmul epilogue's compiled Relu and Clip (in place on a contiguous result, for
    results of COMPILED_EPILOGUE_SIZE elements or more, or any once the loops are started) give
    numpy's clip bit for bit, NaN and infinities included; a strided source (a cropped result)
    takes numpy's clip."""
    from wgnn.backends.numpy.conv import COMPILED_EPILOGUE_SIZE, epilogue

    values = rng.standard_normal((2, 5, 7, 9)).astype(dtype) * 3
    values[0, 1, 2, :3] = [np.nan, np.inf, -np.inf]
    low, high = (0.0, np.inf) if kind == "relu" else (alpha, beta)
    want = np.clip(values, dtype(low), dtype(high))
    monkeypatch.setenv(compiled.COMPILED_ENV, "1")
    apply = epilogue(kind, alpha, beta, np.dtype(dtype), COMPILED_EPILOGUE_SIZE)
    small = COMPILED_EPILOGUE_SIZE - 1  # compiled only where another step has started the loops
    monkeypatch.setattr(compiled, "started", lambda: False)
    assert epilogue(kind, alpha, beta, np.dtype(dtype), small).__name__ == "<lambda>"
    monkeypatch.setattr(compiled, "started", lambda: True)
    assert epilogue(kind, alpha, beta, np.dtype(dtype), small).__name__ == "compiled_epilogue"
    in_place = values.copy()
    apply(in_place, in_place)
    np.testing.assert_array_equal(in_place, want)
    cropped = np.empty((2, 5, 7, 6), dtype)
    apply(values[..., :6], cropped)
    np.testing.assert_array_equal(cropped, want[..., :6])
    assert apply.__name__ == "compiled_epilogue"
    monkeypatch.setenv(compiled.COMPILED_ENV, "0")
    assert epilogue(kind, alpha, beta, np.dtype(dtype), COMPILED_EPILOGUE_SIZE).__name__ == "<lambda>"


@numba_missing
def test_compiled_gelu_gives_the_numpy_tables_floats(monkeypatch):
    """float32 GELU's compiled loop and its numpy form interpolate the same table in the same
    order: the same floats, NaN, infinities, the table's ends and past them included, in place too."""
    from wgnn.backends.numpy.elementwise import _gelu

    x = np.concatenate([rng.standard_normal(3000) * 4, np.linspace(-9, 9, 4001),
                        [np.nan, np.inf, -np.inf, 0.0, -0.0, 8, -8, 1e30, -1e30]]).astype(np.float32)
    monkeypatch.setenv(compiled.COMPILED_ENV, "0")
    want = _gelu(x)
    monkeypatch.setenv(compiled.COMPILED_ENV, "1")
    np.testing.assert_array_equal(_gelu(x), want)
    in_place = x.copy()
    assert _gelu(in_place, out=in_place) is in_place
    np.testing.assert_array_equal(in_place, want)
    assert np.isnan(want[-9]) and want[-8] == np.inf and np.isnan(want[-7])  # NaN, inf, -inf


@numba_missing
@pytest.mark.parametrize("split", [1, 3])
def test_matmul_gelu_epilogue_gives_the_unary_floats(split, monkeypatch):
    """A MatMul + GELU step applies the compiled table in place (conv.epilogue); split_y parts,
    strided slices of the product, take the Unary path: the floats of the numpy plans either way,
    and a product buffer reused from run to run."""
    x = (rng.standard_normal((2, 5, 16)) * 3).astype(np.float32)
    graph = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"])], "mm",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 5, 16])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(rng.standard_normal((16, 24)).astype(np.float32), "w")])
    model = wgnn.convert(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]))
    (node,) = model.graph.nodes
    node.attrs.update(split_y=split, activation="gelu")
    node.outputs = [f"y{i}" for i in range(split)]
    model.graph.outputs = [type(model.graph.outputs[0])(name=o, dtype="float32", shape=None) for o in node.outputs]
    monkeypatch.setenv(compiled.COMPILED_ENV, "0")
    want = wgnn.InferenceSession(model, providers=["numpy"]).run(None, {"x": x})
    monkeypatch.setenv(compiled.COMPILED_ENV, "1")
    session = wgnn.InferenceSession(model, providers=["numpy"])
    (ex,) = [ex for seg in session.session.segments for _, ex in seg.steps]
    assert ex.state["epilogue"].__name__ == "compiled_gelu"
    assert (ex.state["product"] is None) == (split == 1)
    for _ in range(2):
        got = session.run(None, {"x": x})
        for g, w in zip(got, want, strict=True):
            np.testing.assert_array_equal(g, w)
    product = np.matmul(x, model.graph.initializers["w"])
    np.testing.assert_allclose(np.concatenate(got, axis=-1), product * 0.5 * (1 + np.vectorize(math.erf)(
        product / math.sqrt(2))), rtol=1e-5, atol=1e-5)


def layer_norm_model(shape, axis, scale_shape, bias_shape, outputs):
    inits = [numpy_helper.from_array((3 + rng.standard_normal(scale_shape) * 0.1).astype(np.float32), "s")]
    inputs = ["x", "s"]
    if bias_shape is not None:
        inits.append(numpy_helper.from_array(rng.standard_normal(bias_shape).astype(np.float32), "b"))
        inputs.append("b")
    names = ["y", "mean", "inv_std"][:outputs]
    node = helper.make_node("LayerNormalization", inputs, names, axis=axis, epsilon=1e-3)
    graph = helper.make_graph([node], "ln", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))],
                              [helper.make_tensor_value_info(name, TensorProto.FLOAT, None) for name in names], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


@numba_missing
@pytest.mark.parametrize("shape, axis, scale_shape, bias_shape, outputs, compiled_rows", [
    ((2, 3, 33), -1, (33,), (33,), 3, True),  # batch, an odd row
    ((3, 5, 7), 1, (5, 7), None, 3, True),  # rows over two axes, no bias
    ((1, 1, 32), -1, (32,), (32,), 1, True),  # one token
    ((4, 6, 5), 1, (1, 5), (6, 5), 3, False),  # a scale broadcast within the row: the numpy path
])
def test_compiled_layer_norm_against_float64_and_the_numpy_path(shape, axis, scale_shape, bias_shape, outputs,
                                                                compiled_rows, monkeypatch):
    """Rows far from zero (50 +- 0.1, where a float32 mean alone is off by 6e-5 of a unit after
    the scale), every output, against float64 arithmetic and the numpy path."""
    model = layer_norm_model(shape, axis, scale_shape, bias_shape, outputs)
    x = (rng.standard_normal(shape) * 0.1 + 50).astype(np.float32)
    inits = {t.name: numpy_helper.to_array(t).astype(np.float64) for t in model.graph.initializer}
    axes = tuple(range(axis % len(shape), len(shape)))
    mean = x.astype(np.float64).mean(axis=axes, keepdims=True)
    inv_std = 1 / np.sqrt(((x - mean) ** 2).mean(axis=axes, keepdims=True) + 1e-3)
    want = [(x - mean) * inv_std * inits["s"] + inits.get("b", 0), mean, inv_std][:outputs]
    results = {}
    for setting in ("1", "0"):
        monkeypatch.setenv(compiled.COMPILED_ENV, setting)
        results[setting] = wgnn.InferenceSession(model.SerializeToString(), providers=["numpy"]).run(None, {"x": x})
    monkeypatch.setenv(compiled.COMPILED_ENV, "1")
    [ln] = [ex for segment in wgnn.InferenceSession(model.SerializeToString(), providers=["numpy"]).session.segments
            for _, ex in segment.steps]
    ln.prepare()
    assert ln.state["compiled_rows"] == compiled_rows
    assert ln.variant() == ("compiled loop" if compiled_rows else "numpy")  # bench's per-op kernel column
    for got, plan, expected in zip(results["1"], results["0"], want, strict=True):
        np.testing.assert_allclose(got, expected.reshape(got.shape), rtol=2e-6, atol=2e-6)
        np.testing.assert_allclose(got, plan, rtol=1e-5, atol=1e-5)


@numba_missing
def test_compiled_attention_against_onnxruntime_and_the_numpy_path(monkeypatch):
    """Attention (fused from MatMul -> Div -> Add -> Softmax -> MatMul) with a broadcast mask
    holding a row masked to -inf throughout and a NaN query: the compiled loop below
    SMALL_ATTENTION, numpy's products past it and without numba, alike; NaN where numpy has it."""
    from wgnn.backends.numpy import attention

    shapes = {"q": (2, 3, 5, 8), "k": (2, 3, 8, 6), "v": (2, 3, 6, 7), "mask": (2, 1, 5, 6)}
    nodes = [helper.make_node("MatMul", ["q", "k"], ["s"]), helper.make_node("Div", ["s", "scale"], ["scaled"]),
             helper.make_node("Add", ["scaled", "mask"], ["masked"]),
             helper.make_node("Softmax", ["masked"], ["p"], axis=-1), helper.make_node("MatMul", ["p", "v"], ["y"])]
    graph = helper.make_graph(nodes, "attention",
                              [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in shapes.items()],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(np.float32(np.sqrt(8)), "scale")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    assert [n.op_type for n in wgnn.convert(model).graph.nodes] == ["Attention"]
    feeds = {n: rng.standard_normal(s).astype(np.float32) for n, s in shapes.items()}
    want = ort.InferenceSession(model.SerializeToString()).run(None, feeds)[0]
    feeds["mask"][1, 0, 2] = -np.inf  # every key of batch 1's query 2 masked: NaN in all heads
    feeds["q"][0, 1, 3, 4] = np.nan
    loops, calls = compiled.loops(), []
    rows = loops.attention_rows
    monkeypatch.setattr(loops, "attention_rows", lambda *args: calls.append(1) or rows(*args))
    runs = {}
    for name, setting, limit in (("compiled", "1", attention.SMALL_ATTENTION), ("past the limit", "1", 0),
                                 ("numpy", "0", attention.SMALL_ATTENTION)):
        monkeypatch.setenv(compiled.COMPILED_ENV, setting)
        monkeypatch.setattr(attention, "SMALL_ATTENTION", limit)
        session = wgnn.InferenceSession(model.SerializeToString(), providers=["numpy"])
        runs[name] = session.run(None, feeds)[0]
        assert len(calls) == 1, name  # the compiled run only
        [step] = [ex for segment in session.session.segments for _, ex in segment.steps]
        assert step.variant() == ("compiled loop" if name == "compiled" else "numpy"), name
    masked = np.zeros(want.shape, bool)
    masked[1, :, 2], masked[0, 1, 3] = True, True
    for name, got in runs.items():
        assert np.array_equal(np.isnan(got), masked), name
        np.testing.assert_allclose(got[~masked], want[~masked], rtol=1e-5, atol=1e-6, err_msg=name)
    np.testing.assert_allclose(runs["compiled"][~masked], runs["numpy"][~masked], rtol=1e-5, atol=1e-6)


@numba_missing
def test_numba_is_started_only_for_a_compiled_loop(tmp_path):
    """A fresh process: loading the backends and running a model with no step for a compiled loop
    (a 1x1 conv, a product as it is, with a Relu under COMPILED_EPILOGUE_SIZE) leaves numba
    unimported; zoo resnet's 3x3 convs start the compiled loops, after which every epilogue may
    take them."""
    import os
    import subprocess
    import sys

    pointwise = tmp_path / "pointwise.onnx"
    pointwise.write_bytes(depthwise_model((1, 8, 6, 6), (4, 8, 1, 1), {}, activation="Relu", group=1)
                          .SerializeToString())
    script = f"""
import sys, numpy as np, wgnn
from wgnn.backends.numpy import compiled
from wgnn.models import zoo
wgnn.InferenceSession({str(pointwise)!r}, providers=["numpy"]).run(None, {{"x": np.ones((1, 8, 6, 6), np.float32)}})
print("numba" in sys.modules, compiled.started())
feeds = {{"input": np.zeros((1, 3, 32, 32), np.float32)}}
wgnn.InferenceSession(zoo.build("resnet").SerializeToString(), providers=["numpy"]).run(None, feeds)
print("numba" in sys.modules, compiled.started())
"""
    env = {k: v for k, v in os.environ.items() if k != compiled.COMPILED_ENV}
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=300)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["False", "False", "True", "True"]


def test_attention_over_no_keys_gives_zeros_as_onnxruntime():
    """Zero keys: numpy's products over the empty axis give zeros (onnxruntime too), so that
    case stays off the compiled loop, whose softmax would divide zero by zero."""
    shapes = {"q": (1, 2, 3, 4), "k": (1, 2, 4, 0), "v": (1, 2, 0, 5)}
    nodes = [helper.make_node("MatMul", ["q", "k"], ["s"]), helper.make_node("Softmax", ["s"], ["p"], axis=-1),
             helper.make_node("MatMul", ["p", "v"], ["y"])]
    graph = helper.make_graph(nodes, "no_keys",
                              [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in shapes.items()],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    assert [n.op_type for n in wgnn.convert(model).graph.nodes] == ["Attention"]
    feeds = {n: rng.standard_normal(s).astype(np.float32) for n, s in shapes.items()}
    want = ort.InferenceSession(model.SerializeToString()).run(None, feeds)[0]
    got = wgnn.InferenceSession(model.SerializeToString(), providers=["numpy"]).run(None, feeds)[0]
    np.testing.assert_array_equal(got, want)
    assert got.shape == (1, 2, 3, 5) and not got.any()


@numba_missing
def test_work_shares_then_what_is_left_of_the_others():
    """A threaded loop's worker claims its own contiguous share first, then what is left of the
    next workers' shares, each item once across the workers; the counters sit a cache line apart."""
    from wgnn.backends.numpy.kernel import CACHE_LINE, work_counter

    loops = compiled.loops()
    assert loops.COUNTER_STRIDE == CACHE_LINE // 8
    counters = work_counter(3)
    assert counters.shape == (3 * loops.COUNTER_STRIDE,) and counters.ctypes.data % CACHE_LINE == 0
    claims, turn = [], 0
    for _ in range(3):  # worker 1 alone claims 3 items of its share [4, 8) of 10
        item, turn = loops.next_item(counters, 1, 3, 10, turn)
        claims.append((item, turn))
    item, _ = loops.next_item(counters, 2, 3, 10, 0)  # worker 2 takes its own share's first
    claims.append((item, 0))
    while item < 10:
        item, turn = loops.next_item(counters, 1, 3, 10, turn)
        claims.append((item, turn))
    assert claims == [(4, 0), (5, 0), (6, 0), (8, 0), (7, 0), (9, 1), (0, 2), (1, 2), (2, 2), (3, 2), (10, 3)]
    assert loops.next_item(counters, 0, 3, 10, 0) == (10, 3)
    loops.reset_counters(counters, 3)
    assert not counters.any()


@pytest.mark.parametrize("shape, dtype", [(1, np.uint8), (37, np.float32), ((3, 5, 7), np.float64), ((2, 0), np.int64)])
def test_aligned_arrays_start_on_a_cache_line(shape, dtype):
    """aligned_empty / aligned_zeros: C-contiguous, writeable, of the shape and dtype asked, their
    data on a CACHE_LINE boundary (numpy's own start 16 bytes past one), zeros zeroed."""
    from wgnn.backends.numpy.kernel import CACHE_LINE, aligned_empty, aligned_zeros

    for make in (aligned_empty, aligned_zeros):
        for _ in range(8):  # malloc's addresses vary
            array = make(shape, dtype)
            assert array.shape == (shape if isinstance(shape, tuple) else (shape,)) and array.dtype == dtype
            assert array.flags.c_contiguous and array.flags.writeable
            assert array.ctypes.data % CACHE_LINE == 0 or array.size == 0
            if make is aligned_zeros:
                assert not array.any()
            array[...] = 1
            assert array.all() or array.size == 0


def test_numpy_tensors_and_loop_buffers_start_on_cache_lines(monkeypatch):
    """The numpy backend's arena (so every pooled tensor: offsets are multiples of 64), its shared
    scratch, a fused block's intermediate kept apart, a conv's padded input, and the compiled
    loops' per-thread buffers and work counters start on cache lines (a 16-wide float32 load of a
    tensor 16 bytes off one split two lines: zoo mobilenetv2@224 on two threads x1.2 the time)."""
    from wgnn.backends.numpy import composite, conv
    from wgnn.backends.numpy.composite import Intermediate
    from wgnn.backends.numpy.kernel import CACHE_LINE
    from wgnn.models import zoo

    monkeypatch.setenv(compiled.THREADS_ENV, "2")
    monkeypatch.setattr(compiled, "THREADED_CONV_MULTIPLY_ADDS", 0)
    monkeypatch.setattr(compiled, "THREADED_DEPTHWISE_MULTIPLY_ADDS", 0)
    monkeypatch.setattr(conv, "POINTWISE_LOOP_MULTIPLY_ADDS", 0)
    for module in (conv, composite):  # the larger buffers in the shared scratch
        monkeypatch.setattr(module, "RESIDENT_BYTES", 4096)
    session = wgnn.InferenceSession(zoo.build("mobilenetv2", size=64).SerializeToString(), providers=["numpy"])
    session.run(None, {"input": rng.standard_normal((1, 3, 64, 64)).astype(np.float32)})
    assert session.session.backends[0]._scratch is not None
    backend = session.session.backends[0]
    arrays = [a for a in (backend.arena, backend._scratch, *backend.views.values()) if a is not None]

    def collect(value):
        if isinstance(value, np.ndarray) and value.size and value.base is not None:
            arrays.append(value)
        elif isinstance(value, list | tuple):
            for item in value:
                collect(item)
        elif isinstance(value, Intermediate) and not value.shared:
            arrays.append(value.buffer)
        elif hasattr(value, "__dict__") and type(value).__module__.startswith("wgnn.backends.numpy"):
            for name in ("padded", "phases", "first", "buffers", "pair", "expand", "stages", "block", "state"):
                collect(getattr(value, name, None))
        elif isinstance(value, dict):
            collect(list(value.values()))

    for segment in session.session.segments:
        for _, ex in segment.steps:
            collect(ex.state)
    counters = [a for a in arrays if a.dtype == np.int64 and a.size % (CACHE_LINE // 8) == 0]
    assert len(arrays) > 40 and (counters or compiled._numba() is None)
    assert [a.shape for a in arrays if a.ctypes.data % CACHE_LINE] == []


@numba_missing
def test_capped_runs_of_fused_blocks_are_the_one_thread_sessions(monkeypatch):
    """zoo mobilenetv2's fused blocks (depthwise, project, expand) with every conv threaded and
    their buffers in the shared scratch: a run capped at one thread gives a one-thread session's
    floats bit for bit (the loops' buffers sit apart from the block's intermediate), and threaded
    runs onnxruntime's."""
    from wgnn.backends.numpy import composite, conv
    from wgnn.models import zoo

    for module in (conv, composite):
        monkeypatch.setattr(module, "RESIDENT_BYTES", 4096)
    model = zoo.build("mobilenetv2", size=48, batch=2).SerializeToString()
    feeds = {"input": rng.standard_normal((2, 3, 48, 48)).astype(np.float32)}
    monkeypatch.setenv(compiled.THREADS_ENV, "1")
    alone = wgnn.InferenceSession(model, providers=["numpy"]).run(None, feeds)[0]
    threaded_threads(monkeypatch)
    session = wgnn.InferenceSession(model, providers=["numpy"])
    variants = [ex.variant() for segment in session.session.segments for _, ex in segment.steps]
    assert any("compiled loop (conv_grid)" in v for v in variants), variants
    np.testing.assert_allclose(session.run(None, feeds)[0], ort.InferenceSession(model).run(None, feeds)[0],
                               rtol=1e-4, atol=1e-5)
    session.session.backends[0].loop_cap = 1
    np.testing.assert_array_equal(session.run(None, feeds)[0], alone)
