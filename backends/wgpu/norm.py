"""Norm family on the GPU (float32): BatchNorm element-wise; InstanceNorm, LayerNorm, RMSNorm
(layer_norm.wgsl without the mean pass; layer_norm_vec4.wgsl where rows and their scale and bias
are whole contiguous vec4s), GroupNorm, LpNorm and MeanVarianceNorm with one invocation per
normalized row (a loop over the row; fine on software adapters, where shader memory access
dominates, and simple everywhere); LRN with 4 spatial elements of one channel per invocation,
looping over the channel window. All linear, one dispatch each.

LayerNorm / RMSNorm on rows of whole vec4s (layer_norm_workgroup.wgsl), GroupNorm and InstanceNorm
(group_norm_workgroup.wgsl) give a row a workgroup instead on real GPUs and where one invocation's
loop would pass llvmpipe's limit (reduce.workgroup_per_row). With an invocation per row, GroupNorm
and InstanceNorm whose spatial size is whole vec4s run group_norm_vec4.wgsl.

BatchNorm on a 4-D feature map with per-channel parameters known at resize also runs on NC4HW4
(batch_norm_nc4hw4.wgsl, parameters repacked as vec4 slices); it prefers linear, so it follows
the layout of its input."""
from __future__ import annotations

import math

from ...engine.geometry import contiguous_strides
from ...engine.ops.norm import SKIP
from ..base import Step
from .backend import WORKGROUP, GpuExecution, gpu_kernel
from .conv import ceil_div, known, pack_channels
from .elementwise import feature_map_text
from .matmul import broadcast_strides, merge_axes
from .reduce import workgroup_iterations, workgroup_per_row

MAX_RANK = 6  # normalized axes of a broadcast LayerNorm scale/bias (prelude strided_offset)


def _float32_only(step: Step) -> str | None:
    dtype = step.input_specs[0].dtype
    return None if dtype == "float32" else f"{step.op.op_type} on {dtype} has no GPU kernel"


@gpu_kernel("BatchNorm")
class BatchNormGpu(GpuExecution):
    @classmethod
    def unsupported_reason(cls, step: Step) -> str | None:
        return _float32_only(step)

    @classmethod
    def layouts(cls, step: Step) -> tuple[str, ...]:
        from .layout import is_feature_map

        params = range(1, 5)
        per_channel = all(len(step.input_specs[i].shape) == 1 for i in params)
        if is_feature_map(step.input_specs[0]) and per_channel and all(known(step, i) for i in params):
            return ("linear", "nc4hw4")
        return ("linear",)

    def prepare(self) -> None:
        step = self.step
        x = step.input_specs[0].shape
        if self.layout == "nc4hw4":
            from .layout import accessor_params

            blocks = ceil_div(x[3], 4)
            invocations = x[0] * ceil_div(x[1], 4) * x[2] * blocks
            # Each parameter is its own packed constant, so each is uploaded once per source array.
            packed = [self.packed_constant(key, step.input_values[i], pack_channels)
                      for i, key in enumerate(("scale", "bias", "mean", "variance"), start=1)]
            params = [invocations, blocks, float(step.attrs["epsilon"]), 0, *accessor_params(step.input_specs[0]),
                      *accessor_params(step.output_specs[0])]
            text = feature_map_text(self, {"x": (step.inputs[0], 0, 4, False), "y": (step.outputs[0], 5, 9, True)})
            self.dispatch("norm/batch_norm_nc4hw4.wgsl", [step.inputs[0], *packed, step.outputs[0]], params,
                          invocations, text=text)
            return
        n = step.output_specs[0].size
        inner = math.prod(x[2:])
        per_channel = len(step.input_specs[1].shape) == 1
        params = [n, x[1] * inner, inner if per_channel else 1, float(step.attrs["epsilon"])]
        self.dispatch("norm/batch_norm.wgsl", list(step.inputs[:5]) + [step.outputs[0]], params, -(-n // 4))


@gpu_kernel("InstanceNorm")
class InstanceNormGpu(GpuExecution):
    @classmethod
    def unsupported_reason(cls, step: Step) -> str | None:
        return _float32_only(step)

    @classmethod
    def loop_iterations(cls, step: Step) -> int:
        return GroupRows(1, math.prod(step.input_specs[0].shape[2:])).loop_iterations()

    def prepare(self) -> None:
        step = self.step
        x = step.input_specs[0].shape
        rows, spatial = x[0] * x[1], math.prod(x[2:])
        if spatial == 0:
            return  # empty output: nothing to write
        per_channel_bias = len(step.input_specs[2].shape) == 1
        bias_strides = [1, 0] if per_channel_bias else [spatial, 1]
        tensors = list(step.inputs[:3]) + [step.outputs[0]]
        by_workgroup = workgroup_per_row(self, GroupRows(1, spatial).one_invocation(), spatial)
        if by_workgroup or spatial % 4 == 0:  # a group of one channel: the GroupNorm kernels
            params = [rows, x[1], 1, spatial, float(step.attrs["epsilon"]), 0, *bias_strides]
            kernel = "norm/group_norm_workgroup.wgsl" if by_workgroup else "norm/group_norm_vec4.wgsl"
            self.dispatch(kernel, tensors, params, rows * WORKGROUP if by_workgroup else rows)
            return
        params = [rows, x[1], spatial, float(step.attrs["epsilon"]), *bias_strides]
        self.dispatch("norm/instance_norm.wgsl", tensors, params, rows)


class GroupRows:
    """A GroupNorm (or InstanceNorm) row: `channels` channels of `spatial` elements each."""

    def __init__(self, channels: int, spatial: int):
        self.channels, self.spatial = channels, spatial

    def one_invocation(self) -> int:
        """Loop iterations of group_norm.wgsl / instance_norm.wgsl: the mean, variance and write passes."""
        return 3 * self.channels * self.spatial + self.channels + 16

    def by_workgroup(self) -> int:
        """Loop iterations of one invocation of group_norm_workgroup.wgsl."""
        size = self.channels * self.spatial
        return workgroup_iterations(size, 2, 2) + self.channels * (1 + -(-self.spatial // WORKGROUP))

    def loop_iterations(self) -> int:
        return min(self.one_invocation(), self.by_workgroup())


class LayerNormLayout:
    """Rows, row length, how scale/bias are read over the normalized axes, and how the skip's rows
    are read over the leading ones."""

    def __init__(self, step: Step):
        x = step.input_specs[0].shape
        axis = step.attrs["axis"] % len(x)
        normalized = tuple(x[axis:])
        self.rows, self.size = math.prod(x[:axis]), math.prod(normalized)
        self.has_bias = len(step.inputs) > 2 and bool(step.inputs[2])
        strides = [broadcast_strides(normalized, step.input_specs[1].shape)]
        strides.append(broadcast_strides(normalized, step.input_specs[2].shape) if self.has_bias
                       else [0] * len(normalized))
        self.shape, self.strides = merge_axes(list(normalized), strides)
        self.has_skip = len(step.inputs) > SKIP and bool(step.inputs[SKIP])
        skip_strides = broadcast_strides(tuple(x), step.input_specs[SKIP].shape)[:axis] if self.has_skip else []
        self.leading, (self.skip_strides,) = merge_axes(list(x[:axis]), [skip_strides or [0] * axis])

    def skip_params(self) -> list:
        """Params slots 30..46: X's leading shape and the skip's strides over it (rank 6 each, from
        32 and 40), then the has-skip flag (layer_norm_rows.wgsl)."""
        pad = MAX_RANK - len(self.leading)
        return ([0, 0] + [1] * pad + self.leading + [0, 0] + [0] * pad + self.skip_strides
                + [int(self.has_skip)])

    def whole_vec4s(self) -> bool:
        """Rows of whole vec4s, scale and bias contiguous vectors along them (the usual (D,) case)."""
        contiguous = len(self.shape) == 1 and all(s == [1] for s in self.strides[:1 + self.has_bias])
        return contiguous and self.size % 4 == 0

    def passes(self, rms: bool) -> int:
        return 2 if rms else 3  # (mean,) variance and write

    def kernel(self, by_workgroup: bool) -> str:
        """layer_norm_vec4.wgsl where rows are whole vec4s (on lavapipe zoo bert's five at 2 x 64
        tokens: 246 against 505 us, the model x0.90), layer_norm_workgroup.wgsl for those with a
        workgroup per row, else layer_norm.wgsl."""
        if not self.whole_vec4s():
            return "norm/layer_norm.wgsl"
        return "norm/layer_norm_workgroup.wgsl" if by_workgroup else "norm/layer_norm_vec4.wgsl"

    def loop_iterations(self, rms: bool) -> int:
        """An invocation's loop iterations in the kernel with the fewest: a workgroup per row where
        rows are whole vec4s, else an invocation's walk over its row."""
        if self.whole_vec4s():
            return workgroup_iterations(self.size // 4, self.passes(rms), self.passes(rms) - 1)
        return self.passes(rms) * self.size + 16


@gpu_kernel("LayerNorm")
class LayerNormGpu(GpuExecution):
    @classmethod
    def loop_iterations(cls, step: Step) -> int:
        return LayerNormLayout(step).loop_iterations(step.op.op_type == "RMSNorm")

    @classmethod
    def unsupported_reason(cls, step: Step) -> str | None:
        reason = _float32_only(step)
        if reason:
            return reason
        layout = LayerNormLayout(step)
        if len(layout.shape) > MAX_RANK:
            return f"scale/bias broadcast over {len(layout.shape)} axes (the kernel takes {MAX_RANK})"
        if layout.has_skip and not layout.whole_vec4s():
            return "a skip input with rows that are not whole vec4s (or scale / bias that broadcast) runs on the CPU"
        if len(layout.leading) > MAX_RANK:
            return f"a skip over {len(layout.leading)} leading axes that do not merge (the kernel takes {MAX_RANK})"
        if layout.size == 0 and layout.rows and any(step.outputs[1:]):
            return "Mean / InvStdDev of empty rows (NaN) run on the CPU"
        return None

    def prepare(self) -> None:
        step = self.step
        layout = LayerNormLayout(step)
        if layout.rows == 0 or (layout.size == 0 and not any(step.outputs[1:])):
            return
        outputs = list(step.outputs) + [""] * (3 - len(step.outputs))
        one_axis = len(layout.shape) <= 1
        scale_strides, bias_strides = layout.strides
        pad = MAX_RANK - len(layout.shape)
        params = [layout.rows, layout.size, float(step.attrs["epsilon"]), int(layout.has_bias),
                  int(bool(outputs[1])), int(bool(outputs[2])), int(one_axis),
                  scale_strides[0] if one_axis and scale_strides else 0]
        rms = int(step.op.op_type == "RMSNorm")
        params += [1] * pad + layout.shape + [bias_strides[0] if one_axis and bias_strides else 0, rms]
        params += [0] * pad + scale_strides + [0, 0] + [0] * pad + bias_strides
        # Absent bias / statistics bind a stand-in (scale / Y) that the kernel never touches.
        tensors = [step.inputs[0], step.inputs[1], step.inputs[2] if layout.has_bias else step.inputs[1],
                   outputs[0]] + [name or outputs[0] for name in outputs[1:3]]
        by_workgroup = workgroup_per_row(self, layout.passes(bool(rms)) * layout.size + 16, layout.size // 4)
        kernel = layout.kernel(by_workgroup)
        if kernel != "norm/layer_norm.wgsl":  # the vec4 kernels bind the skip (X stands in for none)
            params += layout.skip_params()
            tensors.append(step.inputs[SKIP] if layout.has_skip else step.inputs[0])
        invocations = layout.rows * WORKGROUP if kernel == "norm/layer_norm_workgroup.wgsl" else layout.rows
        self.dispatch(kernel, tensors, params, invocations)


@gpu_kernel("RMSNorm")
class RMSNormGpu(LayerNormGpu):
    """layer_norm.wgsl with its RMS flag: no bias, no statistics outputs, no mean pass."""

    @classmethod
    def unsupported_reason(cls, step: Step) -> str | None:
        if step.attrs["stash_dtype"] != "float32":
            return f"stash type {step.attrs['stash_dtype']} has no GPU kernel (float32 statistics only)"
        return super().unsupported_reason(step)


@gpu_kernel("GroupNorm")
class GroupNormGpu(GpuExecution):
    @classmethod
    def unsupported_reason(cls, step: Step) -> str | None:
        if step.attrs["stash_dtype"] != "float32":
            return f"stash type {step.attrs['stash_dtype']} has no GPU kernel (float32 statistics only)"
        return _float32_only(step)

    @classmethod
    def loop_iterations(cls, step: Step) -> int:
        x = step.input_specs[0].shape
        return GroupRows(x[1] // step.attrs["num_groups"], math.prod(x[2:])).loop_iterations()

    def prepare(self) -> None:
        step = self.step
        x = step.input_specs[0].shape
        groups = step.attrs["num_groups"]
        spatial = math.prod(x[2:])
        if spatial == 0 or x[1] == 0:
            return  # empty output: nothing to write
        params = [x[0] * groups, groups, x[1] // groups, spatial, float(step.attrs["epsilon"]),
                  int(step.attrs["per_group"])]
        tensors = list(step.inputs[:3]) + [step.outputs[0]]
        row = GroupRows(x[1] // groups, spatial)
        if workgroup_per_row(self, row.one_invocation(), row.channels * spatial):
            self.dispatch("norm/group_norm_workgroup.wgsl", tensors, params + [1, 0], x[0] * groups * WORKGROUP)
        elif spatial % 4 == 0:
            self.dispatch("norm/group_norm_vec4.wgsl", tensors, params + [1, 0], x[0] * groups)
        else:
            self.dispatch("norm/group_norm.wgsl", tensors, params, x[0] * groups)


def _axis_split(shape, axis: int) -> tuple[int, int, int]:
    """(outer, length, inner) of a C-order shape around one axis."""
    return math.prod(shape[:axis]), shape[axis], math.prod(shape[axis + 1:])


@gpu_kernel("LpNorm")
class LpNormGpu(GpuExecution):
    @classmethod
    def unsupported_reason(cls, step: Step) -> str | None:
        return _float32_only(step)

    @classmethod
    def loop_iterations(cls, step: Step) -> int:
        shape = step.input_specs[0].shape
        return 2 * shape[step.attrs["axis"] % len(shape)] + 8

    def prepare(self) -> None:
        step = self.step
        shape = step.input_specs[0].shape
        outer, length, inner = _axis_split(shape, step.attrs["axis"] % len(shape))
        rows = outer * inner
        if length == 0:
            return
        self.dispatch("norm/lp_norm.wgsl", [step.inputs[0], step.outputs[0]],
                      [rows, length, inner, step.attrs["p"]], rows)


@gpu_kernel("LRN")
class LRNGpu(GpuExecution):
    @classmethod
    def unsupported_reason(cls, step: Step) -> str | None:
        return _float32_only(step)

    @classmethod
    def loop_iterations(cls, step: Step) -> int:
        return step.attrs["size"] + 8

    def prepare(self) -> None:
        step = self.step
        x = step.input_specs[0].shape
        size = step.attrs["size"]
        spatial = math.prod(x[2:])
        blocks = ceil_div(spatial, 4)
        invocations = x[0] * x[1] * blocks
        params = [invocations, x[1], spatial, blocks, (size - 1) // 2, size // 2,
                  float(step.attrs["alpha"] / size), float(step.attrs["beta"]), float(step.attrs["bias"])]
        self.dispatch("norm/lrn.wgsl", [step.inputs[0], step.outputs[0]], params, invocations)


MVN_REDUCED, MVN_KEPT = 4, 6  # merged axes mvn.wgsl walks (odometer) and indexes (strided_offset)


class MeanVarianceLayout:
    """Rows over the kept axes and elements over the reduced axes, each merged where contiguous."""

    def __init__(self, step: Step):
        shape = step.input_specs[0].shape
        axes = {a % len(shape) for a in step.attrs["axes"]}
        strides = contiguous_strides(shape)
        reduced = [i for i in range(len(shape)) if i in axes]
        kept = [i for i in range(len(shape)) if i not in axes]
        self.size = math.prod(shape[i] for i in reduced)
        self.rows = math.prod(shape[i] for i in kept)
        self.reduced, (self.reduced_strides,) = merge_axes([shape[i] for i in reduced], [[strides[i] for i in reduced]])
        self.kept, (self.kept_strides,) = merge_axes([shape[i] for i in kept], [[strides[i] for i in kept]])


@gpu_kernel("MeanVarianceNorm")
class MeanVarianceNormGpu(GpuExecution):
    @classmethod
    def unsupported_reason(cls, step: Step) -> str | None:
        reason = _float32_only(step)
        if reason:
            return reason
        layout = MeanVarianceLayout(step)
        if len(layout.reduced) > MVN_REDUCED or len(layout.kept) > MVN_KEPT:
            return (f"{len(layout.reduced)} reduced / {len(layout.kept)} kept axis groups (the kernel takes "
                    f"{MVN_REDUCED} / {MVN_KEPT})")
        return None

    @classmethod
    def loop_iterations(cls, step: Step) -> int:
        return 3 * MeanVarianceLayout(step).size + 16  # mean, variance and write passes

    def prepare(self) -> None:
        step = self.step
        layout = MeanVarianceLayout(step)
        if layout.rows == 0 or layout.size == 0:
            return
        pad_r, pad_k = MVN_REDUCED - len(layout.reduced), MVN_KEPT - len(layout.kept)
        params = [layout.rows, layout.size, float(step.attrs["epsilon"]), 0,
                  *([1] * pad_r + layout.reduced), *([0] * pad_r + layout.reduced_strides),
                  *([1] * pad_k + layout.kept), *([0] * pad_k + layout.kept_strides)]
        self.dispatch("norm/mvn.wgsl", [step.inputs[0], step.outputs[0]], params, layout.rows)
