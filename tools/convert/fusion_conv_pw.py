"""fuse_conv_pointwise: a dense 2-D Conv with few output channels whose only reader is a 1x1 Conv
with few output channels becomes one ConvPw node (engine/ops/conv_pw.py): a segmentation or
detection head's 3x3 conv -> 1x1 conv, a UNet's last two convs.

Runs after fusion.py's epilogue passes (BatchNorm folding, residual Add, fused activations) and
after fuse_depthwise_pointwise (depthwise convs read by a 1x1 Conv are its): both Convs then carry
their bias, residual and activation, which the fused op keeps:
y = act_pw(pw(act(conv(x) + b)) + b_pw + residual).

What fuses is what the GPU kernel (kernels_wgsl/conv/conv_pw_nc4hw4.wgsl) runs in one dispatch,
each invocation computing every output channel of a few pixels from the conv results it keeps in
registers: the Conv 2-D, one group, any kernel / strides / dilations / pads, at most
MAX_CHANNELS outputs, no residual, and not a 3x3 stride-1 conv with more than
MAX_WINOGRAD_CHANNELS input x output channels (below); the 1x1 Conv stride 1, no padding, one
group, at most MAX_CHANNELS outputs; weights and biases constant. The conv output must have no other reader, be
no graph output and not be read inside a subgraph, so nothing can observe it disappear.
"""
from __future__ import annotations

from ...engine.graph import Graph, Node
from .fusion_dwpw import constant, fuse_conv_pairs

# 4 vec4 slices: the conv results of a pixel (and the pointwise sums) are an invocation's registers.
MAX_CHANNELS = 16
# 3x3 stride-1 dilation-1 convs with more input x output channels stay apart: alone they run
# Winograd F(4,3), which the fused kernel does not, and that saves more than the fusion does. On
# lavapipe (process CPU time of one-pair models, input conversion and readback included; fused /
# Conv + Conv): 128->16->16 1.3x at 56x56 and 1.15x at 13x13, 96->16->16 1.08x at 112x112;
# 64->16->16 and 128->8->8 (1024) 0.98x and 0.81x at 56x56, 32->16->8 0.94x at 112x112. Other
# windows (5x5, strides) have no Winograd path: 128->16->16 5x5 at 56x56 0.78x.
MAX_WINOGRAD_CHANNELS = 32 * 32


def _conv(graph: Graph, node: Node) -> bool:
    weight = graph.initializers.get(node.input(1))
    if weight is None or weight.ndim != 4 or weight.shape[0] > MAX_CHANNELS:
        return False
    attrs = node.attrs
    winograd = (tuple(weight.shape[2:]) == (3, 3) and all(s == 1 for s in attrs.get("strides") or [1, 1])
                and all(d == 1 for d in attrs.get("dilations") or [1, 1]))
    if winograd and weight.shape[0] * weight.shape[1] > MAX_WINOGRAD_CHANNELS:
        return False
    return attrs.get("group", 1) == 1 and not node.input(3) and constant(graph, node.input(2))


def fuse_conv_pointwise(graph: Graph) -> None:
    fuse_conv_pairs(graph, "ConvPw", _conv, "conv", MAX_CHANNELS)
