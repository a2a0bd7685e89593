"""docs/hardware.md's worked example: an FP8 (E4M3) GEMM with K = 4096 on each GPU's matrix unit,
against the exact result, with and without promotion into FP32 every 128 elements of K.

    python bench/mma_fp8_example.py [--m 64] [--n 64] [--k 4096] [--seed 0]

``--figure PATH`` draws instead the error against K (K = 128, 256, ..., --figure-k-max) of the
FP32 FMA chain, Ampere, Ada, Hopper with and without promotion, and Blackwell, on the first K
columns of one --figure-mn x --figure-k-max @ --figure-k-max x --figure-mn draw (matplotlib, Agg
backend; .svg or .png by PATH's suffix), and prints the numbers it drew:

    python bench/mma_fp8_example.py --figure docs/hardware/fp8_error_vs_k.svg
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
# The figure's curves: ROWS index, legend, colour, marker, marker size, line style (curves that
# overlap differ in marker size and style).
FIGURE_ROWS = [
    (0, "FP32 FMA chain", "#000000", "o", 9, "-"),
    (1, "Ampere mma f16", "#2ca02c", "s", 6, "--"),
    (5, "Blackwell tcgen05 e4m3", "#1f77b4", "^", 4, ":"),
    (2, "Ada mma e4m3", "#ff7f0e", "D", 8, "-"),
    (3, "Hopper wgmma e4m3", "#d62728", "v", 4, "-"),
    (4, "Hopper wgmma e4m3, promoted every 128", "#9467bd", "P", 6, "-"),
]
# Every E4M3 product is a multiple of 2**-18 below 2**17.7 in magnitude, so up to 2**17 of them sum
# exactly in float64's 53 bits: the exact reference below holds up to this K.
K_EXACT = 2**17
ZERO = 1e-11  # where the figure's log axes draw an error of exactly 0


def draw_inputs(m: int, n: int, k: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """E4M3 codes of an m x k and a k x n matrix of N(0, 1) values."""
    rng = np.random.default_rng(seed)
    a = np.asarray(sf.convert(rng.standard_normal((m, k)).astype(np.float32).view(np.uint32), src="fp32",
                              dst=E4M3))
    b = np.asarray(sf.convert(rng.standard_normal((k, n)).astype(np.float32).view(np.uint32), src="fp32",
                              dst=E4M3))
    return a, b


def e4m3_values() -> np.ndarray:
    return np.array([float(sf.fp8_e4m3fn.value(c)) for c in range(256)])


def gemm(a: np.ndarray, b: np.ndarray, row: tuple) -> np.ndarray:
    """The FP32 result (uint32 bits) of the E4M3 codes a @ b on one machine of ROWS."""
    _, preset, fmt, options = row
    xa, xb = (np.asarray(sf.convert(x, src=E4M3, dst=fmt)) if fmt != E4M3 else x for x in (a, b))
    if preset is None:
        return sf.linalg.matmul(xa, xb, fmt, out_format="fp32")
    return sf.mma.gemm(xa, xb, preset, **options)


def relative_error(d: np.ndarray, a: np.ndarray, b: np.ndarray, values: np.ndarray) -> np.ndarray:
    """|d - exact| / sum_k |a_k b_k|, element by element (exact in float64 while K <= K_EXACT)."""
    exact = values[a] @ values[b]
    scale = np.abs(values[a]) @ np.abs(values[b])  # sum of |a_k b_k|: what GEMM error bounds are relative to
    return np.abs(d.view(np.float32).astype(np.float64) - exact) / scale


def table(args: argparse.Namespace) -> None:
    a, b = draw_inputs(args.m, args.n, args.k, args.seed)
    values = e4m3_values()
    print(f"E4M3 inputs ~ N(0, 1), {args.m}x{args.k} @ {args.k}x{args.n}; |FP32 result - exact| / sum |a_k b_k|")
    print("| machine | median error | max error | elements equal to the FP32 FMA chain's |")
    print("|---|---|---|---|")
    reference = None
    for row in ROWS:
        d = gemm(a, b, row)
        rel = relative_error(d, a, b, values)
        if reference is None:
            reference = d
        same = np.mean(d == reference)
        print(f"| {row[0]} | {np.median(rel):.2e} | {rel.max():.2e} | {same:.1%} |")


def error_against_k(mn: int, k_max: int, seed: int) -> tuple[list[int], dict[int, np.ndarray]]:
    """K = 128, 256, ..., k_max and, for each FIGURE_ROWS machine, its errors' (median, max) at
    each K (shape (len(ks), 2)), on the first K columns of one draw."""
    a, b = draw_inputs(mn, mn, k_max, seed)
    values = e4m3_values()
    ks = [128 << i for i in range(k_max.bit_length()) if 128 << i <= k_max]
    stats = {}
    for index, *_ in FIGURE_ROWS:
        rows = []
        for k in ks:
            rel = relative_error(gemm(a[:, :k], b[:k], ROWS[index]), a[:, :k], b[:k], values)
            rows.append((np.median(rel), rel.max()))
        stats[index] = np.array(rows)
    return ks, stats


def draw_figure(ks: list[int], stats: dict[int, np.ndarray], title: str, path: str):
    """Two log-log panels (median, maximum error against K); errors of exactly 0 as markers on the
    row labelled 0, not joined to the others. Returns the closed matplotlib Figure."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams["svg.fonttype"] = "none"  # text as text: a smaller file
    plt.rcParams["svg.hashsalt"] = "softfloat16"  # the same figure, the same bytes
    fig, axes = plt.subplots(1, 2, figsize=(10, 4.2), sharey=True)
    for column, (ax, name) in enumerate(zip(axes, ("median", "maximum"))):
        for index, label, color, marker, size, style in FIGURE_ROWS:
            y = stats[index][:, column]
            look = {"color": color, "marker": marker, "markersize": size, "markerfacecolor": "none"}
            ax.plot(ks, np.where(y > 0, y, np.nan), linestyle=style, label=label, **look)
            zero = [k for k, v in zip(ks, y) if v == 0]
            ax.plot(zero, [ZERO] * len(zero), linestyle="none", **look)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xticks(ks, [str(k) for k in ks])
        ax.set_xlabel("K")
        ax.set_title(f"{name} over the {title} elements")
        ax.axhspan(ZERO / 3, ZERO * 3, color="#eeeeee", zorder=0)
        ax.grid(True, which="major", color="#dddddd", linewidth=0.6)
    top = 10 ** np.ceil(np.log10(max(s.max() for s in stats.values())))
    decades = [10.0**e for e in range(-10, int(np.log10(top)) + 1)]
    axes[0].set_yticks([ZERO, *decades], ["0 (exact)", *(f"1e{int(np.log10(d))}" for d in decades)])
    axes[0].set_yticks([], minor=True)
    axes[0].set_ylim(ZERO / 3, top)
    axes[0].set_ylabel("|FP32 result - exact| / sum |a_k b_k|")
    handles, labels = axes[0].get_legend_handles_labels()
    fig.tight_layout(rect=(0, 0.1, 1, 1))
    fig.legend(handles, labels, loc="lower center", ncol=3, fontsize=9, frameon=False)
    fig.savefig(path, dpi=100, bbox_inches="tight", metadata={"Date": None} if path.endswith(".svg") else
                {"Software": None})
    plt.close(fig)
    return fig


def figure(args: argparse.Namespace) -> None:
    ks, stats = error_against_k(args.figure_mn, args.figure_k_max, args.seed)
    mn = args.figure_mn
    print(f"E4M3 inputs ~ N(0, 1), the first K columns of {mn}x{args.figure_k_max} @ {args.figure_k_max}x{mn}, "
          f"seed {args.seed}; |FP32 result - exact| / sum |a_k b_k|, median / max")
    print("| machine | " + " | ".join(f"K = {k}" for k in ks) + " |")
    print("|---" * (len(ks) + 1) + "|")
    for index, label, *_ in FIGURE_ROWS:
        cells = (f"{median:.2g} / {top:.2g}" for median, top in stats[index])
        print(f"| {label} | " + " | ".join(cells) + " |")
    draw_figure(ks, stats, f"{mn} x {mn}", args.figure)
    print(f"wrote {args.figure}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--m", type=int, default=64)
    parser.add_argument("--n", type=int, default=64)
    parser.add_argument("--k", type=int, default=4096)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--figure", metavar="PATH", help="draw the error against K into PATH instead of the table")
    parser.add_argument("--figure-mn", type=int, default=32, help="the figure's m = n (default 32)")
    parser.add_argument("--figure-k-max", type=int, default=8192, help="the figure's largest K (default 8192)")
    args = parser.parse_args()
    for k in (args.k, args.figure_k_max):
        if k > K_EXACT:
            parser.error(f"K = {k}: the float64 reference is exact only up to K = {K_EXACT}")
    if args.figure_k_max < 128:
        parser.error("--figure-k-max must be at least 128")
    if args.figure:
        figure(args)
    else:
        table(args)


if __name__ == "__main__":
    main()
