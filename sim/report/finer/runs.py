"""Finer scales and accumulation, runs: the GEMM sweep (the error of an E4M3 GEMM against the
reduction length, :func:`accumulation_error`, against an exact reference), what the section keeps
of each training run, and the section's results (:func:`finer_results`, or :func:`finer_section`
to run everything here).

>>> reduction_lengths([64, 128, 10], 32)
[10, 32, 64, 128]
"""
from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

import softfloat16 as sf
import softfloat16.linalg as linalg
from sim.config import DEFAULT_AMAX_HISTORY
from sim.gemm import Accumulation
from sim.report import keys
from sim.report.finer.claims import (
    ACCUMULATION_GROWS, ACCUMULATION_MATTERS, ACCURACY_TOLERANCE, FEWER_BY, PROMOTION_BOUNDED, PROMOTION_GAIN,
    UNDERFLOW_MATTERS, finer_claims,
)
from sim.report.finer.recipes import (
    GLOBAL_LOSS_SCALE, KEPT_FRACTION_BITS, MLP_PROMOTE_EVERY, PROMOTE_EVERY, ROLES, TC_BLOCK, FinerRecipe,
    finer_recipes, run_cost,
)
from sim.report.measures import layer_entries, overall_fraction
from sim.report.recipe import DEFAULT_STEPS, evaluation_interval
from sim.report.runner import run_suite

__all__ = [
    "CALIBRATION_FRACTION_BITS", "DEFAULT_K_VALUES", "GEMM_SHAPE", "accumulation_error", "exact_matmul",
    "finer_results", "finer_section", "fp8_operands", "reduction_lengths",
]

E4M3 = sf.fp8_e4m3fn

# --- the GEMM sweep ----------------------------------------------------------------------------
DEFAULT_K_VALUES = (32, 64, 128, 256, 512, 1024, 2048, 4096)
GEMM_SHAPE = (32, 32)  # rows and columns of each product: 1,024 outputs per K and operand kind
CALIBRATION_FRACTION_BITS = (12, 13, 14, 15, 16)  # the kept-bits sweep at the largest K
_GEMM_STREAM = 13  # distinct from sim.data's, sim.nn's and sim.gemm's stream tags


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


# --- the training runs, compacted, and the section's results -------------------------------------------

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
    if recipe.key == keys.FP8_DELAYED:
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
    :func:`sim.report.runner.run_suite`), the GEMM sweep, and the claims. Returns a JSON-able
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
    order = sorted(range(len(recipes)), key=lambda i: -run_cost(recipes[i]))
    notify = (lambda position, step: on_progress(order[position], step)) if on_progress else None
    ran = run_suite([recipes[i] for i in order], workers, notify)
    runs: list[dict[str, Any]] = [{} for _ in recipes]
    for position, index in enumerate(order):
        runs[index] = ran[position]
    return finer_results(recipes, runs, k_values, gemm_shape)


def finer_results(recipes: Sequence[FinerRecipe], runs: Sequence[dict[str, Any]],
                  k_values: Sequence[int] = DEFAULT_K_VALUES, gemm_shape: tuple[int, int] = GEMM_SHAPE
                  ) -> dict[str, Any]:
    """The section's results from its runs, ``runs[i]`` being :func:`sim.report.runner.run_recipe`'s
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
