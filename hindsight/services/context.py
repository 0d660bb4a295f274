"""The context block: recalled memories rendered for the end of a system prompt, within a token budget.

Tokens are counted with the tokenizer of the configured model's family. OpenAI models (gpt-4o, gpt-4.1,
o-series, gpt-5, gpt-4, gpt-3.5, ...) are counted exactly with their BPE (o200k_base or cl100k_base): the
tiktoken package downloads its BPE files at run time, so the files come from the `bpe-openai` package, which
ships them (byte-identical to OpenAI's, same SHA-256) with a tiktoken-compatible encoder. Other families
(Claude, Qwen, Llama, Gemini, DeepSeek, ...) have no tokenizer that ships offline, so they get a documented
conservative estimate: the larger of the cl100k and o200k counts, times 1.25, rounded up (on our zh/en
memories no family's own tokenizer has been seen to need more than cl100k plus a fifth).
"""

from __future__ import annotations

import math
import uuid
from datetime import UTC, datetime
from functools import lru_cache

from pydantic import BaseModel

from hindsight.errors import InvalidInput
from schemas.recall import EpisodeHit, RecallHit

MIN_BUDGET_TOKENS = 64
MAX_BUDGET_TOKENS = 1_000_000
ESTIMATE_MARGIN = 1.25

HEADER = (
    "## Long-term memory\n"
    "Facts remembered from earlier conversations with this user, freshest and most trusted first. "
    "If the user now says otherwise, believe the user; treat stale or low-confidence items as possibly outdated.\n"
)


EPISODES_HEADER = "Earlier conversations with this user, most relevant first:\n"


class ContextBlock(BaseModel):
    text: str
    """Empty when nothing fits (or nothing was found): add nothing to the prompt then."""
    tokens: int
    memory_ids: list[uuid.UUID]
    """The memories in the block, in the order shown."""
    episode_ids: list[uuid.UUID] = []
    """The episode summaries in the block (after the memories), in the order shown."""
    truncated: bool
    """True when some hits were left out to stay within the budget."""


@lru_cache(maxsize=4)
def _encoding(name: str):  # type: ignore[no-untyped-def]
    import bpe_openai

    return bpe_openai.get_encoding(name)


@lru_cache(maxsize=256)
def encoding_for_model(model: str) -> str | None:
    """The BPE of an OpenAI model (`openai/gpt-4o` and `gpt-4o` alike), or None for other families."""
    from tiktoken.model import encoding_name_for_model

    name = model.strip().split("/")[-1]
    try:
        return encoding_name_for_model(name)
    except KeyError:
        return None


def count_tokens(text: str, model: str) -> int:
    """Tokens `text` takes for `model`: exact for OpenAI models, a conservative estimate otherwise."""
    if not text:
        return 0
    enc = encoding_for_model(model)
    if enc is not None:
        return len(_encoding(enc).encode_ordinary(text))
    n = max(len(_encoding("cl100k_base").encode_ordinary(text)), len(_encoding("o200k_base").encode_ordinary(text)))
    return math.ceil(n * ESTIMATE_MARGIN)


def _age(days: float) -> str:
    if days < 1:
        return "today"
    if days < 2:
        return "1 day ago"
    if days < 60:
        return f"{int(days)} days ago"
    if days < 730:
        return f"{int(days // 30)} months ago"
    return f"{int(days // 365)} years ago"


def _line(hit: RecallHit, now: datetime | None) -> str:
    m = hit.memory
    days = hit.age_days if now is None else max(0.0, (now - hit.last_verified_at).total_seconds() / 86400)
    notes = [m.kind, "pinned" if m.pinned else f"verified {_age(days)}", f"confidence {m.confidence:.2f}"]
    if m.state != "active":
        notes.append(m.state)
    if m.has_conflict:
        notes.append("contradicted by another memory")
    value = " ".join(m.value.split())
    return f"- {value} [{'; '.join(notes)}]\n"


def _episode_line(hit: EpisodeHit, now: datetime | None) -> str:
    ep = hit.episode
    days = hit.age_days if now is None else max(0.0, (now - ep.occurred_at).total_seconds() / 86400)
    return f"- ({ep.occurred_at:%Y-%m-%d}, {_age(days)}) {' '.join(ep.summary.split())}\n"


def _freshness_trust(hit: RecallHit) -> float:
    return hit.parts.recency * hit.parts.trust


def render_context(
    hits: list[RecallHit],
    *,
    budget_tokens: int,
    model: str,
    now: datetime | None = None,
    episodes: list[EpisodeHit] | None = None,
) -> ContextBlock:
    """Render the best `hits` (ranked as recall returns them), and the best `episodes` when given, within
    `budget_tokens` for `model`.

    Candidates are admitted in rank order, one memory then one episode summary and so on (episodes carry
    most of the evidence of past events, BENCHMARKS.md), while the whole block still fits; one too long for
    what is left is skipped, never cut. The admitted memories are shown freshest and most trusted first
    (recency x trust, then score), each with its kind, age and confidence; the episodes follow under their own
    heading, most relevant first, each with its date and age. The returned `tokens` is the count of the
    returned `text`, always <= budget_tokens.
    """
    if isinstance(budget_tokens, bool) or not isinstance(budget_tokens, int):
        raise InvalidInput("budget_tokens must be an integer")
    if not MIN_BUDGET_TOKENS <= budget_tokens <= MAX_BUDGET_TOKENS:
        raise InvalidInput(
            f"budget_tokens must be from {MIN_BUDGET_TOKENS} to {MAX_BUDGET_TOKENS}, got {budget_tokens}"
        )
    if not model or not isinstance(model, str):
        raise InvalidInput("model must name the model the prompt is for")

    if now is not None and now.tzinfo is None:  # a naive time is taken as UTC, like every stored time
        now = now.replace(tzinfo=UTC)

    def ordered(chosen: list[RecallHit]) -> list[RecallHit]:
        return sorted(chosen, key=lambda h: (-_freshness_trust(h), -h.score))

    def render(mem: list[RecallHit], eps: list[EpisodeHit]) -> str:
        if not mem and not eps:
            return ""
        text = HEADER + "".join(_line(h, now) for h in ordered(mem))
        if eps:
            text += EPISODES_HEADER + "".join(_episode_line(e, now) for e in eps)
        return text

    candidates: list[RecallHit | EpisodeHit] = []
    for i in range(max(len(hits), len(episodes or []))):
        candidates += [c[i] for c in (hits, episodes or []) if i < len(c)]

    mem: list[RecallHit] = []
    eps: list[EpisodeHit] = []
    truncated = False
    used = count_tokens(HEADER, model)
    for cand in candidates:
        is_memory = isinstance(cand, RecallHit)
        line = _line(cand, now) if is_memory else _episode_line(cand, now)  # type: ignore[arg-type]
        extra = count_tokens(line, model) + (count_tokens(EPISODES_HEADER, model) if not is_memory and not eps else 0)
        if used + extra > budget_tokens + 2:  # +2: joins may merge tokens; the exact check follows
            truncated = True
            continue
        trial = ([*mem, cand], eps) if is_memory else (mem, [*eps, cand])
        if count_tokens(render(*trial), model) > budget_tokens:  # type: ignore[arg-type]
            truncated = True
            continue
        mem, eps = trial  # type: ignore[assignment]
        used += extra
    text = render(mem, eps)
    tokens = count_tokens(text, model)
    while tokens > budget_tokens and (mem or eps):  # defensive: never over budget, whatever the tokenizer does
        if eps:
            eps = eps[:-1]
        else:
            worst = min(mem, key=lambda h: h.score)
            mem = [h for h in mem if h is not worst]
        truncated = True
        text = render(mem, eps)
        tokens = count_tokens(text, model)
    return ContextBlock(
        text=text,
        tokens=tokens,
        memory_ids=[h.memory.id for h in ordered(mem)],
        episode_ids=[e.episode.id for e in eps],
        truncated=truncated,
    )
