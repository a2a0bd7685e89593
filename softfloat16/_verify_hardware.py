"""Way (1) of the reference of ``softfloat16.verify`` (see ``softfloat16._verify_reference``): RNE
results from host float hardware, computed in a wider hardware format and rounded once more by
numpy or ml_dtypes where that second rounding is provably innocuous."""
from __future__ import annotations

import functools

import numpy as np

from ._verify_tables import (
    ARITHMETIC_FORMATS, BINARY, SMALL_FORMATS, ml_dtype, nan_result, overflow_value, value_table, values,
)
from .formats import Format, format as parse_format

def _bf16_from_float32(x: np.ndarray) -> np.ndarray:
    import ml_dtypes
    return x.astype(ml_dtypes.bfloat16).view(np.uint16)


@functools.cache
def ml_dtypes_rounds_correctly() -> bool:
    """Whether ml_dtypes' conversions round correctly (0.7 and later). Earlier releases convert float64
    to bfloat16 and the formats of 8 bits or fewer through float32 (two roundings), and round float32
    subnormals in (2^-127, 1.5 * 2^-127) to E8M0's 2^-126: the reference never gives them float64."""
    try:
        import ml_dtypes
    except ImportError:
        return False
    major, minor = (int(part) for part in ml_dtypes.__version__.split(".")[:2])
    return (major, minor) >= (0, 7)


def bf16_products(product: np.ndarray, by_ml_dtypes: bool | None = None) -> np.ndarray:
    """Exact float64 products rounded (RNE) to BF16: by ml_dtypes' float64 -> bfloat16 (default: where
    it rounds once), or by float32 (exact >= 2^-126) and, below, ``rint`` of the integer count of
    2^-133 (every BF16 there is a multiple of it)."""
    if by_ml_dtypes is None:
        by_ml_dtypes = ml_dtypes_rounds_correctly()
    if by_ml_dtypes:
        import ml_dtypes
        return product.astype(ml_dtypes.bfloat16).view(np.uint16)
    fmt = parse_format("bf16")
    result = _bf16_from_float32(product.astype(np.float32))
    tiny = np.flatnonzero(np.abs(product) < 2.0**fmt.emin)
    count = np.rint(np.abs(product[tiny]) * 2.0**-fmt.min_subnormal_exponent).astype(np.uint16)
    result[tiny] = count | np.where(np.signbit(product[tiny]), fmt.sign_mask, 0).astype(np.uint16)
    return result


@functools.cache
def _float32_table(fmt: Format) -> np.ndarray:
    return value_table(fmt).astype(np.float32)  # exact


def round_float32(fmt: Format, y: np.ndarray, saturate: bool = False) -> np.ndarray:
    """float32 values rounded once (RNE) to a format of 8 bits or fewer by ml_dtypes' conversion,
    then given docs/formats-spec.md's special values where ml_dtypes differs or has no say: a NaN
    is ``nan_result`` (ml_dtypes turns a NaN into -0 in FP6/FP4), an infinite y (x/0) and a
    finite y that overflowed (ml_dtypes: inf or NaN) the overflow value, with ``saturate`` too.
    Overflow itself is ml_dtypes' call: rounding with an unbounded exponent beyond max finite."""
    y = np.asarray(y, dtype=np.float32)
    out = y.astype(ml_dtype(fmt)).view(np.uint8).astype(np.int64)
    nan = np.isnan(y)
    overflowed = ~nan & (np.isinf(y) | ~np.isfinite(value_table(fmt)[out]))
    if not fmt.has_inf and not fmt.has_nan:  # ml_dtypes saturates (max finite: nothing else to give)
        overflowed |= np.isfinite(y) & (np.abs(y) > value_table(fmt)[fmt.max_finite])
    out[overflowed] = overflow_value(fmt, np.signbit(y[overflowed]), saturate)
    out[nan] = nan_result(fmt)
    return out.astype(fmt.dtype)


def hardware_rne(fmt: Format, op: str, bits: list[np.ndarray], saturate: bool = False) -> np.ndarray:
    """RNE results of + - * / sqrt on bit patterns via host floats (NaNs: some qNaN). FP16 and
    BF16 as the module docstring says; the formats of 8 bits or fewer through one float32
    operation (exact for + - *; for / and sqrt p' = 24 >= 2p + 2 with p <= 4, and every quotient
    and root of their values is a float32 normal) and ml_dtypes' float32 -> format (``round_float32``)."""
    if fmt.name not in ARITHMETIC_FORMATS or op not in BINARY + ("sqrt",):
        raise ValueError(f"no hardware RNE path for {fmt.name} {op}")
    if saturate and fmt.name not in SMALL_FORMATS:
        raise ValueError(f"no hardware path for {fmt.name} with saturate")
    with np.errstate(all="ignore"):
        if fmt.name == "bf16" and op == "mul":
            return bf16_products(value_table(fmt)[bits[0]] * value_table(fmt)[bits[1]])  # exact in float64
        table = _float32_table(fmt)
        x = [table[b] for b in bits]
        if op == "add":
            y = x[0] + x[1]
        elif op == "sub":
            y = x[0] - x[1]
        elif op == "mul":
            y = x[0] * x[1]
        elif op == "div":
            y = x[0] / x[1]
        else:
            y = np.sqrt(x[0])
        if fmt.name == "fp16":
            return y.astype(np.float16).view(np.uint16)
        if fmt.name == "bf16":
            return _bf16_from_float32(y)
        return round_float32(fmt, y, saturate)


def hardware_convert(src: Format, dst: Format, bits: np.ndarray, saturate: bool = False) -> np.ndarray:
    """RNE conversion by numpy (float32 -> float16, direct) or ml_dtypes (float32 -> bfloat16 and
    the formats of 8 bits or fewer, direct); narrower sources are first widened to float32,
    exactly. NaNs are quieted (into a format without NaN: +0)."""
    with np.errstate(all="ignore"):
        x = values(bits, src).astype(np.float32)
        if dst.name in SMALL_FORMATS:
            return round_float32(dst, x, saturate)
        if saturate:
            raise ValueError(f"no hardware conversion to {dst.name} with saturate")
        if dst.name == "fp32":
            out = x.view(np.uint32).copy()
        elif dst.name == "fp16":
            out = x.astype(np.float16).view(np.uint16)
        elif dst.name == "bf16":
            out = _bf16_from_float32(x)
        else:
            raise ValueError(f"no hardware conversion to {dst.name}")
    nan = np.flatnonzero(np.isnan(x))
    out[nan] |= out.dtype.type(dst.quiet_bit)  # numpy keeps signaling NaNs
    return out

