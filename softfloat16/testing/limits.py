"""Strategies near the ends of a format's range: :func:`near_overflow` and :func:`near_underflow`,
single patterns or operand pairs whose exact result lies near the overflow threshold, min normal or
half the smallest subnormal.
"""
from __future__ import annotations

from fractions import Fraction

from hypothesis import assume, strategies as st

from ..compare import describe
from ..exact import round_fraction
from ..formats import Format
from .patterns import as_format, check_arithmetic, exact_bits, max_value, negate, random_signs, signed

__all__ = ["near_overflow", "near_underflow"]


def _nearest(fmt: Format, value: Fraction) -> int:
    """The nearest value's bits; a value beyond max finite is rejected (where there is no inf, the
    overflow value is a NaN or, saturating, max finite: neither is near the value), and so is a
    negative one in an unsigned format."""
    assume(abs(value) <= max_value(fmt) and (value >= 0 or fmt.signed))
    bits = round_fraction(abs(value), fmt, "rne")[0]
    return negate(fmt, bits) if value < 0 else bits


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
    negative = random_signs(draw, fmt, 2)
    p = fmt.precision
    if op in ("add", "sub"):
        # a: a representable value just below the target; b: the (small, exact) rest. Unsigned
        # sub: a just above the target, a - b
        ulp = Fraction(2) ** (max(_binary_exponent(target), fmt.emin) - p + 1)
        above = op == "sub" and not fmt.signed
        room = (max_value(fmt) - target) // ulp if above else -(-min(target, max_value(fmt)) // ulp) - 1
        assume(room >= 0)  # up to 8 steps, as many as keep a in range (precision 1: a step is a binade)
        steps = draw(st.integers(0, min(8, room))) * ulp
        a_value = target + steps if above else min(target, max_value(fmt)) - steps
        a = _nearest(fmt, a_value)
        rest = describe(a, fmt).value - target if above else target - describe(a, fmt).value
        b = _nearest(fmt, rest)
        assume(describe(b, fmt).value == rest)
        if op == "sub" and not above:
            b = negate(fmt, b)
        if negative[0]:
            a, b = negate(fmt, a), negate(fmt, b)
        return a, b
    # a free normal operand f, and the other operand rounded to make f*g or g/f near the target
    t = _binary_exponent(target)
    low, high = (t - fmt.emax, t - fmt.emin) if op == "mul" else (fmt.emin - t, fmt.emax - t)
    low, high = max(low, fmt.emin), min(high, fmt.emax)
    assume(low <= high)
    e = draw(st.integers(low, high))
    f = exact_bits(fmt, draw(st.integers(1 << (p - 1), (1 << p) - 1)), e - p + 1)
    f_value = describe(f, fmt).value
    g = _nearest(fmt, target / f_value if op == "mul" else target * f_value)
    assume(_finite_normal(fmt, g))
    f = negate(fmt, f) if negative[0] else f
    g = negate(fmt, g) if negative[1] else g
    return (f, g) if op == "mul" else (g, f)


def _check_pair_op(op: str | None) -> None:
    if op not in (None, "add", "sub", "mul", "div"):
        raise ValueError(f"op: expected None, 'add', 'sub', 'mul' or 'div', got {op!r}")


def near_overflow(fmt: Format | str, op: str | None = None) -> st.SearchStrategy:
    """Without ``op``: bit patterns within 16 ulps of +-max finite. With ``op`` (add, sub, mul,
    div): operand pairs whose exact result is within about an ulp of the overflow threshold
    max finite + half an ulp (where RNE starts returning inf, or the format's overflow value:
    in E4M3FN, whose next value up would be 480, 448 + 16 is a tie that rounds to 448). In an
    unsigned format a - b never exceeds a: with sub, the targets up to max finite.

    >>> import softfloat16 as sf
    >>> from hypothesis import find
    >>> hex(find(near_overflow(sf.fp16), lambda b: True)), hex(find(near_overflow(sf.e8m0), lambda b: True))
    ('0x7bff', '0xfe')
    """
    fmt = as_format(fmt)
    _check_pair_op(op)
    unit = 1 << fmt.storage_shift
    if op is None:
        span = max(1, min(16, (fmt.max_finite - fmt.min_normal) // unit))  # K = 3: max finite may be min normal
        return signed(fmt, st.integers(0, span - 1).map(lambda k: fmt.max_finite - k * unit), None)
    check_arithmetic(fmt)
    largest = max_value(fmt)
    ulp = Fraction(2) ** (fmt.emax - fmt.precision + 1)
    targets = [largest + ulp * Fraction(m, 4) for m in range(-2, 5)]  # max ... threshold ... one more step
    return _pair_near(fmt, op, _reachable(fmt, op, targets))


def _reachable(fmt: Format, op: str, targets: list[Fraction]) -> list[Fraction]:
    """The targets > 0 an exact result of ``op`` can reach: a sum or difference is a multiple of the
    smallest positive value (an unsigned difference is at most max finite)."""
    found = [t for t in targets if t > 0]
    if op in ("add", "sub"):
        grid = Fraction(2) ** fmt.min_subnormal_exponent
        found = [t for t in found if (t / grid).denominator == 1 and (fmt.signed or op == "add" or t <= max_value(fmt))]
    if not found:
        raise ValueError(f"op: no exact result of {op} in {fmt.name} lands near the targets")
    return found


def near_underflow(fmt: Format | str, op: str | None = None) -> st.SearchStrategy:
    """Without ``op``: bit patterns within 16 steps of +-min normal or of +-min subnormal (never
    0x80 in the FNUZ and signed P3109 formats: that is the NaN, not -0; E8M0: its 16 smallest
    values). With ``op``: pairs whose exact result is near min normal (where tininess before and
    after rounding disagree), or near half the smallest subnormal (where results round to zero;
    at precision 1, without subnormals, half the smallest value). A sum or difference lands only
    on multiples of the smallest subnormal, so only those targets are aimed at with add and sub.

    >>> import softfloat16 as sf
    >>> from hypothesis import find
    >>> hex(find(near_underflow(sf.fp16), lambda b: True))  # the simplest: min normal
    '0x400'
    """
    fmt = as_format(fmt)
    _check_pair_op(op)
    unit = 1 << fmt.storage_shift
    if op is None:
        if not fmt.has_zero:  # E8M0: its 16 smallest values
            count = min(16, (fmt.max_finite >> fmt.storage_shift) + 1)
            return signed(fmt, st.integers(0, count - 1).map(lambda k: k * unit), None)
        span = min(16, fmt.min_normal // unit)
        above = min(span - 1, (fmt.max_finite - fmt.min_normal) // unit)  # K = 3: max finite may be min normal
        around_normal = st.integers(-span, above).map(lambda k: fmt.min_normal + k * unit)
        patterns = signed(fmt, st.one_of(around_normal, st.integers(0, span).map(lambda k: k * unit)), None)
        return patterns.map(lambda b: 0 if b == fmt.sign_mask and not fmt.has_negative_zero else b)
    check_arithmetic(fmt)
    min_normal = Fraction(2) ** fmt.emin
    tiny = Fraction(2) ** (fmt.emin - fmt.precision + 1)
    targets = [min_normal * (1 - Fraction(1, 1 << fmt.precision)), min_normal - tiny / 2, min_normal,
               min_normal - tiny, tiny / 2, tiny * Fraction(3, 2)]
    targets += [t * (1 + Fraction(m, 1 << (fmt.precision + 2))) for t in targets[:2] for m in (-1, 1)]
    # precision 1 (tiny is min normal): only those up to min normal
    targets = [t for t in targets if t <= min_normal]
    return _pair_near(fmt, op, _reachable(fmt, op, targets))
