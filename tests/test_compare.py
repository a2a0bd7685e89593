"""softfloat16.compare against oracles written here: a plain decoder and a sorted table of values."""
import re
from decimal import Decimal
from fractions import Fraction

import numpy as np
import pytest

import softfloat16 as sf
from softfloat16.compare import (
    NAN_DISTANCE, classify, describe, diff_report, exact_decimal, mismatch_mask, ulp_distance,
)


def decode(bits: int, ebits: int, fbits: int):
    """(sign, value) of one pattern: value a Fraction, 'inf' or 'nan'. Written from the IEEE
    754 definition, independently of the package."""
    sign = bits >> (ebits + fbits)
    e = (bits >> fbits) & ((1 << ebits) - 1)
    f = bits & ((1 << fbits) - 1)
    bias = (1 << (ebits - 1)) - 1
    if e == (1 << ebits) - 1:
        return sign, ("inf" if f == 0 else "nan")
    if e == 0:
        value = Fraction(f, 1 << fbits) * Fraction(2) ** (1 - bias)
    else:
        value = (1 + Fraction(f, 1 << fbits)) * Fraction(2) ** (e - bias)
    return sign, -value if sign else value


def ranks(fmt) -> tuple[np.ndarray, np.ndarray]:
    """Rank of every pattern's value among the distinct non-NaN values (+0 == -0, inf last)."""
    n = 1 << fmt.width
    keyed = {}
    for b in range(n):
        sign, v = decode(b, fmt.exponent_bits, fmt.fraction_bits)
        if v == "nan":
            continue
        keyed[b] = Fraction(10**60) * (-1 if sign else 1) if v == "inf" else v
    order = sorted(set(keyed.values()))
    position = {v: i for i, v in enumerate(order)}
    rank = np.full(n, -1, dtype=np.int64)
    for b, v in keyed.items():
        rank[b] = position[v]
    return rank, rank < 0


@pytest.mark.parametrize("fmt", [sf.fp8_e5m2, sf.fp16], ids=lambda f: f.name)
def test_ulp_distance_counts_values_between(fmt):
    rank, is_nan = ranks(fmt)
    rng = np.random.default_rng(0)
    n = 1 << fmt.width
    a = rng.integers(0, n, 20000)
    b = np.where(rng.random(20000) < 0.5, (a + rng.integers(-3, 4, 20000)) % n, rng.integers(0, n, 20000))
    expected = np.where(is_nan[a] | is_nan[b], NAN_DISTANCE, np.abs(rank[a] - rank[b]))
    assert np.array_equal(ulp_distance(a, b, fmt), expected)


def test_ulp_distance_edges_and_broadcasting():
    f = sf.fp16
    assert ulp_distance(0x0000, 0x8000, f) == 0
    assert ulp_distance(0x0001, 0x8001, f) == 2
    assert ulp_distance(0x7BFF, 0x7C00, f) == 1
    assert ulp_distance(0xFC00, 0x7C00, f) == 2 * 0x7C00
    assert ulp_distance(0x7E00, 0x7E00, f) == NAN_DISTANCE
    out = ulp_distance(np.array([[0x3C00], [0x3C02]]), np.array([0x3C00, 0x3C01]), f)
    assert out.shape == (2, 2) and out.tolist() == [[0, 1], [2, 1]]
    assert isinstance(ulp_distance(1, 2, f), np.integer)
    assert ulp_distance(np.float16([1.0]), np.float16([-1.0]), f).tolist() == [2 * 0x3C00]
    with pytest.raises(ValueError, match="0x10000"):
        ulp_distance(0x10000, 0, f)
    with pytest.raises(TypeError, match="float32"):
        ulp_distance(np.float32([1.0]), 0, f)


@pytest.mark.parametrize("fmt", [sf.fp16, sf.bf16, sf.fp32], ids=lambda f: f.name)
def test_describe_matches_an_independent_decoder(fmt):
    rng = np.random.default_rng(1)
    specials = [0, fmt.sign_mask, 1, fmt.min_normal - 1, fmt.min_normal, fmt.max_finite, fmt.inf,
                fmt.inf | 1, fmt.inf | (1 << (fmt.fraction_bits - 1)), fmt.sign_mask | fmt.inf]
    for b in specials + [int(x) for x in rng.integers(0, 1 << fmt.width, 300)]:
        d = describe(b, fmt)
        sign, value = decode(b, fmt.exponent_bits, fmt.fraction_bits)
        assert d.sign == sign and d.bits == b
        assert (d.exponent << fmt.fraction_bits | d.fraction | sign << (fmt.width - 1)) == b
        if value == "nan":
            assert d.kind in ("qnan", "snan")
            assert (d.kind == "qnan") == bool(b >> (fmt.fraction_bits - 1) & 1)
        elif value == "inf":
            assert d.kind == "inf" and d.value == (-np.inf if sign else np.inf)
        else:
            assert d.value == value
            expected_kind = "zero" if value == 0 else ("normal" if d.exponent else "subnormal")
            assert d.kind == expected_kind == classify(b, fmt)


def test_describe_text():
    d = describe(0xC000, sf.fp16)
    assert d.hex == "0xc000" and d.fields == "1 10000 0000000000"
    assert str(d) == "0xc000 = -2.0 [1 10000 0000000000] normal"
    assert str(describe(0x8000, sf.fp16)).startswith("0x8000 = -0.0 ")
    assert "snan" in str(describe(0x7C01, sf.fp16))
    assert str(describe(0x7F800000, sf.fp32)).startswith("0x7f800000 = inf")


@pytest.mark.parametrize("bits", [0x0001, 0x3555, 0x7BFF, 0x8001, 0x0000, 0x03FF])
def test_exact_decimal_is_exact(bits):
    value = describe(bits, sf.fp16).value
    assert Decimal(exact_decimal(value)) == Decimal(float(value))  # Decimal(float) is exact
    assert exact_decimal(Fraction(3, 8)) == "0.375"
    with pytest.raises(ValueError):
        exact_decimal(Fraction(1, 3))


def test_mismatch_mask_nan_modes():
    f = sf.fp16
    actual = [0x7E00, 0x7E01, 0xFE00, 0x7C01, 0x7E00, 0x0000, 0x0000]
    expected = [0x7E00, 0x7E00, 0x7E00, 0x7E00, 0x3C00, 0x8000, 0x0000]
    assert mismatch_mask(actual, expected, f, nan="strict").tolist() == [0, 1, 1, 1, 1, 1, 0]
    assert mismatch_mask(actual, expected, f, nan="class").tolist() == [0, 0, 0, 1, 1, 1, 0]
    assert mismatch_mask(actual, expected, f, nan="any").tolist() == [0, 0, 0, 0, 1, 1, 0]
    assert mismatch_mask(actual, expected, f, ulp=0).tolist() == [0, 0, 0, 1, 1, 0, 0]
    with pytest.raises(ValueError, match="nan"):
        mismatch_mask(actual, expected, f, nan="payload")


def test_diff_report_lists_first_rows():
    f = sf.fp16
    actual = np.full((3, 4), 0x3C00, dtype=np.uint16)
    expected = actual.copy()
    assert diff_report(actual, expected, f) == ""
    actual[1, 2] = 0x3C03
    actual[2, 0] = 0x7E00
    actual[2, 3] = 0x8000
    expected[2, 3] = 0x0000
    text = diff_report(actual, expected, f, max_rows=2)
    assert "Mismatched elements: 3 / 12" in text
    assert "index (1, 2): actual   0x3c03 = 1.0029296875 [0 01111 0000000011] normal" in text
    assert "expected 0x3c00 = 1.0 [0 01111 0000000000] normal" in text
    assert "ulp distance 3" in text and "Max ulp distance: 3" in text
    assert "index (2, 0)" in text and "ulp distance n/a (NaN)" in text
    assert "index (2, 3)" not in text and "... and 1 more" in text


# --- FP8, FP6, FP4, E8M0 and TF32, against ml_dtypes' value tables ------------------------------
# Oracle: ml_dtypes decodes every pattern (float32 for TF32 in FP32 layout); nothing of the package's
# Format decoding is used. (ml_dtypes name, pattern width, fraction bits) written out here.

ML_FORMATS = {
    "fp8_e5m2": ("float8_e5m2", 8, 2), "fp8_e4m3fn": ("float8_e4m3fn", 8, 3),
    "fp8_e4m3fnuz": ("float8_e4m3fnuz", 8, 3), "fp8_e5m2fnuz": ("float8_e5m2fnuz", 8, 2),
    "fp6_e2m3": ("float6_e2m3fn", 6, 3), "fp6_e3m2": ("float6_e3m2fn", 6, 2),
    "fp4_e2m1": ("float4_e2m1fn", 4, 1), "e8m0": ("float8_e8m0fnu", 8, 0),
}
SMALL = [sf.format(name) for name in ML_FORMATS]


def ml_values(name: str) -> np.ndarray:
    """float64 value of every pattern 0 .. 2^width - 1, decoded by ml_dtypes."""
    import ml_dtypes
    dtype_name, width, _ = ML_FORMATS[name]
    return np.arange(1 << width, dtype=np.uint8).view(getattr(ml_dtypes, dtype_name)).astype(np.float64)


def value_ranks(values: np.ndarray) -> np.ndarray:
    """Rank of each value among the distinct non-NaN values (-1 for NaN): +0 and -0 share one."""
    finite = values[~np.isnan(values)]
    order = np.unique(finite)  # -0.0 == 0.0: one entry
    rank = np.searchsorted(order, np.where(np.isnan(values), 0, values))
    return np.where(np.isnan(values), -1, rank)


@pytest.mark.parametrize("fmt", SMALL, ids=lambda f: f.name)
def test_ulp_distance_counts_ml_dtypes_values_on_every_pair(fmt):
    rank = value_ranks(ml_values(fmt.name))
    n = rank.size
    a, b = np.divmod(np.arange(n * n), n)
    expected = np.where((rank[a] < 0) | (rank[b] < 0), NAN_DISTANCE, np.abs(rank[a] - rank[b]))
    assert np.array_equal(ulp_distance(a, b, fmt), expected)


def test_ulp_distance_tf32_in_fp32_layout_counts_values_not_storage_steps():
    # every TF32 value: the float32s whose low 13 bits are zero; ranks among them by float32 value
    patterns = np.arange(1 << 19, dtype=np.uint32) << 13
    with np.errstate(invalid="ignore"):  # signaling NaNs widen with a warning
        rank = value_ranks(patterns.view(np.float32).astype(np.float64))
    rng = np.random.default_rng(5)
    i = rng.integers(0, 1 << 19, 50_000)
    near, anywhere = (i + rng.integers(-3, 4, i.size)) % (1 << 19), rng.integers(0, 1 << 19, i.size)
    j = np.where(rng.random(i.size) < 0.5, near, anywhere)
    expected = np.where((rank[i] < 0) | (rank[j] < 0), NAN_DISTANCE, np.abs(rank[i] - rank[j]))
    assert np.array_equal(ulp_distance(patterns[i], patterns[j], sf.tf32_fp32), expected)
    assert ulp_distance(0x3F800000, 0x3F802000, sf.tf32_fp32) == 1           # neighbours: 1, not 2^13
    assert ulp_distance(0x7F7FE000, 0x7F800000, sf.tf32_fp32) == 1           # max finite, inf
    with pytest.raises(ValueError, match="low 13 bits"):
        ulp_distance(0x3F800001, 0x3F800000, sf.tf32_fp32)


def test_ulp_distance_special_patterns_of_each_encoding():
    assert ulp_distance(0x00, 0x80, sf.fp8_e4m3fnuz) == NAN_DISTANCE       # 0x80 is the NaN, not -0
    assert ulp_distance(0x01, 0x81, sf.fp8_e5m2fnuz) == 2                  # through the one zero
    assert ulp_distance(0x00, 0x80, sf.fp8_e4m3fn) == 0                    # +0, -0
    assert ulp_distance(0x7E, 0x7F, sf.fp8_e4m3fn) == NAN_DISTANCE         # 448, NaN
    assert ulp_distance(0x7E, 0xFE, sf.fp8_e4m3fn) == 2 * 126
    assert ulp_distance(0x00, 0xFE, sf.e8m0) == 254 and ulp_distance(0x7F, 0xFF, sf.e8m0) == NAN_DISTANCE
    assert ulp_distance(0x1F, 0x3F, sf.fp6_e2m3) == 62 and ulp_distance(0x7, 0xF, sf.fp4_e2m1) == 14
    with pytest.raises(ValueError, match="6-bit"):
        ulp_distance(0x40, 0, sf.fp6_e2m3)


def ml_class(b: int, name: str, value: float) -> str:
    """The class of a pattern from its ml_dtypes value (and, for an IEEE NaN, its top fraction bit)."""
    import ml_dtypes
    info = ml_dtypes.finfo(getattr(ml_dtypes, ML_FORMATS[name][0]))
    if np.isnan(value):
        if name == "fp8_e5m2":
            return "qnan" if b & 0b10 else "snan"
        return "nan"
    if np.isinf(value):
        return "inf"
    if value == 0:
        return "zero"
    return "subnormal" if abs(value) < float(info.smallest_normal) else "normal"


@pytest.mark.parametrize("fmt", SMALL, ids=lambda f: f.name)
def test_classify_and_describe_every_pattern_against_ml_dtypes(fmt):
    from softfloat16.compare import classes
    values = ml_values(fmt.name)
    _, width, fbits = ML_FORMATS[fmt.name]
    seen = set()
    for b, v in enumerate(values):
        kind = ml_class(b, fmt.name, float(v))
        d = describe(b, fmt)
        assert classify(b, fmt) == d.kind == kind, (hex(b), d.kind, kind)
        seen.add(kind)
        if kind not in ("nan", "qnan", "snan", "inf"):
            assert d.value == Fraction(float(v)), hex(b)
        # the fields put back together are the pattern; E8M0 has no sign bit
        assert (d.sign << (width - 1) if fmt.signed else 0) | d.exponent << fbits | d.fraction == b
        assert d.hex == f"0x{b:0{(width + 3) // 4}x}"
        shown = d.fields.replace(" ", "")
        assert shown == f"{b:0{width}b}", (d.fields, b)
    assert seen == set(classes(fmt))


def test_describe_text_of_the_new_encodings():
    assert str(describe(0x7E, sf.fp8_e4m3fn)) == "0x7e = 448.0 [0 1111 110] normal"
    assert str(describe(0xFF, sf.fp8_e4m3fn)) == "0xff = nan [1 1111 111] nan"
    assert str(describe(0x80, sf.fp8_e4m3fnuz)) == "0x80 = nan [1 0000 000] nan"
    assert str(describe(0x00, sf.fp8_e4m3fnuz)) == "0x00 = 0.0 [0 0000 000] zero"
    assert str(describe(0x3F, sf.fp6_e2m3)) == "0x3f = -7.5 [1 11 111] normal"
    assert str(describe(0x9, sf.fp4_e2m1)) == "0x9 = -0.5 [1 00 1] subnormal"
    assert str(describe(0x7F, sf.e8m0)) == "0x7f = 1.0 [01111111] normal"
    assert str(describe(0xFF, sf.e8m0)) == "0xff = nan [11111111] nan"
    assert str(describe(0xBF802000, sf.tf32_fp32)) == "0xbf802000 = -1.0009765625 [1 01111111 0000000001] normal"


def test_mismatch_mask_nan_modes_in_the_new_encodings():
    # E4M3FN: two NaNs (one per sign), both quiet: the same class, different bits
    assert mismatch_mask([0x7F, 0x7F, 0x7F], [0xFF, 0x7F, 0x7E], sf.fp8_e4m3fn, nan="class").tolist() == [0, 0, 1]
    assert mismatch_mask([0x7F, 0x7F], [0xFF, 0x7F], sf.fp8_e4m3fn, nan="strict").tolist() == [1, 0]
    # FNUZ: 0x80 is a NaN and never equals the zero 0x00, even with a ulp tolerance
    assert mismatch_mask([0x80, 0x80, 0x00], [0x80, 0x00, 0x80], sf.fp8_e5m2fnuz).tolist() == [0, 1, 1]
    assert mismatch_mask([0x80, 0x01], [0x00, 0x81], sf.fp8_e4m3fnuz, ulp=2).tolist() == [1, 0]
    # FP6/FP4 have no NaN: +0 and -0 differ as bits, are 0 ulp apart
    assert mismatch_mask([0x20, 0x20], [0x00, 0x00], sf.fp6_e3m2).tolist() == [1, 1]
    assert mismatch_mask([0x8], [0x0], sf.fp4_e2m1, ulp=0).tolist() == [0]
    assert mismatch_mask([0xFF, 0xFE, 0x00], [0xFF, 0xFF, 0x01], sf.e8m0, ulp=1).tolist() == [0, 1, 0]
    # TF32 in FP32 layout: its quiet bit is fraction bit 9 of the 10, at 1 << 22
    assert mismatch_mask([0x7FC00000, 0x7F802000], [0x7FE00000, 0x7FC00000], sf.tf32_fp32).tolist() == [0, 1]


def test_diff_report_and_hex_of_the_new_formats():
    text = diff_report([0x7, 0x8], [0x6, 0x0], sf.fp4_e2m1)
    assert "Mismatched elements: 2 / 2 (100%) [fp4_e2m1, nan='class']" in text
    assert "index (0,): actual   0x7 = 6.0 [0 11 1] normal" in text and "expected 0x6 = 4.0 [0 11 0] normal" in text
    assert "index (1,): actual   0x8 = -0.0 [1 00 0] zero" in text and "ulp distance 0" in text
    text = diff_report([0xFF, 0x80], [0xFE, 0x7F], sf.e8m0)
    assert "actual   0xff = nan [11111111] nan" in text and "expected 0xfe = ~1.7014118346046923e+38 [11111110]" in text
    assert "ulp distance n/a (NaN)" in text and "0x80 = 2.0 [10000000] normal" in text
    text = diff_report([0x3F802000], [0x3F800000], sf.tf32_fp32)
    assert "Max ulp distance: 1" in text and "0x3f802000 = 1.0009765625 [0 01111111 0000000001]" in text
    assert sf.hex(np.array([0x1F, 0x3F]), sf.fp6_e2m3) == "[0x1f, 0x3f]"
    assert sf.hex(0xF, sf.fp4_e2m1) == "0xf" and sf.hex(0x3F800000, sf.tf32_fp32) == "0x3f800000"


# --- IEEE P3109, against gfloat's decoder ---------------------------------------------------------
# Oracle: gfloat (an independent implementation of the P3109 formats) decodes every code and names
# its class; the format is given to it as (K, P, signedness, domain), read from the name here.

P3109_SAMPLE = [
    *(f"p3109_k8p{p}s{d}" for p in range(1, 8) for d in "ef"),
    *(f"p3109_k8p{p}u{d}" for p in range(1, 9) for d in "ef"),
    "p3109_k3p1se", "p3109_k3p2se", "p3109_k3p3ue", "p3109_k3p1uf", "p3109_k4p1sf", "p3109_k4p3se", "p3109_k4p4uf",
    "p3109_k5p2ue", "p3109_k6p1se", "p3109_k6p3sf", "p3109_k7p4ue", "p3109_k7p6se",
]


def gfloat_info(name: str):
    gfloat = pytest.importorskip("gfloat")
    from gfloat.formats import format_info_p3109
    from gfloat.types import Domain, Signedness
    k, p, s, d = re.fullmatch(r"p3109_k(\d)p(\d)([su])([ef])", name).groups()
    signedness = Signedness.Signed if s == "s" else Signedness.Unsigned
    return gfloat, format_info_p3109(int(k), int(p), signedness, Domain.Extended if d == "e" else Domain.Finite)


def gfloat_decoded(name: str) -> list:
    gfloat, info = gfloat_info(name)
    return [gfloat.decode_float(info, code) for code in range(1 << info.k)]


def gfloat_class(decoded) -> str:
    from gfloat.types import FloatClass
    return {FloatClass.ZERO: "zero", FloatClass.SUBNORMAL: "subnormal", FloatClass.NORMAL: "normal",
            FloatClass.INFINITE: "inf", FloatClass.NAN: "nan"}[decoded.fclass]


@pytest.mark.parametrize("name", P3109_SAMPLE)
def test_classify_and_describe_every_p3109_code_against_gfloat(name):
    from softfloat16.compare import classes
    fmt = sf.format(name)
    decoded = gfloat_decoded(name)
    seen = set()
    for code, d in enumerate(decoded):
        kind = gfloat_class(d)
        got = describe(code, fmt)
        assert classify(code, fmt) == got.kind == kind, (name, hex(code), got.kind, kind)
        seen.add(kind)
        if kind == "inf":
            assert got.value == d.fval
        elif kind != "nan":
            assert got.value == Fraction(d.fval), (name, hex(code))
        assert got.fields.replace(" ", "") == f"{code:0{len(decoded).bit_length() - 1}b}"
    assert seen == set(classes(fmt))  # P3109's inf counts as inf, its one NaN as the quiet 'nan'


@pytest.mark.parametrize("name", ["p3109_k8p3se", "p3109_k8p1se", "p3109_k8p4ue", "p3109_k8p8uf", "p3109_k4p2sf",
                                  "p3109_k3p1se"])
def test_ulp_distance_counts_gfloat_values_on_every_p3109_pair(name):
    values = np.array([d.fval for d in gfloat_decoded(name)], dtype=np.float64)
    rank = value_ranks(values)  # inf ranks one past max finite
    n = rank.size
    a, b = np.divmod(np.arange(n * n), n)
    expected = np.where((rank[a] < 0) | (rank[b] < 0), NAN_DISTANCE, np.abs(rank[a] - rank[b]))
    assert np.array_equal(ulp_distance(a, b, sf.format(name)), expected)


def test_p3109_specials_in_the_comparison_tools():
    f, u = sf.format("p3109_k8p3se"), sf.format("p3109_k8p1ue")
    assert ulp_distance(0x00, 0x80, f) == NAN_DISTANCE and ulp_distance(0x01, 0x81, f) == 2   # no -0
    assert ulp_distance(0x7E, 0x7F, f) == 1 and ulp_distance(0xFF, 0x7F, f) == 2 * 0x7F       # inf one past max
    assert str(describe(0x80, f)) == "0x80 = nan [1 00000 00] nan"
    assert str(describe(0xFF, f)) == "0xff = -inf [1 11111 11] inf"
    assert str(describe(0xFE, u)) == "0xfe = inf [11111110] inf"
    assert str(describe(0xFF, u)) == "0xff = nan [11111111] nan"
    assert mismatch_mask([0x80, 0x80, 0x00], [0x80, 0x00, 0x80], f, nan="class").tolist() == [0, 1, 1]
    assert mismatch_mask([0xFF, 0xFE], [0xFF, 0xFD], u, ulp=1).tolist() == [0, 0]
    assert "ulp distance n/a (NaN)" in diff_report([0x80], [0x7E], f)
