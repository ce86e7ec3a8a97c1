"""The loading step of the export check: every config through ``datasets.load_dataset``.

:func:`load_problems` loads each config of an export folder exactly as a user does
(``load_dataset(folder, config, split="test")``) in a fresh cache directory and compares
what comes back with the card. The configs load in parallel worker processes (fork; one per
CPU up to 4, at most one per config): each load parses the card's YAML front matter again in pure
Python, which is most of the check's time, and the loads are independent.
"""

from __future__ import annotations

import multiprocessing
import os
import tempfile
from pathlib import Path
from typing import Iterable, Optional

import datasets
from datasets.info import DatasetInfosDict

from composition.plans import build_gc, default_processes, stop_pool, worker_pool

FULL_LOAD_MAX_ROWS = 5_000  # larger configs are checked by streaming (bounded memory)


def _load_one(task: tuple) -> list[str]:
    """Problems of one config: ``(export_dir, config, streaming, cache_dir, features,
    declared_rows, parquet_rows)`` as :func:`load_problems` builds them."""
    export_dir, config, streaming, cache_dir, features, declared_rows, parquet_rows = task
    datasets.disable_progress_bars()
    try:
        ds = datasets.load_dataset(export_dir, config, split="test", streaming=streaming, cache_dir=cache_dir)
        if streaming:
            next(iter(ds))
    except Exception as exc:  # noqa: BLE001 - report, do not crash the check
        return [f"load_dataset(export, {config!r}) failed: {type(exc).__name__}: {exc}"]
    if features is None:
        return []
    out = []
    if ds.features != features:
        out.append(f"load_dataset(export, {config!r}) gives other features than the card declares")
    n = parquet_rows if streaming else ds.num_rows
    if declared_rows is not None and n != declared_rows:
        out.append(f"load_dataset(export, {config!r}) gives {n} rows; the card declares {declared_rows}")
    return out


def _worker_count(processes: Optional[int], tasks: int) -> int:
    """Processes for ``tasks`` loads: 1 inside a daemonic pool worker (it may not fork) or
    where fork is unavailable, else ``processes`` (default
    :func:`composition.plans.default_processes`) capped at ``tasks``."""
    if tasks < 2 or multiprocessing.current_process().daemon or "fork" not in multiprocessing.get_all_start_methods():
        return 1
    return max(1, min(default_processes(processes), tasks))


def load_problems(export_dir: Path, configs: Iterable[str], infos: DatasetInfosDict,
                  rows: Optional[dict] = None, processes: Optional[int] = None) -> list[str]:
    """Load every config with ``datasets.load_dataset`` in a fresh cache directory.

    Each must load, and give the features and ``test`` row count the card declares. A
    config of more than :data:`FULL_LOAD_MAX_ROWS` rows (``rows``: its Parquet row count)
    is loaded with ``streaming=True`` instead, so the check's memory does not grow with a
    sized build: its features are compared, its first row read, and its row count is the
    Parquet files' (what a full load would count).

    Args:
        export_dir: the export folder (card ``README.md`` and ``data/``).
        configs: config names to load, in the order problems are reported.
        infos: the card's ``dataset_info`` entries (a config without one is only loaded).
        rows: Parquet row count per config (decides streaming; default: none streams).
        processes: worker processes (default: one per CPU, at most 4; 1 loads here, serially).

    Returns:
        Problems, one line each, config by config; empty when every config loads as declared.
    """
    rows = rows or {}
    was_disabled = datasets.are_progress_bars_disabled()
    datasets.disable_progress_bars()
    try:
        with build_gc(), tempfile.TemporaryDirectory(prefix="exbind-card-check-") as cache:
            tasks = []
            for config in configs:
                info = infos.get(config)
                declared = info.splits["test"].num_examples if info and info.splits and "test" in info.splits else None
                tasks.append((str(export_dir), config, rows.get(config, 0) > FULL_LOAD_MAX_ROWS,
                               os.path.join(cache, config), info.features if info else None, declared,
                               rows.get(config)))
            workers = _worker_count(processes, len(tasks))
            if workers > 1:  # workers that ignore Ctrl-C (the build reports it once), stopped in bounded time
                # largest config first (its Parquet bytes), so no worker is left with a big one at the end
                size = [sum(f.stat().st_size for f in (Path(export_dir) / "data" / task[1]).glob("*.parquet"))
                        for task in tasks]
                order = sorted(range(len(tasks)), key=lambda i: -size[i])
                pool = worker_pool(workers)
                try:
                    done = pool.map(_load_one, [tasks[i] for i in order], chunksize=1)
                finally:
                    stop_pool(pool)
                results = [None] * len(tasks)
                for i, problems in zip(order, done):
                    results[i] = problems
            else:
                results = [_load_one(task) for task in tasks]
    finally:
        if not was_disabled:
            datasets.enable_progress_bars()
    return [line for problems in results for line in problems]


__all__ = ["FULL_LOAD_MAX_ROWS", "load_problems"]
