"""How a build runs (issue 13 item 3): generation starts before ``datasets`` is imported,
workers send rows only, the collector settings of a build are restored, windows of latents
come back in plan order, and a started run can be closed without being read."""

from __future__ import annotations

import gc
import hashlib
import multiprocessing
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
TEXT_CONFIGS = ["targeted_table", "targeted_table_permuted", "targeted_table_column_metadata", "targeted_hierarchy"]


def test_the_command_line_and_the_generation_import_no_datasets():
    """What lets ``build`` fork its workers before the 0.6 s of ``datasets`` imports."""
    code = ("import sys; sys.path.insert(0, sys.argv[1]); import exbind, composition.release, publishing.swap, "
            "generator.legacy.bridge; print(sorted(m for m in ('datasets', 'pandas', 'pyarrow', 'scipy') "
            "if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code, str(REPO)], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_features_built_from_the_row_schema_are_the_release_schema():
    from generator.records import COLUMNS, FEATURES, ROW_SCHEMA

    assert tuple(FEATURES) == COLUMNS == tuple(ROW_SCHEMA) and len(COLUMNS) == 23
    schema = FEATURES.arrow_schema.to_string(show_schema_metadata=True)
    # the schema of every Parquet file of release 2.0.0 (the datasets form written out before)
    assert hashlib.sha256(schema.encode()).hexdigest() == (
        "84ea2f107cda81dbe0f857a12396e6b201e82e696eb3f255c59f7d62d72f94d4")
    import generator.records as records

    assert records.FEATURES is FEATURES  # built once
    with pytest.raises(AttributeError, match="has no attribute 'NOPE'"):
        records.NOPE


def test_a_rows_only_run_yields_the_rows_lines_and_tables_of_a_full_run():
    from composition.release import ReleaseRun
    from generator.records import ExBindRecord, RowRecord

    full = ReleaseRun(processes=1, configs=TEXT_CONFIGS)
    records = list(full.records())
    rows_full = [(c, r.to_row(), r.canonical_line()) for c, r in records]
    slim = ReleaseRun(processes=2, configs=TEXT_CONFIGS, rows_only=True)
    got = list(slim.records())
    assert {type(r) for _, r in records} == {ExBindRecord} and {type(r) for _, r in got} == {RowRecord}
    assert [(c, r.to_row(), r.canonical_line()) for c, r in got] == rows_full
    assert len(rows_full) == 120 + 360 + 120 + 120
    assert (slim.gate_tables, slim.suite_checks, slim.latent_counts) == (full.gate_tables, full.suite_checks,
                                                                         full.latent_counts)
    first = got[0][1]
    assert (first.condition, first.group_id, first.row["format"]) == (first.row["condition"], None, "table")


def test_build_gc_freezes_and_restores_and_nests():
    from composition.plans import BUILD_GC_THRESHOLDS, build_gc

    before, frozen = gc.get_threshold(), gc.get_freeze_count()
    with build_gc():
        assert gc.get_threshold() == BUILD_GC_THRESHOLDS and gc.get_freeze_count() > frozen
        with build_gc():  # nested: the outer settings stay
            assert gc.get_threshold() == BUILD_GC_THRESHOLDS
        assert gc.get_threshold() == BUILD_GC_THRESHOLDS
    assert gc.get_threshold() == before and gc.get_freeze_count() == frozen


def _square(x: int) -> int:
    return x * x


@pytest.mark.parametrize("n", [0, 1, 63, 64, 65, 200, 257])
def test_windows_of_results_come_back_in_order(n):
    """Windows of 16 * 2 * 2 = 64 items; the next window is submitted at half of the current one."""
    from composition.plans import imap_windows, stop_pool, worker_pool

    pool = worker_pool(2)
    try:
        assert list(imap_windows(pool, _square, list(range(n)), 2, chunksize=2)) == [x * x for x in range(n)]
    finally:
        stop_pool(pool)


def test_a_started_run_closes_without_being_read_and_cannot_be_read_after():
    from composition.release import ReleaseRun

    before = gc.get_threshold()
    run = ReleaseRun(processes=2, configs=["targeted_hierarchy"], rows_only=True).start()
    assert len(multiprocessing.active_children()) == 2 and run.start() is run  # started once
    run.close()
    run.close()  # twice is fine
    assert multiprocessing.active_children() == [] and gc.get_threshold() == before
    with pytest.raises(RuntimeError, match="this ReleaseRun was closed; build a new one"):
        next(run.records())
