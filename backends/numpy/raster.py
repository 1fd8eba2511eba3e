"""Raster: every data-movement op after geometry lowering, as strided-view copies.

A region's source and destination views depend only on the arrays they look into, and a session
hands a step the same arrays on every run of one resize (arena views, constants); feeds and other
backends' results may be new arrays on each run. So the kernel keeps, for each input and for the
output, the array it last saw and the region views over it, and builds a side's views again only
when that array changed. A run is then at most one fill and one np.copyto per region: building a
view with as_strided costs several microseconds, more than copying a small region.

In a session, a Raster that copies one contiguous range of its input onto its whole output
(Reshape, Flatten, Squeeze, ...; a Slice or Split along the outermost axis that is not 1) or each
input whole into one range of its output (a Concat along that axis) moves nothing: the session
places those tensors in one memory (NumpyBackend.plan_memory) and the step is idle (hosted).
"""
from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import as_strided

from .kernel import numpy_kernel


def strided_view(flat: np.ndarray, offset: int, size, strides, *, writeable: bool) -> np.ndarray:
    """View of a flat array; negative strides reach back from offset, inside the array."""
    return as_strided(flat[offset:] if offset else flat, shape=size,
                      strides=[s * flat.itemsize for s in strides], writeable=writeable)


def region_view(base: np.ndarray, offset: int, size, strides) -> np.ndarray:
    """View of a C-contiguous array's flat elements: element i of the view is
    base_flat[offset + i . strides]. np.ndarray over base's buffer checks that every element lies
    inside it and is several times cheaper than as_strided."""
    item = base.itemsize
    return np.ndarray(size, base.dtype, buffer=base, offset=offset * item, strides=[s * item for s in strides])


def _address(x: np.ndarray) -> tuple:
    """What makes two C-contiguous arrays share their views: the same memory, type and size. A
    new array at a kept array's address is in the kept array's memory (the views hold it alive)."""
    return x.__array_interface__["data"][0], x.nbytes, x.dtype


class _Bound:
    """The region views of one step over the arrays last seen."""

    def __init__(self, plan, sources: int):
        self.fill = plan.fill
        self.regions = plan.regions
        self.sources = sorted({r.src for r in plan.regions})
        self.seen: list = [None] * max([sources, *(i + 1 for i in self.sources)])  # the arrays last seen
        self.keys: list = [None] * len(self.seen)
        self.out = self.out_key = self.target = None
        self.src = [None] * len(self.regions)
        self.dst = [None] * len(self.regions)
        self.pairs: list[tuple[np.ndarray, np.ndarray]] = []

    def bind_input(self, index: int, x: np.ndarray) -> None:
        if not x.flags.c_contiguous:  # rare (constants made by views): a fresh copy, never kept
            base = np.ascontiguousarray(x)
            self.seen[index] = self.keys[index] = None
        else:
            self.seen[index] = base = x
            key = _address(x)
            if key == self.keys[index]:
                return  # a new array object over the same memory: the views still hold
            self.keys[index] = key
        for number, r in enumerate(self.regions):
            if r.src == index:
                self.src[number] = region_view(base, r.src_offset, r.size, r.src_strides)
        self._pair()

    def bind_output(self, out: np.ndarray) -> None:
        self.out = out
        # A non-contiguous output (never from the session's arena) is written through a copy.
        self.target = out if out.flags.c_contiguous else np.empty(out.shape, out.dtype)
        key = _address(self.target)
        if key == self.out_key:
            return
        self.out_key = key
        self.dst = [region_view(self.target, r.dst_offset, r.size, r.dst_strides) for r in self.regions]
        self._pair()

    def _pair(self) -> None:
        self.pairs = list(zip(self.dst, self.src))


def hosted(ex) -> bool:
    """Whether the session placed this step's output in its input (a view: Reshape, Flatten, ...)
    or its inputs in its output (a Concat whose producers write their parts in place), so that
    the step has nothing to move (NumpyBackend.plan_memory)."""
    backend, step = ex.backend, ex.step
    shares, views = getattr(backend, "shares", {}), getattr(backend, "views", {})
    names = [step.inputs[i] for i in sorted({region.src for region in step.plan.regions})]
    out = step.outputs[0]
    if not names or any(name not in views for name in [*names, out]):
        return False
    if len(names) == 1 and shares.get(out, ("",))[0] == names[0]:  # view_range: only this step hosts its output
        return True
    return all(shares.get(name, ("",))[0] == out for name in names)


def _prepare(ex) -> _Bound:
    bound = ex.state["raster"] = _Bound(ex.step.plan, len(ex.step.inputs))
    if hosted(ex):
        ex.nothing_to_compute = True
    return bound


@numpy_kernel("Raster", writes_outputs=True, prepare=_prepare)
def raster(ex, inputs, outputs):
    bound = ex.state.get("raster") or _prepare(ex)  # direct calls (constant folding) skip prepare
    out = outputs[0]
    if out is not bound.out:
        bound.bind_output(out)
    seen = bound.seen
    for index in bound.sources:
        x = inputs[index]
        if x is not seen[index]:
            bound.bind_input(index, np.asarray(x))
    if bound.fill is not None:
        bound.target.fill(bound.fill)
    for dst, src in bound.pairs:
        np.copyto(dst, src, casting="unsafe")  # a cast only where a source's dtype differs
    if bound.target is not out:
        np.copyto(out, bound.target)
