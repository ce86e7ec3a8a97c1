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
