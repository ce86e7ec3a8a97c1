"""``exbind score``: the command line over :mod:`reports.score_report` (one predictions file,
optionally a paired comparison) and :mod:`reports.run_reports` (an inspect-ai log, a run
folder, two run folders compared).

Exit status 0 when scored; 2 for input that cannot be scored, with the reason on stderr.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any, Callable, Optional

from exbind_aggregate import click_summary

from generator.files import OutputPathError, cannot_write, check_output_path, write_bytes_atomic
from predictors.io import write_jsonl
from publishing.eval_files import (EvalResultsError, add_eval_results_arguments, eval_results_argument_error,
                                   write_eval_results_from_args)
from reports.run_reports import (RunReportError, compare_runs, format_comparison, format_run_table,
                                 read_inspect_log, score_run)
from reports.score_report import (BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED, ScoreInputError, build_report,
                                  format_report, write_plots)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``exbind.py score``."""
    parser.add_argument("--config", help="config the predictions answer (e.g. targeted_table)")
    parser.add_argument("--predictions", type=Path,
                        help='JSONL, one {"case_id": ..., "output": "<raw model output>"} per line')
    parser.add_argument("--inspect-log", type=Path, metavar="LOG",
                        help="score the completions of an inspect-ai log of the exbind task instead of --predictions")
    parser.add_argument("--run", type=Path, metavar="DIR",
                        help="score every config of a run-model folder (DIR/<config>/predictions.jsonl) in one table")
    parser.add_argument("--compare-runs", type=Path, nargs=2, metavar=("DIR_A", "DIR_B"),
                        help="per config: both runs' exact accuracy (Wilson), the paired difference B - A "
                             "(parent-case bootstrap) and the first-violation transition matrix")
    parser.add_argument("--export", default="exbind", type=Path, help="export folder (default ./exbind)")
    parser.add_argument("--per-case", type=Path, help="write the per-case records as JSONL (config row order)")
    parser.add_argument("--compare", type=Path, help="second predictions JSONL for the paired comparison")
    parser.add_argument("--compare-config", help="config of --compare (default: --config), e.g. "
                        "targeted_table_permuted or targeted_table_column_metadata")
    parser.add_argument("--compare-per-case", type=Path, help="write the --compare per-case records as JSONL")
    parser.add_argument("--json", type=Path, help="write the whole report (without per-case records) as JSON")
    parser.add_argument("--plots", type=Path, metavar="DIR",
                        help="write PNG figures to DIR (needs matplotlib): first_violations, survival, "
                        "accuracy_by_gold_rank, and where they apply accuracy_by_condition, transitions, "
                        "paired_comparison (reports.plots.save_all)")
    add_eval_results_arguments(parser)
    parser.add_argument("--coordinate-frame", choices=("pixel", "unit", "thousand"),
                        help="frame of click predictions ({\"x\": .., \"y\": ..}); never guessed")
    parser.add_argument("--allow-missing", action="store_true",
                        help="score an empty predictions file (every case unresolved) instead of failing")
    parser.add_argument("--allow-unknown", action="store_true",
                        help="ignore (and list) predicted case ids that are not in the config instead of failing")
    parser.add_argument("--cache-dir", help="datasets cache folder (default: the datasets default)")
    parser.add_argument("--resamples", type=int, default=BOOTSTRAP_RESAMPLES, help="paired bootstrap resamples")
    parser.add_argument("--seed", type=int, default=BOOTSTRAP_SEED, help="paired bootstrap seed")


# Output options of ``score``: (argument name, option, is a folder); checked before scoring.
_OUTPUTS = (("per_case", "--per-case", False), ("compare_per_case", "--compare-per-case", False),
            ("json", "--json", False), ("plots", "--plots", True), ("eval_results", "--eval-results", True))


def _output_path_error(args: argparse.Namespace) -> Optional[str]:
    """The one-line message for the first output path of ``args`` that cannot be written, else None
    (:func:`generator.files.check_output_path`; missing parent folders are created)."""
    taken = {"--predictions": getattr(args, "predictions", None), "--compare": getattr(args, "compare", None)}
    runs = {"the run folder": getattr(args, "run", None)}
    for k, folder_ in enumerate(getattr(args, "compare_runs", None) or ()):
        runs[f"run folder {k + 1} of --compare-runs"] = folder_
    for name, option, folder in _OUTPUTS:
        path = getattr(args, name, None)
        if path is not None:
            try:
                check_output_path(option, path, folder=folder, inputs=taken, export=getattr(args, "export", None),
                                  folders=runs)
            except OutputPathError as exc:
                return str(exc)
            taken[option] = path
    return None


class _Unwritable(Exception):
    """An output write failed with an ``OSError`` after the check; the message is the line to print."""


def _write(option: str, path: Path, write: Callable[..., Any], *args) -> Any:
    """``write(*args)``, its ``OSError`` turned into :class:`_Unwritable` (:func:`generator.files.cannot_write`)."""
    try:
        return write(*args)
    except OSError as exc:
        raise _Unwritable(cannot_write(option, path, exc.strerror or type(exc).__name__)) from None


def _write_json(path: Path, payload: dict) -> None:
    """``--json``: the payload as indented JSON, written atomically (parent folders created)."""
    write_bytes_atomic(path, (json.dumps(payload, indent=2) + "\n").encode("utf-8"))


def _write_jsonl(path: Path, records: list[dict]) -> None:
    """Per-case records as JSON Lines: atomic (temporary file + ``os.replace``) and encodable
    (a lone surrogate in a parsed id is written as an ASCII escape); see
    :func:`predictors.io.write_jsonl`."""
    write_jsonl(path, records)


def run(args: argparse.Namespace) -> int:
    """Run ``exbind.py score``: print the report and write the requested files.

    Returns:
        0 on success; 2 when an input cannot be scored (the reason is printed to stderr).
    """
    if args.run or args.compare_runs:
        return _run_folders(args)
    if args.inspect_log:
        try:
            config, lines = read_inspect_log(args.inspect_log)
        except RunReportError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        if args.config and args.config != config:
            print(f"error: {args.inspect_log} holds config {config!r}, not --config {args.config!r}", file=sys.stderr)
            return 2
        if args.predictions:
            print("error: pass --inspect-log or --predictions, not both", file=sys.stderr)
            return 2
        with tempfile.TemporaryDirectory(prefix="exbind-inspect-") as tmp:
            path = Path(tmp) / f"{args.inspect_log.stem}.jsonl"
            _write_jsonl(path, lines)
            args.config, args.predictions, args.inspect_log = config, path, None
            return run(args)
    if not args.config or not args.predictions:
        print("error: score needs --config and --predictions (or --inspect-log LOG, --run DIR, "
              "--compare-runs DIR_A DIR_B)", file=sys.stderr)
        return 2
    if args.compare_config and args.compare is None:
        print("error: --compare-config needs --compare (the second predictions file)", file=sys.stderr)
        return 2
    from composition.release import config_name_error

    for option, name in (("--config", args.config), ("--compare-config", args.compare_config)):
        config_error = config_name_error(option, name)
        if config_error:
            print(f"error: {config_error}", file=sys.stderr)
            return 2
    if eval_results_argument_error(args):
        print(f"error: {eval_results_argument_error(args)}", file=sys.stderr)
        return 2
    output_error = _output_path_error(args)
    if output_error:
        print(f"error: {output_error}", file=sys.stderr)
        return 2
    try:
        report = build_report(args.config, args.export, args.predictions, compare_config=args.compare_config,
                              compare_path=args.compare, allow_unknown=args.allow_unknown,
                              cache_dir=args.cache_dir, resamples=args.resamples, seed=args.seed,
                              coordinate_frame=args.coordinate_frame,
                              allow_missing=getattr(args, "allow_missing", False))
    except ScoreInputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(format_report(report))
    no_frame = sum(1 for r in report["records"] if "coordinate_frame" in (r.get("reason") or ""))
    if no_frame:
        print(f"warning: {no_frame} click prediction(s) were scored invalid because no coordinate frame was "
              "given; pass --coordinate-frame pixel|unit|thousand", file=sys.stderr)
    clicks = click_summary(report["records"])
    if clicks and clicks["frame_warning"]:
        print(f"warning: {clicks['frame_warning']}", file=sys.stderr)
    try:
        return _write_outputs(report, args)
    except _Unwritable as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


def _write_outputs(report: dict, args: argparse.Namespace) -> int:
    """Write the files ``score`` was asked for and print one line each; returns the exit status.

    Raises:
        _Unwritable: a write failed (the paths were checked before scoring; this is the last resort).
    """
    if args.per_case:
        _write("--per-case", args.per_case, _write_jsonl, args.per_case, report["records"])
        print(f"per-case: wrote {len(report['records'])} records (scores, gold, raw output) to {args.per_case}")
    if args.compare_per_case and "compare" in report:
        _write("--compare-per-case", args.compare_per_case, _write_jsonl, args.compare_per_case,
               report["compare"]["records"])
        print(f"per-case: wrote {len(report['compare']['records'])} --compare records to {args.compare_per_case}")
    if args.json:
        slim = {k: v for k, v in report.items() if k != "records"}
        if "compare" in slim:
            slim["compare"] = {k: v for k, v in slim["compare"].items() if k != "records"}
        _write("--json", args.json, _write_json, args.json, slim)
        print(f"json: wrote the report (without per-case records) to {args.json}")
    try:
        eval_results = _write("--eval-results", args.eval_results, write_eval_results_from_args, report, args)
    except EvalResultsError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if eval_results is not None:
        print(f"eval results: wrote {eval_results}")
    if args.plots:
        written = _write("--plots", args.plots, write_plots, report, args.export, args.plots, args.cache_dir)
        print(f"plots: wrote {len(written)} PNG file(s) to {args.plots}: " + ", ".join(p.name for p in written))
    return 0


def _run_folders(args: argparse.Namespace) -> int:
    """``score --run DIR`` / ``score --compare-runs DIR_A DIR_B`` (:mod:`reports.run_reports`)."""
    inputs = [option for name, option in (("config", "--config"), ("predictions", "--predictions"),
                                          ("inspect_log", "--inspect-log"), ("compare", "--compare"),
                                          ("compare_config", "--compare-config"))
              if getattr(args, name, None) is not None]
    if inputs:  # a run folder names its own configs and predictions
        print(f"error: {', '.join(inputs)} cannot be combined with --run / --compare-runs (a run folder holds "
              "its configs and predictions); score a predictions file alone with --config and --predictions",
              file=sys.stderr)
        return 2
    unused = [option for name, option, _ in _OUTPUTS if name != "json" and getattr(args, name, None) is not None]
    if unused:
        print(f"error: {', '.join(unused)} not written with --run / --compare-runs (only --json is); "
              "score one config's predictions.jsonl with --config and --predictions for them", file=sys.stderr)
        return 2
    output_error = _output_path_error(args)
    if output_error:
        print(f"error: {output_error}", file=sys.stderr)
        return 2
    try:
        if args.compare_runs:
            result = compare_runs(args.compare_runs[0], args.compare_runs[1], args.export, args.cache_dir,
                                  resamples=args.resamples, seed=args.seed)
            print(format_comparison(result))
            payload = result
        else:
            rows = score_run(args.run, args.export, args.cache_dir)
            print(format_run_table(args.run, rows))
            payload = {"run": str(args.run), "configs": [{k: v for k, v in r.items() if k != "records"} for r in rows]}
    except (RunReportError, ScoreInputError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.json:
        try:
            _write("--json", args.json, _write_json, args.json, payload)
        except _Unwritable as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
    return 0


