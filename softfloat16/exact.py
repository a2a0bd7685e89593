"""Exact rounding of rational numbers into any Format: the independent reference.

An exact value (a ``fractions.Fraction``, or anything it accepts) goes in; the bits the format's
definition prescribes and the exception flags come out, for every rounding mode (stochastic
rounding with an explicit random integer included), with gradual underflow, overflow to inf, NaN or
max finite by the format's ``overflow``, mode, sign and ``saturate``, flush-to-zero and tininess
before or after rounding. Only the format's properties are read (signed, zero and -0, subnormals,
bias, max finite, overflow, precision-1 ties), so every combination of them is rounded, the IEEE
P3109 formats included. IEEE 754 defines the formats with its NaNs in the top binade;
docs/formats-spec.md the others (FP8 E4M3FN and the FNUZ formats, FP6/FP4, E8M0, P3109). Plain
integer arithmetic on the numerator and denominator, written from the definition of the formats:
it shares no code and no method with the Numba kernels (integer significands with a sticky bit
and one round-pack routine), so the tests and ``softfloat16.verify`` can judge them with it.

>>> from fractions import Fraction
>>> import softfloat16 as sf
>>> bits, flags = round_fraction(Fraction(1, 3), sf.fp16)
>>> hex(bits), flags
('0x3555', <Flag.INEXACT: 1>)
>>> [hex(round_fraction(65520, sf.fp16, mode)[0]) for mode in ("rne", "rtz")]   # max + half an ulp
['0x7c00', '0x7bff']
>>> [hex(round_fraction(500, "fp8_e4m3fn", saturate=s)[0]) for s in (False, True)]   # NaN or 448
['0x7f', '0x7e']
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

#: The names of stochastic rounding, read here before the library's parser: the exact reference
#: does not depend on that parser's list.
STOCHASTIC_NAMES = ("sr", "stochastic")


def _floor_log2(numerator: int, denominator: int) -> int:
    """floor(log2(numerator / denominator)) for positive integers."""
    k = numerator.bit_length() - denominator.bit_length()
    below = (numerator << -k if k < 0 else numerator) < (denominator << k if k > 0 else denominator)
    return k - 1 if below else k


class _Stochastic:
    """Stochastic rounding with the random integer drawn already: ``random`` of ``bits`` bits."""

    def __init__(self, random: int, bits: int) -> None:
        self.random, self.bits = random, bits


def _parse_mode(rounding, random, sr_bits) -> Rounding | _Stochastic:
    """The rounding mode, or the stochastic one with its random integer (checked against the spec:
    1 <= sr_bits <= 32, 0 <= random < 2**sr_bits, and a random integer only with "sr")."""
    if isinstance(rounding, str) and rounding.strip().lower() in STOCHASTIC_NAMES:
        mode = None
    else:
        mode = parse_rounding(rounding)
    if mode is not None and mode.name.lower() != STOCHASTIC_NAMES[0]:
        if random is not None:
            raise ValueError(f"random: a random integer is used only with rounding='sr', not {rounding!r}")
        return mode
    if isinstance(sr_bits, bool) or not isinstance(sr_bits, int) or not 1 <= sr_bits <= 32:
        raise ValueError(f"sr_bits: expected an integer from 1 to 32, got {sr_bits!r}")
    if random is None or isinstance(random, bool) or not 0 <= int(random) < 1 << sr_bits:
        raise ValueError(f"random: rounding='sr' needs an integer in [0, 2**{sr_bits}), got {random!r}")
    return _Stochastic(int(random), sr_bits)


def _round_integer(numerator: int, denominator: int, shift: int, negative: bool,
                   mode: Rounding | _Stochastic) -> tuple[int, bool]:
    """The positive rational (numerator / denominator) / 2**shift rounded to an integer in ``mode``
    (``negative``: the sign of the value it is the magnitude of). Returns (integer, inexact)."""
    if shift >= 0:
        denominator <<= shift
    else:
        numerator <<= -shift
    whole, rest = divmod(numerator, denominator)
    if rest == 0:
        return whole, False
    if isinstance(mode, _Stochastic):
        # d: the first R discarded bits (rest / denominator in [0, 1), read to R bits, truncated)
        discarded = (rest << mode.bits) // denominator
        up = discarded + mode.random >= 1 << mode.bits
    elif mode == Rounding.RNE:
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


def _overflow_is_max_finite(mode: Rounding | _Stochastic, negative: bool) -> bool:
    """Whether the mode rounds toward zero for this sign, so that an overflowing result is the
    largest finite value (else the format's overflow value: inf, NaN, or max finite)."""
    if isinstance(mode, _Stochastic):
        return False
    return mode in (Rounding.RTZ, Rounding.ROD) or mode == (Rounding.RUP if negative else Rounding.RDN)


def _significand_limit(fmt: Format) -> int:
    """The significand (with its leading one, ``precision`` bits) of the largest finite value: the
    formats without top NaNs or infinities use the top exponent for numbers, others all of it but
    their special codes."""
    fraction = (fmt.max_finite & fmt.fraction_mask) >> fmt.storage_shift
    return (1 << fmt.fraction_bits) | fraction


def _nan_result(fmt: Format) -> tuple[int, Flag]:
    """An invalid result (a negative value in an unsigned format, zero in E8M0): the NaN, with INVALID."""
    return fmt.default_nan, Flag.INVALID


def round_fraction(value: Rational | int, fmt: Format | str, rounding: str | Rounding = "rne", *,
                   negative_zero: bool = False, ftz: bool = False, tininess: str = "after",
                   saturate: bool = False, random: int | None = None, sr_bits: int = 32) -> tuple[int, Flag]:
    """Bits of the exact rational ``value`` rounded once to ``fmt``, and the flags raised.

    ``negative_zero`` is the sign of an exact zero (a rational has none); a nonzero value keeps
    its sign, also when it rounds to zero (except in the formats without -0, FNUZ and P3109, whose
    only zero is +0).
    ``ftz``: a tiny result (as ``tininess``, "after" or "before" rounding, detects it) becomes the
    zero of its sign with UNDERFLOW and INEXACT. UNDERFLOW is otherwise raised when the result is
    tiny and inexact. ``saturate``: overflow gives the largest finite value of the sign, never inf
    or NaN. ``rounding="sr"``: stochastic rounding with the ``sr_bits``-bit random integer
    ``random``: the magnitude is rounded up iff d + random >= 2**sr_bits, d the first ``sr_bits``
    discarded bits. Unsigned formats: a negative value gives the NaN with INVALID (also with
    ``saturate``), -0 gives +0. Formats without subnormals (E8M0: unsigned, no zero): zero gives the
    NaN with INVALID, a result below the smallest value 2**emin (rounded with an unbounded exponent)
    gives that value with UNDERFLOW | INEXACT. Precision 1 (no fraction bits): both neighbours of a
    tie 1.5 * 2**k have the significand 1; ``tie_to_even_code`` formats (P3109) round it to the
    neighbour with the even code (exponent field), the others (E8M0) up, to 2**(k+1), as the
    significand arithmetic here does (and ml_dtypes and torch); round to odd truncates.

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
    >>> hex(round_fraction(-300, "fp8_e4m3fnuz")[0]), hex(round_fraction(-300, "fp8_e4m3fnuz", saturate=True)[0])
    ('0x80', '0xff')
    >>> [hex(round_fraction(Fraction(-1, 2**n), "fp8_e4m3fnuz")[0]) for n in (10, 12)]   # +0: the only zero
    ['0x81', '0x0']
    >>> hex(round_fraction(100, "fp4_e2m1")[0]), hex(round_fraction(-100, "fp4_e2m1")[0])   # saturates
    ('0x7', '0xf')
    >>> [hex(round_fraction(x, "e8m0")[0]) for x in (1, 3, Fraction(3, 2**129), Fraction(1, 2**200))]
    ['0x7f', '0x81', '0x0', '0x0']
    >>> round_fraction(-1, "e8m0") == (0xFF, Flag.INVALID)
    True
    >>> [hex(round_fraction(x, "p3109_k8p1se")[0]) for x in (3, 6, Fraction(-1, 2**70), 2**70)]   # even codes
    ['0x42', '0x42', '0x0', '0x7f']
    >>> round_fraction(-2, "p3109_k8p3ue", saturate=True) == (0xFF, Flag.INVALID)
    True
    >>> # 11/8 into fp8_e5m2 (ulp 1/4): 5/4 (0x3d) + 1/8, half an ulp: d = 0b10 in 2 bits, up iff r >= 2
    >>> [hex(round_fraction(Fraction(11, 8), "fp8_e5m2", "sr", random=r, sr_bits=2)[0]) for r in range(4)]
    ['0x3d', '0x3d', '0x3e', '0x3e']
    """
    fmt = parse_format(fmt)
    mode = _parse_mode(rounding, random, sr_bits)
    before = parse_tininess(tininess)
    value = Fraction(value)
    negative = value < 0
    if (negative and not fmt.signed) or (value == 0 and not fmt.has_zero):
        return _nan_result(fmt)  # no negative values (-0 is +0 below), or no zero (E8M0)
    signed_zero = fmt.has_negative_zero  # else +0 is the only zero (the -0 code is a NaN, or no sign)
    sign = fmt.sign_mask if negative or (value == 0 and negative_zero and signed_zero) else 0
    if value == 0:
        return sign, Flag(0)
    numerator, denominator = abs(value.numerator), value.denominator
    exponent = _floor_log2(numerator, denominator)  # 2**exponent <= |value| < 2**(exponent + 1)

    # Round to `precision` bits as if the exponent were unbounded: overflow and "after" tininess
    # are defined on this result.
    significand, inexact = _round_integer(numerator, denominator, exponent - fmt.fraction_bits, negative, mode)
    if fmt.tie_to_even_code and mode == Rounding.RNE and \
            Fraction(numerator, denominator) == Fraction(3, 2) * Fraction(2) ** exponent:
        # precision 1: a tie between 2**exponent and 2**(exponent + 1) goes to the even code
        significand = 1 + (exponent + fmt.bias) % 2
    carry = significand >> fmt.precision  # a carry into the next binade: 2**precision
    rounded_exponent = exponent + carry
    significand >>= carry
    if (rounded_exponent, significand) > (fmt.emax, _significand_limit(fmt)):
        toward_zero = _overflow_is_max_finite(mode, negative)
        return fmt.overflow_value(negative, saturate or toward_zero), Flag.OVERFLOW | Flag.INEXACT
    tiny = (exponent if before else rounded_exponent) < fmt.emin
    if not fmt.subnormals and rounded_exponent < fmt.emin:
        # No zero and no subnormals: the smallest value (E8M0's 2**-127, pattern 0) stands in.
        return sign, Flag.UNDERFLOW | Flag.INEXACT
    if ftz and tiny:
        return (sign if signed_zero else 0), Flag.UNDERFLOW | Flag.INEXACT
    unit = 1 << fmt.storage_shift  # TF32 in FP32 layout: the pattern sits above 13 zero bits
    if exponent >= fmt.emin or not fmt.subnormals:  # E8M0 has no subnormals: one precision down to 2**-127
        biased = (rounded_exponent + fmt.bias) << fmt.fraction_bits
        fraction = significand & ((1 << fmt.fraction_bits) - 1)
        flags = (Flag.INEXACT | (Flag.UNDERFLOW if tiny else Flag(0))) if inexact else Flag(0)
        return sign | (biased | fraction) * unit, flags

    # Below the normal range every value is a multiple of the smallest subnormal: round that count
    # once more, from the exact value. A count of 2**fraction_bits is the smallest normal's pattern.
    count, inexact = _round_integer(numerator, denominator, fmt.min_subnormal_exponent, negative, mode)
    flags = (Flag.INEXACT | (Flag.UNDERFLOW if tiny else Flag(0))) if inexact else Flag(0)
    if count == 0 and not signed_zero:
        sign = 0
    return sign | count * unit, flags


def _sqrt_stand_in(value: Fraction, precision: int) -> Fraction:
    """A rational that rounds like sqrt(value) (value > 0) at ``precision`` bits or fewer.

    sqrt(value) = sqrt(S) / 2**k with S = value * 4**k, k chosen so that every rounding boundary
    near the root at this precision (neighbours and midpoints, also on the coarser subnormal grid,
    and 2**emin) is a multiple of 2**-k. When sqrt(S) is not an integer it lies strictly between
    r = isqrt(floor(S)) and r + 1, so (r + 1/2) / 2**k rounds the same way, and is never a tie.
    (Stochastic rounding reads R bits below the last place: the caller adds R to ``precision``.)
    """
    k = precision + 4 - _floor_log2(value.numerator, value.denominator) // 2
    scaled = value * Fraction(4) ** k
    whole, rest = divmod(scaled.numerator, scaled.denominator)
    root = math.isqrt(whole)
    if rest == 0 and root * root == whole:
        return Fraction(root, 1) / Fraction(2) ** k
    return Fraction(2 * root + 1, 2) / Fraction(2) ** k


def round_sqrt(value: Rational | int, fmt: Format | str, rounding: str | Rounding = "rne", *,
               negative_zero: bool = False, ftz: bool = False, tininess: str = "after",
               saturate: bool = False, random: int | None = None, sr_bits: int = 32) -> tuple[int, Flag]:
    """Bits of sqrt(``value``) rounded once to ``fmt`` (``value`` >= 0 rational), and the flags
    raised; the options are those of ``round_fraction`` (``negative_zero``: sqrt(-0) = -0).

    >>> import softfloat16 as sf
    >>> [hex(round_sqrt(2, sf.fp16, mode)[0]) for mode in ("rtz", "rup")]
    ['0x3da8', '0x3da9']
    >>> hex(round_sqrt(4, "fp16")[0]), round_sqrt(4, "fp16")[1] == 0   # exact
    ('0x4000', True)
    >>> # sqrt(2) = 1.0110101..., fp4_e2m1 keeps 1.0 (0x2): the discarded bits begin 1101 (d = 13)
    >>> sum(round_sqrt(2, "fp4_e2m1", "sr", random=r, sr_bits=4)[0] == 0x3 for r in range(16))   # up to 1.5
    13
    """
    fmt = parse_format(fmt)
    value = Fraction(value)
    if value < 0:
        raise ValueError(f"value: the square root of a negative number ({value}) is not a real number")
    options = dict(ftz=ftz, tininess=tininess, saturate=saturate, random=random, sr_bits=sr_bits)
    if value == 0:
        return round_fraction(0, fmt, rounding, negative_zero=negative_zero, **options)
    stochastic = isinstance(_parse_mode(rounding, random, sr_bits), _Stochastic)
    extra = sr_bits if stochastic else 0  # the stand-in must keep the first R discarded bits exact
    return round_fraction(_sqrt_stand_in(value, fmt.precision + extra), fmt, rounding, **options)
