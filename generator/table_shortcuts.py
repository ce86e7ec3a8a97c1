"""Shortcut programs for table cases: what a reader that skips the requested column scores
(issue 9; docs/specification.md §6-7; paper §4.5 "shortcut validity").

Each program reads only model-visible facts (the conditions the instruction states, the
table's cells and their visible position ids ``cell_rXX_cYY``, the released candidate
order) and picks uniformly among the cells it keeps; its score on a case is the *expected*
exact accuracy, 1/|kept| when gold is kept, else 0. The facts are taken from the reference
payload (cell row, column and text; target conditions), which carries exactly what the
observation and instruction show for them.

Programs (keys of :func:`shortcut_expectations`):

- ``row_residual``: find the row(s) whose cells hold every stated condition value, drop
  the row-name column (``c00``) and the condition columns, pick what is left;
- ``row_non_condition``: the same row(s), drop only the condition columns (a reader who
  found the row and guesses the column: the chance level for the column decision);
- ``row_name_cell``: the row-name cell of the matched row(s);
- ``avoid_condition_column``: any cell outside the condition columns;
- ``first_candidate`` / ``last_candidate``: the first / last candidate in released order;
- ``top_left_cell``: ``cell_r01_c00``;
- ``random``: a uniformly random candidate (1/|C|).
"""

from __future__ import annotations

import re
from collections import defaultdict
from typing import Iterable, Optional

from exbind_scoring import load_reference

PROGRAMS = ("row_residual", "row_non_condition", "row_name_cell", "avoid_condition_column",
            "first_candidate", "last_candidate", "top_left_cell", "random")
_CELL_ID = re.compile(r"^cell_r(\d+)_c(\d+)$")


def _expect(kept: list[str], gold: str) -> float:
    return 1.0 / len(kept) if gold in kept else 0.0


def case_expectations(reference: str | dict) -> dict[str, float]:
    """Expected exact score of every program in :data:`PROGRAMS` on one table case.

    Args:
        reference: a table case's ``reference`` (JSON string or loaded dict).

    Returns:
        ``{program: expectation in [0, 1]}``.

    Raises:
        ValueError: the reference is not a table case, or a candidate id is not of the
            visible position form ``cell_rXX_cYY``.
    """
    ref = load_reference(reference) if isinstance(reference, str) else reference
    if ref.get("family") != "table":
        raise ValueError(f"reference field `family` is {ref.get('family')!r}; shortcut programs need a table case")
    gold = ref["gold"]["cell_id"]
    cells = []
    for c in ref["candidates"]:
        m = _CELL_ID.match(c["id"])
        if m is None:
            raise ValueError(f"candidate id {c['id']!r} is not of the form cell_rXX_cYY")
        cells.append((c["id"], int(m.group(1)), int(m.group(2)), c["column"], (c.get("attributes") or {}).get("value")))
    conditions = [tuple(pair) for pair in ref["target"].get("conditions") or []]
    cond_columns = {col for col, _ in conditions}
    by_row: dict[int, dict[str, str]] = defaultdict(dict)
    for _, r, _, column, value in cells:
        by_row[r][column] = value
    rows = {r for r, values in by_row.items() if all(values.get(col) == v for col, v in conditions)}
    in_rows = [c for c in cells if c[1] in rows]
    order = [c["id"] for c in ref["candidates"]]
    return {
        "row_residual": _expect([c[0] for c in in_rows if c[2] != 0 and c[3] not in cond_columns], gold),
        "row_non_condition": _expect([c[0] for c in in_rows if c[3] not in cond_columns], gold),
        "row_name_cell": _expect([c[0] for c in in_rows if c[2] == 0], gold),
        "avoid_condition_column": _expect([c[0] for c in cells if c[3] not in cond_columns], gold),
        "first_candidate": float(order[0] == gold),
        "last_candidate": float(order[-1] == gold),
        "top_left_cell": float(gold == "cell_r01_c00"),
        "random": 1.0 / len(order),
    }


class ShortcutTotals:
    """Streaming form of :func:`shortcut_expectations`: :meth:`add` each case's
    :func:`case_expectations` (in release order), :meth:`result` once."""

    def __init__(self):
        self.totals: dict[str, list] = {}  # condition -> [cases, {program: sum}]
        self.overall: list = [0, {p: 0 for p in PROGRAMS}]  # summed in release order, like the means

    def add(self, condition: Optional[str], expectations: dict[str, float]) -> None:
        """Add one case (condition None for broad rows)."""
        for entry in (self.totals.setdefault(condition or "none", [0, {p: 0 for p in PROGRAMS}]), self.overall):
            entry[0] += 1
            for p in PROGRAMS:
                entry[1][p] += expectations[p]

    def result(self) -> dict:
        """``{"n", "all", "by_condition"}``; see :func:`shortcut_expectations`."""
        def means(k: int, sums: dict) -> dict[str, Optional[float]]:
            return {p: (sums[p] / k if k else None) for p in PROGRAMS}

        n = self.overall[0]
        return {"n": n, "all": means(n, self.overall[1]),
                "by_condition": {cond: means(k, sums) for cond, (k, sums) in sorted(self.totals.items())}}


def shortcut_expectations(references: Iterable[str | dict]) -> dict:
    """Mean expected exact score of every program, overall and per condition.

    Returns:
        ``{"n": int, "all": {program: mean}, "by_condition": {condition: {program: mean}}}``
        (condition ``"none"`` for broad rows); means are ``None`` when n = 0.
    """
    totals = ShortcutTotals()
    for reference in references:
        ref = load_reference(reference) if isinstance(reference, str) else reference
        totals.add(ref.get("condition"), case_expectations(ref))
    return totals.result()
