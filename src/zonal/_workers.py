"""Independent work items in spawned worker processes, stopped together with their caller."""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future, ProcessPoolExecutor, as_completed
from typing import TypeVar

T = TypeVar("T")
R = TypeVar("R")


def in_worker_processes(
    function: Callable[[T], R],
    items: Sequence[T],
    workers: int,
    *,
    wrap: Callable[[Iterator[Future[R]]], Iterable[Future[R]]] = lambda futures: futures,
) -> Iterator[tuple[T, R]]:
    """(item, ``function(item)``) for every item as they finish in ``workers`` spawned processes
    (``function`` a module-level function, the items picklable); ``wrap`` wraps the stream of
    finished futures (a progress bar). If the caller stops (Ctrl-C, SIGTERM turned into one, an
    item that raised, an early exit), the workers are terminated rather than left to finish: a
    worker that survives its own KeyboardInterrupt (the executor sends it back as the item's
    result) would go on to the next item, and the shutdown would wait for every item."""
    pool = ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"))
    try:
        futures = {pool.submit(function, item): item for item in items}
        for future in wrap(as_completed(futures)):
            yield futures[future], future.result()
    except BaseException:
        for process in list((pool._processes or {}).values()):  # no public way before 3.14
            process.terminate()
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
