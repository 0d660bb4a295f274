"""Validating the auth settings: which mode a process serves in, and the configurations it refuses.

The core decides this (the CLI checks it before it starts a server); api/auth.py authenticates requests
with the result. Tokens are held only as SHA-256 digests.
"""

from __future__ import annotations

import hashlib
import ipaddress
from dataclasses import dataclass

from hindsight.config import Settings
from hindsight.errors import HindsightError

NO_AUTH = "none"
TOKENS = "tokens"


class AuthConfigError(HindsightError):
    """The auth settings would leave the service open (or unusable); the process refuses to start."""


def token_digest(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def loopback_bind(host: str) -> bool:
    """A bind address that only this machine can reach (`localhost`, a loopback address; "" is the default)."""
    if host in ("localhost", ""):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@dataclass(frozen=True)
class AuthConfig:
    """The validated auth settings: the mode, and each token's digest with its grants."""

    mode: str
    digests: tuple[tuple[bytes, tuple[str, ...]], ...] = ()


def resolve_auth(settings: Settings, *, host: str | None = None) -> AuthConfig:
    """Resolve the auth mode; refuse (AuthConfigError) configurations that would silently leave the service
    open. `host` is the address the server binds to (default `api_host`)."""
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
        if not loopback_bind(bind):
            raise AuthConfigError(
                f"listening on {bind} with no auth tokens: set HINDSIGHT_AUTH__TOKENS, or "
                "HINDSIGHT_AUTH__MODE=none to run without auth on purpose"
            )
        mode = NO_AUTH
    if mode == TOKENS and not digests:
        raise AuthConfigError("auth.mode=tokens but no tokens are configured")
    return AuthConfig(mode=mode, digests=tuple(digests))


def _grants(grants: list[str], what: str) -> tuple[str, ...]:
    if not grants:
        raise AuthConfigError(f"{what} grants no namespace")
    for g in grants:
        if not g or ("*" in g[:-1]):
            raise AuthConfigError(f"{what}: grant {g!r} must be a namespace or a prefix ending in '*'")
    return tuple(grants)
