"""ExBind scoring vocabulary: the public names every scoring module shares (docs/specification.md §4, §11).

Statuses, parse paths, prediction kinds, declared orders (paper A.7), the legacy task types
(paper §6.5), canonical dimensions (paper Table 14), the closed alias table, output keys per
surface format, the relation predicate (paper §3) and :class:`ReferenceError`. Standard
library only; the lowest layer of the evaluator (``exbind_scoring`` re-exports every name).
"""

from __future__ import annotations

import re

REFERENCE_SCHEMA = "exbind.reference.v1"

STATUSES = ("valid", "invalid", "unresolved")
PARSE_PATHS = ("strict", "fenced", "extracted", "failed")

# Prediction kinds (per-case ``kind``), click coordinate frames and click classes (docs/specification.md §9).
PREDICTION_KINDS = ("reference", "ranking", "click")
COORDINATE_FRAMES = ("pixel", "unit", "thousand")
CLICK_CLASSES = ("target", "distractor", "neither", "invalid")
RENDERED_FORMATS = ("svg", "canvas")
RANKING_CUTOFFS = (1, 5, 10)

# Declared orders (docs/specification.md §4 table; paper A.7). Validity first and exactness last, always.
DECLARED_ORDERS: dict[str, tuple[str, ...]] = {
    "relational": ("candidate_valid", "identity", "attribute", "anchor", "relation", "exact"),
    "hierarchy": ("candidate_valid", "identity", "hierarchy", "role", "attribute", "exact"),
    "graph": ("candidate_valid", "identity", "relation", "role", "exact"),
    "table": ("candidate_valid", "table_row", "table_column", "table_cell", "exact"),
    "legacy": ("candidate_valid", "identity", "hierarchy", "relation", "role", "exact"),
}

# Legacy bridge (docs/specification.md §8; issue 6): legacy SVG binding records (suite "legacy") keep format
# "svg" and use family "legacy"; each task type applies its own subset of the legacy order.
LEGACY_SUITE = "legacy"
LEGACY_FAMILY = "legacy"
LEGACY_FORMATS = ("svg",)
LEGACY_TASK_TYPES = ("object", "endpoint", "edge", "group")
LEGACY_APPLICABLE_STAGES: dict[str, tuple[str, ...]] = {
    "object": ("candidate_valid", "identity", "exact"),
    "endpoint": ("candidate_valid", "identity", "role", "exact"),
    "edge": ("candidate_valid", "identity", "relation", "role", "exact"),
    "group": ("candidate_valid", "identity", "hierarchy", "exact"),
}

FIRST_VIOLATION_LABELS = (
    "candidate_valid", "identity", "attribute", "anchor", "relation", "hierarchy", "role",
    "table_row", "table_column", "table_cell", "exact", "none",
)

# Canonical cross-family dimensions (paper Table 14): stage -> dimension.
CANONICAL_DIMENSION = {
    "candidate_valid": "candidate_valid",
    "identity": "identity",
    "table_row": "identity",
    "attribute": "attribute",
    "table_column": "attribute",
    "anchor": "anchor",
    "relation": "relation",
    "hierarchy": "hierarchy",
    "role": "ordered_role",
    "table_cell": "structured_selection",
    "exact": "exact",
}
CANONICAL_DIMENSIONS = (
    "candidate_valid", "identity", "attribute", "anchor", "relation", "hierarchy",
    "ordered_role", "structured_selection", "exact",
)

# Closed alias table (docs/specification.md §4 step 1). Keys of a single-reference format accept these names;
# graph accepts "source"/"target". "candidate_id" is deliberately absent.
SINGLE_KEY_ALIASES = ("id", "element_id", "node_id", "target_id", "dom_id", "cell_id")
GRAPH_ALIASES = {
    "source_id": "source_id", "source": "source_id", "source_node_id": "source_id",
    "target_id": "target_id", "target": "target_id", "target_node_id": "target_id",
}

# Output keys and family of every surface format (docs/specification.md §3; paper A.4 "schema").
OUTPUT_KEYS: dict[str, tuple[str, ...]] = {
    "svg": ("target_id",),
    "canvas": ("target_id",),
    "tree": ("target_id",),
    "dom": ("dom_id",),
    "graph": ("source_id", "target_id"),
    "table": ("cell_id",),
}
FAMILY_OF_FORMAT: dict[str, str] = {
    "svg": "relational", "canvas": "relational", "tree": "hierarchy", "dom": "hierarchy",
    "graph": "graph", "table": "table",
}

# Relation words (paper §3 R; docs/specification.md §4 "one geometric predicate per relation word").
# Positions are latent grid cells (col, row); row grows downwards as in image space.
RELATIONS = ("above", "below", "left_of", "right_of")


def relation_holds(relation: str, position, anchor_position) -> bool:
    """Whether an object at ``position`` is <relation> the anchor in the same column (row).

    The same predicate serves the generator's uniqueness check and the scorer.

    Args:
        relation: one of :data:`RELATIONS`.
        position, anchor_position: ``(col, row)`` latent grid cells (ints); row 0 is the top.

    Returns:
        True for "above": same column, smaller row; "below": same column, larger row;
        "left_of": same row, smaller column; "right_of": same row, larger column.
        False when either position is missing or the relation is unknown.
    """
    if position is None or anchor_position is None:
        return False
    (c, r), (ac, ar) = position, anchor_position
    if relation == "above":
        return c == ac and r < ar
    if relation == "below":
        return c == ac and r > ar
    if relation == "left_of":
        return r == ar and c < ac
    if relation == "right_of":
        return r == ar and c > ac
    return False


_TOKEN = re.compile(r"[a-z0-9]+")


def tokenize(text: str) -> set[str]:
    """Lower-cased alphanumeric tokens of ``text`` (the lexical gate's tokenizer)."""
    return set(_TOKEN.findall(text.lower())) if text else set()



class ReferenceError(ValueError):
    """A ``reference`` value is not an ExBind reference; the message names the field."""


def attrs(candidate: dict) -> dict:
    """A candidate's ``attributes`` dict (``{}`` when absent or null)."""
    return candidate.get("attributes") or {}
