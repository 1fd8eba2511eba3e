"""Zoo models end to end: valid ONNX, and wgnn's numpy backend agrees with onnxruntime for two
batch sizes through one session (the second run resizes)."""
from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from wgnn.models.format import model_to_bytes, read_model
from wgnn.models.zoo import ZOO, build, example_inputs, parse_spec

import wgnn

CASES = [(name, {}) for name in ZOO] + [("unet", {"resize_mode": "nearest", "pad_mode": "reflect"})]
IDS = [name if not options else f"{name}-{'-'.join(map(str, options.values()))}" for name, options in CASES]
BATCHES = (1, 3)


def max_rel_error(got: np.ndarray, want: np.ndarray) -> float:
    return float(np.abs(got.astype(np.float64) - want).max() / np.abs(want).max())


@pytest.mark.parametrize(("name", "options"), CASES, ids=IDS)
def test_zoo_model_is_valid_onnx_with_symbolic_batch(name, options):
    model = build(name, **options)
    onnx.checker.check_model(model, full_check=True)
    assert model.opset_import[0].version == 17
    for vi in model.graph.input:
        assert vi.type.tensor_type.shape.dim[0].dim_param, f"{name}: input {vi.name} has a fixed batch"
    # Built from fixed seeds: the same model every time.
    assert build(name, **options).SerializeToString() == model.SerializeToString()


@pytest.mark.parametrize(("name", "options"), CASES, ids=IDS)
def test_zoo_model_matches_onnxruntime(name, options):
    model = build(name, **options)
    reference = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    # Through the file format, as a user would load a converted model.
    session = wgnn.InferenceSession(read_model(model_to_bytes(wgnn.convert(model))), providers=["numpy"])
    assert [o.name for o in session.get_outputs()] == [o.name for o in model.graph.output]
    for batch in BATCHES:
        feeds = example_inputs(model, batch, seq=4 + batch, seed=batch)  # BERT's seq dim changes too
        expected = reference.run(None, feeds)
        got = session.run(None, feeds)
        for out, want, have in zip(model.graph.output, expected, got, strict=True):
            assert have.shape == want.shape and have.dtype == want.dtype, \
                f"{name} batch {batch} {out.name}: {have.dtype}{have.shape} != {want.dtype}{want.shape}"
            assert np.abs(want).max() > 1e-3, f"{name}: degenerate reference output"
            error = max_rel_error(have, want)
            assert error <= 1e-4, f"{name} batch {batch} {out.name}: max rel error {error:.3g}"


def test_bert_mask_changes_the_output():
    """The attention mask must reach the scores: masking keys changes the unmasked positions."""
    model = build("bert")
    session = wgnn.InferenceSession(model, providers=["numpy"])
    feeds = example_inputs(model, 1, seq=6)
    full = session.run(None, feeds)[0]
    feeds["attention_mask"] = feeds["attention_mask"].copy()
    feeds["attention_mask"][0, 3:] = 0
    masked = session.run(None, feeds)[0]
    assert np.abs(full[0, :3] - masked[0, :3]).max() > 1e-3


def test_example_inputs():
    feeds = example_inputs(build("bert"), 3, seq=5)
    assert feeds["input_ids"].shape == (3, 5) and feeds["input_ids"].dtype == np.int64
    assert feeds["input_ids"].min() >= 0 and feeds["input_ids"].max() < 100
    mask = feeds["attention_mask"]
    assert mask[0].all() and not mask[1:].all() and mask[:, 0].all()
    image = example_inputs(build("resnet"), 2)["input"]
    assert image.shape == (2, 3, 32, 32) and image.dtype == np.float32


def test_unknown_zoo_name():
    with pytest.raises(KeyError, match="mobilenetv2"):
        build("vgg")


def test_parse_spec_takes_the_builders_options():
    assert parse_spec("resnet") == ("resnet", {})
    assert parse_spec("bert:hidden=256, heads=4,layers=4,ffn=1024,max_positions=128") == (
        "bert", {"hidden": 256, "heads": 4, "layers": 4, "ffn": 1024, "max_positions": 128})
    # int | str options: a number is a fixed dim, a name a symbolic one; str options stay strings
    assert parse_spec("mobilenetv2:size=64,batch=2") == ("mobilenetv2", {"size": 64, "batch": 2})
    assert parse_spec("mobilenetv2:batch=B") == ("mobilenetv2", {"batch": "B"})
    assert parse_spec("unet:resize_mode=nearest,size=-8") == ("unet", {"resize_mode": "nearest", "size": -8})
    name, options = parse_spec("mobilenetv2:size=64,batch=2")
    shape = [d.dim_value for d in build(name, **options).graph.input[0].type.tensor_type.shape.dim]
    assert shape == [2, 3, 64, 64]


@pytest.mark.parametrize(("spec", "fragments"), [
    ("vgg", ["no zoo model 'vgg'", "mobilenetv2"]),
    ("bert:hidden", ["'hidden' is not KEY=VALUE", "heads (int)"]),
    ("bert:=3", ["'=3' is not KEY=VALUE"]),
    ("bert:depth=3", ["zoo:bert has no option 'depth'", "layers (int)"]),
    ("resnet:size=big", ["option size takes an integer, got 'big'"]),
    ("resnet:size=1.5", ["option size takes an integer, got '1.5'"]),
    ("resnet:size=32,size=64", ["'size' given twice"]),
])
def test_parse_spec_refuses_what_the_builder_does_not_take(spec, fragments):
    with pytest.raises(ValueError) as caught:
        parse_spec(spec)
    for fragment in fragments:
        assert fragment in str(caught.value)
