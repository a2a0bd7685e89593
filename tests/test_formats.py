"""Format's vocabulary: classification of bit patterns against numpy / ml_dtypes float hardware, and
the constants against numpy.finfo / ml_dtypes.finfo and IEEE 754 facts."""
from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import pytest

import softfloat16 as sf

FLOAT_DTYPES = {"fp16": np.float16, "fp32": np.float32, "bf16": ml_dtypes.bfloat16,
                "fp8_e5m2": ml_dtypes.float8_e5m2}


def patterns(fmt: sf.Format) -> np.ndarray:
    """Every pattern of a format of at most 16 bits; else random ones plus the edges."""
    if fmt.width <= 16:
        return np.arange(1 << fmt.width, dtype=np.uint32).astype(fmt.dtype)
    rng = np.random.default_rng(fmt.width)
    edges = [0, 1, fmt.min_normal - 1, fmt.min_normal, fmt.max_finite, fmt.inf, fmt.inf + 1, fmt.default_nan]
    bits = np.concatenate([rng.integers(0, 1 << fmt.width, 100_000), edges, np.array(edges) | fmt.sign_mask])
    return bits.astype(fmt.dtype)


@pytest.mark.parametrize("name", list(FLOAT_DTYPES))
def test_classification_matches_the_hardware(name):
    fmt, dtype = sf.format(name), FLOAT_DTYPES[name]
    bits = patterns(fmt)
    with np.errstate(invalid="ignore"):  # signaling NaNs widen with a warning
        x = bits.view(dtype).astype(np.float64)
    magnitude = np.abs(x)
    smallest_normal = float(ml_dtypes.finfo(dtype).smallest_normal)
    is_nan = np.isnan(x)
    assert np.array_equal(fmt.is_nan(bits), is_nan)
    assert np.array_equal(fmt.is_inf(bits), np.isinf(x))
    assert np.array_equal(fmt.is_finite(bits), np.isfinite(x))
    assert np.array_equal(fmt.is_zero(bits), x == 0)
    assert np.array_equal(fmt.is_subnormal(bits), (magnitude > 0) & (magnitude < smallest_normal))
    assert np.array_equal(fmt.is_normal(bits), (magnitude >= smallest_normal) & np.isfinite(x))
    # a signaling NaN is quieted by any arithmetic: x + 0 changes exactly those patterns' bits
    with np.errstate(invalid="ignore"):
        quieted = (bits.view(dtype) + dtype(0)).view(fmt.dtype) if name != "fp8_e5m2" else None
    if quieted is not None:
        assert np.array_equal(fmt.is_signaling(bits), is_nan & ((quieted & fmt.quiet_bit) != (bits & fmt.quiet_bit)))
    sign, exponent, fraction = fmt.fields(bits)
    assert np.array_equal(sign[~is_nan], np.signbit(x[~is_nan]))
    assert np.array_equal((sign << (fmt.width - 1)) | (exponent << fmt.fraction_bits) | fraction, bits)


def test_scalars_give_numpy_bools_and_operands_are_read_as_everywhere():
    assert type(sf.fp16.is_nan(0x7E00)) is np.bool_ and bool(sf.fp16.is_nan(0x7E00))
    assert type(sf.fp16.is_nan(np.uint16(0x3C00))) is np.bool_
    assert sf.fp16.is_inf(np.array([[0x7C00], [0xFC00]])).shape == (2, 1)
    assert sf.fp16.is_finite(np.array([1.0, np.inf], dtype=np.float16)).tolist() == [True, False]
    assert sf.fp32.is_nan(np.int32(-1))  # signed storage of the width: reinterpreted, 0xffffffff
    with pytest.raises(ValueError, match="bits"):
        sf.fp16.is_nan(0x10000)
    with pytest.raises(TypeError, match="bits"):
        sf.fp16.is_zero(np.array([0.0]))  # float64 is not fp16's storage


@pytest.mark.parametrize("name", list(FLOAT_DTYPES))
def test_constants_match_finfo(name):
    fmt, dtype = sf.format(name), FLOAT_DTYPES[name]
    info = ml_dtypes.finfo(dtype)
    value = lambda bits: float(fmt.value(bits))
    assert value(fmt.max_finite) == float(info.max)
    assert value(fmt.min_normal) == float(info.smallest_normal) == 2.0**fmt.emin
    assert value(fmt.min_subnormal) == float(info.smallest_subnormal) == 2.0**fmt.min_subnormal_exponent
    assert math.floor(math.log2(float(info.max))) == fmt.emax == info.maxexp - 1
    assert fmt.emin == info.minexp
    assert value(fmt.one) == 1.0 and value(fmt.inf) == math.inf
    assert fmt.is_nan(fmt.default_nan) and not fmt.is_signaling(fmt.default_nan)
    assert fmt.fraction_mask == fmt.min_normal - 1 and fmt.magnitude_mask == fmt.sign_mask - 1


def test_constants_by_hand():
    fp16, bf16, fp32 = sf.fp16, sf.bf16, sf.fp32
    assert (fp16.inf, fp16.max_finite, fp16.min_normal, fp16.default_nan, fp16.quiet_bit) == (
        0x7C00, 0x7BFF, 0x0400, 0x7E00, 0x0200)
    assert (bf16.inf, bf16.max_finite, bf16.min_normal, bf16.default_nan, bf16.one) == (
        0x7F80, 0x7F7F, 0x0080, 0x7FC0, 0x3F80)
    assert (fp32.inf, fp32.default_nan, fp32.magnitude_mask, fp32.one) == (
        0x7F800000, 0x7FC00000, 0x7FFFFFFF, 0x3F800000)
    assert [(f.emin, f.emax, f.min_subnormal_exponent) for f in (fp16, bf16, fp32, sf.fp8_e5m2, sf.tf32)] == [
        (-14, 15, -24), (-126, 127, -133), (-126, 127, -149), (-14, 15, -16), (-126, 127, -136)]
    assert sf.fp8_e5m2.default_nan == 0x7E and sf.tf32.default_nan == 0x3FE00


def test_arithmetic_methods_are_attached_with_their_docs():
    for name in ("add", "sub", "mul", "div", "fma", "sqrt", "eq", "lt", "le", "from_float", "to_float"):
        method = getattr(sf.Format, name)
        assert method.__qualname__ == f"Format.{name}" and ">>> import softfloat16 as sf" in method.__doc__
    assert sf.fp16.add(0x3C00, 0x3C00) == 0x4000


def test_the_documented_format_table_is_generated_from_the_formats():
    """docs/softfloat16.md holds format_table()'s text, and its fp16/fp32 rows agree with numpy's finfo."""
    from pathlib import Path

    from softfloat16.format_docs import format_table

    page = (Path(__file__).resolve().parent.parent / "docs" / "softfloat16.md").read_text(encoding="utf-8")
    table = format_table()
    assert table in page
    rows = {line.split("`")[1]: line for line in table.splitlines()[2:]}
    assert set(rows) == set(sf.FORMATS)
    for name, dtype in (("fp16", np.float16), ("fp32", np.float32)):
        info = np.finfo(dtype)
        cells = [cell.strip() for cell in rows[name].split("|")[1:-1]]
        assert cells[1] == f"1-{info.nexp}-{info.nmant}"
        assert cells[6] == f"2^{int(np.log2(info.tiny))}" and cells[7] == f"2^{int(np.log2(info.smallest_subnormal))}"
    assert "| 65504 |" in rows["fp16"] and "(low 19 bits)" in rows["tf32"]
    import ml_dtypes
    for name in ("fp8_e4m3fn", "fp8_e4m3fnuz", "fp8_e5m2fnuz", "fp6_e2m3", "fp6_e3m2", "fp4_e2m1"):
        info = ml_dtypes.finfo(getattr(ml_dtypes, sf.format(name).float_dtype_name))
        cells = [cell.strip() for cell in rows[name].split("|")[1:-1]]
        assert float(cells[5]) == float(info.max) and cells[6] == f"2^{int(np.log2(float(info.smallest_normal)))}"
    assert rows["fp8_e4m3fn"].endswith("| NaN |") and rows["fp4_e2m1"].endswith("| saturates (max) |")
