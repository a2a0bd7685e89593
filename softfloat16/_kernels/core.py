"""Unpacking, jamming shifts and the one rounding routine, shared by every operation.

Conventions (for all kernels):
- A finite value is carried as ``(sign, exp, sig)`` meaning ``(-1)**sign * sig * 2**exp`` with
  ``sig`` a non-negative int64 below 2**62. Bits shifted out to the right are OR-ed ("jammed") into
  bit 0, so ``sig`` stays exact enough for correct rounding.
- ``options`` is an :data:`Options` record describing one call, read by field name. The source
  widths describe the input of a conversion; other operations ignore them.
"""
from collections import namedtuple

from numba import njit
from numba.cpython.unsafe.numbers import leading_zeros

# Rounding modes (codes shared with softfloat16.rounding).
RNE, RNA, RTZ, RUP, RDN, ROD = 0, 1, 2, 3, 4, 5

# Exception flags: the bit values Berkeley SoftFloat uses (shared with softfloat16.Flag).
INEXACT, UNDERFLOW, OVERFLOW, DIVIDE_BY_ZERO, INVALID = 1, 2, 4, 8, 16

# Operand classes returned by unpack.
ZERO, FINITE, INF, NAN = 0, 1, 2, 3

# Everything a kernel needs to know about one call besides its operands, all ints: Numba passes a
# namedtuple of ints by value, reads its fields by name at no cost, and keys its disk cache on the
# field types, the same in every process. Built by softfloat16.ops._config; loops.py replaces the
# format widths (and, for default calls, the modes) by compile-time constants.
Options = namedtuple("Options", (
    "exponent_bits", "fraction_bits",  # the result's format
    "rounding",  # a rounding-mode code above
    "ftz", "daz", "tininess_before",  # 0 or 1 each
    "nan_propagate",  # 1: a NaN result is the first NaN operand, quieted; 0: canonical_nan
    "invalid_nan", "canonical_nan",  # bit patterns of the machine profile's NaNs
    "src_exponent_bits", "src_fraction_bits",  # a conversion's source format; 0 otherwise
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
def unpack(bits, ebits, fbits, daz):
    """Split a bit pattern into (class, sign, exp, sig); value = sig * 2**exp for FINITE.

    For NAN the fraction is returned in ``sig``. ``daz`` reads subnormals as zeros of their sign.
    """
    bits = int(bits)
    emask = (1 << ebits) - 1
    frac = bits & ((1 << fbits) - 1)
    field = (bits >> fbits) & emask
    sign = (bits >> (ebits + fbits)) & 1
    bias = (1 << (ebits - 1)) - 1
    if field == emask:
        if frac == 0:
            return INF, sign, 0, 0
        return NAN, sign, 0, frac
    if field == 0:
        if frac == 0 or daz:
            return ZERO, sign, 0, 0
        return FINITE, sign, 1 - bias - fbits, frac
    return FINITE, sign, field - bias - fbits, frac | (1 << fbits)


@njit(cache=True, forceinline=True, error_model="numpy")
def pack_special(sign, cls, ebits, fbits):
    """Encoding of a signed zero or infinity."""
    sign_bit = sign << (ebits + fbits)
    if cls == INF:
        return sign_bit | (((1 << ebits) - 1) << fbits)
    return sign_bit


@njit(cache=True, forceinline=True, error_model="numpy")
def is_nan_bits(bits, ebits, fbits):
    magnitude = int(bits) & ((1 << (ebits + fbits)) - 1)
    return magnitude > (((1 << ebits) - 1) << fbits)


@njit(cache=True, forceinline=True, error_model="numpy")
def is_signaling_bits(bits, ebits, fbits):
    return is_nan_bits(bits, ebits, fbits) and (int(bits) >> (fbits - 1)) & 1 == 0


@njit(cache=True, forceinline=True, error_model="numpy")
def nan_result(a, b, c, count, options):
    """(bits, flags) of an operation with at least one NaN among its first ``count`` operands.

    The machine profile decides: propagate the first NaN operand quieted (ieee, x86), or return the
    profile's canonical NaN (riscv, cuda). A signaling NaN operand always raises INVALID.
    """
    ebits, fbits = options.exponent_bits, options.fraction_bits
    flags = 0
    if is_signaling_bits(a, ebits, fbits):
        flags = INVALID
    if count > 1 and is_signaling_bits(b, ebits, fbits):
        flags = INVALID
    if count > 2 and is_signaling_bits(c, ebits, fbits):
        flags = INVALID
    if not options.nan_propagate:
        return options.canonical_nan, flags
    quiet = 1 << (fbits - 1)
    if is_nan_bits(a, ebits, fbits):
        return int(a) | quiet, flags
    if count > 1 and is_nan_bits(b, ebits, fbits):
        return int(b) | quiet, flags
    return int(c) | quiet, flags


@njit(cache=True, forceinline=True, error_model="numpy")
def round_at(sig, shift, sign, rounding):
    """Round sig * 2**-shift to an integer in the given mode -> (integer, inexact).

    The only place a rounding decision is made. Written without data-dependent branches (the
    mode is the same for a whole array, so its branches predict perfectly).
    """
    if shift <= 0:
        return sig << (-shift), False
    if shift > 62:
        # sig < 2**62 <= half a unit: all that matters is a nonzero remainder below one half.
        sig, shift = 1, 62
    q = sig >> shift
    rem = sig & ((1 << shift) - 1)
    half = 1 << (shift - 1)
    inexact = rem != 0
    if rounding == RNE:
        increment = (rem > half) | ((rem == half) & ((q & 1) == 1))
    elif rounding == RNA:
        increment = rem >= half
    elif rounding == RUP:
        increment = inexact & (sign == 0)
    elif rounding == RDN:
        increment = inexact & (sign == 1)
    else:
        increment = False
    q += int(increment)
    if rounding == ROD:
        q |= int(inexact)
    return q, inexact


@njit(cache=True, forceinline=True, error_model="numpy")
def round_pack(sign, exp, sig, ebits, fbits, rounding, ftz, tininess_before):
    """Round (-1)**sign * sig * 2**exp (sig > 0) into the format -> (bits, flags).

    Handles gradual underflow, tininess (before or after rounding), flush-to-zero, overflow by
    rounding mode, and the INEXACT / UNDERFLOW / OVERFLOW flags.
    """
    bias = (1 << (ebits - 1)) - 1
    emin = 1 - bias
    e = exp + msb_index(sig)  # exponent of the leading bit
    tiny_region = e < emin
    shift = (emin if tiny_region else e) - fbits - exp
    q, inexact = round_at(sig, shift, sign, rounding)
    sign_bit = sign << (ebits + fbits)

    tiny = tiny_region
    if tiny_region and not tininess_before and e == emin - 1:
        # Tiny after rounding unless rounding to full precision (unbounded exponent) reaches 2**emin.
        q_unbounded, _ = round_at(sig, shift - 1, sign, rounding)
        tiny = q_unbounded < (1 << (fbits + 1))
    if tiny and ftz:
        return sign_bit, UNDERFLOW | INEXACT

    # Exponent field and significand add up: a carry out of the fraction bumps the exponent.
    encoded = (((e if not tiny_region else emin) + bias - 1) << fbits) + q
    inf_encoding = ((1 << ebits) - 1) << fbits
    if encoded >= inf_encoding:
        to_inf = rounding == RNE or rounding == RNA
        to_inf = to_inf or (rounding == RUP and sign == 0) or (rounding == RDN and sign == 1)
        return sign_bit | (inf_encoding if to_inf else inf_encoding - 1), OVERFLOW | INEXACT
    # Arithmetic, not a branch: whether a result is exact varies from element to element.
    flags = (INEXACT | (UNDERFLOW * int(tiny))) * int(inexact)
    return sign_bit | encoded, flags


@njit(cache=True, forceinline=True, error_model="numpy")
def round_pack_options(sign, exp, sig, options):
    """round_pack into the format, mode, ftz and tininess of an Options record."""
    return round_pack(sign, exp, sig, options.exponent_bits, options.fraction_bits, options.rounding,
                      options.ftz, options.tininess_before)


@njit(cache=True, forceinline=True, error_model="numpy")
def exact_zero_sign(sign_x, sign_y, rounding):
    """Sign of an exact zero sum x + y: x's sign if both agree, else +0 (-0 when rounding down)."""
    if sign_x == sign_y:
        return sign_x
    return 1 if rounding == RDN else 0
