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
"""

from __future__ import annotations

import hashlib
import itertools
import json
import socket
import struct
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from email.utils import formatdate
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Iterable, Union

import numpy as np

from lychee_ray.tokens import count_message_tokens, count_tokens

CHAT_PATH = "/v1/chat/completions"
EMBED_PATH = "/v1/embeddings"


# ------------------------------------------------------------------------------------------------
# Actions
# ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Reply:
    """A 200 chat completion. ``usage=None`` = computed; ``include_usage=False`` omits it."""

    content: str | None
    finish_reason: str = "stop"
    usage: dict[str, int] | None = None
    cached_tokens: int = 0
    include_usage: bool = True
    refusal: str | None = None


@dataclass(frozen=True)
class Status:
    """An error status with an OpenAI-style error body and optional ``Retry-After`` header."""

    code: int
    retry_after: float | str | None = None
    message: str | None = None


@dataclass(frozen=True)
class RawBody:
    """An arbitrary HTTP body (e.g. malformed JSON) with the given status."""

    body: str
    code: int = 200
    content_type: str = "application/json"


@dataclass(frozen=True)
class Reset:
    """Close the connection without any reply (the client sees a connection reset)."""


@dataclass(frozen=True)
class Delay:
    """Wait ``seconds`` then perform ``then`` (None = the handler/default reply)."""

    seconds: float
    then: "Action | None" = None


Action = Union[Reply, Status, RawBody, Reset, Delay]
Handler = Callable[[dict[str, Any]], Union[Action, str, dict, None]]


def ok(content: str | dict | list = "{}", *, usage: dict[str, int] | None = None, finish_reason: str = "stop",
       cached_tokens: int = 0, include_usage: bool = True) -> Reply:
    """A successful reply; a dict/list ``content`` is JSON-encoded."""
    text = content if isinstance(content, str) else json.dumps(content)
    return Reply(text, finish_reason=finish_reason, usage=usage, cached_tokens=cached_tokens,
                 include_usage=include_usage)


def status(code: int, retry_after: float | str | None = None, message: str | None = None) -> Status:
    """An HTTP error (429, 500, 502, 503, 400, ...)."""
    return Status(code, retry_after=retry_after, message=message)


def delay(seconds: float, then: Action | None = None) -> Delay:
    """Reply after ``seconds`` (longer than the client's timeout = a timeout)."""
    return Delay(seconds, then)


def malformed_body(text: str = '{"id": "chatcmpl-broken", "choices": [') -> RawBody:
    """A 200 whose HTTP body is not valid JSON."""
    return RawBody(text)


def malformed_content(text: str = '{"answer": "unterminated') -> Reply:
    """A well-formed completion whose message content is not valid JSON."""
    return Reply(text)


def schema_violation(obj: Any = None) -> Reply:
    """Valid JSON content that does not match the requested schema."""
    return Reply(json.dumps({"unexpected": True} if obj is None else obj))


def truncated(content: str = '{"answer": "cut') -> Reply:
    """A reply with ``finish_reason == "length"``."""
    return Reply(content, finish_reason="length")


def empty() -> Reply:
    """A reply with empty content."""
    return Reply("")


def reset() -> Reset:
    """Drop the connection without replying."""
    return Reset()


_CYRILLIC = dict(zip("abcdefghijklmnopqrstuvwxyz", "абцдефгхийклмнопкрстувшксз"))


def foreign_script(text: str, script: str = "cjk") -> str:
    """``text`` with every ASCII letter replaced by a letter of another script (``cjk`` ideographs or
    ``cyrillic``); digits, spaces and punctuation stay. A stand-in for a model that writes in the
    wrong language: same shape, different script."""
    if script not in ("cjk", "cyrillic"):
        raise ValueError(f"unknown script {script!r}; expected cjk or cyrillic")
    out = []
    for ch in text:
        low = ch.lower()
        if "a" <= low <= "z":
            out.append(chr(0x4E00 + 97 * (ord(low) - 97)) if script == "cjk" else _CYRILLIC[low])
        else:
            out.append(ch)
    return "".join(out)


def _rewrite(obj: Any, keys: frozenset[str] | None, script: str, under: bool) -> Any:
    if isinstance(obj, dict):
        return {k: _rewrite(v, keys, script, keys is None or k in keys) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_rewrite(v, keys, script, under) for v in obj]
    if isinstance(obj, str) and under:
        return foreign_script(obj, script)
    return obj


def wrong_language(content: str | dict | list, *, keys: Iterable[str] | None = None, script: str = "cjk") -> Reply:
    """A well-formed reply in the wrong language: the strings under ``keys`` (every string when
    None; a plain ``str`` content as a whole) rewritten by :func:`foreign_script`. Name only the
    free-text fields (e.g. ``keys=["text"]`` for encoder records) so the JSON still fits its schema."""
    if isinstance(content, str):
        return Reply(foreign_script(content, script))
    return Reply(json.dumps(_rewrite(content, None if keys is None else frozenset(keys), script, keys is None),
                            ensure_ascii=False))


# ------------------------------------------------------------------------------------------------
# Recording
# ------------------------------------------------------------------------------------------------


@dataclass
class RecordedRequest:
    """One request as the server saw it."""

    path: str
    body: Any
    t: float  # unix time of arrival
    t_mono: float  # monotonic time of arrival (for windows)
    headers: dict[str, str] = field(default_factory=dict)
    status: int | None = None  # None = connection dropped
    action: str = ""
    prompt_tokens: int = 0
    completion_tokens: int = 0

    @property
    def tokens(self) -> int:
        """Prompt plus completion tokens billed for this request."""
        return self.prompt_tokens + self.completion_tokens

    @property
    def accepted(self) -> bool:
        """True when the server answered 200."""
        return self.status == 200


def _max_in_window(events: list[tuple[float, float]], window_s: float) -> float:
    """Largest sum of weights of events within any half-open window of ``window_s`` seconds."""
    events = sorted(events)
    best = total = 0.0
    lo = 0
    for hi, (t, w) in enumerate(events):
        total += w
        while events[lo][0] <= t - window_s:
            total -= events[lo][1]
            lo += 1
        best = max(best, total)
    return best


# ------------------------------------------------------------------------------------------------
# Server
# ------------------------------------------------------------------------------------------------


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    request_queue_size = 256  # many concurrent clients in benchmarks
    allow_reuse_address = True
    owner: "OpenAIServer"


class _RequestHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, like real providers
    server: _HTTPServer

    def setup(self) -> None:
        super().setup()
        # Headers and body go out in separate writes; without NODELAY, Nagle + delayed ACK add ~40 ms.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 — silence stderr access log
        pass

    def handle_one_request(self) -> None:
        try:
            super().handle_one_request()
        except (BrokenPipeError, ConnectionResetError, ConnectionAbortedError, socket.timeout):
            self.close_connection = True  # client gave up (e.g. its timeout); nothing to answer

    def do_POST(self) -> None:  # noqa: N802
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        self.server.owner._dispatch(self, raw)

    def do_GET(self) -> None:  # noqa: N802
        self.server.owner._dispatch(self, None)


class OpenAIServer:
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
        self._httpd: _HTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle -------------------------------------------------------------------------------
    def start(self) -> "OpenAIServer":
        """Bind and serve in a background thread."""
        if self._httpd is not None:
            return self
        self._stop.clear()
        httpd = _HTTPServer((self._host, self._port), _RequestHandler)
        httpd.owner = self
        self._httpd = httpd
        self._thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05},
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
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> "OpenAIServer":
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

    def chat_requests(self) -> list[RecordedRequest]:
        """Requests to the chat endpoint."""
        return [r for r in self.requests if r.path == CHAT_PATH]

    def clear_log(self) -> None:
        """Forget recorded requests (the rate-limit window too)."""
        with self._lock:
            self._records.clear()
            self._accepted.clear()

    def _select(self, path: str | None, accepted_only: bool) -> list[RecordedRequest]:
        return [r for r in self.requests if (path is None or r.path == path) and (r.accepted or not accepted_only)]

    def requests_per_minute(self, path: str | None = CHAT_PATH, accepted_only: bool = False) -> dict[int, int]:
        """Calendar minute (unix time // 60) → number of requests that arrived in it."""
        out: dict[int, int] = {}
        for r in self._select(path, accepted_only):
            m = int(r.t // 60)
            out[m] = out.get(m, 0) + 1
        return out

    def tokens_per_minute(self, path: str | None = CHAT_PATH) -> dict[int, int]:
        """Calendar minute → tokens billed (prompt + completion) for requests arriving in it."""
        out: dict[int, int] = {}
        for r in self._select(path, False):
            m = int(r.t // 60)
            out[m] = out.get(m, 0) + r.tokens
        return out

    def max_requests_in_window(self, window_s: float = 60.0, path: str | None = CHAT_PATH,
                               accepted_only: bool = False) -> int:
        """Most requests that arrived within any rolling ``window_s`` window."""
        return int(_max_in_window([(r.t_mono, 1.0) for r in self._select(path, accepted_only)], window_s))

    def max_tokens_in_window(self, window_s: float = 60.0, path: str | None = CHAT_PATH) -> int:
        """Most tokens billed within any rolling ``window_s`` window (by arrival time)."""
        return int(_max_in_window([(r.t_mono, float(r.tokens)) for r in self._select(path, False)], window_s))

    def minutes_over_limit(self, requests_per_min: float, path: str | None = CHAT_PATH) -> list[int]:
        """Calendar minutes in which more than ``requests_per_min`` requests arrived."""
        return sorted(m for m, n in self.requests_per_minute(path).items() if n > requests_per_min)

    # -- request handling (runs in server threads) -----------------------------------------------
    def _dispatch(self, h: _RequestHandler, raw: bytes | None) -> None:
        path = h.path.split("?", 1)[0]
        now, mono = time.time(), time.monotonic()
        rec = RecordedRequest(path=path, body=None, t=now, t_mono=mono, headers=dict(h.headers.items()))
        with self._lock:
            self._records.append(rec)
        if raw is not None:
            try:
                rec.body = json.loads(raw or b"{}")
            except json.JSONDecodeError:
                return self._send_error(h, rec, 400, "request body is not JSON")
        if self.api_key is not None and h.headers.get("Authorization") != f"Bearer {self.api_key}":
            return self._send_error(h, rec, 401, "Incorrect API key provided", err_type="invalid_api_key")
        if h.command == "GET" and path == "/v1/models":
            return self._send_json(h, rec, 200, {"object": "list", "data": [
                {"id": self.model, "object": "model", "created": 0, "owned_by": "lychee-test"}]})
        if h.command == "POST" and path == CHAT_PATH:
            return self._chat(h, rec)
        if h.command == "POST" and path == EMBED_PATH:
            return self._embeddings(h, rec)
        return self._send_error(h, rec, 404, f"no route {h.command} {path}")

    def _rate_limited(self, rec: RecordedRequest, tokens: int) -> float | None:
        """Server-side limiter: None = accept (and count), else the Retry-After to send."""
        if self.rate_limit_rpm is None and self.rate_limit_tpm is None:
            return None
        with self._lock:
            while self._accepted and self._accepted[0][0] <= rec.t_mono - 60.0:
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
        return max(0.0, oldest + 60.0 - rec.t_mono)

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

    def _chat(self, h: _RequestHandler, rec: RecordedRequest) -> None:
        body = rec.body if isinstance(rec.body, dict) else {}
        messages = body.get("messages") or []
        fmt = (body.get("response_format") or {}).get("type")
        if fmt in self.reject_formats:
            return self._send_error(h, rec, 400, f"response_format of type '{fmt}' is not supported by this model",
                                    param="response_format")
        if self.reject_max_completion_tokens and "max_completion_tokens" in body:
            return self._send_error(h, rec, 400, "Unrecognized request argument supplied: max_completion_tokens",
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
                return self._send_error(h, rec, 429, "Rate limit reached (test server)", retry_after=retry_after,
                                        err_type="rate_limit_exceeded")
            rec.prompt_tokens, rec.completion_tokens = prompt, completion
            rec.action = "ok" if action.finish_reason == "stop" else f"finish:{action.finish_reason}"
            return self._send_json(h, rec, 200, self._completion(body, action, prompt, completion))
        return self._perform(h, rec, action)

    def _completion(self, body: dict[str, Any], r: Reply, prompt: int, completion: int) -> dict[str, Any]:
        out: dict[str, Any] = {
            "id": f"chatcmpl-test-{next(self._ids)}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model") or self.model,
            "choices": [{
                "index": 0,
                "message": {"role": "assistant", "content": r.content, "refusal": r.refusal},
                "finish_reason": r.finish_reason,
                "logprobs": None,
            }],
        }
        if r.include_usage:
            out["usage"] = {
                "prompt_tokens": prompt,
                "completion_tokens": completion,
                "total_tokens": prompt + completion,
                "prompt_tokens_details": {"cached_tokens": r.cached_tokens},
            }
        return out

    def _embeddings(self, h: _RequestHandler, rec: RecordedRequest) -> None:
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
            return self._send_error(h, rec, 429, "Rate limit reached (test server)", retry_after=retry_after)
        rec.prompt_tokens = tokens
        rec.action = "ok"
        data = [{"object": "embedding", "index": i, "embedding": pseudo_embedding(str(t), dim).tolist()}
                for i, t in enumerate(texts)]
        self._send_json(h, rec, 200, {"object": "list", "data": data, "model": body.get("model") or self.model,
                                      "usage": {"prompt_tokens": tokens, "total_tokens": tokens}})

    def _perform(self, h: _RequestHandler, rec: RecordedRequest, action: Action) -> None:
        if isinstance(action, Status):
            rec.action = f"status:{action.code}"
            return self._send_error(h, rec, action.code, action.message or _DEFAULT_MESSAGES.get(action.code, "error"),
                                    retry_after=action.retry_after)
        if isinstance(action, RawBody):
            rec.action = "raw"
            return self._send_raw(h, rec, action.code, action.body.encode(), action.content_type)
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

    # -- writing ---------------------------------------------------------------------------------
    def _send_error(self, h: _RequestHandler, rec: RecordedRequest, code: int, message: str, *,
                    retry_after: float | str | None = None, param: str | None = None,
                    err_type: str | None = None) -> None:
        headers = {}
        if retry_after is not None:
            headers["Retry-After"] = (retry_after if isinstance(retry_after, str)
                                      else f"{retry_after:g}")
        body = {"error": {"message": message, "type": err_type or ("server_error" if code >= 500 else
                                                                    "invalid_request_error"),
                          "param": param, "code": err_type}}
        if not rec.action:
            rec.action = f"status:{code}"
        self._send_json(h, rec, code, body, headers)

    def _send_json(self, h: _RequestHandler, rec: RecordedRequest, code: int, obj: Any,
                   headers: dict[str, str] | None = None) -> None:
        self._send_raw(h, rec, code, json.dumps(obj).encode(), "application/json", headers)

    def _send_raw(self, h: _RequestHandler, rec: RecordedRequest, code: int, payload: bytes, ctype: str,
                  headers: dict[str, str] | None = None) -> None:
        rec.status = code
        try:
            h.send_response(code)
            h.send_header("Content-Type", ctype)
            h.send_header("Content-Length", str(len(payload)))
            for k, v in (headers or {}).items():
                h.send_header(k, v)
            h.end_headers()
            h.wfile.write(payload)
        except (BrokenPipeError, ConnectionResetError, ConnectionAbortedError):
            h.close_connection = True  # the client already gave up (timeout)


_DEFAULT_MESSAGES = {
    400: "Bad request",
    401: "Unauthorized",
    404: "Not found",
    429: "Rate limit reached",
    500: "The server had an error while processing your request",
    502: "Bad gateway",
    503: "The engine is currently overloaded, please try again later",
}


def pseudo_embedding(text: str, dim: int) -> np.ndarray:
    """Deterministic unit vector for ``text`` (same text → same vector, any process)."""
    seed = int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest()[:8], "little")
    v = np.random.default_rng(seed).standard_normal(dim)
    return (v / np.linalg.norm(v)).astype(np.float32)


def http_date(seconds_from_now: float) -> str:
    """An HTTP-date ``seconds_from_now`` in the future (for Retry-After date tests)."""
    return formatdate(time.time() + seconds_from_now, usegmt=True)
