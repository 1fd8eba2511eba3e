import os
import sys
import tempfile
import zlib

import numpy as np
import pytest

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


@pytest.fixture(autouse=True)
def same_inputs_in_any_order(request):
    """A test module's `rng` restarts for each test from a seed of the test's own name: under
    xdist the tests a worker runs before a test vary, and with a shared generator so did its
    inputs (an LSTM case with a Relu cell grown to 1e5 once missed onnxruntime by 5e-5 relative)."""
    generator = getattr(request.module, "rng", None)
    if isinstance(generator, np.random.Generator):
        request.module.rng = np.random.default_rng(zlib.crc32(request.node.nodeid.encode()))
