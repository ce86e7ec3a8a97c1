"""One typed record per case: the single source of the row, its Arrow features and the
metric's ``reference`` payload (docs/specification.md §6, §11; paper A.2).

``gold``, ``surface_mapping``, ``binding`` and ``reference`` are all derived here from one
:class:`ExBindRecord` (built from a compiler's :class:`~generator.schema.SurfaceCase`), so
they cannot disagree; ``tests/test_records.py`` asserts that they do agree.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field, replace
from typing import Optional

from exbind_scoring import DECLARED_ORDERS, REFERENCE_SCHEMA
from generator.prompt import build_prompt, output_schema
from generator.schema import OUTPUT_KEYS, Candidate, SurfaceCase, Target

GENERATOR_VERSION = "exbind.generator.v2"

# The row schema as plain data, the one listing of every column and its type (one schema for
# all configs, so configs concatenate cleanly): a string is a ``datasets.Value`` dtype,
# ``"image"`` a ``datasets.Image()``, ``[t]`` a list of ``t``, a dict a struct.
# :data:`FEATURES` is its ``datasets`` form, built on first use, so that generation (pool
# workers included) never imports ``datasets``.
ROW_SCHEMA: dict = {
    "case_id": "string",
    "latent_id": "string",
    "group_id": "string",
    "parent_case_id": "string",
    "suite": "string",
    "format": "string",
    "family": "string",
    "condition": "string",
    "instruction": "string",
    "observation": {"source_type": "string", "source": "string"},
    "image": "image",
    "candidates": [{
        "candidate_id": "string",
        "candidate_type": "string",
        "bbox": ["int32"],
        "roles": ["string"],
        "column": "string",
        "tag": "string",
        "parent_id": "string",
        "text": "string",
    }],
    "gold": "string",
    "gold_rank": "int32",
    "output_schema": "string",
    "prompt": "string",
    "binding": {
        "entity": "string",
        "semantic_id": "string",
        "attribute": "string",
        "target_type": "string",
        "executable_type": "string",
    },
    "surface_mapping": [{"semantic_id": "string", "candidate_id": "string"}],
    "applicable_stages": ["string"],
    "declared_order": ["string"],
    "order_control": {
        "permutation_seed": "int64",
        "original_order": ["string"],
        "permuted_order": ["string"],
        "original_gold_rank": "int32",
        "permuted_gold_rank": "int32",
    },
    "cached_output": {"output": "string", "predictor": "string", "provenance": "string"},
    "reference": "string",
}
COLUMNS: tuple[str, ...] = tuple(ROW_SCHEMA)


def _feature(spec):
    """The ``datasets`` feature of one :data:`ROW_SCHEMA` entry."""
    import datasets

    if isinstance(spec, dict):
        return {name: _feature(sub) for name, sub in spec.items()}
    if isinstance(spec, list):
        return datasets.List(_feature(spec[0]))
    return datasets.Image() if spec == "image" else datasets.Value(spec)


def __getattr__(name: str):
    """``FEATURES``: the ``datasets.Features`` of :data:`ROW_SCHEMA`, built (and kept) on first use."""
    if name == "FEATURES":
        import datasets

        features = datasets.Features(_feature(ROW_SCHEMA))
        globals()["FEATURES"] = features
        return features
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")



def canonical_row_bytes(row: dict) -> bytes:
    """One row's line of the canonical records hash (the manifest's
    ``canonical_records_sha256``): sorted compact JSON, image bytes replaced by their
    SHA-256 (rows as written, or as ``datasets`` reads them with ``Image(decode=False)``:
    both give the same line)."""
    row = dict(row)
    image = row.get("image")
    if image is not None:
        data = image["bytes"] if isinstance(image, dict) else image
        row["image"] = hashlib.sha256(data).hexdigest()
    return json.dumps(row, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode() + b"\n"


@dataclass
class ExBindRecord:
    """A compiled case with its release identity.

    Attributes:
        case: the compiler output (observation, instruction, candidates, target).
        latent_id: latent instance id; ``case_id`` is ``f"{latent_id}__{format}"``.
        suite: ``"broad"`` | ``"targeted"`` | ``"legacy"``.
        condition: targeted condition or None.
        group_id: shared latent id for cross-format paired cases, else None.
        image_png: rendered PNG bytes (svg/canvas) or None.
        case_id: overrides the default case id (permuted rows: ``<case_id>__perm<k>``).
        parent_case_id: the original case of a control row, else None.
        show_column: the column-metadata control adds ``column`` to every candidate row.
        order_control: permutation record of ``targeted_table_permuted`` rows, else None.
        cached_output: legacy bridge cached prediction, else None.
        applicable_stages: override of the family's declared order (legacy task types).
    """

    case: SurfaceCase
    latent_id: str
    suite: str
    condition: Optional[str] = None
    group_id: Optional[str] = None
    image_png: Optional[bytes] = None
    case_id: Optional[str] = None
    parent_case_id: Optional[str] = None
    show_column: bool = False
    order_control: Optional[dict] = None
    cached_output: Optional[dict] = None
    applicable_stages: Optional[tuple[str, ...]] = None
    extra: dict = field(default_factory=dict)
    # reference_json() and to_row() serialized once per record (issue 13 item 3); emptied on
    # any attribute assignment, so a record changed after serialization never serves stale text.
    _serialized: dict = field(default_factory=dict, init=False, repr=False, compare=False)

    def __setattr__(self, name, value):
        if name != "_serialized" and self.__dict__.get("_serialized"):
            self.__dict__["_serialized"] = {}
        object.__setattr__(self, name, value)

    @property
    def id(self) -> str:
        return self.case_id or f"{self.latent_id}__{self.case.format}"

    @property
    def declared_order(self) -> tuple[str, ...]:
        return DECLARED_ORDERS[self.case.family]

    @property
    def stages(self) -> tuple[str, ...]:
        return self.applicable_stages or self.declared_order

    def gold(self) -> dict[str, str]:
        return self.case.gold()

    def gold_rank(self) -> int:
        """1-based position of the gold candidate (graph: of the source) in released order."""
        first_key = OUTPUT_KEYS[self.case.format][0]
        gold_id = self.gold()[first_key]
        return 1 + [c.candidate_id for c in self.case.candidates].index(gold_id)

    def visible_candidates(self) -> list[dict]:
        """Model-visible candidate rows (docs/specification.md §6): no latent annotation ever.

        Keys: ``candidate_id``, ``candidate_type``, ``bbox`` (rendered surfaces), ``roles``
        (graph endpoints), ``column`` (column-metadata control only), and for svg the
        element's visible structure ``tag`` and ``parent_id`` (the enclosing candidate
        element, as an inspector shows it); a key that does not apply is None (omitted in
        the prompt's candidate rows).
        """
        return [
            {
                "candidate_id": c.candidate_id,
                "candidate_type": c.candidate_type,
                "bbox": [int(v) for v in c.bbox] if c.bbox is not None else None,
                "roles": list(c.roles) if c.roles is not None else None,
                "column": c.meaning.column if self.show_column else None,
                "tag": c.tag,
                "parent_id": c.parent_id,
                "text": None,  # legacy rows show each element's visible label (generator.legacy.converter)
            }
            for c in self.case.candidates
        ]

    def binding(self) -> dict:
        t = self.case.target
        fam = self.case.family
        attribute = {
            "table": t.column,
            "hierarchy": t.kind if t.role is None else f"{t.role} {t.kind}",
            "relational": " ".join(v for _, v in t.attributes),
            "graph": t.edge_label,
        }[fam]
        entity = t.entity if fam != "graph" else f"{t.source}->{t.target}"
        semantic = t.semantic_id if fam != "graph" else f"{t.source_semantic_id}->{t.target_semantic_id}"
        return {
            "entity": entity,
            "semantic_id": semantic,
            "attribute": attribute,
            "target_type": self.case.candidates[0].candidate_type,
            "executable_type": "+".join(OUTPUT_KEYS[self.case.format]),
        }

    def reference(self) -> dict:
        """The metric's payload (docs/specification.md §11): exactly what scoring needs, never the observation."""
        return {
            "schema": REFERENCE_SCHEMA,
            "generator_version": GENERATOR_VERSION,
            "case_id": self.id,
            "parent_case_id": self.parent_case_id,
            "latent_id": self.latent_id,
            "group_id": self.group_id,
            "suite": self.suite,
            "format": self.case.format,
            "family": self.case.family,
            "condition": self.condition,
            "output_keys": list(OUTPUT_KEYS[self.case.format]),
            "gold": self.gold(),
            "declared_order": list(self.declared_order),
            "applicable_stages": list(self.stages),
            "candidates": [_candidate_payload(c) for c in self.case.candidates],
            "target": _target_payload(self.case.target),
            "image_size": list(self.case.image_size) if self.case.image_size else None,
            "gold_rank": self.gold_rank(),
        }

    def reference_json(self) -> str:
        """The ``reference`` column value: canonical (sorted, compact) JSON of :meth:`reference`
        (serialized once per record and kept)."""
        if "reference" not in self._serialized:
            self._serialized["reference"] = json.dumps(self.reference(), sort_keys=True, separators=(",", ":"))
        return self._serialized["reference"]

    def to_row(self) -> dict:
        """The dataset row (keys :data:`COLUMNS`), built once per record and kept: treat it
        as read-only (copy before changing it)."""
        if "row" not in self._serialized:
            self._serialized["row"] = self._build_row()
        return self._serialized["row"]

    def canonical_line(self) -> bytes:
        """This record's line of the records hash, :func:`canonical_row_bytes` of
        :meth:`to_row` (computed once and kept, like the row)."""
        if "canonical" not in self._serialized:
            self._serialized["canonical"] = canonical_row_bytes(self.to_row())
        return self._serialized["canonical"]

    def _build_row(self) -> dict:
        c = self.case
        row = {
            "case_id": self.id,
            "latent_id": self.latent_id,
            "group_id": self.group_id,
            "parent_case_id": self.parent_case_id,
            "suite": self.suite,
            "format": c.format,
            "family": c.family,
            "condition": self.condition,
            "instruction": c.instruction,
            "observation": {"source_type": c.source_type, "source": c.source},
            "image": {"bytes": self.image_png, "path": None} if self.image_png is not None else None,
            "candidates": self.visible_candidates(),
            "gold": json.dumps(self.gold()),
            "gold_rank": self.gold_rank(),
            "output_schema": output_schema(OUTPUT_KEYS[c.format]),
            "binding": self.binding(),
            "surface_mapping": [
                {"semantic_id": k.meaning.semantic_id, "candidate_id": k.candidate_id} for k in c.candidates
            ],
            "applicable_stages": list(self.stages),
            "declared_order": list(self.declared_order),
            "order_control": self.order_control,
            "cached_output": self.cached_output,
            "reference": self.reference_json(),
        }
        row["prompt"] = build_prompt(row)
        return {k: row[k] for k in COLUMNS}

    def with_candidates(self, candidates: list[Candidate], **changes) -> "ExBindRecord":
        """A copy with another candidate order (controls); everything else is kept."""
        return replace(self, case=replace(self.case, candidates=candidates), **changes)


class RowRecord:
    """A record reduced to what an export writes: its dataset row and its records-hash line.

    What a pool worker sends back for an export instead of the whole :class:`ExBindRecord`
    (the case, its candidates and meanings): unpickling those objects was a fifth of the
    build's main-process time. ``to_row()`` and ``canonical_line()`` answer as the record's
    did; ``condition`` and ``group_id`` are read from the row.
    """

    __slots__ = ("row", "line")

    def __init__(self, row: dict, line: bytes):
        self.row, self.line = row, line

    @classmethod
    def of(cls, rec: "ExBindRecord") -> "RowRecord":
        """The row form of ``rec`` (serializing it if it was not yet)."""
        return cls(rec.to_row(), rec.canonical_line())

    def to_row(self) -> dict:
        return self.row

    def canonical_line(self) -> bytes:
        return self.line

    @property
    def condition(self) -> Optional[str]:
        return self.row["condition"]

    @property
    def group_id(self) -> Optional[str]:
        return self.row["group_id"]


def _candidate_payload(c: Candidate) -> dict:
    m = c.meaning
    out = {
        "id": c.candidate_id,
        "type": c.candidate_type,
        "semantic_id": m.semantic_id,
        "entity": m.entity,
        "canonical": m.canonical,
        "text": c.text,
        "attributes": dict(m.attributes) if m.attributes else None,
        "position": list(m.position) if m.position is not None else None,
        "group": m.group,
        "path": list(m.path) if m.path is not None else None,
        "role": m.role,
        "kind": m.kind,
        "row": m.row,
        "column": m.column,
        "bbox": [int(v) for v in c.bbox] if c.bbox is not None else None,
    }
    return {k: v for k, v in out.items() if v is not None}


def _target_payload(t: Target) -> dict:
    out = {
        "semantic_id": t.semantic_id,
        "entity": t.entity,
        "attributes": dict(t.attributes) if t.attributes else None,
        "anchor": t.anchor,
        "anchor_position": list(t.anchor_position) if t.anchor_position is not None else None,
        "relation": t.relation,
        "group": t.group,
        "path": list(t.path) if t.path is not None else None,
        "role": t.role,
        "kind": t.kind,
        "row": t.row,
        "column": t.column,
        "conditions": [list(c) for c in t.conditions] if t.conditions else None,
        "source": t.source,
        "target": t.target,
        "source_semantic_id": t.source_semantic_id,
        "target_semantic_id": t.target_semantic_id,
        "edge_label": t.edge_label,
        "edges": [list(e) for e in t.edges] if t.edges else None,
    }
    return {k: v for k, v in out.items() if v is not None}
