"""Argument handling shared by flashcore.softmax (torch) and flashcore.host.softmax (numpy): the
variant names of the C++ ladder (include/flashcore/softmax.hpp) and the checks on the array."""

from __future__ import annotations

from typing import Sequence, Tuple

from . import _C
from ._params import KERNEL_DTYPES

# The ladder's variant names in enum order, as the C++ library names them.
SOFTMAX_VARIANTS = tuple(_C.softmax_variant_names())

# The C++ DType codes as plain ints (softmax_forward takes an int, traceable by torch.compile).
KERNEL_DTYPE_CODES = {name: int(code) for name, code in KERNEL_DTYPES.items()}


def variant_code(variant: str) -> int:
    try:
        return SOFTMAX_VARIANTS.index(variant)
    except ValueError:
        raise _C.InvalidArgumentError(f"variant: must be one of {', '.join(SOFTMAX_VARIANTS)} (got {variant!r})") from None


def rows_and_cols(name: str, shape: Sequence[int], strides: Sequence[int]) -> Tuple[int, int]:
    """[..., cols] with every row contiguous and rows packed: the softmax kernels' layout."""
    if len(shape) == 0:
        raise _C.InvalidArgumentError(f"{name}: must have at least one dimension (softmax runs over the last one)")
    cols = int(shape[-1])
    rows = 1
    for extent in shape[:-1]:
        rows *= int(extent)
    if rows * cols == 0:  # nothing is addressed (strides of empty arrays are arbitrary); C++ judges sizes
        return rows, cols
    expected = 1
    for extent, stride in zip(reversed(shape), reversed(strides)):
        if extent != 1 and stride != expected:
            raise _C.InvalidArgumentError(f"{name}: must be contiguous (row-major, last dim softmaxed); got shape "
                             f"{list(shape)} strides {list(strides)}")
        expected *= int(extent)
    return rows, cols
