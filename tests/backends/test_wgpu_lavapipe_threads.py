"""Lavapipe's worker threads per session (Config.lavapipe_threads): on Mesa's CPU adapter a model
with little work per dispatch runs on a device without worker threads, listed by a wgpu instance
of its own, while bigger models keep the process's count; a count can be named per session; a
count set for the process (LP_NUM_THREADS) is kept. Results are numpy's on either device."""
import os

import numpy as np
import pytest
from helpers import gpu_adapters, session_for
from onnx import TensorProto, helper
from wgnn.backends.wgpu import context as gpu_context
from wgnn.backends.wgpu.backend import MOVE_FACTOR, THREADLESS_FLOPS_PER_STEP, threadless_flops_limit
from wgnn.engine.errors import InputError

import wgnn

LAVAPIPE = [a["index"] for a in gpu_adapters() if "llvmpipe" in a["name"].lower() and a["backend"] == "Vulkan"]
needs_lavapipe = pytest.mark.skipif(not LAVAPIPE, reason="no lavapipe (Vulkan llvmpipe) adapter")


def small_model():
    """Relu on a few values: a dispatch of almost no work."""
    vi = helper.make_tensor_value_info
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "relu",
                              [vi("x", TensorProto.FLOAT, [2, 5, 3])], [vi("y", TensorProto.FLOAT, [2, 5, 3])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def matmul_model(n: int | str):
    """[n, n] x [n, n]: 2 n^3 FLOPs in one step."""
    vi = helper.make_tensor_value_info
    graph = helper.make_graph([helper.make_node("MatMul", ["a", "b"], ["y"])], "matmul",
                              [vi("a", TensorProto.FLOAT, [n, n]), vi("b", TensorProto.FLOAT, [n, n])],
                              [vi("y", TensorProto.FLOAT, [n, n])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def gpu_session(model, **options) -> wgnn.InferenceSession:
    config = wgnn.Config(providers=("wgpu",), adapter=LAVAPIPE[0], **options)
    return wgnn.InferenceSession(model.SerializeToString(), config=config)


def backend_of(session):
    return session.session.backends[0]


@pytest.fixture
def process_count_unset(monkeypatch):
    """The process's worker count as Mesa's default (one per core), not set by the environment."""
    if "LP_NUM_THREADS" in os.environ:
        monkeypatch.delenv("LP_NUM_THREADS")
    return gpu_context.lavapipe_threads(gpu_context.adapters()[LAVAPIPE[0]])


def check_against_numpy(model, session, feeds):
    expected = session_for(model.SerializeToString(), "numpy").run(None, feeds)[0]
    np.testing.assert_allclose(session.run(None, feeds)[0], expected, rtol=1e-4, atol=1e-4)


def test_the_limit_scales_with_the_workers_a_device_would_have():
    assert threadless_flops_limit(2) == THREADLESS_FLOPS_PER_STEP
    assert threadless_flops_limit(1) == float("inf")  # one worker only adds the hand-off
    assert threadless_flops_limit(0) == 0.0
    limit = THREADLESS_FLOPS_PER_STEP
    assert limit / 2 < threadless_flops_limit(16) < threadless_flops_limit(4) < limit


@pytest.mark.parametrize("bad", [-1, 33, 1.5, "many", True])
def test_a_session_names_a_count_from_0_to_32_or_auto(bad):
    with pytest.raises(InputError, match="lavapipe threads must be an integer from 0 to 32"):
        wgnn.Config(providers=("wgpu",), lavapipe_threads=bad)


@needs_lavapipe
def test_a_model_of_little_work_per_step_runs_without_workers(process_count_unset):
    model = small_model()
    session = gpu_session(model)
    check_against_numpy(model, session, {"x": np.linspace(-3, 3, 30, dtype=np.float32).reshape(2, 5, 3)})
    backend = backend_of(session)
    assert backend.context.lavapipe_threads == 0
    assert backend.device_choice["lavapipe_threads"] == 0 and "under" in backend.device_choice["why"]
    assert backend.device is not gpu_context.get_context(LAVAPIPE[0]).device  # a device of its own
    assert "LP_NUM_THREADS" not in os.environ  # set only while the second instance listed the drivers


@needs_lavapipe
def test_a_model_of_much_work_per_step_keeps_the_process_workers(process_count_unset):
    n = 128  # 4.2 MFLOP: over the limit for two or more workers
    model = matmul_model(n)
    session = gpu_session(model)
    rng = np.random.default_rng(1)
    feeds = {name: rng.standard_normal((n, n)).astype(np.float32) for name in ("a", "b")}
    check_against_numpy(model, session, feeds)
    expected = 0 if 2 * n ** 3 < threadless_flops_limit(process_count_unset) else process_count_unset
    assert backend_of(session).context.lavapipe_threads == expected
    assert backend_of(session).device_choice["flops_per_step"] == 2 * n ** 3


@needs_lavapipe
def test_a_resize_moves_the_session_only_well_past_the_limit(process_count_unset):
    """Work per step just over the limit keeps the device (moving costs an upload of the weights and
    pipelines on the other device); twice the limit moves it, and back under half of it moves it
    back. Results stay numpy's throughout."""
    model = matmul_model("n")
    session = gpu_session(model)
    rng = np.random.default_rng(2)
    limit = threadless_flops_limit(process_count_unset)

    def run(n):
        check_against_numpy(model, session, {name: rng.standard_normal((n, n)).astype(np.float32)
                                             for name in ("a", "b")})
        return backend_of(session).context.lavapipe_threads

    assert run(4) == 0
    threadless = backend_of(session).device
    between = next(n for n in range(8, 512, 8) if 2 * n ** 3 >= limit) if limit < float("inf") else 96
    assert run(between) == 0  # over the limit, under twice it
    big = next(n for n in range(8, 1024, 8) if 2 * n ** 3 >= MOVE_FACTOR * limit) if limit < float("inf") else 128
    assert run(big) == (process_count_unset if limit < float("inf") else 0)
    assert run(4) == 0 and backend_of(session).device is threadless
    assert run(between) == 0


@needs_lavapipe
@pytest.mark.parametrize("workers", [0, 1, 3])
def test_a_session_runs_with_the_count_it_names(process_count_unset, workers):
    model = matmul_model(64)
    session = gpu_session(model, lavapipe_threads=workers)
    rng = np.random.default_rng(workers)
    feeds = {name: rng.standard_normal((64, 64)).astype(np.float32) for name in ("a", "b")}
    check_against_numpy(model, session, feeds)
    backend = backend_of(session)
    assert backend.context.lavapipe_threads == workers
    assert backend.device_choice["why"] == "set for the session"
    same_count = gpu_session(small_model(), lavapipe_threads=workers)
    same_count.run(None, {"x": np.ones((2, 5, 3), np.float32)})
    assert backend_of(same_count).device is backend.device  # one device per adapter and count


@needs_lavapipe
def test_the_process_count_is_shared_with_the_default_device(process_count_unset):
    session = gpu_session(small_model(), lavapipe_threads=process_count_unset)
    session.run(None, {"x": np.ones((2, 5, 3), np.float32)})
    assert backend_of(session).device is gpu_context.get_context(LAVAPIPE[0]).device


@needs_lavapipe
def test_a_count_set_for_the_process_is_kept(monkeypatch):
    """LP_NUM_THREADS in the environment (or wgnn.set_lavapipe_threads) is the user's choice: auto keeps
    the process's device, however small the model."""
    monkeypatch.setenv("LP_NUM_THREADS", "2")
    session = gpu_session(small_model())
    session.run(None, {"x": np.ones((2, 5, 3), np.float32)})
    backend = backend_of(session)
    assert "process" in backend.device_choice["why"]
    assert backend.device is gpu_context.get_context(LAVAPIPE[0]).device


@needs_lavapipe
@pytest.mark.parametrize("name", ["mobilenetv2", "resnet", "unet"])
def test_zoo_models_run_right_without_workers(process_count_unset, name):
    """The kernels the cost model picks for one thread (conv paths, dwpw blocks) compute what numpy
    does: batch 2, channels not a multiple of 4, strides, residuals, pooling, upsampling."""
    from wgnn.models.zoo import build

    model = build(name)
    x = {"input": np.random.default_rng(5).standard_normal((2, 3, 32, 32)).astype(np.float32)}
    session = gpu_session(model, lavapipe_threads=0)
    check_against_numpy(model, session, x)
    assert backend_of(session).context.lavapipe_threads == 0


@needs_lavapipe
def test_the_device_is_chosen_at_the_first_resize(process_count_unset):
    from wgnn.models.zoo import build

    model = build("mobilenetv2")  # 0.55 MFLOP per step at 1x3x32x32
    session = gpu_session(model)
    assert backend_of(session).device_choice is None
    session.run(None, {"input": np.zeros((1, 3, 32, 32), np.float32)})
    assert backend_of(session).device_choice["lavapipe_threads"] == 0


@needs_lavapipe
def test_the_device_without_workers_is_listed_with_the_adapters(monkeypatch):
    """In a process whose count is unset, listing the adapters also lists lavapipe without workers,
    before any device (or compile thread) exists, and leaves the environment as it was."""
    import subprocess
    import sys

    monkeypatch.delenv("LP_NUM_THREADS", raising=False)
    script = ("import os, wgnn\n"
              "from wgnn.backends.wgpu import context\n"
              "wgnn.adapters()\n"
              "assert not context._contexts, 'no device yet'\n"
              "assert [a.summary for a in context._adapters_by_threads[0]], 'lavapipe without workers listed'\n"
              "assert 'LP_NUM_THREADS' not in os.environ\n"
              "print('ok')\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.split()[-1] == "ok", done.stderr


@needs_lavapipe
def test_a_conv_model_moves_with_its_weights(process_count_unset):
    """zoo mobilenetv2 (packed conv weights, uniform weight buffers, a fused head) moving from the
    device without workers (batch 1: 0.55 MFLOP per step) to the process's (batch 8: 4.4) and back
    gives numpy's results on each."""
    from wgnn.models.zoo import build

    if threadless_flops_limit(process_count_unset) * MOVE_FACTOR > 4.4e6:
        pytest.skip("with this many cores batch 8 stays on the device without workers")
    model = build("mobilenetv2")
    session = gpu_session(model)
    rng = np.random.default_rng(8)
    workers = []
    for batch in (1, 8, 1, 2):
        check_against_numpy(model, session, {"input": rng.standard_normal((batch, 3, 32, 32)).astype(np.float32)})
        workers.append(backend_of(session).context.lavapipe_threads)
    assert workers == [0, process_count_unset, 0, 0]


@needs_lavapipe
def test_the_choice_is_logged(process_count_unset, caplog):
    import logging

    with caplog.at_level(logging.INFO, logger="wgnn.wgpu"):  # a model of fixed shapes resizes at once
        session = gpu_session(small_model())
        session.run(None, {"x": np.ones((2, 5, 3), np.float32)})
    assert any("lavapipe device with 0 worker threads" in r.getMessage() for r in caplog.records)


def test_identical_adapters_are_matched_by_their_order(monkeypatch):
    """Two adapters of one name: the second of the process's listing is the second of the threads
    listing, though that listing (Vulkan only) numbers them differently."""
    class Listed:
        def __init__(self, summary, tag):
            self.summary, self.tag = summary, tag

    gpu = "llvmpipe (LLVM 15.0.6, 256 bits) (CPU) via Vulkan"
    process = [Listed("llvmpipe via OpenGL", "gl"), Listed(gpu, "first"), Listed(gpu, "second")]
    threads_listing = [Listed(gpu, "first with 3"), Listed(gpu, "second with 3")]
    monkeypatch.setattr(gpu_context, "_raw_adapters", lambda: process)
    monkeypatch.setitem(gpu_context._adapters_by_threads, 3, threads_listing)
    assert gpu_context._adapter_with_threads(1, 3).tag == "first with 3"
    assert gpu_context._adapter_with_threads(2, 3).tag == "second with 3"
    monkeypatch.setitem(gpu_context._adapters_by_threads, 3, threads_listing[:1])
    with pytest.raises(gpu_context.AdapterError, match=r"lacks adapter 2 .*number 2 of that name"):
        gpu_context._adapter_with_threads(2, 3)
