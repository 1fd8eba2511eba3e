"""`wgnn shader` end to end in a subprocess (as users run it) on kernels the tests write, and the
Python API wgnn.shader.run, on every GPU adapter."""
from __future__ import annotations

import json
import re
import subprocess
import sys
import time

import numpy as np
import pytest
from helpers import gpu_adapters
from wgnn.engine.errors import AdapterError, InputError
from wgnn.tools import cli

import wgnn.shader

ADAPTERS = [a["index"] for a in gpu_adapters()]
pytestmark = pytest.mark.skipif(not ADAPTERS, reason="no GPU adapter (install mesa-vulkan-drivers)")

# y = relu(x), 4 elements per invocation; line 13 is the store.
RELU = """\
// y = max(x, 0), 4 elements per invocation; params: 0 = element count.
@group(0) @binding(0) var<storage, read_write> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> y: array<f32>;
@group(0) @binding(2) var<uniform> params: Params;
override WG: u32 = 64u;

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let base = linear_id(gid, nwg, WG) * 4u;
    for (var k = 0u; k < 4u; k++) {
        let i = base + k;
        if (i < pu(0u)) {
            y[i] = max(x[i], 0.0);
        }
    }
}
"""
STORE_LINE = 13

# out = EXPR with an element type, an override constant and params.
AFFINE = """\
@group(0) @binding(0) var<storage, read> a: array<{{T}}>;
@group(0) @binding(1) var<storage, read_write> out: array<{{T}}>;
@group(0) @binding(2) var<uniform> params: Params;
override WG: u32 = 64u;
override SCALE: f32 = 1.0;

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = linear_id(gid, nwg, WG);
    if (i < pu(0u)) {
        out[i] = {{EXPR}};
    }
}
"""

REFERENCES = """\
import numpy as np

def relu(x):
    return np.maximum(x, 0)

def affine(a):
    return a * np.float32(2.5) + np.float32(0.75)

def times(a, params):
    return a * params[1]

def double_relu(x):
    return np.maximum(x, 0) * 2
"""


def shader_main(capsys, monkeypatch, *args, cwd) -> tuple[int, str, str]:
    """The same command in this process (cheaper: the GPU device is already open)."""
    monkeypatch.chdir(cwd)
    status = cli.main(["shader", *map(str, args)])
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def shader_cli(*args, cwd) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "wgnn.tools.cli", "shader", *map(str, args)], capture_output=True,
                          text=True, cwd=cwd, timeout=120, check=False)


@pytest.fixture
def work(tmp_path):
    """relu.wgsl, affine.wgsl, ref.py and x.npy (1000 normal floats) in a temporary directory."""
    (tmp_path / "relu.wgsl").write_text(RELU)
    (tmp_path / "affine.wgsl").write_text(AFFINE)
    (tmp_path / "ref.py").write_text(REFERENCES)
    np.save(tmp_path / "x.npy", np.random.default_rng(0).standard_normal(1000).astype(np.float32))
    return tmp_path


def relu_args(adapter, *extra):
    return ["relu.wgsl", "--input", "x=x.npy", "--output", "y:1000", "--param", "0=y.size", "--per-invocation", 4,
            "--ref", "ref.py:relu", "--adapter", adapter, *extra]


# ---------------------------------------------------------------------------------- CLI
@pytest.mark.parametrize("adapter", ADAPTERS)
def test_correct_kernel_matches_reference(work, adapter):
    result = shader_cli(*relu_args(adapter, "--save", "out"), cwd=work)
    assert result.returncode == 0, result.stdout + result.stderr
    assert re.search(r"^y\s+0\s+0\s+0/1000\s+-\s+ok$", result.stdout, re.M), result.stdout
    assert "dispatch (4, 1, 1) workgroups of (64, 1, 1)" in result.stdout  # 1000 elements / 4 per invocation
    x = np.load(work / "x.npy")
    np.testing.assert_array_equal(np.load(work / "out" / "y.npy"), np.maximum(x, 0))


@pytest.mark.parametrize("adapter", ADAPTERS)
def test_wrong_kernel_is_reported(work, adapter):
    (work / "relu.wgsl").write_text(RELU.replace("max(x[i], 0.0)", "max(x[i], 0.1)"))
    result = shader_cli(*relu_args(adapter), cwd=work)
    assert result.returncode == 1, result.stdout + result.stderr
    x = np.load(work / "x.npy")
    wrong = ~np.isclose(np.maximum(x, 0.1), np.maximum(x, 0), rtol=1e-4, atol=1e-5)
    first = int(np.argmax(wrong))
    row = [line for line in result.stdout.splitlines() if line.startswith("y ")][-1]  # the comparison table
    assert f"{int(wrong.sum())}/1000" in row and row.endswith("FAIL"), row
    assert f"y[{first}] = 0.1, expected {max(float(x[first]), 0):.7g}" in row, row
    assert re.search(r"^y\s+0\.1\s", row), row  # max abs error


@pytest.mark.parametrize("adapter", ADAPTERS)
def test_compile_error_shows_file_line_and_caret(work, adapter):
    (work / "relu.wgsl").write_text(RELU.replace("max(x[i], 0.0);", "max(x[i], 0.0) +;"))
    result = shader_cli(*relu_args(adapter), cwd=work)
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    source = RELU.splitlines()[STORE_LINE - 1].replace("0.0);", "0.0) +;")
    column = source.index(";") + 1
    assert f"relu.wgsl:{STORE_LINE}:{column}: error" in result.stderr, result.stderr
    lines = result.stderr.splitlines()
    at = next(i for i, line in enumerate(lines) if line.endswith(source))
    gutter = lines[at].index(source)
    assert lines[at].split("|")[0].strip() == str(STORE_LINE)
    assert lines[at + 1].index("^") == gutter + column - 1, "\n".join(lines)


@pytest.mark.parametrize("adapter", ADAPTERS)
def test_compile_error_in_substituted_line(work, adapter, capsys, monkeypatch):
    status, _, err = shader_main(capsys, monkeypatch, "affine.wgsl", "--input", "a:8", "--output", "out:8", "--text",
                                 "T=f32", "--text", "EXPR=a[i] * 2u", "--adapter", adapter, cwd=work)
    assert status == 2, err
    assert "affine.wgsl:11:" in err, err
    assert "out[i] = {{EXPR}};" in err and "out[i] = a[i] * 2u;" in err, err


@pytest.mark.parametrize("adapter", ADAPTERS)
def test_time_and_json(work, adapter):
    result = shader_cli(*relu_args(adapter, "--time", "--repeat", 5), cwd=work)
    assert result.returncode == 0, result.stderr
    m = re.search(r"time per dispatch: median ([\d.]+) us, p90 ([\d.]+) us, min ([\d.]+) us \(5 dispatches, "
                  r"(GPU timestamps|wall clock, submit \+ wait)\)", result.stdout)
    assert m, result.stdout
    median, p90, low = map(float, m.groups()[:3])
    assert 0 < low <= median <= p90

    result = shader_cli(*relu_args(adapter, "--time", "--repeat", 3, "--json"), cwd=work)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["adapter"]["index"] == adapter
    assert report["comparison"]["ok"] and report["comparison"]["outputs"][0]["max_abs_error"] == 0
    assert report["outputs"][0]["name"] == "y" and report["outputs"][0]["shape"] == [1000]
    assert report["timing"]["repeat"] == 3 and len(report["timing"]["samples_us"]) == 3
    assert report["timing"]["method"] in ("timestamp-query", "wall")
    assert [b["name"] for b in report["bindings"]] == ["x", "y", "params"]
    assert report["params"][0] == 1000 and report["dispatch"] == [4, 1, 1]


@pytest.mark.parametrize("adapter", ADAPTERS)
def test_watch_reruns_on_change(work, adapter):
    command = [sys.executable, "-m", "wgnn.tools.cli", "shader",
               *map(str, relu_args(adapter, "--time", "--repeat", 3, "--watch", "--watch-runs", 2, "--json"))]
    process = subprocess.Popen(command, cwd=work, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        first = json.loads(process.stdout.readline())
        assert first["run"] == 1 and first["comparison"]["ok"], first
        time.sleep(0.05)
        (work / "relu.wgsl").write_text(RELU.replace("max(x[i], 0.0)", "max(x[i], 0.0) * 2.0"))
        out, err = process.communicate(timeout=60)
    finally:
        process.kill()
    second = json.loads(out.strip().splitlines()[-1])
    assert process.returncode == 1, err
    assert second["run"] == 2 and not second["comparison"]["ok"]
    before, after = second["change"]["max_abs_error"]["y"]
    assert before == 0 and after > 0
    assert len(second["change"]["median_us"]) == 2 and min(second["change"]["median_us"]) > 0


@pytest.mark.parametrize("adapter", ADAPTERS)
def test_watch_text_output_and_compile_error(work, adapter):
    process = subprocess.Popen([sys.executable, "-m", "wgnn.tools.cli", "shader",
                                *map(str, relu_args(adapter, "--watch", "--watch-runs", 3))],
                               cwd=work, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        for text in (RELU.replace("0.0);", "0.0) +;"), RELU.replace("max(x[i], 0.0)", "max(x[i], 0.5)")):
            while not process.stdout.readline().startswith("watching "):
                pass
            time.sleep(0.05)
            (work / "relu.wgsl").write_text(text)
        out, err = process.communicate(timeout=60)
    finally:
        process.kill()
    assert process.returncode == 1, out + err
    assert f"relu.wgsl:{STORE_LINE}:" in err  # run 2 did not compile, and watching went on
    assert "--- run 3 ---" in out and "change against the previous run:" in out
    assert re.search(r"y max abs error: 0 -> 0\.5 \(\+0\.5", out), out


@pytest.mark.parametrize("adapter", ADAPTERS)
def test_params_constants_and_text(work, adapter, capsys, monkeypatch):
    result = shader_cli("affine.wgsl", "--input", "a:300", "--output", "out:300", "--text", "T=f32", "--text",
                        "EXPR=a[i] * SCALE + pf(1u)", "--const", "SCALE=2.5", "--param", "0=out.size", "--param",
                        "1=0.75", "--ref", "ref.py:affine", "--adapter", adapter, "--json", cwd=work)
    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads(result.stdout)
    assert report["comparison"]["ok"] and report["params"][:2] == [300, 0.75]
    assert report["inputs"][0]["source"] == "random float32"

    # integer tensors, --params, and a reference that reads the params slots
    result = shader_cli("affine.wgsl", "--input", "a:77:int32", "--output", "out:77:int32", "--text", "T=i32",
                        "--text", "EXPR=a[i] * p(1u)", "--params", "out.size,-3", "--ref", "ref.py:times",
                        "--adapter", adapter, cwd=work)
    assert result.returncode == 0, result.stdout + result.stderr
    assert re.search(r"^out\s+0\s+0\s+0/77\s+-\s+ok$", result.stdout, re.M), result.stdout

    # a constant the kernel does not declare, and a missing text parameter: one-line errors
    status, _, err = shader_main(capsys, monkeypatch, "affine.wgsl", "--input", "a:8", "--output", "out:8", "--text",
                                 "T=f32", "--text", "EXPR=a[i]", "--const", "SCALING=2", "--adapter", adapter, cwd=work)
    assert status == 2 and "no override 'SCALING'" in err and len(err.splitlines()) == 1, err
    status, _, err = shader_main(capsys, monkeypatch, "affine.wgsl", "--input", "a:8", "--output", "out:8", "--text",
                                 "T=f32", "--adapter", adapter, cwd=work)
    assert status == 2 and "{{EXPR}}" in err and len(err.splitlines()) == 1, err


@pytest.mark.parametrize("prelude", ["buffer", "texture"])
@pytest.mark.parametrize("adapter", ADAPTERS)
def test_nc4hw4_input_and_output(work, adapter, prelude):
    np.save(work / "fm.npy", np.random.default_rng(1).standard_normal((2, 5, 3, 7)).astype(np.float32))
    result = shader_cli("elementwise/unary_nc4hw4.wgsl", "--nc4hw4", "x,y", "--prelude", prelude, "--text",
                        "EXPR=max(v, 0.0) * 2.0", "--input", "x=fm.npy", "--output", "y:2,5,3,7", "--param",
                        "0=y.blocks", "--ref", "ref.py:double_relu", "--adapter", adapter, "--json", cwd=work)
    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads(result.stdout)
    assert report["comparison"]["ok"], report["comparison"]
    kinds = {b["tensor"]: b["kind"] for b in report["bindings"]}
    assert kinds == ({"x": "texture", "y": "storage_texture", "params": "uniform"} if prelude == "texture" else
                     {"x": "storage", "y": "storage", "params": "uniform"})
    # N, C4, H, W, C of x at slots 4..8 and of y at 9..13 (the kernel's convention)
    assert report["params"][:14] == [2 * 2 * 3 * 7, 0, 0, 0, 2, 2, 3, 7, 5, 2, 2, 3, 7, 5]
    assert report["dispatch"] == [2, 1, 1]  # 84 vec4 blocks


# Bindings 0-4 come from the fragment, so z's accessor takes binding 5.
FRAGMENT_BINDINGS = """\
// include: norm/group_norm_operands.wgsl
{{DECL_Z}}
override WG: u32 = 64u;

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = i32(linear_id(gid, nwg, WG));
    if (i >= p(0u)) {
        return;
    }
    store_z(0, 0, 0, i, vec4<f32>(x[i], scale[i], bias[i], 1.0));
    y[i] = x[i] + scale[i] + bias[i];
}
"""


@pytest.mark.parametrize("prelude", ["buffer", "texture"])
@pytest.mark.parametrize("adapter", ADAPTERS)
def test_nc4hw4_accessor_takes_a_binding_its_fragments_leave_free(adapter, prelude):
    x, scale, bias = (np.arange(6, dtype=np.float32) * k for k in (1, 10, 100))
    result = wgnn.shader.run(FRAGMENT_BINDINGS, inputs={"x": x, "scale": scale, "bias": bias},
                             outputs={"y": 6, "z": (1, 4, 1, 6)}, nc4hw4=["z"], params=[6], prelude=prelude,
                             adapter=adapter)
    assert [(b.index, b.tensor) for b in result.bindings] == [
        (0, "x"), (1, "scale"), (2, "bias"), (3, "y"), (4, "params"), (5, "z")]
    np.testing.assert_array_equal(result.outputs["y"], x + scale + bias)
    np.testing.assert_array_equal(result.outputs["z"][0, :, 0], np.stack([x, scale, bias, np.ones(6, np.float32)]))


@pytest.mark.parametrize("adapter", ADAPTERS)
def test_unbound_binding_is_a_one_line_error(work, adapter, capsys, monkeypatch):
    status, _, err = shader_main(capsys, monkeypatch, "relu.wgsl", "--input", "x=x.npy", "--adapter", adapter, cwd=work)
    assert status == 2 and len(err.splitlines()) == 1, err
    assert "binding 1 (y) has no data" in err


# ---------------------------------------------------------------------------------- Python API
@pytest.mark.parametrize("adapter", ADAPTERS)
def test_api_run(adapter):
    x = np.linspace(-2, 2, 1001, dtype=np.float32)
    result = wgnn.shader.run(RELU, inputs={"x": x}, outputs={"y": ((1001,), "float32")}, params=["y.size"],
                             per_invocation=4, adapter=adapter, reference=lambda x: np.maximum(x, 0), time=True,
                             repeat=4)
    assert result.ok and result.errors[0].max_abs_error == 0 and result.errors[0].mismatches == 0
    np.testing.assert_array_equal(result.outputs["y"], np.maximum(x, 0))
    assert len(result.timing.samples_us) == 4 and result.timing.median_us > 0
    assert "reference <lambda>" in str(result)

    wrong = wgnn.shader.run(RELU.replace("0.0)", "-1.0)"), inputs={"x": x}, outputs={"y": 1001}, params=[1001],
                            per_invocation=4, adapter=adapter, reference=lambda x: np.maximum(x, 0))
    assert not wrong.ok and wrong.errors[0].first_mismatch == (0,) and wrong.errors[0].expected == 0.0
    assert wrong.errors[0].got == -1.0 and wrong.errors[0].max_abs_error == 1.0


@pytest.mark.parametrize("adapter", ADAPTERS)
def test_api_compile_error_and_inputs(adapter):
    with pytest.raises(wgnn.shader.ShaderCompileError) as caught:
        wgnn.shader.run(RELU.replace("max(x[i], 0.0)", "max(x[i], 0u)"), inputs={"x": (8,)}, outputs={"y": (8,)},
                        adapter=adapter)
    assert caught.value.line == STORE_LINE and "<source>:13:" in str(caught.value)
    with pytest.raises(InputError, match="pass floating-point data"):
        wgnn.shader.run(RELU, inputs={"x": np.arange(8)}, outputs={"y": (8,)}, adapter=adapter)
    # random inputs are seeded
    runs = [wgnn.shader.run(RELU, inputs={"x": "64"}, outputs={"y": "64"}, params=[64], adapter=adapter, seed=s)
            for s in (3, 3, 4)]
    assert np.array_equal(runs[0].inputs["x"], runs[1].inputs["x"])
    assert not np.array_equal(runs[0].inputs["x"], runs[2].inputs["x"])
    np.testing.assert_array_equal(runs[0].outputs["y"], np.maximum(runs[0].inputs["x"], 0))


@pytest.mark.parametrize("adapter", ADAPTERS)
def test_api_f16(adapter):
    features = next(a["features"] for a in gpu_adapters() if a["index"] == adapter)
    source = AFFINE.replace("{{T}}", "{{FLOAT}}")
    a = np.random.default_rng(2).standard_normal(257).astype(np.float32)
    options = {"inputs": {"a": a}, "outputs": {"out": 257}, "params": [257], "text": {"EXPR": "a[i] * 3.0"},
               "precision": "f16", "adapter": adapter, "reference": lambda a: a * 3}
    if "shader-f16" not in features:
        with pytest.raises(AdapterError, match="shader-f16"):
            wgnn.shader.run(source, **options)
        return
    result = wgnn.shader.run(source, **options)
    assert [b.wgsl_type for b in result.bindings[:2]] == ["array<f16>", "array<f16>"]
    assert result.ok and 0 < result.errors[0].max_abs_error < 0.02  # f16 rounding, within the f16 tolerance
    assert np.array_equal(result.inputs["a"], a.astype(np.float16).astype(np.float32))  # what the kernel saw


@pytest.mark.parametrize("adapter", ADAPTERS)
def test_acc_is_predefined_as_f32_and_can_follow_float(adapter):
    """{{ACC}} (the conv kernels' sums) is f32 without --text, even in f16; ACC={{FLOAT}} makes it f16."""
    features = next(a["features"] for a in gpu_adapters() if a["index"] == adapter)
    source = AFFINE.replace("{{T}}", "{{ACC}}")
    a = np.arange(10, dtype=np.float32)
    options = {"inputs": {"a": a}, "outputs": {"out": 10}, "params": [10], "adapter": adapter,
               "reference": lambda a: a * 3}
    result = wgnn.shader.run(source, text={"EXPR": "a[i] * 3.0"}, **options)
    assert result.ok and [b.wgsl_type for b in result.bindings[:2]] == ["array<f32>", "array<f32>"]
    if "shader-f16" in features:
        result = wgnn.shader.run(source, text={"EXPR": "a[i] * 3.0", "ACC": "{{FLOAT}}"}, precision="f16", **options)
        assert result.ok and [b.wgsl_type for b in result.bindings[:2]] == ["array<f16>", "array<f16>"]


@pytest.mark.parametrize("adapter", ADAPTERS)
def test_api_in_place_output_and_override_dispatch(adapter):
    # elements per invocation from an override (so the dispatch follows the file), output updated in place
    source = RELU.replace("override WG: u32 = 64u;", "override WG: u32 = 64u;\noverride PER: u32 = 8u;") \
        .replace("* 4u;", "* PER;").replace("k < 4u", "k < PER").replace("y[i] = max(x[i], 0.0);", "y[i] += x[i];")
    x = np.arange(1000, dtype=np.float32)
    y = np.full(1000, 0.5, np.float32)
    result = wgnn.shader.run(source, inputs={"x": x}, outputs={"y": y}, params=[1000], per_invocation="PER",
                             adapter=adapter, reference=lambda x, y: x + y)
    assert result.ok and result.dispatch == (2, 1, 1)  # 1000 / 8 per invocation / 64 per group
    np.testing.assert_array_equal(result.outputs["y"], x + 0.5)
    again = wgnn.shader.run(source, inputs={"x": x}, outputs={"y": y}, params=[1000], per_invocation="PER",
                            constants={"PER": 2}, adapter=adapter, reference=lambda x, y: x + y)
    assert again.ok and again.dispatch == (8, 1, 1)


@pytest.mark.parametrize("adapter", ADAPTERS)
def test_api_wall_time_without_timestamp_queries(adapter, monkeypatch):
    from wgnn.backends.wgpu.context import get_context

    context = get_context(adapter)
    monkeypatch.setattr(context, "features", context.features - {"timestamp-query"})
    result = wgnn.shader.run(RELU, inputs={"x": (256,)}, outputs={"y": (256,)}, params=[256], adapter=adapter,
                             time=True, repeat=3)
    assert result.timing.method == "wall" and len(result.timing.samples_us) == 3 and result.timing.min_us > 0
    assert "wall clock, submit + wait" in str(result)
