"""LSTM, GRU and RNN on every backend.

References: onnx.reference for the cases it implements (directions, initial states, layout 1,
peepholes, GRU linear_before_reset, W/R/B as graph inputs); onnxruntime where onnx.reference
ignores the attribute or input (sequence_lens, clip, activations, input_forget). onnxruntime
refuses layout 1, so layout 1 is checked against onnx.reference only.
"""
import numpy as np
import pytest
from helpers import Const, assert_close, check_op, gpu_adapters, make_model, reference_outputs, run_wgnn, session_for

import wgnn

rng = np.random.default_rng(0)
GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}
OPS = tuple(GATES)
GPUS = [f"wgpu:{a['index']}" for a in gpu_adapters()]
DIRECTIONS = ("forward", "reverse", "bidirectional")


def r(*shape, scale=0.5):
    return (rng.standard_normal(shape) * scale).astype(np.float32)


@pytest.fixture(autouse=True, params=["steps", "fused"])
def variant(request, monkeypatch):
    """Every case on both GPU kernels (software adapters pick "steps" by themselves)."""
    from wgnn.backends.wgpu.rnn import RecurrentGpu

    monkeypatch.setattr(RecurrentGpu, "force_variant", request.param)
    return request.param


def dirs_of(direction):
    return 2 if direction == "bidirectional" else 1


def rnn_inputs(op, direction="forward", *, steps=4, batch=3, size=3, hidden=5, layout=0, lens=None,
               initial=True, bias=True, peepholes=False, const=True, initial_scale=0.5):
    """X, W, R, B, sequence_lens, initial_h (, initial_c, P) of an ONNX recurrent node."""
    dirs, gh = dirs_of(direction), GATES[op] * hidden
    wrap = Const if const else (lambda v: v)
    x = r(steps, batch, size) if layout == 0 else r(batch, steps, size)
    state = (dirs, batch, hidden) if layout == 0 else (batch, dirs, hidden)
    inputs = [x, wrap(r(dirs, gh, size)), wrap(r(dirs, gh, hidden)), wrap(r(dirs, 2 * gh)) if bias else None,
              None if lens is None else np.asarray(lens, np.int32),
              r(*state, scale=initial_scale) if initial else None]
    if op == "LSTM":
        inputs.append(r(*state, scale=initial_scale) if initial else None)
        inputs.append(Const(r(dirs, 3 * hidden)) if peepholes else None)
    while inputs[-1] is None:
        inputs.pop()
    return inputs


def outputs_of(op):
    return 3 if op == "LSTM" else 2


def check_rnn(op, inputs, attrs, *, opset=14, reference="onnx", **options):
    hidden = inputs[2].value.shape[-1] if isinstance(inputs[2], Const) else inputs[2].shape[-1]
    return check_op(op, inputs, {"hidden_size": hidden, **attrs}, outputs=outputs_of(op), opset=opset,
                    reference=reference, **options)


# ------------------------------------------------------------------ directions, states, shapes
@pytest.mark.parametrize("direction", DIRECTIONS)
@pytest.mark.parametrize("op", OPS)
def test_directions(op, direction):
    attrs = {"direction": direction}
    check_rnn(op, rnn_inputs(op, direction, batch=1, hidden=5, initial=False), attrs)
    check_rnn(op, rnn_inputs(op, direction, batch=3, hidden=7, steps=5), attrs)
    check_rnn(op, rnn_inputs(op, direction, batch=2, hidden=4, bias=False, steps=1), attrs)


@pytest.mark.parametrize("op", OPS)
def test_runtime_weights_and_states(op):
    # W, R, B fed at run time (as the ONNX node tests do): the converter unsqueezes W in the graph.
    inputs = rnn_inputs(op, "bidirectional", const=False, hidden=6)
    check_rnn(op, inputs, {"direction": "bidirectional"})


@pytest.mark.parametrize("opset", [7, 14, 22])
@pytest.mark.parametrize("op", OPS)
def test_opsets(op, opset):
    check_rnn(op, rnn_inputs(op, "reverse", hidden=5), {"direction": "reverse"}, opset=opset)


# ------------------------------------------------------------------------- sequence_lens
@pytest.mark.parametrize("direction", DIRECTIONS)
@pytest.mark.parametrize("op", OPS)
def test_sequence_lens(op, direction):
    # Unequal lengths: zeros in Y past each end, Y_h (Y_c) from the last valid step; reverse
    # starts at each sequence's last valid step.
    attrs = {"direction": direction}
    check_rnn(op, rnn_inputs(op, direction, steps=5, lens=[5, 2, 3], hidden=7), attrs, reference="ort")
    check_rnn(op, rnn_inputs(op, direction, steps=4, batch=1, lens=[3], initial=False), attrs, reference="ort")


@pytest.mark.parametrize("op", OPS)
def test_sequence_length_zero(op):
    # onnxruntime gives zero states (not the initial ones) for an empty sequence.
    inputs = rnn_inputs(op, "bidirectional", steps=3, lens=[0, 3, 1], peepholes=True)
    check_rnn(op, inputs, {"direction": "bidirectional"}, reference="ort")


def test_sequence_lens_out_of_range():
    inputs = rnn_inputs("RNN", steps=3, lens=[4, 1, 2])
    model = make_model("RNN", inputs, {"hidden_size": 5}, outputs=2, opset=14)
    feeds = {f"in{i}": x for i, x in enumerate(inputs) if x is not None and not isinstance(x, Const)}
    with pytest.raises(wgnn.InputError, match=r"sequence_lens \[4, 1, 2\] must lie in \[0, 3\]"):
        run_wgnn(model, feeds, "numpy")


# ------------------------------------------------------------------------------ layout 1
@pytest.mark.parametrize("direction", DIRECTIONS)
@pytest.mark.parametrize("op", OPS)
def test_layout_batch_first(op, direction):
    inputs = rnn_inputs(op, direction, layout=1, steps=3, batch=3, hidden=5, peepholes=True)
    check_rnn(op, inputs, {"direction": direction, "layout": 1})
    check_rnn(op, rnn_inputs(op, direction, layout=1, batch=1, initial=False), {"direction": direction, "layout": 1})


@pytest.mark.parametrize("op", OPS)
def test_layout_batch_first_with_sequence_lens(op):
    # onnxruntime refuses layout 1 and onnx.reference ignores sequence_lens: the reference is
    # onnxruntime on the same data in layout 0, transposed.
    direction = "bidirectional"
    inputs = rnn_inputs(op, direction, steps=4, lens=[2, 4, 0], peepholes=True)
    attrs = {"hidden_size": 5, "direction": direction}
    feeds0 = {f"in{i}": x for i, x in enumerate(inputs) if x is not None and not isinstance(x, Const)}
    expected = reference_outputs(make_model(op, inputs, attrs, outputs=outputs_of(op), opset=14), feeds0, "ort")
    expected = [expected[0].transpose(2, 0, 1, 3)] + [e.transpose(1, 0, 2) for e in expected[1:]]
    batch_first = [x.transpose(1, 0, 2).copy() if i in (0, 5, 6) and x is not None else x for i, x in enumerate(inputs)]
    model = make_model(op, batch_first, {**attrs, "layout": 1}, outputs=outputs_of(op), opset=14)
    feeds = {f"in{i}": x for i, x in enumerate(batch_first) if x is not None and not isinstance(x, Const)}
    for backend in ["numpy"] + GPUS:
        for got, want in zip(run_wgnn(model, feeds, backend), expected):
            assert_close(got, want, rtol=1e-4, atol=1e-5, what=f"{op} layout 1 on {backend}")


# ------------------------------------------------------------------------- cell variants
@pytest.mark.parametrize("direction", DIRECTIONS)
def test_lstm_peepholes(direction):
    check_rnn("LSTM", rnn_inputs("LSTM", direction, peepholes=True, hidden=7), {"direction": direction})


@pytest.mark.parametrize("direction", ["forward", "bidirectional"])
def test_lstm_input_forget(direction):
    inputs = rnn_inputs("LSTM", direction, peepholes=True, lens=[4, 1, 3])
    check_rnn("LSTM", inputs, {"direction": direction, "input_forget": 1}, reference="ort")


@pytest.mark.parametrize("direction", DIRECTIONS)
@pytest.mark.parametrize("linear_before_reset", [0, 1])
def test_gru_linear_before_reset(linear_before_reset, direction):
    attrs = {"direction": direction, "linear_before_reset": linear_before_reset}
    check_rnn("GRU", rnn_inputs("GRU", direction, hidden=7), attrs)
    check_rnn("GRU", rnn_inputs("GRU", direction, hidden=5, lens=[2, 4, 3]), attrs, reference="ort")


@pytest.mark.parametrize("op", OPS)
def test_clip(op):
    # Large weights push the gate inputs past the clip; a large initial cell state checks that
    # the LSTM's h(c) is not clipped.
    inputs = rnn_inputs(op, "bidirectional", hidden=5, initial_scale=3.0)
    inputs[1] = Const(inputs[1].value * 4)
    check_rnn(op, inputs, {"direction": "bidirectional", "clip": 0.7}, reference="ort")


ACTIVATION_CASES = {
    # ONNX's alphas/betas go, in order, to the functions that take one; the rest keep defaults.
    "LSTM": [
        {"activations": ["HardSigmoid", "Elu", "Softsign", "Sigmoid", "ScaledTanh", "Softplus"],
         "activation_alpha": [0.3, 0.7, 1.5], "activation_beta": [0.4, 0.8]},
        {"activations": ["Sigmoid", "Affine", "Tanh"], "activation_alpha": [0.5], "activation_beta": [0.25]},
        {"activations": ["ThresholdedRelu", "Softsign", "LeakyRelu"], "activation_alpha": [-0.5, 0.2]},
        {"activations": ["HardSigmoid", "Tanh", "Relu"]},  # default alpha 0.2, beta 0.5
    ],
    "GRU": [
        {"activations": ["HardSigmoid", "LeakyRelu", "Sigmoid", "Elu"], "activation_alpha": [0.3, 0.1, 0.9],
         "activation_beta": [0.6]},
        {"activations": ["sigmoid", "thresholdedrelu", "Sigmoid", "LeakyRelu"], "activation_alpha": [0.2]},
    ],
    "RNN": [
        {"activations": ["Relu", "Softsign"]},
        {"activations": ["Affine", "ScaledTanh"], "activation_alpha": [0.8, 1.2], "activation_beta": [0.1, 0.6]},
        {"activations": ["Softplus", "Tanh"]},
    ],
}


@pytest.mark.parametrize("op", OPS)
def test_activations(op):
    per_dir = {"RNN": 1, "GRU": 2, "LSTM": 3}[op]
    for attrs in ACTIVATION_CASES[op]:
        direction = "bidirectional" if len(attrs["activations"]) == 2 * per_dir else "reverse"
        inputs = rnn_inputs(op, direction, hidden=5, lens=[4, 3, 1], peepholes=True)
        check_rnn(op, inputs, {"direction": direction, **attrs}, reference="ort")


# -------------------------------------------------------------------- optional outputs
def _run_with_outputs(op, inputs, attrs, used, opset=14):
    """The node with only the outputs whose index is in `used` (others named "")."""
    model = make_model(op, inputs, attrs, outputs=outputs_of(op), opset=opset)
    node = model.graph.node[0]
    for i in range(len(node.output)):
        if i not in used:
            node.output[i] = ""
    kept = [o for i, o in enumerate(model.graph.output) if i in used]
    del model.graph.output[:]
    model.graph.output.extend(kept)
    feeds = {f"in{i}": x for i, x in enumerate(inputs) if x is not None and not isinstance(x, Const)}
    expected = reference_outputs(model, feeds, "ort")
    for backend in ["numpy"] + GPUS:
        got = run_wgnn(model, feeds, backend)
        assert len(got) == len(expected)
        for g, e in zip(got, expected):
            assert_close(g, e, rtol=1e-4, atol=1e-5, what=f"{op} on {backend}")


@pytest.mark.parametrize("used", [(1,), (0,), (2,), (1, 2), (0, 2)])
def test_lstm_output_subsets(used):
    inputs = rnn_inputs("LSTM", "bidirectional", lens=[4, 2, 3])
    _run_with_outputs("LSTM", inputs, {"hidden_size": 5, "direction": "bidirectional"}, used)


@pytest.mark.parametrize("op", ["GRU", "RNN"])
@pytest.mark.parametrize("used", [(0,), (1,)])
def test_output_subsets(op, used):
    _run_with_outputs(op, rnn_inputs(op, "reverse", lens=[1, 4, 2]), {"hidden_size": 5, "direction": "reverse"}, used)


# --------------------------------------------------------------------------- GPU edges
def test_hidden_larger_than_the_workgroup():
    # 70 hidden units: each invocation owns two of them; GRU's two-phase step across them.
    for op in OPS:
        check_rnn(op, rnn_inputs(op, "bidirectional", steps=3, batch=2, size=2, hidden=70, lens=[3, 2]),
                  {"direction": "bidirectional"}, reference="ort", rtol=1e-4, atol=1e-5)


def _fallback_reasons(session) -> list[str]:
    return [reason for f in session.report()["fallbacks"] for reason in f["reasons"]]


@pytest.mark.skipif(not GPUS, reason="no GPU adapter")
def test_gpu_limits(variant, monkeypatch):
    """Hidden sizes past the fused kernel's workgroup memory run the per-step kernel; with more
    steps than it dispatches, and sequences past llvmpipe's loop budget, the CPU runs them
    (reported as fallbacks)."""
    from wgnn.backends.wgpu.rnn import RecurrentGpu

    if variant == "fused":
        pytest.skip("the kernel choice by size is the subject here")
    monkeypatch.setattr(RecurrentGpu, "force_variant", None)
    wide = rnn_inputs("RNN", steps=2, batch=1, size=2, hidden=520, initial=False, bias=False)
    check_rnn("RNN", wide, {}, reference="ort", rtol=1e-4, atol=1e-5)
    wide_long = [r(520, 1, 1), Const(r(1, 520, 1)), Const(r(1, 520, 520, scale=0.05))]
    long = [r(9000, 1, 1), Const(r(1, 2, 1)), Const(r(1, 2, 2))]
    for inputs, reason in ((wide_long, "workgroup-memory"), (long, "loop iterations")):
        model = make_model("RNN", inputs, {"hidden_size": inputs[2].value.shape[2]}, outputs=2, opset=14)
        expected = reference_outputs(model, {"in0": inputs[0]}, "ort")
        for backend in GPUS:
            session = session_for(wgnn.convert(model), backend)
            got = session.run(None, {"in0": inputs[0]})
            for g, e in zip(got, expected):
                assert_close(g, e, rtol=1e-4, atol=1e-5, what=f"RNN on {backend}")
            software = "llvmpipe" in session.session.backends[0].context.info.name.lower()
            if reason != "loop iterations" or software:
                assert any(reason in text for text in _fallback_reasons(session)), _fallback_reasons(session)


# --------------------------------------------------------------------------------- errors
def test_conversion_errors():
    inputs = rnn_inputs("LSTM")
    with pytest.raises(wgnn.ConversionError, match="activation 'Swish' is not supported"):
        wgnn.convert(make_model("LSTM", inputs, {"hidden_size": 5, "activations": ["Sigmoid", "Swish", "Tanh"]},
                                outputs=3, opset=14))
    with pytest.raises(wgnn.ConversionError, match="2 activations given; LSTM needs 3"):
        wgnn.convert(make_model("LSTM", inputs, {"hidden_size": 5, "activations": ["Sigmoid", "Tanh"]},
                                outputs=3, opset=14))
    bidi = rnn_inputs("GRU", "bidirectional")
    with pytest.raises(wgnn.ConversionError, match="GRU bidirectional needs 4"):
        wgnn.convert(make_model("GRU", bidi, {"hidden_size": 5, "direction": "bidirectional",
                                              "activations": ["Sigmoid", "Tanh"]}, outputs=2, opset=14))
    with pytest.raises(wgnn.ConversionError, match="direction 'sideways'"):
        wgnn.convert(make_model("RNN", rnn_inputs("RNN"), {"hidden_size": 5, "direction": "sideways"}, opset=14))


def test_shape_errors():
    inputs = rnn_inputs("GRU")
    model = make_model("GRU", inputs, {"hidden_size": 6}, outputs=2, opset=14)
    with pytest.raises(wgnn.ShapeError, match="hidden_size 6 disagrees with R's last axis 5"):
        run_wgnn(model, {"in0": inputs[0], "in5": inputs[5]}, "numpy")
    inputs = rnn_inputs("RNN")
    inputs[5] = r(1, 2, 5)
    model = make_model("RNN", inputs, {"hidden_size": 5}, outputs=2, opset=14)
    with pytest.raises(wgnn.ShapeError, match=r"expected \(1, 3, 5\)"):
        run_wgnn(model, {"in0": inputs[0], "in5": inputs[5]}, "numpy")
