"""Conversion and comparison kernels."""
from numba import njit

from .core import (
    FINITE, INF, INFINITIES, INVALID, NAN, SIGNED, TOP_NANS_BINADE, ZERO,
    has_nan, has_zero, is_signaling_bits, msb_index, nan_bits, round_pack_options, special_options, unpack,
)


@njit(cache=True, forceinline=True, error_model="numpy")
def convert_nan(sign, payload, signaling, options):
    """(bits, flags) of a NaN converted into the destination format (docs/formats-spec.md): its
    sign and payload (aligned at the top of the fraction, quieted) where the destination has
    room for them (IEEE 754's NaNs), the NaN of the sign where it has one, +0 with INVALID where
    it has none."""
    ebits, fbits, encoding = options.exponent_bits, options.fraction_bits, options.encoding
    flags = INVALID if signaling else 0
    if not has_nan(encoding):
        return 0, INVALID
    if not options.nan_propagate:
        return options.canonical_nan, flags
    if not encoding & TOP_NANS_BINADE:  # one NaN per sign (fn), or one in all (fnuz, e8m0, p3109)
        return nan_bits(sign, ebits, fbits, encoding), flags
    src_fbits = options.src_fraction_bits
    if fbits >= src_fbits:
        payload = payload << (fbits - src_fbits)
    else:
        payload = payload >> (src_fbits - fbits)
    payload |= 1 << (fbits - 1)
    return (sign << (ebits + fbits)) | (((1 << ebits) - 1) << fbits) | payload, flags


@njit(cache=True, forceinline=True, error_model="numpy")
def convert(bits, options, random):
    """Convert from the source format (options.src_*) to the destination format, one rounding.

    Used for format-to-format conversion and for float64 input (source format 11/52).
    """
    src_ebits, src_fbits, src_encoding = options.src_exponent_bits, options.src_fraction_bits, options.src_encoding
    cls, sign, exp, sig = unpack(bits, src_ebits, src_fbits, src_encoding, options.daz)
    if cls == FINITE:
        return round_pack_options(sign, exp, sig, options, random)
    if cls == NAN:
        return convert_nan(sign, sig, is_signaling_bits(bits, src_ebits, src_fbits, src_encoding), options)
    encoding = options.encoding
    if (cls == ZERO and not has_zero(encoding)) or (cls == INF and sign == 1 and not encoding & SIGNED):
        # No zero (E8M0), or -inf in an unsigned format: no representation, the NaN even when saturating
        return nan_bits(0, options.exponent_bits, options.fraction_bits, encoding), INVALID
    special = special_options(cls, sign, options)
    # An infinity into a format without one has no representation (INVALID), even saturated.
    return special, INVALID if cls == INF and not encoding & INFINITIES else 0


@njit(cache=True, forceinline=True, error_model="numpy")
def from_int(value, options, random):
    """Round a signed 64-bit integer into the format."""
    value = int(value)
    if value == 0:
        return special_options(ZERO, 0, options), INVALID * int(not has_zero(options.encoding))
    sign = 1 if value < 0 else 0
    if value == -(1 << 63):
        return round_pack_options(1, 2, 1 << 61, options, random)
    magnitude = -value if sign else value
    exp = 0
    if magnitude >= (1 << 62):
        # Keep the significand below 2**62; the jammed bit preserves correct rounding.
        magnitude = (magnitude >> 1) | (magnitude & 1)
        exp = 1
    return round_pack_options(sign, exp, magnitude, options, random)


@njit(cache=True, forceinline=True, error_model="numpy")
def to_float64_bits(bits, options, random):
    """The exact value of a bit pattern as float64 bits (every format here fits float64 exactly)."""
    ebits, fbits = options.exponent_bits, options.fraction_bits
    cls, sign, exp, sig = unpack(bits, ebits, fbits, options.encoding, options.daz)
    sign_bit = sign << 63
    if cls == ZERO:
        return sign_bit, 0
    if cls == INF:
        return sign_bit | (0x7FF << 52), 0
    if cls == NAN:
        payload = sig << (52 - fbits) if fbits > 0 else 0
        # A NaN without payload (fnuz, e8m0) must not read as an infinity: give it the quiet bit.
        return sign_bit | (0x7FF << 52) | (payload if payload else 1 << 51), 0
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
    ebits, fbits, encoding, daz = options.exponent_bits, options.fraction_bits, options.encoding, options.daz
    class_a = unpack(a, ebits, fbits, encoding, daz)[0]
    class_b = unpack(b, ebits, fbits, encoding, daz)[0]
    if class_a == NAN or class_b == NAN:
        signaling = is_signaling_bits(a, ebits, fbits, encoding) or is_signaling_bits(b, ebits, fbits, encoding)
        return 0, INVALID if signaling else 0
    key_a = order_key(class_a, a, ebits, fbits)
    key_b = order_key(class_b, b, ebits, fbits)
    result = (want_less and key_a < key_b) or (want_equal and key_a == key_b)
    return 1 if result else 0, 0


@njit(cache=True, forceinline=True, error_model="numpy")
def eq(a, b, options, random):
    return compare(a, b, options, False, True)


@njit(cache=True, forceinline=True, error_model="numpy")
def lt(a, b, options, random):
    return compare(a, b, options, True, False)


@njit(cache=True, forceinline=True, error_model="numpy")
def le(a, b, options, random):
    return compare(a, b, options, True, True)
