"""OpenAI-compatible chat-completions backend of ``run-model`` (docs/specification.md §9; issue 10).

Any server that speaks the OpenAI chat-completions API (``vllm serve``, SGLang, TGI,
llama.cpp's ``llama-server``, a hosted API, or :mod:`predictors.local_server`) can be
evaluated with the frozen interface of the paper (Table 11): one prompt builder
(:func:`generator.prompt.build_prompt`), temperature 0, seed 42, at most 96 new tokens::

    python exbind.py run-model --backend openai --base-url http://127.0.0.1:8000/v1 \\
        --model Qwen/Qwen2.5-VL-3B-Instruct --config broad --out runs/qwen25vl/broad \\
        --concurrency 16 [--api-key-env OPENAI_API_KEY]

Each row becomes one request with one user message: for svg / canvas rows under the
``image`` variant the row's PNG (the exact released bytes, lossless) as a
``data:image/png;base64,...`` ``image_url`` part followed by the prompt text; every other
row sends the prompt text alone.

Robustness: ``--concurrency`` requests in flight (a thread pool sharing one client), a
per-request timeout, and up to ``--max-retries`` retries with exponential backoff
(``backoff * 2**k`` seconds, or the server's ``Retry-After`` when it sends one) on 429,
5xx, timeouts, dropped connections and malformed bodies. Other 4xx answers are not
retried. A case whose last attempt still fails is written as a failed prediction line
(``"failed": true``, ``"output": ""``, ``"error"``): it is scored ``unresolved`` with the
reason ``request failed: ...``, counted in the manifest, never dropped, and
``--retry-failed`` re-asks exactly those cases.

Resume and cache: cases already in ``predictions.jsonl`` are skipped on a re-run (the
file is rewritten atomically in config row order, so it never holds a case twice), and
every successful response is stored in an on-disk cache keyed by the SHA-256 of the
canonical JSON request body (model, messages, decoding), so repeating a run, even into a
new folder, sends no request at all. The API key is read from the environment variable
named by ``--api-key-env`` and never written anywhere.
"""

from __future__ import annotations

import base64
import concurrent.futures as cf
import hashlib
import json
import os
import threading
import time
from pathlib import Path
from typing import Any, Optional, Sequence
from urllib.parse import urlsplit, urlunsplit

BACKEND_VERSION = "exbind.openai_backend.v1"
DECODING_MODES = ("free", "constrained-inventory", "constrained-shape")
DEFAULT_TIMEOUT_S = 120.0
DEFAULT_MAX_RETRIES = 4
DEFAULT_BACKOFF_S = 1.0
MAX_BACKOFF_S = 60.0
CASE_HEADER = "X-ExBind-Case-Id"
_RESUME_KEYS = ("backend", "model", "variant", "decoding", "prompt_builder_sha256")


# --------------------------------------------------------------------------- requests


def image_data_url(png: bytes) -> str:
    """``data:image/png;base64,...`` of PNG bytes (lossless: the bytes are not re-encoded)."""
    return "data:image/png;base64," + base64.b64encode(png).decode("ascii")


def build_messages(row: dict, variant: str, png: Optional[bytes]) -> list[dict]:
    """The chat messages of one row: a single user turn.

    Args:
        row: a dataset row (``format``, ``instruction``, ``observation``, ``candidates``,
            ``output_schema``).
        variant: ``"image"`` or ``"text"`` (:func:`generator.prompt.build_prompt`).
        png: the row's released PNG bytes, or None.

    Returns:
        ``[{"role": "user", "content": ...}]``: a list ``[image_url part, text part]`` for
        svg / canvas rows under ``"image"`` (the prompt then refers to the attached image),
        else the prompt string.

    Raises:
        ValueError: an svg / canvas row under ``"image"`` without PNG bytes.
    """
    from generator.prompt import RENDERED_FORMATS, build_prompt

    text = build_prompt(row, variant)
    if variant == "image" and row["format"] in RENDERED_FORMATS:
        if not png:
            raise ValueError(f"{row['case_id']}: the image variant needs the row's PNG, and the row has none")
        content: Any = [{"type": "image_url", "image_url": {"url": image_data_url(png)}},
                        {"type": "text", "text": text}]
    else:
        content = text
    return [{"role": "user", "content": content}]


def response_format(row: dict, mode: str) -> Optional[dict]:
    """The ``response_format`` of a decoding mode (a labelled control, never the headline).

    Args:
        row: a dataset row (``format``, ``candidates``).
        mode: ``"free"`` (None: the frozen interface), ``"constrained-shape"`` (a JSON
            object with exactly the format's output keys, string values) or
            ``"constrained-inventory"`` (each key's value an enum of the case's candidate
            ids, in released order; graph: two enums, ``source_id`` and ``target_id``).

    Returns:
        ``{"type": "json_schema", "json_schema": {"name", "strict", "schema"}}`` or None.

    Raises:
        ValueError: for an unknown mode.
    """
    from exbind_scoring import OUTPUT_KEYS

    if mode not in DECODING_MODES:
        raise ValueError(f"decoding={mode!r}; expected one of {DECODING_MODES}")
    if mode == "free":
        return None
    value: dict = {"type": "string"}
    if mode == "constrained-inventory":
        value["enum"] = [c["candidate_id"] for c in row["candidates"]]
    keys = list(OUTPUT_KEYS[row["format"]])
    schema = {"type": "object", "properties": {k: dict(value) for k in keys}, "required": keys,
              "additionalProperties": False}
    return {"type": "json_schema", "json_schema": {"name": "exbind_reference", "strict": True, "schema": schema}}


def request_body(model: str, messages: list[dict], max_tokens: int, seed: int,
                 fmt: Optional[dict] = None) -> dict:
    """The chat-completions request body: temperature 0, ``seed``, ``max_tokens``, n = 1."""
    body = {"model": model, "messages": messages, "temperature": 0.0, "seed": int(seed),
            "max_tokens": int(max_tokens), "n": 1}
    if fmt is not None:
        body["response_format"] = fmt
    return body


def cache_key(body: dict) -> str:
    """SHA-256 hex of the canonical JSON of a request body (model, messages, decoding)."""
    return hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":"),
                                     ensure_ascii=False).encode("utf-8")).hexdigest()


class ResponseCache:
    """Successful responses on disk, one JSON file per :func:`cache_key` (``ab/abcd....json``).

    Writes are atomic (temporary file + ``os.replace``), so concurrent workers and a killed
    run never leave a half-written entry.
    """

    def __init__(self, root: Path):
        self.root = Path(root)

    def _path(self, key: str) -> Path:
        return self.root / key[:2] / f"{key}.json"

    def get(self, key: str) -> Optional[dict]:
        """The stored response dict, or None (also for an unreadable entry)."""
        try:
            return json.loads(self._path(key).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None

    def put(self, key: str, value: dict) -> None:
        """Store a response dict under ``key``."""
        path = self._path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f"{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
        tmp.write_text(json.dumps(value, ensure_ascii=False), encoding="utf-8")
        os.replace(tmp, path)


def default_cache_dir() -> Path:
    """``$EXBIND_RESPONSE_CACHE``, else ``$XDG_CACHE_HOME/exbind/responses`` (``~/.cache``)."""
    if os.environ.get("EXBIND_RESPONSE_CACHE"):
        return Path(os.environ["EXBIND_RESPONSE_CACHE"])
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "exbind" / "responses"


# --------------------------------------------------------------------------- one request


class _Retryable(Exception):
    """A transient failure (429, 5xx, timeout, connection, malformed body)."""

    def __init__(self, message: str, retry_after: Optional[float] = None):
        super().__init__(message)
        self.retry_after = retry_after


def _retry_after(exc) -> Optional[float]:
    response = getattr(exc, "response", None)
    value = response.headers.get("retry-after") if response is not None else None
    try:
        return max(0.0, float(value)) if value is not None else None
    except ValueError:
        return None


def _one_attempt(client, body: dict, case_id: str) -> dict:
    import openai

    try:
        resp = client.chat.completions.create(**body, extra_headers={CASE_HEADER: case_id})
    except openai.APITimeoutError:
        raise _Retryable("timeout") from None
    except openai.APIConnectionError as exc:
        raise _Retryable(f"connection error ({exc.__cause__ or exc})") from None
    except openai.APIStatusError as exc:
        if exc.status_code == 429 or exc.status_code >= 500:
            raise _Retryable(f"HTTP {exc.status_code}", _retry_after(exc)) from None
        raise
    except (ValueError, openai.APIResponseValidationError) as exc:  # body is not JSON
        raise _Retryable(f"malformed response body ({type(exc).__name__})") from None
    try:
        choice = resp.choices[0]
        content = choice.message.content
        if content is not None and not isinstance(content, str):
            raise TypeError(type(content).__name__)
        usage = getattr(resp, "usage", None)
        return {"output": content or "", "finish_reason": choice.finish_reason,
                "prompt_tokens": getattr(usage, "prompt_tokens", None),
                "output_tokens": getattr(usage, "completion_tokens", None),
                "served_model": getattr(resp, "model", None)}
    except (AttributeError, IndexError, KeyError, TypeError) as exc:
        raise _Retryable(f"malformed response body (no choices[0].message.content: {exc})") from None


def ask(client, body: dict, case_id: str, max_retries: int = DEFAULT_MAX_RETRIES,
        backoff: float = DEFAULT_BACKOFF_S, sleep=time.sleep) -> dict:
    """Send one request with retries.

    Args:
        client: an ``openai.OpenAI`` client built with ``max_retries=0`` (retries are
            counted here).
        body: :func:`request_body`.
        case_id: sent as the ``X-ExBind-Case-Id`` header (logs; no gold information).
        max_retries: retries after the first attempt (>= 0).
        backoff: first backoff in seconds; attempt k waits ``backoff * 2**k`` (capped at
            60 s), or the server's ``Retry-After``.

    Returns:
        ``{"ok": True, "attempts", "output", "finish_reason", "prompt_tokens",
        "output_tokens", "served_model"}`` or ``{"ok": False, "attempts", "error"}``.
    """
    import openai

    error = None
    for attempt in range(max_retries + 1):
        try:
            return {"ok": True, "attempts": attempt + 1, **_one_attempt(client, body, case_id)}
        except _Retryable as exc:
            error = str(exc)
            if attempt < max_retries:
                wait = exc.retry_after if exc.retry_after is not None else backoff * (2 ** attempt)
                sleep(min(MAX_BACKOFF_S, wait))
        except openai.APIStatusError as exc:  # 4xx other than 429: the request itself is wrong
            return {"ok": False, "attempts": attempt + 1, "error": f"HTTP {exc.status_code}: {exc.message}"}
    return {"ok": False, "attempts": max_retries + 1, "error": f"{error} after {max_retries + 1} attempt(s)"}


# --------------------------------------------------------------------------- server identity


def public_base_url(url: str) -> str:
    """The base URL without user info, query or fragment (what the manifest records)."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if parts.port:
        host = f"{host}:{parts.port}"
    return urlunsplit((parts.scheme, host, parts.path.rstrip("/"), "", ""))


def server_info(base_url: str, api_key: str, timeout: float) -> dict:
    """What the server says about itself: ``{"served_models": [ids] | None,
    "server_version": str | None}`` from ``GET {base}/models`` and ``GET /version`` at the
    server root (vLLM's route); an endpoint that fails gives None."""
    import httpx

    base = base_url.rstrip("/")
    root = base[: -len("/v1")] if base.endswith("/v1") else base
    headers = {"Authorization": f"Bearer {api_key}"}
    out: dict = {"served_models": None, "server_version": None}
    try:
        with httpx.Client(timeout=timeout, headers=headers) as http:
            try:
                data = http.get(f"{base}/models").json()
                out["served_models"] = [m["id"] for m in data["data"]]
            except (httpx.HTTPError, ValueError, KeyError, TypeError):
                pass
            try:
                r = http.get(f"{root}/version")
                if r.status_code == 200:
                    version = r.json().get("version")
                    out["server_version"] = str(version) if version is not None else None
            except (httpx.HTTPError, ValueError, AttributeError):
                pass
    except httpx.HTTPError:
        pass
    return out


# --------------------------------------------------------------------------- the run


def load_png_rows(export_dir: Path, config: str, cache_dir: Optional[str] = None):
    """The config's rows with the image column undecoded: ``(rows without image, [png bytes | None])``."""
    import datasets

    from predictors.runner import load_rows

    ds = load_rows(export_dir, config, cache_dir=cache_dir)
    pngs: list = [None] * len(ds)
    if "image" in ds.column_names:
        raw = ds.cast_column("image", datasets.Image(decode=False))["image"]
        pngs = [img["bytes"] if img else None for img in raw]
        ds = ds.remove_columns(["image"])
    return list(ds), pngs


def run_openai(model: str, config: str, out_dir, base_url: str, export_dir="exbind",
               api_key_env: Optional[str] = None, variant: str = "image", decoding: str = "free",
               concurrency: int = 4, timeout: float = DEFAULT_TIMEOUT_S, max_retries: int = DEFAULT_MAX_RETRIES,
               backoff: float = DEFAULT_BACKOFF_S, retry_failed: bool = False, limit: Optional[int] = None,
               case_ids: Optional[Sequence[str]] = None, response_cache: Optional[Path] = None,
               max_tokens: Optional[int] = None, seed: Optional[int] = None, cache_dir: Optional[str] = None,
               progress: bool = True) -> dict:
    """Run a served model over one config; write ``predictions.jsonl``, ``scores.jsonl`` and
    ``manifest.json`` into ``out_dir`` (the same files as the transformers runner).

    Args:
        model: the model name the server serves (the request's ``model``).
        config, out_dir, export_dir, limit, case_ids, cache_dir: as :func:`predictors.runner.run_model`.
        base_url: the API root, e.g. ``http://127.0.0.1:8000/v1``.
        api_key_env: name of the environment variable holding the API key (None: the
            placeholder key ``"EMPTY"``, which vLLM and local servers accept).
        variant: ``"image"`` (default; svg / canvas rows send their PNG) or ``"text"``.
        decoding: one of :data:`DECODING_MODES` (:func:`response_format`).
        concurrency: requests in flight (>= 1).
        timeout: seconds per request attempt (> 0).
        max_retries, backoff: see :func:`ask`.
        retry_failed: re-ask only the cases stored as failed (nothing else).
        response_cache: cache folder (default :func:`default_cache_dir`).
        max_tokens, seed: default 96 and 42 (paper Table 11).
        progress: show a ``tqdm`` bar (throughput, failures, retries).

    Returns:
        The manifest (also written): ``backend``, ``base_url`` (no secrets), ``model``,
        ``served_model``, ``served_models``, ``server_version``, ``concurrency``,
        ``timeout_s``, ``max_retries``, ``decoding`` (``mode``, temperature, seed,
        max_tokens), ``variant``, ``prompt_builder_sha256``, ``dataset``, ``sessions``
        (per call: cases, requests, retries, failed, cache_hits, wall time), totals
        ``requests``, ``retries``, ``cache_hits``, ``cases_failed`` (failed cases now in the
        file), ``cases_done``, ``cases_total`` and ``finished``.

    Raises:
        RunnerError: unusable arguments (the message names the flag).
        RunSettingsMismatch: resuming a folder made with another model, variant, decoding,
            prompt builder or data.
    """
    import openai
    from tqdm.auto import tqdm

    from generator.prompt import PROMPT_VARIANTS, prompt_builder_hash
    from predictors.runner import (MAX_NEW_TOKENS, PREDICTIONS_FILE, SEED, RunnerError, RunSettingsMismatch,
                                   _now, _write_json_atomic, export_identity, package_versions, read_done)
    from predictors.run_files import write_predictions_and_scores

    max_tokens = MAX_NEW_TOKENS if max_tokens is None else int(max_tokens)
    seed = SEED if seed is None else int(seed)
    if variant not in PROMPT_VARIANTS:
        raise RunnerError(f"--variant {variant!r}; expected one of {PROMPT_VARIANTS}")
    if decoding not in DECODING_MODES:
        raise RunnerError(f"--decoding {decoding!r}; expected one of {DECODING_MODES}")
    if concurrency < 1:
        raise RunnerError(f"--concurrency {concurrency}; expected >= 1")
    if not timeout or timeout <= 0:
        raise RunnerError(f"--timeout {timeout}; expected seconds > 0")
    if max_retries < 0:
        raise RunnerError(f"--max-retries {max_retries}; expected >= 0")
    if not base_url or urlsplit(base_url).scheme not in ("http", "https"):
        raise RunnerError(f"--base-url {base_url!r}; expected an http(s) URL such as http://127.0.0.1:8000/v1")
    api_key = "EMPTY"
    if api_key_env:
        api_key = os.environ.get(api_key_env, "")
        if not api_key:
            raise RunnerError(f"--api-key-env {api_key_env}: the environment variable is not set (export it first)")

    started = time.time()
    out_dir = Path(out_dir)
    dataset = export_identity(export_dir, config)
    rows, pngs = load_png_rows(export_dir, config, cache_dir)
    load_time = round(time.time() - started, 3)
    all_ids = [r["case_id"] for r in rows]
    selected = list(range(len(rows)))
    if case_ids is not None:
        unknown = sorted(set(case_ids) - set(all_ids))
        if unknown:
            raise RunnerError(f"case ids not in config {config!r}: {', '.join(unknown[:10])}")
        wanted = set(case_ids)
        selected = [i for i in selected if all_ids[i] in wanted]
    if limit is not None:
        selected = selected[: max(0, int(limit))]

    manifest: dict = {
        "runner_version": BACKEND_VERSION,
        "backend": "openai",
        "base_url": public_base_url(base_url),
        "model": model,
        "api_key_env": api_key_env,
        "served_model": None, "served_models": None, "server_version": None,
        "concurrency": int(concurrency), "timeout_s": float(timeout), "max_retries": int(max_retries),
        "backoff_s": float(backoff),
        "decoding": {"mode": decoding, "temperature": 0.0, "seed": seed, "max_tokens": max_tokens, "n": 1},
        "variant": variant,
        "prompt_builder_sha256": prompt_builder_hash(),
        "dataset": dataset,
        "packages": package_versions(("openai", "httpx", "datasets", "pillow")),
    }
    out_dir.mkdir(parents=True, exist_ok=True)
    manifest_path = out_dir / "manifest.json"
    stored = json.loads(manifest_path.read_text(encoding="utf-8")) if manifest_path.is_file() else None
    done = {d["case_id"]: d for d in read_done(out_dir / PREDICTIONS_FILE)}
    if stored is not None:
        for key in _RESUME_KEYS:
            if stored.get(key) != manifest[key]:
                raise RunSettingsMismatch(f"{out_dir}: cannot resume: {key} differs from the stored manifest "
                                          f"({stored.get(key)!r} stored, {manifest[key]!r} now); use a new --out folder")
        for key in ("config", "canonical_records_sha256", "generator_version"):
            if stored["dataset"].get(key) != dataset[key]:
                raise RunSettingsMismatch(f"{out_dir}: cannot resume: dataset {key} differs from the stored manifest")
        for key in ("served_model", "served_models", "server_version"):
            manifest[key] = stored.get(key)
    elif done:
        raise RunSettingsMismatch(f"{out_dir}: predictions exist without a manifest.json; use a new --out folder")
    if retry_failed:
        todo = [i for i in selected if done.get(all_ids[i], {}).get("failed")]
    else:
        todo = [i for i in selected if all_ids[i] not in done]

    session = {"started": _now(), "cases": 0, "requests": 0, "retries": 0, "failed": 0, "cache_hits": 0,
               "retry_failed": bool(retry_failed), "load_time_s": load_time, "wall_time_s": None}
    manifest["sessions"] = list(stored.get("sessions", [])) if stored else []
    manifest["sessions"].append(session)
    cache = ResponseCache(response_cache or default_cache_dir())
    references = {r["case_id"]: r["reference"] for r in rows}

    def checkpoint(final: bool) -> None:
        session["wall_time_s"] = round(time.time() - started, 3)
        for key in ("requests", "retries", "cache_hits"):
            manifest[key] = sum(s.get(key, 0) for s in manifest["sessions"])
        manifest["wall_time_s"] = round(sum(s["wall_time_s"] or 0 for s in manifest["sessions"]), 3)
        manifest["cases_failed"] = sum(1 for d in done.values() if d.get("failed"))
        manifest["cases_done"] = write_predictions_and_scores(out_dir, all_ids, references, done)
        manifest["cases_total"] = len(all_ids)
        manifest["finished"] = _now() if final else None
        _write_json_atomic(manifest_path, manifest)

    if not todo:
        checkpoint(final=True)
        return manifest
    info = server_info(base_url, api_key, timeout)
    manifest["served_models"], manifest["server_version"] = info["served_models"], info["server_version"]
    client = openai.OpenAI(base_url=base_url, api_key=api_key, timeout=timeout, max_retries=0)
    lock = threading.Lock()

    def work(i: int) -> dict:
        row = rows[i]
        t0 = time.time()
        body = request_body(model, build_messages(row, variant, pngs[i]), max_tokens, seed,
                            response_format(row, decoding))
        key = cache_key(body)
        hit = cache.get(key)
        if hit is not None:
            return {**hit, "ok": True, "attempts": 0, "cached": True, "seconds": round(time.time() - t0, 3)}
        result = ask(client, body, row["case_id"], max_retries, backoff)
        if result["ok"]:
            cache.put(key, {k: result[k] for k in ("output", "finish_reason", "prompt_tokens", "output_tokens",
                                                   "served_model")})
        return {**result, "cached": False, "seconds": round(time.time() - t0, 3)}

    bar = tqdm(total=len(todo), desc=f"{config} ({model})", unit="case", disable=not progress)
    last = time.time()
    pool = cf.ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="exbind-openai")
    try:
        futures = {pool.submit(work, i): i for i in todo}
        for fut in cf.as_completed(futures):
            i = futures[fut]
            res = fut.result()
            line = {"case_id": all_ids[i], "config": config, "records_hash": dataset["canonical_records_sha256"]}
            if res["ok"]:
                line.update({k: res.get(k) for k in ("output", "finish_reason", "prompt_tokens", "output_tokens",
                                                     "served_model")})
                line.update({"failed": False, "error": None})
                manifest["served_model"] = manifest["served_model"] or res.get("served_model")
            else:
                line.update({"output": "", "finish_reason": None, "failed": True, "error": res["error"]})
            line.update({"attempts": res["attempts"], "cached": res["cached"], "seconds": res["seconds"]})
            with lock:
                done[all_ids[i]] = line
                session["cases"] += 1
                session["requests"] += res["attempts"]
                session["retries"] += max(0, res["attempts"] - 1)
                session["failed"] += 0 if res["ok"] else 1
                session["cache_hits"] += 1 if res["cached"] else 0
            bar.set_postfix(failed=session["failed"], retries=session["retries"], cached=session["cache_hits"],
                            refresh=False)
            bar.update(1)
            if time.time() - last >= 2.0:
                checkpoint(final=False)
                last = time.time()
    except BaseException:
        pool.shutdown(wait=False, cancel_futures=True)
        checkpoint(final=False)
        raise
    finally:
        bar.close()
    pool.shutdown(wait=True)
    client.close()
    checkpoint(final=True)
    return manifest
