"""Every bad input gives a typed wgnn error whose message names the culprit."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper
from wgnn.engine.errors import InputError, ModelError, ShapeError, UnsupportedOpError, WgnnError
from wgnn.engine.graph import Graph, Model, Node, TensorInfo
from wgnn.models.format import model_to_bytes, save_model

import wgnn


def onnx_model(nodes, inputs, outputs, initializers=()):
    graph = helper.make_graph(nodes, "errors", inputs, outputs, list(initializers))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def two_input_model():
    """z = x + y with x, y: float32 [N, 3]."""
    vi = helper.make_tensor_value_info
    return onnx_model([helper.make_node("Add", ["x", "y"], ["z"], name="add")],
                      [vi("x", TensorProto.FLOAT, ["N", 3]), vi("y", TensorProto.FLOAT, ["N", 3])],
                      [vi("z", TensorProto.FLOAT, ["N", 3])])


@pytest.fixture
def session():
    return wgnn.InferenceSession(two_input_model(), providers=["numpy"])


def feeds(n_x=2, n_y=2, dtype=np.float32):
    return {"x": np.ones((n_x, 3), dtype), "y": np.ones((n_y, 3), dtype)}


# ------------------------------------------------------------------------------- model files
def test_missing_file(tmp_path):
    path = tmp_path / "nowhere.wgnn"
    with pytest.raises(ModelError, match="not found") as info:
        wgnn.InferenceSession(str(path))
    assert str(path) in str(info.value)


def test_directory_instead_of_file(tmp_path):
    with pytest.raises(ModelError, match="directory") as info:
        wgnn.InferenceSession(tmp_path)
    assert str(tmp_path) in str(info.value)


@pytest.mark.parametrize("content", [np.random.default_rng(0).bytes(300), b"\x08" + bytes(range(256)),
                                     b"name,value\nx,1\n" * 10], ids=["random", "onnx-like", "text"])
def test_not_a_model_file(tmp_path, content):
    path = tmp_path / "junk.bin"
    path.write_bytes(content)
    with pytest.raises(ModelError) as info:
        wgnn.InferenceSession(path)
    assert "junk.bin" in str(info.value)


def test_truncated_wgnn_file(tmp_path):
    data = model_to_bytes(wgnn.convert(two_input_model()))
    path = tmp_path / "cut.wgnn"
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(ModelError, match="truncated or corrupted") as info:
        wgnn.InferenceSession(path)
    assert "cut.wgnn" in str(info.value)


# ---------------------------------------------------------------------------- unsupported ops
def test_unknown_op_types_at_load_are_all_listed(tmp_path):
    graph = Graph(
        nodes=[Node("FancyOp", ["x"], ["a"], name="f1"), Node("FancyOp", ["a"], ["b"], name="f2"),
               Node("OtherOp", ["b"], ["c"], name="o1"), Node("Unary", ["c"], ["y"], {"kind": "relu"}, name="r")],
        inputs=[TensorInfo("x", "float32", (2,))], outputs=[TensorInfo("y", "float32", (2,))])
    model = Model(graph)
    with pytest.raises(UnsupportedOpError) as info:
        wgnn.Interpreter(model)
    message = str(info.value)
    assert "FancyOp (2 nodes)" in message and "OtherOp (1 node)" in message
    assert "Unary" not in message
    assert info.value.op_counts == {"FancyOp": 2, "OtherOp": 1}
    # The same through a .wgnn file.
    path = tmp_path / "fancy.wgnn"
    save_model(model, path)
    with pytest.raises(UnsupportedOpError, match=r"FancyOp \(2 nodes\)"):
        wgnn.InferenceSession(path)


def test_onnx_model_with_unsupported_ops_lists_each_type_with_counts():
    vi = helper.make_tensor_value_info
    nodes = [
        helper.make_node("WgnnNoSuchOpA", ["x"], ["a"], name="a1"),
        helper.make_node("WgnnNoSuchOpA", ["a"], ["b"], name="a2"),
        helper.make_node("Relu", ["b"], ["c"], name="relu"),
        helper.make_node("WgnnNoSuchOpB", ["c"], ["d"], name="b1"),
        helper.make_node("Custom", ["d"], ["e"], name="c1", domain="com.example"),
        helper.make_node("WgnnNoSuchOpA", ["e"], ["y"], name="a3"),
    ]
    model = onnx_model(nodes, [vi("x", TensorProto.FLOAT, [2])], [vi("y", TensorProto.FLOAT, [2])])
    model.opset_import.append(helper.make_opsetid("com.example", 1))
    with pytest.raises(UnsupportedOpError) as info:
        wgnn.InferenceSession(model)
    message = str(info.value)
    for expected in ("WgnnNoSuchOpA (3 nodes)", "WgnnNoSuchOpB (1 node)", "com.example.Custom (1 node)"):
        assert expected in message, message
    assert "Relu" not in message
    assert info.value.op_counts == {"WgnnNoSuchOpA": 3, "WgnnNoSuchOpB": 1, "com.example.Custom": 1}


@pytest.mark.parametrize(("code", "name"), [(TensorProto.FLOAT8E4M3FN, "FLOAT8E4M3FN"), (250, "code 250")])
@pytest.mark.parametrize("where", ["input", "output", "initializer"])
def test_onnx_element_type_wgnn_lacks_is_named(where, code, name):
    """An element type wgnn has no dtype for, known to the onnx package or not (a newer or corrupt
    file: the fuzzer found a graph output of type 32), is a typed error naming the tensor."""
    vi = helper.make_tensor_value_info
    x = vi("x", code if where == "input" else TensorProto.FLOAT, [2])
    y = vi("y", code if where == "output" else TensorProto.FLOAT, [2])
    initializers = []
    if where == "initializer":
        initializers = [helper.make_tensor("w", TensorProto.FLOAT, [2], [1.0, 2.0])]
        initializers[0].data_type = code
    nodes = [helper.make_node("Add", ["x", "w" if initializers else "x"], ["y"], name="add")]
    model = onnx_model(nodes, [x], [y], initializers)
    expected = {"input": f'tensor "x" has element type {name},', "output": f'tensor "y" has element type {name},',
                "initializer": f'initializer "w" has unsupported ONNX data type {name}'}[where]
    if where == "initializer" and code == 250:  # onnx's checker refuses it first, naming the tensor
        expected = "Unrecognized data_type (tensor name: w): 250"
    with pytest.raises(WgnnError) as info:
        wgnn.InferenceSession(model.SerializeToString(), providers=["numpy"])
    assert expected in str(info.value)


# ------------------------------------------------------------------------------------- feeds
def test_unknown_feed_name(session):
    with pytest.raises(InputError, match="'w'") as info:
        session.run(None, {**feeds(), "w": np.ones((2, 3), np.float32)})
    assert "x" in str(info.value) and "y" in str(info.value)  # lists the real inputs


def test_missing_feed(session):
    with pytest.raises(InputError, match=r"missing feed.*'y'"):
        session.run(None, {"x": np.ones((2, 3), np.float32)})


def test_wrong_dtype(session):
    with pytest.raises(InputError) as info:
        session.run(None, feeds(dtype=np.float64))
    message = str(info.value)
    assert '"x"' in message and "float32" in message and "float64" in message


def test_wrong_rank(session):
    with pytest.raises(InputError, match="rank") as info:
        session.run(None, {"x": np.ones((2, 3, 1), np.float32), "y": np.ones((2, 3), np.float32)})
    message = str(info.value)
    assert '"x"' in message and "2" in message and "3" in message


def test_incompatible_fixed_dim(session):
    with pytest.raises(InputError, match="dim 1 must be 3") as info:
        session.run(None, {"x": np.ones((2, 4), np.float32), "y": np.ones((2, 3), np.float32)})
    assert '"x"' in str(info.value)


def test_inconsistent_symbolic_dim_across_inputs(session):
    with pytest.raises(InputError, match='"N"') as info:
        session.run(None, feeds(n_x=2, n_y=5))
    message = str(info.value)
    assert '"y"' in message and "2" in message and "5" in message


def test_unknown_output_name(session):
    with pytest.raises(InputError, match="'nope'") as info:
        session.run(["nope"], feeds())
    assert "'z'" in str(info.value)


def test_resize_with_unknown_input_name():
    interp = wgnn.Interpreter(two_input_model())
    session = interp.create_session(providers=["numpy"])
    with pytest.raises(InputError, match="'q'"):
        session.resize({"q": (1, 3)})


def test_dynamic_input_without_shape_cannot_be_planned():
    session = wgnn.Interpreter(two_input_model()).create_session(providers=["numpy"])
    with pytest.raises(InputError, match=r'"x".*dynamic shape'):
        session.resize({})


# ------------------------------------------------------------------------------ inside graph
def test_shape_mismatch_inside_graph_names_the_node():
    vi = helper.make_tensor_value_info
    model = onnx_model([helper.make_node("Add", ["a", "b"], ["c"], name="bad_add")],
                       [vi("a", TensorProto.FLOAT, [2, 3]), vi("b", TensorProto.FLOAT, [4, 5])],
                       [vi("c", TensorProto.FLOAT, None)])
    with pytest.raises(ShapeError) as info:
        wgnn.InferenceSession(model, providers=["numpy"])
    message = str(info.value)
    assert "bad_add" in message and "[2, 3]" in message and "[4, 5]" in message


def test_shape_mismatch_found_at_resize_for_symbolic_inputs():
    vi = helper.make_tensor_value_info
    model = onnx_model([helper.make_node("Mul", ["a", "b"], ["c"], name="late_mul")],
                       [vi("a", TensorProto.FLOAT, ["n", 3]), vi("b", TensorProto.FLOAT, ["m", 3])],
                       [vi("c", TensorProto.FLOAT, None)])
    session = wgnn.InferenceSession(model, providers=["numpy"])
    ok = session.run(None, {"a": np.ones((2, 3), np.float32), "b": np.ones((1, 3), np.float32)})
    assert ok[0].shape == (2, 3)
    with pytest.raises(ShapeError, match="late_mul"):
        session.run(None, {"a": np.ones((2, 3), np.float32), "b": np.ones((3, 3), np.float32)})


def test_unknown_provider():
    with pytest.raises(wgnn.WgnnError, match="no-such-backend"):
        wgnn.InferenceSession(two_input_model(), providers=["no-such-backend"])
