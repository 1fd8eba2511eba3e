"""Bounded fuzzing (tools/fuzz.py) of loading and running mutated model files. About 30-40 s in all;
`python -m wgnn.tools.fuzz --seconds 600` runs longer by hand.

Every input runs in a worker process with a memory cap and a time limit; any exception other than
a wgnn.WgnnError, a hang or a huge allocation fails the test, which lists the saved inputs."""
from __future__ import annotations

import struct

import pytest
from wgnn.tools import fuzz

import wgnn

SECONDS_EACH = 12  # per test, whatever the machine's speed


@pytest.fixture(scope="module")
def seeds():
    return fuzz.build_seeds()


@pytest.fixture(scope="module")
def runner():
    with fuzz.Runner() as r:
        yield r


def failure_text(report: fuzz.Report) -> str:
    return report.summary() + "\nreplay one with: python -m wgnn.tools.fuzz --replay FILE"


def test_mutations_are_deterministic_and_stay_in_bounds(seeds):
    seed = next(s for s in seeds if s.kind == "wgnn")
    edits = [("flip", ("struct", 5), 3), ("huge", ("struct", 9), 0xFFFFFFFF), ("insert", ("any", 2 ** 31), b"ab"),
             ("delete", ("any", 17), 64), ("overwrite", ("any", len(seed.data) + 3), b"\xff" * 8),
             ("int64", 4, 2 ** 40), ("truncate", 2 ** 31 - 1)]
    first = fuzz.apply_mutations(seed, edits)
    assert first == fuzz.apply_mutations(seed, edits) and first != seed.data
    assert fuzz.apply_mutations(seed, [("truncate", 10)]) == seed.data[:10]
    assert seed.marks and seed.values  # structure and int64 constants are known for .wgnn seeds
    at = seed.values[0]
    changed = fuzz.apply_mutations(seed, [("int64", 0, -5)])
    assert struct.unpack_from("<q", changed, at)[0] == -5 and len(changed) == len(seed.data)


def test_runner_reports_typed_rejections_and_runs(seeds, runner):
    onnx_seed = next(s for s in seeds if s.kind == "onnx")
    assert runner.run(onnx_seed.data)["status"] == "ran"
    assert runner.run(b"\x08\x07garbage")["status"] == "rejected"
    wgnn_seed = next(s for s in seeds if s.name == "digits.wgnn")
    result = runner.run(fuzz.apply_mutations(wgnn_seed, [("huge", ("struct", 3), 0xFFFFFFFF)]), "load")
    assert result["status"] == "rejected" and result["error"] == "ModelVerificationError"


@pytest.mark.parametrize(("raised", "status"), [
    (KeyError("x"), "failure"), (MemoryError("big"), "failure"), (wgnn.ShapeError("typed"), "rejected"),
    ("wrapped", "wrapped")])
def test_outcomes_are_classified(monkeypatch, raised, status):
    def load(*args, **kwargs):
        if raised == "wrapped":
            try:
                raise IndexError("inside a converter")
            except IndexError as exc:
                raise wgnn.ConversionError("safety net") from exc
        raise raised

    monkeypatch.setattr(wgnn, "InferenceSession", load)
    result = fuzz.evaluate(b"anything")
    assert result["status"] == status
    if status != "rejected":
        assert "test_fuzz.py" in result["where"] and result["traceback"]


def _slow_model() -> bytes:
    """300 MatMuls of 1024 x 1024: several seconds of work for a 4 MiB file."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    nodes = [helper.make_node("MatMul", ["x" if i == 0 else f"h{i}", "w"], [f"h{i + 1}"], name=f"m{i}")
             for i in range(300)]
    graph = helper.make_graph(nodes, "slow", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1024, 1024])],
                              [helper.make_tensor_value_info("h300", TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(np.eye(1024, dtype=np.float32), "w")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model.SerializeToString()


def test_a_hang_is_reported_with_its_stack_and_the_worker_restarts():
    with fuzz.Runner(timeout=0.3) as runner:
        result = runner.run(_slow_model())
        assert result["status"] == "failure" and result["error"] == "Hang", result
        assert "File" in result["traceback"] and result["where"] != "?"
        assert runner.run(b"\x08\x07garbage")["status"] == "rejected"  # a fresh worker took over
        assert runner.restarts >= 2


def test_fuzz_loading_wgnn_files(seeds, runner, tmp_path):
    wgnn_seeds = [s for s in seeds if s.kind == "wgnn"]
    report = fuzz.fuzz(wgnn_seeds, runner, examples=1500, seconds=SECONDS_EACH, seed=1, out=tmp_path, mode="load")
    assert report.inputs > 50
    assert report.statuses["rejected"] > report.inputs // 4  # the mutations do hit the structure
    assert not report.failures, failure_text(report)


def test_fuzz_loading_onnx_files(seeds, runner, tmp_path):
    onnx_seeds = [s for s in seeds if s.kind == "onnx"]
    report = fuzz.fuzz(onnx_seeds, runner, examples=1000, seconds=SECONDS_EACH, seed=2, out=tmp_path, mode="load")
    assert report.inputs > 50
    assert not report.failures, failure_text(report)


# A mutated model may legitimately ask for more compute than the 2 s each input gets (a MatMul or
# Conv made huge but still within memory): a slow answer, not a wgnn fault. Out-of-memory plans
# and runs are typed errors (HostMemoryError), so they count as rejections.
KNOWN_RUN_FAILURES = (
    ("Hang", ""),
)


def test_fuzz_loading_and_running(seeds, runner, tmp_path):
    report = fuzz.fuzz(seeds, runner, examples=1200, seconds=SECONDS_EACH, seed=3, out=tmp_path, mode="run")
    assert report.inputs > 50
    assert report.statuses["ran"] > 0
    unknown = [f for f in report.failures
               if not any(f["error"] == error and text in f["message"] for error, text in KNOWN_RUN_FAILURES)]
    assert not unknown, failure_text(report)
