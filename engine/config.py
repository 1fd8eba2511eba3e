"""Session configuration."""
from __future__ import annotations

from dataclasses import dataclass, field

PRECISIONS = ("fp32", "fp16", "fp16-arith")
NUMPY_THREADS_HELP = ("threads of the numpy backend's large compiled conv loops, kept on every run (default: "
                      "WGNN_NUMPY_THREADS, else the cores, with runs falling back to one thread while that is faster)")
STORAGES = ("auto", "texture", "buffer")


@dataclass
class Config:
    """How a session runs.

    Arguments:
        providers: backends in order of preference, e.g. ("wgpu", "numpy"); each op runs on the
            first that supports it. ("auto",) picks ("wgpu", "numpy") or ("numpy",) for the adapter by
            a measurement kept in the tuning cache (made once, when the cache has none; see
            backends/wgpu/tuning.py); `providers` then holds the choice and `providers_choice` why.
        adapter: GPU adapter choice (index, name substring, backend type or power preference).
        precision: "fp32"; "fp16" (NC4HW4 feature maps stored in 16 bits, arithmetic in f32); or
            "fp16-arith" (16-bit storage and, on adapters with shader-f16, 16-bit arithmetic in the
            kernels that have it: the NC4HW4 convs, depthwise, 1x1 and Winograd GEMMs, unary and
            binary ops; long sums still accumulate in f32). Without shader-f16 it runs as "fp16"
            and logs so at INFO level.
        storage: NC4HW4 storage on the GPU: "texture", "buffer" or "auto" (what `wgnn tune`
            measured faster on the adapter, else buffers in fp32 and textures in fp16).
        lavapipe_threads: worker threads of the session's device on Mesa's CPU adapter (lavapipe;
            other adapters ignore it): an int from 0 (each dispatch runs on the driver's queue
            thread) to 32, or "auto": at a resize, a model with little work per dispatch gets a
            device without workers, others the process's count (one per core unless
            LP_NUM_THREADS or wgnn.set_lavapipe_threads set it; a set count is kept); later
            resizes move the session only well past the limit (backends/wgpu/backend.py).
        numpy_threads: threads the numpy backend's large compiled conv loops share their work
            among (where numba is installed): an int from 1, or "auto" (WGNN_NUMPY_THREADS, else the
            cores the process may use; backends/numpy/compiled.py). Any count gives the loops' floats;
            large 1x1 convs on one thread are numpy products instead, in their last bits apart.
    """

    providers: tuple[str, ...] = ("numpy",)
    adapter: str | int | None = None
    precision: str = "fp32"
    storage: str = "auto"
    lavapipe_threads: int | str = "auto"
    numpy_threads: int | str = "auto"
    # Set when providers was ("auto",): the resolved providers, the adapter and the measured
    # milliseconds (or the reason for numpy); None otherwise.
    providers_choice: dict | None = field(default=None, init=False, compare=False)

    def __post_init__(self):
        from .errors import WgnnError
        if isinstance(self.providers, str):
            self.providers = (self.providers,)
        self.providers = tuple(self.providers)
        if "auto" in self.providers:
            if self.providers != ("auto",):
                raise WgnnError(f"'auto' chooses every provider, so it stands alone; got {list(self.providers)}")
            from ..backends.wgpu.tuning import resolve_auto_providers

            self.providers, self.providers_choice = resolve_auto_providers(self.adapter)
        if self.precision not in PRECISIONS:
            raise WgnnError(f"precision must be one of {PRECISIONS}, got {self.precision!r}")
        if self.storage not in STORAGES:
            raise WgnnError(f"storage must be one of {STORAGES}, got {self.storage!r}")
        if self.lavapipe_threads != "auto":
            from ..backends.wgpu.context import check_lavapipe_threads

            check_lavapipe_threads(self.lavapipe_threads)
        if self.numpy_threads != "auto" and not (type(self.numpy_threads) is int and self.numpy_threads >= 1):
            raise WgnnError(f"numpy_threads must be \"auto\" or a whole number from 1, got {self.numpy_threads!r}")
