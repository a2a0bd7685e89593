"""Unpacking, jamming shifts and the one rounding routine, shared by every operation.

Conventions (for all kernels):
- A finite value is carried as ``(sign, exp, sig)`` meaning ``(-1)**sign * sig * 2**exp`` with
  ``sig`` a non-negative int64 below 2**62. Bits shifted out to the right are OR-ed ("jammed") into
  bit 0, so ``sig`` stays exact enough for correct rounding.
- ``options`` is an :data:`Options` record describing one call, read by field name. The source
  widths describe the input of a conversion; other operations ignore them.
"""
from collections import namedtuple

import numpy as np
from numba import njit
from numba.cpython.unsafe.numbers import leading_zeros

# The kernels' copies of three sets of codes, deliberately: softfloat16.rounding.Rounding,
# softfloat16.formats.ENCODINGS and softfloat16.flags.Flag define them for Python without reaching
# the kernels (softfloat16.exact, the independent reference, must not), and the kernel cache is keyed
# on this folder's source alone, so a value imported from outside it could outlive an edit in cached
# machine code. tests/test_constants.py holds each copy equal to its definition.

# Rounding modes (the values of softfloat16.Rounding). SR: stochastic rounding.
RNE, RNA, RTZ, RUP, RDN, ROD, SR = 0, 1, 2, 3, 4, 5, 6

# Encodings of special values (indices into softfloat16.formats.ENCODINGS; docs/formats-spec.md).
IEEE, FN, FNUZ, FINITE_ONLY, E8M0 = 0, 1, 2, 3, 4  # FINITE_ONLY: no inf, no NaN

# Exception flags: the bit values Berkeley SoftFloat uses (the values of softfloat16.Flag).
INEXACT, UNDERFLOW, OVERFLOW, DIVIDE_BY_ZERO, INVALID = 1, 2, 4, 8, 16

# Operand classes returned by unpack.
ZERO, FINITE, INF, NAN = 0, 1, 2, 3

# Everything a kernel needs to know about one call besides its operands, all ints: Numba passes a
# namedtuple of ints by value, reads its fields by name at no cost, and keys its disk cache on the
# field types, the same in every process. Built by softfloat16.ops._config; loops.py replaces the
# format widths and encodings (and, for default calls, the modes) by compile-time constants.
Options = namedtuple("Options", (
    "exponent_bits", "fraction_bits", "encoding",  # the result's format
    "rounding",  # a rounding-mode code above
    "stochastic",  # 1 iff rounding is SR: a compile-time constant in every loop, so kernels branch on it for free
    "ftz", "daz", "tininess_before", "saturate",  # 0 or 1 each
    "sr_bits",  # R, the random bits stochastic rounding compares (1..32)
    "nan_propagate",  # 1: a NaN result is the first NaN operand, quieted; 0: canonical_nan
    "invalid_nan", "canonical_nan",  # bit patterns of the machine profile's NaNs
    "src_exponent_bits", "src_fraction_bits", "src_encoding",  # a conversion's source format; 0 otherwise
))


@njit(cache=True, forceinline=True, error_model="numpy")
def msb_index(x):
    """Index of the highest set bit of a positive int64."""
    return 63 - leading_zeros(x)


@njit(cache=True, forceinline=True, error_model="numpy")
def shift_right_jam(x, count):
    """x >> count for 0 <= x < 2**62, count >= 0, with any 1 bits shifted out OR-ed into bit 0."""
    count = min(count, 62)  # x < 2**62: a longer shift leaves only the sticky bit, as this does
    return (x >> count) | int((x & ((1 << count) - 1)) != 0)


@njit(cache=True, forceinline=True, error_model="numpy")
def bias_of(ebits, encoding):
    """Exponent bias: one larger in the FNUZ formats."""
    return (1 << (ebits - 1)) - 1 + int(encoding == FNUZ)


@njit(cache=True, forceinline=True, error_model="numpy")
def unpack(bits, ebits, fbits, encoding, daz):
    """Split a bit pattern into (class, sign, exp, sig); value = sig * 2**exp for FINITE.

    For NAN the fraction (the payload; 0 in FNUZ and E8M0) is returned in ``sig``. ``daz`` reads
    subnormals as zeros of their sign. Which patterns are special is the encoding's business.
    """
    bits = int(bits)
    emask = (1 << ebits) - 1
    fmask = (1 << fbits) - 1
    frac = bits & fmask
    field = (bits >> fbits) & emask
    sign = (bits >> (ebits + fbits)) & 1
    bias = bias_of(ebits, encoding)
    if encoding == E8M0:  # unsigned powers of two, no zero, no subnormals
        if field == emask:
            return NAN, 0, 0, 0
        return FINITE, 0, field - bias, 1
    if encoding == IEEE and field == emask:
        if frac == 0:
            return INF, sign, 0, 0
        return NAN, sign, 0, frac
    if encoding == FN and field == emask and frac == fmask:
        return NAN, sign, 0, frac
    if encoding == FNUZ and sign == 1 and field == 0 and frac == 0:
        return NAN, 1, 0, 0  # the pattern of -0
    if field == 0:
        if frac == 0 or daz:
            return ZERO, sign, 0, 0
        return FINITE, sign, 1 - bias - fbits, frac
    return FINITE, sign, field - bias - fbits, frac | (1 << fbits)


@njit(cache=True, forceinline=True, error_model="numpy")
def max_finite_bits(sign, ebits, fbits, encoding):
    """The largest finite value of the sign (E8M0 has no sign)."""
    if encoding == E8M0:
        return (1 << (ebits + fbits)) - 2
    magnitude = (1 << (ebits + fbits)) - 1  # all ones: the largest in FNUZ and finite formats
    if encoding == IEEE:
        magnitude = (((1 << ebits) - 1) << fbits) - 1
    elif encoding == FN:
        magnitude -= 1
    return (sign << (ebits + fbits)) | magnitude


@njit(cache=True, forceinline=True, error_model="numpy")
def overflow_bits(sign, ebits, fbits, encoding, saturate):
    """What a result too large for the format becomes when it rounds away: +-inf in IEEE formats,
    the NaN in fn/fnuz/e8m0, +-max in finite formats and whenever ``saturate``."""
    if saturate or encoding == FINITE_ONLY:
        return max_finite_bits(sign, ebits, fbits, encoding)
    if encoding == IEEE:
        return (sign << (ebits + fbits)) | (((1 << ebits) - 1) << fbits)
    if encoding == FN:
        return (sign << (ebits + fbits)) | ((1 << (ebits + fbits)) - 1)
    if encoding == FNUZ:
        return 1 << (ebits + fbits)
    return (1 << (ebits + fbits)) - 1  # E8M0's NaN


@njit(cache=True, forceinline=True, error_model="numpy")
def pack_special(sign, cls, ebits, fbits, encoding, saturate):
    """Encoding of a signed zero or infinity (in formats without them: see docs/formats-spec.md)."""
    if cls == INF:
        return overflow_bits(sign, ebits, fbits, encoding, saturate)
    if encoding == FNUZ:
        return 0  # no -0
    if encoding == E8M0:
        return (1 << (ebits + fbits)) - 1  # no zero: NaN
    return sign << (ebits + fbits)


@njit(cache=True, forceinline=True, error_model="numpy")
def is_nan_bits(bits, ebits, fbits, encoding):
    return unpack(bits, ebits, fbits, encoding, False)[0] == NAN


@njit(cache=True, forceinline=True, error_model="numpy")
def is_signaling_bits(bits, ebits, fbits, encoding):
    """Only IEEE formats have signaling NaNs (quiet bit clear)."""
    return encoding == IEEE and is_nan_bits(bits, ebits, fbits, encoding) and (int(bits) >> (fbits - 1)) & 1 == 0


@njit(cache=True, forceinline=True, error_model="numpy")
def nan_result(a, b, c, count, options):
    """(bits, flags) of an operation with at least one NaN among its first ``count`` operands.

    The machine profile decides: propagate the first NaN operand quieted (ieee, x86), or return the
    profile's canonical NaN (riscv, cuda). A signaling NaN operand always raises INVALID.
    """
    ebits, fbits, encoding = options.exponent_bits, options.fraction_bits, options.encoding
    flags = 0
    if is_signaling_bits(a, ebits, fbits, encoding):
        flags = INVALID
    if count > 1 and is_signaling_bits(b, ebits, fbits, encoding):
        flags = INVALID
    if count > 2 and is_signaling_bits(c, ebits, fbits, encoding):
        flags = INVALID
    if not options.nan_propagate:
        return options.canonical_nan, flags
    quiet = (1 << (fbits - 1)) if encoding == IEEE else 0  # the other encodings' NaNs are all quiet
    if is_nan_bits(a, ebits, fbits, encoding):
        return int(a) | quiet, flags
    if count > 1 and is_nan_bits(b, ebits, fbits, encoding):
        return int(b) | quiet, flags
    return int(c) | quiet, flags


@njit(cache=True, forceinline=True, error_model="numpy")
def round_at(sig, shift, sign, rounding, random, sr_bits, word=np.int64):
    """Round sig * 2**-shift to an integer in the given mode -> (integer, inexact).

    The only place a rounding decision is made. Written without data-dependent branches (the
    mode is the same for a whole array, so its branches predict perfectly). Stochastic rounding
    (SR) rounds up iff d + random >= 2**sr_bits, d being the first sr_bits discarded bits.
    ``word`` is the integer type to compute in: int64, or uint32 where sig < 2**31 and SIMD lanes
    should stay 32 bits wide (fast.add_normal); not for SR, which reads up to 32 discarded bits.
    """
    if shift <= 0:
        return word(sig << (-shift)), False
    if rounding == SR:
        whole = shift >= 63  # sig < 2**62: every bit is discarded
        q = 0 if whole else sig >> shift
        rem = sig if whole else sig & ((1 << shift) - 1)
        below = shift - sr_bits  # where the first sr_bits discarded bits end
        d = (rem << -below) if below < 0 else (rem >> below if below < 63 else 0)
        return word(q + int(d + random >= (1 << sr_bits))), rem != 0
    if shift > 62:
        # sig < 2**62 <= half a unit: all that matters is a nonzero remainder below one half.
        sig, shift = 1, 62
    sig = word(sig)
    q = word(sig >> word(shift))
    rem = word(sig & word(word(word(1) << word(shift)) - word(1)))
    half = word(word(1) << word(shift - 1))
    inexact = rem != word(0)
    if rounding == RNE:
        increment = (rem > half) | ((rem == half) & (word(q & word(1)) == word(1)))
    elif rounding == RNA:
        increment = rem >= half
    elif rounding == RUP:
        increment = inexact & (sign == 0)
    elif rounding == RDN:
        increment = inexact & (sign == 1)
    else:
        increment = False
    q = word(q + word(increment))
    if rounding == ROD:
        q = word(q | word(inexact))
    return q, inexact


@njit(cache=True, forceinline=True, error_model="numpy")
def rounds_away(sign, rounding):
    """Whether an overflowing result goes to the overflow value (else to the largest finite)."""
    toward_zero = rounding == RTZ or rounding == ROD or (rounding == RUP and sign == 1) or (
        rounding == RDN and sign == 0)
    return not toward_zero


@njit(cache=True, forceinline=True, error_model="numpy")
def round_pack_e8m0(sign, exp, sig, rounding, saturate, random, sr_bits):
    """round_pack into E8M0 (8 exponent bits, no fraction, no sign, no zero, no subnormals)."""
    if sign:
        return 0xFF, INVALID  # a negative value has no E8M0 representation
    e = exp + msb_index(sig)
    q, inexact = round_at(sig, e - exp, 0, rounding, random, sr_bits)  # q is 1, or 2 (carry)
    e += q - 1
    if e > 127:
        return overflow_bits(0, 8, 0, E8M0, saturate) if rounds_away(0, rounding) else 0xFE, OVERFLOW | INEXACT
    if e < -127:
        return 0, UNDERFLOW | INEXACT  # no zero: the smallest value, 2**-127
    return e + 127, INEXACT * int(inexact)


@njit(cache=True, forceinline=True, error_model="numpy")
def round_pack(sign, exp, sig, ebits, fbits, encoding, rounding, ftz, tininess_before, saturate, random, sr_bits):
    """Round (-1)**sign * sig * 2**exp (sig > 0) into the format -> (bits, flags).

    Handles gradual underflow, tininess (before or after rounding), flush-to-zero, overflow by
    rounding mode and encoding (inf, NaN or the largest finite; ``saturate``), and the INEXACT /
    UNDERFLOW / OVERFLOW flags. ``random`` is stochastic rounding's R-bit integer (R = sr_bits).
    """
    if encoding == E8M0:
        return round_pack_e8m0(sign, exp, sig, rounding, saturate, random, sr_bits)
    bias = bias_of(ebits, encoding)
    emin = 1 - bias
    e = exp + msb_index(sig)  # exponent of the leading bit
    tiny_region = e < emin
    shift = (emin if tiny_region else e) - fbits - exp
    q, inexact = round_at(sig, shift, sign, rounding, random, sr_bits)
    sign_bit = sign << (ebits + fbits)
    if encoding == FNUZ:
        sign_bit *= int(q != 0)  # no -0: a zero result is +0 (0x80 is the NaN)

    tiny = tiny_region
    if tiny_region and not tininess_before and e == emin - 1:
        # Tiny after rounding unless rounding to full precision (unbounded exponent) reaches 2**emin.
        q_unbounded, _ = round_at(sig, shift - 1, sign, rounding, random, sr_bits)
        tiny = q_unbounded < (1 << (fbits + 1))
    if tiny and ftz:
        return (0 if encoding == FNUZ else sign << (ebits + fbits)), UNDERFLOW | INEXACT

    # Exponent field and significand add up: a carry out of the fraction bumps the exponent.
    encoded = (((e if not tiny_region else emin) + bias - 1) << fbits) + q
    if encoded > max_finite_bits(0, ebits, fbits, encoding):
        if rounds_away(sign, rounding):
            return overflow_bits(sign, ebits, fbits, encoding, saturate), OVERFLOW | INEXACT
        return max_finite_bits(sign, ebits, fbits, encoding), OVERFLOW | INEXACT
    # Arithmetic, not a branch: whether a result is exact varies from element to element.
    flags = (INEXACT | (UNDERFLOW * int(tiny))) * int(inexact)
    return sign_bit | encoded, flags


@njit(cache=True, forceinline=True, error_model="numpy")
def round_pack_options(sign, exp, sig, options, random):
    """round_pack into the format, mode, ftz, tininess and saturation of an Options record."""
    return round_pack(sign, exp, sig, options.exponent_bits, options.fraction_bits, options.encoding,
                      options.rounding, options.ftz, options.tininess_before, options.saturate, random,
                      options.sr_bits)


@njit(cache=True, forceinline=True, error_model="numpy")
def special_options(cls, sign, options):
    """pack_special into the format and saturation of an Options record."""
    return pack_special(sign, cls, options.exponent_bits, options.fraction_bits, options.encoding, options.saturate)


@njit(cache=True, forceinline=True, error_model="numpy")
def exact_zero_sign(sign_x, sign_y, rounding):
    """Sign of an exact zero sum x + y: x's sign if both agree, else +0 (-0 when rounding down)."""
    if sign_x == sign_y:
        return sign_x
    return 1 if rounding == RDN else 0
