"""The main job's report: composition, gate tables (paper Table 6 form) and the four gate
baselines scored by the ExBind metric per config and format."""

from __future__ import annotations

import json
from pathlib import Path

import datasets

from generator.baselines import BASELINE_FUNCTIONS, random_expectation
from generator.release import CONFIGS

REPO_ROOT = Path(__file__).resolve().parent.parent
METRIC_PATH = str(REPO_ROOT / "exbind_metric.py")
FORMAT_ORDER = ("svg", "canvas", "tree", "dom", "graph", "table")


def _fmt_rate(x) -> str:
    return "  n/a" if x is None else f"{x:.3f}"


def format_table(headers: list[str], rows: list[list], title: str) -> str:
    """A plain aligned text table: ``title``, a rule, the header, a rule, the rows, a rule.

    Args:
        headers: column names; the first column is left-aligned, the others right-aligned.
        rows: one list of cells per row (any values; printed with ``str``), each as long
            as ``headers``.
        title: the line printed above the table.

    Returns:
        The table as one string without a trailing newline.
    """
    cells = [headers] + [[str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    line = lambda r: "  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths)))  # noqa: E731
    sep = "-" * (sum(widths) + 2 * (len(widths) - 1))
    return "\n".join([title, sep, line(cells[0]), sep] + [line(r) for r in cells[1:]] + [sep])


def composition_table(manifest: dict) -> str:
    """Rows per config and format (paper Table 4 form)."""
    rows = []
    for config in CONFIGS:
        by = manifest["counts"][config]["by_format_condition"]
        per_fmt = [sum(by.get(f, {}).values()) for f in FORMAT_ORDER]
        rows.append([config] + [v or "-" for v in per_fmt] + [manifest["counts"][config]["rows"]])
    return format_table(["config", *FORMAT_ORDER, "total"], rows, "Composition (rows per config and format)")


def gate_table(manifest: dict) -> str:
    """Integrity and shortcut gates per suite (paper Table 6 form)."""
    out = []
    for suite, g in manifest["gate_tables"].items():
        rejected = ", ".join(f"{k} {v}" for k, v in g["rejected"].items()) or "none"
        rows = [
            ["Unique gold target", f"{g['unique_gold']['passed']}/{g['unique_gold']['n']}"],
            ["Structural oracle", _fmt_rate(g["structural_oracle"])],
            ["Target-ID leakage", _fmt_rate(g["target_id_leakage"])],
            ["Lexical-only baseline", _fmt_rate(g["lexical_only"])],
            ["Type-only baseline", _fmt_rate(g["type_only"])],
            ["Random-candidate expectation", _fmt_rate(g["random_expectation"])],
        ]
        if suite == "targeted":
            checks = manifest["suite_checks"]["gold_rank_variation"]
            ok = all(c["passed"] for c in checks.values())
            rows.append(["Gold-rank variation", "passed" if ok else "FAILED"])
        rows.append(["Accepted latents", f"{g['accepted']}/{g['attempted']} attempts (rejected: {rejected})"])
        rows.append(["Accepted records", f"{g['accepted_records']}"])
        out.append(format_table(["Gate", "Result"], rows, f"Gates: {suite} suite ({g['n']} records)"))
    checks = manifest["suite_checks"]
    out.append(
        "Suite checks: broad/targeted disjoint "
        f"{'passed' if checks['disjoint_broad_targeted']['passed'] else 'FAILED'}; "
        f"targeted_table balance {'passed' if checks['balance_targeted_table']['passed'] else 'FAILED'}"
    )
    return "\n\n".join(out)


def baseline_tables(export_dir: Path) -> str:
    """Score the gate baselines with the ExBind metric on every config, per format."""
    import evaluate  # imported here: slow to import, and only this report needs it

    metric = evaluate.load(METRIC_PATH)
    out = []
    for config in CONFIGS:
        ds = datasets.load_dataset(str(export_dir), config, split="test").remove_columns(["image"])
        refs, instrs = ds["reference"], ds["instruction"]
        results = {name: metric.compute(predictions=[fn(i, r) for i, r in zip(instrs, refs)], references=refs)
                   for name, fn in BASELINE_FUNCTIONS.items()}
        fmts = [f for f in FORMAT_ORDER if f in results["structural_oracle"]["by_format"]]
        rows = []
        for fmt in fmts + ["all"]:
            idx = [k for k, f in enumerate(ds["format"]) if fmt in (f, "all")]
            rnd = sum(random_expectation(refs[k]) for k in idx) / len(idx)
            cells = [fmt, len(idx), _fmt_rate(rnd)]
            for name in BASELINE_FUNCTIONS:
                res = results[name] if fmt == "all" else results[name]["by_format"][fmt]
                cells.append(f"{res['n_exact']}/{res['n']} {_fmt_rate(res['exact_accuracy'])}")
            rows.append(cells)
        out.append(format_table(["format", "n", "random", "lexical-only", "type-only", "oracle"], rows,
                                 f"Baselines on {config} (exact; gate baselines abstain on ties)"))
    return "\n\n".join(out)


def print_release_report(export_dir: Path, manifest: dict | None = None) -> None:
    """Print composition, gate tables and baseline tables for an export folder."""
    if manifest is None:
        manifest = json.loads((Path(export_dir) / "exbind_manifest.json").read_text())
    print(composition_table(manifest))
    print()
    print(gate_table(manifest))
    print()
    print(baseline_tables(Path(export_dir)))
