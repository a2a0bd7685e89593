"""sf.linalg.sum and sf.linalg.dot: every order against references that share nothing with the kernels.

- ``np.sum`` itself for ``order="numpy"`` (float32 and float16, 1-D and along axes), and for
  ml_dtypes bfloat16 (which adds one by one in bfloat16: the sequential order);
- the orders written out here in Python, once, over an ``add`` they are given:
  numpy float32 scalar additions (IEEE round-to-nearest-even in hardware) for large RNE cases,
  and exact rationals rounded once per addition by ``oracle.encode_round`` (softfloat16.exact,
  plain integer arithmetic) for every rounding mode, signed zeros, inf and NaN;
- ``matmul`` with a column of ones (sum) or a row (dot) for the orders it shares.
"""
from __future__ import annotations

import itertools
from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import oracle
import softfloat16 as sf
from softfloat16 import reductions

MODES = ("rne", "rna", "rtz", "rup", "rdn", "rod")
F32_NAN = 0x7FC00000


# --- the orders, written from their definitions over any `add` ------------------------------------------

def sequential(values, add, zero):
    total = zero
    for v in values:
        total = add(total, v)
    return total


def pairwise(values, add, zero):
    stack = []  # (partial sum, number of terms)
    for v in values:
        size = 1
        while stack and stack[-1][1] == size:
            v = add(stack.pop()[0], v)
            size *= 2
        stack.append((v, size))
    if not stack:
        return zero
    if len(values) == 1:
        return add(zero, stack[0][0])
    total = stack.pop()[0]
    while stack:
        total = add(stack.pop()[0], total)
    return total


def blocked(values, add, zero, block):
    lanes = [zero] * block
    for i, v in enumerate(values):
        lanes[i % block] = add(lanes[i % block], v)
    offset = 1
    while offset < block:
        offset *= 2
    offset //= 2
    while offset:
        for lane in range(offset):
            if lane + offset < block:
                lanes[lane] = add(lanes[lane], lanes[lane + offset])
        offset //= 2
    return lanes[0]


def numpy_pairwise(values, add, negative_zero):
    """numpy's pairwise_sum (numpy/_core/src/umath/loops_utils.h.src), restated."""
    n = len(values)
    if n < 8:
        total = negative_zero
        for v in values:
            total = add(total, v)
        return total
    if n <= 128:
        r = list(values[:8])
        i = 8
        while i < n - n % 8:
            r = [add(r[j], values[i + j]) for j in range(8)]
            i += 8
        total = add(add(add(r[0], r[1]), add(r[2], r[3])), add(add(r[4], r[5]), add(r[6], r[7])))
        for v in values[i:]:
            total = add(total, v)
        return total
    half = n // 2 - (n // 2) % 8
    return add(numpy_pairwise(values[:half], add, negative_zero), numpy_pairwise(values[half:], add, negative_zero))


def run_order(order, values, add, zero, negative_zero, block=32):
    if order == "sequential":
        return sequential(values, add, zero)
    if order == "pairwise":
        return pairwise(values, add, zero)
    if order == "blocked":
        return blocked(values, add, zero, block)
    if not values:
        return zero  # numpy's loop is not called: the sum is its initial +0
    return add(zero, numpy_pairwise(values, add, negative_zero))  # one run: 1-D, or the last axis


# --- float32 hardware arithmetic (RNE) ------------------------------------------------------------------

def f32_add(a, b):
    with np.errstate(over="ignore", invalid="ignore"):
        return np.float32(a + b)


def f32_reference(order, x, block=32):
    values = [np.float32(v) for v in np.asarray(x, np.float32)]
    result = run_order(order, values, f32_add, np.float32(0.0), np.float32(-0.0), block)
    return int(np.float32(result).view(np.uint32))


# --- exact rationals, one rounding per addition ---------------------------------------------------------

def decoded(bits, fmt: str):
    """(kind, sign, value) with kind in zero / finite / inf / nan."""
    kind, sign, value = oracle.decode(int(bits), fmt)
    kind = {"subnormal": "finite", "normal": "finite", "qnan": "nan", "snan": "nan"}.get(kind, kind)
    return kind, sign, value


def rounded(value, sign, fmt: str, mode: str):
    """(kind, sign, value) of an exact result (not NaN) rounded into fmt."""
    if value == "inf":
        return "inf", sign, None
    bits, _ = oracle.encode_round(value, sign, fmt, mode)
    return decoded(bits, fmt)


def exact_add(x, y, acc: str, mode: str):
    (kx, sx, vx), (ky, sy, vy) = x, y
    if "nan" in (kx, ky) or (kx == ky == "inf" and sx != sy):
        return "nan", 0, None
    if kx == "inf" or ky == "inf":
        return "inf", sx if kx == "inf" else sy, None
    total = vx + vy
    if total == 0:  # IEEE 754 6.3: x + x keeps x's sign; an exact zero otherwise is +0, -0 rounding down
        sign = sx if (kx == ky == "zero" and sx == sy) else int(mode == "rdn")
        return "zero", sign, Fraction(0)
    return rounded(total, 0, acc, mode)


def exact_product(x, y):
    (kx, sx, vx), (ky, sy, vy) = x, y
    if "nan" in (kx, ky) or {kx, ky} == {"inf", "zero"}:
        return "nan", 0, None
    if "inf" in (kx, ky):
        return "inf", sx ^ sy, None
    if "zero" in (kx, ky):
        return "zero", sx ^ sy, Fraction(0)
    return "finite", sx ^ sy, vx * vy


def to_bits(v, fmt: str, mode: str) -> int:
    kind, sign, value = v
    spec = oracle.spec(fmt)
    if kind == "nan":
        return spec.default_nan  # the default NaN: +qNaN, only the quiet bit
    if kind == "inf":
        return sf.format(fmt).sign_mask * sign | (((1 << spec.e) - 1) << spec.f)
    return oracle.encode_round(value, sign, fmt, mode)[0]


def exact_reference(order, bits, fmt, acc, out, mode, block=32, runs=None):
    """The order over bit patterns of fmt, every + rounded into acc, then rounded into out."""
    add = lambda x, y: exact_add(x, y, acc, mode)
    zero, negative_zero = ("zero", 0, Fraction(0)), ("zero", 1, Fraction(0))
    values = [decoded(b, fmt) for b in bits]
    if order != "numpy" or runs is None:
        return to_bits(run_order(order, values, add, zero, negative_zero, block), out, mode)
    total = zero
    for run in runs:  # numpy walking an outer axis: each run's sum added, the total stored in `out`
        total = add(total, numpy_pairwise([decoded(b, fmt) for b in run], add, negative_zero))
        total = decoded(to_bits(total, out, mode), out)
    return to_bits(total, out, mode)


def random_bits(rng, fmt: sf.Format, n: int, specials: bool = False) -> np.ndarray:
    """Values of mixed magnitudes and signs; with ``specials``, zeros of both signs and subnormals
    here and there, and now and then one inf or NaN."""
    x = sf.fp32.from_float(rng.standard_normal(n) * np.exp2(rng.integers(-6, 7, n)))
    bits = x if fmt is sf.fp32 else sf.convert(x, src=sf.fp32, dst=fmt)
    if specials and n:
        picks = rng.random(n) < 0.15
        bits[picks] = rng.choice(np.array([0, fmt.sign_mask, 1, fmt.sign_mask | 3], bits.dtype), int(picks.sum()))
        if fmt.encoding == "ieee" and rng.random() < 0.2:
            inf = ((1 << fmt.exponent_bits) - 1) << fmt.fraction_bits
            quiet = 1 << (fmt.fraction_bits - 1)
            bits[rng.integers(n)] = rng.choice([inf, inf | fmt.sign_mask, inf | 1, inf | quiet])
    return bits


# --- order="numpy" is np.sum -------------------------------------------------------------------------

def mixed(rng, shape, dtype=np.float32):
    """Magnitudes spread over 2**-12 .. 2**12 (2**-6 .. 2**6 for float16), both signs: the order matters."""
    n = int(np.prod(shape))
    spread = 6 if dtype == np.float16 else 12
    return (rng.standard_normal(n) * np.exp2(rng.integers(-spread, spread, n))).astype(dtype).reshape(shape)


def test_numpy_order_is_np_sum_for_float32_vectors_of_every_length_to_5000_and_some_large():
    rng = np.random.default_rng(1)
    lengths = [*range(5001), 8191, 8192, 8193, 65537, 1_000_003]
    wrong = [n for n in lengths
             if sf.linalg.sum(x := mixed(rng, (n,)), sf.fp32, order="numpy") != np.sum(x).view(np.uint32)]
    assert wrong == []
    x = mixed(rng, (30_001,))
    for view in (x[::3], x[::-1], x[5:20_000:7]):  # strided views: numpy sums them in their logical order
        assert sf.linalg.sum(view, sf.fp32, order="numpy") == np.sum(view).view(np.uint32)


def test_numpy_order_is_np_sum_for_float16_vectors():
    """numpy sums float16 in float32 (pairwise_sum with a float32 accumulator), stores float16."""
    rng = np.random.default_rng(2)
    wrong = [n for n in [*range(1200), 4099, 100_000]
             if sf.linalg.sum(x := mixed(rng, (n,), np.float16), sf.fp16, order="numpy") != np.sum(x).view(np.uint16)]
    assert wrong == []


SHAPES = [(1,), (7,), (300,), (5, 300), (300, 5), (1000, 2), (2, 1000), (3, 1), (200, 1), (1, 200), (17, 33),
          (129, 131), (4, 3, 500), (500, 3, 4), (6, 1, 300), (9, 260, 1), (2, 3, 4, 50)]


@pytest.mark.parametrize("dtype, fmt", [(np.float32, sf.fp32), (np.float16, sf.fp16)], ids=["float32", "float16"])
def test_numpy_order_is_np_sum_along_every_combination_of_axes(dtype, fmt):
    rng = np.random.default_rng(3)
    wrong = []
    for shape in SHAPES:
        x = mixed(rng, shape, dtype)
        for count in range(len(shape) + 1):
            for axes in itertools.combinations(range(len(shape)), count):
                expected = np.asarray(np.sum(x, axis=axes)).view(fmt.dtype)
                got = np.asarray(sf.linalg.sum(x, fmt, axis=axes, order="numpy"))
                if got.shape != expected.shape or not np.array_equal(got, expected):
                    wrong.append((shape, axes))
    assert wrong == []
    x = mixed(rng, (40, 30, 20), dtype)
    for axis in (None, -1, 0, (0, 2), (-3, -2)):
        expected = np.sum(x, axis=axis, keepdims=True).view(fmt.dtype)
        assert np.array_equal(sf.linalg.sum(x, fmt, axis=axis, order="numpy", keepdims=True), expected)


def test_numpy_order_signed_zeros_and_empty_sums_are_np_sums():
    for n in (0, 1, 2, 7, 8, 9, 200):
        x = np.full(n, -0.0, np.float32)
        assert sf.linalg.sum(x, sf.fp32, order="numpy") == np.sum(x).view(np.uint32) == 0  # +0: numpy starts at +0
    x = np.zeros((0, 3), np.float32)
    assert np.array_equal(sf.linalg.sum(x, sf.fp32, axis=0, order="numpy"), np.sum(x, axis=0).view(np.uint32))
    assert sf.linalg.sum(x, sf.fp32, axis=1, order="numpy").shape == (0,)


def test_ml_dtypes_bfloat16_np_sum_adds_one_by_one_in_bfloat16():
    rng = np.random.default_rng(4)
    for n in (0, 1, 5, 100, 1000):
        x = mixed(rng, (n,)).astype(ml_dtypes.bfloat16)
        assert sf.linalg.sum(x, sf.bf16, accumulate=sf.bf16) == np.sum(x).view(np.uint16)
    x = mixed(rng, (30, 40)).astype(ml_dtypes.bfloat16)
    for axis in (0, 1):
        assert np.array_equal(sf.linalg.sum(x, sf.bf16, axis=axis, accumulate=sf.bf16),
                              np.sum(x, axis=axis).view(np.uint16))


# --- sequential, pairwise, blocked: float32 hardware arithmetic ----------------------------------------

LENGTHS = [0, 1, 2, 3, 7, 8, 9, 31, 32, 33, 100, 255, 256, 257, 511, 513, 1000, 4099]


@pytest.mark.parametrize("order, block", [("sequential", 32), ("pairwise", 32), ("blocked", 32), ("blocked", 1),
                                          ("blocked", 3), ("blocked", 64), ("blocked", 1000)])
def test_orders_are_their_definition_in_float32_arithmetic(order, block):
    rng = np.random.default_rng(5)
    for n in LENGTHS:
        x = mixed(rng, (n,))
        assert sf.linalg.sum(x, sf.fp32, order=order, block=block) == f32_reference(order, x, block), n
    # many results at once (side by side in the kernels) and a few long ones: the same sums
    for shape, axis in (((20, 300), 1), ((300, 20), 0), ((3, 1000), 1), ((1000, 3), 0), ((4, 5, 60), (0, 2)),
                        ((50, 40), 1), ((40, 50), 0), ((7, 9, 30), 0)):
        x = mixed(rng, shape)
        axes = list(np.atleast_1d(axis))
        got = sf.linalg.sum(x, sf.fp32, axis=axis, order=order, block=block)
        kept = [d for d in range(x.ndim) if d not in axes]
        rows = x.transpose(kept + axes).reshape(got.size, -1)  # the terms of each result, in C order
        expected = [f32_reference(order, row, block) for row in rows]
        assert np.array_equal(got.reshape(-1), np.array(expected, np.uint32)), (shape, axis)


def test_fp16_and_bf16_sums_in_fp32_are_the_float32_loops_rounded_once():
    rng = np.random.default_rng(6)
    for fmt, dtype in ((sf.fp16, np.float16), (sf.bf16, ml_dtypes.bfloat16)):
        x = mixed(rng, (3000,), dtype)
        for order in ("sequential", "pairwise", "blocked"):
            wide = f32_reference(order, x.astype(np.float32))
            assert sf.linalg.sum(x, fmt, order=order, out_format=sf.fp32) == wide
            expected = np.uint32(wide).view(np.float32).astype(dtype).view(np.uint16)  # RNE to fmt
            assert sf.linalg.sum(x, fmt, order=order) == expected


def cumulative_reference(x: np.ndarray) -> int:
    """The sequential sum from +0 by np.add.accumulate: float32 additions one after the other."""
    with np.errstate(over="ignore", invalid="ignore"):
        return int(np.add.accumulate(np.concatenate([np.float32([0.0]), x]))[-1].view(np.uint32))


def test_a_long_sequential_sum_is_exact_through_binade_changes_cancellations_ties_and_subnormals():
    """The one-sum kernel keeps the sum as an integer count of its ulps while it can: stress the edges."""
    rng = np.random.default_rng(7)
    ties = np.float32([1.0, -1.0, 0.5, -0.5, 2.0**-24, -(2.0**-24), 2.0**-25, 3 * 2.0**-25, 1 - 2.0**-24, 0.0, -0.0])
    generators = [
        lambda n: rng.standard_normal(n).astype(np.float32),
        lambda n: rng.choice(ties, n),
        lambda n: (rng.integers(1, 1 << 24, n) * np.exp2(rng.integers(-30, 3, n)) * rng.choice([-1, 1], n)),
        lambda n: rng.standard_normal(n) * 2.0**-130,  # subnormal sums
        lambda n: np.abs(rng.standard_normal(n)) * np.exp2(rng.integers(-40, 1, n)),  # a growing sum
        lambda n: rng.standard_normal(n) * 3e37,  # overflow to inf
    ]
    for trial in range(60):
        x = generators[trial % len(generators)](int(rng.integers(0, 5000))).astype(np.float32)
        got = sf.linalg.sum(x, sf.fp32)
        expected = cumulative_reference(x)
        if np.isnan(np.uint32(expected).view(np.float32)):
            expected = F32_NAN
        assert got == expected, trial
        # every rounding mode: the matmul kernel's sequential order (the general addition)
        mode = MODES[trial % len(MODES)]
        assert sf.linalg.sum(x, sf.fp32, rounding=mode) == sf.linalg.matmul(
            x[None, :], np.ones((x.size, 1), np.float32), sf.fp32, rounding=mode)[0, 0], (trial, mode)


# --- every rounding mode, signed zeros, inf and NaN: exact rationals -----------------------------------

# (fmt, accumulate, out_format): the terms held by the accumulation format (the fast kernels) or not
# (the wide carrier: FP32 summed in BF16 or FP16, BF16 in FP16), non-IEEE terms (E4M3FN).
CONFIGS = [("fp16", "fp32", "fp16"), ("fp16", "fp32", "fp32"), ("fp16", "fp16", "fp16"), ("bf16", "bf16", "fp32"),
           ("fp32", "bf16", "fp32"), ("fp32", "fp16", "fp16"), ("bf16", "fp16", "bf16"), ("fp8_e4m3fn", "fp16", "fp32")]


@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: "-".join(c))
def test_every_order_and_rounding_mode_is_one_exact_rounding_per_addition(config):
    fmt, acc, out = (sf.format(name) for name in config)
    rng = np.random.default_rng(8)
    for mode in MODES:
        for order, block in (("sequential", 32), ("pairwise", 32), ("blocked", 4), ("blocked", 5), ("numpy", 32)):
            for n in (0, 1, 2, 9, int(rng.integers(3, 60)), 140):
                bits = random_bits(rng, fmt, n, specials=n % 2 == 1)
                got = sf.linalg.sum(bits, fmt, accumulate=acc, out_format=out, order=order, block=block,
                                    rounding=mode)
                expected = exact_reference(order, bits, fmt.name, acc.name, out.name, mode, block)
                assert got == expected, (order, block, mode, n, [hex(b) for b in bits])


def test_numpy_order_rounds_the_total_to_the_output_format_between_runs():
    """axis=0 of a float16 matrix: numpy adds the rows one at a time, storing float16 sums."""
    rng = np.random.default_rng(9)
    x = mixed(rng, (40, 3), np.float16)
    runs_per_column = [[[b] for b in column] for column in x.view(np.uint16).T]
    for mode in ("rne", "rtz", "rup"):
        got = sf.linalg.sum(x, sf.fp16, axis=0, order="numpy", rounding=mode)
        expected = [exact_reference("numpy", [], "fp16", "fp32", "fp16", mode, runs=runs) for runs in runs_per_column]
        assert list(got) == expected


@pytest.mark.parametrize("config", [("fp32", "fp32", "fp32"), ("fp16", "fp32", "fp16"), ("fp32", "bf16", "fp32")],
                         ids=lambda c: "-".join(c))
def test_many_short_sums_side_by_side_are_the_same_sums(config):
    """Many results of a few terms each run side by side (kernels.sequential_lanes): each is still
    its own sequential sum, in every mode, through zeros, subnormals, inf and NaN."""
    fmt, acc, out = (sf.format(name) for name in config)
    rng = np.random.default_rng(14)
    for mode, k in zip(MODES, (1, 2, 5, 17, 30, 127)):
        x = random_bits(rng, fmt, 37 * k, specials=True).reshape(37, k)
        got = sf.linalg.sum(x, fmt, axis=1, accumulate=acc, out_format=out, rounding=mode)
        assert list(got) == [exact_reference("sequential", row, fmt.name, acc.name, out.name, mode) for row in x]
        assert np.array_equal(sf.linalg.sum(x.T.copy(), fmt, axis=0, accumulate=acc, out_format=out, rounding=mode),
                              got)


@settings(max_examples=150)
@given(st.lists(st.integers(0, 0xFFFF), max_size=40), st.sampled_from(("sequential", "pairwise", "blocked", "numpy")),
       st.sampled_from(MODES), st.sampled_from(("fp16", "fp32")))
def test_any_fp16_patterns(bits, order, mode, acc):
    """NaNs with payloads, signaling NaNs, infinities, zeros and subnormals in any mix."""
    bits = np.array(bits, np.uint16)
    got = sf.linalg.sum(bits, sf.fp16, accumulate=acc, order=order, block=3, rounding=mode)
    assert got == exact_reference(order, bits, "fp16", acc, "fp16", mode, block=3)


@pytest.mark.parametrize("order", reductions.ORDERS)
def test_special_values(order):
    def total(values, fmt=sf.fp32, **kw):
        return int(sf.linalg.sum(np.array(values, np.float32).astype(fmt.float_dtype_name), fmt, order=order,
                                 **kw))
    inf = np.inf
    assert total([inf, -inf]) == F32_NAN
    assert total([1.0, np.float32(np.nan)]) == total([np.uint32(0x7F800123).view(np.float32), 2.0]) == F32_NAN
    assert total([inf, 1.0, 2.0]) == 0x7F800000 and total([-inf, 1.0]) == 0xFF800000
    assert total([3e38, 3e38]) == 0x7F800000                           # overflow: inf
    assert total([3e38, 3e38], rounding="rtz") == 0x7F7FFFFF          # or the largest finite, by the mode
    assert total([60000.0, 60000.0], sf.fp16) == 0x7C00                # 120000 in FP32, then inf in FP16
    assert total([2.0**-149] * 1000) == 1000                          # subnormals are kept (1000 * 2**-149)
    assert total([]) == 0 and total([], rounding="rdn") == 0           # an empty sum is +0
    assert total([1.0, -1.0]) == 0 and total([1.0, -1.0], rounding="rdn") == 0x80000000
    assert total([-0.0] * 3) == total([-0.0] * 3, block=1) == (0x80000000 if order == "pairwise" else 0)
    assert total([-0.0]) == 0                                         # +0 + -0: one term is rounded as +0 + x


def test_signed_zeros_by_order():
    zeros = np.float32([-0.0, -0.0])
    assert sf.linalg.sum(zeros, sf.fp32) == 0                          # (+0 + -0) + -0
    assert sf.linalg.sum(zeros, sf.fp32, rounding="rdn") == 0x80000000
    assert sf.linalg.sum(zeros, sf.fp32, order="pairwise") == 0x80000000   # -0 + -0, matmul's tree
    assert sf.linalg.sum(zeros, sf.fp32, order="blocked") == 0        # threads start at +0
    assert sf.linalg.sum(zeros, sf.fp32, order="numpy") == 0          # +0 + (-0 + -0 + -0), as np.sum


# --- sum and matmul agree ------------------------------------------------------------------------------

# Two modes: matmul compiles its FP16/BF16 kernel per mode, and the modes are the exact oracle's business.
MATMUL_MODES = ("rne", "rtz")


@pytest.mark.parametrize("order", ["sequential", "pairwise"])
@pytest.mark.parametrize("fmt, acc", [("fp16", "fp32"), ("bf16", "fp32"), ("fp32", "fp32"), ("fp32", "bf16"),
                                      ("fp16", "fp16")])
def test_sum_is_matmul_with_a_column_of_ones(order, fmt, acc):
    fmt, acc = sf.format(fmt), sf.format(acc)
    rng = np.random.default_rng(10)
    ones = sf.convert(np.full((1, 1), 0x3F800000, np.uint32), src=sf.fp32, dst=fmt)
    for k, mode in zip((0, 1, 2, 3, 255, 256, 257, 700, 2049), itertools.cycle(MATMUL_MODES)):
        x = random_bits(rng, fmt, 9 * k, specials=True).reshape(9, k)  # short rows: side by side
        expected = sf.linalg.matmul(x, np.repeat(ones, k, axis=0), fmt, accumulate=acc, order=order, rounding=mode)
        assert np.array_equal(sf.linalg.sum(x, fmt, axis=1, accumulate=acc, order=order, rounding=mode),
                              expected[:, 0]), (k, mode)


# --- dot ---------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("order", ["sequential", "pairwise"])
@pytest.mark.parametrize("fmt, b_format, acc", [("fp16", None, "fp32"), ("bf16", None, "fp32"), ("fp32", None, "fp32"),
                                                ("fp8_e4m3fn", "fp8_e5m2", "fp32"), ("fp16", None, "fp16")])
def test_dot_is_matmul_of_a_row_and_a_column(order, fmt, b_format, acc):
    fmt, acc = sf.format(fmt), sf.format(acc)
    b_fmt = fmt if b_format is None else sf.format(b_format)
    rng = np.random.default_rng(11)
    for k, mode in zip((0, 1, 5, 256, 300, 1500), itertools.cycle(MATMUL_MODES)):
        a, b = random_bits(rng, fmt, k, specials=True), random_bits(rng, b_fmt, k, specials=True)
        expected = sf.linalg.matmul(a[None, :], b[:, None], fmt, accumulate=acc, out_format=acc, order=order,
                                    rounding=mode, b_format=b_fmt)[0, 0]
        assert sf.linalg.dot(a, b, fmt, accumulate=acc, out_format=acc, order=order, rounding=mode,
                             b_format=b_fmt) == expected


@pytest.mark.parametrize("fmt, acc", [("fp16", "fp32"), ("bf16", "fp32"), ("fp32", "fp32"), ("fp32", "bf16")])
def test_dot_orders_are_exact_products_rounded_once_per_addition(fmt, acc):
    rng = np.random.default_rng(12)
    for mode in MODES:
        for order, block in (("sequential", 32), ("pairwise", 32), ("blocked", 8), ("blocked", 3)):
            k = int(rng.integers(0, 50))
            a, b = random_bits(rng, sf.format(fmt), k, True), random_bits(rng, sf.format(fmt), k, True)
            products = [exact_product(decoded(x, fmt), decoded(y, fmt)) for x, y in zip(a, b)]
            zero = ("zero", 0, Fraction(0))
            expected = to_bits(run_order(order, products, lambda x, y, m=mode: exact_add(x, y, acc, m), zero, zero,
                                         block), acc, mode)
            got = sf.linalg.dot(a, b, fmt, accumulate=acc, out_format=acc, order=order, block=block, rounding=mode)
            assert got == expected, (order, mode, k)


def test_dot_blocked_in_float32_arithmetic_and_broadcasting():
    rng = np.random.default_rng(13)
    a, b = mixed(rng, (3, 4, 700), np.float16), mixed(rng, (4, 700), np.float16)
    got = sf.linalg.dot(a, b, sf.fp16, out_format=sf.fp32, order="blocked")
    assert got.shape == (3, 4) and got.dtype == np.uint32
    for i, j in itertools.product(range(3), range(4)):
        products = a[i, j].astype(np.float32) * b[j].astype(np.float32)  # exact: FP16 products fit FP32
        assert got[i, j] == f32_reference("blocked", products)
    assert isinstance(sf.linalg.dot(a[0, 0], b[0], sf.fp16), np.uint16)


# --- shapes and arguments -------------------------------------------------------------------------------

def test_shapes_dtypes_and_scalars():
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    whole = sf.linalg.sum(x, sf.fp32)
    assert isinstance(whole, np.uint32) and whole == np.float32(276).view(np.uint32)
    assert sf.linalg.sum(x, sf.fp32, axis=(0, 2)).shape == (3,)
    assert sf.linalg.sum(x, sf.fp32, axis=-1, keepdims=True).shape == (2, 3, 1)
    assert sf.linalg.sum(x, sf.fp32, axis=(), keepdims=True).shape == (2, 3, 4)
    assert sf.linalg.sum(x, sf.fp32, out_format=sf.bf16, axis=0).dtype == np.uint16
    assert sf.linalg.sum(np.float32(-0.0), sf.fp32) == 0                 # a 0-d array: one term, +0 + -0
    assert sf.linalg.sum(np.zeros((0, 5), np.float32), sf.fp32, axis=0).tolist() == [0] * 5
    assert sf.linalg.sum([0x3C00, 0x3C00], "fp16") == 0x4000             # bit patterns as integers
    assert sf.linalg.sum is reductions.sum and "sum" in sf.linalg.__all__ and "dot" in sf.linalg.__all__


@pytest.mark.parametrize("call, name", [
    (lambda: sf.linalg.sum(np.ones(3, np.float32), sf.fp32, order="random"), "order"),
    (lambda: sf.linalg.sum(np.ones(3, np.float32), sf.fp32, order="blocked", block=0), "block"),
    (lambda: sf.linalg.sum(np.ones(3, np.float32), sf.fp32, block=-4), "block"),
    (lambda: sf.linalg.sum(np.ones(3, np.float32), sf.fp32, block=True), "block"),
    (lambda: sf.linalg.sum(np.ones(3, np.float32), sf.fp32, block=2.0), "block"),
    (lambda: sf.linalg.sum(np.ones((2, 3), np.float32), sf.fp32, axis=2), "axis"),
    (lambda: sf.linalg.sum(np.ones((2, 3), np.float32), sf.fp32, axis=(0, -2)), "axis"),
    (lambda: sf.linalg.sum(np.ones((2, 3), np.float32), sf.fp32, axis=1.0), "axis"),
    (lambda: sf.linalg.sum(np.ones(3, np.float32), sf.fp32, accumulate=sf.fp8_e4m3fn), "accumulate"),
    (lambda: sf.linalg.sum(np.ones(3, np.float32), sf.fp32, out_format="e4m3"), "out_format"),
    (lambda: sf.linalg.sum(np.ones(3, np.float32), sf.fp32, rounding="sr"), "rounding"),
    (lambda: sf.linalg.sum(np.ones(3, np.float32), sf.fp32, rounding="upward"), "rounding"),
    (lambda: sf.linalg.sum(np.ones(3, np.uint8), sf.e8m0), "fmt"),
    (lambda: sf.linalg.dot(np.ones(3, np.float32), np.ones(4, np.float32), sf.fp32), "a and b"),
    (lambda: sf.linalg.dot(np.ones((2, 3), np.float32), np.ones((4, 3), np.float32), sf.fp32), "a and b"),
    (lambda: sf.linalg.dot(np.float32(1), np.float32(1), sf.fp32), "a and b"),
    (lambda: sf.linalg.dot(np.ones(3, np.float32), np.ones(3, np.float32), sf.fp32, order="numpy"), "order"),
])
def test_bad_arguments_raise_value_errors_naming_them(call, name):
    with pytest.raises(ValueError, match=rf"^{name}:"):
        call()


def test_operands_of_the_wrong_type_are_type_errors_naming_them():
    with pytest.raises(TypeError, match="^x:"):
        sf.linalg.sum(np.ones(3), sf.fp32)  # float64 values for fp32 patterns
    with pytest.raises(TypeError, match="^b:"):
        sf.linalg.dot(np.ones(3, np.float16), np.ones(3, np.float32), sf.fp16)
    with pytest.raises(TypeError, match="^keepdims:"):
        sf.linalg.sum(np.ones(3, np.float32), sf.fp32, keepdims=1)
