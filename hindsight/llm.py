"""The OpenAI-compatible chat client behind `pipeline.base.LLMClient`.

Works with any server that speaks `/v1/chat/completions` (OpenAI, vLLM, llama.cpp, Ollama, LM Studio...).
Temperature 0, a `json_schema` response format, pydantic validation of the answer, and our own tenacity
retry (the SDK's is turned off) so that only transient failures are retried and every failure ends as a
hindsight TransientError (Celery retries later) or PermanentError (dead letter).
"""

from __future__ import annotations

import json
import random
import re
import time
from typing import Any, TypeVar, cast

import openai
import structlog
from pydantic import BaseModel, ValidationError
from tenacity import RetryCallState, Retrying, retry_if_exception, stop_after_attempt

from hindsight.config import LLMSettings
from hindsight.errors import PermanentError, TransientError

T = TypeVar("T", bound=BaseModel)

log = structlog.get_logger(__name__)

_TRANSIENT_STATUS = frozenset({408, 409, 425, 429})
_FENCE = re.compile(r"^\s*```[A-Za-z0-9_-]*\s*\n?(.*?)\n?\s*```\s*$", re.DOTALL)
_SCHEMA_NAME = re.compile(r"[^A-Za-z0-9_-]")
_KEYLIKE = re.compile(r"\b(sk|pk|rk)-[A-Za-z0-9_-]{8,}")


class MalformedAnswer(Exception):
    """The model answered, but not with JSON matching the response model (worth another try)."""


class _RetryAfterTooLong(Exception):
    """The server asked us to wait longer than we are willing to block a worker for."""

    def __init__(self, cause: openai.APIStatusError, seconds: float) -> None:
        super().__init__(f"retry-after {seconds:g}s")
        self.cause = cause
        self.seconds = seconds


def extract_json(text: str) -> Any:
    """Parse the JSON value in a model's answer: bare, ``` fenced, or after some leading prose."""
    stripped = text.strip()
    fenced = _FENCE.match(stripped)
    if fenced:
        stripped = fenced.group(1).strip()
    try:
        return json.loads(stripped)
    except json.JSONDecodeError:
        pass
    # Leading prose ("Here is the JSON:") or trailing chatter: decode from each '{' until one parses.
    decoder = json.JSONDecoder()
    start = stripped.find("{")
    tries = 0
    while start != -1 and tries < 50:
        try:
            value, _ = decoder.raw_decode(stripped, start)
            return value
        except json.JSONDecodeError:
            start = stripped.find("{", start + 1)
            tries += 1
    raise MalformedAnswer(f"answer is not JSON ({len(text)} chars)")


def _status(exc: BaseException) -> int | None:
    return exc.status_code if isinstance(exc, openai.APIStatusError) else None


def _is_transient_api_error(exc: BaseException) -> bool:
    if isinstance(exc, openai.APIConnectionError):  # includes APITimeoutError
        return True
    status = _status(exc)
    return status is not None and (status in _TRANSIENT_STATUS or status >= 500)


def _retry_after_seconds(exc: BaseException) -> float | None:
    if not isinstance(exc, openai.APIStatusError):
        return None
    headers = exc.response.headers
    try:
        if "retry-after-ms" in headers:
            return float(headers["retry-after-ms"]) / 1000.0
        if "retry-after" in headers:
            return float(headers["retry-after"])
    except ValueError:
        return None  # an HTTP-date; our own backoff is good enough
    return None


class OpenAICompatibleClient:
    """`LLMClient` over the official `openai` SDK: messages in, a validated pydantic object out."""

    def __init__(
        self,
        *,
        base_url: str | None,
        api_key: str | None,
        model: str,
        timeout_seconds: float,
        max_retries: int,
        backoff_base_seconds: float = 1.0,
        backoff_max_seconds: float = 20.0,
        max_tokens: int | None = None,
    ) -> None:
        self.model = model
        self.max_retries = max_retries
        self.backoff_base_seconds = backoff_base_seconds
        self.backoff_max_seconds = backoff_max_seconds
        self.max_tokens = max_tokens
        # Kept only to scrub it from error messages; never logged.
        self._secret = api_key or ""
        self._client = openai.OpenAI(
            base_url=base_url,
            # Local servers need no key, but the SDK refuses to start without one.
            api_key=api_key or "not-needed",
            timeout=timeout_seconds,
            max_retries=0,  # our tenacity loop decides what is retried
        )

    @classmethod
    def from_settings(cls, s: LLMSettings) -> OpenAICompatibleClient:
        return cls(
            base_url=s.base_url,
            api_key=s.api_key,
            model=s.model,
            timeout_seconds=s.timeout_seconds,
            max_retries=s.max_retries,
        )

    def __repr__(self) -> str:
        return f"OpenAICompatibleClient(model={self.model!r}, base_url={str(self._client.base_url)!r})"

    def close(self) -> None:
        self._client.close()

    def generate(self, messages: list[dict[str, str]], response_model: type[T]) -> T:
        """Ask the model for a `response_model`; raise TransientError or PermanentError on failure."""
        started = time.monotonic()
        retrying = Retrying(
            stop=stop_after_attempt(self.max_retries + 1),
            wait=self._wait,
            retry=retry_if_exception(self._should_retry),
            before_sleep=self._log_retry,
            reraise=True,
        )
        try:
            result = retrying(self._attempt, messages, response_model)
        except MalformedAnswer as exc:
            attempts = retrying.statistics.get("attempt_number", 1)
            log.warning("llm.generate.failed", model=self.model, reason="malformed", attempts=attempts)
            raise PermanentError(
                f"model {self.model} gave no valid {response_model.__name__} after {attempts} attempt(s): "
                f"{self._scrub(str(exc))}"
            ) from exc
        except _RetryAfterTooLong as exc:
            log.warning("llm.generate.failed", model=self.model, reason="retry_after", seconds=exc.seconds)
            raise TransientError(
                f"LLM rate limited ({self.model}); server asks to retry after {exc.seconds:g}s"
            ) from exc.cause
        except openai.APIError as exc:
            attempts = retrying.statistics.get("attempt_number", 1)
            status = _status(exc)
            log.warning(
                "llm.generate.failed",
                model=self.model,
                error=type(exc).__name__,
                status=status,
                attempts=attempts,
            )
            detail = f"{type(exc).__name__}" + (f" {status}" if status else "") + f": {self._scrub(str(exc))}"
            if _is_transient_api_error(exc):
                raise TransientError(f"LLM call failed after {attempts} attempt(s): {detail}") from exc
            raise PermanentError(f"LLM call rejected: {detail}") from exc
        log.info(
            "llm.generate.completed",
            model=self.model,
            response_model=response_model.__name__,
            attempts=retrying.statistics.get("attempt_number", 1),
            duration_ms=round((time.monotonic() - started) * 1000),
        )
        return result

    def _attempt(self, messages: list[dict[str, str]], response_model: type[T]) -> T:
        schema_name = _SCHEMA_NAME.sub("_", response_model.__name__)[:64] or "response"
        kwargs: dict[str, Any] = {}
        if self.max_tokens is not None:
            kwargs["max_tokens"] = self.max_tokens
        try:
            completion = self._client.chat.completions.create(
                model=self.model,
                messages=cast(Any, messages),
                temperature=0,
                response_format={
                    "type": "json_schema",
                    "json_schema": {
                        "name": schema_name,
                        "schema": response_model.model_json_schema(),
                        "strict": False,
                    },
                },
                **kwargs,
            )
        except openai.RateLimitError as exc:
            wait = _retry_after_seconds(exc)
            if wait is not None and wait > self.backoff_max_seconds:
                # Don't hold a worker for minutes: give the retry back to the task queue.
                raise _RetryAfterTooLong(exc, wait) from exc
            raise
        except openai.APIResponseValidationError as exc:
            raise MalformedAnswer(f"server response did not match the chat-completions shape: {exc}") from exc
        usage = completion.usage
        if usage is not None:
            log.debug(
                "llm.generate.usage",
                model=self.model,
                prompt_tokens=usage.prompt_tokens,
                completion_tokens=usage.completion_tokens,
            )
        if not completion.choices:
            raise MalformedAnswer("answer has no choices")
        choice = completion.choices[0]
        content = choice.message.content
        if not content:
            why = "a refusal" if getattr(choice.message, "refusal", None) else "empty content"
            raise MalformedAnswer(f"answer was {why} (finish_reason={choice.finish_reason})")
        value = extract_json(content)
        try:
            return response_model.model_validate(value)
        except ValidationError as exc:
            # Locations and messages only: the offending values are model output derived from user text.
            problems = "; ".join(
                f"{'.'.join(str(p) for p in err['loc']) or '<root>'}: {err['msg']}" for err in exc.errors()[:5]
            )
            suffix = f" (finish_reason={choice.finish_reason})" if choice.finish_reason != "stop" else ""
            raise MalformedAnswer(f"answer failed validation: {problems}{suffix}") from exc

    @staticmethod
    def _should_retry(exc: BaseException) -> bool:
        return isinstance(exc, MalformedAnswer) or _is_transient_api_error(exc)

    def _wait(self, retry_state: RetryCallState) -> float:
        # Exponential with full-size jitter, so a burst of workers hitting a 429 don't retry in lockstep.
        base = self.backoff_base_seconds
        wait = min(base * 2 ** (retry_state.attempt_number - 1) + random.uniform(0, base), self.backoff_max_seconds)
        outcome = retry_state.outcome
        exc = outcome.exception() if outcome is not None else None
        retry_after = _retry_after_seconds(exc) if exc is not None else None
        if retry_after is not None:
            wait = min(max(wait, retry_after), self.backoff_max_seconds)
        return wait

    def _log_retry(self, retry_state: RetryCallState) -> None:
        outcome = retry_state.outcome
        exc = outcome.exception() if outcome is not None else None
        log.warning(
            "llm.generate.retry",
            model=self.model,
            attempt=retry_state.attempt_number,
            error=type(exc).__name__ if exc is not None else None,
            status=_status(exc) if exc is not None else None,
            wait_seconds=round(retry_state.upcoming_sleep, 3),
        )

    def _scrub(self, text: str) -> str:
        if self._secret:
            text = text.replace(self._secret, "***")
        return _KEYLIKE.sub(r"\1-***", text)[:500]
