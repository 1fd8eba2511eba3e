"""models/verify.py: the flatbuffers structure verifier, the graph checks, their limits, and the
ONNX frontend's checker and external-data checks. Every refusal is a typed ModelError that names
the object (and, for structure, the byte offset)."""
from __future__ import annotations

import os
import re
import struct
from pathlib import Path

import flatbuffers
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from wgnn.engine.errors import FormatVersionError, ModelError, ModelVerificationError
from wgnn.engine.graph import Graph, Model, Node, TensorInfo
from wgnn.models import verify
from wgnn.models.format import load_wgnn, model_to_bytes, read_model
from wgnn.models.verify import SCHEMA, Limits, structure_positions, verify_buffer, verify_graph
from wgnn.models.wgnn_fb import Attribute as FbAttribute
from wgnn.models.wgnn_fb import Graph as FbGraph
from wgnn.models.wgnn_fb import Model as FbModel
from wgnn.models.wgnn_fb import Node as FbNode
from wgnn.models.wgnn_fb.AttrType import AttrType
from wgnn.tools.convert.onnx import convert_onnx

import wgnn

OP = "VerifyTestOp"  # unknown to wgnn: attributes are stored by their Python type
DIGITS = Path(wgnn.__file__).resolve().parent.parent / "models" / "data" / "digits.wgnn"


def small_model() -> Model:
    graph = Graph(nodes=[Node(OP, ["x", "wa"], ["h"], {"k": [1, 2], "mode": "fast"}, name="n0"),
                         Node(OP, ["h", "wb"], ["y"], {"alpha": 0.5}, name="n1")],
                  inputs=[TensorInfo("x", "float32", ("N", 4))], outputs=[TensorInfo("y", "float32", ("N", 4))],
                  initializers={"wa": np.arange(12, dtype=np.float32).reshape(3, 4), "wb": np.ones(4, np.float32)})
    return Model(graph, metadata={"a": "b"})


def refused(data: bytes, *, limits: Limits | None = None) -> ModelVerificationError:
    with pytest.raises(ModelVerificationError) as info:
        read_model(data, origin="m.wgnn", limits=limits)
    assert "m.wgnn" in str(info.value)
    return info.value


def patched(data: bytes, position: int, payload: bytes) -> bytes:
    out = bytearray(data)
    out[position:position + len(payload)] = payload
    return bytes(out)


def field_position(table, slot: int) -> int:
    """Byte position of a field of a generated flatbuffers object (slot = vtable offset)."""
    return table._tab.Pos + table._tab.Offset(slot)


# --------------------------------------------------------------------------------- schema
def _fbs_tables() -> dict[str, list[tuple[str, str, bool]]]:
    text = (Path(verify.__file__).parent / "schema" / "wgnn.fbs").read_text()
    text = re.sub(r"//[^\n]*", "", text)
    tables = {}
    for name, body in re.findall(r"table (\w+) \{(.*?)\}", text, re.S):
        tables[name] = [(f, t.strip(), "required" in (a or ""))
                        for f, t, a in re.findall(r"(\w+)\s*:\s*([\[\]\w]+)[^;(]*(?:\(([^)]*)\))?;", body)]
    return tables


SCALAR_BYTES = {"long": 8, "double": 8, "uint": 4, "ubyte": 1, "bool": 1, "AttrType": 1}


def test_verifier_schema_matches_the_fbs_file():
    tables = _fbs_tables()
    assert set(tables) == set(SCHEMA)
    for name, fields in tables.items():
        mine = SCHEMA[name]
        assert [f.name for f in mine] == [f for f, _, _ in fields], name
        for field, (_, kind, required) in zip(mine, fields, strict=True):
            assert field.required == required, f"{name}.{field.name}"
            element = kind.strip("[]")
            if kind.startswith("["):
                expected = ("strings", 4, "") if element == "string" else \
                    ("vector", SCALAR_BYTES[element], "") if element in SCALAR_BYTES else ("tables", 4, element)
            else:
                expected = ("string", 4, "") if kind == "string" else \
                    ("scalar", SCALAR_BYTES[kind], "") if kind in SCALAR_BYTES else ("table", 4, kind)
            assert (field.kind, field.size, field.table) == expected, f"{name}.{field.name}"


# ------------------------------------------------------------------------------ structure
def test_valid_files_pass_and_their_structure_is_mapped():
    from wgnn.models.zoo import build

    for data in (model_to_bytes(small_model()), DIGITS.read_bytes(), model_to_bytes(wgnn.convert(build("bert")))):
        verify_buffer(data)
        marks = structure_positions(data)
        assert {"uoffset", "length", "vtable", "soffset"} <= set(marks)
        assert all(0 <= p < len(data) for ps in marks.values() for p in ps)


def test_huge_vector_lengths_are_caught_everywhere():
    data = model_to_bytes(small_model())
    positions = structure_positions(data)["length"]
    assert len(positions) > 20
    for position in positions:
        for value in (0xFFFFFFFF, 0x7FFFFFFF, len(data)):
            error = refused(patched(data, position, struct.pack("<I", value)))
            assert error.offset is not None and error.where, str(error)
            assert "runs past the end" in str(error) or "NUL-terminated" in str(error), str(error)


def test_bad_offsets_are_caught_everywhere():
    data = model_to_bytes(small_model())
    for position in structure_positions(data)["uoffset"]:
        for value, expected in ((0, "not a valid forward offset"), (0x80000000, "not a valid forward offset"),
                                (len(data) - position, "past the end")):
            error = refused(patched(data, position, struct.pack("<I", value)))
            assert expected in str(error) and error.offset == position, str(error)


def test_bad_vtables_and_soffsets():
    data = model_to_bytes(small_model())
    marks = structure_positions(data)
    for vtable in set(marks["vtable"]):
        assert "invalid size" in str(refused(patched(data, vtable, struct.pack("<H", 3))))
        assert "does not fit" in str(refused(patched(data, vtable + 2, struct.pack("<H", 0xFFFF))))
    for table in marks["soffset"][:10]:
        assert "vtable" in str(refused(patched(data, table, struct.pack("<i", -(2 ** 31)))))


def test_a_field_outside_its_table_is_refused():
    data = model_to_bytes(small_model())
    root = FbModel.Model.GetRootAs(data, 0)
    node = root.Graph().Nodes(0)
    vtable = node._tab.Pos - struct.unpack_from("<i", data, node._tab.Pos)[0]
    error = refused(patched(data, vtable + 4, struct.pack("<H", 0xFFF0)))  # Node.name's slot
    assert "lies outside" in str(error) and "graph.nodes[0].name" in str(error)


def test_strings_must_be_terminated_and_utf8():
    data = model_to_bytes(small_model())
    start = data.index(b"\x02\x00\x00\x00n0\x00")  # the node name "n0": length, bytes, NUL
    error = refused(patched(data, start + 6, b"X"))
    assert "NUL-terminated" in str(error) and "graph.nodes[0].name" in error.where
    error = refused(patched(data, start + 4, b"\xff"))
    assert "UTF-8" in str(error)


def _model_file(build_graph) -> bytes:
    b = flatbuffers.Builder(0)
    graph = build_graph(b)
    FbModel.Start(b)
    FbModel.AddFormatVersion(b, 1)
    FbModel.AddGraph(b, graph)
    b.Finish(FbModel.End(b), file_identifier=b"WGNN")
    return bytes(b.Output())


def _node(b, op_type: str | None, graph: int | None = None) -> int:
    attrs = []
    if graph is not None:
        name = b.CreateString("body")
        FbAttribute.Start(b)
        FbAttribute.AddName(b, name)
        FbAttribute.AddType(b, AttrType.GRAPH)
        FbAttribute.AddGraph(b, graph)
        attrs.append(FbAttribute.End(b))
    FbNode.StartAttributesVector(b, len(attrs))
    for a in attrs:
        b.PrependUOffsetTRelative(a)
    attr_vec = b.EndVector()
    op = b.CreateString(op_type) if op_type is not None else None
    FbNode.Start(b)
    if op is not None:
        FbNode.AddOpType(b, op)
    FbNode.AddAttributes(b, attr_vec)
    return FbNode.End(b)


def _graph(b, nodes: list[int]) -> int:
    FbGraph.StartNodesVector(b, len(nodes))
    for n in reversed(nodes):
        b.PrependUOffsetTRelative(n)
    vec = b.EndVector()
    FbGraph.Start(b)
    FbGraph.AddNodes(b, vec)
    return FbGraph.End(b)


def test_missing_required_field():
    data = _model_file(lambda b: _graph(b, [_node(b, None)]))
    error = refused(data)
    assert "required field is missing" in str(error) and error.where == "graph.nodes[0].op_type"


def test_shared_offsets_cannot_blow_up_the_work():
    # Each level's graph lists the same node twice: 2**14 paths through a file of a few KiB. Legal
    # flatbuffers, never written by wgnn, and the decoder would walk every path.
    def build(b):
        graph = _graph(b, [])
        for _ in range(14):
            node = _node(b, OP, graph)
            graph = _graph(b, [node, node])
        return graph

    data = _model_file(build)
    assert len(data) < 4096
    assert "objects reached" in str(refused(data))


def test_nesting_depth_and_object_limits():
    inner = Graph(nodes=[Node(OP, ["a"], ["b"], name="leaf")], inputs=[TensorInfo("a", "float32", (1,))],
                  outputs=[TensorInfo("b", "float32", (1,))])
    for level in range(4):
        inner = Graph(nodes=[Node(OP, ["a"], ["b"], {"body": inner}, name=f"level{level}")],
                      inputs=[TensorInfo("a", "float32", (1,))], outputs=[TensorInfo("b", "float32", (1,))])
    data = model_to_bytes(Model(inner))
    read_model(data)
    assert "nest deeper than 6" in str(refused(data, limits=Limits(max_depth=6)))
    assert "more than 5 objects" in str(refused(data, limits=Limits(max_objects=5)))


def test_format_version_missing_or_newer():
    b = flatbuffers.Builder(0)
    graph = _graph(b, [])
    FbModel.Start(b)
    FbModel.AddGraph(b, graph)
    b.Finish(FbModel.End(b), file_identifier=b"WGNN")
    assert "no format version" in str(refused(bytes(b.Output())))
    data = model_to_bytes(small_model())
    root = FbModel.Model.GetRootAs(data, 0)
    newer = patched(data, field_position(root, 4), struct.pack("<I", 7))
    with pytest.raises(FormatVersionError, match="version 7"):
        read_model(newer)


def test_identifier_and_tiny_files():
    data = model_to_bytes(small_model())
    for bad in (b"", data[:7], patched(data, 4, b"WGNX")):
        with pytest.raises(ModelError, match=r"not a \.wgnn file"):
            read_model(bad)


# ---------------------------------------------------------------------- decoded contents
def test_tensor_dims_must_match_the_data():
    data = model_to_bytes(small_model())
    tensor = FbModel.Model.GetRootAs(data, 0).Graph().Initializers(0)
    dims_vector = tensor._tab.Vector(tensor._tab.Offset(8))
    error = refused(patched(data, dims_vector, struct.pack("<q", 5)))  # [3, 4] -> [5, 4]
    assert 'tensor "wa" holds 48 bytes, but shape [5, 4] of float32 needs 80' in str(error)
    error = refused(patched(data, dims_vector, struct.pack("<q", -3)))
    assert 'tensor "wa" has negative dim 0 = -3' in str(error)
    error = refused(patched(data, dims_vector, struct.pack("<q", 2 ** 40)))
    assert "past the limit" in str(error)
    error = refused(patched(data, field_position(tensor, 6), b"\x63"))
    assert 'tensor "wa" has unknown dtype code 99' in str(error)


def test_duplicate_names_in_the_file():
    data = model_to_bytes(small_model())
    second = FbModel.Model.GetRootAs(data, 0).Graph().Initializers(1)
    assert second.Name() == b"wb"
    error = refused(patched(data, second._tab.Indirect(field_position(second, 4)) + 4, b"wa"))
    assert 'initializer "wa" appears twice' in str(error)
    start = data.index(b"\x04\x00\x00\x00mode\x00")
    error = refused(patched(data, start, b"\x01\x00\x00\x00k\x00"))  # "mode" -> "k" (length 1, terminated)
    assert "attribute 'k' appears twice" in str(error) and 'node "n0"' in str(error)


def test_attribute_type_code_and_missing_payloads():
    data = model_to_bytes(small_model())
    attr = FbModel.Model.GetRootAs(data, 0).Graph().Nodes(1).Attributes(0)  # alpha: FLOAT
    error = refused(patched(data, field_position(attr, 6), bytes([42])))
    assert "attribute 'alpha' has unknown type code 42" in str(error)
    error = refused(patched(data, field_position(attr, 6), bytes([AttrType.TENSOR])))
    assert "type TENSOR but holds no tensor" in str(error)


def g(nodes, inputs=(("x", (2,)),), outputs=("y",), initializers=None) -> Graph:
    return Graph(nodes=nodes, inputs=[TensorInfo(n, "float32", s) for n, s in inputs],
                 outputs=[TensorInfo(n, "float32", None) for n in outputs], initializers=initializers or {})


def graph_error(graph: Graph, limits: Limits | None = None) -> str:
    with pytest.raises(ModelVerificationError) as info:
        verify_graph(graph, origin="m.wgnn", limits=limits)
    return str(info.value)


def test_undefined_tensors_and_outputs():
    text = graph_error(g([Node(OP, ["x", "ghost"], ["y"], name="reader")]))
    assert f'{OP} node "reader" reads tensor "ghost"' in text
    text = graph_error(g([Node(OP, ["x"], ["y"], name="a")], outputs=("y", "nowhere")))
    assert 'output "nowhere" is not produced' in text


def test_cycles_are_refused():
    text = graph_error(g([Node(OP, ["x", "c"], ["b"], name="a"), Node(OP, ["b"], ["c"], name="b_to_c"),
                          Node(OP, ["b"], ["y"], name="out")]))
    assert "cycle" in text and 'node "a"' in text and 'node "b_to_c"' in text


def test_duplicate_definitions():
    text = graph_error(g([Node(OP, ["x"], ["y"], name="first"), Node(OP, ["x"], ["y"], name="second")]))
    assert "duplicate output name" in text and '"first"' in text and '"second"' in text
    text = graph_error(g([Node(OP, ["y"], ["x"], name="overwrite")], inputs=(("x", (2,)), ("y", (2,))),
                         outputs=("x",)))
    assert 'writes tensor "x", which is already a graph input' in text
    assert "declared twice" in graph_error(g([], inputs=(("x", (2,)), ("x", (2,))), outputs=("x",)))
    assert "listed twice" in graph_error(g([], outputs=("x", "x")))
    assert "name of a graph input" in graph_error(g([], outputs=("x",), initializers={"x": np.zeros(2)}))


def test_dims_and_limits():
    ok = g([Node(OP, ["x"], ["y"], name="n")], inputs=(("x", ("N", -1, 3)),))
    verify_graph(ok)
    assert "negative dim 1 = -2" in graph_error(g([Node(OP, ["x"], ["y"], name="n")], inputs=(("x", (2, -2)),)))
    limits = Limits(max_tensor_elements=1000, max_rank=4)
    text = graph_error(g([Node(OP, ["x"], ["y"], name="n")], inputs=(("x", (10, "N", 101)),)), limits)
    assert "1010 elements" in text and 'input 0 "x"' in text
    assert "rank 5" in graph_error(g([Node(OP, ["x"], ["y"], name="n")], inputs=(("x", (1,) * 5),)), limits)
    big = g([Node(OP, ["x", "w"], ["y"], name="n")], initializers={"w": np.zeros((40, 40), np.float32)})
    assert 'initializer "w" has 1600 elements' in graph_error(big, limits)


def test_attribute_types_follow_the_op_definition():
    text = graph_error(g([Node("Unary", ["x"], ["y"], {"kind": 3}, name="act")]))
    assert "Unary node \"act\" attribute 'kind' should be string, got int 3" in text
    text = graph_error(g([Node("Binary", ["x", "x"], ["y"], {"kind": ["add"]}, name="b")]))
    assert "should be string, got list" in text
    verify_graph(g([Node("Unary", ["x"], ["y"], {"kind": "relu"}, name="ok")]))


def test_subgraphs_see_enclosing_tensors_only():
    body = Graph(nodes=[Node(OP, ["s", "outer"], ["t"], name="inner")], inputs=[TensorInfo("s", "float32", (2,))],
                 outputs=[TensorInfo("t", "float32", (2,))])
    outer = g([Node(OP, ["x"], ["outer"], name="make"), Node(OP, ["outer"], ["y"], {"body": body}, name="loop")])
    verify_graph(outer)
    read_model(model_to_bytes(Model(outer)))
    body.nodes[0].inputs = ["s", "elsewhere"]
    assert 'node "inner" reads tensor "elsewhere"' in graph_error(outer)


def test_limits_reach_the_load_functions(tmp_path):
    data = model_to_bytes(small_model())
    limits = Limits(max_tensor_elements=10)
    assert 'tensor "wa" has 12 elements' in str(refused(data, limits=limits))
    path = tmp_path / "m.wgnn"
    path.write_bytes(data)
    load_wgnn(path)
    with pytest.raises(ModelVerificationError, match="12 elements"):
        load_wgnn(path, limits=limits)


def test_corrupted_file_through_the_public_api(tmp_path):
    data = model_to_bytes(small_model())
    position = structure_positions(data)["length"][3]
    path = tmp_path / "broken.wgnn"
    path.write_bytes(patched(data, position, struct.pack("<I", 0xFFFFFFF0)))
    with pytest.raises(ModelVerificationError, match=r"broken\.wgnn is truncated or corrupted") as info:
        wgnn.InferenceSession(path)
    assert info.value.offset == position
    assert isinstance(info.value, wgnn.ModelError)


def test_error_pickles_with_its_fields():
    import pickle

    error = pickle.loads(pickle.dumps(ModelVerificationError("bad", where="graph.nodes[1]", offset=12)))
    assert (str(error), error.where, error.offset) == ("bad", "graph.nodes[1]", 12)


# ------------------------------------------------------------------------------------- ONNX
def onnx_model(nodes, initializers=(), inputs=None):
    vi = helper.make_tensor_value_info
    graph = helper.make_graph(nodes, "verify", inputs or [vi("x", TensorProto.FLOAT, [2, 3])],
                              [vi("y", TensorProto.FLOAT, [2, 3])], list(initializers))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def test_onnx_checker_failures_name_the_node():
    model = onnx_model([helper.make_node("Relu", ["x"], ["y"], name="act", alpha=0.5)])
    with pytest.raises(ModelError, match=r'not a valid ONNX model: Relu node "act": Unrecognized attribute: alpha'):
        convert_onnx(model)
    model = onnx_model([helper.make_node("Relu", ["x", "x"], ["y"], name="two")])
    with pytest.raises(ModelError, match=r'Relu node "two": .*input size 2'):
        wgnn.InferenceSession(model)
    model = onnx_model([helper.make_node("Relu", ["h"], ["y"], name="late"),
                        helper.make_node("Relu", ["x"], ["h"], name="early")])
    with pytest.raises(ModelError, match="topologically sorted"):
        convert_onnx(model)


def test_onnx_untyped_outputs_are_still_accepted():
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"], name="r")], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                              [onnx.ValueInfoProto(name="y")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    (y,) = wgnn.InferenceSession(model).run(None, {"x": np.array([-1.0, 2.0], np.float32)})
    np.testing.assert_array_equal(y, [0.0, 2.0])


def test_onnx_initializer_data_that_does_not_match_its_dims():
    w = numpy_helper.from_array(np.ones((2, 3), np.float32), "w")
    w.raw_data = w.raw_data[:-4]
    model = onnx_model([helper.make_node("Add", ["x", "w"], ["y"], name="add")], [w])
    with pytest.raises(ModelError, match=r'initializer "w" \(dims \[2, 3\]\) cannot be decoded'):
        convert_onnx(model)
    w = numpy_helper.from_array(np.ones((2, 3), np.float32), "w")
    w.dims[:] = [2 ** 40, 3]
    model = onnx_model([helper.make_node("Add", ["x", "w"], ["y"], name="add")], [w])
    with pytest.raises(ModelError, match=r'initializer "w" has dim 0 = 1099511627776, past the limit'):
        convert_onnx(model)


def external_model(folder: Path, values=None) -> Path:
    """A model whose initializer w lives in folder/w.bin; returns the .onnx path."""
    values = np.arange(6, dtype=np.float32).reshape(2, 3) if values is None else values
    model = onnx_model([helper.make_node("Add", ["x", "w"], ["y"], name="add")],
                       [numpy_helper.from_array(values, "w")])
    path = folder / "model.onnx"
    onnx.save_model(model, str(path), save_as_external_data=True, all_tensors_to_one_file=True, location="w.bin",
                    size_threshold=0)
    return path


def rewrite_external(path: Path, **entries: str) -> None:
    model = onnx.load(str(path), load_external_data=False)
    tensor = model.graph.initializer[0]
    info = {e.key: e.value for e in tensor.external_data}
    info.update(entries)
    del tensor.external_data[:]
    for key, value in info.items():
        tensor.external_data.add(key=key, value=value)
    path.write_bytes(model.SerializeToString())


def test_external_data_loads_from_the_models_folder(tmp_path, monkeypatch):
    path = external_model(tmp_path)
    monkeypatch.chdir("/")  # the checker must not resolve locations against the working directory
    model = convert_onnx(path)
    np.testing.assert_array_equal(model.graph.initializers["w"], np.arange(6, dtype=np.float32).reshape(2, 3))
    with pytest.raises(ModelError, match=r'initializer "w" keeps its data in an external file'):
        convert_onnx(path.read_bytes())


@pytest.mark.parametrize(("entries", "expected"), [
    ({"location": "/etc/passwd"}, r"external data path '/etc/passwd' is absolute"),
    ({"location": "../outside.bin"}, r"external data path '../outside.bin' resolves to .*outside the model's folder"),
    ({"location": "gone.bin"}, r"external data file 'gone.bin' .* not found"),
    ({"location": ""}, r"names no file"),
    ({"offset": "16"}, r"at offset 16 \+ 24 bytes runs past the end of 'w.bin' \(24 bytes\)"),
    ({"offset": "ten"}, r"offset 'ten' \(file 'w.bin'\) is not an integer"),
    ({"offset": "-4"}, r"offset -4 \(file 'w.bin'\) is negative"),
    ({"length": "8"}, r"length 8 \(file 'w.bin'\) does not match dims \[2, 3\]"),
])
def test_bad_external_data_is_refused(tmp_path, entries, expected):
    folder = tmp_path / "model"
    folder.mkdir()
    (tmp_path / "outside.bin").write_bytes(bytes(24))
    path = external_model(folder)
    rewrite_external(path, **entries)
    with pytest.raises(ModelError, match=expected) as info:
        convert_onnx(path)
    assert 'initializer "w"' in str(info.value) and str(path) in str(info.value)


def test_external_data_symlink_leaving_the_folder(tmp_path):
    folder = tmp_path / "model"
    folder.mkdir()
    secret = tmp_path / "secret.bin"
    secret.write_bytes(np.zeros(6, np.float32).tobytes())
    path = external_model(folder)
    os.remove(folder / "w.bin")
    os.symlink(secret, folder / "w.bin")
    with pytest.raises(ModelError, match=r"'w.bin' resolves to .*secret\.bin, outside the model's folder"):
        convert_onnx(path)
    # A symlink that stays inside the folder is fine.
    inside = folder / "real.bin"
    inside.write_bytes(np.ones(6, np.float32).tobytes())
    os.remove(folder / "w.bin")
    os.symlink(inside, folder / "w.bin")
    np.testing.assert_array_equal(convert_onnx(path).graph.initializers["w"], np.ones((2, 3), np.float32))
