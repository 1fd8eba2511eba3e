"""tools/soak.py and `wgnn soak`: a CI-sized soak (200 runs, 4 threads) on numpy and the GPU, and
the verdicts on sessions that leak memory, leak GPU objects or change their answers."""
from __future__ import annotations

import json
import mmap
import subprocess
import sys

import numpy as np
import onnx
import pytest
from helpers import gpu_adapters
from onnx import TensorProto, helper, numpy_helper
from wgnn.tools import soak

needs_gpu = pytest.mark.skipif(not gpu_adapters(), reason="no GPU adapter (install mesa-vulkan-drivers)")


@pytest.fixture(scope="module")
def model_path(tmp_path_factory):
    rng = np.random.default_rng(0)
    vi = helper.make_tensor_value_info
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], name="conv", pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"], name="relu"),
             helper.make_node("GlobalAveragePool", ["r"], ["p"], name="pool"),
             helper.make_node("Flatten", ["p"], ["f"], name="flat"),
             helper.make_node("Gemm", ["f", "fc"], ["y"], name="fc", transB=1)]
    inits = [numpy_helper.from_array(rng.standard_normal((6, 3, 3, 3)).astype(np.float32), "w"),
             numpy_helper.from_array(rng.standard_normal(6).astype(np.float32), "b"),
             numpy_helper.from_array(rng.standard_normal((5, 6)).astype(np.float32), "fc")]
    graph = helper.make_graph(nodes, "soak", [vi("x", TensorProto.FLOAT, ["N", 3, 9, 7])],
                              [vi("y", TensorProto.FLOAT, ["N", 5])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    path = tmp_path_factory.mktemp("soak") / "small.onnx"
    onnx.save(model, str(path))
    return path


def targets() -> list[tuple[str, ...]]:
    return [("numpy",)] + ([("wgpu", "numpy")] if gpu_adapters() else [])


def test_ci_soak_on_every_backend_with_threads(model_path):
    report = soak.soak_model(model_path, targets=targets(), adapter=0, shapes={"x": (2, 3, 9, 7)}, runs=200,
                             sample_every=10, threads=4, thread_runs=25)
    assert report["ok"], soak.format_report(report)
    assert [t["providers"] for t in report["targets"]] == [list(t) for t in targets()]
    for target in report["targets"]:
        assert target["runs"] == 200 and target["sample_every"] == 10 and len(target["samples"]) == 21
        assert target["outputs_stable"] and target["memory"]["rss"]["flat"]
        assert target["threads"]["own_session"]["ok"] and target["threads"]["shared_session"]["ok"]
        gpu = "wgpu" in target["providers"]
        assert ("gpu_objects" in target["memory"]) == gpu
        if gpu:
            assert target["steps_per_backend"].get("wgpu", 0) > 0
            assert target["memory"]["gpu_objects"]["growth"] == 0 and target["memory"]["gpu_bytes"]["growth"] == 0
            assert target["memory"]["gpu_objects"]["after"] > 0


class FakeSession:
    """run() returns fixed outputs; optionally keeps memory, GPU buffers, or drifts."""

    def __init__(self, leak_bytes: int = 0, gpu_leak: bool = False, drift_after: int | None = None):
        self.kept: list = []
        self.leak_bytes, self.gpu_leak, self.drift_after = leak_bytes, gpu_leak, drift_after
        self.calls = 0
        if gpu_leak:
            from wgnn.backends.wgpu.context import get_context

            self.device = get_context(0).device

    def run(self, feeds):
        self.calls += 1
        if self.leak_bytes:
            # A mapping of its own, written to: new resident pages, where a heap allocation could
            # reuse pages an earlier test in the worker freed and leave RSS flat.
            memory = mmap.mmap(-1, self.leak_bytes)
            memory.write(b"\1" * self.leak_bytes)
            self.kept.append(memory)
        if self.gpu_leak:
            import wgpu

            self.kept.append(self.device.create_buffer(size=4096, usage=wgpu.BufferUsage.STORAGE))
        value = 1.0 if self.drift_after is None or self.calls <= self.drift_after else 1.5
        return {"y": np.full((2, 3), value, np.float32)}


def test_growing_rss_is_caught():
    # The leak adds ~8.75 MiB between the first and last thirds of the samples; 4 MiB leaves room
    # for allocator noise in a busy test worker.
    thresholds = soak.Thresholds(rss_bytes=4 << 20)
    result = soak.soak_session(FakeSession(leak_bytes=64 << 10), {}, runs=200, sample_every=20, thresholds=thresholds)
    assert not result["flat"] and not result["ok"] and not result["memory"]["rss"]["flat"]
    assert result["memory"]["rss"]["growth"] > 4 << 20
    assert result["outputs_stable"]
    assert soak.soak_session(FakeSession(), {}, runs=200, sample_every=20, thresholds=thresholds)["ok"]


@needs_gpu
def test_growing_gpu_objects_are_caught():
    result = soak.soak_session(FakeSession(gpu_leak=True), {}, runs=60, sample_every=6, gpu=True)
    memory = result["memory"]
    assert not memory["gpu_objects"]["flat"] and memory["gpu_objects"]["growth"] >= 10
    assert not memory["gpu_bytes"]["flat"] and memory["gpu_bytes"]["growth"] >= 10 * 4096
    assert not result["ok"]


def test_changing_outputs_are_caught():
    result = soak.soak_session(FakeSession(drift_after=50), {}, runs=100, sample_every=10)
    assert not result["outputs_stable"] and not result["ok"]
    assert result["unstable"][0].startswith("run 50: output y: max abs difference 0.5")
    assert soak.mismatch({"y": np.zeros(2)}, {"y": np.zeros(3)}).startswith("output y:")
    assert soak.mismatch({}, {"y": np.zeros(3)}).startswith("output y: None")
    assert soak.mismatch({"y": np.array([np.nan])}, {"y": np.array([np.nan])}) is None


def test_cli_json_and_text(model_path):
    command = [sys.executable, "-m", "wgnn.tools.cli", "soak", str(model_path), "--provider", "numpy", "--runs", "40",
               "--threads", "2", "--thread-runs", "5"]
    done = subprocess.run(command + ["--json"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["ok"] and report["targets"][0]["runs"] == 40 and report["input_shapes"] == {"x": [1, 3, 9, 7]}
    done = subprocess.run(command + ["--max-rss-growth-mb", "0.5"], capture_output=True, text=True, timeout=120)
    assert done.returncode in (0, 1), done.stderr
    assert "[numpy] 40 runs" in done.stdout and "rss" in done.stdout and "threads (2 x 5 runs, shared session)" \
        in done.stdout
    bad = subprocess.run(command[:5] + ["--runs", "0"], capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and "--runs" in bad.stderr
