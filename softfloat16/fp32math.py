"""exp, log, expm1, tanh, erf and pow on FP32 bit patterns, built only from emulated FP32 operations.

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

``expm1(x) = e**x - 1`` (accurate near 0, where ``exp(x) - 1`` cancels):
  1. ``k`` and ``r = x - k*ln2`` as in exp, except ``k = 0`` (``r = x``) for ``-ln2/2 < x < ln2``
     (``k = 1`` would amplify the error of a negative ``p`` in step 3);
  2. ``p = expm1(r) = r + r*r * (1/2! + r/3! + ... + r**9/11!)``: Horner fmas, then one fma;
  3. ``2**k * (1 + p) - 1`` as ``fma(p, 2**k, 2**k - 1)`` for ``-24 <= k <= 23`` (``2**k - 1``
     is exact there, so this is one rounding); ``fma(1 + p, 2**k, -1)`` below; for ``k >= 24``
     ``h = fma(p, 2**k1, 2**k1)`` and its rounding error ``l`` (one more fma), then
     ``h * 2**k2 + fma(l, 2**k2, -1)`` (``k = k1 + k2``: the split reaches overflow correctly).
  Inputs are clamped to [-30, 100]; ``|x| < 2**-25`` returns ``x`` (so ``expm1(-0) = -0``).

``tanh(x)`` (odd: computed on ``a = |x|``, the sign put back):
  ``a < 0.55``: ``a + a * z * P(z)``, ``z = a*a``, ``P`` the Taylor series of ``(tanh(a) - a)/a**3``
  through ``a**19`` (coefficients from Bernoulli numbers; truncation < 0.01 ulp), one final fma;
  ``a >= 0.55``: ``q / (q + 2)`` with ``q = expm1(2a)`` (``a`` clamped to 10, where tanh is 1 in
  FP32), the rounding errors of ``q + 2`` (Fast2Sum) and of the division (an fma gives its exact
  remainder) added back as one correction term. tanh(+-inf) = +-1.

``erf(x)`` (odd, on ``a = |x|``):
  ``a < 0.5``: ``a + a * Q(a*a)``, ``Q`` the Taylor series of ``erf(a)/a - 1`` through ``a**17``;
  ``0.5 <= a < 1``: ``erf(c) + t * R(t)``, ``t = (a - c) * 4``, with a center ``c ~ 0.75`` whose erf
  is an FP32 number to 1e-12 and ``R`` a fitted polynomial of degree 7;
  ``1 <= a < 2`` and ``2 <= a <= 4``: ``1 - E(t)`` with ``E`` a polynomial in ``t = (a - 1.5) * 2``,
  resp. ``t = (a - 3) / 2`` (both exact), fitted to erfc by least squares on Chebyshev nodes
  against float64 erfc (degrees 10 and 12; coefficients below as FP32 bit patterns; fit error
  < 3e-9, a twentieth of an ulp of the result); ``a > 4``: 1 (erfc(4) is below half an ulp of 1).

``pow(x, y)``: ``exp(y * log|x|)`` with the logarithm and the product carried in two FP32 words,
and C99's special cases (:func:`pow` has the details).

``log1p(x) = log(1 + x)``: the Taylor series below ``|x| = 2**-9``; above, ``1 + x = u + c`` exactly
(TwoSum), ``log(u)`` in two FP32 words (pow's logarithm) and ``+ c / u``, one final rounding
(:func:`log1p_steps`). Measured over every 97th FP32 pattern (33 million finite results): 0.5008
ulp at most, correctly rounded in 99.9996% (tests/test_torch_extras.py checks a sample).

Measured error against float64 (numpy, scipy), largest over every 97th FP32 bit pattern (44
million inputs; pow: 2.4 million pairs in six families, subnormal results and ``|y * log x|`` up
to 104 included): expm1 0.964 ulp, tanh 0.838, erf 0.709, pow 0.93; the correctly rounded result
in 99.7%, 99.94%, 99.3% and about 95% of the inputs. tests/test_fp32math_extra.py enforces < 1 ulp on
a sample, monotonicity across every seam between the pieces, the special values, and that the
same steps driven by torch (``sim.crosscheck.torch_exact.TorchFp32``) give the same bits.

Each algorithm is written once (:func:`exp_steps`, :func:`log_steps`, :func:`expm1_steps`,
:func:`tanh_steps`, :func:`erf_steps`, :func:`pow_steps`), against an
:class:`Fp32Arithmetic`: :data:`EMULATED` does each operation with ``softfloat16.fp32`` (that is
:func:`exp` and :func:`log`, which ``sim`` (re-exported as ``sim.fp32math``) and the dispatch
mode ``softfloat16.torch`` use); the torch reference of the cross-check
(``sim.crosscheck.torch_exact``) drives the same steps with correctly rounded torch operations.
The constants are public here so that every side uses the same bits.
"""
from __future__ import annotations

import math
from fractions import Fraction
from typing import Any, Protocol

import numpy as np

import softfloat16 as sf

__all__ = [
    "EMULATED", "EXP_HIGH", "EXP_LOW", "EXP_TAYLOR", "HALF", "INV_LN2", "LN2_HI", "LN2_LO", "LOG_SERIES", "NAN",
    "NEG_INF", "ONE", "POS_INF", "ROUNDER", "SQRT2_BITS", "TWO", "TWO_POW_24", "EmulatedFp32", "Fp32Arithmetic",
    "erf", "erf_steps", "exp", "exp_steps", "expm1", "expm1_steps", "log", "log1p", "log1p_steps", "log_steps", "pow",
    "pow_steps", "tanh", "tanh_steps",
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
ZERO = _const(0.0)
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


# -- expm1, tanh, erf ------------------------------------------------------------------------------
def _bernoulli(count: int) -> list[Fraction]:
    """Bernoulli numbers B_0 .. B_count (B_1 = -1/2), exactly."""
    numbers = [Fraction(1)]
    for m in range(1, count + 1):
        numbers.append(-sum(math.comb(m + 1, k) * numbers[k] for k in range(m)) / (m + 1))
    return numbers


def _tanh_taylor() -> tuple[np.uint32, ...]:
    """Coefficients of a**3, a**5, ..., a**19 of tanh's Taylor series (from the highest), in FP32."""
    b = _bernoulli(20)
    terms = [Fraction(4**n * (4**n - 1)) * b[2 * n] / math.factorial(2 * n) for n in range(2, 11)]
    return tuple(_const(float(t)) for t in reversed(terms))


EXPM1_LOW = _const(-30.0)  # expm1(-30) is -1 in FP32 (and 2**k stays normal)
EXPM1_TINY = 0x33000000  # 2**-25: below it expm1(x) rounds to x
EXPM1_TAYLOR = tuple(_const(1.0 / math.factorial(n)) for n in range(11, 1, -1))  # 1/11! ... 1/2!
TANH_SPLIT = _const(0.55)  # polynomial below, expm1 above
TANH_HIGH = _const(10.0)  # tanh(10) is 1 in FP32
TANH_TAYLOR = _tanh_taylor()
ERF_TAYLOR = tuple(_const(2 / math.sqrt(math.pi) * (-1) ** n / (math.factorial(n) * (2 * n + 1)) - (n == 0))
                   for n in range(8, -1, -1))  # erf(a)/a - 1 in powers of a*a, from the highest
# erf(a) on [0.5, 1) as ERF_CENTER_VALUE + t * R(t), t = (a - ERF_CENTER) * 4 (exact: Sterbenz), where
# ERF_CENTER (~0.7501) was chosen among the FP32 numbers near 0.75 for erf(ERF_CENTER) to lie within
# 1.1e-12 of an FP32 number (ERF_CENTER_VALUE); R's coefficients (highest power first) were fitted
# by least squares one at a time from the lowest, each rounded to FP32 before fitting the next
# (fit error < 5e-10, a hundredth of an ulp).
ERF_CENTER, ERF_CENTER_VALUE = np.uint32(0x3F40072C), np.uint32(0x3F3612E8)
ERF_NEAR_CENTER = tuple(np.uint32(b) for b in (
    0x332283BB, 0x3590D488, 0xB6DC3308, 0xB859F25A, 0x3A1A4644, 0x39DBFBA4, 0xBCF6E18B, 0x3E249037))
# erfc(a) on [1, 2] in t = (a - 1.5) * 2 and on [2, 4] in t = (a - 3) / 2, from the highest power:
# least-squares fits (4001 Chebyshev nodes, float64 erfc), coefficients rounded to FP32.
ERFC_MID = tuple(np.uint32(b) for b in (
    0x33257689, 0xB649E762, 0x371BCC0B, 0x381A0C30, 0xB99E55D4, 0x39F3A4D6, 0x3B36AD68, 0xBC8E150F, 0x3D36AD4B,
    0xBD7391B9, 0x3D0AD554))
ERFC_HIGH = tuple(np.uint32(b) for b in (
    0xBBC1D7F2, 0x3C9ED4C0, 0xBC953000, 0xBBC798EA, 0x3D0EDDDC, 0xBD4D74DA, 0x3D4156AD, 0xBD053055, 0x3C88E70A,
    0xBBCEDF12, 0x3ADB05F9, 0xB99203F5, 0x37B94F19))
ONE_AND_HALF, THREE, FOUR = _const(1.5), _const(3.0), _const(4.0)


def _horner(coefficients: tuple, t: Any, ops: Fp32Arithmetic) -> Any:
    """sum c_i t**i by Horner's rule (coefficients from the highest power), one fma per step."""
    value = ops.const(coefficients[0])
    for coefficient in coefficients[1:]:
        value = ops.fma(value, t, ops.const(coefficient))
    return value


def _magnitude(x: Any, ops: Fp32Arithmetic) -> tuple[Any, Any]:
    """(|x|, the sign bit of x as an integer)."""
    bits = ops.bits(x)
    return ops.from_bits(bits & FP32.magnitude_mask), bits & FP32.sign_mask


def _with_sign(value: Any, sign: Any, ops: Fp32Arithmetic) -> Any:
    return ops.from_bits(ops.bits(value) | sign)


def expm1_steps(x: Any, ops: Fp32Arithmetic) -> Any:
    """e**x - 1 for FP32 values of ``ops``' side, by the algorithm of the module docstring.

    >>> sf.hex(expm1_steps(sf.fp32.from_float(1e-3), EMULATED))  # 1.0005001667e-3
    '0x3a832337'
    """
    nan = ops.isnan(x)
    low, high, rounder = ops.const(EXPM1_LOW), ops.const(EXP_HIGH), ops.const(ROUNDER)
    x_in = ops.where(ops.lt(x, low), low, ops.where(ops.lt(high, x), high, x))
    x_in = ops.where(nan, ops.const(ONE), x_in)
    shifted = ops.add(ops.mul(x_in, ops.const(INV_LN2)), rounder)
    # k = 0 on [0, ln2) too: there k = 1 would give 2*(1 + p) - 1 with p < 0, which amplifies p's error.
    unreduced = ops.lt(x_in, ops.const(LN2_HI)) & ops.lt(ops.const(ZERO), x_in)
    k_float = ops.where(unreduced, ops.const(ZERO), ops.sub(shifted, rounder))
    k = ops.where(unreduced, 0, ops.bits(shifted) - int(ROUNDER))  # in [-44, 145]
    minus_k = ops.neg(k_float)
    r = ops.fma(minus_k, ops.const(LN2_LO), ops.fma(minus_k, ops.const(LN2_HI), x_in))  # |r| < ln2
    p = ops.fma(ops.mul(r, r), _horner(EXPM1_TAYLOR, r, ops), r)  # expm1(r)
    one = ops.const(ONE)
    middle_k = ops.where((k >= -24) & (k <= 23), k, 0)
    scale = _power_of_two(middle_k, ops)
    middle = ops.fma(p, scale, ops.sub(scale, one))  # 2**k - 1 exact: one rounding
    low_scale = _power_of_two(ops.where(k < -24, k, 0), ops)
    below = ops.fma(ops.add(one, p), low_scale, ops.neg(one))
    high_k = ops.where(k >= 24, k, 24)
    k_half = high_k >> 1
    half_scale, rest_scale = _power_of_two(k_half, ops), _power_of_two(high_k - k_half, ops)
    head = ops.fma(p, half_scale, half_scale)  # 2**k1 * (1 + p), rounded...
    tail = ops.fma(p, half_scale, ops.sub(half_scale, head))  # ...and what that rounding lost
    above = ops.add(ops.mul(head, rest_scale), ops.fma(tail, rest_scale, ops.neg(one)))  # one rounding, nearly
    result = ops.where(k == 0, p, ops.where(k < -24, below, ops.where(k >= 24, above, middle)))
    tiny = (ops.bits(x) & FP32.magnitude_mask) < EXPM1_TINY
    return ops.where(nan, ops.const(NAN), ops.where(tiny, x, result))


def tanh_steps(x: Any, ops: Fp32Arithmetic) -> Any:
    """Hyperbolic tangent of FP32 values of ``ops``' side (algorithm: module docstring).

    >>> sf.hex(tanh_steps(sf.fp32.from_float(0.5), EMULATED))  # 0.46211715726
    '0x3eec9a9f'
    """
    nan = ops.isnan(x)
    a, sign = _magnitude(x, ops)
    small_a = ops.where(ops.lt(a, ops.const(TANH_SPLIT)), a, ops.const(ZERO))
    z = ops.mul(small_a, small_a)
    small = ops.fma(small_a, ops.mul(z, _horner(TANH_TAYLOR, z, ops)), small_a)
    high = ops.const(TANH_HIGH)
    large_a = ops.where(ops.lt(a, high), a, high)
    q = expm1_steps(ops.add(large_a, large_a), ops)  # >= 2 here
    two = ops.const(TWO)
    denominator = ops.add(q, two)
    lost = ops.sub(two, ops.sub(denominator, q))  # q + 2 == denominator + lost exactly (Fast2Sum, q >= 2)
    quotient = ops.div(q, denominator)
    remainder = ops.fma(ops.neg(quotient), denominator, q)  # exact
    # q / (denominator + lost) = quotient + (remainder - quotient * lost) / denominator, to first order
    large = ops.add(quotient, ops.div(ops.fma(ops.neg(quotient), lost, remainder), denominator))
    result = _with_sign(ops.where(ops.lt(a, ops.const(TANH_SPLIT)), small, large), sign, ops)
    return ops.where(nan, ops.const(NAN), result)


def erf_steps(x: Any, ops: Fp32Arithmetic) -> Any:
    """The error function of FP32 values of ``ops``' side (algorithm: module docstring).

    >>> sf.hex(erf_steps(sf.fp32.from_float(0.5), EMULATED))  # 0.52049987781
    '0x3f053f7b'
    """
    nan = ops.isnan(x)
    a, sign = _magnitude(x, ops)
    one, four = ops.const(ONE), ops.const(FOUR)
    half = ops.const(HALF)
    small_a = ops.where(ops.lt(a, half), a, ops.const(ZERO))
    small = ops.fma(small_a, _horner(ERF_TAYLOR, ops.mul(small_a, small_a), ops), small_a)
    near_a = ops.where(ops.lt(a, half), half, ops.where(ops.lt(a, one), a, one))
    near_t = ops.mul(ops.sub(near_a, ops.const(ERF_CENTER)), ops.const(FOUR))
    near = ops.fma(near_t, _horner(ERF_NEAR_CENTER, near_t, ops), ops.const(ERF_CENTER_VALUE))
    middle_t = ops.mul(ops.sub(ops.where(ops.lt(a, ops.const(TWO)), a, one), ops.const(ONE_AND_HALF)),
                       ops.const(TWO))
    middle = ops.sub(one, _horner(ERFC_MID, middle_t, ops))
    high_t = ops.mul(ops.sub(ops.where(ops.lt(a, four), a, four), ops.const(THREE)), ops.const(HALF))
    high = ops.sub(one, _horner(ERFC_HIGH, high_t, ops))
    result = ops.where(ops.lt(a, half), small, ops.where(ops.lt(a, one), near, ops.where(
        ops.lt(a, ops.const(TWO)), middle, high)))
    return ops.where(nan, ops.const(NAN), _with_sign(result, sign, ops))


def expm1(x) -> np.ndarray:
    """e**x - 1 for FP32 bit patterns, bit-identical everywhere (algorithm: module docstring).

    >>> import numpy as np, softfloat16 as sf
    >>> sf.fp32.to_float(expm1(sf.fp32.from_float(np.array([0.0, 1e-10, 1.0, -np.inf, np.inf])))).tolist()
    [0.0, 1.000000013351432e-10, 1.7182817459106445, -1.0, inf]
    """
    x = sf.as_bits(x, _F32, "x")
    return np.asarray(expm1_steps(x, EMULATED)).astype(np.uint32)


def tanh(x) -> np.ndarray:
    """Hyperbolic tangent of FP32 bit patterns, bit-identical everywhere (algorithm: module docstring).

    >>> import numpy as np, softfloat16 as sf
    >>> sf.fp32.to_float(tanh(sf.fp32.from_float(np.array([0.0, 0.5, 1.0, -20.0, np.inf])))).tolist()
    [0.0, 0.46211716532707214, 0.7615941762924194, -1.0, 1.0]
    """
    x = sf.as_bits(x, _F32, "x")
    return np.asarray(tanh_steps(x, EMULATED)).astype(np.uint32)


def erf(x) -> np.ndarray:
    """The error function of FP32 bit patterns, bit-identical everywhere (algorithm: module docstring).

    >>> import numpy as np, softfloat16 as sf
    >>> sf.fp32.to_float(erf(sf.fp32.from_float(np.array([0.0, 0.5, 1.0, -2.0, np.inf])))).tolist()
    [0.0, 0.5204998850822449, 0.8427007794380188, -0.9953222870826721, 1.0]
    """
    x = sf.as_bits(x, _F32, "x")
    return np.asarray(erf_steps(x, EMULATED)).astype(np.uint32)


# -- pow ---------------------------------------------------------------------------------------------
TWO_THIRDS = _const(2.0 / 3.0)
TWO_THIRDS_LO = _const(2.0 / 3.0 - float(np.float32(2.0 / 3.0)))


def _two_sum(a: Any, b: Any, ops: Fp32Arithmetic) -> tuple[Any, Any]:
    """(a + b rounded, its rounding error), exactly (Knuth's TwoSum, six operations)."""
    total = ops.add(a, b)
    b_virtual = ops.sub(total, a)
    error = ops.add(ops.sub(a, ops.sub(total, b_virtual)), ops.sub(b, b_virtual))
    return total, error


def _fast_two_sum(a: Any, b: Any, ops: Fp32Arithmetic) -> tuple[Any, Any]:
    """(a + b rounded, its rounding error) for |a| >= |b| (or a == 0) (Dekker's Fast2Sum)."""
    total = ops.add(a, b)
    return total, ops.sub(b, ops.sub(total, a))


def _log_two_word(magnitude: Any, ops: Fp32Arithmetic) -> tuple[Any, Any]:
    """log(x) as an unevaluated sum hi + lo (~2**-40 relative) for FP32 bit patterns ``magnitude`` of
    finite x > 0: the decomposition of log_steps, with s = f / (2 + f) carried in two words."""
    subnormal = magnitude < FP32.min_normal
    widened = ops.bits(ops.mul(ops.from_bits(magnitude), ops.const(TWO_POW_24)))
    ordinary = ops.where(subnormal, widened, magnitude)
    e = (ordinary >> FP32.fraction_bits) - FP32.bias - ops.where(subnormal, 24, 0)
    m = (ordinary & FP32.fraction_mask) | FP32.one
    high = m > SQRT2_BITS
    m = ops.where(high, m - FP32.min_normal, m)
    e_float = ops.from_int(e + ops.where(high, 1, 0))
    two = ops.const(TWO)
    f = ops.sub(ops.from_bits(m), ops.const(ONE))  # exact, |f| < 0.42
    denominator, denominator_lo = _fast_two_sum(two, f, ops)  # 2 + f in two words
    s = ops.div(f, denominator)
    remainder = ops.fma(ops.neg(s), denominator, f)  # exact
    s_lo = ops.div(ops.fma(ops.neg(s), denominator_lo, remainder), denominator)
    # log(1 + f) = 2s + 2s**3/3 + s**3 * z * Q(z), z = s*s. The 2s**3/3 term (up to 1% of the
    # logarithm) is formed in two words too, so that only terms below 2**-13 of the result are
    # rounded in single words.
    z = ops.mul(s, s)
    z_lo = ops.fma(s, s, ops.neg(z))
    cube = ops.mul(s, z)
    cube_lo = ops.fma(s, z_lo, ops.fma(s, z, ops.neg(cube)))
    two_thirds, two_thirds_lo = ops.const(TWO_THIRDS), ops.const(TWO_THIRDS_LO)
    lead = ops.mul(cube, two_thirds)
    lead_lo = ops.fma(cube_lo, two_thirds, ops.fma(cube, two_thirds_lo, ops.fma(cube, two_thirds, ops.neg(lead))))
    rest = ops.mul(ops.mul(cube, z), _horner(LOG_SERIES[:-1], z, ops))  # 2s**5/5 + 2s**7/7 + ...
    hi, error = _two_sum(ops.mul(e_float, ops.const(LN2_HI)), ops.add(s, s), ops)  # e*LN2_HI exact
    hi, error2 = _two_sum(hi, lead, ops)
    two_s_lo = ops.add(s_lo, s_lo)  # d(2s + 2s**3/3) = 2 (1 + s*s) ds: s_lo's share
    small = ops.add(ops.fma(two_s_lo, z, two_s_lo), ops.fma(e_float, ops.const(LN2_LO), ops.add(lead_lo, rest)))
    return _fast_two_sum(hi, ops.add(ops.add(error, error2), small), ops)


def _integer_parity(bits: Any, ops: Fp32Arithmetic) -> tuple[Any, Any]:
    """(is an integer, is an odd integer) for FP32 patterns of finite numbers (from the bits)."""
    magnitude = bits & FP32.magnitude_mask
    exponent = (magnitude >> FP32.fraction_bits) - FP32.bias  # of the value: 1 <= |y| < 2 is 0
    significand = (magnitude & FP32.fraction_mask) | FP32.one
    below_point = FP32.fraction_bits - exponent  # significand bits below the binary point
    shift = ops.where(below_point < 0, 0, ops.where(below_point > FP32.fraction_bits, FP32.fraction_bits, below_point))
    integer = (magnitude == 0) | (exponent >= FP32.fraction_bits) | (
        (exponent >= 0) & ((significand & ((1 << shift) - 1)) == 0))
    odd = integer & (exponent >= 0) & (exponent <= FP32.fraction_bits) & (((significand >> shift) & 1) == 1)
    return integer, odd


def pow_steps(x: Any, y: Any, ops: Fp32Arithmetic) -> Any:
    """x**y for FP32 values of ``ops``' side (algorithm and special cases: :func:`pow`).

    >>> sf.hex(pow_steps(sf.fp32.from_float(2.0), sf.fp32.from_float(0.5), EMULATED))  # sqrt(2)
    '0x3fb504f3'
    """
    x_bits, y_bits = ops.bits(x), ops.bits(y)
    x_magnitude, y_magnitude = x_bits & FP32.magnitude_mask, y_bits & FP32.magnitude_mask
    x_negative, y_negative = (x_bits & FP32.sign_mask) != 0, (y_bits & FP32.sign_mask) != 0
    infinity = int(POS_INF)
    x_nan, y_nan = x_magnitude > infinity, y_magnitude > infinity
    x_zero, x_inf = x_magnitude == 0, x_magnitude == infinity
    y_zero, y_inf = y_magnitude == 0, y_magnitude == infinity
    y_integer, y_odd = _integer_parity(y_bits, ops)
    # |x| ** y = exp(y * log|x|), log|x| and the product in two words.
    finite_x = ops.where(x_zero | x_inf | x_nan, int(ONE), x_magnitude)
    log_hi, log_lo = _log_two_word(finite_x, ops)
    y_in = ops.where(y_inf | y_nan, ops.const(ONE), y)
    p_hi = ops.mul(y_in, log_hi)
    p_lo = ops.fma(y_in, log_lo, ops.fma(y_in, log_hi, ops.neg(p_hi)))
    low, high = ops.const(EXP_LOW), ops.const(EXP_HIGH)
    outside = ops.lt(p_hi, low) | ops.lt(high, p_hi)
    p_hi = ops.where(ops.lt(p_hi, low), low, ops.where(ops.lt(high, p_hi), high, p_hi))
    p_lo = ops.where(outside, ops.const(ZERO), p_lo)
    rounder = ops.const(ROUNDER)
    shifted = ops.add(ops.mul(p_hi, ops.const(INV_LN2)), rounder)
    minus_k = ops.neg(ops.sub(shifted, rounder))
    k = ops.bits(shifted) - int(ROUNDER)
    reduced = ops.fma(minus_k, ops.const(LN2_HI), p_hi)  # exact
    t, t_lo = _fast_two_sum(reduced, ops.fma(minus_k, ops.const(LN2_LO), p_lo), ops)
    poly = _horner(EXP_TAYLOR, t, ops)
    poly = ops.fma(poly, t_lo, poly)  # exp(t + t_lo) = exp(t) * (1 + t_lo), to first order
    k_half = k >> 1
    result = ops.mul(ops.mul(poly, _power_of_two(k_half, ops)), _power_of_two(k - k_half, ops))
    # Signs and the special cases of C99 / IEEE 754 pow, the later ones taking precedence.
    negate = x_negative & y_odd
    result = _with_sign(result, ops.where(negate, FP32.sign_mask, 0), ops)
    nan = ops.const(NAN)
    result = ops.where(x_negative & ~x_zero & ~x_inf & ~y_integer & ~y_inf, nan, result)  # (-2) ** 0.5
    zero_or_inf = ops.where(y_negative, infinity, 0) | ops.where(negate, FP32.sign_mask, 0)
    result = ops.where(x_zero, ops.from_bits(zero_or_inf), result)
    inf_or_zero = ops.where(y_negative, 0, infinity) | ops.where(negate, FP32.sign_mask, 0)
    result = ops.where(x_inf, ops.from_bits(inf_or_zero), result)
    x_below_one = x_magnitude < int(ONE)
    y_limit = ops.where(x_below_one != y_negative, 0, infinity)
    result = ops.where(y_inf, ops.where(x_magnitude == int(ONE), ops.const(ONE), ops.from_bits(y_limit)), result)
    result = ops.where(x_nan | y_nan, nan, result)
    return ops.where(y_zero | (x_bits == int(ONE)), ops.const(ONE), result)


def pow(x, y) -> np.ndarray:
    """x**y for FP32 bit patterns (numpy broadcasting), bit-identical everywhere.

    ``exp(y * log|x|)`` with ``log|x|`` in two FP32 words (``s = f / (2 + f)`` and its remainder,
    TwoSum for ``e*ln2 + 2s``), the product ``y * log|x|`` in two words (an fma gives its error),
    then exp's range reduction and polynomial on ``t + t_lo``, ``exp(t) * (1 + t_lo)`` by one fma,
    and the scaling by ``2**k`` in two exact steps (gradual underflow rounds once more). Special
    cases as C99 and IEEE 754 pow: ``pow(x, +-0) = 1`` and ``pow(1, y) = 1`` (NaN included);
    ``pow(-1, +-inf) = 1``; a negative finite x to a non-integer finite y is NaN; signs of ``+-0``
    and ``+-inf`` bases follow odd integer exponents; ``|x| < 1`` to ``+inf`` is ``+0``, and so on.

    >>> import numpy as np, softfloat16 as sf
    >>> sf.fp32.to_float(pow(sf.fp32.from_float(np.array([2.0, -2.0, -0.0, 10.0])),
    ...                      sf.fp32.from_float(np.array([10.0, 3.0, -1.0, -0.5]))))
    array([ 1.02400000e+03, -8.00000000e+00,            -inf,  3.16227764e-01])
    """
    x, y = np.broadcast_arrays(sf.as_bits(x, _F32, "x"), sf.as_bits(y, _F32, "y"))
    return np.asarray(pow_steps(x, y, EMULATED)).astype(np.uint32)


# -- log1p -------------------------------------------------------------------------------------------
LOG1P_TINY = 0x33000000  # 2**-25: below it log1p(x) rounds to x
LOG1P_SERIES_BELOW = 0x3B000000  # 2**-9: the Taylor series below, the logarithm of 1 + x above
LOG1P_TAYLOR = tuple(_const((-1) ** (n + 1) / n) for n in (5, 4, 3, 2))  # 1/5, -1/4, 1/3, -1/2
MINUS_ONE_BITS = 0xBF800000


def log1p_steps(x: Any, ops: Fp32Arithmetic) -> Any:
    """log(1 + x) for FP32 values of ``ops``' side (accurate near 0, where ``log(1 + x)`` loses x's bits).

    ``|x| < 2**-9``: ``x + x*x * P(x)``, ``P`` the Taylor series of ``(log1p(x) - x) / x**2`` through
    ``x**3`` (truncation < 2**-38 relative), one final fma. Above: ``u = 1 + x`` and its rounding error
    ``c`` by TwoSum (``1 + x == u + c`` exactly), ``log(u)`` in two FP32 words (pow's logarithm,
    ~2**-40 relative), and ``log1p(x) = hi + (lo + c / u)`` with one final rounding (``c / u`` is
    ``log(u + c) - log(u)`` to first order; the next term is below 2**-40 of the result here).
    ``|x| < 2**-25`` returns ``x`` (so ``log1p(-0) = -0``); ``log1p(-1) = -inf``, ``x < -1`` NaN,
    ``log1p(+inf) = +inf``, NaN gives the default NaN.

    >>> sf.hex(log1p_steps(sf.fp32.from_float(1e-3), EMULATED))  # 9.995003331e-4
    '0x3a8301ab'
    """
    bits = ops.bits(x)
    magnitude = bits & FP32.magnitude_mask
    one = ops.const(ONE)
    minus_one = bits == MINUS_ONE_BITS
    special_nan = ops.isnan(x) | ops.lt(x, ops.neg(one))
    infinite = bits == int(POS_INF)
    series_range = magnitude < LOG1P_SERIES_BELOW
    small = ops.where(series_range, x, ops.const(ZERO))
    series = ops.fma(ops.mul(small, small), _horner(LOG1P_TAYLOR, small, ops), small)
    # Finite stand-ins for the special inputs keep the arithmetic below finite; replaced at the end.
    x_in = ops.where(special_nan | minus_one | infinite | series_range, one, x)
    u, c = _two_sum(one, x_in, ops)  # u >= 2**-24: a float x > -1 is a multiple of 2**-24 near -1
    hi, lo = _log_two_word(ops.bits(u), ops)
    result = ops.add(hi, ops.add(lo, ops.div(c, u)))
    result = ops.where(series_range, series, result)
    result = ops.where(magnitude < LOG1P_TINY, x, result)
    result = ops.where(minus_one, ops.const(NEG_INF), ops.where(infinite, ops.const(POS_INF), result))
    return ops.where(special_nan, ops.const(NAN), result)


def log1p(x) -> np.ndarray:
    """log(1 + x) for FP32 bit patterns, bit-identical everywhere (algorithm: :func:`log1p_steps`).

    >>> import numpy as np, softfloat16 as sf
    >>> sf.fp32.to_float(log1p(sf.fp32.from_float(np.array([0.0, 1e-10, 1.0, -1.0, np.inf])))).tolist()
    [0.0, 1.000000013351432e-10, 0.6931471824645996, -inf, inf]
    """
    x = sf.as_bits(x, _F32, "x")
    return np.asarray(log1p_steps(x, EMULATED)).astype(np.uint32)
