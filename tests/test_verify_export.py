"""Scoring, predicting and running a model read only a verified export (issue 11 item 5).

The attack: every ``targeted_table`` gold rewritten in place (a valid Parquet file under the
same name, so the card still points at it) made ``score`` report a perfect score for a
predictor that is mostly wrong. ``verify_export`` hashes the files the command will read
against the manifest first; a tampered or corrupted file gives exit 2 and a message naming
it, never a ``datasets`` traceback."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from exbind import main
from publishing.export import ExportIntegrityError, verify_export
from reports.score_report import build_report

CONFIG = "targeted_table"


def _parquet(export: Path, config: str) -> Path:
    (path,) = (export / "data" / config).glob("*.parquet")
    return path


def _first_candidate_predictions(export: Path, path: Path) -> Path:
    table = pq.read_table(_parquet(export, CONFIG), columns=["case_id", "reference"])
    with open(path, "w", encoding="utf-8") as fh:
        for case_id, ref in zip(table["case_id"].to_pylist(), table["reference"].to_pylist()):
            first = json.loads(ref)["candidates"][0]["id"]
            fh.write(json.dumps({"case_id": case_id, "output": json.dumps({"cell_id": first})}) + "\n")
    return path


def _rewrite_golds(parquet: Path) -> None:
    """The exact attack: every gold becomes the first candidate, in the reference and the gold column."""
    meta = pq.ParquetFile(parquet)
    table = meta.read()
    refs, golds = [], []
    for ref in table["reference"].to_pylist():
        ref = json.loads(ref)
        ref["gold"] = {"cell_id": ref["candidates"][0]["id"]}
        refs.append(json.dumps(ref))
        golds.append(json.dumps(ref["gold"]))
    table = table.set_column(table.schema.get_field_index("reference"), "reference", pa.array(refs))
    gold_type = table.schema.field("gold").type
    if pa.types.is_string(gold_type) or pa.types.is_large_string(gold_type):
        table = table.set_column(table.schema.get_field_index("gold"), "gold", pa.array(golds, gold_type))
    pq.write_table(table, parquet, row_group_size=100, write_page_index=True, compression="zstd")


@pytest.fixture
def tampered(export_dir, tmp_path):
    out = tmp_path / "exbind"
    shutil.copytree(export_dir, out)
    _rewrite_golds(_parquet(out, CONFIG))
    return out


def test_intact_export_verifies(export_dir):
    manifest = verify_export(export_dir, [CONFIG])
    assert manifest["counts"][CONFIG]["rows"] == 120
    assert verify_export(export_dir)["configs"] == manifest["configs"]


def test_score_refuses_rewritten_golds_naming_the_file(export_dir, tampered, tmp_path, capsys):
    preds = _first_candidate_predictions(export_dir, tmp_path / "first.jsonl")
    honest = build_report(CONFIG, export_dir, preds, cache_dir=str(tmp_path / "c1"))
    forged = build_report(CONFIG, tampered, preds, cache_dir=str(tmp_path / "c2"))  # what `score` used to do
    # the issue measured 6/120 vs 120/120 on release 1.0.0; on 2.0.0 the first candidate is gold 7 times
    assert (honest["summary"]["n_exact"], forged["summary"]["n_exact"]) == (7, 120)
    name = _parquet(tampered, CONFIG).relative_to(tampered).as_posix()
    code = main(["score", "--export", str(tampered), "--config", CONFIG, "--predictions", str(preds)])
    captured = capsys.readouterr()
    assert code == 2 and captured.out == ""
    assert captured.err == (f"error: {tampered}: 1 file(s) do not match exbind_manifest.json: {name} (SHA-256 "
                            "differs from the manifest: modified or corrupted since the build); refusing to read "
                            f"the export. Restore the files or rebuild it with `python exbind.py build --out "
                            f"{tampered}`\n")
    for argv in (["predict", "--config", CONFIG, "--predictor", "structural_oracle", "--out", str(tmp_path / "p.jsonl")],
                 ["run-model", "--model", str(tmp_path), "--config", CONFIG, "--out", str(tmp_path / "run")]):
        assert main([*argv[:1], "--export", str(tampered), *argv[1:]]) == 2
        assert name in capsys.readouterr().err
    assert not (tmp_path / "p.jsonl").exists() and not (tmp_path / "run").exists()
    # other configs of the same export are untouched and still score
    assert verify_export(tampered, ["targeted_hierarchy"])["counts"]["targeted_hierarchy"]["rows"] == 120


def test_corrupted_parquet_is_exit_2_with_a_message(export_dir, tmp_path, capsys):
    out = tmp_path / "exbind"
    shutil.copytree(export_dir, out)
    parquet = _parquet(out, CONFIG)
    data = bytearray(parquet.read_bytes())
    data[len(data) // 2: len(data) // 2 + 64] = b"\0" * 64
    parquet.write_bytes(bytes(data[:-100]))
    preds = _first_candidate_predictions(export_dir, tmp_path / "first.jsonl")
    code = main(["score", "--export", str(out), "--config", CONFIG, "--predictions", str(preds)])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err and "DatasetGenerationError" not in err
    assert err.startswith(f"error: {out}: 1 file(s) do not match exbind_manifest.json: "
                          f"{parquet.relative_to(out).as_posix()} (SHA-256 differs")
    parquet.unlink()
    with pytest.raises(ExportIntegrityError, match=r"test-00000-of-00001-[0-9a-f]{16}\.parquet \(missing\)"):
        verify_export(out, [CONFIG])


def test_missing_or_broken_manifest(tmp_path):
    with pytest.raises(ExportIntegrityError, match="not an ExBind export"):
        verify_export(tmp_path / "nowhere", [CONFIG])
    (tmp_path / "exbind_manifest.json").write_text("{")
    with pytest.raises(ExportIntegrityError, match="not a valid export manifest \\(JSONDecodeError"):
        verify_export(tmp_path, [CONFIG])
