"""Converter passes of tools/convert/fusion_chains.py: element-wise chains (SiLU, GELU in its erf
form, HardSwish spelled out, attention's scale-then-mask) become one FusedElementwise, never past
an intermediate someone else observes; spelled-out LayerNorms become LayerNorm. Each case checks
the converted graph and the numbers on numpy and every GPU adapter against onnx.reference; the
zoo's BERT runs fewer steps."""
import math

import numpy as np
import pytest
from helpers import check_model, gpu_adapters
from onnx import TensorProto, helper, numpy_helper
from wgnn.models.zoo import build, example_inputs
from wgnn.tools.convert import fusion

import wgnn

rng = np.random.default_rng(11)
ADAPTERS = gpu_adapters()


def r(*shape, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def model_of(nodes, inputs: dict, constants: dict, outputs=("y",), opset=17, dtype=TensorProto.FLOAT):
    graph = helper.make_graph(
        nodes, "chains", [helper.make_tensor_value_info(n, dtype, s) for n, s in inputs.items()],
        [helper.make_tensor_value_info(n, dtype, None) for n in outputs],
        [numpy_helper.from_array(np.asarray(v), n) for n, v in constants.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return model


def converted_ops(model) -> list[str]:
    return [n.op_type for n in wgnn.convert(model).graph.nodes]


def node(op, inputs, outputs, **attrs):
    return helper.make_node(op, inputs, outputs, **attrs)


GELU = [node("Div", ["x", "sqrt2"], ["d"]), node("Erf", ["d"], ["e"]), node("Add", ["e", "one"], ["a"]),
        node("Mul", ["x", "a"], ["m"]), node("Mul", ["m", "half"], ["y"])]
GELU_CONSTANTS = {"sqrt2": np.float32(math.sqrt(2)), "one": np.float32(1), "half": np.float32(0.5)}
HARD_SWISH = [node("Add", ["x", "three"], ["a"]), node("Clip", ["a", "zero", "six"], ["c"]),
              node("Div", ["c", "six"], ["d"]), node("Mul", ["x", "d"], ["y"])]
HARD_SWISH_CONSTANTS = {"three": np.float32(3), "zero": np.float32(0), "six": np.float32(6)}


# ----------------------------------------------------------------------------------- chains
@pytest.mark.parametrize("shape", [(2, 7), (1, 3, 5), (3, 1, 4, 5)])
def test_gelu_erf_form(shape):
    """Recognised before chains are fused (fusion_matmul.fuse_erf_gelu): one Unary gelu."""
    model = model_of(GELU, {"x": list(shape)}, GELU_CONSTANTS)
    graph = wgnn.convert(model).graph
    assert [(n.op_type, n.attrs.get("kind")) for n in graph.nodes] == [("Unary", "gelu")]
    check_model(model, {"x": r(*shape, scale=2.0)})


def test_hard_swish_spelled_out_with_broadcast_constants():
    """Clip-13 with constant bounds is a Unary clip; the constants are 0-d, (1,) and (5,)."""
    nodes = [*HARD_SWISH[:-1], node("Mul", ["x", "d"], ["t"]), node("Mul", ["t", "gain"], ["y"])]
    model = model_of(nodes, {"x": [2, 3, 5]}, {**HARD_SWISH_CONSTANTS, "three": np.full((1,), 3, np.float32),
                                               "gain": r(5)}, opset=13)
    assert converted_ops(model) == ["FusedElementwise"]
    x = r(2, 3, 5, scale=4.0)
    x[0, 0, :3] = [-3.0, 3.0, 0.0]  # the clip's corners
    check_model(model, {"x": x})


def test_silu_and_clip_bounds_fed_at_run_time():
    """Clip with run-time bounds converts to Max/Min Binary steps: they fuse too."""
    nodes = [node("Sigmoid", ["x"], ["s"]), node("Mul", ["x", "s"], ["m"]), node("Clip", ["m", "lo", "hi"], ["y"])]
    model = model_of(nodes, {"x": [4, 5], "lo": [], "hi": [1, 5]}, {}, opset=13)
    graph = wgnn.convert(model).graph
    assert [n.op_type for n in graph.nodes] == ["FusedElementwise"]
    assert sorted(graph.nodes[0].inputs) == ["hi", "lo", "x"]
    check_model(model, {"x": r(4, 5, scale=3.0), "lo": np.array(-0.1, np.float32), "hi": r(1, 5)})


def test_attention_scale_then_mask():
    """MatMul -> Div(sqrt d) -> Add(mask [B,1,1,S]) -> Softmax: the Div and Add fold into the
    MatMul's alpha and C (fusion_matmul.py) before chains fuse; the Softmax stays."""
    nodes = [node("MatMul", ["q", "k"], ["s"]), node("Div", ["s", "scale"], ["d"]), node("Add", ["d", "mask"], ["a"]),
             node("Softmax", ["a"], ["y"], axis=-1)]
    model = model_of(nodes, {"q": [2, 3, 5, 4], "k": [2, 3, 4, 5], "mask": [2, 1, 1, 5]}, {"scale": np.float32(2)})
    assert converted_ops(model) == ["MatMul", "Softmax"]
    mask = np.where(rng.random((2, 1, 1, 5)) < 0.3, -1e4, 0).astype(np.float32)
    check_model(model, {"q": r(2, 3, 5, 4), "k": r(2, 3, 4, 5), "mask": mask})


def test_epilogue_fusion_wins_first():
    """MatMul + bias Add + Relu fold into the MatMul; the Mul and Sub after it fuse into one node."""
    nodes = [node("MatMul", ["x", "w"], ["p"]), node("Add", ["p", "b"], ["q"]), node("Relu", ["q"], ["u"]),
             node("Mul", ["u", "g"], ["v"]), node("Sub", ["v", "x2"], ["y"])]
    model = model_of(nodes, {"x": [3, 4], "x2": [3, 6]}, {"w": r(4, 6), "b": r(6), "g": r(6)})
    graph = wgnn.convert(model).graph
    assert [n.op_type for n in graph.nodes] == ["MatMul", "FusedElementwise"]
    assert graph.nodes[0].attrs["activation"] == "relu"
    check_model(model, {"x": r(3, 4), "x2": r(3, 6)})


def test_shared_intermediate_is_not_fused_past():
    """s = sigmoid(x) is also read by a Softmax: the chain before s stays apart from the chain after."""
    nodes = [node("Neg", ["x"], ["n"]), node("Exp", ["n"], ["e"]), node("Sigmoid", ["e"], ["s"]),
             node("Mul", ["s", "two"], ["t"]), node("Add", ["t", "x"], ["y"]), node("Softmax", ["s"], ["z"])]
    model = model_of(nodes, {"x": [2, 5]}, {"two": np.float32(2)}, outputs=("y", "z"))
    graph = wgnn.convert(model).graph
    assert [n.op_type for n in graph.nodes] == ["FusedElementwise", "FusedElementwise", "Softmax"]
    first, second = graph.nodes[:2]
    assert first.outputs == ["s"] and first.attrs["steps"] == ["Unary.neg", "Unary.exp", "Unary.sigmoid"]
    assert "s" in second.inputs and second.outputs == ["y"]
    check_model(model, {"x": r(2, 5)})


def test_graph_output_and_single_nodes_are_kept():
    """An intermediate that is a graph output stays materialised; single nodes stay as they are."""
    nodes = [node("Sigmoid", ["x"], ["s"]), node("Mul", ["x", "s"], ["y"])]
    model = model_of(nodes, {"x": [3, 4]}, {}, outputs=("y", "s"))
    assert converted_ops(model) == ["Unary", "Binary"]
    check_model(model, {"x": r(3, 4)})
    assert converted_ops(model_of([node("Tanh", ["x"], ["y"])], {"x": [3]}, {})) == ["Unary"]


def test_a_diamond_joins_into_one_node():
    """u = relu(x) is read by two fusable nodes that meet again: one group."""
    nodes = [node("Relu", ["x"], ["u"]), node("Add", ["u", "one"], ["a"]), node("Mul", ["a", "u"], ["b"]),
             node("Sqrt", ["u"], ["q"]), node("Sub", ["b", "q"], ["y"])]
    model = model_of(nodes, {"x": [4, 3]}, {"one": np.float32(1)})
    graph = wgnn.convert(model).graph
    assert [n.op_type for n in graph.nodes] == ["FusedElementwise"] and graph.nodes[0].inputs[0] == "x"
    check_model(model, {"x": r(4, 3)})


def test_intermediate_read_by_a_subgraph_is_not_fused():
    then_out = helper.make_tensor_value_info("t", TensorProto.FLOAT, None)
    then_branch = helper.make_graph([node("Neg", ["s"], ["t"])], "then", [], [then_out])
    else_branch = helper.make_graph([node("Abs", ["s"], ["t"])], "else", [], [then_out])
    nodes = [node("Sigmoid", ["x"], ["s"]), node("Mul", ["x", "s"], ["y"]),
             node("If", ["c"], ["z"], then_branch=then_branch, else_branch=else_branch)]
    graph = helper.make_graph(
        nodes, "if", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [5]),
                      helper.make_tensor_value_info("c", TensorProto.BOOL, [])],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in ("y", "z")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    assert converted_ops(model) == ["Unary", "Binary", "If"]
    check_model(model, {"x": r(5), "c": np.array(True)}, backends=["numpy"])


def test_integer_chains_are_not_fused():
    nodes = [node("Add", ["x", "one"], ["a"]), node("Mul", ["a", "x"], ["y"])]
    model = model_of(nodes, {"x": [5]}, {"one": np.int64(1)}, dtype=TensorProto.INT64)
    assert converted_ops(model) == ["Binary", "Binary"]


def test_bounds_split_long_chains():
    """20 Add steps each with its own constant: groups of at most 8 inputs and 16 steps."""
    nodes, constants, previous = [], {}, "x"
    for i in range(20):
        constants[f"c{i}"] = r(3)
        nodes.append(node("Add" if i % 2 else "Mul", [previous, f"c{i}"], [f"t{i}"]))
        previous = f"t{i}"
    nodes.append(node("Relu", [previous], ["y"]))
    model = model_of(nodes, {"x": [2, 3]}, constants)
    graph = wgnn.convert(model).graph
    assert all(n.op_type == "FusedElementwise" for n in graph.nodes) and len(graph.nodes) == 3
    assert all(len(n.inputs) <= 8 and len(n.attrs["steps"]) <= 16 for n in graph.nodes)
    assert sum(len(n.attrs["steps"]) for n in graph.nodes) == 21
    check_model(model, {"x": r(2, 3)})


def test_custom_bounds():
    from wgnn.tools.convert.fusion_chains import fuse_elementwise_chains

    chain = [node("Neg", ["x"], ["n"]), node("Exp", ["n"], ["e"]), node("Add", ["e", "one"], ["a"]),
             node("Mul", ["a", "x"], ["y"])]
    graph = wgnn.convert(model_of(chain, {"x": [3]}, {"one": np.float32(1)})).graph
    assert len(graph.nodes) == 1
    model = model_of(chain, {"x": [3]}, {"one": np.float32(1)})
    original = fusion.FUSION_PASSES
    try:
        fusion.FUSION_PASSES = tuple(p if p is not fuse_elementwise_chains else
                                     (lambda g: fuse_elementwise_chains(g, max_steps=2)) for p in original)
        graph = wgnn.convert(model).graph
    finally:
        fusion.FUSION_PASSES = original
    assert [len(n.attrs["steps"]) for n in graph.nodes if n.op_type == "FusedElementwise"] == [2, 2]


# -------------------------------------------------------------------------------- LayerNorm
def layer_norm_nodes(*, square="pow", divide="div", scale=True, bias=True, axes=(-1,), opset=17):
    reduce_inputs = (lambda x: [x]) if opset < 18 else (lambda x: [x, "axes"])
    reduce_attrs = {"axes": list(axes)} if opset < 18 else {}
    nodes = [node("ReduceMean", reduce_inputs("x"), ["mean"], **reduce_attrs), node("Sub", ["x", "mean"], ["d"]),
             node("Pow", ["d", "two"], ["sq"]) if square == "pow" else node("Mul", ["d", "d"], ["sq"]),
             node("ReduceMean", reduce_inputs("sq"), ["var"], **reduce_attrs), node("Add", ["var", "eps"], ["ve"]),
             node("Sqrt", ["ve"], ["std"])]
    if divide == "div":
        nodes.append(node("Div", ["d", "std"], ["n"]))
    else:
        nodes += [node("Reciprocal", ["std"], ["inv"]), node("Mul", ["inv", "d"], ["n"])]
    if scale:
        nodes.append(node("Mul", [nodes[-1].output[0], "gamma"], ["ns"]))
    if bias:
        nodes.append(node("Add", ["beta", nodes[-1].output[0]], ["nb"]))
    nodes[-1].output[0] = "y"
    return nodes


@pytest.mark.parametrize(("options", "shape"), [
    ({}, (2, 3, 8)),
    ({"square": "mul", "divide": "reciprocal"}, (3, 5)),
    ({"scale": False}, (2, 4, 6)),
    ({"bias": False, "axes": (-2, -1)}, (2, 3, 4)),
    ({"opset": 18, "axes": (2, 3)}, (1, 2, 3, 5)),
    ({"opset": 13, "axes": (1,)}, (4, 7)),
])
def test_spelled_out_layer_norm_becomes_one_node(options, shape):
    opset = options.get("opset", 17)
    axes = options.get("axes", (-1,))
    normalized = tuple(shape[a] for a in axes)
    constants = {"two": np.float32(2), "eps": np.float32(1e-5), "gamma": r(*normalized) + 1,
                 "beta": r(1, *normalized), "axes": np.array(axes, np.int64)}
    model = model_of(layer_norm_nodes(**options), {"x": list(shape)}, constants, opset=opset)
    graph = wgnn.convert(model).graph
    assert [n.op_type for n in graph.nodes] == ["LayerNorm"]
    assert graph.nodes[0].attrs["axis"] == -len(axes) and graph.nodes[0].attrs["epsilon"] == pytest.approx(1e-5)
    check_model(model, {"x": r(*shape, scale=3.0) + 1}, rtol=1e-4, atol=1e-5)


def test_layer_norm_pattern_not_matched():
    constants = {"two": np.float32(2), "eps": np.float32(1e-5), "gamma": r(3) + 1, "beta": r(1)}
    # a reduction over a leading axis is no LayerNorm; the element-wise tail still fuses
    model = model_of(layer_norm_nodes(axes=(0,), opset=13), {"x": [4, 3]}, constants, opset=13)
    assert "LayerNorm" not in converted_ops(model)
    check_model(model, {"x": r(4, 3)}, rtol=1e-4, atol=1e-5)
    # a scale along an outer axis: LayerNorm without the scale, then a Mul
    constants["gamma"] = r(2, 1, 1) + 1
    model = model_of(layer_norm_nodes(bias=False), {"x": [2, 3, 5]}, constants)
    assert converted_ops(model) == ["LayerNorm", "Binary"]
    check_model(model, {"x": r(2, 3, 5)}, rtol=1e-4, atol=1e-5)
    # the centred tensor is also a graph output
    nodes = layer_norm_nodes(scale=False, bias=False)
    model = model_of(nodes, {"x": [2, 5]}, constants, outputs=("y", "d"))
    assert "LayerNorm" not in converted_ops(model)


# ------------------------------------------------------------------------------ cast inputs
def cast_model(nodes, inputs: dict, constants: dict, outputs=("y",)):
    graph = helper.make_graph(
        nodes, "casts", [helper.make_tensor_value_info(n, t, s) for n, (t, s) in inputs.items()],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in outputs],
        [numpy_helper.from_array(np.asarray(v), n) for n, v in constants.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


@pytest.mark.parametrize("dtype, values", [(TensorProto.INT64, lambda s: rng.integers(0, 2, s)),
                                           (TensorProto.INT32, lambda s: rng.integers(-5, 5, s).astype(np.int32)),
                                           (TensorProto.BOOL, lambda s: rng.random(s) < 0.5)])
def test_an_attention_mask_cast_folds_into_its_chain(dtype, values):
    """(1 - Cast(mask)) * -1e4 broadcast onto the scores, as BERT exports write it: one node."""
    nodes = [node("Cast", ["mask"], ["m"], to=TensorProto.FLOAT), node("Sub", ["one", "m"], ["inv"]),
             node("Mul", ["inv", "big"], ["bias"]), node("Add", ["scores", "bias"], ["y"])]
    model = cast_model(nodes, {"mask": (dtype, [2, 1, 1, 5]), "scores": (TensorProto.FLOAT, [2, 3, 5, 5])},
                       {"one": np.float32(1), "big": np.float32(-1e4)})
    graph = wgnn.convert(model).graph
    assert [n.op_type for n in graph.nodes] == ["FusedElementwise"]
    assert graph.nodes[0].inputs[graph.nodes[0].attrs["cast_inputs"][0]] == "mask"
    check_model(model, {"mask": values((2, 1, 1, 5)), "scores": r(2, 3, 5, 5)}, reference="ort")


def test_a_cast_read_by_one_binary_folds_into_a_one_step_program():
    nodes = [node("Cast", ["mask"], ["m"], to=TensorProto.FLOAT), node("Mul", ["x", "m"], ["y"])]
    model = cast_model(nodes, {"mask": (TensorProto.BOOL, [4, 1]), "x": (TensorProto.FLOAT, [4, 6])}, {})
    graph = wgnn.convert(model).graph
    assert [n.op_type for n in graph.nodes] == ["FusedElementwise"] and graph.nodes[0].attrs["steps"] == ["Binary.mul"]
    check_model(model, {"mask": rng.random((4, 1)) < 0.5, "x": r(4, 6)}, reference="ort")


def test_casts_that_cannot_fold_stay():
    """A Cast read twice, a Cast from float, a Cast to float16 and a program whose only input is
    cast keep their Cast."""
    nodes = [node("Cast", ["a"], ["af"], to=TensorProto.FLOAT), node("Mul", ["x", "af"], ["y1"]),
             node("Add", ["af", "x"], ["y2"]),
             node("Cast", ["d"], ["df"], to=TensorProto.FLOAT), node("Mul", ["x", "df"], ["y3"]),
             node("Cast", ["b"], ["bf"], to=TensorProto.FLOAT), node("Neg", ["bf"], ["y4"])]
    model = cast_model(nodes, {"a": (TensorProto.INT64, [3]), "d": (TensorProto.DOUBLE, [3]),
                               "b": (TensorProto.INT64, [3]), "x": (TensorProto.FLOAT, [3])}, {},
                       outputs=("y1", "y2", "y3", "y4"))
    graph = wgnn.convert(model).graph
    assert sum(n.op_type == "Cast" for n in graph.nodes) == 3
    assert not any(n.attrs.get("cast_inputs") for n in graph.nodes)
    check_model(model, {"a": rng.integers(0, 9, 3), "d": rng.random(3), "b": rng.integers(0, 9, 3), "x": r(3)},
                reference="ort")


# ------------------------------------------------------------------------- LayerNorm's skip
def embeddings_model(d=8, *, pos_shape=None, swap=False, scale_shape=None, extra_reader=False, symbolic=False):
    """Word embeddings (Gather) + position embeddings -> LayerNormalization over the last axis."""
    nodes = [node("Gather", ["table", "ids"], ["words"]),
             node("Add", ["pos", "words"] if swap else ["words", "pos"], ["sum"]),
             node("LayerNormalization", ["sum", "scale", "bias"], ["y"], axis=-1)]
    outputs = ["y"]
    if extra_reader:
        nodes.append(node("Relu", ["sum"], ["also"]))
        outputs.append("also")
    seq = "S" if symbolic else 5
    graph = helper.make_graph(
        nodes, "embeddings",
        [helper.make_tensor_value_info("ids", TensorProto.INT64, [2, seq]),
         helper.make_tensor_value_info("pos", TensorProto.FLOAT, pos_shape or [seq, d])],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in outputs],
        [numpy_helper.from_array(r(11, d), "table"), numpy_helper.from_array(r(*(scale_shape or (d,))), "scale"),
         numpy_helper.from_array(r(d), "bias")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


@pytest.mark.parametrize("options, pos", [
    ({}, (5, 8)),  # position rows broadcast over the batch
    ({"swap": True}, (5, 8)),  # the operand of the sum's shape is X whatever its side
    ({"pos_shape": [2, 1, 8]}, (2, 1, 8)),  # one row per batch item, broadcast over the sequence
    ({"symbolic": True}, (5, 8)),
])
def test_embeddings_add_becomes_the_layer_norms_skip(options, pos):
    model = embeddings_model(**options)
    graph = wgnn.convert(model).graph
    assert [n.op_type for n in graph.nodes] == ["Gather", "LayerNorm"]
    assert graph.nodes[1].inputs == ["words", "scale", "bias", "pos"]
    check_model(model, {"ids": rng.integers(0, 11, (2, 5)), "pos": r(*pos)}, reference="ort", rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("options", [
    {"extra_reader": True},  # the sum is read elsewhere too
    {"d": 6},  # rows that are not whole vec4s
    {"scale_shape": (1,)},  # a scale broadcast along the rows
    {"pos_shape": [2, 5, 1]},  # a skip broadcast within the rows
])
def test_adds_that_stay(options):
    model = embeddings_model(**options)
    assert "Binary" in converted_ops(model)
    d = options.get("d", 8)
    pos = r(*(options.get("pos_shape") or (5, d)))
    check_model(model, {"ids": rng.integers(0, 11, (2, 5)), "pos": pos}, reference="ort", rtol=1e-4, atol=1e-5)


def test_layer_norm_skip_shape_errors():
    from wgnn.engine.errors import ShapeError
    from wgnn.engine.graph import Graph, Model, Node, TensorInfo

    def run(skip_shape, dtype="float32"):
        g = Graph([Node("LayerNorm", ["x", "scale", "", "skip"], ["y"], {"axis": -1}, name="ln")],
                  [TensorInfo("x", "float32", (2, 3, 8)), TensorInfo("skip", dtype, skip_shape)],
                  [TensorInfo("y", "float32")], {"scale": r(8)})
        feeds = {"x": r(2, 3, 8), "skip": np.zeros(skip_shape, dtype)}
        return wgnn.InferenceSession(Model(g), providers=["numpy"]).run(None, feeds)

    for bad in [(3, 4), (2, 3, 1), (4, 3, 8), (1, 2, 3, 8)]:
        with pytest.raises(ShapeError, match=r'"ln".*skip of shape'):
            run(bad)
    with pytest.raises(ShapeError, match=r"skip of shape .*float16"):
        run((3, 8), "float16")


def test_layer_norm_skip_sums_into_its_output_on_numpy():
    """numpy: X + Skip goes into the output, which the normalization then works on in place: a
    warm run allocates no array of X's size (X + Skip was one), and the values stay right."""
    import tracemalloc

    from wgnn.engine.graph import Graph, Model, Node, TensorInfo

    g = Graph([Node("LayerNorm", ["x", "scale", "bias", "skip"], ["y"], {"axis": -1}, name="ln")],
              [TensorInfo("x", "float32", (2, 64, 256)), TensorInfo("skip", "float32", (64, 256))],
              [TensorInfo("y", "float32")], {"scale": r(256), "bias": r(256)})
    session = wgnn.InferenceSession(Model(g), providers=["numpy"])
    x, skip = r(2, 64, 256), r(64, 256)
    y = np.empty_like(x)
    for _ in range(2):
        session.run(None, {"x": x, "skip": skip}, out={"y": y})
    tracemalloc.start()
    try:
        session.run(None, {"x": x, "skip": skip}, out={"y": y})
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < x.nbytes / 2, peak / x.nbytes  # 1.28 x.nbytes before
    s = (x + skip).astype(np.float64)
    normed = (s - s.mean(-1, keepdims=True)) / np.sqrt(s.var(-1, keepdims=True) + 1e-5)
    want = normed * g.initializers["scale"] + g.initializers["bias"]
    np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-5)


# -------------------------------------------------------------------------------------- zoo
def without_chain_passes(fn):
    original = fusion.FUSION_PASSES
    fusion.FUSION_PASSES = tuple(p for p in original if p not in fusion.CHAIN_PASSES)
    try:
        return fn()
    finally:
        fusion.FUSION_PASSES = original


def test_bert_runs_fewer_steps():
    model = build("bert")
    before = without_chain_passes(lambda: wgnn.convert(model).graph)
    after = wgnn.convert(model).graph
    fused = [n for n in after.nodes if n.op_type == "FusedElementwise"]
    # The GELUs and the scores' scale + mask fold into MatMuls first (test_fusion_matmul.py); what
    # is left to chains is the mask's 1 - m, * -1e4, with the Cast of the int64 mask folded in, and
    # the embeddings' Add, which becomes their LayerNorm's skip.
    assert len(fused) == 1 and len(after.nodes) == len(before.nodes) - 3
    assert [n.attrs["steps"] for n in fused] == [["Binary.sub", "Binary.mul"]]
    assert fused[0].attrs["cast_inputs"] == [1] and fused[0].inputs[1] == "attention_mask"
    feeds = example_inputs(model, 2, seq=5)
    check_model(model, feeds, reference="ort", rtol=1e-4, atol=1e-5)
    if ADAPTERS:
        config = wgnn.Config(providers=("wgpu", "numpy"), adapter=ADAPTERS[0]["index"])
        steps = []
        for source in (without_chain_passes(lambda: wgnn.convert(model)), wgnn.convert(model)):
            session = wgnn.InferenceSession(source, config=config)
            session.run(None, feeds)
            assert session.report()["fallbacks"] == []
            steps.append(session.report()["steps"])
        assert steps[1] == steps[0] - 3
