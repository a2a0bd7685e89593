"""sim.fp32math.exp/log against math.exp/math.log (float64), in FP32 ulps, and monotonicity.

Stated bound: |result - exact| <= 1 ulp of FP32 at the exact value (subnormal results: 1 ulp of
the subnormal spacing, 2**-149), for every finite input whose result is finite and nonzero.
"""
from __future__ import annotations

import math

import numpy as np
import pytest

from sim import fp32math

ULP_BOUND = 1.0


def fp32_bits(x) -> np.ndarray:
    return np.asarray(x, dtype=np.float32).view(np.uint32)


def as_float(bits: np.ndarray) -> np.ndarray:
    return np.asarray(bits, dtype=np.uint32).view(np.float32).astype(np.float64)


def ulp_errors(bits: np.ndarray, inputs: np.ndarray, reference) -> np.ndarray:
    """Error of each result in FP32 ulps of the float64 reference value (double rounding of the
    reference adds at most 2**-29 ulp, far below the bound)."""
    got = as_float(bits)
    exact = np.array([reference(float(x)) for x in inputs.astype(np.float64)])
    # Beyond FP32's largest value plus half an ulp the right answer is inf (checked elsewhere).
    keep = np.isfinite(exact) & (exact != 0) & (np.abs(exact) < 2.0**128 * (1 - 2.0**-25))
    exponent = np.floor(np.log2(np.abs(exact[keep])))
    ulp = np.exp2(np.maximum(exponent - 23, -149))
    return np.abs(got[keep] - exact[keep]) / ulp


def test_exp_within_bound():
    rng = np.random.default_rng(0)
    inputs = np.concatenate([
        rng.uniform(-103.9, 88.7, 40000),  # the whole range, subnormal results included
        rng.uniform(-1, 1, 10000),
        rng.uniform(-1e-3, 1e-3, 2000),
        np.arange(-149, 128) * math.log(2.0),  # the range-reduction seams
        (np.arange(-149, 127) + 0.5) * math.log(2.0),
    ]).astype(np.float32)
    errors = ulp_errors(fp32math.exp(fp32_bits(inputs)), inputs, math.exp)
    assert errors.max() <= ULP_BOUND, errors.max()


def test_log_within_bound():
    rng = np.random.default_rng(1)
    inputs = np.concatenate([
        np.exp(rng.uniform(-103, 88, 40000)),
        rng.uniform(0.5, 2.0, 10000),  # around 1, where log is small and cancellation looms
        np.sqrt(2.0) * (1 + rng.uniform(-1e-3, 1e-3, 2000)),  # the significand split point
        np.exp2(np.arange(-126, 128)),
    ]).astype(np.float32)
    subnormals = (rng.integers(1, 1 << 23, 2000)).astype(np.uint32).view(np.float32)
    inputs = np.concatenate([inputs, subnormals])
    errors = ulp_errors(fp32math.log(fp32_bits(inputs)), inputs, math.log)
    assert errors.max() <= ULP_BOUND, errors.max()


def consecutive(center: float, count: int) -> np.ndarray:
    """``count`` consecutive FP32 bit patterns (all positive, or all negative) around ``center``."""
    start = int(fp32_bits(np.float32(center))) - count // 2
    return np.arange(start, start + count, dtype=np.int64).astype(np.uint32)


def increasing(bits: np.ndarray) -> np.ndarray:
    """Consecutive patterns ordered by value (negative patterns count down)."""
    return bits[::-1] if bits[0] >> 31 else bits


@pytest.mark.parametrize("center", [0.0, 2.0**-20, -0.5, 0.34657, 1.0, -10.0, 44.0, 88.5, -87.3, -100.0])
def test_exp_monotonic(center):
    if center == 0.0:  # across zero: -20000 ulps .. -0, then +0 .. +20000 ulps
        negative = np.arange(19999, -1, -1, dtype=np.uint32) | np.uint32(0x80000000)
        bits = np.concatenate([negative, np.arange(20001, dtype=np.uint32)])
    else:
        bits = increasing(consecutive(center, 40001))
    values = as_float(fp32math.exp(bits))
    assert np.all(np.diff(values) >= 0)


@pytest.mark.parametrize("center", [2.0**-130, 1e-30, 0.5, 1.0, 1.41421356, 2.0, 3e7, 3e38])
def test_log_monotonic(center):
    values = as_float(fp32math.log(consecutive(center, 40001)))
    assert np.all(np.diff(values) >= 0)


def test_special_values():
    specials = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, 89.0, -104.0], np.float32)
    e = as_float(fp32math.exp(fp32_bits(specials)))
    assert np.isnan(e[0]) and e[1] == np.inf and e[2] == 0.0 and e[3] == e[4] == 1.0
    assert e[6] == np.inf and e[7] == 0.0
    log_inputs = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, -2.0**-149], np.float32)
    lg = as_float(fp32math.log(fp32_bits(log_inputs)))
    assert np.isnan(lg[0]) and lg[1] == np.inf and np.isnan(lg[2])
    assert lg[3] == lg[4] == -np.inf and lg[5] == 0.0 and np.isnan(lg[6]) and np.isnan(lg[7])


def test_scalars_and_shapes():
    assert as_float(fp32math.exp(fp32_bits(np.float32(0.0)))) == 1.0
    grid = fp32_bits(np.ones((2, 3), np.float32))
    assert fp32math.log(grid).shape == (2, 3)
