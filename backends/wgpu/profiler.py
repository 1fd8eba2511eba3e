"""Per-step GPU time for benchmarks (wgnn bench --per-op): opt-in, never on the normal path.

Each step's dispatches get their own compute pass with timestamp writes at its start and end (still
one encoder and one submission per segment): timestamps between dispatches of one pass need the
optional "timestamp-query-inside-passes" feature, which lavapipe lacks. Without "timestamp-query" a
segment is timed as a whole by wall clock (method "wall", step times None).
"""
from __future__ import annotations

import time

import numpy as np

from ...engine.errors import WgnnError


class GpuProfiler:
    """Every segment run appends {"start": perf_counter seconds, "wall_ms", "method", "steps":
    [(step, execution, begin_ms, end_ms) | (step, execution, None, None)]} to `records`; begin/end
    are GPU times relative to the segment's first timestamp."""

    def __init__(self, backend, steps: int):
        self.backend = backend
        self.capacity = max(1, steps)
        self.records: list[dict] = []
        self.method = "timestamp-query" if "timestamp-query" in backend.context.features else "wall"
        self.period_ns = timestamp_period(backend.context)
        self.timed: list = []
        if self.method == "timestamp-query":
            wgpu, device = backend.wgpu, backend.device
            try:
                self.query_set = device.create_query_set(type=wgpu.QueryType.timestamp, count=2 * self.capacity)
                self.resolved = device.create_buffer(size=16 * self.capacity, label="wgnn profiler",
                                                     usage=wgpu.BufferUsage.QUERY_RESOLVE | wgpu.BufferUsage.COPY_SRC)
            except Exception as exc:
                raise WgnnError(f"could not create timestamp queries on {backend.context.name}: {exc}") from None

    def take(self) -> list[dict]:
        """The records since the last take()."""
        records, self.records = self.records, []
        return records

    def start(self) -> float:
        return time.perf_counter()

    def encode(self, encoder, segment) -> None:
        """Record the segment: one timestamped compute pass per step that dispatches."""
        if self.method != "timestamp-query":
            compute = encoder.begin_compute_pass()
            for _, execution in segment.steps:
                execution.encode(compute)
            compute.end()
            return
        self.timed = [(step, ex) for step, ex in segment.steps if getattr(ex, "dispatches", None)]
        if len(self.timed) > self.capacity:
            raise WgnnError(f"the profiler was enabled for {self.capacity} steps and a segment has "
                            f"{len(self.timed)}: enable it again after a resize")
        for index, (_, execution) in enumerate(self.timed):
            compute = encoder.begin_compute_pass(timestamp_writes={
                "query_set": self.query_set, "beginning_of_pass_write_index": 2 * index,
                "end_of_pass_write_index": 2 * index + 1})
            execution.encode(compute)
            compute.end()
        if self.timed:
            encoder.resolve_query_set(self.query_set, 0, 2 * len(self.timed), self.resolved, 0)

    def collect(self, segment, started: float) -> None:
        """After the submission: read the timestamps back and record the segment's step times."""
        ticks = None
        if self.method == "timestamp-query" and self.timed:
            raw = self.backend.device.queue.read_buffer(self.resolved, 0, 16 * len(self.timed))
            ticks = np.frombuffer(raw, np.uint64).astype(np.int64).reshape(len(self.timed), 2)
        wall_ms = (time.perf_counter() - started) * 1e3
        if ticks is not None:
            origin = int(ticks[0, 0])
            scale = self.period_ns / 1e6
            times = {id(ex): ((int(b) - origin) * scale, (int(e) - origin) * scale)
                     for (_, ex), (b, e) in zip(self.timed, ticks)}
            steps = [(step, ex, *times.get(id(ex), (None, None))) for step, ex in segment.steps]
        else:
            steps = [(step, ex, None, None) for step, ex in segment.steps]
        self.timed = []
        self.records.append({"start": started, "wall_ms": wall_ms, "method": self.method, "steps": steps})


def timestamp_period(context) -> float:
    """Nanoseconds per timestamp tick. wgpu-py 0.32 has no API for it, so ask wgpu-native; 1 ns
    (what WebGPU specifies for resolved timestamps) when the call is missing."""
    try:
        from wgpu.backends.wgpu_native._ffi import lib

        return float(lib.wgpuQueueGetTimestampPeriod(context.queue._internal)) or 1.0
    except Exception:  # another wgpu backend, or a wgpu-native without the call
        return 1.0
