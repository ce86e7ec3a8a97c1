"""Paired comparison (paper Tables 9 and 12) and the `exbind.py score` command line.

The CLI is run in-process through ``exbind.main`` on the session export (conftest
``export_dir``) with predictions from the gate baselines (structural oracle, lexical-only),
so every pinned number is what those real predictors get on the released configs.
"""

from __future__ import annotations

import json
import re

import pytest

from exbind import main
from exbind_aggregate import group_variants, paired_comparison
from generator.baselines import lexical_only, structural_oracle

PER_CASE_FIELDS = {
    "case_id", "status", "parse_path", "predicted", "predicted_latent", "scores", "violations", "first_violation",
    "possible_first_violations", "reason", "format", "family", "condition", "group_id", "parent_case_id",
    "latent_id", "generator_version", "gold", "output",
}


# --------------------------------------------------------------------------- paired_comparison


def _rec(case_id: str, exact: int, parent: str | None = None) -> dict:
    return {"case_id": case_id, "parent_case_id": parent, "scores": {"exact": exact}}


def _paper_example() -> tuple[list[dict], list[dict]]:
    """120 parents; 63 exact originally, 77 / 71 / 68 exact under three permutations."""
    original = [_rec(f"c{i:03d}", int(i < 63)) for i in range(120)]
    spans = {1: (10, 87), 2: (5, 76), 3: (0, 68)}  # exact on parents lo <= i < hi
    variant = [_rec(f"c{i:03d}__perm{k}", int(lo <= i < hi), f"c{i:03d}")
               for k, (lo, hi) in spans.items() for i in range(120)]
    return original, variant


def test_paired_comparison_paper_example():
    original, variant = _paper_example()
    out = paired_comparison(original, variant)
    assert out["parents"] == 120
    assert out["delta"] == pytest.approx(0.075, abs=1e-12)  # 216/360 - 63/120
    assert out["original_exact"] == 63
    assert out["variant_exact"] == {"1": 77, "2": 71, "3": 68}
    assert out["variant_rows"] == {"1": 120, "2": 120, "3": 120}
    # Parents 0-4 drop from 1 to 1/3 and 5-9 to 2/3 (regressed, -5 in all); 63-67 rise to 1,
    # 68-75 to 2/3, 76-86 to 1/3 (improved, +14 in all): (14 - 5) / 120 = 0.075.
    assert (out["improved"], out["regressed"], out["order_sensitive"]) == (24, 10, 34)
    assert [round(x, 3) for x in out["ci"]] == [0.022, 0.131]
    assert out["ci"][0] <= out["delta"] <= out["ci"][1]
    assert (out["resamples"], out["seed"], out["confidence"]) == (10000, 20260824, 0.95)
    assert out["unpaired_original"] == [] and out["unpaired_variant"] == []
    json.dumps(out)  # plain JSON


def test_paired_comparison_is_deterministic_for_the_seed_and_varies_with_it():
    original, variant = _paper_example()
    assert paired_comparison(original, variant)["ci"] == paired_comparison(original, variant)["ci"]
    other = paired_comparison(original, variant, seed=1)["ci"]
    assert other != paired_comparison(original, variant)["ci"]
    assert other[0] <= 0.075 <= other[1]


def test_paired_comparison_parents_are_resampling_units():
    # One parent repeated three times must weigh like one parent, not three cases.
    original = [_rec("a", 0), _rec("b", 1)]
    variant = [_rec(f"a__perm{k}", 1, "a") for k in (1, 2, 3)] + [_rec("b__perm1", 1, "b")]
    out = paired_comparison(original, variant, resamples=2000)
    assert out["delta"] == 0.5  # mean of d_a = 1 and d_b = 0
    assert out["variant_rows"] == {"1": 2, "2": 1, "3": 1}
    assert (out["improved"], out["regressed"], out["order_sensitive"]) == (1, 0, 1)
    assert out["ci"] == [0.0, 1.0]


def test_paired_comparison_column_metadata_keeps_case_ids_and_lists_unpaired():
    original = [_rec("x", 0), _rec("y", 1), _rec("z", 1)]
    variant = [_rec("x", 1), _rec("y", 1), _rec("w", 0)]
    out = paired_comparison(original, variant)
    assert out["parents"] == 2
    assert out["delta"] == 0.5
    assert out["variant_exact"] == {"1": 2}
    assert out["unpaired_original"] == ["z"]
    assert out["unpaired_variant"] == ["w"]


def test_paired_comparison_empty_single_and_constant():
    empty = paired_comparison([], [])
    assert (empty["parents"], empty["delta"], empty["ci"], empty["variant_exact"]) == (0, None, None, {})
    single = paired_comparison([_rec("a", 0)], [_rec("a", 1)])
    assert (single["delta"], single["ci"]) == (1.0, None)
    constant = paired_comparison([_rec("a", 0), _rec("b", 0)], [_rec("a", 1), _rec("b", 1)])
    assert constant["ci"] == [1.0, 1.0]


def test_paired_comparison_rejects_repeated_case_ids():
    with pytest.raises(ValueError, match="'a' appears twice"):
        paired_comparison([_rec("a", 0), _rec("a", 1)], [])
    with pytest.raises(ValueError, match="'a__perm1' appears twice"):
        paired_comparison([_rec("a", 0)], [_rec("a__perm1", 0, "a"), _rec("a__perm1", 1, "a")])


def test_group_variants_falls_back_to_the_perm_suffix():
    groups = group_variants([_rec("p__perm2", 1), _rec("p__perm1", 0), _rec("q", 1)])
    assert {p: [(k, r["case_id"]) for k, r in rows] for p, rows in groups.items()} == {
        "p": [(2, "p__perm2"), (1, "p__perm1")], "q": [(1, "q")]}


# --------------------------------------------------------------------------- the CLI


def _write(path, rows, fn=None, outputs=None):
    with open(path, "w", encoding="utf-8") as fh:
        for i, row in enumerate(rows):
            out = outputs[i] if outputs is not None else fn(row["instruction"], row["reference"])
            fh.write(json.dumps({"case_id": row["case_id"], "output": out}) + "\n")
    return path


@pytest.fixture(scope="module")
def files(rows, tmp_path_factory):
    """Prediction files of the gate baselines on the table configs and the paired config."""
    d = tmp_path_factory.mktemp("predictions")
    out = {}
    for config in ("targeted_table", "targeted_table_permuted", "targeted_table_column_metadata", "paired"):
        for name, fn in (("oracle", structural_oracle), ("lexical", lexical_only)):
            out[config, name] = _write(d / f"{config}.{name}.jsonl", rows[config], fn)
    # Mixed predictors, so parents differ: the original is the oracle on even parent positions
    # i (lexical-only elsewhere); permutation k is the oracle when i * k % 3 == 0, i.e. on all
    # three permutations of parents with i % 3 == 0 and on permutation 3 only otherwise.
    table = rows["targeted_table"]
    position = {r["case_id"]: i for i, r in enumerate(table)}
    original = [(structural_oracle if i % 2 == 0 else lexical_only)(r["instruction"], r["reference"])
                for i, r in enumerate(table)]
    out["targeted_table", "mixed"] = _write(d / "table.mixed.jsonl", table, outputs=original)
    perm = rows["targeted_table_permuted"]
    mixed = []
    for r in perm:
        k = int(r["case_id"].rsplit("__perm", 1)[1])
        fn = structural_oracle if position[r["parent_case_id"]] * k % 3 == 0 else lexical_only
        mixed.append(fn(r["instruction"], r["reference"]))
    out["targeted_table_permuted", "mixed"] = _write(d / "perm.mixed.jsonl", perm, outputs=mixed)
    return out


def _run(capsys, export_dir, *args) -> tuple[int, str, str]:
    code = main(["score", "--export", str(export_dir), *map(str, args)])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _rows(stdout: str, title: str) -> list[list[str]]:
    """Body rows (cells) of the printed table whose title starts with ``title``."""
    lines = stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(title))
    rules = [i for i in range(start + 1, len(lines)) if lines[i] and set(lines[i]) == {"-"}][:3]
    return [re.split(r"\s{2,}", line.strip()) for line in lines[rules[1] + 1:rules[2]]]


def _table(stdout: str, title: str) -> dict[str, list[str]]:
    """{first cell: other cells} of the printed table whose title starts with ``title``."""
    return {cells[0]: cells[1:] for cells in _rows(stdout, title)}


def test_oracle_on_targeted_table(capsys, export_dir, files, tmp_path):
    per_case = tmp_path / "scores.jsonl"
    code, out, err = _run(capsys, export_dir, "--config", "targeted_table",
                          "--predictions", files["targeted_table", "oracle"], "--per-case", per_case)
    assert (code, err) == (0, "")
    assert "scored 120 rows; missing 0; unknown 0" in out
    t7 = _table(out, "Validity and exact accuracy")
    assert t7["all"] == ["120", "120/120", "1.000", "[0.969, 1.000]", "120/120", "1.000", "[0.969, 1.000]", "0"]
    assert t7["compact"] == ["40", "40/40", "1.000", "[0.912, 1.000]", "40/40", "1.000", "[0.912, 1.000]", "0"]
    assert set(t7) == {"all", "compact", "conjunctive", "high_candidate"}
    assert _table(out, "By representation")["table"] == ["120", "120/120 (100.0)", "120/120 (100.0)"]
    t14 = _table(out, "Applicability")
    assert t14["attribute"] == ["120", "1.000", "table"]
    assert t14["anchor"] == ["0", "n/a", "not applicable"]
    t15 = _table(out, "Opportunity-normalized first violations")
    assert t15["none"] == ["120", "120 (1.000)"] and t15["table_column"] == ["120", "0 (0.000)"]
    assert "anchor" not in t15
    assert _rows(out, "Survival") == [["table", stage, "120/120", "1.000"] for stage in
                                      ("candidate_valid", "table_row", "table_column", "table_cell", "exact")]
    assert "no cross-format groups in targeted_table" in out

    lines = per_case.read_text(encoding="utf-8").splitlines()
    assert len(lines) == 120
    first = json.loads(lines[0])
    assert set(first) == PER_CASE_FIELDS
    assert first["case_id"] == "targeted_table_compact_0000__table"
    assert (first["status"], first["first_violation"], first["scores"]["exact"]) == ("valid", "none", 1)
    assert first["output"] == json.dumps(first["gold"])  # the oracle answers gold; both travel with the scores
    assert f"per-case: wrote 120 records (scores, gold, raw output) to {per_case}" in out


def test_lexical_only_on_targeted_table(capsys, export_dir, files, tmp_path):
    report = tmp_path / "report.json"
    code, out, _ = _run(capsys, export_dir, "--config", "targeted_table",
                        "--predictions", files["targeted_table", "lexical"], "--json", report)
    assert code == 0
    t7 = _table(out, "Validity and exact accuracy")
    assert t7["all"] == ["120", "80/120", "0.667", "[0.578, 0.745]", "0/120", "0.000", "[0.000, 0.031]", "80"]
    assert t7["compact"][:2] == ["40", "40/40"]
    assert t7["conjunctive"][:2] == ["40", "0/40"]  # two condition cells tie: the baseline abstains
    assert t7["high_candidate"][:4] == ["40", "40/40", "1.000", "[0.912, 1.000]"]
    t15 = _table(out, "Opportunity-normalized first violations")
    assert t15["candidate_valid"] == ["120", "40 (0.333)"]
    assert t15["table_column"] == ["120", "80 (0.667)"]
    assert t15["none"] == ["120", "0 (0.000)"]
    saved = json.loads(report.read_text(encoding="utf-8"))
    assert "records" not in saved
    s = saved["summary"]
    assert (s["n"], s["n_valid"], s["n_exact"]) == (120, 80, 0)
    assert s["statuses"] == {"unresolved": 40, "valid": 80}
    assert s["violation_set_counts"] == {"candidate_valid": 40, "table_column+table_cell": 80}
    assert [round(x, 3) for x in s["validity_ci"]] == [0.578, 0.745]


def test_cross_format_tables_on_paired(capsys, export_dir, files):
    code, out, _ = _run(capsys, export_dir, "--config", "paired", "--predictions", files["paired", "lexical"])
    assert code == 0
    t8 = _table(out, "By representation")
    assert t8["tree"] == ["25", "5/25 (20.0)", "0/25 (0.0)"] and t8["dom"] == ["25", "25/25 (100.0)", "0/25 (0.0)"]
    assert _table(out, "Applicability")["anchor"] == ["50", "0.500", "svg, canvas"]
    t10 = _table(out, "Cross-format semantic consistency")
    assert t10 == {"svg-canvas": ["25", "0", "0.000", "0"], "tree-dom": ["25", "5", "0.200", "0"]}
    lines = out.split("Paired first-violation transitions", 1)[1]
    assert re.search(r"svg-canvas\s+candidate_valid->candidate_valid\s+25", lines)
    assert re.search(r"tree-dom\s+candidate_valid->hierarchy\s+20", lines)
    assert re.search(r"tree-dom\s+hierarchy->hierarchy\s+5", lines)


def test_missing_cases_are_scored_unresolved(capsys, export_dir, files, tmp_path):
    kept = files["targeted_table", "oracle"].read_text(encoding="utf-8").splitlines()
    dropped = [json.loads(line)["case_id"] for line in kept[:3]]
    partial = tmp_path / "partial.jsonl"
    partial.write_text("\n".join(kept[3:]) + "\n\n", encoding="utf-8")  # a trailing blank line is fine
    per_case = tmp_path / "scores.jsonl"
    code, out, _ = _run(capsys, export_dir, "--config", "targeted_table", "--predictions", partial,
                        "--per-case", per_case)
    assert code == 0
    assert "(117 case ids); scored 120 rows; missing 3; unknown 0" in out
    assert f"missing: 3 case(s) without a prediction, scored unresolved ('no prediction'): {', '.join(dropped)}" in out
    assert _table(out, "Validity and exact accuracy")["all"][:5] == ["120", "117/120", "0.975", "[0.929, 0.991]",
                                                                     "117/120"]
    records = [json.loads(line) for line in per_case.read_text(encoding="utf-8").splitlines()]
    assert len(records) == 120
    missing = [r for r in records if r["reason"] == "no prediction"]
    assert [r["case_id"] for r in missing] == dropped
    assert {(r["status"], r["parse_path"], r["first_violation"]) for r in missing} == {
        ("unresolved", "failed", "candidate_valid")}


def test_duplicate_case_ids_are_an_error(capsys, export_dir, files, tmp_path):
    lines = files["targeted_table", "oracle"].read_text(encoding="utf-8").splitlines()
    dup = tmp_path / "dup.jsonl"
    dup.write_text("\n".join(lines + [lines[0], lines[5]]) + "\n", encoding="utf-8")
    code, out, err = _run(capsys, export_dir, "--config", "targeted_table", "--predictions", dup)
    assert (code, out) == (2, "")
    first, sixth = json.loads(lines[0])["case_id"], json.loads(lines[5])["case_id"]
    assert f"2 duplicate case id(s): {first} (lines 1, 121); {sixth} (lines 6, 122)" in err


def test_unknown_case_ids_fail_unless_allowed(capsys, export_dir, files, tmp_path):
    lines = files["targeted_table", "oracle"].read_text(encoding="utf-8").splitlines()
    extra = tmp_path / "extra.jsonl"
    extra.write_text("\n".join(lines + [json.dumps({"case_id": "nope__table", "output": "{}"})]) + "\n",
                     encoding="utf-8")
    code, out, err = _run(capsys, export_dir, "--config", "targeted_table", "--predictions", extra)
    assert (code, out) == (2, "")
    assert "1 predicted case id(s) are not in config 'targeted_table': nope__table" in err
    code, out, err = _run(capsys, export_dir, "--config", "targeted_table", "--predictions", extra, "--allow-unknown")
    assert (code, err) == (0, "")
    assert "(121 case ids); scored 120 rows; missing 0; unknown 1" in out
    assert "unknown: 1 case id(s) not in targeted_table, ignored (--allow-unknown): nope__table" in out
    assert _table(out, "Validity and exact accuracy")["all"][4] == "120/120"


@pytest.mark.parametrize("line, message", [
    ("not json", "bad.jsonl:2: not a JSON object"),
    ("[1, 2]", "bad.jsonl:2: expected a JSON object, got list"),
    ('{"output": "{}"}', "bad.jsonl:2: missing string field `case_id`"),
    ('{"case_id": 5, "output": "{}"}', "bad.jsonl:2: field `case_id` must be a string, got int"),
    ('{"case_id": "", "output": "{}"}', "bad.jsonl:2: field `case_id` is empty; give the released case id"),
    ('{"case_id": "a"}', "bad.jsonl:2: case 'a' has no `output` field"),
    ('{"case_id": "a", "output": {"cell_id": "x"}}', "`output` must be the raw model output as a string, got dict"),
])
def test_malformed_lines_name_the_line(capsys, export_dir, tmp_path, line, message):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"case_id": "targeted_table_compact_0000__table", "output": ""}\n' + line + "\n",
                   encoding="utf-8")
    code, out, err = _run(capsys, export_dir, "--config", "targeted_table", "--predictions", bad)
    assert (code, out) == (2, "")
    assert message in err


def test_per_case_writer_survives_a_lone_surrogate(capsys, export_dir, tmp_path):
    """``{"cell_id": "\\ud800x"}`` parses to a lone-surrogate id; --per-case writes it escaped (issue 11 item 7)."""
    preds = tmp_path / "surrogate.jsonl"
    preds.write_text(json.dumps({"case_id": "targeted_table_compact_0000__table",
                                 "output": '{"cell_id": "\\ud800x"}'}) + "\n", encoding="utf-8")
    out_dir = tmp_path / "out"
    code, out, err = _run(capsys, export_dir, "--config", "targeted_table", "--predictions", preds,
                          "--per-case", out_dir / "scores.jsonl")
    assert code == 0
    records = [json.loads(line) for line in (out_dir / "scores.jsonl").read_text(encoding="utf-8").splitlines()]
    assert len(records) == 120
    first = next(r for r in records if r["case_id"] == "targeted_table_compact_0000__table")
    assert (first["status"], first["predicted"]) == ("invalid", {"cell_id": "\ud800x"})
    assert [p.name for p in out_dir.iterdir()] == ["scores.jsonl"]  # no temporary file left


def test_malformed_utf8_names_the_line(capsys, export_dir, tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(b'{"case_id": "targeted_table_compact_0000__table", "output": ""}\n'
                    b'{"case_id": "x", "output": "\xff\xfe"}\n')
    code, out, err = _run(capsys, export_dir, "--config", "targeted_table", "--predictions", bad)
    assert (code, out) == (2, "")
    assert f"error: {bad}:2: not valid UTF-8 (byte b'\\xff' at column 29); write predictions files as UTF-8" in err


def test_clicks_in_the_wrong_frame_warn(capsys, export_dir, rows, tmp_path):
    """Gold centres in thousandths scored as pixels fall outside the image: a warning (issue 11 item 9)."""
    from predictors.io import write_jsonl

    clicks = []
    for r in rows["paired"]:
        ref = json.loads(r["reference"])
        if r["format"] in ("svg", "canvas"):
            x, y, w, h = next(c["bbox"] for c in ref["candidates"] if c["id"] == ref["gold"]["target_id"])
            width, height = ref["image_size"]
            clicks.append({"case_id": r["case_id"],
                           "output": json.dumps({"x": (x + w / 2) * 1000 / width, "y": (y + h / 2) * 1000 / height})})
    write_jsonl(tmp_path / "thousandths.jsonl", clicks)
    code, out, err = _run(capsys, export_dir, "--config", "paired", "--predictions", tmp_path / "thousandths.jsonl",
                          "--coordinate-frame", "thousand")
    assert code == 0 and "clicks lie outside" not in err
    assert _table(out, "Click predictions")["50"][0] == "1.000"
    code, out, err = _run(capsys, export_dir, "--config", "paired", "--predictions", tmp_path / "thousandths.jsonl",
                          "--coordinate-frame", "pixel")
    assert code == 0
    (warning,) = [line for line in err.splitlines() if "clicks lie outside" in line]
    outside = int(warning.split("warning: ")[1].split(" of ")[0])
    assert warning.startswith(f"warning: {outside} of 50 clicks lie outside the image") and outside > 25


def test_output_paths_are_checked_before_scoring(capsys, export_dir, files, tmp_path):
    """A bad --per-case / --json / --plots is one line and exit 2 before any report (no traceback after it)."""
    afile = tmp_path / "somefile.txt"
    afile.write_text("x", encoding="utf-8")
    preds = ("--config", "targeted_table", "--predictions", files["targeted_table", "oracle"])
    for args, message in (
        (("--json", afile / "x.json"),
         f"--json {afile}/x.json: cannot write there ({afile} is not a directory); choose a writable path"),
        (("--per-case", afile / "sub" / "y.jsonl"),
         f"--per-case {afile}/sub/y.jsonl: cannot write there ({afile} is not a directory); choose a writable path"),
        (("--plots", afile), f"--plots {afile} is an existing file; choose a folder path"),
        (("--json", tmp_path), f"--json {tmp_path} is a directory; choose a file path"),
        (("--per-case", "/proc/x/y.jsonl"),
         "--per-case /proc/x/y.jsonl: cannot write there (No such file or directory); choose a writable path"),
        (("--per-case", "/proc/y.jsonl"),  # the folder exists; even root cannot create a file there
         "--per-case /proc/y.jsonl: cannot write there (No such file or directory); choose a writable path"),
        (("--per-case", preds[3]), f"--per-case {preds[3]} is also --predictions; choose another path"),
        (("--per-case", tmp_path / "o.jsonl", "--json", tmp_path / "o.jsonl"),
         f"--json {tmp_path}/o.jsonl is also --per-case; choose another path"),
        (("--per-case", export_dir / "README.md"),
         f"--per-case {export_dir}/README.md is inside the export {export_dir}; choose a path outside it"),
    ):
        assert _run(capsys, export_dir, *preds, *args) == (2, "", f"error: {message}\n")
    assert _run(capsys, export_dir, "--run", tmp_path / "run", "--json", afile / "x.json")[::2] == (
        2, f"error: --json {afile}/x.json: cannot write there ({afile} is not a directory); choose a writable path\n")


def test_write_failure_after_the_check_is_one_line(capsys, export_dir, files, tmp_path, monkeypatch):
    def refuse(path, records):
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr("reports.score_cli.write_jsonl", refuse)
    per_case = tmp_path / "scores.jsonl"
    code, out, err = _run(capsys, export_dir, "--config", "targeted_table",
                          "--predictions", files["targeted_table", "oracle"], "--per-case", per_case)
    assert code == 2 and "scored 120 rows" in out
    assert err == f"error: --per-case {per_case}: cannot write there (Permission denied); choose a writable path\n"


def test_a_directory_as_predictions_is_named(capsys, export_dir, files, tmp_path):
    assert _run(capsys, export_dir, "--config", "targeted_table", "--predictions", tmp_path) == (
        2, "", f"error: --predictions {tmp_path} is a directory; pass a JSONL file\n")
    assert _run(capsys, export_dir, "--config", "targeted_table", "--predictions", files["targeted_table", "oracle"],
                "--compare", tmp_path) == (2, "", f"error: --compare {tmp_path} is a directory; pass a JSONL file\n")


def test_a_pipe_as_predictions_is_named_and_run_outputs_are_checked(capsys, export_dir, files, tmp_path):
    import os

    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    assert _run(capsys, export_dir, "--config", "targeted_table", "--predictions", fifo) == (
        2, "", f"error: --predictions {fifo} is not a regular file (a pipe, device or socket); save the "
               "predictions to a JSONL file and pass its path\n")
    run = tmp_path / "run"
    (run / "broad").mkdir(parents=True)
    assert _run(capsys, export_dir, "--run", run, "--json", run / "broad" / "predictions.jsonl") == (
        2, "", f"error: --json {run}/broad/predictions.jsonl is inside the run folder {run}; "
               "choose a path outside it\n")
    assert _run(capsys, export_dir, "--compare-runs", tmp_path / "a", run, "--json", run / "x.json") == (
        2, "", f"error: --json {run}/x.json is inside run folder 2 of --compare-runs {run}; choose a path outside it\n")
    assert _run(capsys, export_dir, "--run", run, "--per-case", tmp_path / "p.jsonl", "--plots", tmp_path / "pl") == (
        2, "", "error: --per-case, --plots not written with --run / --compare-runs (only --json is); score one "
               "config's predictions.jsonl with --config and --predictions for them\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pipe", "run"]
    assert _run(capsys, export_dir, "--config", "targeted_table", "--predictions", files["targeted_table", "oracle"],
                "--per-case", "/dev/null") == (
        2, "", "error: --per-case /dev/null is a device; choose a regular file path (an output is written to a new "
               "file that replaces the path)\n")


def test_a_closed_stdout_ends_score_quietly(export_dir, files):
    import subprocess
    import sys
    from pathlib import Path

    repo = Path(__file__).resolve().parent.parent
    proc = subprocess.Popen([sys.executable, "exbind.py", "score", "--export", str(export_dir), "--config",
                             "targeted_table", "--predictions", str(files["targeted_table", "oracle"])],
                            cwd=repo, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.close()  # what `| head -0` does: the reader is gone before the report is printed
    assert proc.wait(timeout=120) == 141
    assert proc.stderr.read() == b""


def test_per_case_file_gets_the_umask_mode(capsys, export_dir, files, tmp_path, monkeypatch):
    """Written through mkstemp (0600) but chmod-ed as ``open`` would: 0644 under umask 022."""
    import os
    import stat

    import generator.files

    old = os.umask(0o022)
    try:
        monkeypatch.setattr(generator.files, "_UMASK", generator.files._read_umask())
        per_case = tmp_path / "scores.jsonl"
        assert _run(capsys, export_dir, "--config", "targeted_table", "--predictions",
                    files["targeted_table", "oracle"], "--per-case", per_case)[0] == 0
        assert stat.S_IMODE(per_case.stat().st_mode) == 0o644
    finally:
        os.umask(old)


def test_missing_export_and_unknown_config(capsys, export_dir, files, tmp_path):
    code, _, err = _run(capsys, tmp_path / "nowhere", "--config", "targeted_table",
                        "--predictions", files["targeted_table", "oracle"])
    assert code == 2 and "not an ExBind export" in err
    code, _, err = _run(capsys, export_dir, "--config", "no_such_config",
                        "--predictions", files["targeted_table", "oracle"])
    assert code == 2 and err.strip() == (
        "error: --config 'no_such_config' is not an ExBind config; choose from broad, paired, targeted_table, "
        "targeted_hierarchy, targeted_table_permuted, targeted_table_column_metadata, legacy_bridge")


def test_paired_oracle_vs_permuted_lexical(capsys, export_dir, files, tmp_path):
    report = tmp_path / "report.json"
    code, out, _ = _run(capsys, export_dir, "--config", "targeted_table",
                        "--predictions", files["targeted_table", "oracle"],
                        "--compare-config", "targeted_table_permuted",
                        "--compare", files["targeted_table_permuted", "lexical"], "--json", report)
    assert code == 0
    assert "config targeted_table_permuted (360 rows)" in out
    t12 = _table(out, "Candidate-order control (Table 12 form)")
    assert t12["original (targeted_table)"] == ["120", "1.000", "120/120", "[0.969, 1.000]", "no errors"]
    for k in (1, 2, 3):
        assert t12[f"permutation {k} (targeted_table_permuted)"] == [
            "120", "0.667", "0/120", "[0.000, 0.031]", "120 errors: candidate_valid 40, table_column 80"]
    assert t12["paired delta"][:4] == ["120", "-", "-1.000", "[-1.000, -1.000]"]
    assert t12["paired delta"][4].startswith("0 improve, 120 regress, 120 sensitive")
    paired = json.loads(report.read_text(encoding="utf-8"))["paired"]
    assert (paired["delta"], paired["ci"], paired["variant_exact"]) == (-1.0, [-1.0, -1.0], {"1": 0, "2": 0, "3": 0})


def test_paired_mixed_variant_has_a_real_bootstrap_interval(capsys, export_dir, files, tmp_path):
    report = tmp_path / "report.json"
    code, out, _ = _run(capsys, export_dir, "--config", "targeted_table",
                        "--predictions", files["targeted_table", "mixed"],
                        "--compare-config", "targeted_table_permuted",
                        "--compare", files["targeted_table_permuted", "mixed"], "--json", report)
    assert code == 0
    t12 = _table(out, "Candidate-order control (Table 12 form)")
    assert [t12[f"permutation {k} (targeted_table_permuted)"][2] for k in (1, 2, 3)] == ["40/120", "40/120", "120/120"]
    assert t12["original (targeted_table)"][:4] == ["120", "0.833", "60/120", "[0.412, 0.588]"]
    # 200/360 - 60/120; d = 0 (i % 6 == 0), -2/3 (other even), +1 (odd, i % 3 == 0), +1/3 (other odd)
    assert t12["paired delta"][:4] == ["120", "-", "+0.056", "[-0.053, 0.164]"]
    assert t12["paired delta"][4].startswith("60 improve, 40 regress, 100 sensitive")
    paired = json.loads(report.read_text(encoding="utf-8"))["paired"]
    assert paired["delta"] == pytest.approx(200 / 360 - 60 / 120, abs=1e-12)
    assert paired["variant_exact"] == {"1": 40, "2": 40, "3": 120}
    assert (paired["improved"], paired["regressed"], paired["order_sensitive"]) == (60, 40, 100)
    assert paired["ci"][0] <= paired["delta"] <= paired["ci"][1]


def test_paired_column_metadata_uses_the_same_case_ids(capsys, export_dir, files):
    code, out, _ = _run(capsys, export_dir, "--config", "targeted_table",
                        "--predictions", files["targeted_table", "lexical"],
                        "--compare-config", "targeted_table_column_metadata",
                        "--compare", files["targeted_table_column_metadata", "oracle"], "--resamples", "2000")
    assert code == 0
    t9 = _table(out, "Paired comparison (Table 9 form)")
    assert t9["variant 1 (targeted_table_column_metadata)"][:4] == ["120", "1.000", "120/120", "[0.969, 1.000]"]
    assert t9["paired delta"][:4] == ["120", "-", "+1.000", "[1.000, 1.000]"]
    assert "2000 resamples, seed 20260824" in t9["paired delta"][4]


def test_clicks_and_rankings_get_their_own_tables(capsys, export_dir, rows, tmp_path):
    from predictors import predict
    from predictors.io import write_jsonl

    clicks = []
    for r in rows["paired"]:
        ref = json.loads(r["reference"])
        if r["format"] in ("svg", "canvas"):
            x, y, w, h = next(c["bbox"] for c in ref["candidates"] if c["id"] == ref["gold"]["target_id"])
            clicks.append({"case_id": r["case_id"], "output": json.dumps({"x": x + w / 2, "y": y + h / 2})})
    write_jsonl(tmp_path / "clicks.jsonl", clicks)
    code, out, _ = _run(capsys, export_dir, "--config", "paired", "--predictions", tmp_path / "clicks.jsonl",
                        "--coordinate-frame", "pixel")
    assert code == 0
    assert _table(out, "Click predictions")["50"] == [
        "1.000", "[0.929, 1.000]", "1.000", "[0.929, 1.000]", "target 50, distractor 0, neither 0, invalid 0"]
    code, out, _ = _run(capsys, export_dir, "--config", "paired", "--predictions", tmp_path / "clicks.jsonl")
    # no frame given: every click is invalid
    assert _table(out, "Click predictions")["50"][-1] == "target 0, distractor 0, neither 0, invalid 50"

    write_jsonl(tmp_path / "bm25.jsonl", predict(rows["targeted_table"], "rank_bm25"))
    code, out, _ = _run(capsys, export_dir, "--config", "targeted_table", "--predictions", tmp_path / "bm25.jsonl")
    assert code == 0
    assert _table(out, "Ranked predictions")["120"] == ["0.000", "0.133", "0.400", "0.109"]
