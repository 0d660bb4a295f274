"""An API process started WITH bearer tokens, beside the session stack's worker and beat (same PostgreSQL,
Redis and log file), so transcripts posted through it are distilled by a real worker."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import pytest

from api.auth import token_digest
from tests.conftest import STACK_ENV, Proc, Services, Stack, _http_ok, free_port, start_proc, wait_for

TOKENS = {
    "tok-alpha": ["alpha-*"],
    "tok-beta": ["beta-*"],
}
DIGEST_TOKEN = "tok-gamma-only-as-digest"
DIGESTS = {token_digest(DIGEST_TOKEN): ["gamma-one"]}


@dataclass
class AuthApi:
    url: str
    proc: Proc
    services: Services

    def client(self, token: str | None) -> httpx.Client:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        return httpx.Client(base_url=self.url, headers=headers, timeout=60)


def auth_env(services: Services, **extra: str) -> dict[str, str]:
    return services.env(
        **STACK_ENV,
        HINDSIGHT_AUTH__TOKENS=json.dumps(TOKENS),
        HINDSIGHT_AUTH__TOKEN_DIGESTS=json.dumps(DIGESTS),
        **extra,
    )


@pytest.fixture(scope="session")
def auth_api(stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> Iterator[AuthApi]:
    log_dir = stack.services.data_dir / "logs"  # settings.process_log_dir, as the session stack's
    port = free_port()
    proc = start_proc("auth-api", ["api", "--port", str(port)], auth_env(stack.services), log_dir)
    api = AuthApi(url=f"http://127.0.0.1:{port}", proc=proc, services=stack.services)
    try:
        wait_for(lambda: _http_ok(f"{api.url}/readyz"), 120, "auth API ready", {"auth-api": proc})
        yield api
    finally:
        proc.stop()


@pytest.fixture
def alpha_ns() -> str:
    return f"alpha-{uuid.uuid4().hex[:10]}"


@pytest.fixture
def beta_ns() -> str:
    return f"beta-{uuid.uuid4().hex[:10]}"


@pytest.fixture
def alpha(auth_api: AuthApi) -> Iterator[httpx.Client]:
    with auth_api.client("tok-alpha") as c:
        yield c


@pytest.fixture
def beta(auth_api: AuthApi) -> Iterator[httpx.Client]:
    with auth_api.client("tok-beta") as c:
        yield c
