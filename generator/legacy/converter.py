"""Legacy SVG binding records (JSONL) -> ExBind records plus their scored cached predictions.

The record format is documented in :mod:`legacy` (package docstring) and ``generator/legacy/README.md``.
Two kinds of problems are told apart, and neither is ever silently dropped:

- malformed lines (not JSON, a missing or mistyped field, an unknown task type, a gold id
  that is not among the record's candidate ids, a duplicate record id, a missing structured
  target where the task type needs one) raise :class:`LegacyRecordError`, whose message
  names the file, the line number and the field (reading: :mod:`generator.legacy.reader`);
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

Pictures: :func:`convert_inputs` renders the distinct SVGs of a file in a worker pool through
the PNG disk cache (:func:`generator.render.iter_rasterized`) while it builds the records in
input order, so the records do not depend on the number of processes or on the cache.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Union

from exbind_scoring import (
    LEGACY_APPLICABLE_STAGES,
    LEGACY_FAMILY,
    LEGACY_SUITE,
    execute_target,
    load_reference,
    score_prediction,
)
from generator.records import ExBindRecord
from generator.render import iter_rasterized, rasterize
from generator.schema import Candidate, Meaning, SurfaceCase, Target
from generator.legacy import visibility
from generator.legacy.gallery import SvgGraph, SvgStructureError, boxes_for, parse_svg_cached
from generator.legacy.reader import (  # noqa: F401 - re-exported: the converter is the format's API
    RECORD_FIELDS,
    LegacyInput,
    LegacyRecordError,
    parse_record,
    read_legacy_jsonl,
)

CANDIDATE_TYPE = "svg_element"
SOURCE_TYPE = "svg"


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


Rendered = tuple[bytes, tuple[int, int]]
Prepared = tuple[SvgGraph, dict[str, str], Target]


def _prepare(inp: LegacyInput) -> Prepared:
    """The gate steps that need no picture: ``(graph, entities, target)``. Raises :class:`Ineligible`."""
    try:
        graph = parse_svg_cached(inp.svg)
    except SvgStructureError:
        raise Ineligible("svg is not a dot svg") from None
    entities = element_entities(graph)
    if any(cid not in entities for cid in inp.candidate_ids):
        raise Ineligible("candidate is not an svg element")
    return graph, entities, _target(inp, graph, entities)


def build_record(inp: LegacyInput, render: bool = True, image: Optional[Rendered] = None) -> LegacyRecord:
    """One legacy record -> :class:`LegacyRecord` (suite ``legacy``, format ``svg``,
    family ``legacy``, condition = task type), after the eligibility gate.

    Args:
        inp: a validated record (:func:`parse_record`).
        render: keep the rendered PNG as ``image_png``; False leaves ``image_png`` None (the
            reference and the scores do not depend on it; the visibility rules still render).
        image: ``(png, (width, height))`` of ``inp.svg`` when already rendered
            (:func:`generator.render.rasterize_many`); None renders it here (cached per SVG text).

    Returns:
        The record; ``cached_output`` = ``{"output", "predictor", "provenance"}`` (the
        provenance as canonical JSON) when the input carries an output, else None.

    Raises:
        Ineligible: with one of :data:`REASONS`.
        RenderError: the SVG cannot be rendered.
    """
    return _build(inp, render, image, _prepare(inp))[0]


def _build(inp: LegacyInput, render: bool, image: Optional[Rendered], prepared: Prepared) -> tuple[LegacyRecord, str]:
    """:func:`build_record` from the prepared gate steps; also returns the record's reference JSON."""
    graph, entities, target = prepared
    try:
        boxes, size = boxes_for(inp.svg)
        png, png_size = image if image is not None else _image(inp.svg)
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
    reference = record.reference_json()
    hits = execute_target(load_reference(reference))
    if not hits:
        raise Ineligible("target not among candidates")
    if len(hits) > 1:
        raise Ineligible("gold not unique")
    if hits[0] != {"target_id": inp.gold_id} or record.gold() != {"target_id": inp.gold_id}:
        raise Ineligible("gold differs from the svg-derived target")
    return record, reference


def score_cached(record: ExBindRecord) -> dict:
    """The per-case score (:func:`exbind_scoring.score_prediction`) of a record's cached output."""
    return score_prediction(record.cached_output["output"], record.reference_json())


def convert_inputs(inputs: list[LegacyInput], render: bool = True, processes: Optional[int] = None,
                   pool=None) -> tuple[list[tuple[LegacyRecord, dict]], dict]:
    """Convert validated inputs; ineligible ones are counted, never silently dropped.

    The SVGs of the records that pass the picture-free gate steps are rendered, the distinct
    ones in a worker pool (:func:`generator.render.iter_rasterized`, through the PNG disk
    cache), while this process builds the records in input order as their pictures arrive, so
    the result does not depend on ``processes``.

    Args:
        inputs: validated records (:func:`parse_record`, :func:`read_legacy_jsonl`).
        render: keep each PNG as the row image (True for the release).
        processes: rendering processes (default ``min(cpu_count, 4)``; 1 renders in this process).
        pool: a running ``multiprocessing`` pool to render in instead (left open).

    Returns:
        ``(pairs, gate_counts)``: ``pairs`` = ``[(record, score)]`` of the eligible records
        in input order (``score`` from :func:`score_cached`, None when the input has no
        cached output); ``gate_counts`` = ``{"attempted": n, "eligible": k, "rejected":
        {reason: count}, "rejected_records": [{"line", "id", "reason"}]}``.

    Raises:
        LegacyRecordError: an SVG that cannot be rendered (names the line and the field).
        ValueError: ``processes`` is not a positive int or None.
    """
    prepared: list = []
    for inp in inputs:
        try:
            prepared.append(_prepare(inp))
        except Exception as exc:  # noqa: BLE001 - raised again below, in input order
            prepared.append(exc)
    svgs = [inp.svg for inp, prep in zip(inputs, prepared) if not isinstance(prep, Exception)]
    images = iter_rasterized(svgs, processes, skip_errors=True, pool=pool)
    try:
        return _convert_prepared(inputs, prepared, images, render)
    finally:
        images.close()


def _convert_prepared(inputs: list[LegacyInput], prepared: list, images, render: bool):
    """The rest of :func:`convert_inputs`: each record built as soon as its picture is ready."""
    pairs: list[tuple[LegacyRecord, dict]] = []
    rejected: dict[str, int] = {}
    listed: list[dict] = []
    for inp, prep in zip(inputs, prepared):
        try:
            if isinstance(prep, Exception):
                raise prep
            record, reference = _build(inp, render, next(images), prep)
        except RenderError as exc:
            raise LegacyRecordError(inp.path, inp.line, "svg_file" if inp.svg_file else "svg", str(exc)) from None
        except Ineligible as exc:
            reason = exc.args[0]
            rejected[reason] = rejected.get(reason, 0) + 1
            listed.append({"line": inp.line, "id": inp.id, "reason": reason})
            continue
        cached = record.cached_output
        pairs.append((record, score_prediction(cached["output"], reference) if cached is not None else None))
    counts = {"attempted": len(inputs), "eligible": len(pairs), "rejected": dict(sorted(rejected.items())),
              "rejected_records": listed}
    return pairs, counts


def convert_file(path: Union[str, Path], render: bool = True, processes: Optional[int] = None,
                 pool=None) -> tuple[list[tuple[LegacyRecord, dict]], dict]:
    """Read a legacy JSONL file (:func:`read_legacy_jsonl`) and convert it (:func:`convert_inputs`,
    rendering in ``processes`` worker processes).

    Raises:
        LegacyRecordError: a malformed line (names the line and the field).
    """
    return convert_inputs(read_legacy_jsonl(path), render=render, processes=processes, pool=pool)
