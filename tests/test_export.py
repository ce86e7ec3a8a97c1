"""The Hub-ready export: determinism, atomicity, fresh reloads, the card's YAML and the
manifest's gate tables."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import datasets
import pytest
import yaml

import publishing.export as export_module
from exbind import release
from publishing.export import MANIFEST_NAME, export_release, sha256_file, verify_manifest
from publishing.swap import ExportPathError
from publishing.shards import ConfigShardWriter
from composition.release import CONFIGS, ReleaseRun, build_release

# Image-free configs hash the same on every machine (no rasterizer in the bytes).
TARGETED_TABLE_RECORDS_SHA256 = "c9ccbfb64b06452a9264c27ce8e474b2f387f12245f6e8c0c4b66aa5eb172485"


def _files(folder: Path) -> dict[str, str]:
    return {p.relative_to(folder).as_posix(): sha256_file(p) for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("processes, rows_only", [(1, False), (2, True)])
def test_two_builds_are_byte_identical_whatever_the_process_count(export_dir, tmp_path, processes, rows_only):
    # the session export is the in-memory release generated with the default processes; this
    # one streams every row to its shard from one process, or from two workers that send rows
    # only, as the build command does
    other = tmp_path / "exbind"
    export_release(other, lambda: ReleaseRun(processes=processes, rows_only=rows_only), show_progress=False)
    assert _files(other) == _files(export_dir)


def test_manifest_hashes_every_file_and_pins_the_records(export_dir):
    assert verify_manifest(export_dir) == []
    manifest = json.loads((export_dir / MANIFEST_NAME).read_text())
    assert set(manifest["files"]) == {p for p in _files(export_dir) if p != MANIFEST_NAME}
    assert manifest["generator_version"] == "exbind.generator.v2"
    assert manifest["seeds"] == {"broad": 20260823, "targeted": 20260824,
                                 "permutations": [2026082401, 2026082402, 2026082403]}
    assert manifest["counts"]["broad"]["by_format_condition"] == {
        "canvas": {"none": 50}, "dom": {"none": 25}, "graph": {"none": 50},
        "svg": {"none": 25}, "table": {"none": 50}, "tree": {"none": 50}}
    assert manifest["counts"]["targeted_table"]["by_format_condition"] == {
        "table": {"compact": 40, "conjunctive": 40, "high_candidate": 40}}
    assert manifest["canonical_records_sha256"]["targeted_table"] == TARGETED_TABLE_RECORDS_SHA256
    legacy = manifest["legacy_bridge_eligibility"]
    assert (legacy["attempted"], legacy["eligible"], legacy["rejected"]) == (300, 300, {})
    assert legacy["selection"]["gate_rejections"] == {
        "gate visible_oracle": 941, "gold has no visible ink": 26, "instruction names a candidate id": 8,
        "traced edge has no visible ink": 18}
    assert legacy["selection"]["selected"] == {"object": 90, "endpoint": 73, "edge": 90, "group": 47}


def test_gate_tables_match_paper_table_6_form(export_dir):
    manifest = json.loads((export_dir / MANIFEST_NAME).read_text())
    gates = manifest["gate_tables"]
    t = gates["targeted"]
    assert t["unique_gold"] == {"passed": 240, "n": 240}
    assert (t["structural_oracle"], t["target_id_leakage"], t["lexical_only"], t["type_only"]) == (1.0, 0.0, 0.0, 0.0)
    assert (t["accepted"], t["attempted"], t["rejected"], t["accepted_records"]) == (240, 240, {}, 240)
    assert (t["visible_oracle"], gates["broad"]["visible_oracle"]) == (1.0, 1.0)
    visible = manifest["suite_checks"]["visible_oracle"]
    assert {c: (v["exact"], v["n"], v["abstained"]) for c, v in visible.items()} == {
        "broad": (250, 250, 0), "paired": (100, 100, 0), "targeted_table": (120, 120, 0),
        "targeted_hierarchy": (120, 120, 0), "targeted_table_permuted": (360, 360, 0),
        "targeted_table_column_metadata": (120, 120, 0), "legacy_bridge": (300, 300, 0)}
    # table 0.0550 (compact 0.083, conjunctive 0.067, high_candidate 0.015),
    # hierarchy 0.0229 (depth_2 0.024, depth_3 0.023, depth_4 0.021)
    assert round(t["random_expectation"], 3) == 0.039
    by_cond = {c: round(v, 3) for c, v in t["random_expectation_by_condition"].items()}
    assert {c: by_cond[c] for c in ("compact", "conjunctive", "high_candidate")} == {
        "compact": 0.083, "conjunctive": 0.067, "high_candidate": 0.015}
    assert {c: by_cond[c] for c in ("depth_2", "depth_3", "depth_4")} == {
        "depth_2": 0.024, "depth_3": 0.023, "depth_4": 0.021}
    b = gates["broad"]
    assert b["unique_gold"] == {"passed": 250, "n": 250}
    assert (b["structural_oracle"], b["target_id_leakage"], b["type_only"]) == (1.0, 0.0, 0.0)
    assert b["lexical_only"] == 0.1  # graph: only source-first instructions are solved, 25/250
    checks = json.loads((export_dir / MANIFEST_NAME).read_text())["suite_checks"]
    assert checks["disjoint_broad_targeted"] == {"passed": True, "overlap": 0}
    assert checks["gold_rank_variation"]["targeted_table"]["passed"] is True
    assert checks["balance_targeted_table"]["passed"] is True
    assert checks["gold_rank_variation"]["targeted_table"]["ranks_13_plus_by_condition"] == {
        "compact": 0, "conjunctive": 0, "high_candidate": 32}
    shortcuts = checks["table_shortcuts"]
    assert (shortcuts["targeted_table"]["n"], shortcuts["broad_table"]["n"]) == (120, 50)
    assert round(shortcuts["targeted_table"]["all"]["row_residual"], 3) == 0.333


def test_card_yaml_names_each_content_addressed_file(export_dir):
    text = (export_dir / "README.md").read_text()
    meta = yaml.safe_load(text.split("---")[1])
    configs = {c["config_name"]: c for c in meta["configs"]}
    assert sorted(configs) == sorted(CONFIGS)
    assert configs["broad"].get("default") is True
    assert sum(bool(c.get("default")) for c in configs.values()) == 1
    for name, c in configs.items():
        (entry,) = c["data_files"]
        assert entry["split"] == "test"
        assert (export_dir / entry["path"]).is_file()
        assert sha256_file(export_dir / entry["path"])[:16] in entry["path"]
    infos = {i["config_name"]: i for i in meta["dataset_info"]}
    assert infos["targeted_table"]["splits"] == [{"name": "test", "num_bytes": infos["targeted_table"]["splits"][0]["num_bytes"],
                                                  "num_examples": 120}]
    assert {"name": "image", "dtype": "image"} in infos["broad"]["features"]


def test_load_dataset_by_folder_name_from_the_working_directory(export_dir, tmp_path, monkeypatch):
    shutil.copytree(export_dir, tmp_path / "exbind")
    shutil.copy(Path(__file__).resolve().parent.parent / "exbind.py", tmp_path / "exbind.py")
    monkeypatch.chdir(tmp_path)
    ds = datasets.load_dataset("exbind", "targeted_table", split="test", cache_dir=str(tmp_path / "cache"))
    assert ds.num_rows == 120
    assert isinstance(ds.features["image"], datasets.Image)
    broad = datasets.load_dataset("exbind", "broad", split="test", cache_dir=str(tmp_path / "cache"))
    svg = broad.filter(lambda r: r["format"] == "svg")
    assert svg[0]["image"].format == "PNG" and svg[0]["image"].size == (440, 360)


def test_failed_build_leaves_the_previous_export_untouched(export_dir, tmp_path, monkeypatch):
    out = tmp_path / "exbind"
    shutil.copytree(export_dir, out)
    before = _files(out)

    def broken_release():
        raise RuntimeError("gate failed")

    with pytest.raises(RuntimeError, match="gate failed"):
        export_release(out, broken_release, show_progress=False)

    class FailsOnThirdConfig(ConfigShardWriter):  # the disk fills up while the third config is written
        def add(self, row, canonical=None):
            if self.folder.name == CONFIGS[2]:
                raise OSError(28, "No space left on device")
            super().add(row, canonical)

    monkeypatch.setattr(export_module, "ConfigShardWriter", FailsOnThirdConfig)
    with pytest.raises(ExportPathError, match=f"^cannot write the export at {out}: No space left on device; the "
                                              f"previous export at {out} is untouched; free some space"):
        export_release(out, release, show_progress=False)
    assert _files(out) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == [".exbind.lock", "exbind"]  # the lock file stays


def test_reload_after_a_changed_rebuild_returns_the_new_rows(tmp_path):
    out = tmp_path / "exbind"
    cache = str(tmp_path / "cache")
    first = build_release(processes=2)
    export_release(out, lambda: first, show_progress=False)
    old = datasets.load_dataset(str(out), "targeted_table", split="test", cache_dir=cache)["instruction"]
    assert old == [r.case.instruction for r in first.configs["targeted_table"]]

    second = build_release(processes=2, targeted_seed=20260825)
    export_release(out, lambda: second, show_progress=False)
    new = datasets.load_dataset(str(out), "targeted_table", split="test", cache_dir=cache)["instruction"]
    assert new == [r.case.instruction for r in second.configs["targeted_table"]]
    assert new != old
    manifest = json.loads((out / MANIFEST_NAME).read_text())
    assert manifest["seeds"]["targeted"] == 20260825


def test_export_refuses_paths_that_are_not_previous_exports(tmp_path, monkeypatch):
    from publishing.export import ExportPathError, check_export_target

    own = tmp_path / "mydata"
    own.mkdir()
    (own / "thesis.tex").write_text("hi")
    afile = tmp_path / "afile.txt"
    afile.write_text("f")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ExportPathError, match="not an ExBind export"):
        export_release(own, release, show_progress=False)
    with pytest.raises(ExportPathError, match="existing file"):
        check_export_target(afile)
    with pytest.raises(ExportPathError, match="contains the working folder"):
        check_export_target(Path("."))
    with pytest.raises(ExportPathError, match="contains the working folder or the repository"):
        check_export_target(Path(__file__).resolve().parent.parent)
    assert (own / "thesis.tex").read_text() == "hi" and afile.read_text() == "f"
    assert check_export_target(tmp_path / "new" / "exbind") == (tmp_path / "new" / "exbind").resolve()


def test_build_with_a_malformed_legacy_file_is_refused_with_line_and_field(tmp_path, capsys):
    from exbind import main

    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "x1", "source": "s", "task_type": "object"}\n', encoding="utf-8")
    assert main(["build", "--legacy", str(bad), "--out", str(tmp_path / "exbind"), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"build refused: {bad}:1: field ")
    assert not (tmp_path / "exbind").exists()
