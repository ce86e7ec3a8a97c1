"""ExBind metric for ``evaluate``: stage-localized scoring of executable references.

Load it by path (``evaluate`` copies this file and its two sibling modules,
``exbind_scoring.py`` and ``exbind_aggregate.py``, into its module cache)::

    metric = evaluate.load("path/to/exbind_metric.py")
    metric.add_batch(predictions=outputs, references=batch["reference"])
    result = metric.compute()

All scoring lives in ``exbind_scoring`` (per case) and ``exbind_aggregate`` (over cases);
this class only declares the input contract and calls them.
"""

import datasets
import evaluate

from .exbind_aggregate import aggregate
from .exbind_scoring import REFERENCE_SCHEMA, score_prediction

METRIC_VERSION = "exbind.metric.v1"

_CITATION = """\
@misc{exbind,
  title  = {ExBind: Diagnosing Executable Correspondence in Vision-Language Models},
  note   = {Benchmark and evaluator; see the dataset card},
}
"""

_DESCRIPTION = """\
Scores raw model outputs against ExBind references. Each output is parsed (strict JSON,
then a code fence, then the last JSON object with a recognised key), normalized through a
closed alias table, checked against the candidate inventory (valid / invalid / unresolved),
mapped back to the latent structure, and scored on every applicable structural constraint.
The first violated constraint under the family's declared order localizes the failure.
"""

_KWARGS_DESCRIPTION = """
Args:
    predictions: list of raw model output strings.
    references: list of the dataset's ``reference`` strings (same order).
    return_per_case: when True, the result has ``per_case``: the per-case records in
        input order (``case_id``, ``status``, ``parse_path``, ``predicted``,
        ``predicted_latent``, ``scores``, ``violations``, ``first_violation``,
        ``possible_first_violations``, ``reason``).
Returns:
    A JSON-serializable dict: ``n``, ``n_valid``, ``validity``, ``n_exact``,
    ``exact_accuracy``, ``exact_accuracy_ci`` (Wilson 95%), ``errors_after_validity``,
    ``first_violation_counts``, ``first_violation_profile``, ``violation_set_counts``,
    ``possible_first_violations``, ``stage_accuracy``, ``dimension_accuracy``,
    ``applicability``, ``survival``, ``by_format``, ``by_family``, ``by_condition``,
    ``cross_format_consistency``, ``parse_paths``, ``statuses`` and the versions
    ``metric_version``, ``reference_schema``, ``generator_version``.
Raises:
    exbind_scoring.ReferenceError: when a reference is not an ExBind reference (the
        message names the field); a malformed *prediction* never raises.
Examples:
    >>> metric = evaluate.load("exbind_metric.py")  # doctest: +SKIP
    >>> result = metric.compute(predictions=['{"cell_id": "cell_r01_c00"}'], references=[row["reference"]])  # doctest: +SKIP
"""


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class ExBindMetric(evaluate.Metric):
    """The ExBind evaluator as an ``evaluate.Metric`` (SPEC §4-§5)."""

    def _info(self):
        return evaluate.MetricInfo(
            description=_DESCRIPTION,
            citation=_CITATION,
            inputs_description=_KWARGS_DESCRIPTION,
            features=datasets.Features({"predictions": datasets.Value("string"),
                                        "references": datasets.Value("string")}),
            reference_urls=[],
        )

    def _compute(self, predictions, references, return_per_case=False):
        records = [score_prediction(p, r) for p, r in zip(predictions, references)]
        result = aggregate(records)
        result["metric_version"] = METRIC_VERSION
        result["reference_schema"] = REFERENCE_SCHEMA
        versions = sorted({r["generator_version"] for r in records if r.get("generator_version")})
        result["generator_version"] = versions[0] if len(versions) == 1 else (versions or None)
        if return_per_case:
            result["per_case"] = records
        return result

