"""Low-precision GEMM recipes on a tiny GPT-2: how far each recipe's forward and backward land from
the BF16 run.

    python bench/torch_recipes.py [--markdown]

A ``transformers`` GPT-2 (``GPT2Config``: 2 layers, d = 64, 4 heads, vocabulary 128, 32 positions,
random weights from seed 0, BF16), one batch of 2 x 16 random tokens (seed 1), the language-model
loss, forward and backward. The BF16 run is ``emulate()`` without a recipe (every op emulated,
FP32 accumulation); each recipe run is ``emulate(gemm=..., tensor_core=...)`` on the same model
and tokens (the MX and NVFP4 recipes on Blackwell, "b200"; the FP8 ones on Hopper, "h100"). Per
recipe: the relative error of the logits and of all parameter gradients together against the BF16
run, ||recipe - bf16||_2 / ||bf16||_2 (in float64), and the share of elements bit-identical to it;
then the machine line (processor, torch, threads) and the time of the runs.
"""
from __future__ import annotations

import argparse
import platform
import time

import numpy as np
import torch

import softfloat16.torch as sft

RUNS = [("bf16", {}), ("mxfp8", {"tensor_core": "b200"}),
        ("mxfp8 rceil, E5M2 gradients", {"gemm": "mxfp8", "tensor_core": "b200", "scale_rule": "rceil",
                                         "grad_format": "e5m2"}),
        ("mxfp6", {"tensor_core": "b200"}), ("mxfp4", {"tensor_core": "b200"}), ("nvfp4", {"tensor_core": "b200"}),
        ("nvfp4, SR gradients", {"gemm": "nvfp4", "tensor_core": "b200", "grad_rounding": "sr", "seed": 0}),
        ("fp8_tensorwise", {"tensor_core": "h100"}), ("fp8_rowwise", {"tensor_core": "h100"})]


def model_and_tokens():
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    config = GPT2Config(n_layer=2, n_embd=64, n_head=4, vocab_size=128, n_positions=32, resid_pdrop=0.0,
                        embd_pdrop=0.0, attn_pdrop=0.0, bos_token_id=0, eos_token_id=0)
    model = GPT2LMHeadModel(config).to(torch.bfloat16).eval()
    tokens = torch.randint(0, 128, (2, 16), generator=torch.Generator().manual_seed(1))
    return model, tokens


def run(model, tokens, options: dict):
    """(logits, gradients concatenated, seconds, ops run natively) of one forward+backward."""
    model.zero_grad(set_to_none=True)
    start = time.perf_counter()
    with sft.emulate(strict=False, **options) as mode:
        out = model(tokens, labels=tokens)
        out.loss.backward()
    seconds = time.perf_counter() - start
    grads = torch.cat([p.grad.reshape(-1) for p in model.parameters() if p.grad is not None])
    return out.logits.detach(), grads, seconds, sum(mode.fallbacks.values())


def machine() -> str:
    """The processor, Python, torch and torch's thread count: the line under the table."""
    processor = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as info:
            processor = next(line.split(":", 1)[1].strip() for line in info if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return (f"{processor}, Python {platform.python_version()}, torch {torch.__version__} "
            f"({torch.backends.cpu.get_cpu_capability()}), {torch.get_num_threads()} threads")


def compare(x: torch.Tensor, reference: torch.Tensor) -> tuple[float, float]:
    """(relative L2 error in float64, share of bit-identical elements)."""
    a, b = x.double(), reference.double()
    error = float(torch.linalg.vector_norm(a - b) / torch.linalg.vector_norm(b))
    same = float((x.view(torch.int16) == reference.view(torch.int16)).double().mean())
    return error, same


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--markdown", action="store_true", help="print the table as Markdown")
    args = parser.parse_args()
    model, tokens = model_and_tokens()
    rows = []
    reference = None
    for label, options in RUNS:
        options = options if label == "bf16" or "gemm" in options else {"gemm": label, **options}
        logits, grads, seconds, native = run(model, tokens, options)
        if reference is None:
            reference = (logits, grads)
        core = options.get("tensor_core", "-")
        rows.append((label, core, *compare(logits, reference[0]), *compare(grads, reference[1]), seconds, native))
    header = ("recipe", "tensor_core", "logits rel. error", "logits bit-identical", "gradients rel. error",
              "gradients bit-identical", "native ops")
    if args.markdown:
        print("| " + " | ".join(header) + " |")
        print("|" + "---|" * len(header))
        for label, core, le, ls, ge, gs, _, native in rows:
            print(f"| {label} | {core} | {le:.3e} | {ls:.1%} | {ge:.3e} | {gs:.1%} | {native} |")
    else:
        for label, core, le, ls, ge, gs, seconds, native in rows:
            print(f"{label:30s} {core:6s} logits {le:.2e} ({ls:.1%} identical)  gradients {ge:.2e} "
                  f"({gs:.1%} identical)  {seconds:.1f} s  {native} native")
    seconds = [row[6] for row in rows]
    print(f"\nMachine: {machine()}. Forward and backward: {min(seconds):.1f} to {max(seconds):.1f} s per run, "
          f"{sum(seconds):.0f} s in all, Numba's kernels compiled (the first run on a machine compiles them: minutes).")
    assert np.isfinite([row[2] for row in rows]).all()


if __name__ == "__main__":
    main()
