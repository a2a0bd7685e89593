"""Operands whose exact result lies on or next to a rounding midpoint: :func:`near_midpoint`.

Every case is built arithmetically (odd significands, modular inverses, Hensel lifting, exact
midpoints of the destination format), so every draw is a hard case for the rounding.
"""
from __future__ import annotations

import bisect
from fractions import Fraction

from hypothesis import assume, strategies as st

from ..formats import Format, format as parse_format
from .patterns import as_format, check_arithmetic, exact_bits, max_value, random_signs

__all__ = ["MIDPOINT_OPS", "near_midpoint"]

#: Operations ``near_midpoint`` constructs operands for.
MIDPOINT_OPS = ("add", "sub", "mul", "div", "sqrt", "convert")


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
    if p == 1:
        return draw(_add_pair_one_bit(fmt, where, op))
    if where == "on":
        q, j, nudge = 2 * draw(st.integers(0, (1 << (p - 1)) - 1)) + 1, 1, 0
    else:  # small q so that |b| = q u/2 +- u 2^-j still fits in p bits with a tiny offset
        q = draw(st.sampled_from([q for q, _ in _near_offsets(fmt)]))
        j = dict(_near_offsets(fmt))[q]
        nudge = draw(st.sampled_from((-1, 1)))
    k = q // 2
    # unsigned: a + b with b > 0 (add), a - |b| with a sum's b < 0 (sub)
    b_positive = draw(st.booleans()) if fmt.signed else op == "add"
    if b_positive:   # lower neighbour A + k, at most the binade's last value
        A = draw(st.integers(1 << (p - 1), (1 << p) - 1 - k))
    else:            # lower neighbour A - k - 1 stays in the binade
        assume((1 << (p - 1)) + k + 1 <= (1 << p) - 1)
        A = draw(st.integers((1 << (p - 1)) + k + 1, (1 << p) - 1))
    assume(fmt.emin + j <= fmt.emax)
    e = draw(st.integers(fmt.emin + j, fmt.emax))
    (negative,) = random_signs(draw, fmt, 1)
    a = exact_bits(fmt, A, e - p + 1, negative)
    # b's sign in the sum a + b, flipped for the operand of a - b
    b = exact_bits(fmt, q * (1 << (j - 1)) + nudge, e - p + 1 - j, (negative != (not b_positive)) != (op == "sub"))
    return (a, b) if draw(st.booleans()) or op == "sub" else (b, a)


def _near_offsets(fmt: Format) -> list[tuple[int, int]]:
    """(q, j) of the sums near a midpoint: |b| = q u/2 +- u 2^-j fits in p bits, and a's binade is j
    above emin (a format of few exponents, FP6 E2M3, has a smaller j: a larger offset), with the
    offset 2^-j ulp at most 2^(2-p) ulp and below half an ulp."""
    p, span = fmt.precision, fmt.emax - fmt.emin
    offsets = [(q, min(p - q.bit_length() + 1, span)) for q in (1, 3, 5, 7) if q.bit_length() < p]
    return [(q, j) for q, j in offsets if j >= max(2, p - 2)]


@st.composite
def _add_pair_one_bit(draw, fmt: Format, where: str, op: str):
    # Precision 1: every value is a power of two, the midpoints are 1.5 * 2^e. On one: 2^e + 2^(e-1)
    # or 2^(e+1) - 2^(e-1); the nearest two values come without being on one, a quarter ulp away:
    # 2^e + 2^(e-2) = 1.25 * 2^e and 2^(e+1) - 2^(e-2) = 1.75 * 2^e.
    d = 1 if where == "on" else 2
    b_positive = draw(st.booleans()) if fmt.signed else op == "add"
    high = fmt.emax if b_positive else fmt.emax - 1
    assume(fmt.emin + d <= high)
    e = draw(st.integers(fmt.emin + d, high))
    (negative,) = random_signs(draw, fmt, 1)
    a = exact_bits(fmt, 1, e if b_positive else e + 1, negative)
    b = exact_bits(fmt, 1, e - d, (negative != (not b_positive)) != (op == "sub"))
    return (a, b) if draw(st.booleans()) or op == "sub" else (b, a)


@st.composite
def _mul_pair(draw, fmt: Format, where: str):
    p = fmt.precision
    signs = random_signs(draw, fmt, 2)
    if where == "on" and (p == 1 or draw(st.booleans())):
        # subnormal result: T * 2^(emin - p), T odd < 2^p, half-way between subnormals (precision 1:
        # only the midpoint between 0 and the smallest value; no product of powers of two is another)
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
    return exact_bits(fmt, a_odd, x, signs[0]), exact_bits(fmt, b_odd, y, signs[1])


@st.composite
def _div_pair(draw, fmt: Format, where: str):
    p = fmt.precision
    signs = random_signs(draw, fmt, 2)
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
        return exact_bits(fmt, t * b_odd, y + fmt.emin - p, signs[0]), exact_bits(fmt, b_odd, y, signs[1])
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
    return exact_bits(fmt, a_int, x, signs[0]), exact_bits(fmt, b_odd, x - e - 1, signs[1])


def _sqrt_choices(fmt: Format):
    """(r, q, a_int, low, high) of each way ``_sqrt_operand`` can go, for the precision p >= 2."""
    p = fmt.precision
    modulus = 1 << (p + 2)
    for r in (-1, 7, -9, 15):
        root = _sqrt_mod_pow2((-r) % modulus, p + 2)
        for q in (root, modulus - root, root ^ (modulus >> 1), (modulus - root) ^ (modulus >> 1)):
            if q >> p != 1:
                continue
            a_int = (q * q + r) >> (p + 2)
            x_low, x_high = _exponent_range(fmt, a_int.bit_length())
            yield r, q, a_int, -(-(x_low - p - 2) // 2), (x_high - p - 2) // 2


def _impossible(fmt: Format, op: str, where: str) -> str | None:
    """Why no operands of ``op`` in ``fmt`` have a result ``where`` ("on" or "near") a midpoint
    (None if some have): a format of few exponents (P3109 with K = 3, or P close to K) can lack room."""
    p, emin, emax = fmt.precision, fmt.emin, fmt.emax
    few = f"{fmt.name} has too few exponents (emin {emin}, emax {emax})"
    if op in ("add", "sub") and p == 1:
        top = emax - (op == "sub" and not fmt.signed)  # unsigned a - b: a one binade up
        if emin + (1 if where == "on" else 2) > top:
            return f"{few} for a sum of its powers of two {where} a midpoint"
    elif op in ("add", "sub") and where == "on" and emin + 1 > emax:
        return f"{few}: one binade, where every sum of two values is exact or overflows"
    elif op in ("add", "sub") and where == "near" and not _near_offsets(fmt):
        return f"{few} for a sum within 2^(2-p) ulp of a midpoint without being on it"
    elif op == "div" and where == "on" and max(emin - p + 1, 1) > min(emax, emax - emin + p):
        return f"{few} for a quotient on a midpoint (only subnormal quotients can be on one)"
    elif op == "sqrt" and p > 1 and all(low > high for *_, low, high in _sqrt_choices(fmt)):
        return f"{few} for the square roots near a midpoint that near_midpoint builds"
    return None


@st.composite
def _sqrt_operand(draw, fmt: Format):
    # sqrt is never exactly a midpoint; Q odd with p + 1 bits and Q^2 + r = A * 2^(p+2) for a
    # small r = 7 (mod 8) put sqrt(A * 2^(p+2)) = Q + r/(2Q) right next to the midpoint Q.
    p = fmt.precision
    if p == 1:  # sqrt(2^(2h+1)) = 1.414... * 2^h, 0.086 ulp below the midpoint 1.5 * 2^h
        odd = draw(st.integers(-(-(fmt.emin - 1) // 2), (fmt.emax - 1) // 2))
        return (exact_bits(fmt, 1, 2 * odd + 1),)
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
    return (exact_bits(fmt, a_int, p + 2 + 2 * half),)


# --- conversions -------------------------------------------------------------------------------
#: Near a midpoint of a conversion: at most this many units in the last place of the source away.
CONVERT_NEAR = 3


def _top_significand(fmt: Format) -> int:
    """The integer significand of max finite, in units of the top binade (2^p - 1 in most formats;
    14 in E4M3FN, whose top binade ends one step early; 1 in E8M0)."""
    return int(max_value(fmt) / Fraction(2) ** (fmt.emax - fmt.precision + 1))


def _spacing_exponent(fmt: Format, integer: int, exponent: int) -> int:
    """x such that 2^x is the spacing of ``fmt``'s values at integer * 2^exponent (> 0): the ulp of
    its binade, or of the subnormals below 2^emin."""
    return max(integer.bit_length() - 1 + exponent, fmt.emin) - fmt.precision + 1


def _convert_source(dst: Format, src: Format | str | None) -> Format:
    """The format the operands of a conversion into ``dst`` are drawn in (default FP32), once it is
    known to hold every midpoint of ``dst``, and the values CONVERT_NEAR of its ulps either side,
    strictly within 2^(2-p) ulp of ``dst``."""
    src = parse_format("fp32") if src is None else as_format(src)
    p = dst.precision
    wanted = f"midpoints of {dst.name} (p = {p}) and the values next to them need"
    if src.precision < 2 * p:
        wider = "" if 2 * p <= 24 else " (no format of softfloat16 is that wide)"
        raise ValueError(f"src: {wanted} a format of at least {2 * p} bits of precision{wider}; "
                         f"{src.name} has {src.precision}")
    top = 2 * _top_significand(dst) + 1, dst.emax - p
    if top[0] * Fraction(2) ** top[1] + CONVERT_NEAR * Fraction(2) ** _spacing_exponent(src, *top) > max_value(src):
        raise ValueError(f"src: {wanted} values up to {dst.name}'s max finite + half an ulp, beyond {src.name}'s")
    # the smallest midpoint: half the smallest subnormal (E8M0, without zero and subnormals: 1.5 * 2^emin)
    smallest = (1, dst.emin - p) if dst.has_zero else (3, dst.emin - 1)
    ulp = Fraction(2) ** (smallest[1] + 1)  # of dst there
    if CONVERT_NEAR * Fraction(2) ** _spacing_exponent(src, *smallest) >= Fraction(2) ** (2 - p) * ulp:
        raise ValueError(f"src: {wanted} values down to {float(ulp / 2)!r}, beyond {src.name}'s resolution")
    return src


@st.composite
def _convert_operand(draw, dst: Format, src: Format, where: str):
    # A midpoint of dst: (2a + 1) * 2^(e - p), between a and a + 1 units of 2^(e - p + 1) in binade
    # e (the subnormals: a below 2^(p-1) at emin, a = 0 the midpoint between 0 and the smallest
    # subnormal); in the top binade a stops at max finite, whose midpoint is the overflow threshold.
    p = dst.precision
    if dst.has_zero and draw(st.integers(0, 7)) == 0:  # one draw in eight: a subnormal midpoint
        e, a = dst.emin, draw(st.integers(0, (1 << (p - 1)) - 1))
    else:
        e = draw(st.integers(dst.emin, dst.emax))
        a = draw(st.integers(1 << (p - 1), _top_significand(dst) if e == dst.emax else (1 << p) - 1))
    integer, exponent = 2 * a + 1, e - p
    if where == "near":  # k units in the last place of src away
        spacing = _spacing_exponent(src, integer, exponent)
        k = draw(st.sampled_from([k for k in range(-CONVERT_NEAR, CONVERT_NEAR + 1) if k]))
        integer, exponent = (integer << (exponent - spacing)) + k, spacing
    negative = dst.signed and draw(st.booleans())
    return (exact_bits(src, integer, exponent, negative),)


# --- formats of at most 16 codes: every operand, filtered --------------------------------------------
#: Formats with at most this many codes (FP4, P3109 with K = 3 or 4) get every case there is, found by
#: trying each operand (pair): too few exponents for the constructions above to be sure of one.
ENUMERATED_CODES = 16


def _grid(fmt: Format) -> list[Fraction]:
    """0 and the positive values of ``fmt``, continued at the top binade's spacing to its end (the
    values rounding with an unbounded exponent knows, up to the overflow threshold and beyond)."""
    codes = [c << fmt.storage_shift for c in range(1 << (fmt.width - fmt.storage_shift))]
    grid = sorted({v for v in map(fmt.value, [c for c in codes if fmt.is_finite(c)]) if v >= 0})
    step, end = Fraction(2) ** (fmt.emax - fmt.precision + 1), Fraction(2) ** (fmt.emax + 1)
    while grid[-1] < end:
        grid.append(grid[-1] + step)
    return grid


def _enumerated(fmt: Format, op: str, where: str) -> list[tuple]:
    """Every operand tuple of ``fmt`` whose exact result of ``op`` is ``where`` a midpoint."""
    grid, bound = _grid(fmt), Fraction(2) ** (2 - fmt.precision)
    codes = [c << fmt.storage_shift for c in range(1 << (fmt.width - fmt.storage_shift))]
    values = {c: fmt.value(c) for c in codes if fmt.is_finite(c)}
    found = []
    if op == "sqrt":
        for a, v in values.items():
            i = bisect.bisect_right([g * g for g in grid], v) - 1
            if v <= 0 or i + 1 >= len(grid) or grid[i] ** 2 == v:
                continue
            midpoint, epsilon = (grid[i] + grid[i + 1]) / 2, (grid[i + 1] - grid[i]) * bound
            if (midpoint - epsilon) ** 2 < v < (midpoint + epsilon) ** 2 and v != midpoint ** 2:
                found.append((a,))
        return found
    for a, x in values.items():
        for b, y in values.items():
            if op == "div" and y == 0:
                continue
            result = abs({"add": x + y, "sub": x - y, "mul": x * y, "div": x / y if y else 0}[op])
            i = bisect.bisect_right(grid, result) - 1
            if i + 1 >= len(grid):
                continue
            offset = (result - grid[i]) / (grid[i + 1] - grid[i]) - Fraction(1, 2)
            if (offset == 0) if where == "on" else (0 < abs(offset) <= bound and abs(offset) != Fraction(1, 2)):
                found.append((a, b))
    return found


# --- the strategy ---------------------------------------------------------------------------------
def near_midpoint(fmt: Format | str, op: str, where: tuple[str, ...] = ("on", "near"),
                  src: Format | str | None = None) -> st.SearchStrategy[tuple]:
    """Operands (a tuple of bit patterns: ``(a, b)``, or ``(a,)`` for sqrt and convert) whose exact
    result lies exactly on a rounding midpoint of ``fmt`` (``"on"``) or strictly within 2^(2-p) ulp
    of one (``"near"``; p = precision). Built arithmetically, so every draw is a hard case:

    - add/sub: a = A ulps, b = (k + 1/2) ulps (+- a bit far below), kept inside a's binade
      (this includes max finite + half an ulp, the RNE overflow threshold);
    - mul: odd significands whose product has exactly p + 1 bits (on), or whose low bits are
      10...01 / 01...11, solved with a modular inverse (near); subnormal midpoints too;
    - div: quotients Q + s/B with Q odd of p + 1 bits (near); exact midpoints exist only among
      subnormal results (on);
    - sqrt: only "near" exists; Q^2 + r with r = 7 (mod 8) solved by Hensel lifting;
    - convert: one pattern ``(a,)`` of the wider format ``src`` (default FP32; it needs at least 2p
      bits of precision and ``fmt``'s range) whose value is a midpoint between two neighbouring
      values of ``fmt`` (on), or 1 to 3 ulps of ``src`` from one (near): subnormal midpoints, the
      one between 0 and the smallest subnormal, and max finite + half an ulp included. ``fmt`` is
      the destination: ``sf.convert(a, src=src, dst=fmt)``. E8M0 is a destination too (its
      midpoints are 1.5 * 2^e).

    Unsigned formats get positive operands (a - b with a > b for sub). In a format of precision 1
    (P3109's p = 1: every value a power of two) add/sub are on the midpoints 1.5 * 2^e or a
    quarter ulp from them (1.25 and 1.75 * 2^e, the nearest two values come); mul and div are
    only on the midpoint between 0 and the smallest value (``where=("on",)``: "near" is a
    ValueError); sqrt is near the midpoints (sqrt(2^(2h+1))). A format too small for a
    construction (a few exponents, K = 3 or 4 bits) can leave hypothesis nothing to draw.

    >>> import softfloat16 as sf
    >>> from hypothesis import find
    >>> a, b = find(near_midpoint(sf.fp16, "mul", where=("on",)), lambda ab: True)
    >>> bool(sf.fp16.mul(a, b, rounding="rtz") != sf.fp16.mul(a, b, rounding="rup"))  # inexact
    True
    >>> (a,) = find(near_midpoint(sf.bf16, "convert", where=("on",)), lambda x: True)   # an FP32 pattern
    >>> hex(a), float(sf.fp32.to_float(a)) == 2.0**-134    # halfway between 0 and bf16's 2^-133
    ('0x8000', True)
    >>> [hex(sf.convert(a, src=sf.fp32, dst=sf.bf16, rounding=r)) for r in ("rtz", "rup")]   # its neighbours
    ['0x0', '0x1']
    """
    fmt = as_format(fmt)
    if op not in MIDPOINT_OPS:
        raise ValueError(f"op: unknown op {op!r}; accepted: {', '.join(MIDPOINT_OPS)}")
    if op != "convert":
        check_arithmetic(fmt)
        if src is not None:
            raise ValueError(f"src: only a conversion has a source format (op={op!r}: operands are {fmt.name})")
    where = tuple(where)
    if not where or set(where) - {"on", "near"}:
        raise ValueError(f"where: expected a non-empty subset of ('on', 'near'), got {where!r}")
    if op == "convert":
        source = _convert_source(fmt, src)
        return st.one_of([_convert_operand(fmt, source, w) for w in where])
    if op in ("mul", "div") and fmt.precision == 1 and "near" in where:
        raise ValueError(f"where: {fmt.name} has precision 1: a {'product' if op == 'mul' else 'quotient'} of its "
                         f"values (powers of two) is never next to a midpoint without being on it; use where=('on',)")
    if op == "sqrt" and "near" not in where:
        raise ValueError("where: a square root is never exactly a midpoint; use where=('near',)")
    if 1 << (fmt.width - fmt.storage_shift) <= ENUMERATED_CODES:
        labels = ("near",) if op == "sqrt" else where
        cases = [_enumerated(fmt, op, w) for w in labels]
        for w, found in zip(labels, cases):
            if not found:
                raise ValueError(f"where={w!r}: no operands of {fmt.name} give a result of {op} {w} a midpoint")
        return st.one_of([st.sampled_from(found) for found in cases])
    for w in where:
        problem = _impossible(fmt, op, w)
        if problem:
            raise ValueError(f"where={w!r}: {problem}")
    if op == "sqrt":
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
