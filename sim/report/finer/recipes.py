"""Finer scales and accumulation, recipes: the constants of the runs, the tensor roles they
quantise, and the runs themselves (:func:`finer_recipes`).

>>> [recipe.key for recipe in finer_recipes(steps=10)][:4]
['fp32', 'fp8-global', 'fp8-global-loss-scale', 'fp8-delayed']
"""
from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from sim.report import keys
from sim.report.formatting import binary_exponent
from sim.report.recipe import DEFAULT_STEPS, Recipe
from sim.train import TrainConfig

__all__ = [
    "GLOBAL_LOSS_SCALE", "KEPT_FRACTION_BITS", "MLP_PROMOTE_EVERY", "PROMOTE_EVERY", "ROLES", "TC_BLOCK", "FinerRecipe",
    "finer_recipes", "run_cost",
]

ROLES = ("input", "weight", "grad_output")  # the roles of a product's quantised operands, in results.json order

# --- the recipes' constants ---------------------------------------------------------------------
GLOBAL_LOSS_SCALE = 1024.0  # the main suite's textbook static scale, as FP8's one global scale
KEPT_FRACTION_BITS = 13  # + the leading bit = 14 bits: DeepSeek-V3's "about 14 bits" on H800
TC_BLOCK = 16  # products per block: the Hopper tensor-core model's block
PROMOTE_EVERY = 128  # DeepSeek-V3's promotion interval (GEMM sweep)
MLP_PROMOTE_EVERY = 32  # an interval that triggers on our MLP's reductions (64 and 128 long)


@dataclasses.dataclass(frozen=True)
class FinerRecipe(Recipe):
    """A run of this section: a :class:`~sim.report.recipe.Recipe` (its command spells every
    flag that differs from the default, the FP8 ones included) with the part (``finer`` or
    ``accumulation``) and the scaling granularity it stands for.

    >>> finer_recipes(steps=20)[2].command()
    'python -m sim train --precision fp8 --loss-scale static --scale 1024 --steps 20 --fp8-scaling none'
    """

    part: str = "finer"
    granularity: str = ""


def finer_recipes(steps: int = DEFAULT_STEPS, seed: int = 0, data: str = "digits", batch_size: int = 32,
                  hidden: Sequence[int] | None = None) -> list[FinerRecipe]:
    """The section's runs, on the suite's MLP with SGD (lr 0.05, momentum 0.9): seven "finer
    scales" runs from one global scale to one per block, then the two tensor-core accumulation
    runs (FP8 per-tensor delayed, like the ``fp8-delayed`` run they are compared with).

    >>> [(r.label, r.granularity) for r in finer_recipes(steps=10)][1:4]
    [('F2', 'global'), ('F3', 'global'), ('F4', 'per tensor')]
    """
    base = TrainConfig(steps=steps, seed=seed, data=data, batch_size=batch_size,
                       **({"hidden": tuple(hidden)} if hidden is not None else {}))
    replace = dataclasses.replace
    fp8 = replace(base, precision="fp8")
    delayed = replace(fp8, fp8_scaling="delayed")
    kept = replace(delayed, accumulate="tensorcore", tc_block=TC_BLOCK, tc_fraction_bits=KEPT_FRACTION_BITS)
    scale_text = f"2^{binary_exponent(GLOBAL_LOSS_SCALE)}"
    return [
        FinerRecipe(keys.FP32, "F1", "FP32 baseline", "the reference", replace(base, precision="fp32"),
                    granularity="none"),
        FinerRecipe(keys.FP8_GLOBAL, "F2", "FP8, no scaling", "what FP8's ranges do to unscaled tensors",
                    replace(fp8, fp8_scaling="none"), granularity="global"),
        FinerRecipe(keys.FP8_GLOBAL_LOSS_SCALE, "F3", f"FP8, no per-tensor scaling, loss scale {scale_text}",
                    "one global scale, the loss scale, for every gradient",
                    replace(fp8, fp8_scaling="none", loss_scale="static", scale=GLOBAL_LOSS_SCALE),
                    granularity="global"),
        FinerRecipe(keys.FP8_DELAYED, "F4", "FP8, per-tensor delayed scaling", "Transformer Engine's default: "
                    "the scale from the largest amax of the last 16 uses", delayed, granularity="per tensor"),
        FinerRecipe(keys.FP8_CURRENT, "F5", "FP8, per-tensor current scaling", "the scale from the tensor's own amax",
                    replace(fp8, fp8_scaling="current"), granularity="per tensor"),
        FinerRecipe(keys.MXFP8, "F6", "MXFP8 (E4M3, E8M0 scale per 32)", "one scale per block of 32",
                    replace(base, precision="mxfp8"), granularity="per block"),
        FinerRecipe(keys.NVFP4_RNE, "F7", "NVFP4 (E2M1, E4M3 scale per 16), RNE gradients",
                    "one scale per block of 16 on a 4-bit format",
                    replace(base, precision="nvfp4", grad_rounding="rne"), granularity="per block"),
        FinerRecipe(keys.NVFP4_SR, "F8", "NVFP4, stochastically rounded gradients",
                    "F7 with unbiased gradient rounding",
                    replace(base, precision="nvfp4", grad_rounding="sr"), granularity="per block"),
        FinerRecipe(keys.FP8_TC14, "A1", "FP8 delayed, 14-bit accumulation",
                    f"F4 summed by a tensor core keeping {KEPT_FRACTION_BITS + 1} bits", kept,
                    part="accumulation", granularity="per tensor"),
        FinerRecipe(keys.FP8_TC14_PROMOTE, "A2",
                    f"FP8 delayed, 14-bit accumulation, promoted every {MLP_PROMOTE_EVERY}",
                    f"A1 with the partial sum added into FP32 every {MLP_PROMOTE_EVERY} products",
                    replace(kept, promote_every=MLP_PROMOTE_EVERY), part="accumulation", granularity="per tensor"),
    ]


# Relative cost of a step by precision (measured on 2 cores), so the longest runs start first.
_COST = {"fp32": 1.0, "fp8": 1.0, "mxfp8": 1.6, "nvfp4": 1.6}


def run_cost(recipe: FinerRecipe) -> float:
    """A run's relative cost, for scheduling only (:func:`sim.report.finer.runs.finer_section`)."""
    return _COST[recipe.config.precision] * (2.0 if recipe.config.accumulate == "tensorcore" else 1.0)
