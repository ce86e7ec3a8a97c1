"""HTML-table surface compiler K_table (SPEC §3, §6, §11; paper §3 eq. 2, A.2).

Observation: an ``html_table`` source whose header row names the columns and whose body
cells carry ids ``cell_r{row:02d}_c{col:02d}`` (data rows from 1, columns from 0; the
header row is not a candidate). Every body cell is a ``cell`` candidate; the released
inventory is a seeded shuffle of them, never row-major order.
"""

from __future__ import annotations

import html
import random

from generator.families.table import TableLatent, load_data
from generator.schema import Candidate, Meaning, SurfaceCase, Target


def cell_id(row: int, col: int) -> str:
    """Visible-position cell id (SPEC §11): ``row`` from 1, ``col`` from 0."""
    return f"cell_r{row:02d}_c{col:02d}"


def render_instruction(latent: TableLatent, phrasing: dict) -> str:
    """Fill one instruction template (``{"text", "condition", "join"}`` from table.json)
    with the target column, the entity noun and the conditions in instruction order."""
    conditions = phrasing["join"].join(
        phrasing["condition"].format(column=column, value=value) for column, value in latent.conditions
    )
    return phrasing["text"].format(column=latent.target_column, entity=latent.entity_noun, conditions=conditions)


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
        rng: the case's RNG; draws the instruction template, then shuffles the inventory.

    Returns:
        A :class:`SurfaceCase` with ``rows x columns`` candidates (type ``cell``, text =
        cell content). Each Meaning has semantic id ``<latent>_row_<r>.<column>``, entity
        ``<latent>_row_<r>``, ``row``, ``column`` and ``attributes=(("value", text),)``.
        The Target carries semantic id, row entity, row, column and the conditions.
    """
    instructions = load_data()["instructions"]
    phrasing = instructions[rng.randrange(len(instructions))]
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
    rng.shuffle(candidates)
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
