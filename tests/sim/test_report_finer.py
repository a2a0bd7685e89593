"""The report's second story (sim.report.finer): the section end to end on a tiny
budget, its determinism across worker counts, the commands it prints, verdicts that follow the
numbers, the figures, and the GEMM-error measurement against an independent exact reference."""
from __future__ import annotations

import argparse
import copy
import json
from fractions import Fraction

import numpy as np
import pytest

import softfloat16 as sf
import softfloat16.linalg as linalg
from sim.arguments import add_train_arguments, given_train_fields, train_config
from sim.gemm import Accumulation
from sim.report.finer import claims as fclaims
from sim.report.finer import figures as ffigures
from sim.report.finer import markdown as fmarkdown
from sim.report.finer import recipes as frecipes
from sim.report.finer import runs as fruns
from sim.report.runner import run_recipe
from sim.train import Trainer

TINY = dict(steps=3, data="synthetic", batch_size=8, hidden=(32,), k_values=(16, 128, 160), gemm_shape=(3, 2))
VERDICTS = {"Supported", "Partly supported", "Not supported"}


@pytest.fixture(scope="module")
def section():
    """The section on synthetic data, 3 steps per run, in one process."""
    return fruns.finer_section(workers=1, **TINY)


def test_the_section_runs_end_to_end(section):
    recipes = frecipes.finer_recipes(steps=3, data="synthetic", batch_size=8, hidden=(32,))
    assert list(section["runs"]) == [r.key for r in recipes]
    for recipe in recipes:
        run = section["runs"][recipe.key]
        assert run["config"] == recipe.config.resolved().to_dict()
        assert len(run["loss"]) == 3 and len(run["test_curve"]["step"]) == 3
        if recipe.config.precision == "fp32":
            assert run["roles"] == {} and run["lost_share"] is None
        else:
            assert list(run["roles"]) == list(frecipes.ROLES)
            assert all(counts["nonzero"] > 0 for counts in run["roles"].values())
    trace = section["runs"]["fp8-delayed"]["tensor_trace"]
    assert trace["tensors"] == list(section["runs"]["fp8-delayed"]["quantization"])
    assert len(trace["amax"]) == 3 and len(trace["scale"][0]) == len(trace["tensors"])
    assert section["accumulation"]["k"] == [16, 128, 160]
    claims = section["claims"]
    assert len(claims) == 7 and {c["verdict"] for c in claims} <= VERDICTS
    json.dumps(section, allow_nan=False)  # strict JSON


def test_the_same_arguments_give_the_same_bytes_whatever_the_worker_count(section):
    again = fruns.finer_section(workers=2, **TINY)
    assert json.dumps(again) == json.dumps(section)
    assert fmarkdown.render_finer_markdown(again) == fmarkdown.render_finer_markdown(section)


def test_the_results_can_be_built_from_runs_made_elsewhere(section):
    """finer_results on runs made one by one (as a caller sharing a pool with the main suite would)."""
    recipes = frecipes.finer_recipes(steps=3, data="synthetic", batch_size=8, hidden=(32,))
    runs = [run_recipe(recipe) for recipe in reversed(recipes)][::-1]
    results = fruns.finer_results(recipes, runs, TINY["k_values"], TINY["gemm_shape"])
    assert json.dumps(results) == json.dumps(section)


def test_the_markdown_has_tables_claims_and_figures(section):
    text = fmarkdown.render_finer_markdown(section)
    assert text.startswith("## Finer scales\n") and "## Accumulation" in text
    for run in section["runs"].values():
        assert f"| {run['label']} | {run['title']} |" in text and run["command"] in text
    for claim in section["claims"]:
        assert f"**{claim['verdict']}.** {claim['text']}" in text
    for name, _ in ffigures.FINER_FIGURES.values():
        assert f"]({name})" in text


def _parse(command):
    parser = argparse.ArgumentParser()
    add_train_arguments(parser)
    words = command.split()
    assert words[:4] == ["python", "-m", "sim", "train"]
    return train_config(given_train_fields(parser.parse_args(words[4:])))


def test_each_command_describes_its_run(section):
    """The printed command gives the run's configuration, and (checked on two runs whose flags
    are the longest) the same weights."""
    recipes = frecipes.finer_recipes(steps=3, data="synthetic", batch_size=8, hidden=(32,))
    for recipe in recipes:
        assert _parse(recipe.command()) == recipe.config.resolved(), recipe.command()
    for key in ("fp8-global-loss-scale", "fp8-tc14-promote"):
        run = section["runs"][key]
        trainer = Trainer(_parse(run["command"]))
        trainer.run()
        assert trainer.weights_sha256() == run["weights_sha256"]


# --- verdicts from numbers ------------------------------------------------------------------------

@pytest.mark.parametrize("verdict, numbers", [
    (fclaims.underflow_verdict, {"Supported": (0.05, 0.01), "Partly supported": (0.05, 0.03),
                               "Not supported": (0.005, 0.0)}),
    (fclaims.accuracy_verdict, {"Supported": (-0.01, 0.9, 0.91), "Partly supported": (-0.03, 0.9, 0.9),
                              "Not supported": (-0.03, 0.89, 0.9)}),
    (fclaims.combine_verdicts, {"Supported": (["Supported"] * 2,),
                                "Partly supported": (["Supported", "Not supported"],),
                              "Not supported": (["Not supported"] * 2,)}),
    (fclaims.rounding_verdict, {"Supported": (-0.01, -0.03), "Partly supported": (-0.01, -0.012),
                              "Not supported": (-0.02, -0.02)}),
    (fclaims.granularity_verdict, {"Supported": ([0.3, 0.1, 0.02],), "Partly supported": ([0.3, 0.2, 0.1],),
                                 "Not supported": ([0.1, 0.01, 0.08],)}),
])
def test_each_verdict_follows_its_numbers(verdict, numbers):
    for expected, arguments in numbers.items():
        assert verdict(*arguments) == expected, (expected, arguments)


def test_the_accumulation_verdict_needs_growth_a_bound_and_a_gain():
    k = [32, 128, 4096]
    assert fclaims.accumulation_verdict([1e-4, 4e-4, 0.05], [1e-4, 4e-4, 5e-4], k) == "Supported"
    assert fclaims.accumulation_verdict([1e-4, 4e-4, 0.05], [1e-4, 4e-4, 0.004], k) == "Partly supported"  # grows
    assert fclaims.accumulation_verdict([1e-4, 4e-4, 0.05], [1e-4, 4e-4, 0.006], k) == "Partly supported"  # gain < 10
    assert fclaims.accumulation_verdict([1e-4, 4e-4, 5e-4], [1e-4, 4e-4, 4e-4], k) == "Not supported"  # no growth
    assert fclaims.accumulation_verdict([1e-5, 4e-5, 5e-4], [1e-5, 4e-5, 4e-5], k) == "Not supported"  # too small
    assert fclaims.accumulation_verdict([1e-4, 4e-4, 0.05], [1e-4, 4e-4, 0.06], k) == "Not supported"  # no help


def _verdicts(document):
    return {claim: verdict for claim, verdict, _ in fclaims.finer_claims(document)}


def test_the_claims_read_their_verdicts_from_the_runs(section):
    """Changing the numbers a claim is judged on changes its verdict: nothing is hard-coded."""
    document = copy.deepcopy(section)
    runs = document["runs"]
    underflow = "FP8 without per-tensor scaling loses gradients to underflow"
    runs["fp8-global"]["underflow_overall"], runs["fp8-delayed"]["underflow_overall"] = 0.2, 0.0
    assert _verdicts(document)[underflow] == "Supported"
    runs["fp8-global"]["underflow_overall"] = 0.0
    assert _verdicts(document)[underflow] == "Not supported"

    per_tensor = "Per-tensor scaling recovers FP32 accuracy"
    for key, mean in (("fp32", 0.9), ("fp8-delayed", 0.9), ("fp8-current", 0.5)):
        runs[key]["late_accuracy"] = {"mean": mean, "min": mean, "max": mean}
    assert _verdicts(document)[per_tensor] == "Partly supported"
    runs["fp8-current"]["late_accuracy"] = {"mean": 0.95, "min": 0.95, "max": 0.95}
    assert _verdicts(document)[per_tensor] == "Supported"

    sr = "NVFP4 with SR gradients is closer to FP32 than with RNE"
    runs["nvfp4-rne"]["late_accuracy"] = {"mean": 0.8, "min": 0.8, "max": 0.8}
    runs["nvfp4-sr"]["late_accuracy"] = {"mean": 0.89, "min": 0.89, "max": 0.89}
    assert _verdicts(document)[sr] == "Supported"
    runs["nvfp4-sr"]["late_accuracy"] = {"mean": 0.7, "min": 0.7, "max": 0.7}
    assert _verdicts(document)[sr] == "Not supported"

    sweep = document["accumulation"]
    accumulation = next(c for c in _verdicts(document) if c.startswith("14-bit accumulation loses"))
    sweep["nonnegative"]["kept"]["mean"] = [1e-4, 1e-3, 0.05]
    sweep["nonnegative"]["promoted"]["mean"] = [1e-4, 1e-3, 1e-3]
    assert _verdicts(document)[accumulation] == "Supported"
    sweep["nonnegative"]["kept"]["mean"] = [1e-4, 1e-4, 1e-4]
    assert _verdicts(document)[accumulation] == "Not supported"


def test_a_claim_whose_runs_are_missing_is_left_out(section):
    document = copy.deepcopy(section)
    del document["runs"]["mxfp8"]
    claims = _verdicts(document)
    assert "MXFP8 matches per-tensor FP8" not in claims and len(claims) == 5  # granularity needs MXFP8 too


# --- figures ----------------------------------------------------------------------------------------

def test_the_figures_are_drawn(section, tmp_path):
    pytest.importorskip("matplotlib")
    paths = ffigures.draw_finer_figures(section, str(tmp_path))
    assert [p.rsplit("/", 1)[1] for p in paths] == [name for name, _ in ffigures.FINER_FIGURES.values()]
    for path in paths:
        with open(path, "rb") as file:
            assert file.read(8) == b"\x89PNG\r\n\x1a\n"
        assert (tmp_path / path.rsplit("/", 1)[1]).stat().st_size > 5000


def test_figure_a_draws_the_delayed_runs_amax_and_scale(section, tmp_path):
    pytest.importorskip("matplotlib")
    fig = ffigures.figure_amax_scales(section, str(tmp_path / "a.png"))
    trace = section["runs"]["fp8-delayed"]["tensor_trace"]
    # the tiny network has two layers: its AMAX_TENSORS present are drawn, one panel each
    shown = [t for t in ffigures.AMAX_TENSORS if t in trace["tensors"]]
    titles = [axis.get_title() for axis in fig.axes if axis.get_visible()]
    assert [t.split(" ")[0] for t in titles] == shown
    column = trace["tensors"].index(shown[0])
    amax = np.log2([step[column] for step in trace["amax"]])
    axis = fig.axes[0]
    assert any(np.array_equal(np.asarray(line.get_ydata(), float), amax) for line in axis.get_lines())


# --- the GEMM error, against Fractions ----------------------------------------------------------------

def _fraction_matrix(bits):
    return [[Fraction(float(v)) for v in row] for row in sf.fp8_e4m3fn.to_float(bits)]


@pytest.mark.parametrize("signed", [False, True])
def test_the_exact_reference_is_exact(signed):
    a, b = fruns.fp8_operands(3, 300, 4, seed=5, signed=signed)
    a[0, :2] = sf.fp8_e4m3fn.from_float(np.array([448.0, 2.0**-9]))  # the extremes of the format
    b[:2, 0] = sf.fp8_e4m3fn.from_float(np.array([-448.0, 2.0**-9]))
    fa, fb = _fraction_matrix(a), _fraction_matrix(b)
    exact = fruns.exact_matmul(a, b)
    for i in range(3):
        for j in range(4):
            assert Fraction(float(exact[i, j])) == sum(fa[i][k] * fb[k][j] for k in range(300))


def test_the_accumulation_errors_match_an_independent_fraction_computation():
    """accumulation_error's means and maxima, recomputed from the emulated outputs with exact
    rational arithmetic, and promotion that changes nothing while K <= its interval."""
    k_values, shape = (40, 300), (3, 5)
    result = fruns.accumulation_error(k_values, shape, seed=3)
    core = linalg.TensorCore(products_per_block=frecipes.TC_BLOCK, fraction_bits=frecipes.KEPT_FRACTION_BITS)
    accumulations = {"fp32": Accumulation(), "kept": Accumulation("tensorcore", core),
                     "promoted": Accumulation("tensorcore", core, frecipes.PROMOTE_EVERY)}
    for kind in ("nonnegative", "signed"):
        for index, depth in enumerate(k_values):
            a, b = fruns.fp8_operands(*shape[:1], depth, shape[1], seed=3, signed=kind == "signed")
            fa, fb = _fraction_matrix(a), _fraction_matrix(b)
            for name, accumulation in accumulations.items():
                out = sf.fp32.to_float(accumulation.matmul(a, b, sf.fp8_e4m3fn, sf.fp32))
                errors = []
                for i in range(shape[0]):
                    for j in range(shape[1]):
                        products = [fa[i][k] * fb[k][j] for k in range(depth)]
                        magnitude = sum(abs(p) for p in products)
                        errors.append(abs(Fraction(float(out[i, j])) - sum(products)) / magnitude)
                curve = result[kind][name]
                assert curve["max"][index] == pytest.approx(float(max(errors)), rel=1e-12, abs=0)
                assert curve["mean"][index] == pytest.approx(float(sum(errors) / len(errors)),
                                                               rel=1e-12, abs=0)
            if depth <= frecipes.PROMOTE_EVERY:
                assert result[kind]["promoted"]["mean"][index] == result[kind]["kept"]["mean"][index]
    assert result["nonnegative"]["kept"]["mean"][1] > result["nonnegative"]["fp32"]["mean"][1]


def test_the_operands_are_deterministic_e4m3_values():
    a, b = fruns.fp8_operands(4, 64, 4, seed=1, signed=True)
    again = fruns.fp8_operands(4, 64, 4, seed=1, signed=True)
    assert np.array_equal(a, again[0]) and np.array_equal(b, again[1])
    values = sf.fp8_e4m3fn.to_float(np.concatenate([a.ravel(), b.ravel()]))
    assert (np.abs(values) <= 2.0).all() and (values < 0).any() and (values > 0).any()
