"""Throughput of softfloat16.mx.quantize (block-scaled formats), and of torchao's MX quantiser when
torchao is installed, on one thread.

    python bench/mx.py [--n 4194304] [--repeat 5]

The target: mxfp8_e4m3 from 2**22 float32 values (blocks of 32 along the last axis,
scale rule floor, round to nearest even) in at most 3 ns per element. Every figure is ns per
element, best of --repeat after a warm-up call (which compiles, or loads from Numba's cache; its
time is printed too), measured in turns with the other cases. The other formats and options are
listed for comparison.
"""
from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("NUMBA_NUM_THREADS", "1")

import numpy as np  # noqa: E402

import softfloat16.mx as mx  # noqa: E402
from machine import describe_machine  # noqa: E402  (bench/machine.py, beside this script)

TARGET_NS = 3.0
CASES = (  # (label, fmt, keyword arguments)
    ("mxfp8_e4m3", "mxfp8_e4m3", {}),
    ("mxfp8_e4m3 rceil", "mxfp8_e4m3", {"scale_rule": "rceil"}),
    ("mxfp8_e4m3 rtz", "mxfp8_e4m3", {"rounding": "rtz"}),
    ("mxfp8_e4m3 sr (seed)", "mxfp8_e4m3", {"rounding": "sr", "seed": 1}),
    ("mxfp8_e5m2", "mxfp8_e5m2", {}),
    ("mxfp6_e2m3", "mxfp6_e2m3", {}),
    ("mxfp4_e2m1", "mxfp4_e2m1", {}),
    ("mxint8", "mxint8", {}),
    ("nvfp4", "nvfp4", {}),
)


def best_ns(functions: dict, n: int, repeat: int) -> tuple[dict, dict]:
    """(seconds of each function's first call, its best ns per element over ``repeat`` rounds).
    Rounds take every function in turn, so that a noisy neighbour slows all of them alike."""
    first = {}
    for name, function in functions.items():
        start = time.perf_counter()
        function()  # compiles, or loads from Numba's cache
        first[name] = time.perf_counter() - start
    best = dict.fromkeys(functions, float("inf"))
    for _ in range(repeat):
        for name, function in functions.items():
            start = time.perf_counter()
            function()
            best[name] = min(best[name], time.perf_counter() - start)
    return first, {name: seconds / n * 1e9 for name, seconds in best.items()}


def torchao_quantiser(x: np.ndarray):
    """torchao's to_mx on the same values (float8_e4m3fn elements, blocks of 32), or None."""
    try:
        import torch
        from torchao.prototype.mx_formats.mx_tensor import to_mx
    except ImportError:
        return None
    torch.set_num_threads(1)
    tensor = torch.from_numpy(x.reshape(-1, 1024))
    return lambda: to_mx(tensor, torch.float8_e4m3fn, 32)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=1 << 22, help="values quantised per call (a multiple of 1024)")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args(argv)
    rng = np.random.default_rng(0)
    x = (rng.standard_normal(args.n) * np.exp2(rng.integers(-8, 8, args.n))).astype(np.float32)
    functions = {label: (lambda fmt=fmt, options=options: mx.quantize(x, fmt, **options))
                 for label, fmt, options in CASES}
    peer = torchao_quantiser(x)
    if peer is not None:
        functions["torchao to_mx mxfp8_e4m3"] = peer
    first, ns = best_ns(functions, args.n, args.repeat)
    print(describe_machine() + "\n")
    for label in functions:
        note = ""
        if label == "mxfp8_e4m3":
            note = f"   (target <= {TARGET_NS} ns: {'met' if ns[label] <= TARGET_NS else 'MISSED'})"
        owner = "" if label.startswith("torchao") else "softfloat16 "
        print(f"{owner + label:34s} {ns[label]:6.2f} ns/elem   first call {first[label]:5.2f} s{note}")
    if peer is None:
        print("torchao: not installed (pip install torchao to compare with its reference MX quantiser)")

if __name__ == "__main__":
    main()
