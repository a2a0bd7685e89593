"""A vectorised exact reference for the formats of at most 8 bits (and conversions into any format).

The scalar oracle (tests/oracle.py, Fractions) costs ~25 us a call: far too slow for every pair of
every 8-bit format in every mode. Here the same definitions run on numpy int64 arrays. Every value
of these formats is m * 2**k with a small integer m, so

* sums (and fma's product plus addend) are exact integers on a common scale 2**min(k),
* products are exact integers m_a * m_b at scale 2**(k_a + k_b),
* quotients are integer floor divisions with enough bits (>= precision + 32 + 2, for stochastic
  rounding's 32 bits) and a sticky bit for a nonzero remainder,

and one vectorised rounding (``round_magnitude``) turns (integer N, scale E, sticky) into bits and
flags. Square roots (at most 256 inputs a format) use the scalar oracle. Nothing here calls the
library: the format facts are the oracle's ``spec``; the special-value rules are written again from
docs/formats-spec.md, vectorised, and tests/test_small_formats.py checks this module against the
scalar oracle before it judges the core with it.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from oracle import DIVIDE_BY_ZERO, INEXACT, INVALID, OVERFLOW, UNDERFLOW, spec

MODES = ("rne", "rna", "rtz", "rup", "rdn", "rod", "sr")
_PROPAGATING = ("ieee", "x86")
# Integers below 2**53 convert to float64 exactly: frexp then gives their bit length.
_EXACT_FLOAT_LIMIT = 1 << 53


class Options(NamedTuple):
    """The keyword options of one call (those of the library's API)."""
    rounding: str = "rne"
    ftz: bool = False
    daz: bool = False
    nan: str = "ieee"
    tininess: str = "after"
    saturate: bool = False
    random: np.ndarray | None = None   # r, the sr_bits-bit random integers (rounding="sr")
    sr_bits: int = 32


DEFAULTS = Options()


class Decoded(NamedTuple):
    """Bit patterns taken apart: value = (-1)**sign * mantissa * 2**scale for finite patterns."""
    bits: np.ndarray
    sign: np.ndarray      # bool
    nan: np.ndarray
    snan: np.ndarray
    inf: np.ndarray
    zero: np.ndarray
    mantissa: np.ndarray  # int64, 0 for zeros and specials
    scale: np.ndarray     # int64


def decode(bits, fmt: str, daz: bool = False) -> Decoded:
    s = spec(fmt)
    bits = np.asarray(bits, dtype=np.int64)
    if s.encoding == "e8m0":
        nan = bits == s.default_nan
        false = np.zeros(bits.shape, bool)
        return Decoded(bits, false, nan, false, false, false, np.where(nan, 0, 1), bits - s.bias)
    if s.width == 64:   # float64 patterns held in int64: the sign bit is the int64 sign
        sign, magnitude = bits < 0, bits & ((1 << 63) - 1)
    else:
        sign, magnitude = (bits & s.sign_bit) != 0, bits & (s.sign_bit - 1)
    exponent = (magnitude >> s.f) & s.exp_ones
    fraction = magnitude & s.frac_mask
    if daz:  # subnormals read as zeros of their sign (in FNUZ too: -0 as a value; oracle._daz)
        subnormal = (exponent == 0) & (fraction != 0)
        fraction = np.where(subnormal, 0, fraction)
        magnitude = np.where(subnormal, 0, magnitude)
    inf = np.zeros(bits.shape, bool)
    snan = np.zeros(bits.shape, bool)
    if s.encoding == "ieee":
        top = exponent == s.exp_ones
        nan, inf = top & (fraction != 0), top & (fraction == 0)
        snan = nan & ((fraction & s.quiet_bit) == 0)
    elif s.encoding == "fn":
        nan = magnitude == s.default_nan
    elif s.encoding == "fnuz":
        nan = bits == s.default_nan   # exponent and fraction 0: never a subnormal
    else:
        nan = np.zeros(bits.shape, bool)
    zero = (magnitude == 0) & ~nan
    special = nan | inf
    mantissa = np.where(special, 0, np.where(exponent == 0, fraction, fraction | (1 << s.f)))
    scale = np.where(exponent == 0, s.emin - s.f, exponent - s.bias - s.f)
    return Decoded(bits, sign, nan, snan, inf, zero, mantissa.astype(np.int64), scale.astype(np.int64))


def _bit_length(n: np.ndarray) -> np.ndarray:
    """Bit lengths of positive int64 below 2**53 (exact through float64)."""
    return np.frexp(n.astype(np.float64))[1].astype(np.int64)


def _round_at(n, scale, sticky, ulp_exponent, negative, options: Options):
    """Round (n + sticky's delta) * 2**scale to a multiple of 2**ulp_exponent: (count, inexact)."""
    shift = ulp_exponent - scale
    left = np.clip(-shift, 0, 62)
    right = np.clip(shift, 0, 62)
    count = np.where(shift <= 0, n << left, n >> right)
    rest = np.where(shift <= 0, 0, n - ((n >> right) << right))  # the discarded bits, as an integer
    if np.any(sticky & (shift <= 0)):
        raise AssertionError("a sticky bit needs the rounding position inside the integer")
    half = np.where(right > 0, np.left_shift(1, np.maximum(right - 1, 0)), 1)
    inexact = (rest != 0) | sticky
    mode = options.rounding
    if mode == "rne":
        up = (rest > half) | ((rest == half) & (sticky | ((count & 1) == 1)))
    elif mode == "rna":
        up = rest >= half
    elif mode == "rtz":
        up = np.zeros(n.shape, bool)
    elif mode == "rup":
        up = inexact & ~negative
    elif mode == "rdn":
        up = inexact & negative
    elif mode == "rod":
        up = inexact & ((count & 1) == 0)
    elif mode == "sr":
        bits = options.sr_bits
        below = shift - bits  # d = the first `bits` discarded bits: rest >> below, zero-padded if below < 0
        if np.any(sticky & (below < 0)):
            raise AssertionError("stochastic rounding needs sr_bits exact bits below the last place")
        discarded = np.where(below >= 0, rest >> np.clip(below, 0, 63), rest << np.clip(-below, 0, 62))
        up = inexact & (discarded + options.random >= (1 << bits))
    else:
        raise ValueError(f"unknown rounding {mode!r}")
    return count + up, inexact


def overflow_value(fmt: str, negative, saturate: bool) -> np.ndarray:
    """Bits of the overflow value of each sign (docs/formats-spec.md's table)."""
    s = spec(fmt)
    sign_bits = np.where(negative, s.sign_bit, 0)
    if saturate or s.encoding == "finite":
        return sign_bits | s.max_finite
    if s.encoding == "ieee":
        return sign_bits | s.inf
    if s.encoding == "fn":
        return sign_bits | s.default_nan
    return np.full(np.shape(negative), s.default_nan)


def zero_bits(fmt: str, negative) -> np.ndarray:
    s = spec(fmt)
    return np.where(negative & (s.encoding != "fnuz"), s.sign_bit, 0)


def round_magnitude(negative, n, scale, sticky, fmt: str, options: Options):
    """Bits and flags of (-1)**negative * (n + delta) * 2**scale rounded into ``fmt``, where n > 0
    is an int64 below 2**53 and delta, in (0, 1), is present where ``sticky``."""
    s = spec(fmt)
    negative, n, scale = np.broadcast_arrays(np.asarray(negative, bool), np.asarray(n, np.int64),
                                             np.asarray(scale, np.int64))
    sticky = np.broadcast_to(np.asarray(sticky, bool), n.shape)
    if np.any(n <= 0) or np.any(n >= _EXACT_FLOAT_LIMIT):
        raise AssertionError("round_magnitude takes 0 < n < 2**53")
    exponent = scale + _bit_length(n) - 1                       # floor(log2 |value|)
    unbounded, inexact = _round_at(n, scale, sticky, exponent - s.f, negative, options)
    rounded_exponent = exponent + (unbounded >> s.p)            # a carry: 2**p
    tiny = (exponent if options.tininess == "before" else rounded_exponent) < s.emin
    flags = np.zeros(n.shape, np.int64)
    if s.encoding == "e8m0":   # no subnormals; positive values only (the caller maps the rest)
        magnitude = rounded_exponent + s.bias
        below = rounded_exponent < s.emin
        bits = np.where(below, 0, magnitude)
        flags = np.where(inexact, INEXACT, 0) | np.where(inexact & tiny, UNDERFLOW, 0)
        flags = np.where(below, UNDERFLOW | INEXACT, flags)
    else:
        ulp_exponent = np.maximum(exponent, s.emin) - s.f
        count, inexact = _round_at(n, scale, sticky, ulp_exponent, negative, options)
        magnitude = count + ((ulp_exponent - (s.emin - s.f)) << s.f)   # monotone: pattern of q * 2**ulp
        bits = np.where(count == 0, zero_bits(fmt, negative), np.where(negative, s.sign_bit, 0) | magnitude)
        flags = np.where(inexact, INEXACT, 0) | np.where(inexact & tiny, UNDERFLOW, 0)
        if options.ftz:
            bits = np.where(tiny, zero_bits(fmt, negative), bits)
            flags = np.where(tiny, UNDERFLOW | INEXACT, flags)
    over = magnitude > s.max_finite
    toward_zero = {"rtz": True, "rod": True, "rup": negative, "rdn": ~negative}.get(options.rounding, False)
    overflowed = np.where(toward_zero, np.where(negative, s.sign_bit, 0) | s.max_finite,
                          overflow_value(fmt, negative, options.saturate))
    bits = np.where(over, overflowed, bits)
    flags = np.where(over, OVERFLOW | INEXACT, flags)
    return bits.astype(np.int64), flags.astype(np.int64)


# --------------------------------------------------------------------------------------------------
# NaNs
# --------------------------------------------------------------------------------------------------

def invalid_nan(fmt: str, nan: str) -> int:
    """The NaN of an invalid operation (+0 in a format without NaN)."""
    s = spec(fmt)
    if s.encoding == "finite":
        return 0
    if s.encoding == "ieee":
        return {"cuda": s.sign_bit - 1, "x86": s.sign_bit | s.default_nan}.get(nan, s.default_nan)
    if s.encoding == "fn" and nan == "x86":
        return s.sign_bit | s.default_nan
    return s.default_nan


def propagated_nan(bits, fmt: str, nan: str) -> np.ndarray:
    """The result for a NaN operand (chosen already as the first)."""
    s = spec(fmt)
    if s.encoding == "ieee":
        if nan in _PROPAGATING:
            return bits | s.quiet_bit
        return np.full(np.shape(bits), s.sign_bit - 1 if nan == "cuda" else s.default_nan)
    if s.encoding == "fn" and nan in _PROPAGATING:
        return bits
    return np.full(np.shape(bits), s.default_nan)


def first_nan(operands: list[Decoded]) -> np.ndarray:
    result = operands[-1].bits
    for x in reversed(operands[:-1]):
        result = np.where(x.nan, x.bits, result)
    return result


# --------------------------------------------------------------------------------------------------
# Arithmetic
# --------------------------------------------------------------------------------------------------

def _signed(x: Decoded) -> np.ndarray:
    return np.where(x.sign, -x.mantissa, x.mantissa)


def _exact_sum(mantissa_x, scale_x, mantissa_y, scale_y):
    """Signed integers times powers of two, added exactly: (sum, scale). The scales of one format
    differ by less than 53 - 8 bits, so the sum stays an exact int64 below 2**53."""
    scale = np.minimum(scale_x, scale_y)
    return (mantissa_x << (scale_x - scale)) + (mantissa_y << (scale_y - scale)), scale


def _finish_sum(total, scale, both_zero_sign, s_name, options: Options):
    """Round an exact signed sum; an exact zero takes the IEEE sign rules (both_zero_sign: the sign
    when both addends are zeros of one sign, else None there)."""
    nonzero = total != 0
    n = np.where(nonzero, np.abs(total), 1)
    bits, flags = round_magnitude(total < 0, n, scale, False, s_name, options)
    exact_zero_sign = np.where(both_zero_sign >= 0, both_zero_sign == 1, options.rounding == "rdn")
    bits = np.where(nonzero, bits, zero_bits(s_name, exact_zero_sign))
    return bits, np.where(nonzero, flags, 0)


def arithmetic(op: str, fmt: str, operands, options: Options = DEFAULTS):
    """Bits and flags of ``op`` (add, sub, mul, div, fma) on int64 arrays of bit patterns."""
    s = spec(fmt)
    if s.encoding == "e8m0":
        raise ValueError("E8M0 has no arithmetic")
    xs = [decode(np.asarray(b, np.int64), fmt, options.daz) for b in np.broadcast_arrays(*operands)]
    shape = xs[0].bits.shape
    bits = np.zeros(shape, np.int64)
    flags = np.zeros(shape, np.int64)
    done = np.zeros(shape, bool)

    def settle(where, value, flag):
        nonlocal bits, flags, done
        where = where & ~done
        bits = np.where(where, value, bits)
        flags = np.where(where, flags | flag, flags)
        done |= where

    any_nan = np.zeros(shape, bool)
    for x in xs:
        any_nan |= x.nan
        flags |= np.where(x.snan, INVALID, 0)
    a, b = xs[0], xs[1]
    if op == "fma":
        zero_times_inf = (a.zero & b.inf) | (a.inf & b.zero)
        flags |= np.where(any_nan & zero_times_inf, INVALID, 0)
    settle(any_nan, propagated_nan(first_nan(xs), fmt, options.nan), 0)
    invalid = invalid_nan(fmt, options.nan)

    if op in ("add", "sub"):
        b_sign = b.sign ^ (op == "sub")
        settle(a.inf & b.inf & (a.sign != b_sign), invalid, INVALID)
        settle(a.inf, overflow_like(fmt, a.sign, options), 0)
        settle(b.inf, overflow_like(fmt, b_sign, options), 0)
        total, scale = _exact_sum(_signed(a), a.scale, np.where(b_sign, -b.mantissa, b.mantissa), b.scale)
        both = np.where(a.zero & b.zero & (a.sign == b_sign), a.sign.astype(np.int64), -1)
        result, fl = _finish_sum(total, scale, both, fmt, options)
        settle(~done, result, fl)
    elif op == "mul":
        sign = a.sign ^ b.sign
        settle((a.zero & b.inf) | (a.inf & b.zero), invalid, INVALID)
        settle(a.inf | b.inf, overflow_like(fmt, sign, options), 0)
        settle(a.zero | b.zero, zero_bits(fmt, sign), 0)
        n = np.where(done, 1, a.mantissa * b.mantissa)
        result, fl = round_magnitude(sign, n, a.scale + b.scale, False, fmt, options)
        settle(~done, result, fl)
    elif op == "div":
        sign = a.sign ^ b.sign
        settle((a.inf & b.inf) | (a.zero & b.zero), invalid, INVALID)
        settle(a.inf, overflow_like(fmt, sign, options), 0)
        settle(b.inf, zero_bits(fmt, sign), 0)
        settle(b.zero, overflow_like(fmt, sign, options), DIVIDE_BY_ZERO)
        settle(a.zero, zero_bits(fmt, sign), 0)
        extra = 2 * s.p + 36   # the quotient keeps >= p + 36 bits: 32 for stochastic rounding, 2 more, ...
        numerator = np.where(done, 1, a.mantissa) << extra
        divisor = np.where(done, 1, b.mantissa)
        quotient, remainder = np.divmod(numerator, divisor)
        result, fl = round_magnitude(sign, quotient, a.scale - b.scale - extra, remainder != 0, fmt, options)
        settle(~done, result, fl)
    elif op == "fma":
        c = xs[2]
        product_sign = a.sign ^ b.sign
        product_inf = a.inf | b.inf
        settle(zero_times_inf, invalid, INVALID)
        settle(product_inf & c.inf & (product_sign != c.sign), invalid, INVALID)
        settle(product_inf, overflow_like(fmt, product_sign, options), 0)
        settle(c.inf, overflow_like(fmt, c.sign, options), 0)
        product = a.mantissa * b.mantissa
        product_zero = product == 0
        total, scale = _exact_sum(np.where(product_sign, -product, product), a.scale + b.scale,
                                  _signed(c), c.scale)
        both = np.where(product_zero & c.zero & (product_sign == c.sign), c.sign.astype(np.int64), -1)
        result, fl = _finish_sum(total, scale, both, fmt, options)
        settle(~done, result, fl)
    else:
        raise ValueError(f"unknown op {op!r}")
    return bits, flags


def overflow_like(fmt: str, negative, options: Options) -> np.ndarray:
    """An infinite result (inf operand, x/0): inf, or the encoding's overflow value; max with saturate."""
    return overflow_value(fmt, negative, options.saturate)


def compare(op: str, fmt: str, a, b, options: Options = DEFAULTS):
    """Quiet comparisons (eq, lt, le): False with a NaN; INVALID only for a signaling NaN."""
    x, y = (decode(np.asarray(v, np.int64), fmt, options.daz) for v in np.broadcast_arrays(a, b))

    def value(d: Decoded) -> np.ndarray:  # every value of these formats is exact in float64
        finite = np.ldexp(d.mantissa.astype(np.float64), d.scale)
        return np.where(d.inf, np.inf, finite) * np.where(d.sign, -1.0, 1.0)

    either_nan = x.nan | y.nan
    with np.errstate(invalid="ignore"):
        result = {"eq": np.equal, "lt": np.less, "le": np.less_equal}[op](value(x), value(y))
    flags = np.where(x.snan | y.snan, INVALID, 0).astype(np.int64)
    return result & ~either_nan, flags


# --------------------------------------------------------------------------------------------------
# Conversions
# --------------------------------------------------------------------------------------------------

def _nan_conversion(x: Decoded, src: str, dst: str, nan: str):
    """Bits and flags of NaNs converted (meaningful where x.nan)."""
    ss, ds = spec(src), spec(dst)
    flags = np.where(x.snan, INVALID, 0)
    if ds.encoding == "finite":
        return np.zeros(x.bits.shape, np.int64), flags | INVALID
    if ds.encoding in ("fnuz", "e8m0"):
        return np.full(x.bits.shape, ds.default_nan), flags
    if nan not in _PROPAGATING:
        canonical = ds.sign_bit - 1 if (nan == "cuda" and ds.encoding == "ieee") else ds.default_nan
        return np.full(x.bits.shape, canonical), flags
    sign = np.where(x.sign, ds.sign_bit, 0)
    if ds.encoding == "fn":
        return sign | ds.default_nan, flags
    if ss.encoding in ("ieee", "fn"):
        payload, width = x.bits & ss.frac_mask, ss.f
    else:
        payload, width = np.zeros(x.bits.shape, np.int64), 0
    payload = payload >> (width - ds.f) if ds.f <= width else payload << (ds.f - width)
    return sign | ds.inf | payload | ds.quiet_bit, flags


def convert(bits, src: str, dst: str, options: Options = DEFAULTS):
    """Bits and flags of ``src`` patterns converted to ``dst`` (any format of the oracle)."""
    ds = spec(dst)
    x = decode(np.asarray(bits, np.int64), src, options.daz)
    finite = ~(x.nan | x.inf | x.zero)
    n = np.where(finite, x.mantissa, 1)
    result, flags = round_magnitude(x.sign, n, x.scale, False, dst, options)
    if ds.encoding == "ieee":
        inf_bits = np.where(x.sign, ds.sign_bit, 0) | (ds.max_finite if options.saturate else ds.inf)
        inf_flags = 0
    else:
        inf_bits, inf_flags = overflow_value(dst, x.sign, options.saturate), INVALID
    result = np.where(x.inf, inf_bits, result)
    flags = np.where(x.inf, inf_flags, flags)
    result = np.where(x.zero, zero_bits(dst, x.sign), result)
    flags = np.where(x.zero, 0, flags)
    if ds.encoding == "e8m0":  # no zero, no negative values
        unrepresentable = ~x.nan & (x.zero | x.sign)
        result = np.where(unrepresentable, ds.default_nan, result)
        flags = np.where(unrepresentable, INVALID, flags)
    nan_bits, nan_flags = _nan_conversion(x, src, dst, options.nan)
    result = np.where(x.nan, nan_bits, result)
    flags = np.where(x.nan, nan_flags, flags)
    return result.astype(np.int64), flags.astype(np.int64)
