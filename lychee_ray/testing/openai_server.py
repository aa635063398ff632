"""A small, real OpenAI-compatible HTTP server for tests and benchmarks.

It speaks ``POST /v1/chat/completions``, ``POST /v1/embeddings`` and ``GET /v1/models`` on
127.0.0.1 (a free port), in background threads, and answers from a script::

    with OpenAIServer([status(503), ok('{"answer": "yes"}')]) as srv:
        client = LLMClient(LLMConfig(base_url=srv.base_url, api_key="test"))
        ...
        assert srv.max_requests_in_window(60) <= 100

Chat replies come, in order of precedence, from the scripted queue (:meth:`OpenAIServer.script`),
then the ``handler`` callable ``(request_json) -> action`` (it may also return a ``str`` = content,
a ``dict`` = JSON content, or ``None`` = default), then ``default``. Actions: :func:`ok`,
:func:`status`, :func:`delay`, :func:`malformed_body`, :func:`malformed_content`,
:func:`schema_violation`, :func:`truncated` (``finish_reason=length``), :func:`empty`, :func:`reset`,
:func:`wrong_language` (valid JSON whose text fields are in another script).

Every request is recorded (path, body, arrival time, status) so tests can count requests and
tokens per calendar minute and per rolling window, the way a provider's limiter would. Usage in
replies is computed with the offline tokenizer unless scripted. Embeddings are deterministic
pseudo-random unit vectors seeded by a hash of the text.

The pieces: :mod:`~lychee_ray.testing.replies` (fake replies), :mod:`~lychee_ray.testing.faults`
(injected failures), :mod:`~lychee_ray.testing.recording` (what was seen, and its counts) and
:mod:`~lychee_ray.testing.http_server` (the HTTP plumbing); this module scripts and dispatches. The
actions are importable from :mod:`lychee_ray.testing`.
"""

from __future__ import annotations

import itertools
import json
import socket
import struct
import threading
import time
from collections import deque
from typing import Any
from collections.abc import Iterable

from lychee_ray.testing.faults import DEFAULT_MESSAGES, Action, Delay, Handler, RawBody, Reset, Status
from lychee_ray.testing.http_server import HTTPServer, RequestHandler, send_error, send_json, send_raw
from lychee_ray.testing.recording import CHAT_PATH, EMBED_PATH, RecordedRequest, RequestStats
from lychee_ray.testing.replies import Reply, completion_body, embeddings_body, ok
from lychee_ray.text.tokens import count_message_tokens, count_tokens

_WINDOW_S = 60.0  # the server-side limiter's rolling window (requests / tokens per minute)
_POLL_S = 0.05  # serve_forever's shutdown poll
_JOIN_TIMEOUT_S = 5.0


class OpenAIServer(RequestStats):
    """Scripted OpenAI-compatible server (see module docstring). Use as a context manager."""

    def __init__(
        self,
        actions: Iterable[Action] = (),
        *,
        handler: Handler | None = None,
        default: Action | None = None,
        latency_s: float = 0.0,
        embedding_dim: int = 64,
        reject_json_schema: bool = False,
        reject_formats: Iterable[str] = (),
        reject_max_completion_tokens: bool = False,
        api_key: str | None = None,
        rate_limit_rpm: int | None = None,
        rate_limit_tpm: int | None = None,
        rate_limit_retry_after: float | None = None,
        model: str = "test-model",
        host: str = "127.0.0.1",
        port: int = 0,
    ) -> None:
        self._queue: deque[Action] = deque(actions)
        self._embed_queue: deque[Action] = deque()
        self.handler = handler
        self.default: Action = default if default is not None else ok("{}")
        self.latency_s = latency_s
        self.embedding_dim = embedding_dim
        self.reject_formats = set(reject_formats) | ({"json_schema"} if reject_json_schema else set())
        self.reject_max_completion_tokens = reject_max_completion_tokens
        self.api_key = api_key
        self.rate_limit_rpm = rate_limit_rpm
        self.rate_limit_tpm = rate_limit_tpm
        self.rate_limit_retry_after = rate_limit_retry_after
        self.model = model
        self._host, self._port = host, port
        self._lock = threading.Lock()
        self._records: list[RecordedRequest] = []
        self._accepted: deque[tuple[float, int]] = deque()  # (t_mono, tokens) in the last 60 s, rate limit
        self._ids = itertools.count(1)
        self._stop = threading.Event()
        self._httpd: HTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle -------------------------------------------------------------------------------
    def start(self) -> OpenAIServer:
        """Bind and serve in a background thread."""
        if self._httpd is not None:
            return self
        self._stop.clear()
        httpd = HTTPServer((self._host, self._port), RequestHandler)
        httpd.owner = self
        self._httpd = httpd
        self._thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": _POLL_S},
                                        name="openai-test-server", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving; pending delays are cut short."""
        self._stop.set()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None
        if self._thread is not None:
            self._thread.join(timeout=_JOIN_TIMEOUT_S)
            self._thread = None

    def __enter__(self) -> OpenAIServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        """The bound port."""
        if self._httpd is None:
            raise RuntimeError("server not started")
        return self._httpd.server_address[1]

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:<port>/v1`` — what an OpenAI client takes as base_url."""
        return f"http://{self._host}:{self.port}/v1"

    # -- scripting -------------------------------------------------------------------------------
    def script(self, *actions: Action) -> None:
        """Queue chat actions (consumed one per chat request, before the handler)."""
        with self._lock:
            self._queue.extend(actions)

    def script_embeddings(self, *actions: Action) -> None:
        """Queue failures for the embeddings endpoint (a :class:`Reply` there = normal vectors)."""
        with self._lock:
            self._embed_queue.extend(actions)

    @property
    def pending(self) -> int:
        """Chat actions still queued."""
        with self._lock:
            return len(self._queue)

    # -- inspection ------------------------------------------------------------------------------
    @property
    def requests(self) -> list[RecordedRequest]:
        """All requests so far (a copy)."""
        with self._lock:
            return list(self._records)

    def clear_log(self) -> None:
        """Forget recorded requests (the rate-limit window too)."""
        with self._lock:
            self._records.clear()
            self._accepted.clear()

    # -- request handling (runs in server threads) -----------------------------------------------
    def _dispatch(self, h: RequestHandler, raw: bytes | None) -> None:
        path = h.path.split("?", 1)[0]
        now, mono = time.time(), time.monotonic()
        rec = RecordedRequest(path=path, body=None, t=now, t_mono=mono, headers=dict(h.headers.items()))
        with self._lock:
            self._records.append(rec)
        if raw is not None:
            try:
                rec.body = json.loads(raw or b"{}")
            except json.JSONDecodeError:
                return send_error(h, rec, 400, "request body is not JSON")
        if self.api_key is not None and h.headers.get("Authorization") != f"Bearer {self.api_key}":
            return send_error(h, rec, 401, "Incorrect API key provided", err_type="invalid_api_key")
        if h.command == "GET" and path == "/v1/models":
            return send_json(h, rec, 200, {"object": "list", "data": [
                {"id": self.model, "object": "model", "created": 0, "owned_by": "lychee-test"}]})
        if h.command == "POST" and path == CHAT_PATH:
            return self._chat(h, rec)
        if h.command == "POST" and path == EMBED_PATH:
            return self._embeddings(h, rec)
        return send_error(h, rec, 404, f"no route {h.command} {path}")

    def _rate_limited(self, rec: RecordedRequest, tokens: int) -> float | None:
        """Server-side limiter: None = accept (and count), else the Retry-After to send."""
        if self.rate_limit_rpm is None and self.rate_limit_tpm is None:
            return None
        with self._lock:
            while self._accepted and self._accepted[0][0] <= rec.t_mono - _WINDOW_S:
                self._accepted.popleft()
            n = len(self._accepted)
            used = sum(t for _, t in self._accepted)
            over = (self.rate_limit_rpm is not None and n + 1 > self.rate_limit_rpm) or (
                self.rate_limit_tpm is not None and used + tokens > self.rate_limit_tpm and n > 0)
            if not over:
                self._accepted.append((rec.t_mono, tokens))
                return None
            oldest = self._accepted[0][0] if self._accepted else rec.t_mono
        if self.rate_limit_retry_after is not None:
            return self.rate_limit_retry_after
        return max(0.0, oldest + _WINDOW_S - rec.t_mono)

    def _next_action(self, body: dict[str, Any]) -> Action:
        with self._lock:
            if self._queue:
                return self._queue.popleft()
        return self._handler_action(body)

    def _handler_action(self, body: dict[str, Any]) -> Action:
        """The handler's action for ``body`` (or the default); never touches the queue."""
        if self.handler is not None:
            got = self.handler(body)
            if isinstance(got, str):
                return Reply(got)
            if isinstance(got, (dict, list)):
                return Reply(json.dumps(got))
            if got is not None:
                return got
        return self.default

    def _chat(self, h: RequestHandler, rec: RecordedRequest) -> None:
        body = rec.body if isinstance(rec.body, dict) else {}
        messages = body.get("messages") or []
        fmt = (body.get("response_format") or {}).get("type")
        if fmt in self.reject_formats:
            return send_error(h, rec, 400, f"response_format of type '{fmt}' is not supported by this model",
                              param="response_format")
        if self.reject_max_completion_tokens and "max_completion_tokens" in body:
            return send_error(h, rec, 400, "Unrecognized request argument supplied: max_completion_tokens",
                              param="max_completion_tokens")
        action = self._next_action(body)
        if self.latency_s > 0:
            self._stop.wait(self.latency_s)
        while isinstance(action, Delay):
            self._stop.wait(action.seconds)
            # A Delay without ``then`` answers like the handler/default; the queue belongs to later requests.
            action = action.then if action.then is not None else self._handler_action(body)
        if isinstance(action, Reply):
            prompt = count_message_tokens([m for m in messages if isinstance(m, dict)])
            completion = count_tokens(action.content or "")
            if action.usage is not None:
                prompt = int(action.usage.get("prompt_tokens", prompt))
                completion = int(action.usage.get("completion_tokens", completion))
            retry_after = self._rate_limited(rec, prompt + completion)
            if retry_after is not None:
                return send_error(h, rec, 429, "Rate limit reached (test server)", retry_after=retry_after,
                                  err_type="rate_limit_exceeded")
            rec.prompt_tokens, rec.completion_tokens = prompt, completion
            rec.action = "ok" if action.finish_reason == "stop" else f"finish:{action.finish_reason}"
            model = body.get("model") or self.model
            return send_json(h, rec, 200, completion_body(next(self._ids), model, action, prompt, completion))
        return self._perform(h, rec, action)

    def _embeddings(self, h: RequestHandler, rec: RecordedRequest) -> None:
        body = rec.body if isinstance(rec.body, dict) else {}
        action: Action | None = None
        with self._lock:
            if self._embed_queue:
                action = self._embed_queue.popleft()
        while isinstance(action, Delay):
            self._stop.wait(action.seconds)
            action = action.then
        if action is not None and not isinstance(action, Reply):
            return self._perform(h, rec, action)
        if self.latency_s > 0:
            self._stop.wait(self.latency_s)
        inputs = body.get("input")
        texts = [inputs] if isinstance(inputs, str) else list(inputs or [])
        dim = int(body.get("dimensions") or self.embedding_dim)
        tokens = sum(count_tokens(t) if isinstance(t, str) else len(t) for t in texts)
        retry_after = self._rate_limited(rec, tokens)
        if retry_after is not None:
            return send_error(h, rec, 429, "Rate limit reached (test server)", retry_after=retry_after)
        rec.prompt_tokens = tokens
        rec.action = "ok"
        send_json(h, rec, 200, embeddings_body(body.get("model") or self.model, texts, dim, tokens))

    def _perform(self, h: RequestHandler, rec: RecordedRequest, action: Action) -> None:
        if isinstance(action, Status):
            rec.action = f"status:{action.code}"
            return send_error(h, rec, action.code, action.message or DEFAULT_MESSAGES.get(action.code, "error"),
                              retry_after=action.retry_after)
        if isinstance(action, RawBody):
            rec.action = "raw"
            return send_raw(h, rec, action.code, action.body.encode(), action.content_type)
        if isinstance(action, Reset):
            rec.action = "reset"
            rec.status = None
            h.close_connection = True
            try:  # RST instead of FIN: the client sees a reset, not a clean close
                h.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            except OSError:
                pass
            return None
        raise TypeError(f"unknown action {action!r}")


__all__ = ["OpenAIServer"]
