"""The scatter family on the GPU (kernels_wgsl/scatter/), linear layout, 1-2 dispatches per op.

Scatters never race: each invocation owns a set of output positions that no other invocation's
updates can reach and applies its updates in index order, so repeated indices give the numpy
backend's result with no atomics. Indices known at resize are checked by the shape functions;
the kernels check run-time ones: an out-of-range gather index reads 0 and an out-of-range scatter
index is skipped (no access leaves a tensor), and each reports it through the backend's status
buffer, so the run raises the numpy backend's InputError (WgpuBackend._raise_status).
"""
from __future__ import annotations

import math

import numpy as np

from ...engine.geometry import contiguous_strides
from ...engine.ops.scatter import out_of_range
from ..base import Step
from .backend import GpuExecution, gpu_kernel, wgsl_type
from .reduce import MAX_RANK, padded

MAX_TUPLE = 16  # index tuple length of GatherND / ScatterND (params slots 8..23 and 24..39)
NAN_F32 = "(bitcast<u32>(u) & 0x7fffffffu) > 0x7f800000u"
# reduction -> WGSL merging current value a with update u, per element type (bool: or / and).
COMBINE = {
    "none": {"f32": "u", "i32": "u", "u32": "u"},
    "add": {"f32": "a + u", "i32": "a + u", "u32": "a | u"},
    "mul": {"f32": "a * u", "i32": "a * u", "u32": "a & u"},
    # A NaN update wins and a NaN stays, as numpy's maximum / minimum.
    "max": {"f32": f"select(a, u, u > a || {NAN_F32})", "i32": "max(a, u)", "u32": "max(a, u)"},
    "min": {"f32": f"select(a, u, u < a || {NAN_F32})", "i32": "min(a, u)", "u32": "min(a, u)"},
}


def _quads(n: int) -> int:
    return -(-n // 4)


def _rank_reason(*shapes) -> str | None:
    rank = max(len(s) for s in shapes)
    return f"rank {rank} exceeds the kernel's {MAX_RANK}" if rank > MAX_RANK else None


def _known(step: Step, i: int) -> np.ndarray | None:
    values = step.input_values or []
    return values[i] if i < len(values) and i < len(step.inputs) and step.inputs[i] else None


def _optional_binding(step: Step, i: int, binding: int, name: str, known: int | None) -> tuple[dict, list[str]]:
    """Text for a scalar operand: its value in params slot 2/3 when known at resize (`known`),
    else read from its tensor at run time (an extra binding before the params)."""
    if known is not None:
        return {f"{name.upper()}_BINDING": "", "PARAMS": str(binding)}, []
    decl = f"@group(0) @binding({binding}) var<storage, read_write> {name}_value: array<i32>;"
    return {f"{name.upper()}_BINDING": decl, "PARAMS": str(binding + 1)}, [step.inputs[i]]


@gpu_kernel("GatherElements")
class GatherElementsGpu(GpuExecution):
    @classmethod
    def unsupported_reason(cls, step: Step) -> str | None:
        return _rank_reason(step.input_specs[0].shape)

    def prepare(self) -> None:
        step = self.step
        shape, ishape = step.input_specs[0].shape, step.input_specs[1].shape
        axis = step.attrs["axis"] % len(shape)
        strides = list(contiguous_strides(shape))
        axis_stride, strides[axis] = strides[axis], 0
        n = step.output_specs[0].size
        params = [n, shape[axis], axis_stride, 0, 0, 0, 0, 0] + padded(list(ishape), 1) + padded(strides, 0)
        self.dispatch("scatter/gather_elements.wgsl", [step.inputs[0], step.inputs[1], step.outputs[0]],
                      params, _quads(n), status=self.status_mode(1))

    def status_error(self, check: int, value: int) -> str:
        return _axis_index_error(self.step, value)


def _axis_index_error(step: Step, value: int) -> str:
    """GatherElements / ScatterElements: the numpy backend's message, with the indices' name."""
    shape = step.input_specs[0].shape
    axis = step.attrs["axis"] % len(shape)
    return (f'{step.label}: index along axis {axis} {value} is out of range [-{shape[axis]}, {shape[axis]}) '
            f'in "{step.inputs[1]}"')


def _tuple_index_error(step: Step, dims, position: int, value: int) -> str:
    """GatherND / ScatterND: the numpy backend's message for position `position` of a tuple."""
    dim = dims[position] if 0 <= position < len(dims) else "?"
    return f'{step.label}: index {value} is out of range [-{dim}, {dim}) in "{step.inputs[1]}"'


def _tuple_params(dims, strides) -> list[int]:
    """Slots 8..23: the indexed dims, 24..39: their strides."""
    return list(dims) + [1] * (MAX_TUPLE - len(dims)) + list(strides) + [0] * (MAX_TUPLE - len(strides))


@gpu_kernel("GatherND")
class GatherNDGpu(GpuExecution):
    @classmethod
    def unsupported_reason(cls, step: Step) -> str | None:
        m = step.input_specs[1].shape[-1]
        return f"index tuples of {m} > {MAX_TUPLE} elements" if m > MAX_TUPLE else None

    @classmethod
    def loop_iterations(cls, step: Step) -> int:
        return 4 * step.input_specs[1].shape[-1]

    def prepare(self) -> None:
        step = self.step
        shape, ishape = step.input_specs[0].shape, step.input_specs[1].shape
        b, m = step.attrs["batch_dims"], ishape[-1]
        n = step.output_specs[0].size
        slice_size = math.prod(shape[b + m:])
        head = [n, slice_size, math.prod(ishape[b:-1]), math.prod(shape[b:]), m, 0, 0, 0]
        params = head + _tuple_params(shape[b:b + m], contiguous_strides(shape[b:])[:m])
        self.dispatch("scatter/gather_nd.wgsl", [step.inputs[0], step.inputs[1], step.outputs[0]],
                      params, _quads(n), status=self.status_mode(1))

    def status_error(self, check: int, value: int) -> str:
        b = self.step.attrs["batch_dims"]
        return _tuple_index_error(self.step, self.step.input_specs[0].shape[b:], check, value)


def _combine(step: Step) -> dict[str, str]:
    t = wgsl_type(step.input_specs[0].dtype)
    return {"T": t, "COMBINE": COMBINE[step.attrs["reduction"]][t]}


@gpu_kernel("ScatterElements")
class ScatterElementsGpu(GpuExecution):
    @classmethod
    def unsupported_reason(cls, step: Step) -> str | None:
        return _rank_reason(step.input_specs[0].shape)

    @classmethod
    def loop_iterations(cls, step: Step) -> int:
        shape, ishape = step.input_specs[0].shape, step.input_specs[1].shape
        axis = step.attrs["axis"] % len(shape)
        return shape[axis] + ishape[axis]

    def prepare(self) -> None:
        step = self.step
        shape, ishape = step.input_specs[0].shape, step.input_specs[1].shape
        axis = step.attrs["axis"] % len(shape)
        size = step.output_specs[0].size
        if size == 0:
            return
        strides, istrides = contiguous_strides(shape), contiguous_strides(ishape)
        lines = [1 if d == axis else s for d, s in enumerate(shape)]
        ilines = [1 if d == axis else s for d, s in enumerate(ishape)]
        head = [size // shape[axis], shape[axis], strides[axis], ishape[axis], istrides[axis], 0, 0, 0]
        params = (head + padded(lines, 1) + padded(list(strides), 0) + padded(ilines, 1)
                  + padded(list(istrides), 0))
        self.dispatch("scatter/scatter_elements.wgsl", [*step.inputs[:3], step.outputs[0]], params, size // shape[axis],
                      text=_combine(step), status=self.status_mode(1))

    def status_error(self, check: int, value: int) -> str:
        return _axis_index_error(self.step, value)


def _tuples_per_invocation(step: Step) -> int:
    """ScatterND: 1 when the indices are known at resize and address distinct slices (every
    tuple can go to its own invocations), else all of them (one invocation sees every tuple
    that may share its target)."""
    ishape = step.input_specs[1].shape
    count = math.prod(ishape[:-1])
    known = _known(step, 1)
    if known is None or count <= 1:
        return max(count, 1)
    dims = step.input_specs[0].shape[:ishape[-1]]
    if out_of_range(known, dims) is not None:
        return count
    index = np.asarray(known, np.int64)
    index = np.where(index < 0, index + np.asarray(dims, np.int64), index)
    targets = (index * np.asarray(contiguous_strides(dims), np.int64)).sum(-1).reshape(-1)
    return 1 if np.unique(targets).size == count else count


@gpu_kernel("ScatterND")
class ScatterNDGpu(GpuExecution):
    @classmethod
    def unsupported_reason(cls, step: Step) -> str | None:
        m = step.input_specs[1].shape[-1]
        return f"index tuples of {m} > {MAX_TUPLE} elements" if m > MAX_TUPLE else None

    @classmethod
    def loop_iterations(cls, step: Step) -> int:
        return _tuples_per_invocation(step) * (step.input_specs[1].shape[-1] + 1)

    def prepare(self) -> None:
        step = self.step
        shape, ishape = step.input_specs[0].shape, step.input_specs[1].shape
        m = ishape[-1]
        size = step.output_specs[0].size
        self.dispatch("scatter/copy.wgsl", [step.inputs[0], step.outputs[0]], [size], _quads(size))
        count, slice_size = math.prod(ishape[:-1]), math.prod(shape[m:])
        per = _tuples_per_invocation(step)
        invocations = slice_size * -(-count // per)
        params = [invocations, slice_size, count, per, m, 0, 0, 0]
        params += _tuple_params(shape[:m], contiguous_strides(shape)[:m])
        self.dispatch("scatter/scatter_nd.wgsl", [step.inputs[1], step.inputs[2], step.outputs[0]], params,
                      invocations, text=_combine(step), status=self.status_mode(1))

    def status_error(self, check: int, value: int) -> str:
        return _tuple_index_error(self.step, self.step.input_specs[0].shape, check, value)


@gpu_kernel("OneHot")
class OneHotGpu(GpuExecution):
    @classmethod
    def unsupported_reason(cls, step: Step) -> str | None:
        dtype = step.input_specs[0].dtype
        return f"indices of type {dtype}" if dtype == "bool" else None

    def prepare(self) -> None:
        step = self.step
        out = step.output_specs[0]
        axis = step.attrs["axis"] % len(out.shape)
        ti = wgsl_type(step.input_specs[0].dtype)
        text = {"TI": ti, "T": wgsl_type(out.dtype), "TO_INT": "i32(v)" if ti == "f32" else "v"}
        params = [out.size, math.prod(out.shape[axis + 1:]), out.shape[axis]]
        self.dispatch("scatter/one_hot.wgsl", [step.inputs[0], step.inputs[2], step.outputs[0]], params,
                      _quads(out.size), text=text)


@gpu_kernel("EyeLike")
class EyeLikeGpu(GpuExecution):
    def prepare(self) -> None:
        step = self.step
        out = step.output_specs[0]
        rows, cols = out.shape
        k = min(max(step.attrs["k"], -rows), cols)  # beyond, every diagonal is empty
        self.dispatch("scatter/eye_like.wgsl", [step.outputs[0]], [out.size, cols, k], _quads(out.size),
                      text={"T": wgsl_type(out.dtype)})


@gpu_kernel("Trilu")
class TriluGpu(GpuExecution):
    def prepare(self) -> None:
        step = self.step
        out = step.output_specs[0]
        rows, cols = out.shape[-2:]
        value = _known(step, 1)
        k = None
        if not (len(step.inputs) > 1 and step.inputs[1]):
            k = 0
        elif value is not None:
            k = min(max(int(np.asarray(value).reshape(-1)[0]), -rows - 1), cols + 1)  # same selection
        text, extra = _optional_binding(step, 1, 2, "k", k)
        text.update(T=wgsl_type(out.dtype), CMP=">=" if step.attrs["upper"] else "<=",
                    K="p(3u)" if k is not None else "k_value[0]")
        self.dispatch("scatter/trilu.wgsl", [step.inputs[0], step.outputs[0], *extra],
                      [out.size, max(cols, 1), max(rows, 1), k or 0], _quads(out.size), text=text)


def _cumsum_axis(step: Step) -> int | None:
    value = _known(step, 1)
    return None if value is None else int(np.asarray(value).reshape(-1)[0]) % len(step.input_specs[0].shape)


@gpu_kernel("CumSum")
class CumSumGpu(GpuExecution):
    @classmethod
    def unsupported_reason(cls, step: Step) -> str | None:
        return _rank_reason(step.input_specs[0].shape)

    @classmethod
    def loop_iterations(cls, step: Step) -> int:
        shape = step.input_specs[0].shape
        axis = _cumsum_axis(step)
        return max(shape) if axis is None else shape[axis]

    def prepare(self) -> None:
        step = self.step
        x = step.input_specs[0]
        if x.size == 0:
            return
        axis = _cumsum_axis(step)
        chunk = min(x.shape) if axis is None else x.shape[axis]
        text, extra = _optional_binding(step, 1, 2, "axis", axis)
        text.update(T=wgsl_type(x.dtype), AXIS="p(2u)" if axis is not None else "axis_value[0]")
        params = [x.size, len(x.shape), axis or 0, step.attrs["exclusive"], step.attrs["reverse"],
                  x.size // chunk, chunk, 0] + padded(list(x.shape), 1)
        self.dispatch("scatter/cumsum.wgsl", [step.inputs[0], step.outputs[0], *extra], params, x.size // chunk,
                      text=text)


@gpu_kernel("ReverseSequence")
class ReverseSequenceGpu(GpuExecution):
    def prepare(self) -> None:
        step = self.step
        x = step.input_specs[0]
        batch_axis, time_axis = step.attrs["batch_axis"], step.attrs["time_axis"]
        strides = contiguous_strides(x.shape)
        params = [x.size, x.shape[time_axis], strides[time_axis], x.shape[batch_axis], strides[batch_axis]]
        self.dispatch("scatter/reverse_sequence.wgsl", [step.inputs[0], step.inputs[1], step.outputs[0]], params,
                      _quads(x.size), status=self.status_mode(1))

    def status_error(self, check: int, value: int) -> str:
        steps = self.step.input_specs[0].shape[self.step.attrs["time_axis"]]
        return (f'{self.step.label}: sequence length {value} is out of range [0, {steps}] '
                f'in "{self.step.inputs[1]}"')
