"""The visible oracle: answers a case from what the model is shown, and nothing else.

The structural oracle (:func:`generator.baselines.structural_oracle`) reads the latent
record; this one reads only the *model-visible view* of a row (:func:`visible_view`): the
format, the instruction, the released prompt, the candidate rows, the observation source
when the prompt shows it (text formats; never for the image variant of svg and canvas),
and, for rendered rows, the PNG pixels. It never sees ``gold``, ``reference``, the binding,
the surface mapping or the latent record, so a case it cannot decide uniquely is a case no
careful model can decide either. The per-record gate :func:`generator.gates.gate_visible_oracle`
rejects such cases (regenerated from the next attempt's seed, reason counted) and every
suite's gate table reports its accuracy, which must be 1.000.

One solver per family lives beside this file (``relational``, ``hierarchy``, ``graph``,
``table``, ``legacy``); each has the signature ``solve(view, image) -> dict | None`` and
returns the reference keyed like the output schema, or ``None`` when what it reads does not
single out one answer.
"""

from __future__ import annotations

import io
from typing import Any, Mapping, Optional

from generator.prompt import RENDERED_FORMATS
from generator.visible_oracle import graph, hierarchy, legacy, relational, table

VISIBLE_FIELDS = ("format", "instruction", "prompt", "candidates", "output_schema")

SOLVERS = {
    "svg": relational.solve,
    "canvas": relational.solve,
    "tree": hierarchy.solve,
    "dom": hierarchy.solve,
    "graph": graph.solve,
    "table": table.solve,
}


def visible_view(row: Mapping[str, Any]) -> dict[str, Any]:
    """The fields of a dataset row that the released prompt shows a model.

    Args:
        row: a dataset row (or :meth:`generator.records.ExBindRecord.to_row` output).

    Returns:
        ``{"format", "instruction", "prompt", "candidates", "output_schema", "source"}``;
        ``source`` is the observation text for text formats and ``None`` for rendered
        formats (their default prompt shows the PNG, not the source; paper A.4).
    """
    view = {k: row[k] for k in VISIBLE_FIELDS}
    shown = row["format"] not in RENDERED_FORMATS
    view["source"] = row["observation"]["source"] if shown else None
    view["suite"] = row.get("suite")
    return view


def decode_image(image: Any):
    """A PIL RGB image from PNG bytes, a ``{"bytes": ...}`` dict, a PIL image, or ``None``."""
    if image is None:
        return None
    from PIL import Image

    if isinstance(image, dict):
        image = image.get("bytes")
    if isinstance(image, (bytes, bytearray)):
        image = Image.open(io.BytesIO(image))
    return image.convert("RGB")


def visible_answer(row: Mapping[str, Any], image: Any = None) -> Optional[dict[str, str]]:
    """Answer one case from its model-visible view.

    Args:
        row: a dataset row dict (see :func:`visible_view`).
        image: the row's PNG (bytes, ``{"bytes": ...}`` or PIL image), ``None`` for text rows.

    Returns:
        the predicted reference keyed like the output schema (e.g. ``{"cell_id": ...}``), or
        ``None`` when the visible inputs do not single out one answer.

    Raises:
        KeyError: for a format without a solver.
    """
    view = visible_view(row)
    if view.get("suite") == "legacy":  # its rules read the rows' boxes, never the pixels
        return legacy.solve(view, None)
    return SOLVERS[view["format"]](view, decode_image(image))
