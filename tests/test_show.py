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
