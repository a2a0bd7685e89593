"""GPT-2 with GPT-2-small's dimensions under ``softfloat16.torch.emulate``: one forward + backward
in FP16 and in BF16 against native torch CPU float32 in the same run, one thread.

    python bench/gpt2_small.py [--layers 12] [--tokens 128] [--repeat 1]

The model is built from a config (12 layers, d = 768, 12 heads, vocabulary 50,257) with random
weights: no download. Input: batch 1 x ``--tokens`` token ids; loss: the language-model loss on
those tokens. The emulated passes run every aten op on the emulator (strict: an op it lacks is an
error), RNE, FP32 accumulation, the sequential order. Printed: seconds per pass (best of
``--repeat``), the ratio to native float32, and the part spent inside softfloat16's core entry
points (bench/torch_mode.py's clock).
"""
from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("NUMBA_NUM_THREADS", "1")

import torch  # noqa: E402

import softfloat16 as sf  # noqa: E402
import softfloat16.ops  # noqa: E402,F401
import softfloat16.torch as sft  # noqa: E402
from machine import describe_machine  # noqa: E402  (bench/machine.py, beside this script)
from torch_mode import CoreClock  # noqa: E402


def build(layers: int):
    import transformers

    config = transformers.GPT2Config(n_layer=layers, n_embd=768, n_head=12, vocab_size=50257, n_positions=1024,
                                     resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
    torch.manual_seed(0)
    return transformers.GPT2LMHeadModel(config).eval()


def one_pass(model, tokens) -> None:
    model.zero_grad(set_to_none=True)
    model(tokens, labels=tokens).loss.float().backward()


def timed(model, tokens, repeat: int, emulated: bool) -> tuple[float, float]:
    """(best seconds, core seconds of that pass) of ``repeat`` passes after a warm-up pass."""
    runs = []
    for _ in range(repeat + 1):
        clock = CoreClock()
        start = time.perf_counter()
        if emulated:
            with clock.installed(), sft.emulate():
                one_pass(model, tokens)
        else:
            one_pass(model, tokens)
        runs.append((time.perf_counter() - start, clock.seconds))
    return min(runs[1:])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=12)
    parser.add_argument("--tokens", type=int, default=128)
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(1)
    sf.set_num_threads(1)
    print(f"{describe_machine()}; torch {torch.__version__}")
    print(f"GPT-2, {args.layers} layers, d 768, 12 heads, vocabulary 50257; batch 1 x {args.tokens} tokens; "
          "forward + backward, one thread\n")
    model = build(args.layers)
    tokens = torch.randint(0, 50257, (1, args.tokens), generator=torch.Generator().manual_seed(0))
    native, _ = timed(model.float(), tokens, args.repeat, emulated=False)
    print("| pass | seconds | x native float32 | inside the core, s |")
    print("|---|---|---|---|")
    print(f"| native float32 | {native:.2f} | 1 | |")
    for name, dtype in (("fp16", torch.float16), ("bf16", torch.bfloat16)):
        seconds, core = timed(model.to(dtype), tokens, args.repeat, emulated=True)
        print(f"| emulated {name} | {seconds:.1f} | {seconds / native:.1f} | {core:.1f} |")


if __name__ == "__main__":
    main()
