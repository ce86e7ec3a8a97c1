"""Table latent family: rows of an attribute table and one target cell (docs/specification.md §3, §6; paper §3, §6.4, A.2).

A latent table instance is G = (V, A, Y) with V the row entities, A their column values
and Y the target cell: the row selected by the stated conditions on *other* columns,
intersected with the target column (paper §3: "row/entity -> attribute column -> cell").

Conditions of the targeted suite (docs/specification.md §6; paper §5, §6.4, Tables 4 and 9); shapes are
data (``generator/data/table.json``, ``shapes``):

- ``compact``: one condition on a small table (3 rows x 4 columns = 12 cells); no column
  holds a value twice, so the condition value is unique by construction;
- ``conjunctive``: two conditions, each matching two rows alone and exactly one row
  together (CLEVR-style degeneracy, docs/specification.md §7), on 3 rows x 5 columns (15 cells); the only
  repeated values are the two condition values (the conjunction's decoy rows);
- ``high_candidate``: one condition on a large duplicate-value table (10-16 rows x 5
  columns, 50-80 cells): every attribute column repeats values, the condition value is
  unique in its column, and the gold cell's value occurs in another row of its column;
- broad suite (``condition=None``): compact for even slots, conjunctive for odd.

The requested column must be read (docs/specification.md §6): every column, the row-name column
included, can be the target, and after removing the condition column(s) at least two
cells remain in the target row (compact and high_candidate: 3-4, conjunctive: 3).

Balance (docs/specification.md §6): the table template is ``slot % n_templates``; the target column cycles
over *all* the template's columns (row-name column first) with ``slot // n_templates``;
the instruction phrasing cycles with the slot (:func:`phrasing_index`), and so does the
gold position (:func:`rank_stratum`). Compact and conjunctive inventories are at most 12
and 15 cells, and the compiler keeps their gold rank within the first ``max_gold_rank``
(12) candidates, so rank 13+ occurs only in high_candidate (paper §6.4: ranks 13+ are
sparse).
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Optional

CONDITIONS = ("compact", "conjunctive", "high_candidate")
RANK_STRATA = 40  # gold-position strata (quantile bands of the allowed ranks)
# Cases per shape in the release (composition/release.py: 40 per targeted condition; the 50
# broad table slots alternate compact/conjunctive, 25 each): the gold-position cycle length.
RANK_CYCLE = {"targeted": 40, "broad": 25}
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
        entity_noun: what a row is called in the instruction (e.g. ``"project"``); it is
            also the header of the row-name column ``columns[0]``.
        columns: column names in document order; ``columns[0]`` is the row-name column.
        rows: cell values, ``rows[r - 1][c]`` for data row ``r`` (from 1) and column ``c``.
        target_row: data row of the target cell (1-based).
        target_column: column name of the target cell (any column, ``columns[0]`` included).
        conditions: ``((column, value), ...)`` in instruction order; none is on the
            target column or the row-name column.
        shape: construction used: ``"compact"``, ``"conjunctive"`` or ``"high_candidate"``.
        phrasing: index of the instruction template in ``table.json`` (a phrasing hint,
            not latent content: excluded from :meth:`canonical`).
        rank_stratum: gold-position stratum in ``[0, RANK_STRATA)`` (:func:`rank_stratum`);
            an ordering hint for the compiler, excluded from :meth:`canonical`.
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
    phrasing: int = 0
    rank_stratum: int = 0

    @property
    def targets_row_name(self) -> bool:
        """True when the target is the row-name column (``columns[0]``)."""
        return self.target_column == self.columns[0]

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


def phrasing_index(condition: Optional[str], slot: int) -> int:
    """Instruction template of a slot: cycles within each condition (balanced to +-1).

    Broad slots alternate compact/conjunctive, so the phrasing advances every second slot
    there, offset by half the cycle for conjunctive slots (``(slot // 2 + 3 (slot % 2)) % n``):
    each shape gets every phrasing and the 50 broad slots stay balanced to +-1.
    """
    n = len(load_data()["instructions"])
    return (slot // 2 + (n // 2) * (slot % 2)) % n if condition is None else slot % n


def rank_stratum(condition: Optional[str], slot: int) -> int:
    """Gold-position stratum of a slot, in ``[0, RANK_STRATA)``.

    ``k`` is the slot's index within its shape (``slot`` targeted, ``slot // 2`` broad,
    whose slots alternate compact/conjunctive) and ``m`` the cases per shape
    (:data:`RANK_CYCLE`: 40 targeted, 25 broad); the stratum is
    ``floor((j + 1/2) * RANK_STRATA / m)`` with ``j = (7 k) % m`` (band centres). 7 is coprime to 40 and 25, so the cases of one shape
    spread over the strata evenly (a targeted condition uses every stratum once),
    decorrelated from the template (``slot % 5``) and target-column cycles. The compiler
    places gold at a uniform position inside the stratum's share of the allowed ranks, so
    gold ranks are balanced within each condition and position programs (first/last
    candidate) stay at chance.
    """
    m = RANK_CYCLE["broad" if condition is None else "targeted"]
    k = slot // 2 if condition is None else slot
    return (2 * ((7 * k) % m) + 1) * RANK_STRATA // (2 * m)


def target_column_for(template: dict, slot: int) -> str:
    """Target column of a slot: the template's columns (row-name column first) in turn."""
    n_templates = len(load_data()["templates"])
    columns = template["columns"]
    return columns[(slot // n_templates) % len(columns)]


def balance_meta(condition: Optional[str], slot: int, template: str, target_column: str) -> dict:
    """What :func:`generator.gates.balance_check` counts for one generated case: condition,
    table template, target column, whether that is the template's row-name column, and the
    slot's phrasing index (:func:`phrasing_index`).

    Raises:
        KeyError: ``template`` is not a template name of ``table.json``.
    """
    columns = {t["name"]: t["columns"] for t in load_data()["templates"]}[template]
    return {"condition": condition, "template": template, "column": target_column,
            "row_name": target_column == columns[0], "phrasing": phrasing_index(condition, slot)}


def _shape_for(condition: Optional[str], slot: int) -> str:
    if condition is None:
        return "compact" if slot % 2 == 0 else "conjunctive"
    if condition not in CONDITIONS:
        raise ValueError(f"unknown table condition {condition!r}; expected one of {CONDITIONS} or None")
    return condition


def _distinct(rng: random.Random, pool: list[str], n: int, exclude=()) -> list[str]:
    """``n`` distinct values of ``pool`` (minus ``exclude``) in random order."""
    return rng.sample([v for v in pool if v not in exclude], n)


def _condition_cells(rng: random.Random, shape: str, n_rows: int, gold: int, cond_columns: list[str],
                     vocab: dict[str, list[str]]) -> tuple[dict[str, list[str]], list[str]]:
    """Values of the condition columns such that exactly row ``gold`` (0-based) matches all
    stated values.

    compact: all values of the column distinct; high_candidate: the stated value only on
    the gold row, the other rows repeat the column's other values; conjunctive (3 rows):
    the gold row, one row matching only the first condition, one only the second.
    """
    if shape == "conjunctive":
        c1, c2 = cond_columns
        (v1, w1), (v2, w2) = _distinct(rng, vocab[c1], 2), _distinct(rng, vocab[c2], 2)
        partner1, partner2 = [r for r in range(n_rows) if r != gold]
        if rng.random() < 0.5:
            partner1, partner2 = partner2, partner1
        col1 = [v1 if r in (gold, partner1) else w1 for r in range(n_rows)]
        col2 = [v2 if r in (gold, partner2) else w2 for r in range(n_rows)]
        return {c1: col1, c2: col2}, [v1, v2]
    (col,) = cond_columns
    if shape == "compact":
        cells = _distinct(rng, vocab[col], n_rows)
        return {col: cells}, [cells[gold]]
    value = rng.choice(vocab[col])
    others = [v for v in vocab[col] if v != value]
    cells = [value if r == gold else rng.choice(others) for r in range(n_rows)]
    return {col: cells}, [value]


def sample(rng: random.Random, latent_id: str, condition: Optional[str], slot: int) -> TableLatent:
    """Sample one table latent.

    Args:
        rng: the case's own RNG (the only randomness used).
        latent_id: instance id (prefix of every semantic id).
        condition: ``"compact"``, ``"conjunctive"``, ``"high_candidate"`` or None (broad).
        slot: index of the case in its (suite, condition) cell (>= 0); fixes the template
            (``slot % n_templates``), the target column (:func:`target_column_for`), the
            phrasing (:func:`phrasing_index`) and, for the broad suite, the shape (even:
            compact, odd: conjunctive).

    Returns:
        A :class:`TableLatent` whose conditions select exactly one row.

    Raises:
        ValueError: unknown condition, negative slot, or a shape in ``table.json`` that
            cannot hold its conditions plus two more cells in the target row.
    """
    if slot < 0:
        raise ValueError(f"slot must be >= 0, got {slot}")
    shape = _shape_for(condition, slot)
    data = load_data()
    templates = data["templates"]
    template = templates[slot % len(templates)]
    target_column = target_column_for(template, slot)
    spec = data["shapes"][shape]
    vocab: dict[str, list[str]] = template["values"]
    name_column = template["columns"][0]

    n_rows = rng.randint(*spec["rows"])
    n_columns = rng.randint(*spec["columns"])
    n_conditions = spec["conditions"]
    if n_columns - n_conditions < 2:
        raise ValueError(f"shape {shape!r}: {n_columns} columns leave fewer than 2 cells after "
                         f"{n_conditions} condition column(s); widen `columns` in table.json")
    attributes = [c for c in template["columns"][1:] if c != target_column]
    cond_columns = rng.sample(attributes, n_conditions)  # instruction order
    rest = [c for c in attributes if c not in cond_columns]
    fixed = {name_column, target_column, *cond_columns}
    n_extra = n_columns - len(fixed)
    if not 0 <= n_extra <= len(rest):
        raise ValueError(f"shape {shape!r}: {n_columns} columns cannot hold {n_conditions} conditions")
    chosen = fixed | set(rng.sample(rest, n_extra))
    columns = tuple(c for c in template["columns"] if c in chosen)

    gold = rng.randrange(n_rows)
    cells: dict[str, list[str]] = {name_column: rng.sample(vocab[name_column], n_rows)}
    cond_cells, cond_values = _condition_cells(rng, shape, n_rows, gold, cond_columns, vocab)
    cells.update(cond_cells)
    for column in columns:
        if column in cells:
            continue
        if shape == "high_candidate":
            cells[column] = [rng.choice(vocab[column]) for _ in range(n_rows)]
        else:
            cells[column] = _distinct(rng, vocab[column], n_rows)
    if shape == "high_candidate" and target_column != name_column:
        values = cells[target_column]
        if values.count(values[gold]) == 1:  # the gold value is duplicated in its column
            other = rng.choice([r for r in range(n_rows) if r != gold])
            values[other] = values[gold]

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
        phrasing=phrasing_index(condition, slot),
        rank_stratum=rank_stratum(condition, slot),
    )
    if matching_rows(latent, latent.conditions) != [latent.target_row]:  # by construction
        raise RuntimeError(f"{latent_id}: conditions do not select exactly the target row")
    return latent
