"""The report's second story: finer scales, and accumulation.

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
length (:func:`~sim.report.finer.runs.accumulation_error`, against an exact reference), and the
effect on training. Our MLP's reductions are short (64, 128 and 128 inputs, 10 classes, and the
batch for weight gradients), so DeepSeek-V3's promotion interval of 128 never triggers there; the
training runs promote every ``MLP_PROMOTE_EVERY`` products instead.

The story has the parts every story of the report has, one module each:

- :mod:`~sim.report.finer.recipes`: the runs (:func:`~sim.report.finer.recipes.finer_recipes`)
  and their constants;
- :mod:`~sim.report.finer.runs`: the GEMM sweep, and the section's results:
  :func:`~sim.report.finer.runs.finer_section` runs everything and returns a JSON-able dict (the
  same arguments give the same dict, byte for byte once dumped, whatever the number of workers),
  :func:`~sim.report.finer.runs.finer_results` builds it from runs made elsewhere (one pool with
  the main suite);
- :mod:`~sim.report.finer.claims`: each verdict a function of the measured numbers, with its
  thresholds, and the claims built on them;
- :mod:`~sim.report.finer.figures`: figures finer-a to finer-d (matplotlib, imported only when
  drawing);
- :mod:`~sim.report.finer.markdown`: the section's part of report.md.
"""
