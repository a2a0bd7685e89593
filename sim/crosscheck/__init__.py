"""Cross-check of the emulator against PyTorch: the same training run on both, compared op by op.

- :mod:`~sim.crosscheck.program`: the plan of a run, and the emulator's side: the trainer's own
  step, recorded through :mod:`sim.trace`;
- :mod:`~sim.crosscheck.loop`: the same ops spelled out for a backend that is not sim (torch);
- :mod:`~sim.crosscheck.record`: op records, the recorder, the emulator's side of every op, replay;
- :mod:`~sim.crosscheck.reference`: the torch side (``exact`` and ``library`` modes);
- :mod:`~sim.crosscheck.torch_exact`: correctly rounded torch building blocks (fma, sqrt, matmul,
  exp/log) for the ``exact`` mode;
- :mod:`~sim.crosscheck.dump`: the ``.npz`` dump and its validating loader;
- :mod:`~sim.crosscheck.compare`: per-op comparison and the report;
- :mod:`~sim.crosscheck.cli`: ``python -m sim crosscheck``.

torch is needed only by ``reference`` (and imported only when it is used); everything else, and
comparing against a saved dump, works without it. See docs/crosscheck.md.
"""
