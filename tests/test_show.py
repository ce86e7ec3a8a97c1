"""``exbind show``: one case as the model sees it, a prediction's scoring, the annotated PNG."""

from __future__ import annotations

import json

from PIL import Image

from exbind import main
from reports.show import GOLD_COLOUR, describe, draw_boxes, find_case


def _same_row_other_column(row: dict) -> str:
    gold = json.loads(row["gold"])["cell_id"]
    prefix = gold.split("_c")[0]
    others = sorted(c["candidate_id"] for c in row["candidates"]
                    if c["candidate_id"].startswith(prefix + "_c") and c["candidate_id"] != gold)
    return others[0]


def test_show_scores_a_wrong_column_as_the_paper_worked_example(export_dir):
    config, row = find_case(export_dir, "targeted_table_compact_0000__table")
    assert config == "targeted_table"
    wrong = _same_row_other_column(row)
    text, record = describe(row, json.dumps({"cell_id": wrong}))
    assert record["scores"] == {"candidate_valid": 1, "table_row": 1, "table_column": 0, "table_cell": 0, "exact": 0}
    assert record["first_violation"] == "table_column"
    assert f"instruction: {row['instruction']}" in text
    assert "first violation: table_column" in text
    assert text.count('"candidate_id"') == len(row["candidates"])


def test_show_png_marks_gold_in_green(export_dir, tmp_path):
    _, row = find_case(export_dir, "broad_relational_0000__svg", "broad")
    png = draw_boxes(row, None, tmp_path / "case.png")
    image = Image.open(png).convert("RGB")
    assert image.size == tuple(json.loads(row["reference"])["image_size"])
    gold = json.loads(row["gold"])["target_id"]
    (box,) = [c["bbox"] for c in row["candidates"] if c["candidate_id"] == gold]
    x, y, w, h = box
    assert image.getpixel((x + w // 2, y + h)) == GOLD_COLOUR


def test_show_cli_exit_codes(export_dir, tmp_path, capsys):
    assert main(["show", "no_such_case", "--export", str(export_dir), "--config", "broad"]) == 2
    assert "is not in config 'broad'" in capsys.readouterr().out
    assert main(["show", "x", "--export", str(tmp_path)]) == 2
    assert "is not an ExBind export" in capsys.readouterr().out
    assert main(["show", "broad_relational_0000__svg", "--export", str(export_dir), "--config", "broad",
                 "--png", str(tmp_path / "a.png")]) == 0
    assert (tmp_path / "a.png").is_file()


def test_show_png_path_is_checked_first_and_write_errors_are_one_line(export_dir, tmp_path, capsys, monkeypatch):
    afile = tmp_path / "somefile.txt"
    afile.write_text("x", encoding="utf-8")
    case = ["show", "broad_relational_0000__svg", "--export", str(export_dir), "--config", "broad"]
    assert main([*case, "--png", "/proc/x/a.png"]) == 2
    assert capsys.readouterr().out == ("show: --png /proc/x/a.png: cannot write there (No such file or directory); "
                                       "choose a writable path\n")
    assert main([*case, "--png", str(afile / "a.png")]) == 2
    assert capsys.readouterr().out == (f"show: --png {afile}/a.png: cannot write there ({afile} is not a directory); "
                                       "choose a writable path\n")
    assert main([*case, "--png", str(tmp_path)]) == 2
    assert capsys.readouterr().out == f"show: --png {tmp_path} is a directory; choose a file path\n"

    def refuse(*args, **kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr("PIL.Image.Image.save", refuse)
    assert main([*case, "--png", str(tmp_path / "b.png")]) == 2
    assert capsys.readouterr().out.splitlines()[-1] == (f"show: --png {tmp_path / 'b.png'}: cannot write there "
                                                        "(Permission denied); choose a writable path")


def test_show_hint_names_the_export_path(export_dir, capsys, monkeypatch):
    monkeypatch.chdir(export_dir.parent)
    assert main(["show", "nope_case", "--config", "broad"]) == 2
    assert capsys.readouterr().out == (
        "show: case id 'nope_case' is not in config 'broad' of ./exbind; list ids with: python -c \"import datasets; "
        "print(datasets.load_dataset('./exbind', 'broad', split='test')['case_id'][:5])\"\n")
    assert main(["show", "nope_case", "--export", str(export_dir), "--config", "targeted_table"]) == 2
    assert f"datasets.load_dataset('{export_dir}', 'targeted_table', split='test')" in capsys.readouterr().out


def test_show_prints_a_dash_for_no_condition():
    row = {"case_id": "c", "format": "table", "family": "table", "condition": None, "instruction": "i",
           "candidates": [], "gold": "{}", "gold_rank": 1}
    assert describe(row)[0].splitlines()[0] == "case: c  format: table  family: table  condition: -"
    assert describe({**row, "condition": "compact"})[0].splitlines()[0] == (
        "case: c  format: table  family: table  condition: compact")


def test_show_searches_only_the_configs_a_subset_export_holds(tmp_path, capsys):
    from composition.release import ReleaseRun
    from publishing.export import export_release

    out = tmp_path / "exbind"
    export_release(out, lambda: ReleaseRun(processes=1, configs=["targeted_hierarchy"]), show_progress=False)
    assert main(["show", "targeted_hierarchy_depth_2_0000__tree", "--export", str(out),
                 "--png", str(tmp_path / "c.png")]) == 0
    assert capsys.readouterr().out.startswith("config: targeted_hierarchy\ncase: targeted_hierarchy_depth_2_0000__tree")
    assert main(["show", "nope_case", "--export", str(out)]) == 2
    assert capsys.readouterr().out.strip() == (
        f"show: case id 'nope_case' is not in any config of {out}; list ids with: python -c \"import datasets; "
        f"print(datasets.load_dataset('{out}', 'targeted_hierarchy', split='test')['case_id'][:5])\"")


def test_show_on_a_damaged_export_is_one_line(export_dir, tmp_path, capsys):
    import shutil

    out = tmp_path / "exbind"
    shutil.copytree(export_dir, out)
    shard = next((out / "data" / "broad").glob("*.parquet"))
    data = bytearray(shard.read_bytes())
    data[len(data) // 2: len(data) // 2 + 64] = b"\0" * 64  # a damaged stretch inside the column data
    shard.write_bytes(bytes(data))
    assert main(["show", "broad_relational_0000__svg", "--export", str(out), "--png", str(tmp_path / "c.png")]) == 2
    rel = shard.relative_to(out).as_posix()
    assert capsys.readouterr().out == (
        f"show: {out}: 1 file(s) do not match exbind_manifest.json: {rel} (SHA-256 differs from the manifest: "
        f"modified or corrupted since the build); refusing to read the export. Restore the files or rebuild it "
        f"with `python exbind.py build --out {out}`\n")


def test_show_refuses_to_replace_a_file_that_is_not_a_png(export_dir, tmp_path, capsys):
    preds = tmp_path / "preds.jsonl"
    preds.write_text('{"case_id": "x", "output": "{}"}\n')
    assert main(["show", "broad_relational_0000__svg", "--export", str(export_dir), "--png", str(preds)]) == 2
    assert capsys.readouterr().out == (f"show: --png {preds} exists and is not a PNG; refusing to replace it "
                                       "(choose another path)\n")
    assert preds.read_text() == '{"case_id": "x", "output": "{}"}\n'
    png = tmp_path / "old.png"  # an earlier picture is replaced
    assert main(["show", "broad_relational_0000__svg", "--export", str(export_dir), "--png", str(png)]) == 0
    assert main(["show", "broad_relational_0000__svg", "--export", str(export_dir), "--png", str(png)]) == 0
    assert capsys.readouterr().out.rstrip().endswith(f"wrote {png} (candidate boxes; gold green)")


def test_show_scores_a_click_in_the_frame_given(export_dir, tmp_path, capsys):
    _, row = find_case(export_dir, "broad_relational_0000__svg", "broad")
    gold = json.loads(row["gold"])["target_id"]
    (box,) = [c["bbox"] for c in row["candidates"] if c["candidate_id"] == gold]
    x, y, w, h = box
    click = json.dumps({"x": x + w // 2, "y": y + h // 2})
    text, record = describe(row, click)
    assert record["status"] == "invalid" and "no coordinate frame given" in record["reason"]
    text, record = describe(row, click, "pixel")
    assert (record["status"], record["scores"]["exact"], record["predicted"]) == ("valid", 1, {"target_id": gold})
    assert main(["show", "broad_relational_0000__svg", "--export", str(export_dir), "--prediction", click,
                 "--png", str(tmp_path / "c.png")]) == 0
    assert "hint: this prediction is a click; pass --coordinate-frame pixel|unit|thousand to score it" in \
        capsys.readouterr().out
    assert main(["show", "broad_relational_0000__svg", "--export", str(export_dir), "--prediction", click,
                 "--coordinate-frame", "pixel", "--png", str(tmp_path / "c.png")]) == 0
    assert "scores: candidate_valid=1, identity=1, attribute=1, anchor=1, relation=1, exact=1" in \
        capsys.readouterr().out


def test_an_unknown_config_is_one_line_in_show_and_predict(export_dir, tmp_path, capsys):
    known = "choose from broad, paired, targeted_table, targeted_hierarchy, targeted_table_permuted, " \
            "targeted_table_column_metadata, legacy_bridge\n"
    assert main(["show", "x", "--config", "nope", "--export", str(export_dir)]) == 2
    assert capsys.readouterr().out == "show: --config 'nope' is not an ExBind config; " + known
    assert main(["predict", "--config", "nope", "--predictor", "random", "--export", str(export_dir),
                 "--out", str(tmp_path / "p.jsonl")]) == 2
    assert capsys.readouterr().err == "predict: --config 'nope' is not an ExBind config; " + known
    assert not (tmp_path / "p.jsonl").exists()
