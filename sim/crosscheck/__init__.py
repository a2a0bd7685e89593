"""Cross-check of the emulator against PyTorch: the same training run on both, compared op by op.

- :mod:`~sim.crosscheck.program`: the training step as a sequence of named ops, written once;
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
