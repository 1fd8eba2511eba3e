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
    # alpha 1/sqrt(d) and the mask as C, carried into the Attention op the scores MatMul became
    attention = [n for n in graph.nodes if n.op_type == "Attention"]
    assert len(attention) == 2 and all(n.attrs["alpha"] != 1.0 and len(n.inputs) == 4 for n in attention)
    feeds = zoo.example_inputs(model, batch=2, seq=5)
    feeds["attention_mask"][1, 3:] = 0
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)
    for backend in BACKENDS:
        got = session_for(model, backend).run(None, feeds)
        np.testing.assert_allclose(got[0], want[0], rtol=1e-4, atol=2e-5, err_msg=backend)


# ------------------------------------------------------------------------- Transpose -> perm
def test_attention_transposes_fold_into_the_matmuls():
    """Split heads: Reshape, then Transpose of Q (0, 2, 1, 3) and K (0, 2, 3, 1), read by the scores
    MatMul (scaled, with an additive mask: its epilogue stays), and V's by the context MatMul."""
    b, s, heads, d = 2, 5, 3, 4
    shape = np.array([b, s, heads, d], np.int64)
    nodes = [helper.make_node("Reshape", [x, "shape"], [f"{x}4"]) for x in ("q", "k", "v")]
    nodes += [helper.make_node("Transpose", ["q4"], ["qt"], perm=[0, 2, 1, 3]),
              helper.make_node("Transpose", ["k4"], ["kt"], perm=[0, 2, 3, 1]),
              helper.make_node("Transpose", ["v4"], ["vt"], perm=[0, 2, 1, 3]),
              helper.make_node("MatMul", ["qt", "kt"], ["scores"]),
              helper.make_node("Div", ["scores", "scale"], ["scaled"]),
              helper.make_node("Add", ["scaled", "mask"], ["masked"]),
              helper.make_node("Softmax", ["masked"], ["probs"], axis=-1),
              helper.make_node("MatMul", ["probs", "vt"], ["y"])]
    model = build(nodes, {n: [b, s, heads * d] for n in "qkv"} | {"mask": [b, 1, 1, s]}, ["y"], {"scale": 2.0})
    model.graph.initializer.append(numpy_helper.from_array(shape, "shape"))
    feeds = {n: r(b, s, heads * d) for n in "qkv"} | {"mask": r(b, 1, 1, s)}
    graph = check(model, feeds, ["Reshape", "Reshape", "Reshape", "Attention"])
    # The products then became one Attention op (fuse_attention), carrying their permutations.
    attention = graph.nodes[3]
    assert attention.inputs == ["q4", "k4", "v4", "mask"] and attention.attrs["perm_q"] == [0, 2, 1, 3]
    assert attention.attrs["perm_k"] == [0, 2, 3, 1] and attention.attrs["alpha"] == pytest.approx(0.5)
    assert attention.attrs["perm_v"] == [0, 2, 1, 3] and not attention.attrs.get("perm_y")


@pytest.mark.parametrize("perm, a_shape, b_shape", [
    ([2, 0, 1], [5, 3, 4], [4, 3, 6]),  # the batch axis comes from the last: strides that do not merge
    ([1, 0], [6, 5], [6, 7]),  # 2-D, then trans_b on top: B's perm and transpose cancel out
    ([0, 1, 3, 2], [2, 3, 4, 5], [1, 3, 4, 2]),  # B broadcast over the batch
])
def test_transposes_of_any_axes_fold(perm, a_shape, b_shape):
    nodes = [helper.make_node("Transpose", ["a"], ["at"], perm=perm)]
    if len(a_shape) == 2:
        nodes += [helper.make_node("Transpose", ["b"], ["bt"], perm=[1, 0]),
                  helper.make_node("Gemm", ["at", "bt"], ["y"], transB=1)]
    else:
        nodes.append(helper.make_node("MatMul", ["at", "b"], ["y"]))
    graph = check(build(nodes, {"a": a_shape, "b": b_shape}, ["y"], {}), {"a": r(*a_shape), "b": r(*b_shape)},
                  ["MatMul"])
    assert graph.nodes[0].inputs[0] == "a" and graph.nodes[0].attrs["perm_a"] == perm


def test_transposes_read_elsewhere_stay():
    """A Transpose that a second node reads, or that is a graph output, stays a copy."""
    nodes = [helper.make_node("Transpose", ["a"], ["at"], perm=[0, 2, 1]),
             helper.make_node("MatMul", ["at", "b"], ["y"]), helper.make_node("Relu", ["at"], ["z"]),
             helper.make_node("Transpose", ["b"], ["bt"], perm=[0, 2, 1]),
             helper.make_node("MatMul", ["a", "bt"], ["w"])]
    graph = check(build(nodes, {"a": [2, 3, 4], "b": [2, 3, 4]}, ["y", "z", "w", "bt"], {}),
                  {"a": r(2, 3, 4), "b": r(2, 3, 4)}, ["Transpose", "MatMul", "Unary", "Transpose", "MatMul"])
    assert not any(n.attrs.get("perm_a") or n.attrs.get("perm_b") for n in graph.nodes)


def test_a_perm_that_is_no_permutation_is_refused():
    from wgnn.engine.graph import Node

    model = wgnn.convert(build([helper.make_node("MatMul", ["a", "b"], ["y"])], {"a": [2, 3], "b": [3, 4]}, ["y"], {}))
    model.graph.nodes[0].attrs["perm_a"] = [0, 0]
    assert isinstance(model.graph.nodes[0], Node)
    with pytest.raises(wgnn.ShapeError, match=r"perm_a \[0, 0\] is not a permutation of the 2 axes of input 0"):
        wgnn.InferenceSession(model, providers=["numpy"]).run(None, {"a": r(2, 3), "b": r(3, 4)})


def test_zoo_bert_reads_and_writes_heads_through_strides():
    graph = wgnn.convert(zoo.build("bert")).graph
    assert [n.attrs.get("split_y") for n in graph.nodes if n.op_type == "MatMul" and n.attrs.get("split_y")] == [3, 3]
    # Per layer the scores (Q and K) and context (V, then the stored head merge) products, read and
    # written through strides, then one Attention op
    attention = [n for n in graph.nodes if n.op_type == "Attention"]
    assert [(n.attrs["perm_q"], n.attrs["perm_k"], n.attrs["perm_v"], n.attrs["perm_y"]) for n in attention] == \
        [([0, 2, 1, 3], [0, 2, 3, 1], [0, 2, 1, 3], [0, 2, 1, 3])] * 2
    assert not any(n.op_type in ("Transpose", "Softmax") for n in graph.nodes)


# ------------------------------------------------------------------ Transpose of the product -> perm_y
def test_context_transpose_folds_into_the_store():
    """Attention's merge heads: the context product's Transpose (0, 2, 1, 3), then Reshape and the
    output projection (with its bias). The Transpose becomes the context MatMul's perm_y."""
    b, s, heads, d = 2, 5, 3, 4
    nodes = [helper.make_node("MatMul", ["probs", "v"], ["context"]),
             helper.make_node("Transpose", ["context"], ["merged"], perm=[0, 2, 1, 3]),
             helper.make_node("Reshape", ["merged", "shape"], ["flat"]),
             helper.make_node("MatMul", ["flat", "wo"], ["projected"]),
             helper.make_node("Add", ["projected", "bo"], ["y"])]
    model = build(nodes, {"probs": [b, heads, s, s], "v": [b, heads, s, d]}, ["y"],
                  {"wo": r(heads * d, 7), "bo": r(7)})
    model.graph.initializer.append(numpy_helper.from_array(np.array([b, s, heads * d], np.int64), "shape"))
    graph = check(model, {"probs": r(b, heads, s, s), "v": r(b, heads, s, d)}, ["MatMul", "Reshape", "MatMul"])
    context = graph.nodes[0]
    assert context.outputs == ["merged"] and context.attrs["perm_y"] == [0, 2, 1, 3]


@pytest.mark.parametrize("perm, a_shape, b_shape, bias", [
    ([2, 0, 1], [3, 4, 5], [5, 6], [6]),  # N first, a bias folded into C before: it broadcasts over the product
    ([1, 0], [7, 5], [5, 9], [7, 1]),  # a stored transpose (Gemm's bias per row)
    ([0, 2, 1, 3], [2, 3, 4, 5], [3, 5, 4], None),  # B broadcast over the first batch axis
])
def test_transposes_of_the_product_fold(perm, a_shape, b_shape, bias):
    nodes = [helper.make_node("MatMul", ["a", "b"], ["p"])]
    if bias is not None:
        nodes.append(helper.make_node("Add", ["p", "c"], ["pc"]))
    nodes.append(helper.make_node("Transpose", ["pc" if bias is not None else "p"], ["y"], perm=perm))
    model = build(nodes, {"a": a_shape, "b": b_shape}, ["y"], {"c": r(*bias)} if bias is not None else {})
    graph = check(model, {"a": r(*a_shape), "b": r(*b_shape)}, ["MatMul"])
    assert graph.nodes[0].attrs["perm_y"] == perm and graph.nodes[0].outputs == ["y"]


def test_product_transposes_that_cannot_fold_stay():
    """A product another node reads too, a product that is a graph output, and a MatMul with a fused
    residual (added before the Transpose, of the product's shape) keep their Transpose."""
    nodes = [helper.make_node("MatMul", ["a", "b"], ["p1"]), helper.make_node("Relu", ["p1"], ["z"]),
             helper.make_node("Transpose", ["p1"], ["y1"], perm=[0, 2, 1]),
             helper.make_node("MatMul", ["a", "b"], ["p2"]),
             helper.make_node("Transpose", ["p2"], ["y2"], perm=[0, 2, 1]),
             # a constant B and its bias make C; the second Add becomes the residual
             helper.make_node("MatMul", ["a", "w"], ["p3"]), helper.make_node("Add", ["p3", "bias"], ["p3b"]),
             helper.make_node("Add", ["p3b", "res"], ["p3r"]),
             helper.make_node("Transpose", ["p3r"], ["y3"], perm=[0, 2, 1])]
    feeds = {"a": r(2, 3, 4), "b": r(2, 4, 5), "res": r(2, 3, 5)}
    graph = check(build(nodes, {"a": [2, 3, 4], "b": [2, 4, 5], "res": [2, 3, 5]}, ["y1", "z", "y2", "p2", "y3"],
                        {"w": r(4, 5), "bias": r(5)}),
                  feeds, ["MatMul", "Unary", "Transpose", "MatMul", "Transpose", "MatMul", "Transpose"])
    assert not any(n.attrs.get("perm_y") for n in graph.nodes)
    assert graph.nodes[5].inputs[2:] == ["bias", "res"]  # the bias as C, the second Add as the residual


def test_a_perm_y_that_is_no_permutation_is_refused():
    model = wgnn.convert(build([helper.make_node("MatMul", ["a", "b"], ["y"])], {"a": [2, 3], "b": [3, 4]}, ["y"], {}))
    model.graph.nodes[0].attrs["perm_y"] = [1, 0, 2]
    with pytest.raises(wgnn.ShapeError, match=r"perm_y \[1, 0, 2\] is not a permutation of the product's 2 axes"):
        wgnn.InferenceSession(model, providers=["numpy"]).run(None, {"a": r(2, 3), "b": r(3, 4)})


# ------------------------------------------------------------- sibling MatMuls -> one split product
def test_q_k_v_projections_merge_into_one_product():
    """Three Gemm-style projections of one input (one with beta 0.5, one without a bias) become one
    MatMul whose product splits into the three outputs; a MatMul with its bias Add and a plain one
    merge too, their outputs read by later nodes as before."""
    nodes = [helper.make_node("Gemm", ["x", "wq", "bq"], ["q"]),
             helper.make_node("Gemm", ["x", "wk", "bk"], ["k"], beta=0.5),
             helper.make_node("Gemm", ["x", "wv"], ["v"])]
    model = build(nodes, {"x": [6, 8]}, ["q", "k", "v"], {"wq": r(8, 5), "bq": r(5), "wk": r(8, 5), "bk": r(5),
                                                          "wv": r(8, 5)})
    graph = check(model, {"x": r(6, 8)}, ["MatMul"])
    assert graph.nodes[0].attrs["split_y"] == 3 and graph.nodes[0].outputs == ["q", "k", "v"]
    nodes = [helper.make_node("MatMul", ["x", "wq"], ["q0"]), helper.make_node("Add", ["q0", "bq"], ["q"]),
             helper.make_node("MatMul", ["x", "wv"], ["v"]),
             helper.make_node("Softmax", ["q"], ["sq"], axis=-1), helper.make_node("Softmax", ["v"], ["sv"], axis=-1)]
    model = build(nodes, {"x": [2, 6, 8]}, ["sq", "sv"], {"wq": r(8, 5), "bq": r(5), "wv": r(8, 5)})
    graph = check(model, {"x": r(2, 6, 8)}, ["MatMul", "Softmax", "Softmax"])
    assert graph.nodes[0].attrs["split_y"] == 2 and graph.nodes[0].outputs == ["q", "v"]


def test_transposed_weights_merge_along_their_rows():
    nodes = [helper.make_node("Gemm", ["x", f"w{i}", f"b{i}"], [f"y{i}"], transB=1) for i in range(2)]
    model = build(nodes, {"x": [3, 7]}, ["y0", "y1"], {"w0": r(4, 7), "b0": r(4), "w1": r(4, 7), "b1": r(4)})
    graph = check(model, {"x": r(3, 7)}, ["MatMul"])
    assert graph.nodes[0].attrs["trans_b"] == 1 and graph.initializers[graph.nodes[0].inputs[1]].shape == (8, 7)


def test_siblings_merge_three_at_a_time_and_only_alike():
    """Five alike siblings: a product of three and one of two. Different weight shapes, a different
    activation or a different A stay apart."""
    nodes = [helper.make_node("MatMul", ["x", f"w{i}"], [f"y{i}"]) for i in range(5)]
    nodes += [helper.make_node("MatMul", ["x", "wide"], ["y5"]),
              helper.make_node("MatMul", ["x", "w6"], ["p6"]), helper.make_node("Relu", ["p6"], ["y6"]),
              helper.make_node("MatMul", ["z", "w7"], ["y7"])]
    outputs = [f"y{i}" for i in range(8)]
    inits = {f"w{i}": r(4, 3) for i in (0, 1, 2, 3, 4, 6, 7)} | {"wide": r(4, 6)}
    graph = check(build(nodes, {"x": [2, 4], "z": [2, 4]}, outputs, inits), {"x": r(2, 4), "z": r(2, 4)},
                  ["MatMul"] * 5)
    assert [n.attrs.get("split_y", 1) for n in graph.nodes] == [3, 2, 1, 1, 1]
    assert graph.nodes[3].attrs["activation"] == "relu"


def test_a_split_that_does_not_divide_is_refused():
    model = wgnn.convert(build([helper.make_node("MatMul", ["a", "b"], ["y"])], {"a": [2, 3], "b": [3, 4]}, ["y"], {}))
    model.graph.nodes[0].attrs["split_y"] = 3
    with pytest.raises(wgnn.ShapeError, match="split_y 3 does not divide the product's 4 columns"):
        wgnn.InferenceSession(model, providers=["numpy"]).run(None, {"a": r(2, 3), "b": r(3, 4)})
