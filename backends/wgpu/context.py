"""Adapters and devices: list what wgpu sees, pick one, open a device with its full limits.

Devices are shared: every session on the same adapter uses one device (created on first use); on
lavapipe, one per worker-thread count a session runs with (GpuContext.lavapipe_threads).
"""
from __future__ import annotations

import atexit
import logging
import os
import shutil
import tempfile
import threading
from dataclasses import dataclass, field

from ...engine.errors import AdapterError, InputError
from .readback import make_reader

log = logging.getLogger("wgnn.wgpu")

KEY_LIMITS = (
    "max-buffer-size", "max-storage-buffer-binding-size", "max-storage-buffers-per-shader-stage",
    "max-texture-dimension-2d", "max-texture-dimension-3d", "max-texture-array-layers",
    "max-compute-workgroups-per-dimension", "max-compute-invocations-per-workgroup",
    "max-compute-workgroup-storage-size", "min-storage-buffer-offset-alignment",
    "min-uniform-buffer-offset-alignment",
)
OPTIONAL_FEATURES = ("shader-f16", "timestamp-query", "subgroup")
# Preference when nothing is named: real GPUs first, then software ones; native APIs before GL.
TYPE_RANK = {"DiscreteGPU": 0, "IntegratedGPU": 1, "VirtualGPU": 2, "CPU": 3, "Unknown": 4}
BACKEND_RANK = {"Vulkan": 0, "Metal": 0, "D3D12": 0, "OpenGL": 2}


@dataclass
class AdapterInfo:
    index: int
    name: str
    backend: str
    adapter_type: str
    driver: str
    vendor: str
    features: list[str] = field(default_factory=list)
    limits: dict[str, int] = field(default_factory=dict)

    def as_dict(self) -> dict:
        return dict(self.__dict__)


_lock = threading.Lock()
_adapters: list | None = None  # wgpu-py's own instance: LP_NUM_THREADS as the environment says
_adapters_by_threads: dict[int, list] = {}  # instances of their own, listed with LP_NUM_THREADS=key
_contexts: dict[tuple[int, int | None], GpuContext] = {}  # (adapter index, lavapipe threads or None)


# Environment variables that turn off GPU drivers' on-disk shader caches: Mesa's (lavapipe,
# llvmpipe, RADV, ANV, ...) and NVIDIA's Linux driver. Drivers read them once, when they load.
DRIVER_CACHE_OFF = {"MESA_SHADER_CACHE_DISABLE": "true", "__GL_SHADER_DISK_CACHE": "0"}


def disable_driver_shader_cache() -> None:
    """Turn the drivers' on-disk shader caches off for this process, so that every shader compiles
    as on a machine's first-ever run (lavapipe compiles a kernel at its first dispatch: seconds for
    the big fused ones, which the cache turns into milliseconds for every later process). Only
    before the first GPU use of the process."""
    if _adapters is not None:
        raise InputError("the GPU driver is loaded already in this process: its shader cache can only be turned "
                         "off before the first GPU use (e.g. at the start of a script, or with "
                         "`wgnn bench --no-driver-cache`)")
    os.environ.update(DRIVER_CACHE_OFF)


def use_empty_driver_shader_cache() -> str:
    """Point the drivers' on-disk shader caches (Mesa's, NVIDIA's) at a new empty folder for this
    process, removed at exit: a machine's first-ever run, its cache on and empty, which the driver
    warm-ups (warmup.py) fill ahead of the first run. Returns the folder. Only before the first GPU
    use of the process."""
    if _adapters is not None:
        raise InputError("the GPU driver is loaded already in this process: its shader cache can only be moved "
                         "before the first GPU use (e.g. at the start of a script, or with "
                         "`wgnn bench --empty-driver-cache`)")
    folder = tempfile.mkdtemp(prefix="wgnn-driver-cache-")
    atexit.register(shutil.rmtree, folder, True)
    os.environ.update({"MESA_SHADER_CACHE_DIR": folder, "__GL_SHADER_DISK_CACHE_PATH": folder})
    for name in DRIVER_CACHE_OFF:
        os.environ.pop(name, None)
    return folder


# Mesa's CPU drivers (lavapipe for Vulkan, llvmpipe for OpenGL) split each dispatch over worker
# threads, one per core unless LP_NUM_THREADS says otherwise; 0 runs it on the driver's own queue
# thread. They read it when a wgpu instance lists the adapters, so a second instance listed with
# another count gives devices with that many workers in the same process (_adapter_with_threads).
LAVAPIPE_THREADS = "LP_NUM_THREADS"
MAX_LAVAPIPE_THREADS = 32  # llvmpipe's LP_MAX_THREADS in Mesa 22.x


def check_lavapipe_threads(count) -> None:
    if isinstance(count, bool) or not isinstance(count, int) or not 0 <= count <= MAX_LAVAPIPE_THREADS:
        raise InputError(f"lavapipe threads must be an integer from 0 to {MAX_LAVAPIPE_THREADS}, got {count!r}")


def set_lavapipe_threads(count: int) -> None:
    """Worker threads of Mesa's CPU drivers for this process (LP_NUM_THREADS). Small models run
    faster with 0 on few cores, where handing each dispatch to the workers and back costs more
    than it gains (docs/performance.md); large ones faster with one per core, the default. Only
    before the first GPU use of the process."""
    check_lavapipe_threads(count)
    if _adapters is not None:
        raise InputError("the GPU driver is loaded already in this process: lavapipe's worker threads can only be "
                         "set before the first GPU use (e.g. at the start of a script, with "
                         f"{LAVAPIPE_THREADS}=N in the environment, or `wgnn bench --lavapipe-threads N`)")
    os.environ[LAVAPIPE_THREADS] = str(count)


def is_lavapipe(info: AdapterInfo | None) -> bool:
    """Mesa's CPU Vulkan driver: the one adapter whose worker threads a session can choose (llvmpipe
    through OpenGL shares one EGL display, and so its threads, across wgpu instances)."""
    return info is not None and "llvmpipe" in info.name.lower() and info.backend == "Vulkan"


def lavapipe_threads_chosen_by_environment() -> bool:
    """Whether this process's lavapipe worker count was set (LP_NUM_THREADS, set_lavapipe_threads):
    sessions then keep it rather than choose their own."""
    return LAVAPIPE_THREADS in os.environ


def lavapipe_threads(info: AdapterInfo | None) -> int | None:
    """The worker threads Mesa's CPU driver runs with in this process's own wgpu instance, for an
    llvmpipe adapter, Vulkan or OpenGL (None for others); a context's own count is
    GpuContext.lavapipe_threads."""
    if info is None or "llvmpipe" not in info.name.lower():
        return None
    try:
        return max(0, min(int(os.environ[LAVAPIPE_THREADS]), MAX_LAVAPIPE_THREADS))
    except (KeyError, ValueError):
        return min(os.cpu_count() or 1, MAX_LAVAPIPE_THREADS)


# How long a read of the outputs polls the device without waiting before it waits (readback.py).
READBACK_SPIN_ENV = "WGNN_READBACK_SPIN_US"
READBACK_SPIN_SECONDS = 1e-3  # a small model's whole GPU run on lavapipe without workers: 0.1-1 ms


def usable_cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def readback_spin_seconds(info: AdapterInfo | None, workers: int | None) -> float:
    """How long reads on this device poll without waiting (WGNN_READBACK_SPIN_US, in microseconds,
    else the rule). By default only lavapipe without worker threads on a machine of 2 or more cores:
    its queue thread is then the GPU, alone on a core, and the caller's spinning takes nothing from
    it. With workers, the spinning thread takes a core from them (mobilenetv2 at 224x224 ran x1.45
    slower). Real GPUs wait, until measured."""
    value = os.environ.get(READBACK_SPIN_ENV, "").strip()
    if value:
        if not value.isdigit():
            raise InputError(f"{READBACK_SPIN_ENV}={value!r}: expected whole microseconds (0: always wait)")
        return int(value) / 1e6
    return READBACK_SPIN_SECONDS if is_lavapipe(info) and workers == 0 and usable_cores() >= 2 else 0.0


def _wgpu():
    os.environ.setdefault("XDG_RUNTIME_DIR", "/tmp")  # silences Mesa's warning on headless machines
    try:
        import wgpu
    except Exception as exc:  # missing wheel or native library
        raise AdapterError(f"wgpu is not usable here: {exc}") from None
    from .ffi_types import install_for_wgpu

    install_for_wgpu()  # ~1 s less cold start: see ffi_types.py
    return wgpu


def _raw_adapters() -> list:
    global _adapters
    with _lock:
        if _adapters is None:
            wgpu = _wgpu()
            try:
                _adapters = list(wgpu.gpu.enumerate_adapters_sync())
            except Exception as exc:
                raise AdapterError(f"wgpu could not enumerate adapters: {exc}") from None
            if not lavapipe_threads_chosen_by_environment() and any(
                    "llvmpipe" in a.summary.lower() and "vulkan" in a.summary.lower() for a in _adapters):
                # Listed now, before any device or compile thread exists, as the listing sets an
                # environment variable for a moment (12-43 ms; sessions of small work use it).
                try:
                    _adapters_by_threads[0] = _list_with_threads(0)
                except AdapterError as exc:  # not retried: sessions keep the process's device
                    _adapters_by_threads[0] = []
                    log.info("%s: sessions on lavapipe keep the process's worker threads", exc)
        return _adapters


def _list_with_threads(count: int) -> list:
    """The adapters of a wgpu instance of its own, Vulkan only, listed while LP_NUM_THREADS=count.
    wgpu-py keeps one instance per process, so its slot is emptied for the listing and then given
    back; the environment is restored too (the count only matters while the instance lists the
    drivers). Under _lock."""
    from wgpu.backends.wgpu_native import _helpers
    from wgpu.backends.wgpu_native.extras import set_instance_extras

    wgpu = _wgpu()
    saved_setting, saved_instance = os.environ.get(LAVAPIPE_THREADS), _helpers._the_instance
    try:
        os.environ[LAVAPIPE_THREADS] = str(count)
        _helpers._the_instance = None
        set_instance_extras(backends=["Vulkan"])  # Mesa's GL driver shares its EGL display
        return list(wgpu.gpu.enumerate_adapters_sync())
    except Exception as exc:
        raise AdapterError(f"wgpu could not list adapters with {count} lavapipe threads: {exc}") from None
    finally:
        _helpers._the_instance = saved_instance
        if saved_setting is None:
            os.environ.pop(LAVAPIPE_THREADS, None)
        else:
            os.environ[LAVAPIPE_THREADS] = saved_setting


def _adapter_with_threads(index: int, count: int):
    """Adapter `index` as an instance listed with `count` lavapipe workers has it (made on first use;
    0 when the process's adapters are listed)."""
    process_adapters = _raw_adapters()
    wanted = process_adapters[index].summary
    # The second listing is Vulkan only, so indices differ; identical adapters (two of one GPU
    # model) keep their order, so the k-th of a summary here is the k-th there.
    rank = [a.summary for a in process_adapters[:index]].count(wanted)
    with _lock:
        listed = _adapters_by_threads.get(count)
        if listed is None:
            listed = _adapters_by_threads[count] = _list_with_threads(count)
    same = [adapter for adapter in listed if adapter.summary == wanted]
    if rank < len(same):
        return same[rank]
    raise AdapterError(f"a wgpu instance listed with {count} lavapipe threads lacks adapter {index} "
                       f"({wanted}, number {rank + 1} of that name; it has {[a.summary for a in listed]})")


def adapters() -> list[AdapterInfo]:
    """Every adapter wgpu sees, with backend type, driver, key features and limits."""
    result = []
    for index, adapter in enumerate(_raw_adapters()):
        info = adapter.info
        result.append(AdapterInfo(
            index=index,
            name=info.get("device", "") or adapter.summary,
            backend=info.get("backend_type", ""),
            adapter_type=info.get("adapter_type", ""),
            driver=(info.get("description", "") or info.get("driver", "")),
            vendor=str(info.get("vendor", "")),
            features=sorted(f for f in adapter.features if f in OPTIONAL_FEATURES),
            limits={k: int(adapter.limits[k]) for k in KEY_LIMITS if k in adapter.limits},
        ))
    return result


def select_adapter(choice: str | int | None = None) -> int:
    """Index of the adapter named by choice: an index, "vulkan"/"metal"/"d3d12"/"gl", a power
    preference ("high-performance", "low-power"), or a substring of the name. None reads the
    WGNN_ADAPTER environment variable, else picks the best adapter."""
    infos = adapters()
    if not infos:
        raise AdapterError("no GPU adapter found (on Linux install mesa-vulkan-drivers for lavapipe)")
    if choice is None:
        choice = os.environ.get("WGNN_ADAPTER") or None
    listing = "; ".join(f"{a.index}: {a.name} ({a.backend})" for a in infos)
    if choice is None or choice == "high-performance":
        best = min(infos, key=lambda a: (TYPE_RANK.get(a.adapter_type, 9), BACKEND_RANK.get(a.backend, 1), a.index))
        return best.index
    if choice == "low-power":
        low = {"IntegratedGPU": 0, "DiscreteGPU": 1}
        return min(infos, key=lambda a: (low.get(a.adapter_type, 2), BACKEND_RANK.get(a.backend, 1), a.index)).index
    if isinstance(choice, int) or (isinstance(choice, str) and choice.isdigit()):
        index = int(choice)
        if not 0 <= index < len(infos):
            raise AdapterError(f"adapter index {index} out of range; adapters: {listing}")
        return index
    text = str(choice).lower()
    aliases = {"gl": "opengl", "opengl": "opengl", "vulkan": "vulkan", "metal": "metal", "d3d12": "d3d12"}
    if text in aliases:
        matches = [a for a in infos if a.backend.lower() == aliases[text]]
    else:
        matches = [a for a in infos if text in a.name.lower()]
    if not matches:
        raise AdapterError(f"no adapter matches {choice!r}; adapters: {listing}")
    return matches[0].index


class GpuContext:
    """One adapter's device and queue, shared by every session on that adapter (on lavapipe: with
    that many worker threads; lavapipe_workers None is the process's own instance and count)."""

    def __init__(self, index: int, lavapipe_workers: int | None = None):
        wgpu = _wgpu()
        self.wgpu = wgpu
        self.index = index
        self.info = adapters()[index]
        own_instance = lavapipe_workers is not None
        self.adapter = _adapter_with_threads(index, lavapipe_workers) if own_instance else _raw_adapters()[index]
        self.lavapipe_threads = lavapipe_workers if own_instance else lavapipe_threads(self.info)
        features = [f for f in OPTIONAL_FEATURES if f in self.adapter.features]
        limits = {k: self.adapter.limits[k] for k in KEY_LIMITS if k in self.adapter.limits}
        try:
            self.device = self.adapter.request_device_sync(required_features=features, required_limits=limits)
            self.requested_limits = limits  # warm-up devices (warmup.py) open with the same
        except Exception as exc:
            raise AdapterError(f"could not open a device on {self.info.name} ({self.info.backend}): {exc}") from None
        self.features = set(features)
        self.limits = {k: int(v) for k, v in self.device.limits.items()}
        self.queue = self.device.queue
        self.pipelines: dict = {}  # loader.PipelineCache storage, shared by sessions
        self.lock = threading.RLock()  # one submission at a time per device
        self._reader = None

    @property
    def reader(self):
        """How this device's MAP_READ buffers are read back (readback.make_reader), made once."""
        if self._reader is None:
            with self.lock:
                if self._reader is None:
                    self._reader = make_reader(self.wgpu, self.device,
                                               readback_spin_seconds(self.info, self.lavapipe_threads))
        return self._reader

    @property
    def name(self) -> str:
        return f"{self.info.name} ({self.info.backend})"


def get_context(choice: str | int | None = None, lavapipe_workers: int | None = None) -> GpuContext:
    """The shared device on the chosen adapter; on lavapipe with lavapipe_workers worker threads
    (None: the process's count; other adapters ignore it)."""
    index = select_adapter(choice)
    if lavapipe_workers is not None:
        check_lavapipe_threads(lavapipe_workers)
        info = adapters()[index]
        if not is_lavapipe(info) or lavapipe_workers == lavapipe_threads(info):
            lavapipe_workers = None  # the process's own instance has that count
    key = (index, lavapipe_workers)
    with _lock:
        context = _contexts.get(key)
    if context is None:
        context = GpuContext(index, lavapipe_workers)
        with _lock:
            context = _contexts.setdefault(key, context)
    return context


def open_contexts() -> list[GpuContext]:
    """Every device opened so far (one per adapter and lavapipe worker count)."""
    with _lock:
        return list(_contexts.values())


def forget_context(context: GpuContext) -> None:
    """Drop a context whose device is lost: the next session on its adapter gets a new device
    (sessions still holding the old one keep failing with DeviceError)."""
    with _lock:
        for key, known in list(_contexts.items()):
            if known is context:
                del _contexts[key]


def gpu_available() -> str | None:
    """None when a GPU adapter can be used, else the reason it cannot."""
    try:
        adapters_found = adapters()
    except AdapterError as exc:
        return str(exc)
    return None if adapters_found else "no GPU adapter found"
