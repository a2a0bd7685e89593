"""The new formats through the public API: names, ml_dtypes operands, saturation, E8M0's limits,
TF32 in FP32 layout, and matmul on FP8 inputs. References: ml_dtypes, torch's float8 conversions,
Fractions. The exhaustive comparisons with the exact oracle are in tests/test_small_formats.py."""
from __future__ import annotations

from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest

import softfloat16 as sf
from softfloat16._verify_reference import ml_dtypes_rounds_correctly

NEW = ["fp8_e4m3fn", "fp8_e4m3fnuz", "fp8_e5m2fnuz", "fp6_e2m3", "fp6_e3m2", "fp4_e2m1", "e8m0"]
ML_NAMES = {"fp8_e4m3fn": "float8_e4m3fn", "fp8_e4m3fnuz": "float8_e4m3fnuz", "fp8_e5m2fnuz": "float8_e5m2fnuz",
            "fp6_e2m3": "float6_e2m3fn", "fp6_e3m2": "float6_e3m2fn", "fp4_e2m1": "float4_e2m1fn",
            "e8m0": "float8_e8m0fnu", "fp8_e5m2": "float8_e5m2"}


@pytest.mark.parametrize("name", NEW)
def test_each_format_is_an_attribute_and_answers_to_its_ml_dtypes_name(name):
    fmt = getattr(sf, name)
    assert sf.format(ML_NAMES[name]) is fmt and sf.format(name) is fmt
    finfo = ml_dtypes.finfo(getattr(ml_dtypes, ML_NAMES[name]))
    assert float(fmt.value(fmt.max_finite)) == float(finfo.max)
    assert 2.0 ** fmt.min_subnormal_exponent == float(finfo.smallest_subnormal)
    assert 2.0 ** fmt.emin == float(finfo.smallest_normal)


@pytest.mark.parametrize("name", list(ML_NAMES))
def test_every_pattern_has_the_value_ml_dtypes_gives_it(name):
    fmt = sf.format(name)
    dtype = getattr(ml_dtypes, ML_NAMES[name])
    codes = np.arange(1 << (fmt.width if fmt.width < 8 else 8), dtype=np.uint8)
    reference = codes.view(dtype).astype(np.float64)
    ours = fmt.to_float(codes)
    same = (ours == reference) & (np.signbit(ours) == np.signbit(reference))
    assert np.all(same | (np.isnan(ours) & np.isnan(reference)))
    assert np.array_equal(np.isnan(ours), fmt.is_nan(codes))
    # ml_dtypes arrays are read as their bits, like np.float16 arrays for fp16.
    assert np.array_equal(fmt.to_float(codes.view(dtype)), ours, equal_nan=True)
    for code in codes[np.isfinite(reference)]:
        assert fmt.value(int(code)) == Fraction(float(reference[code]))


@pytest.mark.parametrize("name", ["fp8_e4m3fn", "fp8_e4m3fnuz", "fp8_e5m2fnuz", "fp6_e2m3", "fp6_e3m2",
                                  "fp4_e2m1", "e8m0", "fp8_e5m2"])
def test_float32_conversions_match_ml_dtypes_rne(name):
    """ml_dtypes' conversion is RNE with its overflow defaults, ours too; the one documented
    difference: NaN into a format without NaN is +0 here (ml_dtypes: -0 for +NaN)."""
    fmt = sf.format(name)
    rng = np.random.default_rng(1)
    top = float(fmt.value(fmt.max_finite))
    with np.errstate(over="ignore", invalid="ignore"):
        x = np.concatenate([
            rng.standard_normal(20000) * top / 3,
            np.exp(rng.uniform(-120, np.log(top) + 1, 20000)) * rng.choice([-1, 1], 20000),
            fmt.to_float(np.arange(256 if fmt.width >= 8 else 1 << fmt.width, dtype=np.uint8)) * (1 + 2.0**-20),
            [np.inf, -np.inf, 0.0, -0.0, 1e38, -1e38, 1e-45],
        ]).astype(np.float32)
    x = x[~np.isnan(x)]
    if name == "e8m0":
        # ml_dtypes before 0.7 rounds every value strictly between 2**-127 and 2**-126 up to 2**-126
        # (0x01), even 1.05 * 2**-127; round-to-nearest gives 2**-127 (0x00) below 1.5 * 2**-127, as
        # ml_dtypes 0.7 does. Each version's answer is checked, so that a change on either side is seen.
        between = (np.abs(x) > 2.0**-127) & (np.abs(x) < 1.5 * 2.0**-127) & (x > 0)
        assert between.sum() > 3 and np.all(fmt.from_float(x[between]) == 0)
        if not ml_dtypes_rounds_correctly():
            assert np.all(x[between].astype(ml_dtypes.float8_e8m0fnu).view(np.uint8) == 1)
            x = x[~between]
    ours = fmt.from_float(x)
    theirs = x.astype(getattr(ml_dtypes, ML_NAMES[name])).view(np.uint8)
    assert np.array_equal(ours, theirs), [(float(v), hex(a), hex(b)) for v, a, b in zip(x, ours, theirs) if a != b][:5]


@pytest.mark.parametrize("name,saturate", [("float8_e4m3fn", True), ("float8_e5m2", False),
                                           ("float8_e4m3fnuz", None), ("float8_e5m2fnuz", None)])
def test_float32_conversions_match_torch(name, saturate):
    """torch 2.13 saturates E4M3FN (to 448) and overflows E5M2 to inf; FNUZ overflow is NaN in both."""
    torch = pytest.importorskip("torch")
    fmt = sf.format(name)
    rng = np.random.default_rng(2)
    x = np.concatenate([rng.standard_normal(50000).astype(np.float32) * 200,
                        np.float32([1e30, -1e30, 500.0, 464.0, 1e-12, -1e-12, 0.0, -0.0, np.inf, -np.inf])])
    theirs = torch.from_numpy(x).to(getattr(torch, name)).view(torch.uint8).numpy()
    ours = fmt.from_float(x, saturate=bool(saturate))
    finite = np.isfinite(x)
    assert np.array_equal(ours[finite], theirs[finite])


def test_saturate_clamps_every_infinite_result():
    assert int(sf.fp16.mul(0x7BFF, 0x7BFF, saturate=True)) == 0x7BFF
    assert int(sf.fp16.div(0xBC00, 0x0000, saturate=True)) == 0xFBFF
    assert int(sf.fp16.add(0x7C00, 0x3C00, saturate=True)) == 0x7BFF
    assert int(sf.convert(0xFF800000, sf.fp32, sf.bf16, saturate=True)) == 0xFF7F
    bits, flags = sf.fp8_e4m3fn.from_float(np.float32([1e6, -np.inf, np.nan]), saturate=True, flags=True)
    assert bits.tolist() == [0x7E, 0xFE, 0x7F]
    assert flags.tolist() == [sf.Flag.OVERFLOW | sf.Flag.INEXACT, sf.Flag.INVALID, 0]
    # Rounding toward zero never overflows to the NaN, saturating or not.
    assert int(sf.fp8_e4m3fn.from_float(1e6, rounding="rtz")) == 0x7E
    assert int(sf.fp8_e4m3fn.from_float(-1e6, rounding="rup")) == 0xFE


def test_e8m0_converts_but_has_no_arithmetic():
    assert sf.e8m0.to_float(np.array([0x00, 0x7F, 0xFE], np.uint8)).tolist() == [2.0**-127, 1.0, 2.0**127]
    bits, flags = sf.e8m0.from_float(np.array([0.0, -2.0, 2.0**-140, 2.0**200]), flags=True)
    assert bits.tolist() == [0xFF, 0xFF, 0x00, 0xFF]
    assert flags.tolist() == [sf.Flag.INVALID, sf.Flag.INVALID, sf.Flag.UNDERFLOW | sf.Flag.INEXACT,
                              sf.Flag.OVERFLOW | sf.Flag.INEXACT]
    assert int(sf.e8m0.from_float(2.0**200, saturate=True)) == 0xFE
    assert int(sf.convert(0x80, sf.e8m0, sf.fp16)) == 0x4000 and int(sf.convert(0xFF, sf.e8m0, sf.fp32)) == 0x7FC00000
    assert bool(sf.e8m0.lt(0x7F, 0x80)) and not bool(sf.e8m0.eq(0xFF, 0xFF))
    for op in ("add", "sub", "mul", "div"):
        with pytest.raises(ValueError, match="e8m0 is a scale format"):
            getattr(sf.e8m0, op)(0x7F, 0x7F)
    with pytest.raises(ValueError, match="e8m0 is a scale format"):
        sf.e8m0.sqrt(0x7F)


def test_tf32_in_fp32_layout_gives_the_compact_formats_results_shifted():
    rng = np.random.default_rng(4)
    compact = rng.integers(0, 1 << 19, (2, 5000)).astype(np.uint32)
    wide = compact << np.uint32(13)
    for op in ("add", "mul", "div"):
        expected = getattr(sf.tf32, op)(compact[0], compact[1], rounding="rtz")
        assert np.array_equal(getattr(sf.tf32_fp32, op)(wide[0], wide[1], rounding="rtz"), expected << np.uint32(13))
    assert np.array_equal(sf.tf32_fp32.to_float(wide[0]), sf.tf32.to_float(compact[0]), equal_nan=True)
    x = rng.standard_normal(1000).astype(np.float32)
    assert np.array_equal(sf.tf32_fp32.from_float(x), sf.tf32.from_float(x) << np.uint32(13))
    truncated = x.view(np.uint32) & np.uint32(0xFFFFE000)
    assert np.array_equal(sf.tf32_fp32.add(truncated, 0), truncated)
    with pytest.raises(ValueError, match="low 13 bits zero"):
        sf.tf32_fp32.add(x, x)


def test_unknown_format_names_list_the_new_ones():
    with pytest.raises(ValueError, match="float8_e4m3fn.*") as info:
        sf.format("float8_e4m3")
    assert "fp4_e2m1" in str(info.value) and "e8m0" in str(info.value)


def test_matmul_of_small_formats_equals_matmul_of_their_exact_fp16_copies():
    """Every value of these formats is exact in fp16, so the products and sums must be the same bits."""
    rng = np.random.default_rng(5)
    for fmt in (sf.fp8_e4m3fn, sf.fp8_e4m3fnuz, sf.fp6_e3m2, sf.fp4_e2m1):
        codes = np.arange(1 << min(fmt.width, 8), dtype=np.uint8)
        finite = codes[~fmt.is_nan(codes)]
        a = rng.choice(finite, (7, 40))
        b = rng.choice(finite, (40, 9))
        a16, b16 = sf.convert(a, fmt, sf.fp16), sf.convert(b, fmt, sf.fp16)
        assert np.array_equal(sf.fp16.to_float(a16), fmt.to_float(a))
        # (not order="tensorcore": a matrix unit aligns an FP8 subnormal at FP8's minimum exponent)
        for order in ("sequential", "pairwise"):
            got = sf.linalg.matmul(a, b, fmt, out_format=sf.fp32, order=order)
            assert np.array_equal(got, sf.linalg.matmul(a16, b16, sf.fp16, out_format=sf.fp32, order=order)), (
                fmt.name, order)
    with pytest.raises(ValueError, match="out_format: fp8_e4m3fn is not an IEEE-encoded format"):
        sf.linalg.matmul(np.zeros((1, 1), np.uint8), np.zeros((1, 1), np.uint8), sf.fp8_e4m3fn)


def test_tf32_in_fp32_layout_returns_its_flags_apart():
    bits, flags = sf.tf32_fp32.add(0x3F800000, 0x3A000000, rounding="rup", flags=True)  # 1 + 2**-11, up
    assert int(bits) == 0x3F802000 and flags == sf.Flag.INEXACT
    bits, flags = sf.convert(np.uint32([0x3F800001, 0x3F800000]), sf.fp32, sf.tf32_fp32, flags=True)
    assert bits.tolist() == [0x3F800000, 0x3F800000] and flags.tolist() == [sf.Flag.INEXACT, 0]


def test_fields_of_every_format():
    assert [int(x) for x in sf.e8m0.fields(0xFE)] == [0, 254, 0]
    assert [int(x) for x in sf.tf32_fp32.fields(0xBF802000)] == [1, 127, 1]
    assert [int(x) for x in sf.fp4_e2m1.fields(0xB)] == [1, 1, 1]


def test_matmul_of_two_formats_equals_matmul_of_their_exact_fp16_copies():
    """E4M3 times E5M2 (FP8 training's backward matmuls): both are exact in fp16, so the sums must
    be those of the fp16 matmul, in the sequential and pairwise orders."""
    rng = np.random.default_rng(6)
    codes = np.arange(256, dtype=np.uint8)
    e4m3 = rng.choice(codes[~sf.fp8_e4m3fn.is_nan(codes)], (5, 48))
    e5m2 = rng.choice(codes[sf.fp8_e5m2.is_finite(codes)], (48, 6))
    a16, b16 = sf.convert(e4m3, sf.fp8_e4m3fn, sf.fp16), sf.convert(e5m2, sf.fp8_e5m2, sf.fp16)
    for order in ("sequential", "pairwise"):  # not "tensorcore": see above
        got = sf.linalg.matmul(e4m3, e5m2, sf.fp8_e4m3fn, b_format=sf.fp8_e5m2, out_format=sf.fp32, order=order)
        assert np.array_equal(got, sf.linalg.matmul(a16, b16, sf.fp16, out_format=sf.fp32, order=order)), order
    # the sequential order (exact copies in the FP16 lane kernel) against numpy float32 sums
    ml_dtypes = pytest.importorskip("ml_dtypes")
    a32 = e4m3.view(ml_dtypes.float8_e4m3fn).astype(np.float32)
    b32 = e5m2.view(ml_dtypes.float8_e5m2).astype(np.float32)
    expected = np.zeros((5, 6), np.float32)
    for k in range(48):
        expected = expected + a32[:, k:k + 1] * b32[k:k + 1, :]  # exact products, one rounding per sum
    got = sf.linalg.matmul(e4m3, e5m2, sf.fp8_e4m3fn, b_format=sf.fp8_e5m2, out_format=sf.fp32)
    assert np.array_equal(got, expected.view(np.uint32))
    with pytest.raises(ValueError, match="b: value 4096"):
        sf.linalg.matmul(e4m3, np.full((48, 2), 4096), sf.fp8_e4m3fn, b_format=sf.fp8_e5m2, out_format=sf.fp32)
    with pytest.raises(ValueError, match="b_format: e8m0 is a scale format"):
        sf.linalg.matmul(e4m3, e5m2, sf.fp8_e4m3fn, b_format=sf.e8m0, out_format=sf.fp32)
