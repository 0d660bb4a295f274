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

import hashlib
import hmac
import ipaddress
from dataclasses import dataclass, field

from hindsight.config import Settings
from hindsight.errors import HindsightError

NO_AUTH = "none"
TOKENS = "tokens"


class AuthConfigError(HindsightError):
    """The auth settings would leave the service open (or unusable); the process refuses to start."""


class Unauthorized(HindsightError):
    """No bearer token, or one that is not configured (HTTP 401)."""


class Forbidden(HindsightError):
    """The token is valid but not for this namespace (HTTP 403)."""


def token_digest(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


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


def _loopback(host: str) -> bool:
    if host in ("localhost", ""):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@dataclass
class Authenticator:
    mode: str
    _digests: list[tuple[bytes, tuple[str, ...]]] = field(default_factory=list)

    @classmethod
    def from_settings(cls, settings: Settings, *, host: str | None = None) -> Authenticator:
        """Resolve the auth mode; refuse configurations that would silently leave the service open."""
        auth = settings.auth
        digests: list[tuple[bytes, tuple[str, ...]]] = []
        for token, grants in auth.tokens.items():
            digests.append((bytes.fromhex(token_digest(token)), _grants(grants, "a token")))
        for digest, grants in auth.token_digests.items():
            try:
                raw = bytes.fromhex(digest)
            except ValueError:
                raise AuthConfigError("auth.token_digests keys must be SHA-256 hex digests") from None
            if len(raw) != 32:
                raise AuthConfigError("auth.token_digests keys must be SHA-256 hex digests (64 hex characters)")
            digests.append((raw, _grants(grants, f"digest {digest[:8]}…")))
        mode = auth.mode or (TOKENS if digests else None)
        if mode is None:
            bind = host if host is not None else settings.api_host
            if settings.env == "prod":
                raise AuthConfigError(
                    "env=prod with no auth tokens: set HINDSIGHT_AUTH__TOKENS (or __TOKEN_DIGESTS), "
                    "or HINDSIGHT_AUTH__MODE=none to run without auth on purpose"
                )
            if not _loopback(bind):
                raise AuthConfigError(
                    f"listening on {bind} with no auth tokens: set HINDSIGHT_AUTH__TOKENS, or "
                    "HINDSIGHT_AUTH__MODE=none to run without auth on purpose"
                )
            mode = NO_AUTH
        if mode == TOKENS and not digests:
            raise AuthConfigError("auth.mode=tokens but no tokens are configured")
        return cls(mode=mode, _digests=digests)

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


def _grants(grants: list[str], what: str) -> tuple[str, ...]:
    if not grants:
        raise AuthConfigError(f"{what} grants no namespace")
    for g in grants:
        if not g or ("*" in g[:-1]):
            raise AuthConfigError(f"{what}: grant {g!r} must be a namespace or a prefix ending in '*'")
    return tuple(grants)


def bearer(header: str | None) -> str | None:
    """The token of an `Authorization: Bearer …` header."""
    if not header:
        return None
    scheme, _, value = header.partition(" ")
    if scheme.lower() != "bearer" or not value.strip():
        return None
    return value.strip()
