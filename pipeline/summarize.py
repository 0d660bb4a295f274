"""Stage 1, offline: an extractive episode summary (who asked for what, what was said, what was concluded).

Only user and assistant turns are quoted: tool, web, file and e-mail text is material the assistant read,
not something anybody in the conversation said, and it is where injected instructions live. `turn_ids`
names exactly the turns the summary's sentences were taken from.

What nobody in the conversation vouches for is labelled, never passed off as said: a statement the assistant
relays from a tool, page, file or e-mail (or quotes), material the user pasted or quoted, both "(relayed,
unverified)", and an assistant's claim about the user that the user did not confirm "(about the user,
unconfirmed)". A user's ask and statements come from the user's own words only.
"""

from __future__ import annotations

import re
from collections import Counter

from pipeline import extract_lexicon as lx
from pipeline.extract import claim_about_user, speakers
from pipeline.secrets import MARKER_RE, redact_secrets
from pipeline.text import (
    detect_lang,
    has_cjk,
    is_mail_header,
    normalize,
    own_and_shown,
    pos_cut,
    remembered,
    reply_kind,
    restates_quoted,
    speech_cue,
    split_sentences,
    strip_code,
)
from schemas.pipeline import EpisodeSummary, Role, Transcript, Turn

MAX_SUMMARY_CHARS = 800
MAX_SENTENCE_CHARS = 160
MAX_ENTITIES = 10
MAX_STATEMENTS = 5
MAX_ASSISTANT_STATEMENTS = 2
MAX_QUOTED_STATEMENTS = 1
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


@remembered(maxsize=1024)
def _redacted(content: str) -> str:
    """A turn's text without code or secrets; remembered, as the summary reads each turn two or three times."""
    return redact_secrets(strip_code(content)).text


def _clean(turn: Turn) -> str:
    return normalize(_redacted(turn.content))


@remembered(maxsize=1024)
def _parts(content: str) -> tuple[str, list[str]]:
    return own_and_shown(_redacted(content))


def _split(turn: Turn) -> tuple[str, list[str]]:
    """A turn's own words and the material it quotes (pasted e-mails, `>` lines, "she wrote: …")."""
    own, quoted = _parts(turn.content)
    return own, list(quoted)


_RELAY_RE = re.compile(
    r"\baccording to (?:the|their|its|his|her|this|that|a)\b|\b(?:page|site|website|portal|search|results?|tool|"
    r"file|document|docs|documentation|e-?mail|message|records?|database|api|dashboard|system|listing|article|"
    r"report|output|logs?|forecast|app|invoice|notice|statement)s? (?:says|said|shows|showed|lists|listed|states|"
    r"stated|reports|reported|mentions|mentioned|indicates|indicated|reads|notes|confirms|confirmed|returned|"
    r"returns)\b|根据(?:搜索|查询|页面|网页|网站|官网|系统|工具)(?:结果|信息|记录)?|"
    r"(?:页面|网页|网站|搜索结果|查询结果|工具|文件|文档|邮件|系统|记录|后台|平台|官网|通知)(?:上|里|中)?"
    r"(?:显示|写着|说|提到|表明|列出|称)",
    re.I,
)
"""The assistant passing on what something it read says ("the vendor portal says …", "根据查询结果…")."""
_TAGS = {
    "relayed": ("relayed, unverified", "转述，未核实"),
    "claimed": ("about the user, unconfirmed", "关于用户，未经确认"),
}


_ABOUT_YOU_RE = re.compile(r"\byou(?:'re| are|'ve| have)\b|你是|你在|你有|你住|你的|您是|您在|您的", re.I)
_IF_YOU_RE = re.compile(r"\b(?:if|when|whenever|unless|once|in case) you\b|如果你|如果您|要是你", re.I)


def _claims_about_user(sentence: str) -> bool:
    """An assistant sentence that states what the user is or has ("since you're vegetarian, …"), as
    extraction's claim rule sees it; advice, lists of options and conditionals ("if you have …") are not."""
    if not _ABOUT_YOU_RE.search(sentence) or _IF_YOU_RE.search(sentence):
        return False
    return claim_about_user(sentence) is not None


def _relayed(sentence: str, tool_texts: list[str]) -> bool:
    """Whether an assistant sentence passes on tool/web/file/e-mail text: it says so, or it repeats it."""
    return bool(_RELAY_RE.search(sentence) or speech_cue(sentence)) or restates_quoted(sentence, "", tool_texts)


def _confirmed_assistant_turns(transcript: Transcript) -> set[str]:
    """Assistant turns whose claims the user's next turn confirmed ("yes", "对"), as extraction lifts them."""
    confirmed: set[str] = set()
    last: Turn | None = None
    for turn in transcript.turns:
        if turn.role is Role.assistant:
            last = turn
        elif turn.role is Role.user:
            if last is not None and reply_kind(_split(turn)[0]) == "confirm":
                confirmed.add(last.turn_id)
            last = None
    return confirmed


def _head(label: str, tag: str, labels: dict[str, str], lang: str) -> str:
    """A statement's label, with its trust tag: "Assistant said (relayed, unverified): "."""
    if not tag:
        return labels[label]
    words = _TAGS[tag][1 if lang == "zh" else 0]
    base = labels[label].rstrip(": ：")
    return f"{base}（{words}）：" if lang == "zh" else f"{base} ({words}): "


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
            for word, flag in pos_cut(text):
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
    parts_of = {t.turn_id: _split(t) for t, _ in spoken}  # (own words, quoted material)
    tool_texts = [normalize(t.content) for t in transcript.turns if t.role in (Role.tool, Role.system)]
    confirmed = _confirmed_assistant_turns(transcript)

    def tag(turn: Turn, sentence: str, quoted: bool) -> str:
        if quoted or _relayed(sentence, tool_texts):
            return "relayed"
        if turn.turn_id not in confirmed and _claims_about_user(sentence):
            return "claimed"
        return ""

    picked: list[tuple[str, Turn, str, str]] = []  # (label, turn, sentence, tag)
    asked: tuple[Turn, str] | None = None
    candidates: list[tuple[float, int, Turn, str]] = []  # (informativeness, position, turn, sentence)
    pasted: list[tuple[float, int, Turn, str]] = []  # what users pasted or quoted, by specificity
    for turn, _ in spoken:
        if turn.role is not Role.user:
            continue
        own, quoted = parts_of[turn.turn_id]
        for sentence in (s for q in quoted for s in split_sentences(q)):
            if not _is_chatter(sentence) and not is_mail_header(sentence):
                score = _specificity(sentence) + (0.5 if len(sentence) >= 12 else 0.0)
                pasted.append((score, len(pasted), turn, sentence))
        for sentence in split_sentences(own):
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
        picked.append(("ask", *asked, ""))
    for turn, sentence in _pick(candidates, MAX_STATEMENTS, {asked[0].turn_id} if asked else set()):
        picked.append(("said", turn, sentence, ""))
    for turn, sentence in _pick([c for c in pasted if c[0] > 0], MAX_QUOTED_STATEMENTS, set()):
        picked.append(("pasted", turn, sentence, "relayed"))

    def assistant_sentences(turn: Turn) -> list[tuple[str, bool]]:
        """(sentence, quoted) of an assistant turn: its own words, then what it quotes."""
        own, quoted = parts_of[turn.turn_id]
        out = [(s, False) for s in split_sentences(own)] + [(s, True) for q in quoted for s in split_sentences(q)]
        return [(s, q) for s, q in out if not _is_chatter(s) and not is_mail_header(s)]

    # The conclusion: the last assistant turn's most conclusive sentence.
    conclusion: tuple[Turn, str, bool] | None = None
    for turn, _ in reversed(spoken):
        if turn.role is not Role.assistant:
            continue
        sentences = assistant_sentences(turn)
        if not sentences:
            continue
        conclusion = (turn, *next((s for s in sentences if _CONCLUSION_RE.search(s[0])), sentences[0]))
        break
    # What the agent did: its most specific earlier statements (names, numbers), the ones a user asks about later.
    did: list[tuple[float, int, Turn, str]] = []
    quoted_did: set[tuple[str, str]] = set()
    for turn, _ in spoken:
        if turn.role is not Role.assistant or (conclusion is not None and turn is conclusion[0]):
            continue
        for sentence, is_quoted in assistant_sentences(turn):
            score = _specificity(sentence)
            if score >= MIN_ASSISTANT_SPECIFICITY:
                did.append((score, len(did), turn, sentence))
                if is_quoted:
                    quoted_did.add((turn.turn_id, sentence))
    for turn, sentence in _pick(did, MAX_ASSISTANT_STATEMENTS, set()):
        picked.append(("did", turn, sentence, tag(turn, sentence, (turn.turn_id, sentence) in quoted_did)))
    if conclusion is not None:
        picked.append(("concluded", conclusion[0], conclusion[1], tag(*conclusion)))

    labels = (
        {
            "ask": "用户请求：",
            "said": "用户提到：",
            "pasted": "用户贴出：",
            "did": "助手提到：",
            "concluded": "助手结论：",
        }
        if lang == "zh"
        else {
            "ask": "User asked: ",
            "said": "User said: ",
            "pasted": "User pasted: ",
            "did": "Assistant said: ",
            "concluded": "Assistant concluded: ",
        }
    )
    group = speakers(transcript)
    parts: list[str] = []
    turn_ids: list[str] = []
    length = 0
    last = ""
    for label, turn, sentence, trust in picked:
        # Between several people each statement names its speaker, as a script does ("Caroline: …").
        who = turn.name.strip() if group and turn.role is Role.user and turn.name and label != "pasted" else None
        shown = f"{label}:{trust}" if who is None else f"said:{who}"
        head = _head(label, trust, labels, lang) if who is None else who + ("：" if lang == "zh" else ": ")
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
