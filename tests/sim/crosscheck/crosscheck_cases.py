"""Small training runs shared by the cross-check tests (fast: a 64-16-10 MLP, batch 8)."""
import functools

from sim.crosscheck.program import Plan, record_trainer
from sim.train import TrainConfig

STEPS = 50
# fp16 with dynamic scaling that overflows (NaN and inf gradients, skipped steps), backs off and
# grows again every few steps; bf16 with the default recipe (no loss scaling).
FP16_DYNAMIC = TrainConfig(precision="fp16", loss_scale="dynamic", scale=2.0**20, growth_interval=4,
                           data="synthetic", hidden=(16,), batch_size=8)
BF16 = TrainConfig(precision="bf16", data="synthetic", hidden=(16,), batch_size=8)
# The fp8 recipe: delayed scaling (the default; some values saturate), current, none (gradients
# underflow), stochastically rounded gradients, and a diverging run whose NaN amaxes keep the
# previous scale and skip steps.
FP8_STEPS = 20
FP8_DELAYED = TrainConfig(precision="fp8", data="synthetic", hidden=(16,), batch_size=8)
FP8_CURRENT = TrainConfig(precision="fp8", fp8_scaling="current", data="synthetic", hidden=(16,), batch_size=8)
FP8_NONE = TrainConfig(precision="fp8", fp8_scaling="none", data="synthetic", hidden=(16,), batch_size=8)
FP8_STOCHASTIC = TrainConfig(precision="fp8", grad_rounding="sr", data="synthetic", hidden=(16,), batch_size=8)
FP8_DIVERGING = TrainConfig(precision="fp8", fp8_scaling="delayed", amax_history=4, fp8_margin=2, lr=20.0,
                            data="synthetic", hidden=(16,), batch_size=8)


@functools.cache
def plan_for(config: TrainConfig, steps: int = STEPS) -> Plan:
    return Plan.from_config(config, steps)


@functools.cache
def emulator_records(config: TrainConfig, steps: int = STEPS) -> tuple:
    """The emulator's records of a run (the trainer's own), computed once per test session."""
    return tuple(record_trainer(plan_for(config, steps)))
