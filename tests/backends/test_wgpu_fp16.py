"""precision="fp16": NC4HW4 feature maps stored as 16-bit floats (rgba16float textures, or f16
buffers where the adapter has shader-f16), arithmetic in f32; accuracy against onnxruntime."""
import numpy as np
import onnxruntime as ort
import pytest
from helpers import gpu_adapters
from wgnn.models.zoo import build, example_inputs

import wgnn

ADAPTERS = gpu_adapters()
pytestmark = pytest.mark.skipif(not ADAPTERS, reason="no GPU adapter (install mesa-vulkan-drivers)")
# fp16 keeps 11 significant bits: a few roundings per layer stay well within 1e-2 of the output range.
FP16_TOLERANCE = 1e-2
TARGETS = [(a["index"], storage) for a in ADAPTERS for storage in ("texture", "buffer")
           if storage == "texture" or "shader-f16" in a["features"]]


@pytest.mark.parametrize("name", ["mobilenetv2", "resnet", "unet"])
@pytest.mark.parametrize(("adapter", "storage"), TARGETS, ids=[f"wgpu{a}-{s}" for a, s in TARGETS])
def test_zoo_models_in_fp16(name, adapter, storage):
    model = build(name)
    feeds = example_inputs(model, 2, seed=3)
    expected = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)
    config = wgnn.Config(providers=("wgpu", "numpy"), adapter=adapter, precision="fp16", storage=storage)
    session = wgnn.InferenceSession(model, config=config)
    got = session.run(None, feeds)
    for want, have in zip(expected, got, strict=True):
        assert have.dtype == np.float32
        error = float(np.abs(have - want).max() / np.abs(want).max())
        assert error <= FP16_TOLERANCE, f"{name} fp16 on adapter {adapter} ({storage}): {error:.3g}"
    placements = session.session.backends[0].placements.values()
    assert placements and all(p.half and p.storage == storage for p in placements)
    assert session.report()["fallbacks"] == []


def test_fp16_halves_feature_map_memory():
    model = build("resnet")
    feeds = example_inputs(model, 2)
    used = {}
    for precision in ("fp32", "fp16"):
        config = wgnn.Config(providers=("wgpu",), precision=precision, storage="texture")
        session = wgnn.InferenceSession(model, config=config)
        session.run(None, feeds)
        used[precision] = session.report()["memory"]["wgpu"]["naive_bytes"]
    assert used["fp16"] < used["fp32"]


@pytest.mark.parametrize("precision", ["fp16", "fp16-arith"])
def test_fp16_buffers_need_shader_f16(precision):
    lacking = [a for a in ADAPTERS if "shader-f16" not in a["features"]]
    if not lacking:
        pytest.skip("every adapter here has shader-f16")
    with pytest.raises(wgnn.WgnnError, match="shader-f16"):
        wgnn.InferenceSession(build("resnet"), config=wgnn.Config(
            providers=("wgpu",), adapter=lacking[0]["index"], precision=precision, storage="buffer"))
