"""What ``softfloat16.torch.emulate`` costs: per-op dispatch overhead, and whole forward+backward
passes under emulation next to native torch CPU FP32 in the same run.

    python bench/torch_mode.py [--repeat 5] [--markdown]

- per op (a 4x4 tensor, so the arithmetic is negligible): the time of the op under the mode, the
  part of it spent inside softfloat16's core entry points (``sf.<format>.<op>``, ``sf.convert``,
  ``sf.linalg.matmul`` / ``sum``, and the compiled FP32 programs of ``softfloat16.fp32compiled``:
  exp, log, tanh, ...: the emulator's own time) and the rest, the dispatch overhead
  (torch's dispatcher, tensors to bits and back, shapes and dtypes). Target: overhead < 50 us.
- passes: one forward+backward of a model under ``emulate()`` (FP16, RNE, FP32 accumulation,
  sequential) vs native torch CPU FP32; the emulator's own time in that pass and the ratio of the
  whole pass to it (target: <= 20x, i.e. the mode's overhead is at most 19 times the arithmetic).
  Models: the MLP of ``sim`` (64-128-128-128-10, batch 32) and ``nn.TransformerEncoderLayer``
  (d_model 64, 4 heads, feed-forward 128, batch 8 x 16 tokens) when the mode covers its ops.
One thread (NUMBA_NUM_THREADS=1, torch.set_num_threads(1)); best of ``--repeat``.
"""
from __future__ import annotations

import argparse
import contextlib
import os
import time

os.environ.setdefault("NUMBA_NUM_THREADS", "1")

import torch  # noqa: E402

import softfloat16 as sf  # noqa: E402
import softfloat16.ops  # noqa: E402,F401
from softfloat16.fp32compiled import CompiledProgram  # noqa: E402
import softfloat16.torch as sft  # noqa: E402
from machine import describe_machine  # noqa: E402  (bench/machine.py, beside this script)


class CoreClock:
    """Accumulates the wall time spent inside softfloat16's core entry points while installed
    (outermost calls only: a matmul's own conversions are not counted twice)."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self._depth = 0

    def _wrap(self, function):
        def timed(*args, **kwargs):
            self._depth += 1
            start = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                self._depth -= 1
                if self._depth == 0:
                    self.seconds += time.perf_counter() - start
        return timed

    @contextlib.contextmanager
    def installed(self):
        targets = [(sf.ops, "_elementwise"), (sf.ops, "convert"), (sf, "convert"), (sf.linalg, "matmul"),
                   (sf.linalg, "sum"), (CompiledProgram, "__call__")]
        saved = [(owner, name, getattr(owner, name)) for owner, name in targets]
        try:
            for owner, name, function in saved:
                setattr(owner, name, self._wrap(function))
            yield self
        finally:
            for owner, name, function in saved:
                setattr(owner, name, function)


def best(fn, repeat: int, number: int = 1) -> tuple[float, float]:
    """(seconds, of which inside the core) of the fastest of ``repeat`` timings of ``number`` calls."""
    fn()
    result = (float("inf"), 0.0)
    for _ in range(repeat):
        clock = CoreClock()
        with clock.installed():
            start = time.perf_counter()
            for _ in range(number):
                fn()
            elapsed = time.perf_counter() - start
        result = min(result, (elapsed / number, clock.seconds / number))
    return result


def per_op(repeat: int) -> list[tuple[str, float, float]]:
    """(op, microseconds under the mode, microseconds of it inside the core) for small tensors."""
    torch.manual_seed(0)
    h, g = torch.randn(4, 4).half(), torch.randn(4, 4).half()
    w = torch.randn(4, 4)
    ops = {
        "add (fp16)": lambda: h + g, "mul (fp16)": lambda: h * g, "div (fp16)": lambda: h / g,
        "add (fp32)": lambda: w + w, "relu (fp16)": lambda: torch.relu(h), "to float32": lambda: h.float(),
        "mm (fp16)": lambda: h @ g, "sum (fp16)": lambda: h.sum(), "softmax (fp16)": lambda: h.softmax(-1),
    }
    rows = []
    for name, op in ops.items():
        with sft.emulate():
            total, core = best(op, repeat, number=50)
        rows.append((name, total * 1e6, core * 1e6))
    return rows


def mlp_pass():
    torch.manual_seed(0)
    sizes = (64, 128, 128, 128, 10)
    layers = []
    for a, b in zip(sizes[:-1], sizes[1:]):
        layers += [torch.nn.Linear(a, b), torch.nn.ReLU()]
    model = torch.nn.Sequential(*layers[:-1])
    x, labels = torch.randn(32, 64), torch.randint(0, 10, (32,))
    return "MLP 64-128-128-128-10, batch 32", model, lambda m, dt: torch.nn.functional.cross_entropy(
        m(x.to(dt)).float(), labels)


def transformer_pass():
    torch.manual_seed(0)
    model = torch.nn.TransformerEncoderLayer(64, 4, dim_feedforward=128, dropout=0.0, batch_first=True)
    x = torch.randn(8, 16, 64)
    return "TransformerEncoderLayer d64 h4 ff128, 8x16 tokens", model, lambda m, dt: m(x.to(dt)).float().square(
        ).mean()


def time_pass(model, loss_of, dtype, repeat: int, emulated: bool):
    model = model.to(dtype)

    def step():
        model.zero_grad(set_to_none=True)
        loss_of(model, dtype).backward()

    if not emulated:
        return best(step, repeat)
    with sft.emulate():
        return best(step, repeat)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--markdown", action="store_true", help="print markdown tables")
    args = parser.parse_args()
    torch.set_num_threads(1)
    print(f"{describe_machine()}; torch {torch.__version__}\n")

    print("| op (4x4 tensors) | under emulate, us | inside the core, us | dispatch overhead, us | target |")
    print("|---|---|---|---|---|")
    for name, total, core in per_op(args.repeat):
        print(f"| {name} | {total:.1f} | {core:.1f} | {total - core:.1f} | < 50 |")

    print("\n| forward+backward | native FP32, ms | emulated FP16, ms | ratio | core's own time, ms | "
          "emulated / core (target <= 20x) |")
    print("|---|---|---|---|---|---|")
    for build in (mlp_pass, transformer_pass):
        name, model, loss_of = build()
        native, _ = time_pass(model, loss_of, torch.float32, args.repeat, emulated=False)
        try:
            emulated, core = time_pass(model, loss_of, torch.float16, args.repeat, emulated=True)
        except sft.NotEmulatedError as error:
            print(f"| {name} | {native * 1e3:.2f} | not emulated: {str(error).split(';')[0]} | | | |")
            continue
        print(f"| {name} | {native * 1e3:.2f} | {emulated * 1e3:.1f} | {emulated / native:.0f}x | {core * 1e3:.1f} | "
              f"{emulated / core:.1f}x |")


if __name__ == "__main__":
    main()
