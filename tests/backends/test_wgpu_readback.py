"""A run's outputs come back through one mappable staging buffer, copied to in the run's own
submission (backends/wgpu/backend.py _stage / _read_staged): outputs of every layout and type,
texture-stored ones (read on their own), empty ones, the index status next to them, and the
buffer grown when a resize makes the outputs larger."""
import numpy as np
import pytest
from helpers import gpu_adapters
from onnx import TensorProto, helper, numpy_helper

import wgnn

ADAPTERS = [a["index"] for a in gpu_adapters()]
pytestmark = pytest.mark.skipif(not ADAPTERS, reason="no GPU adapter (install mesa-vulkan-drivers)")
rng = np.random.default_rng(5)


def model():
    """Outputs: an NC4HW4 conv result (5 channels), a linear float32 reduction, an int64 ArgMax,
    an empty Slice and a Gather whose indices are checked on the GPU."""
    nodes = [helper.make_node("Conv", ["x", "w"], ["conv"], pads=[1, 1, 1, 1]),
             helper.make_node("ReduceSum", ["x"], ["total"], keepdims=0),
             helper.make_node("ArgMax", ["x"], ["argmax"], axis=1),
             helper.make_node("Slice", ["x", "zero", "zero", "two"], ["empty"]),
             helper.make_node("Gather", ["table", "ids"], ["rows"], axis=0)]
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, "H", "W"]),
              helper.make_tensor_value_info("ids", TensorProto.INT64, ["K"])]
    outputs = [helper.make_tensor_value_info(n, t, None) for n, t in
               [("conv", TensorProto.FLOAT), ("total", TensorProto.FLOAT), ("argmax", TensorProto.INT64),
                ("empty", TensorProto.FLOAT), ("rows", TensorProto.FLOAT)]]
    inits = [numpy_helper.from_array(rng.standard_normal((5, 3, 3, 3)).astype(np.float32), "w"),
             numpy_helper.from_array(np.zeros(1, np.int64), "zero"),
             numpy_helper.from_array(np.full(1, 2, np.int64), "two"),
             numpy_helper.from_array(rng.standard_normal((6, 4)).astype(np.float32), "table")]
    graph = helper.make_graph(nodes, "readback", inputs, outputs, inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def feeds(n, size, ids):
    return {"x": rng.standard_normal((n, 3, size, size + 1)).astype(np.float32), "ids": np.array(ids, np.int64)}


@pytest.mark.parametrize("adapter", ADAPTERS)
@pytest.mark.parametrize("storage", ["buffer", "texture"])
def test_outputs_of_every_kind_come_back_through_one_staging_buffer(adapter, storage):
    onnx_model = model()
    gpu = wgnn.InferenceSession(onnx_model, config=wgnn.Config(providers=("wgpu", "numpy"), adapter=adapter,
                                                                storage=storage))
    cpu = wgnn.InferenceSession(onnx_model, providers=["numpy"])
    backend = gpu.session.backends[0]
    sizes = []
    for n, size, ids in [(1, 4, [0, 5]), (1, 4, [-6, 2, 3]), (2, 9, [1]), (1, 3, [2])]:
        x = feeds(n, size, ids)
        for got, want in zip(gpu.run(None, x), cpu.run(None, x), strict=True):
            assert got.dtype == want.dtype and got.shape == want.shape
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
        sizes.append(backend._staging.size)
    assert sizes[0] == sizes[1] and sizes[2] > sizes[1] and sizes[3] == sizes[2]  # grown once, then kept
    reads = backend.status_reads
    with pytest.raises(wgnn.InputError, match=r"rows|Gather"):
        gpu.run(None, feeds(1, 4, [0, 6]))
    assert backend.status_reads == reads + 1
    np.testing.assert_allclose(gpu.run(None, feeds(1, 4, [1]))[4], cpu.run(None, feeds(1, 4, [1]))[4])


def _written_by_a_submission(context, data: bytes):
    """A MAP_READ buffer holding data, copied there in a submission (as a run's outputs are)."""
    usage = context.wgpu.BufferUsage
    source = context.device.create_buffer(size=len(data), usage=usage.COPY_SRC | usage.COPY_DST)
    target = context.device.create_buffer(size=len(data), usage=usage.MAP_READ | usage.COPY_DST)
    context.queue.write_buffer(source, 0, data)
    encoder = context.device.create_command_encoder()
    encoder.copy_buffer_to_buffer(source, 0, target, 0, len(data))
    context.queue.submit([encoder.finish()])
    return target


def _native_reader(context, spin_seconds=0.0):
    """NativeMapReader on this device, or a skip where this wgpu build lacks what it uses (then
    make_reader falls back to map_sync, tested below)."""
    from wgnn.backends.wgpu.readback import NativeMapReader

    try:
        return NativeMapReader(context.device, spin_seconds)
    except Exception as exc:  # any missing internal of another wgpu build
        pytest.skip(f"this wgpu build has no wgpu-native internals for NativeMapReader: {exc}")


@pytest.mark.parametrize("adapter", ADAPTERS)
def test_both_readers_read_what_a_submission_wrote_and_reject_a_buffer_they_cannot_map(adapter):
    import wgpu
    from wgnn.backends.wgpu.context import get_context
    from wgnn.backends.wgpu.readback import MapSyncReader, NativeMapReader

    context = get_context(adapter)
    native = _native_reader(context)
    assert isinstance(context.reader, NativeMapReader)  # where it can be built, it passes the self-check
    # polling without waiting all the way (50 ms) and for less than a read takes (1 us), then waiting
    spinning = [_native_reader(context, seconds) for seconds in (0.05, 1e-6)]
    for reader in (native, *spinning, MapSyncReader(context.wgpu)):
        for size in (16, 4096):
            data = rng.integers(0, 256, size, dtype=np.uint8).tobytes()
            assert reader.read(_written_by_a_submission(context, data), size) == data
    mapped = _written_by_a_submission(context, bytes(64))
    mapped.map_sync(context.wgpu.MapMode.READ)  # already mapped: a second map must fail, not hang
    for reader in (native, spinning[0]):
        with pytest.raises((RuntimeError, wgpu.GPUError), match="mapped"):
            reader.read(mapped, 64)
    mapped.unmap()
    data = rng.integers(0, 256, 64, dtype=np.uint8).tobytes()  # the failed map's callback is not taken for this one
    assert native.read(_written_by_a_submission(context, data), 64) == data


@pytest.mark.parametrize("adapter", ADAPTERS)
def test_make_reader_falls_back_to_map_sync(adapter, monkeypatch):
    """A wgpu build without the internals, or a reader failing its self-check, gets map_sync."""
    from wgnn.backends.wgpu import readback
    from wgnn.backends.wgpu.context import get_context

    context = get_context(adapter)

    class Missing:
        def __init__(self, device):
            raise AttributeError("no wgpuBufferMapAsync here")

    class Wrong:
        def __init__(self, device):
            pass

        def read(self, buffer, size):
            return bytes(size)

    for substitute in (Missing, Wrong):
        monkeypatch.setattr(readback, "NativeMapReader", substitute)
        reader = readback.make_reader(context.wgpu, context.device)
        assert isinstance(reader, readback.MapSyncReader)
        data = rng.integers(0, 256, 32, dtype=np.uint8).tobytes()
        assert reader.read(_written_by_a_submission(context, data), 32) == data


def test_reads_poll_without_waiting_only_where_the_gpu_has_a_core_to_itself(monkeypatch):
    """lavapipe without workers on 2+ cores polls for READBACK_SPIN_SECONDS; with workers (they
    would lose a core to the poller), on one core, and on real GPUs reads wait from the start.
    WGNN_READBACK_SPIN_US overrides the rule."""
    from wgnn.backends.wgpu import context as ctx

    def info(name, adapter_type, backend="Vulkan"):
        return ctx.AdapterInfo(index=0, name=name, backend=backend, adapter_type=adapter_type, driver="", vendor="")

    lavapipe = info("llvmpipe (LLVM 15.0.6, 256 bits)", "CPU")
    monkeypatch.delenv(ctx.READBACK_SPIN_ENV, raising=False)
    monkeypatch.setattr(ctx, "usable_cores", lambda: 2)
    assert ctx.readback_spin_seconds(lavapipe, 0) == ctx.READBACK_SPIN_SECONDS > 0
    assert ctx.readback_spin_seconds(lavapipe, 2) == 0.0
    assert ctx.readback_spin_seconds(info("llvmpipe (LLVM 15.0.6, 256 bits)", "CPU", "OpenGL"), 0) == 0.0
    assert ctx.readback_spin_seconds(info("NVIDIA H100", "DiscreteGPU"), None) == 0.0
    monkeypatch.setattr(ctx, "usable_cores", lambda: 1)
    assert ctx.readback_spin_seconds(lavapipe, 0) == 0.0
    monkeypatch.setenv(ctx.READBACK_SPIN_ENV, "250")
    assert ctx.readback_spin_seconds(info("NVIDIA H100", "DiscreteGPU"), None) == 250e-6
    monkeypatch.setenv(ctx.READBACK_SPIN_ENV, "0")
    assert ctx.readback_spin_seconds(lavapipe, 0) == 0.0
    monkeypatch.setenv(ctx.READBACK_SPIN_ENV, "1ms")
    with pytest.raises(wgnn.InputError, match="WGNN_READBACK_SPIN_US"):
        ctx.readback_spin_seconds(lavapipe, 0)


@pytest.mark.parametrize("adapter", ADAPTERS)
def test_a_session_on_lavapipe_without_workers_polls_for_its_outputs(adapter):
    from wgnn.backends.wgpu.context import READBACK_SPIN_SECONDS, is_lavapipe, usable_cores

    onnx_model = model()
    gpu = wgnn.InferenceSession(onnx_model, config=wgnn.Config(providers=("wgpu", "numpy"), adapter=adapter,
                                                                lavapipe_threads=0))
    context = gpu.session.backends[0].context
    if not is_lavapipe(context.info) or usable_cores() < 2:
        pytest.skip("the rule polls only on lavapipe (Vulkan) with 2 or more cores")
    x = feeds(2, 5, [3, -1])
    for got, want in zip(gpu.run(None, x), wgnn.InferenceSession(onnx_model, providers=["numpy"]).run(None, x),
                         strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    assert context.lavapipe_threads == 0
    assert getattr(context.reader, "spin_seconds", READBACK_SPIN_SECONDS) == READBACK_SPIN_SECONDS
