"""Release recipes: which latents, seeds and formats make each config (docs/specification.md §6; paper
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
import signal
from collections import Counter
from dataclasses import dataclass
from multiprocessing import get_context
from typing import Optional

from generator import gates, table_shortcuts
from generator.compilers.canvas import compile_canvas
from generator.compilers.dom import compile_dom
from generator.compilers.graph import compile_graph
from generator.compilers.svg import compile_svg
from generator.compilers.table import compile_table
from generator.compilers.tree import compile_tree
from generator.families import graph, hierarchy, relational, table
from generator.records import GENERATOR_VERSION, ExBindRecord
from generator.render import rasterize
from generator.legacy.bridge import bridge_records

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


def _check_scale(scale: int) -> None:
    if isinstance(scale, bool) or not isinstance(scale, int) or scale < 1:
        raise ValueError(f"scale must be a positive integer (K times the paper's counts), got {scale!r}")


def broad_plans(seed: int = BROAD_SEED, scale: int = 1) -> list[LatentPlan]:
    """Broad suite: 250 rows = svg 25, canvas 50, tree 50, dom 25, graph 50, table 50
    (paper Table 4), times ``scale``.

    Even-indexed relational latents compile to svg and canvas, even-indexed hierarchy
    latents to tree and dom: 25 + 25 cross-format groups sharing a latent id (x ``scale``).

    Raises:
        ValueError: ``scale`` is not a positive integer.
    """
    _check_scale(scale)
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
    _check_scale(scale)
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


def _ignore_sigint() -> None:
    """Pool initializer: Ctrl-C reaches the parent only, which stops the pool (no worker tracebacks)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


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
    with get_context("fork").Pool(processes, initializer=_ignore_sigint) as pool:
        results = []
        for result in pool.imap(generate_latent, plans, chunksize=8):
            results.append(result)
            if progress:
                progress.update(1)
        return results


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


RELEASE_VERSION = "2.0.0"  # the default release; variants are labelled "2.0.0+seed.<S>.scale.<K>"


def variant_seeds(seed: int) -> dict:
    """The suite and permutation seeds of the variant release with user seed ``seed``.

    Derived through SHA-256 of ("exbind-variant", seed, purpose), so no user seed reproduces
    the default release's seeds by accident.

    Returns:
        ``{"broad": int, "targeted": int, "permutations": [int, int, int]}`` (each < 2**32).
    """
    def derive(purpose: str) -> int:
        return int.from_bytes(hashlib.sha256(f"exbind-variant|{seed}|{purpose}".encode()).digest()[:4], "big")

    return {"broad": derive("broad"), "targeted": derive("targeted"),
            "permutations": [derive(f"permutation-{k}") for k in range(1, len(PERMUTATION_SEEDS) + 1)]}


def release_label(variant: Optional[dict]) -> str:
    """The version label of a release: :data:`RELEASE_VERSION` for the default release,
    ``"2.0.0+seed.<S>.scale.<K>"`` for a variant (``seed`` ``default`` when only the scale
    changed, ``custom`` when suite seeds were set directly)."""
    if variant is None:
        return RELEASE_VERSION
    seed = variant.get("seed")
    seed = "default" if seed is None and not variant.get("custom_seeds") else ("custom" if seed is None else seed)
    return f"{RELEASE_VERSION}+seed.{seed}.scale.{variant['scale']}"


MAX_DEPTH_MEDIAN_RATIO = 1.2
MIN_SKELETONS_PER_DEPTH = 3


def hierarchy_depth_balance(broad: list[GeneratedLatent], targeted: list[GeneratedLatent]) -> dict:
    """Suite-level check of the hierarchy depth conditions (docs/specification.md §6; issue 9 item 4).

    Passes when the median candidate counts of the targeted depth conditions are within
    :data:`MAX_DEPTH_MEDIAN_RATIO` of each other (max / min), every condition has at least
    :data:`MIN_SKELETONS_PER_DEPTH` distinct skeletons (levels, module count, block paths),
    and the broad dom rows cover the same depths as the tree rows of both suites.

    Returns:
        ``{"passed", "median_candidates": {condition: median}, "median_ratio",
        "skeletons": {condition: count}, "depths": {"tree": [...], "dom": [...]}}``.
    """
    import statistics

    sizes: dict = {}
    skeletons: dict = {}
    for g in targeted:
        if g.plan.family != "hierarchy":
            continue
        case = g.records[0].case
        sizes.setdefault(g.plan.condition, []).append(len(case.candidates))
        blocks = tuple(sorted({c.meaning.path for c in case.candidates if c.meaning.kind == "block"}))
        skeletons.setdefault(g.plan.condition, set()).add((len({c.meaning.group for c in case.candidates}), blocks))
    depths: dict = {"tree": set(), "dom": set()}
    for g in broad + targeted:
        for rec in g.records if g.plan.family == "hierarchy" else ():
            depths[rec.case.format].add(1 + len(rec.case.target.path))
    medians = {c: statistics.median(v) for c, v in sorted(sizes.items())}
    ratio = max(medians.values()) / min(medians.values()) if medians else None
    counts = {c: len(v) for c, v in sorted(skeletons.items())}
    passed = (ratio is not None and ratio <= MAX_DEPTH_MEDIAN_RATIO
              and min(counts.values()) >= MIN_SKELETONS_PER_DEPTH and depths["dom"] == depths["tree"])
    return {"passed": bool(passed), "median_candidates": medians, "median_ratio": round(ratio, 3) if ratio else None,
            "skeletons": counts, "depths": {k: sorted(v) for k, v in depths.items()}}


class SuiteCheckError(RuntimeError):
    """A suite-level check failed, so the build stops and writes nothing.

    ``str()`` is one line naming the failed checks (and, for a variant seed, the fix: another
    ``--seed``); ``checks`` holds the whole check table for inspection.
    """

    def __init__(self, failures: list[str], checks: dict):
        self.failures, self.checks = failures, checks
        super().__init__(f"suite-level checks failed: {', '.join(failures)} (the generated suites do not meet "
                         "the release's composition rules; with --seed, try another seed)")


@dataclass
class Release:
    """Every config's records plus the gate and check tables for the manifest.

    ``seeds`` holds ``broad``, ``targeted`` and ``permutations``; ``variant`` is None for
    the default release (docs/specification.md §6 seeds, paper counts) and otherwise
    ``{"label", "seed", "scale", "custom_seeds", "generator_version"}``.
    """

    configs: dict[str, list[ExBindRecord]]
    gate_tables: dict
    suite_checks: dict
    latent_hashes: dict
    seeds: dict
    legacy_eligibility: dict
    variant: Optional[dict] = None

    @property
    def label(self) -> str:
        """The release version label (:func:`release_label`)."""
        return release_label(self.variant)


def build_release(processes: Optional[int] = None, progress=None, broad_seed: int = BROAD_SEED,
                  targeted_seed: int = TARGETED_SEED, legacy_path: Optional[str] = None,
                  seed: Optional[int] = None, scale: int = 1) -> Release:
    """Generate both suites, run the suite-level checks, and assemble every config.

    Args:
        processes: generation processes (the output does not depend on it).
        progress: an optional tqdm bar updated once per latent.
        broad_seed, targeted_seed: suite seeds (the release uses docs/specification.md §6's defaults).
        legacy_path: a user's legacy JSONL for ``legacy_bridge`` (default: the shipped
            Graphviz-gallery records; format: :mod:`legacy`).
        seed: a variant release's user seed (``build --seed``): replaces the suite and
            permutation seeds with :func:`variant_seeds`.
        scale: ``K`` times the paper's counts in every generated config (``build
            --scale``); ``legacy_bridge`` comes from fixed records and is not scaled.

    Any non-default seed or scale makes a labelled variant (``Release.variant``).

    Raises:
        ValueError: ``scale`` is not a positive integer.
        RuntimeError: when a suite-level check fails (the build stops; nothing is written).
    """
    # Legacy input first: a malformed or hostile user file is refused before any generation.
    legacy_records, legacy_gate = bridge_records(legacy_path)
    _check_scale(scale)
    permutation_seeds = tuple(PERMUTATION_SEEDS)
    if seed is not None:
        derived = variant_seeds(seed)
        broad_seed, targeted_seed, permutation_seeds = derived["broad"], derived["targeted"], tuple(derived["permutations"])
    custom = seed is None and (broad_seed, targeted_seed) != (BROAD_SEED, TARGETED_SEED)
    variant = None
    if seed is not None or scale != 1 or custom:
        variant = {"seed": seed, "scale": scale, "custom_seeds": custom, "generator_version": GENERATOR_VERSION}
        variant["label"] = release_label(variant)
    broad = generate_all(broad_plans(broad_seed, scale), processes, progress)
    targeted = generate_all(targeted_plans(targeted_seed, scale), processes, progress)

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
    configs["targeted_table_permuted"] = [p for r in configs["targeted_table"]
                                          for p in permuted_records(r, permutation_seeds)]
    configs["targeted_table_column_metadata"] = [column_metadata_record(r) for r in configs["targeted_table"]]
    configs["legacy_bridge"] = legacy_records

    # The visible oracle on every config as released, once; the suite figures are sums over it.
    visible = {name: gates.visible_oracle_check(recs) for name, recs in configs.items()}
    visible_by_suite = {"broad": ("broad",), "targeted": ("targeted_table", "targeted_hierarchy")}
    gate_tables = {}
    for suite, gen in (("broad", broad), ("targeted", targeted)):
        rejected: Counter = Counter()
        for g in gen:
            rejected.update(g.rejected)
        attempts = {"attempted": sum(g.attempts for g in gen), "accepted": len(gen), "rejected": dict(rejected)}
        recs = records(gen)
        gate_tables[suite] = gates.gate_table(references(gen), [r.case.instruction for r in recs], attempts)
        gate_tables[suite]["accepted_records"] = len(recs)
        parts = [visible[name] for name in visible_by_suite[suite]]
        n_visible = sum(v["n"] for v in parts)
        gate_tables[suite]["visible_oracle"] = sum(v["exact"] for v in parts) / n_visible if n_visible else None

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
        "visible_oracle": visible,
        "hierarchy_depth_balance": hierarchy_depth_balance(broad, targeted),
        "balance_targeted_table": gates.balance_check([
            table.balance_meta(g.plan.condition, g.plan.slot, g.template, g.records[0].case.target.column)
            for g in targeted if g.plan.family == "table"
        ]),
        "table_shortcuts": {
            "targeted_table": table_shortcuts.shortcut_expectations(
                references([g for g in targeted if g.plan.family == "table"])),
            "broad_table": table_shortcuts.shortcut_expectations(
                references([g for g in broad if g.plan.family == "table"])),
        },
    }
    failures = [name for name, check in (("disjoint_broad_targeted", checks["disjoint_broad_targeted"]),
                                         ("gold_rank_variation/targeted_table",
                                          checks["gold_rank_variation"]["targeted_table"]),
                                         ("gold_rank_variation/targeted_hierarchy",
                                          checks["gold_rank_variation"]["targeted_hierarchy"]),
                                         ("balance_targeted_table", checks["balance_targeted_table"]),
                                         ("hierarchy_depth_balance", checks["hierarchy_depth_balance"]),
                                         *((f"visible_oracle/{name}", check)
                                           for name, check in checks["visible_oracle"].items()))
                if not check["passed"]]
    if failures:
        raise SuiteCheckError(failures, checks)
    hashes = {"broad": sorted(broad_hashes), "targeted": sorted(targeted_hashes)}
    seeds = {"broad": broad_seed, "targeted": targeted_seed, "permutations": list(permutation_seeds)}
    return Release(configs, gate_tables, checks, hashes, seeds, legacy_gate, variant)


__all__ = ["GENERATOR_VERSION", "CONFIGS", "RELEASE_VERSION", "Release", "build_release", "broad_plans",
           "targeted_plans", "generate_latent", "case_rng", "release_label", "variant_seeds"]
