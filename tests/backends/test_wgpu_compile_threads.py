"""Pipelines compile on worker threads (backends/wgpu/loader.py, WGNN_COMPILE_THREADS): a session's
resize requests them all, waits for them at its end, and names the step whose kernel failed."""
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from types import SimpleNamespace

import numpy as np
import pytest
from helpers import Const, gpu_adapters, make_model, session_for
from wgnn.backends.wgpu import loader
from wgnn.backends.wgpu.loader import KernelCompileError, compile_threads
from wgnn.engine.errors import WgnnError

import wgnn

ADAPTERS = [a["index"] for a in gpu_adapters()]
needs_gpu = pytest.mark.skipif(not ADAPTERS, reason="no GPU adapter (install mesa-vulkan-drivers)")


def small_model(seed: int):
    """Conv (channels not a multiple of 4, padding) then Relu then Add: several kernels. The seed
    goes into the weights, so each test compiles pipelines of its own (the cache is per device)."""
    rng = np.random.default_rng(seed)
    return make_model("Conv", [rng.standard_normal((2, 3, 7, 5), np.float32),
                               Const(rng.standard_normal((6, 3, 3, 3), np.float32)),
                               Const(rng.standard_normal(6).astype(np.float32))], {"pads": [1, 1, 1, 1]})


def test_thread_count_comes_from_the_environment(monkeypatch):
    monkeypatch.setenv("WGNN_COMPILE_THREADS", "3")
    assert compile_threads() == 3
    monkeypatch.delenv("WGNN_COMPILE_THREADS")
    assert 1 <= compile_threads() <= loader.MAX_COMPILE_THREADS
    for bad in ("0", "two", "-1"):
        monkeypatch.setenv("WGNN_COMPILE_THREADS", bad)
        with pytest.raises(WgnnError, match="WGNN_COMPILE_THREADS"):
            compile_threads()


@needs_gpu
@pytest.mark.parametrize("threads", ["1", "2"])
def test_pipelines_compile_on_worker_threads_and_the_model_runs(monkeypatch, threads):
    monkeypatch.setenv("WGNN_COMPILE_THREADS", threads)
    built_on = []
    build = loader.PipelineCache._build

    def recorded(self, *args):
        built_on.append(threading.current_thread().name)
        return build(self, *args)

    monkeypatch.setattr(loader.PipelineCache, "_build", recorded)
    model = small_model(int(threads) + 100)
    x = {model.graph.input[0].name: np.random.default_rng(1).standard_normal((2, 3, 7, 5)).astype(np.float32)}
    expected = session_for(model.SerializeToString(), "numpy").run(None, x)[0]
    session = session_for(model.SerializeToString(), f"wgpu:{ADAPTERS[0]}")
    got = session.run(None, x)[0]
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-5)
    assert built_on, "the session compiled nothing"
    on_workers = all(name.startswith("wgnn-compile") for name in built_on)
    assert on_workers == (threads != "1"), built_on
    backend = session.session.backends[0]
    assert backend.requested == []  # the resize waited for every pipeline it asked for


@needs_gpu
@pytest.mark.parametrize("threads", ["1", "2"])
def test_a_kernel_that_fails_to_compile_names_the_step_at_resize(monkeypatch, threads):
    monkeypatch.setenv("WGNN_COMPILE_THREADS", threads)
    source = loader.kernel_source
    marker = f"fn broken_{threads}( {{"  # a syntax error, and a text no earlier test compiled
    monkeypatch.setattr(loader, "kernel_source",
                        lambda path: source(path) + ("" if path == "prelude.wgsl" else f"\n{marker}\n"))
    model = small_model(int(threads) + 200)
    with pytest.raises(KernelCompileError) as caught:
        wgnn.InferenceSession(model.SerializeToString(),
                              config=wgnn.Config(providers=("wgpu",), adapter=ADAPTERS[0])).session.resize()
    message = str(caught.value)
    assert message.startswith('Conv "') and "failed to compile" in message and "kernels_wgsl/" in message


@needs_gpu
def test_sessions_prepared_on_several_threads_at_once(monkeypatch):
    """Sessions created from threads at the same time share the device's pipeline cache and its
    compile threads; each one waits for its own pipelines and computes its own model."""
    monkeypatch.setenv("WGNN_COMPILE_THREADS", "2")
    models = [small_model(300 + i) for i in range(4)]  # the stem kernel holds the weights: 4 texts
    x = np.random.default_rng(2).standard_normal((2, 3, 7, 5)).astype(np.float32)
    expected = [session_for(m.SerializeToString(), "numpy").run(None, {"in0": x})[0] for m in models]
    results, errors = [None] * len(models), []

    def work(i):
        try:
            session = session_for(models[i].SerializeToString(), f"wgpu:{ADAPTERS[0]}")
            results[i] = session.run(None, {"in0": x})[0]
        except Exception as exc:  # reported below, with the thread's model
            errors.append((i, exc))

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(models))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    for got, want in zip(results, expected):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_work_a_run_needs_goes_before_background_work():
    """A free compile thread takes the first queued task a run needs before any background one
    (deferred variants, code of kernels replacing quicker ones), even one queued later."""
    cache = loader.PipelineCache(SimpleNamespace())
    cache._workers = ThreadPoolExecutor(1)
    gate, order, futures = threading.Event(), [], []

    def job(name):
        if name == "first":
            gate.wait(5)
        order.append(name)

    for name, background in (("first", False), ("background 1", True), ("background 2", True), ("needed", False)):
        futures.append(Future())
        cache._submit((cache._run_into, futures[-1], job, name), background=background)
    gate.set()
    for future in futures:
        future.result(5)
    assert order == ["first", "needed", "background 1", "background 2"]


def test_warmups_of_one_kernel_run_one_after_another():
    """A kernel warmed for several sets of binding traits (several params) gets them one at a time:
    side by side both would miss the driver's cache, where its code does not depend on them."""
    active, most, beside, lock = {}, {}, [], threading.Lock()

    def warm(code, *args):
        with lock:
            active[code] = active.get(code, 0) + 1
            most[code] = max(most.get(code, 0), active[code])
            beside.append(sum(1 for n in active.values() if n) > 1)
        time.sleep(0.05)
        with lock:
            active[code] -= 1

    cache = loader.PipelineCache(SimpleNamespace())
    cache._workers = ThreadPoolExecutor(2)
    cache.warmup = SimpleNamespace(warm=warm)
    kernel = loader.Kernel(object(), None, (loader.STORAGE,), "test.wgsl")
    kernel.source = ("code", (loader.STORAGE,), {}, "main")
    other = loader.Kernel(object(), None, (loader.STORAGE,), "other.wgsl")
    other.source = ("other code", (loader.STORAGE,), {}, "main")
    warmups = [cache.warm(kernel, ("uniform", bytes([i]))) for i in range(3)]
    warmups.append(cache.warm(other, ()))
    for future in warmups:
        future.result(5)
    assert most == {"code": 1, "other code": 1} and any(beside)  # the other kernel beside them, never two of one
    assert cache.warm(kernel, ("uniform", bytes([0]))) is warmups[0]  # asked before: the same warm-up


@pytest.mark.skipif(not any(a["backend"] == "OpenGL" for a in gpu_adapters()), reason="no OpenGL adapter")
def test_opengl_compiles_on_the_calling_thread(monkeypatch):
    """wgpu-hal's GL backend panics when a thread waits over a second for its context lock, which a
    cold-cache GL compile of a big kernel holds longer: on OpenGL the compiles take turns with the
    runs, on the calling thread, whatever WGNN_COMPILE_THREADS says."""
    monkeypatch.setenv("WGNN_COMPILE_THREADS", "4")
    index = next(a["index"] for a in gpu_adapters() if a["backend"] == "OpenGL")
    model = small_model(41)
    session = wgnn.InferenceSession(model.SerializeToString(),
                                    config=wgnn.Config(providers=("wgpu",), adapter=index))
    x = {"in0": np.random.default_rng(4).standard_normal((2, 3, 7, 5)).astype(np.float32)}
    expected = session_for(model.SerializeToString(), "numpy").run(None, x)[0]
    np.testing.assert_allclose(session.run(None, x)[0], expected, rtol=1e-4, atol=1e-4)
    backend = session.session.backends[0]
    assert loader.compile_threads_for(backend.context) == 1
    assert backend.pipelines._workers is None  # no compile thread was started
