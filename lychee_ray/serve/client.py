"""A small typed client of a running query service (``lychee-ray serve``), over httpx.

::

    client = MemoryClient("http://127.0.0.1:8000", token)
    res = client.query("When did we go hiking?", conversation_id="c-1")   # a QueryResult
    res = client.query(QueryRequest(question="When did we go hiking?", conversation_id="c-1"))  # the same
    hits = client.search("hiking", user_id="u-1")                         # a SearchResult
    client.append_turns("c-1", [{"turn_id": "t9", "content": "..."}], user_id="u-1")  # an AppendResult
    client.flush("c-1")                                                   # an AppendResult
    client.delete_conversation("c-1")                                     # an EraseReport
    client.history(conversation_id="c-1", slot="user · address")          # a HistoryResult
    client.forget("u-1", slot="user · address")                           # a ForgetReport

A failed call raises :class:`RemoteError`, whose ``status`` (None = no HTTP answer at all), ``code``
(the error body's stable ``error`` field) and ``detail`` say what went wrong; ``data`` holds the
body's other fields (``turn_id`` of a 409 ``history_conflict``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, TypeVar
from urllib.parse import quote, urlencode

import httpx

from lychee_ray.ingest.forget import ForgetReport
from lychee_ray.ingest.increment.models import AppendResult, AppendTurn
from lychee_ray.io.store.erase import EraseReport
from lychee_ray.query.history import HistoryResult
from lychee_ray.query.request import QueryRequest, as_request
from lychee_ray.query.results import QueryResult, SearchResult

# Seconds to wait for the service (a query makes two LLM calls; the embedding model may be cold).
DEFAULT_TIMEOUT_S = 120.0

R = TypeVar("R", SearchResult, QueryResult)


class RemoteError(Exception):
    """A service call that gave no result: the service was unreachable (``status`` None) or
    answered with an error status (``code`` from the error body when it had one)."""

    def __init__(self, url: str, status: int | None, detail: str, code: str | None = None,
                 data: dict[str, Any] | None = None) -> None:
        self.url, self.status, self.detail, self.code = url, status, detail, code
        self.data = data or {}
        super().__init__(f"cannot reach {url}: {detail}" if status is None else f"HTTP {status}: {detail}")

    @property
    def unreachable(self) -> bool:
        """True when no HTTP answer came back (connection refused, timeout, ...)."""
        return self.status is None


class MemoryClient:
    """Calls ``/v1/search``, ``/v1/query``, the append and the erasure endpoints of the service at ``url`` with bearer ``token``.

    ``http`` is an optional ``httpx.Client`` to send through (connection reuse, tests; its own
    timeouts apply); without one each call is a single ``httpx.post`` waiting up to ``timeout`` s.
    """

    def __init__(self, url: str, token: str | None = None, *, timeout: float | None = None,
                 http: httpx.Client | None = None) -> None:
        self.url = url
        self.timeout = DEFAULT_TIMEOUT_S if timeout is None else timeout
        self._headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._http = http

    def search(self, question: str | QueryRequest, *, conversation_id: str | None = None, user_id: str | None = None,
               question_date: str | None = None, budget_tokens: int | None = None,
               recent_turns: Sequence[Mapping[str, Any] | str] | None = None, explain: bool = False) -> SearchResult:
        """Scoped evidence for the question (no answer call): a :class:`QueryRequest`, or the question
        and the request's other fields as keywords (``recent_turns``: the agent's last turns)."""
        req = _request(question, conversation_id=conversation_id, user_id=user_id, question_date=question_date,
                       budget_tokens=budget_tokens, recent_turns=recent_turns, explain=explain)
        return self._ask("/v1/search", SearchResult, req)

    def query(self, question: str | QueryRequest, *, conversation_id: str | None = None, user_id: str | None = None,
              question_date: str | None = None, budget_tokens: int | None = None,
              recent_turns: Sequence[Mapping[str, Any] | str] | None = None, explain: bool = False) -> QueryResult:
        """The answer to the question from scoped memory, with its evidence (arguments as for :meth:`search`)."""
        req = _request(question, conversation_id=conversation_id, user_id=user_id, question_date=question_date,
                       budget_tokens=budget_tokens, recent_turns=recent_turns, explain=explain)
        return self._ask("/v1/query", QueryResult, req)

    def append_turns(self, conversation_id: str, turns: list[AppendTurn | dict[str, Any]], *,
                     user_id: str | None = None, flush: bool = False) -> AppendResult:
        """Append turns (``POST /v1/conversations/{id}/turns``; idempotent by turn id, so a retry after
        a timeout or a 503 ``conversation_busy`` is safe); what was stored and encoded."""
        body: dict[str, Any] = {"turns": [t.model_dump(exclude_none=True) if isinstance(t, AppendTurn) else t
                                          for t in turns], "flush": flush}
        if user_id is not None:
            body["user_id"] = user_id
        return AppendResult.model_validate(self._post(f"/v1/conversations/{quote(conversation_id, safe='')}/turns", body))

    def flush(self, conversation_id: str, *, user_id: str | None = None) -> AppendResult:
        """Encode the conversation's open tail segment now (``POST /v1/conversations/{id}/flush``)."""
        body = {"user_id": user_id} if user_id is not None else {}
        return AppendResult.model_validate(self._post(f"/v1/conversations/{quote(conversation_id, safe='')}/flush", body))

    def delete_conversation(self, conversation_id: str) -> EraseReport:
        """Erase one conversation everywhere (``DELETE /v1/conversations/{id}``); 404 → :class:`RemoteError`."""
        return EraseReport.model_validate(self._send("DELETE", f"/v1/conversations/{quote(conversation_id, safe='')}"))

    def delete_user(self, user_id: str) -> EraseReport:
        """Erase every conversation of ``user_id`` (``DELETE /v1/users/{user_id}``)."""
        return EraseReport.model_validate(self._send("DELETE", f"/v1/users/{quote(user_id, safe='')}"))

    def forget(self, user_id: str, *, record_id: str | None = None, slot: str | None = None,
               entity: str | None = None, expired: bool = False, conversation_id: str | None = None,
               redact_turns: bool = False) -> ForgetReport:
        """Forget one record, every record of a slot or of an entity, or (``expired``) the records
        past the service's ``store.retention_days``, of ``user_id`` (``POST /v1/users/{id}/forget``);
        nothing matching is a 404, not exactly one selector a 422 (:class:`RemoteError`)."""
        body: dict[str, Any] = {k: v for k, v in (("record_id", record_id), ("slot", slot), ("entity", entity),
                                                  ("conversation_id", conversation_id)) if v is not None}
        body.update(expired=expired, redact_turns=redact_turns)
        return ForgetReport.model_validate(self._post(f"/v1/users/{quote(user_id, safe='')}/forget", body))

    def history(self, *, conversation_id: str | None = None, user_id: str | None = None, slot: str | None = None,
                subject: str | None = None, record_id: str | None = None) -> HistoryResult:
        """A slot's values in time order (``GET /v1/history``)."""
        params = {k: v for k, v in (("conversation_id", conversation_id), ("user_id", user_id), ("slot", slot),
                                    ("subject", subject), ("record_id", record_id)) if v is not None}
        return HistoryResult.model_validate(self._send("GET", f"/v1/history?{urlencode(params)}"))

    def _ask(self, path: str, model: type[R], req: QueryRequest) -> R:
        if req.llm is not None or req.question_id is not None:
            raise ValueError("the service chooses the backend and the question id: a request for it sets neither")
        d = self._post(path, req.body())
        d["timings_ms"] = d.pop("timings", {})  # the JSON's name for it (serialization alias)
        return model.model_validate(d)

    def _post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        return self._send("POST", path, body)

    def _send(self, method: str, path: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
        url = self.url.rstrip("/") + path
        try:
            if method == "POST":  # (httpx.post: what callers and tests patch)
                r = (self._http.post(url, json=body, headers=self._headers) if self._http is not None
                     else httpx.post(url, json=body, headers=self._headers, timeout=self.timeout))
            elif self._http is not None:
                r = self._http.request(method, url, headers=self._headers)
            else:
                r = httpx.request(method, url, headers=self._headers, timeout=self.timeout)
        except httpx.HTTPError as e:
            raise RemoteError(self.url, None, str(e)) from e
        if r.status_code != 200:
            raise _error_of(self.url, r)
        return r.json()


def _request(question: str | QueryRequest, **fields: Any) -> QueryRequest:
    """``question`` when it is a request (no other field given), else the request the fields make."""
    if isinstance(question, QueryRequest):
        return as_request(question, **fields)
    return as_request(fields.pop("conversation_id"), question, fields.pop("question_date"), fields.pop("budget_tokens"),
                      **fields)


def _error_of(url: str, r: httpx.Response) -> RemoteError:
    """The :class:`RemoteError` of an error response (the service's ``{"detail", "error"}`` body,
    or the raw text of another server's)."""
    try:
        d = r.json()
    except ValueError:
        d = None
    if not isinstance(d, dict):
        return RemoteError(url, r.status_code, r.text)
    detail, code = d.get("detail", r.text), d.get("error")
    # a 422's detail is FastAPI's list of problems: shown as it prints
    return RemoteError(url, r.status_code, detail if isinstance(detail, str) else str(detail),
                       code if isinstance(code, str) else None,
                       {k: v for k, v in d.items() if k not in ("detail", "error")})


__all__ = ["DEFAULT_TIMEOUT_S", "MemoryClient", "RemoteError"]
