"""Pixel blocks of the dwpw kernels (backends/wgpu/conv_dwpw.py) as the ConvDwPw and
ConvDwPwExpand tests run them."""
from wgnn.backends.wgpu.conv_dwpw import BLOCKS

STORAGE_PRECISIONS = [("buffer", "fp32"), ("texture", "fp32"), ("buffer", "fp16"), ("texture", "fp16"),
                      ("buffer", "fp16-arith"), ("texture", "fp16-arith")]


def block_name(block: tuple[int, int]) -> str:
    return f"{block[0]}x{block[1]}"


def blocks_for(storage: str, precision: str) -> list[tuple[int, int]]:
    """The blocks a storage / precision test runs: all of them in fp32 buffers; two elsewhere,
    rotating so that every block meets several combinations (each kernel variant is a compile of
    ~1 s on lavapipe with a cold driver cache, and a fresh CI machine has one)."""
    index = STORAGE_PRECISIONS.index((storage, precision))
    if index == 0:
        return list(BLOCKS)
    return [BLOCKS[index % len(BLOCKS)], BLOCKS[(index + 2) % len(BLOCKS)]]
