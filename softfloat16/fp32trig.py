"""sin, cos and tan on FP32 bit patterns: an exact integer range reduction, then polynomials of
emulated FP32 steps.

1. **Reduction** (exact integers, every finite FP32 input up to 3.4e38): ``|x| = m * 2**e`` (``m``
   the 24-bit integer significand) is multiplied by ``TWO_OVER_PI = floor(2/pi * 2**424)`` (the
   bits of 2/pi computed once from Machin's formula in integers); keeping 256 fractional bits of
   ``|x| * 2/pi`` gives ``q``, the nearest integer, and the signed fraction ``f`` (``|f| <= 1/2``).
   ``r = f * pi/2`` (pi/2 to 128 bits) is then an integer ratio, rounded once to a double (Python's
   correctly rounded integer division) and split into two FP32 words: ``r_hi`` = the double
   rounded to FP32 (nearest even), ``r_lo`` = the (exact) double difference rounded to FP32. The
   truncation of 2/pi costs under 2**-290 absolute, so ``r_hi + r_lo`` is ``|x| - q pi/2`` to about
   2**-48 relative for every input (the closest an FP32 number comes to a multiple of pi/2 is far
   above that). Only the quadrant ``q mod 4`` is kept of ``q``.
2. **Polynomials** (emulated FP32 steps, ``|r| <= pi/4``), with ``z = r_hi**2`` and its exact
   rounding error ``z_lo`` (one fma):
   ``sin r = r_hi + fma(r_hi * z, S(z), r_lo * (1 - z/2))``, ``S`` the Taylor series of
   ``(sin r - r) / r**3`` through ``r**13``;
   ``cos r = w + (((1 - w) - z/2) + (z**2 C(z) - (r_hi r_lo + z_lo/2)))`` with ``w = 1 - z/2``,
   ``C`` the Taylor series of ``(cos r - 1 + r**2/2) / r**4`` through ``r**14`` (the bracket is
   the error of ``w``, exact, as in fdlibm's kernel).
3. **Quadrant and sign**: ``q mod 4`` = 0, 1, 2, 3 gives ``sin x = S, C, -S, -C`` and
   ``cos x = C, -S, -C, S``; ``sin`` and ``tan`` are odd (the sign of ``x`` put back, so
   ``sin(-0) = -0``), ``cos`` even. ``tan = sin r / cos r`` (quadrants 0, 2) or ``-cos r / sin r``
   (1, 3), with sin r and cos r each as two words (head and exact tail, Fast2Sum) and the
   division's rounding error corrected (its remainder is exact by one fma).

``sin(+-inf)``, ``cos(+-inf)``, ``tan(+-inf)`` and NaN inputs give the default NaN here (the torch
mode applies its NaN profile). Measured errors: docs/torch.md ("sin, cos, tan").
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

import softfloat16 as sf

from .fp32compiled import compiled
from .fp32ops import (  # noqa: F401  (EMULATED: the doctests')
    EMULATED, FP32, HALF, NAN, ONE, Fp32Arithmetic, constant, fast_two_sum, horner)

__all__ = ["COS_TAYLOR", "SIN_TAYLOR", "TWO_OVER_PI", "cos", "cos_steps", "reduce_half_pi", "sin", "sin_cos_steps",
           "sin_steps", "tan", "tan_steps"]

_FRACTION_BITS = 256  # fractional bits of |x| * 2/pi kept
_TWO_OVER_PI_BITS = 424  # 104 (largest exponent) + 256 + 64 guard bits
_HALF_PI_BITS = 128


def _pi_scaled(bits: int) -> int:
    """floor(pi * 2**bits) from Machin's formula pi = 16 atan(1/5) - 4 atan(1/239), in integers."""
    guard = bits + 32
    one = 1 << guard

    def arctan_inverse(n: int) -> int:
        total, term, k, sign = 0, one // n, 1, 1
        while term:
            total += sign * (term // k)
            term //= n * n
            k += 2
            sign = -sign
        return total

    return (16 * arctan_inverse(5) - 4 * arctan_inverse(239)) >> 32


_PI = _pi_scaled(_TWO_OVER_PI_BITS + 64)  # pi * 2**(424 + 64)
#: floor(2/pi * 2**424), the bits of 2/pi the reduction multiplies by.
TWO_OVER_PI = (1 << (2 * _TWO_OVER_PI_BITS + 65)) // _PI
_HALF_PI = _PI >> (_TWO_OVER_PI_BITS + 64 + 1 - _HALF_PI_BITS)  # pi/2 * 2**128

#: (sin r - r) / r**3 and (cos r - 1 + r**2/2) / r**4 in powers of z = r**2, from the highest.
SIN_TAYLOR = tuple(constant((-1) ** n / math.factorial(2 * n + 1)) for n in range(6, 0, -1))
COS_TAYLOR = tuple(constant((-1) ** n / math.factorial(2 * n)) for n in range(7, 1, -1))


def reduce_half_pi(x32) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(quadrant q mod 4, r_hi, r_lo) of the magnitudes of FP32 patterns: ``|x| = q pi/2 + r``,
    ``|r| <= pi/4``, ``r ~ r_hi + r_lo`` (step 1 of the module docstring). Infinities and NaNs
    give quadrant 0 and r = 0 (the callers replace their results).

    >>> q, hi, lo = reduce_half_pi(sf.fp32.from_float(np.array([3.0, 1e38])))
    >>> q.tolist(), sf.fp32.to_float(hi).tolist()
    ([2, 1], [-0.14159265160560608, -0.14734426140785217])
    """
    magnitude = np.asarray(x32, np.uint32) & np.uint32(FP32.magnitude_mask)
    finite = magnitude < np.uint32(FP32.inf)
    # Each distinct magnitude once (the integer steps cost microseconds per element).
    distinct, inverse = np.unique(np.where(finite, magnitude, np.uint32(0)).reshape(-1), return_inverse=True)
    quadrant, r_hi, r_lo = _reduce_distinct(distinct)
    return tuple(part[inverse].reshape(magnitude.shape) for part in (quadrant, r_hi, r_lo))


def _reduce_distinct(magnitude: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`reduce_half_pi` of a 1-D array of finite FP32 magnitudes."""
    biased = (magnitude >> np.uint32(23)).astype(np.int64)
    fraction = (magnitude & np.uint32(0x7FFFFF)).astype(np.int64)
    significand = np.where(biased > 0, fraction | (1 << 23), fraction)
    shift = _TWO_OVER_PI_BITS - _FRACTION_BITS - (np.maximum(biased, 1) - 150)  # >= 64
    scaled = (significand.astype(object) * TWO_OVER_PI) >> shift.astype(object)  # |x| 2/pi * 2**256
    quotient = (scaled + (1 << (_FRACTION_BITS - 1))) >> _FRACTION_BITS
    remainder = scaled - (quotient << _FRACTION_BITS)  # in [-2**255, 2**255)
    denominator = 1 << (_FRACTION_BITS + _HALF_PI_BITS)
    r64 = np.array([value / denominator for value in remainder * _HALF_PI], np.float64)  # correctly rounded
    r_hi = np.asarray(FP32.from_float(r64)).astype(np.uint32)
    r_lo = np.asarray(FP32.from_float(r64 - np.asarray(FP32.to_float(r_hi), np.float64))).astype(np.uint32)
    quadrant = np.array([int(q) & 3 for q in quotient], np.int64)
    return quadrant, r_hi, r_lo


def sin_cos_steps(r_hi: Any, r_lo: Any, ops: Fp32Arithmetic) -> tuple[Any, Any]:
    """(sin r, cos r) for ``r = r_hi + r_lo``, ``|r| <= pi/4`` (step 2 of the module docstring)."""
    sine, _, cosine, _ = _sin_cos_words(r_hi, r_lo, ops)
    return sine, cosine


def _quotient(num_hi: Any, num_lo: Any, den_hi: Any, den_lo: Any, ops: Fp32Arithmetic) -> Any:
    """(num_hi + num_lo) / (den_hi + den_lo): the FP32 quotient of the heads, plus the correction
    ``(remainder + num_lo - q den_lo) / den_hi`` (the remainder exact by one fma)."""
    quotient = ops.div(num_hi, den_hi)
    remainder = ops.fma(ops.neg(quotient), den_hi, num_hi)
    correction = ops.fma(ops.neg(quotient), den_lo, ops.add(remainder, num_lo))
    return ops.add(quotient, ops.div(correction, den_hi))


def _sin_cos_words(r_hi: Any, r_lo: Any, ops: Fp32Arithmetic) -> tuple[Any, Any, Any, Any]:
    """sin r and cos r each as two FP32 words (head = the rounded result, tail = what it lost)."""
    half, one = ops.const(HALF), ops.const(ONE)
    z = ops.mul(r_hi, r_hi)
    z_lo = ops.fma(r_hi, r_hi, ops.neg(z))  # exact
    hz = ops.mul(half, z)
    sine_tail = ops.fma(ops.mul(r_hi, z), horner(SIN_TAYLOR, z, ops), ops.fma(ops.neg(hz), r_lo, r_lo))
    w = ops.sub(one, hz)
    error_w = ops.sub(ops.sub(one, w), hz)
    tail = ops.fma(ops.mul(z, z), horner(COS_TAYLOR, z, ops), ops.neg(ops.fma(r_hi, r_lo, ops.mul(half, z_lo))))
    return (*fast_two_sum(r_hi, sine_tail, ops), *fast_two_sum(w, ops.add(error_w, tail), ops))


def _quadrant_steps(x: Any, quadrant: Any, r_hi: Any, r_lo: Any, ops: Fp32Arithmetic, which: str) -> Any:
    """Steps 2 and 3 of the module docstring for sin, cos or tan (``which``) of ``x`` reduced to
    ``quadrant`` (an FP32 value whose bits are q mod 4) and ``r_hi + r_lo``."""
    sine, sine_lo, cosine, cosine_lo = _sin_cos_words(r_hi, r_lo, ops)
    q = ops.bits(quadrant)
    odd = (q & 1) == 1
    if which == "tan":
        result = ops.where(odd, ops.neg(_quotient(cosine, cosine_lo, sine, sine_lo, ops)),
                           _quotient(sine, sine_lo, cosine, cosine_lo, ops))
    else:
        result = ops.where(odd, cosine, sine) if which == "sin" else ops.where(odd, sine, cosine)
        negate = (q >= 2) if which == "sin" else (q == 1) | (q == 2)
        result = ops.where(negate, ops.neg(result), result)
    x_bits = ops.bits(x)
    if which != "cos":  # odd functions: the sign of x put back
        result = ops.from_bits(ops.bits(result) ^ (x_bits & FP32.sign_mask))
    special = (x_bits & FP32.magnitude_mask) >= FP32.inf
    return ops.where(special, ops.const(NAN), result)


def sin_steps(x: Any, quadrant: Any, r_hi: Any, r_lo: Any, ops: Fp32Arithmetic) -> Any:
    """sin x from its reduction (:func:`reduce_half_pi`), for FP32 values of ``ops``' side."""
    return _quadrant_steps(x, quadrant, r_hi, r_lo, ops, "sin")


def cos_steps(x: Any, quadrant: Any, r_hi: Any, r_lo: Any, ops: Fp32Arithmetic) -> Any:
    """cos x from its reduction (:func:`reduce_half_pi`), for FP32 values of ``ops``' side."""
    return _quadrant_steps(x, quadrant, r_hi, r_lo, ops, "cos")


def tan_steps(x: Any, quadrant: Any, r_hi: Any, r_lo: Any, ops: Fp32Arithmetic) -> Any:
    """tan x from its reduction (:func:`reduce_half_pi`), for FP32 values of ``ops``' side.

    >>> x = sf.fp32.from_float(np.array([1.0]))
    >>> sf.hex(tan_steps(x, *(np.asarray(p, np.uint32) for p in reduce_half_pi(x)), EMULATED))
    '[0x3fc75923]'
    """
    return _quadrant_steps(x, quadrant, r_hi, r_lo, ops, "tan")


def _evaluate(x, steps) -> np.ndarray:
    """``steps`` (sin_steps, cos_steps or tan_steps) of FP32 patterns: the reduction in integers,
    then the step program compiled (softfloat16.fp32compiled)."""
    x = np.asarray(sf.as_bits(x, FP32, "x"), np.uint32)
    quadrant, r_hi, r_lo = reduce_half_pi(x)
    return compiled(steps)(x, quadrant.astype(np.uint32), r_hi, r_lo)


def sin(x) -> np.ndarray:
    """Sine of FP32 bit patterns, bit-identical everywhere (algorithm: module docstring).

    >>> sf.fp32.to_float(sin(sf.fp32.from_float(np.array([0.0, -0.0, 1.0, 3.0, 1e30, np.inf])))).tolist()
    [0.0, -0.0, 0.8414709568023682, 0.14112000167369843, -0.791163444519043, nan]
    """
    return _evaluate(x, sin_steps)


def cos(x) -> np.ndarray:
    """Cosine of FP32 bit patterns, bit-identical everywhere (algorithm: module docstring).

    >>> sf.fp32.to_float(cos(sf.fp32.from_float(np.array([0.0, 1.0, 3.0, 1e30])))).tolist()
    [1.0, 0.5403022766113281, -0.9899924993515015, -0.6116048097610474]
    """
    return _evaluate(x, cos_steps)


def tan(x) -> np.ndarray:
    """Tangent of FP32 bit patterns: ``sin r / cos r`` or ``-cos r / sin r`` by quadrant (module docstring).

    >>> sf.fp32.to_float(tan(sf.fp32.from_float(np.array([0.0, 1.0, -1.0])))).tolist()
    [0.0, 1.5574077367782593, -1.5574077367782593]
    """
    return _evaluate(x, tan_steps)
