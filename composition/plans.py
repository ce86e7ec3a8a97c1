"""Latent plans and their generation: which latents, seeds and formats make each config
(docs/specification.md §6; paper Tables 4, 6, 9, 12; Algorithm 1), with per-record gates and
regeneration, and the controls derived from a targeted table case.

Every latent is generated from its own ``random.Random`` seeded from
(suite seed, latent id, attempt, purpose) through SHA-256, so any case can be regenerated
alone, in any process, and the release is byte-identical whatever the process count.
"""

from __future__ import annotations

import gc
import hashlib
import json
import os
import random
import signal
from collections import Counter
from contextlib import contextmanager
from dataclasses import dataclass, field
from multiprocessing import get_context
from typing import Optional

from composition.summary import latent_facts
from exbind_scoring import load_reference
from generator import gates, table_shortcuts
from generator.compilers.canvas import compile_canvas
from generator.compilers.dom import compile_dom
from generator.compilers.graph import compile_graph
from generator.compilers.svg import compile_svg
from generator.compilers.table import compile_table
from generator.compilers.tree import compile_tree
from generator.families import graph, hierarchy, relational, table
from generator.records import ExBindRecord, RowRecord
from generator.render import rasterize

BROAD_SEED = 20260823
TARGETED_SEED = 20260824
PERMUTATION_SEEDS = (2026082401, 2026082402, 2026082403)
MAX_ATTEMPTS = 50

TABLE_CONDITIONS = ("compact", "conjunctive", "high_candidate")
HIERARCHY_CONDITIONS = ("depth_2", "depth_3", "depth_4")
CASES_PER_TARGETED_CONDITION = 40
BROAD_PER_FAMILY = 50
BROAD_PAIRED_PER_FAMILY = 25

SAMPLERS = {"relational": relational.sample, "hierarchy": hierarchy.sample, "graph": graph.sample,
            "table": table.sample}
COMPILERS = {"svg": compile_svg, "canvas": compile_canvas, "tree": compile_tree, "dom": compile_dom,
             "graph": compile_graph, "table": compile_table}



@dataclass(frozen=True)
class LatentPlan:
    """One latent instance to generate and the surfaces to compile it into."""

    suite: str
    family: str
    latent_id: str
    condition: Optional[str]
    slot: int
    formats: tuple[str, ...]
    seed: int

    @property
    def grouped(self) -> bool:
        return len(self.formats) > 1


def case_rng(seed: int, latent_id: str, attempt: int, purpose: str) -> random.Random:
    """The RNG of one (suite seed, latent, attempt, purpose); SHA-256 based, never ``hash()``."""
    digest = hashlib.sha256(f"{seed}|{latent_id}|{attempt}|{purpose}".encode()).digest()
    return random.Random(int.from_bytes(digest[:8], "big"))


MAX_SCALE = 1000
"""Largest ``scale``: 490,000 latents (about 1.4M rows of the generated configs). The plan
list is held in memory (about 110 MB at this scale); rows are streamed."""


def check_scale(scale: int) -> None:
    """Raise ``ValueError`` (``scale must be an integer from 1 to MAX_SCALE ...``) unless
    ``scale`` is an int in ``1..``:data:`MAX_SCALE`."""
    if isinstance(scale, bool) or not isinstance(scale, int) or not 1 <= scale <= MAX_SCALE:
        raise ValueError(f"scale must be an integer from 1 to {MAX_SCALE} (K times the paper's counts), got {scale!r}")


def broad_plans(seed: int = BROAD_SEED, scale: int = 1) -> list[LatentPlan]:
    """Broad suite: 250 rows = svg 25, canvas 50, tree 50, dom 25, graph 50, table 50
    (paper Table 4), times ``scale``.

    Even-indexed relational latents compile to svg and canvas, even-indexed hierarchy
    latents to tree and dom: 25 + 25 cross-format groups sharing a latent id (x ``scale``).

    Raises:
        ValueError: ``scale`` is not a positive integer.
    """
    check_scale(scale)
    plans = []
    for i in range(BROAD_PER_FAMILY * scale):
        paired = i % 2 == 0
        plans.append(LatentPlan("broad", "relational", f"broad_relational_{i:04d}", None, i,
                                ("svg", "canvas") if paired else ("canvas",), seed))
        plans.append(LatentPlan("broad", "hierarchy", f"broad_hierarchy_{i:04d}", None, i,
                                ("tree", "dom") if paired else ("tree",), seed))
        plans.append(LatentPlan("broad", "graph", f"broad_graph_{i:04d}", None, i, ("graph",), seed))
        plans.append(LatentPlan("broad", "table", f"broad_table_{i:04d}", None, i, ("table",), seed))
    order = {"relational": 0, "hierarchy": 1, "graph": 2, "table": 3}
    return sorted(plans, key=lambda p: (order[p.family], p.slot))


def targeted_plans(seed: int = TARGETED_SEED, scale: int = 1) -> list[LatentPlan]:
    """Targeted suite: table 3 conditions x 40 and tree-only hierarchy depth 2/3/4 x 40
    (paper Tables 6, 9), times ``scale``. Template and target column follow the slot, so
    every multiple of 40 keeps the balance rule (docs/specification.md §6).

    Raises:
        ValueError: ``scale`` is not a positive integer.
    """
    check_scale(scale)
    plans = []
    for cond in TABLE_CONDITIONS:
        for slot in range(CASES_PER_TARGETED_CONDITION * scale):
            plans.append(LatentPlan("targeted", "table", f"targeted_table_{cond}_{slot:04d}", cond, slot,
                                    ("table",), seed))
    for cond in HIERARCHY_CONDITIONS:
        for slot in range(CASES_PER_TARGETED_CONDITION * scale):
            plans.append(LatentPlan("targeted", "hierarchy", f"targeted_hierarchy_{cond}_{slot:04d}", cond, slot,
                                    ("tree",), seed))
    return plans


@dataclass
class GeneratedLatent:
    """Accepted records of one plan plus what it took to get them."""

    plan: LatentPlan
    records: list[ExBindRecord]
    references: list[str]
    latent_hash: str
    template: Optional[str]
    attempts: int
    rejected: dict
    # Filled by generate_unit (in the worker): derived control rows, visible-oracle counts per
    # config, one gates.gate_table_case per record, table shortcut expectations per record.
    derived: dict = field(default_factory=dict)
    visible: dict = field(default_factory=dict)
    gate_cases: list = field(default_factory=list)
    shortcuts: list = field(default_factory=list)
    facts: dict = field(default_factory=dict)  # composition.summary.latent_facts of the records


def generate_latent(plan: LatentPlan) -> GeneratedLatent:
    """Sample, compile, render and gate one plan, regenerating on rejection.

    Raises:
        RuntimeError: when no attempt within :data:`MAX_ATTEMPTS` passes every gate.
    """
    rejected: Counter = Counter()
    for attempt in range(MAX_ATTEMPTS):
        latent = SAMPLERS[plan.family](case_rng(plan.seed, plan.latent_id, attempt, "latent"),
                                       plan.latent_id, plan.condition, plan.slot)
        records, references, failed = [], [], None
        for fmt in plan.formats:
            case = COMPILERS[fmt](latent, case_rng(plan.seed, plan.latent_id, attempt, fmt))
            png = None
            if case.render_svg is not None:
                png, size = rasterize(case.render_svg)
                if case.image_size is None:
                    case.image_size = size
            rec = ExBindRecord(case=case, latent_id=plan.latent_id, suite=plan.suite, condition=plan.condition,
                               group_id=plan.latent_id if plan.grouped else None, image_png=png)
            reference = rec.reference_json()
            ok, gate_name = gates.run_record_gates(rec, reference, plan.suite)
            if not ok:
                failed = gate_name
                break
            records.append(rec)
            references.append(reference)
        if failed is None:
            canonical = json.dumps(latent.canonical(), sort_keys=True, separators=(",", ":"))
            return GeneratedLatent(plan, records, references, hashlib.sha256(canonical.encode()).hexdigest(),
                                   getattr(latent, "template", None), attempt + 1, dict(rejected))
        rejected[failed] += 1
    raise RuntimeError(f"{plan.latent_id}: no accepted record in {MAX_ATTEMPTS} attempts; rejections {dict(rejected)}")


# Cyclic-GC thresholds while a build allocates (generation 0, 1, 2): collections every 20,000
# net allocations instead of 700, and full collections rarely; see :func:`build_gc`.
BUILD_GC_THRESHOLDS = (20_000, 50, 1_000)
_build_gc_depth = 0


@contextmanager
def build_gc():
    """Garbage-collector settings for a build, restored on exit (re-entrant).

    On entry every object alive so far (the imported modules, the plans) is moved to the
    collector's permanent generation (``gc.freeze``), so no collection walks them again and
    forked workers do not write to those pages (fewer copy-on-write faults), and the
    thresholds become :data:`BUILD_GC_THRESHOLDS`. A build allocates millions of short-lived
    objects (records, rows, unpickled results); with the default thresholds about a tenth of
    its CPU time went to collections that found little garbage. Reference cycles are still
    collected, only less often. On exit the previous thresholds come back and the frozen
    objects are unfrozen (``gc.unfreeze``).
    """
    global _build_gc_depth
    _build_gc_depth += 1
    if _build_gc_depth > 1:
        try:
            yield
        finally:
            _build_gc_depth -= 1
        return
    previous = gc.get_threshold()
    gc.freeze()
    gc.set_threshold(*BUILD_GC_THRESHOLDS)
    try:
        yield
    finally:
        _build_gc_depth -= 1
        gc.set_threshold(*previous)
        gc.unfreeze()


def _worker_signals() -> None:
    """Pool initializer: Ctrl-C reaches the parent only, which stops the pool; SIGTERM (how
    the pool stops its workers) and SIGHUP end a worker quietly, whatever handler the parent
    had installed when it forked (no worker tracebacks)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGHUP, signal.SIG_DFL)


def default_processes(processes: Optional[int] = None) -> int:
    """``processes`` or, when None, the CPU count capped at 4."""
    return processes or min(os.cpu_count() or 1, 4)


def imap_ordered(fn, items: list, processes: Optional[int] = None, chunksize: int = 8):
    """``fn`` over ``items`` in order: serially for one process, else in a fork pool.

    Items are submitted in windows of ``16 * processes * chunksize`` so results never pile
    up faster than the caller consumes them (bounded memory at any release size).
    """
    processes = default_processes(processes)
    if processes <= 1 or len(items) <= 1:
        yield from map(fn, items)
        return
    pool = worker_pool(processes)
    try:
        yield from imap_windows(pool, fn, items, processes, chunksize)
    finally:
        stop_pool(pool)


def worker_pool(processes: int):
    """A fork pool of ``processes`` workers that ignore Ctrl-C (the parent stops the pool
    with :func:`stop_pool`)."""
    return get_context("fork").Pool(processes, initializer=_worker_signals)


def stop_pool(pool, timeout: float = 10.0) -> None:
    """``pool.terminate()``, bounded in time: terminate runs in a helper thread and, if it
    has not returned after ``timeout`` seconds, every child process of this process is
    killed and the helper thread abandoned (a daemon). Terminating a worker while it writes a
    large result to the pool's pipe can leave the pool's result thread waiting forever for
    the rest of that message, and ``terminate`` waits for that thread (seen once in about 14
    interrupted builds)."""
    import multiprocessing
    import threading

    stopper = threading.Thread(target=pool.terminate, name="exbind-stop-pool", daemon=True)
    stopper.start()
    stopper.join(timeout)
    if stopper.is_alive():
        for child in multiprocessing.active_children():
            child.kill()


def imap_windows(pool, fn, items: list, processes: int, chunksize: int = 8):
    """``pool.imap(fn, items)`` in order, submitted in windows of ``16 * processes * chunksize``
    items so results never pile up faster than the caller consumes them (at most two windows
    are outstanding). The first window is submitted at once, before the returned iterator is
    read; each next one when the caller has taken half of the current one, so the workers do
    not wait for the caller at a window's end."""
    window = 16 * processes * chunksize
    first = pool.imap(fn, items[:window], chunksize=chunksize)
    return _windows(pool, fn, items, window, first, chunksize)


def _windows(pool, fn, items: list, window: int, current, chunksize: int):
    lo = window  # where the next window starts
    while current is not None:
        following = None
        for taken, result in enumerate(current, start=1):
            if following is None and taken >= window // 2 and lo < len(items):
                following = pool.imap(fn, items[lo:lo + window], chunksize=chunksize)
            yield result
        current, lo = following, lo + window


def generate_all(plans: list[LatentPlan], processes: Optional[int] = None, progress=None) -> list[GeneratedLatent]:
    """Generate every plan (:func:`generate_latent`); results are in plan order whatever ``processes`` is."""
    results = []
    for result in imap_ordered(generate_latent, plans, processes):
        results.append(result)
        if progress:
            progress.update(1)
    return results


def generate_unit(plan: LatentPlan, permutation_seeds: tuple[int, ...] = PERMUTATION_SEEDS,
                  rows_only: bool = False) -> GeneratedLatent:
    """One latent as the release needs it, computed where it is generated (a pool worker).

    :func:`generate_latent`, then the controls of a targeted table case
    (``targeted_table_permuted``, ``targeted_table_column_metadata``) with the visible
    oracle re-run on them, one :func:`generator.gates.gate_table_case` per record, the
    table shortcut expectations, the facts the suite checks read
    (:func:`composition.summary.latent_facts`), and every row serialized once (``to_row``
    and ``canonical_line`` keep them). With ``rows_only`` every record is then reduced to a
    :class:`generator.records.RowRecord` (what an export writes; far cheaper to send). The
    latent's own rows are the rows the per-record visible-oracle gate accepted, so they
    count as exact; the controls differ from them and are measured. A pure function of
    ``plan`` (and the permutation seeds): any process, any order, the same result.
    """
    g = generate_latent(plan)
    g.gate_cases = [gates.gate_table_case(ref, rec.case.instruction) for rec, ref in zip(g.records, g.references)]
    if plan.family == "table":
        g.shortcuts = [table_shortcuts.case_expectations(ref) for ref in g.references]
    if plan.suite == "targeted" and plan.family == "table":
        rec = g.records[0]
        g.derived = {"targeted_table_permuted": permuted_records(rec, permutation_seeds),
                     "targeted_table_column_metadata": [column_metadata_record(rec)]}
    for config, _ in own_configs(g):
        g.visible.setdefault(config, {"n": 0, "exact": 0, "abstained": 0})
        g.visible[config]["n"] += 1
        g.visible[config]["exact"] += 1
    for config, records in g.derived.items():
        g.visible[config] = gates.visible_oracle_check(records)
    g.facts = latent_facts(g)
    for rec in [*g.records, *(r for records in g.derived.values() for r in records)]:
        rec.canonical_line()  # the row and its records-hash line, built here rather than in the writer
    if rows_only:
        g.records = [RowRecord.of(rec) for rec in g.records]
        g.derived = {config: [RowRecord.of(rec) for rec in records] for config, records in g.derived.items()}
    # A latent's references are never parsed again: empty the parsed-reference cache so a
    # worker's memory stays flat however many latents it generates (issue 13 item 4).
    load_reference.cache_clear()
    return g


def own_configs(g: GeneratedLatent):
    """``(config, record)`` for a latent's own records (not the derived controls)."""
    for rec in g.records:
        if g.plan.suite == "broad":
            yield "broad", rec
            if rec.group_id is not None:
                yield "paired", rec
        else:
            yield f"targeted_{g.plan.family}", rec


def config_records(g: GeneratedLatent):
    """``(config, record)`` for every row a latent contributes, in release order."""
    yield from own_configs(g)
    for config, records in g.derived.items():
        for rec in records:
            yield config, rec


def _legacy_unit(rec: ExBindRecord, rows_only: bool = False) -> tuple:
    """A legacy record with its row and records-hash line serialized (reduced to a
    :class:`generator.records.RowRecord` with ``rows_only``) and its visible-oracle count
    (pool worker)."""
    check = gates.visible_oracle_check([rec])
    rec.canonical_line()
    return (RowRecord.of(rec) if rows_only else rec), check


def permuted_records(rec: ExBindRecord, seeds: tuple[int, ...] = PERMUTATION_SEEDS) -> list[ExBindRecord]:
    """The candidate-order control (paper A.5, Table 12): the same case under three seeded
    permutations; case id ``<case_id>__perm<k>`` with the parent case id recorded."""
    original = [c.candidate_id for c in rec.case.candidates]
    gold_rank = rec.gold_rank()
    out = []
    for k, seed in enumerate(seeds, start=1):
        cands = list(rec.case.candidates)
        case_rng(seed, rec.id, 0, "permutation").shuffle(cands)
        child = rec.with_candidates(cands, case_id=f"{rec.id}__perm{k}", parent_case_id=rec.id)
        child.order_control = {
            "permutation_seed": seed,
            "original_order": original,
            "permuted_order": [c.candidate_id for c in cands],
            "original_gold_rank": gold_rank,
            "permuted_gold_rank": child.gold_rank(),
        }
        out.append(child)
    return out


def column_metadata_record(rec: ExBindRecord) -> ExBindRecord:
    """The column-metadata ablation (paper §6.4, Table 9): an explicit ``column`` on every
    candidate row; observation, instruction, order, gold and case id unchanged."""
    return rec.with_candidates(list(rec.case.candidates), show_column=True)
