"""Suite-level checks on streamed summaries (docs/specification.md §6-7; issue 13 item 4).

A release build never holds its rows to check them: every accepted latent adds a few
numbers to a :class:`ReleaseSummary` as its rows are written, and :meth:`ReleaseSummary.finish`
computes the gate tables and the suite checks (disjointness, gold-rank variation, balance,
hierarchy depth balance, visible oracle, table shortcuts) once at the end. Memory grows only
with the latent hashes kept for the disjointness check (32 bytes per latent) and the
per-case candidate counts of the hierarchy medians; each figure is summed in release order,
so it equals the one computed over a list of every row.
"""

from __future__ import annotations

import statistics
from collections import Counter
from typing import Iterable, Optional

from generator import gates, table_shortcuts
from generator.families import table

MAX_DEPTH_MEDIAN_RATIO = 1.2
MIN_SKELETONS_PER_DEPTH = 3

# Which suite's gate table a config's visible-oracle figure adds to.
VISIBLE_BY_SUITE = {"broad": ("broad",), "targeted": ("targeted_table", "targeted_hierarchy")}


class DepthBalance:
    """Streaming form of the hierarchy depth check (docs/specification.md §6; issue 9 item 4).

    Passes when the median candidate counts of the targeted depth conditions are within
    :data:`MAX_DEPTH_MEDIAN_RATIO` of each other (max / min), every condition has at least
    :data:`MIN_SKELETONS_PER_DEPTH` distinct skeletons (levels, module count, block paths),
    and, when broad rows were built, the broad dom rows cover the same depths as the tree
    rows of both suites.
    """

    def __init__(self):
        self.sizes: dict = {}
        self.skeletons: dict = {}
        self.depths: dict = {"tree": set(), "dom": set()}
        self.broad_built = False

    def add(self, plan, facts: dict) -> None:
        """Add one generated latent: its plan and :func:`latent_facts`."""
        if plan.family != "hierarchy":
            return
        hierarchy = facts["hierarchy"]
        if plan.suite == "broad":
            self.broad_built = True
        else:
            self.sizes.setdefault(plan.condition, []).append(hierarchy["candidates"])
            self.skeletons.setdefault(plan.condition, set()).add(hierarchy["skeleton"])
        for fmt, depth in hierarchy["depths"]:
            self.depths[fmt].add(depth)

    def result(self) -> dict:
        """``{"passed", "median_candidates": {condition: median}, "median_ratio",
        "skeletons": {condition: count}, "depths": {"tree": [...], "dom": [...]}}``."""
        medians = {c: statistics.median(v) for c, v in sorted(self.sizes.items())}
        ratio = max(medians.values()) / min(medians.values()) if medians else None
        counts = {c: len(v) for c, v in sorted(self.skeletons.items())}
        depths_ok = self.depths["dom"] == self.depths["tree"] if self.broad_built else True
        passed = (ratio is not None and ratio <= MAX_DEPTH_MEDIAN_RATIO
                  and min(counts.values()) >= MIN_SKELETONS_PER_DEPTH and depths_ok)
        return {"passed": bool(passed), "median_candidates": medians,
                "median_ratio": round(ratio, 3) if ratio else None, "skeletons": counts,
                "depths": {k: sorted(v) for k, v in self.depths.items()}}


def latent_facts(g) -> dict:
    """What the suite checks read from a latent's own records, taken where the records are
    (:func:`composition.plans.generate_unit`, in a pool worker), so that the rows can travel
    to the writer without their cases.

    Returns ``{"conditions": [condition per record], "gold_ranks": [1-based rank per record]}``
    plus, for a table latent, ``"target_column"`` (of the first record) and, for a hierarchy
    latent, ``"hierarchy": {"candidates": count, "skeleton": (groups, block paths),
    "depths": [(format, 1 + target path length) per record]}`` (the first record's case).
    """
    records = g.records
    facts = {"conditions": [rec.condition for rec in records],
             "gold_ranks": [rec.to_row()["gold_rank"] for rec in records]}  # serialized once, kept
    case = records[0].case
    if g.plan.family == "table":
        facts["target_column"] = case.target.column
    if g.plan.family == "hierarchy":
        blocks = tuple(sorted({c.meaning.path for c in case.candidates if c.meaning.kind == "block"}))
        facts["hierarchy"] = {
            "candidates": len(case.candidates),
            "skeleton": (len({c.meaning.group for c in case.candidates}), blocks),
            "depths": [(rec.case.format, 1 + len(rec.case.target.path)) for rec in records],
        }
    return facts


def hierarchy_depth_balance(broad: Iterable, targeted: Iterable) -> dict:
    """The hierarchy depth check over lists of generated latents (:class:`DepthBalance`)."""
    acc = DepthBalance()
    for g in list(broad) + list(targeted):
        acc.add(g.plan, latent_facts(g))
    return acc.result()


class ReleaseSummary:
    """Everything the manifest's gate tables and suite checks need, added latent by latent.

    Args:
        configs: the configs being built (a check that needs a config not built is left out).
    """

    def __init__(self, configs: Iterable[str]):
        self.configs = tuple(configs)
        self.gate = {"broad": gates.GateTable(), "targeted": gates.GateTable()}
        self.attempts = {s: {"attempted": 0, "accepted": 0, "rejected": Counter()} for s in self.gate}
        self.latent_hashes: dict = {"broad": set(), "targeted": set()}
        self.ranks = {"targeted_table": gates.RankVariation(), "targeted_hierarchy": gates.RankVariation()}
        self.balance_meta: list[dict] = []
        self.shortcuts = {"targeted_table": table_shortcuts.ShortcutTotals(),
                          "broad_table": table_shortcuts.ShortcutTotals()}
        self.depth = DepthBalance()
        self.visible = {c: Counter(n=0, exact=0, abstained=0) for c in self.configs}

    def add_latent(self, g) -> None:
        """Add one accepted latent (:class:`composition.plans.GeneratedLatent` as
        :func:`composition.plans.generate_unit` returns it: ``facts`` filled; its records may
        be :class:`generator.records.RowRecord`)."""
        suite, plan, facts = g.plan.suite, g.plan, g.facts
        attempts = self.attempts[suite]
        attempts["attempted"] += g.attempts
        attempts["accepted"] += 1
        attempts["rejected"].update(g.rejected)
        for case in g.gate_cases:
            self.gate[suite].add(case)
        self.latent_hashes[suite].add(bytes.fromhex(g.latent_hash))
        if suite == "targeted":
            stream = f"targeted_{plan.family}"
            for condition, rank in zip(facts["conditions"], facts["gold_ranks"]):
                self.ranks[stream].add(condition, rank)
            if plan.family == "table":
                self.balance_meta.append(table.balance_meta(plan.condition, plan.slot, g.template,
                                                            facts["target_column"]))
        if plan.family == "table":
            key = "targeted_table" if suite == "targeted" else "broad_table"
            for condition, expectations in zip(facts["conditions"], g.shortcuts):
                self.shortcuts[key].add(condition, expectations)
        self.depth.add(plan, facts)

    def add_visible(self, config: str, check: dict) -> None:
        """Add a visible-oracle count (``{"n", "exact", "abstained"}``) for rows of ``config``."""
        self.visible[config].update({k: check[k] for k in ("n", "exact", "abstained")})

    def visible_checks(self) -> dict:
        """``{config: {"n", "exact", "accuracy", "abstained", "passed"}}`` (passes only at 1.000)."""
        out = {}
        for config in self.configs:
            v = self.visible[config]
            n = v["n"]
            out[config] = {"n": n, "exact": v["exact"], "accuracy": v["exact"] / n if n else None,
                           "abstained": v["abstained"], "passed": n > 0 and v["exact"] == n}
        return out

    def finish(self) -> tuple[dict, dict, list[str]]:
        """``(gate_tables, suite_checks, failures)``: the manifest's tables and the names of
        failed checks (empty when the release may be written)."""
        visible = self.visible_checks()
        built = set(self.configs)
        gate_tables = {}
        for suite, table_ in self.gate.items():
            if not self.attempts[suite]["accepted"]:
                continue
            attempts = dict(self.attempts[suite], rejected=dict(self.attempts[suite]["rejected"]))
            gate_tables[suite] = table_.result(attempts)
            gate_tables[suite]["accepted_records"] = table_.n
            parts = [visible[c] for c in VISIBLE_BY_SUITE[suite] if c in visible]
            n_visible = sum(v["n"] for v in parts)
            gate_tables[suite]["visible_oracle"] = sum(v["exact"] for v in parts) / n_visible if n_visible else None
        checks: dict = {}
        failures: list[str] = []

        def check(name: str, result: dict, label: Optional[str] = None) -> dict:
            if not result["passed"]:
                failures.append(label or name)
            return result

        both = bool(self.latent_hashes["broad"]) and bool(self.latent_hashes["targeted"])
        if both:
            overlap = len(self.latent_hashes["broad"] & self.latent_hashes["targeted"])
            checks["disjoint_broad_targeted"] = check("disjoint_broad_targeted",
                                                      {"passed": overlap == 0, "overlap": overlap})
        ranks = {s: check(s, acc.result(), f"gold_rank_variation/{s}") for s, acc in self.ranks.items()
                 if s in built}
        if ranks:
            checks["gold_rank_variation"] = ranks
        checks["visible_oracle"] = visible
        for config, result in visible.items():
            check(config, result, f"visible_oracle/{config}")
        if "targeted_hierarchy" in built:
            checks["hierarchy_depth_balance"] = check("hierarchy_depth_balance", self.depth.result())
        if "targeted_table" in built:
            checks["balance_targeted_table"] = check("balance_targeted_table", gates.balance_check(self.balance_meta))
        shortcuts = {k: acc.result() for k, acc in self.shortcuts.items() if acc.overall[0]}
        if shortcuts:
            checks["table_shortcuts"] = shortcuts
        order = ("disjoint_broad_targeted", "gold_rank_variation", "balance_targeted_table",
                 "hierarchy_depth_balance", "visible_oracle")
        failures.sort(key=lambda f: next(i for i, name in enumerate(order) if f.startswith(name)))
        return gate_tables, checks, failures
