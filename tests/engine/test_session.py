"""Sessions: resize to new shapes, automatic resize on run, report(), the onnxruntime-like API."""
from __future__ import annotations

import re

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper
from wgnn.engine.errors import WgnnError
from wgnn.models.zoo import build, example_inputs

import wgnn

W = np.linspace(-1.0, 1.0, 12, dtype=np.float32).reshape(3, 4)
B = np.float32(0.25)


def model_proto():
    """y = relu(x * w + b) on float32 x [N, 3, 4]; k2 = k + k on int64 k [N]."""
    vi = helper.make_tensor_value_info
    nodes = [helper.make_node("Mul", ["x", "w"], ["xw"], name="mul"),
             helper.make_node("Add", ["xw", "b"], ["xwb"], name="add"),
             helper.make_node("Relu", ["xwb"], ["y"], name="relu"),
             helper.make_node("Add", ["k", "k"], ["k2"], name="double")]
    graph = helper.make_graph(
        nodes, "session", [vi("x", TensorProto.FLOAT, ["N", 3, 4]), vi("k", TensorProto.INT64, ["N"])],
        [vi("y", TensorProto.FLOAT, ["N", 3, 4]), vi("k2", TensorProto.INT64, ["N"])],
        [numpy_helper.from_array(W, "w"), numpy_helper.from_array(np.array(B), "b")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def inputs(n: int, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    return {"x": rng.standard_normal((n, 3, 4)).astype(np.float32), "k": rng.integers(-50, 50, n)}


def expected(feeds: dict) -> dict:
    return {"y": np.maximum(feeds["x"] * W + B, 0), "k2": feeds["k"] * 2}


@pytest.fixture
def model_path(tmp_path):
    path = tmp_path / "session.wgnn"
    wgnn.convert(model_proto(), path, optimize=False)  # the report tests count its four nodes
    return path


def check(results: dict, feeds: dict) -> None:
    for name, want in expected(feeds).items():
        assert results[name].dtype == want.dtype and results[name].shape == want.shape
        np.testing.assert_allclose(results[name], want, rtol=1e-6, atol=1e-7)


def test_interpreter_create_session_with_providers(model_path):
    session = wgnn.Interpreter(model_path).create_session(providers=["numpy"])
    assert session.config.providers == ("numpy",)
    assert session.input_shapes is None  # symbolic batch: nothing planned until shapes are known
    with pytest.raises(WgnnError, match="not been resized"):
        session.report()
    feeds = inputs(2)
    check(session.run(feeds), feeds)


def test_resize_to_new_shapes_then_run(model_path):
    session = wgnn.Interpreter(model_path).create_session(providers=["numpy"])
    for n in (2, 5, 1):
        session.resize({"x": (n, 3, 4), "k": (n,)})
        assert session.input_shapes == {"x": (n, 3, 4), "k": (n,)}
        assert session.report()["input_shapes"] == {"x": [n, 3, 4], "k": [n]}
        count = session.resize_count
        feeds = inputs(n, seed=n)
        check(session.run(feeds), feeds)
        assert session.resize_count == count  # run() with the planned shapes does not re-plan


def test_run_resizes_automatically_on_new_shapes(model_path):
    session = wgnn.Interpreter(model_path).create_session(providers=["numpy"])
    feeds = inputs(3)
    check(session.run(feeds), feeds)
    assert session.resize_count == 1
    check(session.run(feeds), feeds)
    assert session.resize_count == 1
    feeds = inputs(7, seed=1)
    check(session.run(feeds), feeds)
    assert session.resize_count == 2 and session.input_shapes["x"] == (7, 3, 4)


def test_static_model_is_planned_at_creation():
    vi = helper.make_tensor_value_info
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "static",
                              [vi("x", TensorProto.FLOAT, [2, 3])], [vi("y", TensorProto.FLOAT, [2, 3])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    session = wgnn.Interpreter(model).create_session(providers=["numpy"])
    assert session.resize_count == 1 and session.input_shapes == {"x": (2, 3)}


def test_report_fields(model_path):
    session = wgnn.Interpreter(model_path).create_session(providers=["numpy"])
    n = 4
    session.resize({"x": (n, 3, 4), "k": (n,)})
    report = session.report()
    assert set(report) >= {"input_shapes", "ops_per_backend", "steps", "raster_steps", "folded_nodes", "segments",
                           "fallbacks", "conversions", "transfers", "memory", "flops"}
    assert report["ops_per_backend"] == {"numpy": 4}
    assert report["steps"] == 4 and report["raster_steps"] == 0 and report["folded_nodes"] == 0
    assert report["segments"] == [("numpy", 4)]
    assert report["fallbacks"] == [] and report["conversions"] == 0
    assert report["transfers"] == {"uploads": 0, "downloads": 0}  # numpy only: nothing crosses devices
    # One FLOP per output element for mul, add, relu (N*12 each) and the int add (N).
    assert report["flops"] == 3 * 12 * n + n
    memory = report["memory"]["numpy"]
    assert 0 < memory["planned_peak_bytes"] <= memory["naive_bytes"]


def test_get_inputs_and_outputs_match_onnxruntime(model_path):
    ours = wgnn.InferenceSession(model_path, providers=["numpy"])
    theirs = ort.InferenceSession(model_proto().SerializeToString(), providers=["CPUExecutionProvider"])
    for mine, ref in [(ours.get_inputs(), theirs.get_inputs()), (ours.get_outputs(), theirs.get_outputs())]:
        assert [(a.name, a.shape, a.type) for a in mine] == [(a.name, a.shape, a.type) for a in ref]
    assert [a.type for a in ours.get_inputs()] == ["tensor(float)", "tensor(int64)"]
    assert ours.get_inputs()[0].shape == ["N", 3, 4]
    assert ours.get_providers() == ["numpy"]


def test_inference_session_run_selects_outputs(model_path):
    session = wgnn.InferenceSession(model_path, providers=["CPUExecutionProvider"])
    feeds = inputs(2)
    k2, y = session.run(["k2", "y"], feeds)
    np.testing.assert_array_equal(k2, feeds["k"] * 2)
    np.testing.assert_allclose(y, expected(feeds)["y"], rtol=1e-6)


@pytest.mark.parametrize("providers", [("numpy",), ("wgpu", "numpy")])
def test_repeated_runs_are_identical_and_results_are_not_overwritten(model_path, providers):
    """Each run's outputs are new, writeable arrays of the caller's (handed over without a copy
    where the backend made them for that run)."""
    from helpers import gpu_adapters

    if "wgpu" in providers and not gpu_adapters():
        pytest.skip("no GPU adapter")
    session = wgnn.InferenceSession(model_path, providers=list(providers))
    feeds_a, feeds_b = inputs(3, seed=10), inputs(3, seed=11)
    first = session.run(None, feeds_a)
    kept = [a.copy() for a in first]
    second = session.run(None, feeds_a)
    for a, b in zip(first, second, strict=True):
        np.testing.assert_array_equal(a, b)
        assert not np.shares_memory(a, b) and a.flags.writeable
    other = session.run(None, feeds_b)  # same shapes, so the same planned arena is reused
    for a, k in zip(first, kept, strict=True):
        np.testing.assert_array_equal(a, k)
    check(dict(zip(["y", "k2"], other, strict=True)), feeds_b)
    # Outputs of a session run are the caller's: writing to them changes nothing inside.
    first[0][...] = -1.0
    np.testing.assert_array_equal(session.run(None, feeds_a)[0], kept[0])


@pytest.mark.parametrize("providers", [("numpy",), ("wgpu", "numpy")])
def test_outputs_written_into_given_arrays(model_path, providers):
    """out= arrays receive the outputs and come back, run after run (a strided slice too); the
    outputs not named still come as new arrays."""
    from helpers import gpu_adapters

    if "wgpu" in providers and not gpu_adapters():
        pytest.skip("no GPU adapter")
    session = wgnn.InferenceSession(model_path, providers=list(providers))
    batch = np.zeros((2, 5, 3, 4), np.float32)
    y_out = batch[:, 1, :, :]  # a view with gaps between its rows
    for seed in (1, 2):
        feeds = inputs(2, seed=seed)
        y, k2 = session.run(None, feeds, out={"y": y_out})
        assert y is y_out and np.shares_memory(y, batch)
        check({"y": batch[:, 1], "k2": k2}, feeds)
    np.testing.assert_array_equal(batch[:, [0, 2, 3, 4]], 0)  # nothing written around the view
    (k2,) = session.run(["k2"], feeds, out={"k2": np.empty(2, np.int64)})
    np.testing.assert_array_equal(k2, feeds["k"] * 2)


def test_given_output_arrays_are_checked_before_anything_is_written(model_path):
    session = wgnn.InferenceSession(model_path).session
    feeds = inputs(2)
    y_out = np.full((2, 3, 4), 7.0, np.float32)
    cases = [
        ({"y": y_out, "k2": np.empty(3, np.int64)}, "out['k2'] is int64[3], but output 'k2' is int64[2]"),
        ({"y": y_out, "k2": np.empty(2, np.int32)}, "out['k2'] is int32[2], but output 'k2' is int64[2]"),
        ({"y": y_out, "z": y_out}, "out names 'z', which this run does not return"),
        ({"y": y_out.tolist()}, "out['y'] must be a writeable numpy array, got list"),
        ({"y": np.broadcast_to(np.float32(0), (2, 3, 4))}, "got a read-only array"),
        ([y_out], "out must be a dict"),
    ]
    for out, message in cases:
        with pytest.raises(wgnn.InputError, match=re.escape(message)):
            session.run(feeds, out=out)
        np.testing.assert_array_equal(y_out, 7.0)  # untouched
    with pytest.raises(wgnn.InputError, match="out names 'y', which this run does not return"):
        session.run(feeds, ["k2"], out={"y": y_out})


def _chain_session() -> wgnn.InferenceSession:
    """numpy: n = -x, e = exp(n) (n an output that a later step reads), c = a 3x3 conv of x."""
    vi = helper.make_tensor_value_info
    w = numpy_helper.from_array(np.linspace(-1, 1, 4 * 4 * 9, dtype=np.float32).reshape(4, 4, 3, 3), "w")
    nodes = [helper.make_node("Neg", ["x"], ["n"]), helper.make_node("Exp", ["n"], ["e"]),
             helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1])]
    shape = [1, 4, 64, 64]
    graph = helper.make_graph(nodes, "g", [vi("x", TensorProto.FLOAT, shape)],
                              [vi(name, TensorProto.FLOAT, shape) for name in "nec"], [w])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    return wgnn.InferenceSession(model, providers=["numpy"]), ort.InferenceSession(
        model.SerializeToString(), providers=["CPUExecutionProvider"])


def test_numpy_graph_outputs_are_written_in_place_or_handed_over():
    """On numpy a graph output's step writes into the out= array itself, or into a new array that
    the run returns as it is: per run no array of the outputs' size beyond them (there were
    two per output: the step's and the copy returned)."""
    import tracemalloc

    session, reference = _chain_session()
    x = np.random.default_rng(4).standard_normal((1, 4, 64, 64)).astype(np.float32)
    want = dict(zip("nec", reference.run(None, {"x": x}), strict=True))
    given = {name: np.empty_like(x) for name in "ne"}
    for _ in range(2):
        session.run(None, {"x": x}, out=given)
    tracemalloc.start()
    try:
        got = session.run(None, {"x": x}, out=given)
        with_out = tracemalloc.get_traced_memory()[1]
        tracemalloc.reset_peak()
        first = session.run(None, {"x": x})
        without_out = tracemalloc.get_traced_memory()[1] - with_out
    finally:
        tracemalloc.stop()
    assert got[0] is given["n"] and got[1] is given["e"]
    for results in (got, first):
        for name, value in zip("nec", results, strict=True):
            np.testing.assert_allclose(value, want[name], rtol=1e-5, atol=1e-5, err_msg=name)
    # with out=: the conv's output only (c has no out= array); without: the three outputs
    assert with_out < 1.2 * x.nbytes, with_out / x.nbytes
    assert without_out < 3.2 * x.nbytes, without_out / x.nbytes
    second = session.run(None, {"x": -x})  # new arrays: the first run's results stay as they were
    for a, b in zip(first, second, strict=True):
        assert not np.shares_memory(a, b)
    np.testing.assert_allclose(first[0], want["n"], rtol=1e-6)


def test_out_arrays_overlapping_the_feeds_are_written_after_the_run():
    """An out= array that is a feed (or overlaps one) cannot take a step's writes while the step
    reads the feed: it gets a copy once the run is done, and the results are the same."""
    session, reference = _chain_session()
    x = np.random.default_rng(5).standard_normal((1, 4, 64, 64)).astype(np.float32)
    want = reference.run(None, {"x": x})
    feed = x.copy()
    n, e, c = session.run(None, {"x": feed}, out={"c": feed})
    assert c is feed
    for got, expected_value in zip((n, e, c), want, strict=True):
        np.testing.assert_allclose(got, expected_value, rtol=1e-5, atol=1e-5)


GIVEN_OUTPUT_FAULTS = """
import resource
import numpy as np
from onnx import TensorProto, helper, numpy_helper
import wgnn
w = numpy_helper.from_array(np.full((32, 16, 2, 2), 0.1, np.float32), "w")
node = helper.make_node("ConvTranspose", ["x", "w"], ["y"], strides=[2, 2])
graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 32, 56, 56])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 16, 112, 112])], [w])
session = wgnn.InferenceSession(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]))
feeds = {"x": np.ones((1, 32, 56, 56), np.float32)}
y = np.empty((1, 16, 112, 112), np.float32)
for _ in range(3):
    session.run(None, feeds, out={"y": y})
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(10):
    session.run(None, feeds, out={"y": y})
print((resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) / 10, float(y[0, 0, 0, 0]))
"""


def test_given_output_arrays_take_no_fresh_memory():
    """With out=, a run returning an 800 KB output maps no fresh memory (a new array each run
    made 360 page faults per run in a fresh process)."""
    resource = pytest.importorskip("resource")
    del resource
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", GIVEN_OUTPUT_FAULTS], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    faults, value = map(float, done.stdout.split())
    assert faults < 16 and abs(value - 3.2) < 1e-5  # 32 input channels x 1.0 x 0.1


@pytest.mark.parametrize("providers", [("numpy",), ("wgpu", "numpy")])
def test_one_session_shared_by_threads(providers):
    """Runs (and the resizes new batch sizes cause) from several threads take turns safely."""
    import threading

    from helpers import gpu_adapters

    if "wgpu" in providers and not gpu_adapters():
        pytest.skip("no GPU adapter")
    model = build("resnet")
    session = wgnn.InferenceSession(model, config=wgnn.Config(providers=providers))
    reference = wgnn.InferenceSession(model, providers=["numpy"])
    cases = [example_inputs(model, batch, seed=batch) for batch in (1, 2, 3)]
    expected = [reference.run(None, feeds)[0] for feeds in cases]
    errors = []

    def work(index):
        for round_ in range(6):
            case = (index + round_) % len(cases)
            got = session.run(None, cases[case])[0]
            if not np.allclose(got, expected[case], rtol=1e-4, atol=1e-5):
                errors.append((index, case))

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
