"""The metric in training loops and distributed evaluation (issue 3; docs/specification.md §2, §5, §11).

- ``add_batch`` / ``add`` then one ``compute`` equals one ``compute`` over all cases,
  whatever the batching;
- two processes on one machine with ``num_process=2``, their own ``process_id`` and a
  shared unique ``experiment_id`` give, on process 0, the same result as a single
  process (and None on process 1); run as subprocesses under a timeout;
- results are plain JSON values (``json.dumps(..., allow_nan=False)`` round-trips).

The metric is always loaded by absolute path (``evaluate.load``), never imported.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path

import evaluate
import pytest

from composition.release import broad_plans, generate_latent, targeted_plans

REPO_ROOT = Path(__file__).resolve().parent.parent
METRIC_PATH = str(REPO_ROOT / "exbind_metric.py")
TIMEOUT_S = 120


def _references() -> list[str]:
    """Real references: two broad latents per family (paired ones give both surfaces) and one
    targeted latent per condition."""
    refs: list[str] = []
    per_family: dict[str, int] = {}
    for plan in broad_plans():
        if per_family.get(plan.family, 0) < 2:
            per_family[plan.family] = per_family.get(plan.family, 0) + 1
            refs.extend(generate_latent(plan).references)
    seen: set = set()
    for plan in targeted_plans():
        if plan.condition not in seen:
            seen.add(plan.condition)
            refs.extend(generate_latent(plan).references)
    return refs


def _outputs(references: list[str]) -> list[str]:
    """Model-like outputs, one kind per case in turn (so the counts do not depend on the
    generated ids): gold as strict JSON, gold in a code fence, gold inside prose, an id not
    in the inventory, a truncated object, an echoed candidate row, and a wrong answer
    (graph: the reversed edge; otherwise the first non-gold candidate)."""
    outs = []
    for i, reference in enumerate(references):
        ref = json.loads(reference)
        keys = ref["output_keys"]
        gold = ref["gold"]
        kind = i % 7
        if kind == 0:
            outs.append(json.dumps(gold))
        elif kind == 1:
            outs.append("```json\n" + json.dumps(gold, indent=2) + "\n```")
        elif kind == 2:
            outs.append("I think the answer is " + json.dumps(gold) + ".")
        elif kind == 3:
            outs.append(json.dumps({k: "not_a_candidate" for k in keys}))
        elif kind == 4:
            outs.append("{" + json.dumps(keys[0]) + ": ")
        elif kind == 5:
            outs.append(json.dumps({"candidate_id": next(iter(gold.values())), "candidate_type": "x"}))
        elif ref["family"] == "graph":
            outs.append(json.dumps({"source_id": gold["target_id"], "target_id": gold["source_id"]}))
        else:
            other = next(c["id"] for c in ref["candidates"] if c["id"] != gold[keys[0]])
            outs.append(json.dumps({keys[0]: other}))
    return outs


@pytest.fixture(scope="module")
def cases():
    references = _references()
    return _outputs(references), references


@pytest.fixture(scope="module")
def single(cases, tmp_path_factory):
    """One compute over every case (per-case records included)."""
    outputs, references = cases
    metric = evaluate.load(METRIC_PATH, cache_dir=str(tmp_path_factory.mktemp("single")),
                           experiment_id=uuid.uuid4().hex)
    return metric.compute(predictions=outputs, references=references, return_per_case=True)


def _load(tmp_path) -> evaluate.EvaluationModule:
    return evaluate.load(METRIC_PATH, cache_dir=str(tmp_path), experiment_id=uuid.uuid4().hex)


def test_case_mix_is_varied(cases, single):
    outputs, references = cases
    assert len(references) == 16
    assert single["n"] == 16
    assert set(single["by_family"]) == {"relational", "hierarchy", "graph", "table"}
    assert set(single["by_format"]) == {"svg", "canvas", "tree", "dom", "graph", "table"}
    assert single["statuses"] == {"invalid": 2, "unresolved": 4, "valid": 10}
    assert single["parse_paths"] == {"extracted": 2, "failed": 2, "fenced": 3, "strict": 9}
    assert single["n_exact"] == 8
    counts = single["first_violation_counts"]
    assert (counts["candidate_valid"], counts["none"]) == (6, 8)
    assert sum(counts.values()) == 16
    assert len(single["per_case"]) == 16
    reversed_edge = single["per_case"][6]
    assert reversed_edge["family"] == "graph"
    assert reversed_edge["scores"] == {"candidate_valid": 1, "identity": 1, "relation": 1, "role": 0, "exact": 0}
    assert reversed_edge["first_violation"] == "role"


def test_add_batch_equals_one_compute(cases, single, tmp_path):
    outputs, references = cases
    metric = _load(tmp_path)
    for size in (1, 3, 5, 8):
        for start in range(0, len(outputs), size):
            metric.add_batch(predictions=outputs[start:start + size], references=references[start:start + size])
        assert metric.compute(return_per_case=True) == single, size


def test_add_single_examples_equals_one_compute(cases, single, tmp_path):
    outputs, references = cases
    metric = _load(tmp_path)
    for text, reference in zip(outputs, references):
        metric.add(prediction=text, reference=reference)
    assert metric.compute(return_per_case=True) == single


def test_result_is_plain_json(single):
    text = json.dumps(single, allow_nan=False)
    assert json.loads(text) == single

    def walk(value):
        if isinstance(value, dict):
            assert all(isinstance(k, str) for k in value)
            for v in value.values():
                walk(v)
        elif isinstance(value, list):
            for v in value:
                walk(v)
        else:
            assert value is None or type(value) in (str, int, float, bool), type(value)
            if type(value) is float:
                assert math.isfinite(value)

    walk(single)
    assert single["metric_version"] == "exbind.metric.v1"
    assert single["reference_schema"] == "exbind.reference.v1"
    assert single["generator_version"] == "exbind.generator.v2"


def test_empty_compute_is_plain_json(tmp_path):
    result = _load(tmp_path).compute(predictions=[], references=[])
    assert result["n"] == 0
    assert result["exact_accuracy"] is None and result["exact_accuracy_ci"] is None
    json.dumps(result, allow_nan=False)


_WORKER = textwrap.dedent("""
    import json, sys
    import evaluate

    metric_path, cache_dir, experiment_id, process_id, cases_path, out_path = sys.argv[1:]
    process_id = int(process_id)
    with open(cases_path) as f:
        cases = json.load(f)
    outputs, references = cases["outputs"], cases["references"]
    half = (len(outputs) + 1) // 2
    lo, hi = (0, half) if process_id == 0 else (half, len(outputs))
    metric = evaluate.load(metric_path, num_process=2, process_id=process_id,
                           experiment_id=experiment_id, cache_dir=cache_dir)
    for start in range(lo, hi, 3):
        end = min(start + 3, hi)
        metric.add_batch(predictions=outputs[start:end], references=references[start:end])
    result = metric.compute(return_per_case=True)
    with open(out_path, "w") as f:
        json.dump(result, f, allow_nan=False)
""")


def test_two_processes_equal_one(cases, single, tmp_path):
    outputs, references = cases
    worker = tmp_path / "worker.py"
    worker.write_text(_WORKER)
    cases_path = tmp_path / "cases.json"
    cases_path.write_text(json.dumps({"outputs": outputs, "references": references}))
    cache_dir = tmp_path / "shared-cache"
    cache_dir.mkdir()
    experiment_id = uuid.uuid4().hex
    env = dict(os.environ, PYTHONPATH="")  # the workers see only the metric file, via evaluate
    procs = []
    for pid in (0, 1):
        cmd = [sys.executable, str(worker), METRIC_PATH, str(cache_dir), experiment_id, str(pid),
               str(cases_path), str(tmp_path / f"result{pid}.json")]
        procs.append(subprocess.Popen(cmd, cwd=str(tmp_path), env=env, stdout=subprocess.PIPE,
                                      stderr=subprocess.STDOUT, text=True))
    logs = []
    try:
        for proc in procs:
            out, _ = proc.communicate(timeout=TIMEOUT_S)
            logs.append(out)
    except subprocess.TimeoutExpired:
        for proc in procs:
            proc.kill()
            proc.communicate()
        pytest.fail(f"distributed compute did not finish within {TIMEOUT_S} s")
    for proc, log in zip(procs, logs):
        assert proc.returncode == 0, log[-3000:]
    result0 = json.loads((tmp_path / "result0.json").read_text())
    result1 = json.loads((tmp_path / "result1.json").read_text())
    assert result1 is None
    assert result0 == json.loads(json.dumps(single))
    assert [r["case_id"] for r in result0["per_case"]] == [json.loads(r)["case_id"] for r in references]
