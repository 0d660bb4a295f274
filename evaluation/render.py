"""The text a caller would inject for a retrieved item. Its cost is counted in WordPiece tokens
(`pipeline.wordpiece`)."""

from __future__ import annotations

from datetime import datetime


def _date(at: datetime | None) -> str:
    return at.strftime("%Y-%m-%d") if at else "?"


def render_memory(value: str, *, at: datetime | None) -> str:
    """A memory as injected into a prompt: its date (when it was last verified) and its text."""
    return f"- ({_date(at)}) {value}"


def render_episode(summary: str, *, at: datetime | None) -> str:
    return f"- (episode {_date(at)}) {summary}"


def render_round(text: str, *, at: datetime | None) -> str:
    """A round as the context block shows it: its date, then its turns on one line."""
    return f"- ({_date(at)}) " + " | ".join(text.splitlines())


def render_turn(text: str, *, speaker: str, at: datetime | None) -> str:
    """A raw turn as a baseline would inject it: date, speaker and text."""
    return f"- ({_date(at)}) {speaker}: {text}"
