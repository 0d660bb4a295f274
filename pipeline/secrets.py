"""Secret and personal-identifier redaction, run on every turn at ingest before anything is stored.

Only the fact that a secret existed survives (as a `[REDACTED:kind]` marker); the value never does.
The detectors are shape-based and conservative about ordinary numbers: versions, years, prices and
phone-length numbers inside normal text are left alone unless they are clearly card/ID shaped.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Redaction:
    text: str
    kinds: list[str] = field(default_factory=list)

    @property
    def redacted(self) -> bool:
        return bool(self.kinds)


def marker(kind: str) -> str:
    return f"[REDACTED:{kind}]"


MARKER_RE = re.compile(r"\[REDACTED:([a-z_]+)\]")

_PRIVATE_KEY_RE = re.compile(
    r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----.*?"
    r"(?:-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----|\Z)",
    re.S,
)
_JWT_RE = re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}")
# Vendor key shapes. Ordered: the more specific prefix wins.
_API_KEY_PATTERNS: list[tuple[str, re.Pattern[str]]] = [
    ("api_key", re.compile(r"\bsk-(?:proj-|ant-|live-|test-)?[A-Za-z0-9_\-]{16,}")),
    ("api_key", re.compile(r"\b(?:sk|rk|pk)_(?:live|test)_[A-Za-z0-9]{12,}")),
    ("api_key", re.compile(r"\bwhsec_[A-Za-z0-9]{16,}")),
    (
        "github_token",
        re.compile(r"\b(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{20,}|\bgithub_pat_[A-Za-z0-9_]{20,}"),
    ),
    ("aws_key", re.compile(r"\b(?:AKIA|ASIA)[A-Z0-9]{16}\b")),
    ("slack_token", re.compile(r"\bxox[abprs]-[A-Za-z0-9-]{10,}")),
    ("google_api_key", re.compile(r"\bAIza[0-9A-Za-z_\-]{30,}")),
    ("api_key", re.compile(r"\bLTAI[0-9A-Za-z]{12,}")),  # Alibaba Cloud AccessKey id
    ("api_key", re.compile(r"\bglpat-[A-Za-z0-9_\-]{16,}")),
    ("api_key", re.compile(r"\bhf_[A-Za-z0-9]{30,}")),
]
# Credentials inside URLs: scheme://user:password@host
_URL_CRED_RE = re.compile(r"(?P<head>\b[a-z][a-z0-9+.\-]*://[^\s:/@'\"]+:)(?P<secret>[^\s@'\"]+)(?=@)", re.I)
# key=value / key: value where the key names a secret (env files, configs, headers).
_ASSIGN_RE = re.compile(
    r"(?P<head>\b[A-Za-z0-9_.\-]*(?:secret|token|passwd|password|pwd|api[_-]?key|access[_-]?key|private[_-]?key|"
    r"auth|credential)[A-Za-z0-9_.\-]*\s*[=:]\s*[\"']?)(?P<secret>[^\s\"',;]{6,})",
    re.I,
)
# Passwords in prose: 密码是 xxx / 密码：xxx / password is xxx / pw: xxx
_PASSWORD_PROSE_RE = re.compile(
    r"(?P<head>(?:密码|口令|密钥|验证码|pin码|PIN码)\s*(?:是|为|:|：|=)\s*|"
    r"\b(?:password|passcode|passphrase|pw|pwd|pin)\s*(?:is|was|=|:)\s*[\"'“]?)(?P<secret>[^\s\"'”，。,;；]{4,})",
    re.I,
)
_BEARER_RE = re.compile(r"(?P<head>\bBearer\s+)(?P<secret>[A-Za-z0-9._~+/=\-]{16,})")
# Chinese resident ID: 6-digit area, birth date 18xx-20xx, 3 digits, check digit/X.
_CN_ID_RE = re.compile(
    r"(?<![0-9A-Za-z])[1-9]\d{5}(?:18|19|20)\d{2}(?:0[1-9]|1[0-2])(?:0[1-9]|[12]\d|3[01])\d{3}[\dXx](?![0-9A-Za-z])"
)
_CARD_RE = re.compile(r"(?<![\d\-])(?:\d[ \-]?){12,18}\d(?![\d\-])")
_TOKEN_RE = re.compile(r"(?<![A-Za-z0-9_\-/.])[A-Za-z0-9_\-+/]{24,}={0,2}(?![A-Za-z0-9_\-/])")


# "the password is wrong" talks about a password without containing one.
_NOT_A_PASSWORD = frozenset(
    [
        "now",
        "required",
        "wrong",
        "incorrect",
        "correct",
        "changed",
        "the",
        "too",
        "still",
        "set",
        "stored",
        "saved",
        "fine",
        "same",
        "different",
        "expired",
        "reset",
        "not",
        "in",
        "on",
        "weak",
        "strong",
        "long",
        "short",
        "empty",
        "missing",
        "invalid",
        "valid",
    ]
)


def _luhn_ok(digits: str) -> bool:
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = int(ch)
        if i % 2 == 1:
            d *= 2
            if d > 9:
                d -= 9
        total += d
    return total % 10 == 0


def _entropy(s: str) -> float:
    counts = Counter(s)
    n = len(s)
    return -sum(c / n * math.log2(c / n) for c in counts.values())


def _looks_random(token: str) -> bool:
    """A long token that mixes letters and digits with high entropy (keys, secrets), not a word or a path."""
    if len(token) < 24:
        return False
    classes = sum([any(c.islower() for c in token), any(c.isupper() for c in token), any(c.isdigit() for c in token)])
    if classes < 2 or not any(c.isdigit() for c in token):
        return False
    # snake_case / kebab-case identifiers are long but made of words.
    if re.fullmatch(r"[a-z]+(?:[_\-][a-z0-9]+)+", token):
        return False
    return _entropy(token) >= 3.5


def _is_card(candidate: str) -> bool:
    digits = re.sub(r"\D", "", candidate)
    if not 13 <= len(digits) <= 19 or len(set(digits)) < 2:
        return False
    return _luhn_ok(digits)


def redact_secrets(text: str) -> Redaction:
    """Replace credentials and personal identifiers with `[REDACTED:kind]` markers."""
    kinds: list[str] = []

    def note(kind: str) -> str:
        if kind not in kinds:
            kinds.append(kind)
        return marker(kind)

    def keep_head(kind: str) -> Callable[[re.Match[str]], str]:
        def repl(m: re.Match[str]) -> str:
            secret = m.group("secret")
            if secret.startswith("[REDACTED") or secret.lower().strip(".!") in _NOT_A_PASSWORD:
                return m.group(0)
            return m.group("head") + note(kind)

        return repl

    out = _PRIVATE_KEY_RE.sub(lambda m: note("private_key"), text)
    out = _JWT_RE.sub(lambda m: note("jwt"), out)
    for kind, pattern in _API_KEY_PATTERNS:
        out = pattern.sub(lambda m, k=kind: note(k), out)
    out = _URL_CRED_RE.sub(keep_head("password"), out)
    out = _BEARER_RE.sub(keep_head("token"), out)
    out = _PASSWORD_PROSE_RE.sub(keep_head("password"), out)
    out = _ASSIGN_RE.sub(keep_head("secret"), out)
    out = _CN_ID_RE.sub(lambda m: note("national_id"), out)
    out = _CARD_RE.sub(lambda m: note("card_number") if _is_card(m.group(0)) else m.group(0), out)
    out = _TOKEN_RE.sub(lambda m: note("token") if _looks_random(m.group(0)) else m.group(0), out)
    return Redaction(text=out, kinds=kinds)


def has_secret_marker(text: str) -> bool:
    return bool(MARKER_RE.search(text))


_KIND_WORDS_EN = {
    "api_key": "an API key",
    "github_token": "a GitHub token",
    "aws_key": "an AWS access key",
    "slack_token": "a Slack token",
    "google_api_key": "a Google API key",
    "password": "a password",
    "secret": "a secret credential",
    "token": "an access token",
    "jwt": "a JWT",
    "private_key": "a private key",
    "national_id": "an ID number",
    "card_number": "a card number",
}
_KIND_WORDS_ZH = {
    "api_key": "API 密钥",
    "github_token": "GitHub 令牌",
    "aws_key": "AWS 访问密钥",
    "slack_token": "Slack 令牌",
    "google_api_key": "Google API 密钥",
    "password": "密码",
    "secret": "密钥",
    "token": "访问令牌",
    "jwt": "JWT 令牌",
    "private_key": "私钥",
    "national_id": "身份证号",
    "card_number": "银行卡号",
}


def describe_secret(kind: str, lang: str) -> str:
    """Words for "a secret of this kind exists", never its value."""
    table = _KIND_WORDS_ZH if lang == "zh" else _KIND_WORDS_EN
    return table.get(kind, "密钥" if lang == "zh" else "a credential")
