"""Converter passes that drop nodes handing their input on unchanged (tools/convert/simplify.py),
fold a scalar scale of a MatMul operand into its alpha, and let a node write a graph output an
Identity copied: each case checks the nodes left and the outputs against onnxruntime's, and the
cases where a node must stay."""
import numpy as np
import pytest
from helpers import gpu_adapters, session_for
from onnx import TensorProto, helper
from test_fusion import build, check, r

BOOL = TensorProto.BOOL
TARGETS = ["numpy"] + [f"wgpu:{a['index']}" for a in gpu_adapters()[:1]]


def const(name, value):
    return helper.make_node("Constant", [], [name], value=helper.make_tensor(
        name, helper.np_dtype_to_tensor_dtype(np.asarray(value).dtype), np.shape(value), np.ravel(value)))


@pytest.mark.parametrize(("op", "neutral", "neutral_first"), [
    ("Add", 0.0, True), ("Add", 0.0, False), ("Sub", 0.0, False), ("Mul", 1.0, True), ("Div", 1.0, False)])
def test_neutral_arithmetic_goes(op, neutral, neutral_first):
    value = np.full((1, 4), neutral, np.float32)
    inputs = ["n", "x"] if neutral_first else ["x", "n"]
    nodes = [const("n", value), helper.make_node(op, inputs, ["y"]), helper.make_node("Relu", ["y"], ["z"])]
    check(build(nodes, {"x": [3, 4]}, ["z"], {}), {"x": r(3, 4)}, ["Unary"])


@pytest.mark.parametrize(("op", "value", "inputs"), [
    ("Sub", 0.0, ["n", "x"]),  # 0 - x
    ("Div", 1.0, ["n", "x"]),  # 1 / x
    ("Add", 0.5, ["x", "n"]),
    ("Add", 0.0, ["x", "n"]),  # zeros of a larger shape: broadcasting enlarges x
])
def test_arithmetic_that_changes_its_input_stays(op, value, inputs):
    shape = (2, 3, 4) if value == 0.0 and op == "Add" else (1, 4)
    nodes = [const("n", np.full(shape, value, np.float32)), helper.make_node(op, inputs, ["y"]),
             helper.make_node("Softmax", ["y"], ["z"])]
    graph = check(build(nodes, {"x": [3, 4]}, ["z"], {}), {"x": r(3, 4)}, ["Binary", "Softmax"])
    assert graph.nodes[0].attrs["kind"] == op.lower()


def test_cast_to_its_own_type_and_where_on_a_constant_condition_go():
    nodes = [helper.make_node("Cast", ["x"], ["c"], to=TensorProto.FLOAT),
             const("all_false", np.zeros((3, 1), bool)), const("zero", np.zeros(1, np.float32)),
             helper.make_node("Where", ["all_false", "zero", "c"], ["w"]),
             helper.make_node("Softmax", ["w"], ["z"])]
    check(build(nodes, {"x": [3, 4]}, ["z"], {}), {"x": r(3, 4)}, ["Softmax"])


def test_where_choosing_a_smaller_operand_stays():
    nodes = [const("all_true", np.ones((3, 4), bool)), const("zero", np.zeros(1, np.float32)),
             helper.make_node("Where", ["all_true", "zero", "x"], ["w"]),  # picks zeros, broadcast to (3, 4)
             helper.make_node("Softmax", ["w"], ["z"])]
    check(build(nodes, {"x": [3, 4]}, ["z"], {}), {"x": r(3, 4)}, ["Where", "Softmax"])


def test_heads_repeated_once_go_and_reshapes_back_go():
    """Attention's body for as many key/value heads as query heads: Unsqueeze, Expand by 1,
    Reshape back to the input's shape. With a symbolic batch the shapes still compare equal."""
    nodes = [const("axis", np.array([2], np.int64)), const("to", np.array([2, 3, 1, 5, 4], np.int64)),
             const("back", np.array([-1, 3, 5, 4], np.int64)),
             helper.make_node("Unsqueeze", ["x", "axis"], ["u"]), helper.make_node("Expand", ["u", "to"], ["e"]),
             helper.make_node("Reshape", ["e", "back"], ["b"]), helper.make_node("Relu", ["b"], ["z"])]
    check(build(nodes, {"x": [2, 3, 5, 4]}, ["z"], {}), {"x": r(2, 3, 5, 4)}, ["Unary"])


def test_expand_that_repeats_stays():
    nodes = [const("axis", np.array([2], np.int64)), const("to", np.array([2, 3, 2, 5, 4], np.int64)),
             const("back", np.array([2, 6, 5, 4], np.int64)),
             helper.make_node("Unsqueeze", ["x", "axis"], ["u"]), helper.make_node("Expand", ["u", "to"], ["e"]),
             helper.make_node("Reshape", ["e", "back"], ["b"]), helper.make_node("Relu", ["b"], ["z"])]
    graph = check(build(nodes, {"x": [2, 3, 5, 4]}, ["z"], {}), {"x": r(2, 3, 5, 4)},
                  ["Unsqueeze", "Expand", "Reshape", "Unary"])
    assert graph.nodes[1].op_type == "Expand"


def test_reshape_with_a_copied_dim_keeps_its_input():
    """Reshape's 0 copies a dim of its own input: reading the Unsqueeze's input instead would copy
    another dim, so the pair stays."""
    nodes = [const("axis", np.array([0], np.int64)), const("shape", np.array([0, 6, 4], np.int64)),
             helper.make_node("Unsqueeze", ["x", "axis"], ["u"]), helper.make_node("Reshape", ["u", "shape"], ["b"]),
             helper.make_node("Relu", ["b"], ["z"])]
    check(build(nodes, {"x": [2, 3, 4]}, ["z"], {}), {"x": r(2, 3, 4)}, ["Unsqueeze", "Reshape", "Unary"])


@pytest.mark.parametrize(("kind", "operand"), [("Mul", 0), ("Mul", 1), ("Div", 1)])
def test_operand_scale_folds_into_alpha(kind, operand):
    nodes = [const("s", np.array(0.25, np.float32)),
             helper.make_node(kind, ["a" if operand == 0 else "b", "s"], ["scaled"]),
             helper.make_node("MatMul", ["scaled", "b"] if operand == 0 else ["a", "scaled"], ["z"])]
    graph = check(build(nodes, {"a": [3, 5], "b": [5, 4]}, ["z"], {}), {"a": r(3, 5), "b": r(5, 4)}, ["MatMul"])
    assert graph.nodes[0].attrs["alpha"] == pytest.approx(0.25 if kind == "Mul" else 4.0)


def test_operand_scale_read_elsewhere_stays():
    nodes = [const("s", np.array(0.25, np.float32)), helper.make_node("Mul", ["a", "s"], ["scaled"]),
             helper.make_node("MatMul", ["scaled", "b"], ["z"]), helper.make_node("Relu", ["scaled"], ["y"])]
    check(build(nodes, {"a": [3, 5], "b": [5, 4]}, ["z", "y"], {}), {"a": r(3, 5), "b": r(5, 4)},
          ["Binary", "MatMul", "Unary"])


def test_identity_into_a_graph_output_is_written_by_its_producer():
    nodes = [helper.make_node("Relu", ["x"], ["h"]), helper.make_node("Identity", ["h"], ["z"])]
    graph = check(build(nodes, {"x": [3, 4]}, ["z"], {}), {"x": r(3, 4)}, ["Unary"])
    assert graph.nodes[0].outputs == ["z"] and graph.nodes[0].attrs["kind"] == "relu"
    # Read by another node too (a KV cache's present keys): that node reads the graph output.
    nodes = [helper.make_node("Relu", ["x"], ["h"]), helper.make_node("Identity", ["h"], ["z"]),
             helper.make_node("Neg", ["h"], ["y"])]
    graph = check(build(nodes, {"x": [3, 4]}, ["z", "y"], {}), {"x": r(3, 4)}, ["Unary", "Unary"])
    assert graph.nodes[0].outputs == ["z"] and graph.nodes[1].inputs == ["z"]
    # A graph input, or a graph output copied to a second one, keeps its Identity (the copy).
    check(build([helper.make_node("Identity", ["x"], ["z"])], {"x": [3, 4]}, ["z"], {}), {"x": r(3, 4)}, ["Unary"])
    nodes = [helper.make_node("Relu", ["x"], ["h"]), helper.make_node("Identity", ["h"], ["z"])]
    graph = check(build(nodes, {"x": [3, 4]}, ["z", "h"], {}), {"x": r(3, 4)}, ["Unary", "Unary"])
    assert graph.nodes[1].attrs["kind"] == "identity"


@pytest.mark.parametrize("causal", [0, 1])
def test_onnx_attention_becomes_one_attention_op(causal):
    """ONNX's Attention (opset 23), expanded into its body (onnx/functions.py), ends as wgnn's one
    Attention op: the no-op steps go, the operand scales fold into alpha and the head transposes
    into strides. One GPU dispatch instead of 13 (docs/performance.md)."""
    vi = helper.make_tensor_value_info
    graph = helper.make_graph([helper.make_node("Attention", ["Q", "K", "V"], ["Y"], is_causal=causal)],
                              "attention", [vi(n, TensorProto.FLOAT, [1, 2, 6, 8]) for n in "QKV"],
                              [vi("Y", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 23)])
    feeds = {n: r(1, 2, 6, 8) for n in "QKV"}
    check(model, feeds, ["Attention"])


def test_castlike_of_a_constant_folds():
    """Swish's body casts its alpha like x (CastLike of a constant): folded, the rest is one
    fused element-wise kernel."""
    import wgnn

    vi = helper.make_tensor_value_info
    graph = helper.make_graph([helper.make_node("Swish", ["x"], ["y"], alpha=1.5)], "swish",
                              [vi("x", TensorProto.FLOAT, [3, 4])], [vi("y", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 24)])
    assert [n.op_type for n in wgnn.convert(model).graph.nodes] == ["FusedElementwise"]
    x = r(3, 4)
    np.testing.assert_allclose(wgnn.InferenceSession(model, providers=["numpy"]).run(None, {"x": x})[0],
                               x / (1 + np.exp(-1.5 * x)), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("rank", [4, 3])
@pytest.mark.parametrize("mask_type", [TensorProto.FLOAT, TensorProto.BOOL])
@pytest.mark.parametrize("target", TARGETS)
def test_onnx_attention_with_a_mask_hiding_whole_rows(mask_type, target, rank):
    """With a mask, ONNX's Attention body zeroes the rows the mask hides at every key (softmax
    gives NaN there) before the context product: that selection moves after it
    (simplify.sink_row_selection; with 3-D inputs the product is stored transposed, and the
    selection's condition with it), the rest fuses into one Attention op, and hidden rows come
    out 0, as onnx's reference gives them."""
    from onnx.reference import ReferenceEvaluator

    import wgnn

    vi = helper.make_tensor_value_info
    shape, heads = ([2, 2, 6, 8], {}) if rank == 4 else ([2, 6, 16], {"q_num_heads": 2, "kv_num_heads": 2})
    graph = helper.make_graph([helper.make_node("Attention", ["Q", "K", "V", "M"], ["Y"], **heads)], "masked",
                              [*(vi(n, TensorProto.FLOAT, shape) for n in "QKV"),
                               vi("M", mask_type, [2, 1, 6, 6])], [vi("Y", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 23)])
    ops = [n.op_type for n in wgnn.convert(model).graph.nodes]
    assert ops.count("Attention") == 1 and "Where" in ops and "MatMul" not in ops, ops
    feeds = {n: r(*shape) for n in "QKV"}
    keep = np.random.default_rng(3).random((2, 1, 6, 6)) < 0.6
    keep[0, 0, 2] = False  # row 2 of the first batch entry hidden at every key
    keep[1, 0, 4] = False
    keep[1, 0, 5, :5] = False  # one key left
    feeds["M"] = keep if mask_type == TensorProto.BOOL else np.where(keep, r(2, 1, 6, 6), -np.inf).astype(np.float32)
    (want,) = ReferenceEvaluator(model).run(None, feeds)
    (got,) = session_for(model, target).run(None, feeds)
    hidden = want[0, :, 2] if rank == 4 else want[0, 2]
    assert not np.isnan(want).any() and not np.abs(hidden).any()
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_selection_of_single_entries_stays_before_the_product():
    """A condition over whole rows only (last axis 1) moves; one that picks entries does not."""
    nodes = [const("zero", np.zeros(1, np.float32)),
             helper.make_node("Where", ["c", "zero", "p"], ["w"]), helper.make_node("MatMul", ["w", "v"], ["y"])]
    graph = helper.make_graph(nodes, "entries", [helper.make_tensor_value_info("c", BOOL, [3, 4]),
                                                 helper.make_tensor_value_info("p", TensorProto.FLOAT, [3, 4]),
                                                 helper.make_tensor_value_info("v", TensorProto.FLOAT, [4, 5])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    feeds = {"c": np.random.default_rng(0).random((3, 4)) < 0.5, "p": r(3, 4), "v": r(4, 5)}
    check(model, feeds, ["Where", "MatMul"])


def test_transposes_in_a_row_become_one_and_identity_goes():
    nodes = [helper.make_node("Transpose", ["x"], ["t1"], perm=[0, 2, 1, 3]),
             helper.make_node("Transpose", ["t1"], ["t2"], perm=[0, 1, 3, 2]),
             helper.make_node("Softmax", ["t2"], ["z"]),
             helper.make_node("Transpose", ["x"], ["u1"], perm=[1, 0, 2, 3]),
             helper.make_node("Transpose", ["u1"], ["u2"], perm=[1, 0, 2, 3]),
             helper.make_node("Softmax", ["u2"], ["w"])]
    graph = check(build(nodes, {"x": [2, 3, 4, 5]}, ["z", "w"], {}), {"x": r(2, 3, 4, 5)},
                  ["Transpose", "Softmax", "Softmax"])
    assert graph.nodes[0].attrs["perm"] == [0, 2, 3, 1] and graph.nodes[0].inputs == ["x"]
    assert graph.nodes[2].inputs == ["x"]  # the two swaps cancel


def test_onnx_attention_on_3d_inputs_reads_its_heads_through_strides():
    import wgnn

    vi = helper.make_tensor_value_info
    graph = helper.make_graph([helper.make_node("Attention", ["Q", "K", "V"], ["Y"], q_num_heads=2, kv_num_heads=2)],
                              "attention3d", [vi(n, TensorProto.FLOAT, [2, 6, 16]) for n in "QKV"],
                              [vi("Y", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 23)])
    ops = [n.op_type for n in wgnn.convert(model).graph.nodes]
    assert ops.count("Attention") == 1 and set(ops) == {"Attention", "Reshape"}, ops
    from onnx.reference import ReferenceEvaluator

    feeds = {n: r(2, 6, 16) for n in "QKV"}
    for target in TARGETS:
        (got,) = session_for(model, target).run(None, feeds)
        np.testing.assert_allclose(got, ReferenceEvaluator(model).run(None, feeds)[0], rtol=1e-4, atol=1e-5)
