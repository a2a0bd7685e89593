"""Collection rules for the whole checkout (pytest reads this before tests/conftest.py)."""
try:
    import torch  # noqa: F401
except ImportError:  # torch is an optional extra: the dispatch mode and its page need it
    collect_ignore = ["softfloat16/torch", "docs/torch.md"]
