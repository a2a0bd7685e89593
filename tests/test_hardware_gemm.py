"""The host-FMA GEMM (softfloat16._kernels.hardware) behind linalg.matmul's default policy.

Differential: against the scalar sequential kernel (the reference implementation, untouched) and an
independent numpy float32 k-loop, over shapes at every edge of the tiling and every kind of
operand (uniformly random patterns: NaN, infinities, subnormals, overflowing sums). Then with the
host's floating-point environment deliberately changed (flush to zero, denormals are zero, a
directed rounding mode): the bits must not change (the fallback).
"""
import ctypes
import ctypes.util
import platform

import numpy as np
import pytest

import softfloat16 as sf
from softfloat16 import host_gemm, linalg
from softfloat16._kernels import hardware, hardware_pairwise, twosum
from softfloat16._kernels import matmul as kernels

SHAPES = [(1, 1, 1), (3, 0, 5), (1, 7, 33), (33, 7, 1), (5, 13, 67), (4, 64, 64), (17, 5, 129), (2, 300, 3),
          (8, 31, 65)]
PAIRS = [(sf.fp16, sf.fp16), (sf.bf16, sf.bf16), (sf.fp32, sf.fp32), (sf.fp8_e4m3fn, sf.fp8_e5m2),
         (sf.fp6_e3m2, sf.fp4_e2m1), (sf.format("p3109_k8p3se"), sf.format("p3109_k8p3se"))]


def scalar_sequential(a, b, fmt, b_format, order="sequential", rounding="rne", accumulate=sf.fp32):
    """The scalar kernel of the order, FP32 output (accumulation: FP32 unless given)."""
    ua = kernels.unpack_matrix(np.ascontiguousarray(a, np.uint32), fmt.exponent_bits, fmt.fraction_bits,
                               fmt.encoding_code)
    ub = kernels.unpack_matrix(np.ascontiguousarray(b.T, np.uint32), b_format.exponent_bits,
                               b_format.fraction_bits, b_format.encoding_code)
    out = np.empty((a.shape[0], b.shape[1]), np.uint32)
    kernels.MATMUL[order][0](ua, ub, out, accumulate.exponent_bits, accumulate.fraction_bits, 8, 23,
                             int(sf.Rounding[rounding.upper()]))
    return out


def random_patterns(rng, fmt, shape):
    return rng.integers(0, 1 << fmt.width, shape, dtype=np.uint64).astype(fmt.dtype)


def assert_same(got, want, label):
    bad = np.argwhere(got != want)
    first = [(hex(got[tuple(i)]), hex(want[tuple(i)])) for i in bad[:3]]
    assert bad.size == 0, f"{label}: {len(bad)} differ, first {first}"


@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_every_tiling_edge_and_every_kind_of_operand(shape):
    m, k, n = shape
    rng = np.random.default_rng(list(shape))
    for fmt, b_format in PAIRS:
        a, b = random_patterns(rng, fmt, (m, k)), random_patterns(rng, b_format, (k, n))
        for order in ("sequential", "pairwise"):
            for rounding in ("rne", "rtz", "rup", "rdn"):
                label = f"{shape} {fmt.name} x {b_format.name} {order} {rounding}"
                got = linalg.matmul(a, b, fmt, b_format=b_format, out_format=sf.fp32, order=order, rounding=rounding)
                assert got.shape == (m, n) and got.dtype == np.uint32
                assert_same(got, scalar_sequential(a, b, fmt, b_format, order, rounding), label)
        # and rounded once more to a narrow output, as the order's definition says
        narrow = linalg.matmul(a, b, fmt, b_format=b_format, out_format=sf.fp16, rounding="rup")
        want = linalg.matmul(a, b, fmt, b_format=b_format, out_format=sf.fp32, rounding="rup")
        assert_same(narrow, np.asarray(sf.convert(want, sf.fp32, sf.fp16, rounding="rup")), f"{shape} -> fp16")


@pytest.mark.parametrize("shape", [(1, 1, 1), (5, 13, 67), (4, 300, 33), (9, 64, 3)], ids=str)
def test_narrow_accumulators(shape):
    """FP16 / BF16 / E5M2 accumulation, round to nearest even (the float64 lanes, which step aside
    outside the default environment): the scalar kernel's bits for random patterns and for
    moderate values whose sums round in every step, reach subnormals and overflow."""
    m, k, n = shape
    rng = np.random.default_rng([m, k, n, 1])
    for accumulate in (sf.fp16, sf.bf16, sf.fp8_e5m2):
        for fmt, b_format in PAIRS:
            a, b = random_patterns(rng, fmt, (m, k)), random_patterns(rng, b_format, (k, n))
            scale = 2.0 ** rng.integers(-12, 6, (m, k))
            moderate = (fmt.from_float(rng.standard_normal((m, k)) * scale),
                        b_format.from_float(rng.standard_normal((k, n))))
            for x, y in ((a, b), moderate):
                got = linalg.matmul(x, y, fmt, b_format=b_format, accumulate=accumulate, out_format=sf.fp32)
                want = scalar_sequential(x, y, fmt, b_format, accumulate=accumulate)
                assert_same(got, want, f"{shape} {fmt.name} x {b_format.name} into {accumulate.name}")


# FP16 accumulation in every mode; each other accumulation format in one mode; the pairwise order
# with some of them, the default policy's FP32 included (each spec is a compiled kernel, binary32 and
# binary64: the list is kept short). FP16 to nearest even takes the host's conversion where it has
# one (twosum.HALF_CONVERSION); E5M2 to nearest even takes the integer steps with FP16's exponents.
ROUNDED_STEPS = ([(sf.fp16, r, "sequential") for r in ("rne", "rna", "rtz", "rup", "rdn", "rod")]
                 + [(sf.bf16, "rne", "sequential"), (sf.tf32, "rdn", "sequential"), (sf.fp8_e5m2, "rne", "sequential")]
                 + [(sf.fp32, "rna", "sequential"), (sf.fp32, "rod", "sequential")]
                 + [(sf.fp16, "rne", "pairwise"), (sf.fp16, "rup", "pairwise"), (sf.fp32, "rna", "pairwise"),
                    (sf.fp32, "rne", "pairwise")])


def finite_patterns(rng, fmt, shape):
    """Uniformly random finite patterns: every binade, subnormals, sums that overflow."""
    x = random_patterns(rng, fmt, shape)
    return np.where(np.asarray(fmt.is_finite(x)), x, np.zeros_like(x))


@pytest.mark.parametrize("accumulate, rounding, order", ROUNDED_STEPS, ids=lambda x: getattr(x, "name", x))
def test_sums_rounded_into_any_accumulator_in_every_mode(accumulate, rounding, order):
    """The host's sums rounded by _kernels.twosum: each + its exact sum rounded into the
    accumulation format in integers. The scalar kernel's bits for moderate values (sums that round,
    carry into the next binade, reach the accumulator's subnormals) and for uniformly random finite
    patterns (overflow, every binade), at shapes that cut tiles and trees; and the host's kernel
    itself is what ran."""
    for m, k, n in ((5, 13, 67), (4, 300, 33), (1, 1, 3), (40, 19, 3)):
        rng = np.random.default_rng([m, k, n, int(sf.Rounding[rounding.upper()]), accumulate.width])
        for fmt, b_format in ((sf.fp16, sf.fp16), (sf.bf16, sf.bf16), (sf.fp8_e4m3fn, sf.fp8_e5m2),
                              (sf.fp32, sf.fp32)):
            scale = 2.0 ** rng.integers(-14, 4, (m, k))
            cases = {"moderate": (fmt.from_float(rng.standard_normal((m, k)) * scale),
                                  b_format.from_float(rng.standard_normal((k, n)))),
                     "finite": (finite_patterns(rng, fmt, (m, k)), finite_patterns(rng, b_format, (k, n)))}
            for kind, (x, y) in cases.items():
                label = f"{m}x{k}x{n} {fmt.name} x {b_format.name} into {accumulate.name} {rounding} {order} {kind}"
                want = scalar_sequential(x, y, fmt, b_format, order, rounding=rounding, accumulate=accumulate)
                got = linalg.matmul(x, y, fmt, b_format=b_format, accumulate=accumulate, out_format=sf.fp32,
                                    rounding=rounding, order=order)
                assert_same(got, want, label)
                # The kernel itself: binary32 sums where every product is a binary32 value, else binary64.
                x32, y32 = linalg._binary32(x, fmt), linalg._binary32(y, b_format)
                mode = int(sf.Rounding[rounding.upper()])
                spec = linalg._twosum_spec(accumulate, mode, False)
                if spec is None or not linalg._products_in_binary32(x32, y32, fmt, b_format):
                    assert kind == "finite" or fmt is sf.fp32 or spec is None, label
                    spec, x32, y32 = linalg._twosum_spec(accumulate, mode, True), x32.astype(float), y32.astype(float)
                run = hardware.gemm if order == "sequential" else hardware_pairwise.pairwise_gemm
                direct = np.asarray(run(x32, y32, spec=spec), np.float32).view(np.uint32)
                assert_same(direct, want, label + " (the kernel)")


def test_pairwise_fp32_single_products_are_rounded_once():
    """FP32 inputs, FP32 accumulation, pairwise order: a + of two partial sums is the host's binary64
    sum converted to binary32 (two roundings to nearest even that equal one), but a + with a single
    product must round the exact sum once. 1 + 2**-23 plus the product 2**-24 - 2**-70 lies just
    below the binary32 midpoint 1 + 2**-23 + 2**-24: binary64 would round it onto the midpoint, whose
    tie goes to the even 1 + 2**-22; rounded once it is 1 + 2**-23 (0x3f800001). The product meets a
    single product (k = 2), a partial sum (k = 3: the newest added last) and a block's tree (k = 16)."""
    one_up, small = 1 + 2.0**-23, 2.0**-12
    for k, where in ((2, (0, 1)), (3, (0, 2)), (16, (0, 1)), (16 + 3, (16, 18))):
        a, b = np.zeros((5, k), np.float32), np.zeros((k, 3), np.float32)
        a[:, where[0]], b[where[0], :] = one_up, 1.0
        a[:, where[1]], b[where[1], :] = small * one_up, small * (1 - 2.0**-23)
        got = linalg.matmul(a.view(np.uint32), b.view(np.uint32), sf.fp32, order="pairwise")
        assert (got == 0x3F800001).all(), (k, where, hex(int(got[0, 0])))


def test_pairwise_fp32_leaves_on_a_binary32_midpoint_are_summed_again():
    """FP32 inputs, pairwise order: in a block, a + of two products is the host's binary64 fused
    multiply-add converted to binary32 (hardware.make_pairwise_gemm's ``checked`` leaves), which is
    wrong exactly where the binary64 sum lands on a binary32 midpoint. (1 + 2**-12)**2 =
    1 + 2**-11 + 2**-24, plus 2**-80: binary64 rounds onto the midpoint 1 + 2**-11 + 2**-24, whose
    tie goes to the even 1 + 2**-11; rounded once it is 1 + 2**-11 + 2**-23 (0x3f801001). The pair
    sits in the first and in a later panel and tile, beside random ones that take the fast leaves."""
    rng = np.random.default_rng(12)
    m, k, n = 9, 48, 300
    a, b = rng.standard_normal((m, k)).astype(np.float32), rng.standard_normal((k, n)).astype(np.float32)
    a[:, 16:32], b[16:32, :] = 0, 0  # the second block: only the pair
    for i, j in ((0, 0), (7, 290), (4, 130)):
        a[i, 16:18], b[16:18, j] = (1 + 2.0**-12, 2.0**-40), (1 + 2.0**-12, 2.0**-40)
    a, b = a.view(np.uint32), b.view(np.uint32)
    assert host_gemm._products_on_binary32_grid(a.view(np.float32), b.view(np.float32))
    want = scalar_sequential(a, b, sf.fp32, sf.fp32, "pairwise")
    assert_same(linalg.matmul(a, b, sf.fp32, order="pairwise", out_format=sf.fp32), want, "fp32 pairwise")
    direct = hardware_pairwise.pairwise_gemm(a.view(np.float32).astype(float), b.view(np.float32).astype(float),
                                    spec=twosum.BINARY32_IN_BINARY64, checked=True)
    assert_same(np.asarray(direct, np.float32).view(np.uint32), want, "the checked kernel")
    # Alone in a row and a column, the pair's block sum is the rounded-once value itself.
    alone = np.zeros((4, 16), np.float32), np.zeros((16, 64), np.float32)
    alone[0][:, :2], alone[1][:2, :] = (1 + 2.0**-12, 2.0**-40), np.array([[1 + 2.0**-12], [2.0**-40]])
    got = linalg.matmul(alone[0].view(np.uint32), alone[1].view(np.uint32), sf.fp32, order="pairwise")
    assert (got == 0x3F801001).all(), hex(int(got[0, 0]))


def test_pairwise_fp32_products_below_the_binary32_grid_take_exact_leaves():
    """Products with bits below 2**-149 (binary32's smallest subnormal) can make binary32
    subnormal midpoints that the midpoint check does not see: those operands take the exact
    leaves. 1.5 * 2**-149 - 2**-298 lies just below a subnormal midpoint: rounded once it is
    2**-149 (0x1), through binary64 the tie's even 2**-148 (0x2). Beside it, sums of products near
    2**-140 that cancel into the subnormals; against the scalar kernel."""
    rng = np.random.default_rng(13)
    a = (rng.standard_normal((8, 32)) * 2.0**-75).astype(np.float32)
    b = (rng.standard_normal((32, 40)) * 2.0**-65).astype(np.float32)
    a[0], b[:, 0], b[2:4] = 0, 0, 0  # (no other sum of this block lands on a midpoint)
    a[0, 2:4], b[2:4, 0] = (1.5 * 2.0**-75, 2.0**-149), (2.0**-74, -(2.0**-149))
    assert not host_gemm._products_on_binary32_grid(a, b)
    a, b = a.view(np.uint32), b.view(np.uint32)
    want = scalar_sequential(a, b, sf.fp32, sf.fp32, "pairwise")
    assert want[0, 0] == 0x1 and (want & 0x7F800000 == 0).sum() > 1  # subnormal sums among them
    assert_same(linalg.matmul(a, b, sf.fp32, order="pairwise", out_format=sf.fp32), want, "below the grid")


def _pair(k, first, second):
    """(4, k) x (k, 64) FP32 operands: row 0 of A times every column of B is first[0] * first[1] +
    second[0] * second[1] at t = 0 and 1 (a leaf of the pairwise order's first block), zeros elsewhere."""
    a, b = np.zeros((4, k), np.float32), np.zeros((k, 64), np.float32)
    (a[0, 0], b[0, :]), (a[0, 1], b[1, :]) = first, second
    return a.view(np.uint32), b.view(np.uint32)


# (accumulate, rounding, operands, the bits rounded once): sums the host's binary64 arithmetic lands on
# a midpoint of the accumulator, which its conversion would round the wrong way.
UNDECIDED = [
    # FP32 with ties away: (1 + 2**-12)**2 = 1 + 2**-11 + 2**-24 is a midpoint; + 2**-80 lies above
    # it, and binary64 rounds it onto it: away, 1 + 2**-11 + 2**-23. Alone, the exact tie goes away too.
    (sf.fp32, "rna", ((2.0**-40, 2.0**-40), (1 + 2.0**-12, 1 + 2.0**-12)), 0x3F801001),
    (sf.fp32, "rna", ((1 + 2.0**-12, 1 + 2.0**-12), (0.0, 0.0)), 0x3F801001),
    # FP16 to nearest even: 512.5 + 0.25 * (1 - 2**-46) lies just below the midpoint 512.75 (binary64
    # rounds it onto it; its even neighbour is 513): 512.5.
    (sf.fp16, "rne", ((1.0, 512.5), (0.5 + 2.0**-24, 0.5 - 2.0**-24)), 0x44002000),
]
UNDECIDED = [case + (order,) for case in UNDECIDED for order in ("sequential", "pairwise")] + [
    # FP16 subnormals: 3 * 2**-25 - 2**-80 lies just below a midpoint (even neighbour 2**-23): 2**-24.
    # (A leaf of two products: a sequential step adds one product to an FP16 value, which cannot
    # come this close to a subnormal midpoint.)
    (sf.fp16, "rne", ((1.5 * 2.0**-12, 2.0**-12), (2.0**-40, -(2.0**-40))), 0x33800000, "pairwise")]


@pytest.mark.parametrize("accumulate, rounding, pair, want, order", UNDECIDED, ids=str)
def test_binary64_sums_on_an_accumulator_midpoint_are_computed_again(accumulate, rounding, pair, want, order):
    """FP32 inputs into FP16, or FP32 with ties away: each + is the host's binary64 sum rounded by
    its conversions (_kernels.checked), which is the one rounding except on the accumulator's
    midpoints; a panel with one is computed again with the exact steps. The crafted sums, in the
    pairwise order inside a block (k = 16) and beside random rows and columns."""
    a, b = _pair(16, *pair)
    got = linalg.matmul(a, b, sf.fp32, accumulate=accumulate, rounding=rounding, order=order, out_format=sf.fp32)
    assert (got[0] == want).all(), hex(int(got[0, 0]))
    rng = np.random.default_rng(14)
    a2 = np.vstack([a.view(np.float32), rng.standard_normal((5, 16)).astype(np.float32)]).view(np.uint32)
    b2 = np.hstack([b.view(np.float32), rng.standard_normal((16, 70)).astype(np.float32)]).view(np.uint32)
    want2 = scalar_sequential(a2, b2, sf.fp32, sf.fp32, order, rounding=rounding, accumulate=accumulate)
    assert (want2[0, :64] == want).all()
    got2 = linalg.matmul(a2, b2, sf.fp32, accumulate=accumulate, rounding=rounding, order=order, out_format=sf.fp32)
    assert_same(got2, want2, f"{accumulate.name} {rounding} {order}")


@pytest.mark.parametrize("accumulate, rounding, order", [
    (sf.fp32, "rna", "sequential"), (sf.fp16, "rne", "sequential"), (sf.fp32, "rna", "pairwise"),
    (sf.fp16, "rne", "pairwise"), (sf.fp32, "rne", "pairwise")], ids=str)  # (FP32 RNE sequential: the binary32 FMA)
def test_checked_kernels_on_random_operands(accumulate, rounding, order):
    """The checked kernels themselves (checked=True, where the host's conversions run and panels
    are computed again only where a sum is undecided) against the scalar kernel: FP32 inputs at
    scales whose sums cross FP16's subnormals, shapes that cut tiles, panels and blocks."""
    mode = int(sf.Rounding[rounding.upper()])
    spec = linalg._twosum_spec(accumulate, mode, True)
    run = hardware.gemm if order == "sequential" else hardware_pairwise.pairwise_gemm
    for m, k, n in ((5, 40, 67), (9, 300, 130), (4, 16, 1)):
        rng = np.random.default_rng([m, k, n, mode])
        for scale in (1.0, 2.0**-9):
            a = (rng.standard_normal((m, k)) * scale).astype(np.float32)
            b = (rng.standard_normal((k, n)) * scale).astype(np.float32)
            assert host_gemm._products_on_binary32_grid(a, b)
            want = scalar_sequential(a.view(np.uint32), b.view(np.uint32), sf.fp32, sf.fp32, order,
                                     rounding=rounding, accumulate=accumulate)
            got = run(a.astype(float), b.astype(float), spec=spec, checked=True)
            assert_same(np.asarray(got, np.float32).view(np.uint32), want,
                        f"{m}x{k}x{n} {scale} {accumulate.name} {rounding} {order}")


def test_numpy_float32_k_loop():
    """FP16 products are exact in binary32: numpy's own float32 additions, one per step from +0, are
    the order's definition (an oracle that shares nothing with the kernels)."""
    rng = np.random.default_rng(7)
    a = sf.fp16.from_float(rng.standard_normal((9, 200)) * 2.0 ** rng.integers(-20, 12, (9, 200)))
    b = sf.fp16.from_float(rng.standard_normal((200, 70)) * 2.0 ** rng.integers(-20, 12, (200, 70)))
    av, bv = a.view(np.float16).astype(np.float32), b.view(np.float16).astype(np.float32)
    acc = np.zeros((9, 70), np.float32)
    for t in range(200):
        acc = acc + av[:, t:t + 1] * bv[t:t + 1, :]  # each product exact, each sum rounded once
    assert_same(linalg.matmul(a, b, sf.fp16, out_format=sf.fp32), acc.view(np.uint32), "numpy k-loop")


def test_pairwise_bf16_in_and_out_of_binary32_range():
    """BF16 products leave binary32's range only for extreme operands: moderate ones take the host's
    pairwise kernel (checked from their exponents), extreme ones the exact kernels; the same bits."""
    rng = np.random.default_rng(9)
    moderate = [sf.bf16.from_float(rng.standard_normal(s) * 2.0 ** rng.integers(-40, 40, s))
                for s in ((6, 77), (77, 5))]
    a32, b32 = (linalg._binary32(x, sf.bf16) for x in moderate)
    assert linalg._products_in_binary32(a32, b32, sf.bf16, sf.bf16)
    extreme = [x.copy() for x in moderate]
    extreme[0][0, 0] = sf.bf16.from_float(2.0**100)
    extreme[1][0, 0] = sf.bf16.from_float(2.0**40)  # a product of 2**140: rounded when added, overflows
    assert not linalg._products_in_binary32(*(linalg._binary32(x, sf.bf16) for x in extreme), sf.bf16, sf.bf16)
    for a, b in (moderate, extreme):
        got = linalg.matmul(a, b, sf.bf16, out_format=sf.fp32, order="pairwise")
        assert_same(got, scalar_sequential(a, b, sf.bf16, sf.bf16, "pairwise"), "bf16 pairwise")


def test_threads_and_tiles_do_not_change_bits(monkeypatch):
    rng = np.random.default_rng(3)
    a, b = random_patterns(rng, sf.bf16, (37, 90)), random_patterns(rng, sf.bf16, (90, 130))
    before = sf.get_num_threads()
    monkeypatch.setattr(sf.threads, "PARALLEL_MIN_MACS", 1)
    try:
        sf.set_num_threads(1)
        one = [linalg.matmul(a, b, sf.bf16, out_format=sf.fp32, order=o) for o in ("sequential", "pairwise")]
        sf.set_num_threads(2)
        two = [linalg.matmul(a, b, sf.bf16, out_format=sf.fp32, order=o) for o in ("sequential", "pairwise")]
    finally:
        sf.set_num_threads(before)
    assert_same(two[0], one[0], "2 threads")
    assert_same(two[1], one[1], "2 threads, pairwise")
    one = one[0]
    assert_same(one, scalar_sequential(a, b, sf.bf16, sf.bf16), "scalar")


# The checked pairwise and sequential kernels and a TwoSum one (each threaded kernel compiles anew).
@pytest.mark.parametrize("accumulate, rounding, order", [
    (sf.fp32, "rne", "pairwise"), (sf.fp16, "rne", "sequential"), (sf.fp16, "rtz", "pairwise")], ids=str)
def test_binary64_kernels_on_threads(accumulate, rounding, order, monkeypatch):
    """FP32 inputs on the binary64 kernels (checked and TwoSum), compiled for threads: the scalar
    kernel's bits on 1 and 2 threads."""
    rng = np.random.default_rng(16)
    a = rng.standard_normal((37, 90)).astype(np.float32).view(np.uint32)
    b = rng.standard_normal((90, 130)).astype(np.float32).view(np.uint32)
    want = scalar_sequential(a, b, sf.fp32, sf.fp32, order, rounding=rounding, accumulate=accumulate)
    before = sf.get_num_threads()
    monkeypatch.setattr(sf.threads, "PARALLEL_MIN_MACS", 1)
    try:
        for threads in (1, 2):
            sf.set_num_threads(threads)
            got = linalg.matmul(a, b, sf.fp32, accumulate=accumulate, rounding=rounding, order=order,
                                out_format=sf.fp32)
            assert_same(got, want, f"{threads} threads")
    finally:
        sf.set_num_threads(before)


# --- the host's floating-point environment, changed on purpose -----------------------------------
X86 = platform.machine().lower() in ("x86_64", "amd64")
FTZ, DAZ = 0x8000, 0x0040  # MXCSR bits


swap_mxcsr = hardware.swap_mxcsr  # (x86: loads MXCSR, returns the old value)


def _subnormal_case():
    """FP32 operands whose products (2**-142) and sums are binary32 subnormals."""
    return sf.fp32.from_float(np.full((4, 8), 2.0**-140)), sf.fp32.from_float(np.full((8, 64), 0.25))


@pytest.mark.skipif(not X86, reason="MXCSR (FTZ/DAZ) is x86's")
@pytest.mark.parametrize("bits", [FTZ, DAZ, FTZ | DAZ], ids=["ftz", "daz", "ftz+daz"])
def test_flush_to_zero_set_by_someone_else_changes_nothing(bits):
    """The kernels set MXCSR themselves for each tile (and restore it): FTZ/DAZ set by someone else
    change no bit."""
    x, y = _subnormal_case()
    want = scalar_sequential(x, y, sf.fp32, sf.fp32)
    assert sf.fp32.value(int(want[0, 0])) != 0  # the case has subnormal sums
    before = sf.get_num_threads()
    sf.set_num_threads(1)  # the kernel runs on this thread, whose MXCSR is changed
    old = swap_mxcsr(0x1F80 | bits)
    try:
        direct = hardware.gemm(x.view(np.float32), y.view(np.float32))  # sets its own MXCSR per tile
        got = linalg.matmul(x, y, sf.fp32)
        assert swap_mxcsr(0x1F80 | bits) & 0xFFC0 == 0x1F80 | bits  # gave the caller's back (flags aside)
    finally:
        swap_mxcsr(old)
        sf.set_num_threads(before)
    assert_same(got, want, "under " + hex(bits))
    assert_same(np.ascontiguousarray(direct).view(np.uint32), want, "the kernel itself")


@pytest.mark.skipif(not X86, reason="MXCSR (FTZ/DAZ, the rounding control) is x86's")
@pytest.mark.parametrize("accumulate, rounding, order", [
    (sf.fp32, "rne", "pairwise"), (sf.fp32, "rna", "sequential"), (sf.fp16, "rne", "sequential"),
    (sf.fp16, "rne", "pairwise")], ids=str)
def test_checked_kernels_under_flush_to_zero_and_rounding_up(accumulate, rounding, order):
    """The binary64 sums rounded by the host's conversions (_kernels.checked) set MXCSR themselves:
    FTZ, DAZ and rounding upward set by someone else change no bit. FP32 operands on binary32's grid
    (products near 2**-90) with a row whose sums cancel to the subnormal 2**-136:
    -(1 + 2**-22) * 2**-90 + (1 + 2**-23) * (1 + 2**-23) * 2**-90, and a subnormal operand; and
    N(0, 1) operands scaled into FP16's subnormals."""
    rng = np.random.default_rng(15)
    signs = rng.choice([-1.0, 1.0], (4, 40)), rng.choice([-1.0, 1.0], (40, 64))
    grid = ((signs[0] * rng.uniform(1, 2, (4, 40))).astype(np.float32),
            (signs[1] * rng.uniform(1, 2, (40, 64)) * 2.0**-90).astype(np.float32))
    grid[0][0] = 0
    grid[0][0, :2], grid[1][:2] = (1 + 2.0**-22, 1 + 2.0**-23), np.array([[-(2.0**-90)], [2.0**-90 * (1 + 2.0**-23)]])
    assert host_gemm._products_on_binary32_grid(*grid)
    subnormal = grid[0].copy(), grid[1].copy()
    subnormal[0][1, 5], subnormal[1][5] = 2.0**-140, 2.0**30  # a subnormal operand (DAZ), its product 2**-110
    small = ((rng.standard_normal((4, 40)) * 2.0**-8).astype(np.float32),
             (rng.standard_normal((40, 64)) * 2.0**-8).astype(np.float32))
    before = sf.get_num_threads()
    for kind, (a, b) in (("grid", grid), ("subnormal", subnormal), ("small", small)):
        a, b = a.view(np.uint32), b.view(np.uint32)
        want = scalar_sequential(a, b, sf.fp32, sf.fp32, order, rounding=rounding, accumulate=accumulate)
        if kind != "small":
            assert accumulate is sf.fp16 or (want[0] == 0x2000).all()  # 2**-136 (FP16: 0)
        else:
            field = (want & 0x7F800000) >> 23
            assert accumulate is sf.fp32 or ((field < 127 - 14) & (want & 0x7FFFFFFF != 0)).sum() > 10
        sf.set_num_threads(1)
        old = swap_mxcsr(0x1F80 | 0x4000 | FTZ | DAZ)
        try:
            got = linalg.matmul(a, b, sf.fp32, accumulate=accumulate, rounding=rounding, order=order,
                                out_format=sf.fp32)
        finally:
            swap_mxcsr(old)
            sf.set_num_threads(before)
        assert_same(got, want, f"{kind} {accumulate.name} {rounding} {order}")


@pytest.mark.parametrize("mode", ["FE_UPWARD", "FE_TOWARDZERO", "FE_DOWNWARD"])
def test_a_directed_rounding_mode_set_by_someone_else_changes_nothing(mode):
    libm = ctypes.CDLL(ctypes.util.find_library("m"))
    codes = {"x86_64": {"FE_TONEAREST": 0, "FE_DOWNWARD": 0x400, "FE_UPWARD": 0x800, "FE_TOWARDZERO": 0xC00},
             "aarch64": {"FE_TONEAREST": 0, "FE_UPWARD": 0x400000, "FE_DOWNWARD": 0x800000,
                         "FE_TOWARDZERO": 0xC00000}}.get(platform.machine().lower())
    if codes is None:
        pytest.skip(f"fenv codes of {platform.machine()} are not listed here")
    rng = np.random.default_rng(11)
    a, b = sf.fp16.from_float(rng.standard_normal((8, 40))), sf.fp16.from_float(rng.standard_normal((40, 64)))
    want = scalar_sequential(a, b, sf.fp16, sf.fp16)
    before = sf.get_num_threads()
    sf.set_num_threads(1)
    assert libm.fesetround(codes[mode]) == 0
    try:
        direct = hardware.gemm(*(np.asarray(sf.convert(x, sf.fp16, sf.fp32)).view(np.float32) for x in (a, b)))
        assert (direct is None) != hardware.X86  # x86: set to nearest even per tile; elsewhere: refused
        got = linalg.matmul(a, b, sf.fp16, out_format=sf.fp32)
    finally:
        libm.fesetround(codes["FE_TONEAREST"])
        sf.set_num_threads(before)
    assert_same(got, want, mode)


def test_fma_chain_instructions_on_the_host_equal_the_exact_kernels(monkeypatch):
    """The FP64 instructions and AMD's FP32 FMA chains run on the host's FMA: bit for bit the exact
    integer / float64-lane kernels (which tests/test_mma*.py hold to MMA-Sim and Fraction models),
    every kind of operand (specials, overflow, subnormals, cancellation), chained K."""
    from softfloat16 import mma_reference
    from softfloat16.mma_presets import PRESETS

    names = [n for n, p in PRESETS.items() if p.d == "fp64" or p.model.adder == "fma"]
    assert len(names) >= 20
    for name in names:
        p = PRESETS[name]
        for kind in mma_reference.KINDS:
            a, b, c, _, _ = mma_reference.random_operands(p, 5, 7, 4 * p.k, kind, seed=len(kind))
            host = sf.mma.mma(a, b, c, name)
            with monkeypatch.context() as patch:
                patch.setattr(hardware, "gemm", lambda *args, **kwargs: None)  # what a changed environment does
                exact = sf.mma.mma(a, b, c, name)
            assert_same(host, exact, f"{name} {kind}")
