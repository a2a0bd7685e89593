"""``pow`` and ``log1p`` on FP32 bit patterns: the functions built on a logarithm carried in two FP32
words (about 2**-40 relative), from emulated FP32 operations only (the arithmetic of
:mod:`softfloat16.fp32ops`; :mod:`softfloat16.fp32math` re-exports both).

``pow(x, y)``: ``exp(y * log|x|)`` with the logarithm and the product carried in two FP32 words,
and C99's special cases (:func:`pow` has the details).

``log1p(x) = log(1 + x)``: the Taylor series below ``|x| = 2**-9``; above, ``1 + x = u + c`` exactly
(TwoSum), ``log(u)`` in two FP32 words (pow's logarithm) and ``+ c / u``, one final rounding
(:func:`log1p_steps`). Measured over every 97th FP32 pattern (33 million finite results): 0.5008
ulp at most, correctly rounded in 99.9996% (tests/test_torch_extras.py checks a sample).
"""
from __future__ import annotations

from typing import Any

import numpy as np

import softfloat16 as sf

from .fp32compiled import compiled
from .fp32ops import (  # noqa: F401  (EMULATED: the doctests')
    EMULATED, EXP_HIGH, EXP_LOW, EXP_TAYLOR, FP32, INV_LN2, LN2_HI, LN2_LO, LOG_SERIES, NAN, NEG_INF, ONE, POS_INF,
    ROUNDER, SQRT2_BITS, TWO, TWO_POW_24, ZERO, Fp32Arithmetic, constant, fast_two_sum, horner, power_of_two, two_sum,
    with_sign)

__all__ = ["LOG1P_SERIES_BELOW", "LOG1P_TAYLOR", "LOG1P_TINY", "MINUS_ONE_BITS", "TWO_THIRDS", "TWO_THIRDS_LO",
           "log1p", "log1p_steps", "pow", "pow_steps"]

TWO_THIRDS = constant(2.0 / 3.0)
TWO_THIRDS_LO = constant(2.0 / 3.0 - float(np.float32(2.0 / 3.0)))


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
    denominator, denominator_lo = fast_two_sum(two, f, ops)  # 2 + f in two words
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
    rest = ops.mul(ops.mul(cube, z), horner(LOG_SERIES[:-1], z, ops))  # 2s**5/5 + 2s**7/7 + ...
    hi, error = two_sum(ops.mul(e_float, ops.const(LN2_HI)), ops.add(s, s), ops)  # e*LN2_HI exact
    hi, error2 = two_sum(hi, lead, ops)
    two_s_lo = ops.add(s_lo, s_lo)  # d(2s + 2s**3/3) = 2 (1 + s*s) ds: s_lo's share
    small = ops.add(ops.fma(two_s_lo, z, two_s_lo), ops.fma(e_float, ops.const(LN2_LO), ops.add(lead_lo, rest)))
    return fast_two_sum(hi, ops.add(ops.add(error, error2), small), ops)


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
    t, t_lo = fast_two_sum(reduced, ops.fma(minus_k, ops.const(LN2_LO), p_lo), ops)
    poly = horner(EXP_TAYLOR, t, ops)
    poly = ops.fma(poly, t_lo, poly)  # exp(t + t_lo) = exp(t) * (1 + t_lo), to first order
    k_half = k >> 1
    result = ops.mul(ops.mul(poly, power_of_two(k_half, ops)), power_of_two(k - k_half, ops))
    # Signs and the special cases of C99 / IEEE 754 pow, the later ones taking precedence.
    negate = x_negative & y_odd
    result = with_sign(result, ops.where(negate, FP32.sign_mask, 0), ops)
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
    return compiled(pow_steps)(sf.as_bits(x, FP32, "x"), sf.as_bits(y, FP32, "y"))


# -- log1p -------------------------------------------------------------------------------------------
LOG1P_TINY = 0x33000000  # 2**-25: below it log1p(x) rounds to x
LOG1P_SERIES_BELOW = 0x3B000000  # 2**-9: the Taylor series below, the logarithm of 1 + x above
LOG1P_TAYLOR = tuple(constant((-1) ** (n + 1) / n) for n in (5, 4, 3, 2))  # 1/5, -1/4, 1/3, -1/2
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
    series = ops.fma(ops.mul(small, small), horner(LOG1P_TAYLOR, small, ops), small)
    # Finite stand-ins for the special inputs keep the arithmetic below finite; replaced at the end.
    x_in = ops.where(special_nan | minus_one | infinite | series_range, one, x)
    u, c = two_sum(one, x_in, ops)  # u >= 2**-24: a float x > -1 is a multiple of 2**-24 near -1
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
    return compiled(log1p_steps)(sf.as_bits(x, FP32, "x"))
