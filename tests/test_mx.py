"""softfloat16.mx (OCP MX v1.0 and NVFP4) against a reference written here from the definitions in
docs/mx.md, with fractions.Fraction: nothing below uses the project's kernels. Element and scale
patterns are decoded with ml_dtypes (an independent implementation of these formats); every
rounding is done on exact rationals by the small routines of this file."""
from __future__ import annotations

import dataclasses
import math
import zlib
from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest

import softfloat16.mx as mx

F = Fraction
INF, NAN = float("inf"), float("nan")
MODES = ("rne", "rna", "rtz", "rup", "rdn", "rod")
MX_NAMES = ("mxfp8_e4m3", "mxfp8_e5m2", "mxfp6_e2m3", "mxfp6_e3m2", "mxfp4_e2m1", "mxint8")


# --- the formats, from the OCP MX v1.0 and NVFP4 definitions ---------------------------------------

@dataclasses.dataclass(frozen=True)
class Element:
    """A float element format (exponent bits, mantissa bits, bias, largest value), or MXINT8."""

    mbits: int
    bias: int
    largest: Fraction
    emax: int  # OCP's emax_elem: exponent of the largest binade
    nan_fill: int  # element pattern of a NaN-scale block (docs/mx.md)
    dtype: object  # ml_dtypes decoder; None for MXINT8

    @property
    def integer(self) -> bool:
        return self.dtype is None


ELEMENTS = {
    "mxfp8_e4m3": Element(3, 7, F(448), 8, 0x7F, ml_dtypes.float8_e4m3fn),
    "mxfp8_e5m2": Element(2, 15, F(57344), 15, 0x7E, ml_dtypes.float8_e5m2),
    "mxfp6_e2m3": Element(3, 1, F(15, 2), 2, 0, ml_dtypes.float6_e2m3fn),
    "mxfp6_e3m2": Element(2, 3, F(28), 4, 0, ml_dtypes.float6_e3m2fn),
    "mxfp4_e2m1": Element(1, 1, F(6), 2, 0, ml_dtypes.float4_e2m1fn),
    "mxint8": Element(0, 0, F(127, 64), 0, 0, None),
    "nvfp4": Element(1, 1, F(6), 2, 0, ml_dtypes.float4_e2m1fn),
}
E4M3 = Element(3, 7, F(448), 8, 0x7F, ml_dtypes.float8_e4m3fn)
FP32_MAX = (2 - F(1, 2**23)) * F(2) ** 127


def decode(patterns, dtype) -> list:
    """Values of uint8 patterns through ml_dtypes (float64; NaN as float nan)."""
    values = np.asarray(patterns, np.uint8).view(dtype).astype(np.float64)
    return [v if math.isnan(v) or math.isinf(v) else F(v) for v in values.ravel().tolist()]


def element_values(fmt: str, patterns) -> list:
    element = ELEMENTS[fmt]
    if element.integer:
        return [F(int(k), 64) for k in np.asarray(patterns, np.uint8).view(np.int8).ravel()]
    return decode(patterns, element.dtype)


def encoder(dtype) -> dict:
    """(value, sign) -> pattern for every non-NaN pattern of a format (ml_dtypes decodes)."""
    table = {}
    width = 4 if dtype is ml_dtypes.float4_e2m1fn else 6 if "float6" in np.dtype(dtype).name else 8
    for pattern in range(1 << width):
        value = float(np.array(pattern, np.uint8).view(dtype).astype(np.float64))
        if not math.isnan(value):
            table[(abs(value) if math.isinf(value) else abs(F(value)), math.copysign(1, value) < 0)] = pattern
    return table


ENCODERS = {name: encoder(e.dtype) for name, e in ELEMENTS.items() if not e.integer}
ENCODERS["e4m3"] = encoder(ml_dtypes.float8_e4m3fn)


# --- exact rounding ---------------------------------------------------------------------------------

def floor_log2(v: Fraction) -> int:
    e = v.numerator.bit_length() - v.denominator.bit_length()
    return e - 1 if F(2) ** e > v else e


def round_magnitude(magnitude: Fraction, quantum: Fraction, mode: str, negative: bool, draw: int = 0,
                    sr_bits: int = 32) -> Fraction:
    """The multiple of ``quantum`` that ``mode`` picks for a magnitude (the sign given apart)."""
    k, rest = divmod(magnitude / quantum, 1)
    k = int(k)
    if rest == 0:
        return k * quantum
    up = {"rne": rest > F(1, 2) or (rest == F(1, 2) and k % 2 == 1), "rna": rest >= F(1, 2), "rtz": False,
          "rup": not negative, "rdn": negative, "rod": k % 2 == 0,
          "sr": math.floor(rest * 2**sr_bits) + draw >= 2**sr_bits}[mode]
    return (k + int(up)) * quantum


def round_float(value: Fraction, mbits: int, bias: int, largest, mode: str = "rne", draw: int = 0,
                sr_bits: int = 32, saturate: bool = True, negative: bool | None = None):
    """``value`` rounded into a binary format with subnormals (emin = 1 - bias) and ``mbits``
    fraction bits; above the largest value: that value (saturate) or inf. Returns (value, sign);
    ``negative`` gives the sign of a zero (Fractions have no -0)."""
    negative = value < 0 if negative is None else negative
    magnitude = abs(value)
    if magnitude == 0:
        return F(0), negative
    exponent = max(floor_log2(magnitude), 1 - bias)
    rounded = round_magnitude(magnitude, F(2) ** (exponent - mbits), mode, negative, draw, sr_bits)
    if rounded > largest:
        rounded = largest if saturate else INF
    return (-rounded if negative else rounded), negative


def fl32(value, saturate: bool = False):
    """FP32 round to nearest even of an exact value (inf/NaN pass through)."""
    if isinstance(value, float):
        return value
    return round_float(value, 23, 127, FP32_MAX, saturate=saturate)[0]


def fp32_bits(value) -> int:
    return int(np.float32(value).view(np.uint32)) if not isinstance(value, Fraction) else \
        int(np.float32(float(value)).view(np.uint32))


# --- the reference quantiser (docs/mx.md) -------------------------------------------------------------

def reference_element(fmt: str, value: Fraction, negative: bool, mode: str, draw: int, sr_bits: int) -> int:
    element = ELEMENTS[fmt]
    if element.integer:
        k = round_magnitude(abs(value) * 64, F(1), mode, negative, draw, sr_bits)
        k = max(min(-k if negative else k, 127), -128)
        return int(k) & 0xFF
    rounded, _ = round_float(value, element.mbits, element.bias, element.largest, mode, draw, sr_bits,
                             negative=negative)
    return ENCODERS[fmt][(abs(rounded), negative)]


def reference_mx_block(fmt: str, values: list, signs: list, rule: str, mode: str, draws: list, sr_bits: int):
    """(scale pattern, element patterns) of one MX block."""
    element = ELEMENTS[fmt]
    if any(isinstance(v, float) for v in values):  # inf or NaN
        return 0xFF, [element.nan_fill] * len(values)
    amax = max(abs(v) for v in values)
    if amax == 0:
        shared = -127
    elif rule == "floor":
        shared = floor_log2(amax) - element.emax
    else:  # the smallest s with amax / 2**s <= largest: s = ceil(log2(amax / largest))
        ratio = amax / element.largest
        shared = floor_log2(ratio)
        shared += int(F(2) ** shared != ratio)
    shared = min(max(shared, -127), 127)
    scale = F(2) ** shared
    return shared + 127, [reference_element(fmt, v / scale, negative, mode, d, sr_bits)
                          for v, negative, d in zip(values, signs, draws)]


def nvfp4_tensor_scales(values: list) -> tuple[Fraction, Fraction]:
    """(S_enc, S_dec) from the largest finite magnitude of the whole tensor."""
    amax = max((abs(v) for v in values if not isinstance(v, float)), default=F(0))
    encode = fl32(F(2688) / amax, saturate=True) if amax else F(0)
    encode = encode or F(1)  # amax 0, or 2688 / amax below FP32's range
    return encode, fl32(1 / encode, saturate=True)


def reference_nvfp4_blocks(values: list, signs: list, encode: Fraction, decode: Fraction, block_size: int,
                           mode: str, draws: list, sr_bits: int) -> tuple[list, list]:
    """(scale patterns, element patterns) of one row of an NVFP4 tensor (docs/mx.md, NVFP4)."""
    coefficient = fl32(encode * fl32(F(1, 6)))
    scales, elements = [], []
    for start in range(0, len(values), block_size):
        block = values[start:start + block_size]
        if any(isinstance(v, float) for v in block):
            scales.append(0x7F)
            elements += [0] * len(block)
            continue
        block_amax = max(abs(v) for v in block)
        scale = round_float(fl32(block_amax * coefficient, saturate=True), 3, 7, F(448))[0]
        scales.append(ENCODERS["e4m3"][(scale, False)])
        factor = FP32_MAX if scale == 0 else fl32(1 / fl32(scale * decode, saturate=True), saturate=True)
        for offset, v in enumerate(block):
            negative = signs[start + offset]
            scaled = fl32(v * factor, saturate=True)
            rounded, _ = round_float(scaled, 1, 1, F(6), mode, draws[start + offset], sr_bits, negative=negative)
            elements.append(ENCODERS["nvfp4"][(abs(rounded), negative)])
    return scales, elements


def exact_values(x: np.ndarray) -> list:
    """Exact values of a float array (Fraction; inf and NaN as floats), flat C order."""
    return [v if math.isnan(v) or math.isinf(v) else F(v) for v in np.asarray(x, np.float64).ravel().tolist()]


def signs(x: np.ndarray) -> list:
    """Whether each value is negative (-0 included), flat C order."""
    return np.signbit(np.asarray(x, np.float64)).ravel().tolist()


def reference_quantize(x, fmt, axis=-1, block_size=None, rule="floor", mode="rne", words=None, sr_bits=32):
    """(elements, scales, tensor scale) like mx.quantize gives them, from the definitions."""
    x = np.asarray(x)
    block_size = block_size or (16 if fmt == "nvfp4" else 32)
    moved = np.moveaxis(x, axis, -1)
    rows = moved.reshape(-1, moved.shape[-1]) if moved.size else moved.reshape(0, moved.shape[-1])
    n = rows.shape[1]
    draw_rows = (np.moveaxis(words, axis, -1).reshape(rows.shape) >> (32 - sr_bits) if words is not None
                 else np.zeros(rows.shape, np.int64))
    blocks = -(-n // block_size)
    elements = np.zeros(rows.shape, np.uint8)
    scales = np.zeros((rows.shape[0], blocks), np.uint8)
    decode = None
    if fmt == "nvfp4":
        encode, decode = nvfp4_tensor_scales(exact_values(rows))
        for r in range(rows.shape[0]):
            scales[r], elements[r] = reference_nvfp4_blocks(
                exact_values(rows[r]), signs(rows[r]), encode, decode, block_size, mode,
                [int(d) for d in draw_rows[r]], sr_bits)
    else:
        for r in range(rows.shape[0]):
            values, negative = exact_values(rows[r]), signs(rows[r])
            for b in range(blocks):
                part = slice(b * block_size, (b + 1) * block_size)
                scales[r, b], elements[r, part] = reference_mx_block(
                    fmt, values[part], negative[part], rule, mode, [int(d) for d in draw_rows[r, part]], sr_bits)
    shape_e = moved.shape
    elements = np.moveaxis(elements.reshape(shape_e), -1, axis)
    scales = np.moveaxis(scales.reshape(shape_e[:-1] + (blocks,)), -1, axis)
    return elements, scales, decode


def scale_values(q: mx.MXTensor) -> list:
    return decode(q.scales, ml_dtypes.float8_e4m3fn if q.fmt == "nvfp4" else ml_dtypes.float8_e8m0fnu)


def reference_dequantize(q: mx.MXTensor) -> list:
    """Exact value of every element (flat C order): element * scale (* S_dec); NaN for NaN."""
    elements = np.asarray(element_values(q.fmt, q.elements), dtype=object).reshape(q.shape)
    scales = np.asarray(scale_values(q), dtype=object).reshape(q.scales.shape)
    scales = np.repeat(scales, q.block_size, axis=q.axis)
    scales = np.take(scales, np.arange(q.shape[q.axis]), axis=q.axis)
    tensor = F(float(np.uint32(q.tensor_scale).view(np.float32))) if q.tensor_scale is not None else F(1)
    out = []
    for e, s in zip(elements.ravel(), scales.ravel()):
        out.append(NAN if isinstance(e, float) or isinstance(s, float) else e * s * tensor)
    return out


# --- the reference matmul ------------------------------------------------------------------------------

def exact_sum(terms: list):
    """Sum of exact terms (Fractions; inf/NaN as floats) with IEEE rules for the specials."""
    if any(isinstance(t, float) and math.isnan(t) for t in terms):
        return NAN
    infinities = {t for t in terms if isinstance(t, float)}
    if len(infinities) == 2:
        return NAN
    return infinities.pop() if infinities else sum(terms, F(0))


def times(x, y):
    """x * y with IEEE rules (inf * 0 = NaN)."""
    if isinstance(x, float) or isinstance(y, float):
        if (isinstance(x, float) and math.isnan(x)) or (isinstance(y, float) and math.isnan(y)) or x == 0 or y == 0:
            return NAN
        return math.copysign(INF, float(x) * float(y))
    return x * y


def reference_matmul(a: mx.MXTensor, b: mx.MXTensor) -> list:
    """FP32 values (Fraction, inf or NaN) of docs/mx.md's matmul, row by row."""
    m, k_total = a.shape
    n = b.shape[1]
    ea = np.asarray(element_values(a.fmt, a.elements), dtype=object).reshape(m, k_total)
    eb = np.asarray(element_values(b.fmt, b.elements), dtype=object).reshape(k_total, n)
    sa = np.asarray(scale_values(a), dtype=object).reshape(a.scales.shape)
    sb = np.asarray(scale_values(b), dtype=object).reshape(b.scales.shape)
    out = []
    for i in range(m):
        for j in range(n):
            accumulator = F(0)
            for block in range(sa.shape[1]):
                ks = range(block * a.block_size, min((block + 1) * a.block_size, k_total))
                dot = exact_sum([times(ea[i, k], eb[k, j]) for k in ks])
                term = fl32(times(times(dot, sa[i, block]), sb[block, j]))
                accumulator = fl32(exact_sum([accumulator, term]))
            if a.tensor_scale is not None:
                factor = fl32(F(float(np.uint32(a.tensor_scale).view(np.float32)))
                              * F(float(np.uint32(b.tensor_scale).view(np.float32))))
                accumulator = fl32(times(accumulator, factor))
            out.append(accumulator)
    return out


def fp32_patterns(values: list) -> list:
    return [0x7FC00000 if isinstance(v, float) and math.isnan(v) else
            int(np.float32(float(v)).view(np.uint32)) for v in values]


# --- test data ---------------------------------------------------------------------------------------

def seed(*words) -> int:
    """A seed that is the same in every process (hash() of a str is not)."""
    return zlib.crc32(repr(words).encode())


def sample(rng: np.random.Generator, rows: int, n: int, block_size: int, specials: bool = True,
           extremes: bool = True, spread: int = 45) -> np.ndarray:
    """float32 values with blocks of every kind: scales from 2**-spread to 2**spread, elements spread down to
    the element formats' subnormals, ties (small integers times powers of two), zeros and -0, FP32
    subnormals and (``extremes``) blocks next to FLT_MAX, and (``specials``) inf and NaN."""
    blocks = -(-n // block_size)
    x = rng.standard_normal((rows, n))
    x *= np.repeat(np.exp2(rng.integers(-spread, spread + 1, (rows, blocks))), block_size, axis=1)[:, :n]
    x *= np.exp2(-rng.integers(0, 24, (rows, n)) * (rng.random((rows, n)) < 0.3))
    ties = rng.random((rows, n)) < 0.25
    x[ties] = rng.integers(-64, 65, ties.sum()) * np.exp2(rng.integers(-12, 12, ties.sum()))
    x[rng.random((rows, n)) < 0.05] = 0.0
    x[rng.random((rows, n)) < 0.03] = -0.0
    x = x.astype(np.float32)
    x[0, :block_size] = 0.0  # a block of zeros
    x[0, block_size:2 * block_size] = -0.0  # of negative zeros
    if rows > 1 and extremes:
        x[1, :block_size] = np.float32(2.0 ** -149) * rng.integers(-2**10, 2**10, min(block_size, n))  # subnormals
        x[1, block_size:2 * block_size] = np.float32(3.4e38) * rng.uniform(-1, 1, len(x[1, block_size:2 * block_size]))
    if rows > 2 and extremes:
        x[2, block_size:2 * block_size] = np.float32(np.finfo(np.float32).max) * rng.choice([-1, 1], len(
            x[2, block_size:2 * block_size]))
    if specials and rows > 3:
        x[3, 1] = np.inf
        x[3, block_size + 2] = -np.inf
        x[3, 2 * block_size + 3] = np.nan
    return x


def assert_quantize_matches(x, fmt, **options):
    q = mx.quantize(x, fmt, **options)
    words = options.get("random_bits")
    if words is not None:
        words = np.broadcast_to(np.asarray(words, np.uint32), np.shape(x))
    elements, scales, decode = reference_quantize(
        x, fmt, axis=options.get("axis", -1), block_size=options.get("block_size"),
        rule=options.get("scale_rule", "floor"), mode=options.get("rounding", "rne"), words=words,
        sr_bits=options.get("sr_bits", 32))
    mismatched = np.argwhere(q.elements != elements)
    if mismatched.size:
        where = tuple(mismatched[0])
        raise AssertionError(f"{fmt} {options}: {len(mismatched)} element(s) differ, first at {where}: "
                             f"x={np.asarray(x)[where]!r}, got {q.elements[where]:#x}, expected {elements[where]:#x}")
    np.testing.assert_array_equal(q.scales, scales, err_msg=f"{fmt} {options}: scales")
    if fmt == "nvfp4":
        assert int(q.tensor_scale) == fp32_bits(decode)
    else:
        assert q.tensor_scale is None
    return q


# --- quantize --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("rule", ["floor", "rceil"])
@pytest.mark.parametrize("fmt", MX_NAMES + ("nvfp4",))
def test_quantize_matches_the_reference(fmt, rule):
    if fmt == "nvfp4" and rule == "rceil":
        pytest.skip("nvfp4 has one scale rule, its recipe")
    rng = np.random.default_rng(seed(fmt, rule))
    block_size = 16 if fmt == "nvfp4" else 32
    x = sample(rng, 6, 5 * block_size + 7, block_size)  # the last block is shorter
    assert_quantize_matches(x, fmt, scale_rule=rule)
    # Blocks within 2**-8 .. 2**8 of each other: NVFP4's E4M3 scales take most of their values.
    x = sample(rng, 8, 9 * block_size + 3, block_size, extremes=False, spread=8)
    q = assert_quantize_matches(x, fmt, scale_rule=rule)
    assert len(np.unique(q.scales)) > (20 if fmt == "nvfp4" else 10)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("fmt", MX_NAMES + ("nvfp4",))
def test_quantize_in_every_rounding_mode(fmt, mode):
    rng = np.random.default_rng(seed(fmt, mode))
    x = sample(rng, 4, 75, 8)
    assert_quantize_matches(x, fmt, rounding=mode, block_size=8)


@pytest.mark.parametrize("sr_bits", [32, 3])
@pytest.mark.parametrize("fmt", MX_NAMES + ("nvfp4",))
def test_stochastic_rounding_with_random_bits(fmt, sr_bits):
    rng = np.random.default_rng(sr_bits)
    x = sample(rng, 4, 70, 16)
    words = rng.integers(0, 2**32, x.shape, dtype=np.uint64).astype(np.uint32)
    assert_quantize_matches(x, fmt, rounding="sr", random_bits=words, sr_bits=sr_bits, block_size=16)


def test_stochastic_rounding_with_a_seed_reads_word_i_for_element_i():
    from softfloat16.stochastic import random_words
    x = sample(np.random.default_rng(5), 3, 50, 32).reshape(3, 5, 10)
    for fmt in ("mxfp4_e2m1", "nvfp4"):
        for axis in (2, 1, 0):
            seeded = mx.quantize(x, fmt, axis=axis, block_size=4, rounding="sr", seed=2024)
            explicit = mx.quantize(x, fmt, axis=axis, block_size=4, rounding="sr",
                                   random_bits=random_words(2024, x.shape))
            np.testing.assert_array_equal(seeded.elements, explicit.elements)
            np.testing.assert_array_equal(seeded.scales, explicit.scales)


def test_stochastic_rounding_is_unbiased_on_average():
    # 0.7 in E2M1 (block max 6 keeps the scale 1) lies between 0.5 and 1: P(up) = 0.4.
    x = np.tile(np.array([6.0] + [0.7] * 31, np.float32), 4000)
    q = mx.quantize(x, "mxfp4_e2m1", rounding="sr", seed=7)
    values = q.dequantize(np.float64).reshape(-1, 32)[:, 1:]
    standard_error = math.sqrt(0.4 * 0.6) * 0.5 / math.sqrt(values.size)
    assert abs(values.mean() - 0.7) < 5 * standard_error


@pytest.mark.parametrize("axis", [0, 1, 2, -1])
def test_any_axis(axis):
    rng = np.random.default_rng(axis + 10)
    x = sample(rng, 6, 70, 5).reshape(6, 7, 10)
    for fmt in ("mxfp8_e4m3", "mxint8", "nvfp4"):
        q = assert_quantize_matches(x, fmt, axis=axis, block_size=4)
        assert q.elements.shape == x.shape and q.axis == axis % 3
        expected = list(x.shape)
        expected[axis] = -(-x.shape[axis] // 4)
        assert q.scales.shape == tuple(expected)


def test_inputs_of_every_width_are_read_exactly():
    rng = np.random.default_rng(3)
    base = sample(rng, 5, 40, 8, specials=False)
    with np.errstate(over="ignore"):
        half = (base * np.float32(2.0 ** -100)).astype(np.float16)  # inf in places: replaced below
    half[half == np.inf] = 1.0
    half[half == -np.inf] = -1.0
    for x in (half, base.astype(ml_dtypes.bfloat16), base.astype(np.float64) * 2.0 ** 200,
              base.astype(np.float64) * 2.0 ** -300, base.astype(np.float64) / 3):
        for fmt in ("mxfp8_e5m2", "mxint8", "nvfp4"):
            for rule in (("floor", "rceil") if fmt != "nvfp4" else ("floor",)):
                assert_quantize_matches(x, fmt, block_size=8, scale_rule=rule)


@pytest.mark.parametrize("src, dtype", [("fp8_e5m2", ml_dtypes.float8_e5m2), ("fp8_e4m3fn", ml_dtypes.float8_e4m3fn),
                                        ("fp4_e2m1", ml_dtypes.float4_e2m1fn), ("e8m0", ml_dtypes.float8_e8m0fnu),
                                        ("fp8_e4m3fnuz", ml_dtypes.float8_e4m3fnuz)])
def test_bit_patterns_with_src(src, dtype):
    patterns = np.arange(256, dtype=np.uint8) & (0x0F if src == "fp4_e2m1" else 0xFF)
    values = patterns.view(dtype).astype(np.float64)
    for fmt in ("mxfp6_e3m2", "mxfp8_e4m3", "nvfp4"):
        q = mx.quantize(patterns, fmt, block_size=8, src=src)
        elements, scales, _ = reference_quantize(values, fmt, block_size=8)
        np.testing.assert_array_equal(q.elements, elements)
        np.testing.assert_array_equal(q.scales, scales)
    # ml_dtypes arrays of these formats are read as their bits, without src=
    np.testing.assert_array_equal(mx.quantize(patterns.view(dtype), "mxfp8_e4m3").elements,
                                  mx.quantize(patterns, "mxfp8_e4m3", src=src).elements)


def test_tf32_in_fp32_layout():
    x = (np.random.default_rng(1).standard_normal(64).astype(np.float32).view(np.uint32) & ~np.uint32(0x1FFF))
    q = mx.quantize(x, "mxfp8_e4m3", src="tf32_fp32")
    np.testing.assert_array_equal(q.elements, mx.quantize(x.view(np.float32), "mxfp8_e4m3").elements)


def test_special_blocks():
    block = 32
    x = np.zeros(4 * block + 5, np.float32)
    x[block:2 * block] = -0.0
    x[2 * block + 3] = np.inf
    x[3 * block + 4] = np.nan
    x[4 * block:] = [1.0, -0.5, 0.25, 3.0, 0.0]  # a short last block: its own amax, 3
    for fmt in MX_NAMES:
        element = ELEMENTS[fmt]
        for rule in ("floor", "rceil"):
            q = mx.quantize(x, fmt, scale_rule=rule)
            assert q.scales[:4].tolist() == [0, 0, 0xFF, 0xFF]  # zeros: 2**-127; inf or NaN: the NaN scale
            assert q.elements[:block].tolist() == [0] * block
            negative_zero = 0 if element.integer else 1 << (7 if fmt.startswith("mxfp8") else
                                                            5 if fmt.startswith("mxfp6") else 3)
            assert q.elements[block:2 * block].tolist() == [negative_zero] * block
            assert q.elements[2 * block:4 * block].tolist() == [element.nan_fill] * (2 * block)
            values = q.dequantize(np.float64)
            assert np.isnan(values[2 * block:4 * block]).all() and (values[:2 * block] == 0).all()
            largest = element.largest
            expected = floor_log2(F(3)) - element.emax
            if rule == "rceil":
                expected = math.ceil(math.log2(3 / largest))
            assert q.scales[4] == expected + 127
    q = mx.quantize(x[:4 * block], "nvfp4", block_size=block)
    assert q.scales.tolist() == [0, 0, 0x7F, 0x7F] and int(q.tensor_scale) == 0x3F800000  # amax 0: S_enc = 1
    assert np.isnan(q.dequantize()[2 * block:]).all()


def test_mxint8_is_twos_complement():
    q = mx.quantize(np.array([-1.999, 1.999, -1.0, 0.5 / 64, 1.5 / 64, -0.0]), "mxint8")
    assert q.scales[0] == 127  # floor(log2(1.999)) - 0
    assert q.elements.tolist() == [0x80, 0x7F, 0xC0, 0x00, 0x02, 0x00]  # -128, 127 (saturated), -64, ties to even
    assert q.dequantize(np.float64).tolist() == [-2.0, 127 / 64, -1.0, 0.0, 2 / 64, 0.0]


def test_extreme_blocks_clamp_the_scale():
    x = np.array([1e300, -3e299, 1.0, 0.0, 1e-300, 5e-301, 0.0, -1e-310])
    for fmt in MX_NAMES:
        for rule in ("floor", "rceil"):
            q = assert_quantize_matches(x, fmt, block_size=4, scale_rule=rule)
            assert q.scales.tolist() == [254, 0]  # 2**127 and 2**-127
            assert q.elements[2] == 0  # 1 / 2**127 rounds to 0


# --- dequantize ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("fmt", MX_NAMES + ("nvfp4",))
def test_dequantize_is_exact(fmt):
    rng = np.random.default_rng(len(fmt))
    x = sample(rng, 5, 90, 16)
    for rule in (("floor", "rceil") if fmt != "nvfp4" else ("floor",)):
        q = mx.quantize(x, fmt, scale_rule=rule, block_size=16)
        exact = reference_dequantize(q)
        as64 = q.dequantize(np.float64).ravel().tolist()
        as32 = q.dequantize(np.float32)
        assert as32.dtype == np.float32 and q.dequantize(np.float64).dtype == np.float64
        for value, got64, got32 in zip(exact, as64, as32.ravel().tolist()):
            if isinstance(value, float):
                assert math.isnan(got64) and math.isnan(got32)
                continue
            assert F(got64) == value
            if fmt == "nvfp4":
                assert F(got32) == fl32(value)
            else:
                assert math.isinf(got32) and abs(value) >= F(2) ** 128 or F(got32) == value  # MX: exact


def test_float32_dequantize_overflows_only_past_flt_max():
    # rceil next to FLT_MAX: 448 * 2**120 > FLT_MAX / 256 rounds up to 256, and 256 * 2**120 = 2**128.
    x = np.full(32, np.finfo(np.float32).max, np.float32)
    q = mx.quantize(x, "mxfp8_e4m3", scale_rule="rceil")
    assert q.scales[0] == 120 + 127 and q.dequantize(np.float64)[0] == 2.0 ** 128
    assert np.isinf(q.dequantize(np.float32)).all()
    assert q.dequantize(np.float32).dtype == np.float32
    floor = mx.quantize(x, "mxfp8_e4m3")
    assert floor.dequantize(np.float32)[0] == np.float32(448 * 2.0 ** 119)


@pytest.mark.skipif(not __import__("softfloat16._kernels.hardware", fromlist=["X86"]).X86,
                    reason="MXCSR (FTZ/DAZ, the rounding control) is x86's")
def test_float32_dequantize_ignores_the_callers_flush_to_zero_and_rounding_mode():
    """Values below FP32's normal range (2**-130, 2**-136: E4M3 codes under the smallest E8M0 scale)
    stay FP32 subnormals, and a value that FP32 must round rounds to nearest even, with FTZ, DAZ
    and rounding upward set by someone else in the process."""
    from softfloat16._kernels.hardware import swap_mxcsr
    tiny = mx.quantize(np.array([2.0**-130, 2.0**-136] + [0.0] * 30), "mxfp8_e4m3")
    assert int(tiny.scales[0]) == 0  # 2**-127
    # nvfp4: a tensor scale with more bits than FP32 keeps once multiplied by an element and a scale.
    rounded = mx.quantize(np.linspace(-3, 3, 16) * (1 + 2.0**-20), "nvfp4")
    want = rounded.dequantize(np.float32).view(np.uint32).copy()
    old = swap_mxcsr(0x1F80 | 0x8000 | 0x0040 | 0x4000)  # FTZ, DAZ, toward +inf
    try:
        got_tiny = tiny.dequantize(np.float32).view(np.uint32)
        got = rounded.dequantize(np.float32).view(np.uint32)
    finally:
        swap_mxcsr(old)
    assert got_tiny[:2].tolist() == [0x00080000, 0x00002000]
    np.testing.assert_array_equal(got, want)


def test_module_level_dequantize_is_the_method():
    q = mx.quantize(np.linspace(-3, 3, 50), "mxfp6_e2m3")
    np.testing.assert_array_equal(mx.dequantize(q), q.dequantize())
    np.testing.assert_array_equal(mx.dequantize(q, np.float64), q.dequantize(np.float64))


# --- matmul -------------------------------------------------------------------------------------------

def assert_matmul_matches(a, b):
    got = mx.matmul(a, b)
    assert got.dtype == np.uint32 and got.shape == (a.shape[0], b.shape[1])
    expected = fp32_patterns(reference_matmul(a, b))
    assert got.ravel().tolist() == expected


@pytest.mark.parametrize("fmt", MX_NAMES + ("nvfp4",))
def test_matmul_matches_the_reference(fmt):
    rng = np.random.default_rng(len(fmt) + 100)
    for m, k, n, block_size, extremes in ((3, 70, 4, 16, False), (2, 33, 3, 32, False), (4, 9, 2, 4, False),
                                          (3, 40, 3, 8, True)):
        x = sample(rng, m, k, block_size, specials=False, extremes=extremes)
        y = sample(rng, n, k, block_size, specials=False, extremes=extremes).T.copy()
        x[0, :] *= np.float32(2.0 ** -30)  # tiny and huge rows: sums that span many binades
        a = mx.quantize(x, fmt, axis=1, block_size=block_size)
        b = mx.quantize(y, fmt, axis=0, block_size=block_size)
        assert_matmul_matches(a, b)


@pytest.mark.parametrize("fmt_a,fmt_b", [("mxfp8_e4m3", "mxfp8_e5m2"), ("mxfp8_e5m2", "mxfp8_e4m3"),
                                         ("mxfp6_e2m3", "mxfp4_e2m1"), ("mxint8", "mxfp8_e5m2")])
def test_matmul_of_mixed_mx_formats_matches_the_reference(fmt_a, fmt_b):
    """FP8 training multiplies E4M3 activations by E5M2 gradients: the formats may differ."""
    rng = np.random.default_rng(len(fmt_a) * 7 + len(fmt_b))
    for m, k, n, block_size, extremes in ((3, 70, 4, 16, False), (3, 40, 3, 8, True)):
        x = sample(rng, m, k, block_size, specials=False, extremes=extremes)
        y = sample(rng, n, k, block_size, specials=False, extremes=extremes).T.copy()
        a = mx.quantize(x, fmt_a, axis=1, block_size=block_size)
        b = mx.quantize(y, fmt_b, axis=0, block_size=block_size)
        assert_matmul_matches(a, b)


def test_matmul_propagates_nan_scales():
    x = np.ones((2, 64), np.float32)
    x[1, 40] = np.inf
    for fmt in ("mxfp8_e4m3", "nvfp4"):
        a = mx.quantize(x, fmt, axis=1)
        b = mx.quantize(np.ones((64, 2), np.float32), fmt, axis=0)
        out = mx.matmul(a, b)
        assert out[0].view(np.float32).tolist() == [64.0, 64.0]
        assert out[1].tolist() == [0x7FC00000] * 2
        assert_matmul_matches(a, b)


def test_matmul_sums_e5m2_products_exactly():
    # Products span 2**-32 .. 2**32: the big ones cancel exactly and the 2**-32 survives.
    e5m2 = ENCODERS["mxfp8_e5m2"]
    big, tiny = e5m2[(F(57344), False)], e5m2[(F(2) ** -16, False)]
    a_row = [big, big | 0x80, tiny] + [0] * 29
    b_col = [big, big, tiny] + [0] * 29
    a = dataclasses.replace(mx.quantize(np.ones((1, 32)), "mxfp8_e5m2", axis=1),
                            elements=np.array([a_row], np.uint8), scales=np.array([[127]], np.uint8))
    b = dataclasses.replace(mx.quantize(np.ones((32, 1)), "mxfp8_e5m2", axis=0),
                            elements=np.array(b_col, np.uint8).reshape(32, 1), scales=np.array([[127]], np.uint8))
    assert mx.matmul(a, b).view(np.float32)[0, 0] == np.float32(2.0 ** -32)
    assert_matmul_matches(a, b)
    # with inf elements (E5M2 has them): inf - inf is NaN, inf * 0 is NaN, inf alone is inf
    inf = e5m2[(INF, False)]
    for row, expected in (([inf, inf | 0x80], 0x7FC00000), ([inf, 0], 0x7F800000)):
        elements = np.array([row + [0] * 30], np.uint8)
        c = dataclasses.replace(a, elements=elements)
        assert mx.matmul(c, b)[0, 0] == expected
        assert_matmul_matches(c, b)
    zero_times_inf = dataclasses.replace(b, elements=np.array([inf] + [0] * 31, np.uint8).reshape(32, 1))
    c = dataclasses.replace(a, elements=np.array([[0] * 32], np.uint8))
    assert mx.matmul(c, zero_times_inf)[0, 0] == 0x7FC00000


def test_matmul_accumulates_in_fp32_in_block_order():
    # Blocks of 2**24, 1, -2**24: in order, 2**24 + 1 rounds to 2**24 (ties to even), so the sum is 0.
    x = np.array([[2.0 ** 24] + [0.0] * 31 + [1.0] + [0.0] * 31 + [-(2.0 ** 24)] + [0.0] * 31])
    a = mx.quantize(x, "mxfp8_e4m3", axis=1)
    b = mx.quantize(np.ones((96, 1)), "mxfp8_e4m3", axis=0)
    assert mx.matmul(a, b)[0, 0] == 0  # +0
    assert_matmul_matches(a, b)


# --- bad input -------------------------------------------------------------------------------------------

def test_bad_arguments_name_themselves():
    x = np.ones((4, 64), np.float32)
    with pytest.raises(ValueError, match="fmt: unknown block-scaled format 'mxfp9'; accepted: mxfp8_e4m3, .*nvfp4"):
        mx.quantize(x, "mxfp9")
    for bad in (0, -32, 2.5, True, "32"):
        with pytest.raises(ValueError, match="block_size: expected a positive integer"):
            mx.quantize(x, "mxfp8_e4m3", block_size=bad)
    with pytest.raises(ValueError, match="scale_rule: unknown scale rule 'ceil'; accepted: floor, rceil"):
        mx.quantize(x, "mxfp8_e4m3", scale_rule="ceil")
    with pytest.raises(ValueError, match="scale_rule: nvfp4"):
        mx.quantize(x, "nvfp4", scale_rule="rceil")
    with pytest.raises(ValueError, match="axis: 2 is out of range"):
        mx.quantize(x, "mxfp8_e4m3", axis=2)
    with pytest.raises(ValueError, match="axis: -3 is out of range"):
        mx.quantize(x, "mxfp8_e4m3", axis=-3)
    with pytest.raises(TypeError, match="x: expected float16/bfloat16/float32/float64 values, or bit patterns"):
        mx.quantize(np.ones(4, np.int32), "mxfp8_e4m3")
    with pytest.raises(ValueError, match="axis: x is a scalar"):
        mx.quantize(np.float32(1.0), "mxfp8_e4m3")
    with pytest.raises(ValueError, match="rounding: unknown rounding mode"):
        mx.quantize(x, "mxfp8_e4m3", rounding="nearest_odd")
    with pytest.raises(ValueError, match="rounding='sr' needs its randomness"):
        mx.quantize(x, "mxfp8_e4m3", rounding="sr")
    with pytest.raises(ValueError, match="seed: only stochastic rounding"):
        mx.quantize(x, "mxfp8_e4m3", seed=1)
    with pytest.raises(ValueError, match="random_bits: shape"):
        mx.quantize(x, "mxfp8_e4m3", rounding="sr", random_bits=np.zeros(3, np.uint32))
    with pytest.raises(ValueError, match="sr_bits: expected an integer from 1 to 32"):
        mx.quantize(x, "mxfp8_e4m3", rounding="sr", seed=1, sr_bits=33)
    with pytest.raises(ValueError, match="format: unknown format 'fp7'"):
        mx.quantize(np.zeros(4, np.uint8), "mxfp8_e4m3", src="fp7")
    with pytest.raises(ValueError, match="dtype: expected float32 or float64"):
        mx.quantize(x, "mxfp8_e4m3").dequantize(np.float16)


def test_bad_matmul_operands():
    a = mx.quantize(np.ones((2, 64)), "mxfp8_e4m3", axis=1)
    b = mx.quantize(np.ones((64, 3)), "mxfp8_e4m3", axis=0)
    with pytest.raises(ValueError, match="b: format 'nvfp4' cannot meet 'mxfp8_e4m3'"):
        mx.matmul(a, mx.quantize(np.ones((64, 3)), "nvfp4", axis=0, block_size=32))
    with pytest.raises(ValueError, match="b: block_size 16 differs from a's 32"):
        mx.matmul(a, mx.quantize(np.ones((64, 3)), "mxfp8_e4m3", axis=0, block_size=16))
    with pytest.raises(ValueError, match=r"b: K = 32 \(shape \(32, 3\)\) differs from a's K = 64"):
        mx.matmul(a, mx.quantize(np.ones((32, 3)), "mxfp8_e4m3", axis=0))
    with pytest.raises(ValueError, match="a: must be quantised along its last axis"):
        mx.matmul(mx.quantize(np.ones((2, 64)), "mxfp8_e4m3", axis=0), b)
    with pytest.raises(ValueError, match="b: must be quantised along its first axis"):
        mx.matmul(a, mx.quantize(np.ones((64, 3)), "mxfp8_e4m3", axis=1))
    with pytest.raises(ValueError, match="a: expected a 2-D operand"):
        mx.matmul(mx.quantize(np.ones(64), "mxfp8_e4m3"), b)
    with pytest.raises(TypeError, match="b: expected an MXTensor"):
        mx.matmul(a, np.ones((64, 3)))


def test_the_tensor_is_read_only_and_says_what_it_is():
    q = mx.quantize(np.ones((3, 40), np.float32), "nvfp4")
    assert repr(q) == "MXTensor('nvfp4', shape=(3, 40), axis=1, block_size=16, scale_rule='nvfp4')"
    assert q.element_format.name == "fp4_e2m1" and q.scale_format.name == "fp8_e4m3fn"
    assert mx.quantize(np.ones(3), "mxint8").element_format == "int8"
    with pytest.raises(ValueError):
        q.elements[0, 0] = 1
    with pytest.raises(dataclasses.FrozenInstanceError):
        q.axis = 0


# --- an outside reference --------------------------------------------------------------------------------

def test_floor_and_rceil_rules_against_torchao():
    """torchao's reference MX quantiser (to_mx), where installed: the same scales and elements for
    every float element format and both rules on finite data (0.18.0 matches bit for bit). Blocks
    with an inf differ by torchao version (0.18.0 gives them a finite scale and saturates the inf;
    later versions give 0xFF, as docs/mx.md does), so they are left out; a NaN block gets 0xFF."""
    mx_tensor = pytest.importorskip("torchao.prototype.mx_formats.mx_tensor",
                                    reason="torchao is not installed: its reference MX quantiser is not run")
    import torch
    from torchao.prototype.mx_formats.config import ScaleCalculationMode
    from torchao.prototype.mx_formats.constants import DTYPE_FP6_E2M3, DTYPE_FP6_E3M2
    x = sample(np.random.default_rng(9), 8, 128, 32, specials=False)
    x[np.abs(x) < 2.0 ** -100] = 0.0  # FP32 subnormals: torchao reads the exponent field of amax
    x[4, 70] = np.nan
    dtypes = {"mxfp8_e4m3": torch.float8_e4m3fn, "mxfp8_e5m2": torch.float8_e5m2, "mxfp6_e2m3": DTYPE_FP6_E2M3,
              "mxfp6_e3m2": DTYPE_FP6_E3M2, "mxfp4_e2m1": torch.float4_e2m1fn_x2}
    for fmt, dtype in dtypes.items():
        for rule, mode in (("floor", ScaleCalculationMode.FLOOR), ("rceil", ScaleCalculationMode.RCEIL)):
            scale, data = mx_tensor.to_mx(torch.from_numpy(x), dtype, 32, scaling_mode=mode)
            q = mx.quantize(x, fmt, scale_rule=rule)
            data = data.view(torch.uint8).numpy()
            if fmt == "mxfp4_e2m1":  # two per byte, the first in the low nibble
                data = np.stack([data & 0xF, data >> 4], axis=-1)
            np.testing.assert_array_equal(q.scales, scale.view(torch.uint8).numpy().reshape(q.scales.shape))
            finite = np.repeat(q.scales != 0xFF, 32, axis=1)
            np.testing.assert_array_equal(q.elements[finite], data.reshape(q.elements.shape)[finite])
