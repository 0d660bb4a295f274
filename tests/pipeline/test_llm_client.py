"""OpenAICompatibleClient against a real local OpenAI-protocol server (the real `openai` SDK runs)."""

from __future__ import annotations

import json
import logging
import socket
from collections.abc import Iterator

import pytest
from pydantic import BaseModel

from hindsight.config import LLMSettings
from hindsight.errors import PermanentError, TransientError
from hindsight.llm import OpenAICompatibleClient, extract_json
from tests.fakes.llm_server import ScriptedLLMServer

API_KEY = "sk-test-SECRETSECRETSECRET1234"
MODEL = "test-model"
MESSAGES = [
    {"role": "system", "content": "Answer in JSON."},
    {"role": "user", "content": "PROMPT-MARKER: what is the answer?"},
]


class Answer(BaseModel):
    answer: str
    score: int


VALID = {"answer": "forty-two", "score": 42}


@pytest.fixture
def server() -> Iterator[ScriptedLLMServer]:
    with ScriptedLLMServer() as srv:
        yield srv


def make_client(srv: ScriptedLLMServer, *, max_retries: int = 2, timeout: float = 5.0) -> OpenAICompatibleClient:
    return OpenAICompatibleClient(
        base_url=srv.base_url,
        api_key=API_KEY,
        model=MODEL,
        timeout_seconds=timeout,
        max_retries=max_retries,
        backoff_base_seconds=0.0,  # no sleeping in tests
    )


def test_valid_answer_is_parsed_and_validated(server: ScriptedLLMServer) -> None:
    server.enqueue_json(VALID)
    result = make_client(server).generate(MESSAGES, Answer)
    assert result == Answer(answer="forty-two", score=42)
    assert len(server.requests) == 1


def test_request_carries_temperature_model_and_json_schema(server: ScriptedLLMServer) -> None:
    server.enqueue_json(VALID)
    make_client(server).generate(MESSAGES, Answer)
    body = server.requests[0]
    assert body["model"] == MODEL
    assert body["temperature"] == 0
    assert body["messages"] == MESSAGES
    fmt = body["response_format"]
    assert fmt["type"] == "json_schema"
    assert fmt["json_schema"]["name"] == "Answer"
    assert fmt["json_schema"]["schema"] == Answer.model_json_schema()
    assert fmt["json_schema"]["strict"] is False
    assert server.request_headers[0].get("authorization") == f"Bearer {API_KEY}"


@pytest.mark.parametrize(
    "content",
    [
        "```json\n" + json.dumps(VALID) + "\n```",
        "```\n" + json.dumps(VALID) + "\n```",
        "Sure! Here is the JSON you asked for:\n" + json.dumps(VALID),
        "Result {not json} then " + json.dumps(VALID) + " hope this helps",
    ],
    ids=["json-fence", "bare-fence", "leading-prose", "braces-in-prose"],
)
def test_fenced_or_prefixed_json_is_accepted(server: ScriptedLLMServer, content: str) -> None:
    server.enqueue_content(content)
    assert make_client(server).generate(MESSAGES, Answer).score == 42


def test_malformed_json_then_valid_succeeds_after_retry(server: ScriptedLLMServer) -> None:
    server.enqueue_content('{"answer": "forty-two", "score": ')
    server.enqueue_json(VALID)
    assert make_client(server).generate(MESSAGES, Answer).score == 42
    assert len(server.requests) == 2


def test_schema_violation_then_valid_succeeds_after_retry(server: ScriptedLLMServer) -> None:
    server.enqueue_json({"answer": "forty-two"})  # score missing
    server.enqueue_json(VALID)
    assert make_client(server).generate(MESSAGES, Answer).score == 42
    assert len(server.requests) == 2


def test_malformed_json_always_is_permanent(server: ScriptedLLMServer) -> None:
    server.default = lambda request: "I cannot answer in JSON, sorry."
    with pytest.raises(PermanentError, match="no valid Answer after 3 attempt"):
        make_client(server, max_retries=2).generate(MESSAGES, Answer)
    assert len(server.requests) == 3


def test_schema_violation_always_is_permanent_without_echoing_values(server: ScriptedLLMServer) -> None:
    server.default = lambda request: {"answer": "PRIVATE-VALUE", "score": "not a number"}
    with pytest.raises(PermanentError) as info:
        make_client(server, max_retries=1).generate(MESSAGES, Answer)
    assert "score" in str(info.value)
    assert "PRIVATE-VALUE" not in str(info.value)
    assert len(server.requests) == 2


def test_rate_limit_then_success(server: ScriptedLLMServer) -> None:
    server.enqueue_error(429, headers={"retry-after": "0"})
    server.enqueue_json(VALID)
    assert make_client(server).generate(MESSAGES, Answer).score == 42
    assert len(server.requests) == 2


def test_rate_limit_always_is_transient_after_all_attempts(server: ScriptedLLMServer) -> None:
    for _ in range(10):
        server.enqueue_error(429, headers={"retry-after": "0"})
    with pytest.raises(TransientError, match="RateLimitError 429"):
        make_client(server, max_retries=3).generate(MESSAGES, Answer)
    assert len(server.requests) == 4


def test_long_retry_after_is_handed_back_to_the_queue_at_once(server: ScriptedLLMServer) -> None:
    server.enqueue_error(429, headers={"retry-after": "3600"})
    with pytest.raises(TransientError, match="retry after 3600s"):
        make_client(server, max_retries=3).generate(MESSAGES, Answer)
    assert len(server.requests) == 1


@pytest.mark.parametrize("status", [500, 502, 503])
def test_server_error_is_retried(server: ScriptedLLMServer, status: int) -> None:
    server.enqueue_error(status)
    server.enqueue_json(VALID)
    assert make_client(server).generate(MESSAGES, Answer).score == 42
    assert len(server.requests) == 2


def test_server_error_always_is_transient(server: ScriptedLLMServer) -> None:
    server.default = lambda request: (_ for _ in ()).throw(RuntimeError("boom"))  # the fake answers 500
    with pytest.raises(TransientError, match="500"):
        make_client(server, max_retries=1).generate(MESSAGES, Answer)
    assert len(server.requests) == 2


@pytest.mark.parametrize("status", [400, 401, 403, 404, 422])
def test_client_errors_are_permanent_without_retry(server: ScriptedLLMServer, status: int) -> None:
    server.enqueue_error(status)
    server.enqueue_json(VALID)  # would succeed if (wrongly) retried
    with pytest.raises(PermanentError, match=str(status)):
        make_client(server).generate(MESSAGES, Answer)
    assert len(server.requests) == 1


def test_api_key_is_scrubbed_from_errors(server: ScriptedLLMServer) -> None:
    body = {"error": {"message": f"Incorrect API key provided: {API_KEY}", "type": "invalid_request_error"}}
    server.enqueue_error(401, body=body)
    with pytest.raises(PermanentError) as info:
        make_client(server).generate(MESSAGES, Answer)
    assert API_KEY not in str(info.value)
    assert "Incorrect API key" in str(info.value)


def test_timeout_is_retried_then_transient(server: ScriptedLLMServer) -> None:
    server.enqueue_json(VALID, delay_seconds=1.0)
    server.enqueue_json(VALID, delay_seconds=1.0)
    with pytest.raises(TransientError, match="APITimeoutError"):
        make_client(server, max_retries=1, timeout=0.2).generate(MESSAGES, Answer)
    assert len(server.requests) == 2


def test_connection_refused_is_transient() -> None:
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    client = OpenAICompatibleClient(
        base_url=f"http://127.0.0.1:{port}/v1",
        api_key=None,
        model=MODEL,
        timeout_seconds=2,
        max_retries=1,
        backoff_base_seconds=0.0,
    )
    with pytest.raises(TransientError, match="APIConnectionError"):
        client.generate(MESSAGES, Answer)


def test_logs_never_carry_the_key_or_the_prompt(
    server: ScriptedLLMServer, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    server.enqueue_error(429, headers={"retry-after": "0"})
    server.enqueue_content("not json")
    server.enqueue_json(VALID)
    make_client(server).generate(MESSAGES, Answer)
    captured = capsys.readouterr()
    logged = captured.out + captured.err + caplog.text
    assert "llm.generate.retry" in logged
    assert API_KEY not in logged
    assert "PROMPT-MARKER" not in logged


def test_from_settings_uses_every_field(server: ScriptedLLMServer) -> None:
    settings = LLMSettings(
        backend="openai",
        base_url=server.base_url,
        api_key=None,
        model="m-1",
        timeout_seconds=7,
        max_retries=4,
    )
    client = OpenAICompatibleClient.from_settings(settings)
    assert client.model == "m-1"
    assert client.max_retries == 4
    server.enqueue_json(VALID)
    client.generate(MESSAGES, Answer)
    assert server.requests[0]["model"] == "m-1"
    # No key configured: local servers get a placeholder, never an empty bearer.
    assert server.request_headers[0].get("authorization") == "Bearer not-needed"


def test_default_responder_sees_the_request(server: ScriptedLLMServer) -> None:
    server.default = lambda request: {"answer": request["model"], "score": len(request["messages"])}
    assert make_client(server).generate(MESSAGES, Answer) == Answer(answer=MODEL, score=2)


def test_extract_json_rejects_prose() -> None:
    from hindsight.llm import MalformedAnswer

    with pytest.raises(MalformedAnswer):
        extract_json("no JSON here at all")
