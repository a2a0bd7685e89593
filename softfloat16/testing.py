"""Tools for property tests of floating-point code: hypothesis strategies that draw *bit
patterns* (plain ints, never Python floats, so nothing is rounded on the way in) aimed at the
edge cases rounding code gets wrong, and assertion helpers with bit-level failure messages.

>>> import softfloat16 as sf
>>> from hypothesis import given, settings
>>> @given(near_midpoint(sf.fp16, "add"))
... @settings(deadline=None, max_examples=20)
... def test_add_is_symmetric(pair):
...     a, b = pair
...     assert_bits_equal(sf.fp16.add(a, b), sf.fp16.add(b, a), sf.fp16)
>>> test_add_is_symmetric()

Every strategy and helper takes any format of ``softfloat16`` (FP8, FP6, FP4, E8M0, TF32 in FP32
layout included) and draws only that format's patterns; a kind the format lacks (``inf`` in
E4M3FN, ``zero`` in E8M0) is a ValueError. docs/verification.md lists what each format offers.

Optional pytest plugin: ``pytest -p softfloat16.testing`` (or ``pytest_plugins =
["softfloat16.testing"]`` in a conftest.py) adds the fixtures ``sf_format`` (fp16, bf16, fp32)
and ``sf_rounding`` (every rounding mode). Importing this module never imports pytest; the
fixtures exist only when pytest is already running.
"""
from __future__ import annotations

import sys
from fractions import Fraction

import numpy as np
from hypothesis import assume, strategies as st

from .compare import NAN_MODES, describe, diff_report, to_bits
from .exact import round_fraction
from .formats import Format, format as parse_format
from .rounding import ROUNDING_NAMES

__all__ = [
    "KINDS", "MIDPOINT_OPS", "assert_bits_equal", "assert_within_ulp", "bits", "kinds_of", "near_midpoint",
    "near_overflow", "near_underflow", "testfloat_bits",
]

#: The classes ``bits`` can draw (``"min_subnormal"`` and ``"min_normal"`` also work). A format
#: offers those it has (``kinds(fmt)``): ``inf``, ``qnan`` and ``snan`` only the IEEE formats; ``nan``
#: every format with a NaN (in IEEE formats: quiet or signaling); E8M0 no zero and no subnormals.
KINDS = ("zero", "subnormal", "normal", "max_finite", "inf", "qnan", "snan", "nan")
_ALL_KINDS = KINDS + ("min_subnormal", "min_normal")
#: Operations ``near_midpoint`` constructs operands for.
MIDPOINT_OPS = ("add", "sub", "mul", "div", "sqrt")


def _format(fmt: Format | str) -> Format:
    return parse_format(fmt)


def _missing(fmt: Format, kind: str) -> str | None:
    """Why ``fmt`` has no pattern of ``kind`` (None if it has)."""
    what = f"{fmt.name} ({fmt.encoding} encoding)"
    if kind == "inf" and not fmt.has_inf:
        return f"{what} has no infinity"
    if kind in ("qnan", "snan", "nan") and not fmt.has_nan:
        return f"{what} has no NaN"
    if kind in ("qnan", "snan") and fmt.encoding != "ieee":
        return f"{what} has no quiet/signaling NaNs, only kind 'nan'"
    if kind == "snan" and fmt.fraction_bits < 2:
        return f"{fmt.name} has no signaling NaN"
    if kind in ("zero", "subnormal", "min_subnormal") and fmt.encoding == "e8m0":
        return f"{what} has no zero and no subnormals (0x00 is its smallest value 2^-127, kind 'min_normal')"
    return None


def kinds_of(fmt: Format | str, sign: int | None = None) -> tuple[str, ...]:
    """The kinds of ``KINDS`` that ``fmt`` has (with sign ``sign``, if given): ``bits``' default.

    >>> import softfloat16 as sf
    >>> cases = (sf.fp16, None), (sf.fp8_e4m3fnuz, None), (sf.fp8_e4m3fnuz, 1), (sf.fp4_e2m1, None), (sf.e8m0, 0)
    >>> for f, sign in cases:
    ...     print(f.name, sign, " ".join(kinds_of(f, sign)))
    fp16 None zero subnormal normal max_finite inf qnan snan
    fp8_e4m3fnuz None zero subnormal normal max_finite nan
    fp8_e4m3fnuz 1 subnormal normal max_finite nan
    fp4_e2m1 None zero subnormal normal max_finite
    e8m0 0 normal max_finite nan
    """
    fmt = _format(fmt)
    found = tuple(k for k in KINDS if _missing(fmt, k) is None and _sign_problem(fmt, k, sign) is None)
    return tuple(k for k in found if k != "nan" or "qnan" not in found)  # qnan + snan are the IEEE NaNs


def _sign_problem(fmt: Format, kind: str, sign: int | None) -> str | None:
    """Why a pattern of ``kind`` cannot have sign ``sign`` in ``fmt`` (None if it can)."""
    if sign is None:
        return None
    if sign not in (0, 1):
        return f"sign: expected 0, 1 or None, got {sign!r}"
    if sign and not fmt.signed:
        return f"sign: {fmt.name} is unsigned: it has no negative patterns"
    if sign and kind == "zero" and not fmt.has_negative_zero:
        return f"sign: {fmt.name} has no -0 (0x{fmt.sign_mask:x}, the pattern of -0, is its NaN)"
    return None


def _signed(fmt: Format, magnitude: st.SearchStrategy, sign: int | None) -> st.SearchStrategy:
    """Magnitude patterns with a sign bit drawn (or ``sign``); unsigned E8M0 keeps them as they are."""
    if not fmt.signed:
        return magnitude
    signs = st.sampled_from((0, 1)) if sign is None else st.just(int(sign))
    return st.builds(lambda m, s: m | (fmt.sign_mask if s else 0), magnitude, signs)


def _units(fmt: Format, low: int, high: int) -> st.SearchStrategy[int]:
    """Patterns ``low..high`` counted in steps of the format's lowest bit (2^13 for TF32 in FP32
    layout: patterns whose low 13 bits are not zero are not TF32 values)."""
    shift = fmt.storage_shift
    return st.integers(low >> shift, high >> shift).map(lambda k: k << shift)


def bits(fmt: Format | str, kinds: tuple[str, ...] | None = None, sign: int | None = None) -> st.SearchStrategy[int]:
    """Bit patterns of ``fmt`` drawn from each class in ``kinds`` (default: every kind the format
    has, ``kinds_of(fmt, sign)``), of either sign (or ``sign``). A kind the format
    lacks (``inf`` in E4M3FN, ``zero`` in E8M0, ``-0`` in the FNUZ formats) is a ValueError. The
    one NaN of the FNUZ formats (0x80) and of E8M0 (0xff) is drawn as it is, whatever ``sign``.

    >>> import softfloat16 as sf
    >>> from hypothesis import find
    >>> from softfloat16.compare import classify
    >>> classify(find(bits(sf.fp16, kinds=("snan",)), lambda b: True), sf.fp16)
    'snan'
    >>> [hex(find(bits(f, kinds=("nan",), sign=0), lambda b: True)) for f in (sf.fp8_e4m3fn, sf.fp8_e4m3fnuz)]
    ['0x7f', '0x80']
    >>> bits(sf.fp8_e4m3fn, kinds=("inf",))
    Traceback (most recent call last):
    ValueError: kinds: fp8_e4m3fn (fn encoding) has no infinity
    """
    fmt = _format(fmt)
    kinds = kinds_of(fmt, sign) if kinds is None else tuple(kinds)
    unknown = set(kinds) - set(_ALL_KINDS)
    if not kinds or unknown:
        raise ValueError(f"kinds: unknown {sorted(unknown) or 'empty'}; accepted: {', '.join(_ALL_KINDS)}")
    for k in kinds:
        problem = _missing(fmt, k)
        if problem:
            raise ValueError(f"kinds: {problem}")
        problem = _sign_problem(fmt, k, sign)
        if problem:
            raise ValueError(problem)
    unit, quiet = 1 << fmt.storage_shift, fmt.quiet_bit
    ieee_nan = fmt.exponent_mask  # the NaNs of an IEEE format: this exponent, a nonzero fraction
    magnitudes = {
        "zero": st.just(0),
        "subnormal": _units(fmt, unit, fmt.min_normal - unit),
        "normal": _units(fmt, fmt.min_normal, fmt.max_finite - unit),  # max finite is its own kind
        "max_finite": st.just(fmt.max_finite),
        "min_subnormal": st.just(unit),
        "min_normal": st.just(fmt.min_normal),
        "nan": st.just(fmt.default_nan),  # E4M3FN: S.1111.111, the sign drawn below
    }
    if fmt.encoding == "ieee":
        magnitudes.update({
            "inf": st.just(fmt.inf),
            "qnan": _units(fmt, ieee_nan | quiet, ieee_nan | (2 * quiet - unit)),
            "snan": _units(fmt, ieee_nan + unit, ieee_nan | (quiet - unit)),
        })
        magnitudes["nan"] = st.one_of(magnitudes["qnan"], magnitudes["snan"])
    strategies = []
    for k in kinds:
        # The FNUZ formats' only zero is +0 (0x80 is the NaN); their NaN and E8M0's are one pattern.
        as_is = (k == "zero" and not fmt.has_negative_zero) or (k == "nan" and fmt.encoding in ("fnuz", "e8m0"))
        strategies.append(magnitudes[k] if as_is else _signed(fmt, magnitudes[k], sign))
    return st.one_of(strategies)


def testfloat_bits(fmt: Format | str) -> st.SearchStrategy[int]:
    """TestFloat-style patterns: extreme and near-bias exponent fields combined with significands
    made of runs of ones and zeros (leading run, trailing run, single bits, their complements).
    Every pattern is one of the format's (its NaNs included: 0x80 in the FNUZ formats); E8M0 has
    only the exponent field.

    >>> import softfloat16 as sf
    >>> from hypothesis import find
    >>> hex(find(testfloat_bits(sf.bf16), lambda b: b >> 15 and b & 0x7F == 0x7F))  # -, all ones
    '0x807f'
    """
    fmt = _format(fmt)
    f, top = fmt.fraction_bits, (1 << fmt.exponent_bits) - 1
    ones = (1 << f) - 1
    near = {0, 1, 2, fmt.bias - 1, fmt.bias, fmt.bias + 1, top - 2, top - 1, top}
    special_exponents = sorted(near & set(range(top + 1)))  # FP4 E2M1 has exponents 0..3 only
    exponent = st.one_of(st.sampled_from(special_exponents), st.integers(0, top))
    if f == 0:  # E8M0: no significand to vary
        return exponent
    run = st.integers(0, f)
    significand = st.one_of(
        st.sampled_from((0, ones)),
        run.map(lambda k: ((1 << k) - 1) << (f - k)),            # leading ones
        run.map(lambda k: (1 << k) - 1),                          # trailing ones
        st.integers(0, f - 1).map(lambda i: 1 << i),              # one bit
        st.integers(0, f - 1).map(lambda i: ones ^ (1 << i)),     # one zero
        st.tuples(run, run).map(lambda ij: (((1 << ij[0]) - 1) << (f - ij[0])) | ((1 << ij[1]) - 1)),
        st.integers(0, ones),
    )
    pattern = st.builds(lambda e, s: ((e << f) | s) << fmt.storage_shift, exponent, significand)
    return _signed(fmt, pattern, None)


testfloat_bits.__test__ = False  # not a test, though pytest would collect it by its name


# --- exact construction helpers ---------------------------------------------------------------

def _exact_bits(fmt: Format, integer: int, exponent: int, negative: bool = False) -> int:
    """Bits of (-1)^negative * integer * 2^exponent, which must be representable. A value above
    max finite is rejected (``assume``): in E4M3FN the top binade ends one step early, at 448."""
    value = Fraction(integer) * Fraction(2) ** exponent
    assume(value <= _max_value(fmt))
    bits, _ = round_fraction(value, fmt, "rtz", negative_zero=negative)
    if describe(bits, fmt).value != value:
        raise AssertionError(f"internal: {value} is not representable in {fmt.name}")
    return _negate(fmt, bits) if negative else bits


def _max_value(fmt: Format) -> Fraction:
    return describe(fmt.max_finite, fmt).value


def _negate(fmt: Format, bits: int) -> int:
    """The pattern of -value (a zero stays +0 in the FNUZ formats, where 0x80 is the NaN)."""
    if bits == 0 and not fmt.has_negative_zero:
        return 0
    return bits ^ fmt.sign_mask


def _check_arithmetic(fmt: Format) -> None:
    if fmt.encoding == "e8m0":
        raise ValueError(f"fmt: {fmt.name} is a scale format without arithmetic: it has no operands to construct")


def _odd(draw, low: int, high: int) -> int:
    """An odd integer in [low, high] (which must contain one)."""
    low += low % 2 == 0
    high -= high % 2 == 0
    assume(low <= high)
    return low + 2 * draw(st.integers(0, (high - low) // 2))


def _exponent_range(fmt: Format, length: int) -> tuple[int, int]:
    """x such that an odd integer of ``length`` bits times 2^x is representable."""
    return fmt.emin - fmt.precision + 1, fmt.emax - length + 1


def _split_exponent(draw, fmt: Format, total: int, a_length: int, b_length: int) -> tuple[int, int]:
    """x + y = total with both a * 2^x and b * 2^y representable."""
    x_low, x_high = _exponent_range(fmt, a_length)
    y_low, y_high = _exponent_range(fmt, b_length)
    low, high = max(x_low, total - y_high), min(x_high, total - y_low)
    assume(low <= high)
    x = draw(st.integers(low, high))
    return x, total - x


def _inverse_mod_pow2(a: int, k: int) -> int:
    return pow(a, -1, 1 << k)


def _sqrt_mod_pow2(c: int, k: int) -> int:
    """x with x*x = c (mod 2^k), for c = 1 (mod 8): Hensel lifting one bit at a time."""
    x = 1
    for j in range(3, k):
        if (x * x - c) % (1 << (j + 1)):
            x += 1 << (j - 1)
    return x % (1 << k)


@st.composite
def _add_pair(draw, fmt: Format, where: str, op: str):
    # a = A ulps of size u (A has p bits); |b| = (k + 1/2) u, plus or minus an offset delta far
    # below u. Kept inside a's binade, a + b is then exactly a midpoint (plus delta).
    p = fmt.precision
    if where == "on":
        q, j, nudge = 2 * draw(st.integers(0, (1 << (p - 1)) - 1)) + 1, 1, 0
    else:  # small q so that |b| = q u/2 +- u 2^-j still fits in p bits with a tiny offset
        q = draw(st.sampled_from([q for q in (1, 3, 5, 7) if q.bit_length() < p]))
        j = p - q.bit_length() + 1
        nudge = draw(st.sampled_from((-1, 1)))
    k = q // 2
    b_positive = draw(st.booleans())
    if b_positive:   # lower neighbour A + k, at most the binade's last value
        A = draw(st.integers(1 << (p - 1), (1 << p) - 1 - k))
    else:            # lower neighbour A - k - 1 stays in the binade
        assume((1 << (p - 1)) + k + 1 <= (1 << p) - 1)
        A = draw(st.integers((1 << (p - 1)) + k + 1, (1 << p) - 1))
    assume(fmt.emin + j <= fmt.emax)  # in a format of few exponents (FP6 E2M3) not every q fits
    e = draw(st.integers(fmt.emin + j, fmt.emax))
    negative = draw(st.booleans())
    a = _exact_bits(fmt, A, e - p + 1, negative)
    b = _exact_bits(fmt, q * (1 << (j - 1)) + nudge, e - p + 1 - j, negative != (not b_positive))
    if op == "sub":
        b = _negate(fmt, b)
    return (a, b) if draw(st.booleans()) or op == "sub" else (b, a)


@st.composite
def _mul_pair(draw, fmt: Format, where: str):
    p = fmt.precision
    signs = draw(st.booleans()), draw(st.booleans())
    if where == "on" and draw(st.booleans()):
        # subnormal result: T * 2^(emin - p), T odd < 2^p, half-way between subnormals
        a_odd = _odd(draw, 1, (1 << p) - 1)
        b_odd = _odd(draw, 1, ((1 << p) - 1) // a_odd)
        x, y = _split_exponent(draw, fmt, fmt.emin - p, a_odd.bit_length(), b_odd.bit_length())
    elif where == "on":
        # the product of odd parts has exactly p + 1 bits: its last bit is the half-ulp bit
        a_odd = _odd(draw, 1, (1 << p) - 1)
        b_odd = _odd(draw, -(-(1 << p) // a_odd), min((1 << p) - 1, ((1 << (p + 1)) - 1) // a_odd))
        e = draw(st.integers(fmt.emin, fmt.emax))  # result exponent = p + x + y
        x, y = _split_exponent(draw, fmt, e - p, a_odd.bit_length(), b_odd.bit_length())
    else:
        # p-bit odd A, B whose product's g bits below the result's last place read 10...01 or
        # 01...11: B = pattern * A^-1 (mod 2^g)
        a_odd = _odd(draw, (1 << (p - 1)) + 1, (1 << p) - 1)
        g = draw(st.sampled_from([g for g in (p, p - 1) if g >= 2]))  # one bit has no 10...01 (FP4: p = 2)
        pattern = (1 << (g - 1)) + draw(st.sampled_from((-1, 1)))
        b_odd = pattern * _inverse_mod_pow2(a_odd, g) % (1 << g)
        if g == p - 1:
            b_odd += 1 << (p - 1)
        assume(b_odd >> (p - 1) == 1 and (a_odd * b_odd).bit_length() == p + g)
        e = draw(st.integers(fmt.emin, fmt.emax))
        x, y = _split_exponent(draw, fmt, e - (p + g - 1), p, p)
    return _exact_bits(fmt, a_odd, x, signs[0]), _exact_bits(fmt, b_odd, y, signs[1])


@st.composite
def _div_pair(draw, fmt: Format, where: str):
    p = fmt.precision
    signs = draw(st.booleans()), draw(st.booleans())
    if where == "on":
        # a binary quotient is never a normal midpoint (it would need p + 1 bits), but a
        # subnormal one can be: a / b = T * 2^(emin - p) with T odd, T * b_odd < 2^p
        t = _odd(draw, 1, (1 << p) - 1)
        b_odd = _odd(draw, 1, ((1 << p) - 1) // t)
        y_low, y_high = _exponent_range(fmt, b_odd.bit_length())
        a_low, a_high = _exponent_range(fmt, (t * b_odd).bit_length())
        low, high = max(y_low, a_low - fmt.emin + p), min(y_high, a_high - fmt.emin + p)
        assume(low <= high)
        y = draw(st.integers(low, high))
        return _exact_bits(fmt, t * b_odd, y + fmt.emin - p, signs[0]), _exact_bits(fmt, b_odd, y, signs[1])
    # Q odd with p + 1 bits is a midpoint; choose Q with Q * B = -s (mod 2^(p+1)), then
    # A = (Q * B + s) / 2^(p+1) is an integer and A / B = (Q + s/B) / 2^(p+1).
    b_odd = _odd(draw, (1 << (p - 1)) + 1, (1 << p) - 1)
    s = draw(st.sampled_from((-1, 1)))
    q = (-s * _inverse_mod_pow2(b_odd, p + 1)) % (1 << (p + 1))
    assume(q >> p == 1)
    a_int = (q * b_odd + s) >> (p + 1)
    e = draw(st.integers(fmt.emin, fmt.emax))  # result exponent = x - y - 1
    x_low, x_high = _exponent_range(fmt, a_int.bit_length())
    y_low, y_high = _exponent_range(fmt, p)
    low, high = max(x_low, e + 1 + y_low), min(x_high, e + 1 + y_high)
    assume(low <= high)
    x = draw(st.integers(low, high))
    return _exact_bits(fmt, a_int, x, signs[0]), _exact_bits(fmt, b_odd, x - e - 1, signs[1])


@st.composite
def _sqrt_operand(draw, fmt: Format):
    # sqrt is never exactly a midpoint; Q odd with p + 1 bits and Q^2 + r = A * 2^(p+2) for a
    # small r = 7 (mod 8) put sqrt(A * 2^(p+2)) = Q + r/(2Q) right next to the midpoint Q.
    p = fmt.precision
    r = draw(st.sampled_from((-1, 7, -9, 15)))
    modulus = 1 << (p + 2)
    root = _sqrt_mod_pow2((-r) % modulus, p + 2)
    q = draw(st.sampled_from((root, modulus - root, root ^ (modulus >> 1), (modulus - root) ^ (modulus >> 1))))
    assume(q >> p == 1)
    a_int = (q * q + r) >> (p + 2)
    x_low, x_high = _exponent_range(fmt, a_int.bit_length())
    low, high = -(-(x_low - p - 2) // 2), (x_high - p - 2) // 2
    assume(low <= high)
    half = draw(st.integers(low, high))
    return (_exact_bits(fmt, a_int, p + 2 + 2 * half),)


def near_midpoint(fmt: Format | str, op: str, where: tuple[str, ...] = ("on", "near")) -> st.SearchStrategy[tuple]:
    """Operands (a tuple of bit patterns: ``(a, b)``, or ``(a,)`` for sqrt) whose exact result
    lies exactly on a rounding midpoint (``"on"``) or strictly within 2^(2-p) ulp of one
    (``"near"``; p = precision). Built arithmetically, so every draw is a hard case:

    - add/sub: a = A ulps, b = (k + 1/2) ulps (+- a bit far below), kept inside a's binade
      (this includes max finite + half an ulp, the RNE overflow threshold);
    - mul: odd significands whose product has exactly p + 1 bits (on), or whose low bits are
      10...01 / 01...11, solved with a modular inverse (near); subnormal midpoints too;
    - div: quotients Q + s/B with Q odd of p + 1 bits (near); exact midpoints exist only among
      subnormal results (on);
    - sqrt: only "near" exists; Q^2 + r with r = 7 (mod 8) solved by Hensel lifting.

    >>> import softfloat16 as sf
    >>> from hypothesis import find
    >>> a, b = find(near_midpoint(sf.fp16, "mul", where=("on",)), lambda ab: True)
    >>> bool(sf.fp16.mul(a, b, rounding="rtz") != sf.fp16.mul(a, b, rounding="rup"))  # inexact
    True
    """
    fmt = _format(fmt)
    _check_arithmetic(fmt)
    if op not in MIDPOINT_OPS:
        raise ValueError(f"op: unknown op {op!r}; accepted: {', '.join(MIDPOINT_OPS)}")
    where = tuple(where)
    if not where or set(where) - {"on", "near"}:
        raise ValueError(f"where: expected a non-empty subset of ('on', 'near'), got {where!r}")
    if op == "sqrt":
        if "near" not in where:
            raise ValueError("where: a square root is never exactly a midpoint; use where=('near',)")
        return _sqrt_operand(fmt)
    strategies = []
    for w in where:
        if op in ("add", "sub"):
            strategies.append(_add_pair(fmt, w, op))
        elif op == "mul":
            strategies.append(_mul_pair(fmt, w))
        else:
            strategies.append(_div_pair(fmt, w))
    return st.one_of(strategies)


# --- near overflow / underflow -------------------------------------------------------------------

def _nearest(fmt: Format, value: Fraction) -> int:
    """The nearest value's bits; a value beyond max finite is rejected (where there is no inf, the
    overflow value is a NaN or, saturating, max finite: neither is near the value)."""
    assume(abs(value) <= _max_value(fmt))
    return round_fraction(value, fmt, "rne")[0]


def _finite_normal(fmt: Format, b: int) -> bool:
    return bool(fmt.is_normal(b))


def _binary_exponent(x: Fraction) -> int:
    """floor(log2(x)) for x > 0."""
    e = x.numerator.bit_length() - x.denominator.bit_length()
    return e - 1 if Fraction(2) ** e > x else e


@st.composite
def _pair_near(draw, fmt: Format, op: str, targets: list[Fraction]):
    """Operands whose exact result is within about an ulp of one of ``targets`` (> 0)."""
    target = draw(st.sampled_from(targets))
    negative = draw(st.booleans()), draw(st.booleans())
    p = fmt.precision
    if op in ("add", "sub"):
        # a: a representable value just below the target; b: the (small, exact) rest
        ulp = Fraction(2) ** (max(_binary_exponent(target), fmt.emin) - p + 1)
        a_value = min(target, _max_value(fmt)) - draw(st.integers(0, 8)) * ulp
        assume(a_value > 0)
        a = _nearest(fmt, a_value)
        rest = target - describe(a, fmt).value
        b = _nearest(fmt, rest)
        assume(describe(b, fmt).value == rest)
        if op == "sub":
            b = _negate(fmt, b)
        if negative[0]:
            a, b = _negate(fmt, a), _negate(fmt, b)
        return a, b
    # a free normal operand f, and the other operand rounded to make f*g or g/f near the target
    t = _binary_exponent(target)
    low, high = (t - fmt.emax, t - fmt.emin) if op == "mul" else (fmt.emin - t, fmt.emax - t)
    low, high = max(low, fmt.emin), min(high, fmt.emax)
    assume(low <= high)
    e = draw(st.integers(low, high))
    f = _exact_bits(fmt, draw(st.integers(1 << (p - 1), (1 << p) - 1)), e - p + 1)
    f_value = describe(f, fmt).value
    g = _nearest(fmt, target / f_value if op == "mul" else target * f_value)
    assume(_finite_normal(fmt, g))
    f = _negate(fmt, f) if negative[0] else f
    g = _negate(fmt, g) if negative[1] else g
    return (f, g) if op == "mul" else (g, f)


def _check_pair_op(op: str | None) -> None:
    if op not in (None, "add", "sub", "mul", "div"):
        raise ValueError(f"op: expected None, 'add', 'sub', 'mul' or 'div', got {op!r}")


def near_overflow(fmt: Format | str, op: str | None = None) -> st.SearchStrategy:
    """Without ``op``: bit patterns within 16 ulps of +-max finite. With ``op`` (add, sub, mul,
    div): operand pairs whose exact result is within about an ulp of the overflow threshold
    max finite + half an ulp (where RNE starts returning inf, or the format's overflow value:
    in E4M3FN, whose next value up would be 480, 448 + 16 is a tie that rounds to 448).

    >>> import softfloat16 as sf
    >>> from hypothesis import find
    >>> hex(find(near_overflow(sf.fp16), lambda b: True)), hex(find(near_overflow(sf.e8m0), lambda b: True))
    ('0x7bff', '0xfe')
    """
    fmt = _format(fmt)
    _check_pair_op(op)
    unit = 1 << fmt.storage_shift
    if op is None:
        span = min(16, (fmt.max_finite - fmt.min_normal) // unit)
        return _signed(fmt, st.integers(0, span - 1).map(lambda k: fmt.max_finite - k * unit), None)
    _check_arithmetic(fmt)
    max_value = _max_value(fmt)
    ulp = Fraction(2) ** (fmt.emax - fmt.precision + 1)
    targets = [max_value + ulp * Fraction(m, 4) for m in range(-2, 5)]  # max ... threshold ... one more step
    return _pair_near(fmt, op, targets)


def near_underflow(fmt: Format | str, op: str | None = None) -> st.SearchStrategy:
    """Without ``op``: bit patterns within 16 steps of +-min normal or of +-min subnormal (never
    0x80 in the FNUZ formats: that is the NaN, not -0; E8M0: its 16 smallest values). With
    ``op``: pairs whose exact result is near min normal (where tininess before and after
    rounding disagree), or near half the smallest subnormal (where results round to zero).

    >>> import softfloat16 as sf
    >>> from hypothesis import find
    >>> hex(find(near_underflow(sf.fp16), lambda b: True))  # the simplest: min normal
    '0x400'
    """
    fmt = _format(fmt)
    _check_pair_op(op)
    unit = 1 << fmt.storage_shift
    if op is None:
        if fmt.encoding == "e8m0":
            return st.integers(0, 15)
        span = min(16, fmt.min_normal // unit)
        around_normal = st.integers(-span, span - 1).map(lambda k: fmt.min_normal + k * unit)
        patterns = _signed(fmt, st.one_of(around_normal, st.integers(0, span).map(lambda k: k * unit)), None)
        return patterns.map(lambda b: 0 if b == fmt.sign_mask and not fmt.has_negative_zero else b)
    _check_arithmetic(fmt)
    min_normal = Fraction(2) ** fmt.emin
    tiny = Fraction(2) ** (fmt.emin - fmt.precision + 1)
    targets = [min_normal * (1 - Fraction(1, 1 << fmt.precision)), min_normal - tiny / 2, min_normal,
               min_normal - tiny, tiny / 2, tiny * Fraction(3, 2)]
    targets += [t * (1 + Fraction(m, 1 << (fmt.precision + 2))) for t in targets[:2] for m in (-1, 1)]
    return _pair_near(fmt, op, targets)


# --- assertion helpers ---------------------------------------------------------------------------

def _check_shapes(actual, expected) -> None:
    a, e = np.shape(actual), np.shape(expected)
    try:
        np.broadcast_shapes(a, e)
    except ValueError:
        raise AssertionError(f"shapes {a} and {e} do not broadcast") from None


def assert_bits_equal(actual, expected, fmt: Format | str, nan: str = "class", max_rows: int = 10,
                      err_msg: str = "") -> None:
    """Assert two arrays of bit patterns are equal; NaNs compare by ``nan`` (``"class"``: both
    quiet or both signaling; ``"strict"``: bit for bit; ``"any"``). The message lists, for the
    first ``max_rows`` differences, the index, both patterns in hex, their values and fields,
    and the ulp distance.

    >>> import softfloat16 as sf
    >>> assert_bits_equal([0x3C00, 0x7E00], [0x3C00, 0x7E01], sf.fp16)
    >>> assert_bits_equal([0x3C01], [0x3C00], sf.fp16)
    Traceback (most recent call last):
    AssertionError: Bit patterns not equal (fp16)
    Mismatched elements: 1 / 1 (100%) [fp16, nan='class']
    Max ulp distance: 1
     index (0,): actual   0x3c01 = 1.0009765625 [0 01111 0000000001] normal
                 expected 0x3c00 = 1.0 [0 01111 0000000000] normal
                 ulp distance 1
    """
    fmt = _format(fmt)
    if nan not in NAN_MODES:
        raise ValueError(f"nan: unknown NaN comparison {nan!r}; accepted: {', '.join(NAN_MODES)}")
    _check_shapes(actual, expected)
    header = f"Bit patterns not equal ({fmt.name})" + (f": {err_msg}" if err_msg else "")
    report = diff_report(to_bits(actual, fmt, "actual"), to_bits(expected, fmt, "expected"), fmt,
                         nan=nan, max_rows=max_rows, header=header)
    if report:
        raise AssertionError(report)


def assert_within_ulp(actual, expected, fmt: Format | str, ulp: int = 1, nan: str = "class",
                      max_rows: int = 10, err_msg: str = "") -> None:
    """Assert every element of ``actual`` is at most ``ulp`` representable steps from
    ``expected`` (see ``softfloat16.compare.ulp_distance``: +0 and -0 are 0 apart, max finite and
    inf 1 apart); NaNs must match NaNs, compared by ``nan``.

    >>> import softfloat16 as sf
    >>> assert_within_ulp([0x3C01, 0x8000], [0x3C00, 0x0000], sf.fp16, ulp=1)
    >>> assert_within_ulp([0x3C03], [0x3C00], sf.fp16, ulp=2)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    AssertionError: Not within 2 ulp (fp16)
    ...
                 ulp distance 3
    """
    fmt = _format(fmt)
    if ulp < 0:
        raise ValueError(f"ulp: expected a non-negative number of ulps, got {ulp}")
    if nan not in NAN_MODES:
        raise ValueError(f"nan: unknown NaN comparison {nan!r}; accepted: {', '.join(NAN_MODES)}")
    _check_shapes(actual, expected)
    header = f"Not within {ulp} ulp ({fmt.name})" + (f": {err_msg}" if err_msg else "")
    report = diff_report(to_bits(actual, fmt, "actual"), to_bits(expected, fmt, "expected"), fmt,
                         nan=nan, max_rows=max_rows, ulp=ulp, header=header)
    if report:
        raise AssertionError(report)


# --- optional pytest plugin -------------------------------------------------------------------------

def _define_fixtures(pytest) -> None:
    @pytest.fixture(params=("fp16", "bf16", "fp32"))
    def sf_format(request) -> Format:
        """Each of the 16- and 32-bit formats in turn."""
        return parse_format(request.param)

    @pytest.fixture(params=ROUNDING_NAMES)
    def sf_rounding(request) -> str:
        """Each rounding mode name in turn."""
        return request.param

    globals().update(sf_format=sf_format, sf_rounding=sf_rounding)


if "pytest" in sys.modules:  # loaded by `pytest -p softfloat16.testing` or from a test run
    _define_fixtures(sys.modules["pytest"])
