"""ONNX ops defined as functions of other ops (Attention, RotaryEmbedding, Swish, SwiGLU, the
window functions, ...) and model-local functions: the converter expands them into their bodies
(tools/convert/onnx/functions.py). Checked on the ONNX node tests of those ops, on numpy and the
first GPU adapter, and on models built here."""
from __future__ import annotations

import numpy as np
import onnx
import pytest
from helpers import gpu_adapters, session_for
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator
from wgnn.engine.errors import UnsupportedOpError

import wgnn

EXPANDED_OPS = {"Attention", "RotaryEmbedding", "Swish", "SwiGLU", "HannWindow", "HammingWindow", "BlackmanWindow",
                "CenterCropPad", "DynamicQuantizeLinear", "NegativeLogLikelihoodLoss", "SoftmaxCrossEntropyLoss",
                "LinearAttention", "CausalConvWithState"}
TARGETS = ["numpy"] + [f"wgpu:{a['index']}" for a in gpu_adapters()[:1]]


@pytest.fixture(scope="module")
def node_runs():
    """The node tests of the expanded ops (not their _expanded twins, which use the body's ops
    already), run as `wgnn conform` runs them."""
    from wgnn.tools.conform.runner import Target, claimed_ops, run_case
    from wgnn.tools.conform.sources import node_cases

    targets = [Target("numpy", "numpy")] + [Target(t, "wgpu", int(t.split(":")[1])) for t in TARGETS[1:]]
    cases = [c for c in node_cases() if c.op in EXPANDED_OPS and not c.name.endswith("_expanded")]
    claimed = claimed_ops()
    return [run_case(case, targets, claimed) for case in cases]


def test_node_tests_of_expanded_ops(node_runs):
    """No failure or error anywhere; every case runs but those in bfloat16 (no wgnn dtype) and
    Bernoulli's (its body draws with RandomUniformLike, which wgnn does not run)."""
    ran = {}
    for run in node_runs:
        for target, result in run.results.items():
            assert result.outcome in ("pass", "fallback", "unsupported"), (run.case.name, target, result.error)
            if result.outcome == "unsupported":
                assert "BFLOAT16" in result.error or run.case.op == "Bernoulli", (run.case.name, result.error)
            else:
                ran.setdefault(run.case.op, set()).add(run.case.name)
    assert set(ran) == EXPANDED_OPS - {"Bernoulli"}
    assert len(ran["Attention"]) >= 80 and len(ran["RotaryEmbedding"]) >= 8, {op: len(v) for op, v in ran.items()}


def attention_model(q_heads=4, kv_heads=2, causal=1, opset=23):
    """3-D Q, K, V (batch, sequence, heads x 8) with grouped key/value heads and a causal mask."""
    vi = helper.make_tensor_value_info
    node = helper.make_node("Attention", ["Q", "K", "V"], ["Y"], q_num_heads=q_heads, kv_num_heads=kv_heads,
                            is_causal=causal)
    graph = helper.make_graph([node], "attention", [vi("Q", TensorProto.FLOAT, [2, 5, q_heads * 8]),
                                                    vi("K", TensorProto.FLOAT, [2, 6, kv_heads * 8]),
                                                    vi("V", TensorProto.FLOAT, [2, 6, kv_heads * 8])],
                              [vi("Y", TensorProto.FLOAT, None)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


@pytest.mark.parametrize("target", TARGETS)
def test_attention_runs_and_leaves_the_callers_model_alone(target):
    model = attention_model()
    before = model.SerializeToString()
    rng = np.random.default_rng(0)
    feeds = {"Q": rng.standard_normal((2, 5, 32), np.float32), "K": rng.standard_normal((2, 6, 16), np.float32),
             "V": rng.standard_normal((2, 6, 16), np.float32)}
    (want,) = ReferenceEvaluator(model).run(None, feeds)
    (got,) = session_for(wgnn.convert(model), target).run(None, feeds)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    assert model.SerializeToString() == before


def test_window_default_attributes_and_nested_functions():
    """HannWindow without `periodic` (its body reads it by reference: the schema's default is
    written on the call) and SwiGLU at opset 28, whose body calls Swish, a body kept from 24."""
    vi = helper.make_tensor_value_info
    window = helper.make_graph([helper.make_node("HannWindow", ["n"], ["w"])], "window",
                               [vi("n", TensorProto.INT64, [])], [vi("w", TensorProto.FLOAT, None)])
    model = helper.make_model(window, opset_imports=[helper.make_opsetid("", 17)])
    feeds = {"n": np.array(10, np.int64)}
    np.testing.assert_allclose(wgnn.InferenceSession(model, providers=["numpy"]).run(None, feeds)[0],
                               ReferenceEvaluator(model).run(None, feeds)[0], rtol=1e-6, atol=1e-6)
    glu = helper.make_graph([helper.make_node("SwiGLU", ["a", "b"], ["y"], alpha=1.5)], "glu",
                            [vi("a", TensorProto.FLOAT, [3, 4]), vi("b", TensorProto.FLOAT, [3, 4])],
                            [vi("y", TensorProto.FLOAT, None)])
    model = helper.make_model(glu, opset_imports=[helper.make_opsetid("", 28)])
    rng = np.random.default_rng(1)
    feeds = {"a": rng.standard_normal((3, 4), np.float32), "b": rng.standard_normal((3, 4), np.float32)}
    want = feeds["a"] / (1 + np.exp(-1.5 * feeds["a"])) * feeds["b"]
    np.testing.assert_allclose(wgnn.InferenceSession(model, providers=["numpy"]).run(None, feeds)[0], want,
                               rtol=1e-5, atol=1e-6)


def test_model_local_function_is_inlined():
    """A function the model defines itself (domain "custom"), called twice, with an attribute it
    reads by reference: f(a) = LeakyRelu(a * a - 2, alpha)."""
    vi = helper.make_tensor_value_info
    body = [helper.make_node("Constant", [], ["k"], value_float=2.0),
            helper.make_node("Mul", ["a", "a"], ["sq"]),
            helper.make_node("Sub", ["sq", "k"], ["shifted"]),
            helper.make_node("LeakyRelu", ["shifted"], ["out"])]
    body[3].attribute.append(helper.make_attribute_ref("alpha", onnx.AttributeProto.FLOAT))
    function = helper.make_function("custom", "SquareLeaky", ["a"], ["out"], body,
                                    [helper.make_opsetid("", 18)], attributes=["alpha"])
    graph = helper.make_graph([helper.make_node("SquareLeaky", ["x"], ["h"], domain="custom", alpha=0.5),
                               helper.make_node("Neg", ["h"], ["n"]),
                               helper.make_node("SquareLeaky", ["n"], ["y"], domain="custom", alpha=0.25)],
                              "local", [vi("x", TensorProto.FLOAT, [4])], [vi("y", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, functions=[function],
                              opset_imports=[helper.make_opsetid("", 18), helper.make_opsetid("custom", 1)])
    x = np.array([-2.0, -0.5, 0.5, 3.0], np.float32)

    def f(a, alpha):
        s = a * a - 2
        return np.where(s >= 0, s, alpha * s)

    np.testing.assert_allclose(wgnn.InferenceSession(model, providers=["numpy"]).run(None, {"x": x})[0],
                               f(-f(x, 0.5), 0.25), rtol=1e-6)


def test_ops_without_a_body_are_still_listed_unsupported():
    vi = helper.make_tensor_value_info
    graph = helper.make_graph([helper.make_node("Swish", ["x"], ["s"]), helper.make_node("Unique", ["s"], ["y"])],
                              "mixed", [vi("x", TensorProto.FLOAT, [4])], [vi("y", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 24)])
    with pytest.raises(UnsupportedOpError) as info:
        wgnn.convert(model)
    assert info.value.op_counts == {"Unique": 1}
    # An op whose body needs one wgnn lacks: the message names both.
    graph = helper.make_graph([helper.make_node("Bernoulli", ["x"], ["y"])], "coin",
                              [vi("x", TensorProto.FLOAT, [4])], [vi("y", TensorProto.FLOAT, None)])
    with pytest.raises(UnsupportedOpError, match=r"RandomUniformLike \(1 node\) \(in the ONNX function bodies of "
                                                 r"Bernoulli\)"):
        wgnn.convert(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 22)]))


def test_body_from_an_older_opset():
    """RotaryEmbedding's body is of opset 23: a model of opset 24 gets it too (read at 24)."""
    vi = helper.make_tensor_value_info
    rng = np.random.default_rng(2)
    cos, sin = rng.standard_normal((5, 4), np.float32), rng.standard_normal((5, 4), np.float32)
    graph = helper.make_graph(
        [helper.make_node("RotaryEmbedding", ["x", "cos", "sin", "pos"], ["y"], num_heads=2)], "rope",
        [vi("x", TensorProto.FLOAT, [1, 5, 16]), vi("pos", TensorProto.INT64, [1, 5])],
        [vi("y", TensorProto.FLOAT, None)],
        [onnx.numpy_helper.from_array(cos, "cos"), onnx.numpy_helper.from_array(sin, "sin")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 24)])
    feeds = {"x": rng.standard_normal((1, 5, 16), np.float32), "pos": np.array([[4, 0, 2, 1, 3]], np.int64)}
    (want,) = ReferenceEvaluator(model).run(None, feeds)
    for target in TARGETS:
        np.testing.assert_allclose(session_for(model, target).run(None, feeds)[0], want, rtol=1e-5, atol=1e-6)
