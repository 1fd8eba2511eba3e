"""Driver code generation ahead of the first run, side by side, where a driver would do it lazily.

Mesa's CPU Vulkan driver (lavapipe) turns a pipeline into machine code (LLVM) at its first
dispatch, not when it is created, on the device's one queue thread: on a machine's first-ever run
every kernel's code generation (seconds for the big fused ones) lands inside the session's first
run, one kernel after another. It keeps that code in Mesa's on-disk shader cache, which every
device of the process reads.

So there, each pipeline-compiling thread (loader.PipelineCache) owns a second device on the same
adapter, a *warm-up device*: for each kernel a session's steps dispatch (not the variants compiled
only for a later resize) it builds the same pipeline on its warm-up device and dispatches it with
zero workgroups over stand-in bindings (textures and params like the session's, where the code
depends on them: texture_traits, params_traits). The driver generates the code then, on that
device's queue thread, beside the other threads', and writes it to the disk cache, where the
session's device finds it at its first run. The session's resize waits for its kernels' warm-ups
as it waits for their pipelines, except those of kernels a step runs only once their code is
ready, a quicker one until then (GpuExecution.quick_first): those are background work.

A record of the kernels warmed (a file per adapter, driver and Mesa cache folder, in wgnn's cache
folder, or beside Mesa's cache in a folder MESA_SHADER_CACHE_DIR names) keeps later processes from
building every pipeline twice: a kernel found there is not warmed again. Were Mesa to evict one,
its first run would generate its code as before: slower, never wrong. Warm-ups never fail a
session: a warm-up device that cannot be opened turns them off for the process, with one log line;
a kernel that fails there is skipped.

WGNN_DRIVER_WARMUP=0 turns them off; they are off where they cannot help: drivers that generate
code when the pipeline is created (NVIDIA's, AMD's), one compile thread, Mesa's cache turned off.
"""
from __future__ import annotations

import hashlib
import logging
import os
import threading
import time
from pathlib import Path

from .readback import make_reader

log = logging.getLogger("wgnn.wgpu")

WARMUP_ENV = "WGNN_DRIVER_WARMUP"
# Larger than any uniform block or fixed-size array a kernel declares (the uniform binding limit
# is 64 KiB), so every binding meets its shader's minimum size; nothing is read at zero workgroups.
STAND_IN_BYTES = 1 << 16
RECORD_PREFIX = "wgnn-driver-code-"


def texture_traits(resource) -> tuple | None:
    """What lavapipe's code for a kernel depends on in a bound texture (its variant key): the
    format, whether width and height are powers of two, whether it has several layers. None for a
    buffer binding. (Measured: stand-ins of 1x1x1 missed the cache for every texture kernel.)"""
    texture = getattr(resource, "texture", None)
    if texture is None:
        return None
    width, height, layers = texture.size

    def power_of_two(n: int) -> bool:
        return n & (n - 1) == 0

    return str(texture.format), power_of_two(width), power_of_two(height), layers > 1


def params_traits(data) -> tuple:
    """What lavapipe's code for a kernel depends on in its params uniform: the values themselves.
    Mesa inlines uniform values that bound loops into the code, so each set of params a kernel is
    dispatched with may have code of its own (measured: with zeros in the stand-in, bert's LayerNorm
    and mask kernels missed the cache; with the session's params, none did)."""
    return "uniform", bytes(data)


def _first_line(exc: Exception) -> str:
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__


def warmup_reason(context, threads: int) -> str | None:
    """Why kernels are not warmed ahead on this context (None: they are)."""
    if os.environ.get(WARMUP_ENV, "1").strip().lower() in ("0", "false", "no", "off"):
        return f"{WARMUP_ENV}={os.environ[WARMUP_ENV]}"
    if "llvmpipe" not in context.info.name.lower() or context.info.backend != "Vulkan":
        return "the driver generates code when a pipeline is created"
    if threads < 2:
        return "one compile thread"
    if os.environ.get("MESA_SHADER_CACHE_DISABLE", "").strip().lower() in ("1", "true", "yes"):
        return "Mesa's shader cache is off (MESA_SHADER_CACHE_DISABLE)"
    return None


def mesa_cache_folder() -> Path:
    """The folder Mesa's on-disk shader cache lives in (its own sub-folder is made inside)."""
    configured = os.environ.get("MESA_SHADER_CACHE_DIR")
    if configured:
        return Path(configured).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    return Path(xdg).expanduser() if xdg else Path.home() / ".cache"


def _record_path(context) -> Path:
    """In a folder named by MESA_SHADER_CACHE_DIR, beside Mesa's own (a temporary one takes the record
    with it), else in wgnn's cache folder."""
    from .tuning import adapter_key, cache_dir

    folder = mesa_cache_folder().resolve()
    digest = hashlib.sha1(f"{adapter_key(context.info)} | {folder}".encode()).hexdigest()[:16]
    home = folder if os.environ.get("MESA_SHADER_CACHE_DIR") else cache_dir()
    return home / f"{RECORD_PREFIX}{digest}.txt"


def _mesa_cache_exists() -> bool:
    folder = mesa_cache_folder()
    return folder.is_dir() and any(p.name.startswith("mesa_shader_cache") for p in folder.iterdir())


class DriverWarmup:
    """Warm-up devices for one context, one per compile thread, and the record of kernels warmed."""

    def __init__(self, context):
        self.context = context
        self.record_path = _record_path(context)
        self.warmed = self._read_record()
        self.count = 0  # kernels warmed by this process
        self.seconds = 0.0  # summed over the threads
        self.broken: str | None = None
        self._local = threading.local()
        self._lock = threading.Lock()

    def _read_record(self) -> set[str]:
        if not _mesa_cache_exists():  # a wiped cache: the record no longer holds
            return set()
        try:
            return set(self.record_path.read_text().split())
        except OSError:
            return set()

    @staticmethod
    def key(code: str, bindings: tuple[str, ...], constants: dict, entry: str, traits: tuple) -> str:
        return hashlib.sha1(repr((code, entry, sorted(constants.items()), bindings, traits)).encode()).hexdigest()

    def recorded(self, code: str, bindings: tuple[str, ...], constants: dict, entry: str, traits: tuple) -> bool:
        """Whether this kernel was warmed for these traits, here or in an earlier process (the record)."""
        return self.key(code, bindings, constants, entry, traits) in self.warmed

    def warm(self, code: str, bindings: tuple[str, ...], constants: dict, entry: str,
             traits: tuple = ()) -> None:
        """Have the driver generate this kernel's code now, on this thread's warm-up device, for
        bindings of these traits (one per binding: texture_traits, params_traits; None or absent:
        a buffer whose contents the code does not depend on)."""
        key = self.key(code, bindings, constants, entry, traits)
        if self.broken or key in self.warmed:
            return
        start = time.perf_counter()
        # A warm-up only saves time: never fail the session on it.
        try:
            device, reader = self._device()
        except Exception as exc:  # no warm-up device: off for the process
            with self._lock:
                if not self.broken:
                    self.broken = _first_line(exc)
                    log.info("driver warm-ups off on %s: %s", self.context.name, self.broken)
            return
        try:
            self._dispatch_once(device, reader, code, bindings, constants, entry, traits)
        except Exception as exc:  # this kernel only (one that fails to compile fails the session's step too)
            log.debug("driver warm-up of a kernel failed on %s: %s", self.context.name, _first_line(exc))
            return
        with self._lock:
            self.warmed.add(key)
            self.count += 1
            self.seconds += time.perf_counter() - start
            try:
                self.record_path.parent.mkdir(parents=True, exist_ok=True)
                with open(self.record_path, "a") as record:  # one short line: atomic across processes
                    record.write(key + "\n")
            except OSError as exc:
                log.debug("could not write %s: %s", self.record_path, exc)

    def _device(self):
        local = self._local
        if getattr(local, "device", None) is None:
            context = self.context
            local.device = context.adapter.request_device_sync(
                required_features=sorted(context.features), required_limits=context.requested_limits)
            local.reader = make_reader(context.wgpu, local.device)  # waits blocked, not polling
        return local.device, local.reader

    def _dispatch_once(self, device, reader, code, bindings, constants, entry, traits) -> None:
        from .loader import layout_entries

        wgpu = self.context.wgpu
        layout = device.create_bind_group_layout(entries=layout_entries(wgpu, bindings))
        pipeline = device.create_compute_pipeline(
            layout=device.create_pipeline_layout(bind_group_layouts=[layout]),
            compute={"module": device.create_shader_module(code=code), "entry_point": entry,
                     "constants": constants})
        traits = list(traits) + [None] * (len(bindings) - len(traits))
        entries = [{"binding": index, "resource": self._stand_in(device, kind, traits[index])}
                   for index, kind in enumerate(bindings)]
        done = device.create_buffer(size=16, usage=wgpu.BufferUsage.MAP_READ | wgpu.BufferUsage.COPY_DST)
        source = device.create_buffer(size=16, usage=wgpu.BufferUsage.COPY_SRC)
        encoder = device.create_command_encoder()
        compute = encoder.begin_compute_pass()
        compute.set_pipeline(pipeline)
        compute.set_bind_group(0, device.create_bind_group(layout=layout, entries=entries))
        compute.dispatch_workgroups(0, 1, 1)  # the driver generates the code at dispatch; runs none
        compute.end()
        encoder.copy_buffer_to_buffer(source, 0, done, 0, 16)  # mapping `done` waits for the dispatch
        device.queue.submit([encoder.finish()])
        reader.read(done, 16)

    def _stand_in(self, device, kind: str, traits: tuple | None):
        from .loader import STORAGE, TEXTURE_IN, TEXTURE_OUT_HALF, UNIFORM

        wgpu = self.context.wgpu
        if kind == UNIFORM and traits is not None:  # the params, as the session's (params_traits)
            buffer = device.create_buffer(size=STAND_IN_BYTES,
                                          usage=wgpu.BufferUsage.UNIFORM | wgpu.BufferUsage.COPY_DST)
            device.queue.write_buffer(buffer, 0, traits[1])
            return {"buffer": buffer}
        if kind in (STORAGE, UNIFORM):
            usage = wgpu.BufferUsage.UNIFORM if kind == UNIFORM else wgpu.BufferUsage.STORAGE
            return {"buffer": device.create_buffer(size=STAND_IN_BYTES, usage=usage)}
        if traits is None:  # nothing known: what an fp32 session binds most
            traits = ("rgba16float" if kind == TEXTURE_OUT_HALF else "rgba32float", True, True, True)
        texture_format, pot_width, pot_height, layered = traits
        texture = device.create_texture(
            size=(1 if pot_width else 3, 1 if pot_height else 3, 2 if layered else 1), format=texture_format,
            usage=wgpu.TextureUsage.TEXTURE_BINDING if kind == TEXTURE_IN else wgpu.TextureUsage.STORAGE_BINDING)
        return texture.create_view(dimension="2d-array")
