"""ExBind core scorer: the one implementation of every scoring rule (docs/specification.md §4, §11).

Pure Python over plain dicts. The ``evaluate`` wrapper (``exbind_metric.py``), the
build gates (``generator/gates.py``) and the reports all call these functions; there is no
second copy of a rule anywhere. This module is the public facade: it defines
:func:`score_prediction` and re-exports every public name of its sibling modules, one per
concern, each importing only the ones below it and the standard library (so ``evaluate``
can copy them beside ``exbind_metric.py`` into its module cache)::

    exbind_vocabulary    statuses, declared orders, output keys, aliases, relations, ReferenceError
    exbind_legacy_rules  legacy-bridge validation, stage scores and executor
    exbind_reference     load_reference: parse, validate and index a reference string
    exbind_parse         parse_prediction (linear), normalize_reference, prediction_kind
    exbind_stages        stage_scores, score_reference, execute_target (the latent executor)
    exbind_rankings      score_ranking (R@k, MRR) and score_click (coordinate frames)
    exbind_scoring       score_prediction (this file)

Scoring one prediction (paper §3 eq. 3, A.3; docs/specification.md §4):

1. :func:`parse_prediction`: strict JSON of the whole text, else the body of a code fence,
   else the last balanced JSON object in the text that has a recognised key; then the closed
   alias table :data:`ALIASES` maps keys to the format's output keys (``candidate_id`` is
   never an alias, so an echoed candidate row is not an answer).
2. Validity: every returned id must be in the case's candidate inventory.
3. Map through M_f^-1 (the reference's candidate meanings) and score every applicable
   structural stage 0/1 (:func:`stage_scores`); ``exact`` = surface reference equals gold.
4. Violation set = applicable structural stages scored 0; first violation = first member
   under the declared order, ``exact`` when only the surface reference differs, ``none``
   when exact; invalid/unresolved predictions have the set ``{candidate_valid}``.

Three prediction kinds (docs/specification.md §9; issue 4), told apart in one place,
:func:`prediction_kind`, from the shape of the parsed JSON:

- ``reference``: ``{"cell_id": ...}`` and every other object (the contract above, unchanged);
- ``ranking``: ``{"ranking": [ids...]}`` (graph: ordered endpoint pairs); its top-1 is scored
  as the reference and the gold candidate's rank gives R@k and MRR (:func:`score_ranking`);
- ``click``: ``{"x": .., "y": ..}``, ``{"point": [x, y]}`` or a bare ``[x, y]`` in an explicitly
  given coordinate frame; it resolves to the smallest candidate box containing it and is
  scored as that entity's canonical reference (:func:`score_click`).

A reference is the JSON string in every dataset row's ``reference`` field
(:data:`REFERENCE_SCHEMA`); see :func:`load_reference` for its keys.

The legacy bridge (docs/specification.md §8; issue 6) adds family ``"legacy"`` (suite ``"legacy"``, format
``"svg"``, :data:`DECLARED_ORDERS` ``["legacy"]``) whose task types (object, endpoint, edge,
group) apply the stages of :data:`LEGACY_APPLICABLE_STAGES`; its rules are in
:func:`stage_scores` and :func:`execute_target`. Every other suite keeps
:data:`FAMILY_OF_FORMAT`.
"""


from __future__ import annotations

from typing import Any, Optional

try:  # inside evaluate's module cache the evaluator files sit in one package
    from .exbind_legacy_rules import legacy_hits, legacy_stage_scores, validate_legacy_target  # noqa: F401
    from .exbind_parse import (BUDGET_REASON, EXTRACT_BUDGET_EXTRA, EXTRACT_BUDGET_FACTOR,  # noqa: F401
                               FAILED_REASON, MAX_EXTRACT_STARTS, normalize_reference, parse_prediction,
                               parse_prediction_with_reason, prediction_kind, recognised_keys)
    from .exbind_rankings import (FRAME_EXTENT, read_click, read_ranking, resolve_click,  # noqa: F401
                                  score_click, score_ranking)
    from .exbind_reference import load_reference  # noqa: F401
    from .exbind_stages import execute_target, predicted_latent, score_reference, stage_scores, unscored  # noqa: F401
    from .exbind_vocabulary import (CANONICAL_DIMENSION, CANONICAL_DIMENSIONS, CLICK_CLASSES,  # noqa: F401
                                    COORDINATE_FRAMES, DECLARED_ORDERS, FAMILY_OF_FORMAT, FIRST_VIOLATION_LABELS,
                                    GRAPH_ALIASES, LEGACY_APPLICABLE_STAGES, LEGACY_FAMILY, LEGACY_FORMATS,
                                    LEGACY_SUITE, LEGACY_TASK_TYPES, OUTPUT_KEYS, PARSE_PATHS, PREDICTION_KINDS,
                                    RANKING_CUTOFFS, REFERENCE_SCHEMA, RELATIONS, RENDERED_FORMATS,
                                    SINGLE_KEY_ALIASES, STATUSES, ReferenceError, relation_holds, tokenize)
except ImportError:  # imported from the repository root
    from exbind_legacy_rules import legacy_hits, legacy_stage_scores, validate_legacy_target  # noqa: F401
    from exbind_parse import (BUDGET_REASON, EXTRACT_BUDGET_EXTRA, EXTRACT_BUDGET_FACTOR,  # noqa: F401
                              FAILED_REASON, MAX_EXTRACT_STARTS, normalize_reference, parse_prediction,
                              parse_prediction_with_reason, prediction_kind, recognised_keys)
    from exbind_rankings import (FRAME_EXTENT, read_click, read_ranking, resolve_click,  # noqa: F401
                                 score_click, score_ranking)
    from exbind_reference import load_reference  # noqa: F401
    from exbind_stages import execute_target, predicted_latent, score_reference, stage_scores, unscored  # noqa: F401
    from exbind_vocabulary import (CANONICAL_DIMENSION, CANONICAL_DIMENSIONS, CLICK_CLASSES,  # noqa: F401
                                   COORDINATE_FRAMES, DECLARED_ORDERS, FAMILY_OF_FORMAT, FIRST_VIOLATION_LABELS,
                                   GRAPH_ALIASES, LEGACY_APPLICABLE_STAGES, LEGACY_FAMILY, LEGACY_FORMATS,
                                   LEGACY_SUITE, LEGACY_TASK_TYPES, OUTPUT_KEYS, PARSE_PATHS, PREDICTION_KINDS,
                                   RANKING_CUTOFFS, REFERENCE_SCHEMA, RELATIONS, RENDERED_FORMATS,
                                   SINGLE_KEY_ALIASES, STATUSES, ReferenceError, relation_holds, tokenize)


def score_prediction(prediction: Any, reference: str, coordinate_frame: Optional[str] = None) -> dict:
    """Score one raw model output against one ``reference`` string (never raises on output).

    The parsed JSON's shape decides the kind (:func:`prediction_kind`): a reference is
    scored as in docs/specification.md §4; a ranking by :func:`score_ranking`; a click by :func:`score_click`
    in ``coordinate_frame``.

    Args:
        prediction: raw model output text (anything else is unresolved).
        reference: the dataset row's ``reference`` JSON string.
        coordinate_frame: the frame click coordinates are given in: ``"pixel"`` (pixels
            of the rendered image, origin top-left), ``"unit"`` (0-1 of width and height)
            or ``"thousand"`` (0-1000); None when the run has no clicks (a click is then
            invalid, with a reason saying to pass the frame). Never guessed from magnitudes.

    Returns:
        The per-case record (see :func:`score_reference`).

    Raises:
        ReferenceError: only for a bad reference, never for a bad prediction.
        ValueError: when ``coordinate_frame`` is not None or one of :data:`COORDINATE_FRAMES`.

    Example:
        >>> import json
        >>> # ref = load_reference(row["reference"]); score_prediction('{"cell_id": "cell_r01_c00"}', row["reference"])
    """
    if coordinate_frame is not None and coordinate_frame not in FRAME_EXTENT:
        raise ValueError(f"coordinate_frame must be one of {list(COORDINATE_FRAMES)} or None, "
                         f"got {coordinate_frame!r}")
    ref = load_reference(reference)
    value, parse_path, reason = parse_prediction_with_reason(prediction, ref["format"])
    if parse_path == "failed":
        return unscored(ref, "unresolved", parse_path, reason)
    kind = prediction_kind(value, ref["format"])
    if kind == "ranking":
        return score_ranking(ref, value, parse_path)
    if kind == "click":
        return score_click(ref, value, parse_path, coordinate_frame)
    predicted, reason = normalize_reference(value, ref["output_keys"])
    if predicted is None:
        return unscored(ref, "unresolved", parse_path, reason)
    return score_reference(ref, predicted, parse_path)
