"""Straight-line kernels for the common case of add, sub, mul, div, fma and sqrt, which LLVM can
vectorise.

Each returns ``(bits, flags, ok)``. When ``ok`` is true the bits and flags are the correctly rounded
result: the operands are normal numbers and so is the result, with no overflow (and, for fma, not an
exact zero, whose sign depends on the mode). Then nothing that ftz, daz, tininess, saturation or the
NaN profile change can apply, and the rounding mode acts only through ``core.round_at``, the one
rounding decision. For every signed format with subnormals and fraction bits (loops.py sees to it):
each kernel takes the format's packed properties ``encoding`` for its bias (one more in the FNUZ and
P3109 formats) and its largest finite code: it declines every operand and result above it (IEEE
754's top binade; elsewhere the NaN or infinity codes) and, where the code of -0 is the NaN, that
code as an operand. Under stochastic rounding,
which reads up to 32 discarded bits: mul, whose product is exact, add and sub in wider lanes with
more guard bits, and fma (see fma); div and sqrt keep only a few guard bits and leave it to the
general kernels. When ``ok`` is false the bits
are meaningless and the caller must run the general kernel (arith.py) on that element; loops.py does
so.

There is no branch on the data here (the conditional expressions compile to selects), so the loop
over an array runs in SIMD lanes. That is what makes these faster than the general kernels, which
dispatch on operand classes, not any shortcut in the arithmetic: the same exact-or-sticky integers
are rounded by the same routine. Where SIMD has no integer instruction for a step (division, square
root) or float64 lanes do it in fewer instructions (fma's sum), the kernels compute exact integers,
or exact sums, in float64 registers, each with the argument that makes it exact next to it.
"""

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.extending import intrinsic

from .core import IEEE, INEXACT, NAN_AT_NEGATIVE_ZERO, SR, TOP_NANS_BINADE, bias_of, max_finite_bits, round_at
from .environment import X86

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


@intrinsic
def bits_float(typingctx, x):
    """The float32 or float64 whose encoding is a uint32 or uint64 (a bit cast: the inverse of
    float_bits)."""
    result = {types.uint32: (types.float32, ir.FloatType()), types.uint64: (types.float64, ir.DoubleType())}.get(x)
    if result is None:
        return None

    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], result[1])
    return result[0](x), codegen


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
def finite_limit(ebits, fbits, encoding, word):
    """The first magnitude code above the largest finite value: IEEE 754's top binade, the code of
    inf or of the first top NaN, or one beyond every code (a format with neither)."""
    return word(max_finite_bits(0, ebits, fbits, encoding) + 1)


@njit(cache=True, forceinline=True, error_model="numpy")
def is_normal_finite(x, ebits, fbits, encoding, word):
    """Whether the pattern x (its sign bit aside) is a normal number, not above the largest finite:
    in IEEE 754's layout an exponent field of neither 0 nor all ones, else one unsigned comparison
    of the magnitude."""
    if encoding & TOP_NANS_BINADE:
        e = word(word(x >> word(fbits)) & word((1 << ebits) - 1))
        return (e != word(0)) & (e != word((1 << ebits) - 1))
    magnitude = word(x & word((1 << (ebits + fbits)) - 1))
    return word(magnitude - word(1 << fbits)) < word(finite_limit(ebits, fbits, encoding, word) - word(1 << fbits))


@njit(cache=True, forceinline=True, error_model="numpy")
def add_normal(a, b, negate_b, ebits, fbits, rounding, word=u32, guard=GUARD, msb=msb_index32, random=0,
               sr_bits=32, round_word=u32, subnormals=False, ftz=0, daz=0, encoding=IEEE):
    """a + b (or a - b with negate_b=1) of two normal numbers (or any two finite numbers: see
    ``subnormals``) -> (bits, flags, ok).

    Formats up to 32 bits wide: every intermediate fits in 32 bits, and is computed as a uint32
    (each result cast back, because Numba widens integer arithmetic to 64 bits) so that LLVM packs
    eight elements per AVX2 register (sixteen per AVX-512 register) instead of four: 1.5 instead of
    2.4 ns per fp32 add. ``round_word`` is the integer type core.round_at computes in (uint32 here
    too). Stochastic rounding reads 32 discarded bits: it runs this in uint64 ``word``s with
    SR_GUARD guard bits, ``msb_index64`` and an int64 ``round_word`` (see add_stochastic).

    ``subnormals=True`` also takes zeros and subnormal numbers, as operands and as results: a sum
    below the smallest normal number is exact (both operands are multiples of the smallest
    subnormal, and so is their sum), so nothing is rounded there, no flag is raised, and only
    ``ftz`` (flush such a result) and ``daz`` (read such an operand as zero) would change the
    answer: those cases are declined. The accumulating callers (reduce.py, matmul.py) leave it off.
    Where the code of -0 is the NaN (``encoding``), an operand with that code is declined.
    """
    sign_shift = word(ebits + fbits)
    a = word(a)
    nan_zero = word(1 << (ebits + fbits))
    not_nan_zero = (a != nan_zero) & (word(b) != nan_zero)
    b = word(word(b) ^ word(negate_b << (ebits + fbits)))
    magnitude = word((1 << (ebits + fbits)) - 1)
    emask = word((1 << ebits) - 1)
    # Order by magnitude: for finite numbers the encodings compare like the values.
    mag_a = word(a & magnitude)
    mag_b = word(b & magnitude)
    big = max(mag_a, mag_b)
    small = min(mag_a, mag_b)
    sign = word((a if mag_a >= mag_b else b) >> sign_shift)
    e_big = word(big >> word(fbits))
    e_small = word(small >> word(fbits))
    # The exponent field of a normal number, 1 for a subnormal (which has no implicit bit). With it,
    # a subnormal's significand is its fraction, a normal number's its fraction and implicit bit.
    scale_big = max(e_big, word(1)) if subnormals else e_big
    scale_small = max(e_small, word(1)) if subnormals else e_small
    sig_big = word(word(big - word(word(scale_big - word(1)) << word(fbits))) << word(guard))
    sig_small = word(word(small - word(word(scale_small - word(1)) << word(fbits))) << word(guard))
    # Align; past fbits + guard + 1 places only the sticky bit is left, which this clamp keeps.
    d = min(word(scale_big - scale_small), word(fbits + guard + 1))
    lost = word(sig_small & word(word(word(1) << d) - word(1)))
    sig_small = word(word(sig_small >> d) | word(lost != word(0)))
    subtract = word(word(a ^ b) >> sign_shift)
    total = word(sig_big - sig_small) if subtract else word(sig_big + sig_small)
    top = fbits + guard  # position of sig_big's leading bit
    limit = finite_limit(ebits, fbits, encoding, word)  # emask << fbits in IEEE 754's layout
    ok = (e_big != emask) if encoding & TOP_NANS_BINADE else (big < limit)
    ok &= total != word(0)
    if encoding & NAN_AT_NEGATIVE_ZERO:
        ok &= not_nan_zero
    p = msb(word(total | word(total == word(0))))
    # Renormalise to the leading bit at `top`. Shifting down (a carry) jams the lost bit. Shifting
    # up is exact: by one place, because the subtraction of a jammed addend leaves every bit above
    # bit 0 exact; by more (a cancellation), because that needs d <= 1, which drops no bits. With
    # subnormals, not below exponent field 1: a result there is subnormal (and exact). (The shift
    # is computed in the conditional expression: hoisted out of it, LLVM stops vectorising.)
    carry = p > word(top)
    if subnormals:
        total = (word(word(total >> word(1)) | word(total & word(1))) if carry
                 else word(total << min(word(word(top) - p), word(scale_big - word(1)))))
    else:
        total = word(word(total >> word(1)) | word(total & word(1))) if carry else word(total << word(word(top) - p))
    q, inexact = round_at(round_word(total), guard, sign, rounding, random, sr_bits, round_word)
    e_top = word(scale_big + p)
    e_res = word(max(e_top, word(top + 1)) - word(top)) if subnormals else word(e_top - word(top))
    encoded = word(word(word(e_res - word(1)) << word(fbits)) + word(q))  # a rounding carry bumps the exponent
    ok &= encoded < limit
    if subnormals:
        ok &= (daz == 0) | ((e_small != word(0)) | (small == word(0))) & ((e_big != word(0)) | (big == word(0)))
        ok &= (ftz == 0) | (encoded >= word(1 << fbits))
    else:
        ok &= (e_small != word(0)) & (e_top > word(top))
    return word(word(sign << sign_shift) | encoded), INEXACT * int(inexact), ok


@njit(cache=True, forceinline=True, error_model="numpy")
def normal_operands(a, b, ebits, fbits, word, encoding=IEEE):
    """What mul and div read from two operands: (sign of the result, exponent fields, significands
    with the implicit bit, ok), ok being False unless both are normal numbers; all ``word``s."""
    emask = word((1 << ebits) - 1)
    fmask = word((1 << fbits) - 1)
    hidden = word(1 << fbits)
    a, b = word(a), word(b)
    e_a = word(word(a >> word(fbits)) & emask)
    e_b = word(word(b >> word(fbits)) & emask)
    sign = word(word(word(a ^ b) >> word(ebits + fbits)) & word(1))
    ok = is_normal_finite(a, ebits, fbits, encoding, word) & is_normal_finite(b, ebits, fbits, encoding, word)
    return sign, e_a, e_b, word(word(a & fmask) | hidden), word(word(b & fmask) | hidden), ok


@njit(cache=True, forceinline=True, error_model="numpy")
def pack_normal(sign, e_plus, e_minus, rounded, inexact, ok, ebits, fbits, word, encoding=IEEE):
    """(bits, flags, ok) of a rounded significand (implicit bit included) with biased exponent
    e_plus - e_minus (two non-negative ``word``s, so that an unsigned word cannot wrap unseen); ok
    stays True only if the result is normal and finite (a rounding carry bumps the exponent)."""
    e_res = word(e_plus - e_minus)  # meaningless unless e_plus > e_minus
    encoded = word(word(word(e_res - word(1)) << word(fbits)) + word(rounded))
    ok &= (e_plus > e_minus) & (encoded < finite_limit(ebits, fbits, encoding, word))
    return word(word(sign << word(ebits + fbits)) | encoded), INEXACT * int(inexact), ok


@njit(cache=True, forceinline=True, error_model="numpy")
def mul_normal(a, b, ebits, fbits, rounding, random=0, sr_bits=32, word=np.int64, encoding=IEEE):
    """a * b of two normal numbers -> (bits, flags, ok). The product is exact, so stochastic
    rounding finds all its discarded bits here too. ``word``: int64, or uint32 when the product
    of two significands fits (fbits <= 15: fp16, bf16 and narrower), for twice the SIMD lanes and
    a multiplication AVX2 has (it has no 64-bit one)."""
    bias = word(bias_of(ebits, encoding))
    sign, e_a, e_b, sig_a, sig_b, ok = normal_operands(a, b, ebits, fbits, word, encoding)
    product = word(sig_a * sig_b)  # exact, < 2**(2*fbits+2)
    carry = word(product >> word(2 * fbits + 1))  # the product is in [2, 4)
    # Rounded at fbits + 1 places: a product in [1, 2) first moves up one (exact, and it keeps the
    # rounding point fixed, which spares round_at a per-element shift).
    q, inexact = round_at(word(product << word(word(1) - carry)), fbits + 1, sign, rounding, random, sr_bits, word)
    return pack_normal(sign, word(word(e_a + e_b) + carry), bias, q, inexact, ok, ebits, fbits, word, encoding)


@njit(cache=True, forceinline=True, error_model="numpy")
def div_normal(a, b, ebits, fbits, rounding, encoding=IEEE):
    """a / b of two normal numbers -> (bits, flags, ok). Formats up to 32 bits wide.

    The integer quotient and remainder are computed in float64 registers, because AVX2 has a
    vector float64 division and no integer one. Every value there is an integer below 2**53, so
    exact, except n / d, whose floor is still floor(n / d): n / d lies at least 1/d > 2**-24 below
    the next integer, and float64's spacing there (below 2**28) is at most 2**-25. The integers
    cross between the register kinds as int32s and stay float64s in them (AVX2 converts int32 <->
    float64 in SIMD lanes, not uint32 or int64).
    """
    bias = u32(bias_of(ebits, encoding))
    sign, e_a, e_b, sig_a, sig_b, ok = normal_operands(a, b, ebits, fbits, u32, encoding)
    # sig_a * 2**extra / sig_b has fbits + 4 or 5 integer bits: the significand, a round bit and
    # two more; the remainder becomes the sticky bit. numerator < 2**(2*fbits + 5) <= 2**51.
    extra = fbits + 4
    numerator = np.float64(np.int32(sig_a)) * 2.0 ** extra  # a power-of-two scaling: exact
    divisor = np.float64(np.int32(sig_b))
    quotient = np.floor(numerator / divisor)  # a float64 (math.floor's int64 costs scalar conversions)
    remainder = numerator - quotient * divisor  # the product is below 2**52: exact
    q = u32(u32(np.int32(quotient)) | u32(remainder != 0))  # below 2**(fbits + 5)
    carry = u32(sig_a >= sig_b)  # the quotient's leading bit is one place up
    rounded, inexact = round_at(u32(q << u32(u32(1) - carry)), 4, sign, rounding, 0, 32, u32)  # as in mul_normal
    return pack_normal(sign, u32(u32(e_a + bias) + carry), u32(e_b + u32(1)), rounded, inexact, ok, ebits, fbits, u32,
                       encoding)


@njit(cache=True, forceinline=True, error_model="numpy")
def as_float64(x, ebits, fbits, encoding=IEEE):
    """The value of a normal number of a format with ebits <= 8 and fbits <= 23 as a float64, built
    as the float32 of the same value (sign, rebased exponent, fraction moved up: exact)."""
    bias = bias_of(ebits, encoding)
    x = u32(x)
    magnitude = u32(u32(u32(x & u32((1 << (ebits + fbits)) - 1)) << u32(23 - fbits)) + u32((127 - bias) << 23))
    return np.float64(bits_float(u32(magnitude | u32(u32(x >> u32(ebits + fbits)) << u32(31)))))


# fma_float64 keeps 52 - fbits exact discarded bits: the 32 stochastic rounding reads, up to fbits = 20.
FMA_FLOAT64_SR_MAX_FRACTION_BITS = 20


@njit(cache=True, forceinline=True, error_model="numpy")
def fma_float64(a, b, c, ebits, fbits, rounding, random=0, sr_bits=32, encoding=IEEE):
    """a * b + c of three normal numbers with one rounding -> (bits, flags, ok), in float64 lanes.
    Formats with ebits <= 8 and fbits <= 23 (their values are float32 normals).

    The product of two significands (at most 48 bits) is exact in float64, and TwoSum writes the
    sum exactly as s + e, s the float64 nearest it, |e| <= half an ulp of s. With M the 53-bit
    significand of |s|, 2M + 1 (e adds to |s|), 2M - 1 (e takes from it) or 2M (e = 0) is the
    exact magnitude in half-ulps of s, rounded to odd: as exact-or-sticky as the other kernels'
    integers, and rounded by round_at like them. Its leading bit is bit 53, unless s is a power of
    two and the sum lies below it (2M - 1 has a bit fewer): declined, like an operand that is not
    normal, a zero sum (its sign depends on the mode) and a result that is subnormal or overflows.
    Every bit of 2M +- 1 above bit 0 is the exact value's, so stochastic rounding, which reads 32
    discarded bits, can use it when 53 - fbits - 1 >= 32 (fbits <= FMA_FLOAT64_SR_MAX_FRACTION_BITS):
    fp16 and bf16, not fp32 (fma_normal serves that). Measured against fma_normal in uint64 lanes on
    AVX-512: fp32 1.4 against 2.2-2.5 ns; fp16 and bf16 no slower than in uint32 lanes.
    """
    emask = (1 << ebits) - 1
    bias = bias_of(ebits, encoding)
    a, b, c = u32(a), u32(b), u32(c)
    if encoding & TOP_NANS_BINADE:  # exponent fields 1 .. emask - 1, one unsigned comparison each
        ok = ((u32(u32(u32(a >> u32(fbits)) & u32(emask)) - u32(1)) < u32(emask - 1))
              & (u32(u32(u32(b >> u32(fbits)) & u32(emask)) - u32(1)) < u32(emask - 1))
              & (u32(u32(u32(c >> u32(fbits)) & u32(emask)) - u32(1)) < u32(emask - 1)))
    else:
        ok = (is_normal_finite(a, ebits, fbits, encoding, u32) & is_normal_finite(b, ebits, fbits, encoding, u32)
              & is_normal_finite(c, ebits, fbits, encoding, u32))
    product = as_float64(a, ebits, fbits, encoding) * as_float64(b, ebits, fbits, encoding)  # exact
    y = as_float64(c, ebits, fbits, encoding)
    s = product + y
    # TwoSum (Knuth): e = product + y - s exactly, whichever is larger.
    y_part = s - product
    e = (product - (s - y_part)) + (y - y_part)
    s_bits = float_bits(s)
    sign = np.int64(s_bits >> u64(63))
    m = np.int64(s_bits & u64(0xFFFFFFFFFFFFF)) | np.int64(1 << 52)
    adds = (e > 0.0) if sign == 0 else (e < 0.0)  # e moves the magnitude up
    takes = (e < 0.0) if sign == 0 else (e > 0.0)
    half_ulps = 2 * m + np.int64(adds) - np.int64(takes)
    ok &= (s != 0.0) & ~((m == np.int64(1 << 52)) & takes)
    q, inexact = round_at(half_ulps, 53 - fbits, sign, rounding, random, sr_bits)
    # The exponent field of s's binade in the format: float64's, rebased.
    e_res = np.int64(u64(s_bits >> u64(52)) & u64(0x7FF)) - 1023 + bias
    encoded = ((e_res - 1) << fbits) + q  # a rounding carry bumps the exponent
    ok &= (e_res >= 1) & (encoded < np.int64(finite_limit(ebits, fbits, encoding, u32)))
    return u32(u32(sign << (ebits + fbits)) | u32(encoded)), INEXACT * int(inexact), ok


# fma_normal places the exact product and the addend with their top bits at bit FMA_TOP: the
# product's 2*fbits + 2 <= 48 bits then end at bit 13 or above, so a shift by one place keeps
# them, and a sum stays below 2**62, what msb_index64 reads.
FMA_TOP = 60


@njit(cache=True, forceinline=True, error_model="numpy")
def fma_normal(a, b, c, ebits, fbits, rounding, random=0, sr_bits=32, encoding=IEEE):
    """a * b + c of three normal numbers with one rounding -> (bits, flags, ok), in uint64 lanes:
    for fp32 under stochastic rounding, which reads 32 discarded bits (fma_float64 serves the rest).

    The product is exact. Product and addend are placed with their top bits at bit FMA_TOP (the
    product's bit 2*fbits + 1, the addend's leading bit) and the one with the smaller exponent there
    is shifted right, jamming what falls off into bit 0: that happens only when it starts two or
    more places lower, and then at most one leading bit cancels, so the round bit and the 32 bits
    below it stay clear of bit 0. When nothing falls off the sum is exact, however deep the
    cancellation. Declined: what fma_float64 declines, but for the sums just below a power of two.
    """
    bias = bias_of(ebits, encoding)
    top = FMA_TOP
    sign_shift = u64(ebits + fbits)
    emask = u64((1 << ebits) - 1)
    fmask = u64((1 << fbits) - 1)
    hidden = u64(1 << fbits)
    a, b, c = u64(a), u64(b), u64(c)
    e_a = u64(u64(a >> u64(fbits)) & emask)
    e_b = u64(u64(b >> u64(fbits)) & emask)
    e_c = u64(u64(c >> u64(fbits)) & emask)
    ok = (is_normal_finite(a, ebits, fbits, encoding, u64) & is_normal_finite(b, ebits, fbits, encoding, u64)
          & is_normal_finite(c, ebits, fbits, encoding, u64))
    sign_p = u64(u64(u64(a ^ b) >> sign_shift) & u64(1))
    sign_c = u64(u64(c >> sign_shift) & u64(1))
    product = u64(u64(u64(a & fmask) | hidden) * u64(u64(b & fmask) | hidden))
    x = u64(product << u64(top - 2 * fbits - 1))
    y = u64(u64(u64(c & fmask) | hidden) << u64(top - fbits))
    # Exponent fields (plus bias, to stay unsigned) that bit `top` stands for in x and in y.
    exp_x = u64(e_a + e_b + u64(1))
    exp_y = u64(e_c + u64(bias))
    exp_top = max(exp_x, exp_y)
    # Past top + 1 places only the sticky bit is left, which this clamp keeps.
    shift_x = min(u64(exp_top - exp_x), u64(top + 1))
    shift_y = min(u64(exp_top - exp_y), u64(top + 1))
    x = u64(u64(x >> shift_x) | u64(u64(x & u64(u64(u64(1) << shift_x) - u64(1))) != u64(0)))
    y = u64(u64(y >> shift_y) | u64(u64(y & u64(u64(u64(1) << shift_y) - u64(1))) != u64(0)))
    big = max(x, y)
    small = min(x, y)
    sign = sign_p if x >= y else sign_c
    total = u64(big - small) if sign_p != sign_c else u64(big + small)
    ok &= total != u64(0)
    p = msb_index64(u64(total | u64(total == u64(0))))
    # Renormalise to the leading bit at `top`: down by one place (a carry) jamming the lost bit, or
    # up (a cancellation), which is exact: either nothing was jammed, or one place and the jammed
    # bit moves to bit 1, still far below the discarded bits that matter.
    carry = p > u64(top)
    total = u64(u64(total >> u64(1)) | u64(total & u64(1))) if carry else u64(total << u64(u64(top) - p))
    q, inexact = round_at(np.int64(total), top - fbits, sign, rounding, random, sr_bits)
    # The result's exponent field is exp_top + p - top - bias; normal iff that is at least 1.
    ok &= u64(exp_top + p) > u64(top + bias)
    e_res = u64(u64(exp_top + p) - u64(top + bias))
    encoded = u64(u64(u64(e_res - u64(1)) << u64(fbits)) + u64(q))  # a rounding carry bumps the exponent
    ok &= encoded < finite_limit(ebits, fbits, encoding, u64)
    return u64(u64(sign << sign_shift) | encoded), INEXACT * int(inexact), ok


@njit(cache=True, forceinline=True, error_model="numpy")
def sqrt_normal(a, ebits, fbits, rounding, encoding=IEEE):
    """sqrt(a) of a positive normal number -> (bits, flags, ok). Formats of up to 23 fraction bits.

    The radicand is the significand scaled to an integer n of 2*fbits + 5 or 6 bits (below 2**52,
    exact in float64) with an even exponent; its root has fbits + 3 bits: the significand, a round
    bit and one that takes the sticky remainder. floor(sqrt(n)) is read from float64's correctly
    rounded square root: for n < k*k, sqrt(n) <= k - 1/(2k), at least 2**-(fbits + 4) below k,
    while float64 rounds by at most 2**(fbits - 51) there, so it never reaches k (fbits <= 23).
    The root's square is exact in float64 too, which gives the sticky bit. Under stochastic
    rounding (32 more root bits) loops.py leaves sqrt to the general kernel.
    """
    bias = bias_of(ebits, encoding)
    emask = u32((1 << ebits) - 1)
    fmask = u32((1 << fbits) - 1)
    a = u32(a)
    e_a = u32(u32(a >> u32(fbits)) & emask)
    ok = is_normal_finite(a, ebits, fbits, encoding, u32) & (u32(a >> u32(ebits + fbits)) == u32(0))
    odd = u32(u32(e_a + u32(bias)) & u32(1))  # parity of the unbiased exponent e_a - bias
    # n = significand << (fbits + 4 + odd), built in float64 (a multiplication by a power of two).
    # Integers cross between the register kinds as int32s and stay float64s in them: AVX2 converts
    # int32 <-> float64 in SIMD lanes, not uint32 or int64.
    n = np.float64(np.int32(u32(a & fmask) | u32(1 << fbits))) * (2.0 ** (fbits + 5) if odd else 2.0 ** (fbits + 4))
    root = np.floor(np.sqrt(n))
    q = u32(u32(np.int32(root)) | u32(root * root != n))
    rounded, inexact = round_at(q, 2, 0, rounding, 0, 32, u32)
    # The root's leading bit (fbits + 2) stands for 2**((e_a - bias - odd) / 2): add the bias back.
    e_res = u32(u32(u32(e_a + u32(bias) - odd) >> u32(1)))
    encoded = u32(u32(u32(e_res - u32(1)) << u32(fbits)) + u32(rounded))
    return encoded, INEXACT * int(inexact), ok


@njit(cache=True, forceinline=True, error_model="numpy")
def add_stochastic(a, b, negate_b, options, random):
    """add_normal with room for stochastic rounding's 32 discarded bits (uint64 lanes)."""
    return add_normal(a, b, negate_b, options.exponent_bits, options.fraction_bits, SR, u64, SR_GUARD, msb_index64,
                      random, options.sr_bits, np.int64, True, options.ftz, options.daz, options.encoding)


@njit(cache=True, forceinline=True, error_model="numpy")
def add(a, b, options, random):
    if options.stochastic:  # a compile-time constant in every loop (loops.with_constants)
        return add_stochastic(a, b, 0, options, random)
    return add_normal(a, b, 0, options.exponent_bits, options.fraction_bits, options.rounding,
                      subnormals=True, ftz=options.ftz, daz=options.daz, encoding=options.encoding)


@njit(cache=True, forceinline=True, error_model="numpy")
def sub(a, b, options, random):
    if options.stochastic:
        return add_stochastic(a, b, 1, options, random)
    return add_normal(a, b, 1, options.exponent_bits, options.fraction_bits, options.rounding,
                      subnormals=True, ftz=options.ftz, daz=options.daz, encoding=options.encoding)


@njit(cache=True, forceinline=True, error_model="numpy")
def mul(a, b, options, random):
    if options.fraction_bits <= 15:  # a compile-time constant in every loop
        return mul_normal(a, b, options.exponent_bits, options.fraction_bits, options.rounding, random, options.sr_bits,
                          u32, options.encoding)
    return mul_normal(a, b, options.exponent_bits, options.fraction_bits, options.rounding, random, options.sr_bits,
                      np.int64, options.encoding)


@njit(cache=True, forceinline=True, error_model="numpy")
def div(a, b, options, random):
    return div_normal(a, b, options.exponent_bits, options.fraction_bits, options.rounding, options.encoding)


@njit(cache=True, forceinline=True, error_model="numpy")
def fma(a, b, c, options, random):
    """fma_float64, whose TwoSum needs the host to round to nearest even: its callers (loops.py,
    programs.py) set that environment on x86 (_kernels.environment); elsewhere, where they cannot,
    and for FP32 under stochastic rounding, fma_normal's integers."""
    ebits, fbits = options.exponent_bits, options.fraction_bits
    if not X86 or options.stochastic and fbits > FMA_FLOAT64_SR_MAX_FRACTION_BITS:  # compile-time constants
        return fma_normal(a, b, c, ebits, fbits, options.rounding, random, options.sr_bits, options.encoding)
    return fma_float64(a, b, c, ebits, fbits, options.rounding, random, options.sr_bits, options.encoding)


@njit(cache=True, forceinline=True, error_model="numpy")
def sqrt(a, options, random):
    return sqrt_normal(a, options.exponent_bits, options.fraction_bits, options.rounding, options.encoding)
