"""Run-time indices out of range on the GPU raise the numpy backend's InputError (docs/reliability.md,
"No silent wrong answers on the GPU"): the kernels flag them in the backend's status buffer, read
after the segment only when some step validates."""
import numpy as np
import pytest
from helpers import Const, gpu_adapters, gpu_fallbacks, make_model, session_for
from onnx import TensorProto, helper

import wgnn

GPUS = [f"wgpu:{a['index']}" for a in gpu_adapters()]
pytestmark = pytest.mark.skipif(not GPUS, reason="no GPU adapter (install mesa-vulkan-drivers)")

rng = np.random.default_rng(7)


def rand(*shape):
    return rng.standard_normal(shape).astype(np.float32)


def ints(values, dtype=np.int64):
    return np.array(values, dtype)


# op (_variant) -> (inputs with good index values, attrs, opset, index input, [(bad index values, the
# bad value)]). Each bad case holds one bad value, past the end or past -size.
CASES = {
    "Gather": ([rand(5, 3), ints([[4, -5], [0, 2]])], {"axis": 0}, 13, 1,
               [([[4, 5], [0, 1]], 5), ([[-6, 0], [0, 0]], -6)]),
    "Gather_axis1_int32": ([rand(2, 4, 3), ints([-4, 3, 0], np.int32)], {"axis": 1}, 13, 1,
                           [([1, 4, 0], 4), ([-5, 0, 0], -5)]),
    "Gather_rows_of_vec4s": ([rand(5, 8), ints([[4, -5], [0, 2]])], {"axis": 0}, 13, 1,  # read as vec4s
                             [([[4, 5], [0, 1]], 5), ([[-6, 0], [0, 0]], -6)]),
    "GatherElements": ([rand(3, 4), ints([[3, -4], [0, 1], [2, 2]])], {"axis": 1}, 13, 1,
                       [([[3, 4], [0, 1], [2, 2]], 4), ([[0, 0], [-5, 1], [2, 2]], -5)]),
    "GatherND": ([rand(3, 4, 2), ints([[2, -4], [0, 3]])], {}, 13, 1,
                 [([[2, 4], [0, 3]], 4), ([[-4, 0], [0, 3]], -4)]),
    "GatherND_batch": ([rand(2, 3, 4), ints([[2], [-3]])], {"batch_dims": 1}, 13, 1,
                       [([[3], [0]], 3), ([[0], [-4]], -4)]),
    "ScatterElements": ([rand(3, 4), ints([[2, 0, 1, -3], [1, 1, 0, 2]]), rand(2, 4)], {"axis": 0}, 16, 1,
                        [([[2, 0, 1, 3], [1, 1, 0, 2]], 3), ([[2, 0, 1, 0], [1, -4, 0, 2]], -4)]),
    "ScatterND": ([rand(4, 3), ints([[1], [-4]]), rand(2, 3)], {}, 16, 1,
                  [([[1], [4]], 4), ([[-5], [0]], -5)]),
    "ScatterND_add": ([rand(4, 3), ints([[1, 2], [1, 2]]), rand(2)], {"reduction": "add"}, 16, 1,
                      [([[1, 2], [1, 3]], 3), ([[-5, 0], [1, 2]], -5)]),
    "ReverseSequence": ([rand(4, 3), ints([4, 0, 2])], {"time_axis": 0, "batch_axis": 1}, 10, 1,
                        [([5, 1, 2], 5), ([2, -1, 2], -1)]),
    "MaxUnpool": ([rand(1, 1, 2, 2), ints([[[[0, 3], [9, 15]]]])], {"kernel_shape": [2, 2], "strides": [2, 2]},
                  11, 1, [([[[[0, 3], [9, 16]]]], 16), ([[[[0, -1], [9, 15]]]], -1)]),
}


def case_model(name):
    inputs, attrs, opset, slot, bads = CASES[name]
    model = make_model(name.split("_")[0], inputs, attrs, opset=opset)
    return wgnn.convert(model), inputs, slot, bads


def feeds_of(inputs, slot=None, replacement=None):
    feeds = {f"in{i}": x for i, x in enumerate(inputs) if x is not None and not isinstance(x, Const)}
    if slot is not None:
        feeds[f"in{slot}"] = np.array(replacement, inputs[slot].dtype)
    return feeds


def numpy_error(model, feeds) -> str:
    with pytest.raises(wgnn.InputError) as caught:
        session_for(model, "numpy").run(None, feeds)
    return str(caught.value)


@pytest.mark.parametrize("backend", GPUS)
@pytest.mark.parametrize("name", list(CASES))
def test_bad_runtime_index_raises_like_numpy(name, backend):
    model, inputs, slot, bads = case_model(name)
    op = name.split("_")[0]
    good = feeds_of(inputs)
    want = session_for(model, "numpy").run(None, good)[0]
    session = session_for(model, backend)
    assert not gpu_fallbacks(session), "the op must run on the GPU for this test to mean anything"
    np.testing.assert_array_equal(session.run(None, good)[0], want)
    for values, value in bads:
        feeds = feeds_of(inputs, slot, values)
        with pytest.raises(wgnn.InputError) as caught:
            session.run(None, feeds)
        message = str(caught.value)
        assert message.startswith(f'{op} "') and f" {value} " in f"{message} ", message
        assert f'"in{slot}"' in message, message  # names the indices tensor
        expected = numpy_error(model, feeds)
        # The same message as numpy's (Gather's names the bad value where numpy gives the range).
        common = expected.split(", got")[0] if op == "Gather" else expected
        assert message.startswith(common), (message, expected)
        # The session keeps working, with exact results.
        np.testing.assert_array_equal(session.run(None, good)[0], want)


RNN_OPS = ["RNN", "GRU", "LSTM"]


@pytest.mark.parametrize("variant", ["steps", "fused"])
@pytest.mark.parametrize("op", RNN_OPS)
def test_bad_sequence_lens_raise(op, variant, monkeypatch):
    from wgnn.backends.wgpu.rnn import RecurrentGpu

    monkeypatch.setattr(RecurrentGpu, "force_variant", variant)
    gates = {"RNN": 1, "GRU": 3, "LSTM": 4}[op] * 4
    inputs = [rand(3, 2, 2), Const(rand(1, gates, 2)), Const(rand(1, gates, 4)), Const(rand(1, 2 * gates)),
              ints([3, 1], np.int32)]
    outputs = 3 if op == "LSTM" else 2
    model = wgnn.convert(make_model(op, inputs, {"hidden_size": 4, "direction": "forward"}, outputs=outputs,
                                    opset=14))
    good = feeds_of(inputs)
    want = session_for(model, "numpy").run(None, good)
    for backend in GPUS:
        session = session_for(model, backend)
        assert not gpu_fallbacks(session)
        for got, expected in zip(session.run(None, good), want):
            np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)
        for lens, value in (([4, 1], 4), ([3, -1], -1)):
            numpy_error(model, feeds_of(inputs, 4, lens))  # numpy raises too
            with pytest.raises(wgnn.InputError, match=rf'{op} ".*sequence_lens\[\d\] = {value} must lie in \[0, 3\]'):
                session.run(None, feeds_of(inputs, 4, lens))
            for got, expected in zip(session.run(None, good), want):
                np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)


def gather_chain():
    """data -> Gather(i1) "first" -> Gather(i2) "second" -> Relu: two validating steps in a segment."""
    graph = helper.make_graph(
        [helper.make_node("Gather", ["data", "i1"], ["g1"], name="first", axis=0),
         helper.make_node("Gather", ["g1", "i2"], ["g2"], name="second", axis=1),
         helper.make_node("Relu", ["g2"], ["y"], name="relu")], "chain",
        [helper.make_tensor_value_info("data", TensorProto.FLOAT, [4, 3]),
         helper.make_tensor_value_info("i1", TensorProto.INT64, [2]),
         helper.make_tensor_value_info("i2", TensorProto.INT64, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    return wgnn.convert(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]))


@pytest.mark.parametrize("backend", GPUS)
def test_first_bad_step_is_named_and_status_read_once_per_run(backend):
    model = gather_chain()
    session = session_for(model, backend)
    gpu = session.session.backends[0]
    data = rand(4, 3)
    feeds = {"data": data, "i1": ints([3, 0]), "i2": ints([2, -3])}
    want = np.maximum(data[[3, 0]][:, [2, 0]], 0)
    reads = gpu.status_reads
    np.testing.assert_array_equal(session.run(None, feeds)[0], want)
    assert gpu.status_reads == reads + 1  # one readback for the segment, not one per step
    with pytest.raises(wgnn.InputError, match=r'Gather "second": .*got 3 in "i2"'):
        session.run(None, {**feeds, "i2": ints([0, 3])})
    # Both steps bad: the first one is named (with either of its bad values: the first report wins).
    with pytest.raises(wgnn.InputError, match=r'Gather "first": .*got (-5|9) in "i1"'):
        session.run(None, {**feeds, "i1": ints([-5, 9]), "i2": ints([0, 3])})
    np.testing.assert_array_equal(session.run(None, feeds)[0], want)


@pytest.mark.parametrize("backend", GPUS)
def test_checking_runs_allocate_nothing(backend, monkeypatch):
    session = session_for(gather_chain(), backend)
    feeds = {"data": rand(4, 3), "i1": ints([3, 0]), "i2": ints([2, -3])}
    want = session.run(None, feeds)[0]
    device = session.session.backends[0].device

    def forbidden(*args, **kwargs):
        raise AssertionError("run() must not create GPU resources")

    for method in ("create_buffer", "create_compute_pipeline", "create_shader_module", "create_bind_group"):
        monkeypatch.setattr(type(device), method, forbidden)
    with pytest.raises(wgnn.InputError, match="got 3"):
        session.run(None, {**feeds, "i2": ints([3, 0])})
    np.testing.assert_array_equal(session.run(None, feeds)[0], want)


@pytest.mark.parametrize("backend", GPUS)
def test_per_step_submissions_and_profiling_check_too(backend):
    model = gather_chain()
    session = session_for(model, backend)
    feeds = {"data": rand(4, 3), "i1": ints([3, 0]), "i2": ints([0, 7])}
    seen = []
    with pytest.raises(wgnn.InputError, match=r'Gather "second": .*got 7'):
        session.run(None, feeds, callback=lambda info: seen.append(info) or True)  # one submission per step
    assert seen
    gpu = session.session.backends[0]
    gpu.enable_profiling(8)
    try:
        with pytest.raises(wgnn.InputError, match=r'Gather "second": .*got 7'):
            session.run(None, feeds)
    finally:
        gpu.disable_profiling()


@pytest.mark.parametrize("backend", GPUS)
def test_no_status_readback_without_runtime_checks(backend):
    # Relu validates nothing: no status buffer at all.
    model = wgnn.convert(make_model("Relu", [rand(2, 3)], opset=14))
    session = session_for(model, backend)
    for _ in range(2):
        session.run(None, {"in0": rand(2, 3)})
    gpu = session.session.backends[0]
    assert gpu.status_reads == 0 and gpu.status_buffers is None
    # Indices known at resize were checked by the shape functions: the kernels bind the status
    # but nothing is read back (70 constant indices: GatherGpu rather than raster regions).
    known = rng.integers(-5, 5, 70)
    model = wgnn.convert(make_model("Gather", [rand(5, 2), Const(known)], {"axis": 0}, opset=13))
    data = rand(5, 2)
    session = session_for(model, backend)
    np.testing.assert_array_equal(session.run(None, {"in0": data})[0], data[known])
    constant = wgnn.convert(make_model("GatherElements", [rand(3, 4), Const(ints([[3, -4], [0, 1]]))],
                                       {"axis": 1}, opset=13))
    constant_session = session_for(constant, backend)
    constant_session.run(None, {"in0": rand(3, 4)})
    for s in (session, constant_session):
        assert not gpu_fallbacks(s)
        assert s.session.backends[0].status_reads == 0


def test_status_id_slot_is_reserved():
    """Params slot 63 carries the status id: a validating kernel cannot use it."""
    from wgnn.backends.wgpu.backend import PARAM_INTS, STATUS_SLOT

    assert STATUS_SLOT == PARAM_INTS - 1
    model = wgnn.convert(make_model("Gather", [rand(5, 3), ints([0, 1])], {"axis": 0}, opset=13))
    session = session_for(model, GPUS[0])
    (step, execution), = session.session.segments[0].steps
    with pytest.raises(wgnn.WgnnError, match="slot 63 is the status id"):
        execution.dispatch("movement/gather.wgsl", [step.inputs[0], step.inputs[1], step.outputs[0]],
                           [1] * PARAM_INTS, 1, status="check")

