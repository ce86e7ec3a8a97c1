"""Release recipes: which latents, seeds and formats make each config (SPEC §6; paper
Tables 4, 6, 9, 12; Algorithm 1), with per-record gates and regeneration.

Every latent is generated from its own ``random.Random`` seeded from
(suite seed, latent id, attempt, purpose) through SHA-256, so any case can be regenerated
alone, in any process, and the release is byte-identical whatever the process count.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
from collections import Counter
from dataclasses import dataclass
from multiprocessing import get_context
from typing import Optional

from generator import gates
from generator.compilers.canvas import compile_canvas
from generator.compilers.dom import compile_dom
from generator.compilers.graph import compile_graph
from generator.compilers.svg import compile_svg
from generator.compilers.table import compile_table
from generator.compilers.tree import compile_tree
from generator.families import graph, hierarchy, relational, table
from generator.records import GENERATOR_VERSION, ExBindRecord
from generator.render import rasterize
from legacy.bridge import bridge_records

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

# Configs in export order (the controls come from targeted_table).
CONFIGS = ("broad", "paired", "targeted_table", "targeted_hierarchy", "targeted_table_permuted",
           "targeted_table_column_metadata", "legacy_bridge")


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


def broad_plans(seed: int = BROAD_SEED) -> list[LatentPlan]:
    """Broad suite: 250 rows = svg 25, canvas 50, tree 50, dom 25, graph 50, table 50.

    Even-indexed relational latents compile to svg and canvas, even-indexed hierarchy
    latents to tree and dom: 25 + 25 cross-format groups sharing a latent id.
    """
    plans = []
    for i in range(BROAD_PER_FAMILY):
        paired = i % 2 == 0
        plans.append(LatentPlan("broad", "relational", f"broad_relational_{i:04d}", None, i,
                                ("svg", "canvas") if paired else ("canvas",), seed))
        plans.append(LatentPlan("broad", "hierarchy", f"broad_hierarchy_{i:04d}", None, i,
                                ("tree", "dom") if paired else ("tree",), seed))
        plans.append(LatentPlan("broad", "graph", f"broad_graph_{i:04d}", None, i, ("graph",), seed))
        plans.append(LatentPlan("broad", "table", f"broad_table_{i:04d}", None, i, ("table",), seed))
    order = {"relational": 0, "hierarchy": 1, "graph": 2, "table": 3}
    return sorted(plans, key=lambda p: (order[p.family], p.slot))


def targeted_plans(seed: int = TARGETED_SEED) -> list[LatentPlan]:
    """Targeted suite: table 3 conditions x 40 and tree-only hierarchy depth 2/3/4 x 40."""
    plans = []
    for cond in TABLE_CONDITIONS:
        for slot in range(CASES_PER_TARGETED_CONDITION):
            plans.append(LatentPlan("targeted", "table", f"targeted_table_{cond}_{slot:04d}", cond, slot,
                                    ("table",), seed))
    for cond in HIERARCHY_CONDITIONS:
        for slot in range(CASES_PER_TARGETED_CONDITION):
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


def generate_all(plans: list[LatentPlan], processes: Optional[int] = None, progress=None) -> list[GeneratedLatent]:
    """Generate every plan; results are in plan order whatever ``processes`` is."""
    processes = processes or min(os.cpu_count() or 1, 4)
    if processes <= 1:
        results = []
        for plan in plans:
            results.append(generate_latent(plan))
            if progress:
                progress.update(1)
        return results
    with get_context("fork").Pool(processes) as pool:
        results = []
        for result in pool.imap(generate_latent, plans, chunksize=8):
            results.append(result)
            if progress:
                progress.update(1)
        return results


def permuted_records(rec: ExBindRecord) -> list[ExBindRecord]:
    """The candidate-order control (paper A.5, Table 12): the same case under three seeded
    permutations; case id ``<case_id>__perm<k>`` with the parent case id recorded."""
    original = [c.candidate_id for c in rec.case.candidates]
    gold_rank = rec.gold_rank()
    out = []
    for k, seed in enumerate(PERMUTATION_SEEDS, start=1):
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


@dataclass
class Release:
    """Every config's records plus the gate and check tables for the manifest."""

    configs: dict[str, list[ExBindRecord]]
    gate_tables: dict
    suite_checks: dict
    latent_hashes: dict
    seeds: dict
    legacy_eligibility: dict


def build_release(processes: Optional[int] = None, progress=None, broad_seed: int = BROAD_SEED,
                  targeted_seed: int = TARGETED_SEED, legacy_path: Optional[str] = None) -> Release:
    """Generate both suites, run the suite-level checks, and assemble every config.

    Args:
        processes: generation processes (the output does not depend on it).
        progress: an optional tqdm bar updated once per latent.
        broad_seed, targeted_seed: suite seeds (the release uses SPEC §6's defaults).
        legacy_path: a user's legacy JSONL for ``legacy_bridge`` (default: the shipped
            Graphviz-gallery records; format: :mod:`legacy`).

    Raises:
        RuntimeError: when a suite-level check fails (the build stops; nothing is written).
    """
    # Legacy input first: a malformed or hostile user file is refused before any generation.
    legacy_records, legacy_gate = bridge_records(legacy_path)
    broad = generate_all(broad_plans(broad_seed), processes, progress)
    targeted = generate_all(targeted_plans(targeted_seed), processes, progress)

    def records(gen, pred=lambda g: True):
        return [r for g in gen if pred(g) for r in g.records]

    def references(gen):
        return [ref for g in gen for ref in g.references]

    configs = {
        "broad": records(broad),
        "paired": [r for r in records(broad) if r.group_id is not None],
        "targeted_table": records(targeted, lambda g: g.plan.family == "table"),
        "targeted_hierarchy": records(targeted, lambda g: g.plan.family == "hierarchy"),
    }
    configs["targeted_table_permuted"] = [p for r in configs["targeted_table"] for p in permuted_records(r)]
    configs["targeted_table_column_metadata"] = [column_metadata_record(r) for r in configs["targeted_table"]]
    configs["legacy_bridge"] = legacy_records

    gate_tables = {}
    for suite, gen in (("broad", broad), ("targeted", targeted)):
        rejected: Counter = Counter()
        for g in gen:
            rejected.update(g.rejected)
        attempts = {"attempted": sum(g.attempts for g in gen), "accepted": len(gen), "rejected": dict(rejected)}
        recs = records(gen)
        gate_tables[suite] = gates.gate_table(references(gen), [r.case.instruction for r in recs], attempts)
        gate_tables[suite]["accepted_records"] = len(recs)

    broad_hashes = {g.latent_hash for g in broad}
    targeted_hashes = {g.latent_hash for g in targeted}
    checks = {
        "disjoint_broad_targeted": {"passed": not (broad_hashes & targeted_hashes),
                                    "overlap": len(broad_hashes & targeted_hashes)},
        "gold_rank_variation": {
            "targeted_table": gates.gold_rank_variation(references([g for g in targeted if g.plan.family == "table"])),
            "targeted_hierarchy": gates.gold_rank_variation(
                references([g for g in targeted if g.plan.family == "hierarchy"])),
        },
        "balance_targeted_table": gates.balance_check([
            {"condition": g.plan.condition, "template": g.template, "column": g.records[0].case.target.column}
            for g in targeted if g.plan.family == "table"
        ]),
    }
    failures = [name for name, check in (("disjoint_broad_targeted", checks["disjoint_broad_targeted"]),
                                         ("gold_rank_variation/targeted_table",
                                          checks["gold_rank_variation"]["targeted_table"]),
                                         ("gold_rank_variation/targeted_hierarchy",
                                          checks["gold_rank_variation"]["targeted_hierarchy"]),
                                         ("balance_targeted_table", checks["balance_targeted_table"]))
                if not check["passed"]]
    if failures:
        raise RuntimeError(f"suite-level checks failed: {failures}: {json.dumps(checks, indent=1)}")
    hashes = {"broad": sorted(broad_hashes), "targeted": sorted(targeted_hashes)}
    return Release(configs, gate_tables, checks, hashes, {"broad": broad_seed, "targeted": targeted_seed},
                   legacy_gate)


__all__ = ["GENERATOR_VERSION", "CONFIGS", "Release", "build_release", "broad_plans", "targeted_plans",
           "generate_latent", "case_rng"]
