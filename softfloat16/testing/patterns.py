"""Bit patterns of a format for the strategies of :mod:`softfloat16.testing`: the kinds a format has
(:func:`bits`, :func:`kinds_of`), TestFloat-style patterns (:func:`testfloat_bits`), and exact values
turned into patterns (the building blocks of the strategies that construct operands).
"""
from __future__ import annotations

from fractions import Fraction

from hypothesis import assume, strategies as st

from ..compare import describe
from ..exact import round_fraction
from ..formats import Format, format as parse_format

__all__ = ["KINDS", "bits", "kinds_of", "testfloat_bits"]

#: The classes ``bits`` can draw (``"min_subnormal"`` and ``"min_normal"`` also work). A format
#: offers those it has (``kinds_of(fmt)``), by its properties: ``inf`` the formats with infinities
#: (IEEE 754's, extended P3109); ``qnan`` and ``snan`` only IEEE 754's NaNs (the top binade); ``nan``
#: every format with a NaN (in IEEE formats: quiet or signaling); no ``zero`` and no ``subnormal``
#: without subnormals (E8M0), no ``subnormal`` at precision 1 (exponent field 0 holds only zero).
KINDS = ("zero", "subnormal", "normal", "max_finite", "inf", "qnan", "snan", "nan")
_ALL_KINDS = KINDS + ("min_subnormal", "min_normal")


def as_format(fmt: Format | str) -> Format:
    return parse_format(fmt)


def combined(function, *strategies: st.SearchStrategy) -> st.SearchStrategy:
    """``function(*values)`` of one draw from each strategy. A failing example shows the value it
    makes (``st.builds`` would show the call, a lambda expression with its arguments)."""
    return st.tuples(*strategies).map(lambda values: function(*values))


def _missing(fmt: Format, kind: str) -> str | None:
    """Why ``fmt`` has no pattern of ``kind`` (None if it has)."""
    what = f"{fmt.name} ({fmt.encoding} encoding)"
    if kind == "inf" and not fmt.has_inf:
        return f"{what} has no infinity"
    if kind in ("qnan", "snan", "nan") and not fmt.has_nan:
        return f"{what} has no NaN"
    if kind in ("qnan", "snan") and fmt.quiet_nans:
        return f"{what} has no quiet/signaling NaNs, only kind 'nan'"
    if kind == "snan" and fmt.fraction_bits < 2:
        return f"{fmt.name} has no signaling NaN"
    if kind in ("zero", "subnormal", "min_subnormal") and not fmt.has_zero:
        return (f"{what} has no zero and no subnormals ({fmt.min_normal:#04x} is its smallest value "
                f"2^{fmt.emin}, kind 'min_normal')")
    if kind in ("subnormal", "min_subnormal") and not fmt.fraction_bits:
        return f"{fmt.name} has no subnormals (precision 1: exponent field 0 holds only zero)"
    if kind == "normal" and fmt.max_finite == fmt.min_normal:
        return f"{fmt.name} has no normal value below max finite (its one normal value: kind 'max_finite')"
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
    >>> for name in ("p3109_k8p3se", "p3109_k8p1se", "p3109_k8p4uf"):
    ...     print(name, " ".join(kinds_of(name)))
    p3109_k8p3se zero subnormal normal max_finite inf nan
    p3109_k8p1se zero normal max_finite inf nan
    p3109_k8p4uf zero subnormal normal max_finite nan
    """
    fmt = as_format(fmt)
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




def signed(fmt: Format, magnitude: st.SearchStrategy, sign: int | None) -> st.SearchStrategy:
    """Magnitude patterns with a sign bit drawn (or ``sign``); an unsigned format keeps them as they are."""
    if not fmt.signed:
        return magnitude
    signs = st.sampled_from((0, 1)) if sign is None else st.just(int(sign))
    return combined(lambda m, s: m | (fmt.sign_mask if s else 0), magnitude, signs)


def _units(fmt: Format, low: int, high: int) -> st.SearchStrategy[int]:
    """Patterns ``low..high`` counted in steps of the format's lowest bit (2^13 for TF32 in FP32
    layout: patterns whose low 13 bits are not zero are not TF32 values)."""
    shift = fmt.storage_shift
    return st.integers(low >> shift, high >> shift).map(lambda k: k << shift)


def bits(fmt: Format | str, kinds: tuple[str, ...] | None = None, sign: int | None = None) -> st.SearchStrategy[int]:
    """Bit patterns of ``fmt`` drawn from each class in ``kinds`` (default: every kind the format
    has, ``kinds_of(fmt, sign)``), of either sign (or ``sign``). A kind the format
    lacks (``inf`` in E4M3FN, ``zero`` in E8M0, ``-0`` in the FNUZ and signed P3109 formats,
    ``subnormal`` at precision 1) is a ValueError. The NaN at the code of -0 (0x80 in the FNUZ and
    signed P3109 formats) and an unsigned format's NaN (0xff) are drawn as they are, whatever ``sign``.

    >>> import softfloat16 as sf
    >>> from hypothesis import find
    >>> from softfloat16.compare import classify
    >>> classify(find(bits(sf.fp16, kinds=("snan",)), lambda b: True), sf.fp16)
    'snan'
    >>> [hex(find(bits(f, kinds=("nan",), sign=0), lambda b: True)) for f in (sf.fp8_e4m3fn, sf.fp8_e4m3fnuz)]
    ['0x7f', '0x80']
    >>> [hex(find(bits("p3109_k8p3se", kinds=(k,), sign=1), lambda b: True)) for k in ("inf", "nan")]
    ['0xff', '0x80']
    >>> bits(sf.fp8_e4m3fn, kinds=("inf",))
    Traceback (most recent call last):
    ValueError: kinds: fp8_e4m3fn (fn encoding) has no infinity
    """
    fmt = as_format(fmt)
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
    binade = fmt.exponent_mask  # IEEE 754's NaNs: this exponent, a nonzero fraction
    magnitudes = {  # built when asked for: the kinds a format lacks would be empty ranges
        "zero": lambda: st.just(0),
        "subnormal": lambda: _units(fmt, unit, fmt.min_normal - unit),
        "normal": lambda: _units(fmt, fmt.min_normal, fmt.max_finite - unit),  # max finite is its own kind
        "max_finite": lambda: st.just(fmt.max_finite),
        "min_subnormal": lambda: st.just(unit),
        "min_normal": lambda: st.just(fmt.min_normal),
        "inf": lambda: st.just(fmt.inf),
        "qnan": lambda: _units(fmt, binade | quiet, binade | (2 * quiet - unit)),
        "snan": lambda: _units(fmt, binade + unit, binade | (quiet - unit)),
    }
    strategies = []
    for k in kinds:
        if k == "nan":
            strategies.append(_nans(fmt, magnitudes, sign))
        else:  # a format without -0 (its pattern is a NaN) has one zero, +0
            as_is = k == "zero" and not fmt.has_negative_zero
            strategies.append(magnitudes[k]() if as_is else signed(fmt, magnitudes[k](), sign))
    return st.one_of(strategies)


def _nans(fmt: Format, magnitudes: dict, sign: int | None) -> st.SearchStrategy[int]:
    """The NaNs of a format: IEEE 754's (quiet or signaling, either sign), the top code of the
    sign (E4M3FN: S.1111.111; unsigned: the top code), and the code of -0 (0x80: one pattern,
    whatever ``sign``)."""
    found = []
    if fmt.top_nans == "binade":
        kinds = ("qnan", "snan") if fmt.fraction_bits >= 2 else ("qnan",)
        found.append(signed(fmt, st.one_of([magnitudes[k]() for k in kinds]), sign))
    elif fmt.top_nans == "one":
        found.append(signed(fmt, st.just(fmt.nan_of(False)), sign))
    if fmt.nan_at_negative_zero:
        found.append(st.just(fmt.sign_mask))
    return st.one_of(found)


def testfloat_bits(fmt: Format | str) -> st.SearchStrategy[int]:
    """TestFloat-style patterns: extreme and near-bias exponent fields combined with significands
    made of runs of ones and zeros (leading run, trailing run, single bits, their complements).
    Every pattern is one of the format's (its NaNs included: 0x80 in the FNUZ formats); E8M0 and
    the formats of precision 1 have only the exponent field.

    >>> import softfloat16 as sf
    >>> from hypothesis import find
    >>> hex(find(testfloat_bits(sf.bf16), lambda b: b >> 15 and b & 0x7F == 0x7F))  # -, all ones
    '0x807f'
    """
    fmt = as_format(fmt)
    f, top = fmt.fraction_bits, (1 << fmt.exponent_bits) - 1
    ones = (1 << f) - 1
    near = {0, 1, 2, fmt.bias - 1, fmt.bias, fmt.bias + 1, top - 2, top - 1, top}
    special_exponents = sorted(near & set(range(top + 1)))  # FP4 E2M1 has exponents 0..3 only
    exponent = st.one_of(st.sampled_from(special_exponents), st.integers(0, top))
    if f == 0:  # E8M0, precision 1: no significand to vary
        return signed(fmt, exponent.map(lambda e: e << fmt.storage_shift), None)
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
    pattern = combined(lambda e, s: ((e << f) | s) << fmt.storage_shift, exponent, significand)
    return signed(fmt, pattern, None)


testfloat_bits.__test__ = False  # not a test, though pytest would collect it by its name


def exact_bits(fmt: Format, integer: int, exponent: int, negative: bool = False) -> int:
    """Bits of (-1)^negative * integer * 2^exponent, which must be representable. A value above
    max finite is rejected (``assume``): in E4M3FN the top binade ends one step early, at 448."""
    value = Fraction(integer) * Fraction(2) ** exponent
    assume(value <= max_value(fmt))
    bits, _ = round_fraction(value, fmt, "rtz")  # the magnitude; the sign below (no -0 in some formats)
    if describe(bits, fmt).value != value:
        raise AssertionError(f"internal: {value} is not representable in {fmt.name}")
    return negate(fmt, bits) if negative else bits


def max_value(fmt: Format) -> Fraction:
    return describe(fmt.max_finite, fmt).value


def negate(fmt: Format, bits: int) -> int:
    """The pattern of -value (a zero stays +0 in the formats without -0, where 0x80 is the NaN)."""
    if bits == 0 and not fmt.has_negative_zero:
        return 0
    if not fmt.signed:
        raise AssertionError(f"internal: {fmt.name} is unsigned: it has no negative values")
    return bits ^ fmt.sign_mask


def random_signs(draw, fmt: Format, count: int) -> tuple[bool, ...]:
    """``count`` signs drawn (True: negative); all positive in an unsigned format."""
    return tuple(draw(st.booleans()) if fmt.signed else False for _ in range(count))


def check_arithmetic(fmt: Format) -> None:
    if not fmt.has_arithmetic:
        raise ValueError(f"fmt: {fmt.name} is a scale format without arithmetic (no zero): it has no operands to "
                         f"construct")
