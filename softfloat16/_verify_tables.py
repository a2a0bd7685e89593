"""What the reference of ``softfloat16.verify`` works on (``softfloat16._verify_reference``): the
ops and formats it covers, the exact value of every bit pattern (read by host hardware or
ml_dtypes, not by this package's decoding, where they know the format), each format's ordered line
of values, and the special results of each format (docs/formats-spec.md), from its properties.
Read by the hardware path (``_verify_hardware``) and by the sign loop."""
from __future__ import annotations

import functools
import math
from typing import NamedTuple

import numpy as np

from .formats import Format

BINARY = ("add", "sub", "mul", "div")
OPS = BINARY + ("fma", "sqrt", "convert")
ARITY = {"add": 2, "sub": 2, "mul": 2, "div": 2, "fma": 3, "sqrt": 1, "convert": 1}

#: Formats whose + - * / sqrt (and fma) the reference rounds: FP16, BF16 and every format of 8 bits
#: or fewer that has arithmetic (E8M0 has none), with the special values of docs/formats-spec.md.
ARITHMETIC_FORMATS = ("fp16", "bf16", "fp8_e5m2", "fp8_e4m3fn", "fp8_e4m3fnuz", "fp8_e5m2fnuz", "fp6_e2m3",
                      "fp6_e3m2", "fp4_e2m1")
#: Those of 8 bits or fewer: sums, products and quotients of their values are exact in float64.
SMALL_FORMATS = ARITHMETIC_FORMATS[2:]
#: Sources and destinations of ``convert``.
CONVERT_FORMATS = ("fp16", "bf16", "fp32") + SMALL_FORMATS


def covers(fmt: Format) -> bool:
    """Whether the reference rounds + - * / sqrt fma in ``fmt``: the ARITHMETIC_FORMATS, and any
    other format of 8 bits or fewer (the IEEE P3109 formats ...) with a zero (arithmetic) and
    subnormals, whose ordered line the sign loop rounds on, in its layout of specials. With one
    significant bit (no fraction bits) a tie must go to the even code (``tie_to_even_code``): the
    sign loop's ties go to the even key.

    >>> import softfloat16 as sf
    >>> covers(sf.fp16), covers(sf.format("p3109_k8p1ue")), covers(sf.fp32), covers(sf.e8m0)
    (True, True, False, False)
    """
    if fmt.name in ARITHMETIC_FORMATS:
        return True
    return fmt.width <= 8 and fmt.has_arithmetic and not fmt.storage_shift and (
        fmt.fraction_bits > 0 or fmt.tie_to_even_code)


def converts(fmt: Format) -> bool:
    """Whether ``fmt`` is a source or destination of ``convert`` the reference rounds (with fp16,
    bf16 or fp32 as the other end): CONVERT_FORMATS and the other formats ``covers`` takes."""
    return fmt.name in CONVERT_FORMATS or covers(fmt)


def ml_dtype(fmt: Format):
    """ml_dtypes' dtype of a format of 8 bits or fewer (None without ml_dtypes, or where it has none)."""
    if fmt.float_dtype_name is None:
        return None
    try:
        import ml_dtypes
    except ImportError:
        return None
    return np.dtype(getattr(ml_dtypes, fmt.float_dtype_name))


@functools.cache
def value_table(fmt: Format) -> np.ndarray:
    """float64 value of every bit pattern of a 16-bit (or narrower) format, by hardware widening
    (numpy for fp16, the top half of a float32 for bf16, ml_dtypes for the formats of 8 bits or
    fewer, whose decoding thus owes nothing to this package; without ml_dtypes, and for the formats
    it does not know (the P3109 formats), ``Format.value``)."""
    bits = np.arange(1 << fmt.width, dtype=np.uint32)
    with np.errstate(all="ignore"):
        if fmt.name == "fp16":
            return bits.astype(np.uint16).view(np.float16).astype(np.float64)
        if fmt.name == "bf16":  # a bf16 is the top half of an fp32
            return (bits << 16).view(np.float32).astype(np.float64)
        if fmt.width <= 8 and fmt.float_dtype_name and ml_dtype(fmt) is not None:
            return bits.astype(np.uint8).view(ml_dtype(fmt)).astype(np.float64)
    return np.array([float(fmt.value(int(b))) for b in bits])


def values(bits: np.ndarray, fmt: Format) -> np.ndarray:
    """Exact float64 values of bit patterns."""
    if fmt.width == 32:
        with np.errstate(all="ignore"):  # signaling NaNs may warn as they widen
            return np.asarray(bits, dtype=np.uint32).view(np.float32).astype(np.float64)
    return value_table(fmt)[bits]


class Grid(NamedTuple):
    """The ordered line of a format, read off its table of values, with a negative half also for an
    unsigned format (whose negative results the caller turns into the NaN)."""

    line: np.ndarray     # line[k + top]: the value of key k (the signed magnitude of a pattern)
    top: int             # the key one beyond max finite
    fraction_bits: int
    bias: int            # the exponent field of 1.0
    emin: int            # log2 of the smallest normal
    emax: int            # floor(log2(max finite))


@functools.cache
def grid(fmt: Format) -> Grid:
    """Keys 0 .. max finite are the magnitudes in increasing order in every format (special
    patterns, where there are any, sit above; key k is pattern k, and -k the pattern with the sign
    bit). The ends of the line, keys +-top, hold max finite plus the top binade's spacing: the
    value rounding with an unbounded exponent would give next (2^(emax+1) in IEEE formats and with
    one significant bit; 480 in E4M3FN, whose 0x7f is its NaN). Rounding needs it as max finite's
    far neighbour; a result rounded to it has overflowed."""
    table = value_table(fmt)
    magnitudes = table[: 1 << (fmt.width - int(fmt.signed))]
    finite = np.isfinite(magnitudes)
    max_key = int(np.flatnonzero(finite)[-1])
    if not finite[: max_key + 1].all() or not np.all(np.diff(magnitudes[: max_key + 1]) > 0):
        raise ValueError(f"format: {fmt.name}'s patterns are not in the order of their values")
    biggest = magnitudes[max_key]
    emax = int(math.floor(math.log2(biggest)))
    line = np.append(magnitudes[: max_key + 1], biggest + math.ldexp(1.0, emax - fmt.fraction_bits))
    bias = int(np.flatnonzero(magnitudes == 1.0)[0]) >> fmt.fraction_bits
    return Grid(np.concatenate([-line[:0:-1], line]), max_key + 1, fmt.fraction_bits, bias, 1 - bias, emax)


def line(fmt: Format) -> np.ndarray:
    """``grid(fmt).line``."""
    return grid(fmt).line


# --- special values per format (docs/formats-spec.md) ---------------------------------------------

def nan_result(fmt: Format) -> int:
    """The pattern of a NaN result (an invalid operation, a NaN operand) compared by class: the
    default NaN, and in a format without NaN its stand-in +0 (``finite``: FP6, FP4)."""
    return fmt.default_nan if fmt.has_nan else 0


def overflow_value(fmt: Format, negative: np.ndarray, saturate: bool) -> np.ndarray:
    """Format.overflow_value for an array of signs: also the result of x/0 and of an infinite
    operand where there is no infinity."""
    negative = np.asarray(negative, dtype=bool)
    return np.where(negative, fmt.overflow_value(True, saturate), fmt.overflow_value(False, saturate))

