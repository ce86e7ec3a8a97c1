"""inspect-ai task and scorer, ``score --inspect-log``, ``score --run`` and
``score --compare-runs`` (issue 10 items 3 and 6).

The inspect task runs offline with inspect's ``mockllm/model`` returning canned outputs
(one valid exact, one valid wrong, one invalid id, one unparseable answer); the run
comparison uses the stored SmolLM2 reference run against a first-candidate run made
through the OpenAI backend and the local server.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from exbind import main as exbind_main
from exbind_scoring import score_prediction

REPO = Path(__file__).resolve().parent.parent


def _prompt_text(messages) -> str:
    content = messages[-1].content
    return content if isinstance(content, str) else "".join(getattr(c, "text", "") for c in content)


def test_inspect_samples_carry_prompt_image_and_reference(export_dir, rows):
    from inspect_ai.model import ContentImage, ContentText

    from predictors.inspect_task import exbind_samples
    from predictors.openai_backend import load_png_rows

    (svg,) = exbind_samples(str(export_dir), "broad", limit=1)
    row = rows["broad"][0]
    _, pngs = load_png_rows(export_dir, "broad")
    image, text = svg.input[0].content
    assert isinstance(image, ContentImage) and isinstance(text, ContentText)
    assert image.image == "data:image/png;base64," + base64.b64encode(pngs[0]).decode()
    assert text.text == row["prompt"]
    assert (svg.id, svg.target, svg.metadata["reference"]) == (row["case_id"], row["gold"], row["reference"])
    records_hash = json.loads((export_dir / "exbind_manifest.json").read_text())["canonical_records_sha256"]["broad"]
    assert (svg.metadata["config"], svg.metadata["records_hash"], svg.metadata["condition"]) == (
        "broad", records_hash, "broad")


def test_inspect_task_with_mockllm_and_score_inspect_log(export_dir, rows, tmp_path, capsys):
    from inspect_ai import eval as inspect_eval
    from inspect_ai.model import ModelOutput, ModelUsage, get_model

    from predictors.inspect_task import exbind

    table = rows["targeted_table"][:4]
    gold = [json.loads(r["gold"]) for r in table]
    row_prefix = gold[1]["cell_id"][: len("cell_r01_")]  # the gold row, another column
    wrong = next(c["candidate_id"] for c in table[1]["candidates"]
                 if c["candidate_id"].startswith(row_prefix) and c["candidate_id"] != gold[1]["cell_id"])
    canned = {table[0]["prompt"]: table[0]["gold"],                       # valid, exact
              table[1]["prompt"]: json.dumps({"cell_id": wrong}),          # valid, right row, wrong column
              table[2]["prompt"]: '{"cell_id": "cell_r99_c99"}',           # invalid: not a candidate
              table[3]["prompt"]: "I cannot tell which cell."}             # unparseable

    def answer(messages, tools, tool_choice, config):
        out = ModelOutput.from_content("mockllm/model", canned[_prompt_text(messages)])
        out.usage = ModelUsage(input_tokens=0, output_tokens=0, total_tokens=0)  # no tokenizer download
        return out

    model = get_model("mockllm/model", custom_outputs=answer)
    (log,) = inspect_eval(exbind(config="targeted_table", dataset=str(export_dir), limit=4), model=model,
                          log_dir=str(tmp_path / "logs"), display="none")
    assert log.status == "success"
    assert log.eval.task_args["config"] == "targeted_table"
    (scores,) = log.results.scores
    metrics = {k: v.value for k, v in scores.metrics.items()}
    expected_records = [score_prediction(canned[r["prompt"]], r["reference"]) for r in table]
    assert [r["first_violation"] for r in expected_records] == ["none", "table_column", "candidate_valid",
                                                                "candidate_valid"]
    assert metrics == {"exact": 0.25, "validity": 0.5, "exact_format_table": 0.25, "exact_family_table": 0.25,
                       "exact_condition_compact": 0.25, "first_violation_candidate_valid": 2.0,
                       "first_violation_none": 1.0, "first_violation_table_column": 1.0}
    by_id = {s.id: s.scores["exbind_scorer"] for s in log.samples}
    for row, record in zip(table, expected_records):
        score = by_id[row["case_id"]]
        assert score.metadata["record"] == record
        assert score.explanation == record["first_violation"]
        assert score.value == {"exact": int(record["first_violation"] == "none"),
                               "valid": int(record["status"] == "valid")}
    assert [record["status"] for record in expected_records] == ["valid", "valid", "invalid", "unresolved"]

    assert exbind_main(["score", "--inspect-log", log.location, "--export", str(export_dir)]) == 0
    out = capsys.readouterr().out
    assert "ExBind score: config targeted_table (120 rows)" in out
    assert "partial predictions file: 4 of 120 cases predicted" in out
    assert "1/120" in out  # one exact case over the config's 120 rows (116 unpredicted: unresolved)
    assert exbind_main(["score", "--inspect-log", log.location, "--config", "broad", "--export",
                        str(export_dir)]) == 2
    assert "holds config 'targeted_table', not --config 'broad'" in capsys.readouterr().err
    assert exbind_main(["score", "--inspect-log", str(tmp_path / "nope.eval"), "--export", str(export_dir)]) == 2
    assert "not a readable inspect log" in capsys.readouterr().err


@pytest.fixture(scope="module")
def first_candidate_run(export_dir, tmp_path_factory) -> Path:
    from predictors.local_server import FirstCandidateModel, OpenAICompatServer
    from predictors.openai_backend import run_openai

    root = tmp_path_factory.mktemp("runs")
    with OpenAICompatServer(FirstCandidateModel(), "first-candidate") as server:
        run_openai("first-candidate", "targeted_table", root / "fc" / "targeted_table", server.url,
                   export_dir=export_dir, concurrency=8, response_cache=root / "cache", progress=False)
    return root / "fc"


def test_score_run_and_compare_runs(export_dir, first_candidate_run, tmp_path, capsys):
    from reports.run_reports import compare_runs, score_run

    rows = score_run(REPO / "runs" / "smollm2-135m-instruct", export_dir)
    assert [(r["config"], r["mode"], r["n"], r["n_valid"], r["n_exact"]) for r in rows] == [
        ("broad", "free", 250, 6, 1), ("targeted_hierarchy", "free", 120, 7, 0),
        ("targeted_table", "free", 120, 6, 0)]  # a partial run: the first 25 rows of each config
    assert [round(x, 3) for x in rows[2]["exact_ci"]] == [0.0, 0.031]
    assert [r["missing"] for r in rows] == [225, 95, 95]
    assert exbind_main(["score", "--run", str(REPO / "runs" / "smollm2-135m-instruct"), "--export",
                        str(export_dir)]) == 0
    assert "targeted_table" in capsys.readouterr().out
    assert exbind_main(["score", "--run", str(REPO / "runs" / "smollm2-135m-instruct"), "--export",
                        str(export_dir), "--config", "broad"]) == 2  # not silently dropped
    assert capsys.readouterr().err.startswith("error: --config cannot be combined with --run / --compare-runs")

    result = compare_runs(REPO / "runs" / "smollm2-135m-instruct", first_candidate_run, export_dir, resamples=2000)
    assert (result["only_a"], result["only_b"]) == (["broad", "targeted_hierarchy"], [])
    c = result["configs"]["targeted_table"]
    assert (c["a"]["n_exact"], c["b"]["n_exact"], c["a"]["mode"], c["b"]["mode"]) == (0, 7, "free", "free")
    assert [round(x, 3) for x in c["b"]["exact_ci"]] == [0.029, 0.116]
    p = c["paired"]
    assert (p["parents"], round(p["delta"], 3), p["improved"], p["regressed"]) == (120, 0.058, 7, 0)
    assert [round(x, 3) for x in p["ci"]] == [0.017, 0.1]
    assert c["transitions"] == {"candidate_valid": {"none": 6, "table_column": 23, "table_row": 85},
                                "table_column": {"none": 1}, "table_row": {"table_row": 5}}
    assert exbind_main(["score", "--compare-runs", str(REPO / "runs" / "smollm2-135m-instruct"),
                        str(first_candidate_run), "--export", str(export_dir), "--resamples", "2000",
                        "--json", str(tmp_path / "cmp.json")]) == 0
    out = capsys.readouterr().out
    assert "120 paired parents" in out and "+0.058  [0.017, 0.100]" in out
    assert json.loads((tmp_path / "cmp.json").read_text())["configs"]["targeted_table"]["paired"]["parents"] == 120
    assert exbind_main(["score", "--run", str(tmp_path / "missing"), "--export", str(export_dir)]) == 2
    assert "run folder not found" in capsys.readouterr().err
    assert exbind_main(["score", "--run", str(tmp_path / "cmp.json"), "--export", str(export_dir)]) == 2
    assert f"{tmp_path / 'cmp.json'}: is not a folder (a run folder holds" in capsys.readouterr().err
    assert exbind_main(["score", "--export", str(export_dir)]) == 2
    assert "score needs --config and --predictions" in capsys.readouterr().err
