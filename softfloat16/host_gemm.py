"""GEMMs and sums on the host's own arithmetic, where it provably gives the model's bits: the
routing between the kernels of _kernels/hardware.py and _kernels/twosum.py (what each can take)
for softfloat16.linalg.matmul's sequential and pairwise orders and softfloat16.linalg.sum.

Every function returns None where no host kernel applies or a thread's floating-point environment
could not be set; the caller then runs the exact integer kernels.
"""
from __future__ import annotations

import functools

import numpy as np

from . import threads
from ._kernels import checked as checks
from ._kernels import hardware, hardware_pairwise, twosum
from .formats import Format, fp32
from .ops import convert
from .rounding import Rounding
from .threads import parallel_gemm

# Sums of fewer columns go to the exact kernels: a tile of the GEMM kernels is 64 (binary32) or 32
# (binary64) results wide, and one of its four rows is used.
SUM_MIN_RESULTS = 32


def _embeds(small: Format, large: Format) -> bool:
    """Whether every value of ``small`` (inf and NaN included) is a value of IEEE ``large``."""
    return (large.ieee_like and small.fraction_bits <= large.fraction_bits and small.emax <= large.emax
            and small.min_subnormal_exponent >= large.min_subnormal_exponent)


@functools.cache
def _binary32_table(fmt: Format) -> np.ndarray:
    """The binary32 value of every pattern of a format of at most 16 bits (exact: sf.convert)."""
    codes = np.arange(1 << fmt.width, dtype=np.uint32).astype(fmt.dtype)
    return np.asarray(convert(codes, src=fmt, dst=fp32), np.uint32).view(np.float32)


def _binary32(bits: np.ndarray, fmt: Format) -> np.ndarray:
    """Patterns of a format whose values are all binary32 values, as float32 (a table lookup)."""
    if fmt is fp32:
        return np.asarray(bits, np.uint32).view(np.float32)
    bits = np.ascontiguousarray(bits)
    out = np.empty(bits.shape, np.float32)
    # (waking Numba's threads for a small array costs more than it saves: 1-2 ms when loaded)
    hardware.gather(bits.ravel(), _binary32_table(fmt), out.ravel(), bits.size >= threads.PARALLEL_MIN_ELEMENTS)
    return out


# _host_gemm's answer where B came packed and the sums need it unpacked (binary64 sums); its None
# (an operand NaN or infinite, or a thread's environment refused) holds for B in any layout.
UNPACKED = object()


def _products_in_binary32(a32: np.ndarray, b32: np.ndarray, fmt: Format, b_format: Format) -> bool:
    """Whether every product of these operands is a binary32 value: significands of at most 24 bits
    together, every product's lowest bit at least 2**-149 and its value below 2**128. From the
    formats' ranges, else from the operands' own binary32 exponent fields fa, fb: fa + fb >= 128
    puts a product's lowest bit at or above 2**(128 - 254 - 22) (at most 22 fraction bits
    together), fa + fb <= 380 keeps it below 2**128 (integer work, no host rounding)."""
    if fmt.precision + b_format.precision > 24:
        return False
    if (fmt.emax + b_format.emax + 2 <= 128 and
            fmt.min_subnormal_exponent + b_format.min_subnormal_exponent >= -149):
        return True  # every product's lowest bit is at least 2**-149, and below 2**128
    (low_a, high_a), (low_b, high_b) = (hardware.exponent_range(np.ascontiguousarray(x).view(np.uint32))
                                        for x in (a32, b32))
    if high_a < 0 or high_b < 0:
        return True  # zeros, infinities and NaN only on one side: IEEE rules, nothing to round
    return low_a + low_b - 254 >= -126 and high_a + high_b - 254 + 2 <= 128  # (fields; a subnormal's is 0)


def _products_on_binary32_grid(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether every product of these float32 values is a multiple of
    2**-149, binary32's smallest subnormal: the lowest bits of two values with exponent fields fa, fb
    (1 for a subnormal) are 2**(fa - 150) and 2**(fb - 150), so fa + fb >= 151 (integer work)."""
    low = [hardware.exponent_range(np.ascontiguousarray(x).view(np.uint32))[0] for x in (a, b)]
    return low[0] > 255 or low[1] > 255 or max(low[0], 1) + max(low[1], 1) >= 151  # (256: no finite nonzero value)


def _hardware(a: np.ndarray, b: np.ndarray, fmt: Format, b_format: Format, accumulate: Format, order: str,
              mode: int) -> np.ndarray | None:
    """The sequential or pairwise order on the host's arithmetic where it provably gives the model's
    bits (_kernels.hardware, _kernels.twosum), for operands whose values are all binary32 values:

    - FP32 accumulation rounded as RNE, RTZ, RUP or RDN: the sequential order is one FMA per step;
      the pairwise order one multiplication, then each + one addition, where every product is a
      binary32 value;
    - everything else (every deterministic mode, accumulation formats of at most 24 bits within
      binary32's range: FP32, FP16, BF16, TF32, E5M2), both orders, finite operands: each + the
      host's sum and its exact error (TwoSum), rounded into the accumulation format in integers
      (_kernels.twosum) — in binary32 where every product is a binary32 value and the format has
      at most 22 bits (or is FP32 with RNA or ROD), else in binary64, where every product of
      binary32 values is exact.

    FP32 bits (the accumulated values) with every NaN the default one; None where none applies or
    a thread's floating-point environment could not be set (hosts other than x86: only round to
    nearest even, when it is the default)."""
    if not (_embeds(fmt, fp32) and _embeds(b_format, fp32) and _embeds(accumulate, fp32)):
        return None
    a32 = _binary32(a, fmt)
    if b_format is not fp32 and not b.shape[1] < SUM_MIN_RESULTS <= a.shape[0]:
        # B's patterns read through the table straight into panels (one pass), where the kernels
        # that take packed panels apply: every product a binary32 value.
        packed = hardware.table_panels(b, _binary32_table(b_format), hardware.columns(np.float32, order))
        if _products_in_binary32(a32, packed, fmt, b_format):
            result = _host_gemm(a32, packed, accumulate, order, mode, lambda: True, b.shape[1])
            if result is not UNPACKED:
                return result
    b32 = _binary32(b, b_format)
    in_binary32 = functools.cache(lambda: _products_in_binary32(a32, b32, fmt, b_format))
    if b32.shape[1] < SUM_MIN_RESULTS <= a32.shape[0]:
        # Few columns, many rows: C.T = B.T @ A.T has the same products, each element's in the same
        # order (a * b is b * a), so the same bits, and fills the tiles' columns.
        packed = hardware.row_panels(a32, None, hardware.columns(np.float32, order))
        swapped = _host_gemm(np.ascontiguousarray(b32.T), packed, accumulate, order, mode, in_binary32,
                             a32.shape[0])
        if swapped is not UNPACKED:
            return None if swapped is None else np.ascontiguousarray(swapped.T)
    return _host_gemm(a32, b32, accumulate, order, mode, in_binary32)


def _host_gemm(a32: np.ndarray, b32: np.ndarray, accumulate: Format, order: str, mode: int,
               in_binary32, b_columns: int = 0) -> np.ndarray | None:
    """_hardware's kernels for float32 operands; ``in_binary32()`` says whether every product is a
    binary32 value. ``b32`` may come packed (hardware.row_panels: ``b_columns`` columns); UNPACKED
    where the sums are binary64 ones, which take B unpacked."""
    n = b32.shape[1] if b32.ndim == 2 else b_columns
    parallel = parallel_gemm(a32.shape[0], a32.shape[1], n)
    host_rounds = mode in hardware.MODES and accumulate is fp32
    if order == "sequential" and host_rounds:
        result = hardware.gemm(a32, b32, parallel=parallel, mode=mode, nan=fp32.default_nan, b_columns=n)
        return None if result is None else np.ascontiguousarray(result).view(np.uint32)
    in_binary32 = in_binary32()
    if order == "pairwise" and host_rounds and in_binary32:
        result = hardware_pairwise.pairwise_gemm(a32, b32, parallel=parallel, mode=mode, nan=fp32.default_nan,
                                                 b_columns=n)
        return None if result is None else np.ascontiguousarray(result).view(np.uint32)
    if not all(twosum.finite(x.view(np.uint32)) for x in (a32, b32)):
        return None  # (the exact kernels: NaN and infinite operands)
    spec, checked = (_twosum_spec(accumulate, mode, False) if in_binary32 else None), False
    if spec is None:  # binary64 sums: every product of binary32 values is exact there
        if b32.ndim != 2:
            return UNPACKED
        spec = _twosum_spec(accumulate, mode, True)
        kind = checks.kind_of(spec)  # the host's conversions where they provably round as the spec
        checked = kind == checks.FP16 or kind == checks.BINARY32 and _products_on_binary32_grid(a32, b32)
        a32, b32 = hardware.widened(a32), hardware.widened(b32)
        if a32 is None or b32 is None:
            return None
    nan = fp32.default_nan if a32.dtype == np.float32 else None  # binary64's quiet NaN converts to FP32's
    # (binary64 sums: binary32 results, converted in the kernel's environment)
    run = hardware.gemm if order == "sequential" else hardware_pairwise.pairwise_gemm
    result = run(a32, b32, parallel=parallel, nan=nan, spec=spec, b_columns=n, checked=checked, out_dtype=np.float32)
    return None if result is None else np.ascontiguousarray(result).view(np.uint32)


@functools.cache
def _twosum_spec(accumulate: Format, mode: int, wide: bool) -> tuple | None:
    """The _kernels.twosum rounding of each + into ``accumulate`` for sums in binary32 (None where
    it has none) or binary64."""
    if not wide and not (accumulate.precision <= 22 or mode in (Rounding.RNA, Rounding.ROD)):
        return None
    largest = float(np.asarray(accumulate.to_float(np.array([accumulate.max_finite], accumulate.dtype)))[0])
    return twosum.spec_of(int(mode), accumulate.precision, accumulate.emin, largest, wide)


def sums(terms: np.ndarray, fmt: Format, accumulate: Format, order: str, mode: int,
         columns: bool = False) -> np.ndarray | None:
    """FP32 bits of the sums of the rows of ``terms`` ((m, k) patterns of ``fmt``; with ``columns``,
    of its columns, (k, m)), in the sequential or pairwise order, each + rounded into ``accumulate``
    by ``mode``: the GEMM ``ones(1, k) @ rows.T`` (a product ``1 * x`` is ``x``, a binary32 value),
    whose steps are those of linalg.sum's orders (from +0; the pairwise tree). Only for at least
    SUM_MIN_RESULTS sums (a GEMM tile's columns are results) of k >= 1 terms."""
    if order not in ("sequential", "pairwise") or not (_embeds(fmt, fp32) and _embeds(accumulate, fp32)):
        return None
    k, m = terms.shape if columns else terms.shape[::-1]
    if m < SUM_MIN_RESULTS or k == 0:
        return None
    if columns:
        cols = hardware.columns(np.float32, order)
        packed = (hardware.panels(_binary32(terms, fmt), cols) if fmt is fp32 else
                  hardware.table_panels(terms, _binary32_table(fmt), cols))
    else:
        table = None if fmt is fp32 else _binary32_table(fmt)
        packed = hardware.row_panels(terms.view(np.float32) if table is None else terms, table,
                                     hardware.columns(np.float32, order))
    result = _host_gemm(np.ones((1, k), np.float32), packed, accumulate, order, mode, lambda: True, m)
    return None if result is None else result[0]


def dots(a: np.ndarray, b: np.ndarray, fmt: Format, b_format: Format, accumulate: Format, order: str,
         mode: int) -> np.ndarray | None:
    """FP32 bits of the sums of the products a[i, t] * b[i, t] over t (two (m, k) arrays of
    patterns), as :func:`sums` adds them, where every product is a binary32 value: the products are
    then the host's binary32 multiplications (exact: only FTZ and DAZ could change them, and
    hardware.products sets them off)."""
    if order not in ("sequential", "pairwise") or not (_embeds(fmt, fp32) and _embeds(b_format, fp32)
                                                        and _embeds(accumulate, fp32)):
        return None
    a32, b32 = _binary32(a, fmt), _binary32(b, b_format)
    if not _products_in_binary32(a32, b32, fmt, b_format):
        return None
    products = hardware.products(a32, b32)
    return None if products is None else sums(products.view(np.uint32), fp32, accumulate, order, mode)
