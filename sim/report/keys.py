"""The report's recipe keys, each spelt here once: the names of its runs in results.json, in the
tables' ``Key`` lines and wherever a claim, a figure or a table picks a run.

The loss-scaling suite's nine runs (:data:`SUITE_KEYS`, in their order); the sweep's cells run
three of them again (:data:`FP32`, :data:`FP16_NONE`, :data:`FP16_DYNAMIC`, its ``SWEEP_RUNS``) on
other networks; the FP8/MX story (:data:`FINER_KEYS`) starts from the same FP32 baseline and adds
its own.

>>> SUITE_KEYS[:3], len(SUITE_KEYS), len(FINER_KEYS)
(('fp32', 'fp16-none', 'fp16-static'), 9, 10)
"""
from __future__ import annotations

__all__ = [
    "BF16_NONE", "FINER_KEYS", "FP16_DYNAMIC", "FP16_DYNAMIC_CLIP_BUG", "FP16_DYNAMIC_NO_MASTER", "FP16_NONE",
    "FP16_STATIC", "FP16_STATIC_TOO_LARGE", "FP16_STATIC_TOO_SMALL", "FP32", "FP8_CURRENT", "FP8_DELAYED",
    "FP8_GLOBAL", "FP8_GLOBAL_LOSS_SCALE", "FP8_TC14", "FP8_TC14_PROMOTE", "MXFP8", "NVFP4_RNE", "NVFP4_SR",
    "SUITE_KEYS",
]

# --- the loss-scaling suite, in its order ---------------------------------------------------------
FP32 = "fp32"
FP16_NONE = "fp16-none"
FP16_STATIC = "fp16-static"
FP16_DYNAMIC = "fp16-dynamic"
FP16_DYNAMIC_NO_MASTER = "fp16-dynamic-no-master"
FP16_DYNAMIC_CLIP_BUG = "fp16-dynamic-clip-bug"
BF16_NONE = "bf16-none"
FP16_STATIC_TOO_LARGE = "fp16-static-too-large"
FP16_STATIC_TOO_SMALL = "fp16-static-too-small"
SUITE_KEYS = (FP32, FP16_NONE, FP16_STATIC, FP16_DYNAMIC, FP16_DYNAMIC_NO_MASTER, FP16_DYNAMIC_CLIP_BUG, BF16_NONE,
              FP16_STATIC_TOO_LARGE, FP16_STATIC_TOO_SMALL)

# --- finer scales and accumulation, in their order ------------------------------------------------------
FP8_GLOBAL = "fp8-global"
FP8_GLOBAL_LOSS_SCALE = "fp8-global-loss-scale"
FP8_DELAYED = "fp8-delayed"
FP8_CURRENT = "fp8-current"
MXFP8 = "mxfp8"
NVFP4_RNE = "nvfp4-rne"
NVFP4_SR = "nvfp4-sr"
FP8_TC14 = "fp8-tc14"
FP8_TC14_PROMOTE = "fp8-tc14-promote"
FINER_KEYS = (FP32, FP8_GLOBAL, FP8_GLOBAL_LOSS_SCALE, FP8_DELAYED, FP8_CURRENT, MXFP8, NVFP4_RNE, NVFP4_SR, FP8_TC14,
              FP8_TC14_PROMOTE)
