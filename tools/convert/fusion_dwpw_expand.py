"""fuse_dwpw_expand: a ConvDwPw and the next MobileNet block's 1x1 expand Conv reading its output
become one ConvDwPwExpand node (engine/ops/conv_dwpw_expand.py).

Runs right after fuse_depthwise_pointwise (the ConvDwPw nodes exist), before fuse_conv_pointwise
(which would otherwise pair the expand conv with the next depthwise conv). On lavapipe a dispatch
costs ~70 us of fixed time at small images, so each fusion saves about that much.

What fuses is what the GPU kernel (kernels_wgsl/conv/dwpw_expand_nc4hw4.wgsl) runs in one
dispatch: a 1x1 stride-1 unpadded one-group Conv with constant weights and bias, no residual, at
most MAX_EXPAND_CHANNELS outputs, reading the ConvDwPw output. Other readers of the block output
(the next block's residual) are allowed: the fused op then outputs it too, written by the same
dispatch; so is a graph output. Not when the block output is read inside a subgraph.
"""
from __future__ import annotations

from ...engine.graph import Graph, Node
from .fusion_dwpw import pointwise
from .quant import _subgraph_reads

MAX_EXPAND_CHANNELS = 256  # expand slices an invocation loops over, the block results in its registers


def _expand(graph: Graph, node: Node, project: int) -> bool:
    return not node.input(3) and pointwise(graph, node, project, MAX_EXPAND_CHANNELS)


def fuse_dwpw_expand(graph: Graph) -> None:
    from .fusion import _Rewriter  # fusion.py lists the passes: imported when they run

    rw = _Rewriter(graph)
    hidden = None
    for ex in graph.nodes:
        if ex.op_type != "Conv" or id(ex) in rw.removed:
            continue
        name = ex.input(0)
        dwpw = rw.producer(name, ("ConvDwPw",))
        if dwpw is None or dwpw.input(3) not in graph.initializers:
            continue
        if not _expand(graph, ex, graph.initializers[dwpw.input(3)].shape[0]):
            continue
        readers = rw.consumers.get(name, [])
        if sum(1 for reader in readers if reader is ex) != 1:
            continue
        if hidden is None:
            hidden = _subgraph_reads(graph)
        if name in hidden:
            continue
        sole = rw.sole_reader(name, ex)
        attrs = dict(dwpw.attrs)
        attrs.update(ex_activation=ex.attrs.get("activation", ""),
                     ex_activation_alpha=float(ex.attrs.get("activation_alpha", 0.0)),
                     ex_activation_beta=float(ex.attrs.get("activation_beta", 0.0)))
        # The fused node takes the ConvDwPw's place: the block output's other readers may come
        # before the expand conv.
        dwpw.op_type = "ConvDwPwExpand"
        dwpw.inputs = [*(list(dwpw.inputs) + [""] * 6)[:6], ex.input(1), ex.input(2)]
        dwpw.outputs = [ex.outputs[0]] if sole else [ex.outputs[0], name]
        dwpw.attrs = attrs
        rw.producers[ex.outputs[0]] = dwpw
        rw.removed.add(id(ex))
        if sole:
            graph.value_info.pop(name, None)
    rw.finish("fuse_dwpw_expand")
