"""softfloat16.linalg.sum on the host's arithmetic (softfloat16.host_gemm.sums: the GEMM kernels of
_kernels/hardware.py with a row of ones) against the exact reduction kernels (the reference
implementation: the host route switched off), and against numpy's own float32 additions."""
import numpy as np
import pytest

import softfloat16 as sf
from softfloat16 import host_gemm

SHAPES = ((32, 1), (33, 2), (40, 17), (70, 300))


def exact(x, fmt, monkeypatch, **options):
    with monkeypatch.context() as patch:
        patch.setattr(host_gemm, "sums", lambda *args: None)
        return sf.linalg.sum(x, fmt, **options)


def patterns(rng, fmt, shape, finite):
    """Moderate values over many binades (sums that round, subnormal sums) and uniformly random
    patterns (NaN, infinities, overflow), or only the finite ones."""
    moderate = fmt.from_float(rng.standard_normal(shape) * 2.0 ** rng.integers(-30, 10, shape))
    wild = rng.integers(0, 1 << fmt.width, shape, dtype=np.uint64).astype(fmt.dtype)
    if finite:
        wild = np.where(np.asarray(fmt.is_finite(wild)), wild, fmt.dtype(0))
    return np.where(rng.random(shape) < 0.5, moderate, wild)


CASES = [(f, "fp32", r) for f in ("fp16", "bf16", "fp32") for r in ("rne", "rtz", "rdn")] + [
    ("fp16", "fp32", "rna"), ("fp16", "fp16", "rne"), ("bf16", "bf16", "rup"), ("fp32", "fp32", "rod")]


@pytest.mark.parametrize("fmt, accumulate, rounding", CASES)
@pytest.mark.parametrize("order", ["sequential", "pairwise"])
def test_host_sums_give_the_exact_kernels_bits(fmt, accumulate, rounding, order, monkeypatch):
    fmt = sf.format(fmt)
    for m, k in SHAPES:
        rng = np.random.default_rng([m, k, fmt.width, len(rounding), len(order)])
        for finite in (True, False):
            rows = patterns(rng, fmt, (m, k), finite)
            for x, axis in ((rows, -1), (np.ascontiguousarray(rows.T), 0), (rows.reshape(m, 1, k), (1, 2))):
                options = dict(axis=axis, accumulate=accumulate, order=order, rounding=rounding, out_format="fp32")
                got = sf.linalg.sum(x, fmt, **options)
                want = exact(x, fmt, monkeypatch, **options)
                assert np.array_equal(got, want), (fmt.name, m, k, finite, axis, np.flatnonzero(got != want)[:5])
        # the host route itself ran (finite terms: every mode; NaN and infinities take it only
        # where the host rounds FP32 sums itself)
        rows = patterns(rng, fmt, (m, k), True)
        assert host_gemm.sums(rows, fmt, sf.format(accumulate), order, int(sf.Rounding[rounding.upper()])) is not None


def test_numpy_float32_sums_of_columns():
    """FP32 accumulation in the sequential order of a (k, m) array along axis 0 is numpy's own
    float32 additions of the rows, one at a time from +0 (an oracle sharing nothing with the
    kernels)."""
    rng = np.random.default_rng(3)
    x = (rng.standard_normal((500, 96)) * 2.0 ** rng.integers(-20, 20, (500, 96))).astype(np.float32)
    acc = np.zeros(96, np.float32)
    for row in x:
        acc = acc + row
    assert host_gemm.sums(x.view(np.uint32), sf.fp32, sf.fp32, "sequential", 0, columns=True) is not None
    assert np.array_equal(sf.linalg.sum(x, sf.fp32, axis=0), acc.view(np.uint32))
    y = (rng.standard_normal((500, 96)) * 2.0 ** rng.integers(-24, 8, (500, 96))).astype(np.float16)
    acc = np.zeros(96, np.float32)
    for row in y:
        acc = acc + row.astype(np.float32)
    assert np.array_equal(sf.linalg.sum(y, sf.fp16, axis=0, out_format=sf.fp32), acc.view(np.uint32))


def exact_dot(a, b, fmt, monkeypatch, **options):
    with monkeypatch.context() as patch:
        patch.setattr(host_gemm, "dots", lambda *args: None)
        return sf.linalg.dot(a, b, fmt, **options)


@pytest.mark.parametrize("fmt, b_format, accumulate, rounding", [
    ("fp16", "fp16", "fp32", "rne"), ("bf16", "bf16", "fp32", "rtz"), ("fp8_e4m3fn", "fp8_e5m2", "fp32", "rne"),
    ("fp16", "fp16", "fp16", "rna"), ("bf16", "bf16", "bf16", "rne"), ("fp32", "fp32", "fp32", "rne")])
@pytest.mark.parametrize("order", ["sequential", "pairwise"])
def test_host_dots_give_the_exact_kernels_bits(fmt, b_format, accumulate, rounding, order, monkeypatch):
    """Products that are binary32 values (fp32 x fp32 ones are not: the exact kernels), subnormal
    and overflowing ones from BF16's range (decided from the operands), NaN and infinities;
    broadcast leading axes."""
    fmt, b_format = sf.format(fmt), sf.format(b_format)
    for m, k in SHAPES:
        rng = np.random.default_rng([m, k, fmt.width, b_format.width, len(order)])
        for finite in (True, False):
            a, b = patterns(rng, fmt, (m, k), finite), patterns(rng, b_format, (m, k), finite)
            for x, y in ((a, b), (a, b[:1])):
                options = dict(accumulate=accumulate, order=order, rounding=rounding, out_format="fp32",
                               b_format=b_format)
                got = sf.linalg.dot(x, y, fmt, **options)
                want = exact_dot(x, y, fmt, monkeypatch, **options)
                assert np.array_equal(got, want), (fmt.name, m, k, finite, np.flatnonzero(got != want)[:5])
    small = (fmt.from_float(np.full((40, 8), 0.5)), b_format.from_float(np.full((40, 8), 0.25)))
    ran = host_gemm.dots(*small, fmt, b_format, sf.format(accumulate), order, int(sf.Rounding[rounding.upper()]))
    assert (ran is not None) == (fmt is not sf.fp32)
