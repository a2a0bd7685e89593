"""GEMM speed: sf.linalg.matmul per order and input format against native torch float32 GEMM in the
same run, one thread (and 2 threads at 512^3); then sf.mx.matmul, and sf.linalg.sum against torch.sum.

    python bench/gemm.py [--repeat 5] [--quick] [--only WORD]

Every figure is G MAC/s (M*N*K / best time of ``--repeat`` calls after a warm-up call that compiles
or loads the kernels) and its ratio to torch.matmul on float32 tensors of the same shape, measured
between the emulated calls (``x`` native: how many times the native time the emulator takes).
Operands: N(0, 1) values in the input format, FP32 results (out_format="fp32"), round to nearest
even. The 2-thread rows check that the bits equal the 1-thread ones.
"""
from __future__ import annotations

import argparse
import os

os.environ.setdefault("NUMBA_NUM_THREADS", str(max(2, os.cpu_count() or 1)))

import numpy as np  # noqa: E402
import torch  # noqa: E402

import softfloat16 as sf  # noqa: E402
from machine import best_seconds as best  # noqa: E402  (bench/machine.py, beside this script)
from machine import describe_machine  # noqa: E402

SHAPES = ((256, 256, 256), (128, 768, 768), (512, 1024, 256))
FORMATS = (("fp16", "fp16"), ("bf16", "bf16"), ("fp8_e4m3fn", "fp8_e5m2"), ("fp32", "fp32"))
# (label, linalg.matmul options): the default policy in both orders, the h100 tensor core, a
# directed mode (the host's FMA, MXCSR set), and policies rounded in integers after the host's
# sums (_kernels/twosum.py): ties away from zero, FP16 accumulation in both orders.
POLICIES = (("sequential", {}), ("pairwise", {"order": "pairwise"}), ("tensorcore h100", {"order": "tensorcore"}),
            ("sequential, rtz", {"rounding": "rtz"}), ("sequential, rna", {"rounding": "rna"}),
            ("sequential, fp16 acc.", {"accumulate": "fp16"}),
            ("pairwise, fp16 acc.", {"order": "pairwise", "accumulate": "fp16"}))


def operands(rng, fmt: str, b_fmt: str, m: int, k: int, n: int):
    a = np.asarray(sf.convert(rng.standard_normal((m, k)).astype(np.float32).view(np.uint32), "fp32", fmt))
    b = np.asarray(sf.convert(rng.standard_normal((k, n)).astype(np.float32).view(np.uint32), "fp32", b_fmt))
    return a, b


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="the first shape only, fp16 and fp32")
    parser.add_argument("--only", default="", help="the policies whose label contains WORD (e.g. tensorcore)")
    args = parser.parse_args()
    print(describe_machine())
    torch.set_num_threads(1)
    sf.set_num_threads(1)
    rng = np.random.default_rng(0)
    shapes = SHAPES[:1] if args.quick else SHAPES
    formats = (FORMATS[0], FORMATS[3]) if args.quick else FORMATS
    print("| policy | inputs | " + " | ".join(f"{m}x{k}x{n}" for m, k, n in shapes) + " |")
    print("|---|---|" + "---|" * len(shapes))
    native = {}
    for m, k, n in shapes:
        x, y = torch.randn(m, k), torch.randn(k, n)
        native[(m, k, n)] = best(lambda x=x, y=y: x @ y, args.repeat)
    print("| torch float32 (native) | fp32 | " + " | ".join(
        f"{m * k * n / native[(m, k, n)] / 1e9:.1f}" for m, k, n in shapes) + " |")
    for label, options in POLICIES:
        if args.only not in label:
            continue
        for fmt, b_fmt in formats:
            if label.startswith("tensorcore") and fmt == "fp32":
                continue  # an H100's matrix unit takes no FP32 operands
            cells = []
            for m, k, n in shapes:
                a, b = operands(rng, fmt, b_fmt, m, k, n)
                seconds = best(lambda a=a, b=b, f=fmt, g=b_fmt, o=options: sf.linalg.matmul(
                    a, b, f, b_format=g, out_format="fp32", **o), args.repeat)
                x, y = torch.randn(m, k), torch.randn(k, n)
                native_now = best(lambda x=x, y=y: x @ y, args.repeat)
                cells.append(f"{m * k * n / seconds / 1e9:.2f} ({seconds / native_now:.1f}x)")
            print(f"| {label} | {fmt}{'' if fmt == b_fmt else ' x ' + b_fmt} | " + " | ".join(cells) + " |")
    if args.only:
        return
    # Two threads at 512^3: the speed-up and identical bits.
    a, b = operands(rng, "fp16", "fp16", 512, 512, 512)
    rates, bits = [], []
    for threads in (1, 2):
        sf.set_num_threads(threads)
        bits.append(sf.linalg.matmul(a, b, "fp16", out_format="fp32"))
        rates.append(512**3 / best(lambda: sf.linalg.matmul(a, b, "fp16", out_format="fp32"), args.repeat) / 1e9)
    same = "identical" if np.array_equal(*bits) else "DIFFERENT"
    print(f"\nfp16 sequential 512^3: 1 thread {rates[0]:.2f}, 2 threads {rates[1]:.2f} G MAC/s "
          f"({rates[1] / rates[0]:.2f}x); bits {same}")
    sf.set_num_threads(1)
    block_scaled(rng, shapes, args.repeat)
    sums(rng, args.repeat)


def block_scaled(rng, shapes, repeat: int) -> None:
    """sf.mx.matmul (the exact block dot products, no instruction preset) against torch float32."""
    print("\n| mx.matmul | " + " | ".join(f"{m}x{k}x{n}" for m, k, n in shapes) + " |")
    print("|---|" + "---|" * len(shapes))
    for fmt in ("mxfp8_e4m3", "mxfp6_e2m3", "mxfp4_e2m1", "nvfp4"):
        cells = []
        for m, k, n in shapes:
            a = sf.mx.quantize(rng.standard_normal((m, k)), fmt, axis=1)
            b = sf.mx.quantize(rng.standard_normal((k, n)), fmt, axis=0)
            seconds = best(lambda a=a, b=b: sf.mx.matmul(a, b), repeat)
            x, y = torch.randn(m, k), torch.randn(k, n)
            native_now = best(lambda x=x, y=y: x @ y, repeat)
            cells.append(f"{m * k * n / seconds / 1e9:.2f} ({seconds / native_now:.1f}x)")
        print(f"| {fmt} | " + " | ".join(cells) + " |")


def sums(rng, repeat: int) -> None:
    """sf.linalg.sum of a 1024 x 1024 array along each axis, G adds/s, against torch.sum of float32."""
    x = rng.standard_normal((1024, 1024))
    print("\n| linalg.sum, 1024x1024 | axis -1 | axis 0 |")
    print("|---|---|---|")
    t = torch.from_numpy(x.astype(np.float32))
    print("| torch float32 (native) | " + " | ".join(
        f"{x.size / best(lambda a=a: t.sum(a), repeat) / 1e9:.2f}" for a in (-1, 0)) + " |")
    for fmt in ("fp16", "bf16", "fp32"):
        bits = sf.format(fmt).from_float(x)
        for order in ("sequential", "pairwise"):
            cells = []
            for axis in (-1, 0):
                seconds = best(lambda a=axis, x=bits, f=fmt, o=order: sf.linalg.sum(x, f, axis=a, order=o,
                                                                                     out_format="fp32"), repeat)
                native_now = best(lambda a=axis: t.sum(a), repeat)
                cells.append(f"{x.size / seconds / 1e9:.2f} ({seconds / native_now:.1f}x)")
            print(f"| {fmt} {order} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
