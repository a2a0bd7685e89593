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
#: offers those it has (``kinds(fmt)``): ``inf``, ``qnan`` and ``snan`` only the IEEE formats; ``nan``
#: every format with a NaN (in IEEE formats: quiet or signaling); E8M0 no zero and no subnormals.
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
    """Magnitude patterns with a sign bit drawn (or ``sign``); unsigned E8M0 keeps them as they are."""
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
        strategies.append(magnitudes[k] if as_is else signed(fmt, magnitudes[k], sign))
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
    fmt = as_format(fmt)
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
    pattern = combined(lambda e, s: ((e << f) | s) << fmt.storage_shift, exponent, significand)
    return signed(fmt, pattern, None)


testfloat_bits.__test__ = False  # not a test, though pytest would collect it by its name


def exact_bits(fmt: Format, integer: int, exponent: int, negative: bool = False) -> int:
    """Bits of (-1)^negative * integer * 2^exponent, which must be representable. A value above
    max finite is rejected (``assume``): in E4M3FN the top binade ends one step early, at 448."""
    value = Fraction(integer) * Fraction(2) ** exponent
    assume(value <= max_value(fmt))
    bits, _ = round_fraction(value, fmt, "rtz", negative_zero=negative)
    if describe(bits, fmt).value != value:
        raise AssertionError(f"internal: {value} is not representable in {fmt.name}")
    return negate(fmt, bits) if negative else bits


def max_value(fmt: Format) -> Fraction:
    return describe(fmt.max_finite, fmt).value


def negate(fmt: Format, bits: int) -> int:
    """The pattern of -value (a zero stays +0 in the FNUZ formats, where 0x80 is the NaN)."""
    if bits == 0 and not fmt.has_negative_zero:
        return 0
    return bits ^ fmt.sign_mask


def check_arithmetic(fmt: Format) -> None:
    if fmt.encoding == "e8m0":
        raise ValueError(f"fmt: {fmt.name} is a scale format without arithmetic: it has no operands to construct")
