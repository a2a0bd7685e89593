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
# softfloat16.formats (the packed properties of a format) and softfloat16.flags.Flag define them for
# Python without reaching the kernels (softfloat16.exact, the independent reference, must not), and
# the kernel cache is keyed on this folder's source alone, so a value imported from outside it could
# outlive an edit in cached machine code. tests/test_constants.py holds each copy equal to its definition.

# Rounding modes (the values of softfloat16.Rounding). SR: stochastic rounding.
RNE, RNA, RTZ, RUP, RDN, ROD, SR = 0, 1, 2, 3, 4, 5, 6

# A format's special values: its independent properties packed into one int (Format.encoding_code,
# docs/formats-spec.md), a compile-time constant in every loop, so each test below costs nothing.
SIGNED = 1             # a sign bit above the exponent
INFINITIES = 2         # the largest non-NaN code of each sign is +-inf
NAN_AT_NEGATIVE_ZERO = 4  # the code of -0 is a NaN (no -0)
NO_SUBNORMALS = 8      # exponent field 0 is a normal binade: no zero, no subnormals (E8M0)
TIES_TO_EVEN_CODE = 16  # no fraction bits: a tie goes to the even code (else up, E8M0)
TOP_NAN_ONE = 32       # the largest code of each sign is a NaN
TOP_NANS_BINADE = 64   # every code of the top exponent with a nonzero fraction is a NaN (IEEE 754)
OVERFLOW_NAN = 128     # overflow gives the NaN (else inf, or with OVERFLOW_SATURATE max finite)
OVERFLOW_SATURATE = 256
BIAS_SHIFT = 16        # bits 16..23: the bias minus 2**(e-1) - 1, two's complement

# The packed codes of the layouts the kernels use by name.
IEEE = SIGNED | INFINITIES | TOP_NANS_BINADE
FN = SIGNED | TOP_NAN_ONE | OVERFLOW_NAN  # E4M3FN: no inf, the top code of each sign a NaN
FNUZ = SIGNED | NAN_AT_NEGATIVE_ZERO | OVERFLOW_NAN | (1 << BIAS_SHIFT)  # no inf, no -0, bias 2**(e-1)
FINITE_ONLY = SIGNED | OVERFLOW_SATURATE  # no inf, no NaN
E8M0 = TOP_NAN_ONE | NO_SUBNORMALS | OVERFLOW_NAN  # unsigned powers of two

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
    """Exponent bias: 2**(e-1) - 1 plus the format's offset (FNUZ and P3109: one more)."""
    offset = (((encoding >> BIAS_SHIFT) & 0xFF) ^ 0x80) - 0x80
    return (1 << (ebits - 1)) - 1 + offset


@njit(cache=True, forceinline=True, error_model="numpy")
def top_nan_count(fbits, encoding):
    """How many codes at the top of each sign are NaNs."""
    if encoding & TOP_NANS_BINADE:
        return (1 << fbits) - 1
    return 1 if encoding & TOP_NAN_ONE else 0


@njit(cache=True, forceinline=True, error_model="numpy")
def has_nan(encoding):
    return (encoding & (TOP_NANS_BINADE | TOP_NAN_ONE | NAN_AT_NEGATIVE_ZERO)) != 0


@njit(cache=True, forceinline=True, error_model="numpy")
def has_zero(encoding):
    return (encoding & NO_SUBNORMALS) == 0


@njit(cache=True, forceinline=True, error_model="numpy")
def sign_of(sign, encoding):
    """The sign bit a result of this sign gets (always 0 in an unsigned format)."""
    return sign if encoding & SIGNED else 0


@njit(cache=True, forceinline=True, error_model="numpy")
def unpack(bits, ebits, fbits, encoding, daz):
    """Split a bit pattern into (class, sign, exp, sig); value = sig * 2**exp for FINITE.

    For NAN the fraction (the payload; 0 outside IEEE 754's NaNs) is returned in ``sig``. ``daz``
    reads subnormals as zeros of their sign. Which patterns are special is the format's properties'.
    """
    bits = int(bits)
    fmask = (1 << fbits) - 1
    top = (1 << (ebits + fbits)) - 1  # the largest magnitude pattern
    magnitude = bits & top
    frac = bits & fmask
    field = magnitude >> fbits
    sign = sign_of((bits >> (ebits + fbits)) & 1, encoding)
    bias = bias_of(ebits, encoding)
    non_finite = top - top_nan_count(fbits, encoding)  # the first code of the top NaNs, or inf
    if magnitude > non_finite:
        return NAN, sign, 0, frac  # the payload: the fraction field (all ones in fn)
    if encoding & INFINITIES and magnitude == non_finite:
        return INF, sign, 0, 0
    if encoding & NAN_AT_NEGATIVE_ZERO and sign == 1 and magnitude == 0:
        return NAN, 1, 0, 0  # the pattern of -0
    if encoding & NO_SUBNORMALS:
        return FINITE, sign, field - bias - fbits, frac | (1 << fbits)
    if field == 0:
        if frac == 0 or daz:
            return ZERO, sign, 0, 0
        return FINITE, sign, 1 - bias - fbits, frac
    return FINITE, sign, field - bias - fbits, frac | (1 << fbits)


@njit(cache=True, forceinline=True, error_model="numpy")
def max_finite_bits(sign, ebits, fbits, encoding):
    """The largest finite value of the sign: the largest magnitude below the NaNs and infinities."""
    magnitude = (1 << (ebits + fbits)) - 1 - top_nan_count(fbits, encoding) - int((encoding & INFINITIES) != 0)
    return (sign_of(sign, encoding) << (ebits + fbits)) | magnitude


@njit(cache=True, forceinline=True, error_model="numpy")
def nan_bits(sign, ebits, fbits, encoding):
    """The NaN of a sign, without payload: quiet in the top binade, the top code of the sign, or
    the code of -0 (the one NaN of both signs); +0 in a format without NaN (docs/formats-spec.md)."""
    top = (1 << (ebits + fbits)) - 1
    sign_bit = sign_of(sign, encoding) << (ebits + fbits)
    if encoding & TOP_NANS_BINADE:
        return sign_bit | (((1 << ebits) - 1) << fbits) | (1 << (fbits - 1))
    if encoding & TOP_NAN_ONE:
        return sign_bit | top
    if encoding & NAN_AT_NEGATIVE_ZERO:
        return 1 << (ebits + fbits)
    return 0


@njit(cache=True, forceinline=True, error_model="numpy")
def overflow_bits(sign, ebits, fbits, encoding, saturate):
    """What a result too large for the format becomes when it rounds away: the format's overflow
    (+-inf, the NaN of the sign, or +-max finite), +-max finite whenever ``saturate``."""
    if saturate or encoding & OVERFLOW_SATURATE:
        return max_finite_bits(sign, ebits, fbits, encoding)
    if encoding & OVERFLOW_NAN:
        return nan_bits(sign, ebits, fbits, encoding)
    return max_finite_bits(sign, ebits, fbits, encoding) + 1  # +-inf: the code above max finite


@njit(cache=True, forceinline=True, error_model="numpy")
def zero_bits(sign, ebits, fbits, encoding):
    """The zero of a sign: +0 where there is no -0; the NaN where there is no zero (E8M0)."""
    if encoding & NO_SUBNORMALS:
        return nan_bits(0, ebits, fbits, encoding)
    if encoding & NAN_AT_NEGATIVE_ZERO:
        return 0
    return sign_of(sign, encoding) << (ebits + fbits)


@njit(cache=True, forceinline=True, error_model="numpy")
def pack_special(sign, cls, ebits, fbits, encoding, saturate):
    """Encoding of a signed zero or infinity (in formats without them: see docs/formats-spec.md)."""
    if cls == INF:
        return overflow_bits(sign, ebits, fbits, encoding, saturate)
    return zero_bits(sign, ebits, fbits, encoding)


@njit(cache=True, forceinline=True, error_model="numpy")
def is_nan_bits(bits, ebits, fbits, encoding):
    return unpack(bits, ebits, fbits, encoding, False)[0] == NAN


@njit(cache=True, forceinline=True, error_model="numpy")
def is_signaling_bits(bits, ebits, fbits, encoding):
    """Only IEEE 754's NaNs can be signaling (quiet bit clear)."""
    return (encoding & TOP_NANS_BINADE) != 0 and is_nan_bits(bits, ebits, fbits, encoding) and \
        (int(bits) >> (fbits - 1)) & 1 == 0


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
    quiet = (1 << (fbits - 1)) if encoding & TOP_NANS_BINADE else 0  # the other formats' NaNs are all quiet
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
def round_code(sig, shift, sign, rounding, random, sr_bits, fbits, encoding, field):
    """round_at, and in a format without fraction bits whose ties go to the even code (P3109 of
    precision 1): a tie between 2**e (field ``field``) and 2**(e+1) goes up only from an odd field.
    (Below the normal range the neighbours are 0 and the smallest value, codes 0 and 1: round_at's
    even significand is the even code there.)"""
    q, inexact = round_at(sig, shift, sign, rounding, random, sr_bits)
    if fbits == 0 and (encoding & TIES_TO_EVEN_CODE) and rounding == RNE and 0 < shift < 63 and q == 2:
        if (sig & ((1 << shift) - 1)) == (1 << (shift - 1)) and (field & 1) == 0:
            q = 1  # a tie rounded up from significand 1: the even code is the lower neighbour here
    return q, inexact


@njit(cache=True, forceinline=True, error_model="numpy")
def round_pack_without_zero(exp, sig, ebits, fbits, encoding, rounding, saturate, random, sr_bits):
    """round_pack of a positive value into a format without subnormals (E8M0): field 0 is the
    smallest binade, and a value that rounds (with an unbounded exponent) below it gives the
    smallest value with UNDERFLOW | INEXACT: there is no zero."""
    bias = bias_of(ebits, encoding)
    e = exp + msb_index(sig)
    q, inexact = round_code(sig, e - fbits - exp, 0, rounding, random, sr_bits, fbits, encoding, e + bias)
    e += q >> (fbits + 1)  # a carry into the next binade
    encoded = ((e + bias) << fbits) + (q & ((1 << fbits) - 1))
    if encoded > max_finite_bits(0, ebits, fbits, encoding):
        if rounds_away(0, rounding):
            return overflow_bits(0, ebits, fbits, encoding, saturate), OVERFLOW | INEXACT
        return max_finite_bits(0, ebits, fbits, encoding), OVERFLOW | INEXACT
    if e + bias < 0:
        return 0, UNDERFLOW | INEXACT  # no zero: the smallest value stands in
    return encoded, INEXACT * int(inexact)


@njit(cache=True, forceinline=True, error_model="numpy")
def round_pack(sign, exp, sig, ebits, fbits, encoding, rounding, ftz, tininess_before, saturate, random, sr_bits):
    """Round (-1)**sign * sig * 2**exp (sig > 0) into the format -> (bits, flags).

    Handles gradual underflow, tininess (before or after rounding), flush-to-zero, overflow by
    rounding mode and format (inf, NaN or the largest finite; ``saturate``), and the INEXACT /
    UNDERFLOW / OVERFLOW flags. ``random`` is stochastic rounding's R-bit integer (R = sr_bits).
    A negative value in an unsigned format is the NaN with INVALID.
    """
    if sign and not encoding & SIGNED:
        return nan_bits(0, ebits, fbits, encoding), INVALID  # no representation, also when saturating
    if encoding & NO_SUBNORMALS:
        return round_pack_without_zero(exp, sig, ebits, fbits, encoding, rounding, saturate, random, sr_bits)
    bias = bias_of(ebits, encoding)
    emin = 1 - bias
    e = exp + msb_index(sig)  # exponent of the leading bit
    tiny_region = e < emin
    shift = (emin if tiny_region else e) - fbits - exp
    q, inexact = round_code(sig, shift, sign, rounding, random, sr_bits, fbits, encoding, e + bias)
    sign_bit = sign << (ebits + fbits)
    if encoding & NAN_AT_NEGATIVE_ZERO:
        sign_bit *= int(q != 0)  # no -0: a zero result is +0 (the code of -0 is the NaN)

    tiny = tiny_region
    if tiny_region and not tininess_before and e == emin - 1:
        # Tiny after rounding unless rounding to full precision (unbounded exponent) reaches 2**emin.
        q_unbounded, _ = round_code(sig, shift - 1, sign, rounding, random, sr_bits, fbits, encoding, e + bias)
        tiny = q_unbounded < (1 << (fbits + 1))
    if tiny and ftz:
        return zero_bits(sign, ebits, fbits, encoding), UNDERFLOW | INEXACT

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
def inf_options(sign, options):
    """(bits, flags) of an exact infinity of a sign: -inf in an unsigned format has no
    representation, so it is the NaN with INVALID (as a negative finite result is)."""
    if sign and not options.encoding & SIGNED:
        return nan_bits(0, options.exponent_bits, options.fraction_bits, options.encoding), INVALID
    return special_options(INF, sign, options), 0


@njit(cache=True, forceinline=True, error_model="numpy")
def exact_zero_sign(sign_x, sign_y, rounding):
    """Sign of an exact zero sum x + y: x's sign if both agree, else +0 (-0 when rounding down)."""
    if sign_x == sign_y:
        return sign_x
    return 1 if rounding == RDN else 0
