"""Run folder files: ``predictions.jsonl`` / ``scores.jsonl`` rewritten atomically in config
row order (issue 10). Prediction lines carry ``config`` and ``records_hash``
(:mod:`publishing.prediction_identity`)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Mapping, Sequence

from publishing.prediction_identity import (IDENTITY_FIELDS, PredictionIdentityError,  # noqa: F401
                                           check_prediction_identity, identity_fields, records_hash)


def _write_lines_atomic(path: Path, objects) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", encoding="utf-8") as fh:
        for obj in objects:
            fh.write(json.dumps(obj, ensure_ascii=False) + "\n")
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def write_predictions_and_scores(out_dir, case_ids: Sequence[str], references: Mapping[str, str],
                                 lines: Mapping[str, dict]) -> int:
    """Rewrite ``predictions.jsonl`` and ``scores.jsonl`` of a run folder in config row order.

    Args:
        out_dir: the run folder.
        case_ids: the config's case ids in row order.
        references: ``{case_id: reference JSON}``.
        lines: ``{case_id: prediction line}``; a line with ``"failed": true`` is scored as
            the empty output with reason ``"request failed: <error>"`` (``unresolved``).

    Returns:
        The number of cases written.
    """
    from exbind_scoring import score_prediction
    from predictors.io import per_case_row

    out_dir = Path(out_dir)
    ordered = [lines[c] for c in case_ids if c in lines]
    records = []
    for line in ordered:
        record = per_case_row(score_prediction(line["output"], references[line["case_id"]]), line["output"],
                              references[line["case_id"]])
        if line.get("failed"):
            record["reason"] = f"request failed: {line.get('error')}"
        records.append(record)
    _write_lines_atomic(out_dir / "predictions.jsonl", ordered)
    _write_lines_atomic(out_dir / "scores.jsonl", records)
    return len(ordered)
