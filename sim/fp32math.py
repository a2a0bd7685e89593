"""exp and log on FP32 bit patterns, built only from emulated FP32 operations.

libm's ``expf``/``logf`` differ between machines in the last bit; these do not, because every
arithmetic step is a correctly rounded ``softfloat16.fp32`` operation and everything else is
exact bit manipulation (splitting exponent and significand, building powers of two, selecting).

``exp(x)`` (range reduction by ln 2, then a polynomial):
  1. ``k = round(x / ln2)``: ``t = x * (1/ln2)``, rounded to an integer by adding and
     subtracting 1.5 * 2**23 (round to nearest even);
  2. ``r = x - k*ln2`` in two fused steps, ``fma(-k, LN2_HI, x)`` then ``fma(-k, LN2_LO, .)``,
     where LN2_HI has 16 significant bits so ``k * LN2_HI`` is exact; ``|r| <= ln2/2 + tiny``;
  3. ``exp(r)`` by its Taylor polynomial of degree 7 (truncation < 0.1 ulp) in Horner form, one
     fma per coefficient;
  4. ``exp(r) * 2**k1 * 2**k2`` with ``k1 = floor(k/2)``, ``k2 = k - k1``: the first product is
     exact, the second rounds once, so overflow and gradual underflow come out right.
  Inputs are clamped to [-110, 100] first (exp is 0 or inf in FP32 outside), NaN gives the
  default NaN, exp(-inf) = +0, exp(+inf) = +inf.

``log(x)`` (fdlibm's decomposition):
  1. ``x = 2**e * m`` with ``m`` in [sqrt(2)/2, sqrt(2)) (subnormals are first multiplied by
     2**24);
  2. ``f = m - 1`` (exact), ``s = f / (2 + f)``, so ``log(m) = 2*atanh(s)``, ``|s| < 0.172``;
  3. ``R = s**2 * (2/3 + 2/5 s**2 + 2/7 s**4 + 2/9 s**6 + 2/11 s**8)`` (Taylor series of
     ``2*atanh(s)/s - 2``; truncation < 0.01 ulp) and, with ``h = f*f/2``,
     ``log(x) = e*LN2_HI - ((h - (s*(h + R) + e*LN2_LO)) - f)``.
  log(+-0) = -inf, log(x < 0) = NaN, log(+inf) = +inf, NaN gives the default NaN.

Measured error (tests/sim/test_fp32math.py): below 1 ulp of the exact result everywhere tested;
the tests enforce a bound of 1 ulp and monotonicity over dense sweeps.
"""
from __future__ import annotations

import math

import numpy as np

import softfloat16 as sf

__all__ = ["exp", "log"]

_F32 = sf.fp32
_NAN = np.uint32(0x7FC00000)
_POS_INF, _NEG_INF = np.uint32(0x7F800000), np.uint32(0xFF800000)


def _const(value: float) -> np.uint32:
    """The FP32 bits of a constant (rounded once from its float64 value)."""
    return _F32.from_float(np.float64(value))


_LN2_HI = _const(45426 * 2.0**-16)  # ln 2 to 16 bits: k * LN2_HI is exact for |k| < 256
_LN2_LO = _const(math.log(2.0) - 45426 * 2.0**-16)
_INV_LN2 = _const(1.0 / math.log(2.0))
_ROUNDER = _const(1.5 * 2.0**23)  # t + ROUNDER - ROUNDER rounds t (|t| < 2**22) to an integer
_EXP_LOW, _EXP_HIGH = _const(-110.0), _const(100.0)
_EXP_TAYLOR = [_const(1.0 / math.factorial(n)) for n in range(7, -1, -1)]  # 1/7! ... 1/0!
_LOG_SERIES = [_const(2.0 / n) for n in (11, 9, 7, 5, 3)]
_ONE, _TWO, _HALF = _const(1.0), _const(2.0), _const(0.5)
_TWO_POW_24 = _const(2.0**24)
_SQRT2_BITS = 0x3FB504F3  # FP32 sqrt(2), rounded down: the split point of the significand


def _bits(x) -> np.ndarray:
    return sf.as_bits(x, _F32, "x")


def _power_of_two(k: np.ndarray) -> np.ndarray:
    """FP32 bits of 2**k for integer arrays -126 <= k <= 127 (normal numbers only)."""
    return ((k + 127).astype(np.uint32) << np.uint32(23)).astype(np.uint32)


def _is_nan(x: np.ndarray) -> np.ndarray:
    return ~_F32.eq(x, x)


def exp(x) -> np.ndarray:
    """e**x for FP32 bit patterns, bit-identical on every machine (algorithm: module docstring).

    >>> import numpy as np, softfloat16 as sf
    >>> sf.fp32.to_float(exp(sf.fp32.from_float(np.array([0.0, 1.0, -1.0, -np.inf, np.inf]))))
    array([1.        , 2.71828175, 0.36787945, 0.        ,        inf])
    """
    x = _bits(x)
    nan = _is_nan(x)
    x_in = np.where(_F32.lt(x, _EXP_LOW), _EXP_LOW, np.where(_F32.lt(_EXP_HIGH, x), _EXP_HIGH, x))
    x_in = np.where(nan, _EXP_LOW, x_in).astype(np.uint32)  # any finite stand-in; replaced below
    shifted = _F32.add(_F32.mul(x_in, _INV_LN2), _ROUNDER)
    k_float = _F32.sub(shifted, _ROUNDER)  # round(x / ln2) as an FP32 integer
    k = shifted.astype(np.int64) - np.int64(_ROUNDER)  # the same integer, read from the bits
    minus_k = k_float ^ np.uint32(0x80000000)
    r = _F32.fma(minus_k, _LN2_HI, x_in)
    r = _F32.fma(minus_k, _LN2_LO, r)
    poly = np.broadcast_to(_EXP_TAYLOR[0], r.shape)
    for coefficient in _EXP_TAYLOR[1:]:
        poly = _F32.fma(poly, r, coefficient)
    k_half = k >> 1  # floor(k / 2): both factors are normal powers of two for |k| <= 160
    result = _F32.mul(_F32.mul(poly, _power_of_two(k_half)), _power_of_two(k - k_half))
    return np.where(nan, _NAN, result).astype(np.uint32)


def log(x) -> np.ndarray:
    """Natural logarithm of FP32 bit patterns, bit-identical everywhere (algorithm: module doc).

    >>> import numpy as np, softfloat16 as sf
    >>> sf.fp32.to_float(log(sf.fp32.from_float(np.array([1.0, 2.0, 0.5, 0.0, np.inf]))))
    array([ 0.        ,  0.69314718, -0.69314718,        -inf,         inf])
    """
    x = _bits(x)
    magnitude = x & np.uint32(0x7FFFFFFF)
    negative = (x >> np.uint32(31)).astype(bool) & (magnitude != 0)
    special_nan = _is_nan(x) | negative
    zero = magnitude == 0
    infinite = x == _POS_INF
    subnormal = (magnitude < np.uint32(0x00800000)) & ~zero
    # Normal stand-ins for the special inputs keep the arithmetic below finite; replaced at the end.
    ordinary = np.where(special_nan | zero | infinite, _ONE, magnitude).astype(np.uint32)
    ordinary = np.where(subnormal, _F32.mul(ordinary, _TWO_POW_24), ordinary).astype(np.uint32)
    e = (ordinary >> np.uint32(23)).astype(np.int64) - 127 - np.where(subnormal, 24, 0)
    m = (ordinary & np.uint32(0x007FFFFF)) | np.uint32(0x3F800000)  # in [1, 2)
    high = m > np.uint32(_SQRT2_BITS)
    m = np.where(high, m - np.uint32(0x00800000), m).astype(np.uint32)  # halve: [sqrt2/2, sqrt2)
    e = e + high
    e_float = _F32.from_float(e)  # |e| <= 150: exact
    f = _F32.sub(m, _ONE)
    s = _F32.div(f, _F32.add(_TWO, f))
    z = _F32.mul(s, s)
    series = np.broadcast_to(_LOG_SERIES[0], z.shape)
    for coefficient in _LOG_SERIES[1:]:
        series = _F32.fma(series, z, coefficient)
    r = _F32.mul(z, series)
    h = _F32.mul(_HALF, _F32.mul(f, f))
    inner = _F32.fma(e_float, _LN2_LO, _F32.mul(s, _F32.add(h, r)))
    result = _F32.sub(_F32.mul(e_float, _LN2_HI), _F32.sub(_F32.sub(h, inner), f))
    result = np.where(zero, _NEG_INF, np.where(infinite, _POS_INF, result))
    return np.where(special_nan, _NAN, result).astype(np.uint32)
