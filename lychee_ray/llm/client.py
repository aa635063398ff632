"""The ``openai`` backend transport: schema-constrained JSON chat calls with retries and accounting.

Retry layering. The ``openai`` client is built with ``max_retries=0``: its built-in retries would
sleep per call, unseen by the shared rate limiter (a 429 must pause *everyone*), would not cover
invalid replies, and would multiply with ours. So this module's tenacity loop is the only retry
layer; it covers 429 (honouring Retry-After through ``limiter.pause``), 5xx/408/409, timeouts,
connection errors and unusable replies (invalid JSON, schema violation, empty, truncated), all
counted against ``llm.max_attempts``. Other 4xx are permanent. A server that refuses the
``json_schema`` response format (or ``max_completion_tokens``) is retried at once with the
fallback, which then stays on for the client's lifetime; such a re-send is not counted as an attempt.
A caller may add its own reply check (``chat_json(validate=...)``, e.g. the encoder's wrong-language
check): an :class:`AttemptError` it raises is handled like any other unusable reply.
"""

from __future__ import annotations

import asyncio
import email.utils
import json
import logging
import random
import re
import threading
import time
import weakref
from dataclasses import dataclass, field
from datetime import datetime, timezone
from functools import lru_cache
from typing import Any, Callable, Coroutine, Generic, Literal, Mapping, Sequence, TypeVar

import openai
from pydantic import BaseModel, ValidationError
from tenacity import AsyncRetrying, RetryCallState, retry_if_exception, stop_after_attempt

from lychee_ray.config import ConfigError, LLMConfig
from lychee_ray.llm.errors import AttemptError, ErrorKind, LLMCallFailed
from lychee_ray.llm.ratelimit import RateLimiter, Sleep, make_rate_limiter
from lychee_ray.llm.usage import KEY_FIELDS, STAGES, CallUsage, UsageLedger
from lychee_ray.tokens import DEFAULT_ENCODING, count_message_tokens, count_tokens

log = logging.getLogger(__name__)

T = TypeVar("T", bound=BaseModel)
FormatMode = Literal["json_schema", "json_object", "none"]
# Downgrade order when a server refuses a response format.
_FALLBACK: dict[str, FormatMode] = {"json_schema": "json_object", "json_object": "none"}
# Placeholder key for keyless local servers (vLLM, llama.cpp, Ollama): the openai client demands one.
NO_KEY = "EMPTY"
_MAX_ERROR_TEXT = 500


@dataclass(frozen=True)
class ChatResult(Generic[T]):
    """A validated reply: the parsed model, the raw content text and the call's usage."""

    parsed: T
    text: str
    usage: CallUsage


# ------------------------------------------------------------------------------------------------
# helpers
# ------------------------------------------------------------------------------------------------


def parse_retry_after(headers: Mapping[str, str], now: float | None = None) -> float | None:
    """Seconds to wait from ``retry-after-ms`` or ``retry-after`` (seconds or HTTP date); None if absent."""
    ms = headers.get("retry-after-ms")
    if ms:
        try:
            return max(0.0, float(ms) / 1000.0)
        except ValueError:
            pass
    raw = headers.get("retry-after")
    if not raw:
        return None
    try:
        return max(0.0, float(raw))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(raw)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    now_dt = datetime.fromtimestamp(time.time() if now is None else now, tz=timezone.utc)
    return max(0.0, (when - now_dt).total_seconds())


@lru_cache(maxsize=256)
def schema_for(model: type[BaseModel]) -> tuple[dict[str, Any], bool]:
    """JSON schema for ``model`` and whether it is strict-mode compatible.

    Uses the ``openai`` library's own strict converter (the one ``.parse()`` uses: all properties
    required, ``additionalProperties: false``); falls back to the plain pydantic schema, non-strict.
    """
    try:
        from openai.lib._pydantic import to_strict_json_schema

        return to_strict_json_schema(model), True
    except Exception as e:  # noqa: BLE001 — any converter failure just means "not strict"
        log.debug("schema for %s is not strict-compatible (%s); sending strict=false", model.__name__, e)
        return model.model_json_schema(), False


def schema_instruction(model: type[BaseModel]) -> str:
    """Text appended to the system prompt when the server cannot enforce the schema itself."""
    schema = json.dumps(model.model_json_schema(), separators=(",", ":"), ensure_ascii=False)
    return (
        "Reply with one JSON object only (no prose, no code fences) that validates against this "
        f"JSON Schema:\n{schema}"
    )


def _safe_schema_name(name: str) -> str:
    # OpenAI: ^[a-zA-Z0-9_-]{1,64}$
    return (re.sub(r"[^a-zA-Z0-9_-]", "_", name) or "reply")[:64]


_FENCE = re.compile(r"^```(?:json)?\s*(.*?)\s*```$", re.S | re.I)


def _strip_fences(text: str) -> str:
    m = _FENCE.match(text.strip())
    return m.group(1) if m else text.strip()


def _status_text(e: openai.APIStatusError) -> str:
    body = e.body
    msg = body.get("message") if isinstance(body, dict) else None
    text = f"HTTP {e.status_code}: {msg or e.message}"
    return text[:_MAX_ERROR_TEXT]


def _mentions(e: openai.APIStatusError, *words: str) -> bool:
    blob = (str(e.message) + " " + json.dumps(e.body, default=str)).lower()
    return any(w in blob for w in words)


@dataclass
class _Tally:
    """Running totals of one logical call over its attempts."""

    started_at: float
    t0: float
    attempts: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    estimated: bool = False
    limiter_wait_s: float = 0.0
    finish_reason: str | None = None
    keys: dict[str, str] = field(default_factory=dict)

    def usage(self, stage: str, model: str, latency_s: float, *, ok: bool,
              error: AttemptError | BaseException | None = None) -> CallUsage:
        kind = getattr(error, "kind", None) or (type(error).__name__ if error is not None else None)
        text = getattr(error, "message", None) or (str(error) if error is not None else None)
        return CallUsage(
            stage=stage, model=model, prompt_tokens=self.prompt_tokens, completion_tokens=self.completion_tokens,
            cached_tokens=self.cached_tokens, estimated=self.estimated, latency_s=latency_s,
            limiter_wait_s=self.limiter_wait_s, attempts=self.attempts, ok=ok,
            error=None if ok else text, error_kind=None if ok else kind, finish_reason=self.finish_reason,
            started_at=self.started_at, **self.keys,
        )


class _BackgroundLoop:
    """One private event loop in a daemon thread, for the sync API (keeps one HTTP pool alive)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    def run(self, coro: Coroutine[Any, Any, Any]) -> Any:
        with self._lock:
            if self.loop is None:
                self.loop = asyncio.new_event_loop()
                self._thread = threading.Thread(target=self.loop.run_forever, name="lychee-llm-sync", daemon=True)
                self._thread.start()
            loop = self.loop
        return asyncio.run_coroutine_threadsafe(coro, loop).result()

    def close(self) -> None:
        with self._lock:
            loop, thread, self.loop, self._thread = self.loop, self._thread, None, None
        if loop is not None and thread is not None:
            loop.call_soon_threadsafe(loop.stop)
            thread.join(timeout=5)
            loop.close()


# ------------------------------------------------------------------------------------------------
# client
# ------------------------------------------------------------------------------------------------


class LLMClient:
    """Schema-constrained chat calls against any OpenAI-compatible endpoint.

    One instance may be shared by many coroutines (and event loops: one ``AsyncOpenAI`` is kept per
    loop because HTTP connection pools are loop-bound). Every call appends one :class:`CallUsage`
    to ``ledger``; every HTTP attempt passes through ``limiter``.
    """

    def __init__(
        self,
        cfg: LLMConfig,
        *,
        limiter: RateLimiter | None = None,
        ledger: UsageLedger | None = None,
        openai_client: openai.AsyncOpenAI | None = None,
        sleep: Sleep = asyncio.sleep,
        encoding: str = DEFAULT_ENCODING,
    ) -> None:
        if openai_client is None and not cfg.base_url and not cfg.api_key:
            raise ConfigError("llm backend 'openai' needs llm.base_url or an API key (OPENAI_API_KEY)")
        self.config = cfg
        self.limiter: RateLimiter = limiter if limiter is not None else make_rate_limiter(cfg.rate_limit)
        self.ledger = ledger if ledger is not None else UsageLedger()
        self.encoding = encoding
        self._sleep = sleep
        self._injected = openai_client
        self._clients: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, openai.AsyncOpenAI]" = (
            weakref.WeakKeyDictionary()
        )
        self._format_mode: FormatMode = cfg.response_format
        self._max_tokens_param = "max_completion_tokens"
        self._fallback_lock = threading.Lock()
        self._sync = _BackgroundLoop()

    # -- public state ----------------------------------------------------------------------------
    @property
    def format_mode(self) -> FormatMode:
        """Response format in use: json_schema, json_object (after a refusal) or none."""
        return self._format_mode

    @property
    def max_tokens_param(self) -> str:
        """``max_completion_tokens`` or, after a refusal, the legacy ``max_tokens``."""
        return self._max_tokens_param

    # -- openai client per event loop ------------------------------------------------------------
    def _openai(self) -> openai.AsyncOpenAI:
        if self._injected is not None:
            return self._injected
        loop = asyncio.get_running_loop()
        client = self._clients.get(loop)
        if client is None:
            client = openai.AsyncOpenAI(
                api_key=self.config.api_key or NO_KEY,
                base_url=self.config.base_url,  # None = the library default (api.openai.com)
                timeout=self.config.timeout_s,
                max_retries=0,  # our loop is the only retry layer (module docstring)
            )
            self._clients[loop] = client
        return client

    # -- the call --------------------------------------------------------------------------------
    async def chat_json(
        self,
        stage: str,
        messages: Sequence[Mapping[str, str]],
        schema: type[T],
        *,
        schema_name: str | None = None,
        max_completion_tokens: int | None = None,
        keys: Mapping[str, Any] | None = None,
        validate: Callable[[T], None] | None = None,
    ) -> ChatResult[T]:
        """Send ``messages`` and return the reply validated as ``schema``.

        ``stage`` is one of encode/plan/answer/judge (for accounting); ``keys`` may carry
        conversation_id, segment_id, question_id. ``validate`` is the caller's own check of the parsed
        reply: an :class:`AttemptError` it raises rejects the reply (retried when its kind is retryable,
        counted against ``llm.max_attempts``). Raises :class:`LLMCallFailed` when no valid reply came
        within ``llm.max_attempts`` tries (the failure is in the ledger too).
        """
        if stage not in STAGES:
            raise ValueError(f"unknown stage {stage!r}; expected one of {STAGES}")
        bad = set(keys or {}) - set(KEY_FIELDS)
        if bad:
            raise ValueError(f"unknown usage keys {sorted(bad)}; allowed: {KEY_FIELDS}")
        cfg = self.config
        name = _safe_schema_name(schema_name or schema.__name__)
        max_tokens = int(max_completion_tokens or cfg.max_completion_tokens)
        msgs = [dict(m) for m in messages]
        tally = _Tally(
            started_at=time.time(), t0=time.monotonic(),
            keys={k: str(v) for k, v in (keys or {}).items() if v is not None},
        )

        retrying = AsyncRetrying(
            stop=stop_after_attempt(cfg.max_attempts),
            retry=retry_if_exception(lambda e: isinstance(e, AttemptError) and e.retryable),
            wait=self._retry_wait,
            sleep=self._sleep,
            before_sleep=lambda rs: self._log_retry(stage, rs),
            reraise=True,
        )
        try:
            async for attempt in retrying:
                with attempt:
                    parsed, text = await self._attempt(msgs, schema, name, max_tokens, tally)
                    if validate is not None:
                        validate(parsed)  # the caller's check; its AttemptError is retried like a bad reply
        except AttemptError as e:
            usage = tally.usage(stage, cfg.model, time.monotonic() - tally.t0, ok=False, error=e)
            self.ledger.record(usage)
            raise LLMCallFailed(stage, tally.attempts, e.kind, e.message, model=cfg.model, usage=usage) from e
        except BaseException as e:  # cancelled or a bug: still account for what was spent, then re-raise
            self.ledger.record(tally.usage(stage, cfg.model, time.monotonic() - tally.t0, ok=False, error=e))
            raise
        usage = tally.usage(stage, cfg.model, time.monotonic() - tally.t0, ok=True)
        self.ledger.record(usage)
        return ChatResult(parsed=parsed, text=text, usage=usage)

    def chat_json_sync(self, *args: Any, **kwargs: Any) -> ChatResult[Any]:
        """Blocking :meth:`chat_json` (same arguments) for code without an event loop."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return self._sync.run(self.chat_json(*args, **kwargs))
        raise RuntimeError("chat_json_sync() called from a running event loop; use `await chat_json(...)`")

    # -- one attempt -----------------------------------------------------------------------------
    def _request(self, msgs: list[dict[str, str]], schema: type[BaseModel], name: str,
                 max_tokens: int) -> tuple[dict[str, Any], FormatMode, int]:
        """Request kwargs, the format mode they use and the estimated prompt tokens."""
        mode = self._format_mode
        sent = msgs
        extra_prompt_tokens = 0
        kwargs: dict[str, Any] = {"model": self.config.model, "temperature": self.config.temperature}
        if mode == "json_schema":
            schema_json, strict = schema_for(schema)
            kwargs["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": name, "schema": schema_json, "strict": strict},
            }
            # Providers count the schema as prompt; include it in the reservation.
            extra_prompt_tokens = count_tokens(json.dumps(schema_json), self.encoding)
        else:
            sent = _with_instruction(msgs, schema_instruction(schema))
            if mode == "json_object":
                kwargs["response_format"] = {"type": "json_object"}
        kwargs["messages"] = sent
        kwargs[self._max_tokens_param] = max_tokens
        prompt_est = count_message_tokens(sent, self.encoding) + extra_prompt_tokens
        return kwargs, mode, prompt_est

    async def _attempt(self, msgs: list[dict[str, str]], schema: type[T], name: str, max_tokens: int,
                       tally: _Tally) -> tuple[T, str]:
        while True:  # loops only for a format / parameter fallback
            kwargs, mode, prompt_est = self._request(msgs, schema, name, max_tokens)
            param = self._max_tokens_param
            reservation = await self.limiter.acquire(prompt_est + max_tokens)
            tally.limiter_wait_s += reservation.waited_s
            tally.attempts += 1
            try:
                resp = await self._openai().chat.completions.create(**kwargs)
            except openai.APIStatusError as e:
                await self.limiter.reconcile(reservation, 0)
                if self._maybe_fallback(e, mode, param):
                    tally.attempts -= 1  # a capability probe, not a failed attempt
                    continue
                raise await self._status_error(e, tally.attempts) from e
            except openai.APITimeoutError as e:
                await self.limiter.reconcile(reservation, 0)
                raise AttemptError("timeout", f"no reply within {self.config.timeout_s:g}s") from e
            except openai.APIConnectionError as e:
                await self.limiter.reconcile(reservation, 0)
                raise AttemptError("connection", f"{e.message} ({type(e.__cause__).__name__ if e.__cause__ else 'no cause'})") from e
            except (openai.APIError, ValueError, TypeError, KeyError, AttributeError) as e:
                await self.limiter.reconcile(reservation, 0)
                raise AttemptError("invalid_response", f"unreadable HTTP reply: {str(e)[:_MAX_ERROR_TEXT]}") from e
            text, finish, spent, problem = self._account(resp, prompt_est, tally)
            await self.limiter.reconcile(reservation, spent)
            if problem is not None:
                raise problem
            return _validate(text, finish, schema), text

    def _account(self, resp: Any, prompt_est: int, tally: _Tally) -> tuple[str, str | None, int, AttemptError | None]:
        """Add one answered attempt's usage to ``tally``.

        Returns (content, finish_reason, tokens spent, problem found in the reply's shape or None).
        """
        choices = getattr(resp, "choices", None) or []
        choice = choices[0] if choices else None
        message = getattr(choice, "message", None)
        text = (getattr(message, "content", None) or "") if message is not None else ""
        refusal = getattr(message, "refusal", None) if message is not None else None
        finish = getattr(choice, "finish_reason", None) if choice is not None else None
        tally.finish_reason = finish
        u = getattr(resp, "usage", None)
        if u is not None and (u.prompt_tokens or u.completion_tokens):
            prompt, completion = int(u.prompt_tokens or 0), int(u.completion_tokens or 0)
            details = getattr(u, "prompt_tokens_details", None)
            tally.cached_tokens += int(getattr(details, "cached_tokens", None) or 0)
        else:  # provider gave no usage: count offline, and say so
            prompt = prompt_est
            completion = count_tokens(text or refusal or "", self.encoding)
            tally.estimated = True
        tally.prompt_tokens += prompt
        tally.completion_tokens += completion
        problem = None
        if choice is None:
            problem = AttemptError("invalid_response", "reply has no choices")
        elif refusal and not text:
            problem = AttemptError("empty_reply", f"model refused: {refusal[:_MAX_ERROR_TEXT]}")
        return text, finish, prompt + completion, problem

    # -- failures --------------------------------------------------------------------------------
    def _maybe_fallback(self, e: openai.APIStatusError, mode: FormatMode, param: str) -> bool:
        """Switch format/parameter when the server refused it; True = re-send now."""
        if e.status_code not in (400, 422):
            return False
        with self._fallback_lock:
            if mode in _FALLBACK and _mentions(e, "response_format", "json_schema", "json_object", "structured output"):
                if self._format_mode == mode:  # first refusal (concurrent calls may race here)
                    self._format_mode = _FALLBACK[mode]
                    log.warning(
                        "LLM endpoint %s refused response_format=%s (%s); using %s with the schema in the "
                        "system prompt for the rest of this client's life",
                        self.config.base_url or "default", mode, _status_text(e), self._format_mode,
                    )
                return True
            if param == "max_completion_tokens" and _mentions(e, "max_completion_tokens"):
                if self._max_tokens_param == param:
                    self._max_tokens_param = "max_tokens"
                    log.warning("LLM endpoint refused max_completion_tokens (%s); sending max_tokens instead",
                                _status_text(e))
                return True
        return False

    async def _status_error(self, e: openai.APIStatusError, attempt: int) -> AttemptError:
        code = e.status_code
        if code == 429:
            cfg = self.config
            ra = parse_retry_after(e.response.headers)
            if ra is not None:
                pause = min(ra, cfg.retry_after_max_s)
            else:
                pause = max(cfg.rate_limit.default_429_pause_s, self._backoff(attempt))
            log.info("LLM endpoint answered 429; pausing all calls for %.2fs (Retry-After: %s)", pause,
                     "none" if ra is None else f"{ra:g}s")
            await self.limiter.pause(pause)  # everyone waits, not only this call
            return AttemptError("rate_limited", _status_text(e), retry_after_s=pause)
        kind: ErrorKind = "server_error" if code >= 500 or code in (408, 409) else "client_error"
        return AttemptError(kind, _status_text(e))

    def _backoff(self, attempt: int) -> float:
        """Exponential backoff with "equal jitter": half fixed, half random, capped."""
        cfg = self.config
        base = min(cfg.backoff_max_s, cfg.backoff_initial_s * (2 ** max(0, attempt - 1)))
        return base / 2 + random.uniform(0, base / 2)

    def _retry_wait(self, rs: RetryCallState) -> float:
        exc = rs.outcome.exception() if rs.outcome is not None else None
        if isinstance(exc, AttemptError) and exc.kind == "rate_limited":
            return 0.0  # the limiter pause already holds the next acquire back
        return self._backoff(rs.attempt_number)

    @staticmethod
    def _log_retry(stage: str, rs: RetryCallState) -> None:
        exc = rs.outcome.exception() if rs.outcome is not None else None
        wait = rs.next_action.sleep if rs.next_action is not None else 0.0
        log.debug("LLM %s attempt %d failed (%s); retrying in %.2fs", stage, rs.attempt_number, exc, wait)

    # -- lifecycle -------------------------------------------------------------------------------
    async def aclose(self) -> None:
        """Close the HTTP pool of the current event loop (and the sync thread's)."""
        loop = asyncio.get_running_loop()
        client = self._clients.pop(loop, None)
        if client is not None:
            await client.close()
        await asyncio.to_thread(self.close)

    def close(self) -> None:
        """Close the sync API's loop and its HTTP pool."""
        bg = self._sync.loop
        if bg is not None:
            client = self._clients.pop(bg, None)
            if client is not None:
                asyncio.run_coroutine_threadsafe(client.close(), bg).result(timeout=5)
        self._sync.close()

    def __enter__(self) -> "LLMClient":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> "LLMClient":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


def _with_instruction(msgs: list[dict[str, str]], instruction: str) -> list[dict[str, str]]:
    """Append ``instruction`` to the (first) system message, or prepend one."""
    out = [dict(m) for m in msgs]
    for m in out:
        if m.get("role") == "system":
            m["content"] = f"{m.get('content') or ''}\n\n{instruction}".strip()
            return out
    return [{"role": "system", "content": instruction}, *out]


def _validate(text: str, finish: str | None, schema: type[T]) -> T:
    """Parse and validate the content; raises :class:`AttemptError` for unusable replies."""
    if finish == "length":
        raise AttemptError("truncated", "reply cut off at max_completion_tokens (finish_reason=length)")
    if finish == "content_filter":
        raise AttemptError("empty_reply", "reply withheld by the provider (finish_reason=content_filter)")
    body = _strip_fences(text)
    if not body:
        raise AttemptError("empty_reply", f"empty content (finish_reason={finish})")
    try:
        obj = json.loads(body)
    except json.JSONDecodeError as e:
        raise AttemptError("invalid_json", f"{e.msg} at char {e.pos}: {body[:120]!r}") from e
    try:
        return schema.model_validate(obj)
    except ValidationError as e:
        errs = "; ".join(f"{'.'.join(map(str, x['loc'])) or '<root>'}: {x['msg']}" for x in e.errors()[:5])
        raise AttemptError("schema_violation", f"{schema.__name__}: {errs}"[:_MAX_ERROR_TEXT]) from e
