"""The base of every model that carries caller input into storage (HTTP bodies, MCP tool arguments, files).

PostgreSQL cannot store some things JSON can carry: a NUL character in text or jsonb, an unpaired UTF-16
surrogate (`"\\ud800"` decodes to a Python str that UTF-8 cannot encode), and NaN/Infinity in a number.
Each used to reach the database driver and come back as a 500. Rejecting them here makes every such input a
422 that names the field, on every edge that validates with these models.
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, ConfigDict, model_validator

_UNSTORABLE = re.compile(r"[\x00\ud800-\udfff]")
MAX_DEPTH = 32
"""Nested structures deeper than this are refused outright (they are never a legitimate memory payload)."""


def unstorable_reason(text: str) -> str | None:
    """Why this string cannot be stored, or None."""
    m = _UNSTORABLE.search(text)
    if m is None:
        return None
    return "contains a NUL character" if m.group() == "\x00" else "contains an unpaired surrogate (invalid Unicode)"


def find_unstorable(value: Any, path: str = "", depth: int = 0) -> str | None:
    """The first problem in a JSON-like value (strings, keys, lists, dicts, numbers), as `path: reason`."""
    if depth > MAX_DEPTH:
        return f"{path or 'value'}: nested deeper than {MAX_DEPTH} levels"
    if isinstance(value, str):
        reason = unstorable_reason(value)
        return f"{path or 'value'} {reason}" if reason else None
    if isinstance(value, float) and (value != value or value in (float("inf"), float("-inf"))):
        return f"{path or 'value'} is not a finite number"
    if isinstance(value, dict):
        for k, v in value.items():
            where = f"{path}.{k}" if path else str(k)
            if isinstance(k, str) and (reason := unstorable_reason(k)):
                return f"a key of {path or 'the object'} {reason}"
            if found := find_unstorable(v, where, depth + 1):
                return found
    elif isinstance(value, list | tuple):
        for i, v in enumerate(value):
            if found := find_unstorable(v, f"{path}.{i}" if path else str(i), depth + 1):
                return found
    return None


class InputModel(BaseModel):
    """Caller input: unknown fields refused, no NaN/Infinity, no NUL or unpaired surrogate anywhere."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    @model_validator(mode="before")
    @classmethod
    def _storable(cls, data: Any) -> Any:
        if isinstance(data, dict) and (problem := find_unstorable(data)):
            raise ValueError(problem)
        return data


def json_safe(value: Any) -> Any:
    """A value that strict JSON can carry: non-finite numbers as their names, unpaired surrogates replaced.

    For echoing caller input back in an error: the input may be exactly what could not be stored."""
    if isinstance(value, float) and (value != value or value in (float("inf"), float("-inf"))):
        return repr(value)
    if isinstance(value, str):
        return _UNSTORABLE.sub("\ufffd", value)
    if isinstance(value, dict):
        return {json_safe(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_safe(v) for v in value]
    return value
