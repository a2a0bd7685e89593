"""The machine a benchmark ran on, printed above every table: the same commit runs fp32 add at
2.2 ns on an AVX2 Zen 3 and 3.6 ns on an AVX-512 Zen 4, so a figure without its machine is noise.

    python bench/machine.py
"""
from __future__ import annotations

import os
import platform

# Widest first: the first one the CPU has is its SIMD level.
SIMD_LEVELS = (("avx512f", "AVX-512"), ("avx2", "AVX2"), ("avx", "AVX"), ("sse4.2", "SSE4.2"),
               ("sve", "SVE"), ("neon", "NEON"))


def cpu_model() -> str:
    """The marketing name of the CPU (Linux /proc/cpuinfo), else what the platform module says."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as file:
            for line in file:
                if line.lower().startswith(("model name", "hardware", "cpu model")):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def simd_level(features: set[str]) -> str:
    """The widest vector extension in ``features`` (LLVM feature names), with the AVX-512 subsets.

    >>> simd_level({"sse4.2", "avx", "avx2", "avx512f", "avx512bw"})
    'AVX-512 (avx512bw, avx512f)'
    >>> simd_level({"neon"})
    'NEON'
    """
    for flag, name in SIMD_LEVELS:
        if flag in features:
            if flag == "avx512f":
                return f"{name} ({', '.join(sorted(f for f in features if f.startswith('avx512')))})"
            return name
    return "none detected"


def numpy_simd() -> str:
    """The SIMD targets numpy's dispatched loops use here (fewer under NPY_DISABLE_CPU_FEATURES)."""
    try:
        from numpy._core._multiarray_umath import __cpu_baseline__, __cpu_dispatch__, __cpu_features__
    except ImportError:  # numpy 1.x
        return "unknown"
    return " ".join(list(__cpu_baseline__) + [name for name in __cpu_dispatch__ if __cpu_features__.get(name)])


def describe_machine() -> str:
    """One line: CPU, LLVM's name for it (what Numba compiles for), SIMD level, cores, versions.

    NUMBA_CPU_NAME / NUMBA_CPU_FEATURES make Numba compile for another CPU than the host (an AVX2
    one on an AVX-512 host: NUMBA_CPU_NAME=haswell), and NPY_DISABLE_CPU_FEATURES keeps numpy off
    some of its SIMD loops (X86_V4 AVX512_ICL AVX512_SPR: AVX-512); both are shown when set.
    """
    import llvmlite.binding as llvm
    import numba
    import numpy

    features = {name for name, on in llvm.get_host_cpu_features().items() if on}
    target = llvm.get_host_cpu_name()
    if numba.config.CPU_NAME:
        target = (f"{numba.config.CPU_NAME} (NUMBA_CPU_NAME; features {numba.config.CPU_FEATURES or 'of that CPU'}), "
                  f"host {target}")
    numpy_note = f", NPY_DISABLE_CPU_FEATURES={os.environ['NPY_DISABLE_CPU_FEATURES']}" if os.environ.get(
        "NPY_DISABLE_CPU_FEATURES") else ""
    return (f"machine: {cpu_model()} (LLVM target {target}), SIMD {simd_level(features)}, "
            f"{os.cpu_count()} CPUs, NUMBA_NUM_THREADS={os.environ.get('NUMBA_NUM_THREADS', 'default')}; "
            f"python {platform.python_version()}, numpy {numpy.__version__} (SIMD {numpy_simd()}{numpy_note}), "
            f"numba {numba.__version__}")


def best_seconds(fn, repeat: int) -> float:
    """The best of ``repeat`` timed calls of ``fn``, after one untimed call (compiling or loading
    kernels, warming caches): what every benchmark here reports."""
    import time

    fn()
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


if __name__ == "__main__":
    print(describe_machine())
