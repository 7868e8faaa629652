"""A process pool for CPU-bound work over many files (parsing is pure Python, so
threads would not help). The shared argument (the rule set) reaches each worker once,
through the pool's initializer; jobs go out in batches, largest first, so one big file
does not finish last."""

from __future__ import annotations

import concurrent.futures
import multiprocessing
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

Job = TypeVar("Job")
Result = TypeVar("Result")

_SHARED: dict[str, Any] = {}  #: per worker process: what :func:`map_in_processes` shares


def _init(work: Callable[..., Any], shared: object) -> None:
    _SHARED["work"], _SHARED["shared"] = work, shared


def _batch(jobs: list[Any]) -> list[Any]:
    return [_SHARED["work"](_SHARED["shared"], job) for job in jobs]


def map_in_processes(work: Callable[[Any, Job], Result], shared: object, jobs: Sequence[Job],
                     workers: int, size: Callable[[Job], int],
                     meanwhile: Callable[[], None] | None = None) -> list[Result]:
    """``[work(shared, job) for job in jobs]``, in order, from ``workers`` processes.
    ``work`` must be a module-level function (it is pickled by name). ``meanwhile`` runs
    in this process once the jobs are handed out, before their results are awaited."""
    order = sorted(range(len(jobs)), key=lambda i: -size(jobs[i]))
    count = workers * 4
    batches = [[jobs[i] for i in order[k::count]] for k in range(count)]
    context = multiprocessing.get_context("fork" if "fork" in multiprocessing.get_all_start_methods()
                                          else "spawn")
    results: dict[int, Result] = {}
    with concurrent.futures.ProcessPoolExecutor(workers, mp_context=context, initializer=_init,
                                                initargs=(work, shared)) as pool:
        running = pool.map(_batch, batches)  # every batch is handed out now
        if meanwhile is not None:
            meanwhile()
        for k, done in enumerate(running):
            for i, result in zip(order[k::count], done, strict=True):
                results[i] = result
    return [results[i] for i in range(len(jobs))]
