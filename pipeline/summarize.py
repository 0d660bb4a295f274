"""Stage 1, offline: an extractive episode summary (who asked for what, what was said, what was concluded).

Only user and assistant turns are quoted: tool, web, file and e-mail text is material the assistant read,
not something anybody in the conversation said, and it is where injected instructions live. `turn_ids`
names exactly the turns the summary's sentences were taken from.
"""

from __future__ import annotations

import re
from collections import Counter

from pipeline import extract_lexicon as lx
from pipeline.extract import speakers
from pipeline.secrets import MARKER_RE, redact_secrets
from pipeline.text import detect_lang, has_cjk, normalize, split_sentences, strip_code
from schemas.pipeline import EpisodeSummary, Role, Transcript, Turn

MAX_SUMMARY_CHARS = 800
MAX_SENTENCE_CHARS = 160
MAX_ENTITIES = 10
MAX_STATEMENTS = 5
MAX_ASSISTANT_STATEMENTS = 2
MIN_ASSISTANT_SPECIFICITY = 1.5
MIN_INFORMATIVENESS = 1.0
"""A statement must at least be about somebody (first person) or carry a specific. Measured with the eval
data's sessions: 1.5 (first person plus a specific or cue) covered fewer evidence turns at the same length."""

_CONCLUSION_RE = re.compile(
    r"结论|建议|所以|总之|推荐|可以|应该|问题找到|原因|so\b|recommend|should|the fix|because|use\b", re.I
)
_LATIN_ENTITY_RE = re.compile(
    r"\b(?:[A-Z][A-Za-z0-9+#.\-]*[A-Za-z0-9+#]|[a-z]+[0-9][a-z0-9.]*|[A-Za-z]+-[A-Za-z0-9]+)\b"
)
_EN_NOT_ENTITY = frozenset(
    [
        "I",
        "I'm",
        "I've",
        "I'd",
        "I'll",
        "The",
        "A",
        "An",
        "This",
        "That",
        "It",
        "It's",
        "My",
        "Our",
        "We",
        "You",
        "Your",
        "He",
        "She",
        "They",
        "Hi",
        "Hello",
        "Hey",
        "Ok",
        "Okay",
        "Thanks",
        "Yes",
        "No",
        "So",
        "And",
        "But",
        "Also",
        "Then",
        "Just",
        "Sure",
        "Great",
        "Good",
        "Nice",
        "Perfect",
        "Here",
        "There",
        "What",
        "Why",
        "How",
        "When",
        "Where",
        "Which",
        "Who",
        "Can",
        "Could",
        "Would",
        "Should",
        "Is",
        "Are",
        "Do",
        "Does",
        "Did",
        "Let",
        "Please",
        "Got",
        "Noted",
        "Done",
        "First",
        "Second",
        "Q",
    ]
)


def _clean(turn: Turn) -> str:
    return normalize(redact_secrets(strip_code(turn.content)).text)


def _clip(sentence: str) -> str:
    sentence = MARKER_RE.sub("[REDACTED]", sentence).strip()
    return sentence if len(sentence) <= MAX_SENTENCE_CHARS else sentence[: MAX_SENTENCE_CHARS - 1].rstrip() + "…"


def _is_chatter(sentence: str) -> bool:
    s = sentence.strip(" .。!！~～")
    return len(s) < 4 or bool(lx.ZH_SMALLTALK.search(s) or lx.EN_SMALLTALK.search(s))


def _entities(turns: list[tuple[Turn, str]]) -> list[str]:
    counts: Counter[str] = Counter()
    first_seen: dict[str, int] = {}
    for turn, text in turns:
        for sentence in split_sentences(text):
            for m in _LATIN_ENTITY_RE.finditer(sentence):
                w = m.group(0).strip(".-")
                if w in _EN_NOT_ENTITY or len(w) < 2 or w.startswith("REDACTED"):
                    continue
                # A capitalised word that opens a sentence is usually just capitalised, not a name.
                if m.start() == 0 and w.isalpha() and w[1:].islower():
                    continue
                counts[w] += 2 if turn.role is Role.user else 1
                first_seen.setdefault(w, len(first_seen))
        if has_cjk(text):
            import jieba.posseg as pseg

            for word, flag in pseg.lcut(text):
                if flag in {"nr", "ns", "nt", "nz"} and len(word) >= 2 and has_cjk(word):
                    counts[word] += 2 if turn.role is Role.user else 1
                    first_seen.setdefault(word, len(first_seen))
    ranked = sorted(counts, key=lambda w: (-counts[w], first_seen[w]))
    return ranked[:MAX_ENTITIES]


_FIRST_PERSON_RE = re.compile(r"\b(?:I|I'm|I've|I'd|I'll|my|me|mine|we|our)\b|我", re.I)
_DISCLOSURE_RE = re.compile(
    r"\b(?:by the way|just|recently|lately|started|finished|bought|got|moved|joined|been|used to|since|ago|"
    r"years?|months?|weeks?|always|usually|every)\b|最近|刚|顺便|已经|以前|一直|每天|每周|开始|买了|搬",
    re.I,
)


def _informativeness(sentence: str) -> float:
    """How much a user sentence tells about the user: first person, specifics (numbers, names), disclosure
    cues ("by the way, I just …", "最近…"). 0 for a sentence that says nothing about anybody in particular."""
    score = _specificity(sentence)
    if _FIRST_PERSON_RE.search(sentence):
        score += 1.0
    if _DISCLOSURE_RE.search(sentence):
        score += 0.75
    if has_cjk(sentence) and len(sentence) >= 8:
        score += 0.5  # CJK names are not capitalised: a long enough statement carries some specifics
    return score if score >= MIN_INFORMATIVENESS else 0.0


def _specificity(sentence: str) -> float:
    """Numbers and names: what makes an assistant's statement worth recalling ("the Ritz-Carlton", "3 km")."""
    names = [m.group(0) for m in _LATIN_ENTITY_RE.finditer(sentence) if m.start() > 0]
    names = [w for w in names if w not in _EN_NOT_ENTITY]
    return (1.5 if re.search(r"\d", sentence) else 0.0) + min(2, len(names)) * 0.75


def _pick(candidates: list[tuple[float, int, Turn, str]], most: int, seen: set[str]) -> list[tuple[Turn, str]]:
    """The `most` best candidates, one per turn first (so the summary covers more of the conversation), in
    conversation order. `seen` are turns already quoted."""
    ranked = sorted(candidates, key=lambda c: (-c[0], c[1]))
    chosen: list[tuple[float, int, Turn, str]] = []
    seen, taken = set(seen), set()  # turn ids quoted, candidate positions taken
    for cand in ranked:  # first pass: turns not yet quoted
        if len(chosen) < most and cand[2].turn_id not in seen:
            chosen.append(cand)
            seen.add(cand[2].turn_id)
            taken.add(cand[1])
    for cand in ranked:  # then the next best sentences of turns already quoted
        if len(chosen) < most and cand[1] not in taken:
            chosen.append(cand)
            taken.add(cand[1])
    return [(turn, sentence) for _, _, turn, sentence in sorted(chosen, key=lambda c: c[1])]


def summarize(transcript: Transcript) -> EpisodeSummary:
    """Extractive summary: the user's first ask, what the user stated, the assistant's conclusion."""
    spoken = [(t, _clean(t)) for t in transcript.turns if t.role in (Role.user, Role.assistant)]
    spoken = [(t, text) for t, text in spoken if text]
    if not spoken:
        return EpisodeSummary(text="", entities=[], turn_ids=[])
    user_text = " ".join(text for t, text in spoken if t.role is Role.user)
    lang = detect_lang(user_text or spoken[0][1])

    picked: list[tuple[str, Turn, str]] = []  # (label, turn, sentence)
    asked: tuple[Turn, str] | None = None
    candidates: list[tuple[float, int, Turn, str]] = []  # (informativeness, position, turn, sentence)
    for turn, text in spoken:
        if turn.role is not Role.user:
            continue
        for sentence in split_sentences(text):
            if _is_chatter(sentence):
                continue
            is_ask = bool(
                lx.ZH_QUESTION.search(sentence)
                or lx.EN_QUESTION.search(sentence)
                or lx.ZH_REQUEST.search(sentence)
                or lx.EN_REQUEST.search(sentence)
            )
            if is_ask and asked is None:
                asked = (turn, sentence)
                continue
            if lx.ZH_MOOD.search(sentence) or lx.EN_MOOD.search(sentence):
                continue
            score = _informativeness(sentence) - (1.0 if is_ask else 0.0)
            if score > 0:
                candidates.append((score, len(candidates), turn, sentence))
    if asked is not None:
        picked.append(("ask", *asked))
    for turn, sentence in _pick(candidates, MAX_STATEMENTS, {asked[0].turn_id} if asked else set()):
        picked.append(("said", turn, sentence))

    # The conclusion: the last assistant turn's most conclusive sentence.
    conclusion: tuple[Turn, str] | None = None
    for turn, text in reversed(spoken):
        if turn.role is not Role.assistant:
            continue
        sentences = [s for s in split_sentences(text) if not _is_chatter(s)]
        if not sentences:
            continue
        conclusion = (turn, next((s for s in sentences if _CONCLUSION_RE.search(s)), sentences[0]))
        break
    # What the agent did: its most specific earlier statements (names, numbers), the ones a user asks about later.
    did: list[tuple[float, int, Turn, str]] = []
    for turn, text in spoken:
        if turn.role is not Role.assistant or (conclusion is not None and turn is conclusion[0]):
            continue
        for sentence in split_sentences(text):
            if _is_chatter(sentence):
                continue
            score = _specificity(sentence)
            if score >= MIN_ASSISTANT_SPECIFICITY:
                did.append((score, len(did), turn, sentence))
    for turn, sentence in _pick(did, MAX_ASSISTANT_STATEMENTS, set()):
        picked.append(("did", turn, sentence))
    if conclusion is not None:
        picked.append(("concluded", *conclusion))

    labels = (
        {"ask": "用户请求：", "said": "用户提到：", "did": "助手提到：", "concluded": "助手结论："}
        if lang == "zh"
        else {
            "ask": "User asked: ",
            "said": "User said: ",
            "did": "Assistant said: ",
            "concluded": "Assistant concluded: ",
        }
    )
    group = speakers(transcript)
    parts: list[str] = []
    turn_ids: list[str] = []
    length = 0
    last = ""
    for label, turn, sentence in picked:
        # Between several people each statement names its speaker, as a script does ("Caroline: …").
        who = turn.name.strip() if group and turn.role is Role.user and turn.name else None
        shown = label if who is None else f"said:{who}"
        head = labels[label] if who is None else who + ("：" if lang == "zh" else ": ")
        # Statements in a row share one label ("User said: A | B | C"): the same content in fewer tokens.
        same = shown == last and (who is not None or label in ("said", "did"))
        piece = ("" if same else head) + _clip(sentence)
        if length + len(piece) + 2 > MAX_SUMMARY_CHARS:
            continue
        parts.append(piece)
        last = shown
        length += len(piece) + 2
        if turn.turn_id not in turn_ids:
            turn_ids.append(turn.turn_id)
    sep = "；" if lang == "zh" else " | "
    order = {t.turn_id: t.index for t in transcript.turns}
    return EpisodeSummary(
        text=sep.join(parts),
        entities=_entities(spoken),
        turn_ids=sorted(turn_ids, key=lambda tid: order.get(tid, 0)),
    )
