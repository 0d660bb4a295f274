"""A real local HTTP server speaking the OpenAI chat-completions protocol, with scripted answers.

The real `openai` client (and our retry/parsing code around it) runs against it unchanged, in-process
(`with ScriptedLLMServer() as srv: ...`) or as a separate process for end-to-end tests:

    python -m tests.fakes.llm_server --port 0 --script script.json [--record requests.jsonl]

It prints `READY <base_url>` on stdout once it accepts connections. The script file is either a JSON list of
responses, or an object `{"responses": [...], "default": <response>}`; each response is one of

    {"json": <any JSON value>}                 a completion whose message content is json.dumps(value)
    {"content": "<raw text>"}                  a completion with this exact content (fenced, malformed, ...)
    {"error": 429, "body": {...}, "headers": {"retry-after": "0"}}   an HTTP error

each optionally with `"delay": seconds` (sleep before answering, to provoke client timeouts).
Scripted responses are served in order, then `default` for every further request (HTTP 400
"script exhausted" when there is none).
"""

from __future__ import annotations

import argparse
import json
import signal
import socket
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import FrameType, TracebackType
from typing import Any

Responder = Callable[[dict[str, Any]], "dict[str, Any] | list[Any] | str"]
"""Builds an answer from the request body: a JSON value (sent as json.dumps) or raw content text."""


@dataclass(frozen=True)
class ScriptedResponse:
    status: int = 200
    content: str | None = None
    """Message content of a 200 completion."""
    body: Any = None
    """JSON body of an error response (an OpenAI-style error object when None)."""
    headers: dict[str, str] = field(default_factory=dict)
    delay_seconds: float = 0.0

    @classmethod
    def from_spec(cls, spec: dict[str, Any]) -> ScriptedResponse:
        """Parse one script-file entry (see the module docstring)."""
        delay = float(spec.get("delay", 0.0))
        headers = {str(k): str(v) for k, v in (spec.get("headers") or {}).items()}
        if "error" in spec:
            return cls(status=int(spec["error"]), body=spec.get("body"), headers=headers, delay_seconds=delay)
        if "json" in spec:
            return cls(content=json.dumps(spec["json"], ensure_ascii=False), headers=headers, delay_seconds=delay)
        if "content" in spec:
            return cls(content=str(spec["content"]), headers=headers, delay_seconds=delay)
        raise ValueError(f"script entry needs one of json/content/error: {spec!r}")


def _error_body(status: int, message: str) -> dict[str, Any]:
    kind = {
        400: "invalid_request_error",
        401: "authentication_error",
        403: "permission_error",
        404: "not_found_error",
        429: "rate_limit_error",
    }.get(status, "server_error")
    return {"error": {"message": message, "type": kind, "param": None, "code": None}}


def _approx_tokens(text: str) -> int:
    return max(1, len(text) // 4)


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False  # a handler sleeping to provoke a timeout must not block shutdown
    owner: ScriptedLLMServer


class _Handler(BaseHTTPRequestHandler):
    server: _HTTPServer
    protocol_version = "HTTP/1.1"

    def setup(self) -> None:
        super().setup()
        # Headers and body go out in separate writes; without NODELAY, Nagle + delayed ACK add ~40 ms each.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        pass  # keep test output clean

    def do_GET(self) -> None:  # noqa: N802 - stdlib naming
        if self.path.rstrip("/") in ("/v1/models", "/models"):
            model = {"id": "scripted", "object": "model", "created": 0, "owned_by": "tests"}
            self._send_json(200, {"object": "list", "data": [model]})
        elif self.path.rstrip("/") in ("/health", "/healthz"):
            self._send_json(200, {"ok": True})
        else:
            self._send_json(404, _error_body(404, f"no route {self.path}"))

    def do_POST(self) -> None:  # noqa: N802 - stdlib naming
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length) if length else b""
        if self.path.rstrip("/") not in ("/v1/chat/completions", "/chat/completions"):
            self._send_json(404, _error_body(404, f"no route {self.path}"))
            return
        try:
            request = json.loads(raw or b"{}")
        except json.JSONDecodeError as exc:
            self._send_json(400, _error_body(400, f"request body is not JSON: {exc}"))
            return
        owner = self.server.owner
        owner._record(request, {k.lower(): v for k, v in self.headers.items()})
        try:
            response = owner._next_response(request)
        except Exception as exc:  # a broken default responder should show up as an answer, not a hang
            response = ScriptedResponse(status=500, body=_error_body(500, f"default responder failed: {exc!r}"))
        if response.delay_seconds:
            time.sleep(response.delay_seconds)
        if response.status != 200:
            body = response.body if response.body is not None else _error_body(response.status, "scripted error")
            self._send_json(response.status, body, response.headers)
            return
        content = response.content or ""
        prompt_text = "".join(str(m.get("content", "")) for m in request.get("messages", []))
        usage = {
            "prompt_tokens": _approx_tokens(prompt_text),
            "completion_tokens": _approx_tokens(content),
        }
        usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
        completion = {
            "id": f"chatcmpl-scripted-{owner._count}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": request.get("model", "scripted"),
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": content, "refusal": None},
                    "finish_reason": "stop",
                    "logprobs": None,
                }
            ],
            "usage": usage,
        }
        self._send_json(200, completion, response.headers)

    def _send_json(self, status: int, body: Any, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(body, ensure_ascii=False).encode()
        try:
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (timeout test); nothing to answer


class ScriptedLLMServer:
    """OpenAI-compatible chat-completions server on 127.0.0.1 with a queue of scripted answers."""

    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        default: Responder | ScriptedResponse | None = None,
        record_path: Path | None = None,
    ) -> None:
        self.default: Responder | ScriptedResponse | None = default
        """Answer when the queue is empty: a callable `(request_json) -> dict | str`, or a fixed response."""
        self.requests: list[dict[str, Any]] = []
        """Every chat-completions request body received, in order."""
        self.request_headers: list[dict[str, str]] = []
        """Headers of each request, names lower-cased."""
        self._queue: deque[ScriptedResponse] = deque()
        self._lock = threading.Lock()
        self._count = 0
        self._record_path = record_path
        self._httpd = _HTTPServer((host, port), _Handler)
        self._httpd.owner = self
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return int(self._httpd.server_address[1])

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def pending(self) -> int:
        """Scripted responses not served yet."""
        with self._lock:
            return len(self._queue)

    def enqueue(self, response: ScriptedResponse) -> ScriptedLLMServer:
        with self._lock:
            self._queue.append(response)
        return self

    def enqueue_json(self, obj: Any, *, delay_seconds: float = 0.0) -> ScriptedLLMServer:
        """A normal completion whose message content is json.dumps(obj)."""
        return self.enqueue(ScriptedResponse(content=json.dumps(obj, ensure_ascii=False), delay_seconds=delay_seconds))

    def enqueue_content(self, text: str, *, delay_seconds: float = 0.0) -> ScriptedLLMServer:
        """A completion with this exact message content (fenced JSON, malformed JSON, prose...)."""
        return self.enqueue(ScriptedResponse(content=text, delay_seconds=delay_seconds))

    def enqueue_error(self, status: int, body: Any = None, headers: dict[str, str] | None = None) -> ScriptedLLMServer:
        """An HTTP error, e.g. `enqueue_error(429, headers={"retry-after": "0"})`."""
        return self.enqueue(ScriptedResponse(status=status, body=body, headers=dict(headers or {})))

    def start(self) -> ScriptedLLMServer:
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
            )
            self._thread.start()
        return self

    def stop(self) -> None:
        if self._thread is not None:
            self._httpd.shutdown()
            self._thread.join(timeout=5)
            self._thread = None
        self._httpd.server_close()

    def __enter__(self) -> ScriptedLLMServer:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def _record(self, request: dict[str, Any], headers: dict[str, str]) -> None:
        with self._lock:
            self._count += 1
            self.requests.append(request)
            self.request_headers.append(headers)
            if self._record_path is not None:
                with self._record_path.open("a", encoding="utf-8") as fh:
                    fh.write(json.dumps(request, ensure_ascii=False) + "\n")

    def _next_response(self, request: dict[str, Any]) -> ScriptedResponse:
        with self._lock:
            if self._queue:
                return self._queue.popleft()
            default = self.default
        if default is None:
            return ScriptedResponse(status=400, body=_error_body(400, "ScriptedLLMServer: script exhausted"))
        if isinstance(default, ScriptedResponse):
            return default
        answer = default(request)
        if isinstance(answer, str):
            return ScriptedResponse(content=answer)
        return ScriptedResponse(content=json.dumps(answer, ensure_ascii=False))


def load_script(path: Path) -> tuple[list[ScriptedResponse], ScriptedResponse | None]:
    """Read a script file: a list of responses, or {"responses": [...], "default": response}."""
    data = json.loads(path.read_text(encoding="utf-8"))
    if isinstance(data, list):
        return [ScriptedResponse.from_spec(item) for item in data], None
    responses = [ScriptedResponse.from_spec(item) for item in data.get("responses", [])]
    default = data.get("default")
    return responses, (ScriptedResponse.from_spec(default) if default is not None else None)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Scripted OpenAI-compatible chat-completions server")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port (printed on READY)")
    parser.add_argument("--script", type=Path, help="JSON script file (see module docstring)")
    parser.add_argument("--record", type=Path, help="append every request body here as JSON lines")
    args = parser.parse_args(argv)

    responses, default = load_script(args.script) if args.script else ([], None)
    server = ScriptedLLMServer(host=args.host, port=args.port, default=default, record_path=args.record)
    for response in responses:
        server.enqueue(response)
    stop = threading.Event()

    def _on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, _on_signal)
    signal.signal(signal.SIGINT, _on_signal)
    server.start()
    print(f"READY {server.base_url}", flush=True)  # noqa: T201 - the parent process reads this line
    try:
        while not stop.wait(0.5):
            pass
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
