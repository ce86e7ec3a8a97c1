"""The streamed build (issue 13 items 3-4): rows go to Parquet shards as they are generated,
the suite checks run on streamed summaries, a subset of configs can be built, and the
leakage gate counts ids without a regex per id."""

from __future__ import annotations

import json
import re

import datasets
import pyarrow.parquet as pq
import pytest

from composition.release import CONFIGS, ReleaseRun, check_configs, release_label
from exbind import main, release
from generator.gates import count_id
from publishing.export import MANIFEST_NAME, canonical_records_hash, export_release
from publishing.shards import ConfigShardWriter

DEFAULT_RECORDS_SHA256 = {
    "targeted_table": "c9ccbfb64b06452a9264c27ce8e474b2f387f12245f6e8c0c4b66aa5eb172485",
    "targeted_table_column_metadata": "380c5973dfff1aeee104835ef1edfefb177cf5c21feb991eec56c4b022f8bf07",
    "targeted_table_permuted": "aaef4cbf7ce2f900dcf66b4904cbe7812f0a5bed95e7ece68aaadcb6cd30f459",
}


@pytest.mark.parametrize("text, ident, expected", [
    ("n1 n1 n10 n1_ xn1", "n1", 3),      # n10 and n1_ continue the id; xn1 counts (no left boundary)
    ("aaa", "aa", 1),                     # non-overlapping, left to right, like re.findall
    ("aa aa", "aa", 2),
    ("cell_r01_c00,cell_r01_c001", "cell_r01_c00", 1),
    ("id-1 id-1\n", "id-1", 2),
    ("", "x", 0),
    ("é1 x1é", "x1", 1),                  # a non-ASCII letter is not an id character
])
def test_count_id_matches_the_regex_it_replaces(text, ident, expected):
    assert count_id(text, ident) == expected
    assert len(re.findall(re.escape(ident) + r"(?![0-9A-Za-z_])", text)) == expected


def test_shard_writer_splits_a_config_into_named_viewer_ready_shards(tmp_path):
    rows = [rec.to_row() for rec in release().configs["targeted_table_permuted"]]
    writer = ConfigShardWriter(tmp_path / "data" / "targeted_table_permuted", shard_rows=200)
    for row in rows:
        writer.add(row)
    files = writer.close(tmp_path)
    assert [re.sub(r"-[0-9a-f]{16}\.parquet$", "", f) for f in files] == [
        "data/targeted_table_permuted/test-00000-of-00002", "data/targeted_table_permuted/test-00001-of-00002"]
    assert [[pq.ParquetFile(tmp_path / f).metadata.row_group(i).num_rows
             for i in range(pq.ParquetFile(tmp_path / f).metadata.num_row_groups)] for f in files] == [[100, 100],
                                                                                                      [100, 60]]
    assert writer.rows == 360
    assert writer.records_sha256 == DEFAULT_RECORDS_SHA256["targeted_table_permuted"]
    loaded = datasets.load_dataset("parquet", data_files=[str(tmp_path / f) for f in files], split="train",
                                   cache_dir=str(tmp_path / "cache"))
    assert loaded["case_id"] == [r["case_id"] for r in rows]
    with pytest.raises(ValueError, match="multiple of the row group size 100"):
        ConfigShardWriter(tmp_path / "x", shard_rows=150)


def test_a_subset_build_is_a_labelled_variant_with_the_default_rows(tmp_path):
    out = tmp_path / "exbind"
    manifest = export_release(out, lambda: ReleaseRun(processes=1, configs=["targeted_table_column_metadata"]),
                              show_progress=False)
    assert manifest["configs"] == ["targeted_table", "targeted_table_column_metadata"]
    assert manifest["release_version"] == "2.0.0+seed.default.scale.1.configs.targeted_table-targeted_table_column_metadata"
    assert manifest["variant"]["configs"] == ["targeted_table", "targeted_table_column_metadata"]
    assert manifest["canonical_records_sha256"] == {c: DEFAULT_RECORDS_SHA256[c] for c in manifest["configs"]}
    assert list(manifest["gate_tables"]) == ["targeted"]
    assert sorted(manifest["suite_checks"]) == ["balance_targeted_table", "gold_rank_variation", "table_shortcuts",
                                                "visible_oracle"]
    assert manifest["suite_checks"]["visible_oracle"]["targeted_table_column_metadata"]["exact"] == 120
    card = (out / "README.md").read_text()
    assert "  default: true\n" in card.split("- config_name: targeted_table_column_metadata")[0]
    ds = datasets.load_dataset(str(out), split="test", cache_dir=str(tmp_path / "cache"))  # the default config
    assert ds.num_rows == 120
    assert json.loads((out / MANIFEST_NAME).read_text())["counts"]["targeted_table"]["rows"] == 120


def test_config_lists_are_checked_and_bring_their_parents():
    assert check_configs(None) == CONFIGS
    assert check_configs(["paired"]) == ("broad", "paired")
    assert check_configs(["targeted_table_permuted", "legacy_bridge"]) == (
        "targeted_table", "targeted_table_permuted", "legacy_bridge")
    with pytest.raises(ValueError, match=r"configs: unknown \['tabel'\]; choose from broad, paired"):
        check_configs(["tabel"])
    with pytest.raises(ValueError, match="configs: the list is empty; name at least one of broad, "):
        check_configs([])
    with pytest.raises(ValueError, match="configs: legacy_bridge alone is no benchmark task"):
        check_configs(["legacy_bridge"])
    assert release_label({"seed": 7, "scale": 2, "custom_seeds": False, "configs": ["broad", "paired"]}) == \
        "2.0.0+seed.7.scale.2.configs.broad-paired"


def test_build_refuses_an_unknown_config_in_one_line(tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:
        main(["build", "--out", str(tmp_path / "x"), "--configs", "broad,nope"])
    assert exc.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1] == (
        "exbind.py build: error: --configs: unknown ['nope']; choose from broad, paired, targeted_table, "
        "targeted_hierarchy, targeted_table_permuted, targeted_table_column_metadata, legacy_bridge")
    assert not (tmp_path / "x").exists()


def test_canonical_records_hash_is_the_rows_hash_the_writer_keeps():
    rows = [rec.to_row() for rec in release().configs["targeted_table"]]
    assert canonical_records_hash(rows) == DEFAULT_RECORDS_SHA256["targeted_table"]


def test_large_configs_are_load_checked_by_streaming(export_dir, tmp_path, monkeypatch):
    import shutil

    import publishing.card as card
    import publishing.load_check as load_check

    out = tmp_path / "exbind"
    shutil.copytree(export_dir, out)
    monkeypatch.setattr(load_check, "FULL_LOAD_MAX_ROWS", 300)  # targeted_table_permuted (360 rows) streams
    assert card.check_export(out, CONFIGS) == []
    readme = (out / "README.md").read_text()
    start = readme.index("- config_name: targeted_table_permuted\n", readme.index("dataset_info:"))
    (out / "README.md").write_text(readme[:start] + readme[start:].replace("num_examples: 360", "num_examples: 361", 1))
    assert card.check_export(out, CONFIGS) == [
        "load_dataset(export, 'targeted_table_permuted') gives 360 rows; the card declares 361"]


def test_load_check_reports_the_same_problems_in_one_or_two_processes(export_dir, tmp_path):
    import shutil

    from datasets.info import DatasetInfosDict

    import publishing.card as card
    from publishing.load_check import load_problems

    out = tmp_path / "exbind"
    shutil.copytree(export_dir, out)
    readme = (out / "README.md").read_text()
    start = readme.index("- config_name: targeted_hierarchy\n", readme.index("dataset_info:"))
    (out / "README.md").write_text(readme[:start] + readme[start:].replace("num_examples: 120", "num_examples: 7", 1))
    infos = DatasetInfosDict.from_dataset_card_data(card._card_data((out / "README.md").read_text()))
    one = load_problems(out, CONFIGS, infos, processes=1)
    assert one == load_problems(out, CONFIGS, infos, processes=2)
    assert [line[:80] for line in one] == [  # datasets' own split-size check answers first
        "load_dataset(export, 'targeted_hierarchy') failed: NonMatchingSplitsSizesError: "]
    (out / "data" / "broad").rename(tmp_path / "broad-moved")  # a config whose files are gone
    two = load_problems(out, CONFIGS, infos, processes=2)
    assert two == load_problems(out, CONFIGS, infos, processes=1)
    # datasets resolves every config's data files, so each load fails; reported in config order
    assert [line.split(":")[0] for line in two] == [f"load_dataset(export, {c!r}) failed" for c in CONFIGS]


def test_stop_pool_terminates_a_pool_and_kills_workers_when_terminate_hangs():
    import multiprocessing
    import signal
    import threading
    import time

    from composition.plans import stop_pool, worker_pool

    pool = worker_pool(2)
    assert pool.map(abs, [-1, -2, 3]) == [1, 2, 3]
    workers = multiprocessing.active_children()
    stop_pool(pool)
    assert len(workers) == 2 and all(not w.is_alive() for w in workers)

    class StuckPool:  # what a pool whose result thread waits for a half-written result does
        def terminate(self):
            threading.Event().wait()

    child = multiprocessing.get_context("fork").Process(target=time.sleep, args=(60,))
    child.start()
    started = time.perf_counter()
    stop_pool(StuckPool(), timeout=0.5)
    child.join(10)
    assert child.exitcode == -signal.SIGKILL
    assert time.perf_counter() - started < 10
