"""Image preprocessing on the GPU (wgnn.image): one dispatch of kernels_wgsl/image/preprocess.wgsl
per batch. Not a graph op: the runner owns its buffers (input bytes, sampling table, output),
grows them when a larger batch comes and reuses them otherwise; the pipeline is compiled once per
device (the shared pipeline cache), so new shapes only upload a new table and parameter block."""
from __future__ import annotations

import math

import numpy as np

from ...engine.errors import WgnnError
from .backend import WORKGROUP, pack_params
from .context import get_context
from .loader import STORAGE, UNIFORM, pipeline_cache

KERNEL = "image/preprocess.wgsl"
PIXELS_PER_INVOCATION = 4


def _round4(n: int) -> int:
    return (n + 3) // 4 * 4


def kernel_params(plan) -> list[int | float]:
    """The uniform block of one batch (see the slot list in the .wgsl)."""
    g, bias = plan.coefficients()
    invocations = plan.batch * plan.out_h * -(-plan.out_w // PIXELS_PER_INVOCATION)
    flags = int(plan.nearest) | 2 * int(plan.constant_border)
    params: list[int | float] = [invocations, 0, plan.in_h, plan.in_w, plan.in_c, plan.out_h, plan.out_w, flags,
                                 plan.lanes, 0, 0, 0, *plan.out_strides]
    params += [float(v) for v in np.pad(g, ((0, 4 - plan.lanes), (0, 0))).reshape(-1)]
    params += [float(v) for v in np.pad(bias, (0, 4 - plan.lanes))]
    return params


class GpuImageRunner:
    """Runs image plans on one adapter's device (shared with the sessions on that adapter)."""

    def __init__(self, adapter=None):
        self.context = get_context(adapter)
        self.device = self.context.device
        self.wgpu = self.context.wgpu
        self.pipelines = pipeline_cache(self.context)
        self.kernel = self.pipelines.get(KERNEL, (STORAGE, STORAGE, STORAGE, UNIFORM), constants={"WG": WORKGROUP})
        self.max_binding = self.context.limits.get("max-storage-buffer-binding-size", 1 << 27)
        self.max_groups = self.context.limits.get("max-compute-workgroups-per-dimension", 65535)
        self.buffers: dict[str, object] = {}
        self.uniform = self.device.create_buffer(size=len(pack_params([])) * 4, label="wgnn image params",
                                                 usage=self.wgpu.BufferUsage.UNIFORM | self.wgpu.BufferUsage.COPY_DST)
        self.bind_group = None

    def _buffer(self, role: str, nbytes: int):
        """The role's buffer, replaced by a larger one when nbytes does not fit (then the bind group
        is rebuilt)."""
        if nbytes > self.max_binding:
            raise WgnnError(f"image preprocessing: the {role} needs {nbytes} bytes, more than the adapter's "
                            f"{self.max_binding}-byte binding limit on {self.context.name}: use smaller batches")
        buffer = self.buffers.get(role)
        if buffer is None or buffer.size < nbytes:
            usage = self.wgpu.BufferUsage.STORAGE | self.wgpu.BufferUsage.COPY_DST | self.wgpu.BufferUsage.COPY_SRC
            try:
                buffer = self.device.create_buffer(size=max(16, _round4(nbytes)), usage=usage,
                                                   label=f"wgnn image {role}")
            except Exception as exc:
                raise WgnnError(f"GPU memory: could not allocate {nbytes} bytes for the image {role} on "
                                f"{self.context.name}: {exc}") from None
            self.buffers[role] = buffer
            self.bind_group = None
        return buffer

    def _grid(self, invocations: int) -> tuple[int, int, int]:
        groups = math.ceil(invocations / WORKGROUP)
        if groups <= self.max_groups:
            return (groups, 1, 1)
        rows = math.ceil(groups / self.max_groups)
        if rows > self.max_groups:
            raise WgnnError(f"image preprocessing: {invocations} invocations exceed the adapter's dispatch limits")
        return (self.max_groups, rows, 1)

    def run(self, plan, images: np.ndarray) -> np.ndarray:
        """images (N, H, W, C) uint8, C-contiguous -> the plan's float32 output."""
        data = images.tobytes()
        data += b"\0" * (_round4(len(data)) - len(data))  # whole u32 words
        out_bytes = math.prod(plan.out_shape) * 4
        params = kernel_params(plan)
        queue = self.device.queue
        with self.context.lock:  # one submission per device at a time; buffers may be replaced below
            source = self._buffer("input", len(data))
            table = self._buffer("table", plan.table.nbytes)
            output = self._buffer("output", out_bytes)
            if self.bind_group is None:
                entries = [{"binding": i, "resource": {"buffer": b, "offset": 0, "size": b.size}}
                           for i, b in enumerate((source, table, output))]
                entries.append({"binding": 3, "resource": {"buffer": self.uniform, "offset": 0,
                                                           "size": self.uniform.size}})
                self.bind_group = self.device.create_bind_group(layout=self.kernel.layout, entries=entries)
            queue.write_buffer(source, 0, data)
            queue.write_buffer(table, 0, plan.table.tobytes())
            queue.write_buffer(self.uniform, 0, pack_params(params).tobytes())
            encoder = self.device.create_command_encoder()
            compute = encoder.begin_compute_pass()
            compute.set_pipeline(self.kernel.pipeline)
            compute.set_bind_group(0, self.bind_group)
            compute.dispatch_workgroups(*self._grid(params[0]))
            compute.end()
            try:
                queue.submit([encoder.finish()])
            except Exception as exc:
                raise WgnnError(f"GPU submission failed on {self.context.name}: {exc}") from None
            raw = queue.read_buffer(output, 0, out_bytes)
        return np.frombuffer(raw, np.float32).reshape(plan.out_shape).copy()
