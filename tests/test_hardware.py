"""The core against hardware: numpy float16/float32 and ml_dtypes (round to nearest even), and
torch-CPU for the x86 NaN profile. Sampled slices of the 2**32 input pairs, all 2**16 inputs for
unary operations and widening conversions."""
import numpy as np
import pytest

import softfloat16 as sf

ml_dtypes = pytest.importorskip("ml_dtypes")

pytestmark = pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")
PAIRS = 1 << 22
NUMPY_OPS = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide}
ALL16 = np.arange(1 << 16, dtype=np.uint16)


def uniform_bits(n, dtype, seed):
    info = np.iinfo(dtype)
    return np.random.default_rng(seed).integers(0, int(info.max) + 1, n, dtype=dtype)


def assert_same(got, want, is_nan, what):
    """Bits equal where the hardware result is a number; NaN class equal where it is NaN."""
    got_nan = is_nan(got)
    want_nan = is_nan(want)
    assert np.array_equal(got_nan, want_nan), f"{what}: NaN class differs at {np.flatnonzero(got_nan != want_nan)[:5]}"
    diff = (got != want) & ~want_nan
    if diff.any():
        i = np.flatnonzero(diff)[:5]
        pytest.fail(f"{what}: {int(diff.sum())} mismatches, first at {i}: got {[hex(x) for x in got[i]]}, "
                    f"want {[hex(x) for x in want[i]]}")


def fp16_nan(bits):
    return (bits & 0x7FFF) > 0x7C00


def bf16_nan(bits):
    return (bits & 0x7FFF) > 0x7F80


def fp32_nan(bits):
    return (bits & 0x7FFFFFFF) > 0x7F800000


@pytest.mark.parametrize("op", list(NUMPY_OPS))
def test_fp16_binary_vs_numpy(op):
    # float32 has 24 >= 2*11+2 bits: computing there and rounding once to float16 is exact RNE.
    a, b = uniform_bits(PAIRS, np.uint16, 1), uniform_bits(PAIRS, np.uint16, 2)
    with np.errstate(all="ignore"):
        want = NUMPY_OPS[op](a.view(np.float16).astype(np.float32), b.view(np.float16).astype(np.float32))
    want = want.astype(np.float16).view(np.uint16)
    assert_same(getattr(sf.fp16, op)(a, b), want, fp16_nan, f"fp16 {op}")


@pytest.mark.parametrize("op", list(NUMPY_OPS))
def test_bf16_binary_vs_ml_dtypes(op):
    a, b = uniform_bits(PAIRS, np.uint16, 3), uniform_bits(PAIRS, np.uint16, 4)
    with np.errstate(all="ignore"):
        want = NUMPY_OPS[op](a.view(ml_dtypes.bfloat16).astype(np.float32),
                             b.view(ml_dtypes.bfloat16).astype(np.float32))
    want = want.astype(ml_dtypes.bfloat16).view(np.uint16)
    assert_same(getattr(sf.bf16, op)(a, b), want, bf16_nan, f"bf16 {op}")


@pytest.mark.parametrize("op", list(NUMPY_OPS))
def test_fp32_binary_vs_numpy(op):
    # Same-exponent pairs half the time, so cancellation and exact ties are well represented.
    a, b = uniform_bits(PAIRS, np.uint32, 5), uniform_bits(PAIRS, np.uint32, 6)
    b[::2] = (b[::2] & 0x807FFFFF) | (a[::2] & 0x7F800000)
    with np.errstate(all="ignore"):
        want = NUMPY_OPS[op](a.view(np.float32).astype(np.float64), b.view(np.float32).astype(np.float64))
    want = want.astype(np.float32).view(np.uint32)
    assert_same(getattr(sf.fp32, op)(a, b), want, fp32_nan, f"fp32 {op}")


def test_sqrt_all_fp16_and_bf16_inputs():
    with np.errstate(invalid="ignore"):
        want16 = np.sqrt(ALL16.view(np.float16).astype(np.float32)).astype(np.float16).view(np.uint16)
        want_bf = np.sqrt(ALL16.view(ml_dtypes.bfloat16).astype(np.float32))
    assert_same(sf.fp16.sqrt(ALL16), want16, fp16_nan, "fp16 sqrt")
    assert_same(sf.bf16.sqrt(ALL16), want_bf.astype(ml_dtypes.bfloat16).view(np.uint16), bf16_nan, "bf16 sqrt")


def test_fp32_sqrt_sampled():
    a = uniform_bits(PAIRS, np.uint32, 7)
    with np.errstate(invalid="ignore"):
        want = np.sqrt(a.view(np.float32).astype(np.float64)).astype(np.float32).view(np.uint32)
    assert_same(sf.fp32.sqrt(a), want, fp32_nan, "fp32 sqrt")


def test_widening_conversions_all_inputs():
    quiet16 = ~fp16_nan(ALL16) | (ALL16 & 0x0200 != 0)
    got = sf.convert(ALL16, src=sf.fp16, dst=sf.fp32)
    want = ALL16.view(np.float16).astype(np.float32).view(np.uint32)
    assert_same(got, want, fp32_nan, "fp16->fp32")
    # numpy keeps signalling NaNs signalling; IEEE conversions quiet them. Quiet NaNs: same bits.
    assert np.array_equal(got[quiet16], want[quiet16])
    got = sf.convert(ALL16, src=sf.bf16, dst=sf.fp32)
    want = ALL16.view(ml_dtypes.bfloat16).astype(np.float32).view(np.uint32)
    assert_same(got, want, fp32_nan, "bf16->fp32")


@pytest.mark.parametrize("dst", ["fp16", "bf16"])
def test_narrowing_fp32_sampled(dst):
    a = uniform_bits(PAIRS, np.uint32, 8)
    # Half the samples near the destination's rounding boundaries: low fraction bits around the tie.
    drop = 13 if dst == "fp16" else 16
    a[::2] = (a[::2] & ~np.uint32((1 << drop) - 1)) | np.uint32(1 << (drop - 1)) + (a[::2] % 3).astype(np.uint32) - 1
    target = np.float16 if dst == "fp16" else ml_dtypes.bfloat16
    with np.errstate(all="ignore"):
        want = a.view(np.float32).astype(target).view(np.uint16)
    assert_same(sf.convert(a, src=sf.fp32, dst=dst), want, fp16_nan if dst == "fp16" else bf16_nan, f"fp32->{dst}")


def test_float64_to_fp16_direct():
    # numpy rounds float64 -> float16 directly (no float32 step), the same single rounding as ours.
    x = np.random.default_rng(9).standard_normal(PAIRS) * np.exp2(np.random.default_rng(10).integers(-30, 20, PAIRS))
    assert_same(sf.fp16.from_float(x), x.astype(np.float16).view(np.uint16), fp16_nan, "float64->fp16")


def test_fp8_e5m2_mul_all_pairs():
    a = np.repeat(np.arange(256, dtype=np.uint8), 256)
    b = np.tile(np.arange(256, dtype=np.uint8), 256)
    with np.errstate(all="ignore"):
        want = (a.view(ml_dtypes.float8_e5m2).astype(np.float32) * b.view(ml_dtypes.float8_e5m2).astype(np.float32))
    want = want.astype(ml_dtypes.float8_e5m2).view(np.uint8)
    got = sf.fp8_e5m2.mul(a, b)
    nan = lambda x: (x & 0x7F) > 0x7C  # noqa: E731
    assert_same(got, want, nan, "fp8_e5m2 mul")


# x86 profile: torch-CPU half/float (vectorised: compute in fp32, round once) and numpy float32.
def nan_rich_bits(n, dtype, seed):
    rng = np.random.default_rng(seed)
    bits = uniform_bits(n, dtype, seed)
    if dtype == np.uint16:
        special = np.array([0x7C01, 0x7D55, 0x7E00, 0x7FFF, 0xFC01, 0xFE33, 0x7C00, 0xFC00, 0, 0x8000], np.uint16)
    else:
        special = np.array([0x7F800001, 0x7FC00001, 0xFFC12345, 0xFF800001, 0x7F800000, 0xFF800000, 0, 1 << 31],
                           np.uint32)
    pick = rng.integers(0, 5, n) == 0
    bits[pick] = special[rng.integers(0, len(special), int(pick.sum()))]
    return bits


@pytest.mark.parametrize("op", list(NUMPY_OPS))
@pytest.mark.parametrize("fmt_name", ["fp16", "fp32"])
def test_x86_profile_matches_torch_cpu(op, fmt_name):
    torch = pytest.importorskip("torch")
    torch.set_num_threads(1)
    dtype, tdtype = (np.uint16, torch.float16) if fmt_name == "fp16" else (np.uint32, torch.float32)
    a, b = nan_rich_bits(200_003, dtype, 11), nan_rich_bits(200_003, dtype, 12)
    signed = np.int16 if dtype == np.uint16 else np.int32
    ta = torch.from_numpy(a.view(signed)).view(tdtype)
    tb = torch.from_numpy(b.view(signed)).view(tdtype)
    want = getattr(torch, op)(ta, tb).view(torch.int16 if dtype == np.uint16 else torch.int32).numpy().view(dtype)
    got = getattr(sf.format(fmt_name), op)(a, b, nan="x86")
    fmt = sf.format(fmt_name)
    is_nan = lambda x: (x & (fmt.sign_mask - 1)) > fmt.inf  # noqa: E731
    # When both operands are NaN, torch's choice depends on code generation (vectorised loop or tail).
    both = is_nan(a) & is_nan(b)
    diff = (got != want) & ~both
    assert not diff.any(), [(hex(x), hex(y), hex(w), hex(g)) for x, y, w, g in
                            zip(a[diff][:5], b[diff][:5], want[diff][:5], got[diff][:5])]
    assert (is_nan(got) == is_nan(want)).all()


def test_x86_profile_matches_numpy_float32_including_both_nan():
    a, b = nan_rich_bits(200_003, np.uint32, 13), nan_rich_bits(200_003, np.uint32, 14)
    for op, fn in NUMPY_OPS.items():
        with np.errstate(all="ignore"):
            want = fn(a.view(np.float32), b.view(np.float32)).view(np.uint32)
        got = getattr(sf.fp32, op)(a, b, nan="x86")
        assert np.array_equal(got, want), op


def test_x86_profile_matches_torch_sqrt_and_conversions():
    torch = pytest.importorskip("torch")
    t16 = torch.from_numpy(ALL16.view(np.int16)).view(torch.float16)
    assert np.array_equal(sf.fp16.sqrt(ALL16, nan="x86"), torch.sqrt(t16).view(torch.int16).numpy().view(np.uint16))
    assert np.array_equal(sf.convert(ALL16, src=sf.fp16, dst=sf.fp32, nan="x86"),
                          t16.float().numpy().view(np.uint32))
    a = nan_rich_bits(200_003, np.uint32, 15)
    want = torch.from_numpy(a.view(np.float32)).half().view(torch.int16).numpy().view(np.uint16)
    assert np.array_equal(sf.convert(a, src=sf.fp32, dst=sf.fp16, nan="x86"), want)
