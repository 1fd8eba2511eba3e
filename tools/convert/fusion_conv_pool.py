"""fuse_conv_maxpool: a 2-D Conv whose output a max Pool reads becomes one ConvMaxPool node
(engine/ops/conv_pool.py), so the GPU runs one dispatch where it ran two and the pool never reads
the conv output back.

Runs after fusion.py's epilogue passes: the Conv then carries its bias and activation (folded
BatchNorm, fused Relu), which the fused op keeps: y = maxpool(act(conv(x) + b)).

What fuses is what the GPU kernel (kernels_wgsl/conv/conv_maxpool_nc4hw4.wgsl) runs in one
dispatch with no extra work:
- the Conv: 2-D, weights and bias constant, any group, no residual (it would come at the conv's
  resolution); not a 3x3 stride-1 conv of one group wider than MAX_WINOGRAD_CHANNELS (below);
- the Pool: max, 2-D, no indices output, dilation 1, explicit pads (auto_pad NOTSET or VALID)
  smaller than the window, and windows as large as their strides (2x2 stride 2: they tile the conv
  output), at most MAX_WINDOW wide. Overlapping windows (ResNet's 3x3 stride 2) would have each
  invocation compute the conv outputs its windows share with its neighbours' again (about twice
  each): fused so, zoo ResNet's stem took 1.5x the Conv + Pool pair's GPU time at 32x32 and
  224x224 on lavapipe, the whole model 1.04x and 1.44x its time. Windows apart (stride > kernel)
  would leave conv outputs that no invocation computes, which a kept conv output needs.
When the Pool is the conv output's only reader (and it is no graph output and not read inside a
subgraph), the conv output disappears; otherwise the fused op outputs it too (a UNet's skip
connection), written by the same dispatch.
"""
from __future__ import annotations

from ...engine.graph import Graph, Node
from .quant import _subgraph_reads

CONV_ATTRS = ("strides", "dilations", "pads", "auto_pad", "group", "activation", "activation_alpha",
              "activation_beta")
MAX_WINDOW = 8  # conv outputs along W per row of a GPU invocation (backends/wgpu/conv_pool.COLUMNS)
# 3x3 stride-1 convs of one group with more input x output channels stay apart: alone they may run
# Winograd, which the fused kernel does not (lavapipe, 56x56: 64 -> 64 Winograd + pool took half the
# fused op's time; 32 -> 32 was even at 56x56 and 112x112, and faster fused at 16x16).
MAX_WINOGRAD_CHANNELS = 32 * 32


def _conv(graph: Graph, node: Node) -> bool:
    weight = graph.initializers.get(node.input(1))
    bias = node.input(2)
    if weight is None or weight.ndim != 4 or node.input(3) or (bias and bias not in graph.initializers):
        return False
    attrs = node.attrs
    unit = [s == 1 for s in attrs.get("strides") or [1]] + [d == 1 for d in attrs.get("dilations") or [1]]
    winograd = attrs.get("group", 1) == 1 and weight.shape[2:] == (3, 3) and all(unit)
    return not winograd or weight.shape[0] * weight.shape[1] <= MAX_WINOGRAD_CHANNELS


def _pool_window(node: Node) -> dict | None:
    """The fused op's pool attributes for a max Pool the GPU kernel runs as it is, else None."""
    attrs = node.attrs
    kernel = list(attrs.get("kernel_shape") or [])
    if attrs.get("kind") != "max" or len(kernel) != 2 or (len(node.outputs) > 1 and node.outputs[1]):
        return None
    strides = list(attrs.get("strides") or [1, 1])
    mode = attrs.get("auto_pad", "NOTSET") or "NOTSET"
    if mode not in ("NOTSET", "VALID") or any(d != 1 for d in attrs.get("dilations") or []):
        return None
    pads = [0] * 4 if mode == "VALID" else list(attrs.get("pads") or [0] * 4)
    if len(pads) != 4 or any(not 0 <= p < k for p, k in zip(pads, kernel * 2, strict=True)):
        return None
    if strides != kernel or kernel[1] > MAX_WINDOW:
        return None
    return {"pool_kernel_shape": kernel, "pool_strides": strides, "pool_pads": pads,
            "pool_ceil_mode": int(bool(attrs.get("ceil_mode", 0)))}


def fuse_conv_maxpool(graph: Graph) -> None:
    from .fusion import _Rewriter  # fusion.py lists this pass: imported when it runs

    rw = _Rewriter(graph)
    hidden = None
    for pool in graph.nodes:
        if pool.op_type != "Pool" or id(pool) in rw.removed:
            continue
        window = _pool_window(pool)
        name = pool.input(0)
        conv = rw.producer(name, ("Conv",)) if window is not None else None
        if conv is None or not _conv(graph, conv):
            continue
        if hidden is None:
            hidden = _subgraph_reads(graph)
        sole = rw.sole_reader(name, pool) and name not in hidden
        # The fused node takes the conv's place: its other readers may come before the pool.
        conv.op_type = "ConvMaxPool"
        conv.inputs = [conv.input(0), conv.input(1), conv.input(2)]
        conv.outputs = [pool.outputs[0]] if sole else [pool.outputs[0], name]
        conv.attrs = {**{key: conv.attrs[key] for key in CONV_ATTRS if key in conv.attrs}, **window}
        rw.producers[pool.outputs[0]] = conv
        rw.removed.add(id(pool))
        if sole:
            graph.value_info.pop(name, None)
    rw.finish("fuse_conv_maxpool")
