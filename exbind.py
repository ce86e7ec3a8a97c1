"""ExBind: the release command line, and the ``datasets`` builder.

The command line builds and exports the release and prints the report::

    python exbind.py build [--out DIR] [--processes N] [--seed S] [--scale K]

writes a Hub-ready folder (default ``./exbind``): ``README.md`` (the card plus generated
YAML ``configs:`` and ``dataset_info``), ``data/<config>/test-*.parquet`` and
``exbind_manifest.json``; after it ``datasets.load_dataset("exbind", "targeted_table",
split="test")`` works from the repository root. ``score``, ``predict``, ``run-model``,
``show`` and ``push`` are described by ``python exbind.py --help``.

The builder (:class:`ExBind`, from :mod:`publishing.builder`) materializes every
configuration as a ``test`` split from the generator::

    from exbind import ExBind
    builder = ExBind(config_name="targeted_table", cache_dir=tmp)
    builder.download_and_prepare()
    ds = builder.as_dataset(split="test")

``ExBind``, ``ExBindConfig`` and ``release`` are imported on first use: this module imports
only the standard library, so ``build`` starts its worker pool before ``datasets`` (about
half a second of imports) is loaded, and the imports overlap the generation.
"""

from __future__ import annotations

import argparse
import gc
import os
import signal
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

_BUILDER_NAMES = ("ExBind", "ExBindConfig", "release")


def __getattr__(name: str):
    """``ExBind``, ``ExBindConfig`` and ``release`` from :mod:`publishing.builder`, imported on first use."""
    if name in _BUILDER_NAMES:
        import publishing.builder

        return getattr(publishing.builder, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point; see ``python exbind.py --help``.

    Subcommands: ``build`` (generate, gate, export, report), ``score`` (score a
    predictions JSONL against a config; :mod:`reports.score_report`) and ``predict``
    (run a gate baseline or ranker over a config; :mod:`predictors.cli`), ``run-model``
    (run a local Hugging Face checkpoint; :mod:`predictors.runner`) and ``push``
    (upload the export to the Hub in one commit; :mod:`publishing.hub`).

    Returns:
        The exit status (0 on success; ``score`` returns 2 for input it cannot score).
    """
    parser = argparse.ArgumentParser(
        prog="exbind.py",
        description="Build, export and report the ExBind release; score predictions against it.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="examples:\n  python exbind.py build\n  python exbind.py build --out /tmp/exbind --processes 1\n",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    build = sub.add_parser("build", help="build every config, run the gates, export, print the report",
                           formatter_class=argparse.RawDescriptionHelpFormatter,
                           epilog="example:\n  python exbind.py build --out ./exbind\n")
    build.add_argument("--out", default="exbind", help="export folder (default ./exbind); replaced atomically")
    build.add_argument("--processes", type=int, default=None,
                       help="generation processes, 1 to 4 per CPU (default: one per CPU, at most 4; "
                            "the output is identical)")
    build.add_argument("--quiet", action="store_true", help="print only the export path")
    build.add_argument("--no-report", action="store_true",
                       help="print only the composition and gate tables, not the baseline and predictor tables "
                            "(those take about 3 s with a warm embedding cache, 7-10 s cold)")
    build.add_argument("--seed", type=int, default=None,
                       help="build a variant release from this seed, 0 to 2**64-1 (labelled in the manifest and "
                            "card; default: the release seeds)")
    build.add_argument("--scale", type=int, default=1, metavar="K",
                       help="K times the paper's counts in every generated config, 1 to 1000 (default 1; a "
                            "labelled variant when K > 1)")
    build.add_argument("--configs", default=None, metavar="A,B",
                       help="build only these configs (comma-separated; a labelled variant), e.g. the text configs "
                            "targeted_table,targeted_table_permuted,targeted_table_column_metadata,targeted_hierarchy")
    build.add_argument("--legacy", metavar="JSONL", default=None,
                       help="build legacy_bridge from your own legacy records (format: generator/legacy/README.md) "
                            "instead of the shipped Graphviz-gallery records")
    score = sub.add_parser(
        "score", help="score a predictions JSONL against a config and print the paper-style tables",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="examples:\n"
               "  python exbind.py score --config targeted_table --predictions preds.jsonl --per-case scores.jsonl\n"
               "  python exbind.py score --config targeted_table --predictions preds.jsonl \\\n"
               "      --compare-config targeted_table_permuted --compare preds_permuted.jsonl --json report.json\n"
               "  python exbind.py score --inspect-log logs/exbind.eval\n"
               "  python exbind.py score --run runs/my-model\n"
               "  python exbind.py score --compare-runs runs/model-a runs/model-b\n"
               "prediction lines: {\"case_id\": \"...\", \"output\": \"<raw model output>\"} (optional \"config\", "
               "\"records_hash\": checked against the export)\n"
               "exit status: 0 scored; 2 unreadable/duplicate/unknown/mismatched or empty input (the reason is printed)\n",
    )
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] != ["build"]:  # the other subcommands' options come from their modules (scipy and more)
        from reports.score_cli import add_arguments as add_score_arguments
        from publishing.hub import add_push_arguments
        from predictors.cli import add_arguments as add_predict_arguments
        from predictors.run_model_cli import add_parser as add_run_model_parser
        from reports.show import add_parser as add_show_parser

        add_score_arguments(score)
        add_predict_arguments(sub)
        add_run_model_parser(sub)
        add_push_arguments(sub)
        add_show_parser(sub)
    args, unknown = parser.parse_known_args(argv)
    if unknown:  # the subcommand's own usage line (build does not load the other subcommands)
        sub.choices[args.command].error(f"unrecognized arguments: {' '.join(unknown)}")

    if args.command in ("score", "predict", "run-model"):
        from publishing.export import ExportIntegrityError, verify_export

        try:  # never read an export whose files differ from its manifest (issue 11 item 5)
            verify_export(args.export)
        except ExportIntegrityError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
    if args.command == "score":
        from reports.score_cli import run as run_score

        return run_score(args)
    if args.command == "push":
        from publishing.hub import run_push

        return run_push(args)
    if args.command == "run-model":
        from predictors.run_model_cli import run as run_model

        return run_model(args)
    if args.command == "show":
        from reports.show import run as run_show

        return run_show(args)
    if args.command == "predict":
        from predictors.cli import run as run_predict

        return run_predict(args)

    if args.command == "build":
        return _build(args, build)
    return 0


def _build(args: argparse.Namespace, build: argparse.ArgumentParser) -> int:
    """``build``: check the arguments, take the export's lock, start generating, export,
    print the report.

    The worker pool starts as soon as the lock is held and the release planned
    (:meth:`composition.release.ReleaseRun.start`); ``datasets`` and the export code are
    imported while the workers generate.
    """
    from composition.plans import check_scale
    from composition.release import ReleaseRun, check_configs
    from publishing.swap import ExportPathError, check_export_target, export_lock, resolve_out

    if not args.out.strip():
        build.error("--out is empty; name the export folder, e.g. --out ./exbind")
    max_processes = 4 * (os.cpu_count() or 1)
    if args.processes is not None and not 1 <= args.processes <= max_processes:
        build.error(f"--processes must be an integer from 1 to {max_processes} (4 per CPU), got {args.processes}")
    try:
        check_scale(args.scale)
    except ValueError as exc:
        build.error(f"--{exc}")
    if args.seed is not None and not 0 <= args.seed < 2**64:
        build.error(f"--seed must be an integer from 0 to {2**64 - 1}, got {args.seed}")
    configs = None if args.configs is None else [c.strip() for c in args.configs.split(",") if c.strip()]
    try:
        built = check_configs(configs)
    except ValueError as exc:
        build.error(f"--{exc}")
    if args.legacy is not None and "legacy_bridge" not in built:
        build.error("--legacy builds legacy_bridge, which --configs leaves out; add legacy_bridge to --configs")
    try:
        check_export_target(Path(args.out))
    except ExportPathError as exc:
        print(f"build refused: {exc}", file=sys.stderr)
        return 2
    out = Path(args.out).resolve()  # what every closing line names

    # Ctrl-C inside a C callback (cairo writing a PNG) is swallowed there and resurfaces as a
    # render error; the flag lets every refusal path report it as the interrupt it was.
    # SIGTERM and SIGHUP (`timeout`, a batch scheduler's time limit, a closed terminal) stop the
    # build the same way: the staging folder is removed and the workers stopped.
    interrupted: list[int] = []
    main_pid = os.getpid()

    def _on_stop_signal(signum, frame):
        if os.getpid() != main_pid:  # a pool worker forked before its initializer reset the handlers
            os._exit(128 + signum)
        interrupted.append(signum)
        raise KeyboardInterrupt

    def _on_unraisable(unraisable, hook=sys.unraisablehook):
        if isinstance(unraisable.exc_value, KeyboardInterrupt):  # swallowed in a C callback
            interrupted.append(signal.SIGINT)
            return
        hook(unraisable)

    stopping = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
    previous_handlers = {signum: signal.signal(signum, _on_stop_signal) for signum in stopping}
    previous_hook, sys.unraisablehook = sys.unraisablehook, _on_unraisable
    run = None
    try:
        with export_lock(resolve_out(Path(args.out))):  # export_release takes it again (re-entrant)
            # reads and checks a --legacy file: bad input is refused before any generation
            run = ReleaseRun(args.processes, legacy_path=args.legacy, seed=args.seed, scale=args.scale,
                             configs=configs, rows_only=True)
            run.start()
            import datasets  # imported while the workers generate

            from publishing.export import export_release

            datasets.disable_progress_bars()
            manifest = export_release(Path(args.out), lambda: run, show_progress=not args.quiet)
    except (Exception, KeyboardInterrupt) as exc:
        status = _build_stopped(exc, interrupted[0] if interrupted else None, out)
        if status is None:
            raise
        return status
    finally:
        if run is not None:
            run.close()
        for signum, handler in previous_handlers.items():
            signal.signal(signum, handler)
        sys.unraisablehook = previous_hook
    variant = f" (variant release {manifest['release_version']})" if manifest.get("variant") else ""
    if not args.quiet:
        try:
            from reports.report import print_release_report

            print_release_report(Path(args.out), manifest, scored=not args.no_report)
        except KeyboardInterrupt:  # the export is already complete and in place
            print(f"report interrupted; the export at {out} is complete and in place"
                  f"{variant}", file=sys.stderr)
            return 130
    print(f"export: {out}{variant}")
    return 0


def _build_stopped(exc: BaseException, signum: int | None, out: Path) -> int | None:
    """Print the one line for a build that stopped on ``exc`` and return its exit status:
    128 + the signal number for a stopping signal (``signum``: SIGINT gives 130, SIGTERM 143;
    also when the signal surfaced as another error; a bare KeyboardInterrupt counts as
    SIGINT), 2 for a refusal (unusable ``--out``, another build holding the lock, a full disk,
    a bad legacy file, a failed gate, suite check or export check). None for anything else (a
    bug: the caller re-raises it). Every message says what became of the previous export at
    ``out``."""
    from composition.release import SuiteCheckError
    from generator.legacy.bridge import NoEligibleLegacyRecords
    from generator.legacy.converter import LegacyRecordError
    from publishing.swap import BuildInterrupted, ExportPathError, kept_export

    if isinstance(exc, KeyboardInterrupt):
        signum = signum or signal.SIGINT
    if signum is not None:
        name = "" if signum == signal.SIGINT else f" by {signal.Signals(signum).name}"
        if isinstance(exc, BuildInterrupted):
            print(exc.message(name), file=sys.stderr)
        else:
            print(f"build interrupted{name}; {kept_export(out)}", file=sys.stderr)
        return 128 + signum
    if isinstance(exc, (LegacyRecordError, NoEligibleLegacyRecords, SuiteCheckError, ExportPathError)):
        refusal = f"build refused: {exc}"
        if not isinstance(exc, ExportPathError):  # an unusable --out or a held lock touched nothing
            refusal += f"; {kept_export(out)}"
    else:
        from publishing.card import CardCheckError  # imported by then if the export check ran

        if not isinstance(exc, CardCheckError):
            return None
        refusal = f"build refused: the export failed its checks; {kept_export(out)}\n{exc}"
    print(refusal, file=sys.stderr)
    return 2


def console_main() -> None:
    """The ``exbind`` console command (installed by ``pip install .``): ``exbind build`` etc.
    Ctrl-C that a subcommand does not report itself is one line and exit status 130; a
    closed stdout (a pipe into ``head``) ends the command quietly with status 141."""
    try:
        code = main()
        sys.stdout.flush()  # a closed pipe shows here, not as an "Exception ignored" at shutdown
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        code = 130
    except BrokenPipeError:  # stdout closed early (`exbind score ... | head`): stop quietly, as cat does
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        code = 141
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the work is done: Ctrl-C during shutdown changes nothing
    # The collections at interpreter shutdown walk every object the libraries created (about
    # 0.15 s once datasets is imported); frozen objects are skipped, and the process ends anyway.
    gc.freeze()
    sys.exit(code)


if __name__ == "__main__":
    console_main()
