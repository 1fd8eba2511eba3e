"""Converter passes of tools/convert/fusion_matmul.py: a scalar Div/Mul folded into MatMul's alpha,
an Add of a broadcasting tensor folded into MatMul's C, and Erf-GELU recognised (and then fused
into its MatMul). Each case checks the nodes left and that the result still matches onnxruntime
on the numpy backend and on every GPU adapter."""
import math

import numpy as np
import onnxruntime as ort
import pytest
from helpers import gpu_adapters, session_for
from onnx import TensorProto, helper, numpy_helper
from wgnn.models import zoo
from wgnn.models.format import model_to_bytes

import wgnn

rng = np.random.default_rng(3)
FLOAT = TensorProto.FLOAT
BACKENDS = ["numpy"] + [f"wgpu:{a['index']}" for a in gpu_adapters()]


def r(*shape):
    return rng.standard_normal(shape).astype(np.float32)


def build(nodes, inputs: dict, outputs: list[str], initializers: dict):
    graph = helper.make_graph(
        nodes, "fusion_matmul",
        [helper.make_tensor_value_info(name, FLOAT, shape) for name, shape in inputs.items()],
        [helper.make_tensor_value_info(name, FLOAT, None) for name in outputs],
        [numpy_helper.from_array(np.asarray(value, np.float32), name) for name, value in initializers.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def check(model, feeds: dict, expected_ops: list[str]):
    """Converted op types are expected_ops; every backend (from the ONNX and the .wgnn bytes)
    matches onnxruntime on the original model. Returns the converted graph."""
    converted = wgnn.convert(model)
    assert [n.op_type for n in converted.graph.nodes] == expected_ops
    data = model.SerializeToString()
    want = ort.InferenceSession(data, providers=["CPUExecutionProvider"]).run(None, feeds)
    for backend in BACKENDS:
        for source in (data, model_to_bytes(converted)):
            got = session_for(source, backend).run(None, feeds)
            for g, w in zip(got, want, strict=True):
                np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5, err_msg=backend)
    return converted.graph


# ----------------------------------------------------------------------------- scale -> alpha
@pytest.mark.parametrize("kind, scale_first", [("Div", False), ("Mul", False), ("Mul", True)])
def test_scalar_scale_folds_into_alpha(kind, scale_first):
    operands = ["s", "p"] if scale_first else ["p", "s"]
    nodes = [helper.make_node("MatMul", ["a", "b"], ["p"]), helper.make_node(kind, operands, ["y"])]
    graph = check(build(nodes, {"a": [2, 3, 5, 7], "b": [2, 3, 7, 6]}, ["y"], {"s": 2.5}),
                  {"a": r(2, 3, 5, 7), "b": r(2, 3, 7, 6)}, ["MatMul"])
    assert graph.nodes[0].attrs["alpha"] == pytest.approx(1 / 2.5 if kind == "Div" else 2.5)


def test_scale_also_scales_the_bias():
    nodes = [helper.make_node("Gemm", ["a", "w", "c"], ["p"], alpha=0.5, beta=2.0),
             helper.make_node("Div", ["p", "s"], ["y"])]
    graph = check(build(nodes, {"a": [3, 5]}, ["y"], {"w": r(5, 9), "c": r(9), "s": 4.0}), {"a": r(3, 5)}, ["MatMul"])
    attrs = graph.nodes[0].attrs
    assert attrs["alpha"] == pytest.approx(0.125) and attrs["beta"] == pytest.approx(0.5)


def test_scale_is_not_folded_where_it_would_change_the_result():
    mm = helper.make_node("MatMul", ["a", "b"], ["p"])
    feeds = {"a": r(4, 5), "b": r(5, 3)}
    # a one-element constant with more axes than the product enlarges it
    check(build([mm, helper.make_node("Div", ["p", "s"], ["y"])], {"a": [4, 5], "b": [5, 3]}, ["y"],
                {"s": np.full((1, 1, 1), 2.0)}), feeds, ["MatMul", "Binary"])
    # scalar / product is no scale of the product
    check(build([mm, helper.make_node("Div", ["s", "p"], ["y"])], {"a": [4, 5], "b": [5, 3]}, ["y"], {"s": 2.0}),
          feeds, ["MatMul", "Binary"])
    # the product is read elsewhere too
    nodes = [mm, helper.make_node("Mul", ["p", "s"], ["y"]), helper.make_node("Relu", ["p"], ["z"])]
    check(build(nodes, {"a": [4, 5], "b": [5, 3]}, ["y", "z"], {"s": 2.0}), feeds, ["MatMul", "Binary", "Unary"])
    # the epilogue scales before the activation: Relu(p) * s keeps its Mul (the Relu fuses)
    nodes = [mm, helper.make_node("Relu", ["p"], ["q"]), helper.make_node("Mul", ["q", "s"], ["y"])]
    graph = check(build(nodes, {"a": [4, 5], "b": [5, 3]}, ["y"], {"s": -2.0}), feeds, ["MatMul", "Binary"])
    assert graph.nodes[0].attrs["activation"] == "relu" and graph.nodes[0].attrs.get("alpha", 1.0) == 1.0


# -------------------------------------------------------------------------------- Add -> C
def test_attention_mask_add_becomes_the_bias():
    """scores / sqrt(d) + mask[B, 1, 1, S]: one MatMul with alpha and a broadcast C."""
    nodes = [helper.make_node("MatMul", ["q", "k"], ["scores"]), helper.make_node("Div", ["scores", "d"], ["scaled"]),
             helper.make_node("Add", ["scaled", "mask"], ["y"])]
    model = build(nodes, {"q": [2, 3, 5, 4], "k": [2, 3, 4, 5], "mask": [2, 1, 1, 5]}, ["y"], {"d": 2.0})
    feeds = {"q": r(2, 3, 5, 4), "k": r(2, 3, 4, 5), "mask": r(2, 1, 1, 5)}
    graph = check(model, feeds, ["MatMul"])
    assert graph.nodes[0].inputs == ["q", "k", "mask"] and graph.nodes[0].attrs["alpha"] == pytest.approx(0.5)


def test_add_folds_when_its_tensor_is_produced_after_the_matmul():
    nodes = [helper.make_node("MatMul", ["a", "b"], ["p"]), helper.make_node("Sigmoid", ["t"], ["u"]),
             helper.make_node("Add", ["u", "p"], ["y"])]
    graph = check(build(nodes, {"a": [3, 5, 7], "b": [7, 6], "t": [5, 1]}, ["y"], {}),
                  {"a": r(3, 5, 7), "b": r(7, 6), "t": r(5, 1)}, ["Unary", "MatMul"])
    assert graph.nodes[1].inputs == ["a", "b", "u"]


def test_add_is_not_folded_where_c_cannot_take_it():
    feeds = {"a": r(4, 5), "b": r(5, 3), "t": r(2, 4, 3)}
    mm = helper.make_node("MatMul", ["a", "b"], ["p"])
    # t enlarges the product
    check(build([mm, helper.make_node("Add", ["p", "t"], ["y"])], {"a": [4, 5], "b": [5, 3], "t": [2, 4, 3]},
                ["y"], {}), feeds, ["MatMul", "Binary"])
    # a Gemm with its own C keeps the Add (a broadcasting t is no residual either)
    gemm = helper.make_node("Gemm", ["a", "b", "c"], ["p"])
    check(build([gemm, helper.make_node("Add", ["p", "t"], ["y"])], {"a": [4, 5], "b": [5, 3], "t": [1, 3]}, ["y"],
                {"c": r(3)}), {"a": r(4, 5), "b": r(5, 3), "t": r(1, 3)}, ["MatMul", "Binary"])


# ------------------------------------------------------------------------------------ GELU
def gelu_nodes(association: str, divide: bool = True) -> tuple[list, dict]:
    """x = a @ w, then x * 0.5 * (1 + erf(x / sqrt 2)) in the given association."""
    scale = (helper.make_node("Div", ["x", "root2"], ["u"]) if divide
             else helper.make_node("Mul", ["inv_root2", "x"], ["u"]))
    nodes = [helper.make_node("MatMul", ["a", "w"], ["x"]), scale, helper.make_node("Erf", ["u"], ["e"]),
             helper.make_node("Add", ["one", "e"], ["e1"])]
    if association == "x_then_half":  # (x * (1 + erf)) * 0.5
        nodes += [helper.make_node("Mul", ["x", "e1"], ["m"]), helper.make_node("Mul", ["m", "half"], ["y"])]
    elif association == "half_x_first":  # (x * 0.5) * (1 + erf)
        nodes += [helper.make_node("Mul", ["half", "x"], ["m"]), helper.make_node("Mul", ["e1", "m"], ["y"])]
    else:  # x * ((1 + erf) * 0.5)
        nodes += [helper.make_node("Mul", ["e1", "half"], ["m"]), helper.make_node("Mul", ["x", "m"], ["y"])]
    inits = {"w": r(6, 9), "root2": math.sqrt(2.0), "inv_root2": 1 / math.sqrt(2.0), "one": 1.0, "half": 0.5}
    return nodes, inits


@pytest.mark.parametrize("association", ["x_then_half", "half_x_first", "half_inside"])
@pytest.mark.parametrize("divide", [True, False])
def test_erf_gelu_becomes_the_matmuls_activation(association, divide):
    nodes, inits = gelu_nodes(association, divide)
    graph = check(build(nodes, {"a": [2, 3, 6]}, ["y"], inits), {"a": r(2, 3, 6)}, ["MatMul"])
    assert graph.nodes[0].attrs["activation"] == "gelu"


def test_near_gelu_is_left_alone():
    nodes, inits = gelu_nodes("x_then_half")
    inits["half"] = 0.49
    check(build(nodes, {"a": [2, 3, 6]}, ["y"], inits), {"a": r(2, 3, 6)}, ["MatMul", "FusedElementwise"])
    nodes, inits = gelu_nodes("x_then_half")
    nodes.append(helper.make_node("Neg", ["e1"], ["seen"]))  # an intermediate read outside the pattern
    check(build(nodes, {"a": [2, 3, 6]}, ["y", "seen"], inits), {"a": r(2, 3, 6)},
          ["MatMul", "FusedElementwise", "FusedElementwise", "Unary"])


def test_zoo_bert_attention_scores_and_gelu_fold_into_matmuls():
    model = zoo.build("bert")
    graph = wgnn.convert(model).graph
    activations = [n.attrs.get("activation") for n in graph.nodes if n.op_type == "MatMul"]
    assert activations.count("gelu") == 2
    scores = [n for n in graph.nodes if n.op_type == "MatMul" and n.attrs.get("alpha", 1.0) != 1.0]
    assert len(scores) == 2 and all(n.input(2) for n in scores)  # alpha 1/sqrt(d) and the mask as C
    feeds = zoo.example_inputs(model, batch=2, seq=5)
    feeds["attention_mask"][1, 3:] = 0
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)
    for backend in BACKENDS:
        got = session_for(model, backend).run(None, feeds)
        np.testing.assert_allclose(got[0], want[0], rtol=1e-4, atol=2e-5, err_msg=backend)
