"""Figures of ExBind results (issue 5; docs/specification.md §5; paper Tables 10, 13, 15 and the gold-rank audit of §6.4).

Every function takes the plain JSON values the scorer already produces and returns a
:class:`matplotlib.figure.Figure`; nothing here recomputes a metric the aggregate already
holds, and nothing touches pyplot's global state (figures are built with
``Figure()`` directly, so they are safe in scripts, tests and threads, need no display and
are rasterized by the Agg canvas when saved as PNG). In a notebook, display a returned
figure with ``display(fig)`` or by ending a cell with it.

Inputs:

- ``result``: :func:`exbind_aggregate.aggregate` of per-case records (what
  ``evaluate.load("exbind_metric.py").compute(...)`` and ``exbind.py score --json`` return
  as ``summary``): ``first_violation_profile``, ``survival``, ``by_condition`` /
  ``by_format`` / ``by_family``, ``cross_format_consistency``.
- ``per_case``: per-case records (:func:`exbind_scoring.score_prediction`; the metric's
  ``per_case`` with ``return_per_case=True``).
- ``references``: the rows' ``reference`` JSON strings (or loaded reference dicts), which
  carry ``gold_rank``.
- ``comparison``: :func:`exbind_aggregate.paired_comparison`.

Figures (all rates are fractions of cases in [0, 1]; every figure has a title, axis labels
with units and a legend that names n):

==============================  ==========================================================
:func:`first_violation_figure`  first-violation rate per label over its opportunity
                                denominator (paper Table 15), bars annotated ``count/opp``
:func:`survival_figure`         S(k) per family along its declared order, one panel each
:func:`transition_figure`       paired first-violation transition matrix per pair type
                                (svg -> canvas, tree -> dom; paper Table 13)
:func:`gold_rank_figure`        exact accuracy per gold-rank bin with Wilson 95% intervals
:func:`breakdown_figure`        exact accuracy per condition / format / family with Wilson
                                95% intervals
:func:`paired_figure`           exact accuracy of the original vs each variant and the
                                paired bootstrap delta (paper Tables 9 and 12)
:func:`candidate_boxes_figure`  a rendered case with every candidate's pixel box drawn
==============================  ==========================================================

:func:`save_all` writes the result figures as PNGs with fixed names (:data:`PLOT_FILES`);
``python exbind.py score ... --plots DIR`` calls it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterable, Mapping, Optional, Sequence

from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch, Rectangle

from exbind_aggregate import PAIR_TYPES, wilson_interval
from exbind_scoring import DECLARED_ORDERS, FIRST_VIOLATION_LABELS, load_reference

# Gold-rank bins ``(low, high)`` inclusive, 1-based released candidate positions; ``None``
# is open-ended. Rank 1 and ranks 13+ are the paper's reported extremes (§6.4).
DEFAULT_RANK_BINS: tuple[tuple[int, Optional[int]], ...] = ((1, 1), (2, 4), (5, 8), (9, 12), (13, 24), (25, None))

# File names written by :func:`save_all`, in the order it returns them.
PLOT_FILES = {
    "first_violations": "first_violations.png",
    "survival": "survival.png",
    "accuracy_by_gold_rank": "accuracy_by_gold_rank.png",
    "accuracy_by_condition": "accuracy_by_condition.png",
    "transitions": "transitions.png",
    "paired_comparison": "paired_comparison.png",
}

DPI = 120
_BAR = "#4C72B0"
_NONE = "#55A868"
_GOLD = "#C44E52"
_FAMILY_COLORS = {"relational": "#4C72B0", "hierarchy": "#DD8452", "graph": "#55A868", "table": "#C44E52"}


def _legend_n(ax, text: str, loc: str = "best", handles: Optional[list] = None) -> None:
    """A legend whose entries are ``handles`` plus one invisible handle carrying ``text`` (the n)."""
    handles = list(handles or [])
    handles.append(Line2D([], [], linestyle="none", marker="none", label=text))
    ax.legend(handles=handles, loc=loc, fontsize=8, frameon=True)


def _empty(fig: Figure, ax, message: str) -> Figure:
    ax.text(0.5, 0.5, message, ha="center", va="center", transform=ax.transAxes, fontsize=10)
    ax.set_xticks([])
    ax.set_yticks([])
    return fig


def _signed(x: float) -> str:
    """``+0.075`` style; a float-noise zero prints ``+0.000``, never ``-0.000``."""
    return f"{round(x, 9) + 0.0:+.3f}"


def _fmt(x) -> str:
    return "n/a" if x is None else f"{x:.3f}"


# --------------------------------------------------------------------------- first violations


def first_violation_figure(result: Mapping[str, Any], title: str = "First violations (opportunity-normalized)",
                           include_none: bool = True) -> Figure:
    """Bar chart of the opportunity-normalized first-violation profile (paper Table 15).

    One bar per label of :data:`exbind_scoring.FIRST_VIOLATION_LABELS` (in that order) that
    has at least one opportunity; its height is ``rate = count / opportunities`` (fraction
    of the cases on which that stage is scored; ``none``: of all cases) and its annotation
    ``count/opportunities``. Labels with no opportunity are left out (not applicable, never
    drawn as 0).

    Args:
        result: an aggregate with ``first_violation_profile``
            (``{label: {"count", "opportunities", "rate"}}``) and ``n``.
        title: figure title (the n is appended).
        include_none: also draw ``none`` (exact, no violation) in a second colour.

    Returns:
        A Figure with one Axes: x tick labels are the labels, y is "first-violation rate
        (count / opportunities)" in [0, 1]; the legend names n.
    """
    profile = result["first_violation_profile"]
    n = result.get("n", 0)
    labels = [lab for lab in FIRST_VIOLATION_LABELS
              if profile.get(lab, {}).get("opportunities") and (include_none or lab != "none")]
    fig = Figure(figsize=(max(5.0, 0.75 * len(labels) + 2.0), 4.0), dpi=DPI, layout="constrained")
    ax = fig.add_subplot()
    ax.set_title(f"{title} (n = {n} cases)")
    if not labels:
        return _empty(fig, ax, "no scored cases")
    heights = [profile[lab]["rate"] for lab in labels]
    colors = [_NONE if lab == "none" else _BAR for lab in labels]
    bars = ax.bar(range(len(labels)), heights, color=colors)
    for bar, lab in zip(bars, labels):
        v = profile[lab]
        ax.annotate(f"{v['count']}/{v['opportunities']}", (bar.get_x() + bar.get_width() / 2, bar.get_height()),
                    xytext=(0, 2), textcoords="offset points", ha="center", va="bottom", fontsize=8)
    ax.set_xticks(range(len(labels)), labels, rotation=30, ha="right")
    ax.set_xlabel("first violated constraint (declared order)")
    ax.set_ylabel("first-violation rate (count / opportunities)")
    ax.set_ylim(0, 1.12)
    handles = [Patch(color=_BAR, label="violation (bar label: count/opportunities)")]
    if "none" in labels:
        handles.append(Patch(color=_NONE, label="none = exact"))
    _legend_n(ax, f"n = {n} cases", "upper right", handles)
    return fig


# --------------------------------------------------------------------------- survival


def survival_figure(result: Mapping[str, Any], title: str = "Survival along the declared order") -> Figure:
    """S(k) per family: the fraction of the family's cases passing every stage up to k.

    One panel per family present in ``result["survival"]`` (in
    :data:`exbind_scoring.DECLARED_ORDERS` order), x = the family's declared stages
    (candidate_valid ... exact), y = S(k) in [0, 1]; the line's data are the ``rate`` values
    and its legend label is ``"<family> (n = N)"``.

    Args:
        result: an aggregate with ``survival`` (``{family: [{"stage", "surviving", "n", "rate"}]}``).
        title: figure title.

    Returns:
        A Figure with one Axes per family (or one Axes saying "no scored cases").
    """
    survival = result["survival"]
    families = [f for f in DECLARED_ORDERS if f in survival] + sorted(set(survival) - set(DECLARED_ORDERS))
    fig = Figure(figsize=(max(4.5, 3.6 * len(families)), 3.8), dpi=DPI, layout="constrained")
    if not families:
        ax = fig.add_subplot()
        ax.set_title(title)
        return _empty(fig, ax, "no scored cases")
    axes = fig.subplots(1, len(families), sharey=True, squeeze=False)[0]
    fig.suptitle(title)
    for ax, family in zip(axes, families):
        curve = survival[family]
        stages = [p["stage"] for p in curve]
        rates = [p["rate"] for p in curve]
        n = curve[0]["n"] if curve else 0
        ax.plot(range(len(stages)), rates, marker="o", color=_FAMILY_COLORS.get(family, _BAR),
                label=f"{family} (n = {n})")
        for x, p in enumerate(curve):
            ax.annotate(f"{p['surviving']}", (x, p["rate"]), xytext=(0, 5), textcoords="offset points",
                        ha="center", fontsize=7)
        ax.set_xticks(range(len(stages)), stages, rotation=35, ha="right", fontsize=8)
        ax.set_ylim(0, 1.1)
        ax.set_title(family)
        ax.set_xlabel("stage k (declared order)")
        ax.grid(axis="y", alpha=0.3)
        ax.legend(loc="upper right", fontsize=8)
    axes[0].set_ylabel("S(k): fraction of cases surviving")
    return fig


# --------------------------------------------------------------------------- transitions


def transition_matrix(transitions: Mapping[str, int]) -> tuple[list[str], list[str], list[list[int]]]:
    """Rows, columns and counts of a ``{"a->b": count}`` transition dict.

    Labels are ordered by :data:`exbind_scoring.FIRST_VIOLATION_LABELS` (unknown labels
    last, sorted); only labels that occur are kept.

    Returns:
        ``(row_labels, column_labels, counts)`` with ``counts[i][j]`` the groups whose first
        violation was ``row_labels[i]`` on the first surface and ``column_labels[j]`` on the
        second.

    Raises:
        ValueError: for a key without ``"->"``.
    """
    order = {lab: i for i, lab in enumerate(FIRST_VIOLATION_LABELS)}
    pairs = []
    for key, count in transitions.items():
        if "->" not in key:
            raise ValueError(f"transition key {key!r} is not '<label a>-><label b>'")
        a, b = key.split("->", 1)
        pairs.append((a, b, int(count)))

    def ordered(labels: Iterable[str]) -> list[str]:
        return sorted(set(labels), key=lambda lab: (order.get(lab, len(order)), lab))

    rows, cols = ordered(a for a, _, _ in pairs), ordered(b for _, b, _ in pairs)
    counts = [[0] * len(cols) for _ in rows]
    for a, b, k in pairs:
        counts[rows.index(a)][cols.index(b)] += k
    return rows, cols, counts


def transition_figure(consistency: Mapping[str, Any], pairs: Optional[Sequence[str]] = None,
                      title: str = "Paired first-violation transitions") -> Figure:
    """Heat maps of first-violation transitions per cross-format pair type (paper Table 13).

    Args:
        consistency: :func:`exbind_aggregate.cross_format_consistency` (``{pair: {"groups",
            "consistent", "rate", "transitions"}}``), or a whole aggregate (its
            ``cross_format_consistency`` is used).
        pairs: pair types to draw (default: every pair present, in
            :data:`exbind_aggregate.PAIR_TYPES` order).
        title: figure title.

    Returns:
        A Figure with one Axes per pair: rows = first violation on the first surface (svg,
        tree), columns = on the second (canvas, dom), cell text = group counts, the image's
        array = the counts of :func:`transition_matrix`; the legend names the groups n and
        the consistent count.

    Raises:
        KeyError: when a requested pair has no groups in ``consistency``.
    """
    if "cross_format_consistency" in consistency:
        consistency = consistency["cross_format_consistency"]
    if pairs is None:
        pairs = [p for p in PAIR_TYPES if p in consistency] + sorted(set(consistency) - set(PAIR_TYPES))
    for p in pairs:
        if p not in consistency:
            raise KeyError(f"pair type {p!r} has no groups (present: {sorted(consistency)})")
    fig = Figure(figsize=(max(4.8, 4.6 * len(pairs)), 4.8), dpi=DPI, layout="constrained")
    if not pairs:
        ax = fig.add_subplot()
        ax.set_title(title)
        return _empty(fig, ax, "no cross-format groups")
    axes = fig.subplots(1, len(pairs), squeeze=False)[0]
    fig.suptitle(title)
    for ax, pair in zip(axes, pairs):
        c = consistency[pair]
        fa, fb = PAIR_TYPES.get(pair, tuple(pair.split("-", 1)))
        rows, cols, counts = transition_matrix(c["transitions"])
        ax.set_title(f"{fa} -> {fb}")
        if not rows:
            _empty(fig, ax, "no complete groups")
            continue
        peak = max(max(r) for r in counts) or 1
        ax.imshow(counts, cmap="Blues", vmin=0, vmax=peak, aspect="auto")
        for i, r in enumerate(counts):
            for j, k in enumerate(r):
                ax.text(j, i, str(k), ha="center", va="center", fontsize=9,
                        color="white" if k > 0.6 * peak else "black")
        ax.set_xticks(range(len(cols)), cols, rotation=30, ha="right", fontsize=8)
        ax.set_yticks(range(len(rows)), rows, fontsize=8)
        ax.set_xlabel(f"first violation on {fb}")
        ax.set_ylabel(f"first violation on {fa}")
        _legend_n(ax, f"n = {c['groups']} groups; consistent {c['consistent']} ({_fmt(c['rate'])})",
                  "upper center", [Patch(facecolor="#6BAED6", label="cell: groups (count)")])
        ax.get_legend().set_bbox_to_anchor((0.5, -0.22))
    return fig


# --------------------------------------------------------------------------- gold rank


def _bin_label(low: int, high: Optional[int]) -> str:
    if high is None:
        return f"{low}+"
    return str(low) if low == high else f"{low}-{high}"


def _gold_ranks(per_case: Sequence[Mapping[str, Any]], references: Sequence[Any]) -> list[int]:
    ranks: dict[str, int] = {}
    for ref in references:
        payload = load_reference(ref) if isinstance(ref, str) else ref
        ranks[payload["case_id"]] = payload["gold_rank"]
    missing = [r["case_id"] for r in per_case if r["case_id"] not in ranks]
    if missing:
        raise ValueError(f"{len(missing)} per-case record(s) have no reference: {missing[:5]}")
    return [ranks[r["case_id"]] for r in per_case]


def accuracy_by_gold_rank(per_case: Sequence[Mapping[str, Any]], references: Sequence[Any],
                          bins: Sequence[tuple[int, Optional[int]]] = DEFAULT_RANK_BINS) -> list[dict]:
    """Exact accuracy per gold-rank bin (the paper's candidate-position audit, §6.4).

    Args:
        per_case: per-case records (each with ``case_id`` and ``scores["exact"]``).
        references: the rows' ``reference`` strings or loaded dicts (matched by
            ``case_id``; ``gold_rank`` is the 1-based position of gold in the released
            candidate order).
        bins: ``(low, high)`` inclusive rank ranges, ``high`` None for open-ended.

    Returns:
        One dict per bin, in ``bins`` order: ``{"bin": "2-4", "low", "high", "n",
        "n_exact", "accuracy" (None when n = 0), "ci" (Wilson 95%, None when n = 0)}``.
        Ranks outside every bin are not counted.

    Raises:
        ValueError: when a record's case id has no reference.
    """
    ranks = _gold_ranks(per_case, references)
    out = []
    for low, high in bins:
        inside = [int(r["scores"]["exact"]) for r, rank in zip(per_case, ranks)
                  if rank >= low and (high is None or rank <= high)]
        n, k = len(inside), sum(inside)
        out.append({"bin": _bin_label(low, high), "low": low, "high": high, "n": n, "n_exact": k,
                    "accuracy": k / n if n else None, "ci": wilson_interval(k, n)})
    return out


def _accuracy_bars(ax, labels: list[str], entries: list[Mapping[str, Any]], count_key: str = "n_exact") -> None:
    """Bars of ``accuracy`` with Wilson error bars and ``k/n`` annotations (entries with n = 0 skipped)."""
    heights = [e["accuracy"] for e in entries]
    low = [e["accuracy"] - e["ci"][0] for e in entries]
    high = [e["ci"][1] - e["accuracy"] for e in entries]
    bars = ax.bar(range(len(labels)), heights, color=_BAR, yerr=[low, high], capsize=3,
                  error_kw={"elinewidth": 1, "ecolor": "#333333"})
    for bar, e in zip(bars, entries):
        ax.annotate(f"{e[count_key]}/{e['n']}", (bar.get_x() + bar.get_width() / 2, e["ci"][1]), xytext=(0, 3),
                    textcoords="offset points", ha="center", va="bottom", fontsize=8)
    ax.set_xticks(range(len(labels)), labels)
    ax.set_ylim(0, 1.12)
    ax.grid(axis="y", alpha=0.3)


def gold_rank_figure(per_case: Sequence[Mapping[str, Any]], references: Sequence[Any],
                     bins: Sequence[tuple[int, Optional[int]]] = DEFAULT_RANK_BINS,
                     title: str = "Exact accuracy by gold rank") -> Figure:
    """Exact accuracy per gold-rank bin with Wilson 95% intervals.

    Bars are drawn for the non-empty bins of :func:`accuracy_by_gold_rank` (an empty bin is
    left out, never drawn as 0); bar heights are their ``accuracy``, annotations
    ``n_exact/n``.

    Returns:
        A Figure with one Axes: x "gold rank (1-based position in the candidate list)",
        y "exact accuracy (fraction of cases)"; the legend names n.
    """
    table = [b for b in accuracy_by_gold_rank(per_case, references, bins) if b["n"]]
    fig = Figure(figsize=(max(5.0, 0.9 * len(table) + 2.0), 3.8), dpi=DPI, layout="constrained")
    ax = fig.add_subplot()
    ax.set_title(f"{title} (n = {len(per_case)} cases)")
    if not table:
        return _empty(fig, ax, "no scored cases")
    _accuracy_bars(ax, [b["bin"] for b in table], table)
    ax.set_xlabel("gold rank (1-based position in the candidate list)")
    ax.set_ylabel("exact accuracy (fraction of cases)")
    _legend_n(ax, f"n = {sum(b['n'] for b in table)} cases", "upper right",
              [Patch(color=_BAR, label="exact / cases, Wilson 95% CI")])
    return fig


# --------------------------------------------------------------------------- breakdowns


def breakdown_figure(result: Mapping[str, Any], by: str = "condition", title: Optional[str] = None) -> Figure:
    """Exact accuracy per condition, format or family with Wilson 95% intervals.

    Args:
        result: an aggregate with ``by_<by>`` (``{key: {"n", "n_exact", "exact_accuracy",
            "exact_accuracy_ci"}}``).
        by: ``"condition"``, ``"format"`` or ``"family"``.
        title: figure title (default "Exact accuracy by <by>").

    Returns:
        A Figure with one Axes, bars in the breakdown's key order with heights
        ``exact_accuracy``; the legend names n (the cases that have a ``by`` value).

    Raises:
        ValueError: for another ``by``.
    """
    if by not in ("condition", "format", "family"):
        raise ValueError(f"by={by!r}; expected 'condition', 'format' or 'family'")
    groups = result[f"by_{by}"]
    keys = [k for k in groups if groups[k]["n"]]
    entries = [{"n": groups[k]["n"], "n_exact": groups[k]["n_exact"], "accuracy": groups[k]["exact_accuracy"],
                "ci": groups[k]["exact_accuracy_ci"]} for k in keys]
    fig = Figure(figsize=(max(5.0, 1.0 * len(keys) + 2.0), 3.8), dpi=DPI, layout="constrained")
    ax = fig.add_subplot()
    ax.set_title(title or f"Exact accuracy by {by}")
    if not keys:
        return _empty(fig, ax, f"no cases with a {by}")
    _accuracy_bars(ax, keys, entries)
    ax.set_xlabel(by)
    ax.set_ylabel("exact accuracy (fraction of cases)")
    _legend_n(ax, f"n = {sum(e['n'] for e in entries)} cases", "upper right",
              [Patch(color=_BAR, label="exact / cases, Wilson 95% CI")])
    return fig


# --------------------------------------------------------------------------- paired comparison


def paired_figure(comparison: Mapping[str, Any], original_label: str = "original",
                  variant_label: str = "permutation", title: str = "Paired comparison") -> Figure:
    """Exact accuracy of the original and of each variant over the paired parents, and the delta.

    Bars: ``original_exact / parents`` then, per variant index k,
    ``variant_exact[k] / variant_rows[k]``, each with its Wilson 95% interval. The title
    carries the paired delta and its bootstrap interval (:func:`exbind_aggregate.paired_comparison`).

    Returns:
        A Figure with one Axes; the legend names the paired parents n.
    """
    parents = comparison["parents"]
    entries = []
    labels = []
    if parents:
        k = comparison["original_exact"]
        entries.append({"n": parents, "n_exact": k, "accuracy": k / parents, "ci": wilson_interval(k, parents)})
        labels.append(original_label)
    for key, rows in comparison["variant_rows"].items():
        k = comparison["variant_exact"][key]
        if rows:
            entries.append({"n": rows, "n_exact": k, "accuracy": k / rows, "ci": wilson_interval(k, rows)})
            labels.append(f"{variant_label} {key}")
    delta = comparison.get("delta")
    ci = comparison.get("ci")
    subtitle = "delta n/a" if delta is None else (
        f"delta {_signed(delta)}" + ("" if ci is None else f", 95% CI [{_signed(ci[0])}, {_signed(ci[1])}]"))
    fig = Figure(figsize=(max(5.0, 1.2 * len(labels) + 2.0), 3.8), dpi=DPI, layout="constrained")
    ax = fig.add_subplot()
    ax.set_title(f"{title}: {subtitle}")
    if not entries:
        return _empty(fig, ax, "no paired parents")
    _accuracy_bars(ax, labels, entries)
    ax.set_xlabel("interface")
    ax.set_ylabel("exact accuracy (fraction of cases)")
    _legend_n(ax, f"n = {parents} paired parents; bootstrap over parents", "upper right",
              [Patch(color=_BAR, label="exact / cases, Wilson 95% CI")])
    return fig


# --------------------------------------------------------------------------- a rendered case


def candidate_boxes_figure(row: Mapping[str, Any], show_gold: bool = True, label_ids: bool = True) -> Figure:
    """A rendered svg/canvas case with every candidate's pixel box drawn.

    Args:
        row: a dataset row with ``image`` (a PIL image), ``candidates`` (model-visible dicts
            with ``candidate_id`` and ``bbox`` ``[x, y, w, h]`` in image pixels, origin top
            left), ``gold`` (the JSON surface reference) and ``instruction``.
        show_gold: draw the gold candidate's box in red (for inspection; a model never sees it).
        label_ids: write each candidate id at its box.

    Returns:
        A Figure with one Axes in image pixel coordinates; one Rectangle patch per candidate
        with a bbox, in candidate order; the legend names n (candidates with a box).

    Raises:
        ValueError: when the row has no image (text formats are not rendered).
    """
    image = row.get("image")
    if image is None:
        raise ValueError(f"case {row.get('case_id')!r} ({row.get('format')}) has no rendered image")
    gold = json.loads(row["gold"]) if isinstance(row.get("gold"), str) else (row.get("gold") or {})
    gold_ids = set(gold.values()) if show_gold else set()
    width, height = image.size
    fig = Figure(figsize=(6.4, 6.4 * height / width + 0.8), dpi=DPI, layout="constrained")
    ax = fig.add_subplot()
    ax.imshow(image, extent=(0, width, height, 0))
    boxed = [c for c in row["candidates"] if c.get("bbox")]
    for c in boxed:
        x, y, w, h = c["bbox"]
        is_gold = c["candidate_id"] in gold_ids
        ax.add_patch(Rectangle((x, y), w, h, fill=False, linewidth=2.0 if is_gold else 1.0,
                               edgecolor=_GOLD if is_gold else "#333333", linestyle="-" if is_gold else "--"))
        if label_ids:
            ax.text(x, y - 2, c["candidate_id"], fontsize=7, color=_GOLD if is_gold else "#333333",
                    va="bottom", ha="left")
    ax.set_xlim(0, width)
    ax.set_ylim(height, 0)
    ax.set_xlabel("x (pixels)")
    ax.set_ylabel("y (pixels)")
    ax.set_title(f"{row.get('case_id', '')}\n{row.get('instruction', '')}", fontsize=9)
    handles = [Patch(fill=False, edgecolor="#333333", linestyle="--", label="candidate box")]
    if gold_ids:
        handles.append(Patch(fill=False, edgecolor=_GOLD, linewidth=2.0, label="gold"))
    _legend_n(ax, f"n = {len(boxed)} candidates", "lower right", handles)
    return fig


# --------------------------------------------------------------------------- save


def save_all(result: Mapping[str, Any], per_case: Sequence[Mapping[str, Any]], references: Sequence[Any],
             out_dir, *, paired: Optional[Mapping[str, Any]] = None, dpi: int = DPI) -> list[Path]:
    """Write the result figures as PNGs under ``out_dir`` (created if missing).

    Always writes ``first_violations.png``, ``survival.png`` and
    ``accuracy_by_gold_rank.png``; ``accuracy_by_condition.png`` when some case has a
    condition (targeted configs); ``transitions.png`` when ``result`` has cross-format groups
    (broad, paired); ``paired_comparison.png`` when ``paired`` (a
    :func:`exbind_aggregate.paired_comparison`) is given. Names are :data:`PLOT_FILES`;
    existing files of those names are overwritten.

    Args:
        result: the aggregate of ``per_case``.
        per_case: per-case records.
        references: the rows' reference strings or dicts (for the gold ranks).
        out_dir: destination folder.
        paired: optional paired comparison.
        dpi: PNG resolution (dots per inch; figures are 4-6 inches wide).

    Returns:
        The written paths, in :data:`PLOT_FILES` order.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    figures: dict[str, Figure] = {
        "first_violations": first_violation_figure(result),
        "survival": survival_figure(result),
        "accuracy_by_gold_rank": gold_rank_figure(per_case, references),
    }
    if any(v["n"] for v in result.get("by_condition", {}).values()):
        figures["accuracy_by_condition"] = breakdown_figure(result, "condition")
    if result.get("cross_format_consistency"):
        figures["transitions"] = transition_figure(result["cross_format_consistency"])
    if paired is not None:
        figures["paired_comparison"] = paired_figure(
            paired, variant_label="permutation" if paired.get("permuted", True) else "variant")
    written = []
    for key, name in PLOT_FILES.items():
        if key in figures:
            path = out / name
            figures[key].savefig(path, dpi=dpi, format="png", metadata={"Software": None})
            written.append(path)
    return written
