"""Zoo models on every GPU adapter: no op falls back to the CPU, results match onnxruntime
(fp32: max relative error <= 1e-3), and a resize to another batch compiles no new pipeline."""
from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
from helpers import gpu_adapters
from wgnn.backends.wgpu.loader import pipeline_cache
from wgnn.models.zoo import build, example_inputs

import wgnn

ADAPTERS = [a["index"] for a in gpu_adapters()]
pytestmark = pytest.mark.skipif(not ADAPTERS, reason="no GPU adapter (install mesa-vulkan-drivers)")
CASES = [("mobilenetv2", {}), ("resnet", {}), ("bert", {}), ("unet", {}),
         ("unet", {"resize_mode": "nearest", "pad_mode": "reflect"})]


@pytest.mark.parametrize("adapter", ADAPTERS)
@pytest.mark.parametrize(("name", "options"), CASES, ids=[f"{n}{'-' + '-'.join(o.values()) if o else ''}"
                                                          for n, o in CASES])
def test_zoo_model_on_gpu(name, options, adapter):
    model = build(name, **options)
    reference = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    session = wgnn.InferenceSession(model, config=wgnn.Config(providers=("wgpu", "numpy"), adapter=adapter))
    cache = pipeline_cache(session.session.backends[0].context)
    compiled = None
    for batch in (1, 2):
        feeds = example_inputs(model, batch, seq=5 + batch, seed=batch)
        got = session.run(None, feeds)
        report = session.report()
        assert report["fallbacks"] == [], f"{name}: ops ran on the CPU: {report['fallbacks']}"
        assert list(report["ops_per_backend"]) == ["wgpu"]
        for want, have in zip(reference.run(None, feeds), got, strict=True):
            assert have.shape == want.shape and have.dtype == want.dtype
            error = float(np.abs(have.astype(np.float64) - want).max() / np.abs(want).max())
            assert error <= 1e-3, f"{name} batch {batch} on adapter {adapter}: max rel error {error:.3g}"
        if compiled is None:
            compiled = cache.compiled
        else:
            assert cache.compiled == compiled, "resizing to a new batch compiled pipelines"
