"""softfloat16.fp32math.expm1 / tanh / erf / pow against float64 math, in FP32 ulps; special
values (C99's for pow), symmetry, monotonicity across the algorithms' seams, and the same steps
driven by torch.

Stated bound: |result - exact| < 1 ulp of FP32 at the exact value (subnormal results: 1 ulp of the
subnormal spacing) for every finite input; measured over every 97th FP32 bit pattern (the module
docstring): 0.964 ulp for expm1, 0.838 for tanh, 0.709 for erf; pow 0.93 on 2.4 million pairs.
"""
from __future__ import annotations

import math

import numpy as np
import pytest

from softfloat16 import fp32math

ULP_BOUND = 1.0
REFERENCE = {"expm1": np.expm1, "tanh": np.tanh, "erf": np.vectorize(math.erf, otypes=[np.float64])}


def fp32_bits(x) -> np.ndarray:
    return np.asarray(x, dtype=np.float32).view(np.uint32)


def as_float(bits: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore"):  # NaN patterns with payloads
        return np.asarray(bits, dtype=np.uint32).view(np.float32).astype(np.float64)


def ulp_errors(name: str, bits: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(inputs, error in FP32 ulps of the float64 reference) for the finite inputs with a finite,
    nonzero result (float64 rounding of the reference adds < 2**-29 ulp)."""
    x = as_float(bits)
    with np.errstate(over="ignore"):
        exact = REFERENCE[name](x)
    got = as_float(getattr(fp32math, name)(bits))
    keep = np.isfinite(x) & np.isfinite(exact) & (exact != 0) & (np.abs(exact) < 2.0**128 * (1 - 2.0**-25))
    ulp = np.exp2(np.maximum(np.floor(np.log2(np.abs(exact[keep]))) - 23, -149))
    return x[keep], np.abs(got[keep] - exact[keep]) / ulp


def sample() -> np.ndarray:
    """Every 65521st FP32 pattern, plus dense random values where the functions are not flat."""
    rng = np.random.default_rng(0)
    spread = np.arange(0, 1 << 32, 65521, dtype=np.uint64).astype(np.uint32)
    values = np.concatenate([rng.uniform(-10, 10, 20000), rng.uniform(-1, 1, 20000),
                             rng.uniform(-1e-3, 1e-3, 2000), rng.uniform(-90, 90, 5000)])
    return np.concatenate([spread, fp32_bits(values)])


@pytest.mark.parametrize("name", ["expm1", "tanh", "erf"])
def test_error_below_one_ulp(name):
    x, errors = ulp_errors(name, sample())
    worst = int(np.argmax(errors))
    assert errors[worst] < ULP_BOUND, (name, x[worst], errors[worst])
    assert np.mean(errors > 0.5) < 0.05  # nearly always the correctly rounded result


def consecutive(center: float, count: int = 4000) -> np.ndarray:
    """``count`` consecutive positive FP32 patterns around ``center`` (> 0)."""
    start = int(fp32_bits(np.float32(center))) - count // 2
    return np.arange(start, start + count, dtype=np.int64).astype(np.uint32)


SEAMS = {
    "expm1": [0.3465736, 0.6931472, 16.63553, 88.0, 1e-7, 2.0**-25],  # ln2/2, ln2, k = 24, near overflow, tiny
    "tanh": [0.55, 9.0, 1e-3],
    "erf": [0.5, 0.7501094, 1.0, 2.0, 3.9, 4.0],
}


@pytest.mark.parametrize("name", ["expm1", "tanh", "erf"])
def test_monotonic_and_accurate_across_the_seams(name):
    for center in SEAMS[name]:
        for sign in (np.uint32(0), np.uint32(0x80000000)):
            bits = consecutive(center) | sign
            values = as_float(getattr(fp32math, name)(bits))
            ordered = values[::-1] if sign else values  # increasing inputs
            assert np.all(np.diff(ordered) >= 0), (name, center, sign)
            _, errors = ulp_errors(name, bits)
            assert errors.max() < ULP_BOUND, (name, center, sign, errors.max())


def test_special_values():
    inf, nan = np.inf, np.nan
    x = fp32_bits([0.0, -0.0, inf, -inf, nan, 1e-40, -1e-40, 3e38, -3e38])
    expm1, tanh, erf = (as_float(f(x)) for f in (fp32math.expm1, fp32math.tanh, fp32math.erf))
    for values in (expm1, tanh, erf):
        assert np.signbit(values[:2]).tolist() == [False, True] and np.all(values[:2] == 0)  # signed zeros kept
        assert np.isnan(values[4])
    assert expm1[2:4].tolist() == [inf, -1.0] and expm1[7:].tolist() == [inf, -1.0]
    assert tanh[2:4].tolist() == [1.0, -1.0] and tanh[7:].tolist() == [1.0, -1.0]
    assert erf[2:4].tolist() == [1.0, -1.0] and erf[7:].tolist() == [1.0, -1.0]
    # Subnormal inputs: expm1(x) = tanh(x) = x; erf(x) = 2x/sqrt(pi) to within 0.51 of the spacing
    # 2**-149 (the FP32 coefficient 2/sqrt(pi) - 1 is not exact: a few exact values just past a
    # midpoint round down).
    subnormals = np.arange(1, 1 << 23, 4099, dtype=np.uint32)
    assert np.array_equal(fp32math.expm1(subnormals), subnormals)
    assert np.array_equal(fp32math.tanh(subnormals), subnormals)
    exact = as_float(subnormals) * (2 / math.sqrt(math.pi)) * 2.0**149  # in units of 2**-149
    assert np.abs(as_float(fp32math.erf(subnormals)) * 2.0**149 - exact).max() < 0.51


def test_odd_functions_are_odd_to_the_bit():
    bits = np.random.default_rng(1).integers(0, 1 << 31, 20000, dtype=np.uint64).astype(np.uint32)
    for function in (fp32math.tanh, fp32math.erf):
        positive, negative = function(bits), function(bits | np.uint32(0x80000000))
        nan = np.isnan(as_float(positive))
        assert np.array_equal(negative[~nan], positive[~nan] | np.uint32(0x80000000))


def test_constants_are_what_the_docstring_says():
    assert as_float(fp32math.TANH_TAYLOR[-1]) == np.float32(-1 / 3)
    assert as_float(fp32math.TANH_TAYLOR[0]) == np.float32(-443861162 / 1856156927625)  # a**19
    assert as_float(fp32math.ERF_TAYLOR[-1]) == np.float32(2 / math.sqrt(math.pi) - 1)
    center, value = as_float(fp32math.ERF_CENTER), as_float(fp32math.ERF_CENTER_VALUE)
    assert abs(math.erf(float(center)) - float(value)) < 2e-12 and abs(center - 0.75) < 1e-3


def test_the_same_steps_driven_by_torch_give_the_same_bits():
    """The algorithms use only the Fp32Arithmetic protocol: torch's correctly rounded FP32 ops (and
    an FP64 round-to-odd fma) give the emulator's bits exactly."""
    torch = pytest.importorskip("torch")
    from sim.crosscheck.torch_exact import TorchFp32

    bits = sample()[::4].copy()
    tensor = torch.from_numpy(bits.view(np.int32)).view(torch.float32)
    for name in ("expm1", "tanh", "erf"):
        driven = getattr(fp32math, name + "_steps")(tensor, TorchFp32(tensor.device))
        assert np.array_equal(driven.view(torch.int32).numpy().view(np.uint32), getattr(fp32math, name)(bits)), name
    exponents = np.random.default_rng(3).permutation(bits)
    driven = fp32math.pow_steps(tensor, torch.from_numpy(exponents.view(np.int32)).view(torch.float32),
                                TorchFp32(tensor.device))
    assert np.array_equal(driven.view(torch.int32).numpy().view(np.uint32), fp32math.pow(bits, exponents))


def pow_errors(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Error of fp32math.pow in FP32 ulps of float64 pow, where that is finite and nonzero."""
    x, y = np.asarray(x, np.float32), np.asarray(y, np.float32)
    got = as_float(fp32math.pow(x.view(np.uint32), y.view(np.uint32)))
    with np.errstate(all="ignore"):
        exact = np.power(x.astype(np.float64), y.astype(np.float64))
    keep = np.isfinite(exact) & (exact != 0) & (np.abs(exact) < 2.0**128 * (1 - 2.0**-25))
    ulp = np.exp2(np.maximum(np.floor(np.log2(np.abs(exact[keep]))) - 23, -149))
    return np.abs(got[keep] - exact[keep]) / ulp


def test_pow_error_below_one_ulp():
    rng = np.random.default_rng(2)
    n = 20000
    families = {
        "wide": (np.exp(rng.uniform(-80, 80, n)), rng.uniform(-10, 10, n)),
        "x near 1, large y": (1 + rng.uniform(-1e-3, 1e-3, n), rng.uniform(-8e4, 8e4, n)),
        "y * log x up to 100": (rng.uniform(0.5, 2, n), rng.uniform(-100, 100, n)),
        "negative x, integer y": (-np.exp(rng.uniform(-5, 5, n)), rng.integers(-30, 30, n)),
    }
    x = rng.uniform(0.1, 0.9, n)
    families["subnormal results"] = (x, np.log(rng.uniform(2.0**-149, 2.0**-126, n)) / np.log(x))
    for name, (x, y) in families.items():
        errors = pow_errors(x, y)
        assert errors.size > n // 2 and errors.max() < ULP_BOUND, (name, errors.max())


def test_pow_special_cases_are_c99s():
    """On every pair of special and ordinary values: NaN where C99 pow is NaN, the same infinities,
    zeros (with their signs) and exact results; within an ulp elsewhere (numpy's float32 power is
    the C library's powf)."""
    values = np.array([0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 2.0, -2.0, 3.0, -3.0, np.inf, -np.inf, np.nan, 1e-45,
                       -1e-45, 3e38, -3e38, 0.3, -7.0, 2.5, -2.5, 16777216.0, -16777217.0, 8388609.0], np.float32)
    x, y = np.meshgrid(values, values, indexing="ij")
    with np.errstate(all="ignore"):
        want = np.power(x, y)
    got = fp32math.pow(x.view(np.uint32), y.view(np.uint32)).view(np.float32)
    assert np.array_equal(np.isnan(got), np.isnan(want))
    special = ~np.isfinite(want) | (want == 0) | (np.abs(want) == 1)
    assert np.array_equal(got[special & ~np.isnan(want)].view(np.uint32), want[special & ~np.isnan(want)].view(
        np.uint32))
    ordinary = ~special
    assert np.all(np.abs(got[ordinary].astype(np.float64) - want[ordinary]) <= np.spacing(np.abs(want[ordinary])))
    one = np.uint32(0x3F800000)
    nan = fp32_bits([np.nan])
    assert fp32math.pow(nan, fp32_bits([0.0]))[0] == one and fp32math.pow(one, nan)[0] == one
