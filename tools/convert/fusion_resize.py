"""swap_resize_pointwise: a spatial Resize whose only reader is a 1x1 Conv runs after that conv
instead of before it, so the conv works at the smaller resolution (a UNet or FPN decoder's
upsample -> 1x1 projection: 4x fewer multiplies for a 2x upsample).

Both are linear per pixel: the conv maps each pixel's channel vector affinely, and "nearest" or
"linear" resampling makes every output pixel a combination of input pixels whose weights sum to 1
(a copy, or interpolation weights; with antialias too, normalised). So resize(conv(x)) equals
conv(resize(x)), the bias included; "nearest" bit for bit, "linear" up to rounding. The swap
needs the conv to be exactly that affine map (no fused activation or residual, stride 1, no
padding) and the resize to leave N and C alone with nothing from outside the image
(tf_crop_and_resize extrapolates a constant, which the conv would not see). It runs only where it
cuts the work: conv multiplies plus resampling taps, with the resize now on the conv's output
channels.
"""
from __future__ import annotations

import logging

import numpy as np

from ...engine.graph import Graph, Node
from .quant import _subgraph_reads

log = logging.getLogger(__name__)
TAPS = {"nearest": 1, "linear": 2}  # resampling taps per output element and resized axis


def _scales(graph: Graph, resize: Node) -> tuple[float, ...] | None:
    """The resize's per-axis scales over (N, C, H, W) when constant and N and C stay."""
    attrs = resize.attrs
    if attrs.get("mode", "nearest") not in TAPS or resize.input(3):  # sizes: N is not known here
        return None
    if attrs.get("coordinate_transformation_mode", "half_pixel") == "tf_crop_and_resize":
        return None
    scales = graph.initializers.get(resize.input(2))
    if scales is None:
        return None
    scales = tuple(float(s) for s in np.asarray(scales).reshape(-1))
    axes = list(attrs.get("axes") or [])
    if axes:
        if len(axes) != len(scales) or len({a % 4 for a in axes}) != len(axes):
            return None
        full = [1.0] * 4
        for axis, scale in zip(axes, scales):
            full[axis % 4] = scale
        scales = tuple(full)
    if len(scales) != 4 or scales[:2] != (1.0, 1.0) or min(scales[2:]) <= 0:
        return None
    return scales


def _affine_pointwise(graph: Graph, conv: Node) -> np.ndarray | None:
    """The 1x1 conv's weights when it is a plain per-pixel affine map."""
    weight = graph.initializers.get(conv.input(1))
    attrs = conv.attrs
    if weight is None or weight.ndim != 4 or tuple(weight.shape[2:]) != (1, 1):
        return None
    if attrs.get("activation") or conv.input(3) or (conv.input(2) and conv.input(2) not in graph.initializers):
        return None
    if any(s != 1 for s in attrs.get("strides") or [1, 1]) or any(attrs.get("pads") or []):
        return None
    return weight


def _cheaper_after(weight: np.ndarray, group: int, scales: tuple[float, ...], mode: str) -> bool:
    """Whether conv-then-resize costs less than resize-then-conv, counted per input pixel: the
    conv's multiplies on every pixel it runs on plus a resampling tap per axis and element the
    resize writes."""
    cout, cin = weight.shape[0], weight.shape[1] * group
    area = scales[2] * scales[3]
    taps = 2 * TAPS[mode]  # H and W
    multiplies = cout * weight.shape[1]  # per pixel
    before = area * cin * taps + area * multiplies
    after = multiplies + area * cout * taps
    return after < before


def swap_resize_pointwise(graph: Graph) -> None:
    from .fusion import _Rewriter  # fusion.py lists this pass: imported when it runs

    rw = _Rewriter(graph)
    hidden = None
    swapped = 0
    position = {id(node): i for i, node in enumerate(graph.nodes)}
    for conv in list(graph.nodes):
        if conv.op_type != "Conv":
            continue
        middle = conv.input(0)
        resize = rw.producer(middle, ("Resize",))
        if resize is None or not rw.sole_reader(middle, conv):
            continue
        scales, weight = _scales(graph, resize), _affine_pointwise(graph, conv)
        if scales is None or weight is None:
            continue
        if not _cheaper_after(weight, int(conv.attrs.get("group", 1)), scales, resize.attrs.get("mode", "nearest")):
            continue
        if hidden is None:
            hidden = _subgraph_reads(graph)
        if middle in hidden:
            continue
        # The conv takes the resize's place in the node order (it reads what the resize read),
        # the resize the conv's (it writes what the conv wrote, for the same readers).
        source, result = resize.input(0), conv.outputs[0]
        projected = rw.fresh_name(f"{conv.name or result}/before_resize")
        conv.inputs, conv.outputs = [source, *conv.inputs[1:]], [projected]
        resize.inputs, resize.outputs = [projected, *resize.inputs[1:]], [result]
        i, j = position[id(resize)], position[id(conv)]
        graph.nodes[i], graph.nodes[j] = conv, resize
        position[id(conv)], position[id(resize)] = i, j
        rw.producers.update({projected: conv, result: resize})
        rw.consumers[projected] = [resize]
        rw.consumers[source] = [conv if node is resize else node for node in rw.consumers.get(source, [])]
        rw.consumers.pop(middle, None)
        graph.value_info.pop(middle, None)
        swapped += 1
    if swapped:
        log.debug("swap_resize_pointwise: %d resize(s) moved after their 1x1 conv", swapped)
