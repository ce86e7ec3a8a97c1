"""Reading legacy SVG binding records (JSONL): format validation, one :class:`LegacyInput` per line.

The rules are those of :mod:`generator.legacy.converter` (module docstring) and
``generator/legacy/README.md``; a malformed line raises :class:`LegacyRecordError` naming the
file, the line and the field. The converter re-exports every name here.
"""

from __future__ import annotations

import json
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional, Union

from exbind_scoring import LEGACY_TASK_TYPES
from generator.legacy.limits import MAX_LINE_BYTES, LimitError, check_svg_text, decode_utf8, read_confined

RECORD_FIELDS: dict[str, type] = {
    "id": str,
    "source": str,
    "task_type": str,
    "instruction": str,
    "candidate_ids": list,
    "gold": dict,
    "cached_output": str,
    "output_provenance": dict,
}
"""Required fields and their JSON types; plus exactly one of ``svg`` / ``svg_file`` (strings)
and, optionally, ``target`` (an object; required for endpoint and group tasks)."""


class LegacyRecordError(ValueError):
    """A malformed legacy record; ``str(err)`` is ``"<path>:<line>: field `<field>`: <problem>"``.

    Attributes:
        path: the JSONL file (or ``"<records>"`` for in-memory lines).
        line: 1-based line number.
        field: the offending field (``"<line>"`` when the line is not a JSON object).
        problem: what is wrong and how to fix it.
    """

    def __init__(self, path: str, line: int, field: str, problem: str):
        self.path, self.line, self.field, self.problem = path, line, field, problem
        super().__init__(f"{path}:{line}: field `{field}`: {problem}")

    def __reduce__(self):  # picklable, so a pool worker's refusal reaches the parent intact
        return type(self), (self.path, self.line, self.field, self.problem)



@dataclass
class LegacyInput:
    """One validated legacy record (the JSONL fields, with ``svg`` resolved to its text).

    ``cached_output`` and ``output_provenance`` are None only for records being prepared
    before a predictor has run (:mod:`generator.legacy.tasks`); records read from a file always
    carry both.
    """

    line: int
    id: str
    source: str
    task_type: str
    instruction: str
    svg: str
    candidate_ids: list[str]
    gold_id: str
    target: Optional[dict]
    cached_output: Optional[str]
    output_provenance: Optional[dict]
    svg_file: Optional[str] = None
    path: str = "<records>"



def _type_name(t: type) -> str:
    return {str: "a string", list: "a list", dict: "an object"}[t]


def parse_record(obj: Any, line: int, path: str = "<records>", base_dir: Optional[Path] = None,
                 require_output: bool = True) -> LegacyInput:
    """Validate one decoded JSONL line (see the module docstring for the rules).

    Args:
        obj: the decoded JSON value of the line.
        line: its 1-based line number (for messages).
        path: the file name shown in messages.
        base_dir: folder that ``svg_file`` paths are relative to (default: current dir).
        require_output: False only while preparing records before a predictor ran.

    Raises:
        LegacyRecordError: naming the line and the field.
    """

    def fail(field: str, problem: str):
        raise LegacyRecordError(path, line, field, problem)

    if not isinstance(obj, dict):
        fail("<line>", f"expected a JSON object, got {type(obj).__name__}")
    for name, typ in RECORD_FIELDS.items():
        if name in ("cached_output", "output_provenance") and not require_output and obj.get(name) is None:
            continue
        if name not in obj:
            fail(name, f"missing (required fields: {', '.join(RECORD_FIELDS)}, and svg or svg_file)")
        if not isinstance(obj[name], typ):
            fail(name, f"must be {_type_name(typ)}, got {type(obj[name]).__name__}")
    if not obj["id"].strip():
        fail("id", "must be a non-empty string")
    task = obj["task_type"]
    if task not in LEGACY_TASK_TYPES:
        fail("task_type", f"is {task!r}; expected one of {list(LEGACY_TASK_TYPES)}")
    if not obj["instruction"].strip():
        fail("instruction", "must be a non-empty string")
    has_svg, has_file = "svg" in obj, "svg_file" in obj
    if has_svg == has_file:
        fail("svg", "give exactly one of `svg` (the SVG text) and `svg_file` (a path relative to the JSONL file)")
    svg_file = None
    if has_svg:
        if not isinstance(obj["svg"], str) or not obj["svg"].strip():
            fail("svg", "must be the SVG document text")
        svg = obj["svg"]
    else:
        svg_file = obj["svg_file"]
        if not isinstance(svg_file, str) or not svg_file:
            fail("svg_file", "must be a path string relative to the JSONL file")
        try:
            svg = read_confined(base_dir or Path("."), svg_file)
        except LimitError as exc:
            fail("svg_file", str(exc))
    try:
        check_svg_text(svg)
    except LimitError as exc:
        fail("svg" if has_svg else "svg_file", str(exc))
    ids = obj["candidate_ids"]
    if not ids:
        fail("candidate_ids", "must list at least one element id")
    if not all(isinstance(i, str) and i for i in ids):
        fail("candidate_ids", "must be a list of non-empty element id strings")
    if len(set(ids)) != len(ids):
        dup = next(i for i in ids if ids.count(i) > 1)
        fail("candidate_ids", f"lists {dup!r} twice")
    gold = obj["gold"]
    if list(gold) != ["target_id"] or not isinstance(gold["target_id"], str):
        fail("gold", 'must be {"target_id": "<element id>"}')
    if gold["target_id"] not in ids:
        fail("gold", f"target_id {gold['target_id']!r} is not among candidate_ids")
    target = obj.get("target")
    if target is not None or task in ("endpoint", "group"):
        _check_target(target, task, fail)
    prov = obj.get("output_provenance")
    if prov is not None and not isinstance(prov.get("predictor"), str):
        fail("output_provenance", "must name the predictor: {\"predictor\": \"<name>\", ...}")
    return LegacyInput(line, obj["id"], obj["source"], task, obj["instruction"], svg, list(ids),
                       gold["target_id"], target, obj.get("cached_output"), prov, svg_file, path)


def _check_target(target: Any, task: str, fail) -> None:
    """The structured target (node titles): object/group ``{"node": X}``; edge
    ``{"edge": [A, B]}``; endpoint ``{"edge": [A, B], "endpoint": "source" | "target"}``."""
    shapes = {
        "object": '{"node": "<node title>"}',
        "group": '{"node": "<node title>"}',
        "edge": '{"edge": ["<source title>", "<target title>"]}',
        "endpoint": '{"edge": ["<source title>", "<target title>"], "endpoint": "source" | "target"}',
    }
    if not isinstance(target, dict):
        fail("target", f"a {task} task needs {shapes[task]}")
    if task in ("object", "group"):
        ok = set(target) == {"node"} and isinstance(target["node"], str)
    else:
        edge = target.get("edge")
        ok = isinstance(edge, list) and len(edge) == 2 and all(isinstance(v, str) for v in edge)
        ok = ok and set(target) == ({"edge", "endpoint"} if task == "endpoint" else {"edge"})
        if task == "endpoint":
            ok = ok and target.get("endpoint") in ("source", "target")
    if not ok:
        fail("target", f"must be {shapes[task]} for a {task} task, got {json.dumps(target)[:120]}")


def read_legacy_jsonl(path: Union[str, Path]) -> list[LegacyInput]:
    """Read and validate every line of a legacy JSONL file (blank lines are skipped).

    The file itself must be a regular file; each line must be UTF-8 and at most
    :data:`generator.legacy.limits.MAX_LINE_BYTES` bytes; ``svg`` / ``svg_file`` go through
    :mod:`generator.legacy.limits` (confined paths, regular files, size, element and canvas limits).

    Raises:
        LegacyRecordError: at the first malformed line (bad JSON or UTF-8, missing/mistyped
            field, unknown task type, gold not among candidates, duplicate id, an SVG over a
            limit, ...); line 0 and field ``<file>`` when the file itself cannot be read.
    """
    path = Path(path)
    out: list[LegacyInput] = []
    seen: dict[str, int] = {}
    try:
        info = os.stat(path)
    except OSError as exc:
        raise LegacyRecordError(str(path), 0, "<file>", f"cannot read the file ({exc.strerror or exc})") from None
    if not stat.S_ISREG(info.st_mode):
        raise LegacyRecordError(str(path), 0, "<file>", "is not a regular file; give a JSONL file")
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    with os.fdopen(fd, "rb") as fh:
        for line_no, raw in enumerate(iter(lambda: fh.readline(MAX_LINE_BYTES + 1), b""), start=1):
            if len(raw) > MAX_LINE_BYTES:
                raise LegacyRecordError(str(path), line_no, "<line>",
                                        f"is over the {MAX_LINE_BYTES}-byte line limit; use svg_file for large SVGs")
            try:
                text = decode_utf8(raw, "the line")
            except LimitError as exc:
                raise LegacyRecordError(str(path), line_no, "<line>", str(exc)) from None
            if not text.strip():
                continue
            try:
                obj = json.loads(text)
            except ValueError as exc:
                raise LegacyRecordError(str(path), line_no, "<line>", f"not valid JSON ({exc})") from None
            rec = parse_record(obj, line_no, str(path), path.parent)
            if rec.id in seen:
                raise LegacyRecordError(str(path), line_no, "id", f"{rec.id!r} already used on line {seen[rec.id]}")
            seen[rec.id] = line_no
            out.append(rec)
    if not out:
        raise LegacyRecordError(str(path), 0, "<file>", "holds no legacy records; give at least one JSON line "
                                "(format: generator/legacy/README.md)")
    return out
