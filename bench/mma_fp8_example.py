"""docs/hardware.md's worked example: an FP8 (E4M3) GEMM with K = 4096 on each GPU's matrix unit,
against the exact result, with and without promotion into FP32 every 128 elements of K.

    python bench/mma_fp8_example.py [--m 64] [--n 64] [--k 4096] [--seed 0]
"""
import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import softfloat16 as sf  # noqa: E402

E4M3 = "fp8_e4m3fn"
ROWS = [  # (label, preset, operand format, options)
    ("FP32 FMA chain (CPU reference order)", None, E4M3, {}),
    ("Ampere mma f16 (E4M3 values are exact in FP16)", "ampere.mma.m16n8k16.f32.f16.f16.f32", "fp16", {}),
    ("Ada mma e4m3", "ada.mma.m16n8k32.f32.e4m3.e4m3.f32", E4M3, {}),
    ("Hopper wgmma e4m3", "hopper.wgmma.m64n8k32.f32.e4m3.e4m3", E4M3, {}),
    ("Hopper wgmma e4m3, promoted every 128", "hopper.wgmma.m64n8k32.f32.e4m3.e4m3", E4M3, {"promote_every": 128}),
    ("Blackwell tcgen05 f8f6f4 e4m3", "blackwell.tcgen05.m128n8k32.kind::f8f6f4.f32.e4m3.e4m3", E4M3, {}),
    ("RTX Blackwell mma f8f6f4 e4m3", "rtx_blackwell.mma.m16n8k32.kind::f8f6f4.f32.e4m3.e4m3.f32", E4M3, {}),
    ("CDNA3 mfma fp8 (E4M3FNUZ)", "cdna3.mfma.f32_16x16x32_fp8_fp8", "fp8_e4m3fnuz", {}),
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--m", type=int, default=64)
    parser.add_argument("--n", type=int, default=64)
    parser.add_argument("--k", type=int, default=4096)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    a = np.asarray(sf.convert(rng.standard_normal((args.m, args.k)).astype(np.float32).view(np.uint32), src="fp32",
                              dst=E4M3))
    b = np.asarray(sf.convert(rng.standard_normal((args.k, args.n)).astype(np.float32).view(np.uint32), src="fp32",
                              dst=E4M3))
    values = np.array([float(sf.fp8_e4m3fn.value(c)) for c in range(256)])
    # Exact in float64: products have at most 8 significant bits within 2**-18 .. 2**18, so K = 4096
    # of them sum exactly in 53 bits.
    exact = values[a] @ values[b]
    scale = np.abs(values[a]) @ np.abs(values[b])  # sum of |a_k b_k|: what GEMM error bounds are relative to
    print(f"E4M3 inputs ~ N(0, 1), {args.m}x{args.k} @ {args.k}x{args.n}; |FP32 result - exact| / sum |a_k b_k|")
    print("| machine | median error | max error | elements equal to the FP32 FMA chain's |")
    print("|---|---|---|---|")
    reference = None
    for label, preset, fmt, options in ROWS:
        xa, xb = (np.asarray(sf.convert(x, src=E4M3, dst=fmt)) if fmt != E4M3 else x for x in (a, b))
        if preset is None:
            d = sf.linalg.matmul(xa, xb, fmt, out_format="fp32")
        else:
            d = sf.mma.gemm(xa, xb, preset, **options)
        got = d.view(np.float32).astype(np.float64)
        rel = np.abs(got - exact) / scale
        if reference is None:
            reference = d
        same = np.mean(d == reference)
        print(f"| {label} | {np.median(rel):.2e} | {rel.max():.2e} | {same:.1%} |")


if __name__ == "__main__":
    main()
