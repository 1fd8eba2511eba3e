import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(__file__))
os.environ.setdefault("XDG_RUNTIME_DIR", "/tmp")
# Tuned settings (wgnn tune) change which kernels run: the suite must not pick up this machine's.
os.environ["WGNN_CACHE_DIR"] = tempfile.mkdtemp(prefix="wgnn-test-cache-")
# The suite compiles hundreds of kernel variants in processes whose record of warmed kernels is
# temporary (above): driver warm-ups would build each pipeline twice. Their own tests turn them on.
os.environ.setdefault("WGNN_DRIVER_WARMUP", "0")
# Sessions on lavapipe may move to a device without worker threads (Config.lavapipe_threads "auto");
# many tests inspect or patch the shared device itself (limits, warm-ups, pipeline counts). Setting
# the process's count (Mesa's default, one per core) keeps every session on that one device;
# tests/backends/test_wgpu_lavapipe_threads.py unsets it to test the choice.
os.environ.setdefault("LP_NUM_THREADS", str(min(os.cpu_count() or 1, 32)))
