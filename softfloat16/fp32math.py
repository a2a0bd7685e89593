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

The algorithm is written once, in :func:`exp_steps` and :func:`log_steps`, against an
:class:`Fp32Arithmetic`: :data:`EMULATED` does each operation with ``softfloat16.fp32`` (that is
:func:`exp` and :func:`log`, which ``sim`` (re-exported as ``sim.fp32math``) and the dispatch
mode ``softfloat16.torch`` use); the torch reference of the cross-check
(``sim.crosscheck.torch_exact``) drives the same steps with correctly rounded torch operations.
The constants are public here so that every side uses the same bits.
"""
from __future__ import annotations

import math
from typing import Any, Protocol

import numpy as np

import softfloat16 as sf

__all__ = [
    "EMULATED", "EXP_HIGH", "EXP_LOW", "EXP_TAYLOR", "HALF", "INV_LN2", "LN2_HI", "LN2_LO", "LOG_SERIES", "NAN",
    "NEG_INF", "ONE", "POS_INF", "ROUNDER", "SQRT2_BITS", "TWO", "TWO_POW_24", "EmulatedFp32", "Fp32Arithmetic",
    "exp", "exp_steps", "log", "log_steps",
]

_F32 = sf.fp32


def _const(value: float) -> np.uint32:
    """The FP32 bits of a constant (rounded once from its float64 value)."""
    return _F32.from_float(np.float64(value))


# The constants, as FP32 bit patterns (np.uint32).
LN2_HI = _const(45426 * 2.0**-16)  # ln 2 to 16 bits: k * LN2_HI is exact for |k| < 256
LN2_LO = _const(math.log(2.0) - 45426 * 2.0**-16)
INV_LN2 = _const(1.0 / math.log(2.0))
ROUNDER = _const(1.5 * 2.0**23)  # t + ROUNDER - ROUNDER rounds t (|t| < 2**22) to an integer
EXP_LOW, EXP_HIGH = _const(-110.0), _const(100.0)
EXP_TAYLOR = tuple(_const(1.0 / math.factorial(n)) for n in range(7, -1, -1))  # 1/7! ... 1/0!
LOG_SERIES = tuple(_const(2.0 / n) for n in (11, 9, 7, 5, 3))
ONE, TWO, HALF = _const(1.0), _const(2.0), _const(0.5)
TWO_POW_24 = _const(2.0**24)
SQRT2_BITS = 0x3FB504F3  # FP32 sqrt(2), rounded down: the split point of the significand
FP32 = sf.fp32
NAN = np.uint32(FP32.default_nan)
POS_INF, NEG_INF = np.uint32(FP32.inf), np.uint32(FP32.sign_mask | FP32.inf)


class Fp32Arithmetic(Protocol):
    """What the algorithm needs from a side. FP32 *values* are that side's arrays (bit arrays, or
    float32 tensors); *integers* are int64 arrays of that side, for which ``>> & | + - ==`` are
    used directly. Every arithmetic operation is correctly rounded to FP32 (RNE)."""

    def const(self, bits: Any) -> Any: ...  # the FP32 value with these bits (a 0-d value)
    def add(self, a: Any, b: Any) -> Any: ...
    def sub(self, a: Any, b: Any) -> Any: ...
    def mul(self, a: Any, b: Any) -> Any: ...
    def div(self, a: Any, b: Any) -> Any: ...
    def fma(self, a: Any, b: Any, c: Any) -> Any: ...  # a * b + c, one rounding
    def neg(self, a: Any) -> Any: ...
    def lt(self, a: Any, b: Any) -> Any: ...  # IEEE a < b (False with NaN)
    def isnan(self, a: Any) -> Any: ...
    def where(self, mask: Any, a: Any, b: Any) -> Any: ...  # values or integers, scalars broadcast
    def bits(self, a: Any) -> Any: ...  # the bit pattern, as a non-negative integer
    def from_bits(self, bits: Any) -> Any: ...  # integers in [0, 2**32) -> values
    def from_int(self, integers: Any) -> Any: ...  # exact for |n| <= 2**24


class EmulatedFp32:
    """:class:`Fp32Arithmetic` on FP32 bit arrays with ``softfloat16.fp32``: :func:`exp`, :func:`log`."""

    def const(self, bits: Any) -> np.uint32:
        return np.uint32(bits)

    add, sub, mul, div, fma, lt = _F32.add, _F32.sub, _F32.mul, _F32.div, _F32.fma, _F32.lt

    def neg(self, a: np.ndarray) -> np.ndarray:
        return a ^ np.uint32(0x80000000)

    def isnan(self, a: np.ndarray) -> np.ndarray:
        return ~_F32.eq(a, a)

    def where(self, mask: np.ndarray, a: Any, b: Any) -> np.ndarray:
        return np.where(mask, a, b)

    def bits(self, a: np.ndarray) -> np.ndarray:
        return np.asarray(a).astype(np.int64)

    def from_bits(self, bits: np.ndarray) -> np.ndarray:
        return np.asarray(bits).astype(np.uint32)

    def from_int(self, integers: np.ndarray) -> np.ndarray:
        return _F32.from_float(integers)


EMULATED = EmulatedFp32()


def _power_of_two(k: Any, ops: Fp32Arithmetic) -> Any:
    """2**k for integers -126 <= k <= 127 (normal numbers only): built from its bits."""
    return ops.from_bits((k + FP32.bias) << FP32.fraction_bits)


def exp_steps(x: Any, ops: Fp32Arithmetic) -> Any:
    """e**x for FP32 values of ``ops``' side, by the algorithm of the module docstring.

    >>> sf.hex(exp_steps(sf.fp32.from_float(1.0), EMULATED))
    '0x402df854'
    """
    nan = ops.isnan(x)
    low, high, rounder = ops.const(EXP_LOW), ops.const(EXP_HIGH), ops.const(ROUNDER)
    x_in = ops.where(ops.lt(x, low), low, ops.where(ops.lt(high, x), high, x))
    x_in = ops.where(nan, low, x_in)  # any finite stand-in; replaced below
    shifted = ops.add(ops.mul(x_in, ops.const(INV_LN2)), rounder)  # two roundings
    k_float = ops.sub(shifted, rounder)  # round(x / ln2) as an FP32 integer
    k = ops.bits(shifted) - int(ROUNDER)  # the same integer, read from the bits
    minus_k = ops.neg(k_float)
    r = ops.fma(minus_k, ops.const(LN2_HI), x_in)
    r = ops.fma(minus_k, ops.const(LN2_LO), r)
    poly = ops.const(EXP_TAYLOR[0])
    for coefficient in EXP_TAYLOR[1:]:
        poly = ops.fma(poly, r, ops.const(coefficient))
    k_half = k >> 1  # floor(k / 2): both factors are normal powers of two for |k| <= 160
    result = ops.mul(ops.mul(poly, _power_of_two(k_half, ops)), _power_of_two(k - k_half, ops))
    return ops.where(nan, ops.const(NAN), result)


def log_steps(x: Any, ops: Fp32Arithmetic) -> Any:
    """Natural logarithm of FP32 values of ``ops``' side, by the algorithm of the module docstring.

    >>> sf.hex(log_steps(sf.fp32.from_float(2.0), EMULATED))
    '0x3f317218'
    """
    bits = ops.bits(x)
    magnitude = bits & FP32.magnitude_mask
    negative = ((bits & FP32.sign_mask) != 0) & (magnitude != 0)
    special_nan = ops.isnan(x) | negative
    zero = magnitude == 0
    infinite = bits == int(POS_INF)
    subnormal = (magnitude < FP32.min_normal) & ~zero
    # Normal stand-ins for the special inputs keep the arithmetic below finite; replaced at the end.
    ordinary = ops.where(special_nan | zero | infinite, int(ONE), magnitude)
    widened = ops.bits(ops.mul(ops.from_bits(ordinary), ops.const(TWO_POW_24)))
    ordinary = ops.where(subnormal, widened, ordinary)
    e = (ordinary >> FP32.fraction_bits) - FP32.bias - ops.where(subnormal, 24, 0)
    m = (ordinary & FP32.fraction_mask) | FP32.one  # in [1, 2)
    high = m > SQRT2_BITS
    m = ops.where(high, m - FP32.min_normal, m)  # halve (one binade down): [sqrt2/2, sqrt2)
    e = e + ops.where(high, 1, 0)
    e_float = ops.from_int(e)  # |e| <= 150: exact
    f = ops.sub(ops.from_bits(m), ops.const(ONE))
    s = ops.div(f, ops.add(ops.const(TWO), f))
    z = ops.mul(s, s)
    series = ops.const(LOG_SERIES[0])
    for coefficient in LOG_SERIES[1:]:
        series = ops.fma(series, z, ops.const(coefficient))
    r = ops.mul(z, series)
    h = ops.mul(ops.const(HALF), ops.mul(f, f))
    inner = ops.fma(e_float, ops.const(LN2_LO), ops.mul(s, ops.add(h, r)))
    result = ops.sub(ops.mul(e_float, ops.const(LN2_HI)), ops.sub(ops.sub(h, inner), f))
    result = ops.where(zero, ops.const(NEG_INF), ops.where(infinite, ops.const(POS_INF), result))
    return ops.where(special_nan, ops.const(NAN), result)


def exp(x) -> np.ndarray:
    """e**x for FP32 bit patterns, bit-identical on every machine (algorithm: module docstring).

    >>> import numpy as np, softfloat16 as sf
    >>> sf.fp32.to_float(exp(sf.fp32.from_float(np.array([0.0, 1.0, -1.0, -np.inf, np.inf]))))
    array([1.        , 2.71828175, 0.36787945, 0.        ,        inf])
    """
    x = sf.as_bits(x, _F32, "x")
    return np.asarray(exp_steps(x, EMULATED)).astype(np.uint32)


def log(x) -> np.ndarray:
    """Natural logarithm of FP32 bit patterns, bit-identical everywhere (algorithm: module doc).

    >>> import numpy as np, softfloat16 as sf
    >>> sf.fp32.to_float(log(sf.fp32.from_float(np.array([1.0, 2.0, 0.5, 0.0, np.inf]))))
    array([ 0.        ,  0.69314718, -0.69314718,        -inf,         inf])
    """
    x = sf.as_bits(x, _F32, "x")
    return np.asarray(log_steps(x, EMULATED)).astype(np.uint32)
