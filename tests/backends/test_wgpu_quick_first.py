"""Quick kernels first (GpuExecution.quick_first): on lavapipe, where the driver generates a
kernel's code at its first dispatch, a step whose big kernel's code is not in Mesa's cache yet runs
a quicker one until the big kernel's pipeline and code are made in the background, then the big
one: a dwpw step the 1x2 block, a literal-weight stem conv one pixel per invocation instead of
four. Results are the same throughout; a later session finds the big kernel's code (the warm-up
record) and dispatches it at once; WGNN_QUICK_FIRST=0, warm-ups off and a forced block
(WGNN_DWPW_BLOCK) run it at once."""
import numpy as np
import pytest
from helpers import fresh_warmup_cache, gpu_adapters, session_for
from onnx import TensorProto, helper, numpy_helper
from wgnn.backends.wgpu import warmup
from wgnn.backends.wgpu.backend import QUICK_FIRST_ENV
from wgnn.backends.wgpu.conv_dwpw import BLOCK_ENV, QUICK_BLOCK

import wgnn

LAVAPIPE = [a["index"] for a in gpu_adapters() if "llvmpipe" in a["name"].lower() and a["backend"] == "Vulkan"]
needs_lavapipe = pytest.mark.skipif(not LAVAPIPE, reason="no lavapipe (Vulkan llvmpipe) adapter")


def dwpw_model(seed: int, batch: int | str = 2):
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
    vi = helper.make_tensor_value_info
    graph = helper.make_graph(nodes, "dwpw", [vi("x", TensorProto.FLOAT, [batch, c, 16, 16])],
                              [vi("y", TensorProto.FLOAT, [batch, cout, 16, 16])], init)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def stem_model(seed: int):
    """A 3x3 stride-2 conv of an RGB image to 6 channels, padded: a literal-weight stem kernel."""
    rng = np.random.default_rng(seed)
    init = [numpy_helper.from_array(rng.standard_normal((6, 3, 3, 3)).astype(np.float32), "w"),
            numpy_helper.from_array(rng.standard_normal(6).astype(np.float32), "b")]
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], strides=[2, 2], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["y"])]
    graph = helper.make_graph(nodes, "stem", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 16, 16])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 6, 8, 8])], init)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def block_of(dispatch) -> tuple[int, int]:
    """Output pixels (rows, columns) an invocation of the dispatch's kernel computes."""
    code = dispatch.kernel.source[0]
    if "const ROWS = " in code:  # dwpw
        return tuple(int(code.split(f"const {name} = ")[1].split(";")[0]) for name in ("ROWS", "COLS"))
    return 1, int(code.split("let ox0 = (index % p(1u)) * ")[1].split(";")[0])  # stem


MODELS = {"ConvDwPw": (dwpw_model, (2, 7, 16, 16), QUICK_BLOCK), "Conv": (stem_model, (2, 3, 16, 16), (1, 1))}


def op_dispatches(session, op_type: str) -> list:
    return [d for s in session.session.segments for step, ex in s.steps if step.op.op_type == op_type
            for d in ex.dispatches]


def dwpw_dispatches(session) -> list:
    return op_dispatches(session, "ConvDwPw")


@pytest.fixture
def fresh_cache(tmp_path, monkeypatch):
    return fresh_warmup_cache(monkeypatch, tmp_path, LAVAPIPE[0])


def gpu_session(model, storage="auto", precision="fp32"):
    config = wgnn.Config(providers=("wgpu",), adapter=LAVAPIPE[0], storage=storage, precision=precision)
    return wgnn.InferenceSession(model.SerializeToString(), config=config)


@needs_lavapipe
@pytest.mark.parametrize("op_type", list(MODELS))
@pytest.mark.parametrize(("storage", "precision"), [("buffer", "fp32"), ("texture", "fp16")])
def test_the_quick_block_runs_until_the_big_blocks_code_is_ready(fresh_cache, op_type, storage, precision):
    build, shape, quick = MODELS[op_type]
    model = build(2)
    x = {"x": np.random.default_rng(3).standard_normal(shape).astype(np.float32)}
    expected = session_for(model.SerializeToString(), "numpy").run(None, x)[0]
    session = gpu_session(model, storage, precision)
    tolerance = 1e-4 if precision == "fp32" else 2e-2
    [first] = op_dispatches(session, op_type)
    assert block_of(first) == quick and first.upgrade is not None
    big = block_of(first.upgrade)
    assert big[0] * big[1] > quick[0] * quick[1]
    assert first.upgrade_ready is not None  # its code is generated after the prepare
    np.testing.assert_allclose(session.run(None, x)[0], expected, rtol=tolerance, atol=tolerance)

    assert session.wait_background() > 0  # the deferred variants, the big block's pipeline and code
    assert first.upgrade_ready.done() and first.upgrade.kernel.compiled
    [now] = op_dispatches(session, op_type)  # taken at the wait
    assert now is first.upgrade and block_of(now) == big
    for _ in range(2):  # the run recorded ahead of the wait was dropped: both run the big kernel
        np.testing.assert_allclose(session.run(None, x)[0], expected, rtol=tolerance, atol=tolerance)

    # The record holds the big block's code now: a later session dispatches it at once.
    [later] = op_dispatches(gpu_session(model, storage, precision), op_type)
    assert later.upgrade is None and block_of(later) == big


@needs_lavapipe
@pytest.mark.parametrize(("switch", "value"), [(QUICK_FIRST_ENV, "0"), (warmup.WARMUP_ENV, "0"), (BLOCK_ENV, "2x4")])
def test_no_quick_block_when_turned_off_or_a_block_is_forced(fresh_cache, monkeypatch, switch, value):
    monkeypatch.setenv(switch, value)
    if switch == warmup.WARMUP_ENV:
        monkeypatch.setattr(fresh_cache, "warmup", None)  # what the switch does in a new process
    [dispatch] = dwpw_dispatches(gpu_session(dwpw_model(4)))
    assert dispatch.upgrade is None and block_of(dispatch)[0] * block_of(dispatch)[1] > 2
    if switch == BLOCK_ENV:
        assert block_of(dispatch) == (2, 4)


@needs_lavapipe
def test_a_resize_before_the_background_finishes_stays_right(fresh_cache):
    """New input shapes while the big block's code is still being generated: the resized plan runs
    the quick block again until then, with the right results, and takes the big one after."""
    model = dwpw_model(5, batch="N")
    session = gpu_session(model)
    rng = np.random.default_rng(6)
    reference = session_for(model.SerializeToString(), "numpy")
    for batch in (2, 3):
        x = {"x": rng.standard_normal((batch, 7, 16, 16)).astype(np.float32)}
        expected = reference.run(None, x)[0]
        np.testing.assert_allclose(session.run(None, x)[0], expected, rtol=1e-4, atol=1e-4)
    [quick] = dwpw_dispatches(session)
    session.wait_background()
    [now] = dwpw_dispatches(session)
    assert block_of(now) != QUICK_BLOCK and (quick.upgrade is None or now is quick.upgrade)
    np.testing.assert_allclose(session.run(None, x)[0], expected, rtol=1e-4, atol=1e-4)
