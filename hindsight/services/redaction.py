"""Secret redaction for every path that stores caller text, not only transcript turns.

Turn contents are redacted at ingest; the same detectors (pipeline/secrets.py) run here over the rest of
what a caller can make us store: privileged writes (value, key, subject), `remember` metadata, a forget
reason, a turn's name and id, a transcript's conversation id and idempotency key.
"""

from __future__ import annotations

import hashlib
from typing import Any, TypeVar

from pipeline.secrets import redact_secrets

T = TypeVar("T")


def redact_text(text: str) -> str:
    return redact_secrets(text).text


def redact_identifier(value: str) -> str:
    """An id with a credential in it, replaced by a digest of itself: still unique, so idempotency keys and
    turn ids keep working, and the credential is gone. Ids that merely look random (uuids, hashes, which the
    generic high-entropy `token` detector flags) are ids, and stay as they are."""
    if set(redact_secrets(value).kinds) <= {"token"}:
        return value
    return "sha256:" + hashlib.sha256(value.encode("utf-8")).hexdigest()


def redact_tree(value: T) -> T:
    """Every string of a JSON-like value (dict keys included) with its secrets redacted."""
    out: Any
    if isinstance(value, str):
        out = redact_text(value)
    elif isinstance(value, dict):
        out = {redact_text(k) if isinstance(k, str) else k: redact_tree(v) for k, v in value.items()}
    elif isinstance(value, list):
        out = [redact_tree(v) for v in value]
    else:
        out = value
    return out
