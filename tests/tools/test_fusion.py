"""Converter fusion passes: BatchNorm folded into Conv, bias Add folded into MatMul, activations
fused into Conv / ConvTranspose / MatMul. Each case checks the nodes left after conversion and
that the fused model still computes what onnxruntime computes on the original."""
import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper
from wgnn.models.format import model_to_bytes

import wgnn

rng = np.random.default_rng(0)
FLOAT = TensorProto.FLOAT


def r(*shape):
    return rng.standard_normal(shape).astype(np.float32)


def build(nodes, inputs: dict, outputs: list[str], initializers: dict, opset: int = 13):
    graph = helper.make_graph(
        nodes, "fusion",
        [helper.make_tensor_value_info(name, FLOAT, shape) for name, shape in inputs.items()],
        [helper.make_tensor_value_info(name, FLOAT, None) for name in outputs],
        [numpy_helper.from_array(value, name) for name, value in initializers.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return model


def check(model, feeds: dict, expected_ops: list[str]):
    """Converted node op types are expected_ops; outputs match onnxruntime's. Returns the graph."""
    converted = wgnn.convert(model)
    graph = converted.graph
    assert [n.op_type for n in graph.nodes] == expected_ops
    data = model.SerializeToString()
    want = ort.InferenceSession(data, providers=["CPUExecutionProvider"]).run(None, feeds)
    # From the ONNX bytes, and from the .wgnn file (fused attributes survive the format).
    for source in (data, model_to_bytes(converted)):
        got = wgnn.InferenceSession(source, providers=["numpy"]).run(None, feeds)
        for g, w in zip(got, want, strict=True):
            np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)
    return graph


def bn_initializers(c: int) -> dict:
    return {"gamma": r(c), "beta": r(c), "mean": r(c), "var": (np.abs(r(c)) + 0.1).astype(np.float32)}


BN = helper.make_node("BatchNormalization", ["y", "gamma", "beta", "mean", "var"], ["z"], epsilon=1e-3)


# ----------------------------------------------------------------------------- BatchNorm -> Conv
@pytest.mark.parametrize("bias", [True, False])
def test_batchnorm_folds_into_conv(bias):
    conv = helper.make_node("Conv", ["x", "w"] + (["b"] if bias else []), ["y"], pads=[1, 1, 1, 1], group=2)
    inits = {"w": r(6, 3, 3, 3), **({"b": r(6)} if bias else {}), **bn_initializers(6)}
    graph = check(build([conv, BN], {"x": [2, 6, 5, 4]}, ["z"], inits), {"x": r(2, 6, 5, 4)}, ["Conv"])
    node = graph.nodes[0]
    assert node.outputs == ["z"] and len(node.inputs) == 3
    assert set(graph.initializers) == {node.inputs[1], node.inputs[2]}  # the originals are dropped


def test_batchnorm_and_relu_fold_into_conv():
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["y"], strides=[2, 2]), BN,
             helper.make_node("Relu", ["z"], ["out"])]
    inits = {"w": r(5, 3, 3, 3), "b": r(5), **bn_initializers(5)}
    graph = check(build(nodes, {"x": [1, 3, 7, 6]}, ["out"], inits), {"x": r(1, 3, 7, 6)}, ["Conv"])
    assert graph.nodes[0].attrs["activation"] == "relu"


def test_batchnorm_not_folded_when_conv_output_is_shared_or_params_are_inputs():
    conv = helper.make_node("Conv", ["x", "w"], ["y"])
    other = helper.make_node("Sigmoid", ["y"], ["s"])
    inits = {"w": r(4, 3, 1, 1), **bn_initializers(4)}
    check(build([conv, BN, other], {"x": [1, 3, 4, 4]}, ["z", "s"], inits), {"x": r(1, 3, 4, 4)},
          ["Conv", "BatchNorm", "Unary"])
    # the Conv output is itself a graph output
    check(build([conv, BN], {"x": [1, 3, 4, 4]}, ["z", "y"], inits), {"x": r(1, 3, 4, 4)}, ["Conv", "BatchNorm"])
    # statistics fed at run time
    stats = bn_initializers(4)
    feeds = {"x": r(1, 3, 4, 4), "mean": stats.pop("mean")}
    model = build([conv, BN], {"x": [1, 3, 4, 4], "mean": [4]}, ["z"], {"w": r(4, 3, 1, 1), **stats})
    check(model, feeds, ["Conv", "BatchNorm"])


# --------------------------------------------------------------------------- activation fusion
ACTIVATIONS = [
    ("Relu", {}, [], "relu"),
    ("LeakyRelu", {"alpha": 0.2}, [], "leaky_relu"),
    ("Sigmoid", {}, [], "sigmoid"),
    ("HardSwish", {}, [], "hard_swish"),
    ("Tanh", {}, [], "tanh"),
    ("Clip", {}, ["lo", "hi"], "clip"),
]


def _activation(op, attrs, extra, src="y", dst="out"):
    return helper.make_node(op, [src, *extra], [dst], **attrs)


def _clip_bounds():
    return {"lo": np.array(-0.5, np.float32), "hi": np.array(0.7, np.float32)}


@pytest.mark.parametrize("op, attrs, extra, kind", ACTIVATIONS)
def test_activation_fuses_into_conv(op, attrs, extra, kind):
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["y"], pads=[0, 1, 1, 0]), _activation(op, attrs, extra)]
    model = build(nodes, {"x": [2, 5, 6, 5]}, ["out"], {"w": r(3, 5, 2, 2), "b": r(3), **_clip_bounds()}, opset=14)
    graph = check(model, {"x": r(2, 5, 6, 5)}, ["Conv"])
    assert graph.nodes[0].attrs["activation"] == kind and graph.nodes[0].outputs == ["out"]


@pytest.mark.parametrize("op, attrs, extra, kind", ACTIVATIONS)
def test_activation_fuses_into_matmul_and_gemm(op, attrs, extra, kind):
    nodes = [helper.make_node("MatMul", ["x", "w"], ["y"]), _activation(op, attrs, extra)]
    model = build(nodes, {"x": [2, 4, 3]}, ["out"], {"w": r(3, 5), **_clip_bounds()}, opset=14)
    assert check(model, {"x": r(2, 4, 3)}, ["MatMul"]).nodes[0].attrs["activation"] == kind
    nodes = [helper.make_node("Gemm", ["x", "w", "c"], ["y"], transB=1, alpha=0.5), _activation(op, attrs, extra)]
    model = build(nodes, {"x": [4, 3]}, ["out"], {"w": r(5, 3), "c": r(5), **_clip_bounds()}, opset=14)
    assert check(model, {"x": r(4, 3)}, ["MatMul"]).nodes[0].attrs["activation"] == kind


def test_activation_fuses_into_conv_transpose():
    nodes = [helper.make_node("ConvTranspose", ["x", "w", "b"], ["y"], strides=[2, 2], group=2),
             helper.make_node("LeakyRelu", ["y"], ["out"], alpha=0.1)]
    model = build(nodes, {"x": [1, 4, 3, 4]}, ["out"], {"w": r(4, 3, 3, 3), "b": r(6)})
    check(model, {"x": r(1, 4, 3, 4)}, ["ConvTranspose"])


def test_activation_not_fused_when_output_is_observed():
    conv = helper.make_node("Conv", ["x", "w"], ["y"])
    relu = helper.make_node("Relu", ["y"], ["out"])
    inits = {"w": r(3, 2, 3, 3)}
    check(build([conv, relu], {"x": [1, 2, 5, 5]}, ["out", "y"], inits), {"x": r(1, 2, 5, 5)}, ["Conv", "Unary"])
    twice = helper.make_node("Add", ["y", "out"], ["sum"])
    check(build([conv, relu, twice], {"x": [1, 2, 5, 5]}, ["sum"], inits), {"x": r(1, 2, 5, 5)},
          ["Conv", "FusedElementwise"])  # the Relu and the Add form one chain instead
    # a second activation stays a node: the first one is already fused
    clip = helper.make_node("Clip", ["out", "lo", "hi"], ["out2"])
    model = build([conv, relu, clip], {"x": [1, 2, 5, 5]}, ["out2"], {**inits, **_clip_bounds()})
    check(model, {"x": r(1, 2, 5, 5)}, ["Conv", "Unary"])
    # Erf is not a fusable activation
    erf = helper.make_node("Erf", ["y"], ["out"])
    check(build([conv, erf], {"x": [1, 2, 5, 5]}, ["out"], inits), {"x": r(1, 2, 5, 5)}, ["Conv", "Unary"])


# --------------------------------------------------------------------------- bias Add -> MatMul
@pytest.mark.parametrize("swap", [False, True])
@pytest.mark.parametrize("bias_shape", [(5,), (1,), ()])
def test_bias_add_folds_into_matmul(bias_shape, swap):
    add_inputs = ["bias", "y"] if swap else ["y", "bias"]
    nodes = [helper.make_node("MatMul", ["x", "w"], ["y"]), helper.make_node("Add", add_inputs, ["z"]),
             helper.make_node("Relu", ["z"], ["out"])]
    model = build(nodes, {"x": [2, 4, 3]}, ["out"], {"w": r(3, 5), "bias": r(*bias_shape)})
    node = check(model, {"x": r(2, 4, 3)}, ["MatMul"]).nodes[0]
    assert len(node.inputs) == 3 and node.attrs["activation"] == "relu"


def test_bias_add_merges_with_gemm_bias():
    nodes = [helper.make_node("Gemm", ["x", "w", "c"], ["y"], beta=0.5, transA=1),
             helper.make_node("Add", ["y", "bias"], ["out"])]
    model = build(nodes, {"x": [3, 4]}, ["out"], {"w": r(3, 6), "c": r(4, 1), "bias": r(6)})
    check(model, {"x": r(3, 4)}, ["MatMul"])


def test_bias_add_not_folded():
    matmul = helper.make_node("MatMul", ["x", "w"], ["y"])
    add = helper.make_node("Add", ["y", "bias"], ["out"])
    # a 2-D bias could enlarge a 1-D product
    check(build([matmul, add], {"x": [3]}, ["out"], {"w": r(3, 5), "bias": r(1, 5)}), {"x": r(3)},
          ["MatMul", "Binary"])


def test_other_bias_adds_become_c_as_they_are():
    """Adds fold_bias_add_into_matmul leaves (no vector over the columns, or fed at run time) still
    become the MatMul's C when they broadcast onto the product (fusion_matmul.fold_add_into_matmul_bias)."""
    matmul = helper.make_node("MatMul", ["x", "w"], ["y"])
    add = helper.make_node("Add", ["y", "bias"], ["out"])
    cases = [({"x": [4, 3]}, {"w": r(3, 5), "bias": r(4, 1)}, {"x": r(4, 3)}),
             ({"x": [4, 3], "bias": [5]}, {"w": r(3, 5)}, {"x": r(4, 3), "bias": r(5)}),
             ({"x": [4, 3], "w": [3, 5]}, {"bias": r(5)}, {"x": r(4, 3), "w": r(3, 5)})]
    for inputs, inits, feeds in cases:
        node = check(build([matmul, add], inputs, ["out"], inits), feeds, ["MatMul"]).nodes[0]
        assert node.inputs == ["x", "w", "bias"]


# ------------------------------------------------------------------------- residual Add -> Conv
def test_residual_add_folds_into_conv_before_relu():
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["y"], pads=[1, 1, 1, 1]),
             helper.make_node("Add", ["y", "r"], ["s"]), helper.make_node("Relu", ["s"], ["out"])]
    model = build(nodes, {"x": [2, 5, 6, 7], "r": [2, 4, 6, 7]}, ["out"], {"w": r(4, 5, 3, 3), "b": r(4)})
    node = check(model, {"x": r(2, 5, 6, 7), "r": r(2, 4, 6, 7)}, ["Conv"]).nodes[0]
    assert node.inputs[3] == "r" and node.attrs["activation"] == "relu" and node.outputs == ["out"]


@pytest.mark.parametrize("swap", [False, True])
def test_residual_from_a_parallel_branch_with_a_symbolic_batch(swap):
    """ResNet's projection shortcut: Add(Conv3x3(...), Conv1x1(x)). One conv takes the other's output
    as its residual and moves after it; shapes are proved equal for any batch N."""
    nodes = [helper.make_node("Conv", ["x", "w1"], ["a"]), helper.make_node("Relu", ["a"], ["ra"]),
             helper.make_node("Conv", ["ra", "w2", "b2"], ["main"], pads=[1, 1, 1, 1]),
             helper.make_node("Conv", ["x", "ws"], ["short"]),
             helper.make_node("Add", ["short", "main"] if swap else ["main", "short"], ["out"])]
    inits = {"w1": r(6, 3, 1, 1), "w2": r(5, 6, 3, 3), "b2": r(5), "ws": r(5, 3, 1, 1)}
    graph = check(build(nodes, {"x": ["N", 3, 5, 4]}, ["out"], inits), {"x": r(2, 3, 5, 4)}, ["Conv"] * 3)
    fused = graph.nodes[-1]
    assert fused.outputs == ["out"] and fused.inputs[3] == ("main" if swap else "short")


def test_residual_add_not_folded():
    conv = helper.make_node("Conv", ["x", "w"], ["y"])
    add = helper.make_node("Add", ["y", "r"], ["out"])
    inits = {"w": r(4, 3, 1, 1)}
    x = r(2, 3, 5, 5)
    # the residual broadcasts (per channel, or along the batch), or its shape is unknown or another size
    for r_shape in ([1, 4, 1, 1], [1, 4, 5, 5], ["M", 4, 5, 5], None):
        feed = r(*(1 if isinstance(d, str) else d for d in r_shape)) if r_shape else r(2, 4, 5, 5)
        model = build([conv, add], {"x": ["N", 3, 5, 5], "r": r_shape}, ["out"], inits)
        check(model, {"x": x, "r": feed}, ["Conv", "Binary"])
    # the conv output is also a graph output
    model = build([conv, add], {"x": [2, 3, 5, 5], "r": [2, 4, 5, 5]}, ["out", "y"], inits)
    check(model, {"x": x, "r": r(2, 4, 5, 5)}, ["Conv", "Binary"])
    # an activation between Conv and Add (it fuses into the Conv; the Add stays)
    nodes = [conv, helper.make_node("Relu", ["y"], ["ry"]), helper.make_node("Add", ["ry", "r"], ["out"])]
    model = build(nodes, {"x": [2, 3, 5, 5], "r": [2, 4, 5, 5]}, ["out"], inits)
    check(model, {"x": x, "r": r(2, 4, 5, 5)}, ["Conv", "Binary"])


# ------------------------------------------------------------------------------- zero Pad -> Conv
@pytest.mark.parametrize(("pads", "axes"), [([0, 0, 1, 2, 0, 0, 2, 0], None), ([1, 0, 0, 3], [-2, 3])])
def test_zero_pad_folds_into_conv_pads(pads, axes):
    inputs = ["x", "pads", "", "axes"] if axes else ["x", "pads"]
    pad = helper.make_node("Pad", inputs, ["p"], mode="constant")
    conv = helper.make_node("Conv", ["p", "w", "b"], ["y"], pads=[1, 0, 0, 1])
    inits = {"w": r(4, 3, 3, 2), "b": r(4), "pads": np.array(pads, np.int64)}
    if axes:
        inits["axes"] = np.array(axes, np.int64)
    graph = check(build([pad, conv], {"x": [2, 3, 6, 5]}, ["y"], inits, opset=18), {"x": r(2, 3, 6, 5)}, ["Conv"])
    assert graph.nodes[0].inputs[0] == "x"


@pytest.mark.parametrize(("mode", "pads", "fill"), [
    ("reflect", [0, 0, 1, 1, 0, 0, 1, 1], None),    # not zeros at the border
    ("constant", [0, 0, 1, 1, 0, 0, 1, 1], 0.5),    # a fill value the conv's padding cannot give
    ("constant", [0, 1, 0, 0, 0, 1, 0, 0], None),   # pads channels
    ("constant", [0, 0, -1, 0, 0, 0, 0, 0], None),  # crops
])
def test_pad_that_conv_padding_cannot_express_stays(mode, pads, fill):
    inputs = ["x", "pads"] + (["fill"] if fill is not None else [])
    pad = helper.make_node("Pad", inputs, ["p"], mode=mode)
    channels = 3 + pads[1] + pads[5]
    conv = helper.make_node("Conv", ["p", "w"], ["y"])
    inits = {"w": r(2, channels, 2, 2), "pads": np.array(pads, np.int64)}
    if fill is not None:
        inits["fill"] = np.array(fill, np.float32)
    check(build([pad, conv], {"x": [1, 3, 5, 5]}, ["y"], inits, opset=18), {"x": r(1, 3, 5, 5)}, ["Pad", "Conv"])


def test_zero_pad_before_a_conv_with_malformed_pads():
    """A Conv whose pads have the wrong length keeps its Pad through the optimizer (found by the
    fuzzer: the fold read past the list), and the session names the Conv and its pads."""
    pad = helper.make_node("Pad", ["x", "pads"], ["p"], mode="constant")
    conv = helper.make_node("Conv", ["p", "w"], ["y"], pads=[0, 0, 0])
    inits = {"w": r(2, 3, 3, 3), "pads": np.array([0, 0, 1, 1, 0, 0, 1, 1], np.int64)}
    converted = wgnn.convert(build([pad, conv], {"x": [1, 3, 5, 5]}, ["y"], inits, opset=18))
    assert [n.op_type for n in converted.graph.nodes] == ["Pad", "Conv"]
    with pytest.raises(wgnn.ShapeError, match=r"Conv node .*pads \[0, 0, 0\] should have 4 entries"):
        wgnn.InferenceSession(converted, providers=["numpy"]).run(None, {"x": r(1, 3, 5, 5)})


# ------------------------------------------------------- more activations in conv/matmul epilogues
@pytest.mark.parametrize(("op", "attrs", "opset"), [
    ("Gelu", {}, 20), ("Gelu", {"approximate": "tanh"}, 20), ("Elu", {"alpha": 0.7}, 17),
    ("Selu", {"gamma": 1.2}, 17), ("Celu", {"alpha": 1.3}, 17), ("Mish", {}, 18), ("Softsign", {}, 17)])
@pytest.mark.parametrize("host", ["MatMul", "Conv", "ConvTranspose"])
def test_activation_fused_into_every_host_on_every_backend(op, attrs, opset, host):
    from helpers import check_model

    shapes = {"MatMul": ((2, 5, 6), (6, 7)), "Conv": ((2, 5, 6, 7), (6, 5, 3, 3)),
              "ConvTranspose": ((2, 5, 6, 7), (5, 6, 3, 3))}[host]
    x, w = r(*shapes[0]), r(*shapes[1])
    host_attrs = {"Conv": {"pads": [1, 1, 1, 1]}, "ConvTranspose": {"strides": [2, 2]}}.get(host, {})
    nodes = [helper.make_node(host, ["x", "w"], ["y"], **host_attrs), helper.make_node(op, ["y"], ["z"], **attrs)]
    model = build(nodes, {"x": list(x.shape)}, ["z"], {"w": w}, opset=opset)
    assert [n.op_type for n in wgnn.convert(model).graph.nodes] == [host]
    check_model(model, {"x": x}, reference="ort", rtol=1e-4, atol=1e-4)  # numpy and every GPU adapter


# ----------------------------------------------------------------------- residual Add -> MatMul
def _linear_residual(x_shape, k: int, n: int, r_shape, *, swap=False, gemm=False, relu=False, extra_outputs=()):
    """x @ w + bias (MatMul + Add, or Gemm with C), then Add with the graph input r [then Relu]."""
    if gemm:
        nodes = [helper.make_node("Gemm", ["x", "w", "bias"], ["z"], transB=1, alpha=0.5, beta=2.0)]
        inits = {"w": r(n, k), "bias": r(n)}
    else:
        nodes = [helper.make_node("MatMul", ["x", "w"], ["y"]), helper.make_node("Add", ["y", "bias"], ["z"])]
        inits = {"w": r(k, n), "bias": r(n)}
    nodes.append(helper.make_node("Add", ["r", "z"] if swap else ["z", "r"], ["s"]))
    if relu:
        nodes.append(helper.make_node("Relu", ["s"], ["out"]))
    return build(nodes, {"x": x_shape, "r": r_shape}, ["out" if relu else "s", *extra_outputs], inits)


def _concrete(shape, sizes):
    return tuple(sizes[d] if isinstance(d, str) else d for d in shape)


@pytest.mark.parametrize("swap", [False, True])
@pytest.mark.parametrize(("x_shape", "n"), [
    (["B", "S", 6], 7),  # batch > 1 at run time, N = 7: not a multiple of 4 or 8
    ([2, 5, 6], 13),
    ([6], 5),  # 1-D x: the output (and so r) is (N,)
])
def test_residual_add_folds_into_matmul_with_bias(x_shape, n, swap):
    """The transformer pattern: the bias already folded into C, then the residual becomes input 3
    (C stays as it is), and a following Relu applies after the residual."""
    from helpers import check_model

    out_shape = x_shape[:-1] + [n]
    model = _linear_residual(x_shape, 6, n, out_shape, swap=swap, relu=True)
    sizes = {"B": 3, "S": 5}
    feeds = {"x": r(*_concrete(x_shape, sizes)), "r": r(*_concrete(out_shape, sizes))}
    node = check(model, feeds, ["MatMul"]).nodes[0]
    assert node.inputs[:2] == ["x", "w"] and node.inputs[2] and node.inputs[3] == "r"
    assert node.attrs["activation"] == "relu" and node.outputs == ["out"]
    check_model(model, feeds, reference="ort", rtol=1e-4, atol=1e-5)  # numpy and every GPU adapter, no fallback


def test_residual_add_folds_into_gemm_keeping_alpha_beta_and_c():
    from helpers import check_model

    model = _linear_residual([4, 9], 9, 11, [4, 11], gemm=True)
    feeds = {"x": r(4, 9), "r": r(4, 11)}
    node = check(model, feeds, ["MatMul"]).nodes[0]
    assert node.inputs == ["x", "w", "bias", "r"]
    assert node.attrs["alpha"] == 0.5 and node.attrs["beta"] == 2.0 and node.attrs["trans_b"] == 1
    check_model(model, feeds, reference="ort", rtol=1e-4, atol=1e-5)


def test_residual_add_into_matmul_without_c_takes_input_3():
    """Without a C the converter makes a full-shape addend the bias (fusion_matmul); the residual
    pass run on its own leaves C absent ("") and takes r as input 3."""
    from wgnn.engine.graph import Graph, Model, Node, TensorInfo
    from wgnn.tools.convert.fusion import fold_residual_add

    nodes = [Node("MatMul", ["a", "b"], ["y"], {"trans_b": 1}, name="mm"),
             Node("Binary", ["res", "y"], ["s"], {"kind": "add"}, name="add")]
    inputs = [TensorInfo("a", "float32", ("B", 4, 5)), TensorInfo("res", "float32", ("B", 4, 3))]
    graph = Graph(nodes=nodes, inputs=inputs, outputs=[TensorInfo("s", "float32")], initializers={"b": r(3, 5)})
    fold_residual_add(graph)
    assert [(n.op_type, n.inputs, n.outputs) for n in graph.nodes] == [("MatMul", ["a", "b", "", "res"], ["s"])]
    a, res = r(2, 4, 5), r(2, 4, 3)
    got = wgnn.InferenceSession(Model(graph), providers=["numpy"]).run(None, {"a": a, "res": res})[0]
    np.testing.assert_allclose(got, a @ graph.initializers["b"].T + res, rtol=1e-5, atol=1e-6)
    # the whole converter: one MatMul either way
    model = build([helper.make_node("MatMul", ["x", "w"], ["y"]), helper.make_node("Add", ["y", "r"], ["s"])],
                  {"x": [2, 4, 5], "r": [2, 4, 3]}, ["s"], {"w": r(5, 3)})
    check(model, {"x": r(2, 4, 5), "r": r(2, 4, 3)}, ["MatMul"])


def test_residual_add_moves_the_matmul_after_the_residual_producer():
    """r computed after the MatMul in the node order: the fused MatMul takes the Add's place."""
    nodes = [helper.make_node("MatMul", ["x", "w"], ["y"]), helper.make_node("Add", ["y", "bias"], ["z"]),
             helper.make_node("MatMul", ["x", "w2"], ["other"]), helper.make_node("Sigmoid", ["other"], ["sig"]),
             helper.make_node("Add", ["z", "sig"], ["s"])]
    model = build(nodes, {"x": [3, 2, 6]}, ["s"], {"w": r(6, 7), "bias": r(7), "w2": r(6, 7)})
    graph = check(model, {"x": r(3, 2, 6)}, ["MatMul", "MatMul"])
    first, last = graph.nodes
    assert first.attrs["activation"] == "sigmoid" and last.inputs[3] == first.outputs[0] and last.outputs == ["s"]


def test_residual_add_not_folded_into_matmul():
    x, sizes = r(2, 5, 6), {"B": 2, "S": 5, "T": 5}
    # r broadcasts onto the output (along the batch, or along the rows), or its rows are another
    # symbolic dim (equal at run time here, but not provably), or its shape is unknown
    for r_shape in ([1, 5, 7], [2, 1, 7], [5, 7], ["B", "T", 7], None):
        model = _linear_residual(["B", "S", 6], 6, 7, r_shape)
        feed = r(*_concrete(r_shape, sizes)) if r_shape is not None else r(2, 5, 7)
        check(model, {"x": x, "r": feed}, ["MatMul", "Binary"])
    # the MatMul's output has a second reader: a graph output, or another node
    model = _linear_residual([2, 5, 6], 6, 7, [2, 5, 7], extra_outputs=("z",))
    check(model, {"x": x, "r": r(2, 5, 7)}, ["MatMul", "Binary"])
    nodes = [helper.make_node("MatMul", ["x", "w"], ["y"]), helper.make_node("Add", ["y", "bias"], ["z"]),
             helper.make_node("Add", ["z", "r"], ["s"]), helper.make_node("MatMul", ["z", "w2"], ["t"])]
    model = build(nodes, {"x": [2, 5, 6], "r": [2, 5, 7]}, ["s", "t"], {"w": r(6, 7), "bias": r(7), "w2": r(7, 3)})
    check(model, {"x": x, "r": r(2, 5, 7)}, ["MatMul", "Binary", "MatMul"])
    # an activation between MatMul and Add (it fuses into the MatMul; the Add stays)
    nodes = [helper.make_node("MatMul", ["x", "w"], ["y"]), helper.make_node("Add", ["y", "bias"], ["z"]),
             helper.make_node("Tanh", ["z"], ["tz"]), helper.make_node("Add", ["tz", "r"], ["s"])]
    model = build(nodes, {"x": [2, 5, 6], "r": [2, 5, 7]}, ["s"], {"w": r(6, 7), "bias": r(7)})
    check(model, {"x": x, "r": r(2, 5, 7)}, ["MatMul", "Binary"])
