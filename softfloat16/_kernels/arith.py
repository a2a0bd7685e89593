"""Scalar arithmetic kernels: each computes an exact (or sticky-exact) result and calls round_pack.

Each kernel takes bit patterns (as integers), a ``core.Options`` record and ``random``, stochastic
rounding's random integer (ignored by the other modes), and returns (bits, flags).
"""
import math

import numpy as np
from numba import njit

from .core import (
    DIVIDE_BY_ZERO, FINITE, INF, INVALID, NAN, ZERO,
    exact_zero_sign, inf_options, msb_index, nan_result, round_pack_options, shift_right_jam, special_options, unpack,
)

# Finite addends are aligned with their leading bit here: bit 61 stays free for a carry, and the
# lowest kept bit of a 48-bit product (the widest significand we add) is still above bit 0.
ALIGN_MSB = 60
# Bits div and sqrt compute beyond their usual round and sticky bits under stochastic rounding,
# which reads up to 32 discarded bits (add, mul and fma keep enough exact bits already).
SR_EXTRA_BITS = 32


@njit(cache=True, forceinline=True, error_model="numpy")
def add_finite(sign_a, exp_a, sig_a, sign_b, exp_b, sig_b, rounding):
    """Exact-enough sum of two nonzero finite values -> (sign, exp, sig); sig == 0 for an exact zero."""
    shift_a = ALIGN_MSB - msb_index(sig_a)
    shift_b = ALIGN_MSB - msb_index(sig_b)
    sig_a <<= shift_a
    exp_a -= shift_a
    sig_b <<= shift_b
    exp_b -= shift_b
    # Order by exponent with masks, not branches: for random operands a branch here mispredicts
    # half the time. mask is all ones when b is the larger.
    mask = -int(exp_a < exp_b)
    sig_hi = sig_a ^ ((sig_a ^ sig_b) & mask)
    sig_lo = sig_b ^ ((sig_a ^ sig_b) & mask)
    sign_hi = sign_a ^ ((sign_a ^ sign_b) & mask)
    sign_lo = sign_b ^ ((sign_a ^ sign_b) & mask)
    exp_hi = max(exp_a, exp_b)
    exp_lo = min(exp_a, exp_b)
    # Jamming is exact enough: if b is shifted by 2 or more, at most one leading bit cancels.
    sig_lo = shift_right_jam(sig_lo, exp_hi - exp_lo)
    total = sig_hi + (sig_lo if sign_hi == sign_lo else -sig_lo)
    if total == 0:
        return exact_zero_sign(sign_hi, sign_lo, rounding), exp_hi, 0
    negative = total < 0
    return sign_hi ^ int(negative), exp_hi, abs(total)


@njit(cache=True, forceinline=True, error_model="numpy")
def add_signed(a, b, negate_b, options, random):
    ebits, fbits, rounding, daz = options.exponent_bits, options.fraction_bits, options.rounding, options.daz
    class_a, sign_a, exp_a, sig_a = unpack(a, ebits, fbits, options.encoding, daz)
    class_b, sign_b, exp_b, sig_b = unpack(b, ebits, fbits, options.encoding, daz)
    sign_b ^= negate_b
    if class_a == FINITE and class_b == FINITE:
        sign, exp, sig = add_finite(sign_a, exp_a, sig_a, sign_b, exp_b, sig_b, rounding)
        if sig == 0:
            return special_options(ZERO, sign, options), 0
        return round_pack_options(sign, exp, sig, options, random)
    if class_a == NAN or class_b == NAN:
        return nan_result(a, b, 0, 2, options)
    if class_a == INF:
        if class_b == INF and sign_a != sign_b:
            return options.invalid_nan, INVALID
        return inf_options(sign_a, options)
    if class_b == INF:
        return inf_options(sign_b, options)
    if class_a == ZERO and class_b == ZERO:
        return special_options(ZERO, exact_zero_sign(sign_a, sign_b, rounding), options), 0
    # One zero: the other operand, passed through round_pack so that ftz applies to it.
    if class_a == ZERO:
        return round_pack_options(sign_b, exp_b, sig_b, options, random)
    return round_pack_options(sign_a, exp_a, sig_a, options, random)


@njit(cache=True, forceinline=True, error_model="numpy")
def add(a, b, options, random):
    return add_signed(a, b, 0, options, random)


@njit(cache=True, forceinline=True, error_model="numpy")
def sub(a, b, options, random):
    return add_signed(a, b, 1, options, random)


@njit(cache=True, forceinline=True, error_model="numpy")
def mul(a, b, options, random):
    ebits, fbits, daz = options.exponent_bits, options.fraction_bits, options.daz
    class_a, sign_a, exp_a, sig_a = unpack(a, ebits, fbits, options.encoding, daz)
    class_b, sign_b, exp_b, sig_b = unpack(b, ebits, fbits, options.encoding, daz)
    sign = sign_a ^ sign_b
    if class_a == FINITE and class_b == FINITE:
        return round_pack_options(sign, exp_a + exp_b, sig_a * sig_b, options, random)
    if class_a == NAN or class_b == NAN:
        return nan_result(a, b, 0, 2, options)
    if class_a == INF or class_b == INF:
        if class_a == ZERO or class_b == ZERO:
            return options.invalid_nan, INVALID
        return inf_options(sign, options)
    return special_options(ZERO, sign, options), 0


@njit(cache=True, forceinline=True, error_model="numpy")
def div(a, b, options, random):
    ebits, fbits, daz = options.exponent_bits, options.fraction_bits, options.daz
    class_a, sign_a, exp_a, sig_a = unpack(a, ebits, fbits, options.encoding, daz)
    class_b, sign_b, exp_b, sig_b = unpack(b, ebits, fbits, options.encoding, daz)
    sign = sign_a ^ sign_b
    if class_a == FINITE and class_b == FINITE:
        # Normalise both to fbits+1 bits; the quotient then has fbits+3 or fbits+4 bits, enough for
        # the round bit, and the remainder becomes the sticky bit.
        shift_a = fbits - msb_index(sig_a)
        shift_b = fbits - msb_index(sig_b)
        extra = fbits + 4
        numerator = sig_a << (shift_a + extra)
        divisor = sig_b << shift_b
        # Unsigned division: both are positive, and it spares the floor-division sign fix-ups.
        quotient = int(np.uint64(numerator) // np.uint64(divisor))
        exp = exp_a - shift_a - extra - exp_b + shift_b
        if options.stochastic:
            # Stochastic rounding reads up to 32 bits below the last place: 32 more quotient bits
            # (the remainder is below the divisor, < 2**24, so remainder << 32 fits).
            remainder = numerator - quotient * divisor
            numerator = remainder << SR_EXTRA_BITS
            more = int(np.uint64(numerator) // np.uint64(divisor))
            quotient = (quotient << SR_EXTRA_BITS) | more
            exp -= SR_EXTRA_BITS
            quotient |= int(more * divisor != numerator)
        else:
            quotient |= int(quotient * divisor != numerator)
        return round_pack_options(sign, exp, quotient, options, random)
    if class_a == NAN or class_b == NAN:
        return nan_result(a, b, 0, 2, options)
    if class_a == INF:
        if class_b == INF:
            return options.invalid_nan, INVALID
        return inf_options(sign, options)
    if class_b == INF:
        return special_options(ZERO, sign, options), 0
    if class_b == ZERO:
        if class_a == ZERO:
            return options.invalid_nan, INVALID
        return special_options(INF, sign, options), DIVIDE_BY_ZERO
    return special_options(ZERO, sign, options), 0


@njit(cache=True, forceinline=True, error_model="numpy")
def integer_sqrt(n):
    """floor(sqrt(n)) for 0 <= n < 2**62, exact.

    The float64 square root is only a first guess (n may not even be exact in float64); the integer
    corrections below make the result exact.
    """
    root = int(math.sqrt(float(n)))
    while root * root > n:
        root -= 1
    while (root + 1) * (root + 1) <= n:
        root += 1
    return root


@njit(cache=True, forceinline=True, error_model="numpy")
def sqrt(a, options, random):
    ebits, fbits, daz = options.exponent_bits, options.fraction_bits, options.daz
    class_a, sign_a, exp_a, sig_a = unpack(a, ebits, fbits, options.encoding, daz)
    if class_a == NAN:
        return nan_result(a, 0, 0, 1, options)
    if class_a == ZERO:
        return special_options(ZERO, sign_a, options), 0
    if sign_a == 1:
        return options.invalid_nan, INVALID
    if class_a == INF:
        return inf_options(0, options)
    # Radicand with an even exponent and its leading bit at 2*fbits+4 or +5, so the root has
    # fbits+3 bits: the significand, a round bit and a bit that carries the sticky remainder.
    shift = 2 * fbits + 4 - msb_index(sig_a)
    if (exp_a - shift) & 1:
        shift += 1
    radicand = sig_a << shift
    root = integer_sqrt(radicand)
    if root * root != radicand:
        root |= 1
    exp = (exp_a - shift) >> 1  # exp_a - shift is even
    if options.stochastic:
        # Stochastic rounding reads up to 32 bits below the last place: 32 more root bits, one at
        # a time (the remainder stays below 2 * root + 1 < 2**60).
        root = integer_sqrt(radicand)
        remainder = radicand - root * root
        for _ in range(SR_EXTRA_BITS):
            remainder <<= 2
            trial = 4 * root + 1
            root <<= 1
            if remainder >= trial:
                remainder -= trial
                root += 1
        root |= int(remainder != 0)
        exp -= SR_EXTRA_BITS
    return round_pack_options(0, exp, root, options, random)


@njit(cache=True, forceinline=True, error_model="numpy")
def fma(a, b, c, options, random):
    """a * b + c with one rounding."""
    ebits, fbits, rounding, daz = options.exponent_bits, options.fraction_bits, options.rounding, options.daz
    class_a, sign_a, exp_a, sig_a = unpack(a, ebits, fbits, options.encoding, daz)
    class_b, sign_b, exp_b, sig_b = unpack(b, ebits, fbits, options.encoding, daz)
    class_c, sign_c, exp_c, sig_c = unpack(c, ebits, fbits, options.encoding, daz)
    sign_p = sign_a ^ sign_b
    if class_a == FINITE and class_b == FINITE and class_c == FINITE:
        sign, exp, sig = add_finite(sign_p, exp_a + exp_b, sig_a * sig_b, sign_c, exp_c, sig_c, rounding)
        if sig == 0:
            return special_options(ZERO, sign, options), 0
        return round_pack_options(sign, exp, sig, options, random)
    zero_times_inf = (class_a == INF and class_b == ZERO) or (class_a == ZERO and class_b == INF)
    if class_a == NAN or class_b == NAN or class_c == NAN:
        bits, flags = nan_result(a, b, c, 3, options)
        return bits, flags | (INVALID if zero_times_inf else 0)
    if zero_times_inf:
        return options.invalid_nan, INVALID
    if class_a == INF or class_b == INF:
        if class_c == INF and sign_c != sign_p:
            return options.invalid_nan, INVALID
        return inf_options(sign_p, options)
    if class_c == INF:
        return inf_options(sign_c, options)
    if class_a == ZERO or class_b == ZERO:
        if class_c == ZERO:
            return special_options(ZERO, exact_zero_sign(sign_p, sign_c, rounding), options), 0
        return round_pack_options(sign_c, exp_c, sig_c, options, random)
    # c is zero, the product is finite and nonzero: round the exact product.
    return round_pack_options(sign_p, exp_a + exp_b, sig_a * sig_b, options, random)
