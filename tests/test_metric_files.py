"""The metric travels with the data: exactly the files of ``metric_files`` load offline (issue 12 item 5)."""

from __future__ import annotations

import json
import shutil
import uuid

import evaluate
import pytest

from exbind_aggregate import aggregate
from exbind_metric_files import ROOT, metric_files
from exbind_scoring import score_prediction
from composition.release import broad_plans, generate_latent

EXPECTED = ["exbind.py", "exbind_aggregate.py", "exbind_legacy_rules.py", "exbind_paired.py", "exbind_parse.py",
            "exbind_rankings.py",
            "exbind_reference.py", "exbind_scoring.py", "exbind_stages.py", "exbind_vocabulary.py"]


def _publish(folder, files) -> None:
    folder.mkdir()
    for name, source in files.items():
        shutil.copyfile(source, folder / name)


def test_metric_files_are_the_script_and_every_evaluator_module():
    files = metric_files("exbind")
    assert list(files) == EXPECTED
    assert files["exbind.py"] == ROOT / "exbind_metric.py"
    assert all(files[n] == ROOT / n for n in EXPECTED[1:])
    # every top-level evaluator module except this helper is needed
    modules = sorted(p.name for p in ROOT.glob("exbind_*.py"))
    assert sorted(EXPECTED[1:]) == [m for m in modules if m not in ("exbind_metric.py", "exbind_metric_files.py")]
    with pytest.raises(ValueError, match="Python module name"):
        metric_files("my-metric")


def test_exactly_those_files_load_offline_and_score(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    folder = tmp_path / "exbind"
    _publish(folder, metric_files("exbind"))
    metric = evaluate.load(str(folder), cache_dir=str(tmp_path / "cache"), experiment_id=uuid.uuid4().hex)
    refs = generate_latent(next(p for p in broad_plans() if p.family == "table")).references
    gold = json.loads(refs[0])["gold"]
    outputs = [json.dumps(gold), 'Answer: {"cell_id": "nope"}', "no idea"]
    references = [refs[0]] * 3
    result = metric.compute(predictions=outputs, references=references)
    expected = aggregate([score_prediction(o, r) for o, r in zip(outputs, references)])
    assert (result["n"], result["n_exact"], result["statuses"]) == (3, 1, {"invalid": 1, "unresolved": 1, "valid": 1})
    assert {k: v for k, v in result.items() if k in expected} == expected


def test_a_missing_sibling_breaks_the_load(tmp_path, monkeypatch):
    """The list is not padded: without exbind_vocabulary.py the published metric cannot load."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    folder = tmp_path / "exbind"
    files = metric_files("exbind")
    del files["exbind_vocabulary.py"]
    _publish(folder, files)
    with pytest.raises(Exception):
        evaluate.load(str(folder), cache_dir=str(tmp_path / "cache"), experiment_id=uuid.uuid4().hex)


def test_a_sibling_import_the_script_lacks_is_refused(tmp_path):
    for name, source in metric_files().items():
        shutil.copyfile(source, tmp_path / ("exbind_metric.py" if name == "exbind_metric.py" else name))
    script = tmp_path / "exbind_metric.py"
    script.write_text(script.read_text(encoding="utf-8").replace("from .exbind_vocabulary import", "from exbind_vocabulary import"),
                      encoding="utf-8")
    with pytest.raises(RuntimeError, match=r"imports \.exbind_vocabulary, which exbind_metric.py does not import"):
        metric_files(root=tmp_path)
