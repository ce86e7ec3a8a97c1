"""ExBind: the ``datasets`` builder and the release command line.

The builder (:class:`ExBind`) materializes every configuration as a ``test`` split from
the generator (``datasets`` 4+ no longer runs dataset scripts, so it is used from Python
and by the export, not through a script path)::

    builder = ExBind(config_name="targeted_table", cache_dir=tmp)
    builder.download_and_prepare()
    ds = builder.as_dataset(split="test")

The command line builds and exports the release and prints the report::

    python exbind.py build [--out DIR] [--processes N] [--seed S] [--scale K]

writes a Hub-ready folder (default ``./exbind``): ``README.md`` (the card plus generated
YAML ``configs:`` and ``dataset_info``), ``data/<config>/test-*.parquet`` and
``exbind_manifest.json``; after it ``datasets.load_dataset("exbind", "targeted_table",
split="test")`` works from the repository root.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from pathlib import Path

import datasets

sys.path.insert(0, str(Path(__file__).resolve().parent))

from generator.records import FEATURES, GENERATOR_VERSION  # noqa: E402
from composition.release import (CONFIGS, RELEASE_VERSION, Release, ReleaseRun, SuiteCheckError,  # noqa: E402
                                 build_release, check_configs)
from publishing.export import DESCRIPTIONS, config_description  # noqa: E402
from tqdm.auto import tqdm  # noqa: E402

_RELEASE_CACHE: dict[str, Release] = {}


def release(processes: int | None = None, show_progress: bool = False, legacy_path: str | None = None,
            seed: int | None = None, scale: int = 1) -> Release:
    """The release of this generator version (and legacy JSONL), generated and gated once per process.

    ``seed`` / ``scale`` make a labelled variant release (:func:`composition.release.build_release`).
    """
    key = (GENERATOR_VERSION, legacy_path, seed, scale)
    if key not in _RELEASE_CACHE:
        with tqdm(desc="generate + gate latents", disable=not show_progress) as bar:
            _RELEASE_CACHE[key] = build_release(processes, progress=bar, legacy_path=legacy_path, seed=seed,
                                                scale=scale)
    return _RELEASE_CACHE[key]


class ExBindConfig(datasets.BuilderConfig):
    """One ExBind configuration (a name of :data:`composition.release.CONFIGS`)."""


class ExBind(datasets.GeneratorBasedBuilder):
    """ExBind executable-correspondence benchmark builder (docs/specification.md §2, §6).

    Every config has one ``test`` split with the features of
    :data:`generator.records.FEATURES`. Build in a fresh ``cache_dir`` (the export does):
    a builder without a content hash reuses its Arrow cache across code changes.
    """

    VERSION = datasets.Version(RELEASE_VERSION)
    BUILDER_CONFIGS = [ExBindConfig(name=name, version=datasets.Version(RELEASE_VERSION), description=DESCRIPTIONS[name])
                       for name in CONFIGS]
    DEFAULT_CONFIG_NAME = "broad"
    # The release the builder reads; None: the default release (:func:`release`).
    active_release: Release | None = None

    def _info(self) -> datasets.DatasetInfo:
        rel = type(self).active_release
        description = config_description(self.config.name, rel) if rel is not None else DESCRIPTIONS[self.config.name]
        return datasets.DatasetInfo(description=description, features=FEATURES, license="cc-by-4.0")

    def _split_generators(self, dl_manager):
        return [datasets.SplitGenerator(name=datasets.Split.TEST)]

    def _generate_examples(self):
        rel = type(self).active_release or release()
        for index, record in enumerate(rel.configs[self.config.name]):
            yield index, record.to_row()


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
    build.add_argument("--processes", type=int, default=None, help="generation processes (output is identical)")
    build.add_argument("--quiet", action="store_true", help="print only the export path")
    build.add_argument("--no-report", action="store_true",
                       help="print only the composition and gate tables, not the baseline and predictor tables "
                            "(those take about 3 s with a warm embedding cache, 7-10 s cold)")
    build.add_argument("--seed", type=int, default=None,
                       help="build a variant release from this seed (labelled in the manifest and card; "
                            "default: the release seeds)")
    build.add_argument("--scale", type=int, default=1, metavar="K",
                       help="K times the paper's counts in every generated config (a labelled variant when K > 1)")
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
    args = parser.parse_args(argv)

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
        from publishing.export import (BuildInterrupted, ExportPathError, check_export_target, export_release,
                                       kept_export)
        from reports.report import print_release_report

        from composition.plans import check_scale

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

        from publishing.card import CardCheckError
        from generator.legacy.bridge import NoEligibleLegacyRecords
        from generator.legacy.converter import LegacyRecordError

        datasets.disable_progress_bars()
        # Ctrl-C inside a C callback (cairo writing a PNG) is swallowed there and resurfaces as a
        # render error; the flag lets every refusal path report it as the interrupt it was.
        interrupted: list[int] = []

        def _on_sigint(signum, frame):
            interrupted.append(signum)
            raise KeyboardInterrupt

        def _on_unraisable(unraisable, hook=sys.unraisablehook):
            if isinstance(unraisable.exc_value, KeyboardInterrupt):  # swallowed in a C callback
                interrupted.append(signal.SIGINT)
                return
            hook(unraisable)

        out = Path(args.out).resolve()  # what every closing line names
        previous_handler = signal.signal(signal.SIGINT, _on_sigint)
        previous_hook, sys.unraisablehook = sys.unraisablehook, _on_unraisable
        try:
            manifest = export_release(Path(args.out),
                                      lambda: ReleaseRun(args.processes, legacy_path=args.legacy, seed=args.seed,
                                                         scale=args.scale, configs=configs),
                                      show_progress=not args.quiet)
        except (CardCheckError, LegacyRecordError, NoEligibleLegacyRecords, SuiteCheckError,
                ExportPathError) as exc:
            if interrupted:
                print(f"build interrupted; {kept_export(out)}", file=sys.stderr)
                return 130
            if isinstance(exc, CardCheckError):
                print(f"build refused: the export failed its checks; {kept_export(out)}\n{exc}",
                      file=sys.stderr)
                return 2
            if isinstance(exc, ExportPathError):  # unwritable --out, or another build holds the lock
                print(f"build refused: {exc}", file=sys.stderr)
                return 2
            print(f"build refused: {exc}; {kept_export(out)}", file=sys.stderr)
            return 2
        except BuildInterrupted as exc:
            print(exc.message(), file=sys.stderr)
            return 130
        except KeyboardInterrupt:  # before the staging folder existed
            print(f"build interrupted; {kept_export(out)}", file=sys.stderr)
            return 130
        finally:
            signal.signal(signal.SIGINT, previous_handler)
            sys.unraisablehook = previous_hook
        variant = f" (variant release {manifest['release_version']})" if manifest.get("variant") else ""
        if not args.quiet:
            try:
                print_release_report(Path(args.out), manifest, scored=not args.no_report)
            except KeyboardInterrupt:  # the export is already complete and in place
                print(f"report interrupted; the export at {out} is complete and in place"
                      f"{variant}", file=sys.stderr)
                return 130
        print(f"export: {out}{variant}")
    return 0


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
    sys.exit(code)


if __name__ == "__main__":
    console_main()
