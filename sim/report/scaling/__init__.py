"""The report's first story: loss scaling, measured on the simulator's default MLP.

Nine runs ("recipes") share the network, the data, the seed and the step budget, and differ only
in precision, loss scaling, master weights and the order of unscaling and clipping. Each is an
ordinary :class:`sim.train.Trainer` run, so every row can be reproduced with the ``python -m sim
train`` command the report prints for it (same ``weights_sha256``). An observer measures what the
pictures need on the way: where the true gradients fall on the log2 axis, the update-to-weight
ratios, the updates that left a weight unchanged, and, on the static-scale run, the scale/unscale
round trip.

The story has the parts every story of the report has, one module each:

- :mod:`~sim.report.scaling.recipes`: the suite's constants and its nine runs;
- :mod:`~sim.report.scaling.runs`: what the runs measure besides the run log (the
  :class:`~sim.report.scaling.runs.Collector`);
- :mod:`~sim.report.scaling.claims`: the seven claims with their verdicts;
- :mod:`~sim.report.scaling.figures`: figures a to f (matplotlib, imported only when drawing);
- :mod:`~sim.report.scaling.markdown`: the results tables and the story's part of report.md.
"""
