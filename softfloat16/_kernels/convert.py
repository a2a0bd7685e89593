"""Conversion and comparison kernels."""
from numba import njit

from .core import (
    FINITE, INF, INVALID, NAN, ZERO, is_signaling_bits, msb_index, pack_special, round_pack_options, unpack,
)


@njit(cache=True, forceinline=True, error_model="numpy")
def convert(bits, options):
    """Convert from the source format (options.src_*) to the destination format, one rounding.

    Used for format-to-format conversion and for float64 input (source format 11/52).
    """
    ebits, fbits = options.exponent_bits, options.fraction_bits
    src_ebits, src_fbits = options.src_exponent_bits, options.src_fraction_bits
    cls, sign, exp, sig = unpack(bits, src_ebits, src_fbits, options.daz)
    if cls == FINITE:
        return round_pack_options(sign, exp, sig, options)
    if cls != NAN:
        return pack_special(sign, cls, ebits, fbits), 0
    flags = INVALID if is_signaling_bits(bits, src_ebits, src_fbits) else 0
    if not options.nan_propagate:
        return options.canonical_nan, flags
    # Keep the payload aligned at the top of the fraction, as hardware conversions do, and quiet it.
    if fbits >= src_fbits:
        payload = sig << (fbits - src_fbits)
    else:
        payload = sig >> (src_fbits - fbits)
    payload |= 1 << (fbits - 1)
    return pack_special(sign, INF, ebits, fbits) | payload, flags


@njit(cache=True, forceinline=True, error_model="numpy")
def from_int(value, options):
    """Round a signed 64-bit integer into the format."""
    value = int(value)
    if value == 0:
        return 0, 0
    sign = 1 if value < 0 else 0
    if value == -(1 << 63):
        return round_pack_options(1, 2, 1 << 61, options)
    magnitude = -value if sign else value
    exp = 0
    if magnitude >= (1 << 62):
        # Keep the significand below 2**62; the jammed bit preserves correct rounding.
        magnitude = (magnitude >> 1) | (magnitude & 1)
        exp = 1
    return round_pack_options(sign, exp, magnitude, options)


@njit(cache=True, forceinline=True, error_model="numpy")
def to_float64_bits(bits, options):
    """The exact value of a bit pattern as float64 bits (every format here fits float64 exactly)."""
    ebits, fbits = options.exponent_bits, options.fraction_bits
    cls, sign, exp, sig = unpack(bits, ebits, fbits, options.daz)
    sign_bit = sign << 63
    if cls == ZERO:
        return sign_bit, 0
    if cls == INF:
        return sign_bit | (0x7FF << 52), 0
    if cls == NAN:
        return sign_bit | (0x7FF << 52) | (sig << (52 - fbits)), 0
    lead = msb_index(sig)
    # sig has its leading bit at index `lead`; value = 1.f * 2**(exp + lead).
    fraction = (sig << (52 - lead)) & ((1 << 52) - 1)
    return sign_bit | ((exp + lead + 1023) << 52) | fraction, 0


@njit(cache=True, forceinline=True, error_model="numpy")
def order_key(cls, bits, ebits, fbits):
    """A signed integer that orders non-NaN values like the reals (both zeros map to 0)."""
    if cls == ZERO:
        return 0
    magnitude = int(bits) & ((1 << (ebits + fbits)) - 1)
    return -magnitude if (int(bits) >> (ebits + fbits)) & 1 else magnitude


@njit(cache=True, forceinline=True, error_model="numpy")
def compare(a, b, options, want_less, want_equal):
    """Quiet comparison -> (result as 0/1, flags). NaN compares unordered; sNaN raises INVALID."""
    ebits, fbits, daz = options.exponent_bits, options.fraction_bits, options.daz
    class_a = unpack(a, ebits, fbits, daz)[0]
    class_b = unpack(b, ebits, fbits, daz)[0]
    if class_a == NAN or class_b == NAN:
        signaling = is_signaling_bits(a, ebits, fbits) or is_signaling_bits(b, ebits, fbits)
        return 0, INVALID if signaling else 0
    key_a = order_key(class_a, a, ebits, fbits)
    key_b = order_key(class_b, b, ebits, fbits)
    result = (want_less and key_a < key_b) or (want_equal and key_a == key_b)
    return 1 if result else 0, 0


@njit(cache=True, forceinline=True, error_model="numpy")
def eq(a, b, options):
    return compare(a, b, options, False, True)


@njit(cache=True, forceinline=True, error_model="numpy")
def lt(a, b, options):
    return compare(a, b, options, True, False)


@njit(cache=True, forceinline=True, error_model="numpy")
def le(a, b, options):
    return compare(a, b, options, True, True)
