"""Threads: the core's elementwise operations and linalg.matmul on 1 thread and on more.

    python bench/threads.py [--n 4194304] [--repeat 7] [--threads 2]

- Per operation: best time of one call on 1 thread and on --threads threads
  (``sf.set_num_threads``), measured in turns so that a noisy neighbour slows both alike, and the
  speedup. Target: >= 1.7x with 2 threads on 2^22-element arrays and on the
  (256x256) @ (256x256) matmul.
- Where splitting starts to pay: fp32 add at sizes 2^12 to 2^20 with the size threshold lifted,
  1 thread against --threads, to check ``softfloat16.threads.PARALLEL_MIN_ELEMENTS``.
- A memory-bandwidth bound: numpy float32 ``np.add(x, y, out=z)`` over the same arrays (numpy runs
  on one thread), for what an elementwise pass must at least cost.

Results and flags are the same for every thread count (tests/test_threads.py); only time differs.
"""
from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("NUMBA_NUM_THREADS", str(os.cpu_count() or 1))

import numpy as np  # noqa: E402

import softfloat16 as sf  # noqa: E402
import softfloat16.linalg as linalg  # noqa: E402
from softfloat16 import threads  # noqa: E402
from machine import describe_machine  # noqa: E402  (bench/machine.py, beside this script)

TARGET = 1.7  # the speedup to reach with 2 threads


def best_by_threads(fn, counts, repeat):
    """thread count -> best seconds of fn(), the counts taking turns."""
    best = dict.fromkeys(counts, float("inf"))
    for count in counts:  # warm up: compile or load, page in, start the pool
        sf.set_num_threads(count)
        fn()
    for _ in range(repeat):
        for count in counts:
            sf.set_num_threads(count)
            start = time.perf_counter()
            fn()
            best[count] = min(best[count], time.perf_counter() - start)
    sf.set_num_threads(None)
    return best


def operations(n):
    """name -> callable: the elementwise operations on n elements and the matmuls."""
    rng = np.random.default_rng(0)
    values = [rng.standard_normal(n) * np.exp2(rng.integers(-8, 8, n)) for _ in range(3)]
    x32, y32, z32 = (sf.fp32.from_float(v) for v in values)
    x16, y16 = (sf.fp16.from_float(v) for v in values[:2])
    a16 = sf.fp16.from_float(rng.standard_normal((256, 256)))
    b16 = sf.fp16.from_float(rng.standard_normal((256, 256)))
    return {
        "fp32 add": lambda: sf.fp32.add(x32, y32),
        "fp32 mul": lambda: sf.fp32.mul(x32, y32),
        "fp32 div": lambda: sf.fp32.div(x32, y32),
        "fp32 fma": lambda: sf.fp32.fma(x32, y32, z32),
        "fp32 add, flags": lambda: sf.fp32.add(x32, y32, flags=True),
        "fp32 add, rtz": lambda: sf.fp32.add(x32, y32, rounding="rtz"),
        "fp32 add, stochastic rounding (seeded)": lambda: sf.fp32.add(x32, y32, rounding="sr", seed=1),
        "fp16 add": lambda: sf.fp16.add(x16, y16),
        "fp16 mul": lambda: sf.fp16.mul(x16, y16),
        "matmul fp16 (256x256) @ (256x256), sequential, FP32 accumulation":
            lambda: linalg.matmul(a16, b16, sf.fp16),
        "matmul fp16 (256x256) @ (256x256), pairwise": lambda: linalg.matmul(a16, b16, sf.fp16, order="pairwise"),
        "matmul fp16 (256x256) @ (256x256), tensorcore (h100)":
            lambda: linalg.matmul(a16, b16, sf.fp16, out_format=sf.fp32, order="tensorcore"),
    }


def crossover(counts, repeat):
    """fp32 add at growing sizes, splitting from any size: (n, {count: seconds})."""
    rows = []
    saved = threads.PARALLEL_MIN_ELEMENTS
    threads.PARALLEL_MIN_ELEMENTS = 0
    try:
        for log in range(12, 21, 2):
            n = 1 << log
            x, y = (sf.fp32.from_float(np.random.default_rng(log + k).standard_normal(n)) for k in range(2))
            rows.append((n, best_by_threads(lambda x=x, y=y: sf.fp32.add(x, y), counts, repeat * 5)))
    finally:
        threads.PARALLEL_MIN_ELEMENTS = saved
    return rows


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=1 << 22)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args(argv)
    if args.threads > int(os.environ["NUMBA_NUM_THREADS"]):
        parser.error(f"--threads {args.threads}: NUMBA_NUM_THREADS is {os.environ['NUMBA_NUM_THREADS']}")
    counts = (1, args.threads)
    print(describe_machine() + "\n")
    print(f"| operation ({args.n:,} elements) | 1 thread | {args.threads} threads | speedup | target |")
    print("|---|---:|---:|---:|---|")
    for name, fn in operations(args.n).items():
        best = best_by_threads(fn, counts, args.repeat)
        speedup = best[1] / best[args.threads]
        target = f">= {TARGET}x: {'met' if speedup >= TARGET else 'MISSED'}" if args.threads == 2 else ""
        print(f"| {name} | {best[1] * 1e3:.2f} ms | {best[args.threads] * 1e3:.2f} ms | {speedup:.2f}x | {target} |")

    x, y = (np.random.default_rng(k).standard_normal(args.n).astype(np.float32) for k in range(2))
    z = np.empty_like(x)
    seconds = min(_timed(lambda: np.add(x, y, out=z)) for _ in range(args.repeat * 3))
    print(f"\nnumpy float32 np.add(x, y, out=z) on {args.n:,} elements (one thread, 12 bytes an element): "
          f"{seconds * 1e3:.2f} ms = {12 * args.n / seconds / 1e9:.1f} GB/s")

    print(f"\nfp32 add, any size split (threshold lifted; in use from {threads.PARALLEL_MIN_ELEMENTS:,} elements):\n")
    print(f"| elements | 1 thread | {args.threads} threads | speedup |")
    print("|---:|---:|---:|---:|")
    for n, best in crossover(counts, args.repeat):
        one, more = best[1], best[args.threads]
        print(f"| {n:,} | {one * 1e6:.1f} us | {more * 1e6:.1f} us | {one / more:.2f}x |")


def _timed(fn):
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


if __name__ == "__main__":
    main()
