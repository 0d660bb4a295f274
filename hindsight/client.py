"""`from hindsight import MemoryClient`: the Python client over the HTTP API.

```python
from hindsight import MemoryClient

memory = MemoryClient("http://127.0.0.1:8765", token="…", namespace="agent-42:user-7")
memory.remember("I prefer dark mode.")
for hit in memory.recall("which theme does the user like?"):
    print(hit.score, hit.content, hit.metadata["confidence"])
```

HTTP statuses become typed errors: 401 `Unauthorized`, 403 `Forbidden`, 404 `NotFound`, 409 `Conflict`,
413/422 `InvalidInput`, 5xx and connection failures `TransientError` (worth retrying).
"""

from __future__ import annotations

import builtins
import uuid
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

import httpx

from hindsight.errors import HindsightError, InvalidInput, NotFound, TransientError
from schemas.events import LSN_HEADER, MIN_LSN_HEADER


class Unauthorized(HindsightError):
    """401: no token, or a token the server does not know."""


class Forbidden(HindsightError):
    """403: the token may not use this namespace."""


class Conflict(InvalidInput):
    """409: the memory's state does not allow the operation (e.g. verify a forgotten memory)."""


@dataclass
class Hit:
    """One recalled memory: `.score`, `.content`, `.id`, and everything else about it in `.metadata`
    (key, kind, source, confidence, state, age_days, last_verified_at, score parts, provenance, ...)."""

    id: uuid.UUID
    score: float
    content: str
    metadata: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_api(cls, hit: dict[str, Any]) -> Hit:
        """A memory hit of /search."""
        return cls._from(hit, "memory", "value")

    @classmethod
    def from_episode(cls, hit: dict[str, Any]) -> Hit:
        """An episode hit of /episodes/search."""
        return cls._from(hit, "episode", "summary")

    @classmethod
    def from_round(cls, hit: dict[str, Any]) -> Hit:
        """A round hit of /rounds/search."""
        return cls._from(hit, "round", "text")

    @classmethod
    def _from(cls, hit: dict[str, Any], item: str, text: str) -> Hit:
        found = hit[item]
        meta = {k: v for k, v in found.items() if k not in ("id", text)}
        meta.update({k: v for k, v in hit.items() if k not in (item, "score")})
        return cls(id=uuid.UUID(found["id"]), score=hit["score"], content=found[text], metadata=meta)


class MemoryClient:
    """Talks to a hindsight API. `token` and `base_url` default to the settings (auth.client_token,
    http://api_host:api_port); `namespace` is the default for every call that takes one."""

    def __init__(
        self,
        base_url: str | None = None,
        *,
        token: str | None = None,
        namespace: str | None = None,
        timeout: float = 30.0,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        if base_url is None or token is None or namespace is None:
            from hindsight.config import get_settings

            settings = get_settings()
            base_url = base_url or f"http://{settings.api_host}:{settings.api_port}"
            token = token if token is not None else settings.auth.client_token
            namespace = namespace or settings.auth.default_namespace
        self.namespace = namespace
        self.written: str | None = None
        """The WAL position the API answered this client's last write with (`X-Hindsight-LSN`, sent only when the
        API reads from a replica). Every read sends it back, so this client always reads its own writes."""
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._http = httpx.Client(base_url=base_url.rstrip("/"), headers=headers, timeout=timeout, transport=transport)

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> MemoryClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- plumbing ----------------------------------------------------------------------------------------------
    def _ns(self, namespace: str | None) -> str:
        ns = namespace or self.namespace
        if not ns:
            raise InvalidInput("no namespace: pass namespace=… here or to MemoryClient(…)")
        return quote(ns, safe=":@.-_")

    def _request(self, method: str, path: str, **kw: Any) -> Any:
        if method == "GET" and self.written:
            kw["headers"] = {**kw.get("headers", {}), MIN_LSN_HEADER: self.written}
        try:
            response = self._http.request(method, path, **kw)
        except httpx.TransportError as exc:
            raise TransientError(f"{method} {path}: {exc}") from exc
        if response.status_code < 400:
            lsn = response.headers.get(LSN_HEADER)
            if lsn and method != "GET":
                self.written = lsn
            return response.json() if response.content else None
        try:
            detail = response.json().get("detail", response.text)
        except ValueError:
            detail = response.text
        message = detail if isinstance(detail, str) else str(detail)
        status = response.status_code
        if status == 401:
            raise Unauthorized(message)
        if status == 403:
            raise Forbidden(message)
        if status == 404:
            raise NotFound(message)
        if status == 409:
            raise Conflict(message)
        if status in (400, 413, 422):
            raise InvalidInput(message)
        if status == 429 or status >= 500:
            raise TransientError(f"HTTP {status}: {message}")
        raise HindsightError(f"HTTP {status}: {message}")

    # -- long-term memory --------------------------------------------------------------------------------------
    def remember(
        self, content: str, metadata: dict[str, Any] | None = None, *, namespace: str | None = None
    ) -> list[dict[str, Any]]:
        """Remember free text now (privileged write); returns the memories written (`action`, `memory`)."""
        body = {"content": content, "metadata": metadata or {}}
        return self._request("POST", f"/v1/namespaces/{self._ns(namespace)}/remember", json=body)["results"]

    def write(
        self,
        key: str,
        value: str,
        *,
        kind: str = "fact",
        source: str = "manual",
        confidence: float = 0.9,
        ttl_days: int | None = None,
        pinned: bool = False,
        namespace: str | None = None,
    ) -> dict[str, Any]:
        """Write one structured fact (reconciled like a distilled one: refresh, merge or conflict)."""
        body = {
            "key": key,
            "value": value,
            "kind": kind,
            "source": source,
            "confidence": confidence,
            "ttl_days": ttl_days,
            "pinned": pinned,
        }
        return self._request("POST", f"/v1/namespaces/{self._ns(namespace)}/memories", json=body)

    def recall(
        self,
        query: str,
        *,
        namespace: str | None = None,
        top_k: int | None = None,
        min_score: float | None = None,
        budget_tokens: int | None = None,
        model: str | None = None,
    ) -> list[Hit]:
        """The best memories for `query`, best first; with `budget_tokens`, only those the context block would
        admit within it (tokens counted for `model`, default the server's llm.model)."""
        params: dict[str, Any] = {"q": query}
        for name, value in (
            ("top_k", top_k),
            ("min_score", min_score),
            ("budget_tokens", budget_tokens),
            ("model", model),
        ):
            if value is not None:
                params[name] = value
        result = self._request("GET", f"/v1/namespaces/{self._ns(namespace)}/search", params=params)
        return [Hit.from_api(h) for h in result["hits"]]

    def recall_episodes(self, query: str, *, namespace: str | None = None, top_k: int | None = None) -> list[Hit]:
        """Summaries of earlier conversations that best match `query` (meaning and keywords), best first
        (`.content` is the summary; `.metadata` has occurred_at, turn_ids, transcript_id, vector, keyword,
        cosine, age_days)."""
        params: dict[str, Any] = {"q": query}
        if top_k is not None:
            params["top_k"] = top_k
        result = self._request("GET", f"/v1/namespaces/{self._ns(namespace)}/episodes/search", params=params)
        return [Hit.from_episode(h) for h in result["hits"]]

    def recall_rounds(self, query: str, *, namespace: str | None = None, top_k: int | None = None) -> list[Hit]:
        """Turns of earlier conversations (a user turn and the start of its reply) that best match `query`,
        best first (`.content` is the round's text; `.metadata` has occurred_at, turn_ids, transcript_id, seq,
        vector, keyword, cosine, age_days)."""
        params: dict[str, Any] = {"q": query}
        if top_k is not None:
            params["top_k"] = top_k
        result = self._request("GET", f"/v1/namespaces/{self._ns(namespace)}/rounds/search", params=params)
        return [Hit.from_round(h) for h in result["hits"]]

    def context(
        self,
        query: str,
        *,
        budget_tokens: int = 1000,
        model: str | None = None,
        namespace: str | None = None,
        episodes: bool = True,
        rounds: bool = True,
    ) -> dict[str, Any]:
        """A memory block for the end of a system prompt (`text`, `tokens`, `memory_ids`, `episode_ids`,
        `round_ids`, `truncated`); `episodes=False` leaves out the summaries of earlier conversations,
        `rounds=False` their turns."""
        params: dict[str, Any] = {"q": query, "budget_tokens": budget_tokens, "episodes": episodes, "rounds": rounds}
        if model:
            params["model"] = model
        return self._request("GET", f"/v1/namespaces/{self._ns(namespace)}/context", params=params)

    def get(self, memory_id: uuid.UUID | str, *, namespace: str | None = None) -> dict[str, Any]:
        """One memory with provenance, history and conflicts."""
        return self._request("GET", f"/v1/namespaces/{self._ns(namespace)}/memories/{memory_id}")

    def list(self, *, state: list[str] | None = None, namespace: str | None = None, limit: int = 50) -> dict[str, Any]:
        params: dict[str, Any] = {"limit": limit}
        if state:
            params["state"] = state
        return self._request("GET", f"/v1/namespaces/{self._ns(namespace)}/memories", params=params)

    def forget(
        self, memory_id: uuid.UUID | str, *, reason: str | None = None, namespace: str | None = None
    ) -> dict[str, Any]:
        """Soft forget (kept for audit, undone by `unforget`)."""
        path = f"/v1/namespaces/{self._ns(namespace)}/memories/{memory_id}/forget"
        return self._request("POST", path, json={"reason": reason})

    def unforget(self, memory_id: uuid.UUID | str, *, namespace: str | None = None) -> dict[str, Any]:
        return self._request("POST", f"/v1/namespaces/{self._ns(namespace)}/memories/{memory_id}/unforget")

    def verify(
        self, memory_id: uuid.UUID | str, *, confidence: float | None = None, namespace: str | None = None
    ) -> dict[str, Any]:
        """Re-confirm a memory: confidence up, age reset, a stale memory revived."""
        path = f"/v1/namespaces/{self._ns(namespace)}/memories/{memory_id}/verify"
        return self._request("POST", path, json={"confidence": confidence})

    def erase(
        self,
        memory_id: uuid.UUID | str | None = None,
        *,
        key_prefix: str | None = None,
        subject: str | None = None,
        namespace: str | None = None,
    ) -> dict[str, Any]:
        """Erase for real (irreversible): one memory, or everything of a subject (`key_prefix` / `subject`)."""
        ns = self._ns(namespace)
        if memory_id is not None:
            return self._request("DELETE", f"/v1/namespaces/{ns}/memories/{memory_id}")
        body = {"key_prefix": key_prefix, "subject": subject}
        return self._request("POST", f"/v1/namespaces/{ns}/erase", json=body)

    def erase_transcript(self, transcript_id: uuid.UUID | str, *, namespace: str | None = None) -> dict[str, Any]:
        """Erase one transcript for real (irreversible): its turns, episode and provenance; memories it alone
        was the source of are erased too."""
        return self._request("DELETE", f"/v1/namespaces/{self._ns(namespace)}/transcripts/{transcript_id}")

    def erase_namespace(self, *, confirm: str, namespace: str | None = None) -> dict[str, Any]:
        """Erase the whole namespace for real (irreversible; an end user leaving). `confirm` must repeat the
        namespace."""
        ns = self._ns(namespace)
        return self._request("DELETE", f"/v1/namespaces/{ns}", params={"confirm": confirm})

    # -- working memory and transcripts ----------------------------------------------------------------------
    def append_working_memory(
        self,
        session_id: str,
        role: str,
        content: str,
        *,
        name: str | None = None,
        turn_id: str | None = None,
        namespace: str | None = None,
    ) -> bool:
        """Append a turn to a live session. Returns True when it fired a turn-threshold event."""
        body = {k: v for k, v in {"role": role, "content": content, "name": name, "turn_id": turn_id}.items() if v}
        path = f"/v1/namespaces/{self._ns(namespace)}/sessions/{quote(session_id, safe='')}/turns"
        return bool(self._request("POST", path, json=body)["threshold_fired"])

    def get_working_memory(self, session_id: str, *, namespace: str | None = None) -> builtins.list[dict[str, Any]]:
        """The session's recent turns (within max_turns / max_tokens), oldest first; NotFound once expired."""
        path = f"/v1/namespaces/{self._ns(namespace)}/sessions/{quote(session_id, safe='')}"
        return self._request("GET", path)["turns"]

    def archive_to_long_term(self, session_id: str, *, namespace: str | None = None) -> bool:
        """End the session: its remaining turns are handed to distillation. True if any were pending."""
        path = f"/v1/namespaces/{self._ns(namespace)}/sessions/{quote(session_id, safe='')}/end"
        return bool(self._request("POST", path)["published"])

    def publish_transcript(
        self,
        turns: builtins.list[dict[str, Any]],
        *,
        conversation_id: str | None = None,
        occurred_at: str | None = None,
        idempotency_key: str | None = None,
        namespace: str | None = None,
    ) -> dict[str, Any]:
        """Hand a finished conversation to distillation (accepted once per idempotency key)."""
        body: dict[str, Any] = {"turns": turns}
        for k, v in (
            ("conversation_id", conversation_id),
            ("occurred_at", occurred_at),
            ("idempotency_key", idempotency_key),
        ):
            if v is not None:
                body[k] = v
        return self._request("POST", f"/v1/namespaces/{self._ns(namespace)}/transcripts", json=body)

    def transcript_status(self, transcript_id: uuid.UUID | str, *, namespace: str | None = None) -> dict[str, Any]:
        return self._request("GET", f"/v1/namespaces/{self._ns(namespace)}/transcripts/{transcript_id}")


__all__ = ["Conflict", "Forbidden", "Hit", "MemoryClient", "Unauthorized"]
