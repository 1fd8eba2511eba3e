"""The wgnn command line, end to end in a subprocess (as users run it), plus a few in-process
checks of exit codes that need a patched reference."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper
from wgnn.models.zoo import build
from wgnn.tools import cli

import wgnn


def wgnn_cli(*args, cwd=None, script: bool = False) -> subprocess.CompletedProcess:
    command = ["wgnn"] if script else [sys.executable, "-m", "wgnn.tools.cli"]
    return subprocess.run([*command, *map(str, args)], capture_output=True, text=True, cwd=cwd, timeout=300,
                          check=False)


def assert_one_line_error(result: subprocess.CompletedProcess, *fragments: str) -> None:
    assert result.returncode == 2, result.stdout + result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("wgnn: error: "), result.stderr
    assert "Traceback" not in result.stderr
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """resnet.onnx, its conversion resnet.wgnn, and bert.onnx in a temporary directory."""
    root = tmp_path_factory.mktemp("cli")
    onnx.save(build("resnet"), root / "resnet.onnx")
    onnx.save(build("bert"), root / "bert.onnx")
    wgnn.convert(root / "resnet.onnx", root / "resnet.wgnn")
    return root


# -------------------------------------------------------------------------------- version
def test_version():
    result = wgnn_cli("--version")
    assert result.returncode == 0, result.stderr
    assert f"wgnn {wgnn.__version__}" in result.stdout
    assert "wgpu" in result.stdout
    found = wgnn.adapters()
    if found:  # the adapter a session would pick is named
        assert "adapter " in result.stdout and any(a["name"] in result.stdout for a in found)
    else:
        assert "no GPU adapter" in result.stdout


@pytest.mark.skipif(shutil.which("wgnn") is None, reason="the wgnn console script is not installed (pip install -e .)")
def test_console_script():
    result = wgnn_cli("--version", script=True)
    assert result.returncode == 0 and f"wgnn {wgnn.__version__}" in result.stdout


def test_no_command_prints_help():
    result = wgnn_cli()
    assert result.returncode == 2 and "convert" in result.stdout and "info" in result.stdout


# -------------------------------------------------------------------------------- convert
def test_convert_prints_a_summary(files, tmp_path):
    out = tmp_path / "model.wgnn"
    result = wgnn_cli("convert", files / "resnet.onnx", out)
    assert result.returncode == 0, result.stderr
    onnx_nodes = len(build("resnet").graph.node)
    converted = wgnn.load_model(out)
    assert f"{onnx_nodes} ONNX -> {len(converted.graph.nodes)} wgnn" in result.stdout
    params = sum(v.size for v in converted.graph.initializers.values())
    assert f"{params:,}" in result.stdout and str(out) in result.stdout
    assert [p.name for p in tmp_path.iterdir()] == ["model.wgnn"]


def test_convert_json(files, tmp_path):
    out = tmp_path / "bert.wgnn"
    result = wgnn_cli("convert", files / "bert.onnx", out, "--json")
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    assert summary["onnx_nodes"] == len(build("bert").graph.node)
    assert summary["wgnn_nodes"] == len(wgnn.load_model(out).graph.nodes)
    assert summary["parameters"] > 0 and summary["file_bytes"] == out.stat().st_size


def test_convert_refuses_a_wgnn_input(files, tmp_path):
    assert_one_line_error(wgnn_cli("convert", files / "resnet.wgnn", tmp_path / "x.wgnn"), "already a .wgnn")


def test_convert_unsupported_ops_lists_them(tmp_path):
    vi = helper.make_tensor_value_info
    nodes = [helper.make_node("WgnnNoSuchOp", ["x"], ["a"]), helper.make_node("WgnnNoSuchOp", ["a"], ["y"])]
    graph = helper.make_graph(nodes, "bad", [vi("x", TensorProto.FLOAT, [1])], [vi("y", TensorProto.FLOAT, [1])])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), tmp_path / "bad.onnx")
    result = wgnn_cli("convert", tmp_path / "bad.onnx", tmp_path / "bad.wgnn")
    assert_one_line_error(result, "WgnnNoSuchOp (2 nodes)")
    assert not (tmp_path / "bad.wgnn").exists()


# ----------------------------------------------------------------------------------- info
def test_info_json_defaults_symbolic_dims_to_one(files):
    result = wgnn_cli("info", files / "resnet.wgnn", "--json")
    assert result.returncode == 0, result.stderr
    info = json.loads(result.stdout)
    model = wgnn.load_model(files / "resnet.wgnn")
    assert info["format"] == "wgnn"
    assert info["inputs"] == [{"name": "input", "dtype": "float32", "shape": ["N", 3, 32, 32]}]
    assert info["input_shapes"] == {"input": [1, 3, 32, 32]}
    assert info["output_shapes"] == {"logits": [1, 10]}
    assert sum(info["ops"].values()) == info["nodes"] == len(model.graph.nodes)
    assert info["parameters"]["count"] == sum(v.size for v in model.graph.initializers.values())
    assert info["parameters"]["bytes"] == sum(v.nbytes for v in model.graph.initializers.values())
    assert info["flops"] > 0
    memory = info["memory"]["numpy"]
    assert 0 < memory["planned_peak_bytes"] <= memory["naive_bytes"]

    batch4 = json.loads(wgnn_cli("info", files / "resnet.wgnn", "--json", "--shape", "input=4,3,32,32").stdout)
    assert batch4["output_shapes"] == {"logits": [4, 10]}
    assert batch4["flops"] == 4 * info["flops"]  # every op's work scales with the batch
    assert batch4["memory"]["numpy"]["planned_peak_bytes"] > memory["planned_peak_bytes"]


def test_info_shares_symbols_between_inputs(files):
    result = wgnn_cli("info", files / "bert.onnx", "--json", "--shape", "input_ids=2,16")
    assert result.returncode == 0, result.stderr
    info = json.loads(result.stdout)
    assert info["format"] == "onnx"
    assert info["input_shapes"] == {"input_ids": [2, 16], "attention_mask": [2, 16]}
    assert info["output_shapes"] == {"last_hidden_state": [2, 16, 32]}


def test_info_text(files):
    result = wgnn_cli("info", files / "resnet.onnx")
    assert result.returncode == 0, result.stderr
    for fragment in ("inputs:", "outputs:", "input", "logits", "ops (", "parameters:", "FLOPs", "planned peak"):
        assert fragment in result.stdout


def test_info_bad_shape_option(files):
    assert_one_line_error(wgnn_cli("info", files / "resnet.wgnn", "--shape", "input=1,a"), "--shape")
    assert_one_line_error(wgnn_cli("info", files / "resnet.wgnn", "--shape", "nope=1"), "'nope'")
    assert_one_line_error(wgnn_cli("info", files / "resnet.wgnn", "--shape", "input=1,3,30,30,1"), "rank")


# ------------------------------------------------------------------------------------ run
def test_run_compare_with_onnxruntime(files):
    result = wgnn_cli("run", files / "bert.onnx", "--compare", "onnxruntime", "--json", "--shape",
                      "input_ids=2,7")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert [i["name"] for i in report["inputs"]] == ["input_ids", "attention_mask"]
    assert all(i["shape"] == [2, 7] and i["dtype"] == "int64" and i["source"] == "random" for i in report["inputs"])
    (out,) = report["outputs"]
    assert out["name"] == "last_hidden_state" and out["shape"] == [2, 7, 32] and out["dtype"] == "float32"
    assert out["min"] <= out["mean"] <= out["max"]
    compare = report["compare"]
    assert compare["ok"] and compare["tolerance"] == 1e-4
    assert compare["outputs"][0]["max_rel_error"] <= 1e-4


def test_run_numpy_threads(files):
    """--numpy-threads reaches the session (the one-thread loops give onnxruntime's numbers)."""
    result = wgnn_cli("run", files / "resnet.onnx", "--numpy-threads", "1", "--compare", "onnxruntime", "--json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["compare"]["ok"]


def test_run_text_output(files):
    result = wgnn_cli("run", files / "resnet.onnx", "--compare", "onnxruntime")
    assert result.returncode == 0, result.stderr
    assert "logits" in result.stdout and "[1, 10]" in result.stdout and "max rel error" in result.stdout
    assert "ok" in result.stdout


def test_run_with_npy_input(files, tmp_path):
    x = np.random.default_rng(5).standard_normal((2, 3, 32, 32)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    result = wgnn_cli("run", files / "resnet.wgnn", "--input", f"input={tmp_path / 'x.npy'}", "--json")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["inputs"][0]["source"].endswith("x.npy") and report["inputs"][0]["shape"] == [2, 3, 32, 32]
    expected = wgnn.InferenceSession(files / "resnet.wgnn").run(None, {"input": x})[0]
    (out,) = report["outputs"]
    assert out["shape"] == [2, 10]
    assert out["max"] == pytest.approx(float(expected.max()), rel=1e-6)
    assert out["mean"] == pytest.approx(float(expected.mean()), rel=1e-5, abs=1e-6)


def test_run_compare_needs_onnx(files):
    assert_one_line_error(wgnn_cli("run", files / "resnet.wgnn", "--compare", "onnxruntime"), "ONNX", "resnet.wgnn")


def test_run_errors(files, tmp_path):
    missing = tmp_path / "missing.onnx"
    assert_one_line_error(wgnn_cli("run", missing), "not found", str(missing))
    assert_one_line_error(wgnn_cli("info", missing), "not found", str(missing))
    assert_one_line_error(wgnn_cli("run", files / "resnet.wgnn", "--input", "input=nothere.npy"), "nothere.npy")
    assert_one_line_error(wgnn_cli("run", files / "resnet.wgnn", "--input", f"x={tmp_path}/a.npy"), "'x'")
    np.save(tmp_path / "wrong.npy", np.zeros((1, 3, 32, 32), np.float64))
    assert_one_line_error(wgnn_cli("run", files / "resnet.wgnn", "--input", f"input={tmp_path / 'wrong.npy'}"),
                          "float32", "float64")
    (tmp_path / "text.onnx").write_text("not a model\n")
    assert_one_line_error(wgnn_cli("run", tmp_path / "text.onnx"), "text.onnx")
    assert_one_line_error(wgnn_cli("run", files / "resnet.wgnn", "--numpy-threads", "0"), "numpy_threads", "got 0")


def test_run_exits_1_when_the_comparison_fails(files, monkeypatch, capsys):
    real = cli.onnxruntime_outputs

    def perturbed(model, feeds):
        return {name: value + 1e-2 * np.abs(value).max() for name, value in real(model, feeds).items()}

    monkeypatch.setattr(cli, "onnxruntime_outputs", perturbed)
    assert cli.main(["run", str(files / "resnet.onnx"), "--compare", "onnxruntime"]) == 1
    assert "FAIL" in capsys.readouterr().out
    assert cli.main(["run", str(files / "resnet.onnx"), "--compare", "onnxruntime", "--tolerance", "0.1"]) == 0


def test_random_feeds_follow_the_input_kinds():
    from wgnn.engine.graph import TensorInfo

    inputs = [TensorInfo("pixels", "float16", ("N", 2)), TensorInfo("token_ids", "int32", ("N", 5)),
              TensorInfo("attention_mask", "int64", ("N", 5)), TensorInfo("flags", "bool", (64,))]
    shapes = cli.resolve_shapes(inputs, {"token_ids": (3, 5)})
    assert shapes == {"pixels": (3, 2), "token_ids": (3, 5), "attention_mask": (3, 5), "flags": (64,)}
    feeds = cli.random_feeds(inputs, shapes, seed=0)
    assert feeds["pixels"].dtype == np.float16 and feeds["pixels"].shape == (3, 2)
    ids = feeds["token_ids"]
    assert ids.dtype == np.int32 and ids.min() >= 0 and ids.max() < 100 and len(np.unique(ids)) > 3
    assert feeds["attention_mask"].dtype == np.int64 and (feeds["attention_mask"] == 1).all()
    assert feeds["flags"].dtype == np.bool_ and feeds["flags"].any() and not feeds["flags"].all()


# ----------------------------------------------------------------------------------- demo
def test_demo_json_on_numpy():
    result = wgnn_cli("demo", "--model", "bert", "--provider", "numpy", "--runs", "2", "--json")
    assert result.returncode == 0, result.stderr
    demo = json.loads(result.stdout)
    assert demo["model"] == "bert" and demo["providers"] == ["numpy"]
    assert list(demo["ops_per_backend"]) == ["numpy"]
    assert demo["latency_ms"]["runs"] == 2 and demo["latency_ms"]["median"] > 0
    assert demo["onnxruntime"]["available"] and demo["onnxruntime"]["ok"]
    assert demo["outputs"][0]["name"] == "last_hidden_state"


def test_demo_text_on_the_best_backend():
    from wgnn.tools.demo import best_providers

    result = wgnn_cli("demo", "--model", "mobilenetv2", "--runs", "2")
    assert result.returncode == 0, result.stderr
    assert "mobilenetv2" in result.stdout and "latency:" in result.stdout and "median" in result.stdout
    assert "max rel error vs onnxruntime" in result.stdout and "(ok)" in result.stdout
    assert f"providers: {', '.join(best_providers())}" in result.stdout or "ran on numpy" in result.stdout


def test_demo_unknown_model_is_an_argparse_error():
    result = wgnn_cli("demo", "--model", "vgg")
    assert result.returncode == 2 and "invalid choice" in result.stderr


def test_adapters_command_lists_gpus_or_says_why():
    result = subprocess.run([sys.executable, "-m", "wgnn.tools.cli", "adapters", "--json"],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["adapters"] or data["unavailable"]
    for adapter in data["adapters"]:
        assert adapter["backend"] and "max-storage-buffer-binding-size" in adapter["limits"]
    table_run = subprocess.run([sys.executable, "-m", "wgnn.tools.cli", "adapters"], capture_output=True, text=True,
                               timeout=120)
    if data["adapters"]:
        assert table_run.returncode == 0 and data["adapters"][0]["name"] in table_run.stdout


def test_zoo_model_with_options():
    """zoo:NAME:KEY=VALUE,... builds the zoo model with those options for any command."""
    result = wgnn_cli("run", "zoo:mobilenetv2:size=48,batch=2,width=8", "--compare", "onnxruntime", "--json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["compare"]["ok"]
    assert [o["shape"] for o in data["outputs"]] == [[2, 10]], data["outputs"]
    info = wgnn_cli("info", "zoo:bert:hidden=48,heads=3,layers=1")
    assert info.returncode == 0, info.stderr
    assert "[batch, seq, 48]" in info.stdout, info.stdout


@pytest.mark.parametrize(("spec", "fragments"), [
    ("zoo:vgg", ["no zoo model 'vgg'"]),
    ("zoo:resnet:depth=3", ["zoo:resnet has no option 'depth'", "width (int)"]),
    ("zoo:bert:hidden=30", ["zoo:bert:hidden=30", "not a multiple of 4 heads"]),  # the builder refuses
    ("zoo:unet:size=30", ["zoo:unet:size=30", "divisible by 4"]),
    ("zoo:bert:vocab=100000000000", ["zoo:bert:vocab=100000000000", "too large to build here"]),
])
def test_zoo_model_with_bad_options_is_one_line_error(spec, fragments):
    assert_one_line_error(wgnn_cli("info", spec), *fragments)


@pytest.mark.parametrize("name", ["mobilenetv2", "resnet", "bert", "unet"])
def test_run_zoo_model_compares_with_onnxruntime(name):
    """The spine's acceptance check: every zoo model within 1e-4 of onnxruntime via the CLI."""
    result = subprocess.run([sys.executable, "-m", "wgnn.tools.cli", "run", f"zoo:{name}", "--compare", "onnxruntime",
                             "--json"], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    rows = data["compare"]["outputs"]
    assert data["compare"]["ok"] and all(row["max_rel_error"] <= 1e-4 for row in rows), rows
