"""The tuning cache (backends/wgpu/tuning.py) and what follows it: the cache file's round trip and
keys, storage="auto", tuned workgroup sizes (pipelines, grids, results, resizes), providers=["auto"]
from the cache and from one real (tiny, never timed) measurement."""
from __future__ import annotations

import json
import logging
import math
import re
from types import SimpleNamespace

import numpy as np
import pytest
from helpers import gpu_adapters
from wgnn.backends.wgpu import backend as backend_module
from wgnn.backends.wgpu import tuning
from wgnn.backends.wgpu.backend import WgpuBackend
from wgnn.backends.wgpu.context import AdapterInfo, get_context
from wgnn.backends.wgpu.loader import Kernel, kernel_source, pipeline_cache
from wgnn.engine.graph import Graph, Model, Node, TensorInfo

import wgnn

ADAPTERS = [a["index"] for a in gpu_adapters()]
needs_gpu = pytest.mark.skipif(not ADAPTERS, reason="no GPU adapter (install mesa-vulkan-drivers)")


@pytest.fixture(autouse=True)
def cache_dir(tmp_path, monkeypatch):
    """Every test gets its own empty cache folder (never the user's ~/.cache/wgnn)."""
    monkeypatch.setenv(tuning.CACHE_ENV, str(tmp_path / "cache"))
    return tmp_path / "cache"


def info(driver="Mesa 1.0") -> AdapterInfo:
    return AdapterInfo(index=0, name="Test GPU", backend="Vulkan", adapter_type="DiscreteGPU", driver=driver, vendor="")


def write_cache(entries: dict) -> None:
    """A cache file written by hand, as `wgnn tune` would leave it."""
    path = tuning.cache_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"format": tuning.CACHE_FORMAT, "entries": entries}))


def conv_pool_model(channels=6, size=9) -> Model:
    """Conv 3x3 -> max pool -> Add of the pool with itself: NC4HW4 conv, pool and binary kernels."""
    rng = np.random.default_rng(0)
    inits = {"w": (rng.standard_normal((channels, channels, 3, 3)) / 6).astype(np.float32),
             "b": rng.standard_normal(channels).astype(np.float32)}
    nodes = [Node("Conv", ["x", "w", "b"], ["c"], {"pads": [1, 1, 1, 1]}, "conv"),
             Node("Pool", ["c"], ["p"], {"kind": "max", "kernel_shape": [2, 2], "strides": [1, 1]}, "pool"),
             Node("Binary", ["p", "p"], ["y"], {"kind": "add"}, "add")]
    graph = Graph(nodes, [TensorInfo("x", "float32", ("N", channels, "H", "W"))], [TensorInfo("y", "float32", None)],
                  inits)
    return Model(graph)


def feeds(shape) -> dict:
    return {"x": np.random.default_rng(1).standard_normal(shape).astype(np.float32)}


# ------------------------------------------------------------------------------------ cache
def test_cache_location_follows_the_environment(cache_dir, monkeypatch):
    assert tuning.cache_path() == cache_dir / "tuning.json"
    monkeypatch.delenv(tuning.CACHE_ENV)
    assert tuning.cache_path() == tuning.Path.home() / ".cache" / "wgnn" / "tuning.json"


def test_cache_round_trip_and_keys():
    assert tuning.cache_entry(info()) is None  # no file yet
    path = tuning.save_entry(info(), {"storage": {"fp32": "texture"}})
    tuning.save_entry(info(), {"workgroups": {"pool/pool_nc4hw4.wgsl": 128}})  # merged, not replaced
    entry = tuning.cache_entry(info())
    assert entry["storage"] == {"fp32": "texture"} and entry["workgroups"] == {"pool/pool_nc4hw4.wgsl": 128}
    assert (entry["adapter"], entry["backend"], entry["driver"], entry["wgnn"]) == \
        ("Test GPU", "Vulkan", "Mesa 1.0", wgnn.__version__)
    document = json.loads(path.read_text())
    assert list(document["entries"]) == [f"Test GPU | Vulkan | Mesa 1.0 | wgnn {wgnn.__version__}"]
    # A driver update (or another wgnn version) is another key: the old measurement does not apply.
    assert tuning.cache_entry(info(driver="Mesa 2.0")) is None
    tuning.save_entry(info(driver="Mesa 2.0"), {"storage": {"fp32": "buffer"}})
    assert tuning.cache_entry(info())["storage"] == {"fp32": "texture"}
    assert tuning.clear_cache([info(driver="Mesa 2.0")]) == 1
    assert tuning.cache_entry(info(driver="Mesa 2.0")) is None and tuning.cache_entry(info()) is not None
    assert tuning.clear_cache() == 1
    assert not path.exists() and tuning.cache_entry(info()) is None


def test_unreadable_cache_is_ignored_with_a_warning(caplog):
    tuning.cache_path().parent.mkdir(parents=True)
    tuning.cache_path().write_text("{not json")
    with caplog.at_level(logging.WARNING, logger="wgnn.wgpu"):
        assert tuning.cache_entry(info()) is None
    assert "ignoring the tuning cache" in caplog.text
    tuning.save_entry(info(), {"storage": {"fp32": "buffer"}})  # writing replaces the broken file
    assert tuning.cache_entry(info())["storage"] == {"fp32": "buffer"}


def test_tunable_kernels_do_not_depend_on_their_workgroup_size():
    """A tuned WG must not change results: each tunable kernel finds its work from linear_id(gid,
    nwg, WG), bounds it by a count in params (a return past it, or a per-element check against
    it), and shares nothing within a workgroup."""
    assert tuning.DEFAULT_WORKGROUP == backend_module.WORKGROUP
    for path in sorted(tuning.TUNABLE_KERNELS):
        source = re.sub(r"//[^\n]*", "", kernel_source(path))  # the code, not what comments mention
        assert "@workgroup_size(WG)" in source and "linear_id(gid, nwg, WG)" in source, path
        returns = re.search(r">= u?32\(p\(0u\)\)\)\s*\{\s*return;|>= pu?\(0u\)\)\s*\{\s*return;", source)
        per_element = re.search(r"let n = u32\(p\(0u\)\);", source) and re.search(r"\bi (<|>=) n\b", source)
        # the MatMuls count blocks as batches x row blocks x column blocks (slots 3, 4, 5)
        blocks = re.search(r"id >= pu\(3u\) \* per_batch\)\s*\{\s*return;", source) or re.search(
            r"let total = pu\(3u\) \* per_batch;\s*let live = linear_id\(gid, nwg, WG\) < total;", source)
        assert returns or per_element or blocks, path
        for shared in ("var<workgroup>", "workgroupBarrier", "local_invocation", "workgroup_id", "subgroup"):
            # matmul_subgroup shares rows of A by subgroup shuffles only after checking that its
            # subgroup holds those rows (else it loads them itself): right for any WG and subgroup.
            if shared != "subgroup" or path != "matmul/matmul_subgroup.wgsl":
                assert shared not in source, (path, shared)


def test_kernel_grid_counts_groups_of_the_kernels_size():
    backend = SimpleNamespace(max_groups=10)
    backend.grid = lambda invocations: WgpuBackend.grid(backend, invocations)
    kernel = Kernel(None, None, (), "pool/pool_nc4hw4.wgsl", 32)
    assert tuning.kernel_grid(backend, 300, kernel) == (10, 1, 1)  # 10 groups of 32 >= 300
    assert tuning.kernel_grid(backend, 1000, kernel) == (10, 4, 1)  # 32 groups past 10 per row: 2-D
    assert tuning.kernel_grid(backend, 300, Kernel(None, None, (), "x", 64)) == (5, 1, 1)


# ------------------------------------------------------------------------------ on adapters
@needs_gpu
@pytest.mark.parametrize("adapter", ADAPTERS)
def test_storage_auto_follows_the_cache(adapter, caplog):
    context = get_context(adapter)
    model, x = conv_pool_model(), feeds((1, 6, 9, 9))
    want = wgnn.InferenceSession(model).run(None, x)[0]

    def storage_of(**options):
        session = wgnn.InferenceSession(model, config=wgnn.Config(providers=("wgpu",), adapter=adapter, **options))
        got = session.run(None, x)[0]
        np.testing.assert_allclose(got, want, rtol=1e-2 if options else 1e-5, atol=1e-2 if options else 1e-5)
        backend = session.session.backends[0]
        return backend.nc4hw4_storage, backend.placement("c").storage

    with caplog.at_level(logging.INFO, logger="wgnn.wgpu"):
        assert storage_of() == ("buffer", "buffer")  # no entry: the default
    assert "buffer, the default (no tuning entry" in caplog.text
    write_cache({tuning.adapter_key(context.info): {"storage": {"fp32": "texture"},
                                                     "storage_ms": {"fp32": {"buffer": 2.0, "texture": 1.0}}}})
    with caplog.at_level(logging.INFO, logger="wgnn.wgpu"):
        assert storage_of() == ("texture", "texture")
    assert "texture, tuned (buffer 2.000 ms, texture 1.000 ms" in caplog.text
    assert storage_of(precision="fp16") == ("texture", "texture")  # nothing measured for fp16: its default
    # Naming a storage overrides the tuned choice.
    session = wgnn.InferenceSession(model, config=wgnn.Config(providers=("wgpu",), adapter=adapter, storage="buffer"))
    session.run(None, x)
    assert session.session.backends[0].nc4hw4_storage == "buffer"
    # An entry of another driver is not this adapter's.
    stale = AdapterInfo(**{**context.info.as_dict(), "driver": context.info.driver + " (older)"})
    write_cache({tuning.adapter_key(stale): {"storage": {"fp32": "texture"}}})
    assert storage_of() == ("buffer", "buffer")


@needs_gpu
@pytest.mark.parametrize("adapter", ADAPTERS)
def test_tuned_workgroup_sizes_are_used(adapter, monkeypatch):
    context = get_context(adapter)
    model = conv_pool_model()
    config = wgnn.Config(providers=("wgpu",), adapter=adapter)
    plain = wgnn.InferenceSession(model, config=config)
    plain.run(None, feeds((1, 6, 9, 9)))
    used = {d.kernel.path for seg in plain.session.segments for _, ex in seg.steps for d in ex.dispatches}
    tuned = sorted(used & tuning.TUNABLE_KERNELS)
    assert "pool/pool_nc4hw4.wgsl" in tuned and "elementwise/binary_nc4hw4.wgsl" in tuned
    write_cache({tuning.adapter_key(context.info): {"workgroups": dict.fromkeys(tuned, 128)}})
    grids = []  # (kernel path, invocations, groups) of every dispatch prepared

    def recording_grid(backend, invocations, kernel):
        groups = tuning.kernel_grid(backend, invocations, kernel)
        grids.append((kernel.path, invocations, groups))
        return groups

    monkeypatch.setattr(backend_module, "kernel_grid", recording_grid)
    session = wgnn.InferenceSession(model, config=config)
    for shape in [(1, 6, 9, 9), (2, 6, 13, 7), (1, 6, 5, 30)]:  # invocations never a multiple of 128
        grids.clear()
        x = feeds(shape)
        want = wgnn.InferenceSession(model).run(None, x)[0]
        np.testing.assert_allclose(session.run(None, x)[0], want, rtol=1e-5, atol=1e-5)
        cache = pipeline_cache(session.session.backends[0].context)  # the device the session settled on
        dispatches = [d for seg in session.session.segments for _, ex in seg.steps for d in ex.dispatches]
        assert sorted(d.kernel.path for d in dispatches) == sorted(path for path, _, _ in grids)
        for d in dispatches:
            assert d.kernel.workgroup == (128 if d.kernel.path in tuned else 64), d.kernel.path
        for path, invocations, groups in grids:
            # Just enough workgroups of the kernel's size for its invocations.
            assert groups[0] * groups[1] == math.ceil(invocations / (128 if path in tuned else 64)), path
        assert any(invocations % 128 for path, invocations, _ in grids if path in tuned)
        if shape == (1, 6, 9, 9):
            compiled = cache.compiled  # the first plan compiles the tuned pipelines ...
        else:
            assert cache.compiled == compiled  # ... and resizes compile nothing
    for path in tuned:  # pipelines are keyed by their constants: the tuned size is its own pipeline
        assert any(("WG", 128) in key[2] for key, kernel in cache.pipelines.items() if kernel.path == path), path


@needs_gpu
def test_trial_sizes_override_the_cache():
    context = get_context(ADAPTERS[0])
    write_cache({tuning.adapter_key(context.info): {"workgroups": {"pool/pool_nc4hw4.wgsl": 128}}})
    assert tuning.tuned_workgroup(context, "pool/pool_nc4hw4.wgsl", 64) == 128
    assert tuning.tuned_workgroup(context, "matmul/matmul_tiled.wgsl", 64) == 64  # never tuned
    with tuning.trial_workgroups({"pool/pool_nc4hw4.wgsl": 32}):
        assert tuning.tuned_workgroup(context, "pool/pool_nc4hw4.wgsl", 64) == 32
        assert tuning.tuned_constants(context, "pool/pool_nc4hw4.wgsl", {"WG": 64}) == {"WG": 32}
    preferred = tuning.preferred_workgroup(context)
    with tuning.trial_workgroups({}):
        assert tuning.tuned_workgroup(context, "pool/pool_nc4hw4.wgsl", 64) == preferred
    assert tuning.tuned_constants(context, "pool/pool_nc4hw4.wgsl", {"WG": 16}) == {"WG": 16}  # chosen by the caller
    write_cache({tuning.adapter_key(context.info): {"workgroups": {"pool/pool_nc4hw4.wgsl": 1 << 20}}})
    assert tuning.tuned_workgroup(context, "pool/pool_nc4hw4.wgsl", 64) == preferred  # past the adapter's limit


def fake_context(name: str, adapter_type: str, most: int = 256) -> SimpleNamespace:
    limits = {"max-compute-invocations-per-workgroup": most, "max-compute-workgroup-size-x": most}
    return SimpleNamespace(info=AdapterInfo(index=0, name=name, backend="Vulkan", adapter_type=adapter_type,
                                            driver="", vendor=""), limits=limits)


def test_preferred_workgroup_is_one_simd_group_on_cpu_adapters():
    assert tuning.preferred_workgroup(fake_context("llvmpipe (LLVM 15.0.6, 256 bits)", "CPU")) == 8
    assert tuning.preferred_workgroup(fake_context("llvmpipe (LLVM 17.0.6, 512 bits)", "CPU")) == 16
    assert tuning.preferred_workgroup(fake_context("llvmpipe (LLVM 15.0.6, 128 bits)", "CPU")) == 4
    assert tuning.preferred_workgroup(fake_context("SwiftShader Device", "CPU")) == 8  # no width in the name
    assert tuning.preferred_workgroup(fake_context("llvmpipe (LLVM 15.0.6, 512 bits)", "CPU", most=8)) == 8
    assert tuning.preferred_workgroup(fake_context("NVIDIA H100", "DiscreteGPU")) == tuning.DEFAULT_WORKGROUP
    assert tuning.tuned_workgroup(fake_context("NVIDIA H100", "DiscreteGPU"), "pool/pool_nc4hw4.wgsl", 64) == 64
    cpu = fake_context("llvmpipe (LLVM 15.0.6, 256 bits)", "CPU")
    assert tuning.tuned_workgroup(cpu, "pool/pool_nc4hw4.wgsl", 64) == 8
    assert tuning.tuned_workgroup(cpu, "matmul/matmul_tiled.wgsl", 64) == 64  # not tunable: the caller's size


@needs_gpu
@pytest.mark.parametrize("adapter", ADAPTERS)
def test_untuned_sessions_run_tunable_kernels_at_the_preferred_size(adapter):
    context = get_context(adapter)
    session = wgnn.InferenceSession(conv_pool_model(), config=wgnn.Config(providers=("wgpu",), adapter=adapter))
    x = feeds((2, 6, 5, 7))
    np.testing.assert_allclose(session.run(None, x)[0], wgnn.InferenceSession(conv_pool_model()).run(None, x)[0],
                               rtol=1e-5, atol=1e-5)
    dispatches = [d for seg in session.session.segments for _, ex in seg.steps for d in ex.dispatches]
    tunable = [d for d in dispatches if d.kernel.path in tuning.TUNABLE_KERNELS]
    assert tunable and all(d.kernel.workgroup == tuning.preferred_workgroup(context) for d in tunable)


# -------------------------------------------------------------------------------- providers
def probe_record(gpu: dict, cpu: dict) -> dict:
    """A providers record as measure_providers stores it, with the fitted costs given."""
    probes = [{"kind": "steps", "size": 1, "steps": 1, "mflop": 0.0, "wgpu_ms": 1.0, "numpy_ms": 0.1}]
    return {"form": tuning.PROVIDERS_RECORD, "probes": probes, "costs": {"wgpu": gpu, "numpy": cpu}, "rounds": 9,
            "model": "test", "fallbacks": 0}


# wgpu: 1 ms per run, then 1 us per MFLOP; numpy: 0.1 ms per MFLOP. wgpu wins from about 10 MFLOP.
BIG_GPU = {"run_ms": 1.0, "step_ms": 0.0, "mflop_ms": 0.001}
ONE_CORE = {"run_ms": 0.0, "step_ms": 0.0, "mflop_ms": 0.1}


@needs_gpu
def test_auto_providers_choose_per_model(monkeypatch, caplog):
    """Where wgpu costs more per run but less per MFLOP, each resize takes the provider predicted
    faster for its work: numpy for a 9x9 map, wgpu for a 160x160 one (17 MFLOP), numpy again."""
    context = get_context(ADAPTERS[0])
    write_cache({tuning.adapter_key(context.info): {"providers": probe_record(BIG_GPU, ONE_CORE)}})

    def no_measuring(*args, **kwargs):
        raise AssertionError("the cache has an entry: nothing should be measured")

    monkeypatch.setattr(tuning, "measure_providers", no_measuring)
    model = conv_pool_model()
    caplog.set_level(logging.INFO, logger="wgnn")
    session = wgnn.InferenceSession(model, providers=["auto"])
    adapter_choice = {"providers": ["wgpu", "numpy"], "adapter": context.name, "adapter_index": context.index,
                      "costs": {"wgpu": BIG_GPU, "numpy": ONE_CORE}, "source": "cache",
                      "cache": str(tuning.cache_path())}
    assert session.providers_choice == adapter_choice  # not sized yet: symbolic dims
    assert f"providers=['auto'] on {context.name}: wgpu or numpy by each model's work" in caplog.text
    for size, providers in [(9, ["numpy"]), (160, ["wgpu", "numpy"]), (9, ["numpy"])]:
        x = feeds((1, 6, size, size))
        got = session.run(None, x)[0]
        choice = session.providers_choice
        mflop = 6 * 6 * 9 * 2 * size * size / 1e6  # the conv's; the pool's and the add's are smaller
        assert choice["providers"] == providers == session.get_providers()
        assert choice["model_steps"] == 3 and mflop < choice["model_mflop"] < 1.1 * mflop
        assert choice["predicted_ms"] == pytest.approx({"wgpu": 1.0 + choice["model_mflop"] * 0.001,
                                                        "numpy": choice["model_mflop"] * 0.1}, abs=1e-3)
        assert session.session.report()["providers_choice"] == choice
        np.testing.assert_allclose(got, wgnn.InferenceSession(model).run(None, x)[0], rtol=1e-4, atol=1e-4)
        if size == 160:
            logged = f"for the model (3 steps, {choice['model_mflop']:.1f} MFLOP): wgpu, numpy (predicted ms per run"
    assert logged in caplog.text
    assert wgnn.InferenceSession(model, providers=["numpy"]).providers_choice is None


@needs_gpu
def test_auto_providers_numpy_where_wgpu_never_wins(monkeypatch):
    """Costs all higher on wgpu: numpy alone for every model, no GPU backend made."""
    context = get_context(ADAPTERS[0])
    write_cache({tuning.adapter_key(context.info): {"providers": probe_record(
        {"run_ms": 1.0, "step_ms": 0.1, "mflop_ms": 0.2}, {"run_ms": 0.1, "step_ms": 0.01, "mflop_ms": 0.1})}})
    session = wgnn.InferenceSession(conv_pool_model(), providers=["auto"])
    assert [b.name for b in session.session.all_backends] == ["numpy"]
    session.run(None, feeds((1, 6, 160, 160)))
    assert session.get_providers() == ["numpy"] and "model_steps" not in session.providers_choice


def test_provider_costs_fit():
    """The fit recovers costs the probes were made from; a cost that noise would make negative is 0."""
    costs = {"wgpu": (0.3, 0.05, 0.002), "numpy": (0.02, 0.01, 0.02)}
    work = [(1, 0.0), (9, 0.005), (7, 8.0), (7, 72.0)]
    probes = [{"steps": steps, "mflop": mflop, **{f"{name}_ms": c[0] + steps * c[1] + mflop * c[2]
                                                  for name, c in costs.items()}} for steps, mflop in work]
    fitted = tuning.fit_provider_costs(probes)
    for name, (run, step, mflop) in costs.items():
        assert fitted[name] == pytest.approx({"run_ms": run, "step_ms": step, "mflop_ms": mflop}, abs=1e-6)
    for probe in probes:  # the run's cost shrinks below nothing: the fit drops it
        probe["numpy_ms"] -= 0.05
    assert fitted != tuning.fit_provider_costs(probes)
    assert tuning.fit_provider_costs(probes)["numpy"]["run_ms"] == 0.0
    assert tuning.crossover_mflop({"wgpu": BIG_GPU, "numpy": ONE_CORE}, 3) == pytest.approx(1.0 / 0.099)
    assert tuning.crossover_mflop({"wgpu": ONE_CORE, "numpy": BIG_GPU}, 3) is None


def test_old_providers_records_are_measured_again():
    """A record of the first form (one probe's medians, one provider for every model) is not used."""
    old = {"choice": ["numpy"], "wgpu_ms": 1.5, "numpy_ms": 2.5, "rounds": 9, "model": "test"}
    assert not tuning._valid_record(old)
    assert tuning._valid_record(probe_record(BIG_GPU, ONE_CORE))


def test_auto_providers_without_a_gpu(monkeypatch):
    from wgnn.backends.wgpu import context

    monkeypatch.setattr(context, "gpu_available", lambda: "no adapters here")
    config = wgnn.Config(providers="auto")
    assert config.providers == ("numpy",)
    assert config.providers_choice == {"providers": ["numpy"], "reason": "no GPU adapter: no adapters here"}


def test_auto_stands_alone():
    with pytest.raises(wgnn.WgnnError, match="stands alone"):
        wgnn.Config(providers=("auto", "numpy"))


@needs_gpu
def test_auto_providers_measure_once_and_store(monkeypatch):
    """One real measurement (structure only: which provider wins is the machine's business)."""
    monkeypatch.setattr(tuning, "measure_providers",
                        lambda adapter, measure=tuning.measure_providers: measure(adapter, rounds=2, warmup=0))
    config = wgnn.Config(providers=("auto",), adapter=ADAPTERS[0])
    choice = config.providers_choice
    assert choice["source"] == "measured" and list(config.providers) == choice["providers"]
    assert choice["providers"] in (["wgpu", "numpy"], ["numpy"])
    record = tuning.cache_entry(get_context(ADAPTERS[0]).info)["providers"]
    assert record["rounds"] == 2 and record["fallbacks"] == 0 and record["costs"] == choice["costs"]
    assert [(p["kind"], p["size"]) for p in record["probes"]] == list(tuning.PROBES)
    assert [p["steps"] for p in record["probes"]] == [1, 9, 7, 7] and record["probes"][1]["mflop"] < 0.1
    assert all(p["wgpu_ms"] > 0 and p["numpy_ms"] > 0 for p in record["probes"])
    assert all(cost >= 0 for costs in choice["costs"].values() for cost in costs.values())

    def no_measuring(*args, **kwargs):
        raise AssertionError("measured twice")

    monkeypatch.setattr(tuning, "measure_providers", no_measuring)
    again = wgnn.Config(providers="auto", adapter=ADAPTERS[0])
    assert again.providers == config.providers and again.providers_choice["source"] == "cache"
