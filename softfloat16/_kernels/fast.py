"""Straight-line kernels for the common case of add, sub, mul and div, which LLVM can vectorise.

Each returns ``(bits, flags, ok)``. When ``ok`` is true the bits and flags are the correctly rounded
result: both operands are normal numbers and so is the result, with no overflow. Then nothing that
ftz, daz, tininess, saturation or the NaN profile change can apply, and the rounding mode acts only
through ``core.round_at``, the one rounding decision. Only for IEEE encodings (loops.py sees to it:
the others differ in bias and in what the top exponent holds); under stochastic rounding, which reads
up to 32 discarded bits, only mul, whose product is exact (the others keep a few guard bits). When
``ok`` is false the bits are meaningless and the caller must run the general kernel (arith.py) on
that element; loops.py does so.

There is no branch on the data here (the conditional expressions compile to selects), so the loop
over an array runs in SIMD lanes. That is what makes these faster than the general kernels, which
dispatch on operand classes, not any shortcut in the arithmetic: the same exact-or-sticky integers
are rounded by the same routine.
"""
import math

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.extending import intrinsic

from .core import INEXACT, SR, round_at

# Guard bits kept below an addend's significand: a round bit and two more, the lowest of which
# collects everything shifted out ("sticky"). Enough because the fast path only takes sums whose
# leading bit moves by at most one place (a carry, or a one-bit cancellation).
GUARD = 3
# Under stochastic rounding: 32 discarded bits that stay exact after a renormalising shift by one
# place (bits 2 and up), then the sticky bit.
SR_GUARD = 34
u32 = np.uint32
u64 = np.uint64


@intrinsic
def float_bits(typingctx, x):
    """The encoding of a float32 or float64 as a uint32 or uint64 (a bit cast: no arithmetic)."""
    width = {types.float32: 32, types.float64: 64}.get(x)
    if width is None:
        return None

    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.IntType(width))
    return getattr(types, f"uint{width}")(x), codegen


@njit(cache=True, forceinline=True, error_model="numpy")
def msb_index64(x):
    """Index of the highest set bit of 0 < x < 2**62, from the exponent of x as a float64, with the
    same correction as msb_index32 for a conversion that rounds up to the next power of two."""
    f = np.float64(np.int64(x))
    encoding = float_bits(f)
    p = u64(u64(encoding >> u64(52)) - u64(1023))
    return u64(p - u64((u64(encoding & u64(0xFFFFFFFFFFFFF)) == u64(0)) & (u64(np.int64(f)) > x)))


@njit(cache=True, forceinline=True, error_model="numpy")
def msb_index32(x):
    """Index of the highest set bit of 0 < x < 2**31, as core.msb_index gives it.

    Read from the exponent of x converted to float32, which AVX2 does eight at a time (it has no
    vector count of leading zeros). Above 2**24 the conversion rounds, and may round up to the next
    power of two; the last line takes that back (a power of two that exceeds x).
    """
    f = np.float32(np.int32(x))
    encoding = float_bits(f)
    p = u32(u32(encoding >> u32(23)) - u32(127))
    return u32(p - u32((u32(encoding & u32(0x7FFFFF)) == u32(0)) & (u32(np.int32(f)) > x)))


@njit(cache=True, forceinline=True, error_model="numpy")
def add_normal(a, b, negate_b, ebits, fbits, rounding, word=u32, guard=GUARD, msb=msb_index32, random=0,
               sr_bits=32):
    """a + b (or a - b with negate_b=1) of two normal numbers -> (bits, flags, ok).

    Formats up to 32 bits wide: every intermediate fits in 32 bits, and is computed as a uint32
    (each result cast back, because Numba widens integer arithmetic to 64 bits) so that LLVM packs
    eight elements per AVX2 register instead of four: 1.5 instead of 2.4 ns per fp32 add.
    Stochastic rounding reads 32 discarded bits: it runs this in uint64 ``word``s with SR_GUARD
    guard bits and ``msb_index64`` (see add_stochastic).
    """
    sign_shift = word(ebits + fbits)
    a = word(a)
    b = word(word(b) ^ word(negate_b << (ebits + fbits)))
    magnitude = word((1 << (ebits + fbits)) - 1)
    emask = word((1 << ebits) - 1)
    fmask = word((1 << fbits) - 1)
    hidden = word(1 << fbits)
    # Order by magnitude: for normal numbers the encodings compare like the values.
    mag_a = word(a & magnitude)
    mag_b = word(b & magnitude)
    big = max(mag_a, mag_b)
    small = min(mag_a, mag_b)
    sign = word((a if mag_a >= mag_b else b) >> sign_shift)
    e_big = word(big >> word(fbits))
    e_small = word(small >> word(fbits))
    sig_big = word(word(word(big & fmask) | hidden) << word(guard))
    sig_small = word(word(word(small & fmask) | hidden) << word(guard))
    # Align; past fbits + guard + 1 places only the sticky bit is left, which this clamp keeps.
    d = min(word(e_big - e_small), word(fbits + guard + 1))
    lost = word(sig_small & word(word(word(1) << d) - word(1)))
    sig_small = word(word(sig_small >> d) | word(lost != word(0)))
    subtract = word(word(a ^ b) >> sign_shift)
    total = word(sig_big - sig_small) if subtract else word(sig_big + sig_small)
    top = fbits + guard  # position of sig_big's leading bit
    ok = (e_small != word(0)) & (e_big != emask) & (total != word(0))
    p = msb(word(total | word(total == word(0))))
    # Renormalise to the leading bit at `top`. Shifting down (a carry) jams the lost bit. Shifting
    # up is exact: by one place, because the subtraction of a jammed addend leaves every bit above
    # bit 0 exact; by more (a cancellation), because that needs d <= 1, which drops no bits.
    carry = p > word(top)
    total = word(word(total >> word(1)) | word(total & word(1))) if carry else word(total << word(word(top) - p))
    q, inexact = round_at(np.int64(total), guard, sign, rounding, random, sr_bits)
    e_top = word(e_big + p)
    e_res = word(e_top - word(top))
    encoded = word(word(word(e_res - word(1)) << word(fbits)) + word(q))  # a rounding carry bumps the exponent
    ok &= (e_top > word(top)) & (encoded < word(emask << word(fbits)))
    return word(word(sign << sign_shift) | encoded), INEXACT * int(inexact), ok


@njit(cache=True, forceinline=True, error_model="numpy")
def normal_operands(a, b, ebits, fbits):
    """What mul and div read from two operands: (sign of the result, exponent fields, significands
    with the implicit bit, ok), ok being False unless both are normal numbers."""
    emask = (1 << ebits) - 1
    fmask = (1 << fbits) - 1
    e_a = (a >> fbits) & emask
    e_b = (b >> fbits) & emask
    sign = ((a ^ b) >> (ebits + fbits)) & 1
    ok = (e_a != 0) & (e_a != emask) & (e_b != 0) & (e_b != emask)
    return sign, e_a, e_b, (a & fmask) | (1 << fbits), (b & fmask) | (1 << fbits), ok


@njit(cache=True, forceinline=True, error_model="numpy")
def pack_normal(sign, e_res, rounded, inexact, ok, ebits, fbits):
    """(bits, flags, ok) of a rounded significand (implicit bit included) with biased exponent
    e_res; ok stays True only if the result is normal (a rounding carry bumps the exponent)."""
    emask = (1 << ebits) - 1
    encoded = ((e_res - 1) << fbits) + rounded
    ok &= (e_res >= 1) & (encoded < (emask << fbits))
    return (sign << (ebits + fbits)) | encoded, INEXACT * int(inexact), ok


@njit(cache=True, forceinline=True, error_model="numpy")
def mul_normal(a, b, ebits, fbits, rounding, random=0, sr_bits=32):
    """a * b of two normal numbers -> (bits, flags, ok). The product is exact, so stochastic
    rounding finds all its discarded bits here too."""
    bias = (1 << (ebits - 1)) - 1
    sign, e_a, e_b, sig_a, sig_b, ok = normal_operands(int(a), int(b), ebits, fbits)
    product = sig_a * sig_b  # exact, < 2**(2*fbits+2)
    carry = product >> (2 * fbits + 1)  # the product is in [2, 4)
    q, inexact = round_at(product, fbits + carry, sign, rounding, random, sr_bits)
    return pack_normal(sign, e_a + e_b - bias + carry, q, inexact, ok, ebits, fbits)


@njit(cache=True, forceinline=True, error_model="numpy")
def div_normal(a, b, ebits, fbits, rounding):
    """a / b of two normal numbers -> (bits, flags, ok). Formats up to 32 bits wide.

    The integer quotient and remainder are computed in float64 registers, because AVX2 has a
    vector float64 division and no integer one. Every value there is an integer below 2**53, so
    exact, except n / d, whose floor is still floor(n / d): n / d lies at least 1/d > 2**-24 below
    the next integer, and float64's spacing there (below 2**28) is at most 2**-25.
    """
    bias = (1 << (ebits - 1)) - 1
    sign, e_a, e_b, sig_a, sig_b, ok = normal_operands(int(a), int(b), ebits, fbits)
    # sig_a * 2**extra / sig_b has fbits + 4 or 5 integer bits: the significand, a round bit and
    # two more; the remainder becomes the sticky bit. numerator < 2**(2*fbits + 5) <= 2**51.
    extra = fbits + 4
    numerator = float(sig_a << extra)
    divisor = float(sig_b)
    quotient = math.floor(numerator / divisor)
    remainder = numerator - quotient * divisor  # the product is below 2**52: exact
    q = int(np.int32(quotient)) | int(remainder != 0)  # below 2**(fbits + 5)
    carry = int(sig_a >= sig_b)  # the quotient's leading bit is one place up
    rounded, inexact = round_at(q, 3 + carry, sign, rounding, 0, 32)
    return pack_normal(sign, e_a - e_b + bias - 1 + carry, rounded, inexact, ok, ebits, fbits)


@njit(cache=True, forceinline=True, error_model="numpy")
def add_stochastic(a, b, negate_b, options, random):
    """add_normal with room for stochastic rounding's 32 discarded bits (uint64 lanes)."""
    return add_normal(a, b, negate_b, options.exponent_bits, options.fraction_bits, SR, u64, SR_GUARD, msb_index64,
                      random, options.sr_bits)


@njit(cache=True, forceinline=True, error_model="numpy")
def add(a, b, options, random):
    if options.stochastic:  # a compile-time constant in every loop (loops.with_constants)
        return add_stochastic(a, b, 0, options, random)
    return add_normal(a, b, 0, options.exponent_bits, options.fraction_bits, options.rounding)


@njit(cache=True, forceinline=True, error_model="numpy")
def sub(a, b, options, random):
    if options.stochastic:
        return add_stochastic(a, b, 1, options, random)
    return add_normal(a, b, 1, options.exponent_bits, options.fraction_bits, options.rounding)


@njit(cache=True, forceinline=True, error_model="numpy")
def mul(a, b, options, random):
    return mul_normal(a, b, options.exponent_bits, options.fraction_bits, options.rounding, random, options.sr_bits)


@njit(cache=True, forceinline=True, error_model="numpy")
def div(a, b, options, random):
    return div_normal(a, b, options.exponent_bits, options.fraction_bits, options.rounding)
