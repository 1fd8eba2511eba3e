"""Per-op callbacks (MNN's debug API): called before and after every op on every backend, tensors
readable on demand (downloaded from the GPU), returning False stops the run."""
import numpy as np
import pytest
from helpers import gpu_adapters
from wgnn.models.zoo import build, example_inputs

import wgnn

TARGETS = [None] + [a["index"] for a in gpu_adapters()]


def session_for(model, adapter):
    providers = ("numpy",) if adapter is None else ("wgpu", "numpy")
    return wgnn.InferenceSession(model, config=wgnn.Config(providers=providers, adapter=adapter))


@pytest.mark.parametrize("adapter", TARGETS, ids=["numpy"] + [f"wgpu{a}" for a in TARGETS[1:]])
def test_callback_sees_every_op_and_its_tensors(adapter):
    model = build("resnet")
    feeds = example_inputs(model, 2)
    session = session_for(model, adapter)
    expected = wgnn.InferenceSession(model, providers=["numpy"]).run(None, feeds)[0]
    seen, tensors = [], {}

    def callback(info):
        seen.append((info.phase, info.op_type, info.name))
        if info.phase == "before":
            assert all(x is not None for x in info.inputs())
            with pytest.raises(wgnn.WgnnError, match="after the op"):
                info.tensor(info.output_names[0])
        else:
            tensors.update(zip(info.output_names, info.outputs()))

    logits = session.run(None, feeds, callback=callback)[0]
    np.testing.assert_allclose(logits, expected, rtol=1e-4, atol=1e-5)
    steps = sum(len(segment.steps) for segment in session.session.segments)
    assert len(seen) == 2 * steps
    assert [p for p, _, _ in seen] == ["before", "after"] * steps
    assert any(op == "Conv" for _, op, _ in seen)
    np.testing.assert_allclose(tensors["logits"], expected, rtol=1e-4, atol=1e-5)
    # Without a callback the session runs as before.
    np.testing.assert_allclose(session.run(None, feeds)[0], expected, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("adapter", TARGETS, ids=["numpy"] + [f"wgpu{a}" for a in TARGETS[1:]])
def test_callback_returning_false_stops_the_run(adapter):
    model = build("resnet")
    feeds = example_inputs(model, 1)
    session = session_for(model, adapter)
    calls = []

    def stop_after_first_conv(info):
        calls.append((info.phase, info.op_type))
        return not (info.phase == "after" and info.op_type == "Conv")

    assert session.run(None, feeds, callback=stop_after_first_conv) == [None]
    steps = sum(len(segment.steps) for segment in session.session.segments)
    assert calls[-1] == ("after", "Conv") and len(calls) < 2 * steps
    assert [op for _, op in calls].count("Conv") == 2  # before and after the first Conv only
    # The session is usable afterwards.
    assert session.run(None, feeds)[0].shape == (1, 10)
