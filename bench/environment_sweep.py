"""Public calls under a floating-point environment set by someone else: their bits against the same
calls in the default environment (x86 only: MXCSR's rounding control, FTZ and DAZ).

    python bench/environment_sweep.py [--calls] [--presets] [--threads N]

Runs every call first in the default environment (which also makes its inputs), then under
rounding down, up, toward zero and FTZ + DAZ, and prints each call whose bits differ, and the counts.
``--calls``: elementwise operations, conversions, linalg.matmul and sum, MX quantisation (262 calls);
``--presets``: one instruction of each unscaled matrix-unit preset kind (164); default both.
``--threads N``: N threads, every GEMM and elementwise operation split over them whatever its size,
and the environment set on every thread that may run a kernel: this one, Numba's (a thread of
Numba's keeps the environment it started with or was left in) and softfloat16's thread pool.
tests/test_environment.py keeps a sample of these in the test suite.
"""
from __future__ import annotations

import argparse
import threading

import numpy as np
from numba import njit, prange

import softfloat16 as sf
from softfloat16._kernels import environment
from softfloat16.mma_presets import PRESETS

ENVIRONMENTS = {"down": 0x2000, "up": 0x4000, "toward zero": 0x6000, "ftz+daz": 0x8040}


def patterns(rng, fmt: str, shape, specials: float = 0.1) -> np.ndarray:
    """Values of ``fmt`` over a wide range of magnitudes, some random patterns among them."""
    f = sf.format(fmt)
    x = (rng.standard_normal(shape) * 2.0 ** rng.integers(-20, 8, shape)).astype(np.float32)
    bits = np.asarray(sf.convert(x.view(np.uint32), "fp32", fmt))
    raw = rng.integers(0, 1 << f.width, shape).astype(bits.dtype)
    return np.where(rng.random(shape) < specials, raw, bits)


def calls(rng) -> list:
    """(name, call) pairs; every input is made here, in the default environment."""
    out = []
    for fmt in ("fp32", "fp16", "bf16", "fp8_e4m3fn", "tf32"):
        f = getattr(sf, fmt)
        x, y, z = (patterns(rng, fmt, 4000) for _ in range(3))
        for op in ("add", "sub", "mul", "div"):
            for r in ("rne", "rtz", "rup", "rdn", "rna"):
                out.append((f"{fmt}.{op} {r}", lambda f=f, op=op, r=r, x=x, y=y: getattr(f, op)(x, y, rounding=r)))
        for r in ("rne", "rtz", "rup"):
            out.append((f"{fmt}.fma {r}", lambda f=f, r=r, x=x, y=y, z=z: f.fma(x, y, z, rounding=r)))
            out.append((f"{fmt}.sqrt {r}", lambda f=f, r=r, x=x: f.sqrt(x, rounding=r)))
        out.append((f"{fmt}.add stochastic", lambda f=f, x=x, y=y: f.add(x, y, rounding="stochastic", seed=3)))
    for src, dst in (("fp32", "fp16"), ("fp32", "bf16"), ("fp16", "fp8_e4m3fn"), ("fp32", "fp4_e2m1"),
                     ("fp32", "e8m0")):
        x = patterns(rng, src, 4000)
        for r in ("rne", "rtz", "rup"):
            out.append((f"convert {src} -> {dst} {r}",
                        lambda x=x, src=src, dst=dst, r=r: sf.convert(x, src, dst, rounding=r)))
    policies = (dict(), dict(order="pairwise"), dict(rounding="rtz"), dict(rounding="rna"), dict(rounding="rup"),
                dict(accumulate="fp16"), dict(order="pairwise", accumulate="fp16"), dict(accumulate="bf16"),
                dict(order="tensorcore"), dict(order="tensorcore", accumulate="fp16"),
                dict(order="tensorcore", tensor_core="mi300x"), dict(order="tensorcore", tensor_core="a100"),
                dict(order="tensorcore", tensor_core="v100"), dict(order="tensorcore", tensor_core="b200"))
    for fmt in ("fp32", "fp16", "bf16", "fp8_e4m3fn"):
        for options in policies:
            for specials in (0.0, 0.1):
                a, b = patterns(rng, fmt, (40, 96), specials), patterns(rng, fmt, (96, 70), specials)
                if options.get("order") == "tensorcore" and not sf.tensor_cores.takes(
                        options.get("tensor_core", "h100"), fmt):
                    continue
                if options.get("accumulate") == "fp16" and options.get("order") == "tensorcore" and fmt == "bf16":
                    continue  # no BF16 instruction accumulates in FP16
                out.append((f"matmul {fmt} {options} specials={specials}", lambda a=a, b=b, fmt=fmt, o=options:
                            sf.linalg.matmul(a, b, fmt, out_format="fp32", **o)))
        if fmt != "fp8_e4m3fn":
            x = patterns(rng, fmt, (30, 500))
            for options in (dict(), dict(order="pairwise"), dict(accumulate="fp16"), dict(rounding="rtz")):
                out.append((f"sum {fmt} {options}", lambda x=x, fmt=fmt, o=options: sf.linalg.sum(x, fmt, axis=1, **o)))
    x = (rng.standard_normal((64, 128)) * 2.0 ** rng.integers(-30, 10, (64, 128))).astype(np.float32)
    for fmt in ("mxfp8_e4m3", "mxfp4_e2m1", "nvfp4", "mxfp6_e2m3"):
        out.append((f"mx.quantize {fmt}", lambda fmt=fmt: np.concatenate([
            np.asarray(part).ravel().view(np.uint8) for part in (sf.mx.quantize(x, fmt).elements,
                                                                  sf.mx.quantize(x, fmt).scales)])))
        out.append((f"mx.dequantize {fmt}", lambda fmt=fmt: sf.mx.dequantize(sf.mx.quantize(x, fmt), np.float32)))
    return out


def presets(rng) -> list:
    """One instruction (K = 4 k) of each unscaled preset kind (architecture, family, types)."""
    kinds = {}
    for name, p in PRESETS.items():
        if p.scale is None and "f64" not in name:
            kinds.setdefault((p.arch, p.instruction, p.a, p.b, p.c, p.d), name)
    out = []
    for name in sorted(kinds.values()):
        p = PRESETS[name]
        a, b = patterns(rng, p.a, (p.m, 4 * p.k), 0.05), patterns(rng, p.b, (4 * p.k, p.n), 0.05)
        c = patterns(rng, p.c, (p.m, p.n), 0.05)
        out.append((name, lambda a=a, b=b, c=c, name=name: sf.mma.mma(a, b, c, name)))
    return out


@njit(parallel=True)
def _on_numba_threads(control, old):
    for i in prange(old.shape[0]):
        old[i] = environment.swap_mxcsr(control)


def set_everywhere(control: int, threads: int) -> None:
    """MXCSR = control on this thread and, with threads > 1, on Numba's threads and on each thread of
    softfloat16's pool (each keeps it)."""
    environment.swap_mxcsr(control)
    if threads > 1:
        _on_numba_threads(control, np.empty(64 * threads, np.uint32))
        barrier = threading.Barrier(threads)  # every task on a thread of its own

        def set_one():
            barrier.wait()
            environment.swap_mxcsr(control)
        for future in [sf.threads._executor(threads).submit(set_one) for _ in range(threads)]:
            future.result()


def under(control: int, call, threads: int = 1) -> bytes:
    """call()'s result bytes with MXCSR = control on every thread that may run a kernel
    (:func:`set_everywhere`), then the default environment again."""
    set_everywhere(control, threads)
    try:
        result = call()
    finally:
        set_everywhere(environment.NEAREST, threads)
    return np.asarray(result).tobytes()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", action="store_true")
    parser.add_argument("--presets", action="store_true")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    if not environment.X86:
        raise SystemExit("environment_sweep: sets x86's MXCSR; this host is not x86-64")
    sf.set_num_threads(args.threads)
    if args.threads > 1:  # every call split over the threads
        sf.threads.PARALLEL_MIN_MACS = sf.threads.PARALLEL_MIN_ELEMENTS = 1
    rng = np.random.default_rng(7)
    chosen = (calls(rng) if args.calls or not args.presets else []) + (
        presets(rng) if args.presets or not args.calls else [])
    differ = set()
    for name, call in chosen:
        want = under(environment.NEAREST, call, args.threads)
        for env, bits in ENVIRONMENTS.items():
            if under(environment.NEAREST | bits, call, args.threads) != want:
                differ.add(name)
                print(f"differs: {name} under {env}")
    print(f"{len(differ)} of {len(chosen)} calls differ under some environment")  # (a preset: one call)


if __name__ == "__main__":
    main()
