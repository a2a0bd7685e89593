"""Bit-level comparison: ulp distance, readable descriptions of bit patterns, diff reports.

Everything here decodes bit patterns with plain integer arithmetic and ``fractions.Fraction``; it
never calls the arithmetic kernels, so it can judge their results.
"""
from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from .formats import FORMATS, Format, as_bits, format as parse_format

__all__ = [
    "CLASSES", "NAN_DISTANCE", "NAN_MODES", "Description", "classes", "classify", "describe", "diff_report",
    "exact_decimal", "fields", "max_key", "mismatch_mask", "ordered_key", "to_hex", "ulp_distance",
]

#: ``ulp_distance`` returns this where either operand is a NaN (NaNs are not on the ordered line).
NAN_DISTANCE = -1

#: How NaNs compare: ``"any"`` every NaN equals every NaN; ``"class"`` NaNs are equal when both are
#: quiet or both signaling (sign and payload ignored; where every NaN is quiet, as outside IEEE
#: 754's formats, they are of one class, so E4M3FN's 0x7f and 0xff are equal); ``"strict"`` bit for bit.
NAN_MODES = ("any", "class", "strict")


#: The float dtypes (numpy's and ml_dtypes') whose arrays are read as bit patterns.
_ML_DTYPE_NAMES = {f.float_dtype_name for f in FORMATS.values() if f.float_dtype_name}


def _fmt(fmt: Format | str) -> Format:
    return parse_format(fmt)


def to_bits(x, fmt: Format, name: str = "x") -> np.ndarray:
    """Bit patterns as an int64 array, read as the arithmetic reads its operands (``sf.as_bits``)."""
    return as_bits(x, fmt, name).astype(np.int64)


def _hex_digits(fmt: Format) -> int:
    return (fmt.width + 3) // 4


def to_hex(bits, fmt: Format | str | None = None) -> str:
    """Bit patterns as readable hexadecimal text (``sf.hex``): one string for a scalar, numpy's
    array layout for an array. The width comes from ``fmt`` (its bits are checked to fit), else
    from the dtype of a numpy array or scalar; plain Python integers are written unpadded.

    >>> import numpy as np, softfloat16 as sf
    >>> sf.hex(sf.fp16.add(0x3C00, 0x0001, rounding="rup"))
    '0x3c01'
    >>> print(sf.hex(np.array([[1.0, 65504.0]], dtype=np.float16)))
    [[0x3c00, 0x7bff]]
    >>> sf.hex(0x7FC00000, sf.fp32), sf.hex(np.int16(-1)), sf.hex(5)
    ('0x7fc00000', '0xffff', '0x5')
    >>> import ml_dtypes
    >>> e4m3, e2m1 = np.array([448.0, -1.5], ml_dtypes.float8_e4m3fn), np.array([6.0], ml_dtypes.float4_e2m1fn)
    >>> print(sf.hex(e4m3), sf.hex(e2m1, "e2m1"))
    [0x7e, 0xbc] [0x7]
    """
    if fmt is not None:
        fmt = _fmt(fmt)
        values, digits = to_bits(bits, fmt, "bits"), _hex_digits(fmt)
    else:
        array = np.asarray(bits)
        fixed_width = isinstance(bits, (np.ndarray, np.generic))
        if array.dtype.kind == "f" or array.dtype.name in _ML_DTYPE_NAMES:  # ml_dtypes' floats are kind "V"
            array = array.view({1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[array.dtype.itemsize])
        if array.dtype.kind not in "iu":
            raise TypeError(f"bits: expected integer bit patterns, got dtype {array.dtype}")
        if array.dtype.kind == "i":
            if not fixed_width and array.size and array.min() < 0:
                raise ValueError("bits: negative Python integers have no bit width; pass fmt")
            array = array.view(array.dtype.str.replace("i", "u"))  # two's complement bits, same width
        values, digits = array, (2 * array.dtype.itemsize if fixed_width else 0)

    def one(value) -> str:
        return f"0x{int(value):0{digits}x}"

    if values.ndim == 0:
        return one(values)
    return np.array2string(values, separator=", ", formatter={"int": one}, threshold=1000)


def ordered_key(bits, fmt: Format | str) -> np.ndarray:
    """Position of each bit pattern on the ordered line of values: the count of representable
    values between it and zero, negative below zero. +0 and -0 are both 0, the smallest subnormals
    are +-1, max finite is +-``max_key(fmt)``, and an IEEE infinity one beyond it. Counting is by
    value, not by storage: TF32 in FP32 layout (patterns 2^13 apart) counts 1 between neighbours;
    E8M0, unsigned, has keys 0 (2^-127) to 254 (2^127). NaNs (0x80 in the FNUZ and the signed
    P3109 formats, whose -0 pattern it is) get a meaningless key: mask them out.

    >>> import softfloat16 as sf
    >>> ordered_key([0x8001, 0x0000, 0x8000, 0x3C00], sf.fp16).tolist()
    [-1, 0, 0, 15360]
    >>> ordered_key([0x3F800000, 0x3F802000, 0xBF800000], sf.tf32_fp32).tolist()
    [130048, 130049, -130048]
    >>> ordered_key([0x00, 0x7F, 0xFE], sf.e8m0).tolist()
    [0, 127, 254]
    """
    fmt = _fmt(fmt)
    b = to_bits(bits, fmt, "bits")
    # The fields below the sign, read as one integer, count the values from zero up: this holds
    # in every format (the special patterns sit above max finite, or at the code of -0).
    magnitude = (b & fmt.magnitude_mask) >> fmt.storage_shift
    return np.where(b & fmt.sign_mask, -magnitude, magnitude)


def max_key(fmt: Format | str) -> int:
    """``ordered_key`` of the largest finite value (E4M3FN: 126, E4M3FNUZ: 127, FP4 E2M1: 7).

    >>> import softfloat16 as sf
    >>> max_key(sf.fp16), max_key(sf.fp8_e4m3fn), max_key(sf.tf32_fp32)
    (31743, 126, 261119)
    """
    fmt = _fmt(fmt)
    return fmt.max_finite >> fmt.storage_shift


def ulp_distance(a, b, fmt: Format | str):
    """Number of representable values between ``a`` and ``b`` (bit patterns) on the ordered line.

    Adjacent values are 1 apart in every format (TF32 in FP32 layout included), +0 and -0 are 0
    apart, max finite and inf 1 apart. Where either operand is a NaN (any NaN of the format:
    0x7f/0xff in E4M3FN, 0x80 in the FNUZ and signed P3109 formats, 0xff in E8M0) the result is
    ``NAN_DISTANCE`` (-1). Broadcasts; returns int64.

    >>> import softfloat16 as sf
    >>> ulp_distance(0x3C00, [0x3C01, 0x3BFF, 0xBC00, 0x7E00], sf.fp16).tolist()
    [1, 1, 30720, -1]
    >>> ulp_distance(0x01, [0x81, 0x80], sf.fp8_e4m3fnuz).tolist()   # 0x80 is the NaN, not -0
    [2, -1]
    >>> ulp_distance(0x7E, [0x7F, 0x81, 0x80], "p3109_k8p3se").tolist()   # inf is one past max finite
    [1, 127, -1]
    """
    fmt = _fmt(fmt)
    a_bits, b_bits = to_bits(a, fmt, "a"), to_bits(b, fmt, "b")
    distance = np.abs(ordered_key(a_bits, fmt) - ordered_key(b_bits, fmt))
    distance = np.where(fmt.is_nan(a_bits) | fmt.is_nan(b_bits), NAN_DISTANCE, distance)
    return distance[()] if distance.ndim == 0 else distance


#: The classes ``classify`` names. ``qnan`` / ``snan`` are the two NaNs of IEEE 754's top binade;
#: the NaNs of the other formats (E4M3FN's 0x7f/0xff, the -0 pattern 0x80 of FNUZ and the signed
#: P3109 formats, E8M0's 0xff) are all quiet and carry no payload, and are called ``nan``. E8M0 has
#: only ``normal`` values and ``nan``; a format of precision 1 (one significand bit) has no subnormals.
CLASSES = ("zero", "subnormal", "normal", "inf", "qnan", "snan", "nan")


def classes(fmt: Format | str) -> tuple[str, ...]:
    """The classes the patterns of ``fmt`` fall into (a subset of ``CLASSES``), from its properties.

    >>> import softfloat16 as sf
    >>> for f in (sf.fp16, sf.fp8_e4m3fn, sf.fp4_e2m1, sf.e8m0, sf.format("p3109_k8p3se"), sf.format("p3109_k8p1uf")):
    ...     print(f.name, " ".join(classes(f)))
    fp16 zero subnormal normal inf qnan snan
    fp8_e4m3fn zero subnormal normal nan
    fp4_e2m1 zero subnormal normal
    e8m0 normal nan
    p3109_k8p3se zero subnormal normal inf nan
    p3109_k8p1uf zero normal nan
    """
    fmt = _fmt(fmt)
    found = [kind for kind, present in (
        ("zero", fmt.has_zero),
        ("subnormal", fmt.subnormals and fmt.fraction_bits > 0),  # precision 1: field 0 holds only zero
        ("normal", True),
        ("inf", fmt.has_inf),
        ("qnan", not fmt.quiet_nans and fmt.fraction_bits >= 1),
        ("snan", not fmt.quiet_nans and fmt.fraction_bits >= 2),  # a quiet bit and a nonzero rest
        ("nan", fmt.has_nan and fmt.quiet_nans),
    ) if present]
    return tuple(found)


def classify(bits: int, fmt: Format | str) -> str:
    """Class of one bit pattern: zero, subnormal, normal, inf, qnan, snan (IEEE 754's NaNs), or nan
    (a NaN of the other formats, which has no quiet/signaling distinction). See ``CLASSES``.

    >>> import softfloat16 as sf
    >>> [classify(b, sf.fp16) for b in (0x8000, 0x0001, 0x3C00, 0xFC00, 0x7E00, 0x7C01)]
    ['zero', 'subnormal', 'normal', 'inf', 'qnan', 'snan']
    >>> [classify(b, sf.fp8_e4m3fnuz) for b in (0x00, 0x80, 0x81, 0xFF)]
    ['zero', 'nan', 'subnormal', 'normal']
    >>> [classify(b, sf.e8m0) for b in (0x00, 0xFE, 0xFF)]
    ['normal', 'normal', 'nan']
    >>> [classify(b, "p3109_k8p3se") for b in (0x00, 0x80, 0x01, 0x7E, 0x7F, 0xFF)]
    ['zero', 'nan', 'subnormal', 'normal', 'inf', 'inf']
    """
    fmt = _fmt(fmt)
    bits = int(as_bits(bits, fmt, "bits"))  # one pattern: int() refuses an array of several
    if fmt.is_nan(bits):
        if fmt.quiet_nans:
            return "nan"
        return "snan" if fmt.is_signaling(bits) else "qnan"
    for kind, test in (("zero", fmt.is_zero), ("subnormal", fmt.is_subnormal), ("inf", fmt.is_inf)):
        if test(bits):
            return kind
    return "normal"


def exact_decimal(value: Fraction) -> str:
    """The exact decimal expansion of a dyadic rational (every binary float value is one).

    >>> exact_decimal(Fraction(-1, 1024))
    '-0.0009765625'
    """
    value = Fraction(value)
    denominator = value.denominator
    digits = denominator.bit_length() - 1
    if denominator != 1 << digits:
        raise ValueError(f"{value} is not a dyadic rational")
    scaled = abs(value.numerator) * 5**digits  # value * 10**digits, an integer
    text = str(scaled).rjust(digits + 1, "0")
    whole, frac = text[: len(text) - digits], text[len(text) - digits:].rstrip("0")
    sign = "-" if value < 0 else ""
    return f"{sign}{whole}.{frac}" if frac else f"{sign}{whole}.0"


def short_value(value: Fraction | float, max_digits: int = 20) -> str:
    """A decimal for display: exact when short, else the shortest float64 repr marked with '~'."""
    if isinstance(value, float):
        return repr(value)
    exact = exact_decimal(value)
    if len(exact.strip("-0.")) <= max_digits:
        return exact
    return "~" + repr(float(value))


@dataclass(frozen=True)
class Description:
    """Fields, class and exact value of one bit pattern (see ``describe``)."""

    format: Format
    bits: int
    sign: int              # 0 in the unsigned formats (E8M0), which have no sign bit
    exponent: int          # the biased exponent field
    fraction: int          # the fraction field (TF32 in FP32 layout: its 10 bits, above the 13 zeros)
    kind: str              # one of CLASSES
    value: Fraction | float

    @property
    def hex(self) -> str:
        return to_hex(self.bits, self.format)

    @property
    def fields(self) -> str:
        """The fields in binary, separated by spaces: sign, exponent, fraction. An unsigned format
        has no sign field (E8M0: only its 8 exponent bits), precision 1 no fraction field; TF32 in
        FP32 layout shows its 19 bits (the 13 zero bits below are left out).

        >>> import softfloat16 as sf
        >>> describe(0xB8, sf.fp8_e4m3fn).fields, describe(0x7F, sf.e8m0).fields
        ('1 0111 000', '01111111')
        """
        fmt = self.format
        parts = [str(self.sign)] if fmt.signed else []
        parts.append(f"{self.exponent:0{fmt.exponent_bits}b}")
        if fmt.fraction_bits:
            parts.append(f"{self.fraction:0{fmt.fraction_bits}b}")
        return " ".join(parts)

    def __str__(self) -> str:
        if self.kind == "zero":
            value = "-0.0" if self.sign else "0.0"
        else:
            value = "nan" if self.kind.endswith("nan") else short_value(self.value)
        return f"{self.hex} = {value} [{self.fields}] {self.kind}"


def fields(bits: int, fmt: Format | str) -> tuple[int, int, int]:
    """(sign, biased exponent field, fraction field) of one pattern, as Python integers (sign 0 in
    the unsigned formats; the fraction of TF32 in FP32 layout without its 13 zero bits).

    >>> import softfloat16 as sf
    >>> fields(0xBC01, sf.fp16), fields(0xFE, sf.e8m0), fields(0xBF802000, sf.tf32_fp32)
    ((1, 15, 1), (0, 254, 0), (1, 127, 1))
    """
    fmt = _fmt(fmt)
    bits = int(to_bits(bits, fmt, "bits")) >> fmt.storage_shift
    f = fmt.fraction_bits
    return (bits >> (fmt.exponent_bits + f)) & 1, (bits >> f) & ((1 << fmt.exponent_bits) - 1), bits & ((1 << f) - 1)


def describe(bits: int, fmt: Format | str) -> Description:
    """Decode one bit pattern into sign, exponent field, fraction field, class and exact value.

    >>> import softfloat16 as sf
    >>> d = describe(0x3C01, sf.fp16)
    >>> d.value, d.kind
    (Fraction(1025, 1024), 'normal')
    >>> print(d)
    0x3c01 = 1.0009765625 [0 01111 0000000001] normal
    >>> print(describe(0xFF, sf.fp8_e4m3fn)); print(describe(0x80, sf.fp8_e5m2fnuz)); print(describe(0x00, sf.e8m0))
    0xff = nan [1 1111 111] nan
    0x80 = nan [1 00000 00] nan
    0x00 = ~5.877471754111438e-39 [00000000] normal
    """
    fmt = _fmt(fmt)
    bits = int(to_bits(bits, fmt, "bits"))
    sign, exponent, fraction = fields(bits, fmt)
    return Description(fmt, bits, sign, exponent, fraction, classify(bits, fmt), fmt.value(bits))


def mismatch_mask(actual, expected, fmt: Format | str, nan: str = "class", ulp: int | None = None) -> np.ndarray:
    """Boolean mask (broadcast shape) of elements that differ: bit patterns that are not equal
    (``ulp=None``), or that are more than ``ulp`` ulps apart (where +0 and -0 are 0 apart).
    NaNs never match non-NaNs; NaN against NaN follows ``nan`` (see ``NAN_MODES``).

    >>> import softfloat16 as sf
    >>> mismatch_mask([0x3C00, 0x7E01, 0x0000], [0x3C00, 0xFE00, 0x8000], sf.fp16).tolist()
    [False, False, True]
    """
    fmt = _fmt(fmt)
    if nan not in NAN_MODES:
        raise ValueError(f"nan: unknown NaN comparison {nan!r}; accepted: {', '.join(NAN_MODES)}")
    a, e = np.broadcast_arrays(to_bits(actual, fmt, "actual"), to_bits(expected, fmt, "expected"))
    a_nan, e_nan = fmt.is_nan(a), fmt.is_nan(e)
    if ulp is None:
        differ = a != e
    else:
        differ = np.abs(ordered_key(a, fmt) - ordered_key(e, fmt)) > ulp
    quiet = fmt.quiet_bit
    if nan == "any":
        nan_differ = np.zeros_like(differ)
    elif nan == "class":
        nan_differ = (a & quiet) != (e & quiet)
    else:
        nan_differ = a != e
    return np.where(a_nan | e_nan, ~(a_nan & e_nan) | nan_differ, differ)


def diff_report(actual, expected, fmt: Format | str, nan: str = "class", max_rows: int = 10,
                ulp: int | None = None, header: str = "") -> str:
    """Text listing the elements where ``actual`` and ``expected`` differ (empty if none):
    bit patterns that are not equal, or (with ``ulp``) more than ``ulp`` ulps apart.

    For the first ``max_rows`` differences: the index, both bit patterns in hex, their decoded
    values, fields and classes, and the ulp distance.

    >>> import softfloat16 as sf
    >>> print(diff_report([0x3C00, 0x3C01], [0x3C00, 0x3C00], sf.fp16))
    Mismatched elements: 1 / 2 (50%) [fp16, nan='class']
    Max ulp distance: 1
     index (1,): actual   0x3c01 = 1.0009765625 [0 01111 0000000001] normal
                 expected 0x3c00 = 1.0 [0 01111 0000000000] normal
                 ulp distance 1
    """
    fmt = _fmt(fmt)
    a, e = np.broadcast_arrays(to_bits(actual, fmt, "actual"), to_bits(expected, fmt, "expected"))
    bad = mismatch_mask(a, e, fmt, nan=nan, ulp=ulp)
    count = int(np.count_nonzero(bad))
    if count == 0:
        return ""
    distances = np.asarray(ulp_distance(a, e, fmt))
    finite = distances[bad & (distances >= 0)]
    lines = [] if not header else [header]
    lines.append(f"Mismatched elements: {count} / {a.size} ({100 * count / a.size:.3g}%) [{fmt.name}, nan={nan!r}]")
    lines.append("Max ulp distance: " + (str(int(finite.max())) if finite.size else "n/a (NaN)"))
    for index in np.argwhere(bad)[:max_rows]:  # argwhere, unlike nonzero, takes 0-d arrays
        index = tuple(int(i) for i in index)
        d = int(distances[index])
        label = f" index {index}: " if index else " value: "  # a 0-d array has one element, no index
        pad = " " * len(label)
        lines.append(f"{label}actual   {describe(int(a[index]), fmt)}")
        lines.append(f"{pad}expected {describe(int(e[index]), fmt)}")
        lines.append(f"{pad}ulp distance {d if d >= 0 else 'n/a (NaN)'}")
    if count > max_rows:
        lines.append(f" ... and {count - max_rows} more")
    return "\n".join(lines)
