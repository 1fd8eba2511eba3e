"""Quick kernels first (GpuExecution.quick_first): on lavapipe, where the driver generates a
kernel's code at its first dispatch, a dwpw step whose big block's code is not in Mesa's cache yet
runs the quick 1x2 block until the big block's pipeline and code are made in the background; then
it runs the big block. Results are the same throughout; a later session finds the big block's code
(the warm-up record) and dispatches it at once; WGNN_QUICK_FIRST=0 and warm-ups off run it at once."""
import numpy as np
import pytest
from helpers import gpu_adapters, session_for
from onnx import TensorProto, helper, numpy_helper
from wgnn.backends.wgpu import warmup
from wgnn.backends.wgpu.backend import QUICK_FIRST_ENV
from wgnn.backends.wgpu.context import get_context
from wgnn.backends.wgpu.conv_dwpw import QUICK_BLOCK
from wgnn.backends.wgpu.loader import pipeline_cache

import wgnn

LAVAPIPE = [a["index"] for a in gpu_adapters() if "llvmpipe" in a["name"].lower() and a["backend"] == "Vulkan"]
needs_lavapipe = pytest.mark.skipif(not LAVAPIPE, reason="no lavapipe (Vulkan llvmpipe) adapter")


def dwpw_model(seed: int):
    """Depthwise 3x3 (ReLU), then a 1x1 conv, on a 16x16 map: the converter makes one ConvDwPw,
    whose block rule picks a block bigger than the quick one there. Channels not a multiple of 4."""
    rng = np.random.default_rng(seed)
    c, cout = 7, 6
    init = [numpy_helper.from_array(rng.standard_normal((c, 1, 3, 3)).astype(np.float32), "wd"),
            numpy_helper.from_array(rng.standard_normal((cout, c, 1, 1)).astype(np.float32), "wp"),
            numpy_helper.from_array(rng.standard_normal(cout).astype(np.float32), "bp")]
    nodes = [helper.make_node("Conv", ["x", "wd"], ["d0"], group=c, pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["d0"], ["d"]),
             helper.make_node("Conv", ["d", "wp", "bp"], ["y"])]
    graph = helper.make_graph(nodes, "dwpw", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, c, 16, 16])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, cout, 16, 16])], init)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def block_of(dispatch) -> tuple[int, int]:
    code = dispatch.kernel.source[0]
    return tuple(int(code.split(f"const {name} = ")[1].split(";")[0]) for name in ("ROWS", "COLS"))


def dwpw_dispatches(session) -> list:
    return [d for s in session.session.segments for step, ex in s.steps if step.op.op_type == "ConvDwPw"
            for d in ex.dispatches]


@pytest.fixture
def fresh_cache(tmp_path, monkeypatch):
    """Warm-ups on (the suite's default is off), with an empty record, and every kernel compiled
    anew, as in a new process; both restored after the test."""
    monkeypatch.setenv("WGNN_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("WGNN_COMPILE_THREADS", "2")
    context = get_context(LAVAPIPE[0])
    session_for(dwpw_model(1).SerializeToString(), f"wgpu:{LAVAPIPE[0]}")  # the compile threads exist
    cache = pipeline_cache(context)
    monkeypatch.setattr(cache, "warmup", warmup.DriverWarmup(context))
    monkeypatch.setattr(cache, "pipelines", {})
    return cache


def gpu_session(model):
    config = wgnn.Config(providers=("wgpu",), adapter=LAVAPIPE[0])
    return wgnn.InferenceSession(model.SerializeToString(), config=config)


@needs_lavapipe
def test_the_quick_block_runs_until_the_big_blocks_code_is_ready(fresh_cache):
    model = dwpw_model(2)
    x = {"x": np.random.default_rng(3).standard_normal((2, 7, 16, 16)).astype(np.float32)}
    expected = session_for(model.SerializeToString(), "numpy").run(None, x)[0]
    session = gpu_session(model)
    [first] = dwpw_dispatches(session)
    assert block_of(first) == QUICK_BLOCK and first.upgrade is not None
    big = block_of(first.upgrade)
    assert big[0] * big[1] > QUICK_BLOCK[0] * QUICK_BLOCK[1]
    assert first.upgrade_ready is not None  # its code is generated after the prepare
    np.testing.assert_allclose(session.run(None, x)[0], expected, rtol=1e-4, atol=1e-4)

    assert session.wait_background() > 0  # the deferred variants, the big block's pipeline and code
    assert first.upgrade_ready.done() and first.upgrade.kernel.compiled
    np.testing.assert_allclose(session.run(None, x)[0], expected, rtol=1e-4, atol=1e-4)
    [now] = dwpw_dispatches(session)
    assert now is first.upgrade and block_of(now) == big
    np.testing.assert_allclose(session.run(None, x)[0], expected, rtol=1e-4, atol=1e-4)

    # The record holds the big block's code now: a later session dispatches it at once.
    [later] = dwpw_dispatches(gpu_session(model))
    assert later.upgrade is None and block_of(later) == big


@needs_lavapipe
@pytest.mark.parametrize("switch", [QUICK_FIRST_ENV, warmup.WARMUP_ENV])
def test_no_quick_block_when_turned_off(fresh_cache, monkeypatch, switch):
    monkeypatch.setenv(switch, "0")
    if switch == warmup.WARMUP_ENV:
        monkeypatch.setattr(fresh_cache, "warmup", None)  # what the switch does in a new process
    [dispatch] = dwpw_dispatches(gpu_session(dwpw_model(4)))
    assert dispatch.upgrade is None and block_of(dispatch)[0] * block_of(dispatch)[1] > 2
