"""softfloat16.mx.matmul on the host's arithmetic (_kernels.hardware_blocks) against the exact
kernel (_kernels.blockscale, the reference implementation: the host path switched off), and
against an independent Fraction computation of the definition on a small case."""
from fractions import Fraction

import numpy as np
import pytest

import softfloat16 as sf
from softfloat16 import mx
from softfloat16._kernels import hardware

PAIRS = (("mxfp8_e4m3", "mxfp8_e4m3"), ("mxfp8_e4m3", "mxfp8_e5m2"), ("mxfp8_e5m2", "mxfp8_e5m2"),
         ("mxfp6_e2m3", "mxfp6_e3m2"), ("mxfp4_e2m1", "mxfp4_e2m1"), ("mxint8", "mxint8"), ("nvfp4", "nvfp4"))
SHAPES = ((1, 1, 1), (5, 37, 33), (4, 64, 32), (9, 100, 70))


def exact_kernel(a, b, monkeypatch):
    with monkeypatch.context() as patch:
        patch.setattr(mx, "_matmul_on_host", lambda *args: None)
        return mx.matmul(a, b)


def operands(rng, fa, fb, m, k, n, spread):
    x = rng.standard_normal((m, k)) * 2.0 ** rng.integers(-spread, spread + 1, (m, k))
    y = rng.standard_normal((k, n)) * 2.0 ** rng.integers(-spread, spread + 1, (k, n))
    x[rng.random((m, k)) < 0.1] = 0.0
    return mx.quantize(x, fa, axis=1), mx.quantize(y, fb, axis=0)


@pytest.mark.parametrize("fa, fb", PAIRS)
def test_the_host_kernel_gives_the_exact_kernels_bits(fa, fb, monkeypatch):
    """Tile edges (m, n not multiples of the tile, K not a multiple of the block), zeros, values
    spread over many binades (E5M2 blocks that do not fit binary64 go to the exact kernel), and the
    host kernel itself is what ran where the sums fit."""
    for m, k, n in SHAPES:
        for spread in (2, 12):
            rng = np.random.default_rng([m, k, n, spread, len(fa), len(fb)])
            a, b = operands(rng, fa, fb, m, k, n, spread)
            want = exact_kernel(a, b, monkeypatch)
            got = mx.matmul(a, b)
            assert np.array_equal(got, want), (fa, fb, m, k, n, spread, np.flatnonzero(got != want)[:5])
            if spread == 2:
                assert mx._matmul_on_host(a, b, None if a.tensor_scale is None else 0x3F800000) is not None


def test_overflow_and_cancelling_infinities(monkeypatch):
    """Blocks whose scaled sums overflow FP32 (to +-inf, then inf - inf: the NaN 0x7fc00000)."""
    big = np.full((4, 64), 400.0)
    big[:, 32:] = -400.0
    a = mx.quantize(big * 2.0**100, "mxfp8_e4m3", axis=1)
    b = mx.quantize(np.full((64, 3), 448.0) * 2.0**100, "mxfp8_e4m3", axis=0)
    got = mx.matmul(a, b)
    assert np.array_equal(got, exact_kernel(a, b, monkeypatch))
    assert (got == 0x7FC00000).all()


def test_non_finite_elements_take_the_exact_kernel(monkeypatch):
    x = np.ones((4, 32))
    x[1, 3] = np.inf
    x[2, 5] = np.nan
    a, b = mx.quantize(x, "mxfp8_e5m2", axis=1), mx.quantize(np.ones((32, 5)), "mxfp8_e5m2", axis=0)
    assert mx._matmul_on_host(a, b, None) is None
    assert np.array_equal(mx.matmul(a, b), exact_kernel(a, b, monkeypatch))


def test_one_block_rounded_once_then_accumulated():
    """The definition in Fractions: a block whose exact sum 1 + 2**-24 + 2**-30 rounds up to
    1 + 2**-23 only when rounded once (binary32 sums would lose the 2**-30)."""
    x = np.zeros((1, 64))
    x[0, :3] = (1.0, 2.0**-12, 2.0**-15)
    y = np.zeros((64, 1))
    y[:3, 0] = (1.0, 2.0**-12, 2.0**-15)
    a, b = mx.quantize(x, "mxfp8_e4m3", axis=1), mx.quantize(y, "mxfp8_e4m3", axis=0)
    exact = Fraction(1) + Fraction(2) ** -24 + Fraction(2) ** -30
    assert exact > 1 + Fraction(2) ** -24  # above the midpoint: rounds up
    assert int(mx.matmul(a, b)[0, 0]) == 0x3F800001
    assert sf.fp32.to_float(np.uint32(0x3F800001)) == 1 + 2.0**-23


def test_blocks_too_wide_for_binary64_take_the_exact_kernel():
    """E5M2 products 2**30, 2**6 and 2**-32 in one block: the exact sum lies just above the binary32
    midpoint 2**30 + 2**6 and rounds once to 2**30 + 2**7 (0x4e800001); a binary64 sum would lose
    the 2**-32 (62 bits) and the midpoint's tie would go to the even 2**30."""
    x = np.zeros((1, 32))
    x[0, :3] = (2.0**15, 2.0**3, 2.0**-16)
    a, b = mx.quantize(x, "mxfp8_e5m2", axis=1), mx.quantize(x.T.copy(), "mxfp8_e5m2", axis=0)
    assert mx._matmul_on_host(a, b, None) is None
    assert int(mx.matmul(a, b)[0, 0]) == 0x4E800001


@pytest.mark.skipif(not hardware.X86, reason="MXCSR (FTZ, DAZ, rounding control) is x86's")
@pytest.mark.parametrize("bits", [0x8000 | 0x0040, 0x6000], ids=["ftz+daz", "round-up"])
def test_an_environment_set_by_someone_else_changes_nothing(bits, monkeypatch):
    """Block sums whose FP32 results are subnormal (2**-130 and below): the kernel sets MXCSR per
    tile (nearest even, no FTZ, no DAZ) and restores the caller's."""
    rng = np.random.default_rng(5)
    a = mx.quantize(rng.standard_normal((4, 64)) * 2.0**-60, "mxfp8_e4m3", axis=1)
    b = mx.quantize(rng.standard_normal((64, 40)) * 2.0**-70, "mxfp8_e4m3", axis=0)
    want = exact_kernel(a, b, monkeypatch)
    assert (want & 0x7F800000 == 0).any() and (want & 0x7FFFFF != 0).any()  # subnormal results
    before = sf.get_num_threads()
    sf.set_num_threads(1)
    old = hardware.swap_mxcsr(0x1F80 | bits)
    try:
        got = mx._matmul_on_host(a, b, None)
        assert hardware.swap_mxcsr(0x1F80 | bits) & 0xFFC0 == 0x1F80 | bits
    finally:
        hardware.swap_mxcsr(old)
        sf.set_num_threads(before)
    assert got is not None and np.array_equal(got, want)


def test_threads_do_not_change_the_bits(monkeypatch):
    """The kernel's tiles of rows on Numba's threads (forced on for a small product): the same bits
    as the exact kernel and as one thread."""
    rng = np.random.default_rng(9)
    a, b = operands(rng, "mxfp8_e4m3", "mxfp8_e4m3", 13, 70, 45, 3)
    one = mx.matmul(a, b)
    before = sf.get_num_threads()
    sf.set_num_threads(2)
    monkeypatch.setattr(mx, "parallel_gemm", lambda *args: True)
    try:
        two = mx.matmul(a, b)
    finally:
        sf.set_num_threads(before)
    assert np.array_equal(one, two) and np.array_equal(two, exact_kernel(a, b, monkeypatch))
