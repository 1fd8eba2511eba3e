"""The wgpu backend's machinery: adapters, device, memory, transfers, pipeline cache, fallbacks."""
import logging
import threading

import numpy as np
import onnx
import pytest
from helpers import gpu_adapters
from onnx import TensorProto, helper

import wgnn

pytestmark = pytest.mark.skipif(not gpu_adapters(), reason="no GPU adapter (install mesa-vulkan-drivers)")


def chain_model(opset=17):
    """x[N, 5] -> Add(bias) -> Relu -> [float64 Sqrt: the GPU stores no float64] -> Mul(2) -> Sigmoid,
    plus Less."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 5])
    outs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, None),
            helper.make_tensor_value_info("mask", TensorProto.BOOL, None)]
    inits = [onnx.numpy_helper.from_array(np.linspace(-1, 1, 5).astype(np.float32), "bias"),
             onnx.numpy_helper.from_array(np.array(2.0, np.float32), "two")]
    nodes = [helper.make_node("Add", ["x", "bias"], ["a"]), helper.make_node("Relu", ["a"], ["r"]),
             helper.make_node("Cast", ["r"], ["r64"], to=TensorProto.DOUBLE),
             helper.make_node("Sqrt", ["r64"], ["s64"]),
             helper.make_node("Cast", ["s64"], ["m"], to=TensorProto.FLOAT),
             helper.make_node("Mul", ["m", "two"], ["t"]),
             helper.make_node("Sigmoid", ["t"], ["y"]), helper.make_node("Less", ["x", "bias"], ["mask"])]
    graph = helper.make_graph(nodes, "chain", [x], outs, inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)]).SerializeToString()


def reference(x):
    bias = np.linspace(-1, 1, 5).astype(np.float32)
    m = np.sqrt(np.maximum(x + bias, 0).astype(np.float64)).astype(np.float32)
    return 1 / (1 + np.exp(-(m * 2))), x < bias


def gpu_session(model, **config):
    return wgnn.InferenceSession(model, config=wgnn.Config(providers=("wgpu", "numpy"), **config))


def test_adapters_listed():
    found = wgnn.adapters()
    keys = {"index", "name", "backend", "adapter_type", "driver", "features", "limits"}
    assert found and all(keys <= set(a) for a in found)
    assert all("max-storage-buffer-binding-size" in a["limits"] for a in found)


def test_adapter_selection(monkeypatch):
    from wgnn.backends.wgpu.context import select_adapter

    found = wgnn.adapters()
    assert select_adapter(0) == 0
    assert select_adapter(str(len(found) - 1)) == len(found) - 1
    first = found[0]
    assert select_adapter(first["backend"].lower()) == first["index"]
    assert found[select_adapter(first["name"][:6])]["name"].startswith(first["name"][:6])
    monkeypatch.setenv("WGNN_ADAPTER", str(len(found) - 1))
    assert select_adapter(None) == len(found) - 1
    with pytest.raises(wgnn.AdapterError, match="no adapter matches"):
        select_adapter("no-such-gpu")
    with pytest.raises(wgnn.AdapterError, match="out of range"):
        select_adapter(99)


@pytest.mark.parametrize("adapter", [a["index"] for a in gpu_adapters()])
def test_fallback_segments_and_report(adapter, caplog):
    session = gpu_session(chain_model(), adapter=adapter)
    x = np.random.default_rng(0).standard_normal((3, 5)).astype(np.float32)
    with caplog.at_level(logging.INFO, logger="wgnn"):
        y, mask = session.run(None, {"x": x})
    want_y, want_mask = reference(x)
    np.testing.assert_allclose(y, want_y, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(mask, want_mask)
    report = session.report()
    assert [s[0] for s in report["segments"]] == ["wgpu", "numpy", "wgpu"]
    assert report["fallbacks"] and "no numpy" not in str(report["fallbacks"])
    assert report["fallbacks"][0]["backend"] == "numpy" and "float64" in report["fallbacks"][0]["reasons"][0]
    assert report["transfers"]["uploads"] >= 2 and report["transfers"]["downloads"] >= 2
    memory = report["memory"]["wgpu"]
    assert memory["planned_peak_bytes"] + memory["dedicated_bytes"] > 0
    assert any("Cast runs on numpy" in r.message for r in caplog.records)


def test_resize_compiles_no_pipeline():
    from wgnn.backends.wgpu.loader import pipeline_cache

    session = gpu_session(chain_model())
    backend = session.session.backends[0]
    cache = pipeline_cache(backend.context)
    x = np.ones((2, 5), np.float32)
    session.run(None, {"x": x})
    compiled = cache.compiled
    for batch in (7, 1, 64):
        y, _ = session.run(None, {"x": np.full((batch, 5), 0.5, np.float32)})
        np.testing.assert_allclose(y, reference(np.full((batch, 5), 0.5, np.float32))[0], rtol=1e-5)
    assert cache.compiled == compiled
    assert session.session.resize_count == 4


def test_run_neither_compiles_nor_allocates(monkeypatch):
    session = gpu_session(chain_model())
    x = np.ones((4, 5), np.float32)
    session.run(None, {"x": x})
    device = session.session.backends[0].device

    def forbidden(*args, **kwargs):
        raise AssertionError("run() must not create GPU resources")

    for method in ("create_buffer", "create_compute_pipeline", "create_shader_module", "create_bind_group"):
        monkeypatch.setattr(type(device), method, forbidden)
    y, _ = session.run(None, {"x": x * 2})
    np.testing.assert_allclose(y, reference(x * 2)[0], rtol=1e-5)


def test_int64_overflow_is_refused():
    # Max only selects values: it stays on the GPU, where int64 lives as int32; a feed that does
    # not fit is refused at upload. Add could make new values past int32: it runs on numpy.
    def model(op):
        return helper.make_model(helper.make_graph(
            [helper.make_node(op, ["a", "b"], ["c"])], op,
            [helper.make_tensor_value_info(n, TensorProto.INT64, [2]) for n in "ab"],
            [helper.make_tensor_value_info("c", TensorProto.INT64, [2])]),
            opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()

    session = gpu_session(model("Max"))
    ok = session.run(None, {"a": np.array([1, -5], np.int64), "b": np.array([2, 3], np.int64)})[0]
    np.testing.assert_array_equal(ok, [2, 3])
    assert not session.session.report()["fallbacks"]
    with pytest.raises(wgnn.InputError, match=r'"a".*int32'):
        session.run(None, {"a": np.array([2 ** 40, 1], np.int64), "b": np.array([1, 1], np.int64)})
    adding = gpu_session(model("Add"))
    big = adding.run(None, {"a": np.array([2 ** 30, 1], np.int64), "b": np.array([2 ** 30, 1], np.int64)})[0]
    np.testing.assert_array_equal(big, [2 ** 31, 2])
    (fallback,) = adding.session.report()["fallbacks"]
    assert "wrap silently" in fallback["reasons"][0]


def test_sessions_share_device_and_threads():
    model = chain_model()
    sessions = [gpu_session(model) for _ in range(3)]
    assert sessions[0].session.backends[0].device is sessions[1].session.backends[0].device
    errors = []

    def work(session, seed):
        rng = np.random.default_rng(seed)
        for _ in range(5):
            x = rng.standard_normal((int(rng.integers(1, 6)), 5)).astype(np.float32)
            y, _ = session.run(None, {"x": x})
            if not np.allclose(y, reference(x)[0], rtol=1e-5, atol=1e-6):
                errors.append(seed)

    threads = [threading.Thread(target=work, args=(s, i)) for i, s in enumerate(sessions)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors


def test_kernel_compile_error_names_the_op(monkeypatch):
    from wgnn.backends.wgpu import elementwise

    broken = dict(elementwise.UNARY_EXPR, relu="max(v, undefined_name)")
    monkeypatch.setattr(elementwise, "UNARY_EXPR", broken)
    # Add + Relu form one fused kernel, generated with the same relu expression
    with pytest.raises(wgnn.WgnnError, match=r'FusedElementwise "r".*fused/fused(_vec4)?\.wgsl'):
        gpu_session(chain_model()).run(None, {"x": np.ones((2, 5), np.float32)})
    monkeypatch.undo()
    healthy = gpu_session(chain_model(opset=16))  # the device keeps working for other sessions
    x = np.ones((2, 5), np.float32)
    np.testing.assert_allclose(healthy.run(None, {"x": x})[0], reference(x)[0], rtol=1e-5)


def test_llvmpipe_loop_limit_routes_long_loops_to_the_cpu():
    """llvmpipe stops an invocation's loops after 65535 iterations: a MatMul with K = 70000 would
    silently sum only part of K there, so it runs on the CPU, with the reason reported."""
    model = helper.make_model(helper.make_graph(
        [helper.make_node("MatMul", ["a", "b"], ["c"])], "long_k",
        [helper.make_tensor_value_info("a", TensorProto.FLOAT, [1, 70000]),
         helper.make_tensor_value_info("b", TensorProto.FLOAT, [70000, 2])],
        [helper.make_tensor_value_info("c", TensorProto.FLOAT, [1, 2])]), opset_imports=[helper.make_opsetid("", 17)])
    for adapter in wgnn.adapters():
        session = gpu_session(model.SerializeToString(), adapter=adapter["index"])
        a, b = np.ones((1, 70000), np.float32), np.ones((70000, 2), np.float32)
        np.testing.assert_allclose(session.run(None, {"a": a, "b": b})[0], [[70000, 70000]])
        fallbacks = session.report()["fallbacks"]
        if "llvmpipe" in adapter["name"].lower():
            assert fallbacks and "loop iterations" in fallbacks[0]["reasons"][0]
        else:
            assert not fallbacks
