"""GlobalPoolMatMul (engine/ops/pool_matmul.py) and its converter pass
(tools/convert/fusion_pool_matmul.py): a classifier head, GlobalPool -> Flatten / Reshape -> Gemm /
MatMul, as one op.

ONNX heads convert to one GlobalPoolMatMul and compute what onnxruntime computes on the original,
on numpy (exactly what the unfused graph gives) and on every GPU adapter: channels not a multiple
of 4, outputs not a multiple of 4, batch 2, 1x1 to 7x7 planes, transB 0 and 1, alpha / beta, bias
absent, [K], [1, K] or scalar, Flatten / Reshape / MatMul forms, average and max pooling, a fused
Relu; the GPU kernel on buffer and texture storage in fp32, fp16 and fp16-arith; the two-dispatch
path for big heads; resizes switching paths compile nothing; heads that stay unfused; shape errors;
numpy's compiled loop for small float32 heads against its two kernels.
"""
import subprocess
import sys

import numpy as np
import onnxruntime as ort
import pytest
from helpers import gpu_adapters, session_for
from helpers import test_backends as backends_under_test
from onnx import TensorProto, helper, numpy_helper
from wgnn.backends.numpy import compiled
from wgnn.backends.numpy import pool_matmul as numpy_pool_matmul
from wgnn.backends.wgpu import pool_matmul as gpu_pool_matmul
from wgnn.backends.wgpu.loader import pipeline_cache
from wgnn.engine.errors import ShapeError
from wgnn.engine.graph import Graph, Model, Node, TensorInfo
from wgnn.models import zoo
from wgnn.models.format import model_to_bytes, read_model
from wgnn.tools.convert import fusion
from wgnn.tools.convert.onnx import convert_onnx

import wgnn

ADAPTERS = gpu_adapters()
needs_gpu = pytest.mark.skipif(not ADAPTERS, reason="no GPU adapter (install mesa-vulkan-drivers)")
rng = np.random.default_rng(11)
FLOAT = TensorProto.FLOAT
POOLS = {"avg": "GlobalAveragePool", "max": "GlobalMaxPool"}


def r(*shape):
    return rng.standard_normal(shape).astype(np.float32)


def head(c=6, k=10, size=(3, 5), batch=2, *, trans_b=1, alpha=1.0, beta=1.0, bias="k", flatten="Flatten", act=None,
         kind="avg", matmul="Gemm", conv=False, symbolic=False, inner=None):
    """(ONNX model, feeds): [Conv 1x1 ->] GlobalPool -> Flatten / Reshape -> Gemm / MatMul [-> Relu].
    inner: B's contracted size where the Reshape gives other than (N, C)."""
    inner = inner or c
    init = {"B": r(k, inner) if trans_b else r(inner, k)}
    nodes, source, x = [], "x", r(batch, c, *size)
    if conv:  # a producer that writes NC4HW4 on the GPU
        init["cw"] = r(c, 3, 1, 1)
        x = r(batch, 3, *size)
        nodes.append(helper.make_node("Conv", ["x", "cw"], ["f"]))
        source = "f"
    nodes.append(helper.make_node(POOLS[kind], [source], ["pooled"]))
    if flatten == "Flatten":
        nodes.append(helper.make_node("Flatten", ["pooled"], ["flat"], axis=1))
    else:
        init["shape"] = np.array(flatten, np.int64)
        nodes.append(helper.make_node("Reshape", ["pooled", "shape"], ["flat"]))
    out = "logits0" if act else "logits"
    if matmul == "Gemm":
        inputs = ["flat", "B"]
        if bias != "none":
            init["bias"] = {"k": r(k), "1k": r(1, k), "scalar": r(), "nk": r(batch, k)}[bias]
            inputs.append("bias")
        nodes.append(helper.make_node("Gemm", inputs, [out], transB=trans_b, alpha=alpha, beta=beta))
    else:
        nodes.append(helper.make_node("MatMul", ["flat", "B"], [out]))
    if act:
        nodes.append(helper.make_node(act, [out], ["logits"]))
    shape = list(x.shape)
    if symbolic:  # "spatial": the plane's dims too
        shape[0] = "N"
        if symbolic == "spatial":
            shape[2:] = [f"S{i}" for i in range(len(size))]
    graph = helper.make_graph(nodes, "head", [helper.make_tensor_value_info("x", FLOAT, shape)],
                              [helper.make_tensor_value_info("logits", FLOAT, None)],
                              [numpy_helper.from_array(v, name) for name, v in init.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model, {"x": x}


def reference(model, feeds):
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, feeds)[0]


def converted(model, *, fused=True):
    """The converted model, through the file format, with or without the pass."""
    if fused:
        return read_model(model_to_bytes(convert_onnx(model)))
    passes = tuple(p for p in fusion.FUSION_PASSES if p.__name__ != "fuse_globalpool_matmul")
    saved, fusion.FUSION_PASSES = fusion.FUSION_PASSES, passes
    try:
        return convert_onnx(model)
    finally:
        fusion.FUSION_PASSES = saved


def op_types(model):
    return [n.op_type for n in model.graph.nodes]


def head_execution(session):
    (ex,) = [ex for segment in session.session.segments for step, ex in segment.steps
             if step.op.op_type == "GlobalPoolMatMul"]
    return ex


def run_everywhere(model, feeds, *, ops=("GlobalPoolMatMul",), path="fused", backends=None, atol=1e-5):
    want = reference(model, feeds)
    wg = converted(model)
    assert op_types(wg)[-len(ops):] == list(ops)
    for backend in backends or backends_under_test():
        session = session_for(wg, backend)
        got = session.run(None, feeds)[0]
        gpu = backend.startswith("wgpu")
        if gpu:
            assert session.report()["fallbacks"] == [], backend
            assert head_execution(session).path == path
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=atol, err_msg=backend)


# ---------------------------------------------------------------------------- against onnxruntime
CASES = {
    "c6-k10-3x5-transB-alpha-beta": {"alpha": 0.5, "beta": 2.0},
    "c13-k3-7x7-transB0-bias1k-reshape-relu": {"c": 13, "k": 3, "size": (7, 7), "trans_b": 0, "bias": "1k",
                                               "flatten": [2, 13], "act": "Relu"},
    "c6-k10-1x1-no-bias-reshape0": {"size": (1, 1), "bias": "none", "flatten": [0, -1], "alpha": -1.5},
    "c13-k10-3x5-max": {"c": 13, "kind": "max", "beta": 0.25},
    "c4-k1-2x3-scalar-bias-transB0": {"c": 4, "k": 1, "size": (2, 3), "bias": "scalar", "trans_b": 0},
    "c8-k4-matmul-batch1": {"c": 8, "k": 4, "matmul": "MatMul", "trans_b": 0, "batch": 1, "flatten": [1, 8]},
    "c13-k10-symbolic-batch": {"c": 13, "symbolic": True, "act": "Relu"},
    "c10-k7-conv-first": {"c": 10, "k": 7, "size": (5, 6), "conv": True},
}


@pytest.mark.parametrize("options", CASES.values(), ids=CASES.keys())
def test_matches_onnxruntime(options):
    model, feeds = head(**options)
    run_everywhere(model, feeds, ops=("Conv", "GlobalPoolMatMul") if options.get("conv") else ("GlobalPoolMatMul",))


@pytest.mark.parametrize("options", [{}, {"c": 13, "k": 3, "kind": "max", "trans_b": 0, "bias": "1k", "act": "Relu",
                                          "alpha": 0.5, "beta": 2.0}])
def test_numpy_gives_the_unfused_graphs_numbers(options, monkeypatch):
    """The two kernels (the path without the compiled loop) give the unfused graph's floats."""
    monkeypatch.setenv(compiled.COMPILED_ENV, "0")
    model, feeds = head(**options)
    plain = wgnn.InferenceSession(converted(model, fused=False), providers=["numpy"]).run(None, feeds)[0]
    fused = wgnn.InferenceSession(converted(model), providers=["numpy"]).run(None, feeds)[0]
    np.testing.assert_array_equal(fused, plain)


# ---------------------------------------------------------------------------- numpy's compiled loop
needs_numba = pytest.mark.skipif(compiled._numba() is None, reason="numba is not installed (pip install wgnn[cpu])")
COMPILED_VARIANT = "compiled loop (pool_matmul_rows)"


def two_kernels_and_loop(model, feeds, monkeypatch):
    """The numpy backend's results without and with the compiled loop (started first, as another
    step of a model would), and the loop's execution."""
    monkeypatch.setenv(compiled.COMPILED_ENV, "0")
    plain = wgnn.InferenceSession(model, providers=["numpy"])
    want = plain.run(None, feeds)[0]
    assert head_execution(plain).variant() == "pool: numpy; matmul: numpy"
    monkeypatch.delenv(compiled.COMPILED_ENV)
    compiled.loops()
    session = wgnn.InferenceSession(model, providers=["numpy"])
    return want, session.run(None, feeds)[0], head_execution(session)


@needs_numba
@pytest.mark.parametrize("options", [*CASES.values(), {"kind": "max", "nan": True, "trans_b": 0, "bias": "none"}],
                         ids=[*CASES.keys(), "max-with-nan"])
def test_compiled_loop_matches_the_two_kernels(options, monkeypatch):
    """A small float32 head takes one compiled loop once numba runs: onnxruntime's numbers and the
    two kernels' within float32 rounding, every case above; NaN in a max pool propagates as in the
    two kernels."""
    options = dict(options)
    nan = options.pop("nan", False)
    model, feeds = head(**options)
    if nan:  # first and later in a plane, as np.maximum propagates it
        feeds["x"][0, 1, 0, 0] = feeds["x"][1, 4, 2, 3] = np.nan
    want, got, ex = two_kernels_and_loop(converted(model), feeds, monkeypatch)
    assert ex.variant() == COMPILED_VARIANT
    np.testing.assert_allclose(got, want, rtol=2e-6, atol=2e-6)
    if nan:  # (onnxruntime's max pool skips NaN; ONNX leaves it open)
        assert np.isnan(got).sum() == np.isnan(want).sum() == got.shape[1] * 2
    else:
        np.testing.assert_allclose(got, reference(model, feeds), rtol=1e-5, atol=1e-5)


@needs_numba
@pytest.mark.parametrize("bias_shape", [None, (), (1,), (5,), (1, 5)])
@pytest.mark.parametrize("activation", ["", "relu", "clip"])
def test_compiled_loop_bias_forms_and_activations(bias_shape, activation, monkeypatch):
    """The op as the converter may give it, and as other tools may: a bias that is a graph input
    (read on every run) in each shape the op takes, Relu and Clip fused, a 3-D input."""
    inputs, graph_inputs, init = ["x", "B", ""], [TensorInfo("x", "float32", (3, 7, 5))], {"B": r(7, 5)}
    feeds = {"x": r(3, 7, 5)}
    if bias_shape is not None:
        inputs[2] = "bias"
        graph_inputs.append(TensorInfo("bias", "float32", bias_shape))
        feeds["bias"] = r(*bias_shape)
    attrs = {"kind": "avg", "trans_b": 0, "alpha": 0.75, "beta": -1.5, "activation": activation,
             "activation_alpha": -0.2, "activation_beta": 0.3}
    node = Node("GlobalPoolMatMul", inputs, ["y"], attrs, name="head")
    model = Model(Graph([node], graph_inputs, [TensorInfo("y", "float32")], init))
    want, got, ex = two_kernels_and_loop(model, feeds, monkeypatch)
    assert ex.variant() == COMPILED_VARIANT
    np.testing.assert_allclose(got, want, rtol=2e-6, atol=2e-6)
    if activation == "clip":
        assert got.min() >= -0.2 and got.max() <= 0.3 and ((got == -0.2) | (got == 0.3)).any()


@needs_numba
def test_big_heads_and_other_types_keep_the_two_kernels(monkeypatch):
    """Past COMPILED_MULTIPLY_ADDS numpy's BLAS multiplies (the loop's products are scalar); float64
    heads keep the kernels too."""
    compiled.loops()
    channels = numpy_pool_matmul.COMPILED_MULTIPLY_ADDS // 100 + 1
    model, feeds = head(c=channels, k=50, size=(2, 2), batch=2)
    session = wgnn.InferenceSession(converted(model), providers=["numpy"])
    np.testing.assert_allclose(session.run(None, feeds)[0], reference(model, feeds), rtol=1e-5, atol=1e-4)
    assert head_execution(session).variant() == "pool: numpy; matmul: numpy"
    node = Node("GlobalPoolMatMul", ["x", "B"], ["y"], {"kind": "avg", "trans_b": 1}, name="head")
    doubles = Model(Graph([node], [TensorInfo("x", "float64", (1, 4, 3, 3))], [TensorInfo("y", "float64")],
                          {"B": rng.standard_normal((2, 4))}))
    session = wgnn.InferenceSession(doubles, providers=["numpy"])
    x = rng.standard_normal((1, 4, 3, 3))
    np.testing.assert_allclose(session.run(None, {"x": x})[0], x.mean((2, 3)) @ doubles.graph.initializers["B"].T,
                               rtol=1e-12)
    assert head_execution(session).variant() == "pool: numpy; matmul: numpy"


@needs_numba
def test_a_lone_head_does_not_start_numba():
    """A model of only a head runs the two kernels: starting numba would cost more than it saves."""
    code = ("import sys, numpy as np, wgnn\n"
            "from wgnn.engine.graph import Graph, Model, Node, TensorInfo\n"
            "node = Node('GlobalPoolMatMul', ['x', 'B'], ['y'], {'kind': 'avg', 'trans_b': 1}, name='head')\n"
            "model = Model(Graph([node], [TensorInfo('x', 'float32', (1, 8, 2, 2))], [TensorInfo('y', 'float32')],\n"
            "                    {'B': np.ones((3, 8), np.float32)}))\n"
            "feeds = {'x': np.ones((1, 8, 2, 2), np.float32)}\n"
            "y = wgnn.InferenceSession(model, providers=['numpy']).run(None, feeds)\n"
            "assert (y[0] == 8).all(), y\n"
            "print('wgnn.backends.numpy.compiled_loops' in sys.modules)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"


def test_empty_batch():
    model, _ = head(c=6, k=5, symbolic=True)
    wg = converted(model)
    for backend in backends_under_test():
        session = session_for(wg, backend)
        (y,) = session.run(None, {"x": np.zeros((0, 6, 3, 5), np.float32)})
        assert y.shape == (0, 5), backend
        assert session.report()["fallbacks"] == [], backend


def test_three_d_input_runs_on_numpy():
    """The op pools any spatial rank; the GPU kernel runs 4-D inputs only (else the CPU runs it)."""
    model, feeds = head(c=5, k=6, size=(7,))
    run_everywhere(model, feeds, backends=["numpy"])
    for adapter in ADAPTERS:
        session = session_for(converted(model), f"wgpu:{adapter['index']}")
        np.testing.assert_allclose(session.run(None, feeds)[0], reference(model, feeds), rtol=1e-5, atol=1e-5)
        (fallback,) = session.report()["fallbacks"]
        assert "4-D" in " ".join(fallback["reasons"])


# ---------------------------------------------------------------------------- GPU
@needs_gpu
@pytest.mark.parametrize("adapter", [a["index"] for a in ADAPTERS])
@pytest.mark.parametrize("storage, precision", [("buffer", "fp32"), ("texture", "fp32"), ("texture", "fp16"),
                                                ("buffer", "fp16-arith")])
@pytest.mark.parametrize("size", [(3, 5), (28, 28)], ids=["fused", "pair"])
def test_storages_and_precisions(adapter, storage, precision, size):
    """x as the Conv wrote it, NC4HW4 in a buffer or texture of 32- or 16-bit floats."""
    if storage == "buffer" and precision != "fp32" and "shader-f16" not in ADAPTERS[adapter]["features"]:
        pytest.skip("16-bit buffers need shader-f16")
    model, feeds = head(c=13, k=10, size=size, conv=True, alpha=0.5, beta=2.0, act="Relu")
    want = reference(model, feeds)
    config = wgnn.Config(providers=("wgpu",), adapter=adapter, storage=storage, precision=precision)
    session = wgnn.InferenceSession(converted(model), config=config)
    got = session.run(None, feeds)[0]
    error = float(np.abs(got - want).max() / np.abs(want).max())
    assert error <= (1e-5 if precision == "fp32" else 4e-3), f"max relative error {error:.3g}"
    ex = head_execution(session)
    backend = session.session.backends[0]
    placement = backend.placement(ex.step.inputs[0])
    assert (placement.layout, placement.storage) == ("nc4hw4", storage)
    assert ex.path == ("fused" if size == (3, 5) else "pair")
    assert len(ex.dispatches) == (1 if ex.path == "fused" else 2)


@needs_gpu
@pytest.mark.parametrize("adapter", [a["index"] for a in ADAPTERS])
def test_big_head_runs_two_dispatches(adapter):
    """C = 256 at 16x16 with K = 64: pooling again per output block would cost far more than a
    dispatch, so GlobalPool's kernel and MatMul's run as two dispatches."""
    model, feeds = head(c=256, k=64, size=(16, 16), bias="1k", act="Relu", trans_b=0)
    assert gpu_pool_matmul.fused_loads(256, 16, 16, 64) > gpu_pool_matmul.FUSED_LOADS
    run_everywhere(model, feeds, path="pair", backends=[f"wgpu:{adapter}"])
    session = session_for(converted(model), f"wgpu:{adapter}")
    session.run(None, feeds)
    paths = [d.kernel.path for d in head_execution(session).dispatches]
    assert paths[0] == "pool/global_pool_nc4hw4.wgsl" and paths[1].startswith("matmul/")


@needs_gpu
@pytest.mark.parametrize("adapter", [a["index"] for a in ADAPTERS])
def test_resize_compiles_nothing(adapter):
    """Planes that switch between the fused and the two-dispatch path compile nothing new."""
    model, _ = head(c=13, k=10, symbolic="spatial", bias="1k")
    wg = converted(model)
    numpy_session = wgnn.InferenceSession(wg, providers=["numpy"])
    session = wgnn.InferenceSession(wg, config=wgnn.Config(providers=("wgpu",), adapter=adapter))
    cache = pipeline_cache(session.session.backends[0].context)
    compiled, paths = None, []
    for batch, size in ((1, 3), (2, 28), (1, 5), (3, 30)):
        feeds = {"x": r(batch, 13, size, size)}
        np.testing.assert_allclose(session.run(None, feeds)[0], numpy_session.run(None, feeds)[0], rtol=1e-5,
                                   atol=1e-5)
        paths.append(head_execution(session).path)
        compiled = cache.compiled if compiled is None else compiled
        assert cache.compiled == compiled, "a resize compiled pipelines"
    assert paths == ["fused", "pair", "fused", "pair"]


@needs_gpu
def test_weights_in_storage_buffers(monkeypatch):
    """WGNN_CONV_WEIGHTS=storage keeps the fused kernel's weights in a storage buffer (the A/B switch
    of the convs); weights past 64 KiB (C = 520, K = 36: 9 x 130 x 4 vec4s) go there anyway. Sums
    of 520 products differ from onnxruntime's by up to 2.3e-5 for some data (numpy's too), hence
    that case's atol."""
    for options, env, atol in (({}, "storage", 1e-5), ({"c": 520, "k": 36, "size": (1, 1)}, "auto", 1e-4)):
        monkeypatch.setenv("WGNN_CONV_WEIGHTS", env)
        model, feeds = head(**options)
        run_everywhere(model, feeds, backends=[f"wgpu:{a['index']}" for a in ADAPTERS], atol=atol)


@needs_gpu
def test_zoo_heads_run_one_dispatch():
    """zoo resnet and mobilenetv2 end in GlobalPool -> Flatten / Reshape -> MatMul: one op, one
    dispatch, the unfused model's numbers."""
    for build in (zoo.resnet, zoo.mobilenetv2):
        model = build(batch=2)
        fused, plain = converted(model), converted(model, fused=False)
        assert op_types(fused)[-1] == "GlobalPoolMatMul"
        assert op_types(plain)[-3] == "GlobalPool" and op_types(plain)[-2] in ("Flatten", "Reshape")
        feeds = {"input": r(2, 3, 32, 32)}
        session = session_for(fused, f"wgpu:{ADAPTERS[0]['index']}")
        np.testing.assert_allclose(session.run(None, feeds)[0],
                                   wgnn.InferenceSession(plain, providers=["numpy"]).run(None, feeds)[0],
                                   rtol=1e-4, atol=1e-4)
        assert len(head_execution(session).dispatches) == 1


# ---------------------------------------------------------------------------- what stays apart
def extra_reader(model, tensor):
    """The model with `tensor` also read by a Relu whose output is a second graph output."""
    model.graph.node.append(helper.make_node("Relu", [tensor], ["other"]))
    model.graph.output.append(helper.make_tensor_value_info("other", FLOAT, None))
    return model


def as_graph_input(model, name):
    """The model with initializer `name` made a graph input."""
    (init,) = [i for i in model.graph.initializer if i.name == name]
    model.graph.initializer.remove(init)
    model.graph.input.append(helper.make_tensor_value_info(name, FLOAT, list(init.dims)))
    return model


def pooled_output(model):
    model.graph.output.append(helper.make_tensor_value_info("pooled", FLOAT, None))
    return model


UNFUSED = {
    "pooled-read-elsewhere": lambda: extra_reader(head()[0], "pooled"),
    "flat-read-elsewhere": lambda: extra_reader(head()[0], "flat"),
    "pooled-is-an-output": lambda: pooled_output(head()[0]),
    "weights-not-constant": lambda: as_graph_input(head()[0], "B"),
    "bias-not-constant": lambda: as_graph_input(head()[0], "bias"),
    "bias-per-batch-item": lambda: head(bias="nk")[0],
    "reshape-to-another-shape": lambda: head(c=6, k=5, batch=2, flatten=[1, 12], inner=12)[0],
}


@pytest.mark.parametrize("build", UNFUSED.values(), ids=UNFUSED.keys())
def test_stays_unfused(build):
    model = build()
    if "B" in [i.name for i in model.graph.input]:
        feeds = {"x": r(2, 6, 3, 5), "B": r(10, 6)}
    elif "bias" in [i.name for i in model.graph.input]:
        feeds = {"x": r(2, 6, 3, 5), "bias": r(10)}
    else:
        feeds = {"x": r(*[d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim])}
    wg = converted(model)
    assert "GlobalPoolMatMul" not in op_types(wg) and "GlobalPool" in op_types(wg)
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)
    got = wgnn.InferenceSession(wg, providers=["numpy"]).run(None, feeds)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)


def test_trans_a_and_residual_stay_unfused():
    """Gemm transA = 1 reads the pooled (N, C) as (K, M); an Add of a (N, K) input after the Gemm
    becomes the MatMul's residual (input 3): neither is the fused op's product."""
    x = r(2, 6, 3, 5)
    nodes = [helper.make_node("GlobalAveragePool", ["x"], ["pooled"]),
             helper.make_node("Flatten", ["pooled"], ["flat"]),
             helper.make_node("Gemm", ["flat", "B"], ["y"], transA=1)]
    graph = helper.make_graph(nodes, "ta", [helper.make_tensor_value_info("x", FLOAT, list(x.shape))],
                              [helper.make_tensor_value_info("y", FLOAT, None)],
                              [numpy_helper.from_array(r(2, 5), "B")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    assert "GlobalPoolMatMul" not in op_types(converted(model))
    np.testing.assert_allclose(wgnn.InferenceSession(converted(model), providers=["numpy"]).run(None, {"x": x})[0],
                               reference(model, {"x": x}), rtol=1e-5, atol=1e-5)
    residual, feeds = head(k=10)
    residual.graph.node[-1].output[0] = "y0"
    residual.graph.node.append(helper.make_node("Add", ["y0", "res"], ["logits"]))
    residual.graph.input.append(helper.make_tensor_value_info("res", FLOAT, [2, 10]))
    feeds["res"] = r(2, 10)
    wg = converted(residual)
    assert "GlobalPoolMatMul" not in op_types(wg) and wg.graph.nodes[-1].input(3) == "res"
    np.testing.assert_allclose(wgnn.InferenceSession(wg, providers=["numpy"]).run(None, feeds)[0],
                               reference(residual, feeds), rtol=1e-5, atol=1e-5)


# ---------------------------------------------------------------------------- shape errors
def ir_head(b_shape, bias_shape=None, x_shape=(2, 6, 3, 3), extra=None):
    init = {"B": r(*b_shape)}
    inputs = ["x", "B", ""]
    if bias_shape is not None:
        init["bias"] = r(*bias_shape)
        inputs[2] = "bias"
    if extra is not None:
        init["res"] = r(*extra)
        inputs.append("res")
    node = Node("GlobalPoolMatMul", inputs, ["y"], {"kind": "avg", "trans_b": 1}, name="head")
    return Model(Graph([node], [TensorInfo("x", "float32", x_shape)], [TensorInfo("y", "float32")], init))


@pytest.mark.parametrize("model, message", [
    (ir_head((10, 6), (2, 10)), "must not depend on N"),
    (ir_head((2, 10, 6)), "must be 2-D"),
    (ir_head((10, 5)), "inner dimensions differ"),
    (ir_head((10, 6), extra=(2, 10)), "takes 3 inputs"),
    (ir_head((10, 6), x_shape=(2, 6)), "(N, C, spatial...)"),
], ids=["bias-per-batch-item", "3-d-weights", "channels-differ", "residual", "no-spatial-axes"])
def test_shape_errors(model, message):
    with pytest.raises(ShapeError, match=message.replace("(", r"\(").replace(")", r"\)").replace(".", r"\.")):
        wgnn.InferenceSession(model, providers=["numpy"]).run(None, {"x": r(*model.graph.inputs[0].shape)})


@needs_gpu
@pytest.mark.parametrize("adapter", [a["index"] for a in ADAPTERS])
def test_big_head_pools_by_workgroup(adapter, monkeypatch):
    """The pair path with a workgroup per slice pooling (real GPUs' kernel, forced here): C = 70
    (not a multiple of 4), a 28x28 plane over several strides of the workgroup, batch 2."""
    monkeypatch.setenv("WGNN_ROW_KERNEL", "workgroup")
    model, feeds = head(c=70, k=64, size=(28, 28), batch=2, bias="1k", act="Relu", trans_b=0)
    run_everywhere(model, feeds, path="pair", backends=[f"wgpu:{adapter}"])
    session = session_for(converted(model), f"wgpu:{adapter}")
    session.run(None, feeds)
    paths = [d.kernel.path for d in head_execution(session).dispatches]
    assert paths[0] == "pool/global_pool_nc4hw4_workgroup.wgsl" and paths[1].startswith("matmul/")
