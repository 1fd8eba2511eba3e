"""End-to-end models built like the real ones issue 6 names: a Silero-VAD-like voice detector, a
CRNN-like OCR recogniser with a dynamic width, a GRU decoder with bool masks and a detector head
with TopK. Each runs on numpy and every GPU adapter against onnxruntime; the GPU may fall back only
where documented (sync points run data-dependent ops on the CPU by design)."""
import numpy as np
import pytest
from helpers import check_model, gpu_adapters, gpu_fallbacks, session_for
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper

import wgnn

RNG = np.random.default_rng(7)


def vi(name, shape, dtype=T.FLOAT):
    return h.make_tensor_value_info(name, dtype, shape)


def weight(name, *shape, scale=0.3):
    return numpy_helper.from_array((RNG.standard_normal(shape) * scale).astype(np.float32), name)


def const(name, value):
    return numpy_helper.from_array(np.asarray(value), name)


def model(nodes, inputs, outputs, initializers, opset=17):
    graph = h.make_graph(nodes, "g", inputs, outputs, initializer=initializers)
    return h.make_model(graph, opset_imports=[h.make_opsetid("", opset)])


def vad_like():
    """audio [B, 1, L] -> If(sr == 16000: stride-4 conv frontend, else stride-2) -> LSTM with state
    in and out -> linear -> sigmoid speech probability per frame."""
    hidden, channels = 8, 6

    def frontend(name, stride):
        conv = h.make_node("Conv", ["audio", f"{name}_w", f"{name}_b"], [f"{name}_conv"], strides=[stride],
                           kernel_shape=[8], pads=[2, 2])
        relu = h.make_node("Relu", [f"{name}_conv"], [f"{name}_out"])
        graph = h.make_graph([conv, relu], name, [], [vi(f"{name}_out", ["B", channels, "F"])],
                             initializer=[weight(f"{name}_w", channels, 1, 8), weight(f"{name}_b", channels)])
        return graph

    nodes = [
        h.make_node("Equal", ["sr", "sr16k"], ["is16k"]),
        h.make_node("If", ["is16k"], ["features"], name="pick_frontend",
                    then_branch=frontend("fast", 4), else_branch=frontend("slow", 2)),
        h.make_node("Transpose", ["features"], ["sequence"], perm=[2, 0, 1]),       # [F, B, C]
        h.make_node("LSTM", ["sequence", "W", "R", "Bias", "", "h0", "c0"], ["Y", "hn", "cn"],
                    hidden_size=hidden),
        h.make_node("Squeeze", ["Y", "axis1"], ["y"]),                               # [F, B, H]
        h.make_node("MatMul", ["y", "head"], ["logit"]),
        h.make_node("Sigmoid", ["logit"], ["prob"]),
    ]
    inits = [const("sr16k", np.int64(16000)), weight("W", 1, 4 * hidden, channels),
             weight("R", 1, 4 * hidden, hidden), weight("Bias", 1, 8 * hidden), const("axis1", np.array([1])),
             weight("head", hidden, 1)]
    return model(nodes, [vi("audio", ["B", 1, "L"]), vi("sr", [], T.INT64), vi("h0", [1, "B", hidden]),
                         vi("c0", [1, "B", hidden])],
                 [vi("prob", ["F", "B", 1]), vi("hn", [1, "B", hidden]), vi("cn", [1, "B", hidden])], inits)


@pytest.mark.parametrize("sr", [16000, 8000])
def test_vad_like_model(sr):
    m = vad_like()
    feeds = {"audio": RNG.standard_normal((2, 1, 64)).astype(np.float32), "sr": np.array(sr, np.int64),
             "h0": np.zeros((1, 2, 8), np.float32), "c0": np.zeros((1, 2, 8), np.float32)}
    _prob, hn, cn = check_model(m, feeds, reference="ort", rtol=1e-4, atol=1e-5)
    # streaming: the returned state goes into the next chunk
    feeds.update(h0=hn, c0=cn)
    check_model(m, feeds, reference="ort", rtol=1e-4, atol=1e-5)


def crnn_like():
    """image [B, 1, 8, W] -> conv/relu/pool to height 1 -> [W', B, C] -> BiLSTM -> classes ->
    LogSoftmax and greedy CTC ids (ArgMax)."""
    hidden, channels, classes = 5, 7, 11
    nodes = [
        h.make_node("Conv", ["image", "cw", "cb"], ["c1"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        h.make_node("Relu", ["c1"], ["r1"]),
        h.make_node("MaxPool", ["r1"], ["p1"], kernel_shape=[8, 2], strides=[8, 2]),   # [B, C, 1, W/2]
        h.make_node("Squeeze", ["p1", "axis2"], ["s1"]),
        h.make_node("Transpose", ["s1"], ["seq"], perm=[2, 0, 1]),                      # [W/2, B, C]
        h.make_node("LSTM", ["seq", "W", "R", "Bias"], ["Y"], hidden_size=hidden, direction="bidirectional"),
        h.make_node("Transpose", ["Y"], ["Yt"], perm=[0, 2, 1, 3]),                     # [T, B, 2, H]
        h.make_node("Shape", ["Yt"], ["yshape"]),
        h.make_node("Slice", ["yshape", "zero", "two"], ["tb"]),
        h.make_node("Concat", ["tb", "minus1"], ["newshape"], axis=0),
        h.make_node("Reshape", ["Yt", "newshape"], ["feat"]),                           # [T, B, 2H]
        h.make_node("MatMul", ["feat", "proj"], ["logits"]),
        h.make_node("LogSoftmax", ["logits"], ["logp"], axis=-1),
        h.make_node("ArgMax", ["logp"], ["ids"], axis=-1, keepdims=0),
    ]
    inits = [weight("cw", channels, 1, 3, 3), weight("cb", channels), const("axis2", np.array([2])),
             weight("W", 2, 4 * hidden, channels), weight("R", 2, 4 * hidden, hidden), weight("Bias", 2, 8 * hidden),
             const("zero", np.array([0])), const("two", np.array([2])), const("minus1", np.array([-1])),
             weight("proj", 2 * hidden, classes)]
    return model(nodes, [vi("image", ["B", 1, 8, "W"])],
                 [vi("logp", ["T", "B", classes]), vi("ids", ["T", "B"], T.INT64)], inits)


def test_crnn_like_model_with_dynamic_width():
    m = crnn_like()
    for width in (12, 20):
        feeds = {"image": RNG.standard_normal((2, 1, 8, width)).astype(np.float32)}
        check_model(m, feeds, reference="ort", rtol=1e-4, atol=1e-4)


@pytest.mark.skipif(not gpu_adapters(), reason="no GPU adapter")
def test_crnn_like_resizes_without_compiling():
    session = session_for(crnn_like(), "wgpu:0")
    session.run(None, {"image": RNG.standard_normal((1, 1, 8, 12)).astype(np.float32)})
    pipelines = session.session.backends[0].pipelines
    compiled = pipelines.compiled
    session.run(None, {"image": RNG.standard_normal((3, 1, 8, 28)).astype(np.float32)})
    assert pipelines.compiled == compiled
    assert not gpu_fallbacks(session)


def gru_decoder():
    """token ids [B, T] int64 and a bool mask -> embedding -> GRU -> masked outputs -> vocab softmax."""
    vocab, dim, hidden = 13, 6, 7
    nodes = [
        h.make_node("Gather", ["embedding", "tokens"], ["emb"]),                       # [B, T, D]
        h.make_node("GRU", ["emb", "W", "R", "Bias", "", "h0"], ["Y", "hn"], hidden_size=hidden, layout=1,
                    linear_before_reset=1),                                          # Y [B, T, 1, H]
        h.make_node("Squeeze", ["Y", "axis2"], ["y"]),
        h.make_node("Unsqueeze", ["mask", "axis2"], ["mask3"]),                      # [B, T, 1]
        h.make_node("Where", ["mask3", "y", "zero"], ["masked"]),
        h.make_node("MatMul", ["masked", "out_proj"], ["logits"]),
        h.make_node("Softmax", ["logits"], ["probs"], axis=-1),
        h.make_node("Not", ["mask"], ["padding"]),
        h.make_node("Cast", ["padding"], ["padding_f"], to=T.FLOAT),
    ]
    inits = [weight("embedding", vocab, dim), weight("W", 1, 3 * hidden, dim), weight("R", 1, 3 * hidden, hidden),
             weight("Bias", 1, 6 * hidden), const("axis2", np.array([2])), const("zero", np.float32(0)),
             weight("out_proj", hidden, vocab)]
    return model(nodes, [vi("tokens", ["B", "T"], T.INT64), vi("mask", ["B", "T"], T.BOOL),
                         vi("h0", ["B", 1, hidden])],
                 [vi("probs", ["B", "T", vocab]), vi("hn", ["B", 1, hidden]), vi("padding_f", ["B", "T"])], inits)


def test_gru_decoder_with_bool_masks():
    tokens = RNG.integers(0, 13, (3, 5)).astype(np.int64)
    mask = np.array([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0], [1, 0, 0, 0, 0]], bool)
    feeds = {"tokens": tokens, "mask": mask, "h0": np.zeros((3, 1, 7), np.float32)}
    check_model(gru_decoder(), feeds, rtol=1e-4, atol=1e-5)  # onnxruntime has no layout=1 GRU


def detector_head():
    """features [B, C, H, W] -> 1x1 conv scores and box deltas -> flatten -> TopK best anchors ->
    their boxes (GatherElements) and a score threshold mask."""
    channels, k = 5, 4
    nodes = [
        h.make_node("Conv", ["features", "score_w", "score_b"], ["score_map"], kernel_shape=[1, 1]),
        h.make_node("Conv", ["features", "box_w", "box_b"], ["box_map"], kernel_shape=[1, 1]),
        h.make_node("Sigmoid", ["score_map"], ["score_prob"]),
        h.make_node("Flatten", ["score_prob"], ["scores"], axis=1),                   # [B, HW]
        h.make_node("Reshape", ["box_map", "box_shape"], ["boxes4"]),                 # [B, 4, HW]
        h.make_node("Transpose", ["boxes4"], ["boxes"], perm=[0, 2, 1]),              # [B, HW, 4]
        h.make_node("TopK", ["scores", "k"], ["top_scores", "top_idx"], axis=1),
        h.make_node("Unsqueeze", ["top_idx", "axis2"], ["idx3"]),
        h.make_node("Expand", ["idx3", "expand_shape"], ["idx_boxes"]),
        h.make_node("GatherElements", ["boxes", "idx_boxes"], ["top_boxes"], axis=1),
        h.make_node("Greater", ["top_scores", "threshold"], ["keep"]),
    ]
    inits = [weight("score_w", 1, channels, 1, 1), weight("score_b", 1), weight("box_w", 4, channels, 1, 1),
             weight("box_b", 4), const("box_shape", np.array([0, 4, -1])), const("k", np.array([k])),
             const("axis2", np.array([2])), const("expand_shape", np.array([1, 1, 4])),
             const("threshold", np.float32(0.5))]
    return model(nodes, [vi("features", ["B", channels, 6, 7])],
                 [vi("top_scores", ["B", k]), vi("top_idx", ["B", k], T.INT64), vi("top_boxes", ["B", k, 4]),
                  vi("keep", ["B", k], T.BOOL)], inits)


def test_detector_head_with_topk():
    feeds = {"features": RNG.standard_normal((2, 5, 6, 7)).astype(np.float32)}
    check_model(detector_head(), feeds, reference="ort", rtol=1e-4, atol=1e-5)


def test_models_need_no_gpu_fallback():
    if not gpu_adapters():
        pytest.skip("no GPU adapter")
    cases = [(crnn_like(), {"image": RNG.standard_normal((1, 1, 8, 12)).astype(np.float32)}),
             (detector_head(), {"features": RNG.standard_normal((1, 5, 6, 7)).astype(np.float32)}),
             (gru_decoder(), {"tokens": np.zeros((1, 3), np.int64), "mask": np.ones((1, 3), bool),
                              "h0": np.zeros((1, 1, 7), np.float32)})]
    for m, feeds in cases:
        session = wgnn.InferenceSession(m.SerializeToString(), providers=["wgpu", "numpy"])
        session.run(None, feeds)
        report = session.session.report()
        assert not report["fallbacks"], report["fallbacks"]


def decoder_layer():
    """A Llama-like decoder layer in opset-24 ops, with a KV cache: x [B, S, 32] and past keys and
    values [B, 2, P, 8] -> RMSNormalization -> Q, K, V projections -> RotaryEmbedding at positions
    P.. -> causal grouped-query Attention (4 query heads on 2 key/value heads) returning the
    present keys and values -> output projection + residual -> RMSNormalization -> SwiGLU MLP +
    residual. Attention, RotaryEmbedding and SwiGLU run through their ONNX function bodies."""
    dim, heads, kv_heads, head, ffn, positions = 32, 4, 2, 8, 48, 16
    angles = np.arange(positions)[:, None] / 10000 ** (np.arange(head // 2) / (head // 2))
    nodes = [
        h.make_node("RMSNormalization", ["x", "g1"], ["h1"], axis=-1),
        h.make_node("MatMul", ["h1", "wq"], ["q"]), h.make_node("MatMul", ["h1", "wk"], ["k"]),
        h.make_node("MatMul", ["h1", "wv"], ["v"]),
        h.make_node("RotaryEmbedding", ["q", "cos", "sin", "pos"], ["qr"], num_heads=heads),
        h.make_node("RotaryEmbedding", ["k", "cos", "sin", "pos"], ["kr"], num_heads=kv_heads),
        h.make_node("Attention", ["qr", "kr", "v", "", "past_k", "past_v"], ["a", "present_k", "present_v"],
                    q_num_heads=heads, kv_num_heads=kv_heads, is_causal=1),
        h.make_node("MatMul", ["a", "wo"], ["o"]), h.make_node("Add", ["x", "o"], ["r1"]),
        h.make_node("RMSNormalization", ["r1", "g2"], ["h2"], axis=-1),
        h.make_node("MatMul", ["h2", "wg"], ["gate"]), h.make_node("MatMul", ["h2", "wu"], ["up"]),
        h.make_node("SwiGLU", ["gate", "up"], ["act"]),
        h.make_node("MatMul", ["act", "wd"], ["d"]), h.make_node("Add", ["r1", "d"], ["y"]),
    ]
    inits = [weight("g1", dim, scale=1.0), weight("g2", dim, scale=1.0), weight("wq", dim, heads * head),
             weight("wk", dim, kv_heads * head), weight("wv", dim, kv_heads * head), weight("wo", heads * head, dim),
             weight("wg", dim, ffn), weight("wu", dim, ffn), weight("wd", ffn, dim),
             const("cos", np.cos(angles).astype(np.float32)), const("sin", np.sin(angles).astype(np.float32))]
    return model(nodes, [vi("x", ["B", "S", dim]), vi("pos", ["B", "S"], T.INT64),
                         vi("past_k", ["B", kv_heads, "P", head]), vi("past_v", ["B", kv_heads, "P", head])],
                 [vi("y", ["B", "S", dim]), vi("present_k", ["B", kv_heads, "T", head]),
                  vi("present_v", ["B", kv_heads, "T", head])], inits, opset=28)


@pytest.mark.parametrize(("batch", "tokens", "past"), [(1, 5, 0), (2, 3, 4), (1, 1, 6)])
def test_decoder_layer_with_kv_cache(batch, tokens, past):
    """Prefill, a continued prefill and one decode step, against onnx's reference."""
    feeds = {"x": RNG.standard_normal((batch, tokens, 32)).astype(np.float32),
             "pos": np.tile(np.arange(past, past + tokens), (batch, 1)).astype(np.int64),
             "past_k": RNG.standard_normal((batch, 2, past, 8)).astype(np.float32),
             "past_v": RNG.standard_normal((batch, 2, past, 8)).astype(np.float32)}
    check_model(decoder_layer(), feeds, rtol=1e-4, atol=1e-5)
