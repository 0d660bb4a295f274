"""Rounds: a conversation's user turns, each with the turn that answered it, as retrievable units.

A memory holds what stays true; an episode summary holds a whole conversation. Neither holds the one thing
someone said in passing that a later question asks about ("what did Caroline paint last month?"), which a
search over the raw turns finds by its words. A round keeps that turn, with the first `REPLY_CHARS`
characters of the reply after it (the answer to a question is often there; a long assistant reply would
cost a reader's whole budget, BENCHMARKS.md "Would a round-level index beat raw turns?"). Each round is
searched by its own text and by the values of the facts distilled from its turns, the LongMemEval paper's
"key expansion": those go into its full-text key only, because in the embedding they dilute a long turn's
meaning (measured there).

Pure: the distill service embeds `Round.text` and stores the rows.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from schemas.pipeline import Role, Transcript, Turn

REPLY_CHARS = 200
"""How much of the reply a round shows (and embeds)."""
TURN_CHARS = 1200
"""How much of the user's own turn a round shows (and embeds); its full text is still in the search key."""
MAX_ROUNDS = 400
"""Rounds kept per transcript (the last ones: a longer transcript is a pasted log, not a conversation)."""


@dataclass(frozen=True)
class Round:
    seq: int
    """Position of the round's user turn in the transcript (0-based turn index)."""
    turn_ids: list[str]
    """The user turn, then the reply when there is one."""
    text: str
    """What a reader is shown: `speaker: text` per turn, the reply cut to REPLY_CHARS."""
    key: str
    """What full-text search indexes: both turns whole, and the values of the facts distilled from them."""

    @property
    def embed_text(self) -> str:
        """What the embedding is of: the user's turn as shown, without the reply (half the tokens to embed; the
        reply's words are still in the key)."""
        return self.text.split("\n", 1)[0]


def _cut(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _speaker(turn: Turn) -> str:
    return turn.name if turn.role == Role.user and turn.name else turn.role.value


def split_rounds(transcript: Transcript, facts: Iterable[tuple[Sequence[str], str]] = ()) -> list[Round]:
    """One round per non-empty user turn, with the turn after it shown to REPLY_CHARS: the assistant's
    answer, or, in a chat between two people (both ingested as user turns), the other person's. Tool and
    system turns neither start a round nor answer one. `facts` are (turn ids, value) of the facts distilled from
    the transcript: a round's key holds the values of those that name one of its turns."""
    values: dict[str, list[str]] = {}
    for turn_ids, value in facts:
        for tid in turn_ids:
            values.setdefault(tid, []).append(value)
    turns = transcript.turns
    out: list[Round] = []
    for i, turn in enumerate(turns):
        if turn.role != Role.user or not turn.content.strip():
            continue
        reply = turns[i + 1] if i + 1 < len(turns) and turns[i + 1].content.strip() else None
        if reply is not None and reply.role in (Role.tool, Role.system):
            reply = None
        shown = [f"{_speaker(turn)}: {_cut(turn.content, TURN_CHARS)}"]
        key_parts = [turn.content]
        ids = [turn.turn_id]
        if reply is not None:
            shown.append(f"{_speaker(reply)}: {_cut(reply.content, REPLY_CHARS)}")
            key_parts.append(reply.content)
            ids.append(reply.turn_id)
        seen: dict[str, None] = {}
        for tid in ids:
            for v in values.get(tid, []):
                seen.setdefault(v, None)
        out.append(Round(seq=turn.index, turn_ids=ids, text="\n".join(shown), key=" ".join([*key_parts, *seen])))
    return out[-MAX_ROUNDS:]
