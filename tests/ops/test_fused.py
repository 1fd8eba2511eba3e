"""FusedElementwise (engine/ops/fused.py): programs built by the converter from ONNX chains, run on
numpy and every GPU adapter against onnx.reference (check_model), plus hand-written IR programs
(broadcasting of every input, operands reused, parameters that are infinite), malformed
programs, NC4HW4 feature maps on both storages, and resizes that compile nothing new."""
import math

import numpy as np
import pytest
from helpers import check_model, gpu_adapters, session_for
from helpers import test_backends as backends_under_test
from onnx import TensorProto, helper, numpy_helper
from wgnn.engine.errors import ShapeError
from wgnn.engine.graph import Graph, Model, Node, TensorInfo
from wgnn.engine.ops.fused import Step, decode_program, encode_program
from wgnn.models.format import model_to_bytes, read_model

import wgnn

rng = np.random.default_rng(3)
ADAPTERS = gpu_adapters()
needs_gpu = pytest.mark.skipif(not ADAPTERS, reason="no GPU adapter (install mesa-vulkan-drivers)")


def r(*shape, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def chain_model(nodes, inputs: dict, constants: dict, outputs=("y",), opset=17):
    """An ONNX model of nodes: inputs name -> shape (float32), constants name -> array."""
    graph = helper.make_graph(
        nodes, "chain", [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs.items()],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in outputs],
        [numpy_helper.from_array(np.asarray(v), n) for n, v in constants.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return model


def fused_ops(model) -> list[str]:
    return [n.op_type for n in wgnn.convert(model).graph.nodes]


# ------------------------------------------------------------------------- through the converter
def test_every_kind_family_in_one_chain():
    """Unary kinds with parameters (LeakyRelu alpha, HardSigmoid alpha/beta, Clip bounds, Selu),
    transcendental ones, and the arithmetic Binary kinds, on broadcast operands of odd shapes."""
    nodes = [helper.make_node("LeakyRelu", ["x"], ["a"], alpha=0.3),
             helper.make_node("Mul", ["a", "row"], ["b"]),            # (5,) along the last axis
             helper.make_node("HardSigmoid", ["b"], ["c"], alpha=0.4, beta=0.3),
             helper.make_node("Sub", ["c", "col"], ["d"]),            # (3, 1) along the middle axis
             helper.make_node("Clip", ["d", "lo", "hi"], ["e"]),
             helper.make_node("Max", ["e", "x"], ["f"]),
             helper.make_node("Selu", ["f"], ["g"]),
             helper.make_node("Tanh", ["g"], ["h"]),
             helper.make_node("Div", ["h", "z"], ["i"]),             # a second graph input, broadcast
             helper.make_node("Pow", ["i", "two"], ["j"]),
             helper.make_node("Min", ["j", "a"], ["k"]),
             helper.make_node("Mod", ["k", "three"], ["y"], fmod=1)]
    model = chain_model(nodes, {"x": [2, 3, 5], "z": [2, 1, 1]},
                        {"row": r(5), "col": r(3, 1), "lo": np.float32(-0.4), "hi": np.float32(0.6),
                         "two": np.float32(2.0), "three": np.float32(0.7)})
    assert fused_ops(model) == ["FusedElementwise"]
    z = (np.abs(r(2, 1, 1)) + 0.5).astype(np.float32)
    check_model(model, {"x": r(2, 3, 5), "z": z}, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("shape", [(7,), (3, 1, 5), (2, 3, 4, 5), (1, 1, 9, 1), ()])
def test_silu_on_odd_shapes(shape):
    nodes = [helper.make_node("Sigmoid", ["x"], ["s"]), helper.make_node("Mul", ["x", "s"], ["y"])]
    model = chain_model(nodes, {"x": list(shape)}, {})
    assert fused_ops(model) == ["FusedElementwise"]
    check_model(model, {"x": r(*shape, scale=4.0)})


def test_every_input_broadcasts_to_the_output():
    """No input has the output's shape: (4, 1, 1) + (1, 3, 1) then * (1, 1, 6) then a 0-d constant."""
    nodes = [helper.make_node("Add", ["a", "b"], ["s"]), helper.make_node("Mul", ["s", "c"], ["m"]),
             helper.make_node("Sub", ["m", "k"], ["y"])]
    model = chain_model(nodes, {"a": [4, 1, 1], "b": [1, 3, 1], "c": [1, 1, 6]}, {"k": np.float32(0.25)})
    assert fused_ops(model) == ["FusedElementwise"]
    check_model(model, {"a": r(4, 1, 1), "b": r(1, 3, 1), "c": r(1, 1, 6)})


def test_empty_tensor_and_batch_resize():
    """An empty batch, then other batch sizes, through one session (a resize each time)."""
    nodes = [helper.make_node("Sigmoid", ["x"], ["s"]), helper.make_node("Mul", ["x", "s"], ["t"]),
             helper.make_node("Add", ["t", "bias"], ["y"])]
    bias = r(3, 1)
    model = chain_model(nodes, {"x": ["N", 3, 5]}, {"bias": bias})
    for backend in backends_under_test():
        session = session_for(read_model(model_to_bytes(wgnn.convert(model))), backend)
        for n in (0, 2, 5):
            x = r(n, 3, 5)
            s = 1 / (1 + np.exp(-x))
            (got,) = session.run(None, {"x": x})
            assert got.shape == (n, 3, 5)
            np.testing.assert_allclose(got, x * s + bias, rtol=1e-4, atol=1e-5)


# ------------------------------------------------------------------------------ hand-written IR
def ir_model(steps: list[Step], inputs: dict[str, tuple], constants: dict | None = None) -> Model:
    names = list(inputs) + list(constants or {})
    node = Node("FusedElementwise", names, ["y"], encode_program(steps), name="fused")
    graph = Graph([node], [TensorInfo(n, "float32", s) for n, s in inputs.items()], [TensorInfo("y", "float32")],
                  dict(constants or {}))
    return read_model(model_to_bytes(Model(graph)))  # the program goes through the file format


def run_everywhere(model: Model, feeds: dict, expected: np.ndarray, *, allow_fallback=False):
    for backend in backends_under_test():
        session = session_for(model, backend)
        (got,) = session.run(None, feeds)
        gpu = backend.startswith("wgpu")
        if gpu and not allow_fallback:
            assert session.report()["fallbacks"] == [], backend
        np.testing.assert_allclose(got, expected, rtol=1e-4 if gpu else 1e-6, atol=1e-5 if gpu else 1e-6,
                                   err_msg=backend)


def test_program_reuses_operands_and_infinite_parameters():
    """Steps reading an input twice and a step result two steps back; Clip with an infinite bound
    (WGSL rejects non-finite constants: they are built at run time)."""
    steps = [Step("Binary", "mul", (0, 0)),                          # t0 = x * x
             Step("Unary", "clip", (2,), -math.inf, 1.5),             # t1 = min(t0, 1.5)
             Step("Binary", "sub", (1, 3)),                           # t2 = w - t1
             Step("Unary", "thresholded_relu", (4,), 0.2),            # t3
             Step("Binary", "add", (4, 2))]                           # t4 = t2 + t0
    model = ir_model(steps, {"x": (3, 4), "w": (4,)})
    x, w = r(3, 4, scale=2.0), r(4)
    t0 = x * x
    t2 = w - np.minimum(t0, 1.5)
    run_everywhere(model, {"x": x, "w": w}, t2 + t0)


def fused_kernels(model, backend: str, feeds: dict) -> list[str]:
    session = session_for(model, backend)
    session.run(None, feeds)
    return [d.kernel.path for seg in session.session.segments for _, ex in seg.steps
            for d in getattr(ex, "dispatches", [])]


def test_vec4_groups():
    """Results whose innermost merged axis is whole vec4s run four elements at a time: inputs
    contiguous along it (the output's shape, or broadcast over leading axes) read as vec4s, inputs
    broadcast along it (a column, a 0-d constant) splat, integer inputs cast as they load."""
    names = ["x", "row", "col", "mask", "mask_col", "k"]  # operands 0..5; step results from 6 on
    steps = [Step("Binary", "mul", (0, 1)), Step("Binary", "add", (6, 2)), Step("Binary", "sub", (7, 3)),
             Step("Binary", "mul", (8, 4)), Step("Binary", "add", (9, 5))]
    shapes = {"x": (2, 3, 8), "row": (8,), "col": (2, 3, 1), "mask": (3, 8), "mask_col": (2, 1, 1)}
    attrs = {**encode_program(steps), "cast_inputs": [3, 4]}
    node = Node("FusedElementwise", names, ["y"], attrs, name="fused")
    dtypes = {"mask": "int64", "mask_col": "int32"}
    graph = Graph([node], [TensorInfo(n, dtypes.get(n, "float32"), sh) for n, sh in shapes.items()],
                  [TensorInfo("y", "float32")], {"k": np.float32(0.5)})
    model = read_model(model_to_bytes(Model(graph)))
    feeds = {"x": r(2, 3, 8), "row": r(8), "col": r(2, 3, 1), "mask": rng.integers(0, 3, (3, 8)),
             "mask_col": rng.integers(-2, 2, (2, 1, 1)).astype(np.int32)}
    want = ((feeds["x"] * feeds["row"] + feeds["col"]) - feeds["mask"]) * feeds["mask_col"] + np.float32(0.5)
    run_everywhere(model, feeds, want.astype(np.float32))
    for adapter in ADAPTERS:
        assert fused_kernels(model, f"wgpu:{adapter['index']}", feeds) == ["fused/fused_vec4.wgsl"]
        odd = ir_model([Step("Binary", "add", (0, 1))], {"x": (2, 6), "w": (6,)})
        assert fused_kernels(odd, f"wgpu:{adapter['index']}", {"x": r(2, 6), "w": r(6)}) == ["fused/fused.wgsl"]


def test_nan_and_infinity_flow_through():
    steps = [Step("Binary", "div", (0, 1)), Step("Unary", "relu", (2,))]
    model = ir_model(steps, {"a": (6,), "b": (6,)})
    a = np.array([1, -1, 0, 2, -3, np.nan], np.float32)
    b = np.array([0, 0, 0, 4, 1, 1], np.float32)
    with np.errstate(all="ignore"):
        want = np.maximum(a / b, 0)
    want[2] = np.nan  # 0 / 0; GPU max() may drop NaN operands: compare the finite ones
    for backend in backends_under_test():
        (got,) = session_for(model, backend).run(None, {"a": a, "b": b})
        np.testing.assert_array_equal(got[[0, 1, 3, 4]], want[[0, 1, 3, 4]], err_msg=backend)
        if backend == "numpy":
            assert np.isnan(got[[2, 5]]).all()


def test_rank_seven_refused_on_the_gpu():
    """Seven axes that cannot merge (alternating broadcasts) exceed the linear kernel's six: the
    GPU refuses, numpy runs it."""
    steps = [Step("Binary", "add", (0, 1))]
    a_shape, b_shape = (2, 1, 2, 1, 2, 1, 2), (1, 3, 1, 3, 1, 3, 1)
    model = ir_model(steps, {"a": a_shape, "b": b_shape})
    a, b = r(*a_shape), r(*b_shape)
    for backend in backends_under_test():
        session = session_for(model, backend)
        np.testing.assert_allclose(session.run(None, {"a": a, "b": b})[0], a + b, rtol=1e-6)
        if backend.startswith("wgpu"):
            (fallback,) = session.report()["fallbacks"]
            assert any("axes after merging" in reason for reason in fallback["reasons"])


@pytest.mark.parametrize(("attrs", "message"), [
    ({"steps": ["Unary.relu"], "operands": [1, -1]}, "valid are 0..0"),
    ({"steps": ["Unary.relu"], "operands": [0, 0]}, "then -1 for a Unary step"),
    ({"steps": ["Binary.and"], "operands": [0, 0]}, "not a Unary or Binary kind"),
    ({"steps": ["Unary.not"], "operands": [0, -1]}, "not a Unary or Binary kind"),
    ({"steps": ["Relu"], "operands": [0, -1]}, "not a Unary or Binary kind"),
    ({"steps": ["Unary.relu", "Unary.exp"], "operands": [0, -1]}, "2 steps need 4 operands"),
    ({"steps": [], "operands": []}, "no steps"),
])
def test_malformed_programs_are_shape_errors(attrs, message):
    attrs = {"alphas": [0.0] * len(attrs["steps"]), "betas": [0.0] * len(attrs["steps"]), **attrs}
    graph = Graph([Node("FusedElementwise", ["x"], ["y"], attrs, name="bad")], [TensorInfo("x", "float32", (3,))],
                  [TensorInfo("y", "float32")])
    with pytest.raises(ShapeError, match=message) as info:
        wgnn.InferenceSession(Model(graph), providers=["numpy"]).run(None, {"x": r(3)})
    assert '"bad"' in str(info.value)


def test_integer_inputs_are_refused():
    steps = [Step("Binary", "add", (0, 1))]
    node = Node("FusedElementwise", ["a", "b"], ["y"], encode_program(steps), name="ints")
    graph = Graph([node], [TensorInfo("a", "int64", (3,)), TensorInfo("b", "int64", (3,))], [TensorInfo("y")])
    with pytest.raises(ShapeError, match="one float type"):
        wgnn.InferenceSession(Model(graph), providers=["numpy"]).run(None, {"a": np.arange(3), "b": np.arange(3)})


@pytest.mark.parametrize(("cast", "dtypes", "message"), [
    ([2], ("float32", "int64"), "name inputs past the 2"),
    ([0], ("float32", "int64"), r"integer or bool tensors, got input 0 \(float32\)"),
    ([0, 1], ("int64", "int64"), "not cast must share one float type"),
])
def test_bad_cast_inputs_are_shape_errors(cast, dtypes, message):
    attrs = {**encode_program([Step("Binary", "mul", (0, 1))]), "cast_inputs": cast}
    graph = Graph([Node("FusedElementwise", ["a", "b"], ["y"], attrs, name="casts")],
                  [TensorInfo("a", dtypes[0], (3,)), TensorInfo("b", dtypes[1], (3,))], [TensorInfo("y")])
    feeds = {"a": np.arange(3).astype(dtypes[0]), "b": np.arange(3).astype(dtypes[1])}
    with pytest.raises(ShapeError, match=message):
        wgnn.InferenceSession(Model(graph), providers=["numpy"]).run(None, feeds)


@needs_gpu
@pytest.mark.parametrize("storage", ["buffer", "texture"])
@pytest.mark.parametrize("adapter", [a["index"] for a in ADAPTERS])
def test_nc4hw4_with_a_cast_mask(adapter, storage):
    """A conv's feature map times a bool mask (cast to float, folded in: read linearly, per lane,
    and converted), plus a per-channel constant."""
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Cast", ["mask"], ["m"], to=TensorProto.FLOAT),
             helper.make_node("Mul", ["c", "m"], ["cm"]), helper.make_node("Add", ["cm", "bias"], ["y"])]
    graph = helper.make_graph(
        nodes, "masked", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 5, 6]),
                          helper.make_tensor_value_info("mask", TensorProto.BOOL, [2, 1, 5, 6])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(r(6, 3, 3, 3, scale=0.5), "w"), numpy_helper.from_array(r(6, 1, 1), "bias")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    converted = wgnn.convert(model)
    assert [n.op_type for n in converted.graph.nodes] == ["Conv", "FusedElementwise"]
    assert converted.graph.nodes[1].attrs["cast_inputs"] == [1]
    feeds = {"x": r(2, 3, 5, 6), "mask": rng.random((2, 1, 5, 6)) < 0.5}
    want = wgnn.InferenceSession(model.SerializeToString(), providers=["numpy"]).run(None, feeds)[0]
    session = wgnn.InferenceSession(converted, config=wgnn.Config(providers=("wgpu",), adapter=adapter,
                                                                  storage=storage))
    np.testing.assert_allclose(session.run(None, feeds)[0], want, rtol=1e-4, atol=1e-5)
    assert layouts(session)["FusedElementwise"] == ["nc4hw4"]


def test_program_round_trip():
    steps = [Step("Unary", "leaky_relu", (0,), 0.1), Step("Binary", "prelu", (1, 0)), Step("Unary", "exp", (2,))]
    attrs = encode_program(steps)
    assert attrs["operands"] == [0, -1, 1, 0, 2, -1]
    assert decode_program(attrs, 1) == steps


# ------------------------------------------------------------------------------------ GPU only
def conv_silu_model(bias_shape):
    """Conv, then SiLU plus a per-channel (or scalar) constant: the chain reads the conv's NC4HW4
    output and a constant that stays linear."""
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Sigmoid", ["c"], ["s"]), helper.make_node("Mul", ["c", "s"], ["m"]),
             helper.make_node("Add", ["m", "bias"], ["y"])]
    return chain_model(nodes, {"x": ["N", 3, "H", "W"]}, {"w": r(6, 3, 3, 3, scale=0.5), "bias": r(*bias_shape)})


def layouts(session) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for segment in session.session.segments:
        for step, execution in segment.steps:
            found.setdefault(step.op.op_type, []).append(execution.layout)
    return found


@needs_gpu
@pytest.mark.parametrize("storage", ["buffer", "texture"])
@pytest.mark.parametrize("bias_shape", [(6, 1, 1), (1, 6, 1, 1), (), (5, 6)])
@pytest.mark.parametrize("adapter", [a["index"] for a in ADAPTERS])
def test_nc4hw4_after_conv(adapter, bias_shape, storage):
    model = conv_silu_model(bias_shape)
    converted = wgnn.convert(model)
    assert [n.op_type for n in converted.graph.nodes] == ["Conv", "FusedElementwise"]
    x = r(2, 3, 5, 6)
    want = wgnn.InferenceSession(converted, providers=["numpy"]).run(None, {"x": x})[0]
    session = wgnn.InferenceSession(converted, config=wgnn.Config(providers=("wgpu",), adapter=adapter,
                                                                  storage=storage))
    got = session.run(None, {"x": x})[0]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    found = layouts(session)
    # Conv reads the 3-channel image as it is and writes NC4HW4, the chain reads it there: no
    # conversion at all.
    assert found["FusedElementwise"] == ["nc4hw4"] and "Convert" not in found


@needs_gpu
@pytest.mark.parametrize("adapter", [a["index"] for a in ADAPTERS])
def test_nc4hw4_half_precision(adapter):
    """fp16 feature maps (rgba16float textures): the accessors convert, the program runs in f32."""
    converted = wgnn.convert(conv_silu_model((1, 6, 1, 1)))
    x = r(1, 3, 4, 7)
    want = wgnn.InferenceSession(converted, providers=["numpy"]).run(None, {"x": x})[0]
    session = wgnn.InferenceSession(converted, config=wgnn.Config(providers=("wgpu",), adapter=adapter,
                                                                  storage="texture", precision="fp16"))
    got = session.run(None, {"x": x})[0]
    np.testing.assert_allclose(got, want, rtol=1e-2, atol=1e-2 * float(np.abs(want).max()))
    assert layouts(session)["FusedElementwise"] == ["nc4hw4"]


@needs_gpu
@pytest.mark.parametrize("adapter", [a["index"] for a in ADAPTERS])
def test_resize_compiles_no_pipeline(adapter):
    from wgnn.backends.wgpu.loader import pipeline_cache

    nodes = [helper.make_node("Div", ["x", "k"], ["d"]), helper.make_node("Erf", ["d"], ["e"]),
             helper.make_node("Add", ["e", "one"], ["a"]), helper.make_node("Mul", ["x", "a"], ["m"]),
             helper.make_node("Mul", ["m", "half"], ["g"]), helper.make_node("Add", ["g", "row"], ["y"])]
    model = chain_model(nodes, {"x": ["B", "S", 6]}, {"k": np.float32(math.sqrt(2)), "one": np.float32(1),
                                                      "half": np.float32(0.5), "row": r(6)})
    assert fused_ops(model) == ["FusedElementwise"]
    for layout_model in (model, conv_silu_model((6, 1, 1))):
        session = wgnn.InferenceSession(layout_model, config=wgnn.Config(providers=("wgpu",), adapter=adapter))
        cache = pipeline_cache(session.session.backends[0].context)
        compiled = None
        for shape in ((1, 2, 6), (3, 7, 6)) if layout_model is model else ((1, 3, 5, 6), (2, 3, 9, 4)):
            session.run(None, {"x": r(*shape)})
            if compiled is None:
                compiled = cache.compiled
        assert cache.compiled == compiled, "a resize compiled a pipeline"
