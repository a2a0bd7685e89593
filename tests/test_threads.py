"""Threads change nothing but speed: bits and flags are the same for 1, 2 and 3 threads, at every
split (runs that end inside a fast block, the last run shorter), for every kind of loop."""
from __future__ import annotations

import numba
import numpy as np
import pytest

import softfloat16 as sf
import softfloat16.threads as threads


@pytest.fixture
def small_split(monkeypatch):
    """Split from 1,000 elements on, so that the tests stay small and still cut arrays in runs."""
    monkeypatch.setattr(threads, "PARALLEL_MIN_ELEMENTS", 1000)
    yield
    sf.set_num_threads(None)


def _operands(rng: np.random.Generator, n: int):
    special = np.float32([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45, -3e-39, 3.4e38])
    with np.errstate(over="ignore"):  # magnitudes beyond FP32 become inf: wanted
        spread = [rng.standard_normal(n) * 2.0 ** rng.integers(-130, 130, n) for _ in range(3)]
        values = [np.where(rng.random(n) < 0.05, rng.choice(special, n), x).astype(np.float32).view(np.uint32)
                  for x in spread]
    halves = rng.integers(0, 1 << 16, n).astype(np.uint16)
    bytes_ = [rng.integers(0, 256, n).astype(np.uint8) for _ in range(2)]
    return values, halves, bytes_


CASES = {
    "fp32 add (fast loop)": lambda v, h, b: sf.fp32.add(v[0], v[1], flags=True),
    "fp32 mul rtz ftz": lambda v, h, b: sf.fp32.mul(v[0], v[1], rounding="rtz", ftz=True, flags=True),
    "fp32 div": lambda v, h, b: sf.fp32.div(v[0], v[1], flags=True),
    "fp32 fma rup": lambda v, h, b: sf.fp32.fma(v[0], v[1], v[2], rounding="rup", flags=True),
    "fp32 add sr (seeded stream)": lambda v, h, b: sf.fp32.add(v[0], v[1], rounding="sr", seed=9, flags=True),
    "bf16 convert sr": lambda v, h, b: sf.convert(v[0], sf.fp32, sf.bf16, rounding="sr", seed=3, flags=True),
    "fp16 sqrt (table)": lambda v, h, b: sf.fp16.sqrt(h, flags=True),
    "fp8 mul (pair table)": lambda v, h, b: sf.fp8_e4m3fn.mul(b[0], b[1], saturate=True, flags=True),
    "fp32 lt": lambda v, h, b: (sf.fp32.lt(v[0], v[1]), np.zeros(0)),
}


@pytest.mark.parametrize("name", CASES)
@pytest.mark.parametrize("n", [1000, 1257, 4099])
def test_every_thread_count_gives_the_same_bits_and_flags(small_split, name, n):
    values, halves, bytes_ = _operands(np.random.default_rng(n), n)
    results = []
    for count in (1, 2, 3):
        sf.set_num_threads(count)
        results.append(CASES[name](values, halves, bytes_))
    for out, flags in results[1:]:
        np.testing.assert_array_equal(out, results[0][0])
        np.testing.assert_array_equal(flags, results[0][1])


def test_runs_cover_the_array_once(small_split):
    sf.set_num_threads(3)
    seen = np.zeros(5000, np.int64)

    def work(start, stop):
        seen[start:stop] += 1
        assert start % 256 == 0

    threads.run_split(5000, work)
    assert (seen == 1).all()


def test_errors_in_a_thread_reach_the_caller(small_split):
    sf.set_num_threads(2)

    def work(start, stop):
        if start:
            raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        threads.run_split(4096, work)


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "2"])
def test_a_bad_thread_count_is_refused(bad):
    with pytest.raises(ValueError, match="threads"):
        sf.set_num_threads(bad)


def test_matmul_is_the_same_on_one_and_two_threads():
    rng = np.random.default_rng(1)
    a = sf.fp16.from_float(rng.standard_normal((160, 128)))
    b = sf.fp16.from_float(rng.standard_normal((128, 96)))
    try:
        results = []
        for count in (1, 2):
            sf.set_num_threads(count)
            results.append([sf.linalg.matmul(a, b, sf.fp16, out_format=sf.fp32, order=order)
                            for order in ("sequential", "pairwise", "tensorcore")])
    finally:
        sf.set_num_threads(None)
    for one, two in zip(*results):
        np.testing.assert_array_equal(one, two)


@pytest.mark.skipif(numba.config.NUMBA_NUM_THREADS < 2, reason="Numba can start one thread only")
def test_none_gives_numba_its_own_count_back():
    """set_num_threads(None) after a count has run in parallel: Numba's count from before, not the
    last one set (which left later parallel code, and tests that skip on one thread, on one)."""
    sf.set_num_threads(None)
    threads.numba_threads()  # (gives back a count set by an earlier test)
    own = numba.get_num_threads()
    try:
        numba.set_num_threads(2)
        sf.set_num_threads(1)
        assert threads.numba_threads() == 1
        sf.set_num_threads(None)
        assert sf.get_num_threads() == 2
        assert threads.numba_threads() == 2 and numba.get_num_threads() == 2
    finally:
        sf.set_num_threads(None)
        threads.numba_threads()
        numba.set_num_threads(own)
