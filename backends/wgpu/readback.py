"""Reading a MAP_READ buffer back after a submission.

wgpu-py's map_sync submits an empty command buffer before every read map (a workaround for
buffers written through the mapping API, which wgnn never does) and waits for the map on its
per-device poll thread, so each map costs two extra thread hand-offs. On lavapipe that is
70 + 45 us of a run's ~300 us fixed cost. With wgpu-native, NativeMapReader maps and polls on
the calling thread instead; it checks itself on a known buffer at start-up and any other wgpu
build (or a failed self-check) falls back to map_sync.

Where the GPU's work runs on another core of this machine and that core is its only user (lavapipe
without worker threads), the reader first polls without waiting for a short while: a thread woken
from a blocking wait took about 12 us to run again here back to back and 40-70 us after a few ms of
other work, where a small model's whole run is a few hundred (docs/performance.md, "Polling for the
outputs").
"""

from __future__ import annotations

import time

import numpy as np

# Polls that find the queue empty without the map callback having run, before giving up: the
# callback fires on the poll after the submission that last used the buffer completes.
_EMPTY_POLLS_ALLOWED = 3


class MapSyncReader:
    """Any wgpu build: wgpu-py's own map_sync."""

    def __init__(self, wgpu):
        self.wgpu = wgpu

    def read(self, buffer, size: int) -> bytearray:
        """A new writeable copy of the buffer's first size bytes (the outputs decoded from it are
        the caller's arrays as they are)."""
        buffer.map_sync(self.wgpu.MapMode.READ, 0, size)
        try:
            return bytearray(buffer.read_mapped(0, size, copy=False))
        finally:
            buffer.unmap()


class NativeMapReader:
    """wgpu-native: wgpuBufferMapAsync, then wgpuDevicePoll on this thread until the map's callback
    has run: without waiting for the first spin_seconds, then waiting. The buffer stays unmapped in
    wgpu-py's bookkeeping throughout."""

    def __init__(self, device, spin_seconds: float = 0.0):
        from wgpu.backends.wgpu_native import _api
        from wgpu.backends.wgpu_native._ffi import ffi, lib

        self._api, self._ffi, self._lib = _api, ffi, lib
        self.device = device
        self.spin_seconds = spin_seconds
        self._result: tuple[int, str] | None = None
        self._calls = 0

        # userdata1 carries the call's number: a late callback of an earlier, failed map is ignored
        @ffi.callback("void(WGPUMapAsyncStatus, WGPUStringView, void *, void *)")
        def mapped(status, message, call, _userdata2):
            if int(ffi.cast("intptr_t", call)) == self._calls:
                self._result = (int(status), _api.from_c_string_view(message))

        self._callback = mapped  # kept alive as long as the reader
        self._info = _api.new_struct("WGPUBufferMapCallbackInfo",
                                     mode=lib.WGPUCallbackMode_AllowProcessEvents, callback=mapped)

    def read(self, buffer, size: int) -> bytearray:
        """As MapSyncReader.read."""
        libf, ffi, lib = self._api.libf, self._ffi, self._lib
        self._result = None
        self._calls += 1
        self._info.userdata1 = ffi.cast("void *", self._calls)
        libf.wgpuBufferMapAsync(buffer._internal, lib.WGPUMapMode_Read, 0, size, self._info)
        empty_polls = 0
        spin_until = time.perf_counter() + self.spin_seconds if self.spin_seconds > 0 else 0.0
        while self._result is None:
            wait = not spin_until or time.perf_counter() >= spin_until
            queue_empty = libf.wgpuDevicePoll(self.device._internal, wait, ffi.NULL)
            if queue_empty and self._result is None and wait:
                empty_polls += 1
                if empty_polls > _EMPTY_POLLS_ALLOWED:
                    raise RuntimeError("the buffer map never completed (the device went idle without "
                                       "calling back)")
        status, message = self._result
        if status != lib.WGPUMapAsyncStatus_Success:
            raise RuntimeError(f"could not map the buffer (status {status}): {message}")
        try:
            pointer = libf.wgpuBufferGetConstMappedRange(buffer._internal, 0, size)
            return bytearray(ffi.buffer(ffi.cast("char *", pointer), size))
        finally:
            libf.wgpuBufferUnmap(buffer._internal)


def make_reader(wgpu, device, spin_seconds: float = 0.0):
    """NativeMapReader (polling without waiting for spin_seconds) when this wgpu build has it and it
    reads a known buffer back right; MapSyncReader otherwise."""
    try:
        reader = NativeMapReader(device, spin_seconds)
        expected = np.arange(16, dtype=np.uint32).tobytes()
        probe = device.create_buffer(size=len(expected), label="wgnn readback self-check",
                                     usage=wgpu.BufferUsage.MAP_READ | wgpu.BufferUsage.COPY_DST)
        try:
            device.queue.write_buffer(probe, 0, expected)
            device.queue.submit([device.create_command_encoder().finish()])  # carries the write
            if reader.read(probe, len(expected)) == expected:
                return reader
        finally:
            probe.destroy()
    except Exception:  # an older or different wgpu build: its own map_sync is always right
        pass
    return MapSyncReader(wgpu)
