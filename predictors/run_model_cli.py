"""``exbind run-model``: the command line of both model backends.

``--backend transformers`` (default) runs a local Hugging Face checkpoint through
:func:`predictors.runner.run_model`; ``--backend openai`` asks an OpenAI-compatible server
through :func:`predictors.openai_backend.run_openai`. Both keep the frozen interface of
paper Table 11 (greedy, 96 new tokens, seed 42, one prompt builder) and write the same run
folder (predictions, per-case scores, manifest).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Optional

from predictors.openai_backend import run_openai
from predictors.runner import KINDS, MAX_NEW_TOKENS, SEED, RunnerError, run_model


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``exbind.py run-model`` (add them to the subcommand's parser)."""
    parser.add_argument("--backend", choices=("transformers", "openai"), default="transformers",
                        help="transformers: load --model locally (default); openai: ask an OpenAI-compatible "
                             "server at --base-url (vLLM, SGLang, TGI, llama.cpp, hosted APIs)")
    parser.add_argument("--model", required=True,
                        help="transformers: a local checkpoint folder or a Hub id already in the local Hugging Face "
                             "cache (never downloaded); openai: the served model name")
    parser.add_argument("--gguf-file", help="GGUF file name inside --model (text-only models)")
    parser.add_argument("--config", required=True, help="config to run (e.g. broad, targeted_table)")
    parser.add_argument("--export", default="exbind", type=Path, help="export folder (default ./exbind)")
    parser.add_argument("--out", required=True, type=Path,
                        help="output folder: predictions.jsonl, scores.jsonl, manifest.json (resumed if present)")
    parser.add_argument("--batch-size", type=int, default=1, help="prompts per generate call (default 1)")
    parser.add_argument("--limit", type=int, help="run only the first N rows of the config")
    parser.add_argument("--variant", choices=("image", "text"),
                        help="prompt variant (default: image for a VLM, text for an LLM)")
    parser.add_argument("--kind", choices=KINDS, help="vlm or llm (default: from the checkpoint's config)")
    parser.add_argument("--threads", type=int, help="torch.set_num_threads (fix it for reproducible outputs)")
    parser.add_argument("--dtype", default="float32", help="weight dtype (default float32)")
    parser.add_argument("--device", default="cpu", help="torch device (default cpu)")
    parser.add_argument("--max-new-tokens", type=int, default=MAX_NEW_TOKENS, help="default 96")
    parser.add_argument("--seed", type=int, default=SEED, help="default 42")
    parser.add_argument("--cache-dir", help="datasets cache folder")
    parser.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    server = parser.add_argument_group("--backend openai")
    server.add_argument("--base-url", help="API root, e.g. http://127.0.0.1:8000/v1")
    server.add_argument("--api-key-env", metavar="VAR",
                        help="environment variable holding the API key (read at run time, never written)")
    server.add_argument("--concurrency", type=int, default=4, help="requests in flight (default 4)")
    server.add_argument("--timeout", type=float, default=120.0, help="seconds per request attempt (default 120)")
    server.add_argument("--max-retries", type=int, default=4,
                        help="retries on 429/5xx/timeouts/connection errors/malformed bodies (default 4)")
    server.add_argument("--backoff", type=float, default=1.0, help="first retry wait in seconds, doubled each retry")
    server.add_argument("--retry-failed", action="store_true", help="re-ask only the cases recorded as failed")
    server.add_argument("--decoding", default="free",
                        choices=("free", "constrained-inventory", "constrained-shape"),
                        help="free (the frozen interface, default); constrained-* are labelled controls "
                             "(response_format json_schema: candidate-id enums, or the keys only)")
    server.add_argument("--response-cache", type=Path,
                        help="response cache folder (default $EXBIND_RESPONSE_CACHE or ~/.cache/exbind/responses)")


def add_parser(subparsers) -> argparse.ArgumentParser:
    """Add the ``run-model`` subcommand to an ``argparse`` subparsers object; returns its parser."""
    parser = subparsers.add_parser(
        "run-model", help="run a local Hugging Face checkpoint over a config (greedy, resumable)",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="examples:\n"
               "  python exbind.py run-model --model ./my-vlm --config broad --out runs/my-vlm/broad\n"
               "  python exbind.py run-model --model DIR --gguf-file model.gguf --kind llm --config targeted_table \\\n"
               "      --out runs/llm/targeted_table --threads 2\n"
               "  python exbind.py run-model --backend openai --base-url http://127.0.0.1:8000/v1 \\\n"
               "      --model Qwen/Qwen2.5-VL-3B-Instruct --config broad --out runs/qwen25vl/broad --concurrency 16\n"
               "exit status: 0 done; 1 some requests still failed (--retry-failed); 2 unusable input\n",
    )
    add_arguments(parser)
    return parser


def run(args: argparse.Namespace) -> int:
    """Run ``exbind.py run-model``; print the output folder and case counts.

    Returns:
        0 on success; 2 for input the runner cannot use (the reason goes to stderr).
    """
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    if args.backend == "openai":
        return _run_openai(args)
    try:
        manifest = run_model(args.model, args.config, args.out, export_dir=args.export, kind=args.kind,
                             gguf_file=args.gguf_file, variant=args.variant, batch_size=args.batch_size,
                             limit=args.limit, threads=args.threads, dtype=args.dtype, device=args.device,
                             max_new_tokens=args.max_new_tokens, seed=args.seed, cache_dir=args.cache_dir,
                             progress=not args.no_progress)
    except RunnerError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"{args.out}: {manifest['cases_done']}/{manifest['cases_total']} cases of {args.config} "
          f"({manifest['wall_time_s']} s in total)")
    return 0


def _run_openai(args: argparse.Namespace) -> int:
    if not args.base_url:
        print("error: --backend openai needs --base-url (e.g. http://127.0.0.1:8000/v1)", file=sys.stderr)
        return 2
    variant = args.variant or "image"
    try:
        manifest = run_openai(args.model, args.config, args.out, args.base_url, export_dir=args.export,
                              api_key_env=args.api_key_env, variant=variant, decoding=args.decoding,
                              concurrency=args.concurrency, timeout=args.timeout, max_retries=args.max_retries,
                              backoff=args.backoff, retry_failed=args.retry_failed, limit=args.limit,
                              response_cache=args.response_cache, max_tokens=args.max_new_tokens, seed=args.seed,
                              cache_dir=args.cache_dir, progress=not args.no_progress)
    except RunnerError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"{args.out}: {manifest['cases_done']}/{manifest['cases_total']} cases of {args.config}; "
          f"{manifest['cases_failed']} failed; {manifest['retries']} retries; {manifest['cache_hits']} cache hits "
          f"({manifest['wall_time_s']} s in total)")
    if manifest["cases_failed"]:
        print(f"{manifest['cases_failed']} case(s) failed after retries (scored unresolved); "
              "rerun with --retry-failed to re-ask only those", file=sys.stderr)
        return 1
    return 0


def main(argv: Optional[list[str]] = None) -> int:
    """``python -m predictors.run_model_cli ...``: the same arguments as ``exbind.py run-model``."""
    parser = argparse.ArgumentParser(prog="python -m predictors.run_model_cli", description=__doc__.splitlines()[0])
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
