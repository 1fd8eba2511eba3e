"""`wgnn tune`: --quick end to end in a subprocess with its own cache folder (structure only: which
storage, size or provider wins is the machine's business, never asserted), --show, --clear, and
the argument checks."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest
from helpers import gpu_adapters
from wgnn.backends.wgpu.tuning import choose_providers, describe_provider_costs, fit_provider_costs
from wgnn.tools.tune import MARGIN

needs_gpu = pytest.mark.skipif(not gpu_adapters(), reason="no GPU adapter (install mesa-vulkan-drivers)")


def tune(cache, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "WGNN_CACHE_DIR": str(cache)}
    return subprocess.run([sys.executable, "-m", "wgnn.tools.cli", "tune", *args], capture_output=True, text=True,
                          timeout=300, env=env, check=False)


@needs_gpu
def test_quick_tune_show_and_clear(tmp_path):
    adapter = gpu_adapters()[0]
    done = tune(tmp_path, "--quick", "--adapter", "0", "--json")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    (entry,) = result["adapters"]
    assert entry["index"] == 0 and entry["quick"] is True and entry["rounds"] == 3
    assert entry["adapter"] == f"{adapter['name']} ({adapter['backend']})"
    assert entry["method"] in ("timestamp-query", "wall")
    assert list(entry["storage"]) == ["fp32"]  # --quick measures fp32 only
    storage = entry["storage"]["fp32"]
    assert storage["choice"] in ("buffer", "texture")
    assert len(storage["cases"]) == 4
    for ms in storage["cases"].values():
        assert set(ms) == {"buffer", "texture"} and all(v > 0 for v in ms.values())
    for name in ("buffer", "texture"):
        assert storage["total_ms"][name] == pytest.approx(sum(ms[name] for ms in storage["cases"].values()), abs=1e-3)
    # The default (buffer in fp32) unless texture is MARGIN faster.
    totals = storage["total_ms"]
    assert storage["default"] == "buffer"
    assert storage["choice"] == ("texture" if totals["texture"] < totals["buffer"] * (1 - MARGIN) else "buffer")
    assert entry["workgroups"], "no tunable kernel measured"
    # --quick tries the adapter's preferred size (one SIMD group on CPU adapters: 8 lanes for
    # lavapipe's "256 bits") against 64; the preferred one stays unless 64 is MARGIN faster.
    bits = re.search(r"(\d+) bits", adapter["name"])
    preferred = (int(bits.group(1)) // 32 if bits else 8) if adapter["adapter_type"] == "CPU" else 64
    for row in entry["workgroups"].values():
        assert row["preferred"] == preferred and row["kernels"]
        assert set(row["ms"]) == {str(preferred), "64"} and row["best"] in (preferred, 64)
        if preferred != 64:
            assert row["best"] == (64 if row["ms"]["64"] < row["ms"][str(preferred)] * (1 - MARGIN) else preferred)
    # Kernel variants: every variant of each family ran its own kernels; the default (by adapter
    # type) stays unless another is MARGIN faster.
    variants = entry["variants"]
    assert set(variants) == {"conv", "matmul", "attention", "rows"}
    cpu = adapter["adapter_type"] == "CPU"
    subgroups = "subgroup" in adapter["features"]
    assert variants["conv"]["default"] == ("registers" if cpu else "tiled")
    # The conv probe: the tiled path forced, against the cost model's choice without it.
    assert variants["conv"]["kernels"]["tiled"] == ["conv/conv_tiled_nc4hw4.wgsl"]
    assert "conv/conv_tiled_nc4hw4.wgsl" not in variants["conv"]["kernels"]["registers"]
    assert variants["attention"]["default"] == ("rows" if cpu else "tiled")
    assert variants["rows"]["default"] == ("invocation" if cpu else "workgroup")
    assert variants["matmul"]["default"] == (("subgroup" if subgroups else "blocked") if cpu else "tiled")
    assert set(variants["matmul"]["ms"]) == {"blocked", "tiled"} | ({"subgroup"} if subgroups else set())
    assert variants["attention"]["kernels"] == {"rows": ["matmul/attention.wgsl"],
                                                "tiled": ["matmul/attention_tiled.wgsl"]}
    assert variants["rows"]["kernels"]["workgroup"] == ["norm/layer_norm_workgroup.wgsl",
                                                        "softmax/softmax_workgroup.wgsl"]
    for row in variants.values():
        ms, default = row["ms"], row["default"]
        best = min(ms, key=ms.get)
        assert row["choice"] == (best if ms[best] < ms[default] * (1 - MARGIN) else default)
    probe = entry["providers"]
    assert [p["steps"] for p in probe["probes"]] == [1, 9, 7, 7]
    assert probe["costs"] == fit_provider_costs(probe["probes"])
    assert all(p["wgpu_ms"] > 0 and p["numpy_ms"] > 0 for p in probe["probes"])
    costs = probe["costs"]
    auto = (["wgpu", "numpy"] if any(costs["wgpu"][k] < costs["numpy"][k] for k in ("step_ms", "mflop_ms"))
            or costs["wgpu"]["run_ms"] + costs["wgpu"]["step_ms"] < costs["numpy"]["run_ms"] + costs["numpy"]["step_ms"]
            else ["numpy"])

    cache = tmp_path / "tuning.json"
    assert entry["cache"] == str(cache) and cache.exists()
    shown = tune(tmp_path, "--show", "--json")
    assert shown.returncode == 0, shown.stderr
    document = json.loads(shown.stdout)
    (key,) = document["entries"]
    assert key == f"{adapter['name']} | {adapter['backend']} | {adapter['driver']} | wgnn {wgnn_version()}"
    stored = document["entries"][key]
    assert stored["storage"] == {"fp32": storage["choice"]} and stored["providers"]["costs"] == probe["costs"]
    assert stored["workgroups"] == {k: row["best"] for row in entry["workgroups"].values() for k in row["kernels"]}
    assert stored["variants"] == {family: row["choice"] for family, row in variants.items()}

    table = tune(tmp_path, "--show")
    assert table.returncode == 0 and str(cache) in table.stdout and adapter["driver"] in table.stdout
    assert f"fp32 {storage['choice']}" in table.stdout
    common = max(set(stored["workgroups"].values()), key=list(stored["workgroups"].values()).count)
    assert f"all {common}" in table.stdout
    assert f"attention {variants['attention']['choice']}" in table.stdout
    assert describe_provider_costs(probe) in table.stdout

    # storage="auto" and providers=["auto"] in a new process follow what was stored.
    check = subprocess.run([sys.executable, "-c", (
        "import wgnn, json\n"
        "from wgnn.backends.wgpu.tuning import probe_model\n"
        "model, feeds = probe_model()\n"
        "s = wgnn.InferenceSession(model, config=wgnn.Config(providers=('wgpu',), adapter=0))\n"
        "a = wgnn.InferenceSession(model, providers=['auto'])\n"
        "print(json.dumps([s.session.backends[0].nc4hw4_storage, a.get_providers(), a.providers_choice['source']]))")],
        capture_output=True, text=True, timeout=300, env={**os.environ, "WGNN_CACHE_DIR": str(tmp_path)}, check=False)
    assert check.returncode == 0, check.stderr
    cnn = probe["probes"][2]  # the probe CNN at 32x32, the model the new process runs
    expected = choose_providers({"costs": costs}, cnn["steps"], cnn["mflop"])["providers"] if "wgpu" in auto else auto
    assert json.loads(check.stdout) == [storage["choice"], expected, "cache"]

    cleared = tune(tmp_path, "--clear", "--adapter", "0")
    assert cleared.returncode == 0 and "removed 1 entry" in cleared.stdout, cleared.stderr
    assert json.loads(tune(tmp_path, "--show", "--json").stdout)["entries"] == {}
    cleared = tune(tmp_path, "--clear")
    assert cleared.returncode == 0 and "removed 0 entries" in cleared.stdout
    assert not cache.exists()
    assert "no tuning cache entries" in tune(tmp_path, "--show").stdout


def wgnn_version() -> str:
    import wgnn

    return wgnn.__version__


@pytest.mark.parametrize(("args", "message"), [
    (["--show", "--clear"], "--show and --clear do not go together"),
    (["--runs", "0"], "--runs must be at least 1"),
    (["--show", "--quick"], "--quick and --runs go with measuring, not with --show or --clear"),
])
def test_argument_errors(tmp_path, args, message):
    done = tune(tmp_path, *args)
    assert done.returncode == 2
    assert done.stderr.strip() == f"wgnn: error: {message}", done.stderr
    assert not (tmp_path / "tuning.json").exists()


@needs_gpu
def test_variables_forcing_variants_are_refused(tmp_path, monkeypatch):
    """A variable forcing a kernel variant would make every candidate the same kernel."""
    monkeypatch.setenv("WGNN_ROW_KERNEL", "workgroup")
    done = tune(tmp_path, "--quick", "--adapter", "0")
    assert done.returncode != 0
    assert "WGNN_ROW_KERNEL force kernel variants: unset it to measure the variants" in done.stderr, done.stderr
