"""Figures of :mod:`reports.plots` (issue 5): what each figure draws is read back from the
Axes artists (bar heights, line data, image arrays, tick labels, titles, legend texts) and
compared with the result values it was given.

Real data come from the session export (conftest ``export_dir`` / ``rows``) scored with two
deterministic predictors that need no model: the *first-listed* probe (the first candidate
in the released order; a pure position bias) and the structural oracle
(:func:`generator.baselines.structural_oracle`).
"""

from __future__ import annotations

import json

import pytest
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle
from PIL import Image

from exbind import main
from exbind_aggregate import aggregate, paired_comparison
from exbind_scoring import DECLARED_ORDERS, score_prediction
from reports import plots
from generator.baselines import structural_oracle


def first_listed(row: dict) -> str:
    """The first candidate(s) of the released order (graph: the first two as source, target)."""
    keys = list(json.loads(row["output_schema"]))
    return json.dumps(dict(zip(keys, [c["candidate_id"] for c in row["candidates"]])))


def _score(rows: list[dict], predict) -> list[dict]:
    return [score_prediction(predict(r), r["reference"]) for r in rows]


def _bar_heights(ax) -> list[float]:
    return [p.get_height() for p in ax.patches if isinstance(p, Rectangle)]


def _ticks(labels) -> list[str]:
    return [t.get_text() for t in labels]


def _legend(ax) -> list[str]:
    return [t.get_text() for t in ax.get_legend().get_texts()]


@pytest.fixture(scope="module")
def table_first_listed(rows):
    recs = _score(rows["targeted_table"], first_listed)
    return recs, aggregate(recs)


# --------------------------------------------------------------------------- first violations


def test_first_violation_bars_are_the_opportunity_rates(table_first_listed):
    _, result = table_first_listed
    fig = plots.first_violation_figure(result)
    assert isinstance(fig, Figure)
    (ax,) = fig.axes
    labels = ["candidate_valid", "table_row", "table_column", "table_cell", "exact", "none"]
    assert _ticks(ax.get_xticklabels()) == labels  # only labels with opportunities, declared vocabulary order
    # First-listed on targeted_table: 90 wrong-row, 23 right-row/wrong-column, 7 exact (gold at rank 1).
    assert _bar_heights(ax) == pytest.approx([0.0, 0.75, 23 / 120, 0.0, 0.0, 7 / 120])
    assert _bar_heights(ax) == [result["first_violation_profile"][lab]["rate"] for lab in labels]
    assert [t.get_text() for t in ax.texts] == ["0/120", "90/120", "23/120", "0/120", "0/120", "7/120"]
    assert ax.get_title() == "First violations (opportunity-normalized) (n = 120 cases)"
    assert ax.get_ylabel() == "first-violation rate (count / opportunities)"
    assert ax.get_xlabel() == "first violated constraint (declared order)"
    assert _legend(ax) == ["violation (bar label: count/opportunities)", "none = exact", "n = 120 cases"]


def test_first_violation_denominators_differ_per_stage():
    # Two families: the relational stages have 1 opportunity, the table stages 2; none has n = 3.
    result = {"n": 3, "first_violation_profile": {
        "candidate_valid": {"count": 1, "opportunities": 3, "rate": 1 / 3},
        "identity": {"count": 1, "opportunities": 1, "rate": 1.0},
        "attribute": {"count": 0, "opportunities": 1, "rate": 0.0},
        "anchor": {"count": 0, "opportunities": 0, "rate": None},
        "table_row": {"count": 0, "opportunities": 2, "rate": 0.0},
        "table_column": {"count": 1, "opportunities": 2, "rate": 0.5},
        "none": {"count": 0, "opportunities": 3, "rate": 0.0},
    }}
    ax = plots.first_violation_figure(result, include_none=False).axes[0]
    assert _ticks(ax.get_xticklabels()) == ["candidate_valid", "identity", "attribute", "table_row", "table_column"]
    assert _bar_heights(ax) == pytest.approx([1 / 3, 1.0, 0.0, 0.0, 0.5])
    assert [t.get_text() for t in ax.texts] == ["1/3", "1/1", "0/1", "0/2", "1/2"]
    assert _legend(ax) == ["violation (bar label: count/opportunities)", "n = 3 cases"]


# --------------------------------------------------------------------------- survival


def test_survival_lines_are_the_rates_per_family(rows):
    recs = _score(rows["broad"], first_listed)
    result = aggregate(recs)
    fig = plots.survival_figure(result)
    assert fig.get_suptitle() == "Survival along the declared order"
    assert [ax.get_title() for ax in fig.axes] == ["relational", "hierarchy", "graph", "table"]
    for ax, family in zip(fig.axes, DECLARED_ORDERS):
        (line,) = ax.get_lines()
        curve = result["survival"][family]
        assert list(line.get_ydata()) == [p["rate"] for p in curve]
        assert _ticks(ax.get_xticklabels()) == list(DECLARED_ORDERS[family])
        assert _legend(ax) == [f"{family} (n = {curve[0]['n']})"]
        assert ax.get_xlabel() == "stage k (declared order)"
    assert fig.axes[0].get_ylabel() == "S(k): fraction of cases surviving"
    assert [curve[0]["n"] for curve in result["survival"].values()] == [75, 75, 50, 50]


def test_survival_table_values(table_first_listed):
    _, result = table_first_listed
    (ax,) = plots.survival_figure(result).axes
    assert list(ax.get_lines()[0].get_ydata()) == pytest.approx([1.0, 0.25, 7 / 120, 7 / 120, 7 / 120])
    assert [t.get_text() for t in ax.texts] == ["120", "30", "7", "7", "7"]
    assert _legend(ax) == ["table (n = 120)"]


# --------------------------------------------------------------------------- transitions


def test_transition_matrix_orders_labels_by_the_vocabulary():
    rows, cols, counts = plots.transition_matrix({"none->none": 3, "identity->none": 2, "identity->identity": 1,
                                                  "role->exact": 4})
    assert rows == ["identity", "role", "none"]
    assert cols == ["identity", "exact", "none"]
    assert counts == [[1, 0, 2], [0, 4, 0], [0, 0, 3]]
    with pytest.raises(ValueError, match="not '<label a>-><label b>'"):
        plots.transition_matrix({"identity": 1})


def test_transition_figure_draws_the_counts(rows):
    result = aggregate(_score(rows["paired"], first_listed))
    cons = result["cross_format_consistency"]
    fig = plots.transition_figure(result)
    assert [ax.get_title() for ax in fig.axes] == ["svg -> canvas", "tree -> dom"]
    for ax, pair in zip(fig.axes, ("svg-canvas", "tree-dom")):
        r, c, counts = plots.transition_matrix(cons[pair]["transitions"])
        assert ax.images[0].get_array().tolist() == counts
        assert _ticks(ax.get_yticklabels()) == r and _ticks(ax.get_xticklabels()) == c
        assert sum(map(sum, counts)) == cons[pair]["groups"] == 25
        assert _legend(ax)[-1] == (f"n = 25 groups; consistent {cons[pair]['consistent']} "
                                   f"({cons[pair]['consistent'] / 25:.3f})")
    assert fig.axes[1].get_ylabel() == "first violation on tree"
    assert fig.axes[1].get_xlabel() == "first violation on dom"

    one = plots.transition_figure(cons, pairs=["tree-dom"], title="tree only")
    assert [ax.get_title() for ax in one.axes] == ["tree -> dom"] and one.get_suptitle() == "tree only"
    with pytest.raises(KeyError, match="svg-canvas"):
        plots.transition_figure({"tree-dom": cons["tree-dom"]}, pairs=["svg-canvas"])


def test_transition_figure_synthetic_values():
    cons = {"tree-dom": {"groups": 6, "consistent": 3, "rate": 0.5, "incomplete_groups": 0,
                         "transitions": {"identity->none": 2, "none->none": 3, "identity->identity": 1}}}
    (ax,) = plots.transition_figure(cons).axes
    assert ax.images[0].get_array().tolist() == [[1, 2], [0, 3]]
    assert [t.get_text() for t in ax.texts] == ["1", "2", "0", "3"]
    assert _legend(ax) == ["cell: groups (count)", "n = 6 groups; consistent 3 (0.500)"]


# --------------------------------------------------------------------------- gold rank


def test_accuracy_by_gold_rank_synthetic_bins():
    refs = [{"case_id": f"c{i}", "gold_rank": rank} for i, rank in enumerate([1, 1, 2, 5, 13, 30, 4])]
    recs = [{"case_id": f"c{i}", "scores": {"exact": e}} for i, e in enumerate([1, 0, 1, 0, 0, 1, 1])]
    table = plots.accuracy_by_gold_rank(recs, refs)
    assert [(b["bin"], b["n"], b["n_exact"]) for b in table] == [
        ("1", 2, 1), ("2-4", 2, 2), ("5-8", 1, 0), ("9-12", 0, 0), ("13-24", 1, 0), ("25+", 1, 1)]
    assert table[0]["accuracy"] == 0.5 and table[3]["accuracy"] is None and table[3]["ci"] is None
    assert [round(x, 3) for x in table[0]["ci"]] == [0.095, 0.905]
    assert [round(x, 3) for x in table[1]["ci"]] == [0.342, 1.0]
    custom = plots.accuracy_by_gold_rank(recs, refs, bins=[(1, 4), (5, None)])
    assert [(b["bin"], b["n"], b["n_exact"]) for b in custom] == [("1-4", 4, 3), ("5+", 3, 1)]

    ax = plots.gold_rank_figure(recs, refs).axes[0]
    assert _ticks(ax.get_xticklabels()) == ["1", "2-4", "5-8", "13-24", "25+"]  # the empty bin is left out
    assert _bar_heights(ax) == [0.5, 1.0, 0.0, 0.0, 1.0]
    with pytest.raises(ValueError, match="no reference"):
        plots.accuracy_by_gold_rank(recs + [{"case_id": "zz", "scores": {"exact": 1}}], refs)


def test_gold_rank_figure_shows_the_position_bias(rows, table_first_listed):
    recs, _ = table_first_listed
    refs = [r["reference"] for r in rows["targeted_table"]]
    table = plots.accuracy_by_gold_rank(recs, refs)
    # bins 1, 2-4, 5-8, 9-12, 13-24, 25+: ranks 13+ (32 cases) are all high_candidate
    assert [(b["n_exact"], b["n"]) for b in table] == [(7, 7), (0, 22), (0, 29), (0, 30), (0, 9), (0, 23)]
    ax = plots.gold_rank_figure(recs, refs).axes[0]
    assert _bar_heights(ax) == [1.0, 0.0, 0.0, 0.0, 0.0, 0.0]
    assert [t.get_text() for t in ax.texts] == ["7/7", "0/22", "0/29", "0/30", "0/9", "0/23"]
    assert ax.get_title() == "Exact accuracy by gold rank (n = 120 cases)"
    assert ax.get_xlabel() == "gold rank (1-based position in the candidate list)"
    assert ax.get_ylabel() == "exact accuracy (fraction of cases)"
    assert _legend(ax) == ["exact / cases, Wilson 95% CI", "n = 120 cases"]


# --------------------------------------------------------------------------- breakdown, paired


def test_breakdown_figure_by_condition(table_first_listed):
    _, result = table_first_listed
    ax = plots.breakdown_figure(result, "condition").axes[0]
    assert _ticks(ax.get_xticklabels()) == ["compact", "conjunctive", "high_candidate"]
    assert _bar_heights(ax) == [3 / 40, 3 / 40, 1 / 40]
    assert [t.get_text() for t in ax.texts] == ["3/40", "3/40", "1/40"]
    assert ax.get_title() == "Exact accuracy by condition"
    assert _legend(ax)[-1] == "n = 120 cases"
    with pytest.raises(ValueError, match="by='suite'"):
        plots.breakdown_figure(result, "suite")


def test_paired_figure_paper_example():
    original = [{"case_id": f"c{i:03d}", "scores": {"exact": int(i < 63)}} for i in range(120)]
    spans = {1: (10, 87), 2: (5, 76), 3: (0, 68)}
    variant = [{"case_id": f"c{i:03d}__perm{k}", "parent_case_id": f"c{i:03d}", "scores": {"exact": int(lo <= i < hi)}}
               for k, (lo, hi) in spans.items() for i in range(120)]
    comparison = paired_comparison(original, variant)
    ax = plots.paired_figure(comparison).axes[0]
    assert _ticks(ax.get_xticklabels()) == ["original", "permutation 1", "permutation 2", "permutation 3"]
    assert _bar_heights(ax) == [63 / 120, 77 / 120, 71 / 120, 68 / 120]
    assert ax.get_title() == "Paired comparison: delta +0.075, 95% CI [+0.022, +0.131]"
    assert _legend(ax)[-1] == "n = 120 paired parents; bootstrap over parents"


# --------------------------------------------------------------------------- a rendered case


def test_candidate_boxes_follow_the_pixel_bboxes(loaded):
    row = loaded["broad"][0]
    assert row["format"] == "svg"
    ax = plots.candidate_boxes_figure(row).axes[0]
    boxes = [p for p in ax.patches if isinstance(p, Rectangle)]
    expected = [c["bbox"] for c in row["candidates"] if c["bbox"]]
    assert len(boxes) == len(expected) == 8
    assert [[*p.get_xy(), p.get_width(), p.get_height()] for p in boxes] == expected
    gold = json.loads(row["gold"])["target_id"]
    red = [c["candidate_id"] for c, p in zip(row["candidates"], boxes) if p.get_linewidth() == 2.0]
    assert red == [gold]
    assert ax.get_xlim() == (0.0, 440.0) and ax.get_ylim() == (360.0, 0.0)  # image pixels, origin top left
    assert _legend(ax) == ["candidate box", "gold", "n = 8 candidates"]
    text_row = loaded["broad"][next(i for i, r in enumerate(loaded["broad"]["format"]) if r == "tree")]
    with pytest.raises(ValueError, match="no rendered image"):
        plots.candidate_boxes_figure(text_row)


# --------------------------------------------------------------------------- empty input, save_all, CLI


def test_empty_results_do_not_crash(tmp_path):
    result = aggregate([])
    assert plots.first_violation_figure(result).axes[0].texts[0].get_text() == "no scored cases"
    assert plots.survival_figure(result).axes[0].texts[0].get_text() == "no scored cases"
    assert plots.transition_figure(result).axes[0].texts[0].get_text() == "no cross-format groups"
    paths = plots.save_all(result, [], [], tmp_path)
    assert [p.name for p in paths] == ["first_violations.png", "survival.png", "accuracy_by_gold_rank.png"]


def _png_size(path) -> tuple[int, int]:
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with Image.open(path) as im:
        return im.size


def test_save_all_writes_the_expected_files(rows, table_first_listed, tmp_path):
    recs, result = table_first_listed
    refs = [r["reference"] for r in rows["targeted_table"]]
    paths = plots.save_all(result, recs, refs, tmp_path / "table")
    assert [p.name for p in paths] == ["first_violations.png", "survival.png", "accuracy_by_gold_rank.png",
                                       "accuracy_by_condition.png"]
    assert sorted(p.name for p in (tmp_path / "table").iterdir()) == sorted(p.name for p in paths)
    assert _png_size(tmp_path / "table" / "first_violations.png") == (780, 480)  # 6 bars: 6.5 x 4 in at 120 dpi
    assert _png_size(tmp_path / "table" / "survival.png") == (540, 456)

    broad = _score(rows["broad"], first_listed)
    paths = plots.save_all(aggregate(broad), broad, [r["reference"] for r in rows["broad"]], tmp_path / "broad")
    assert [p.name for p in paths] == ["first_violations.png", "survival.png", "accuracy_by_gold_rank.png",
                                       "transitions.png"]

    perm = _score(rows["targeted_table_permuted"], first_listed)
    paths = plots.save_all(result, recs, refs, tmp_path / "paired", paired=paired_comparison(recs, perm))
    assert [p.name for p in paths][-1] == "paired_comparison.png"
    assert list(plots.PLOT_FILES.values()) == ["first_violations.png", "survival.png", "accuracy_by_gold_rank.png",
                                               "accuracy_by_condition.png", "transitions.png",
                                               "paired_comparison.png"]


def test_save_all_is_deterministic(rows, table_first_listed, tmp_path):
    recs, result = table_first_listed
    refs = [r["reference"] for r in rows["targeted_table"]]
    a = plots.save_all(result, recs, refs, tmp_path / "a")
    b = plots.save_all(result, recs, refs, tmp_path / "b")
    assert [p.read_bytes() for p in a] == [p.read_bytes() for p in b]


def _write(path, rows, predict) -> None:
    path.write_text("".join(json.dumps({"case_id": r["case_id"], "output": predict(r)}) + "\n" for r in rows))


def test_score_cli_writes_plots(export_dir, rows, tmp_path, capsys):
    _write(tmp_path / "orig.jsonl", rows["targeted_table"],
           lambda r: structural_oracle(r["instruction"], r["reference"]))
    _write(tmp_path / "perm.jsonl", rows["targeted_table_permuted"], first_listed)
    out = tmp_path / "figures"
    code = main(["score", "--config", "targeted_table", "--predictions", str(tmp_path / "orig.jsonl"),
                 "--export", str(export_dir), "--compare-config", "targeted_table_permuted",
                 "--compare", str(tmp_path / "perm.jsonl"), "--resamples", "1000", "--plots", str(out)])
    assert code == 0
    names = ["first_violations.png", "survival.png", "accuracy_by_gold_rank.png", "accuracy_by_condition.png",
             "paired_comparison.png"]
    assert sorted(p.name for p in out.iterdir()) == sorted(names)
    assert f"plots: wrote 5 PNG file(s) to {out}: " + ", ".join(names) in capsys.readouterr().out
