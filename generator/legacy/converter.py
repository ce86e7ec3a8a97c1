"""Legacy SVG binding records (JSONL) -> ExBind records plus their scored cached predictions.

The record format is documented in :mod:`legacy` (package docstring) and ``generator/legacy/README.md``.
Two kinds of problems are told apart, and neither is ever silently dropped:

- malformed lines (not JSON, a missing or mistyped field, an unknown task type, a gold id
  that is not among the record's candidate ids, a duplicate record id, a missing structured
  target where the task type needs one) raise :class:`LegacyRecordError`, whose message
  names the file, the line number and the field;
- well-formed records that are not eligible (the eligibility gate: candidates present as
  SVG elements, a unique gold under the latent executor, gold equal to the SVG-derived
  target) are left out of the config and counted by reason in the gate counts
  (:func:`convert_file`), each with its line number and id in ``rejected_records``.

Latent meanings come from the SVG structure only (:func:`generator.legacy.gallery.parse_svg`): a node
element means the node ``"node:<title>"`` (attributes ``name`` = title, ``label`` = its
visible text; ``group`` = innermost cluster containing it); an edge element means
``"edge:<A>-><B>"`` (``"edge:<A>--<B>"`` undirected; ``#2``, ``#3`` ... appended to repeats
of one pair, in document order) with attributes ``source``/``target`` = the endpoint node
entities and ``directed``; a cluster element means ``"cluster:<title>"`` (``group`` = the
innermost cluster strictly containing it). The structured ``target`` field (node titles)
gives the target spec; the gold is then recomputed by
:func:`exbind_scoring.execute_target` and must equal the record's ``gold``.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional, Union

from exbind_scoring import (
    LEGACY_APPLICABLE_STAGES,
    LEGACY_FAMILY,
    LEGACY_SUITE,
    LEGACY_TASK_TYPES,
    execute_target,
    load_reference,
    score_prediction,
)
from generator.records import ExBindRecord
from generator.render import rasterize
from generator.schema import Candidate, Meaning, SurfaceCase, Target
from generator.legacy import visibility
from generator.legacy.gallery import SvgGraph, SvgStructureError, boxes_for, parse_svg_cached
from generator.legacy.limits import MAX_LINE_BYTES, LimitError, check_svg_text, decode_utf8, read_confined

CANDIDATE_TYPE = "svg_element"
SOURCE_TYPE = "svg"

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

# Eligibility gate reasons (gate counts' ``rejected`` keys).
REASONS = (
    "svg is not a dot svg",
    "candidate is not an svg element",
    "target not in svg",
    "instructed edge is undirected",
    "node is in no cluster",
    "target not among candidates",
    "gold not unique",
    "gold differs from the svg-derived target",
    "label renders below 8 px",
    "gold has no visible ink",
    "traced edge has no visible ink",
    "instruction names the asked endpoint",
    "fewer than 3 cluster candidates",
)


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


class Ineligible(Exception):
    """A well-formed record fails the eligibility gate; ``args[0]`` is one of :data:`REASONS`."""


class RenderError(Exception):
    """The record's SVG cannot be rendered; :func:`convert_inputs` reports it as a
    :class:`LegacyRecordError` naming the file, line and field."""


def _spec_of(target: Target) -> dict:
    """The structured target (node titles) of a Target built without one (object, edge)."""
    if target.kind == "object":
        return {"node": target.entity.split(":", 1)[1]}
    return {"edge": [target.source.split(":", 1)[1], target.target.split(":", 1)[1]]}


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


# --------------------------------------------------------------------------- reading


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
    import os
    import stat

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


# --------------------------------------------------------------------------- meanings


@dataclass
class LegacySurfaceCase(SurfaceCase):
    """A :class:`~generator.schema.SurfaceCase` of the legacy family (format ``svg``)."""

    @property
    def family(self) -> str:
        return LEGACY_FAMILY


@dataclass
class LegacyRecord(ExBindRecord):
    """An :class:`~generator.records.ExBindRecord` of suite ``legacy`` (family ``legacy``).

    :meth:`binding` differs: ``attribute`` is the task type (``"source endpoint"`` /
    ``"target endpoint"`` for endpoint tasks) and the target type is ``svg_element``; and
    :meth:`visible_candidates` adds each element's visible text (``text``: the label drawn
    in the picture, ``""`` for unlabelled elements), the text content an SVG inspector
    shows for the element.
    """

    def visible_candidates(self) -> list[dict]:
        rows = super().visible_candidates()
        for row, c in zip(rows, self.case.candidates):
            row["text"] = c.text
        return rows

    def binding(self) -> dict:
        t = self.case.target
        attribute = f"{t.role} endpoint" if t.kind == "endpoint" else t.kind
        return {
            "entity": t.entity,
            "semantic_id": t.semantic_id,
            "attribute": attribute,
            "target_type": CANDIDATE_TYPE,
            "executable_type": "target_id",
        }


def element_entities(graph: SvgGraph) -> dict[str, str]:
    """``{element id: latent entity}`` for every node, edge and cluster of the graph."""
    out: dict[str, str] = {}
    seen: dict[str, int] = {}
    for gid in graph.order:
        kind = graph.kind(gid)
        if kind == "node":
            out[gid] = "node:" + graph.nodes[gid].title
        elif kind == "cluster":
            out[gid] = "cluster:" + graph.clusters[gid].title
        else:
            e = graph.edges[gid]
            base = ("edge:" + e.source + ("->" if e.directed else "--") + e.target) if e.source is not None \
                else "edge:" + e.title
            seen[base] = seen.get(base, 0) + 1
            out[gid] = base if seen[base] == 1 else f"{base}#{seen[base]}"
    return out


def candidate_text(graph: SvgGraph, element_id: str) -> str:
    """``candidate_text`` (docs/specification.md §7) of an element: the text it draws in the picture (a node's,
    cluster's or edge's visible label; ``""`` when it draws none). An edge's ``<title>``
    (``A->B``) is not drawn, so it is not part of it."""
    kind = graph.kind(element_id)
    if kind == "node":
        return graph.nodes[element_id].text
    if kind == "cluster":
        return graph.clusters[element_id].text
    return graph.edges[element_id].text


def _meaning(graph: SvgGraph, entities: dict[str, str], latent_id: str, gid: str) -> Meaning:
    kind = graph.kind(gid)
    entity = entities[gid]
    group = None
    if kind == "node":
        chain = graph.node_chain.get(gid) or []
        group = entities[chain[0]] if chain else None
        n = graph.nodes[gid]
        attributes = (("name", n.title), ("label", n.text))
    elif kind == "cluster":
        chain = graph.cluster_chain.get(gid) or []
        group = entities[chain[0]] if chain else None
        c = graph.clusters[gid]
        attributes = (("name", c.title), ("label", c.text))
    else:
        e = graph.edges[gid]
        attributes = ()
        if e.source is not None:
            attributes = (("source", "node:" + e.source), ("target", "node:" + e.target),
                          ("directed", "true" if e.directed else "false"))
    return Meaning(semantic_id=f"{latent_id}:{entity}", entity=entity, canonical=True, attributes=attributes,
                   group=group, kind=kind)


def _target(inp: LegacyInput, graph: SvgGraph, entities: dict[str, str]) -> Target:
    """The target spec from the structured target (or, for object/edge tasks without one,
    from the gold element's own meaning). Raises :class:`Ineligible`."""
    by_title = graph.node_by_title()
    task, spec = inp.task_type, inp.target
    if spec is None:  # object / edge only (parse_record requires it for the others)
        gold_kind = graph.kind(inp.gold_id) if inp.gold_id in entities else None
        if task == "object" and gold_kind == "node":
            spec = {"node": graph.nodes[inp.gold_id].title}
        elif task == "edge" and gold_kind == "edge" and graph.edges[inp.gold_id].source is not None:
            e = graph.edges[inp.gold_id]
            spec = {"edge": [e.source, e.target]}
        else:
            raise Ineligible("target not in svg")
    sem = lambda entity: f"{inp.id}:{entity}"  # noqa: E731
    if task in ("object", "group"):
        if spec["node"] not in by_title:
            raise Ineligible("target not in svg")
        node_id = by_title[spec["node"]]
        node = "node:" + spec["node"]
        if task == "object":
            return Target(semantic_id=sem(node), entity=node, kind="object", attributes=(("name", spec["node"]),))
        chain = graph.node_chain.get(node_id) or []
        if not chain:
            raise Ineligible("node is in no cluster")
        links = [node] + [entities[c] for c in chain]
        edges = tuple((child, parent, "in") for child, parent in zip(links, links[1:]))
        inner = entities[chain[0]]
        return Target(semantic_id=sem(inner), entity=inner, kind="group", attributes=(("member", node),), edges=edges)
    a, b = spec["edge"]
    if a not in by_title or b not in by_title:
        raise Ineligible("target not in svg")
    joined = [e for e in graph.edges.values() if e.source == a and e.target == b]
    if not joined:
        raise Ineligible("target not in svg")
    if not all(e.directed for e in joined):
        raise Ineligible("instructed edge is undirected")
    src, dst = "node:" + a, "node:" + b
    if task == "endpoint":
        role = spec["endpoint"]
        entity = src if role == "source" else dst
        return Target(semantic_id=sem(entity), entity=entity, kind="endpoint", source=src, target=dst, role=role)
    entity = entities[joined[0].id]
    return Target(semantic_id=sem(entity), entity=entity, kind="edge", source=src, target=dst)


@functools.lru_cache(maxsize=64)
def _image(svg: str) -> tuple[bytes, tuple[int, int]]:
    return rasterize(svg)


def build_record(inp: LegacyInput, render: bool = True) -> LegacyRecord:
    """One legacy record -> :class:`LegacyRecord` (suite ``legacy``, format ``svg``,
    family ``legacy``, condition = task type), after the eligibility gate.

    Args:
        inp: a validated record (:func:`parse_record`).
        render: rasterize the SVG into ``image_png`` (cached per SVG text); False leaves
            ``image_png`` None (the reference and the scores do not depend on it).

    Returns:
        The record; ``cached_output`` = ``{"output", "predictor", "provenance"}`` (the
        provenance as canonical JSON) when the input carries an output, else None.

    Raises:
        Ineligible: with one of :data:`REASONS`.
    """
    try:
        graph = parse_svg_cached(inp.svg)
    except SvgStructureError:
        raise Ineligible("svg is not a dot svg") from None
    entities = element_entities(graph)
    if any(cid not in entities for cid in inp.candidate_ids):
        raise Ineligible("candidate is not an svg element")
    target = _target(inp, graph, entities)
    try:
        boxes, size = boxes_for(inp.svg)
        png, png_size = _image(inp.svg)
    except Exception as exc:  # noqa: BLE001 - cairosvg/PIL raise many types on hostile SVGs
        raise RenderError(f"cannot be rendered ({type(exc).__name__}: {str(exc)[:200]})") from None
    if tuple(png_size) != tuple(size):
        raise ValueError(f"record {inp.id!r}: PNG is {png_size}, stored boxes are for {size}")
    visibility.check_record(inp.svg, inp.task_type, inp.target or _spec_of(target), inp.instruction, graph,
                            boxes, png, inp.gold_id, inp.candidate_ids, Ineligible)
    candidates = [
        Candidate(candidate_id=cid, candidate_type=CANDIDATE_TYPE, text=candidate_text(graph, cid),
                  meaning=_meaning(graph, entities, inp.id, cid),
                  bbox=[float(v) for v in boxes[cid]] if boxes.get(cid) is not None else None)
        for cid in inp.candidate_ids
    ]
    case = LegacySurfaceCase(format="svg", instruction=inp.instruction, source_type=SOURCE_TYPE, source=inp.svg,
                             candidates=candidates, target=target, render_svg=inp.svg, image_size=tuple(size))
    if not any(c.meaning.semantic_id == target.semantic_id for c in candidates):
        raise Ineligible("target not among candidates")
    if not render:
        png = None
    cached = None
    if inp.cached_output is not None:
        cached = {
            "output": inp.cached_output,
            "predictor": inp.output_provenance["predictor"],
            "provenance": json.dumps(inp.output_provenance, sort_keys=True, separators=(",", ":")),
        }
    record = LegacyRecord(case=case, latent_id=inp.id, suite=LEGACY_SUITE, condition=inp.task_type,
                          image_png=png, cached_output=cached,
                          applicable_stages=LEGACY_APPLICABLE_STAGES[inp.task_type])
    ref = load_reference(record.reference_json())
    hits = execute_target(ref)
    if not hits:
        raise Ineligible("target not among candidates")
    if len(hits) > 1:
        raise Ineligible("gold not unique")
    if hits[0] != {"target_id": inp.gold_id} or record.gold() != {"target_id": inp.gold_id}:
        raise Ineligible("gold differs from the svg-derived target")
    return record


def score_cached(record: ExBindRecord) -> dict:
    """The per-case score (:func:`exbind_scoring.score_prediction`) of a record's cached output."""
    return score_prediction(record.cached_output["output"], record.reference_json())


def convert_inputs(inputs: list[LegacyInput], render: bool = True) -> tuple[list[tuple[LegacyRecord, dict]], dict]:
    """Convert validated inputs; ineligible ones are counted, never silently dropped.

    Returns:
        ``(pairs, gate_counts)``: ``pairs`` = ``[(record, score)]`` of the eligible records
        in input order (``score`` from :func:`score_cached`, None when the input has no
        cached output); ``gate_counts`` = ``{"attempted": n, "eligible": k, "rejected":
        {reason: count}, "rejected_records": [{"line", "id", "reason"}]}``.
    """
    pairs: list[tuple[LegacyRecord, dict]] = []
    rejected: dict[str, int] = {}
    listed: list[dict] = []
    for inp in inputs:
        try:
            record = build_record(inp, render=render)
        except RenderError as exc:
            raise LegacyRecordError(inp.path, inp.line, "svg_file" if inp.svg_file else "svg", str(exc)) from None
        except Ineligible as exc:
            reason = exc.args[0]
            rejected[reason] = rejected.get(reason, 0) + 1
            listed.append({"line": inp.line, "id": inp.id, "reason": reason})
            continue
        pairs.append((record, score_cached(record) if record.cached_output is not None else None))
    counts = {"attempted": len(inputs), "eligible": len(pairs), "rejected": dict(sorted(rejected.items())),
              "rejected_records": listed}
    return pairs, counts


def convert_file(path: Union[str, Path], render: bool = True) -> tuple[list[tuple[LegacyRecord, dict]], dict]:
    """Read a legacy JSONL file (:func:`read_legacy_jsonl`) and convert it (:func:`convert_inputs`).

    Raises:
        LegacyRecordError: a malformed line (names the line and the field).
    """
    return convert_inputs(read_legacy_jsonl(path), render=render)
