"""GPU errors while running are typed, name the op, and leave other sessions working; a lost
device is reported as such and a new session gets a new device."""
import numpy as np
import pytest
from helpers import gpu_adapters
from onnx import TensorProto, helper

import wgnn

pytestmark = pytest.mark.skipif(not gpu_adapters(), reason="no GPU adapter (install mesa-vulkan-drivers)")


def two_ops():
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["r"], name="relu1"),
         helper.make_node("Softmax", ["r"], ["y"], name="soft1", axis=-1)],
        "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 4])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


X = np.linspace(-1, 1, 16, dtype=np.float32).reshape(4, 4)


def softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


WANT = softmax(np.maximum(X, 0))


def session(adapter):
    return wgnn.InferenceSession(two_ops(), config=wgnn.Config(providers=("wgpu",), adapter=adapter))


@pytest.mark.parametrize("adapter", [a["index"] for a in gpu_adapters()])
def test_failing_dispatch_names_the_op_and_other_sessions_keep_working(adapter):
    broken, healthy = session(adapter), session(adapter)
    broken.run(None, {"x": X})
    (_, soft) = next((s, e) for s, e in broken.session.segments[0].steps if s.node.name == "soft1")
    dispatch = soft.dispatches[0]
    planned = dispatch.groups
    dispatch.groups = (70000, 1, 1)  # past every adapter's 65535 workgroups per dimension
    broken.session.backends[0]._recorded_runs.clear()  # recorded ahead with the planned groups
    with pytest.raises(wgnn.DeviceError, match=r'Softmax "soft1".*65535') as info:
        broken.run(None, {"x": X})
    assert "lost" not in str(info.value)
    np.testing.assert_allclose(healthy.run(None, {"x": X})[0], WANT, rtol=1e-5)
    dispatch.groups = planned  # the session itself recovers once its dispatch is valid again
    np.testing.assert_allclose(broken.run(None, {"x": X})[0], WANT, rtol=1e-5)


def test_lost_device_is_reported_and_a_new_session_gets_a_new_device():
    doomed = session(0)
    doomed.run(None, {"x": X})
    old_device = doomed.session.backends[0].device
    old_device.destroy()
    with pytest.raises(wgnn.DeviceError, match="device is lost: create a new session"):
        doomed.run(None, {"x": X})
    fresh = session(0)
    assert fresh.session.backends[0].device is not old_device
    np.testing.assert_allclose(fresh.run(None, {"x": X})[0], WANT, rtol=1e-5)


def chain(n_ops: int):
    nodes, previous = [], "x"
    for i in range(n_ops):
        nodes.append(helper.make_node("Softmax", [previous], [f"t{i}"], axis=-1))  # no two fuse
        previous = f"t{i}"
    nodes.append(helper.make_node("Add", [previous, "x"], ["y"]))
    graph = helper.make_graph(nodes, "chain", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 16])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 16])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


def test_pooled_memory_past_the_largest_buffer_is_split_into_arenas():
    session = wgnn.InferenceSession(chain(6), providers=["wgpu"])
    backend = session.session.backends[0]
    x = np.linspace(-1, 1, 64, dtype=np.float32).reshape(4, 16)
    expected = session.run(None, {"x": x})[0]
    assert len(backend.arenas) == 1
    backend.max_buffer = 300  # two 256-byte tensors alive together cannot share one arena
    session.session.resize({"x": (4, 16)})
    assert len(backend.arenas) >= 2
    np.testing.assert_array_equal(session.run(None, {"x": x})[0], expected)
    backend.max_buffer = 100  # one tensor alone is past the limit: a clear refusal
    with pytest.raises(wgnn.DeviceMemoryError, match=r'tensor "t\d" needs 256 bytes.*largest buffer \(100'):
        session.session.resize({"x": (4, 16)})


def test_tensors_past_the_binding_limit_run_on_the_cpu(monkeypatch):
    session = wgnn.InferenceSession(chain(2), providers=["wgpu", "numpy"])
    backend = session.session.backends[0]
    monkeypatch.setattr(backend, "max_binding", 1024)
    small, large = np.ones((2, 16), np.float32), np.ones((32, 16), np.float32)  # 128 and 2048 bytes
    session.run(None, {"x": small})
    assert not session.session.report()["fallbacks"]
    np.testing.assert_allclose(session.run(None, {"x": -large})[0], 1 / 16 - large, rtol=1e-6)
    reasons = [r for f in session.session.report()["fallbacks"] for r in f["reasons"]]
    assert reasons and all("binding limit" in r for r in reasons)
