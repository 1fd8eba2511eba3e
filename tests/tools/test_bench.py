"""`wgnn bench`: the command's output (text, JSON, per-op table, trace, --vs onnxruntime) and the wgpu
backend's opt-in profiler (off: runs as before; on: runs still create no GPU resources)."""
import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest
from helpers import gpu_adapters
from wgnn.backends.numpy import blas as numpy_blas
from wgnn.tools.bench import page_faults, ratio_interval

import wgnn

QUICK = ["--runs", "3", "--warmup", "1"]
needs_gpu = pytest.mark.skipif(not gpu_adapters(), reason="no GPU adapter (install mesa-vulkan-drivers)")


def bench(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "wgnn.tools.cli", "bench", *args], capture_output=True, text=True,
                          timeout=120, env={**os.environ, **(env or {})})


def test_numpy_text_output():
    done = bench("zoo:resnet", *QUICK)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "cold start: load" in out and "prepare" in out and "first run" in out
    assert "median ms" in out and "p90 ms" in out
    assert "steps: numpy " in out and "0 GPU dispatches" in out
    if page_faults() is not None:
        assert "host page faults per wgnn run: " in out
    assert done.stderr == ""  # no progress bar when stderr is not a terminal


@pytest.mark.parametrize("compiled_loops", ["1", "0"])
def test_numpy_per_op_names_each_steps_path(compiled_loops):
    """On numpy the per-op table's kernel column names the path each step prepared, per stage for
    fused ops: at 96x96 MobileNetV2's depthwise convs run as compiled loops (where numba is
    installed) and so does its stem (a direct conv over stride phases), else its stride-2 depthwise convs go in chunks
    of channels and the stem is an im2col product."""
    from wgnn.backends.numpy import compiled

    done = bench("zoo:mobilenetv2:size=96", *QUICK, "--per-op", "--json", env={compiled.COMPILED_ENV: compiled_loops})
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    kernels = {row["op_type"]: row["kernel"] for row in result["per_op"]["rows"]}
    blocks = [row["kernel"] for row in result["per_op"]["rows"] if row["op_type"] == "ConvDwPwExpand"]
    # (the pointwise products go in bands of columns where numpy's BLAS has a small-product kernel;
    # large ones through a compiled loop)
    pointwise = r"(matmul(, \d+ bands)?|direct, compiled loop \(conv_(grid|direct)\))"
    assert all(re.fullmatch(rf"dw: .*; pw: {pointwise}; ex: {pointwise}", k) for k in blocks)
    if compiled_loops == "1" and compiled._numba() is not None:
        assert all(k.startswith("dw: depthwise, compiled loop (depthwise_") for k in blocks)
        assert kernels["Conv"] == "direct, compiled loop (conv_grid)"
        assert re.fullmatch(rf"numba {re.escape(compiled._numba().__version__)}, \d+ threads?( \((omp|tbb)\))?",
                            result["numpy_compiled"])
    else:
        assert any("dw: depthwise " in k and "ch, 4 phases" in k for k in blocks)
        assert kernels["Conv"].startswith("im2col")
        assert result["numpy_compiled"].startswith("off (")
    # the head: one compiled loop once the convs started numba, else the two kernels it fused
    assert kernels["GlobalPoolMatMul.avg"] == ("compiled loop (pool_matmul_rows)" if compiled_loops == "1"
                                               and compiled._numba() is not None else "pool: numpy; matmul: numpy")


def test_numpy_threads_option():
    """--numpy-threads sets the session's loop threads (the report says how many), and a count
    under 1 is an error that names the setting."""
    from wgnn.backends.numpy import compiled

    done = bench("zoo:resnet", *QUICK, "--numpy-threads", "1", "--json")
    assert done.returncode == 0, done.stderr
    reported = json.loads(done.stdout)["numpy_compiled"]
    assert reported.startswith("off (") if compiled._numba() is None else ", 1 thread" in reported
    done = bench("zoo:resnet", *QUICK, "--numpy-threads", "0")
    assert done.returncode != 0 and "numpy_threads must be" in done.stderr


def test_numpy_thread_runs_reported():
    """Where a session's runs choose their loops' threads (numpy_threads "auto"), bench counts its
    timed runs each way (a probe of one thread falls in every PROBE_EVERY runs) and the switches;
    with a set count there is no choice to report."""
    from wgnn.backends.numpy import compiled

    env = {compiled.THREADS_ENV: ""}  # "auto" in the child, whatever this process was given
    runs = compiled.PROBE_EVERY + 6
    done = bench("zoo:resnet:size=96", "--runs", str(runs), "--warmup", "0", "--json", env=env)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    counts = result["numpy_thread_runs"]
    if compiled._numba() is None or ", 1 thread" in result["numpy_compiled"]:
        assert counts is None
        return
    assert counts["threads"] + counts["one_thread"] == runs
    assert counts["one_thread"] >= compiled.PROBE_RUNS or counts["switches"] > 0
    done = bench("zoo:resnet:size=96", "--runs", str(runs), "--warmup", "0", env=env)
    assert re.search(r"numpy loops' threads, chosen per run: \d+ runs on their threads, \d+ on one", done.stdout)
    done = bench("zoo:resnet:size=96", *QUICK, "--numpy-threads", "2", "--json")
    assert json.loads(done.stdout)["numpy_thread_runs"] is None


def test_json_keys_and_vs_onnxruntime():
    done = bench("zoo:resnet", *QUICK, "--vs", "onnxruntime", "--json")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert {"latency_ms", "cold_start_ms", "pipelines_compiled", "dispatches", "steps_per_backend",
            "vs"} <= set(result)
    assert set(result["cold_start_ms"]) == {"load", "prepare", "shader_compile", "first_run"}
    assert result["compile_threads"] == 0 and result["pipelines_compiled"] == 0  # numpy: nothing compiles
    assert result["numpy_blas"] == numpy_blas.describe()  # the BLAS its conv plans were sized for
    lat = result["latency_ms"]
    assert len(lat["samples"]) == 3 and lat["min"] <= lat["median"] <= lat["p90"] <= lat["max"]
    vs = result["vs"]
    assert vs["name"] == "onnxruntime" and len(vs["latency_ms"]["samples"]) == 3
    assert vs["ratio"] == pytest.approx(lat["median"] / vs["latency_ms"]["median"])
    assert vs["max_rel_error"] < 1e-4
    assert vs["ratio_interval"] is None  # 3 runs: too few for an interval
    text = bench("zoo:resnet", *QUICK, "--vs", "onnxruntime")
    assert text.returncode == 0 and "ratio wgnn / onnxruntime (medians): x" in text.stdout
    assert f"numpy's BLAS: {numpy_blas.describe()}" in text.stdout.splitlines()[0]


def touch_fresh_pages(size: int = 1 << 20) -> None:
    """Map size bytes and write every 4 KiB page (a 1 MiB mapping is too small for a huge page)."""
    import mmap

    with mmap.mmap(-1, size) as fresh:
        for offset in range(0, size, 4096):
            fresh[offset] = 1


def test_page_faults_count_fresh_pages():
    if page_faults() is None:
        pytest.skip("this OS does not count page faults")
    before = page_faults()
    touch_fresh_pages()
    assert page_faults() - before >= 200


def test_bench_counts_the_page_faults_of_wgnn_runs_only(tmp_path, monkeypatch):
    """Faults during wgnn's runs are reported per run; onnxruntime's (--vs) are not counted."""
    if page_faults() is None:
        pytest.skip("this OS does not count page faults")
    import onnx
    from wgnn.engine.session import Session
    from wgnn.models.zoo import build
    from wgnn.tools.bench import bench_model

    path = tmp_path / "resnet.onnx"
    onnx.save(build("resnet"), path)
    config = wgnn.Config(providers=("numpy",))
    quiet = bench_model(path, config, {}, warmup=1, runs=5, vs="onnxruntime", show_progress=False)
    assert quiet["page_faults_per_run"] < 32
    run = Session.run

    def faulting_run(self, *args, **kwargs):
        touch_fresh_pages()
        return run(self, *args, **kwargs)

    monkeypatch.setattr(Session, "run", faulting_run)
    faulting = bench_model(path, config, {}, warmup=1, runs=5, show_progress=False)
    assert faulting["page_faults_per_run"] >= 200


WARM_RUN_FAULTS = """
import resource, sys
import wgnn
from wgnn.models.zoo import build, example_inputs
model = build("bert", hidden=64, heads=4, layers=1, ffn=256, max_positions=128)
feeds = example_inputs(model, 1, seq=128)
session = wgnn.InferenceSession(model, providers=["numpy"])
for _ in range(5):
    session.run(None, feeds)
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(20):
    session.run(None, feeds)
print((resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) / 20)
"""


def test_warm_numpy_runs_map_no_fresh_memory():
    """In a fresh process (nothing has raised glibc's mmap threshold yet), a warm numpy run of a
    small encoder faults no pages in: its GELU over 128 x 256 elements made ~512 per run while
    Erf's temporaries were whole-array (each a fresh mapping past the threshold)."""
    if page_faults() is None:
        pytest.skip("this OS does not count page faults")
    done = subprocess.run([sys.executable, "-c", WARM_RUN_FAULTS], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert float(done.stdout) < 32


def test_vs_onnxruntime_ratio_interval():
    """From 5 alternating runs on, the ratio comes with its 95% interval (the peers' paired bootstrap)."""
    done = bench("zoo:resnet", "--runs", "8", "--warmup", "1", "--vs", "onnxruntime", "--json")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    vs = result["vs"]
    low, high = vs["ratio_interval"]
    assert low <= vs["ratio"] <= high
    assert (low, high) == pytest.approx(ratio_interval(result["latency_ms"]["samples"], vs["latency_ms"]["samples"]),
                                        rel=1e-3)  # samples are rounded to 0.1 us in the JSON
    text = bench("zoo:resnet", "--runs", "8", "--warmup", "1", "--vs", "onnxruntime")
    assert text.returncode == 0 and "(95% interval x" in text.stdout


@needs_gpu
def test_wgpu_per_op_and_trace(tmp_path):
    trace = tmp_path / "trace.json"
    done = bench("zoo:resnet", *QUICK, "--provider", "wgpu,numpy", "--adapter", "0", "--per-op", "--trace",
                 str(trace), "--json")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    # Every step dispatches (the pooling head is one GlobalPoolMatMul, no Flatten view remains).
    assert result["views"] == 0
    assert result["dispatches"] >= result["steps_per_backend"]["wgpu"] > 0
    assert result["encode_us_per_step"] > 0  # host time to record one GPU step
    # A fresh process compiles every pipeline, on the compile threads (summed over them).
    assert result["pipelines_compiled"] > 0 and result["cold_start_ms"]["shader_compile"] > 0
    assert result["compile_threads"] >= 1
    per_op = result["per_op"]
    rows = per_op["rows"]
    convs = [r for r in rows if r["op_type"] == "Conv"]
    assert convs and all(r["kernel"].startswith("conv/") for r in convs)
    assert all(r["median_ms"] >= 0 for r in rows)
    assert sum(r["median_ms"] for r in rows) == pytest.approx(per_op["total_ms"])
    if per_op["methods"]["wgpu"] == "timestamp-query":
        assert all(r["backend"] == "wgpu" for r in rows)
        assert per_op["total_ms"] <= per_op["wall_ms_median"]  # GPU time fits in the run's wall time
    assert sum(r["percent"] for r in rows) == pytest.approx(100)
    events = json.loads(trace.read_text())["traceEvents"]
    ops = [e for e in events if e["ph"] == "X"]
    assert len(ops) == 3 * len(rows)  # one per op per profiled run
    assert {"op", "kernel", "shape", "run"} <= set(ops[0]["args"]) and all(e["dur"] >= 0 for e in ops)
    text = bench("zoo:resnet", *QUICK, "--provider", "wgpu,numpy", "--adapter", "0", "--per-op")
    assert text.returncode == 0 and "GFLOP/s" in text.stdout and 'Conv "' in text.stdout


def _relu_model(path) -> str:
    import onnx
    from onnx import TensorProto, helper

    vi = helper.make_tensor_value_info
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "relu",
                              [vi("x", TensorProto.FLOAT, [1, 5, 3, 3])], [vi("y", TensorProto.FLOAT, [1, 5, 3, 3])])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return str(path)


def _is_mesa(adapter: dict) -> bool:
    return any(word in adapter["name"].lower() for word in ("llvmpipe", "lavapipe", "mesa", "radv", "anv"))


@needs_gpu
def test_no_driver_cache_turns_the_drivers_disk_cache_off(tmp_path, monkeypatch):
    """--no-driver-cache: Mesa writes no compiled shader to its cache directory (without the flag,
    the same command does), and the output says the caches were off."""
    model = _relu_model(tmp_path / "relu.onnx")
    adapter = gpu_adapters()[0]
    runs = {}
    for flag in ("--no-driver-cache", None):
        cache = tmp_path / f"cache{'_off' if flag else '_on'}"
        monkeypatch.setenv("MESA_SHADER_CACHE_DIR", str(cache))
        monkeypatch.delenv("MESA_SHADER_CACHE_DISABLE", raising=False)
        done = bench(model, "--provider", "wgpu", "--adapter", str(adapter["index"]), *QUICK, "--json",
                     *([flag] if flag else []))
        assert done.returncode == 0, done.stderr
        runs[flag] = (json.loads(done.stdout), [f for f in cache.rglob("*") if f.is_file()])
    (off, off_files), (on, on_files) = runs["--no-driver-cache"], runs[None]
    assert off["driver_shader_cache"] == "off" and on["driver_shader_cache"] == "on"
    if _is_mesa(adapter):
        assert on_files and not off_files
    text = bench(model, "--provider", "wgpu", "--adapter", str(adapter["index"]), *QUICK, "--no-driver-cache")
    assert text.returncode == 0 and "(drivers' shader caches off)" in text.stdout
    refused = bench("--kernels", "--quick", "--no-driver-cache")
    assert refused.returncode == 2 and "--no-driver-cache does not go with --kernels" in refused.stderr


@needs_gpu
def test_empty_driver_cache_starts_a_new_cache_that_warmups_fill(tmp_path, monkeypatch):
    """--empty-driver-cache: a first-ever run with the cache on. The user's cache folder gets
    nothing; on lavapipe the driver generates the kernels' code during prepare (driver warm-ups)."""
    model = _relu_model(tmp_path / "relu.onnx")
    adapter = gpu_adapters()[0]
    user_cache = tmp_path / "user"
    monkeypatch.setenv("MESA_SHADER_CACHE_DIR", str(user_cache))
    monkeypatch.setenv("WGNN_DRIVER_WARMUP", "1")
    monkeypatch.setenv("WGNN_COMPILE_THREADS", "2")
    monkeypatch.delenv("MESA_SHADER_CACHE_DISABLE", raising=False)
    args = ("--provider", "wgpu", "--adapter", str(adapter["index"]), *QUICK, "--empty-driver-cache")
    done = bench(model, *args, "--json")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["driver_shader_cache"] == "empty" and not user_cache.exists()
    lavapipe = "llvmpipe" in adapter["name"].lower() and adapter["backend"] == "Vulkan"
    assert (result["driver_warmups"]["kernels"] > 0) == lavapipe
    text = bench(model, *args)
    assert text.returncode == 0 and "(drivers' shader caches empty)" in text.stdout
    assert ("kernels' code during prepare" in text.stdout) == lavapipe
    both = bench(model, *args, "--no-driver-cache")
    assert both.returncode == 2 and "not allowed with argument" in both.stderr


LAVAPIPE = [a for a in gpu_adapters() if "llvmpipe" in a["name"].lower() and a["backend"] == "Vulkan"]


@pytest.mark.skipif(not LAVAPIPE, reason="no lavapipe (Vulkan llvmpipe) adapter")
@pytest.mark.parametrize("quick_first", ["1", "0"])
def test_a_first_ever_run_reports_its_quick_kernels_and_waits_for_the_background(tmp_path, monkeypatch, quick_first):
    """An RGB stem conv on lavapipe with an empty driver cache: the first run uses the one-pixel
    stem kernel, and bench waits for the background work before timing (WGNN_QUICK_FIRST=0: none)."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    weights = numpy_helper.from_array(np.random.default_rng(0).standard_normal((6, 3, 3, 3)).astype(np.float32), "w")
    vi = helper.make_tensor_value_info
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], strides=[2, 2], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["y"])]
    graph = helper.make_graph(nodes, "stem", [vi("x", TensorProto.FLOAT, [2, 3, 16, 16])],
                              [vi("y", TensorProto.FLOAT, None)], [weights])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), tmp_path / "stem.onnx")
    monkeypatch.setenv("WGNN_CACHE_DIR", str(tmp_path / "wgnn"))
    monkeypatch.setenv("WGNN_DRIVER_WARMUP", "1")
    monkeypatch.setenv("WGNN_COMPILE_THREADS", "2")
    monkeypatch.setenv("WGNN_QUICK_FIRST", quick_first)
    monkeypatch.delenv("MESA_SHADER_CACHE_DISABLE", raising=False)
    args = (str(tmp_path / "stem.onnx"), "--provider", "wgpu", "--adapter", str(LAVAPIPE[0]["index"]), *QUICK,
            "--empty-driver-cache")
    done = bench(*args, "--json")
    assert done.returncode == 0, done.stderr
    background = json.loads(done.stdout)["background"]
    assert background["quick_first"] == (1 if quick_first == "1" else 0)
    assert background["tasks"] > 0  # the other conv paths' pipelines, at least
    text = bench(*args)
    assert text.returncode == 0 and "background task(s)" in text.stdout
    assert ("1 step(s) ran a kernel quicker to generate" in text.stdout) == (quick_first == "1")


@needs_gpu
@pytest.mark.parametrize(("setting", "arguments", "variable"), [
    ("disable_driver_shader_cache", (), "MESA_SHADER_CACHE_DISABLE"), ("set_lavapipe_threads", (0,), "LP_NUM_THREADS"),
    ("use_empty_driver_shader_cache", (), "MESA_SHADER_CACHE_DIR")])
def test_driver_settings_cannot_change_once_the_driver_is_loaded(setting, arguments, variable, monkeypatch):
    from wgnn.backends.wgpu import context
    from wgnn.engine.errors import InputError

    context.adapters()  # the driver is loaded
    monkeypatch.setenv(variable, "as before")  # restored after the test
    with pytest.raises(InputError, match="before the first GPU use"):
        getattr(context, setting)(*arguments)
    assert context.os.environ[variable] == "as before"


def test_bad_model_path_and_options(tmp_path):
    done = bench(str(tmp_path / "missing.onnx"))
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.count("\n") == 1 and "model file not found" in done.stderr
    done = bench("zoo:resnet", "--runs", "0")
    assert done.returncode == 2 and "--runs" in done.stderr


def _gpu_session():
    from wgnn.models.zoo import build

    return wgnn.InferenceSession(build("resnet").SerializeToString(),
                                 config=wgnn.Config(providers=("wgpu", "numpy"), adapter=0))


@needs_gpu
def test_profiler_off_runs_as_before_and_on_allocates_nothing_in_run(monkeypatch):
    x = np.random.default_rng(0).standard_normal((1, 3, 32, 32)).astype(np.float32)
    session = _gpu_session()
    before = session.run(None, {"input": x})[0]
    backend = session.session.backends[0]
    assert backend.profiler is None
    profiler = backend.enable_profiling(len(session.session.segments[0].steps))
    profiled = session.run(None, {"input": x})[0]
    np.testing.assert_array_equal(profiled, before)  # same dispatches, only split into passes
    records = profiler.take()
    assert len(records) == 1 and records[0]["wall_ms"] > 0
    device = backend.device

    def forbidden(*args, **kwargs):
        raise AssertionError("run() must not create GPU resources")

    for method in ("create_buffer", "create_compute_pipeline", "create_shader_module", "create_bind_group",
                   "create_query_set"):
        monkeypatch.setattr(type(device), method, forbidden)
    session.run(None, {"input": x * 2})
    steps = profiler.take()[0]["steps"]
    if profiler.method == "timestamp-query":
        timed = [(b, e) for _, ex, b, e in steps if ex.dispatches]
        assert timed and all(0 <= b <= e for b, e in timed)
    backend.disable_profiling()
    after = session.run(None, {"input": x})[0]
    np.testing.assert_array_equal(after, before)
    assert profiler.take() == []  # disabled: the ordinary path records nothing


def _llvmpipe(adapter: dict) -> bool:
    return "llvmpipe" in adapter["name"].lower()


@needs_gpu
def test_lavapipe_threads_reach_the_driver_and_the_report(tmp_path, monkeypatch):
    """--lavapipe-threads N sets Mesa's LP_NUM_THREADS before the driver loads: with 0 the process has
    no llvmpipe worker threads (with the default, one per core, it has), and the JSON and text say N."""
    model = _relu_model(tmp_path / "relu.onnx")
    adapter = gpu_adapters()[0]
    monkeypatch.delenv("LP_NUM_THREADS", raising=False)
    counting = ("import os, sys, numpy as np, wgnn\n"
                "if sys.argv[1] != 'default': wgnn.set_lavapipe_threads(int(sys.argv[1]))\n"
                f"config = wgnn.Config(providers=('wgpu',), adapter={adapter['index']})\n"
                f"s = wgnn.InferenceSession({model!r}, config=config)\n"
                "x = np.linspace(-1, 1, 45, dtype=np.float32).reshape(1, 5, 3, 3)\n"
                "assert np.array_equal(s.run(None, {'x': x})[0], np.maximum(x, 0))\n"
                "names = [open(f'/proc/self/task/{t}/comm').read() for t in os.listdir('/proc/self/task')]\n"
                "print(sum(n.startswith('llvmpipe-') for n in names))\n")
    if _llvmpipe(adapter) and sys.platform.startswith("linux"):
        workers = {}
        for setting in ("0", "default"):
            done = subprocess.run([sys.executable, "-c", counting, setting], capture_output=True, text=True,
                                  timeout=120)
            assert done.returncode == 0, done.stderr
            workers[setting] = int(done.stdout.split()[-1])
        assert workers["0"] == 0 and workers["default"] > 0, workers
    done = bench(model, "--provider", "wgpu", "--adapter", str(adapter["index"]), *QUICK, "--json",
                 "--lavapipe-threads", "0")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["lavapipe_threads"] == (0 if _llvmpipe(adapter) else None)
    text = bench(model, "--provider", "wgpu", "--adapter", str(adapter["index"]), *QUICK, "--lavapipe-threads", "1")
    assert text.returncode == 0, text.stderr
    assert ("1 lavapipe worker threads" in text.stdout) == _llvmpipe(adapter)
    for bad in ("-1", "33"):
        refused = bench(model, "--provider", "wgpu", *QUICK, "--lavapipe-threads", bad)
        assert refused.returncode == 2 and "lavapipe threads must be an integer from 0 to 32" in refused.stderr


@needs_gpu
def test_the_report_says_which_lavapipe_device_the_session_chose(tmp_path, monkeypatch):
    """Without a count set for the process, a one-Relu model's session takes the device without worker
    threads; the JSON and the adapter line say so and why."""
    adapter = gpu_adapters()[0]
    if not (_llvmpipe(adapter) and adapter["backend"] == "Vulkan"):
        pytest.skip("the first adapter is not lavapipe")
    model = _relu_model(tmp_path / "relu.onnx")
    monkeypatch.delenv("LP_NUM_THREADS", raising=False)
    done = bench(model, "--provider", "wgpu", "--adapter", str(adapter["index"]), *QUICK, "--json")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["lavapipe_threads"] == 0 and "MFLOP per step, under" in result["lavapipe_threads_why"]
    from wgnn.backends.wgpu.context import usable_cores

    polls = usable_cores() >= 2  # reads poll before they wait there (context.readback_spin_seconds)
    assert result["readback_poll_us"] == (1000 if polls else 0)
    text = bench(model, "--provider", "wgpu", "--adapter", str(adapter["index"]), *QUICK)
    assert text.returncode == 0, text.stderr
    assert "0 lavapipe worker threads (0.00 MFLOP per step, under " in text.stdout
    assert ("outputs polled for up to 1000 us" in text.stdout) == polls
    monkeypatch.setenv("WGNN_READBACK_SPIN_US", "0")
    done = bench(model, "--provider", "wgpu", "--adapter", str(adapter["index"]), *QUICK, "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["readback_poll_us"] == 0


@pytest.mark.parametrize("bad", [True, 1.0, "1", -1, 33])
def test_lavapipe_threads_are_a_count_from_0_to_32(bad):
    from wgnn.backends.wgpu import context
    from wgnn.engine.errors import InputError

    with pytest.raises(InputError, match="from 0 to 32"):
        context.set_lavapipe_threads(bad)


@pytest.mark.skipif(not gpu_adapters(), reason="no GPU adapter")
@pytest.mark.parametrize("faster", ["wgpu", "numpy"])
def test_provider_auto_runs_where_predicted_faster(faster, tmp_path):
    """--provider auto: the model runs on the provider the cached costs predict faster for it,
    and the report says so."""
    from wgnn.backends.wgpu import tuning
    from wgnn.backends.wgpu.context import get_context

    cheap, dear = {"run_ms": 0.0, "step_ms": 0.0, "mflop_ms": 0.001}, {"run_ms": 1.0, "step_ms": 0.1, "mflop_ms": 1.0}
    costs = {"wgpu": cheap, "numpy": dear} if faster == "wgpu" else {"wgpu": {**dear, "step_ms": 0.0},
                                                                    "numpy": {**cheap, "step_ms": 0.1}}
    # Either way wgpu has a lower cost of some kind, so both providers are set up and the model's
    # work decides (resnet at 32x32: about 10 steps, several MFLOP).
    record = {"form": tuning.PROVIDERS_RECORD, "probes": [{"steps": 1, "mflop": 0.0}], "costs": costs,
              "rounds": 1, "model": "test", "fallbacks": 0}
    key = tuning.adapter_key(get_context(None).info)
    (tmp_path / "tuning.json").write_text(json.dumps({"format": tuning.CACHE_FORMAT,
                                                      "entries": {key: {"providers": record}}}))
    done = subprocess.run([sys.executable, "-m", "wgnn.tools.cli", "bench", "zoo:resnet", "--provider", "auto",
                           *QUICK, "--json"], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "WGNN_CACHE_DIR": str(tmp_path)})
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    choice = result["providers_choice"]
    assert result["providers"] == choice["providers"] == (["wgpu", "numpy"] if faster == "wgpu" else ["numpy"])
    assert min(choice["predicted_ms"], key=choice["predicted_ms"].get) == faster and choice["model_mflop"] > 0
    assert (result["adapter"] is None) == (faster == "numpy")
    shown = subprocess.run([sys.executable, "-m", "wgnn.tools.cli", "bench", "zoo:resnet", "--provider", "auto",
                            *QUICK], capture_output=True, text=True, timeout=120,
                           env={**os.environ, "WGNN_CACHE_DIR": str(tmp_path)})
    assert shown.returncode == 0, shown.stderr
    assert f"providers: {', '.join(result['providers'])}" in shown.stdout and "(auto: predicted wgpu " in shown.stdout
