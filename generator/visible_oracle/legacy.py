"""Visible-oracle solver for the legacy family (see :mod:`generator.visible_oracle`).

What a legacy row shows a model (the released image prompt): the instruction, the PNG, and
one candidate row per element: ``candidate_id`` (dot's element id, ``nodeN`` / ``edgeN`` /
``clustN``, so the element kind is visible), ``bbox`` (painted pixel box) and ``text`` (the
label the element draws in the picture, as an SVG inspector shows it; ``""`` for unlabelled
elements). The SVG source is not shown, so this solver never reads it; it reads the text and
geometry of the candidate rows (the text stands in for reading the labels in the PNG, which
the legibility gate keeps at 8 px or more; there is no OCR here). Rules, each a sound
deduction from one fact of dot's drawing (an edge's path starts and ends on its endpoints'
outlines, so an edge's painted box meets both endpoints' painted boxes) plus uniqueness:

- object ``{x}``: the one node whose text is ``x`` or starts with ``x`` and a space;
- endpoint (``the only edge into/out of {n}``): node ``n``; the one edge whose box meets
  ``n``'s box is the edge to trace; the one *other* node whose box meets that edge's box is
  the answer;
- edge ``{a} -> {b}``: the one edge whose box meets both ``a``'s and ``b``'s boxes;
- group ``{x}``: among the clusters whose box contains ``x``'s box, the one of least area.

Anything not unique (a second edge passing by, two clusters of the same box, an instruction
that matches no template) returns None, and the gate rejects the case. The image is not
needed by these rules (boxes are read from the rows), so ``image`` is accepted and unused.
"""

from __future__ import annotations

import functools
import json
import re
from typing import Optional

from generator.legacy.gallery import DATA_DIR

TEMPLATES_FILE = DATA_DIR / "templates.json"
_KINDS = (("node", "node"), ("edge", "edge"), ("clust", "cluster"))


@functools.lru_cache(maxsize=1)
def _patterns() -> list[tuple[str, re.Pattern]]:
    """``[(template key, regex)]``: each template with its ``{x}``/``{a}``/``{b}`` slots as
    quoted named groups."""
    data = json.loads(TEMPLATES_FILE.read_text(encoding="utf-8"))
    out = []
    for key, templates in data.items():
        if key.startswith("_"):
            continue
        for t in templates:
            rx = re.escape(t)
            for slot in ("x", "a", "b"):
                rx = rx.replace(re.escape("{" + slot + "}"), f'"(?P<{slot}>[^"]+)"')
            out.append((key, re.compile(rx + r"\Z")))
    return out


def _kind(candidate_id: str) -> Optional[str]:
    m = re.fullmatch(r"([a-z]+)\d+", candidate_id)
    return dict(_KINDS).get(m.group(1)) if m else None


def _meets(a: list, b: list, pad: int = 1) -> bool:
    """Two ``[x, y, w, h]`` boxes (exclusive ends) overlap or touch within ``pad`` px."""
    return (a[0] <= b[0] + b[2] + pad and b[0] <= a[0] + a[2] + pad
            and a[1] <= b[1] + b[3] + pad and b[1] <= a[1] + a[3] + pad)


def _contains(outer: list, inner: list) -> bool:
    return (outer[0] <= inner[0] and outer[1] <= inner[1]
            and inner[0] + inner[2] <= outer[0] + outer[2] and inner[1] + inner[3] <= outer[1] + outer[3])


def _one(items: list) -> Optional[dict]:
    return items[0] if len(items) == 1 else None


def solve(view: dict, image) -> dict | None:
    """Answer a legacy row from its model-visible view only (rules in the module docstring).

    Args:
        view: :func:`generator.visible_oracle.visible_view` of the row (instruction and
            candidate rows with ``candidate_id``, ``bbox``, ``text``).
        image: the PNG (unused; see the module docstring).

    Returns:
        ``{"target_id": <candidate id>}``, or None when the visible inputs do not single out
        one answer. Never raises on well-formed rows.
    """
    rows = [c for c in view["candidates"] if c.get("bbox")]
    by_kind: dict[str, list[dict]] = {"node": [], "edge": [], "cluster": []}
    for c in rows:
        kind = _kind(c["candidate_id"])
        if kind is not None:
            by_kind[kind].append(c)
    match = next(((key, m) for key, rx in _patterns() if (m := rx.match(view["instruction"]))), None)
    if match is None:
        return None
    key, m = match

    def node(name: str) -> Optional[dict]:
        return _one([c for c in by_kind["node"]
                     if (c.get("text") or "") == name or (c.get("text") or "").startswith(name + " ")])

    def answer(c: Optional[dict]) -> Optional[dict]:
        return {"target_id": c["candidate_id"]} if c is not None else None

    if key == "object":
        return answer(node(m.group("x")))
    if key == "group":
        x = node(m.group("x"))
        if x is None:
            return None
        around = sorted((c["bbox"][2] * c["bbox"][3], c["candidate_id"], c) for c in by_kind["cluster"]
                        if _contains(c["bbox"], x["bbox"]))
        if not around or (len(around) > 1 and around[0][0] == around[1][0]):
            return None
        return answer(around[0][2])
    if key == "edge":
        a, b = node(m.group("a")), node(m.group("b"))
        if a is None or b is None:
            return None
        return answer(_one([e for e in by_kind["edge"] if _meets(e["bbox"], a["bbox"]) and _meets(e["bbox"], b["bbox"])]))
    if key in ("endpoint_source", "endpoint_target"):
        named = node(m.group("b" if key == "endpoint_source" else "a"))
        if named is None:
            return None
        edge = _one([e for e in by_kind["edge"] if _meets(e["bbox"], named["bbox"])])
        if edge is None:
            return None
        return answer(_one([n for n in by_kind["node"] if n is not named and _meets(n["bbox"], edge["bbox"])]))
    return None
