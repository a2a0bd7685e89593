"""Linear algebra on bit patterns: a fused matrix multiply with an explicit accumulation policy.

``matmul`` is what a GEMM with a wide accumulator does, spelled out: products of the inputs are
exact, they are added in the accumulation format (FP32 by default) in a defined order, each
addition rounded once, and the finished sum is rounded once more to the output format. So an
FP16 matmul with FP32 accumulation is defined by its order alone, and reproducible to the bit.
"""
from __future__ import annotations

import numpy as np

from ._kernels import matmul as kernels
from .formats import Format, fp32
from .formats import format as parse_format
from .ops import as_bits
from .rounding import parse_rounding

__all__ = ["ORDERS", "matmul"]

ORDERS = ("sequential", "pairwise")
# (serial kernel, row-parallel kernel); both give the same bits.
_KERNELS = {
    "sequential": (kernels.matmul_sequential, kernels.matmul_sequential_parallel),
    "pairwise": (kernels.matmul_pairwise, kernels.matmul_pairwise_parallel),
}
# Products with fewer multiply-adds than this run on one thread: starting threads costs more.
PARALLEL_MIN_MACS = 1 << 20


def _matrix(x, fmt: Format, name: str) -> np.ndarray:
    bits = as_bits(x, fmt, name)
    if bits.ndim != 2:
        raise ValueError(f"{name}: expected a 2-D array (a matrix), got shape {bits.shape}")
    return bits


def matmul(
    a,
    b,
    fmt: Format | str,
    accumulate: Format | str = fp32,
    out_format: Format | str | None = None,
    order: str = "sequential",
    rounding: str = "rne",
) -> np.ndarray:
    """``a @ b`` for bit patterns of ``fmt``: exact products, sums rounded in ``accumulate``.

    ``a``: (m, k), ``b``: (k, n) bit patterns of ``fmt`` (or float arrays of its width).
    Result: an (m, n) array of ``out_format`` (default ``fmt``) bit patterns.

    - ``order="sequential"``: ``((0 + a[i,0]*b[0,j]) + a[i,1]*b[1,j]) + ...``, k ascending, the
      loop a plain CPU GEMM reference or an explicit CUDA k-loop performs.
    - ``order="pairwise"``: the products summed as a binary tree (see
      ``softfloat16._kernels.matmul.pairwise_row`` for the exact tree).

    Every addition is rounded once to ``accumulate`` with ``rounding``; the sum is then rounded
    once to ``out_format`` with the same mode. Products are exact for every format of at most 24
    significand bits; a product outside the accumulation format's range (possible for BF16/FP32
    inputs) overflows or underflows when it is first added. Subnormals are kept (no FTZ/DAZ).
    IEEE rules apply to zeros and infinities (the sequential sum starts from +0, so -0 terms
    alone give +0 there; an empty sum is +0 in both orders); every NaN result (a NaN input,
    inf * 0, inf - inf) is ``out_format``'s default NaN, +qNaN with only the quiet bit set
    (payloads are not propagated). No flags are returned.

    >>> import numpy as np, softfloat16 as sf
    >>> a = sf.fp16.from_float(np.array([[1.0, 2.0**-11]]))
    >>> b = sf.fp16.from_float(np.array([[1.0], [1.0]]))
    >>> sf.fp32.to_float(matmul(a, b, sf.fp16, out_format=sf.fp32))  # 1 + 2**-11, exact in FP32
    array([[1.00048828]])
    >>> sf.fp16.to_float(matmul(a, b, sf.fp16))  # then one rounding to FP16: a tie, to even
    array([[1.]])
    """
    fmt = parse_format(fmt)
    accumulate = parse_format(accumulate)
    out_format = fmt if out_format is None else parse_format(out_format)
    if order not in _KERNELS:
        raise ValueError(f"order: unknown accumulation order {order!r}; accepted: {', '.join(ORDERS)}")
    mode = int(parse_rounding(rounding))
    for name, f in (("fmt", fmt), ("accumulate", accumulate)):
        if f.precision > 24:
            raise ValueError(f"{name}: {f.name} significands are too wide for exact products")
    a_bits, b_bits = _matrix(a, fmt, "a"), _matrix(b, fmt, "b")
    if a_bits.shape[1] != b_bits.shape[0]:
        raise ValueError(
            f"a and b: inner dimensions differ, a{a_bits.shape} @ b{b_bits.shape}"
        )
    ebits, fbits = fmt.exponent_bits, fmt.fraction_bits
    # uint32 in and out for every format: one compiled signature per kernel, not one per dtype.
    unpacked_a = kernels.unpack_matrix(np.ascontiguousarray(a_bits, dtype=np.uint32), ebits, fbits)
    unpacked_bt = kernels.unpack_matrix(np.ascontiguousarray(b_bits.T, dtype=np.uint32), ebits, fbits)
    m, k, n = a_bits.shape[0], a_bits.shape[1], b_bits.shape[1]
    out = np.empty((m, n), dtype=np.uint32)
    serial, parallel = _KERNELS[order]
    kernel = parallel if m > 1 and m * k * n >= PARALLEL_MIN_MACS else serial
    kernel(
        unpacked_a, unpacked_bt, out, accumulate.exponent_bits, accumulate.fraction_bits,
        out_format.exponent_bits, out_format.fraction_bits, mode,
    )
    return out.astype(out_format.dtype, copy=False)
