"""One set of training flags: declared once (sim.arguments), the same in `sim train` and
`sim crosscheck`, mapped to the optimizer and the loss scaler in one place (sim.config)."""
from __future__ import annotations

import argparse
import dataclasses

import pytest

import softfloat16 as sf
from sim.arguments import TRAIN_FIELDS, UsageError, add_train_arguments, given_train_fields, train_config
from sim.cli import parse_arguments
from sim.config import TrainConfig, make_loss_scaler, make_optimizer
from sim.crosscheck import cli as crosscheck_cli
from sim.crosscheck.program import Plan

# One value per TrainConfig field, each different from the default, as a user types it.
EVERY_FLAG = ["--precision", "bf16", "--loss-scale", "dynamic", "--scale", "1024", "--growth-interval", "7",
              "--no-master-weights", "--clip", "2", "--clip-before-unscale", "--optimizer", "sgd", "--lr", "0.1",
              "--momentum", "0.5", "--weight-decay", "0.01", "--steps", "3", "--batch-size", "4", "--seed", "2",
              "--data", "synthetic", "--hidden", "16,8"]


# The FP8 / block-scaling / accumulation flags (they cannot all apply to one run, so they are only parsed).
LOW_PRECISION_FLAGS = ["--init-gain", "0.5", "--fp8-scaling", "current", "--amax-history", "4", "--fp8-margin", "1",
                       "--grad-rounding", "sr", "--block-size", "16", "--accumulate", "tensorcore", "--tc-block", "8",
                       "--tc-fraction-bits", "13", "--promote-every", "64"]


def test_every_config_field_has_one_flag():
    parser = argparse.ArgumentParser()
    add_train_arguments(parser)
    given = given_train_fields(parser.parse_args(EVERY_FLAG + LOW_PRECISION_FLAGS))
    assert set(given) == set(TRAIN_FIELDS)
    defaults = TrainConfig()  # every flag reached its field (sgd is the default; --momentum needs it)
    assert [field for field in TRAIN_FIELDS if given[field] == getattr(defaults, field)] == ["optimizer"]


@pytest.mark.parametrize("parse", [lambda argv: parse_arguments(["train", *argv]),
                                   lambda argv: crosscheck_cli._parser().parse_args(argv)],
                         ids=["train", "crosscheck"])
def test_train_and_crosscheck_parse_the_same_flags_to_the_same_config(parse):
    config = train_config(given_train_fields(parse(EVERY_FLAG)))
    assert config == TrainConfig(precision="bf16", loss_scale="dynamic", scale=1024.0, growth_interval=7,
                                 master_weights=False, clip=2.0, clip_before_unscale=True, optimizer="sgd",
                                 lr=0.1, momentum=0.5, weight_decay=0.01, steps=3, batch_size=4, seed=2,
                                 data="synthetic", hidden=(16, 8))


@pytest.mark.parametrize("given, flag", [({"loss_scale": "static"}, "--scale"),
                                         ({"clip_before_unscale": True}, "--clip-before-unscale"),
                                         ({"loss_scale": "none", "growth_interval": 5}, "--growth-interval"),
                                         ({"optimizer": "adam", "momentum": 0.5}, "--momentum")])
def test_impossible_combinations_name_the_flag(given, flag):
    with pytest.raises(UsageError, match=flag):
        train_config(given)


def test_the_crosscheck_refuses_clipping_by_name(capsys):
    assert crosscheck_cli.main(["--clip", "1", "--data", "synthetic"]) == 2
    assert "--clip" in capsys.readouterr().err


def test_optimizer_and_scaler_come_from_the_config():
    config = TrainConfig(optimizer="adam", weight_decay=0.01).resolved()
    optimizer = make_optimizer(config, sf.bf16)
    assert optimizer.fmt is sf.bf16 and optimizer.hyper["weight_decay"] == 0.01
    scaler = make_loss_scaler(dataclasses.replace(config, growth_interval=9))
    assert scaler.growth_interval == 9 and scaler.get_scale() == 65536.0
    assert make_loss_scaler(dataclasses.replace(config, loss_scale="none", scale=None)).get_scale() == 1.0


@pytest.mark.parametrize("overrides", [{"optimizer": "adam"}, {"momentum": 0.0, "weight_decay": 0.01},
                                       {"loss_scale": "static", "scale": 8.0}])
def test_the_crosscheck_plan_takes_the_trainers_constants(overrides):
    """Both sides of the cross-check get the hyperparameters and scaler factors of the trainer's
    own optimizer and scaler objects (no literals of their own)."""
    config = TrainConfig(data="synthetic", hidden=(4,), batch_size=2, **overrides).resolved()
    plan = Plan.from_config(config, 1)
    assert plan.optimizer_hyper == make_optimizer(config, sf.fp32).hyper
    scaler = make_loss_scaler(config)
    assert plan.init_scale == scaler.scale
    if config.loss_scale == "dynamic":
        assert plan.scaler_update == {"growth_factor": 2.0, "backoff_factor": 0.5, "growth_interval": 2000}
    else:
        assert plan.scaler_update is None
