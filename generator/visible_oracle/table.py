"""Visible-oracle solver for the table family (see :mod:`generator.visible_oracle`).

It reads only what the prompt shows: the instruction, the ``html_table`` observation
(header names, body cell texts and their ``id`` attributes, i.e. the visible position ids
``cell_rXX_cYY``) and the candidate ids. The instruction is parsed against the public
instruction templates of ``generator/data/table.json`` by exhaustive enumeration (every
way the template's placeholders can cover the text, every way the conditions can be
split at the template's join), with column names restricted to the table's header. Every
reading whose conditions pick out one or more rows contributes the requested column's
cells of those rows; the solver answers only when exactly one cell results.

A target in the row-name column is phrased without a column name in some templates
("the cell that names the project ..."): the row-name column is the column whose header is
the entity noun, else the first column (the table's visible convention).
"""

from __future__ import annotations

import re
from functools import lru_cache
from html.parser import HTMLParser
from typing import Optional

from generator.families.table import load_data

_PLACEHOLDER = re.compile(r"\{(column|entity|conditions|value)\}")
_MAX_CONDITIONS = 3


class _TableParser(HTMLParser):
    """Header texts and body rows ``[(cell id or None, text), ...]`` of the first table."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.header: list[str] = []
        self.rows: list[list[tuple[Optional[str], str]]] = []
        self._cell: Optional[list] = None  # [tag, id, text parts]
        self._in_row = False

    def handle_starttag(self, tag, attrs):
        if tag == "tr":
            self._in_row = True
            self._row: list[tuple[Optional[str], str]] = []
        elif tag in ("td", "th") and self._in_row:
            self._cell = [tag, dict(attrs).get("id"), []]

    def handle_data(self, data):
        if self._cell is not None:
            self._cell[2].append(data)

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None:
            kind, cid, parts = self._cell
            self._row.append((kind, cid, " ".join("".join(parts).split())))
            self._cell = None
        elif tag == "tr" and self._in_row:
            self._in_row = False
            if self._row and all(kind == "th" for kind, _, _ in self._row) and not self.header:
                self.header = [text for _, _, text in self._row]
            elif self._row:
                self.rows.append([(cid, text) for _, cid, text in self._row])


@lru_cache(maxsize=32)
def parse_table(source: str) -> tuple[tuple[str, ...], tuple[tuple[tuple[Optional[str], str], ...], ...]]:
    """``(header, rows)`` of an ``html_table`` source; rows hold ``(cell id, text)``.

    Immutable and cached for the last 32 sources: a targeted table case and its four
    controls (three permutations, column metadata) show the same table."""
    parser = _TableParser()
    parser.feed(source)
    parser.close()
    return tuple(parser.header), tuple(tuple(row) for row in parser.rows)


@lru_cache(maxsize=None)
def _segments(template: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Literal segments and placeholder names of a template: ``lits[0] ph[0] lits[1] ...``."""
    lits, names, pos = [], [], 0
    for m in _PLACEHOLDER.finditer(template):
        lits.append(template[pos:m.start()])
        names.append(m.group(1))
        pos = m.end()
    lits.append(template[pos:])
    return tuple(lits), tuple(names)


def fill_options(template: str, text: str, allowed: dict[str, tuple[str, ...]]) -> list[dict[str, str]]:
    """Every assignment of the template's placeholders (non-empty strings; those named in
    ``allowed`` restricted to its values) under which the template reads exactly ``text``."""
    lits, names = _segments(template)
    if not text.startswith(lits[0]):
        return []
    out: list[dict[str, str]] = []

    def walk(i: int, pos: int, acc: dict[str, str]) -> None:
        if i == len(names):
            if pos == len(text):
                out.append(dict(acc))
            return
        lit = lits[i + 1]
        last = i + 1 == len(names)
        ends = [len(text) - len(lit)] if last else _occurrences(text, lit, pos + 1) if lit else range(pos + 1, len(text) + 1)
        for end in ends:
            if end <= pos or not text.startswith(lit, end):
                continue
            value = text[pos:end]
            name = names[i]
            if name in allowed and value not in allowed[name]:
                continue
            if name in acc and acc[name] != value:
                continue
            had = name in acc
            acc[name] = value
            walk(i + 1, end + len(lit), acc)
            if not had:
                del acc[name]

    walk(0, len(lits[0]), {})
    return out


def _occurrences(text: str, lit: str, start: int) -> list[int]:
    found, i = [], text.find(lit, start)
    while i >= 0:
        found.append(i)
        i = text.find(lit, i + 1)
    return found


def _splits(text: str, join: str, most: int) -> list[list[str]]:
    """Every way to write ``text`` as ``join.join(parts)`` with 1..``most`` non-empty parts."""
    out = [[text]]
    if most > 1:
        for i in _occurrences(text, join, 1):
            head = text[:i]
            for rest in _splits(text[i + len(join):], join, most - 1):
                if rest and rest[0]:
                    out.append([head, *rest])
    return out


def readings(instruction: str, header: list[str]) -> list[tuple[int, tuple[tuple[int, str], ...]]]:
    """Every reading of ``instruction`` under the public templates: ``(target column
    index, ((condition column index, value), ...))``, column names from ``header``."""
    columns = tuple(header)
    if not columns:
        return []
    data = load_data()
    entities = tuple({t["entity"] for t in data["templates"]} | {columns[0]})
    out = set()
    for phrasing in data["instructions"]:
        for key in ("text", "text_row_name"):
            for fill in fill_options(phrasing[key], instruction, {"column": columns, "entity": entities}):
                if "column" in fill:
                    target = columns.index(fill["column"])
                elif key == "text_row_name":
                    entity = fill.get("entity")
                    target = columns.index(entity) if entity in columns else 0
                else:
                    continue
                for parts in _splits(fill["conditions"], phrasing["join"], _MAX_CONDITIONS):
                    options = [fill_options(phrasing["condition"], part, {"column": columns}) for part in parts]
                    for combo in _product(options):
                        out.add((target, tuple((columns.index(c["column"]), c["value"]) for c in combo)))
    return sorted(out)


def _product(options: list[list[dict]]) -> list[list[dict]]:
    combos: list[list[dict]] = [[]]
    for opts in options:
        combos = [c + [o] for c in combos for o in opts]
    return combos


def solve(view: dict, image) -> dict | None:
    """Answer a table case from the model-visible view only.

    Args:
        view: :func:`generator.visible_oracle.visible_view` output; reads ``instruction``,
            ``source`` (the ``html_table`` observation) and ``candidates`` (ids).
        image: unused (table rows have no image).

    Returns:
        ``{"cell_id": id}`` when every reading of the instruction that matches at least one
        row points at one and the same candidate cell; ``None`` otherwise (also for a
        missing or unparsable source). Never raises.
    """
    try:
        source, instruction = view.get("source"), view.get("instruction")
        if not isinstance(source, str) or not isinstance(instruction, str):
            return None
        header, rows = parse_table(source)
        candidate_ids = {c.get("candidate_id") for c in view.get("candidates") or []}
        answers = set()
        for target, conditions in readings(instruction.strip(), header):
            for row in rows:
                if len(row) != len(header):
                    continue
                if all(row[col][1] == value for col, value in conditions):
                    answers.add(row[target][0])
        if len(answers) != 1:
            return None
        (answer,) = answers
        return {"cell_id": answer} if answer in candidate_ids else None
    except Exception:  # a visible oracle abstains on what it cannot read; it never raises
        return None
