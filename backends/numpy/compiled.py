"""Compiled loops for the numpy backend, where numpy's one pass over memory per call costs most: a
depthwise convolution with its bias, residual and Relu / Clip in one loop, float32 convolutions
without im2col (their sums held in registers: compiled_loops.vectorized_loop), the Relu / Clip
epilogue of the other convs and matmuls, float32 LayerNorm and GELU, attention over a few tokens
and, once another step has started numba, small float32 classifier heads (GlobalPoolMatMul) and
resizes (numba, an optional dependency: `pip install wgnn[cpu]`; backends/numpy/compiled_loops.py).
Without numba, or with WGNN_NUMPY_COMPILED=0, the backend runs its numpy plans, which the loops
are tested against.

The register-blocked conv loops (1x1 convs among them) share their work among threads in a numba
parallel region: WGNN_NUMPY_THREADS, else the cores this process may use; one for small convs
(threads_for), where numba has only its workqueue layer, and in a process forked after the loops
were imported. Each output element is summed by one thread, so any count gives the loops' floats.
Left to "auto", a session's runs cap every loop at one thread while whole runs were clearly faster
so (RunChoice).

Measured (docs/performance.md, "Compiled depthwise convolutions" and the three sections after it):
a 3x3 depthwise + Clip in x0.44-0.67 of the numpy plan's time at MobileNetV2's shapes, then its
nine taps in one pass x0.63-0.94 of that; the compiled Clip x0.45-0.6 of ndarray.clip's; zoo bert
x0.5 of its time at 1 and 8 tokens; zoo resnet at 224x224 x0.74 with its convs without im2col.
The first call of each dtype compiles (about 2 s); numba caches the machine code on disk, so later
processes load it (about 0.4 s with numba's import).
"""
from __future__ import annotations

import collections
import functools
import os
import statistics
import sys
import time

COMPILED_ENV = "WGNN_NUMPY_COMPILED"  # "0": the numpy plans only (tests, A/B runs)
THREADS_ENV = "WGNN_NUMPY_THREADS"  # threads of the register-blocked conv loops (default: the cores)
# Convs of fewer multiply-adds run their loop on one thread (threads_for). A Conv + Relu
# model alone, one thread against two (/tmp/w/thrconv.py, median of 300 runs): 3x3 16 -> 16
# at 16x16 (0.59 M) x1.14, at 24x24 (1.3 M) x0.91, at 48x48 x0.80; 3x3/2 32 -> 32 at 16x16 (0.59 M)
# x1.49; depthwise 3x3 16 channels at 16x16 (37 K) x1.02, at 32x32 (147 K) x0.88, 96 at 32x32 x0.65.
THREADED_CONV_MULTIPLY_ADDS = 3_000_000
THREADED_DEPTHWISE_MULTIPLY_ADDS = 300_000
# Activations the loop applies itself (the rest run as numpy after it): kind -> code.
ACTIVATIONS = {None: 0, "relu": 1, "clip": 2}


def enabled() -> bool:
    """Whether compiled loops may run: numba installed and WGNN_NUMPY_COMPILED not "0"."""
    if os.environ.get(COMPILED_ENV, "").strip() == "0":
        return False
    return _numba() is not None


def started() -> bool:
    """Whether this process has imported the compiled loops already (for another step): one more
    loop then costs no start of numba."""
    return f"{__package__}.compiled_loops" in sys.modules


def describe(setting: int | str = "auto") -> str:
    """Whether the compiled loops run here, for reports: "numba 0.68.1, 2 threads (omp)" (the large
    loops' threads under a session's numpy_threads setting), or why not."""
    if _numba() is None:
        return "off (numba not installed)"
    if not enabled():
        return f"off ({COMPILED_ENV}=0)"
    count = threads(setting)
    layer = loops().threading_layer()
    return f"numba {_numba().__version__}, {count} thread{'s' if count > 1 else ''}" + (f" ({layer})" if layer else "")


def threads(setting: int | str = "auto") -> int:
    """Threads the register-blocked conv loops share their work among: `setting` (a session's
    Config.numpy_threads), for "auto" WGNN_NUMPY_THREADS, else the cores this process may run on;
    at most numba's NUMBA_NUM_THREADS. One where numba's threading layer is its workqueue: a
    parallel region starts there in about 90 us against 2 us with OpenMP (docs/performance.md,
    "Two threads in the compiled loops")."""
    if setting != "auto":
        wanted = setting
    elif variable := os.environ.get(THREADS_ENV, "").strip():
        if not variable.isdigit() or int(variable) < 1:
            raise ValueError(f"{THREADS_ENV}={variable!r}: expected a whole number of threads, 1 or more")
        wanted = int(variable)
    else:
        wanted = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    if wanted == 1 or loops().threading_layer() is None:
        return 1
    return max(1, min(wanted, _numba().config.NUMBA_NUM_THREADS))


def threads_for(multiply_adds: int, threaded_from: int, setting: int | str = "auto") -> int:
    """threads(setting) for a loop of this many multiply-adds; one below `threaded_from`, where
    starting the second thread and moving the data to its core cost more than its half saves."""
    return threads(setting) if multiply_adds >= threaded_from else 1


def session_threads(ex) -> int | str:
    """The numpy_threads of the session an execution belongs to ("auto" without one)."""
    return getattr(ex.backend.config, "numpy_threads", "auto")


def loop_threads(ex, multiply_adds: int, threaded_from: int) -> int:
    """At prepare: the threads of a step's loop of this many multiply-adds under its session's
    setting (threads_for); where they may be chosen per run (chooses_per_run), the step's backend
    times its runs from then on (RunChoice)."""
    setting = session_threads(ex)
    count = threads_for(multiply_adds, threaded_from, setting)
    if chooses_per_run(count, setting):
        ex.backend.choose_threads_per_run()
    return count


# A numpy segment whose loops share threads under numpy_threads "auto" ends every PROBE_EVERY runs
# with PROBE_RUNS runs the other way (all its loops on one thread, or once one thread won, on their
# threads again) and keeps the faster by whole-run times. Where other load takes a core now and
# then, two threads lose to one: the loops wait for the late thread (docs/performance.md, "Two
# threads in the compiled loops"). A probe's first run finds the other core's caches cold (resnet:
# x1.3 a threaded run's time), so only its last counts. A switch needs the other way's last
# PROBES_TO_SWITCH probes each under SWITCH_BELOW of the current way's median over its last
# RECENT_RUNS runs: the host's slow phases flicker within a second, and one lucky probe, or one run
# preempted for 10 ms lifting a smoothed time, used to switch into them.
PROBE_EVERY = 64
PROBE_RUNS = 2
SWITCH_BELOW = 0.9
PROBES_TO_SWITCH = 2
RECENT_RUNS = 9


class RunChoice:
    """The thread cap of one numpy segment's runs: None (each loop its own threads) at first, 1
    while whole runs were clearly faster so. A capped run is a one-thread session's run: the same
    floats."""

    def __init__(self, clock=time.perf_counter):
        self.cap: int | None = None
        self.runs, self.clock, self.started = 0, clock, 0.0
        self.recent: collections.deque[float] = collections.deque(maxlen=RECENT_RUNS)  # the current way's
        self.probes: collections.deque[float] = collections.deque(maxlen=PROBES_TO_SWITCH)  # the other way's
        self.runs_by_cap: dict[int | None, int] = {None: 0, 1: 0}  # what the runs did (wgnn bench says)
        self.switches = 0

    def begin(self) -> int | None:
        """The cap of the run that starts now: the current one or, in the last PROBE_RUNS of every
        PROBE_EVERY runs, the other."""
        self.runs += 1
        cap = self.cap
        if (self.runs + PROBE_RUNS - 1) % PROBE_EVERY < PROBE_RUNS:
            cap = None if cap == 1 else 1
        self.started = self.clock()
        return cap

    def end(self, cap: int | None) -> None:
        """Records the run begun with `cap` (among the current way's recent runs, or as a probe of
        the other) and switches when the other way's last probes all won clearly."""
        seconds = self.clock() - self.started
        self.runs_by_cap[cap] += 1
        if cap == self.cap:
            self.recent.append(seconds)
        elif self.runs % PROBE_EVERY == 0:  # a probe's last run (the others warm the caches)
            self.probes.append(seconds)
        if (self.recent and len(self.probes) == PROBES_TO_SWITCH
                and max(self.probes) < SWITCH_BELOW * statistics.median(self.recent)):
            self.cap = None if self.cap == 1 else 1
            self.switches += 1
            self.recent.clear()
            self.recent.extend(self.probes)
            self.probes.clear()


def chooses_per_run(threads: int, setting: int | str) -> bool:
    """Whether a loop with `threads` lets its session's runs choose its count (RunChoice): only
    where numpy_threads is "auto" and WGNN_NUMPY_THREADS unset; a set count is kept."""
    return threads > 1 and setting == "auto" and not os.environ.get(THREADS_ENV, "").strip()


def run_workers(threads: int, backend) -> int:
    """The threads a loop prepared for `threads` starts in the backend's current run."""
    cap = backend.loop_cap
    return workers(threads if cap is None else min(threads, cap))


def workers(count: int) -> int:
    """The threads a loop prepared for `count` may start now: `count`, but one in a process forked
    after the loops were imported (GNU OpenMP's threads do not survive a fork)."""
    return count if count == 1 or os.getpid() == loops().IMPORTED_BY else 1


@functools.cache
def _numba():
    try:
        import numba
    except ImportError:
        return None
    return numba


@functools.cache  # (an import statement on every call took 0.5 us; steps ask on every run)
def loops():
    """The compiled loops' module (each loop compiled per dtype at its first call, cached on disk)."""
    from . import compiled_loops

    return compiled_loops
