"""Argument handling shared by flashcore.softmax (torch) and flashcore.host.softmax (numpy): the
variant names of the C++ ladder (include/flashcore/softmax.hpp) and the checks on the array."""

from __future__ import annotations

from typing import Sequence, Tuple

# Names as flashcore::softmax_variant_name prints them, in enum order.
SOFTMAX_VARIANTS = ("auto", "shared_mem_reduction", "warp_shuffle", "vectorized", "online", "row_per_warp",
                    "row_per_block", "multi_block", "row_in_smem")

KERNEL_DTYPE_CODES = {"fp16": 0, "bf16": 1, "fp32": 2}


def variant_code(variant: str) -> int:
    try:
        return SOFTMAX_VARIANTS.index(variant)
    except ValueError:
        raise ValueError(f"variant: must be one of {', '.join(SOFTMAX_VARIANTS)} (got {variant!r})") from None


def rows_and_cols(name: str, shape: Sequence[int], strides: Sequence[int]) -> Tuple[int, int]:
    """[..., cols] with every row contiguous and rows packed: the softmax kernels' layout."""
    if len(shape) == 0:
        raise ValueError(f"{name}: must have at least one dimension (softmax runs over the last one)")
    cols = int(shape[-1])
    rows = 1
    for extent in shape[:-1]:
        rows *= int(extent)
    if rows * cols == 0:  # nothing is addressed (strides of empty arrays are arbitrary); C++ judges sizes
        return rows, cols
    expected = 1
    for extent, stride in zip(reversed(shape), reversed(strides)):
        if extent != 1 and stride != expected:
            raise ValueError(f"{name}: must be contiguous (row-major, last dim softmaxed); got shape "
                             f"{list(shape)} strides {list(strides)}")
        expected *= int(extent)
    return rows, cols
