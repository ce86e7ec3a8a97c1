"""ExBind as an inspect-ai task (issue 10 item 3; docs/specification.md §9).

``inspect eval`` runs any model inspect supports over one config with the frozen interface
(the released prompt, the PNG of svg / canvas rows as an image, temperature 0, seed 42,
at most 96 new tokens)::

    inspect eval predictors/inspect_task.py@exbind -T config=targeted_table -T dataset=./exbind \\
        --model openai/gpt-4o-mini
    inspect eval exbind/exbind -T config=broad --model vllm/Qwen/Qwen2.5-VL-3B-Instruct   # entry point

The scorer (:func:`exbind_scorer`) calls :func:`exbind_scoring.score_prediction` on the
completion and returns ``{"exact": 0|1, "valid": 0|1}`` with the first-violation label as
the answer's explanation and the whole per-case record in the score metadata, so
``python exbind.py score --inspect-log LOG`` reports on the log like on a predictions file
(:func:`reports.run_reports.read_inspect_log`).
Metrics: ``exact`` and ``validity`` overall, ``exact_format_<f>``, ``exact_family_<f>`` and
``exact_condition_<c>`` (``broad`` for broad rows), and ``first_violation_<label>`` counts.

Registered for ``inspect eval exbind/exbind`` by the entry point
``[project.entry-points.inspect_ai] exbind = "predictors._inspect_registry"``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

from inspect_ai import Task, task
from inspect_ai.dataset import MemoryDataset, Sample
from inspect_ai.model import ChatMessageUser, ContentImage, ContentText, GenerateConfig
from inspect_ai.scorer import Metric, SampleScore, Score, Target, grouped, metric, scorer
from inspect_ai.solver import TaskState, generate

TASK_NAME = "exbind"
MAX_TOKENS = 96
SEED = 42


def _load(dataset: str, config: str, revision: Optional[str]):
    import datasets

    from predictors.openai_backend import load_png_rows

    if Path(dataset).is_dir():
        return load_png_rows(Path(dataset), config)
    ds = datasets.load_dataset(dataset, config, split="test", revision=revision)
    raw = ds.cast_column("image", datasets.Image(decode=False))
    pngs = [img["bytes"] if img else None for img in raw["image"]]
    return list(ds.remove_columns(["image"])), pngs


def exbind_samples(dataset: str, config: str, variant: str = "image", revision: Optional[str] = None,
                   limit: Optional[int] = None) -> list[Sample]:
    """One inspect ``Sample`` per row of ``config``.

    Args:
        dataset: an export folder (``python exbind.py build``) or a Hub dataset id.
        config: the config name.
        variant: ``"image"`` (the released prompt; svg / canvas rows carry their PNG as a
            ``ContentImage`` data URL) or ``"text"`` (source included, no image).
        revision: Hub revision (a Hub id only).
        limit: the first N rows only.

    Returns:
        Samples with ``id`` = case id, ``input`` = one user message, ``target`` = the gold
        JSON, and metadata ``case_id``, ``config``, ``records_hash``, ``format``, ``family``,
        ``condition`` (``"broad"`` for broad rows) and ``reference`` (read by the scorer,
        never shown to the model).
    """
    from publishing.prediction_identity import records_hash
    from predictors.openai_backend import build_messages

    rows, pngs = _load(dataset, config, revision)
    rhash = records_hash(dataset, config) if Path(dataset).is_dir() else None
    samples = []
    for row, png in list(zip(rows, pngs))[:limit]:
        (message,) = build_messages(row, variant, png)
        content = message["content"]
        if isinstance(content, list):
            content = [ContentImage(image=part["image_url"]["url"]) if part["type"] == "image_url"
                       else ContentText(text=part["text"]) for part in content]
        samples.append(Sample(
            id=row["case_id"], input=[ChatMessageUser(content=content)], target=row["gold"],
            metadata={"case_id": row["case_id"], "config": config, "records_hash": rhash, "format": row["format"],
                      "family": row["family"], "condition": row["condition"] or "broad",
                      "reference": row["reference"]}))
    return samples


def _values(scores: list[SampleScore], key: str) -> float:
    return sum(float(s.score.value[key]) for s in scores) / len(scores) if scores else float("nan")


@metric
def exact() -> Metric:
    """Exact accuracy: the share of samples whose ``exact`` score is 1."""
    def compute(scores: list[SampleScore]) -> float:
        return _values(scores, "exact")
    return compute


@metric
def validity() -> Metric:
    """Validity: the share of samples whose prediction resolved to a valid candidate reference."""
    def compute(scores: list[SampleScore]) -> float:
        return _values(scores, "valid")
    return compute


@metric
def first_violations() -> Metric:
    """Counts of first-violation labels (``none`` = exact), as ``{"first_violation_<label>": count}``."""
    def compute(scores: list[SampleScore]) -> dict:
        counts: dict[str, float] = {}
        for s in scores:
            label = (s.score.metadata or {}).get("record", {}).get("first_violation", "candidate_valid")
            counts[f"first_violation_{label}"] = counts.get(f"first_violation_{label}", 0) + 1
        return dict(sorted(counts.items()))
    return compute


@scorer(metrics=[exact(), validity(),
                 grouped(exact(), "format", all=False, name_template="exact_format_{group_name}"),
                 grouped(exact(), "family", all=False, name_template="exact_family_{group_name}"),
                 grouped(exact(), "condition", all=False, name_template="exact_condition_{group_name}"),
                 first_violations()])
def exbind_scorer():
    """Score a completion with :func:`exbind_scoring.score_prediction` (the per-case record
    goes to ``Score.metadata["record"]``; value ``{"exact", "valid"}``; explanation = the
    first-violation label)."""
    from exbind_scoring import score_prediction

    async def score(state: TaskState, target: Target) -> Score:
        record = score_prediction(state.output.completion, state.metadata["reference"])
        return Score(value={"exact": int(record["scores"].get("exact", 0)), "valid": int(record["status"] == "valid")},
                     answer=state.output.completion, explanation=record["first_violation"],
                     metadata={"record": record, "first_violation": record["first_violation"],
                               "config": state.metadata["config"], "records_hash": state.metadata["records_hash"]})

    return score


@task
def exbind(config: str = "targeted_table", dataset: str = "exbind", variant: str = "image",
           revision: Optional[str] = None, limit: Optional[int] = None) -> Task:
    """The ExBind task: one config of an export folder or a Hub dataset (see module doc)."""
    return Task(dataset=MemoryDataset(exbind_samples(dataset, config, variant, revision, limit),
                                      name=f"exbind/{config}"),
                solver=generate(), scorer=exbind_scorer(),
                config=GenerateConfig(temperature=0.0, seed=SEED, max_tokens=MAX_TOKENS),
                metadata={"config": config, "variant": variant, "dataset": str(dataset)})

