"""MCP server processes on the test services: one over streamable HTTP started with bearer tokens (the same
tokens the API tests use); stdio servers are spawned per test by the SDK's own stdio client."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import pytest

from tests.api.conftest import alpha_ns, auth_env, beta_ns  # noqa: F401
from tests.conftest import Proc, Services, free_port, start_proc, wait_for


@dataclass
class McpHttp:
    url: str
    proc: Proc
    services: Services


def _listening(url: str) -> bool:
    try:
        # An unauthenticated POST is answered 401 by the SDK's bearer middleware once the server is up.
        return httpx.post(url, json={}, timeout=2).status_code == 401
    except httpx.HTTPError:
        return False


@pytest.fixture(scope="session")
def mcp_http(services: Services, tmp_path_factory: pytest.TempPathFactory) -> Iterator[McpHttp]:
    port = free_port()
    proc = start_proc(
        "mcp-http",
        ["mcp", "--transport", "http", "--port", str(port)],
        auth_env(services),
        tmp_path_factory.mktemp("mcp-http"),
    )
    server = McpHttp(url=f"http://127.0.0.1:{port}/mcp", proc=proc, services=services)
    try:
        wait_for(lambda: _listening(server.url), 120, "MCP over HTTP ready", {"mcp-http": proc})
        yield server
    finally:
        proc.stop()
