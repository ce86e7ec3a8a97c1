"""Predictors (issue 4; docs/specification.md §7, §9): gate baselines as predictors, rankers, fusion, CLI.

Rankings are checked here by scoring their top-1 as a plain reference through
``exbind_scoring.score_prediction``; R@k and MRR are computed in this file only.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import pytest

from exbind_scoring import load_reference, score_prediction
from generator.baselines import random_expectation
from predictors import PREDICTORS, predict, read_jsonl, write_jsonl
from predictors.cli import main as cli_main
from predictors.rankers import (
    bm25_scores, case_generator, fuse_rankings, get_minilm, gold_item, jaccard_scores, min_rank_oracle,
    rank_case, rank_of, ranking_items, reciprocal_rank_fusion, tie_break_key,
)

REPO = Path(__file__).resolve().parent.parent


def _top1_output(row: dict, pred: dict) -> str:
    """The ranking's top-1 as a plain reference output."""
    ref = load_reference(row["reference"])
    top = pred["ranking"][0]
    if ref["family"] == "graph":
        return json.dumps({"source_id": top[0], "target_id": top[1]})
    return json.dumps({ref["output_keys"][0]: top})


def _exact(rows, preds) -> int:
    outs = [_top1_output(r, p) if "ranking" in p else p["output"] for r, p in zip(rows, preds)]
    return sum(score_prediction(o, r["reference"])["scores"]["exact"] for o, r in zip(outs, rows))


def _gold_ranks(rows, preds) -> list[int]:
    ranks = []
    for r, p in zip(rows, preds):
        ranking = [tuple(x) if isinstance(x, list) else x for x in p["ranking"]]
        ranks.append(rank_of(ranking, gold_item(r["reference"])))
    return ranks


def _first(rows, fmt):
    return next(r for r in rows if r["format"] == fmt)


# --------------------------------------------------------------------------- gate baselines


@pytest.mark.parametrize("suite,configs", [("targeted", ("targeted_table", "targeted_hierarchy")), ("broad", ("broad",))])
def test_gate_baseline_predictors_equal_manifest_gate_table(rows, export_dir, suite, configs):
    manifest = json.loads((export_dir / "exbind_manifest.json").read_text())
    gate = manifest["gate_tables"][suite]
    suite_rows = [r for c in configs for r in rows[c]]
    assert len(suite_rows) == gate["n"]
    for name in ("lexical_only", "type_only", "structural_oracle"):
        preds = predict(suite_rows, name)
        assert [p["case_id"] for p in preds] == [r["case_id"] for r in suite_rows]
        assert {p["predictor"] for p in preds} == {name}
        assert _exact(suite_rows, preds) / len(suite_rows) == gate[name], name
    expectation = sum(random_expectation(r["reference"]) for r in suite_rows) / len(suite_rows)
    assert expectation == pytest.approx(gate["random_expectation"], abs=1e-15)


def test_gate_baselines_abstain_on_ties(rows):
    table = rows["targeted_table"]
    preds = predict(table, "lexical_only")
    abstain = [p["output"] == "" for p in preds]
    # 80 unique top-overlap answers (all the lexical decoy: right row, wrong column), 40 ties
    # (the conjunctive cases: two condition cells of the target row tie with a decoy row's).
    assert sum(abstain) == 40
    records = [score_prediction(p["output"], r["reference"]) for p, r in zip(preds, table)]
    assert {rec["status"] for rec, a in zip(records, abstain) if a} == {"unresolved"}
    assert [rec["first_violation"] for rec, a in zip(records, abstain) if not a] == ["table_column"] * 80
    assert all(p["output"] == "" for p in predict(rows["targeted_hierarchy"], "type_only"))


def test_random_predictor_is_seeded_per_case(rows):
    table = rows["targeted_table"]
    a, b = predict(table, "random", seed=42), predict(table, "random", seed=42)
    assert a == b
    assert [p["output"] for p in a[:2]] == ['{"cell_id": "cell_r01_c02"}', '{"cell_id": "cell_r03_c01"}']
    # Per-case seeding: the answer for a case does not depend on the other rows.
    assert predict(table[1:2], "random", seed=42)[0] == a[1]
    c = predict(table, "random", seed=7)
    assert c[0]["output"] == '{"cell_id": "cell_r01_c01"}'
    assert sum(x["output"] != y["output"] for x, y in zip(a, c)) == 113
    # One realisation scatters around the expectation (targeted_table: 4/120; broad: 17/250).
    assert _exact(table, a) == 4
    broad = rows["broad"]
    pb = predict(broad, "random", seed=42)
    assert _exact(broad, pb) == 17
    assert {score_prediction(p["output"], r["reference"])["status"] for p, r in zip(pb, broad)} == {"valid"}
    for p, r in zip(pb, broad):
        if r["format"] == "graph":
            out = json.loads(p["output"])
            assert out["source_id"] != out["target_id"]
    # The generator's seed is SHA-256 of "seed|case_id|purpose", first 8 bytes big-endian.
    digest = hashlib.sha256(f"42|{table[0]['case_id']}|random".encode()).digest()
    import numpy as np

    expect = np.random.default_rng(int.from_bytes(digest[:8], "big")).integers(5)
    assert case_generator(table[0]["case_id"], 42, "random").integers(5) == expect


# --------------------------------------------------------------------------- scorers


def test_jaccard_exact_values():
    assert jaccard_scores("the owner of Team B", ["Team B", "owner", "", "Team C owner"]) == [
        Fraction(2, 5), Fraction(1, 5), Fraction(0), Fraction(2, 6)]
    assert jaccard_scores("", ["", "x"]) == [Fraction(0), Fraction(0)]


def test_bm25_matches_hand_computation():
    # One collection of three candidates: {b, team} (dl 2), {alpha, owner, team} (dl 3), {} (dl 0).
    scores = bm25_scores("the status of Team B", ["Team B", "team alpha owner", ""])
    k1, b, n, avgdl = 1.5, 0.75, 3, 5 / 3

    def idf(df):
        return math.log(1 + (n - df + 0.5) / (df + 0.5))

    def tf_part(dl):
        return 1 / (1 + k1 * (1 - b + b * dl / avgdl))

    hand = [(idf(2) + idf(1)) * tf_part(2), idf(2) * tf_part(3), 0.0]
    assert [round(s, 4) for s in scores] == [round(h, 4) for h in hand] == [0.5324, 0.1382, 0.0]
    # Short tokens and digits count ("b", "3"): bm25s' own tokenizer would drop them.
    team_b, team_c = bm25_scores("row 3 of team b", ["Team B", "Team C"])
    assert team_b > team_c > 0.0
    assert bm25_scores("row 3", ["3", "4"])[0] > 0.0
    # No shared token (e.g. bare SVG shapes with empty texts): all zeros, no error.
    assert bm25_scores("the red circle", ["", "", ""]) == [0.0, 0.0, 0.0]
    assert bm25_scores("anything", []) == []


def test_tie_break_rule_is_pinned_sha256(rows):
    svg = _first(rows["broad"], "svg")  # bare shapes: every candidate text is empty
    assert svg["case_id"] == "broad_relational_0000__svg"
    assert set(jaccard_scores(svg["instruction"], ["", ""])) == {0}
    ranking = rank_case(svg["case_id"], svg["instruction"], svg["reference"], "rank_jaccard")
    ids = [c["id"] for c in load_reference(svg["reference"])["candidates"]]
    by_hash = sorted(ids, key=lambda i: hashlib.sha256(f"{svg['case_id']}|rank_jaccard|{i}".encode()).hexdigest())
    assert ranking == by_hash
    assert ranking[:3] == ["e_8f2a", "e_5f3e", "e_e4ee"]
    assert tie_break_key("targeted_table_compact_0000__table", "rank_bm25", "cell_r01_c01") == (
        "a091e0b49bb9d5674aae0c868870e798595e6633acab67e72e4bb950354cb323")
    assert tie_break_key("c", "rank_rrf", ("g_1", "g_2")) == hashlib.sha256(b"c|rank_rrf|g_1->g_2").hexdigest()


def test_rankings_do_not_depend_on_python_hash_seed(rows, tmp_path):
    subset = [rows["targeted_table"][0], _first(rows["broad"], "graph"), _first(rows["broad"], "tree")]
    (tmp_path / "rows.json").write_text(json.dumps(subset))
    code = (
        "import json, sys; sys.path.insert(0, sys.argv[1]); from predictors import predict; "
        "rows = json.load(open(sys.argv[2])); "
        "print(json.dumps([predict(rows, n) for n in ('rank_jaccard', 'rank_bm25', 'rank_random')]))"
    )
    outs = []
    for seed in ("0", "12345"):
        env = dict(os.environ, PYTHONHASHSEED=seed)
        proc = subprocess.run([sys.executable, "-c", code, str(REPO), str(tmp_path / "rows.json")],
                              capture_output=True, text=True, env=env, check=True)
        outs.append(json.loads(proc.stdout))
    assert outs[0] == outs[1] == [predict(subset, n) for n in ("rank_jaccard", "rank_bm25", "rank_random")]


def test_rrf_exact_on_toy_input():
    fused = reciprocal_rank_fusion([["a", "b", "c"], ["b", "c", "a"]], k=60)
    assert fused == {"a": Fraction(1, 61) + Fraction(1, 63), "b": Fraction(1, 62) + Fraction(1, 61),
                     "c": Fraction(1, 63) + Fraction(1, 62)}
    assert fuse_rankings("toy", [["a", "b", "c"], ["b", "c", "a"]]) == ["b", "a", "c"]
    # A repeated item counts at its first position; a missing item gets nothing from that list.
    assert reciprocal_rank_fusion([["a", "a", "b"], ["b"]], k=60) == {"a": Fraction(1, 61), "b": Fraction(1, 63) + Fraction(1, 61)}
    # An exact tie is broken by the sha256 rule with ranker name rank_rrf.
    tied = fuse_rankings("toy", [["x", "y"], ["y", "x"]])
    assert tied == sorted(["x", "y"], key=lambda i: tie_break_key("toy", "rank_rrf", i))


# --------------------------------------------------------------------------- rankers on the release


def test_ranking_predictions_shape_and_graph_pairs(rows):
    broad = rows["broad"]
    preds = predict(broad, "rank_bm25")
    for r, p in zip(broad, preds):
        assert set(p) == {"case_id", "output", "predictor", "ranking"}
        assert json.loads(p["output"]) == {"ranking": p["ranking"]}
        n = len(load_reference(r["reference"])["candidates"])
        if r["format"] == "graph":
            assert len(p["ranking"]) == n * (n - 1) == len({tuple(x) for x in p["ranking"]})
            assert all(isinstance(x, list) and x[0] != x[1] for x in p["ranking"])
        else:
            assert sorted(p["ranking"]) == sorted(ranking_items(r["reference"]))
    graph = _first(broad, "graph")
    ranking = rank_case(graph["case_id"], graph["instruction"], graph["reference"], "rank_jaccard")
    # Pair score = score(source) + score(target): both directions of the top pair tie; the hash orders them.
    assert set(ranking[:2]) == {("g_bce7", "g_0adf"), ("g_0adf", "g_bce7")}


def test_ranker_scores_on_targeted_table_and_lexical_decoy(rows):
    table = rows["targeted_table"]
    preds = predict(table, "rank_bm25")
    ranks = _gold_ranks(table, preds)
    assert _exact(table, preds) == sum(r == 1 for r in ranks) == 0
    assert sum(r <= 5 for r in ranks) == 16
    assert round(sum(1 / r for r in ranks) / len(ranks), 4) == 0.1093
    records = [score_prediction(_top1_output(r, p), r["reference"]) for r, p in zip(table, preds)]
    decoy = sum(rec["scores"]["table_row"] == 1 and rec["scores"]["table_column"] == 0 for rec in records)
    assert decoy == 99  # of 120 top-1 errors: right row, wrong column (the matched condition value)


def test_rank_random_and_jaccard_on_broad(rows):
    broad = rows["broad"]
    for name, exact, r5 in (("rank_random", 14, 82), ("rank_jaccard", 31, 140)):
        preds = predict(broad, name)
        ranks = _gold_ranks(broad, preds)
        assert (_exact(broad, preds), sum(r <= 5 for r in ranks)) == (exact, r5), name
        assert _exact(broad, preds) == sum(r == 1 for r in ranks)


def test_min_rank_oracle_and_rrf(rows):
    table = rows["targeted_table"][:20]
    comps = {n: predict(table, n) for n in ("rank_jaccard", "rank_bm25")}
    oracle = predict(table, "rank_oracle_minrank", fuse="jaccard,bm25")
    rrf = predict(table, "rank_rrf", fuse=["jaccard", "rank_bm25"])
    for k, (r, o) in enumerate(zip(table, oracle)):
        comp_ranks = {n: _gold_ranks([r], [p[k]])[0] for n, p in comps.items()}
        assert o["min_rank"] == min(comp_ranks.values()) == _gold_ranks([r], [o])[0]
        assert comp_ranks[o["oracle_ranker"]] == o["min_rank"]
        assert o["fuse"] == ["rank_jaccard", "rank_bm25"]
        expect = fuse_rankings(r["case_id"], [comps[n][k]["ranking"] for n in comps])
        assert rrf[k]["ranking"] == expect
    assert min_rank_oracle(table[0]["reference"], {}) == (None, None)
    with pytest.raises(ValueError, match="fuse applies"):
        predict(table, "rank_bm25", fuse="jaccard")
    with pytest.raises(ValueError, match="cannot fuse"):
        predict(table, "rank_rrf", fuse="bm25,tfidf")
    with pytest.raises(ValueError, match="unknown predictor"):
        predict(table, "bm25")


def test_minilm_loads_offline_and_ranks(rows):
    assert os.environ["HF_HUB_OFFLINE"] == "1"
    model = get_minilm()
    assert get_minilm(None, 64) is model  # loaded once per process
    cos = model.cosine_scores("In the row for the project whose region is Iberia, pick the owner cell.",
                              ["Iberia", "owner", ""])
    assert [round(c, 3) for c in cos] == [0.610, 0.359, 0.064]
    assert float((model.embed("Iberia") ** 2).sum()) == pytest.approx(1.0, abs=1e-5)
    cases = [rows["targeted_table"][0], _first(rows["broad"], "graph"), _first(rows["broad"], "dom")]
    tops = [predict([c], "rank_minilm")[0]["ranking"][0] for c in cases]
    # Table: the matched condition cell (lexical decoy); graph: the right endpoints (direction by
    # the tie-break); dom: the module element named in the instruction.
    assert tops == ["cell_r01_c02", ["g_0adf", "g_bce7"], "d_4e1c"]


def test_minilm_lexical_decoy_on_compact_tables(rows):
    table = [r for r in rows["targeted_table"] if r["condition"] == "compact"]
    assert len(table) == 40
    preds = predict(table, "rank_minilm")
    ranks = _gold_ranks(table, preds)
    assert (sum(r == 1 for r in ranks), sum(r <= 5 for r in ranks)) == (1, 15)
    records = [score_prediction(_top1_output(r, p), r["reference"]) for r, p in zip(table, preds)]
    # 35 of the 39 top-1 errors are the matched condition cell: right row, wrong column.
    assert sum(rec["scores"]["table_row"] == 1 and rec["scores"]["table_column"] == 0 for rec in records) == 35


# --------------------------------------------------------------------------- files and CLI


def test_write_jsonl_is_atomic(tmp_path):
    dest = tmp_path / "p.jsonl"
    write_jsonl(dest, [{"case_id": "a", "output": ""}])
    with pytest.raises(ValueError):
        write_jsonl(dest, [{"case_id": "b", "output": float("nan")}])
    assert read_jsonl(dest) == [{"case_id": "a", "output": ""}]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["p.jsonl"]


def test_cli_predict_writes_scoreable_file(rows, export_dir, tmp_path, capsys):
    out = tmp_path / "preds" / "lexical.jsonl"
    rc = cli_main(["predict", "--config", "targeted_table", "--predictor", "lexical_only",
                   "--export", str(export_dir), "--out", str(out)])
    assert rc == 0
    assert "120 predictions of lexical_only on targeted_table (40 abstentions)" in capsys.readouterr().out
    records_hash = json.loads((export_dir / "exbind_manifest.json").read_text())[
        "canonical_records_sha256"]["targeted_table"]
    # Every line names its config and the export's records hash (issue 10 item 5).
    assert read_jsonl(out) == [{"case_id": p["case_id"], "config": "targeted_table", "records_hash": records_hash,
                                **p} for p in predict(rows["targeted_table"], "lexical_only")]
    from exbind import main as exbind_main

    assert exbind_main(["score", "--config", "targeted_table", "--predictions", str(out),
                        "--export", str(export_dir)]) == 0
    assert "40" in capsys.readouterr().out

    # The column-metadata ablation shares the case ids: scoring this file against it is refused.
    assert exbind_main(["score", "--config", "targeted_table_column_metadata", "--predictions", str(out),
                        "--export", str(export_dir)]) == 2
    err = capsys.readouterr().err
    assert ("case 'targeted_table_compact_0000__table' was predicted on config 'targeted_table', not "
            "'targeted_table_column_metadata' (score it with --config targeted_table") in err
    # as the second file of a comparison, the fix names --compare-config
    assert exbind_main(["score", "--config", "targeted_table", "--predictions", str(out), "--compare", str(out),
                        "--compare-config", "targeted_table_column_metadata", "--export", str(export_dir)]) == 2
    assert "(score it with --compare-config targeted_table, or rerun" in capsys.readouterr().err
    # Another build of the same config (another records hash) is refused too.
    other = tmp_path / "other.jsonl"
    lines = read_jsonl(out)
    write_jsonl(other, [{**lines[0], "records_hash": "0" * 64}] + lines[1:])
    assert exbind_main(["score", "--config", "targeted_table", "--predictions", str(other),
                        "--export", str(export_dir)]) == 2
    assert (f"was predicted on another build of 'targeted_table': records_hash {'0' * 64} in the file, "
            f"{records_hash} in the export") in capsys.readouterr().err
    # Old-format lines (no config field) are still accepted; a partial file is reported.
    old = tmp_path / "old.jsonl"
    write_jsonl(old, [{"case_id": p["case_id"], "output": p["output"]} for p in lines[:30]])
    assert exbind_main(["score", "--config", "targeted_table", "--predictions", str(old),
                        "--export", str(export_dir)]) == 0
    assert "partial predictions file: 30 of 120 cases predicted" in capsys.readouterr().out
    # An empty file is exit 2 unless --allow-missing.
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    assert exbind_main(["score", "--config", "targeted_table", "--predictions", str(empty),
                        "--export", str(export_dir)]) == 2
    assert "empty predictions file (no case id)" in capsys.readouterr().err
    assert exbind_main(["score", "--config", "targeted_table", "--predictions", str(empty),
                        "--export", str(export_dir), "--allow-missing"]) == 0
    assert "missing: 120 case(s) without a prediction" in capsys.readouterr().out


def test_cli_predict_errors(export_dir, tmp_path, capsys):
    out = tmp_path / "x.jsonl"
    assert cli_main(["predict", "--config", "broad", "--predictor", "random", "--export",
                     str(tmp_path / "missing"), "--out", str(out)]) == 2
    assert "does not exist" in capsys.readouterr().err
    assert cli_main(["predict", "--config", "broad", "--predictor", "lexical_only", "--fuse", "bm25",
                     "--export", str(export_dir), "--out", str(out)]) == 2
    assert "fuse applies" in capsys.readouterr().err
    assert not out.exists()
    assert cli_main(["predict", "--config", "broad", "--predictor", "random", "--export", str(export_dir),
                     "--out", "/proc/x/y.jsonl"]) == 2
    assert capsys.readouterr().err == ("predict: --out /proc/x/y.jsonl: cannot write there (No such file or "
                                       "directory); choose a writable path\n")
    with pytest.raises(SystemExit):
        cli_main(["predict", "--config", "broad", "--predictor", "nope", "--out", str(out)])
    assert PREDICTORS == ("random", "lexical_only", "type_only", "structural_oracle", "rank_random",
                          "rank_jaccard", "rank_bm25", "rank_minilm", "rank_rrf", "rank_oracle_minrank")
