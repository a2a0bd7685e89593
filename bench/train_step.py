"""Time of one emulated training step of the default MLP per recipe, and the fused matmul's MAC rate.

    python bench/train_step.py [--steps 20] [--repeat 5] [--full-run]

- step: median wall time of ``Trainer.train_step`` (fp16 with dynamic loss scaling, the default
  MLP and batch, all diagnostics on), after a first step that loads or compiles the kernels
  (reported); then the same for the quantised recipes (fp8 per-tensor delayed scaling, mxfp8,
  nvfp4), interleaved with fp16 steps so that machine noise hits both, as a ratio to the fp16
  step (target for fp8: <= 1.5x);
- matmul: multiply-accumulates per second of ``softfloat16.linalg.matmul`` (FP16 inputs, exact
  products, sequential FP32 accumulation, FP16 output), on one thread, for the default MLP's
  forward shapes and a 256-cube, next to the element rate of the core's ``sf.fp32.add`` (1M
  elements, one thread). Target: MAC rate >= 0.5x the add rate. Then every order (sequential,
  pairwise, tensorcore) x input format (fp16, bf16, fp32, e4m3 x e5m2), FP32 results: >= 250 M MAC/s.
- ``--full-run``: also time the default ``python -m sim train`` run (fp16, dynamic) end to end
  in a fresh process, compile or cache load included.
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

os.environ.setdefault("NUMBA_NUM_THREADS", "1")

import numpy as np  # noqa: E402

import softfloat16 as sf  # noqa: E402
import softfloat16.linalg as linalg  # noqa: E402
from machine import best_seconds, describe_machine  # noqa: E402  (bench/machine.py, beside this script)
from sim.train import TrainConfig, Trainer  # noqa: E402


def bench_step(steps: int) -> None:
    start = time.perf_counter()
    trainer = Trainer(TrainConfig(precision="fp16", loss_scale="dynamic", steps=steps + 1))
    setup = time.perf_counter() - start
    start = time.perf_counter()
    trainer.train_step()
    first = time.perf_counter() - start
    times = []
    for _ in range(steps):
        start = time.perf_counter()
        trainer.train_step()
        times.append(time.perf_counter() - start)
    print(f"default MLP {list(trainer.model.sizes)}, batch {trainer.config.batch_size}, fp16 + dynamic scaling")
    print(f"  setup (data, init)        {setup:8.3f} s")
    print(f"  first step (compile/load) {first:8.3f} s")
    print(f"  one step, median of {steps:<3d}  {statistics.median(times) * 1e3:8.1f} ms "
          f"(min {min(times) * 1e3:.1f}, max {max(times) * 1e3:.1f})")


def bench_recipes(steps: int) -> None:
    """Median step time of each quantised recipe against fp16, the steps alternating."""
    trainers = {name: Trainer(TrainConfig(precision=name, steps=steps + 1, **extra))
                for name, extra in (("fp16", {"loss_scale": "dynamic"}), ("fp8", {}), ("mxfp8", {}), ("nvfp4", {}))}
    for trainer in trainers.values():
        trainer.train_step()  # compile or load the kernels
    times: dict[str, list[float]] = {name: [] for name in trainers}
    for _ in range(steps):
        for name, trainer in trainers.items():
            start = time.perf_counter()
            trainer.train_step()
            times[name].append(time.perf_counter() - start)
    fp16 = statistics.median(times["fp16"])
    for name, values in times.items():
        median = statistics.median(values)
        target = " (target <= 1.5x)" if name == "fp8" else ""
        print(f"  {name:6s} step, median of {steps:<3d} {median * 1e3:8.1f} ms = {median / fp16:4.2f}x fp16{target}")


def bench_matmul(repeat: int) -> None:
    rng = np.random.default_rng(0)
    n = 1 << 20
    x, y = (sf.fp32.from_float(rng.standard_normal(n)) for _ in range(2))
    add_rate = n / best_seconds(lambda: sf.fp32.add(x, y), repeat)
    print(f"core sf.fp32.add: {add_rate / 1e6:8.1f} M elements/s (1M elements, one thread)")
    shapes = [(32, 64, 128), (32, 128, 128), (32, 128, 10), (256, 256, 256)]
    for m, k, n_out in shapes:
        a = sf.fp16.from_float(rng.standard_normal((m, k)))
        b = sf.fp16.from_float(rng.standard_normal((k, n_out)) * 0.1)
        seconds = best_seconds(lambda a=a, b=b: linalg.matmul(a, b, sf.fp16), repeat)
        rate = m * k * n_out / seconds
        print(f"fused matmul fp16 ({m}x{k}) @ ({k}x{n_out}), FP32 accumulation: "
              f"{rate / 1e6:8.1f} M MAC/s = {rate / add_rate:4.2f}x the add rate (target >= 0.5x)")
    # Every order and input format (target: >= 250 M MAC/s each), FP32 results.
    for order in ("sequential", "pairwise", "tensorcore"):
        for fmt, b_fmt in ((sf.fp16, sf.fp16), (sf.bf16, sf.bf16), (sf.fp32, sf.fp32),
                           (sf.fp8_e4m3fn, sf.fp8_e5m2)):
            for m, k, n_out in ((32, 64, 128), (256, 256, 256)):
                a = fmt.from_float(rng.standard_normal((m, k)))
                b = b_fmt.from_float(rng.standard_normal((k, n_out)))
                # The tensor-core order: Hopper's adder (16 products, 25 bits) for every input format.
                core = {"tensor_core": linalg.TensorCore(16, 25)} if order == "tensorcore" else {}
                seconds = best_seconds(lambda a=a, b=b, fmt=fmt, b_fmt=b_fmt, order=order, core=core: linalg.matmul(
                    a, b, fmt, out_format=sf.fp32, order=order, b_format=b_fmt, **core), repeat)
                print(f"matmul {order:10s} {fmt.name:>10s} x {b_fmt.name:<10s} ({m}x{k}) @ ({k}x{n_out}): "
                      f"{m * k * n_out / seconds / 1e6:8.1f} M MAC/s (target >= 250)")


def bench_full_run() -> None:
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = {**os.environ, "PYTHONPATH": root + os.pathsep + os.environ.get("PYTHONPATH", "")}
    env.pop("NUMBA_NUM_THREADS", None)
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "sim", "train", "--precision", "fp16", "--loss-scale", "dynamic"],
                   check=True, env=env)
    print(f"default run (python -m sim train --precision fp16 --loss-scale dynamic): "
          f"{time.perf_counter() - start:.1f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--full-run", action="store_true")
    args = parser.parse_args()
    print(describe_machine())
    bench_step(args.steps)
    bench_recipes(args.steps)
    bench_matmul(args.repeat)
    if args.full_run:
        bench_full_run()


if __name__ == "__main__":
    main()
