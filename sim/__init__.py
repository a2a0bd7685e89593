"""Training on the softfloat16 emulator: autograd, optimizers, loss scaling, data, checkpoints.

``sim`` imports ``softfloat16``, never the reverse. Import the submodules you need
(``sim.scaler``, ``sim.data``, ``sim.checkpoint``, ...); this package file stays empty so that
importing one piece never pulls in the others.
"""
