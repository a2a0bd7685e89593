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

``pow(x, y)`` and ``log1p(x)``, built on a logarithm carried in two FP32 words, are defined in
:mod:`softfloat16.fp32pow` (its docstring gives their algorithms) and exported here too.

Measured error against float64 (numpy, scipy), largest over every 97th FP32 bit pattern (44
million inputs; pow: 2.4 million pairs in six families, subnormal results and ``|y * log x|`` up
to 104 included): expm1 0.964 ulp, tanh 0.838, erf 0.709, pow 0.93; the correctly rounded result
in 99.7%, 99.94%, 99.3% and about 95% of the inputs. tests/test_fp32math_extra.py enforces < 1 ulp on
a sample, monotonicity across every seam between the pieces, the special values, and that the
same steps driven by torch (``sim.crosscheck.torch_exact.TorchFp32``) give the same bits.

Each algorithm is written once (:func:`exp_steps`, :func:`log_steps`, :func:`expm1_steps`,
:func:`tanh_steps`, :func:`erf_steps`, :func:`pow_steps`, :func:`log1p_steps`), against an
:class:`Fp32Arithmetic` (:mod:`softfloat16.fp32ops`, which also holds the shared constants):
:data:`EMULATED` does each operation with ``softfloat16.fp32`` (the reference: :func:`exp` and
:func:`log`, which ``sim`` (re-exported as ``sim.fp32math``) and the dispatch mode ``softfloat16.torch``
use, compute the same steps compiled, below); the
torch reference of the cross-check (``sim.crosscheck.torch_exact``) drives the same steps with
correctly rounded torch operations. The constants are public here so that every side uses the
same bits.

How the functions run: :func:`exp`, :func:`log` and the others do not call ``EMULATED`` operation by
operation (each call costs 10-30 us of fixed work, some 25 to 190 of them per function). Each step
program is traced once by :mod:`softfloat16.fp32compiled` (a symbolic ``Fp32Arithmetic`` records its
operations as straight-line code; a program that branches on its data is refused) and run as one
call of a compiled interpreter (``softfloat16/_kernels/programs.py``) whose instructions are the
core's own FP32 kernels with ``sf.fp32``'s default options: the same operations on the same bits
(tests/test_fp32_compiled.py compares every program with ``*_steps(x, EMULATED)`` bit for bit),
5 to 15 us for 16 elements instead of 0.4 to 1.5 ms, and 1.3 to 1.9 times faster on large arrays.
"""
from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import numpy as np

import softfloat16 as sf

from .fp32compiled import compiled
from .fp32ops import (  # noqa: F401  (the shared constants and the arithmetic, exported here too)
    EMULATED, EXP_HIGH, EXP_LOW, EXP_TAYLOR, FP32, HALF, INV_LN2, LN2_HI, LN2_LO, LOG_SERIES, NAN, NEG_INF, ONE,
    POS_INF, ROUNDER, SQRT2_BITS, TWO, TWO_POW_24, ZERO, EmulatedFp32, Fp32Arithmetic, constant, horner, split_sign,
    power_of_two, with_sign)
from .fp32pow import (  # noqa: F401  (exported here too)
    LOG1P_SERIES_BELOW, LOG1P_TAYLOR, LOG1P_TINY, MINUS_ONE_BITS, TWO_THIRDS, TWO_THIRDS_LO, log1p, log1p_steps, pow,
    pow_steps)

__all__ = [
    "EMULATED", "EXP_HIGH", "EXP_LOW", "EXP_TAYLOR", "HALF", "INV_LN2", "LN2_HI", "LN2_LO", "LOG_SERIES", "NAN",
    "NEG_INF", "ONE", "POS_INF", "ROUNDER", "SQRT2_BITS", "TWO", "TWO_POW_24", "EmulatedFp32", "Fp32Arithmetic",
    "erf", "erf_steps", "exp", "exp_steps", "expm1", "expm1_steps", "log", "log1p", "log1p_steps", "log_steps", "pow",
    "pow_steps", "tanh", "tanh_steps",
]


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
    result = ops.mul(ops.mul(poly, power_of_two(k_half, ops)), power_of_two(k - k_half, ops))
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
    return compiled(exp_steps)(sf.as_bits(x, FP32, "x"))


def log(x) -> np.ndarray:
    """Natural logarithm of FP32 bit patterns, bit-identical everywhere (algorithm: module doc).

    >>> import numpy as np, softfloat16 as sf
    >>> sf.fp32.to_float(log(sf.fp32.from_float(np.array([1.0, 2.0, 0.5, 0.0, np.inf]))))
    array([ 0.        ,  0.69314718, -0.69314718,        -inf,         inf])
    """
    return compiled(log_steps)(sf.as_bits(x, FP32, "x"))


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
    return tuple(constant(float(t)) for t in reversed(terms))


EXPM1_LOW = constant(-30.0)  # expm1(-30) is -1 in FP32 (and 2**k stays normal)
EXPM1_TINY = 0x33000000  # 2**-25: below it expm1(x) rounds to x
EXPM1_TAYLOR = tuple(constant(1.0 / math.factorial(n)) for n in range(11, 1, -1))  # 1/11! ... 1/2!
TANH_SPLIT = constant(0.55)  # polynomial below, expm1 above
TANH_HIGH = constant(10.0)  # tanh(10) is 1 in FP32
TANH_TAYLOR = _tanh_taylor()
ERF_TAYLOR = tuple(constant(2 / math.sqrt(math.pi) * (-1) ** n / (math.factorial(n) * (2 * n + 1)) - (n == 0))
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
ONE_AND_HALF, THREE, FOUR = constant(1.5), constant(3.0), constant(4.0)


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
    p = ops.fma(ops.mul(r, r), horner(EXPM1_TAYLOR, r, ops), r)  # expm1(r)
    one = ops.const(ONE)
    middle_k = ops.where((k >= -24) & (k <= 23), k, 0)
    scale = power_of_two(middle_k, ops)
    middle = ops.fma(p, scale, ops.sub(scale, one))  # 2**k - 1 exact: one rounding
    low_scale = power_of_two(ops.where(k < -24, k, 0), ops)
    below = ops.fma(ops.add(one, p), low_scale, ops.neg(one))
    high_k = ops.where(k >= 24, k, 24)
    k_half = high_k >> 1
    half_scale, rest_scale = power_of_two(k_half, ops), power_of_two(high_k - k_half, ops)
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
    a, sign = split_sign(x, ops)
    small_a = ops.where(ops.lt(a, ops.const(TANH_SPLIT)), a, ops.const(ZERO))
    z = ops.mul(small_a, small_a)
    small = ops.fma(small_a, ops.mul(z, horner(TANH_TAYLOR, z, ops)), small_a)
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
    result = with_sign(ops.where(ops.lt(a, ops.const(TANH_SPLIT)), small, large), sign, ops)
    return ops.where(nan, ops.const(NAN), result)


def erf_steps(x: Any, ops: Fp32Arithmetic) -> Any:
    """The error function of FP32 values of ``ops``' side (algorithm: module docstring).

    >>> sf.hex(erf_steps(sf.fp32.from_float(0.5), EMULATED))  # 0.52049987781
    '0x3f053f7b'
    """
    nan = ops.isnan(x)
    a, sign = split_sign(x, ops)
    one, four = ops.const(ONE), ops.const(FOUR)
    half = ops.const(HALF)
    small_a = ops.where(ops.lt(a, half), a, ops.const(ZERO))
    small = ops.fma(small_a, horner(ERF_TAYLOR, ops.mul(small_a, small_a), ops), small_a)
    near_a = ops.where(ops.lt(a, half), half, ops.where(ops.lt(a, one), a, one))
    near_t = ops.mul(ops.sub(near_a, ops.const(ERF_CENTER)), ops.const(FOUR))
    near = ops.fma(near_t, horner(ERF_NEAR_CENTER, near_t, ops), ops.const(ERF_CENTER_VALUE))
    middle_t = ops.mul(ops.sub(ops.where(ops.lt(a, ops.const(TWO)), a, one), ops.const(ONE_AND_HALF)),
                       ops.const(TWO))
    middle = ops.sub(one, horner(ERFC_MID, middle_t, ops))
    high_t = ops.mul(ops.sub(ops.where(ops.lt(a, four), a, four), ops.const(THREE)), ops.const(HALF))
    high = ops.sub(one, horner(ERFC_HIGH, high_t, ops))
    result = ops.where(ops.lt(a, half), small, ops.where(ops.lt(a, one), near, ops.where(
        ops.lt(a, ops.const(TWO)), middle, high)))
    return ops.where(nan, ops.const(NAN), with_sign(result, sign, ops))


def expm1(x) -> np.ndarray:
    """e**x - 1 for FP32 bit patterns, bit-identical everywhere (algorithm: module docstring).

    >>> import numpy as np, softfloat16 as sf
    >>> sf.fp32.to_float(expm1(sf.fp32.from_float(np.array([0.0, 1e-10, 1.0, -np.inf, np.inf])))).tolist()
    [0.0, 1.000000013351432e-10, 1.7182817459106445, -1.0, inf]
    """
    return compiled(expm1_steps)(sf.as_bits(x, FP32, "x"))


def tanh(x) -> np.ndarray:
    """Hyperbolic tangent of FP32 bit patterns, bit-identical everywhere (algorithm: module docstring).

    >>> import numpy as np, softfloat16 as sf
    >>> sf.fp32.to_float(tanh(sf.fp32.from_float(np.array([0.0, 0.5, 1.0, -20.0, np.inf])))).tolist()
    [0.0, 0.46211716532707214, 0.7615941762924194, -1.0, 1.0]
    """
    return compiled(tanh_steps)(sf.as_bits(x, FP32, "x"))


def erf(x) -> np.ndarray:
    """The error function of FP32 bit patterns, bit-identical everywhere (algorithm: module docstring).

    >>> import numpy as np, softfloat16 as sf
    >>> sf.fp32.to_float(erf(sf.fp32.from_float(np.array([0.0, 0.5, 1.0, -2.0, np.inf])))).tolist()
    [0.0, 0.5204998850822449, 0.8427007794380188, -0.9953222870826721, 1.0]
    """
    return compiled(erf_steps)(sf.as_bits(x, FP32, "x"))

