"""Throughput of softfloat16.mma.mma (GPU matrix-unit instructions, bit for bit) on 1 and 2
threads, against MMA-Sim (the mmasim package, when installed) in the same run.

    python bench/mma.py [--quick] [--repeat 2] [--only WORD]

- One representative preset per (arch, instruction, input type, scale type, adder) group (the first
  whose A and B types are the same, preferring FP32 output): presets of a group differ only in
  shape or in the other operand's type, which costs the same.
- softfloat16: a 256x256x4096 GEMM (``--quick``: 128x128x1024), chained over K one instruction k at
  a time, operands of the "near_one" kind of ``mma_reference.random_operands``; best of ``--repeat``
  calls on 1 thread and on 2 (``sf.set_num_threads``, applied to Numba), in turns, after a warm-up
  call on a small slice (which compiles, or loads from Numba's cache). The output's SHA-256 is
  compared between the thread counts: the bits must be identical.
- MMA-Sim: its batched ``dpa`` as ``mma_reference.mmasim_gemm`` runs it, on 4096 dot products
  (64x64; ``--quick``: 1024, 32x32) chained over K = 4096 (``--quick``: 1024) one instruction k
  at a time, on one torch thread, timed once after a warm-up. "agree": its bits equal
  softfloat16's on that smaller problem.

Every rate is G MAC/s (multiply-adds per second: M*N*K / time); "ratio" is softfloat16 on 1 thread
over MMA-Sim on 1 thread.
"""
from __future__ import annotations

import argparse
import hashlib
import os
import time

os.environ.setdefault("NUMBA_NUM_THREADS", str(max(2, os.cpu_count() or 1)))

import numpy as np  # noqa: E402

import softfloat16 as sf  # noqa: E402
from softfloat16 import mma_reference  # noqa: E402
from softfloat16.mma_presets import PRESETS, Preset  # noqa: E402
from softfloat16.threads import numba_threads  # noqa: E402
from machine import describe_machine  # noqa: E402  (bench/machine.py, beside this script)

THREADS = (1, 2)
SHAPES = {False: ((256, 256, 4096), (64, 64, 4096)), True: ((128, 128, 1024), (32, 32, 1024))}


def representatives(words=()) -> list[Preset]:
    """One preset per (arch, instruction, A type, scale type, adder): the first with A's type equal to B's
    and FP32 output if there is one, else the first. ``words``: keep the names containing every one."""
    groups: dict[tuple, list[Preset]] = {}
    for p in PRESETS.values():
        if all(w in p.name for w in words):
            groups.setdefault((p.arch, p.instruction, p.a, p.scale, p.model.adder), []).append(p)
    return [min(group, key=lambda p: (p.a != p.b, p.d != "fp32")) for group in groups.values()]


def operands(p: Preset, rows: int, cols: int, k: int) -> tuple:
    return mma_reference.random_operands(p, rows, cols, k, "near_one", seed=0)


def run_ours(p: Preset, ops: tuple) -> np.ndarray:
    a, b, c, sa, sb = ops
    return sf.mma.mma(a, b, c, p, scale_a=sa, scale_b=sb)


def slice_of(p: Preset, ops: tuple, rows: int, cols: int, k: int) -> tuple:
    """The top-left rows x cols of the problem over its first k products (k a multiple of p.k)."""
    a, b, c, sa, sb = ops
    scales = (None, None) if sa is None else (sa[:rows, :k // p.block], sb[:k // p.block, :cols])
    return (a[:rows, :k], b[:k, :cols], c[:rows, :cols], *scales)


def bench_ours(p: Preset, shape: tuple[int, int, int], repeat: int) -> tuple[dict, dict]:
    """(thread count -> best seconds, thread count -> SHA-256 of D's bits), the counts in turns."""
    ops = operands(p, *shape)
    warm = slice_of(p, ops, 4, 4, p.k)
    best, digests = dict.fromkeys(THREADS, float("inf")), {}
    for count in THREADS:
        sf.set_num_threads(count)
        numba_threads()
        run_ours(p, warm)
    for _ in range(repeat):
        for count in THREADS:
            sf.set_num_threads(count)
            numba_threads()  # softfloat16.mma runs its rows on Numba's threads: apply the count to them
            start = time.perf_counter()
            d = run_ours(p, ops)
            best[count] = min(best[count], time.perf_counter() - start)
            digests[count] = hashlib.sha256(d.tobytes()).hexdigest()
    sf.set_num_threads(None)
    return best, digests


def bench_mmasim(p: Preset, shape: tuple[int, int, int]) -> tuple[float, bool]:
    """(MMA-Sim's seconds for the problem, whether its bits equal softfloat16's)."""
    ops = operands(p, *shape)
    mma_reference.mmasim_gemm(p, *slice_of(p, ops, 2, 2, p.k))  # warm-up: builds the instruction's tables
    start = time.perf_counter()
    theirs = mma_reference.mmasim_gemm(p, *ops)
    seconds = time.perf_counter() - start
    return seconds, bool(np.array_equal(run_ours(p, ops).astype(np.int64), theirs))


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="smaller problems (128x128x1024, MMA-Sim 1024 dots)")
    parser.add_argument("--repeat", type=int, default=2, help="softfloat16 calls per thread count (best is kept)")
    parser.add_argument("--only", action="append", default=[], metavar="WORD",
                        help="only the presets whose name contains WORD (repeatable: every WORD)")
    args = parser.parse_args(argv)
    ours_shape, sim_shape = SHAPES[args.quick]
    presets = representatives(args.only)
    if not presets:
        parser.error(f"--only: no preset name contains {' and '.join(args.only)}")
    missing = mma_reference.mmasim_missing()
    if missing is None:
        import torch
        torch.set_num_threads(1)
    threads = {}
    for count in THREADS:  # what Numba really runs: NUMBA_NUM_THREADS caps it
        sf.set_num_threads(count)
        threads[count] = numba_threads()
    sf.set_num_threads(None)
    print(describe_machine() + "\n")
    m, n, k = ours_shape
    print(f"softfloat16.mma.mma: {m}x{n}x{k} GEMM, best of {args.repeat}, on {threads[1]} and {threads[2]} "
          "Numba threads")
    if missing is None:
        print(f"MMA-Sim: {sim_shape[0] * sim_shape[1]} dot products, K = {sim_shape[2]}, one torch thread")
    else:
        print(f"MMA-Sim: not measured ({missing}; pip install -e \".[crosscheck]\" installs it)")
    print(f"{'preset':74s} {'1 thread':>9s} {'2 threads':>9s} {'x':>5s} {'bits':>9s} {'MMA-Sim':>9s} "
          f"{'ratio':>6s} {'agree':>5s}   (G MAC/s)")
    macs = m * n * k
    speedups, ratios, differ = [], [], []
    for p in presets:
        best, digests = bench_ours(p, ours_shape, args.repeat)
        rate = {count: macs / best[count] / 1e9 for count in THREADS}
        same = len(set(digests.values())) == 1
        if not same:
            differ.append(p.name)
        speedups.append(rate[2] / rate[1])
        row = (f"{p.name:74s} {rate[1]:9.4f} {rate[2]:9.4f} {rate[2] / rate[1]:5.2f} "
               f"{'identical' if same else 'DIFFER':>9s}")
        if missing is None:
            seconds, agree = bench_mmasim(p, sim_shape)
            sim_rate = sim_shape[0] * sim_shape[1] * sim_shape[2] / seconds / 1e9
            ratios.append(rate[1] / sim_rate)
            row += f" {sim_rate:9.4f} {rate[1] / sim_rate:6.1f} {'yes' if agree else 'NO':>5s}"
        print(row, flush=True)
    summary = (f"\n{len(presets)} presets: 2 threads over 1, median {np.median(speedups):.2f}x "
               f"(min {min(speedups):.2f}x); 1-thread and 2-thread bits "
               + ("identical for every preset" if not differ else f"DIFFER for {', '.join(differ)}"))
    if ratios:
        summary += (f"; softfloat16 (1 thread) over MMA-Sim: median {np.median(ratios):.1f}x "
                    f"(min {min(ratios):.1f}x, max {max(ratios):.1f}x)")
    print(summary)


if __name__ == "__main__":
    main()
