"""Bearer tokens bound to namespaces, shared by the HTTP API and the MCP server over HTTP.

Tokens are held only as SHA-256 digests and compared with `hmac.compare_digest`. A token grants exact
namespaces (`agent-42:user-7`) or prefix patterns (`agent-42:*`; `*` grants all). Access is decided from
the namespace in the URL (or the MCP tool's argument) alone: a namespace inside a body or a transcript
never widens it.

Answers: no or unknown token 401; a namespace outside the token's grant 403, given before anything is
looked up, so it says nothing about whether that namespace exists; a memory id that is not in the
(granted) namespace 404, whether it exists elsewhere or not.
"""

from __future__ import annotations

import hmac
import json
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from starlette.types import ASGIApp, Receive, Scope, Send

# Validated in the core; re-exported for the API's callers (explicit `as` re-exports).
from hindsight.auth_settings import NO_AUTH as NO_AUTH
from hindsight.auth_settings import TOKENS as TOKENS
from hindsight.auth_settings import AuthConfigError as AuthConfigError
from hindsight.auth_settings import loopback_bind as _loopback
from hindsight.auth_settings import resolve_auth
from hindsight.auth_settings import token_digest as token_digest
from hindsight.config import Settings
from hindsight.errors import HindsightError


class Unauthorized(HindsightError):
    """No bearer token, or one that is not configured (HTTP 401)."""


class Forbidden(HindsightError):
    """The token is valid but not for this namespace (HTTP 403)."""


def grant_allows(pattern: str, namespace: str) -> bool:
    if pattern == "*":
        return True
    if pattern.endswith("*"):
        return namespace.startswith(pattern[:-1])
    return namespace == pattern


@dataclass(frozen=True)
class Principal:
    """Who is calling: a token (by a short digest prefix, never the token) and its grants."""

    name: str
    grants: tuple[str, ...]

    def allows(self, namespace: str) -> bool:
        return any(grant_allows(g, namespace) for g in self.grants)

    def require(self, namespace: str) -> None:
        if not self.allows(namespace):
            raise Forbidden(f"this token may not use namespace {namespace!r}")


LOCAL = Principal(name="local", grants=("*",))
"""The caller in no-auth mode (local use only)."""


def loopback_name(host: str) -> bool:
    """A name that only ever means this machine: `localhost`, `*.localhost` (RFC 6761), a loopback address.

    Unlike `_loopback` (a bind address, where "" means the default), an empty or missing name is not one."""
    host = host.strip().rstrip(".").lower()
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if not host:
        return False
    return host == "localhost" or host.endswith(".localhost") or _loopback(host)


def _authority_host(authority: str) -> str:
    """The host part of a Host header (`example.com:8765`, `[::1]:8765`, `127.0.0.1`)."""
    authority = authority.strip()
    if authority.startswith("["):
        return authority[: authority.find("]") + 1] if "]" in authority else authority
    return authority.rsplit(":", 1)[0] if authority.count(":") == 1 else authority


def loopback_request(host_header: str | None, origin_header: str | None) -> str | None:
    """Why a request may not reach a no-auth server, or None when it is addressed to this machine.

    With no tokens, the only thing that keeps a web page the user visits from reading or writing memories is
    that the browser cannot reach the server. DNS rebinding defeats that (attacker.example resolves to
    127.0.0.1), but the browser still sends `Host: attacker.example`, and `Origin` on cross-site requests."""
    if host_header is None or not loopback_name(_authority_host(host_header)):
        return f"Host {host_header!r} is not a loopback name; without auth tokens only local requests are answered"
    if origin_header is not None:
        parsed = urlsplit(origin_header.strip())
        if parsed.scheme not in ("http", "https") or not loopback_name(parsed.hostname or ""):
            return f"Origin {origin_header!r} is not local; without auth tokens cross-site requests are refused"
    return None


class LoopbackOnly:
    """ASGI middleware for no-auth mode: 421 for a foreign Host, 403 for a foreign Origin (as the MCP server
    over HTTP does), before any route runs. With tokens it passes everything through: a page cannot send
    the token."""

    def __init__(self, app: ASGIApp, *, enabled: bool) -> None:
        self.app, self.enabled = app, enabled

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.enabled and scope["type"] in ("http", "websocket"):
            headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers") or []}
            problem = loopback_request(headers.get("host"), headers.get("origin"))
            if problem is not None:
                status = 403 if problem.startswith("Origin") else 421
                if scope["type"] == "websocket":
                    await send({"type": "websocket.close", "code": 1008})
                    return
                body = json.dumps({"detail": problem}).encode()
                await send(
                    {
                        "type": "http.response.start",
                        "status": status,
                        "headers": [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))],
                    }
                )
                await send({"type": "http.response.body", "body": body})
                return
        await self.app(scope, receive, send)


@dataclass
class Authenticator:
    mode: str
    _digests: list[tuple[bytes, tuple[str, ...]]] = field(default_factory=list)

    @classmethod
    def from_settings(cls, settings: Settings, *, host: str | None = None) -> Authenticator:
        """Resolve the auth mode; refuse configurations that would silently leave the service open
        (validated in the core: hindsight.auth_settings.resolve_auth)."""
        config = resolve_auth(settings, host=host)
        return cls(mode=config.mode, _digests=list(config.digests))

    @property
    def enabled(self) -> bool:
        return self.mode == TOKENS

    def authenticate(self, token: str | None) -> Principal:
        """The principal for a bearer token; in no-auth mode, the local principal."""
        if not self.enabled:
            return LOCAL
        if not token:
            raise Unauthorized("a bearer token is required")
        digest = bytes.fromhex(token_digest(token))
        found: tuple[str, ...] | None = None
        for known, grants in self._digests:
            # Compare against every entry (no early exit) so timing says nothing about which one matched.
            if hmac.compare_digest(known, digest) and found is None:
                found = grants
        if found is None:
            raise Unauthorized("unknown bearer token")
        return Principal(name=f"token:{digest.hex()[:8]}", grants=found)


def bearer(header: str | None) -> str | None:
    """The token of an `Authorization: Bearer …` header."""
    if not header:
        return None
    scheme, _, value = header.partition(" ")
    if scheme.lower() != "bearer" or not value.strip():
        return None
    return value.strip()
