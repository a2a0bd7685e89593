"""The suite's progress on stderr: on a terminal, one tqdm bar over all steps of all runs; in a log
(stderr not a terminal), one line per finished run and no bar, so that the log stays readable.
"""
from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TextIO

from tqdm import tqdm

from sim.report.recipe import Recipe

__all__ = ["SuiteProgress"]


class SuiteProgress:
    """``on_progress`` for :func:`~sim.report.runner.run_suite`: called with (recipe index, steps
    done) as steps finish, in whatever order the workers send them; :meth:`close` when the suite
    ends.

    >>> import io
    >>> from sim.report.scaling.recipes import suite_recipes
    >>> log = io.StringIO()  # not a terminal: a line per finished run
    >>> progress = SuiteProgress(suite_recipes(steps=2)[:2], log)
    >>> for index, step in [(1, 1), (0, 1), (1, 2)]:
    ...     progress(index, step)
    >>> progress.close()
    >>> log.getvalue().split(" done at ")[0]
    '[1/2] run 2 (fp16-none)'
    """

    def __init__(self, recipes: Sequence[Recipe], stream: TextIO) -> None:
        self.recipes = list(recipes)
        self.done = [0] * len(self.recipes)
        self.finished = 0
        self.stream = stream
        self.began = time.perf_counter()
        self.bar = tqdm(total=sum(r.config.steps for r in self.recipes), unit="step", file=stream,
                        disable=not stream.isatty(), dynamic_ncols=True)
        self.bar.set_postfix_str(self._runs(), refresh=False)

    def __call__(self, index: int, step: int) -> None:
        newly = step - self.done[index]
        if newly <= 0:
            return
        self.done[index] = step
        if step == self.recipes[index].config.steps:
            self.finished += 1
            self.bar.set_postfix_str(self._runs(), refresh=False)
            if self.bar.disable:
                recipe, elapsed = self.recipes[index], time.perf_counter() - self.began
                self.stream.write(f"[{self.finished}/{len(self.recipes)}] run {recipe.label} ({recipe.key}) "
                                  f"done at {elapsed:.0f}s\n")
                self.stream.flush()
        self.bar.update(newly)

    def _runs(self) -> str:
        return f"{self.finished}/{len(self.recipes)} runs"

    def close(self) -> None:
        """End the bar's line (on a terminal)."""
        self.bar.close()
