"""fuse_depthwise_pointwise: a depthwise 3x3 Conv whose only reader is a 1x1 Conv with few output
channels becomes one ConvDwPw node (engine/ops/conv_dwpw.py).

Runs after fusion.py's epilogue passes (BatchNorm folding, residual Add, fused activations): both
Convs then carry their bias, residual and activation, which the fused op keeps:
y = act_pw(pw(act_dw(dw(x) + b_dw)) + b_pw + residual).

What fuses is what the GPU kernel (kernels_wgsl/conv/dwpw_nc4hw4.wgsl) runs in one dispatch, each
invocation computing every output channel of a few pixels from the depthwise results it computes
in registers: 2-D, kernel 3x3, dilation 1, the same stride 1 or 2 on both axes, group = C =
C_out of the depthwise conv, no residual on it; a 1x1 pointwise conv, stride 1, no padding, one
group, at most MAX_OUTPUT_CHANNELS outputs (their sums are the invocation's registers); weights
and biases constant. The depthwise output must have no other reader, be no graph output and not
be read inside a subgraph, so nothing can observe it disappear.
"""
from __future__ import annotations

from ...engine.graph import Graph, Node
from ...engine.ops.conv import WINDOW_ATTRS
from .quant import _subgraph_reads

MAX_OUTPUT_CHANNELS = 32  # 8 vec4 slices of sums per pixel in the GPU kernel


def constant(graph: Graph, name: str) -> bool:
    """Whether an optional input is absent or an initializer."""
    return not name or name in graph.initializers


def _depthwise(graph: Graph, node: Node) -> bool:
    weight = graph.initializers.get(node.input(1))
    if weight is None or weight.ndim != 4 or tuple(weight.shape[1:]) != (1, 3, 3):
        return False
    attrs = node.attrs
    strides = list(attrs.get("strides") or [1, 1])
    return (attrs.get("group", 1) == weight.shape[0] and not node.input(3) and constant(graph, node.input(2))
            and all(d == 1 for d in attrs.get("dilations") or [1, 1])
            and strides in ([1, 1], [2, 2]))


def pointwise(graph: Graph, node: Node, channels: int, most_outputs: int) -> bool:
    """A 1x1 stride-1 one-group Conv over `channels` inputs with at most most_outputs outputs,
    constant weights and bias."""
    weight = graph.initializers.get(node.input(1))
    if weight is None or weight.ndim != 4 or tuple(weight.shape[1:]) != (channels, 1, 1):
        return False
    attrs = node.attrs
    # A 1x1 stride-1 window pads nothing under any auto_pad mode; explicit pads must be zero.
    return (weight.shape[0] <= most_outputs and attrs.get("group", 1) == 1
            and all(s == 1 for s in attrs.get("strides") or [1, 1])
            and not any(attrs.get("pads") or []) and constant(graph, node.input(2)))


def fuse_conv_pairs(graph: Graph, op_type: str, first_ok, prefix: str, most_outputs: int) -> None:
    """Each Conv accepted by first_ok(graph, node) whose output only a pointwise Conv (at most
    most_outputs outputs) reads becomes, with it, one op_type node: inputs x, w, b, w_pw, b_pw,
    residual; the first conv's window attributes and its activation as `<prefix>_activation*`."""
    from .fusion import _Rewriter  # fusion.py lists the passes: imported when they run

    rw = _Rewriter(graph)
    hidden = None
    for pw in graph.nodes:
        if pw.op_type != "Conv" or id(pw) in rw.removed:
            continue
        name = pw.input(0)
        first = rw.producer(name, ("Conv",))
        if first is None or first is pw or not rw.sole_reader(name, pw) or not first_ok(graph, first):
            continue
        if not pointwise(graph, pw, graph.initializers[first.input(1)].shape[0], most_outputs):
            continue
        if hidden is None:
            hidden = _subgraph_reads(graph)
        if name in hidden:
            continue
        attrs = {key: first.attrs[key] for key in WINDOW_ATTRS if key in first.attrs}
        attrs.update({f"{prefix}_activation": first.attrs.get("activation", ""),
                      f"{prefix}_activation_alpha": float(first.attrs.get("activation_alpha", 0.0)),
                      f"{prefix}_activation_beta": float(first.attrs.get("activation_beta", 0.0))},
                     activation=pw.attrs.get("activation", ""),
                     activation_alpha=float(pw.attrs.get("activation_alpha", 0.0)),
                     activation_beta=float(pw.attrs.get("activation_beta", 0.0)))
        # The fused node takes the pointwise conv's place (after its residual's producer) and name.
        pw.op_type = op_type
        pw.inputs = [first.input(0), first.input(1), first.input(2), pw.input(1), pw.input(2), pw.input(3)]
        pw.attrs = attrs
        rw.removed.add(id(first))
        graph.value_info.pop(name, None)
    rw.finish(f"fuse {op_type}")


def fuse_depthwise_pointwise(graph: Graph) -> None:
    fuse_conv_pairs(graph, "ConvDwPw", _depthwise, "dw", MAX_OUTPUT_CHANNELS)
