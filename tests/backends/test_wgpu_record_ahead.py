"""A GPU segment's next run is recorded while the GPU runs the current one (backend.py,
_record_ahead): the recorded command buffer must see the next run's inputs, and must be dropped
whenever what it binds goes away (a resize, a grown staging buffer)."""
import numpy as np
import onnx
import pytest
from helpers import gpu_adapters
from onnx import TensorProto, helper
from wgnn.backends.wgpu.backend import WgpuBackend

import wgnn

pytestmark = pytest.mark.skipif(not gpu_adapters(), reason="no GPU adapter (install mesa-vulkan-drivers)")

BIAS = np.linspace(-1, 1, 5).astype(np.float32)


def split_model(copies: int):
    """x[N, 5] -> Add(bias) -> Relu on the GPU; Sqrt in float64 on numpy (the GPU stores no float64);
    then, on the GPU again, `copies` side by side, times 2: y[N, 5 * copies]."""
    nodes = [helper.make_node("Add", ["x", "bias"], ["a"]), helper.make_node("Relu", ["a"], ["r"]),
             helper.make_node("Cast", ["r"], ["r64"], to=TensorProto.DOUBLE),
             helper.make_node("Sqrt", ["r64"], ["s64"]),
             helper.make_node("Cast", ["s64"], ["m"], to=TensorProto.FLOAT),
             helper.make_node("Concat", ["m"] * copies, ["c"], axis=1),
             helper.make_node("Mul", ["c", "two"], ["y"])]
    graph = helper.make_graph(
        nodes, "split", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 5])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [onnx.numpy_helper.from_array(BIAS, "bias"), onnx.numpy_helper.from_array(np.array(2.0, np.float32), "two")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


def expected(x, copies):
    m = np.sqrt(np.maximum(x + BIAS, 0).astype(np.float64)).astype(np.float32)
    return np.concatenate([m] * copies, axis=1) * 2


@pytest.fixture
def recordings(monkeypatch):
    """How many runs each call of session.run recorded (its own, or ahead)."""
    counted = []
    record = WgpuBackend._record_run

    def counting(self, *args, **kwargs):
        counted.append(1)
        return record(self, *args, **kwargs)

    monkeypatch.setattr(WgpuBackend, "_record_run", counting)
    return counted


def gpu_segments(session):
    return [s for s in session.session.segments if s.backend.name == "wgpu"]


@pytest.mark.parametrize("adapter", [a["index"] for a in gpu_adapters()])
def test_later_runs_submit_what_was_recorded_ahead_and_see_their_own_inputs(recordings, adapter):
    session = wgnn.InferenceSession(split_model(1), config=wgnn.Config(providers=("wgpu", "numpy"), adapter=adapter))
    rng = np.random.default_rng(3)
    for run in range(4):
        x = rng.standard_normal((3, 5)).astype(np.float32)
        recordings.clear()
        np.testing.assert_allclose(session.run(None, {"x": x})[0], expected(x, 1), rtol=1e-6)
        segments = gpu_segments(session)
        assert len(segments) == 2 and [s.backend.name for s in session.session.segments] == ["wgpu", "numpy", "wgpu"]
        # The first run records each segment twice (its own run, then the next); later runs only ahead.
        assert len(recordings) == (2 if run == 0 else 1) * len(segments)
        recorded = segments[0].backend._recorded_runs
        assert all(recorded[id(s)].segment is s for s in segments)


def test_a_later_segment_growing_the_staging_buffer_drops_the_earlier_recording():
    # The second GPU segment stages 4x the first one's bytes: on the first run, it replaces the
    # staging buffer that the first segment's run recorded ahead copies into.
    session = wgnn.InferenceSession(split_model(4), providers=["wgpu", "numpy"])
    x = np.linspace(-2, 2, 10, dtype=np.float32).reshape(2, 5)
    session.run(None, {"x": x})
    first, second = gpu_segments(session)
    recorded = first.backend._recorded_runs
    assert id(first) not in recorded and id(second) in recorded
    for scale in (1.0, -0.5, 3.0):
        np.testing.assert_allclose(session.run(None, {"x": x * scale})[0], expected(x * scale, 4), rtol=1e-6)


def test_a_resize_drops_the_runs_recorded_ahead():
    session = wgnn.InferenceSession(split_model(2), providers=["wgpu", "numpy"])
    rng = np.random.default_rng(4)
    for batch in (2, 7, 2, 1):
        x = rng.standard_normal((batch, 5)).astype(np.float32)
        np.testing.assert_allclose(session.run(None, {"x": x})[0], expected(x, 2), rtol=1e-6)
        segments = gpu_segments(session)
        assert set(segments[0].backend._recorded_runs) <= {id(s) for s in segments}


def test_profiled_and_observed_runs_in_between_leave_later_runs_right():
    session = wgnn.InferenceSession(split_model(1), providers=["wgpu", "numpy"])
    x = np.linspace(-1, 1, 15, dtype=np.float32).reshape(3, 5)
    session.run(None, {"x": x})
    backend = gpu_segments(session)[0].backend
    backend.enable_profiling(8)
    np.testing.assert_allclose(session.run(None, {"x": x * 2})[0], expected(x * 2, 1), rtol=1e-6)
    backend.disable_profiling()
    seen = []
    np.testing.assert_allclose(session.run(None, {"x": x * 3}, callback=seen.append)[0], expected(x * 3, 1),
                               rtol=1e-6)
    assert seen
    np.testing.assert_allclose(session.run(None, {"x": x * 4})[0], expected(x * 4, 1), rtol=1e-6)


def conv_model():
    """Conv 6 -> 7 (3x3, pad 1) + Relu, then MaxPool 2x2: feature maps in NC4HW4, channels not a
    multiple of 4, in the storage under test."""
    rng = np.random.default_rng(5)
    inits = [onnx.numpy_helper.from_array(rng.standard_normal((7, 6, 3, 3)).astype(np.float32), "w"),
             onnx.numpy_helper.from_array(rng.standard_normal(7).astype(np.float32), "b")]
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("MaxPool", ["r"], ["y"], kernel_shape=[2, 2], strides=[2, 2])]
    graph = helper.make_graph(nodes, "conv", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 6, 9, 10])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


@pytest.mark.parametrize("storage", ["buffer", "texture"])
def test_feature_maps_in_either_storage_follow_each_run_inputs(storage):
    model = conv_model()
    gpu = wgnn.InferenceSession(model, config=wgnn.Config(providers=("wgpu",), storage=storage))
    reference = wgnn.InferenceSession(model, providers=["numpy"])
    rng = np.random.default_rng(6)
    for _ in range(3):
        x = rng.standard_normal((2, 6, 9, 10)).astype(np.float32)
        np.testing.assert_allclose(gpu.run(None, {"x": x})[0], reference.run(None, {"x": x})[0], rtol=1e-4, atol=1e-5)
    (segment,) = gpu_segments(gpu)
    assert segment.backend.nc4hw4_storage == storage and id(segment) in segment.backend._recorded_runs
