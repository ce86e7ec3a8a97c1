"""HTML-table surface compiler K_table (docs/specification.md §3, §6, §11; paper §3 eq. 2, A.2).

Observation: an ``html_table`` source whose header row names the columns and whose body
cells carry ids ``cell_r{row:02d}_c{col:02d}`` (data rows from 1, columns from 0; the
header row is not a candidate). Every body cell is a ``cell`` candidate; the released
inventory is a seeded shuffle of them, never row-major order.
"""

from __future__ import annotations

import html
import random
from typing import Optional

from generator.families.table import RANK_STRATA, TableLatent, load_data
from generator.schema import Candidate, Meaning, SurfaceCase, Target


def cell_id(row: int, col: int) -> str:
    """Visible-position cell id (docs/specification.md §11): ``row`` from 1, ``col`` from 0."""
    return f"cell_r{row:02d}_c{col:02d}"


def render_instruction(latent: TableLatent, phrasing: dict) -> str:
    """Fill one instruction template (``{"text", "text_row_name", "condition", "join"}``
    from table.json) with the target column, the entity noun and the conditions in
    instruction order; ``text_row_name`` serves targets in the row-name column."""
    conditions = phrasing["join"].join(
        phrasing["condition"].format(column=column, value=value) for column, value in latent.conditions
    )
    text = phrasing["text_row_name"] if latent.targets_row_name else phrasing["text"]
    return text.format(column=latent.target_column, entity=latent.entity_noun, conditions=conditions)


def release_order(candidates: list[Candidate], gold_id: str, max_gold_rank: Optional[int], stratum: int,
                  rng: random.Random) -> list[Candidate]:
    """The released candidate order: the other candidates in a seeded shuffle, gold at a
    stratified position.

    Gold may take the first ``span = min(|C|, max_gold_rank)`` positions (all of them when
    ``max_gold_rank`` is None); stratum ``s`` of :data:`RANK_STRATA` covers the quantiles
    ``[s, s + 1) / RANK_STRATA`` of that span, and gold's 0-based position is
    ``floor((s + u) * span / RANK_STRATA)`` with ``u`` uniform in [0, 1). So a condition whose
    40 cases use every stratum once has balanced gold ranks, rank 13+ occurs only where
    ``max_gold_rank`` is None (docs/specification.md §6; paper §6.4), and first/last-candidate programs score
    chance.

    Raises:
        ValueError: ``stratum`` outside ``[0, RANK_STRATA)`` or ``gold_id`` not a candidate.
    """
    if not 0 <= stratum < RANK_STRATA:
        raise ValueError(f"rank stratum must be in [0, {RANK_STRATA}), got {stratum}")
    golds = [c for c in candidates if c.candidate_id == gold_id]
    if len(golds) != 1:
        raise ValueError(f"gold id {gold_id!r} is not exactly one candidate")
    order = [c for c in candidates if c.candidate_id != gold_id]
    rng.shuffle(order)
    span = len(candidates) if max_gold_rank is None else min(len(candidates), max_gold_rank)
    order.insert(int((stratum + rng.random()) * span / RANK_STRATA), golds[0])
    return order


def render_source(latent: TableLatent) -> str:
    """The ``html_table`` observation: one ``<tr>`` per line, ids on every body ``<td>``."""
    head = "".join(f"<th>{html.escape(c)}</th>" for c in latent.columns)
    lines = ["<table>", f"<thead><tr>{head}</tr></thead>", "<tbody>"]
    for r, row in enumerate(latent.rows, start=1):
        tds = "".join(f'<td id="{cell_id(r, c)}">{html.escape(v)}</td>' for c, v in enumerate(row))
        lines.append(f"<tr>{tds}</tr>")
    lines += ["</tbody>", "</table>"]
    return "\n".join(lines)


def compile_table(latent: TableLatent, rng: random.Random) -> SurfaceCase:
    """Compile a table latent into its HTML-table surface case.

    Args:
        latent: a :class:`~generator.families.table.TableLatent`.
        rng: the case's RNG; shuffles the inventory (the phrasing is the latent's, so it
            is balanced by slot).

    Returns:
        A :class:`SurfaceCase` with ``rows x columns`` candidates (type ``cell``, text =
        cell content) in released order (:func:`release_order`, gold stratified by the
        latent's ``rank_stratum``). Each Meaning has semantic id ``<latent>_row_<r>.<column>``, entity
        ``<latent>_row_<r>``, ``row``, ``column`` and ``attributes=(("value", text),)``.
        The Target carries semantic id, row entity, row, column and the conditions.
    """
    data = load_data()
    phrasing = data["instructions"][latent.phrasing]
    target_col = latent.columns.index(latent.target_column)
    candidates = [
        Candidate(
            candidate_id=cell_id(r, c),
            candidate_type="cell",
            text=value,
            meaning=Meaning(
                semantic_id=f"{latent.row_entity(r)}.{column}",
                entity=latent.row_entity(r),
                canonical=True,
                attributes=(("value", value),),
                row=r,
                column=column,
            ),
        )
        for r, row in enumerate(latent.rows, start=1)
        for c, (column, value) in enumerate(zip(latent.columns, row))
    ]
    candidates = release_order(candidates, cell_id(latent.target_row, target_col),
                               data["shapes"][latent.shape]["max_gold_rank"], latent.rank_stratum, rng)
    target = Target(
        semantic_id=f"{latent.row_entity(latent.target_row)}.{latent.target_column}",
        entity=latent.row_entity(latent.target_row),
        row=latent.target_row,
        column=latent.target_column,
        conditions=latent.conditions,
    )
    return SurfaceCase(
        format="table",
        instruction=render_instruction(latent, phrasing),
        source_type="html_table",
        source=render_source(latent),
        candidates=candidates,
        target=target,
    )
