"""exp and log on FP32 bit patterns from emulated FP32 operations: the algorithm of
``sim/fp32math.py`` (range reduction by ln 2 and a degree-7 Taylor polynomial for exp; fdlibm's
``2*atanh(s)`` series for log), with the same constants and the same steps, so that both give the
same bits (tests/test_torch_mode.py checks it). The core cannot import ``sim``, hence this copy;
every step rounds to nearest even whatever the machine's rounding mode (the algorithm relies on
it), and a NaN input gives the default NaN. Below 1 ulp of the exact result (sim's measurements).
"""
from __future__ import annotations

import math

import numpy as np

import softfloat16 as sf

__all__ = ["exp", "log"]

F32 = sf.fp32


def _const(value: float) -> np.uint32:
    return F32.from_float(np.float64(value))


LN2_HI = _const(45426 * 2.0**-16)  # ln 2 to 16 bits: k * LN2_HI is exact for |k| < 256
LN2_LO = _const(math.log(2.0) - 45426 * 2.0**-16)
INV_LN2 = _const(1.0 / math.log(2.0))
ROUNDER = _const(1.5 * 2.0**23)  # t + ROUNDER - ROUNDER rounds t (|t| < 2**22) to an integer
EXP_LOW, EXP_HIGH = _const(-110.0), _const(100.0)
EXP_TAYLOR = tuple(_const(1.0 / math.factorial(n)) for n in range(7, -1, -1))  # 1/7! ... 1/0!
LOG_SERIES = tuple(_const(2.0 / n) for n in (11, 9, 7, 5, 3))
ONE, TWO, HALF, TWO_POW_24 = _const(1.0), _const(2.0), _const(0.5), _const(2.0**24)
SQRT2_BITS = 0x3FB504F3  # FP32 sqrt(2), rounded down: the split point of the significand
NAN = np.uint32(F32.default_nan)
POS_INF, NEG_INF = np.uint32(F32.inf), np.uint32(F32.sign_mask | F32.inf)


def _power_of_two(k: np.ndarray) -> np.ndarray:
    """2**k for integers -126 <= k <= 127, from its bits."""
    return ((k + F32.bias) << F32.fraction_bits).astype(np.uint32)


def exp(x: np.ndarray) -> np.ndarray:
    """e**x for FP32 patterns.

    >>> [hex(v) for v in exp(np.array([0x3F800000, 0, 0xFF800000], np.uint32))]   # e, 1, exp(-inf)
    ['0x402df854', '0x3f800000', '0x0']
    """
    x = np.asarray(x, dtype=np.uint32)
    nan = ~F32.eq(x, x)
    clamped = np.where(F32.lt(x, EXP_LOW), EXP_LOW, np.where(F32.lt(EXP_HIGH, x), EXP_HIGH, x))
    clamped = np.where(nan, EXP_LOW, clamped)
    shifted = F32.add(F32.mul(clamped, INV_LN2), ROUNDER)
    k_float = F32.sub(shifted, ROUNDER)  # round(x / ln2), as an FP32 integer
    k = shifted.astype(np.int64) - int(ROUNDER)  # the same integer, from the bits
    minus_k = k_float ^ np.uint32(F32.sign_mask)
    r = F32.fma(minus_k, LN2_HI, clamped)
    r = F32.fma(minus_k, LN2_LO, r)
    poly = np.full(x.shape, EXP_TAYLOR[0], dtype=np.uint32)
    for coefficient in EXP_TAYLOR[1:]:
        poly = F32.fma(poly, r, coefficient)
    k_half = k >> 1  # both factors are normal powers of two for |k| <= 160
    result = F32.mul(F32.mul(poly, _power_of_two(k_half)), _power_of_two(k - k_half))
    return np.where(nan, NAN, result).astype(np.uint32)


def log(x: np.ndarray) -> np.ndarray:
    """Natural logarithm of FP32 patterns.

    >>> [hex(v) for v in log(np.array([0x40000000, 0x3F800000, 0, 0xBF800000], np.uint32))]  # 2, 1, 0, -1
    ['0x3f317218', '0x0', '0xff800000', '0x7fc00000']
    """
    bits = np.asarray(x, dtype=np.uint32).astype(np.int64)
    magnitude = bits & F32.magnitude_mask
    negative = ((bits & F32.sign_mask) != 0) & (magnitude != 0)
    special_nan = ~F32.eq(x, x) | negative
    zero = magnitude == 0
    infinite = bits == int(POS_INF)
    subnormal = (magnitude < F32.min_normal) & ~zero
    ordinary = np.where(special_nan | zero | infinite, int(ONE), magnitude)
    widened = F32.mul(ordinary.astype(np.uint32), TWO_POW_24).astype(np.int64)
    ordinary = np.where(subnormal, widened, ordinary)
    e = (ordinary >> F32.fraction_bits) - F32.bias - np.where(subnormal, 24, 0)
    m = (ordinary & F32.fraction_mask) | F32.one  # in [1, 2)
    high = m > SQRT2_BITS
    m = np.where(high, m - F32.min_normal, m)  # one binade down: [sqrt2/2, sqrt2)
    e = e + np.where(high, 1, 0)
    e_float = F32.from_float(e)  # |e| <= 150: exact
    f = F32.sub(m.astype(np.uint32), ONE)
    s = F32.div(f, F32.add(TWO, f))
    z = F32.mul(s, s)
    series = np.full(z.shape, LOG_SERIES[0], dtype=np.uint32)
    for coefficient in LOG_SERIES[1:]:
        series = F32.fma(series, z, coefficient)
    r = F32.mul(z, series)
    h = F32.mul(HALF, F32.mul(f, f))
    inner = F32.fma(e_float, LN2_LO, F32.mul(s, F32.add(h, r)))
    result = F32.sub(F32.mul(e_float, LN2_HI), F32.sub(F32.sub(h, inner), f))
    result = np.where(zero, NEG_INF, np.where(infinite, POS_INF, result))
    return np.where(special_nan, NAN, result).astype(np.uint32)
