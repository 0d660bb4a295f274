"""The OpenAI-compatible language back-end: one `distill_v1` call, then the same trust gates as always.

The model's answer is a suggestion. Who said a fact (its `source`), whether it may become active, and how
confident we may be are decided here from the transcript's own roles, never from what the model claims:
text from tools can be poisoned, and the model may be fooled by it.
"""

from __future__ import annotations

import re
import unicodedata

from pipeline.base import LLMClient
from pipeline.extract import own_and_quoted
from pipeline.prompts.distill_v1 import (
    DEFAULT_MAX_TRANSCRIPT_CHARS,
    PROMPT_VERSION,
    DistillResponse,
    LLMFact,
    build_messages,
)
from pipeline.secrets import redact_secrets
from pipeline.slots import slot_of
from pipeline.text import restates_quoted, strip_invisible
from schemas.pipeline import (
    CandidateFact,
    Distillation,
    EpisodeSummary,
    MemoryKind,
    MemoryState,
    Role,
    Source,
    Transcript,
    Turn,
)

# Confidence ceilings by who said it; keep in line with pipeline.reconcile.SOURCE_CONFIDENCE_CAP.
TOOL_CONFIDENCE_CAP = 0.3
ASSISTANT_CONFIDENCE_CAP = 0.6
USER_CONFIDENCE_CAP = 1.0
DEFAULT_CONFIDENCE = 0.8

MAX_KEY_CHARS = 120
MAX_VALUE_CHARS = 500
MAX_SUBJECT_CHARS = 80
MAX_FACTS = 50
MAX_SUMMARY_CHARS = 2000
MAX_ENTITIES = 30
MAX_ENTITY_CHARS = 100
FALLBACK_TURN_CHARS = 300

_KIND_ALIASES = {
    "preferences": MemoryKind.preference,
    "pref": MemoryKind.preference,
    "identity": MemoryKind.profile,
    "personal": MemoryKind.profile,
    "tech_stack": MemoryKind.fact,
    "stack": MemoryKind.fact,
    "goal": MemoryKind.project,
    "routine": MemoryKind.habit,
    "relation": MemoryKind.relationship,
}

_SPACES = re.compile(r"\s+")


def _clean(text: str, limit: int) -> str:
    # Invisible characters hide or disguise text; secrets are never stored verbatim whatever the model
    # copied (ingest redacts the turns too, this is the second line).
    text = strip_invisible(unicodedata.normalize("NFC", text))
    text = _SPACES.sub(" ", text).strip()
    text = redact_secrets(text).text
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _clean_subject(subject: str) -> str:
    subject = _clean(subject, MAX_SUBJECT_CHARS).lower().replace(" ", "_").strip(".")
    return subject or "user"


def _clean_key(key: str, subject: str) -> str:
    # NFKC folds full-width and look-alike compatibility forms, so "ｕｓｅｒ．ｃｉｔｙ" is `user.city`.
    key = strip_invisible(unicodedata.normalize("NFKC", key)).strip().lower()
    key = _SPACES.sub("_", key).strip(".")
    key = re.sub(r"\.{2,}", ".", key)
    key = redact_secrets(key).text
    if key and "." not in key:
        key = f"{subject}.{key}"  # keys are subject.attribute
    return registry_key(key)[:MAX_KEY_CHARS]


def registry_key(key: str) -> str:
    """A model's key onto the slot registry's names (`user.occupation` → `user.role`, `user.home_city` →
    `user.city`), so its facts meet the offline extractor's and the lifecycle's; `decision.*`/`instruction.*`
    keep what follows, and a key naming no slot stays as it is."""
    head, _, attribute = key.partition(".")
    first = attribute.split(".", 1)[0]
    if first in ("decision", "instruction") or not attribute:
        return key
    slot = slot_of(attribute)
    return f"{head}.{slot.name}" if slot is not None else key


def _kind(raw: str) -> MemoryKind:
    name = raw.strip().lower().replace("-", "_").replace(" ", "_")
    try:
        return MemoryKind(name)
    except ValueError:
        return _KIND_ALIASES.get(name, MemoryKind.fact)


def _clamp(value: float) -> float:
    return 0.0 if value != value else min(max(value, 0.0), 1.0)  # NaN -> 0


def _source_of(turns: list[Turn]) -> Source:
    """Who said a fact, from the roles of the turns it cites (already filtered to real turns)."""
    users = [t.index for t in turns if t.role == Role.user]
    assistants = [t.index for t in turns if t.role == Role.assistant]
    if assistants:
        # An assistant claim becomes the user's only when a later user turn (a confirmation) is cited too.
        return Source.user if users and max(users) > min(assistants) else Source.assistant
    return Source.user if users else Source.tool


def _restates_quoted(value: str, turns: list[Turn]) -> bool:
    """A "user" fact that only repeats what the user quoted or pasted (an e-mail, "she wrote: …") is that
    material's, not the user's: the model cannot tell a pasted instruction from one the user gives."""
    owns: list[str] = []
    quoted: list[str] = []
    for turn in turns:
        if turn.role == Role.user:
            own, shown = own_and_quoted(turn.content)
            owns.append(own)
            quoted += shown
    return restates_quoted(value, "\n".join(owns), quoted)


class LLMBackend:
    """`LanguageBackend` over any `LLMClient`: prompt `distill_v1`, then provenance gates and caps."""

    def __init__(self, client: LLMClient, *, max_transcript_chars: int = DEFAULT_MAX_TRANSCRIPT_CHARS) -> None:
        self.client = client
        self.max_transcript_chars = max_transcript_chars
        self.name = f"openai:{client.model}/{PROMPT_VERSION}"

    def distill(self, transcript: Transcript) -> Distillation:
        """Summarize the transcript and extract its stable facts; raises TransientError / PermanentError."""
        if not transcript.turns:
            return Distillation(summary=EpisodeSummary(text=""), facts=[], backend=self.name)
        messages = build_messages(transcript, max_chars=self.max_transcript_chars)
        answer = self.client.generate(messages, DistillResponse)
        return Distillation(
            summary=self._summary(transcript, answer),
            facts=self._facts(transcript, answer.facts),
            backend=self.name,
        )

    def _summary(self, transcript: Transcript, answer: DistillResponse) -> EpisodeSummary:
        known = {t.turn_id for t in transcript.turns}
        entities: list[str] = []
        for raw in answer.entities:
            entity = _clean(raw, MAX_ENTITY_CHARS)
            if entity and entity not in entities:
                entities.append(entity)
        entities = entities[:MAX_ENTITIES]
        text = _clean(answer.summary or "", MAX_SUMMARY_CHARS)
        if text:
            turn_ids = list(dict.fromkeys(t for t in answer.summary_turn_ids if t in known))
            return EpisodeSummary(text=text, entities=entities, turn_ids=turn_ids)
        return self._fallback_summary(transcript, entities)

    @staticmethod
    def _fallback_summary(transcript: Transcript, entities: list[str]) -> EpisodeSummary:
        # Extractive: the opening user turn and the last spoken turn. Tool text is left out on purpose,
        # so a poisoned page cannot become the episode's summary.
        spoken = [t for t in transcript.turns if t.role in (Role.user, Role.assistant)]
        first_user = next((t for t in spoken if t.role == Role.user), None)
        picked = [t for t in (first_user, spoken[-1] if spoken else None) if t is not None]
        picked = list({t.turn_id: t for t in picked}.values())
        text = " … ".join(f"{t.role.value}: {_clean(t.content, FALLBACK_TURN_CHARS)}" for t in picked)
        return EpisodeSummary(text=text, entities=entities, turn_ids=[t.turn_id for t in picked])

    def _facts(self, transcript: Transcript, raw_facts: list[LLMFact]) -> list[CandidateFact]:
        by_id = {t.turn_id: t for t in transcript.turns}
        # Same statement from the same kind of source: one fact with both provenances. A user fact and an
        # assistant claim of the same value stay apart, so provenance keeps telling them apart.
        out: dict[tuple[str, str, str, bool, str, str], CandidateFact] = {}
        for raw in raw_facts:
            fact = self._gate(raw, by_id)
            if fact is None:
                continue
            dedupe_key = (fact.kind, fact.key, fact.value, fact.negated, fact.source, fact.state)
            seen = out.get(dedupe_key)
            if seen is None:
                if len(out) < MAX_FACTS:
                    out[dedupe_key] = fact
            else:
                merged_ids = list(dict.fromkeys(seen.turn_ids + fact.turn_ids))
                out[dedupe_key] = seen.model_copy(
                    update={"turn_ids": merged_ids, "confidence": max(seen.confidence, fact.confidence)}
                )
        return list(out.values())

    @staticmethod
    def _gate(raw: LLMFact, by_id: dict[str, Turn]) -> CandidateFact | None:
        subject = _clean_subject(raw.subject or "user")
        key = _clean_key(raw.key, subject)
        value = _clean(raw.value, MAX_VALUE_CHARS)
        if not key or not value:
            return None
        cited = sorted(
            {by_id[i].index: by_id[i] for i in raw.source_turn_ids if i in by_id}.values(),
            key=lambda t: t.index,
        )
        source = _source_of(cited)
        if source == Source.user and _restates_quoted(value, cited):
            source = Source.tool  # quarantined below, exactly as tool text is
        kind = _kind(raw.kind)
        confidence = _clamp(DEFAULT_CONFIDENCE if raw.confidence is None else raw.confidence)
        state = MemoryState.active
        if source == Source.tool:
            # Only tool/system turns, or nothing real, back it: keep it as attributed, quarantined text.
            kind, state = MemoryKind.observation, MemoryState.quarantined
            confidence = min(confidence, TOOL_CONFIDENCE_CAP)
        elif source == Source.assistant:
            confidence = min(confidence, ASSISTANT_CONFIDENCE_CAP)
        else:
            confidence = min(confidence, USER_CONFIDENCE_CAP)
        return CandidateFact(
            kind=kind,
            key=key,
            value=value,
            source=source,
            confidence=round(confidence, 4),
            turn_ids=[t.turn_id for t in cited],
            subject=subject,
            negated=bool(raw.negated),
            supersedes_previous=bool(raw.supersedes_previous),
            state=state,
        )
