"""The metric's docstring examples run (issue 3; docs/specification.md §11: the metric loads by path).

The class is taken from ``evaluate.load(<absolute path>)``, i.e. from the copy in
evaluate's module cache, and its docstring (description + keyword arguments + class text,
as ``evaluate`` composes it) is run by ``doctest`` with empty globals, so the examples
must be self-contained. The examples load ``"exbind_metric.py"`` relative to the working
directory, as a user in the repository root would, so the test runs them from there.
"""

from __future__ import annotations

import doctest
import json
from pathlib import Path

import evaluate
import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
METRIC_PATH = str(REPO_ROOT / "exbind_metric.py")


@pytest.fixture(scope="module")
def metric_cls(tmp_path_factory):
    metric = evaluate.load(METRIC_PATH, cache_dir=str(tmp_path_factory.mktemp("metric-doctest")))
    return type(metric)


def _run_examples(cls, monkeypatch) -> doctest.TestResults:
    monkeypatch.chdir(REPO_ROOT)
    finder = doctest.DocTestFinder(recurse=False)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    tests = finder.find(cls, cls.__name__, globs={})
    for test in tests:
        runner.run(test)
    return runner.summarize(verbose=False)


def test_class_docstring_examples_pass(metric_cls, monkeypatch):
    results = _run_examples(metric_cls, monkeypatch)
    assert results.failed == 0
    # every example runs (none skipped) and there are enough of them to cover
    # compute, add_batch and per-case records
    assert results.attempted == 21


def test_docstring_examples_are_not_skipped(metric_cls):
    doc = metric_cls.__doc__
    assert "+SKIP" not in doc
    for needle in ("evaluate.load(", "add_batch(", "return_per_case=True", "first_violation_counts",
                   "exact_accuracy", "num_process", "process_id", "experiment_id"):
        assert needle in doc, needle


def test_docstring_reference_is_a_valid_reference(metric_cls):
    """The hand-written reference of the example is a complete ExBind reference."""
    import re

    import exbind_scoring

    runner_globs: dict = {}
    examples = doctest.DocTestParser().get_examples(metric_cls.__doc__)
    # run only the statements that build the reference
    for ex in examples:
        exec(compile(ex.source, "<doc>", "exec"), runner_globs)
        if re.match(r"reference = ", ex.source):
            break
    ref = exbind_scoring.load_reference(runner_globs["reference"])
    assert ref["family"] == "table"
    assert sorted(ref["_by_id"]) == ["cell_r01_c00", "cell_r01_c01", "cell_r02_c01"]
    assert exbind_scoring.execute_target(ref) == [{"cell_id": "cell_r01_c01"}]
    assert json.loads(runner_globs["reference"])["gold"] == {"cell_id": "cell_r01_c01"}
