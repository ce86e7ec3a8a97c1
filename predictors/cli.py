"""The ``predict`` subcommand: run a predictor over one config and write its predictions.

Wired into ``exbind.py`` through :func:`add_arguments` and :func:`run`; also runnable
alone as ``python -m predictors.cli predict ...``::

    python exbind.py predict --config targeted_table --predictor rank_bm25 --out preds/bm25.jsonl
    python exbind.py predict --config broad --predictor rank_rrf --fuse bm25,minilm --out preds/rrf.jsonl
    python exbind.py score --config targeted_table --predictions preds/bm25.jsonl

Exit status: 0 written; 2 for input it cannot use (missing export, unknown config, bad
``--fuse``, an ``--out`` that cannot be written), with the reason on stderr.
"""

from __future__ import annotations

import argparse
import sys
from typing import Optional

from composition.release import config_name_error
from generator.files import OutputPathError, cannot_write, check_output_path
from predictors import DEFAULT_FUSE, DEFAULT_SEED, PREDICTORS, load_config_rows, predict, write_jsonl

EPILOG = (
    "examples:\n"
    "  python exbind.py predict --config targeted_table --predictor lexical_only --out preds/lexical.jsonl\n"
    "  python exbind.py predict --config broad --predictor rank_minilm --out preds/minilm.jsonl\n"
    "  python exbind.py predict --config broad --predictor rank_rrf --fuse bm25,minilm --out preds/rrf.jsonl\n"
    "  python exbind.py score --config broad --predictions preds/rrf.jsonl\n"
    "predictors:\n"
    "  random, lexical_only, type_only, structural_oracle   gate baselines (the three gates abstain on ties)\n"
    "  rank_random, rank_jaccard, rank_bm25, rank_minilm    rankers over candidate_text (ties: sha256 rule)\n"
    "  rank_rrf                                             reciprocal-rank fusion (k=60) of --fuse\n"
    "  rank_oracle_minrank                                  best gold rank among --fuse (reads gold: diagnostic only)\n"
    "output lines: {\"case_id\", \"config\", \"records_hash\", \"output\", \"predictor\", ...}; rankers: output = {\"ranking\": [...]}\n"
)


def add_arguments(subparsers) -> argparse.ArgumentParser:
    """Add the ``predict`` subparser to an ``argparse`` subparsers object and return it."""
    p = subparsers.add_parser(
        "predict", help="run a baseline or ranker over a config and write predictions JSONL",
        description="Run one predictor over the rows of one config and write a predictions JSONL "
                    "(atomically) that `exbind.py score` reads.",
        formatter_class=argparse.RawDescriptionHelpFormatter, epilog=EPILOG,
    )
    p.add_argument("--config", required=True, help="config name, e.g. broad, targeted_table")
    p.add_argument("--predictor", required=True, choices=PREDICTORS, metavar="NAME",
                   help=f"one of: {', '.join(PREDICTORS)}")
    p.add_argument("--export", default="exbind", help="export folder (default ./exbind)")
    p.add_argument("--out", required=True, help="predictions JSONL to write (replaced atomically)")
    p.add_argument("--fuse", default=None,
                   help=f"comma-separated rankers for rank_rrf / rank_oracle_minrank "
                        f"(default {','.join(n.removeprefix('rank_') for n in DEFAULT_FUSE)})")
    p.add_argument("--seed", type=int, default=DEFAULT_SEED,
                   help=f"seed of random / rank_random (default {DEFAULT_SEED})")
    return p


def run(args: argparse.Namespace) -> int:
    """Execute a parsed ``predict`` command; returns the exit status (0 or 2)."""
    config_error = config_name_error("--config", args.config)
    if config_error:
        print(f"predict: {config_error}", file=sys.stderr)
        return 2
    try:
        check_output_path("--out", args.out, export=args.export)
    except OutputPathError as exc:
        print(f"predict: {exc}", file=sys.stderr)
        return 2
    try:
        rows = load_config_rows(args.export, args.config)
    except (FileNotFoundError, ValueError) as exc:
        print(f"predict: {exc}", file=sys.stderr)
        return 2
    try:
        preds = predict(rows, args.predictor, seed=args.seed, fuse=args.fuse,
                        show_progress=sys.stderr.isatty())
    except ValueError as exc:
        print(f"predict: {exc}", file=sys.stderr)
        return 2
    from predictors.run_files import identity_fields

    identity = identity_fields(args.export, args.config)
    try:
        path = write_jsonl(args.out, [{"case_id": p["case_id"], **identity, **p} for p in preds])
    except OSError as exc:  # the path turned unwritable after the check
        print(f"predict: {cannot_write('--out', args.out, exc.strerror or type(exc).__name__)}", file=sys.stderr)
        return 2
    abstained = sum(p["output"] == "" for p in preds)
    note = f" ({abstained} abstentions)" if args.predictor in ("lexical_only", "type_only", "structural_oracle") else ""
    print(f"predict: {len(preds)} predictions of {args.predictor} on {args.config}{note} -> {path}")
    return 0


def main(argv: Optional[list[str]] = None) -> int:
    """Stand-alone entry point: ``python -m predictors.cli predict ...``."""
    parser = argparse.ArgumentParser(prog="predictors.cli")
    sub = parser.add_subparsers(dest="command", required=True)
    add_arguments(sub)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
