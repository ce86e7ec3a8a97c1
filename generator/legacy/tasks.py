"""Legacy bridge tasks derived from the shipped Graphviz gallery SVGs.

Every task comes from the SVG structure (:func:`generator.legacy.gallery.parse_svg`), never by hand
(docs/specification.md §8; issue 9 item 5):

- object: "the node named X" -> the node element X;
- endpoint: one node is named, and its single edge must be traced to the asked node. For a
  directed edge A->B (A != B): when A has no other edge, "where does the only edge out of
  A point" -> B (role target); when B has no other edge, "where does the only edge into B
  come from" -> A (role source). The asked endpoint is never named;
- edge: "the edge from A to B" -> the edge element A->B, when exactly one edge element joins
  A to B in that direction (where B->A also exists it is a decoy);
- group: "the innermost cluster that contains X" -> the smallest cluster whose box holds X,
  only on graphs with :data:`MIN_CLUSTERS` or more clusters (all of them candidates).

Tasks on a graph whose smallest label renders under 8 px use its enlarged copy
(:data:`generator.legacy.gallery.LARGE_DIR`, :func:`generator.legacy.gallery.task_svg_name`).

Referring names (what an instruction calls a node, :func:`referring_names`): a node's title
(dot name) when its visible label is the title or starts with the title and a space (e.g.
``22342`` labelled ``22342 ksh``), else its visible label; the name must be non-empty, at
most :data:`MAX_NAME_CHARS` characters, free of double quotes, and must not match any other
node (another node's title, label, or a label starting with it and a space), and the node
must paint pixels. Nodes without such a name are never referred to. Undirected graphs
(``A--B`` edges) give object and group tasks only.

Candidates are every node, edge and cluster element of the graph (released in a per-record
seeded shuffle). :func:`select_tasks` gates every derived task (:func:`gate_task`: no
instruction token equal to a candidate id; the converter's eligibility gate with its
task-need, legibility and visibility rules; the release's per-record gates, the visible
oracle included), counts rejections by reason over the whole pool, and draws exactly
:data:`N_TASKS` of the passing tasks with ``random.Random(SEED)``, balanced across task
types where the material allows, round-robin over graphs so many graphs contribute. The
cached outputs come from one real run of the BM25 ranker
(:func:`predictors.legacy_cache.run_bm25`); ``python -m predictors.legacy_cache`` rewrites ``generator/legacy/data/bridge_records.jsonl`` and
``generator/legacy/data/bridge_selection.json`` (the selection report the manifest carries).
"""

from __future__ import annotations

import hashlib
import json
import random
from collections import Counter
from dataclasses import dataclass
from typing import Optional

from exbind_scoring import LEGACY_TASK_TYPES, tokenize
from generator.legacy.converter import Ineligible, LegacyInput, build_record
from generator.legacy.gallery import (
    DATA_DIR,
    GALLERY_DIR,
    SvgGraph,
    boxes_for,
    gallery_names,
    parse_svg_cached,
    task_svg_name,
)

SEED = 20260825
N_TASKS = 300
MAX_NAME_CHARS = 40
MIN_CLUSTERS = 3
TEMPLATES_FILE = DATA_DIR / "templates.json"
BRIDGE_FILE = DATA_DIR / "bridge_records.jsonl"
SELECTION_FILE = DATA_DIR / "bridge_selection.json"
"""The selection report of the shipped file (:func:`select_tasks`: derived, passing, quotas,
selected and rejections by reason), written beside it and copied into the manifest."""
SOURCE_PREFIX = "graphviz-doc examples/graphs"
PREDICTOR = "rank_bm25"


def load_templates() -> dict[str, list[str]]:
    """Instruction templates (data): keys object, endpoint_source, endpoint_target, edge, group."""
    data = json.loads(TEMPLATES_FILE.read_text(encoding="utf-8"))
    return {k: v for k, v in data.items() if not k.startswith("_")}


def referring_names(graph: SvgGraph, boxes: dict) -> dict[str, str]:
    """``{node id: referring name}`` for the nodes an instruction may name (module docstring)."""
    def matches(node, name: str) -> bool:
        return node.title == name or node.text == name or node.text.startswith(name + " ")

    out = {}
    for n in graph.nodes.values():
        if n.text == n.title or n.text.startswith(n.title + " "):
            name = n.title
        else:
            name = n.text
        name = name.strip()
        if not name or len(name) > MAX_NAME_CHARS or '"' in name or boxes.get(n.id) is None:
            continue
        if any(matches(o, name) for o in graph.nodes.values() if o.id != n.id):
            continue
        out[n.id] = name
    return out


@dataclass(frozen=True)
class Task:
    """One eligible task of one gallery SVG.

    Attributes:
        graph: gallery file name (``unix.svg``).
        task_type: object | endpoint | edge | group.
        key: a stable sort key within the graph (element ids and role).
        target: the structured target of the legacy format (node titles).
        gold_id: the element the structure designates.
        names: ``{"x": ...}`` or ``{"a": ..., "b": ...}`` referring names for the template.
        template_key: the template group (``endpoint_source`` / ``endpoint_target`` for endpoints).
    """

    graph: str
    task_type: str
    key: tuple
    target: tuple
    gold_id: str
    names: tuple
    template_key: str

    def target_dict(self) -> dict:
        return {k: (list(v) if isinstance(v, tuple) else v) for k, v in self.target}


def graph_tasks(name: str) -> list[Task]:
    """Every eligible task of one shipped gallery SVG, in a stable order."""
    svg = (GALLERY_DIR / task_svg_name(name)).read_text(encoding="utf-8")
    graph = parse_svg_cached(svg)
    boxes, _ = boxes_for(svg)
    names = referring_names(graph, boxes)
    out: list[Task] = []
    for nid, x in names.items():
        title = graph.nodes[nid].title
        out.append(Task(name, "object", (nid,), (("node", title),), nid, (("x", x),), "object"))
        chain = graph.node_chain.get(nid) or []
        if chain and boxes.get(chain[0]) is not None and len(graph.clusters) >= MIN_CLUSTERS:
            out.append(Task(name, "group", (nid,), (("node", title),), chain[0], (("x", x),), "group"))
    by_title = graph.node_by_title()
    pairs = Counter((e.source, e.target) for e in graph.edges.values() if e.source is not None)
    degree: Counter = Counter()
    for e in graph.edges.values():
        for title in {e.source, e.target} - {None}:
            degree[title] += 1
    for e in graph.edges.values():
        if e.source is None or not e.directed or e.source == e.target or boxes.get(e.id) is None:
            continue
        a_id, b_id = by_title[e.source], by_title[e.target]
        edge = (e.source, e.target)
        # Endpoint: name one node whose only edge this is; the other end is asked.
        if a_id in names and degree[e.source] == 1:
            out.append(Task(name, "endpoint", (e.id, "target"), (("edge", edge), ("endpoint", "target")), b_id,
                            (("a", names[a_id]),), "endpoint_target"))
        if b_id in names and degree[e.target] == 1:
            out.append(Task(name, "endpoint", (e.id, "source"), (("edge", edge), ("endpoint", "source")), a_id,
                            (("b", names[b_id]),), "endpoint_source"))
        if a_id in names and b_id in names and pairs[edge] == 1:
            out.append(Task(name, "edge", (e.id,), (("edge", edge),), e.id,
                            (("a", names[a_id]), ("b", names[b_id])), "edge"))
    return sorted(out, key=lambda t: (t.task_type, t.key))


def all_tasks() -> dict[str, list[Task]]:
    """``{gallery file: its eligible tasks}`` over every shipped SVG."""
    return {name: graph_tasks(name) for name in gallery_names()}


def quotas(available: dict[str, int], total: int = N_TASKS) -> dict[str, int]:
    """Balanced per-type counts summing to ``total``: equal shares, a type short of its share
    gives it all and the rest is re-shared among the others (earlier types take remainders).

    Raises:
        ValueError: fewer than ``total`` tasks available in all.
    """
    if sum(available.values()) < total:
        raise ValueError(f"only {sum(available.values())} eligible tasks, {total} needed")
    out = {t: 0 for t in available}
    left, open_types = total, [t for t in available if available[t] > 0]
    while left and open_types:
        share, extra = divmod(left, len(open_types))
        for i, t in enumerate(list(open_types)):
            give = min(share + (1 if i < extra else 0), available[t] - out[t])
            out[t] += give
            left -= give
        open_types = [t for t in open_types if out[t] < available[t]]
    return out


def _instruction(task: Task, seed: int, templates: dict) -> str:
    """The task's instruction: a template drawn by a per-task RNG (sha256 of seed, graph and
    key; never ``hash()``), so it does not depend on which other tasks were drawn."""
    digest = hashlib.sha256(f"{seed}|{task.graph}|{task.task_type}|{task.key}".encode("utf-8")).digest()
    template = random.Random(int.from_bytes(digest[:8], "big")).choice(templates[task.template_key])
    return template.format(**{k: f'"{v}"' for k, v in task.names})


def _leaks(instruction: str, candidate_ids: list[str]) -> bool:
    """True when an instruction token equals a candidate id (or a token of one)."""
    words = tokenize(instruction)
    return any(words & tokenize(cid) for cid in candidate_ids)


def legacy_dict(task: Task, record_id: str, instruction: str) -> dict:
    """The legacy JSONL object of a task (no ``cached_output`` / ``output_provenance`` yet)."""
    graph = parse_svg_cached((GALLERY_DIR / task_svg_name(task.graph)).read_text(encoding="utf-8"))
    return {
        "id": record_id,
        "source": f"{SOURCE_PREFIX}/{_source_path(task.graph)}",
        "task_type": task.task_type,
        "instruction": instruction,
        "svg_file": f"gallery/{task_svg_name(task.graph)}",
        "candidate_ids": list(graph.order),
        "gold": {"target_id": task.gold_id},
        "target": task.target_dict(),
    }


def _source_path(svg_name: str) -> str:
    """``directed/unix.gv`` (from PROVENANCE.md's table; ``.gv.gz`` where shipped compressed)."""
    stem = svg_name[:-4]
    for line in (GALLERY_DIR / "PROVENANCE.md").read_text(encoding="utf-8").splitlines():
        if line.startswith(f"| `{svg_name}` |"):
            return line.split("`")[3].split("examples/graphs/", 1)[1]
    return f"{stem}.gv"


def to_input(obj: dict, line: int = 0) -> LegacyInput:
    """A legacy dict (possibly without outputs yet) as a :class:`LegacyInput`."""
    from generator.legacy.converter import parse_record

    return parse_record(obj, line, "<tasks>", DATA_DIR, require_output=False)


def gate_task(task: Task, instruction: str) -> Optional[str]:
    """Run every check a drawn task must pass; returns the rejection reason or None.

    Checks, in order: no instruction token equals a candidate id; the converter's
    eligibility gate (:func:`generator.legacy.converter.build_record`: unique gold, task-need,
    legibility and visibility rules, reasons as in :data:`generator.legacy.converter.REASONS`); the
    release's per-record gates (:func:`generator.gates.run_record_gates`, suite ``legacy``,
    the visible oracle included; reason ``gate <name>``).
    """
    from generator.gates import run_record_gates

    obj = legacy_dict(task, "pending", instruction)
    if _leaks(instruction, obj["candidate_ids"]):
        return "instruction names a candidate id"
    try:
        rec = build_record(to_input(obj), render=False)
    except Ineligible as exc:
        return exc.args[0]
    ok, gate = run_record_gates(rec, rec.reference_json(), "legacy")
    return None if ok else f"gate {gate}"


def select_tasks(tasks: Optional[dict[str, list[Task]]] = None, n: int = N_TASKS, seed: int = SEED) -> tuple[list[dict], dict]:
    """Gate every derived task, then draw ``n`` of the passing ones deterministically.

    Every task of :func:`all_tasks` gets its instruction (:func:`_instruction`) and goes
    through :func:`gate_task`; rejections are counted by reason over the whole pool (so the
    counts do not depend on the draw). From the passing tasks, per task type (quota from
    :func:`quotas`; endpoint split into its two roles, the odd one to source): graphs in
    ``Random(seed)``-shuffled order, each graph's tasks shuffled, then taken round-robin
    (one per graph per round).

    Returns:
        ``(dicts, report)``: legacy dicts sorted by (graph, task type, key) with ids
        ``gv_<graph>_<task type>_<k>``, each with its candidates (every element of the
        graph) in a released order shuffled by ``Random(first 8 bytes of
        sha256("<seed>|<id>"))``; ``report`` = ``{"derived": {type: n}, "available": {type:
        n passing}, "quotas", "selected", "endpoint_roles", "graphs": {type: number of
        graphs}, "gate_rejections": {reason: n}}``.

    Raises:
        ValueError: fewer than ``n`` passing tasks, or fewer than a stratum's quota.
    """
    tasks = tasks if tasks is not None else all_tasks()
    rng = random.Random(seed)
    templates = load_templates()
    derived = {t: sum(1 for ts in tasks.values() for x in ts if x.task_type == t) for t in LEGACY_TASK_TYPES}
    rejections: Counter = Counter()
    passing: dict[str, list[tuple[Task, str]]] = {}
    for g in sorted(tasks):
        for task in tasks[g]:
            instruction = _instruction(task, seed, templates)
            reason = gate_task(task, instruction)
            if reason is not None:
                rejections[reason] += 1
                continue
            passing.setdefault(g, []).append((task, instruction))
    available = {t: sum(1 for ps in passing.values() for x, _ in ps if x.task_type == t) for t in LEGACY_TASK_TYPES}
    roles = {k: sum(1 for ps in passing.values() for x, _ in ps if x.template_key == k)
             for k in ("endpoint_source", "endpoint_target")}
    want = quotas(available, n)
    strata: list[tuple[str, int]] = []
    for task_type in LEGACY_TASK_TYPES:
        if task_type == "endpoint":
            half = want[task_type] // 2
            src = min(want[task_type] - half, roles["endpoint_source"])
            tgt = min(want[task_type] - src, roles["endpoint_target"])
            src = want[task_type] - tgt
            strata += [("endpoint_source", src), ("endpoint_target", tgt)]
        else:
            strata.append((task_type, want[task_type]))
    chosen: list[tuple[Task, str]] = []
    for stratum, quota in strata:
        graphs = sorted(g for g, ps in passing.items() if any(x.template_key == stratum for x, _ in ps))
        rng.shuffle(graphs)
        queues = {}
        for g in graphs:
            queue = [p for p in passing[g] if p[0].template_key == stratum]
            rng.shuffle(queue)
            queues[g] = queue
        taken = 0
        while taken < quota and any(queues.values()):
            for g in graphs:
                if taken == quota or not queues[g]:
                    continue
                chosen.append(queues[g].pop(0))
                taken += 1
        if taken < quota:
            raise ValueError(f"only {taken} {stratum} tasks pass the gates, {quota} needed")
    chosen.sort(key=lambda p: (p[0].graph, LEGACY_TASK_TYPES.index(p[0].task_type), p[0].key))
    counters: Counter = Counter()
    dicts = []
    for task, instruction in chosen:
        stem = task.graph[:-4].replace("-", "_")
        counters[(stem, task.task_type)] += 1
        record_id = f"gv_{stem}_{task.task_type}_{counters[(stem, task.task_type)]}"
        obj = legacy_dict(task, record_id, instruction)
        # Released candidate order: a shuffle seeded per record (hashlib, never hash()).
        digest = hashlib.sha256(f"{seed}|{record_id}".encode("utf-8")).digest()
        random.Random(int.from_bytes(digest[:8], "big")).shuffle(obj["candidate_ids"])
        dicts.append(obj)
    report = {
        "derived": derived,
        "available": available,
        "quotas": want,
        "selected": dict(Counter(d["task_type"] for d in dicts)),
        "endpoint_roles": dict(sorted(Counter(d["target"]["endpoint"] for d in dicts
                                              if d["task_type"] == "endpoint").items())),
        "graphs": {t: len({d["svg_file"] for d in dicts if d["task_type"] == t}) for t in LEGACY_TASK_TYPES},
        "gate_rejections": dict(sorted(rejections.items())),
    }
    return dicts, report
