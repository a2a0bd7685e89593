"""The report's second story: finer scales, and accumulation (issue #13).

**Finer scales.** On the suite's network, data, seed and budget, FP8 and block-scaled recipes
differ only in how finely their scales follow the values: one global scale (none at all, or the
loss scale), one scale per tensor (delayed from an amax history, or current), one per block of
32 (MXFP8: E8M0) or 16 (NVFP4: E4M3, times an FP32 per-tensor scale), with NVFP4's gradients
rounded to nearest even or stochastically. Each run reports its test accuracy, its gradient
underflow per layer, and per tensor role (input, weight, grad_output) the share of nonzero
values quantised to zero and the share beyond the scaled range.

**Accumulation.** An FP8 GEMM whose adder keeps ~14 bits (the tensor-core model of
:class:`softfloat16.linalg.TensorCore` with ``KEPT_FRACTION_BITS`` = 13 fraction bits plus the
leading bit, blocks of ``TC_BLOCK`` products), with and without promotion to an FP32 accumulator
every K products, against FP32 accumulation: the GEMM error as a function of the reduction
length (:func:`accumulation_error`, against an exact reference), and the effect on training.
Our MLP's reductions are short (64, 128 and 128 inputs, 10 classes, and the batch for weight
gradients), so DeepSeek-V3's promotion interval of 128 never triggers there; the training runs
promote every ``MLP_PROMOTE_EVERY`` products instead.

Entry points: :func:`finer_section` runs everything and returns a JSON-able dict (the same
arguments give the same dict, byte for byte once dumped, whatever the number of workers), or
:func:`finer_results` builds that dict from runs made elsewhere (one pool with the main suite);
:func:`render_finer_markdown` writes its part of report.md; :func:`draw_finer_figures` draws its
PNG figures (:mod:`sim.figures_finer`, matplotlib imported only then). Each claim's verdict comes
from a function of the measured numbers with its thresholds stated here.

>>> [recipe.key for recipe in finer_recipes(steps=10)][:4]
['fp32', 'fp8-global', 'fp8-global-loss-scale', 'fp8-delayed']
>>> underflow_verdict(global_underflow=0.05, per_tensor_underflow=0.001)
'Supported'
"""
from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

import softfloat16 as sf
import softfloat16.linalg as linalg
from sim.config import DEFAULT_AMAX_HISTORY
from sim.gemm import Accumulation
from sim.report.formatting import binary_exponent, number, percent
from sim.report.measures import layer_entries, overall_fraction
from sim.report.recipes import DEFAULT_STEPS, Recipe, evaluation_interval
from sim.report.suite import run_suite
from sim.train import TrainConfig

__all__ = [
    "ACCUMULATION_GROWS", "ACCURACY_TOLERANCE", "DEFAULT_K_VALUES", "FINER_FIGURE_CAPTIONS", "FinerRecipe",
    "GLOBAL_LOSS_SCALE", "KEPT_FRACTION_BITS", "MLP_PROMOTE_EVERY", "PROMOTE_EVERY", "ROLES", "TC_BLOCK",
    "UNDERFLOW_MATTERS", "accumulation_error", "accumulation_verdict", "accuracy_verdict", "combine_verdicts",
    "draw_finer_figures", "exact_matmul", "finer_claims", "finer_recipes", "finer_results", "finer_section",
    "fp8_operands", "granularity_verdict", "reduction_lengths", "render_finer_markdown", "rounding_verdict",
    "underflow_verdict",
]

ROLES = ("input", "weight", "grad_output")
E4M3 = sf.fp8_e4m3fn

# --- the recipes' constants ---------------------------------------------------------------------
GLOBAL_LOSS_SCALE = 1024.0  # the main suite's textbook static scale, as FP8's one global scale
KEPT_FRACTION_BITS = 13  # + the leading bit = 14 bits: DeepSeek-V3's "about 14 bits" on H800
TC_BLOCK = 16  # products per block: the Hopper tensor-core model's block
PROMOTE_EVERY = 128  # DeepSeek-V3's promotion interval (GEMM sweep)
MLP_PROMOTE_EVERY = 32  # an interval that triggers on our MLP's reductions (64 and 128 long)

# --- the GEMM sweep ----------------------------------------------------------------------------
DEFAULT_K_VALUES = (32, 64, 128, 256, 512, 1024, 2048, 4096)
GEMM_SHAPE = (32, 32)  # rows and columns of each product: 1,024 outputs per K and operand kind
CALIBRATION_FRACTION_BITS = (12, 13, 14, 15, 16)  # the kept-bits sweep at the largest K
DEEPSEEK_K, DEEPSEEK_ERROR = 4096, 0.02  # DeepSeek-V3: "a maximum relative error of nearly 2%" at K = 4096
_GEMM_STREAM = 13  # distinct from sim.data's, sim.nn's and sim.gemm's stream tags

# --- thresholds of the verdicts ------------------------------------------------------------------
ACCURACY_TOLERANCE = 0.01  # 1 point of test accuracy (3.6 of digits' 360 test examples), second-half mean
UNDERFLOW_MATTERS = 0.01  # a recipe "loses gradients" when >= 1% of all gradient entries underflow
FEWER_BY = 2.0  # "recovers" / "finer loses fewer": at least this factor fewer
ACCUMULATION_GROWS = 10.0  # the 14-bit error at the largest K is >= 10x that at the smallest K
ACCUMULATION_MATTERS = 1e-3  # ... and reaches 0.1% (relative to the sum of |products|)
PROMOTION_BOUNDED = 2.0  # promoted error at the largest K <= 2x its error at K = PROMOTE_EVERY
PROMOTION_GAIN = 10.0  # ... and <= 1/10 of the unpromoted error there


# --- the runs ------------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class FinerRecipe(Recipe):
    """A run of this section: a :class:`~sim.report.recipes.Recipe` (its command spells every
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
        FinerRecipe("fp32", "F1", "FP32 baseline", "the reference", replace(base, precision="fp32"),
                    granularity="none"),
        FinerRecipe("fp8-global", "F2", "FP8, no scaling", "what FP8's ranges do to unscaled tensors",
                    replace(fp8, fp8_scaling="none"), granularity="global"),
        FinerRecipe("fp8-global-loss-scale", "F3", f"FP8, no per-tensor scaling, loss scale {scale_text}",
                    "one global scale, the loss scale, for every gradient",
                    replace(fp8, fp8_scaling="none", loss_scale="static", scale=GLOBAL_LOSS_SCALE),
                    granularity="global"),
        FinerRecipe("fp8-delayed", "F4", "FP8, per-tensor delayed scaling", "Transformer Engine's default: "
                    "the scale from the largest amax of the last 16 uses", delayed, granularity="per tensor"),
        FinerRecipe("fp8-current", "F5", "FP8, per-tensor current scaling", "the scale from the tensor's own amax",
                    replace(fp8, fp8_scaling="current"), granularity="per tensor"),
        FinerRecipe("mxfp8", "F6", "MXFP8 (E4M3, E8M0 scale per 32)", "one scale per block of 32",
                    replace(base, precision="mxfp8"), granularity="per block"),
        FinerRecipe("nvfp4-rne", "F7", "NVFP4 (E2M1, E4M3 scale per 16), RNE gradients",
                    "one scale per block of 16 on a 4-bit format",
                    replace(base, precision="nvfp4", grad_rounding="rne"), granularity="per block"),
        FinerRecipe("nvfp4-sr", "F8", "NVFP4, stochastically rounded gradients", "F7 with unbiased gradient rounding",
                    replace(base, precision="nvfp4", grad_rounding="sr"), granularity="per block"),
        FinerRecipe("fp8-tc14", "A1", "FP8 delayed, 14-bit accumulation",
                    f"F4 summed by a tensor core keeping {KEPT_FRACTION_BITS + 1} bits", kept,
                    part="accumulation", granularity="per tensor"),
        FinerRecipe("fp8-tc14-promote", "A2", f"FP8 delayed, 14-bit accumulation, promoted every {MLP_PROMOTE_EVERY}",
                    f"A1 with the partial sum added into FP32 every {MLP_PROMOTE_EVERY} products",
                    replace(kept, promote_every=MLP_PROMOTE_EVERY), part="accumulation", granularity="per tensor"),
    ]


# Relative cost of a step (measured on 2 cores), so the longest runs start first.
_COST = {"fp32": 1.0, "fp8": 1.0, "mxfp8": 1.6, "nvfp4": 1.6}


def _cost(recipe: FinerRecipe) -> float:
    return _COST[recipe.config.precision] * (2.0 if recipe.config.accumulate == "tensorcore" else 1.0)


# --- the GEMM sweep -------------------------------------------------------------------------------

def fp8_operands(rows: int, depth: int, columns: int, seed: int, signed: bool) -> tuple[np.ndarray, np.ndarray]:
    """Random E4M3FN operands ``a`` (rows x depth) and ``b`` (depth x columns): magnitudes uniform
    on [0, 2) rounded to E4M3, signs random when ``signed``. Drawn from the raw PCG64 words of
    ``SeedSequence([seed, stream, depth, signed])`` (stable across numpy versions).

    >>> a, b = fp8_operands(2, 3, 4, seed=0, signed=False)
    >>> a.shape, b.shape, a.dtype.name, bool((E4M3.to_float(a) >= 0).all())
    ((2, 3), (3, 4), 'uint8', True)
    """
    count = rows * depth + depth * columns
    words = np.random.PCG64(np.random.SeedSequence([seed, _GEMM_STREAM, depth, int(signed)])).random_raw(count)
    values = (words >> np.uint64(11)).astype(np.float64) * 2.0**-52  # the top 53 bits: [0, 2)
    if signed:  # the lowest bit, which the magnitude does not use
        values = np.where(words & np.uint64(1), -values, values)
    bits = np.asarray(E4M3.from_float(values))
    return bits[:rows * depth].reshape(rows, depth), bits[rows * depth:].reshape(depth, columns)


def exact_matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a @ b`` of E4M3FN bit arrays, exactly, as float64. Every E4M3 value is a multiple of
    2^-9 below 2^9, so every product is a multiple of 2^-18 below 2^18, and every partial sum
    of up to 2^17 of them is a multiple of 2^-18 below 2^35: exact in float64's 53 bits,
    whatever order or fused operations the float64 matmul uses.

    >>> a = E4M3.from_float(np.array([[448.0, 2.0**-9]]))
    >>> float(exact_matmul(a, a.T)[0, 0]) == 448.0**2 + 2.0**-18
    True
    """
    if a.shape[1] > 1 << 17:
        raise ValueError(f"a: reductions longer than 2^17 are not exact in float64, got {a.shape[1]}")
    return np.asarray(E4M3.to_float(a), np.float64) @ np.asarray(E4M3.to_float(b), np.float64)


def _accumulations(fraction_bits: int, promote_every: int | None) -> dict[str, Accumulation]:
    core = linalg.TensorCore(products_per_block=TC_BLOCK, fraction_bits=fraction_bits)
    return {"fp32": Accumulation(), "kept": Accumulation("tensorcore", core),
            "promoted": Accumulation("tensorcore", core, promote_every)}


def _errors(a: np.ndarray, b: np.ndarray, accumulation: Accumulation) -> np.ndarray:
    """Per output: |computed - exact| / sum_k |a_ik b_kj| (the relative error when no term is
    negative); outputs whose products are all zero are left out."""
    exact = exact_matmul(a, b)
    magnitude = np.abs(np.asarray(E4M3.to_float(a), np.float64)) @ np.abs(np.asarray(E4M3.to_float(b), np.float64))
    computed = np.asarray(sf.fp32.to_float(accumulation.matmul(a, b, E4M3, sf.fp32)), np.float64)
    keep = magnitude > 0
    return np.abs(computed[keep] - exact[keep]) / magnitude[keep]


def accumulation_error(k_values: Sequence[int] = DEFAULT_K_VALUES, shape: tuple[int, int] = GEMM_SHAPE,
                       seed: int = 0) -> dict[str, Any]:
    """The error of an E4M3 x E4M3 GEMM with FP32 output, against the exact sum, for each
    reduction length K: FP32 accumulation (``fp32``, k ascending), the tensor-core model keeping
    ``KEPT_FRACTION_BITS`` fraction bits in blocks of ``TC_BLOCK`` (``kept``), and the same with
    the partial sum added into FP32 every ``PROMOTE_EVERY`` products (``promoted``). Two operand
    kinds: ``nonnegative`` (no cancellation: the error is the relative error, DeepSeek-V3's
    setting) and ``signed``. The error of one output is ``|computed - exact| / sum |products|``;
    per K, the mean and the maximum over the outputs. ``calibration``: the nonnegative mean
    and maximum error at the largest K for each kept fraction width of
    ``CALIBRATION_FRACTION_BITS``.

    >>> result = accumulation_error(k_values=(16, 64), shape=(4, 4))
    >>> result["nonnegative"]["fp32"]["mean"][0], result["nonnegative"]["kept"]["mean"][1] > 0
    (0.0, True)
    """
    rows, columns = shape
    accumulations = _accumulations(KEPT_FRACTION_BITS, PROMOTE_EVERY)
    result: dict[str, Any] = {
        "k": list(k_values), "shape": [rows, columns], "seed": seed, "tc_block": TC_BLOCK,
        "fraction_bits": KEPT_FRACTION_BITS, "promote_every": PROMOTE_EVERY,
    }
    for kind in ("nonnegative", "signed"):
        curves: dict[str, dict[str, list[float]]] = {name: {"mean": [], "max": []} for name in accumulations}
        for depth in k_values:
            a, b = fp8_operands(rows, depth, columns, seed, signed=kind == "signed")
            for name, accumulation in accumulations.items():
                errors = _errors(a, b, accumulation)
                curves[name]["mean"].append(float(errors.mean()) if errors.size else 0.0)
                curves[name]["max"].append(float(errors.max()) if errors.size else 0.0)
        result[kind] = curves
    largest = max(k_values)
    a, b = fp8_operands(rows, largest, columns, seed, signed=False)
    errors = [_errors(a, b, _accumulations(bits, None)["kept"]) for bits in CALIBRATION_FRACTION_BITS]
    result["calibration"] = {
        "k": largest, "fraction_bits": list(CALIBRATION_FRACTION_BITS),
        "mean": [float(e.mean()) for e in errors], "max": [float(e.max()) for e in errors],
    }
    return result


def reduction_lengths(network: Sequence[int], batch_size: int) -> list[int]:
    """The reduction lengths K of an MLP's products: each layer's input width (forward), the
    output widths of the layers after the first (dgrad; the first layer's input needs no
    gradient), and the batch (wgrad).

    >>> reduction_lengths([64, 128, 128, 128, 10], 32)
    [10, 32, 64, 128]
    """
    return sorted({*network[:-1], *network[2:], batch_size})


# --- one run, compacted ------------------------------------------------------------------------------

def _role_counts(run: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Per tensor role, over all layers, steps and uses: nonzero values, those quantised to zero,
    those beyond the scaled range, and the two shares."""
    names = list(run["quantization"])
    per_step = run["per_step"]
    roles = {}
    for role in ROLES:
        columns = [i for i, name in enumerate(names) if name.rsplit(".", 1)[1] == role]
        if not columns:
            continue
        counts = {key: sum(step[i] for step in per_step[f"quantized_{key}"] for i in columns)
                  for key in ("nonzero", "underflow", "saturated")}
        nonzero = counts["nonzero"]
        roles[role] = {**counts, "underflow_share": counts["underflow"] / nonzero if nonzero else 0.0,
                       "saturated_share": counts["saturated"] / nonzero if nonzero else 0.0}
    return roles


def _late_accuracy(curve: dict[str, list[Any]], start: int) -> dict[str, float] | None:
    values = [a for step, a in zip(curve["step"], curve["accuracy"]) if step >= start]
    if not values:
        return None
    return {"mean": sum(values) / len(values), "min": min(values), "max": max(values)}


def _compact(recipe: FinerRecipe, run: dict[str, Any], late_start: int) -> dict[str, Any]:
    """What this section keeps of a run_recipe result: the numbers its tables, claims and
    figures need (the per-step amax and scale only for the delayed run, figure a)."""
    roles = _role_counts(run) if run["quantization"] else {}
    nonzero = sum(r["nonzero"] for r in roles.values())
    entry = {
        "label": recipe.label, "title": recipe.title, "purpose": recipe.purpose, "part": recipe.part,
        "granularity": recipe.granularity, "command": run["command"], "config": run["config"],
        "network": run["network"], "layers": run["layers"],
        "final_accuracy": run["final_accuracy"], "test_loss": run["test_loss"], "final_loss": run["final_loss"],
        "late_accuracy": _late_accuracy(run["diagnostics"]["test_curve"], late_start),
        "test_curve": {"step": run["diagnostics"]["test_curve"]["step"],
                       "accuracy": run["diagnostics"]["test_curve"]["accuracy"]},
        "skipped_steps": len(run["skipped_steps"]),
        "underflow_fraction": run["underflow_fraction"],
        "underflow_overall": overall_fraction(run["underflow_fraction"], layer_entries(run["network"])),
        "quantization": run["quantization"],
        "roles": roles,
        "lost_share": (sum(r["underflow"] + r["saturated"] for r in roles.values()) / nonzero) if nonzero else None,
        "loss": run["per_step"]["loss"],
        "weights_sha256": run["weights_sha256"],
    }
    if recipe.key == "fp8-delayed":
        per_step = run["per_step"]
        entry["tensor_trace"] = {
            "tensors": list(run["quantization"]),
            **{key: per_step[column] for key, column in (
                ("amax", "tensor_amax"), ("scale", "tensor_scale"), ("saturated", "quantized_saturated"),
                ("underflow", "quantized_underflow"), ("nonzero", "quantized_nonzero"))},
        }
    return entry


def finer_section(steps: int = DEFAULT_STEPS, seed: int = 0, data: str = "digits", workers: int = 1, *,
                  batch_size: int = 32, hidden: Sequence[int] | None = None,
                  k_values: Sequence[int] = DEFAULT_K_VALUES, gemm_shape: tuple[int, int] = GEMM_SHAPE,
                  on_progress: Callable[[int, int], None] | None = None) -> dict[str, Any]:
    """Run the section: its training runs (in ``workers`` processes, via
    :func:`sim.report.suite.run_suite`), the GEMM sweep, and the claims. Returns a JSON-able
    dict that depends on the arguments only (not on ``workers`` or timing).
    ``on_progress(run index, steps done)``: as run_suite's, indices in :func:`finer_recipes`
    order.

    >>> results = finer_section(steps=2, data="synthetic", batch_size=8, hidden=(32,), k_values=(32,),
    ...                         gemm_shape=(2, 2))
    >>> list(results)
    ['section', 'runs', 'accumulation', 'claims']
    >>> results["runs"]["fp8-delayed"]["roles"]["weight"]["nonzero"] > 0
    True
    """
    recipes = finer_recipes(steps=steps, seed=seed, data=data, batch_size=batch_size, hidden=hidden)
    # the longest runs first, so two workers finish together; results go back to recipe order
    order = sorted(range(len(recipes)), key=lambda i: -_cost(recipes[i]))
    notify = (lambda position, step: on_progress(order[position], step)) if on_progress else None
    ran = run_suite([recipes[i] for i in order], workers, notify)
    runs: list[dict[str, Any]] = [{} for _ in recipes]
    for position, index in enumerate(order):
        runs[index] = ran[position]
    return finer_results(recipes, runs, k_values, gemm_shape)


def finer_results(recipes: Sequence[FinerRecipe], runs: Sequence[dict[str, Any]],
                  k_values: Sequence[int] = DEFAULT_K_VALUES, gemm_shape: tuple[int, int] = GEMM_SHAPE
                  ) -> dict[str, Any]:
    """The section's results from its runs, ``runs[i]`` being :func:`sim.report.suite.run_recipe`'s
    result for ``recipes[i]`` (:func:`finer_recipes`): so a caller may run them in one pool with
    other recipes. Adds the GEMM sweep (seeded with the runs' seed) and the claims."""
    first = recipes[0].config.resolved()
    steps, seed = first.steps, first.seed
    late_start = steps // 2
    network = runs[0]["network"]
    section = {
        "steps": steps, "seed": seed, "data": first.data, "batch_size": first.batch_size, "network": network,
        "evaluation_interval": evaluation_interval(steps), "late_start": late_start,
        "reduction_lengths": reduction_lengths(network, first.batch_size),
        "constants": {
            "global_loss_scale": GLOBAL_LOSS_SCALE, "amax_history": DEFAULT_AMAX_HISTORY,
            "tc_block": TC_BLOCK, "kept_fraction_bits": KEPT_FRACTION_BITS, "promote_every": PROMOTE_EVERY,
            "mlp_promote_every": MLP_PROMOTE_EVERY,
        },
        "thresholds": {
            "accuracy_tolerance": ACCURACY_TOLERANCE, "underflow_matters": UNDERFLOW_MATTERS, "fewer_by": FEWER_BY,
            "accumulation_grows": ACCUMULATION_GROWS, "accumulation_matters": ACCUMULATION_MATTERS,
            "promotion_bounded": PROMOTION_BOUNDED, "promotion_gain": PROMOTION_GAIN,
        },
    }
    document = {
        "section": section,
        "runs": {recipe.key: _compact(recipe, run, late_start) for recipe, run in zip(recipes, runs)},
        "accumulation": accumulation_error(k_values, gemm_shape, seed),
    }
    document["claims"] = [{"claim": claim, "verdict": verdict, "text": text}
                          for claim, verdict, text in finer_claims(document)]
    # strict JSON: the emulator's non-finite values (a diverged run) become None, as in train --json
    return json.loads(json.dumps(document, default=_no_numpy), parse_constant=lambda _: None)


def _no_numpy(value: Any) -> Any:
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"not JSON-able: {value!r}")


# --- verdicts: numbers in, a verdict out -----------------------------------------------------------------

SUPPORTED, PARTLY, NOT_SUPPORTED = "Supported", "Partly supported", "Not supported"


def underflow_verdict(global_underflow: float, per_tensor_underflow: float) -> str:
    """"FP8 without per-tensor scaling loses gradients to underflow": Supported when at least
    ``UNDERFLOW_MATTERS`` of the gradient entries underflow without scaling and per-tensor
    scaling cuts that by ``FEWER_BY``; Partly when they underflow but per-tensor scaling does
    not help that much; else Not supported.

    >>> [underflow_verdict(*pair) for pair in ((0.05, 0.001), (0.05, 0.04), (0.001, 0.0))]
    ['Supported', 'Partly supported', 'Not supported']
    """
    if global_underflow < UNDERFLOW_MATTERS:
        return NOT_SUPPORTED
    return SUPPORTED if per_tensor_underflow * FEWER_BY <= global_underflow else PARTLY


def accuracy_verdict(gap: float, run_high: float, reference_low: float) -> str:
    """"A run matches a reference's accuracy", from the run's second-half mean accuracy minus the
    reference's (``gap``), the run's highest and the reference's lowest second-half accuracy:
    Supported when the gap is within ``ACCURACY_TOLERANCE`` (or the run does better); Partly when
    it is larger but the second-half ranges overlap (one seed cannot tell such a difference from
    noise); Not supported when the run stays below the reference all through the second half
    (the main suite's rule for a real difference).

    >>> [accuracy_verdict(*n) for n in ((-0.005, 0.95, 0.9), (-0.02, 0.95, 0.9), (-0.05, 0.9, 0.95))]
    ['Supported', 'Partly supported', 'Not supported']
    """
    if gap >= -ACCURACY_TOLERANCE:
        return SUPPORTED
    return PARTLY if run_high >= reference_low else NOT_SUPPORTED


def combine_verdicts(verdicts: Sequence[str]) -> str:
    """One verdict for a claim about several runs: Supported (or Not supported) when every run's
    is, else Partly supported.

    >>> combine_verdicts(["Supported", "Supported"]), combine_verdicts(["Supported", "Not supported"])
    ('Supported', 'Partly supported')
    """
    verdicts = list(verdicts)
    for verdict in (SUPPORTED, NOT_SUPPORTED):
        if verdicts and all(v == verdict for v in verdicts):
            return verdict
    return PARTLY


def rounding_verdict(sr_gap: float, rne_gap: float) -> str:
    """"NVFP4 with SR gradients is closer to FP32 than with RNE", from each one's gap to FP32
    (second-half mean accuracy minus FP32's): Supported when SR's gap is smaller by more than
    ``ACCURACY_TOLERANCE``; Partly when smaller by less (within one seed's noise); else Not
    supported.

    >>> [rounding_verdict(*gaps) for gaps in ((-0.01, -0.05), (-0.01, -0.015), (-0.03, -0.01))]
    ['Supported', 'Partly supported', 'Not supported']
    """
    sr, rne = abs(sr_gap), abs(rne_gap)
    if sr >= rne:
        return NOT_SUPPORTED
    return SUPPORTED if rne - sr > ACCURACY_TOLERANCE else PARTLY


def granularity_verdict(lost: Sequence[float]) -> str:
    """"Finer scales lose fewer values", from the shares lost (underflow + saturation) of the
    granularities from coarsest to finest: Supported when each finer one loses at least
    ``FEWER_BY`` times fewer; Partly when the finest loses ``FEWER_BY`` times fewer than the
    coarsest but not at every step; else Not supported.

    >>> [granularity_verdict(s) for s in ((0.2, 0.05, 0.01), (0.2, 0.01, 0.02), (0.05, 0.06, 0.04))]
    ['Supported', 'Partly supported', 'Not supported']
    """
    if all(finer * FEWER_BY <= coarser for coarser, finer in zip(lost, lost[1:])):
        return SUPPORTED
    return PARTLY if lost[-1] * FEWER_BY <= lost[0] else NOT_SUPPORTED


def accumulation_verdict(kept: Sequence[float], promoted: Sequence[float], k_values: Sequence[int]) -> str:
    """"14-bit accumulation loses accuracy as K grows, promotion every 128 fixes it", from the
    mean errors per K: the kept-bits error grows (``ACCUMULATION_GROWS`` times from the
    smallest K to the largest, and reaches ``ACCUMULATION_MATTERS``); promotion bounds it (at
    the largest K within ``PROMOTION_BOUNDED`` times its error at K = ``PROMOTE_EVERY``, and
    ``PROMOTION_GAIN`` times below the unpromoted one). Supported when both hold, Partly when
    the error grows and promotion helps without meeting both bounds, else Not supported.

    >>> k = (128, 4096)
    >>> [accumulation_verdict(*c, k) for c in (((1e-4, 0.05), (1e-4, 1.2e-4)), ((1e-4, 0.05), (1e-4, 0.01)),
    ...                                         ((1e-4, 2e-4), (1e-4, 1e-4)))]
    ['Supported', 'Partly supported', 'Not supported']
    """
    grows = kept[-1] >= ACCUMULATION_GROWS * kept[0] and kept[-1] >= ACCUMULATION_MATTERS
    at_interval = promoted[k_values.index(PROMOTE_EVERY)] if PROMOTE_EVERY in k_values else promoted[0]
    bounded = promoted[-1] <= PROMOTION_BOUNDED * at_interval
    better = promoted[-1] * PROMOTION_GAIN <= kept[-1]
    if grows and bounded and better:
        return SUPPORTED
    return PARTLY if grows and promoted[-1] < kept[-1] else NOT_SUPPORTED


# --- claims: the verdicts with their numbers ---------------------------------------------------------

def _points(gap: float) -> str:
    return f"{100 * gap:+.1f} points"


def _accuracy(run: dict[str, Any]) -> str:
    late = run["late_accuracy"]
    if late is None:
        return f"{percent(run['final_accuracy'])} at the end"
    return (f"{percent(late['mean'])} (second half, {percent(late['min'])}-{percent(late['max'])}; "
            f"{percent(run['final_accuracy'])} at the end)")


def _gap(run: dict[str, Any], reference: dict[str, Any]) -> float:
    """Second-half mean accuracy of ``run`` minus ``reference``'s (final accuracy without curves)."""
    def mean(r: dict[str, Any]) -> float:
        return r["late_accuracy"]["mean"] if r["late_accuracy"] else r["final_accuracy"]
    return mean(run) - mean(reference)


def _range(run: dict[str, Any]) -> tuple[float, float]:
    late = run["late_accuracy"]
    return (late["min"], late["max"]) if late else (run["final_accuracy"], run["final_accuracy"])


def _judge(run: dict[str, Any], reference: dict[str, Any]) -> str:
    """:func:`accuracy_verdict` of ``run`` against ``reference``."""
    return accuracy_verdict(_gap(run, reference), _range(run)[1], _range(reference)[0])


def _hurt_text(run: dict[str, Any], reference: dict[str, Any]) -> str:
    """Whether ``run``'s accuracy is clearly below ``reference``'s, as a clause."""
    if _range(run)[1] < _range(reference)[0]:
        return f"run {run['label']} stays below run {reference['label']} all through the second half"
    return f"the second-half ranges of runs {run['label']} and {reference['label']} overlap"


def _layers(run: dict[str, Any]) -> str:
    return ", ".join(f"{name} {percent(value)}" for name, value in run["underflow_fraction"].items())


def _roles(run: dict[str, Any], share: str) -> str:
    return ", ".join(f"{role} {percent(counts[share])}" for role, counts in run["roles"].items())


_ACCURACY_RULE = (f"Rule: Supported within {100 * ACCURACY_TOLERANCE:.1f} points of {{reference}} second-half mean "
                  "(or above); Partly when further below but the second-half ranges overlap (one seed cannot tell "
                  "that from noise); Not supported when the run stays below all through the second half.")


def finer_claims(document: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(claim, verdict, explanation) for each claim whose runs are in ``document`` (the dict
    :func:`finer_section` builds, before its claims).

    >>> finer_claims({"runs": {}, "accumulation": {"k": []}, "section": {}})
    []
    """
    out = []
    for check in (_claim_underflow, _claim_granularity, _claim_per_tensor, _claim_mxfp8, _claim_nvfp4,
                  _claim_accumulation, _claim_short_reductions):
        try:
            out.append(check(document))
        except (KeyError, ValueError, IndexError):  # a run or a measurement this claim needs is missing
            continue
    return out


def _claim_underflow(document: dict[str, Any]) -> tuple[str, str, str]:
    runs = document["runs"]
    plain, scaled, delayed = runs["fp8-global"], runs["fp8-global-loss-scale"], runs["fp8-delayed"]
    verdict = underflow_verdict(plain["underflow_overall"], delayed["underflow_overall"])
    grad = plain["roles"]["grad_output"]
    text = (f"Without any scaling (run {plain['label']}), {percent(plain['underflow_overall'])} of all gradient "
            f"entries are zero though the FP32 backward pass on the same forward values gives a nonzero value "
            f"({_layers(plain)}); {percent(grad['underflow_share'])} of the nonzero output gradients quantised to "
            f"E5M2 became zero. With one scale per tensor (run {delayed['label']}, delayed) "
            f"{percent(delayed['underflow_overall'])} underflow ({_layers(delayed)}). One global scale, the loss "
            f"scale {number(GLOBAL_LOSS_SCALE)} (run {scaled['label']}), brings it to "
            f"{percent(scaled['underflow_overall'])} ({_layers(scaled)}); it lifts every gradient by the same "
            f"{binary_exponent(GLOBAL_LOSS_SCALE)} binades and does nothing for the forward operands. Test accuracy: "
            f"{_accuracy(plain)} without scaling, {_accuracy(scaled)} with the loss scale, {_accuracy(delayed)} "
            f"per tensor, against {_accuracy(runs['fp32'])} in FP32: {_hurt_text(plain, runs['fp32'])}. "
            f"Rule: at least {percent(UNDERFLOW_MATTERS)} of entries underflow, and per-tensor scaling "
            f"divides that by {number(FEWER_BY)} or more.")
    return "FP8 without per-tensor scaling loses gradients to underflow", verdict, text


_GRANULARITY_RUNS = ("fp8-global", "fp8-delayed", "mxfp8")


def _claim_granularity(document: dict[str, Any]) -> tuple[str, str, str]:
    runs = document["runs"]
    chosen = [runs[key] for key in _GRANULARITY_RUNS]
    lost = [run["lost_share"] for run in chosen]
    verdict = granularity_verdict(lost)
    parts = "; ".join(f"{run['granularity']} (run {run['label']}, {run['title']}): {percent(run['lost_share'])} "
                      f"(underflow {_roles(run, 'underflow_share')}; saturated {_roles(run, 'saturated_share')})"
                      for run in chosen)
    others = [runs[k] for k in ("fp8-global-loss-scale", "fp8-current", "nvfp4-rne") if k in runs]
    other_text = ", ".join(f"run {r['label']} {percent(r['lost_share'])}" for r in others)
    text = (f"Share of the nonzero values of all quantised tensors (every layer, step and use) that became zero "
            f"or were beyond the scaled range: {parts}. For comparison: {other_text} (figure finer-b). ")
    block = [runs[k] for k in ("mxfp8", "nvfp4-rne") if k in runs]
    if block:
        text += ("Per block, what is lost comes less from the granularity than from the recipes' other choices: "
                 + "; ".join(_block_losses(run) for run in block) + ". ")
    text += f"Rule: each finer granularity loses at least {number(FEWER_BY)} times fewer."
    return "Finer scales lose fewer values: global, then per tensor, then per block", verdict, text


def _block_losses(run: dict[str, Any]) -> str:
    """Why a block-scaled run loses values, with its measured shares."""
    roles = run["roles"]
    saturated = _roles(run, "saturated_share")
    if run["config"]["precision"] == "mxfp8":
        return (f"MXFP8 (run {run['label']}) saturates {saturated}: the OCP scale 2^(floor(log2 amax) - 8) maps a "
                "block's amax into [256, 512), and E4M3 ends at 448; and its gradients are E4M3, 17.8 binades from "
                "2^-9 to 448, where per-tensor FP8 gives them E5M2's 31.8, so "
                f"{percent(roles['grad_output']['underflow_share'])} of them become zero")
    return (f"NVFP4 (run {run['label']}) saturates {saturated}: its block scale is amax / 6 rounded to nearest in "
            "E4M3, and where that rounds down the block's largest values lie beyond 6 times it; and E2M1's nonzero "
            f"values span only 3.6 binades (0.5 to 6), so {_roles(run, 'underflow_share')} become zero")


def _claim_per_tensor(document: dict[str, Any]) -> tuple[str, str, str]:
    runs = document["runs"]
    fp32 = runs["fp32"]
    modes = [runs["fp8-delayed"], runs["fp8-current"]]
    gaps = [_gap(run, fp32) for run in modes]
    text = (f"Second-half test accuracy against FP32 (run {fp32['label']}, {_accuracy(fp32)}): "
            + "; ".join(f"run {run['label']} ({run['title']}) {_accuracy(run)}, {_points(gap)}"
                        for run, gap in zip(modes, gaps))
            + ". Saturation under delayed scaling, where a tensor's amax outgrows its history: "
            + _roles(modes[0], "saturated_share")
            + f"; under current scaling: {_roles(modes[1], 'saturated_share')}. "
            + _ACCURACY_RULE.format(reference="FP32's"))
    verdict = combine_verdicts([_judge(run, fp32) for run in modes])
    return "Per-tensor scaling recovers FP32 accuracy", verdict, text


def _claim_mxfp8(document: dict[str, Any]) -> tuple[str, str, str]:
    runs = document["runs"]
    mx, fp8 = runs["mxfp8"], runs["fp8-delayed"]
    gap = _gap(mx, fp8)
    text = (f"Run {mx['label']} (MXFP8) {_accuracy(mx)}, against {_accuracy(fp8)} for run {fp8['label']} (FP8 "
            f"per-tensor delayed): {_points(gap)}. Gradient underflow: {percent(mx['underflow_overall'])} against "
            f"{percent(fp8['underflow_overall'])}; values lost in quantisation {percent(mx['lost_share'])} against "
            f"{percent(fp8['lost_share'])}. " + _ACCURACY_RULE.format(reference=f"run {fp8['label']}'s"))
    return "MXFP8 matches per-tensor FP8", _judge(mx, fp8), text


def _claim_nvfp4(document: dict[str, Any]) -> tuple[str, str, str]:
    runs = document["runs"]
    fp32, rne, sr = runs["fp32"], runs["nvfp4-rne"], runs["nvfp4-sr"]
    rne_gap, sr_gap = _gap(rne, fp32), _gap(sr, fp32)
    text = (f"Against FP32's {_accuracy(fp32)}: RNE gradients (run {rne['label']}) {_accuracy(rne)}, "
            f"{_points(rne_gap)}; SR gradients (run {sr['label']}) {_accuracy(sr)}, {_points(sr_gap)}. "
            f"Output gradients quantised to zero: {percent(rne['roles']['grad_output']['underflow_share'])} with RNE, "
            f"{percent(sr['roles']['grad_output']['underflow_share'])} with SR (SR keeps a small value with a "
            f"probability proportional to it, so it is unbiased where RNE flushes); gradient entries underflowed "
            f"{percent(rne['underflow_overall'])} and {percent(sr['underflow_overall'])}. Rule: SR's gap to FP32 "
            f"smaller than RNE's by more than {_points(ACCURACY_TOLERANCE)[1:]} (one seed: a smaller difference is "
            "noise).")
    return "NVFP4 with SR gradients is closer to FP32 than with RNE", rounding_verdict(sr_gap, rne_gap), text


def _claim_accumulation(document: dict[str, Any]) -> tuple[str, str, str]:
    sweep = document["accumulation"]
    k_values = sweep["k"]
    curves = sweep["nonnegative"]
    kept, promoted, fp32 = (curves[name]["mean"] for name in ("kept", "promoted", "fp32"))
    verdict = accumulation_verdict(kept, promoted, k_values)
    signed = sweep["signed"]
    calibration = sweep["calibration"]
    bits_text = ", ".join(f"{b + 1} bits {_sci(e)}" for b, e in zip(calibration["fraction_bits"],
                                                                   calibration["mean"]))
    text = (f"E4M3 x E4M3 products, {sweep['shape'][0]}x{sweep['shape'][1]} outputs per K, nonnegative operands, "
            f"mean relative error against the exact sum: with {sweep['fraction_bits'] + 1} kept bits "
            f"(blocks of {sweep['tc_block']}), {_sci(kept[0])} at K = {k_values[0]} and {_sci(kept[-1])} at K = "
            f"{k_values[-1]} (max {_sci(curves['kept']['max'][-1])}); promoted into FP32 every "
            f"{sweep['promote_every']} products, {_sci(promoted[-1])} at K = {k_values[-1]}; FP32 accumulation "
            f"{_sci(fp32[-1])}. The adder truncates each term to the quantum of the running sum, so each "
            "product loses a share of itself that grows with the sum: the error grows about linearly in K until "
            f"promotion restarts the sum. With signed operands the sums cancel and the errors are smaller "
            f"(relative to the sum of |products|: {_sci(signed['kept']['mean'][-1])} kept, "
            f"{_sci(signed['promoted']['mean'][-1])} promoted at K = {k_values[-1]}). At K = {calibration['k']} "
            f"the mean error by kept bits is {bits_text}")
    if calibration["k"] == DEEPSEEK_K:
        enough = [b + 1 for b, e in zip(calibration["fraction_bits"], calibration["max"]) if e <= DEEPSEEK_ERROR]
        text += (f" (maximum {', '.join(_sci(e) for e in calibration['max'])}): in this model DeepSeek-V3's "
                 f"\"maximum relative error of nearly {percent(DEEPSEEK_ERROR)}\" at K = {DEEPSEEK_K} takes "
                 + (f"{enough[0]} kept bits" if enough else "more kept bits than measured")
                 + " rather than their \"about 14\": the model truncates every term without guard bits, which "
                 "the hardware may not")
    text += (f". Rule: the kept-bits error grows {number(ACCUMULATION_GROWS)}x from the smallest to the largest K "
             f"and reaches {_sci(ACCUMULATION_MATTERS)}; promoted, it stays within {number(PROMOTION_BOUNDED)}x of "
             f"its value at K = {PROMOTE_EVERY} and {number(PROMOTION_GAIN)}x below the unpromoted error.")
    return (f"{KEPT_FRACTION_BITS + 1}-bit accumulation loses accuracy as K grows; promotion every {PROMOTE_EVERY} "
            "fixes it", verdict, text)


def _sci(value: float) -> str:
    return "0" if value == 0 else f"{value:.2g}"


def _claim_short_reductions(document: dict[str, Any]) -> tuple[str, str, str]:
    runs = document["runs"]
    reference, kept, promoted = runs["fp8-delayed"], runs["fp8-tc14"], runs["fp8-tc14-promote"]
    gap = _gap(kept, reference)
    sweep = document["accumulation"]
    mlp_k = document["section"]["reduction_lengths"]
    errors = {k: e for k, e in zip(sweep["k"], sweep["signed"]["kept"]["mean"]) if k in mlp_k}
    error_text = ", ".join(f"K = {k}: {_sci(e)}" for k, e in errors.items())
    text = (f"The products of our MLP reduce over {', '.join(map(str, mlp_k))} terms (the layers' inputs in the "
            "forward pass, their outputs for input gradients, the batch for weight gradients), where the sweep's "
            f"signed-operand error of {KEPT_FRACTION_BITS + 1} kept bits is "
            f"{error_text or 'not measured'}. Run {kept['label']} ({kept['title']}) {_accuracy(kept)}, against "
            f"{_accuracy(reference)} for run {reference['label']} (FP32 accumulation), {_points(gap)}; promoted "
            f"every {MLP_PROMOTE_EVERY} products (run {promoted['label']}) {_accuracy(promoted)}, "
            f"{_points(_gap(promoted, reference))}. " + _ACCURACY_RULE.format(reference=f"run {reference['label']}'s"))
    return (f"On our MLP's short reductions, {KEPT_FRACTION_BITS + 1}-bit accumulation does not hurt training",
            _judge(kept, reference), text)


# --- markdown ------------------------------------------------------------------------------------------

FINER_FIGURE_CAPTIONS = {
    "finer-a": ("Per-tensor delayed scaling: amax against the scaled range", "Run F4 (FP8, delayed scaling, "
                f"amax history {DEFAULT_AMAX_HISTORY}). Per tensor, the amax of each step (black) and the largest "
                "value its scale represents, fmax / scale (blue); the band reaches down to the smallest "
                "subnormal / scale. The "
                f"scale follows the largest amax of the previous {DEFAULT_AMAX_HISTORY} uses: it lags a rising amax "
                f"(red: steps where values saturated) and keeps a falling one's headroom for {DEFAULT_AMAX_HISTORY} "
                "steps."),
    "finer-b": ("Values lost, by scaling granularity and tensor role", "Share of the nonzero values of each role "
                "(all layers, steps and uses) quantised to zero (solid) or beyond the scaled range (hatched), for "
                "one global scale (none, or the loss scale), one per tensor (delayed, current) and one per block "
                "(MXFP8: 32, NVFP4: 16)."),
    "finer-c": ("Test accuracy of every run", "Test accuracy at each evaluation: left the finer-scales runs, "
                "right the accumulation runs with their FP32-accumulated reference (F4)."),
    "finer-d": ("GEMM error against the reduction length", "E4M3 x E4M3 products with FP32 output: mean "
                "(lines) and maximum (dotted) error over the outputs against the exact sum, relative to the sum "
                f"of |products|, for FP32 accumulation, {KEPT_FRACTION_BITS + 1} kept bits, and "
                f"{KEPT_FRACTION_BITS + 1} kept bits promoted into FP32 every {PROMOTE_EVERY} products. Left: "
                "nonnegative operands (relative error); right: signed operands. Grey: the "
                "reduction lengths of our MLP. A statistic that is exactly 0 (every output exact) is not drawn."),
}


def _run_row(run: dict[str, Any]) -> str:
    late = run["late_accuracy"]
    late_text = "n/a" if late is None else f"{percent(late['mean'])} ({percent(late['min'])}-{percent(late['max'])})"
    roles = run["roles"]

    def cell(share: str) -> str:
        return " / ".join(percent(roles[r][share]) if r in roles else "-" for r in ROLES) if roles else "-"

    layers = " / ".join(percent(v) for v in run["underflow_fraction"].values())
    return (f"| {run['label']} | {run['title']} | {percent(run['final_accuracy'])} | {late_text} | "
            f"{percent(run['underflow_overall'])} ({layers}) | {cell('underflow_share')} | "
            f"{cell('saturated_share')} | {run['weights_sha256'][:16]} |")


def _noise_text(runs: dict[str, Any]) -> str:
    """How far one evaluation of the FP32 run moves, in words (the scale of noise in the claims)."""
    fp32 = runs.get("fp32")
    if not fp32 or not fp32["late_accuracy"]:
        return ""
    low, high = _range(fp32)
    return (f" Even the FP32 run's evaluations in its second half span {percent(low)}-{percent(high)}: with one "
            "seed, accuracy differences of a point or two are noise, and the quantisation counts are the sharper "
            "evidence.")


def render_finer_markdown(results: dict[str, Any]) -> str:
    """This section of report.md: setup, results tables, the GEMM sweep, claims with verdicts,
    figures (by file name, as :func:`draw_finer_figures` writes them) and the runs' commands.

    >>> text = render_finer_markdown({"section": {"steps": 4, "seed": 0, "data": "synthetic", "batch_size": 8,
    ...     "network": [64, 10], "evaluation_interval": 1, "late_start": 2, "constants": {}},
    ...     "runs": {}, "accumulation": {"k": []}, "claims": []})
    >>> text.splitlines()[0]
    '## Finer scales'
    """
    from sim.figures_finer import FINER_FIGURES

    section, runs = results["section"], results["runs"]
    constants = section["constants"]
    network = "-".join(map(str, section["network"]))
    header = ("| run | recipe | test acc. | second half: mean (range) | gradient underflow, all (per layer) | "
              "quantised to 0: input / weight / grad_output | saturated: input / weight / grad_output | "
              "weights_sha256 |\n|---|---|---|---|---|---|---|---|")
    lines = [
        "## Finer scales",
        "",
        f"Every run below trains the MLP {network} on `{section['data']}` with SGD (lr 0.05, momentum 0.9), batch "
        f"{section['batch_size']}, {section['steps']} steps, seed {section['seed']}, the same weights and batches "
        f"as the main suite; they differ only in how the operands of the matrix products are scaled and "
        f"quantised (FP32 between the products). FP8: E4M3FN activations and weights, E5M2 gradients, one "
        f"power-of-two scale per tensor (delayed: from the largest amax of the last "
        f"{constants.get('amax_history', 16)} uses; current: from the tensor's own amax) or none; MXFP8: E4M3 "
        f"elements with an E8M0 scale per block of 32 along each product's reduction axis; NVFP4: E2M1 elements "
        f"with an E4M3 scale per block of 16 and an FP32 scale per tensor.",
        "",
        "**Gradient underflow**: gradient entries that are zero in the run but not in an FP32 backward pass of the "
        "same forward values, share of all entries and steps. **Quantised to 0 / saturated**: per tensor role, over "
        "all layers, steps and uses, the nonzero values that became zero / that lay beyond the largest value the "
        "scale represents (they saturate to it). Test accuracy is measured every "
        f"{section['evaluation_interval']} steps; the claims compare the mean over the evaluations from step "
        f"{section['late_start']} on (the second half): one final accuracy is one draw from a noisy curve."
        + _noise_text(runs),
        "",
        header,
        *(_run_row(run) for run in runs.values() if run["part"] == "finer"),
        "",
        "## Accumulation",
        "",
    ]
    sweep = results["accumulation"]
    if sweep["k"]:
        kept_bits = sweep["fraction_bits"] + 1
        lines += [
            f"An FP8 GEMM on a tensor core that keeps {kept_bits} bits ({sweep['fraction_bits']} fraction bits below "
            f"the leading one: the model of `softfloat16.linalg.TensorCore`, blocks of {sweep['tc_block']} exact "
            f"products aligned to the largest term, the running sum included, each truncated), with and without "
            f"adding the partial sum into an FP32 accumulator every {sweep['promote_every']} products (DeepSeek-V3's "
            f"remedy), against FP32 accumulation in k order. Operands: random E4M3FN values, magnitudes uniform on "
            f"[0, 2); {sweep['shape'][0]}x{sweep['shape'][1]} outputs per K. Error of an output: |computed - exact| / "
            f"sum |a_k b_k| (the relative error for nonnegative operands); the exact sum is a float64 matmul, exact "
            f"for E4M3 products. Mean (max) over the outputs:",
            "",
            "| K | FP32, nonneg. | " + f"{kept_bits} bits, nonneg. | {kept_bits} bits + promote, nonneg. | "
            f"FP32, signed | {kept_bits} bits, signed | {kept_bits} bits + promote, signed |",
            "|---|---|---|---|---|---|---|",
        ]
        for i, k in enumerate(sweep["k"]):
            cells = [f"{_sci(sweep[kind][name]['mean'][i])} ({_sci(sweep[kind][name]['max'][i])})"
                     for kind in ("nonnegative", "signed") for name in ("fp32", "kept", "promoted")]
            lines.append(f"| {k} | " + " | ".join(cells) + " |")
        lines.append("")
    lines += [
        f"On our MLP the reductions are short, so the training runs promote every {constants.get('mlp_promote_every')} "
        f"products (a promotion every {constants.get('promote_every')} would never trigger); both use FP8 with "
        "per-tensor delayed scaling and are compared with run F4, its FP32-accumulated twin.",
        "",
        header,
        *(_run_row(run) for key, run in runs.items() if run["part"] == "accumulation" or key == "fp8-delayed"),
        "",
        "## Finer scales and accumulation: what the numbers say",
        "",
    ]
    for index, claim in enumerate(results["claims"], start=1):
        lines += [f"### {index}. {claim['claim']}", "", f"**{claim['verdict']}.** {claim['text']}", ""]
    lines += ["## Finer scales and accumulation: figures", ""]
    for key, (name, _) in FINER_FIGURES.items():
        title, caption = FINER_FIGURE_CAPTIONS[key]
        lines += [f"### {key}. {title}", "", f"![{title}]({name})", "", caption, ""]
    lines += ["## Finer scales and accumulation: the runs", ""]
    for key, run in runs.items():
        lines += [f"### Run {run['label']}: {run['title']}", "", f"Shows {run['purpose']}. Key `{key}`.", "",
                  f"    {run['command']}", "", f"weights_sha256: `{run['weights_sha256']}`", ""]
    return "\n".join(lines).rstrip() + "\n"


def draw_finer_figures(results: dict[str, Any], out_dir: str) -> list[str]:
    """Draw this section's figures into ``out_dir`` (matplotlib); returns the paths written."""
    from sim.figures_finer import make_finer_figures

    return [os.path.join(out_dir, name) for name in make_finer_figures(results, out_dir).values()]
