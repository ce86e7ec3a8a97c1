"""The ordinary strict-reference prompt (paper A.4; docs/specification.md §6, §11): one builder for every model.

Variants:
- ``"image"``: for svg and canvas rows the observation is the attached PNG and the source
  is not included (the released ``prompt`` of those rows); for text formats it equals
  ``"text"``.
- ``"text"``: always includes the serialized source (for text-only models; run manifests
  name the variant they used).

The schema line shows placeholders, never a real candidate id, so a model that echoes the
prompt is not scored as answering. :func:`build_prompt` applied to a loaded dataset row
reproduces that row's ``prompt`` field exactly.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Mapping

RENDERED_FORMATS = ("svg", "canvas")
PROMPT_VARIANTS = ("image", "text")
PLACEHOLDER = "<candidate_id>"

_TEMPLATE = (
    "You are evaluating a binding benchmark. Select only from the candidate IDs.\n"
    "Format: {format}\n"
    "Instruction: {instruction}\n"
    "\n"
    "{observation}\n"
    "\n"
    "Candidates:\n"
    "{candidates}\n"
    "\n"
    "{contract}"
    "Return strict JSON only with this schema: {schema}"
)

# Output contract lines per (family, format) (docs/specification.md §6): which surface element denotes an
# object. Relational svg candidate rows show each element's ``tag`` and ``parent_id``; an
# object drawn as a group is denoted by the group (the outermost element that draws it), so
# answering with a child shape names the right object through the wrong element (an
# exact-only failure). Legacy svg rows keep their own prompt.
FORMAT_CONTRACTS = {
    ("relational", "svg"): (
        "An object is denoted by the outermost element that draws it: when an object is drawn "
        "as a group (tag \"g\"), answer with the group's id, not with a shape inside it "
        "(a candidate whose parent_id is the group)."
    ),
}


def output_schema(output_keys) -> str:
    """The schema line's JSON with placeholders, e.g. ``{"cell_id": "<candidate_id>"}``."""
    return json.dumps({k: PLACEHOLDER for k in output_keys})


def candidate_rows(candidates) -> str:
    """Model-visible candidate rows as one JSON object per line, null fields omitted."""
    lines = []
    for c in candidates:
        row = {k: v for k, v in c.items() if v is not None}
        lines.append(json.dumps(row, ensure_ascii=False))
    return "\n".join(lines)


def build_prompt(row: Mapping[str, Any], variant: str = "image") -> str:
    """Build the prompt for a dataset row (or a row dict before export).

    Args:
        row: needs ``format``, ``instruction``, ``observation`` ({source_type, source}),
            ``candidates`` (model-visible dicts) and ``output_schema``; ``family`` selects
            the output contract line (:data:`FORMAT_CONTRACTS`; relational svg only).
        variant: ``"image"`` (default, the released prompt) or ``"text"``.

    Raises:
        ValueError: for an unknown variant.
    """
    if variant not in PROMPT_VARIANTS:
        raise ValueError(f"variant={variant!r}; expected one of {PROMPT_VARIANTS}")
    obs = row["observation"]
    contract = FORMAT_CONTRACTS.get((row.get("family"), row["format"]))
    if row["format"] in RENDERED_FORMATS and variant == "image":
        observation = f"Observation: the attached image (a rendered {row['format']} picture)."
    else:
        observation = f"Observation ({obs['source_type']}):\n{obs['source']}"
    return _TEMPLATE.format(
        format=row["format"],
        instruction=row["instruction"],
        observation=observation,
        candidates=candidate_rows(row["candidates"]),
        contract=contract + "\n" if contract else "",
        schema=row["output_schema"],
    )


def prompt_builder_hash() -> str:
    """SHA-256 of this module's source: run manifests record which builder made a prompt."""
    return hashlib.sha256(Path(__file__).read_bytes()).hexdigest()
