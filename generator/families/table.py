"""Table latent family: rows of an attribute table and one target cell (SPEC §3, §6; paper §3, §6.4, A.2).

A latent table instance is G = (V, A, Y) with V the row entities, A their column values
and Y the target cell: the row selected by the stated conditions on *other* columns,
intersected with the target column (paper §3: "row/entity -> attribute column -> cell").

Conditions of the targeted suite (SPEC §6; paper §6.4, Tables 4 and 9):

- ``compact``: 4-6 rows, 3-4 columns, one condition whose value is unique in its column;
- ``conjunctive``: 6-9 rows, 4-5 columns, two conditions that each match >= 2 rows alone
  and exactly one row together (CLEVR-style degeneracy rule, SPEC §7);
- ``high_candidate``: 10-16 rows, 4-5 columns (40-80 cells), duplicate values in every
  attribute column, one or two conditions that together select exactly one row;
- broad suite (``condition=None``): compact-like for even slots, conjunctive-like for odd.

Balance (SPEC §6): the table template is ``slot % n_templates`` and the target column
cycles over the template's target-eligible columns with ``slot // n_templates``.
Vocabularies and shapes are data (``generator/data/table.json``).
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Optional

CONDITIONS = ("compact", "conjunctive", "high_candidate")
_DATA_PATH = Path(__file__).resolve().parent.parent / "data" / "table.json"


@lru_cache(maxsize=1)
def load_data() -> dict:
    """The table family data (templates, vocabularies, shapes, instruction templates)."""
    with open(_DATA_PATH, encoding="utf-8") as handle:
        return json.load(handle)


@dataclass(frozen=True)
class TableLatent:
    """One latent table instance.

    Attributes:
        latent_id: the instance id; row entities are ``f"{latent_id}_row_{r}"``.
        template: table template name (e.g. ``"projects"``).
        entity_noun: what a row is called in the instruction (e.g. ``"project"``).
        columns: column names in document order; ``columns[0]`` is the row-name column.
        rows: cell values, ``rows[r - 1][c]`` for data row ``r`` (from 1) and column ``c``.
        target_row: data row of the target cell (1-based).
        target_column: column name of the target cell (never ``columns[0]``).
        conditions: ``((column, value), ...)`` in instruction order; none is on the
            target column or the row-name column.
        shape: construction used: ``"compact"``, ``"conjunctive"`` or ``"high_candidate"``.
    """

    latent_id: str
    template: str
    entity_noun: str
    columns: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    target_row: int
    target_column: str
    conditions: tuple[tuple[str, str], ...]
    shape: str

    def row_entity(self, row: int) -> str:
        """Latent entity id of data row ``row`` (1-based)."""
        return f"{self.latent_id}_row_{row}"

    def value(self, row: int, column: str) -> str:
        """Cell text at data row ``row`` (1-based) and column name ``column``.

        Raises:
            ValueError: unknown column; IndexError: row out of range.
        """
        if row < 1:
            raise IndexError(f"data rows start at 1, got {row}")
        return self.rows[row - 1][self.columns.index(column)]

    def canonical(self) -> dict:
        """JSON-serializable content (no latent id, no surface ids) for latent hashing."""
        return {
            "family": "table",
            "template": self.template,
            "columns": list(self.columns),
            "rows": [list(row) for row in self.rows],
            "target_row": self.target_row,
            "target_column": self.target_column,
            "conditions": [list(pair) for pair in self.conditions],
        }


def matching_rows(latent: TableLatent, conditions: tuple[tuple[str, str], ...]) -> list[int]:
    """Data rows (1-based, ascending) on which every ``(column, value)`` condition holds."""
    index = [(latent.columns.index(column), value) for column, value in conditions]
    return [r for r, row in enumerate(latent.rows, start=1) if all(row[c] == v for c, v in index)]


def _shape_for(condition: Optional[str], slot: int) -> str:
    if condition is None:
        return "compact" if slot % 2 == 0 else "conjunctive"
    if condition not in CONDITIONS:
        raise ValueError(f"unknown table condition {condition!r}; expected one of {CONDITIONS} or None")
    return condition


def _fill_conditions(
    rng: random.Random,
    n_rows: int,
    gold: int,
    cond_columns: list[str],
    vocab: dict[str, list[str]],
) -> tuple[dict[str, list[str]], list[str]]:
    """Values of the condition columns such that exactly row ``gold`` (0-based) matches all
    stated values; with two conditions each value alone also holds on another row."""
    if len(cond_columns) == 1:
        (col,) = cond_columns
        value = rng.choice(vocab[col])
        others = [v for v in vocab[col] if v != value]
        cells = [value if r == gold else rng.choice(others) for r in range(n_rows)]
        return {col: cells}, [value]
    if len(cond_columns) != 2:
        raise ValueError(f"one or two conditions supported, got {len(cond_columns)}")
    c1, c2 = cond_columns
    v1, v2 = rng.choice(vocab[c1]), rng.choice(vocab[c2])
    not_v1 = [v for v in vocab[c1] if v != v1]
    not_v2 = [v for v in vocab[c2] if v != v2]
    partner1, partner2 = rng.sample([r for r in range(n_rows) if r != gold], 2)
    col1: list[str] = []
    col2: list[str] = []
    for r in range(n_rows):
        if r == gold:
            a, b = v1, v2
        elif r == partner1:  # matches condition 1 only
            a, b = v1, rng.choice(not_v2)
        elif r == partner2:  # matches condition 2 only
            a, b = rng.choice(not_v1), v2
        else:
            a = rng.choice(vocab[c1])
            b = rng.choice(not_v2 if a == v1 else vocab[c2])
        col1.append(a)
        col2.append(b)
    return {c1: col1, c2: col2}, [v1, v2]


def sample(rng: random.Random, latent_id: str, condition: Optional[str], slot: int) -> TableLatent:
    """Sample one table latent.

    Args:
        rng: the case's own RNG (the only randomness used).
        latent_id: instance id (prefix of every semantic id).
        condition: ``"compact"``, ``"conjunctive"``, ``"high_candidate"`` or None (broad).
        slot: index of the case in its (suite, condition) cell (>= 0); fixes the template
            (``slot % n_templates``), the target column
            (``eligible[(slot // n_templates) % len(eligible)]``) and, for the broad
            suite, the shape (even: compact-like, odd: conjunctive-like).

    Returns:
        A :class:`TableLatent` whose conditions select exactly one row.

    Raises:
        ValueError: unknown condition or negative slot.
    """
    if slot < 0:
        raise ValueError(f"slot must be >= 0, got {slot}")
    shape = _shape_for(condition, slot)
    data = load_data()
    templates = data["templates"]
    template = templates[slot % len(templates)]
    eligible = template["target_columns"]
    target_column = eligible[(slot // len(templates)) % len(eligible)]
    spec = data["shapes"][shape]
    vocab: dict[str, list[str]] = template["values"]
    name_column = template["columns"][0]

    n_rows = rng.randint(*spec["rows"])
    n_columns = rng.randint(*spec["columns"])
    n_conditions = rng.randint(*spec["conditions"])
    others = [c for c in template["columns"][1:] if c != target_column]
    cond_columns = rng.sample(others, n_conditions)  # instruction order
    rest = [c for c in others if c not in cond_columns]
    n_extra = n_columns - 2 - n_conditions
    if not 0 <= n_extra <= len(rest):
        raise ValueError(f"shape {shape!r}: {n_columns} columns cannot hold {n_conditions} conditions")
    chosen = {name_column, target_column, *cond_columns, *rng.sample(rest, n_extra)}
    columns = tuple(c for c in template["columns"] if c in chosen)

    gold = rng.randrange(n_rows)
    cells: dict[str, list[str]] = {name_column: rng.sample(vocab[name_column], n_rows)}
    cond_cells, cond_values = _fill_conditions(rng, n_rows, gold, cond_columns, vocab)
    cells.update(cond_cells)
    for column in columns:
        if column not in cells:
            cells[column] = [rng.choice(vocab[column]) for _ in range(n_rows)]

    latent = TableLatent(
        latent_id=latent_id,
        template=template["name"],
        entity_noun=template["entity"],
        columns=columns,
        rows=tuple(tuple(cells[c][r] for c in columns) for r in range(n_rows)),
        target_row=gold + 1,
        target_column=target_column,
        conditions=tuple(zip(cond_columns, cond_values)),
        shape=shape,
    )
    if matching_rows(latent, latent.conditions) != [latent.target_row]:  # by construction
        raise RuntimeError(f"{latent_id}: conditions do not select exactly the target row")
    return latent
