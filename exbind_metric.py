"""ExBind metric for ``evaluate``: stage-localized scoring of executable references.

Load it by path (``evaluate`` copies this file and the sibling modules it imports with a
relative import, listed by :func:`exbind_metric_files.metric_files`, into its module
cache; it follows only this file's own imports, so every evaluator module is imported
here, including those only the others use)::

    metric = evaluate.load("path/to/exbind_metric.py")
    metric.add_batch(predictions=outputs, references=batch["reference"])
    result = metric.compute()

All scoring lives in ``exbind_scoring`` (per case) and ``exbind_aggregate`` (over cases);
this class only declares the input contract and calls them.
"""

import warnings

import datasets
import evaluate

# Each relative import below is what makes evaluate copy that file (its loader reads only
# this file's ``from .x import`` lines, and a trailing comment there would be read as a URL).
from .exbind_aggregate import aggregate
from .exbind_legacy_rules import legacy_stage_scores
from .exbind_paired import paired_comparison
from .exbind_parse import parse_prediction
from .exbind_rankings import score_click
from .exbind_reference import load_reference, reference_type_error
from .exbind_scoring import COORDINATE_FRAMES, REFERENCE_SCHEMA, score_prediction
from .exbind_stages import score_reference
from .exbind_vocabulary import FIRST_VIOLATION_LABELS

# Referenced so the imports above read as used: they exist to have evaluate copy the files.
_COPIED_SIBLINGS = (legacy_stage_scores, paired_comparison, parse_prediction, score_click, load_reference, score_reference,
                    FIRST_VIOLATION_LABELS)

METRIC_VERSION = "exbind.metric.v1"

_CITATION = """\
@misc{wang_exbind,
  title  = {{ExBind}: A Controlled Diagnostic Benchmark for Visual-to-Executable Correspondence},
  author = {Wang, Ziqian and Cheng, Yuxiao and Xiao, Tingxiong and Suo, Jinli},
  url    = {https://github.com/Daerwang2020/Exbind},
  note   = {Benchmark records: https://huggingface.co/datasets/Ziqianwwww/ExBind}
}
"""

_DESCRIPTION = """\
Scores raw model outputs against ExBind references. Each output is parsed (strict JSON,
then a code fence, then the last JSON object with a recognised key), normalized through a
closed alias table, checked against the candidate inventory (valid / invalid / unresolved),
mapped back to the latent structure, and scored on every applicable structural constraint.
The first violated constraint under the family's declared order localizes the failure.
"""

_KWARGS_DESCRIPTION = r"""
Args:
    predictions: list of raw model output strings. Any text is scored (malformed JSON,
        prose, empty strings: unresolved, never an exception; a missing output, None or a
        number, is unresolved too). A dict or list (an already-parsed answer) raises
        ``ValueError`` naming its position: pass ``json.dumps(value)``, as ``exbind.py
        score`` requires of a predictions file's ``output``. In one process (the default) rows are
        scored as they are added, so any string is scored as the core
        ``exbind_scoring.score_prediction`` scores it; with ``num_process > 1`` rows go
        through ``evaluate``'s Arrow cache (UTF-8), which refuses a string holding a lone
        surrogate: decode model outputs with ``errors="replace"``.
        An output may be a reference (``{"cell_id": ...}``), a ranking
        (``{"ranking": [ids...]}``; graph items ``[source_id, target_id]`` or
        ``"source_id->target_id"``; its top-1 is scored as the reference) or a click
        (``{"x": .., "y": ..}``, ``{"point": [x, y]}`` or ``[x, y]``; svg and canvas only;
        scored as the canonical reference of the entity whose smallest box contains it).
    references: list of the dataset's ``reference`` strings (same order, same length).
    coordinate_frame: (``add``, ``add_batch`` and ``compute``) the frame click coordinates
        are given in: ``"pixel"`` (pixels of the rendered image), ``"unit"`` (0-1) or
        ``"thousand"`` (0-1000); never guessed from magnitudes. A frame given to ``add`` /
        ``add_batch`` is stored with those rows (it survives distributed gathering); a frame
        given to ``compute`` applies to the rows passed to it and to stored rows added
        without one. A click with no frame is ``invalid`` and its reason says to pass one;
        any other value raises ``ValueError``. Reference and ranking outputs ignore it.
    return_per_case: when True, the result has ``per_case``: the per-case records in
        input order (``case_id``, ``status``, ``parse_path``, ``predicted``,
        ``predicted_latent``, ``scores``, ``violations``, ``first_violation``,
        ``possible_first_violations``, ``reason``, plus ``format``, ``family``,
        ``condition``, ``group_id``, ``parent_case_id``, ``latent_id``,
        ``generator_version``); ranking and click records add ``kind`` (``"ranking"`` /
        ``"click"``; a record without it is a reference), ``rank_of_gold`` (rankings:
        1-based rank of gold, else None) and ``click`` (clicks: ``x_px``, ``y_px``,
        ``in_gold_box``, ``loose_hit``, ``class``, ``hit_id``; else None).
Returns:
    A dict of plain JSON-serializable Python values (``json.dumps(result,
    allow_nan=False)`` works; an undefined rate is None, never NaN; n = 0 is allowed):
    ``n``, ``n_valid``, ``validity``, ``n_exact``, ``exact_accuracy`` (rates in [0, 1]),
    ``exact_accuracy_ci`` (Wilson 95% ``[low, high]``), ``errors_after_validity``,
    ``first_violation_counts``, ``first_violation_profile``, ``violation_set_counts``,
    ``possible_first_violations``, ``stage_accuracy``, ``dimension_accuracy``,
    ``applicability``, ``survival``, ``by_format``, ``by_family``, ``by_condition``,
    ``cross_format_consistency``, ``parse_paths``, ``statuses``, ``kinds``, ``ranking``
    (``n_ranked``, ``recall_at_1`` / ``_5`` / ``_10`` with hit counts, ``mrr``; None when
    no output is a ranking), ``click`` (``n_clicks``, ``point_in_box_accuracy`` and
    ``loose_accuracy`` with counts and Wilson intervals, ``classes``; None when no output
    is a click) and the versions ``metric_version``, ``reference_schema``,
    ``generator_version`` (docs/specification.md §5, §9, §11).
    In distributed use only the process with ``process_id=0`` gets the result; the
    others get None.
Raises:
    exbind_scoring.ReferenceError: when a reference is not a string (in any position of a
        batch), not an ExBind reference or has an unknown ``schema`` version (the message
        names the field).
    ValueError: when a prediction is a dict or a list (pass ``json.dumps(value)``); a
        malformed prediction *text* never raises.
Examples:
    A reference is the ``reference`` column of any ExBind config (``batch["reference"]``).
    To stay self-contained this example writes a minimal one by hand: a table whose
    target is the ``status`` cell of row 1, three candidate cells.

    >>> import json
    >>> import evaluate
    >>> def cell(row, col, column, value):
    ...     return {"id": f"cell_r{row:02d}_c{col:02d}", "type": "cell", "entity": f"demo_row_{row}",
    ...             "semantic_id": f"demo_row_{row}.{column}", "canonical": True, "text": value,
    ...             "row": row, "column": column, "attributes": {"value": value}}
    >>> stages = ["candidate_valid", "table_row", "table_column", "table_cell", "exact"]
    >>> reference = json.dumps({
    ...     "schema": "exbind.reference.v1", "generator_version": "exbind.generator.v2",
    ...     "case_id": "demo__table", "parent_case_id": None, "latent_id": "demo", "group_id": None,
    ...     "suite": "broad", "format": "table", "family": "table", "condition": None,
    ...     "output_keys": ["cell_id"], "gold": {"cell_id": "cell_r01_c01"},
    ...     "declared_order": stages, "applicable_stages": stages,
    ...     "candidates": [cell(1, 0, "owner", "Team B"), cell(2, 1, "status", "paused"),
    ...                    cell(1, 1, "status", "active")],
    ...     "target": {"entity": "demo_row_1", "row": 1, "column": "status",
    ...                "conditions": [["owner", "Team B"]]},
    ...     "image_size": None, "gold_rank": 3})

    Four model outputs: exact; the right row but the wrong column (inside prose); no
    recoverable object; an id that is not a candidate (inside a code fence).

    >>> outputs = ['{"cell_id": "cell_r01_c01"}',
    ...            'The status cell is {"cell_id": "cell_r01_c00"}.',
    ...            "{cell_id: cell_r01_c01",
    ...            '```json\n{"id": "cell_r09_c09"}\n```']
    >>> metric = evaluate.load("exbind_metric.py")  # or the file's absolute path
    >>> result = metric.compute(predictions=outputs, references=[reference] * 4)
    >>> result["n"], result["n_valid"], result["n_exact"], result["exact_accuracy"]
    (4, 2, 1, 0.25)
    >>> [round(x, 3) for x in result["exact_accuracy_ci"]]
    [0.046, 0.699]
    >>> result["first_violation_counts"]["table_column"], result["first_violation_counts"]["candidate_valid"]
    (1, 2)
    >>> result["statuses"]
    {'invalid': 1, 'unresolved': 1, 'valid': 2}
    >>> result["parse_paths"]
    {'extracted': 1, 'failed': 1, 'fenced': 1, 'strict': 1}
    >>> result["violation_set_counts"]
    {'candidate_valid': 2, 'table_column+table_cell': 1, '{}': 1}
    >>> _ = json.dumps(result, allow_nan=False)  # plain JSON values

    In a training or evaluation loop, add each batch and compute once at the end; the
    result equals one ``compute`` over all cases.

    >>> for text in outputs:
    ...     metric.add_batch(predictions=[text], references=[reference])
    >>> metric.compute() == result
    True

    Per-case records localize each failure.

    >>> case = metric.compute(predictions=outputs[1:2], references=[reference], return_per_case=True)["per_case"][0]
    >>> case["status"], case["parse_path"], case["predicted"], case["first_violation"]
    ('valid', 'extracted', {'cell_id': 'cell_r01_c00'}, 'table_column')
    >>> case["scores"]
    {'candidate_valid': 1, 'table_row': 1, 'table_column': 0, 'table_cell': 0, 'exact': 0}
    >>> case["predicted_latent"]
    {'entity': 'demo_row_1', 'semantic_id': 'demo_row_1.owner'}


    Rankings and clicks go through the same calls (``tests/test_rankings_clicks.py`` runs
    these on real references)::

        metric.compute(predictions=['{"ranking": ["cell_r01_c00", "cell_r01_c01"]}'],
                       references=[reference])["ranking"]        # R@1 0.0, R@5 1.0, MRR 0.5
        metric.compute(predictions=['{"x": 0.5, "y": 0.5}'], references=[svg_reference],
                       coordinate_frame="unit")["click"]         # point-in-box, loose, classes
"""


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class ExBindMetric(evaluate.Metric):
    """The ExBind evaluator as an ``evaluate.Metric`` (docs/specification.md §4-§5).

    Input contract (``_info().features``): ``predictions`` and ``references`` are both
    strings; references are the dataset's ``reference`` column. Scoring is
    deterministic and stateless per case, so ``add_batch`` / ``add`` followed by one
    ``compute()`` equals a single ``compute`` over all cases, in any batching.

    Distributed use (several processes on one or more machines sharing a file system):
    give every process the same ``num_process``, its own ``process_id`` and one shared,
    unique ``experiment_id`` (plus the same ``cache_dir``)::

        metric = evaluate.load("exbind_metric.py", num_process=world_size, process_id=rank,
                               experiment_id=run_id, cache_dir=shared_dir)
        metric.add_batch(predictions=local_outputs, references=local_batch["reference"])
        result = metric.compute()  # the full result on rank 0, None elsewhere

    ``evaluate`` gathers every process's cached predictions on process 0, which scores
    them in rank order; the result equals a single-process compute over the union.
    """

    def _info(self):
        # ``coordinate_frames`` is internal: the wrappers below fill it from the
        # ``coordinate_frame`` keyword ("" = none given), so every stored row keeps the frame
        # it was added with, across batches and processes.
        return evaluate.MetricInfo(
            description=_DESCRIPTION,
            citation=_CITATION,
            inputs_description=_KWARGS_DESCRIPTION,
            features=datasets.Features({"predictions": datasets.Value("string"),
                                        "references": datasets.Value("string"),
                                        "coordinate_frames": datasets.Value("string")}),
            reference_urls=[],
        )

    # evaluate type-checks only the first item of a batch against the string feature, so a
    # None or a number there would raise while the same value later in the batch is cast.
    # Coercing every missing output (None, a number) to "" makes the rule position-independent:
    # such an output is scored `unresolved`. A dict or list is refused in any position, and a
    # reference that is not a string raises the scorer's ReferenceError in any position.
    # One process (``num_process == 1``, the default): rows are scored as they are added and
    # only the per-case records are kept, so nothing round-trips through evaluate's Arrow
    # cache (which stored every full reference string, 4-20 kB each, and read them all back
    # at compute). Several processes: the rows go through evaluate's cache, which gathers
    # them on process 0. Both give the same result for the same rows.
    def _in_memory(self) -> bool:
        return self.num_process == 1

    def _score_rows(self, predictions, references, frames) -> tuple[list, list]:
        """Score rows; return ``(records, unframed)`` where ``unframed`` lists ``(position,
        prediction, reference)`` of clicks scored without a frame (compute's frame applies)."""
        if predictions is None or references is None:
            raise ValueError("ExBind metric: pass both predictions and references (lists of the same length)")
        texts, references = _as_texts(predictions), list(references)
        if len(texts) != len(references):
            raise ValueError(f"ExBind metric: {len(texts)} predictions but {len(references)} references; "
                             "pass one reference per prediction")
        _check_references(references)
        records, unframed = [], []
        for i, (text, reference, frame) in enumerate(zip(texts, references, frames)):
            record = score_prediction(text, reference, frame or None)
            if not frame and record.get("kind") == "click":
                unframed.append((i, text, reference))
            records.append(record)
        return records, unframed

    def _store(self, records: list, unframed: list) -> None:
        state = self.__dict__.setdefault("_exbind_rows", {"records": [], "unframed": []})
        offset = len(state["records"])
        state["records"].extend(records)
        state["unframed"].extend((offset + i, text, reference) for i, text, reference in unframed)

    # evaluate type-checks only the first item of a batch against the string feature, so a
    # None or a number there would raise while the same value later in the batch is cast.
    # Coercing every missing output (None, a number) to "" makes the rule position-independent:
    # such an output is scored `unresolved`. A dict or list is refused in any position, and a
    # reference that is not a string raises the scorer's ReferenceError in any position.
    def add(self, *, prediction=None, reference=None, coordinate_frame=None, **kwargs):
        """Add one prediction and reference (a non-string prediction is scored unresolved).

        ``coordinate_frame`` (``"pixel"`` | ``"unit"`` | ``"thousand"`` | None) is stored with
        the row; see the module docs.
        """
        frame = kwargs.pop("coordinate_frames", None)
        if frame is None:
            frame = _frame(coordinate_frame)
        if self._in_memory() and not kwargs:
            self._store(*self._score_rows([prediction], [reference], [frame]))
            return None
        _check_references([reference])
        return super().add(prediction=_as_text(prediction), reference=reference, coordinate_frames=frame, **kwargs)

    def add_batch(self, *, predictions=None, references=None, coordinate_frame=None, **kwargs):
        """Add a batch of predictions and references (non-string predictions: unresolved).

        ``coordinate_frame`` (``"pixel"`` | ``"unit"`` | ``"thousand"`` | None) is stored with
        every row of the batch; see the module docs.
        """
        frames = kwargs.pop("coordinate_frames", None)  # set when evaluate's compute() calls this
        if frames is None:
            frames = _frames(coordinate_frame, predictions)
        if self._in_memory() and not kwargs:
            self._store(*self._score_rows(predictions, references, frames))
            return None
        _check_references(references)
        return super().add_batch(predictions=_as_texts(predictions), references=references,
                                 coordinate_frames=frames, **kwargs)

    def compute(self, *, predictions=None, references=None, coordinate_frame=None, **kwargs):
        """Score everything added so far plus these predictions (see the module docs).

        ``coordinate_frame`` applies to the predictions passed here and to stored rows that
        were added without a frame.
        """
        frames = _frames(coordinate_frame, predictions)
        if self._in_memory() and (predictions is not None or references is not None
                                  or "_exbind_rows" in self.__dict__):
            records, unframed = [], []
            if predictions is not None or references is not None:
                records, unframed = self._score_rows(predictions, references, frames)  # may raise: state kept
            self._store(records, unframed)
            state = self.__dict__.pop("_exbind_rows")  # compute consumes what was added, as in evaluate
            records = state["records"]
            if coordinate_frame is not None:
                for i, text, reference in state["unframed"]:
                    records[i] = score_prediction(text, reference, coordinate_frame)
            return self._result(records, **kwargs)
        _check_references(references)
        return super().compute(predictions=_as_texts(predictions), references=references,
                               coordinate_frames=frames, coordinate_frame=coordinate_frame, **kwargs)

    def _compute(self, predictions, references, coordinate_frames=None, return_per_case=False,
                 coordinate_frame=None):
        """The several-process path: score the rows evaluate gathered on process 0."""
        frames = coordinate_frames or [""] * len(predictions)
        records = [score_prediction(p, r, f or coordinate_frame) for p, r, f in zip(predictions, references, frames)]
        return self._result(records, return_per_case)

    @staticmethod
    def _result(records: list, return_per_case: bool = False) -> dict:
        """The aggregate over per-case records, with versions (and the records on request)."""
        result = aggregate(records)
        if result["click"] and result["click"]["frame_warning"]:
            warnings.warn(result["click"]["frame_warning"], UserWarning, stacklevel=3)
        result["metric_version"] = METRIC_VERSION
        result["reference_schema"] = REFERENCE_SCHEMA
        versions = sorted({r["generator_version"] for r in records if r.get("generator_version")})
        result["generator_version"] = versions[0] if len(versions) == 1 else (versions or None)
        if return_per_case:
            result["per_case"] = records
        return result


def _as_text(prediction, index: int = 0):
    """A raw output string, or "" (scored unresolved) for a missing output (None, a number).

    Raises:
        ValueError: for a dict or list (an already-parsed answer), with the fix; the
            ``exbind.py score`` command refuses the same values in a predictions file.
    """
    if isinstance(prediction, (dict, list)):
        raise ValueError(
            f"predictions[{index}]: must be the raw model output as a string, got {type(prediction).__name__} "
            "(pass json.dumps(value) for a parsed reference)")
    return prediction if isinstance(prediction, str) else ""


def _as_texts(predictions):
    return None if predictions is None else [_as_text(p, i) for i, p in enumerate(predictions)]


def _check_references(references) -> None:
    """Every reference must be a string, wherever it sits in the batch (evaluate's own check
    looks at the first item only and words it differently)."""
    if references is None or isinstance(references, str):
        return
    try:
        items = list(references)
    except TypeError:  # not a batch: let evaluate report the input error
        return
    for reference in items:
        if not isinstance(reference, str):
            raise reference_type_error(reference)


def _frame(coordinate_frame) -> str:
    """The stored form of a coordinate frame: the frame name, or "" for None.

    Raises:
        ValueError: for anything but None or one of ``COORDINATE_FRAMES``.
    """
    if coordinate_frame is None:
        return ""
    if not isinstance(coordinate_frame, str) or coordinate_frame not in COORDINATE_FRAMES:
        raise ValueError(f"coordinate_frame must be one of {list(COORDINATE_FRAMES)} or None, "
                         f"got {coordinate_frame!r}")
    return coordinate_frame


def _frames(coordinate_frame, predictions):
    """The ``coordinate_frames`` column for a batch (None when there is no batch)."""
    frame = _frame(coordinate_frame)
    if predictions is None:
        return None
    try:
        return [frame] * len(predictions)
    except TypeError:  # not a sized batch: let evaluate report the input error
        return [frame]
