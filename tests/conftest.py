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
