"""The build's report (reports/report.py): it scores through the functions the ``evaluate``
metric calls, so its figures are the metric's, and it loads every config once."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from composition.release import CONFIGS
from predictors import predict
from reports import report

METRIC_PATH = str(Path(__file__).resolve().parent.parent / "exbind_metric.py")
VERSION_KEYS = {"metric_version", "reference_schema", "generator_version"}


def test_score_outputs_is_the_metric_result(rows, tmp_path):
    import evaluate

    metric = evaluate.load(METRIC_PATH, cache_dir=str(tmp_path))
    table = rows["targeted_table"]
    refs = [r["reference"] for r in table]
    for name in ("lexical_only", "rank_bm25"):
        outputs = [p["output"] for p in predict(table, name)]
        expected = metric.compute(predictions=outputs, references=refs)
        got = report.score_outputs(outputs, refs)
        assert set(expected) - set(got) == VERSION_KEYS
        expected = {k: v for k, v in expected.items() if k not in VERSION_KEYS}
        assert json.dumps(got, sort_keys=True) == json.dumps(expected, sort_keys=True)
    assert report.score_outputs(["", ""], refs[:2])["n"] == 2
    with pytest.raises(ValueError, match="2 outputs but 1 references; pass one output per reference"):
        report.score_outputs(["", ""], refs[:1])


def test_sections_on_preloaded_rows_equal_sections_that_load(export_dir):
    manifest = json.loads((export_dir / "exbind_manifest.json").read_text())
    rows = report.load_export_rows(export_dir)
    assert list(rows) == list(CONFIGS)
    assert {c: len(v) for c, v in rows.items()} == {c: manifest["counts"][c]["rows"] for c in CONFIGS}
    assert all("image" not in r for v in rows.values() for r in v)
    assert report.baseline_tables(export_dir, rows) == report.baseline_tables(export_dir)
    profile = report.legacy_bridge_profile(export_dir, manifest)
    assert report.legacy_bridge_profile(export_dir, manifest, rows) == profile
    # A section given rows without its config loads that config.
    assert report.legacy_bridge_profile(export_dir, manifest, {"broad": rows["broad"]}) == profile


def test_suite_check_lines_of_the_default_release(export_dir):
    manifest = json.loads((export_dir / "exbind_manifest.json").read_text())
    assert report.suite_check_lines(manifest["suite_checks"]).splitlines() == [
        "Suite checks:",
        "  broad/targeted latents disjoint: passed",
        "  targeted_table condition balance: passed",
        "  hierarchy depth balance: passed (median candidates depth 2 42, depth 3 46, depth 4 48; max/min 1.143)",
        "  table shortcut programs on broad_table (50 cases, expected exact): best row_residual 0.400, "
        "random candidate 0.075",
        "  table shortcut programs on targeted_table (120 cases, expected exact): best row_residual 0.333, "
        "random candidate 0.055",
        "  visible oracle per config (rows as released, controls included): broad 250/250; legacy_bridge 300/300; "
        "paired 100/100; targeted_hierarchy 120/120; targeted_table 120/120; targeted_table_column_metadata 120/120; "
        "targeted_table_permuted 360/360",
    ]


def test_the_report_of_a_subset_build_covers_the_configs_it_built(tmp_path, capsys):
    from exbind import main

    out = tmp_path / "exbind"
    assert main(["build", "--out", str(out), "--configs", "targeted_hierarchy", "--processes", "1"]) == 0
    printed = capsys.readouterr().out
    assert "Predictors on targeted_hierarchy" in printed
    assert "Baselines on targeted_hierarchy" in printed
    for absent in ("broad", "targeted_table", "Legacy bridge"):
        assert absent not in printed
    assert "  hierarchy depth balance: passed" in printed
    assert printed.splitlines()[-1] == f"export: {out.resolve()} (variant release 2.0.0+seed.default.scale.1.configs.targeted_hierarchy)"
    assert main(["build", "--out", str(out), "--configs", "targeted_hierarchy", "--processes", "1",
                 "--no-report"]) == 0
    printed = capsys.readouterr().out
    assert printed.startswith("Composition (rows per config and format)")
    assert "Gates: targeted suite (120 records)" in printed and "Predictors on" not in printed
