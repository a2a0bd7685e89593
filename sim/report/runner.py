"""Running the report's recipes, whatever their story: one in a :class:`~sim.train.Trainer` with the
suite's observer (:class:`~sim.report.scaling.runs.Collector`, for the recipes that ``collect``)
and the skip rates of :func:`~sim.report.scaling.recipes.skip_windows`, and all of them in worker
processes or on a Dask cluster, with their progress sent back to the parent.

Each run is an ordinary ``python -m sim train`` run plus observers that change nothing in
training, so its row can be reproduced with the command the report prints (same weights_sha256).
Runs are independent and deterministic: results do not depend on the number of workers.
"""
from __future__ import annotations

import concurrent.futures
import math
import multiprocessing
import queue as queue_module
from collections.abc import Callable, Sequence
from typing import Any

from sim.report.recipe import Recipe, evaluation_interval
from sim.report.scaling.recipes import skip_windows
from sim.report.scaling.runs import Collector
from sim.train import Trainer

__all__ = ["run_recipe", "run_suite"]


def run_recipe(recipe: Recipe, on_step: Callable[[int], None] | None = None) -> dict[str, Any]:
    """Run one recipe; returns its results.json entry (the train --json keys, the skip rates,
    and under ``diagnostics`` the test curve and, when ``recipe.collect``, the observer's
    measurements)."""
    trainer = Trainer(recipe.config)
    collector = None
    if recipe.collect:
        collector = Collector(len(trainer.model.layer_names), recipe.probe_round_trip)
        trainer.observers.append(collector)
    every = evaluation_interval(recipe.config.steps)
    curve: dict[str, list[Any]] = {"step": [], "accuracy": [], "loss": []}

    def after_step(record: Any) -> None:
        done = record.step + 1
        if done % every == 0:  # a forward pass on the test split: it changes nothing in training
            loss, accuracy = trainer.evaluate(trainer.data.x_test, trainer.data.y_test)
            curve["step"].append(done)
            curve["accuracy"].append(accuracy)
            curve["loss"].append(loss if math.isfinite(loss) else None)
        if on_step is not None:
            on_step(done)

    trainer.run(on_step=after_step)
    summary = trainer.summary()  # wall_seconds stays None: results.json must not depend on timing
    early, late = skip_windows(trainer.step)
    skipped = set(summary["skipped_steps"])
    measured = collector.result() if collector is not None else {}
    return {
        "label": recipe.label,
        "title": recipe.title,
        "purpose": recipe.purpose,
        "command": recipe.command(),
        **summary,
        "skip_rate_early": _rate(skipped, early),
        "skip_rate_late": _rate(skipped, late),
        "diagnostics": {**measured, "test_examples": len(trainer.data.y_test), "test_curve": curve},
    }


def _rate(skipped: set[int], window: tuple[int, int]) -> float:
    """The share of the steps of ``window`` that were skipped."""
    start, stop = window
    return sum(start <= s < stop for s in skipped) / (stop - start) if stop > start else 0.0


def _estimated_cost(recipe: Recipe) -> int:
    """A rough relative cost of a run, for scheduling only: steps x total hidden width.

    >>> from sim.train import TrainConfig
    >>> _estimated_cost(Recipe("k", "1", "t", "p", TrainConfig(steps=10, hidden=(64, 32))))
    960
    """
    return recipe.config.steps * sum(recipe.config.hidden)


# A worker's end of the progress queue. The pool's initializer sets it: a multiprocessing Queue
# can be handed to a process when it starts, not pickled into each task.
_worker_queue: Any = None


def _start_worker(progress: Any) -> None:
    global _worker_queue
    _worker_queue = progress
    import os
    import sys

    import numba  # one thread per worker: the workers already share the cores

    from softfloat16.compiling import CompileNotices

    numba.set_num_threads(1)
    # A first run on a machine compiles the kernels in each worker: say so while it lasts.
    CompileNotices(sys.stderr, label=f"sim worker {os.getpid()}: ").__enter__()


def _run_in_worker(index: int, recipe: Recipe) -> dict[str, Any]:
    def report(step: int) -> None:
        _worker_queue.put((index, step))

    return run_recipe(recipe, report)


def _run_on_dask_worker(recipe: Recipe) -> dict[str, Any]:
    from softfloat16 import set_num_threads

    set_num_threads(1)  # a Dask worker runs tasks on each of its threads: one core thread per run
    return run_recipe(recipe)


def _run_on_cluster(recipes: Sequence[Recipe], scheduler: Any, notify: Callable[[int, int], None]) -> list[dict]:
    """The runs as tasks on a Dask cluster (``scheduler``: an address or a ``distributed.Client``),
    the long ones first; each reports its steps when it finishes."""
    from softfloat16.verify import SchedulerError, connect_scheduler

    client, ours = connect_scheduler(scheduler)
    from distributed import as_completed

    try:
        costs = [_estimated_cost(recipe) for recipe in recipes]
        futures = [client.submit(_run_on_dask_worker, recipe, pure=False, priority=cost)
                   for recipe, cost in zip(recipes, costs)]
        index = {future.key: i for i, future in enumerate(futures)}
        results: list[Any] = [None] * len(recipes)
        finished = False
        try:
            for future in as_completed(futures, loop=client.loop):
                i = index[future.key]
                try:
                    results[i] = future.result()
                except ImportError as error:  # raised on a worker without the packages
                    address = getattr(client.scheduler, "address", scheduler)
                    raise SchedulerError(f"a Dask worker of {address} cannot run the training ({error}): install "
                                         "softfloat16 (with its report extra) on every worker") from None
                notify(i, recipes[i].config.steps)
            finished = True
        finally:
            if not finished:  # interrupted, or a run failed: leave nothing running on the cluster
                client.cancel(futures)
        return results
    finally:
        if ours:
            client.close()


def run_suite(
    recipes: Sequence[Recipe], workers: int = 1, on_progress: Callable[[int, int], None] | None = None,
    scheduler: Any = None,
) -> list[dict[str, Any]]:
    """Run the recipes (in ``workers`` processes when > 1, or as tasks on the Dask cluster of
    ``scheduler``) and return their results in recipe order. ``on_progress(recipe index, steps
    done)`` is called as steps finish, in this process (workers send their steps back through a
    queue; Dask runs report once, when they finish). Runs are independent and deterministic, so
    the results do not depend on ``workers`` or on the cluster.

    >>> from sim.report.scaling.recipes import suite_recipes
    >>> seen = []
    >>> [result] = run_suite(suite_recipes(steps=2, data="synthetic", batch_size=8)[:1],
    ...                      on_progress=lambda index, step: seen.append((index, step)))
    >>> result["label"], result["steps"], seen
    ('1', 2, [(0, 1), (0, 2)])
    """
    notify = on_progress or (lambda index, step: None)
    if scheduler is not None:
        return _run_on_cluster(recipes, scheduler, notify)
    if workers <= 1 or len(recipes) <= 1:
        return [run_recipe(recipe, lambda step, i=i: notify(i, step)) for i, recipe in enumerate(recipes)]
    context = multiprocessing.get_context("spawn")  # no fork of a process with Numba threads
    progress = context.Queue()

    def drain(block: bool) -> None:
        while True:
            try:
                notify(*progress.get(timeout=0.2) if block else progress.get_nowait())
            except queue_module.Empty:
                return
            block = False

    with concurrent.futures.ProcessPoolExecutor(min(workers, len(recipes)), mp_context=context,
                                                initializer=_start_worker, initargs=(progress,)) as pool:
        # The pool starts runs in submission order: the long ones first, so that short ones fill the end.
        order = sorted(range(len(recipes)), key=lambda i: -_estimated_cost(recipes[i]))
        submitted = {i: pool.submit(_run_in_worker, i, recipes[i]) for i in order}
        futures = [submitted[i] for i in range(len(recipes))]
        pending = set(futures)
        while pending:
            drain(block=True)
            pending = {f for f in pending if not f.done()}
        results = [f.result() for f in futures]
    drain(block=False)
    return results
