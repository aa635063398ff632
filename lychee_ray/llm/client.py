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

Pieces kept apart: :mod:`~lychee_ray.llm.schema` (schemas, reply parsing), :mod:`~lychee_ray.llm.provider_errors`
(Retry-After, error bodies), :mod:`~lychee_ray.llm.sync` (the blocking API's loop) and
:class:`~lychee_ray.llm.usage.CallTally` (per-call accounting).
"""

from __future__ import annotations

import asyncio
import logging
import random
import threading
import time
import weakref
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, Literal, TypeVar
from collections.abc import Callable, Mapping, Sequence

from pydantic import BaseModel
from tenacity import AsyncRetrying, RetryCallState, retry_if_exception

from lychee_ray.config import ConfigError, LLMConfig
from lychee_ray.llm.errors import INVALID_REPLY_KINDS, MAX_ERROR_TEXT, AttemptError, ErrorKind, LLMCallFailed
from lychee_ray.llm.provider_errors import mentions, parse_retry_after, status_text
from lychee_ray.llm.prompts import schema_tokens
from lychee_ray.llm.ratelimit import RateLimiter, Sleep, make_rate_limiter
from lychee_ray.llm.schema import parse_reply, safe_schema_name, schema_for, schema_instruction, with_instruction
from lychee_ray.llm.sync import BackgroundLoop
from lychee_ray.llm.usage import KEY_FIELDS, STAGES, CallTally, CallUsage, Stage, UsageLedger
from lychee_ray.text.tokens import DEFAULT_ENCODING, count_message_tokens, count_tokens

if TYPE_CHECKING:
    import openai

log = logging.getLogger(__name__)

T = TypeVar("T", bound=BaseModel)
FormatMode = Literal["json_schema", "json_object", "none"]
# Downgrade order when a server refuses a response format.
_FALLBACK: dict[str, FormatMode] = {"json_schema": "json_object", "json_object": "none"}
# Placeholder key for keyless local servers (vLLM, llama.cpp, Ollama): the openai client demands one.
NO_KEY = "EMPTY"
_CLOSE_TIMEOUT_S = 5.0  # closing the sync loop's HTTP pool never hangs


def _sdk() -> Any:
    """The ``openai`` SDK, imported on first use: importing it costs about as much CPU as the rest of
    a build stage's imports together, and most processes (the rules backend, every build stage but
    the one that encodes, the query CLI) never send a chat call."""
    import openai

    return openai


@dataclass(frozen=True)
class ChatResult(Generic[T]):
    """A validated reply: the parsed model, the raw content text and the call's usage."""

    parsed: T
    text: str
    usage: CallUsage


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
        self._clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, openai.AsyncOpenAI] = (
            weakref.WeakKeyDictionary()
        )
        self._format_mode: FormatMode = cfg.response_format
        self._max_tokens_param = "max_completion_tokens"
        self._fallback_lock = threading.Lock()
        self._sync = BackgroundLoop()

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
            client = _sdk().AsyncOpenAI(
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
        stage: Stage,
        messages: Sequence[Mapping[str, str]],
        schema: type[T],
        *,
        schema_name: str | None = None,
        max_completion_tokens: int | None = None,
        keys: Mapping[str, Any] | None = None,
        validate: Callable[[T], None] | None = None,
        max_invalid_attempts: int | None = None,
        max_truncated_attempts: int | None = None,
    ) -> ChatResult[T]:
        """Send ``messages`` and return the reply validated as ``schema``.

        ``stage`` is one of encode/plan/answer/judge (for accounting); ``keys`` may carry
        conversation_id, segment_id, question_id. ``validate`` is the caller's own check of the parsed
        reply: an :class:`AttemptError` it raises rejects the reply (retried when its kind is retryable,
        counted against ``llm.max_attempts``). Raises :class:`LLMCallFailed` when no valid reply came
        within ``llm.max_attempts`` tries (the failure is in the ledger too). ``max_invalid_attempts``
        caps the tries that end in an unusable reply (invalid JSON, schema violation, truncated...) for a
        caller with a cheap fallback: at temperature 0 the same prompt tends to fail the same way, and
        each try costs a whole prompt; transport errors (429, 5xx, timeouts) still get every attempt.
        ``max_truncated_attempts`` caps the tries that end cut at the token limit (``truncated``): the
        same prompt with the same limit is cut the same way. The :class:`LLMCallFailed` of a call that
        ended cut carries the cut content (``reply_text``) for a caller that can use its complete parts.
        """
        if stage not in STAGES:
            raise ValueError(f"unknown stage {stage!r}; expected one of {STAGES}")
        bad = set(keys or {}) - set(KEY_FIELDS)
        if bad:
            raise ValueError(f"unknown usage keys {sorted(bad)}; allowed: {KEY_FIELDS}")
        cfg = self.config
        name = safe_schema_name(schema_name or schema.__name__)
        max_tokens = int(max_completion_tokens or cfg.max_completion_tokens)
        msgs = [dict(m) for m in messages]
        tally = CallTally(
            started_at=time.time(), t0=time.monotonic(),
            keys={k: str(v) for k, v in (keys or {}).items() if v is not None},
        )

        invalid: set[int] = set()  # numbers of the attempts that ended in an unusable reply
        cut: set[int] = set()  # ... of those, the ones cut at the token limit

        def stop(rs: RetryCallState) -> bool:
            exc = rs.outcome.exception() if rs.outcome is not None else None
            if isinstance(exc, AttemptError) and exc.kind in INVALID_REPLY_KINDS:
                invalid.add(rs.attempt_number)
                if max_invalid_attempts is not None and len(invalid) >= max_invalid_attempts:
                    return True
                if exc.kind == "truncated":
                    cut.add(rs.attempt_number)
                    if max_truncated_attempts is not None and len(cut) >= max_truncated_attempts:
                        return True
            return rs.attempt_number >= cfg.max_attempts

        retrying = AsyncRetrying(
            stop=stop,
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
            raise LLMCallFailed(stage, tally.attempts, e.kind, e.message, model=cfg.model, usage=usage,
                                reply_text=e.reply_text) from e
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
            extra_prompt_tokens = schema_tokens(schema, self.encoding)
        else:
            sent = with_instruction(msgs, schema_instruction(schema))
            if mode == "json_object":
                kwargs["response_format"] = {"type": "json_object"}
        kwargs["messages"] = sent
        kwargs[self._max_tokens_param] = max_tokens
        prompt_est = count_message_tokens(sent, self.encoding) + extra_prompt_tokens
        return kwargs, mode, prompt_est

    async def _attempt(self, msgs: list[dict[str, str]], schema: type[T], name: str, max_tokens: int,
                       tally: CallTally) -> tuple[T, str]:
        openai = _sdk()
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
                raise AttemptError("invalid_response", f"unreadable HTTP reply: {str(e)[:MAX_ERROR_TEXT]}") from e
            text, finish, spent, problem = self._account(resp, prompt_est, tally)
            await self.limiter.reconcile(reservation, spent)
            if problem is not None:
                raise problem
            return parse_reply(text, finish, schema), text

    def _account(self, resp: Any, prompt_est: int, tally: CallTally) -> tuple[str, str | None, int, AttemptError | None]:
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
            problem = AttemptError("empty_reply", f"model refused: {refusal[:MAX_ERROR_TEXT]}")
        return text, finish, prompt + completion, problem

    # -- failures --------------------------------------------------------------------------------
    def _maybe_fallback(self, e: openai.APIStatusError, mode: FormatMode, param: str) -> bool:
        """Switch format/parameter when the server refused it; True = re-send now."""
        if e.status_code not in (400, 422):
            return False
        with self._fallback_lock:
            if mode in _FALLBACK and mentions(e, "response_format", "json_schema", "json_object", "structured output"):
                if self._format_mode == mode:  # first refusal (concurrent calls may race here)
                    self._format_mode = _FALLBACK[mode]
                    log.warning(
                        "LLM endpoint %s refused response_format=%s (%s); using %s with the schema in the "
                        "system prompt for the rest of this client's life",
                        self.config.base_url or "default", mode, status_text(e), self._format_mode,
                    )
                return True
            if param == "max_completion_tokens" and mentions(e, "max_completion_tokens"):
                if self._max_tokens_param == param:
                    self._max_tokens_param = "max_tokens"
                    log.warning("LLM endpoint refused max_completion_tokens (%s); sending max_tokens instead",
                                status_text(e))
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
            return AttemptError("rate_limited", status_text(e), retry_after_s=pause)
        kind: ErrorKind = "server_error" if code >= 500 or code in (408, 409) else "client_error"
        return AttemptError(kind, status_text(e))

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
                asyncio.run_coroutine_threadsafe(client.close(), bg).result(timeout=_CLOSE_TIMEOUT_S)
        self._sync.close()

    def __enter__(self) -> LLMClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> LLMClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

