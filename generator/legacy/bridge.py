"""Lead-facing API of the legacy bridge: the ``legacy_bridge`` config's records and its stage profile.

- :func:`bridge_records` reads a legacy JSONL (default: the shipped
  ``generator/legacy/data/bridge_records.jsonl``, 300 tasks over the Graphviz gallery with cached BM25
  outputs) and returns the ExBind records plus the eligibility gate counts for the manifest.
- :func:`stage_profile` scores every record's cached output with the one scorer
  (:func:`exbind_scoring.score_prediction`) and splits the first violations into no-failure,
  identity-stage and other, overall and by task type (the paper's "152 no-failure / 148
  identity-stage" line, §6.5, A.14-A.15); :func:`format_stage_profile` prints it.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Optional, Union

from exbind_scoring import LEGACY_TASK_TYPES, score_prediction
from generator.records import ExBindRecord
from generator.legacy.converter import convert_file
from generator.legacy.tasks import BRIDGE_FILE, SELECTION_FILE

CONFIG = "legacy_bridge"


class NoEligibleLegacyRecords(ValueError):
    """A legacy file none of whose records passed the legacy gates; ``str(err)`` names the
    file, the record count and the rejections by reason."""


def bridge_records(path: Optional[Union[str, Path]] = None, render: bool = True,
                   processes: Optional[int] = None, pool=None) -> tuple[list[ExBindRecord], dict]:
    """The legacy bridge's records.

    Args:
        path: a legacy JSONL file (format: :mod:`legacy`); default the shipped
            ``generator/legacy/data/bridge_records.jsonl``.
        render: rasterize each SVG into the row image (True for the release).
        processes: processes rendering the distinct SVGs not yet in the PNG disk cache
            (:func:`generator.render.rasterize_many`; default ``min(cpu_count, 4)``, 1 renders in
            this process). The records are the same whatever it is.
        pool: a running ``multiprocessing`` pool to render in instead (the release build's; left open).

    Returns:
        ``(records, gate_counts)``: eligible records in file order, each a
        :class:`generator.legacy.converter.LegacyRecord` (an ``ExBindRecord``: suite ``legacy``,
        format ``svg``, family ``legacy``, condition = task type) with ``cached_output`` =
        ``{"output", "predictor", "provenance"}`` (provenance as a JSON string);
        ``gate_counts`` = ``{"attempted", "eligible", "rejected": {reason: n},
        "rejected_records": [{"line", "id", "reason"}]}``; for the shipped file also
        ``"selection"``: how its tasks were chosen (:func:`generator.legacy.tasks.select_tasks` report:
        tasks derived and passing per type, quotas, selected, ``gate_rejections`` by reason).

    Raises:
        generator.legacy.converter.LegacyRecordError: a malformed line (names the line and field).
        NoEligibleLegacyRecords: the file has records but none passed the legacy gates.
        ValueError: ``processes`` is not a positive int or None.
    """
    source = Path(path) if path is not None else BRIDGE_FILE
    pairs, counts = convert_file(source, render=render, processes=processes, pool=pool)
    if counts["attempted"] and not counts["eligible"]:
        rejected = ", ".join(f"{k} {v}" for k, v in counts["rejected"].items()) or "none"
        raise NoEligibleLegacyRecords(f"{source}: none of its {counts['attempted']} legacy records passed the legacy "
                                      f"gates (rejected by reason: {rejected}); check it against "
                                      "generator/legacy/README.md")
    if path is None and SELECTION_FILE.exists():
        counts["selection"] = json.loads(SELECTION_FILE.read_text(encoding="utf-8"))
    return [record for record, _score in pairs], counts


def _split(scores: list[dict]) -> dict:
    firsts = Counter(s["first_violation"] for s in scores)
    no_failure = firsts.get("none", 0)
    identity = firsts.get("identity", 0)
    other = {label: n for label, n in sorted(firsts.items()) if label not in ("none", "identity")}
    return {"n": len(scores), "no_failure": no_failure, "identity": identity, "other": other,
            "other_total": sum(other.values()), "first_violations": dict(sorted(firsts.items()))}


def stage_profile(records: list[ExBindRecord]) -> dict:
    """First-violation profile of the records' cached outputs.

    Args:
        records: records with ``cached_output`` (e.g. from :func:`bridge_records`).

    Returns:
        ``{"n", "no_failure", "identity", "other": {label: n}, "other_total",
        "first_violations": {label: n}, "by_task_type": {task type: the same keys},
        "predictors": {predictor: n}}``; ``no_failure`` counts first violation ``none``
        (exact), ``identity`` the identity-stage first violations, ``other`` every other
        first violation (``candidate_valid`` for invalid/unresolved outputs, ``role``,
        ``relation``, ``hierarchy``, ``exact``). Counts are ints; task types with no
        records are omitted.

    Raises:
        ValueError: a record without ``cached_output``.
    """
    scores = []
    for rec in records:
        if not rec.cached_output:
            raise ValueError(f"record {rec.id!r} has no cached_output")
        scores.append((rec.condition, score_prediction(rec.cached_output["output"], rec.reference_json())))
    out = _split([s for _t, s in scores])
    out["by_task_type"] = {t: _split([s for tt, s in scores if tt == t])
                           for t in LEGACY_TASK_TYPES if any(tt == t for tt, _ in scores)}
    out["predictors"] = dict(sorted(Counter(r.cached_output["predictor"] for r in records).items()))
    return out


def format_stage_profile(profile: dict) -> str:
    """The profile as text: one headline (``N rows: a no-failure / b identity-stage / c other
    first violations``) and one line per task type with the other labels spelled out."""

    def line(name: str, p: dict) -> str:
        others = ", ".join(f"{k} {v}" for k, v in p["other"].items()) or "none"
        return (f"{name:<10} n={p['n']:>3}  no-failure {p['no_failure']:>3}  identity-stage {p['identity']:>3}"
                f"  other {p['other_total']:>3} ({others})")

    predictors = ", ".join(f"{k} ({v})" for k, v in profile.get("predictors", {}).items())
    head = (f"Legacy bridge stage profile ({predictors}): {profile['n']} rows: {profile['no_failure']} no-failure / "
            f"{profile['identity']} identity-stage / {profile['other_total']} other first violations")
    lines = [head, line("all", profile)]
    lines += [line(t, p) for t, p in profile["by_task_type"].items()]
    return "\n".join(lines)
