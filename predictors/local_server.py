"""A small OpenAI-compatible server on 127.0.0.1 in front of a local model (issue 10).

It serves ``POST /v1/chat/completions``, ``GET /v1/models`` and ``GET /version`` (the
routes ``run-model --backend openai`` uses, shaped as vLLM answers them) with the standard
library's ``ThreadingHTTPServer``. Two models:

- :class:`TransformersChatModel`: a local checkpoint through
  :func:`predictors.runner.load_model` / :func:`predictors.runner.generate_batch` (greedy;
  ``max_tokens`` honoured; data-URL images go to a VLM's processor), e.g. SmolLM2::

      python -m predictors.local_server --model DIR --gguf-file SmolLM2-135M-Instruct.Q4_1.gguf \\
          --served-model-name smollm2 --port 8000

- :class:`FirstCandidateModel` (``--model first-candidate``): a fast deterministic
  stand-in that answers every key of the schema line with the first candidate id of the
  prompt (or the first enum value of a ``json_schema`` response format). It reads no gold
  and exists to measure the client's throughput and to test the plumbing.

Fault injection (:class:`FaultPlan`) makes the server misbehave on chosen cases, keyed by
the ``X-ExBind-Case-Id`` request header: ``"429"`` (with ``Retry-After: 0``), ``"500"``,
``"slow"`` (sleeps ``slow_s`` before answering), ``"malformed"`` (HTTP 200 with a body that
is not JSON) and ``"drop"`` (closes the connection without an answer). Every request is
logged (:attr:`OpenAICompatServer.log`).

Single-user, localhost only; not a production server.
"""

from __future__ import annotations

import argparse
import base64
import io
import json
import re
import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Optional

SERVER_VERSION = "exbind-local-server/1"
FAULTS = ("429", "500", "slow", "malformed", "drop")
_SCHEMA_LINE = re.compile(r"Return strict JSON only with this schema: (\{.*\})\s*$")


def split_content(messages: list[dict]) -> tuple[str, list[bytes]]:
    """The text and the data-URL image bytes of the last user message.

    Raises:
        ValueError: no user message, an unknown content part, or an image URL that is not
            a base64 data URL.
    """
    users = [m for m in messages if isinstance(m, dict) and m.get("role") == "user"]
    if not users:
        raise ValueError("messages: no user message")
    content = users[-1].get("content")
    if isinstance(content, str):
        return content, []
    texts, images = [], []
    for part in content or []:
        if part.get("type") == "text":
            texts.append(part["text"])
        elif part.get("type") == "image_url":
            url = part["image_url"]["url"]
            if not url.startswith("data:image/") or ";base64," not in url:
                raise ValueError("image_url: only base64 data URLs are accepted")
            images.append(base64.b64decode(url.split(";base64,", 1)[1]))
        else:
            raise ValueError(f"content part type {part.get('type')!r} is not supported")
    return "\n".join(texts), images


class FirstCandidateModel:
    """Answers ``{key: first candidate id}`` for every key of the prompt's schema line.

    ``images_seen`` collects the PNG bytes of every request (tests check they arrive intact).
    """

    kind = "first-candidate"

    def __init__(self, latency_s: float = 0.0):
        """``latency_s``: seconds each completion sleeps (a stand-in for decode time, so
        that client concurrency has something to overlap)."""
        self.images_seen: list[bytes] = []
        self.latency_s = latency_s
        self._lock = threading.Lock()

    def generate(self, messages: list[dict], max_tokens: int, response_format: Optional[dict] = None) -> dict:
        """One completion: ``{"text", "finish_reason", "prompt_tokens", "completion_tokens"}``
        (tokens counted as whitespace-separated words)."""
        text, images = split_content(messages)
        if self.latency_s:
            time.sleep(self.latency_s)
        with self._lock:
            self.images_seen.extend(images)
        schema = _SCHEMA_LINE.search(text)
        keys = list(json.loads(schema.group(1))) if schema else ["id"]
        first = None
        if response_format and response_format.get("type") == "json_schema":
            props = response_format["json_schema"]["schema"]["properties"]
            keys = list(props)
            first = (props[keys[0]].get("enum") or [None])[0]
        if first is None:
            block = text.split("Candidates:\n", 1)[-1].split("\n\n", 1)[0]
            for line in block.splitlines():
                try:
                    first = json.loads(line)["candidate_id"]
                    break
                except (ValueError, KeyError, TypeError):
                    continue
        answer = json.dumps({k: first for k in keys})
        words = answer.split()
        return {"text": " ".join(words[:max_tokens]), "finish_reason": "stop" if len(words) <= max_tokens else "length",
                "prompt_tokens": len(text.split()), "completion_tokens": min(len(words), max_tokens)}


class TransformersChatModel:
    """A local checkpoint served greedily (one request at a time, under a lock).

    Args:
        model_path, kind, gguf_file, dtype, device: as :func:`predictors.runner.load_model`.
        seed: the generation seed (42).
    """

    def __init__(self, model_path, kind: Optional[str] = None, gguf_file: Optional[str] = None,
                 dtype: str = "float32", device: str = "cpu", seed: int = 42):
        from predictors.runner import detect_kind, load_model

        self.kind = kind or detect_kind(Path(model_path), gguf_file)
        self.model, self.processor = load_model(Path(model_path), self.kind, gguf_file, dtype=dtype, device=device)
        self.seed = seed
        self._lock = threading.Lock()

    def generate(self, messages: list[dict], max_tokens: int, response_format: Optional[dict] = None) -> dict:
        """Greedy completion (``response_format`` is not enforced). Raises ValueError for an
        image sent to a text-only model."""
        from PIL import Image

        from predictors.runner import generate_batch

        text, images = split_content(messages)
        if images and self.kind != "vlm":
            raise ValueError("this model is text-only; it takes no image_url parts")
        image = Image.open(io.BytesIO(images[0])) if images else None
        with self._lock:
            out = generate_batch(self.model, self.processor, self.kind, [text], [image], max_tokens, self.seed)[0]
        return {"text": out["output"], "finish_reason": "stop" if out["finish_reason"] == "eos" else "length",
                "prompt_tokens": out["prompt_tokens"], "completion_tokens": out["output_tokens"]}


class FaultPlan:
    """Faults to inject, consumed in order per case id: ``{case_id: ["429", "500", ...]}``.

    Each request for a case takes the next fault of its list; once the list is used up the
    case is answered normally. Thread-safe.
    """

    def __init__(self, plan: Optional[dict] = None, slow_s: float = 2.0):
        for case_id, faults in (plan or {}).items():
            bad = [f for f in faults if f not in FAULTS]
            if bad:
                raise ValueError(f"fault plan for {case_id!r}: unknown fault(s) {bad}; expected {FAULTS}")
        self.plan = {k: list(v) for k, v in (plan or {}).items()}
        self.slow_s = slow_s
        self._lock = threading.Lock()

    def next(self, case_id: Optional[str]) -> Optional[str]:
        """The fault for this request, or None."""
        with self._lock:
            queue = self.plan.get(case_id or "")
            return queue.pop(0) if queue else None


class OpenAICompatServer:
    """The server (start with :meth:`start`, stop with :meth:`stop`; also a context manager).

    Attributes:
        url: ``http://127.0.0.1:<port>/v1`` once started.
        log: one ``{"path", "case_id", "fault", "status"}`` per request, in the order the
            answers were sent (chat requests that reached the model also carry
            ``response_format``).
    """

    def __init__(self, model, served_model_name: str = "local-model", faults: Optional[FaultPlan] = None,
                 host: str = "127.0.0.1", port: int = 0):
        self.model = model
        self.name = served_model_name
        self.faults = faults or FaultPlan()
        self.log: list[dict] = []
        self._log_lock = threading.Lock()
        self._httpd = ThreadingHTTPServer((host, port), self._handler())
        self._httpd.daemon_threads = True
        self._thread: Optional[threading.Thread] = None

    @property
    def url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}/v1"

    def requests(self, path: str = "/v1/chat/completions") -> list[dict]:
        """Logged requests to ``path``."""
        with self._log_lock:
            return [e for e in self.log if e["path"] == path]

    def start(self) -> "OpenAICompatServer":
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="exbind-local-server", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    def _record(self, **entry) -> None:
        with self._log_lock:
            self.log.append(entry)

    def _handler(self):
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def setup(self):
                super().setup()
                # Headers and body go out in separate writes: without TCP_NODELAY, Nagle's
                # algorithm and delayed ACKs add ~40 ms to every keep-alive answer.
                self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

            def log_message(self, fmt, *args):  # quiet
                pass

            def _send(self, status: int, obj=None, raw: Optional[bytes] = None, headers: Optional[dict] = None):
                body = raw if raw is not None else json.dumps(obj).encode("utf-8")
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(body)))
                    for k, v in (headers or {}).items():
                        self.send_header(k, v)
                    self.end_headers()
                    self.wfile.write(body)
                except (BrokenPipeError, ConnectionResetError):
                    pass

            def do_GET(self):
                if self.path.rstrip("/") == "/v1/models":
                    server._record(path="/v1/models", case_id=None, fault=None, status=200)
                    self._send(200, {"object": "list", "data": [{"id": server.name, "object": "model",
                                                                 "owned_by": "exbind"}]})
                elif self.path.rstrip("/") == "/version":
                    server._record(path="/version", case_id=None, fault=None, status=200)
                    self._send(200, {"version": SERVER_VERSION})
                else:
                    self._send(404, {"error": {"message": f"no route {self.path}"}})

            def do_POST(self):
                if self.path.rstrip("/") != "/v1/chat/completions":
                    self._send(404, {"error": {"message": f"no route {self.path}"}})
                    return
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length)
                case_id = self.headers.get("X-ExBind-Case-Id")
                fault = server.faults.next(case_id)
                entry = {"path": "/v1/chat/completions", "case_id": case_id, "fault": fault}
                if fault == "drop":
                    server._record(**entry, status=None)
                    self.close_connection = True
                    try:
                        self.connection.shutdown(2)
                    except OSError:
                        pass
                    return
                if fault in ("429", "500"):
                    server._record(**entry, status=int(fault))
                    self._send(int(fault), {"error": {"message": f"injected {fault}"}}, headers={"Retry-After": "0"}
                               if fault == "429" else None)
                    return
                if fault == "malformed":
                    server._record(**entry, status=200)
                    self._send(200, raw=b'{"id": "chatcmpl-broken", "choices": [')
                    return
                if fault == "slow":  # logged on arrival; the late answer is sent without a log entry
                    server._record(**entry, status="late")
                    time.sleep(server.faults.slow_s)
                try:
                    body = json.loads(raw)
                    entry["response_format"] = body.get("response_format")
                    if body.get("model") != server.name:
                        server._record(**entry, status=404)
                        self._send(404, {"error": {"message": f"model {body.get('model')!r} is not served "
                                                              f"(serving {server.name!r})"}})
                        return
                    out = server.model.generate(body["messages"], int(body.get("max_tokens") or 96),
                                                body.get("response_format"))
                except (ValueError, KeyError, TypeError) as exc:
                    server._record(**entry, status=400)
                    self._send(400, {"error": {"message": str(exc)}})
                    return
                if fault != "slow":
                    server._record(**entry, status=200)
                self._send(200, {
                    "id": f"chatcmpl-{len(server.log)}", "object": "chat.completion", "created": int(time.time()),
                    "model": server.name,
                    "choices": [{"index": 0, "message": {"role": "assistant", "content": out["text"]},
                                 "finish_reason": out["finish_reason"]}],
                    "usage": {"prompt_tokens": out["prompt_tokens"], "completion_tokens": out["completion_tokens"],
                              "total_tokens": out["prompt_tokens"] + out["completion_tokens"]},
                })

        return Handler


def main(argv: Optional[list[str]] = None) -> int:
    """``python -m predictors.local_server``: serve a local checkpoint (or ``first-candidate``) until Ctrl-C."""
    parser = argparse.ArgumentParser(prog="python -m predictors.local_server", description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True, help="local checkpoint folder, or 'first-candidate'")
    parser.add_argument("--gguf-file", help="GGUF file name inside --model")
    parser.add_argument("--kind", choices=("vlm", "llm"), help="default: from the checkpoint's config")
    parser.add_argument("--served-model-name", default="local-model", help="the model name clients send")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--threads", type=int, help="torch.set_num_threads")
    parser.add_argument("--latency", type=float, default=0.0, help="first-candidate: seconds per completion")
    parser.add_argument("--faults", type=Path, help='JSON file {"<case_id>": ["429", "500", "slow", "malformed", '
                        '"drop"], ...} of faults to inject (test your harness)')
    parser.add_argument("--slow-s", type=float, default=2.0, help="seconds a 'slow' fault sleeps")
    args = parser.parse_args(argv)
    plan = FaultPlan(json.loads(args.faults.read_text(encoding="utf-8")) if args.faults else None, args.slow_s)
    if args.model == "first-candidate":
        model = FirstCandidateModel(args.latency)
    else:
        if args.threads:
            import torch

            torch.set_num_threads(args.threads)
        model = TransformersChatModel(args.model, kind=args.kind, gguf_file=args.gguf_file)
    server = OpenAICompatServer(model, args.served_model_name, faults=plan, port=args.port)
    print(f"serving {args.served_model_name} at {server.url} (Ctrl-C to stop)", flush=True)
    try:
        server._httpd.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server._httpd.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
