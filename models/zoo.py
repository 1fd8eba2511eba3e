"""Model zoo: small, realistic ONNX models built in code (onnx.helper + numpy, fixed seeds).

Each builder returns an onnx.ModelProto (opset 17) with a symbolic batch dim, random weights
scaled so activations stay O(1), and sizes small enough to run in well under a second on the
numpy backend. They are used by tests, the demo and benchmarks.

    from wgnn.models.zoo import ZOO, example_inputs
    model = ZOO["resnet"]()
    feeds = example_inputs(model, batch=2)
"""
from __future__ import annotations

import math
import re
from collections.abc import Callable

import numpy as np

OPSET = 17  # LayerNormalization needs >= 17


class _Builder:
    """Collects nodes and initializers with unique names; weights come from one seeded generator."""

    def __init__(self, name: str, seed: int):
        from onnx import helper

        self.helper = helper
        self.name = name
        self.rng = np.random.default_rng(seed)
        self.nodes: list = []
        self.initializers: list = []
        self.count = 0

    def fresh(self, hint: str) -> str:
        self.count += 1
        return f"{hint}_{self.count}"

    def const(self, value, hint: str = "c", dtype=np.float32) -> str:
        from onnx import numpy_helper

        name = self.fresh(hint)
        self.initializers.append(numpy_helper.from_array(np.asarray(value, dtype=dtype), name))
        return name

    def normal(self, shape, std: float, hint: str) -> str:
        return self.const(self.rng.standard_normal(shape) * std, hint)

    def op(self, op_type: str, inputs: list[str], hint: str | None = None, outputs: int = 1,
           name: str | None = None, **attrs):
        """Add a node; its outputs get fresh names unless name (of a single output) is given."""
        names = [name] if name and outputs == 1 else [self.fresh(hint or op_type.lower()) for _ in range(outputs)]
        self.nodes.append(self.helper.make_node(op_type, inputs, names, name=names[0], **attrs))
        return names[0] if outputs == 1 else names

    # -- layers -----------------------------------------------------------------------------
    def conv(self, x: str, cin: int, cout: int, k: int, *, stride: int = 1, pad: int = 0, group: int = 1,
             bias: bool = True, gain: float = 2.0, name: str | None = None) -> str:
        # He-style init: std = sqrt(gain / fan_in) keeps the activation scale through ReLU layers.
        fan_in = cin // group * k * k
        w = self.normal((cout, cin // group, k, k), math.sqrt(gain / fan_in), "w")
        inputs = [x, w] + ([self.normal((cout,), 0.1, "b")] if bias else [])
        return self.op("Conv", inputs, "conv", name=name, kernel_shape=[k, k], strides=[stride, stride],
                       pads=[pad] * 4, group=group)

    def batchnorm(self, x: str, c: int) -> str:
        scale = self.const(self.rng.uniform(0.8, 1.2, c), "bn_scale")
        shift = self.const(self.rng.normal(0.0, 0.1, c), "bn_bias")
        mean = self.const(self.rng.normal(0.0, 0.1, c), "bn_mean")
        var = self.const(self.rng.uniform(0.8, 1.2, c), "bn_var")
        return self.op("BatchNormalization", [x, scale, shift, mean, var], "bn", epsilon=1e-5)

    def relu6(self, x: str) -> str:
        return self.op("Clip", [x, self.const(0.0, "min"), self.const(6.0, "max")], "relu6")

    def conv_bn(self, x: str, cin: int, cout: int, k: int, *, stride: int = 1, group: int = 1,
                act: str | None = "relu", gain: float = 2.0) -> str:
        y = self.batchnorm(self.conv(x, cin, cout, k, stride=stride, pad=k // 2, group=group, bias=False,
                                     gain=gain), cout)
        if act == "relu":
            return self.op("Relu", [y])
        if act == "relu6":
            return self.relu6(y)
        return y

    def gemm(self, x: str, cin: int, cout: int, name: str | None = None) -> str:
        w = self.normal((cout, cin), math.sqrt(1.0 / cin), "fc_w")
        return self.op("Gemm", [x, w, self.normal((cout,), 0.1, "fc_b")], "fc", name=name, transB=1)

    def linear(self, x: str, cin: int, cout: int) -> str:
        """x @ W + b as exporters write it for transformers: MatMul then Add."""
        y = self.op("MatMul", [x, self.normal((cin, cout), math.sqrt(1.0 / cin), "w")], "matmul")
        return self.op("Add", [y, self.normal((cout,), 0.02, "b")], "bias")

    def layernorm(self, x: str, c: int, name: str | None = None) -> str:
        scale = self.const(self.rng.uniform(0.9, 1.1, c), "ln_scale")
        shift = self.const(self.rng.normal(0.0, 0.05, c), "ln_bias")
        return self.op("LayerNormalization", [x, scale, shift], "ln", name=name, axis=-1, epsilon=1e-12)

    def model(self, inputs: list, outputs: list):
        helper = self.helper
        graph = helper.make_graph(self.nodes, self.name, inputs, outputs, self.initializers)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                                  producer_name="wgnn.models.zoo")
        model.ir_version = 8
        return model


def _image_io(batch, channels: int, size: int):
    from onnx import TensorProto, helper

    return helper.make_tensor_value_info("input", TensorProto.FLOAT, [batch, channels, size, size])


def _output(name: str, shape: list):
    from onnx import TensorProto, helper

    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


# ------------------------------------------------------------------------------- MobileNetV2
def mobilenetv2(*, size: int = 32, width: int = 16, num_classes: int = 10, batch: int | str = "N",
                seed: int = 0):
    """MobileNetV2-style classifier: Conv+BN+ReLU6 stem, inverted residual blocks (1x1 expand,
    depthwise 3x3 with group=C, linear 1x1 projection, Add when shapes allow), 1x1 head conv,
    GlobalAveragePool, Reshape, Gemm. Input "input" [batch, 3, size, size], output "logits"."""
    b = _Builder("mobilenetv2", seed)
    x = b.conv_bn("input", 3, width, 3, stride=2, act="relu6")
    cin = width
    # (expansion t, output channels, stride): the first block has no expansion, as in the paper.
    for t, cout, stride in ((1, width, 1), (6, 24, 2), (6, 24, 1), (6, 32, 2), (6, 32, 1)):
        hidden = cin * t
        y = x
        if t != 1:
            y = b.conv_bn(y, cin, hidden, 1, act="relu6")
        y = b.conv_bn(y, hidden, hidden, 3, stride=stride, group=hidden, act="relu6")
        y = b.conv_bn(y, hidden, cout, 1, act=None, gain=1.0)
        x = b.op("Add", [x, y], "residual") if stride == 1 and cin == cout else y
        cin = cout
    x = b.conv_bn(x, cin, 64, 1, act="relu6")
    x = b.op("GlobalAveragePool", [x], "gap")
    x = b.op("Reshape", [x, b.const([0, -1], "flat_shape", np.int64)], "flatten")
    b.gemm(x, 64, num_classes, name="logits")
    return b.model([_image_io(batch, 3, size)], [_output("logits", [batch, num_classes])])


# ----------------------------------------------------------------------------------- ResNet
def resnet(*, size: int = 32, width: int = 16, num_classes: int = 10, batch: int | str = "N", seed: int = 0):
    """ResNet-style classifier: Conv 7x7/2 + BN + Relu, MaxPool 3x3/2 pad 1, two basic blocks
    with identity shortcuts, one downsampling block with a strided 1x1 projection shortcut,
    GlobalAveragePool, Flatten, Gemm. Input "input" [batch, 3, size, size], output "logits"."""
    b = _Builder("resnet", seed)
    x = b.conv_bn("input", 3, width, 7, stride=2)
    x = b.op("MaxPool", [x], "maxpool", kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])

    def block(x: str, cin: int, cout: int, stride: int) -> str:
        y = b.conv_bn(x, cin, cout, 3, stride=stride)
        y = b.conv_bn(y, cout, cout, 3, act=None, gain=1.0)
        shortcut = x if stride == 1 and cin == cout else b.conv_bn(x, cin, cout, 1, stride=stride, act=None,
                                                                    gain=1.0)
        return b.op("Relu", [b.op("Add", [y, shortcut], "residual")])

    x = block(x, width, width, 1)
    x = block(x, width, width, 1)
    x = block(x, width, 2 * width, 2)
    x = b.op("GlobalAveragePool", [x], "gap")
    x = b.op("Flatten", [x], "flatten", axis=1)
    b.gemm(x, 2 * width, num_classes, name="logits")
    return b.model([_image_io(batch, 3, size)], [_output("logits", [batch, num_classes])])


# ------------------------------------------------------------------------------------- BERT
def bert(*, vocab: int = 100, hidden: int = 32, heads: int = 4, layers: int = 2, ffn: int = 64,
         max_positions: int = 64, batch: int | str = "batch", seq: int | str = "seq", seed: int = 0):
    """BERT-style encoder: word + position embeddings (Gather; positions from Range over Shape),
    LayerNormalization, `layers` blocks of multi-head self-attention (MatMul/Reshape/Transpose/
    Softmax, the attention mask made an additive bias by Cast/Sub/Mul/Unsqueeze), Erf-GELU feed
    forward and residual Adds. Inputs int64 "input_ids" and "attention_mask" [batch, seq]; output
    "last_hidden_state" [batch, seq, hidden]."""
    from onnx import TensorProto, helper

    if hidden % heads:
        raise ValueError(f"hidden size {hidden} is not a multiple of {heads} heads")
    if layers < 1:
        raise ValueError(f"bert needs at least one layer, got {layers}")
    head_dim = hidden // heads
    b = _Builder("bert", seed)
    words = b.op("Gather", [b.normal((vocab, hidden), 0.5, "word_embeddings"), "input_ids"], "words", axis=0)
    shape = b.op("Shape", ["input_ids"], "ids_shape")
    length = b.op("Gather", [shape, b.const(1, "seq_axis", np.int64)], "seq_len", axis=0)
    positions = b.op("Range", [b.const(0, "zero", np.int64), length, b.const(1, "one", np.int64)], "positions")
    pos = b.op("Gather", [b.normal((max_positions, hidden), 0.5, "position_embeddings"), positions], "pos", axis=0)
    x = b.layernorm(b.op("Add", [words, pos], "embeddings"), hidden)

    # mask 1 -> 0, mask 0 -> -10000: added to the scores, masked keys get ~zero probability.
    mask = b.op("Cast", ["attention_mask"], "mask_float", to=TensorProto.FLOAT)
    inverted = b.op("Sub", [b.const(1.0, "one_f"), mask], "mask_inverted")
    bias = b.op("Mul", [inverted, b.const(-10000.0, "neg_big")], "mask_bias")
    bias = b.op("Unsqueeze", [bias, b.const([1, 2], "mask_axes", np.int64)], "mask_bias4d")  # [B,1,1,S]
    split_shape = b.const([0, 0, heads, head_dim], "heads_shape", np.int64)
    merge_shape = b.const([0, 0, hidden], "merge_shape", np.int64)
    scale = b.const(math.sqrt(head_dim), "sqrt_dk")

    for layer in range(layers):
        def heads_of(t: str, perm: list[int]) -> str:
            return b.op("Transpose", [b.op("Reshape", [t, split_shape], "split_heads")], "heads", perm=perm)

        q = heads_of(b.linear(x, hidden, hidden), [0, 2, 1, 3])  # [B, h, S, d]
        k = heads_of(b.linear(x, hidden, hidden), [0, 2, 3, 1])  # [B, h, d, S]
        v = heads_of(b.linear(x, hidden, hidden), [0, 2, 1, 3])
        scores = b.op("Div", [b.op("MatMul", [q, k], "scores"), scale], "scaled")
        probs = b.op("Softmax", [b.op("Add", [scores, bias], "masked")], "probs", axis=-1)
        context = b.op("Transpose", [b.op("MatMul", [probs, v], "context")], "context_t", perm=[0, 2, 1, 3])
        context = b.op("Reshape", [context, merge_shape], "merge_heads")
        x = b.layernorm(b.op("Add", [x, b.linear(context, hidden, hidden)], "residual"), hidden)
        h = b.linear(x, hidden, ffn)
        erf = b.op("Erf", [b.op("Div", [h, b.const(math.sqrt(2.0), "sqrt2")], "gelu_div")], "gelu_erf")
        gelu = b.op("Mul", [b.op("Mul", [h, b.op("Add", [erf, b.const(1.0, "one_g")], "gelu_add")], "gelu_mul"),
                            b.const(0.5, "half")], "gelu")
        x = b.layernorm(b.op("Add", [x, b.linear(gelu, ffn, hidden)], "residual"), hidden,
                        name="last_hidden_state" if layer == layers - 1 else None)

    inputs = [helper.make_tensor_value_info(name, TensorProto.INT64, [batch, seq])
              for name in ("input_ids", "attention_mask")]
    return b.model(inputs, [_output("last_hidden_state", [batch, seq, hidden])])


# ------------------------------------------------------------------------------------- UNet
def unet(*, size: int = 32, width: int = 8, out_channels: int = 2, batch: int | str = "N",
         resize_mode: str = "linear", pad_mode: str = "constant", seed: int = 0):
    """UNet-style segmenter: two Conv+Relu / MaxPool levels down, an explicit Pad before the
    bottleneck conv, ConvTranspose (stride 2) up, then Resize (scales 2, `resize_mode` "nearest"
    or "linear") up, Concat skip connections at both levels, 1x1 output conv. Input "input"
    [batch, 3, size, size] (size divisible by 4), output "mask" [batch, out_channels, size, size]."""
    if size % 4:
        raise ValueError(f"unet size must be divisible by 4, got {size}")
    if resize_mode not in ("nearest", "linear"):
        raise ValueError(f"resize_mode must be 'nearest' or 'linear', got {resize_mode!r}")
    b = _Builder("unet", seed)

    def conv_relu(x: str, cin: int, cout: int, k: int = 3, pad: int = 1) -> str:
        return b.op("Relu", [b.conv(x, cin, cout, k, pad=pad)])

    def pool(x: str) -> str:
        return b.op("MaxPool", [x], "down", kernel_shape=[2, 2], strides=[2, 2])

    w = width
    e1 = conv_relu("input", 3, w)                           # [N, w, S, S]
    e2 = conv_relu(pool(e1), w, 2 * w)                      # [N, 2w, S/2, S/2]
    padded = b.op("Pad", [pool(e2), b.const([0, 0, 1, 1, 0, 0, 1, 1], "pads", np.int64)], "pad", mode=pad_mode)
    bottom = conv_relu(padded, 2 * w, 4 * w, pad=0)         # [N, 4w, S/4, S/4]

    up_w = b.normal((4 * w, 2 * w, 2, 2), math.sqrt(1.0 / (4 * w)), "up_w")
    up = b.op("ConvTranspose", [bottom, up_w, b.normal((2 * w,), 0.1, "up_b")], "up",
              kernel_shape=[2, 2], strides=[2, 2])          # [N, 2w, S/2, S/2]
    d2 = conv_relu(b.op("Concat", [up, e2], "skip", axis=1), 4 * w, 2 * w)

    resize_attrs = ({"mode": "nearest", "coordinate_transformation_mode": "asymmetric", "nearest_mode": "floor"}
                    if resize_mode == "nearest" else {"mode": "linear", "coordinate_transformation_mode": "half_pixel"})
    scales = b.const([1.0, 1.0, 2.0, 2.0], "scales")
    upsampled = b.op("Resize", [d2, "", scales], "resize", **resize_attrs)  # [N, 2w, S, S]
    reduced = b.conv(upsampled, 2 * w, w, 1, gain=1.0)
    d1 = conv_relu(b.op("Concat", [reduced, e1], "skip", axis=1), 2 * w, w)
    b.conv(d1, w, out_channels, 1, gain=1.0, name="mask")
    return b.model([_image_io(batch, 3, size)], [_output("mask", [batch, out_channels, size, size])])


ZOO: dict[str, Callable] = {"mobilenetv2": mobilenetv2, "resnet": resnet, "bert": bert, "unet": unet}


def build(name: str, **options):
    """The zoo model called name (see ZOO), built with options."""
    if name not in ZOO:
        raise KeyError(f"unknown zoo model {name!r}; choose from {sorted(ZOO)}")
    return ZOO[name](**options)


def parse_spec(spec: str) -> tuple[str, dict]:
    """A zoo model named on the command line: "NAME" or "NAME:KEY=VALUE,..." (after "zoo:"), as
    (name, options for build). Options are the builder's keyword arguments; a value is taken as an
    int where the builder's annotation allows an int, else as the string given (symbolic dims,
    modes). Raises ValueError naming the model, the option and what it accepts."""
    import inspect

    name, _, given = spec.partition(":")
    if name not in ZOO:
        raise ValueError(f"no zoo model {name!r}; the zoo has {sorted(ZOO)}")
    parameters = inspect.signature(ZOO[name]).parameters
    accepted = ", ".join(f"{key} ({p.annotation})" for key, p in parameters.items())
    options: dict = {}
    for item in filter(None, given.split(",")):
        key, sep, text = item.partition("=")
        key, text = key.strip(), text.strip()
        if not sep or not key or not text:
            raise ValueError(f"zoo:{name}: option {item!r} is not KEY=VALUE; {name} takes {accepted}")
        if key not in parameters:
            raise ValueError(f"zoo:{name} has no option {key!r}; it takes {accepted}")
        if key in options:
            raise ValueError(f"zoo:{name}: option {key!r} given twice")
        kinds = {kind.strip() for kind in str(parameters[key].annotation).split("|")}
        if "int" in kinds and re.fullmatch(r"[+-]?\d+", text):
            options[key] = int(text)
        elif "str" in kinds:
            options[key] = text
        else:
            raise ValueError(f"zoo:{name}: option {key} takes an integer, got {text!r}")
    return name, options


def example_inputs(model, batch: int = 1, *, seq: int = 8, vocab: int = 100, seed: int = 0) -> dict[str, np.ndarray]:
    """Feeds for a zoo model: symbolic dims named like a batch take `batch`, others take `seq`.

    Floats are standard normal; int64 token ids lie in [0, vocab); an input whose name contains
    "mask" gets ones, with trailing zeros (padding) in every row after the first, so masking
    matters while every row keeps some unmasked keys.
    """
    from onnx import TensorProto

    rng = np.random.default_rng(seed)
    initializers = {t.name for t in model.graph.initializer}
    feeds = {}
    for vi in model.graph.input:
        if vi.name in initializers:
            continue
        ttype = vi.type.tensor_type
        shape = [d.dim_value if d.HasField("dim_value")
                 else batch if d.dim_param.lower() in ("n", "batch", "batch_size") else seq
                 for d in ttype.shape.dim]
        if ttype.elem_type == TensorProto.FLOAT:
            feeds[vi.name] = rng.standard_normal(shape).astype(np.float32)
        elif "mask" in vi.name.lower():
            mask = np.ones(shape, np.int64)
            if len(shape) == 2:
                for row in range(1, shape[0]):
                    mask[row, max(1, shape[1] - 2 * row):] = 0
            feeds[vi.name] = mask
        elif ttype.elem_type == TensorProto.INT64:
            feeds[vi.name] = rng.integers(0, vocab, shape, dtype=np.int64)
        else:
            raise ValueError(f"example_inputs: input {vi.name!r} has an element type the zoo does not use")
    return feeds
