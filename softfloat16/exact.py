"""Exact rounding of rational numbers into any Format: the independent reference.

An exact value (a ``fractions.Fraction``, or anything it accepts) goes in; the bits IEEE 754
prescribes and the exception flags come out, for every rounding mode, with gradual underflow,
overflow to inf or to max finite by mode and sign, flush-to-zero and tininess before or after
rounding. Plain integer arithmetic on the numerator and denominator, written from the definition
of the formats: it shares no code and no method with the Numba kernels (integer significands with
a sticky bit and one round-pack routine), so the tests and ``softfloat16.verify`` can judge them
with it.

>>> from fractions import Fraction
>>> import softfloat16 as sf
>>> bits, flags = round_fraction(Fraction(1, 3), sf.fp16)
>>> hex(bits), flags
('0x3555', <Flag.INEXACT: 1>)
>>> [hex(round_fraction(65520, sf.fp16, mode)[0]) for mode in ("rne", "rtz")]   # max + half an ulp
['0x7c00', '0x7bff']
"""
from __future__ import annotations

import math
from fractions import Fraction
from numbers import Rational

from .flags import Flag
from .formats import Format, format as parse_format
from .profiles import parse_tininess
from .rounding import Rounding, parse_rounding

__all__ = ["round_fraction", "round_sqrt"]


def _floor_log2(numerator: int, denominator: int) -> int:
    """floor(log2(numerator / denominator)) for positive integers."""
    k = numerator.bit_length() - denominator.bit_length()
    below = (numerator << -k if k < 0 else numerator) < (denominator << k if k > 0 else denominator)
    return k - 1 if below else k


def _round_integer(numerator: int, denominator: int, shift: int, negative: bool,
                   mode: Rounding) -> tuple[int, bool]:
    """The positive rational (numerator / denominator) / 2**shift rounded to an integer in ``mode``
    (``negative``: the sign of the value it is the magnitude of). Returns (integer, inexact)."""
    if shift >= 0:
        denominator <<= shift
    else:
        numerator <<= -shift
    whole, rest = divmod(numerator, denominator)
    if rest == 0:
        return whole, False
    if mode == Rounding.RNE:
        up = 2 * rest > denominator or (2 * rest == denominator and whole % 2 == 1)
    elif mode == Rounding.RNA:
        up = 2 * rest >= denominator
    elif mode == Rounding.RTZ:
        up = False
    elif mode == Rounding.RUP:
        up = not negative
    elif mode == Rounding.RDN:
        up = negative
    else:  # ROD: the odd neighbour (a later, narrower rounding of it is then correct)
        up = whole % 2 == 0
    return whole + up, True


def _overflows_to_inf(mode: Rounding, negative: bool) -> bool:
    """Whether an overflowing result is inf (else the largest finite value of its sign)."""
    return mode in (Rounding.RNE, Rounding.RNA) or mode == (Rounding.RDN if negative else Rounding.RUP)


def round_fraction(value: Rational | int, fmt: Format | str, rounding: str | Rounding = "rne", *,
                   negative_zero: bool = False, ftz: bool = False,
                   tininess: str = "after") -> tuple[int, Flag]:
    """Bits of the exact rational ``value`` rounded once to ``fmt``, and the flags raised.

    ``negative_zero`` is the sign of an exact zero (a rational has none); a nonzero value keeps
    its sign, also when it rounds to zero. ``ftz``: a tiny result (as ``tininess``, "after" or
    "before" rounding, detects it) becomes the zero of its sign with UNDERFLOW and INEXACT.
    UNDERFLOW is otherwise raised when the result is tiny and inexact.

    >>> from fractions import Fraction
    >>> import softfloat16 as sf
    >>> hex(round_fraction(Fraction(-1, 3), sf.fp16, "rdn")[0])
    '0xb556'
    >>> bits, flags = round_fraction(Fraction(1, 2**25), "fp16")   # half the smallest subnormal: a tie
    >>> hex(bits), flags == Flag.UNDERFLOW | Flag.INEXACT
    ('0x0', True)
    >>> hex(round_fraction(Fraction(-1, 2**25), "fp16", "rna")[0])   # the tie away from zero
    '0x8001'
    >>> bits, flags = round_fraction(2**16, "fp16", "rdn")    # overflow toward -inf: max finite
    >>> hex(bits), flags == Flag.OVERFLOW | Flag.INEXACT
    ('0x7bff', True)
    >>> hex(round_fraction(0, "fp16", negative_zero=True)[0])
    '0x8000'
    """
    fmt = parse_format(fmt)
    mode = parse_rounding(rounding)
    before = parse_tininess(tininess)
    value = Fraction(value)
    negative = value < 0
    sign = fmt.sign_mask if negative or (value == 0 and negative_zero) else 0
    if value == 0:
        return sign, Flag(0)
    numerator, denominator = abs(value.numerator), value.denominator
    exponent = _floor_log2(numerator, denominator)  # 2**exponent <= |value| < 2**(exponent + 1)

    # Round to `precision` bits as if the exponent were unbounded: overflow and "after" tininess
    # are defined on this result.
    significand, inexact = _round_integer(numerator, denominator, exponent - fmt.fraction_bits, negative, mode)
    rounded_exponent = exponent + (significand >> fmt.precision)  # a carry into the next binade
    if rounded_exponent > fmt.emax:
        overflow = fmt.inf if _overflows_to_inf(mode, negative) else fmt.max_finite
        return sign | overflow, Flag.OVERFLOW | Flag.INEXACT
    tiny = (exponent if before else rounded_exponent) < fmt.emin
    if ftz and tiny:
        return sign, Flag.UNDERFLOW | Flag.INEXACT
    if exponent >= fmt.emin:
        significand >>= significand >> fmt.precision  # after a carry, 2**precision -> 2**fraction_bits
        biased = (rounded_exponent + fmt.bias) << fmt.fraction_bits
        return sign | biased | (significand & fmt.fraction_mask), Flag.INEXACT if inexact else Flag(0)

    # Below the normal range every value is a multiple of the smallest subnormal: round that count
    # once more, from the exact value. A count of 2**fraction_bits is the smallest normal's pattern.
    count, inexact = _round_integer(numerator, denominator, fmt.min_subnormal_exponent, negative, mode)
    flags = (Flag.INEXACT | (Flag.UNDERFLOW if tiny else Flag(0))) if inexact else Flag(0)
    return sign | count, flags


def _sqrt_stand_in(value: Fraction, precision: int) -> Fraction:
    """A rational that rounds like sqrt(value) (value > 0) at ``precision`` bits or fewer.

    sqrt(value) = sqrt(S) / 2**k with S = value * 4**k, k chosen so that every rounding boundary
    near the root at this precision (neighbours and midpoints, also on the coarser subnormal grid,
    and 2**emin) is a multiple of 2**-k. When sqrt(S) is not an integer it lies strictly between
    r = isqrt(floor(S)) and r + 1, so (r + 1/2) / 2**k rounds the same way, and is never a tie.
    """
    k = precision + 4 - _floor_log2(value.numerator, value.denominator) // 2
    scaled = value * Fraction(4) ** k
    whole, rest = divmod(scaled.numerator, scaled.denominator)
    root = math.isqrt(whole)
    if rest == 0 and root * root == whole:
        return Fraction(root, 1) / Fraction(2) ** k
    return Fraction(2 * root + 1, 2) / Fraction(2) ** k


def round_sqrt(value: Rational | int, fmt: Format | str, rounding: str | Rounding = "rne", *,
               negative_zero: bool = False, ftz: bool = False, tininess: str = "after") -> tuple[int, Flag]:
    """Bits of sqrt(``value``) rounded once to ``fmt`` (``value`` >= 0 rational), and the flags
    raised; the options are those of ``round_fraction`` (``negative_zero``: sqrt(-0) = -0).

    >>> import softfloat16 as sf
    >>> [hex(round_sqrt(2, sf.fp16, mode)[0]) for mode in ("rtz", "rup")]
    ['0x3da8', '0x3da9']
    >>> hex(round_sqrt(4, "fp16")[0]), round_sqrt(4, "fp16")[1] == 0   # exact
    ('0x4000', True)
    """
    fmt = parse_format(fmt)
    value = Fraction(value)
    if value < 0:
        raise ValueError(f"value: the square root of a negative number ({value}) is not a real number")
    if value == 0:
        return round_fraction(0, fmt, rounding, negative_zero=negative_zero)
    return round_fraction(_sqrt_stand_in(value, fmt.precision), fmt, rounding, ftz=ftz, tininess=tininess)
