"""The Hub's evaluation files: ``eval.yaml`` in the dataset repo (benchmark registration)
and ``.eval_results`` entries in a model repo (scored runs).

**eval.yaml** (export root; :func:`eval_yaml_text`). Registers the dataset repo as a Hub
benchmark in the format of the Hub's "Evaluation Results" documentation
(huggingface/hub-docs ``docs/hub/eval-results.md``, section "Eval.yaml specification"):
``name``, ``description``, ``evaluation_framework`` and ``tasks``, one task per config
(``id`` = ``config`` = the config name, ``split: test``). The headline metric of every task
is **exact accuracy**, a fraction in [0, 1] (the ``exact_accuracy`` of ``exbind_metric.py`` /
``python exbind.py score``); ``eval.yaml`` has no metric field, so the description states it.
``evaluation_framework: exbind`` names this repository's scorer. The Hub validates that
field against a list it maintains (``EVALUATION_FRAMEWORKS`` in huggingface/huggingface.js,
``packages/tasks/src/eval.ts``; a snapshot is :data:`HUB_EVALUATION_FRAMEWORKS`), which
does not list ``exbind``: until it is added there (a pull request to huggingface.js) and
the dataset is allow-listed, the Hub shows the pushed ``eval.yaml`` as invalid metadata;
the data, card and viewer are unaffected.

**.eval_results entry** (model repo; :func:`write_eval_results`). A scored run becomes one
YAML file ``.eval_results/exbind_<config>.yaml`` in the Hub's model-repo format, written
with ``huggingface_hub``'s own :class:`~huggingface_hub.EvalResultEntry` and
:func:`~huggingface_hub.eval_result_entries_to_yaml`::

    - dataset:
        id: <user>/exbind           # the benchmark dataset repo (holds eval.yaml)
        task_id: targeted_table     # a task id of eval.yaml (= the config)
        revision: <git sha>         # optional: the dataset commit that was scored
      value: 0.525                  # exact accuracy in [0, 1]
      notes: exact 63/120, Wilson 95% [0.436, 0.612]; valid 120/120; ...
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Iterable, Optional

import yaml
from huggingface_hub import EvalResultEntry, eval_result_entries_to_yaml
from huggingface_hub.utils import HFValidationError, validate_repo_id

EVAL_YAML_NAME = "eval.yaml"
EVAL_RESULTS_FOLDER = ".eval_results"
EVALUATION_FRAMEWORK = "exbind"
HEADLINE_METRIC = "exact_accuracy"
# The legacy bridge carries cached predictions of a legacy predictor: data to score, not a
# model task, so it gets no leaderboard.
NON_TASK_CONFIGS = frozenset({"legacy_bridge"})
# Snapshot of the Hub's evaluation_framework ids (huggingface/huggingface.js,
# packages/tasks/src/eval.ts, EVALUATION_FRAMEWORKS keys, as read for this module).
HUB_EVALUATION_FRAMEWORKS = frozenset({
    "exgentic", "inspect-ai", "math-arena", "mteb", "olmocr-bench", "harbor", "archipelago",
    "apex-evals", "screenspot-pro", "swe-bench", "swe-bench-pro", "nemo-evaluator", "yc-bench",
    "open-asr-leaderboard", "mdpbench", "parsebench", "video-mme-v2", "claw-eval",
})
EVAL_DESCRIPTION = (
    "ExBind is a controlled diagnostic benchmark for executable correspondence: given a "
    "rendered SVG or canvas picture, or a serialized tree, HTML DOM, graph or HTML table, an "
    "instruction and a candidate inventory, a model returns one strict JSON reference "
    '(e.g. {"cell_id": "cell_r01_c01"}). Each task is one config (split test). Headline '
    "metric: exact accuracy, the fraction of cases whose returned reference equals gold "
    "exactly (in [0, 1]; an unparsable or out-of-inventory answer counts as wrong), scored by "
    "the ExBind evaluator (exbind_metric.py or python exbind.py score), which also reports "
    "validity, per-constraint scores and the first violated structural constraint."
)


class EvalResultsError(ValueError):
    """A scored run that cannot become an ``.eval_results`` entry."""


# --------------------------------------------------------------------------- eval.yaml


def eval_tasks(configs: Iterable[str]) -> list[dict]:
    """``eval.yaml`` tasks: ``{"id", "config", "split": "test"}`` per config (legacy bridge excluded)."""
    return [{"id": c, "config": c, "split": "test"} for c in configs if c not in NON_TASK_CONFIGS]


def eval_yaml_dict(configs: Iterable[str]) -> dict:
    """The ``eval.yaml`` mapping: ``name``, ``description``, ``evaluation_framework``, ``tasks``."""
    return {"name": "ExBind", "description": EVAL_DESCRIPTION, "evaluation_framework": EVALUATION_FRAMEWORK,
            "tasks": eval_tasks(configs)}


def eval_yaml_text(configs: Iterable[str]) -> str:
    """``eval.yaml`` as text (``yaml.safe_dump``, key order kept; deterministic)."""
    return yaml.safe_dump(eval_yaml_dict(configs), sort_keys=False, allow_unicode=True, width=100)


def write_eval_yaml(out_dir: Path, configs: Iterable[str]) -> Path:
    """Write ``eval.yaml`` into an export folder; returns its path."""
    path = Path(out_dir) / EVAL_YAML_NAME
    path.write_text(eval_yaml_text(configs), encoding="utf-8")
    return path


def eval_yaml_problems(export_dir: Path, configs: Iterable[str]) -> list[str]:
    """Problems of an export's ``eval.yaml`` (empty when valid).

    It must parse to a mapping with a non-empty ``name``, ``description`` and
    ``evaluation_framework``, and ``tasks`` with unique ids, one per task config, each with
    ``config`` a config of the export and ``split: test``.
    """
    path = Path(export_dir) / EVAL_YAML_NAME
    if not path.is_file():
        return [f"{EVAL_YAML_NAME}: missing at the export root"]
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        return [f"{EVAL_YAML_NAME}: does not parse: {' '.join(str(exc).split())}"]
    if not isinstance(data, dict):
        return [f"{EVAL_YAML_NAME}: not a mapping"]
    out = [f"{EVAL_YAML_NAME}: `{key}` missing or empty"
           for key in ("name", "description", "evaluation_framework") if not data.get(key)]
    tasks = data.get("tasks")
    if not isinstance(tasks, list) or not tasks:
        return out + [f"{EVAL_YAML_NAME}: `tasks` must be a non-empty list"]
    configs = list(configs)
    ids = [t.get("id") for t in tasks if isinstance(t, dict)]
    if len(ids) != len(tasks) or len(set(ids)) != len(ids) or not all(isinstance(i, str) and i for i in ids):
        out.append(f"{EVAL_YAML_NAME}: every task needs a unique non-empty `id`")
    for t in tasks:
        if isinstance(t, dict) and t.get("config") not in configs:
            out.append(f"{EVAL_YAML_NAME}: task {t.get('id')!r} names config {t.get('config')!r}, not in {configs}")
        if isinstance(t, dict) and t.get("split", "test") != "test":
            out.append(f"{EVAL_YAML_NAME}: task {t.get('id')!r} split {t.get('split')!r}; every config is a test split")
    covered = {t.get("config") for t in tasks if isinstance(t, dict)}
    for c in configs:
        if c not in NON_TASK_CONFIGS and c not in covered:
            out.append(f"{EVAL_YAML_NAME}: config {c!r} has no task")
    return out


# --------------------------------------------------------------------------- .eval_results


def eval_result_entry(report: dict, dataset_id: str, dataset_revision: Optional[str] = None) -> EvalResultEntry:
    """One ``.eval_results`` entry for a scored run.

    Args:
        report: :func:`reports.score_report.build_report` output (uses ``config``,
            ``n_rows``, ``missing`` and ``summary``).
        dataset_id: Hub id of the benchmark dataset repo (the one holding ``eval.yaml``),
            e.g. ``"user/exbind"``.
        dataset_revision: optional git commit of that dataset repo that was scored.

    Returns:
        :class:`huggingface_hub.EvalResultEntry` with ``task_id`` = the config, ``value`` =
        exact accuracy in [0, 1] (4 decimals) and ``notes`` giving the counts, the Wilson 95%
        interval, validity, missing predictions and the generator version.

    Raises:
        EvalResultsError: invalid ``dataset_id``, a config that is not a task, or no cases.
    """
    problem = _dataset_id_error(dataset_id)
    if problem:
        raise EvalResultsError(problem)
    config = report["config"]
    if config in NON_TASK_CONFIGS:
        raise EvalResultsError(f"config {config!r} is not a benchmark task (no leaderboard entry)")
    s = report["summary"]
    if not s["n"] or s["exact_accuracy"] is None:
        raise EvalResultsError(f"config {config!r}: no scored cases")
    low, high = s["exact_accuracy_ci"]
    notes = (f"exact {s['n_exact']}/{s['n']}, Wilson 95% [{low:.3f}, {high:.3f}]; valid {s['n_valid']}/{s['n']}; "
             f"{len(report['missing'])} missing predictions; generator {s['generator_version']}")
    return EvalResultEntry(dataset_id=dataset_id, task_id=config, value=round(s["exact_accuracy"], 4),
                           dataset_revision=dataset_revision, notes=notes)


def eval_results_path(folder: Path, config: str) -> Path:
    """``folder/.eval_results/exbind_<config>.yaml`` (``folder`` itself when it is named ``.eval_results``)."""
    folder = Path(folder)
    base = folder if folder.name == EVAL_RESULTS_FOLDER else folder / EVAL_RESULTS_FOLDER
    return base / f"exbind_{config}.yaml"


def write_eval_results(report: dict, folder: Path, dataset_id: str, dataset_revision: Optional[str] = None) -> Path:
    """Write the run's ``.eval_results`` YAML (one entry) under a model repo folder.

    Args:
        report, dataset_id, dataset_revision: see :func:`eval_result_entry`.
        folder: the model repo's local folder (or its ``.eval_results`` folder).

    Returns:
        The written path (:func:`eval_results_path`); an existing file is replaced.
    """
    entry = eval_result_entry(report, dataset_id, dataset_revision)
    path = eval_results_path(folder, report["config"])
    path.parent.mkdir(parents=True, exist_ok=True)
    text = yaml.safe_dump(eval_result_entries_to_yaml([entry]), sort_keys=False, allow_unicode=True, width=1000)
    path.write_text(text, encoding="utf-8")
    return path


def add_eval_results_arguments(parser: argparse.ArgumentParser) -> None:
    """``--eval-results DIR``, ``--eval-dataset-id REPO_ID``, ``--eval-dataset-revision SHA`` (score CLI)."""
    parser.add_argument("--eval-results", type=Path, metavar="DIR",
                        help="write the Hub .eval_results entry of this run (exact accuracy) to "
                             "DIR/.eval_results/exbind_<config>.yaml; DIR is the model repo folder")
    parser.add_argument("--eval-dataset-id", metavar="REPO_ID",
                        help="Hub id of the ExBind benchmark dataset (with eval.yaml) the entry points to; "
                             "required with --eval-results")
    parser.add_argument("--eval-dataset-revision", metavar="SHA", help="dataset commit that was scored (optional)")


def eval_results_argument_error(args: argparse.Namespace) -> Optional[str]:
    """The message for inconsistent ``--eval-*`` arguments, else None (check before scoring)."""
    if getattr(args, "eval_results", None) is None:
        if getattr(args, "eval_dataset_id", None) or getattr(args, "eval_dataset_revision", None):
            return "--eval-dataset-id / --eval-dataset-revision need --eval-results DIR"
        return None
    if not getattr(args, "eval_dataset_id", None):
        return "--eval-results needs --eval-dataset-id (the Hub id of the ExBind dataset, e.g. user/exbind)"
    return _dataset_id_error(args.eval_dataset_id)


def _dataset_id_error(dataset_id: str) -> Optional[str]:
    try:
        validate_repo_id(dataset_id)
    except HFValidationError as exc:
        return f"--eval-dataset-id {dataset_id!r}: {exc}"
    if "/" not in dataset_id:
        return f"--eval-dataset-id {dataset_id!r}: expected '<user or org>/<dataset>'"
    return None


def write_eval_results_from_args(report: dict, args: argparse.Namespace) -> Optional[Path]:
    """Write the entry when ``--eval-results`` was given; returns the path or None."""
    if getattr(args, "eval_results", None) is None:
        return None
    return write_eval_results(report, args.eval_results, args.eval_dataset_id, args.eval_dataset_revision)

