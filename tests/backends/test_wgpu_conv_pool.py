"""GPU-specific cases of the Conv and Pool kernels (backends/wgpu/conv.py, pool.py) that the op
tests do not reach: every kernel path (blocked, sliding, depthwise, transpose) at block and row
segment edges, every fused activation kind, resizes without new pipelines, and the zoo models."""
import numpy as np
import onnxruntime as ort
import pytest
from helpers import Const, assert_close, check_op, gpu_adapters, make_model, run_wgnn, session_for
from onnx import TensorProto, helper, numpy_helper
from wgnn.models.zoo import build, example_inputs

import wgnn

pytestmark = pytest.mark.skipif(not gpu_adapters(), reason="no GPU adapter (install mesa-vulkan-drivers)")
ADAPTERS = [f"wgpu:{a['index']}" for a in gpu_adapters()]
rng = np.random.default_rng(1)
TOL = {"rtol": 1e-4, "atol": 1e-5}


def r(*shape):
    return rng.standard_normal(shape).astype(np.float32)


def check_ort(op_type, inputs, attrs):
    """An op on every GPU adapter against onnxruntime (onnx.reference gets grouped ConvTranspose
    wrong), with a typed output, which onnxruntime needs."""
    model = make_model(op_type, inputs, attrs, output_dtypes=[TensorProto.FLOAT])
    feeds = {"in0": inputs[0]}
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    for adapter in ADAPTERS:
        assert_close(run_wgnn(model, feeds, adapter)[0], want, what=f"{op_type} on {adapter}", **TOL)


def gpu_ops(session) -> list[str]:
    """Op types of the steps that ran on the GPU."""
    return [step.op.op_type for step in session.session.steps if step.backend == "wgpu"]


# ------------------------------------------------------------------------------ kernel paths
@pytest.mark.parametrize("attrs", [
    {"pads": [1, 1, 1, 1]},  # sliding kernel (stride 1 = dilation 1)
    {"pads": [2, 1, 0, 2], "strides": [2, 2], "dilations": [2, 2]},  # sliding, stride 2 = dilation 2
    {"pads": [1, 0, 1, 3], "strides": [1, 2]},  # blocked kernel (stride != dilation)
])
def test_conv_channel_and_pixel_block_edges(attrs):
    # 13 output channels per group (one full block of 8 and a partial one), W 19 (8 + 8 + 3).
    check_op("Conv", [r(2, 6, 5, 19), Const(r(26, 3, 3, 3)), Const(r(26))], {"group": 2, **attrs}, **TOL)


def test_conv_one_wide_kernels_and_single_pixels():
    check_op("Conv", [r(1, 9, 3, 17), Const(r(9, 9, 1, 1)), Const(r(9))], {"strides": [1, 2]}, **TOL)
    check_op("Conv", [r(3, 4, 1, 1), Const(r(11, 4, 1, 1))], **TOL)
    check_op("Conv", [r(1, 3, 6, 1), Const(r(5, 3, 3, 1))], {"pads": [1, 0, 1, 0]}, **TOL)


@pytest.mark.parametrize("multiplier", [1, 2, 3, 4])
def test_depthwise_multipliers_and_long_rows(multiplier):
    """Multipliers 1-3 take the depthwise kernel, 4 the blocked one; W 150 spans three 64-pixel
    row segments; stride 1 slides, stride 2 does not."""
    c = 3
    for attrs in ({"pads": [1, 2, 1, 0]}, {"strides": [2, 2], "pads": [1, 1, 1, 1], "dilations": [1, 2]}):
        check_op("Conv", [r(2, c, 4, 150), Const(r(c * multiplier, 1, 3, 3)), Const(r(c * multiplier))],
                 {"group": c, **attrs}, **TOL)
    check_op("Conv", [r(1, c, 130), Const(r(c * multiplier, 1, 5))], {"group": c, "dilations": [3], "pads": [4, 2]},
             **TOL)


def test_conv_transpose_residues_and_blocks():
    # W stride 3 with 13 output channels per group: residue classes and partial blocks.
    check_ort("ConvTranspose", [r(2, 4, 3, 7), Const(r(4, 13, 3, 4)), Const(r(26))],
              {"group": 2, "strides": [2, 3], "pads": [1, 2, 0, 1], "output_padding": [1, 2]})
    check_ort("ConvTranspose", [r(1, 2, 5, 9), Const(r(2, 3, 2, 3))],
              {"strides": [1, 2], "dilations": [2, 3], "output_shape": [6, 22]})


def test_pool_long_rows_and_empty_windows():
    x = r(2, 3, 5, 150)
    for kind in ("MaxPool", "AveragePool"):
        check_op(kind, [x], {"kernel_shape": [3, 3], "strides": [1, 2], "pads": [1, 1, 1, 1], "ceil_mode": 1}, **TOL)
        check_op(kind, [x], {"kernel_shape": [2, 5], "dilations": [2, 1]}, opset=19, **TOL)
    check_op("GlobalAveragePool", [r(2, 3, 37, 41)], **TOL)
    check_ort("GlobalMaxPool", [r(1, 2, 3)], {})


# ------------------------------------------------------------------------ fused activations
FLOAT_KINDS = ["identity", "relu", "leaky_relu", "sigmoid", "hard_sigmoid", "hard_swish", "tanh", "erf", "gelu",
               "gelu_tanh", "exp", "neg", "abs", "floor", "ceil", "clip", "softplus"]
HOSTS = {
    "conv": ("Conv", [r(2, 8, 5, 6), Const(r(9, 8, 3, 3)), Const(r(9))], {"pads": [1, 1, 1, 1]}),
    "depthwise": ("Conv", [r(1, 4, 5, 6), Const(r(8, 1, 3, 3)), Const(r(8))], {"group": 4, "pads": [0, 1, 1, 0]}),
    "transpose": ("ConvTranspose", [r(1, 3, 4, 5), Const(r(3, 5, 3, 3)), Const(r(5))], {"strides": [2, 2]}),
}


@pytest.mark.parametrize("host", list(HOSTS))
@pytest.mark.parametrize("kind", FLOAT_KINDS)
def test_fused_activation_kinds(host, kind):
    """Every Unary kind as a fused activation (set on the converted node), GPU against numpy."""
    op, inputs, attrs = HOSTS[host]
    model = wgnn.convert(make_model(op, inputs, attrs))
    (node,) = model.graph.nodes
    node.attrs.update(activation=kind, activation_alpha=0.3, activation_beta=0.6)
    feeds = {"in0": inputs[0] * 0.5}
    want = session_for(model, "numpy").run(None, feeds)[0]
    for adapter in ADAPTERS:
        session = session_for(model, adapter)
        got = session.run(None, feeds)[0]
        assert gpu_ops(session) == [op]
        assert_close(got, want, what=f"{host} + {kind} on {adapter}", rtol=1e-4, atol=1e-5)


def test_activation_fused_by_the_converter_runs_on_the_gpu():
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["y"], pads=[1, 1, 1, 1]),
             helper.make_node("LeakyRelu", ["y"], ["out"], alpha=0.2)]
    graph = helper.make_graph(nodes, "fused", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 6, 7])],
                              [helper.make_tensor_value_info("out", TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(r(5, 4, 3, 3), "w"), numpy_helper.from_array(r(5), "b")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])
    model.ir_version = 8
    x = r(1, 4, 6, 7)
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})
    assert [n.op_type for n in wgnn.convert(model).graph.nodes] == ["Conv"]
    for adapter in ADAPTERS:
        assert_close(run_wgnn(model, {"x": x}, adapter)[0], want[0], what=adapter, **TOL)


def test_activation_without_gpu_expression_is_refused():
    from types import SimpleNamespace

    from wgnn.backends.wgpu.conv import activation

    assert activation(SimpleNamespace(attrs={"activation": ""})) == ("v", None)
    assert activation(SimpleNamespace(attrs={"activation": "relu"})) == ("max(v, 0.0)", None)
    _, reason = activation(SimpleNamespace(attrs={"activation": "not"}))
    assert "not" in reason


# ---------------------------------------------------------------------------- resize, zoo
def test_resize_compiles_no_pipeline():
    from wgnn.backends.wgpu.loader import pipeline_cache

    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Conv", ["c", "dw"], ["d"], group=6, strides=[2, 2]),
             helper.make_node("ConvTranspose", ["d", "tw"], ["t"], strides=[2, 2]),
             helper.make_node("MaxPool", ["t"], ["m"], kernel_shape=[2, 2], ceil_mode=1),
             helper.make_node("GlobalAveragePool", ["m"], ["out"])]
    inits = {"w": r(6, 3, 3, 3), "b": r(6), "dw": r(6, 1, 3, 3), "tw": r(6, 4, 2, 2)}
    x_info = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, "H", "W"])
    graph = helper.make_graph(nodes, "chain", [x_info], [helper.make_tensor_value_info("out", TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(v, k) for k, v in inits.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    reference = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    for adapter in ADAPTERS:
        session = session_for(model.SerializeToString(), adapter)
        cache = pipeline_cache(session.session.backends[0].context)
        compiled = None
        for shape in ((1, 3, 9, 10), (2, 3, 16, 21), (1, 3, 5, 5)):
            x = r(*shape)
            got = session.run(None, {"x": x})[0]
            assert_close(got, reference.run(None, {"x": x})[0], what=f"{shape} on {adapter}", **TOL)
            assert gpu_ops(session) == ["Conv", "Conv", "ConvTranspose", "Pool", "GlobalPool"]
            compiled = cache.compiled if compiled is None else compiled
            assert cache.compiled == compiled


@pytest.mark.parametrize("name", ["mobilenetv2", "resnet", "unet"])
def test_zoo_conv_and_pool_run_on_the_gpu(name):
    model = build(name)
    feeds = example_inputs(model, 2)
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)
    for adapter in ADAPTERS:
        session = session_for(model, adapter)
        got = session.run(None, feeds)
        for g, w in zip(got, want, strict=True):
            assert float(np.abs(g - w).max() / np.abs(w).max()) <= 1e-4
        fallbacks = [f["op"].split(" ")[0] for f in session.report()["fallbacks"]]
        assert not {"Conv", "ConvTranspose", "Pool", "GlobalPool"} & set(fallbacks), fallbacks
        assert "Conv" in gpu_ops(session)
