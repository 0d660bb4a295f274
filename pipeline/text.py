"""Language helpers shared by the offline distiller and reconcile.

Everything here is pure and deterministic: normalisation, language detection, clause splitting and the
small cue detectors (negation, numbers/versions, change of state, confirmation/rejection) that the
extraction rules and the conflict checks are built from. Chinese and English are handled side by side.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Callable
from functools import lru_cache
from typing import Any, Literal, TypeVar

_T = TypeVar("_T")

Lang = Literal["zh", "en"]
Reply = Literal["confirm", "reject"]

# Invisible characters used to smuggle text past a reader (zero-width, bidi controls, Unicode tags).
_INVISIBLE_RE = re.compile("[\u00ad\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u2069\ufeff\U000e0000-\U000e007f]")
_SPACE_RE = re.compile(r"[ \t\u00a0\u3000]+")
_CJK_RE = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff]")
_LATIN_RE = re.compile(r"[A-Za-z]")


def remembered(maxsize: int, max_chars: int = 2_000) -> Callable[[Callable[[str], _T]], Callable[[str], _T]]:
    """`lru_cache` for a pure function of one text, bounded in memory as well as in entries: a text longer than
    `max_chars` (a turn may hold 32,000) is computed every time and never kept."""

    def decorate(fn: Callable[[str], _T]) -> Callable[[str], _T]:
        cached = lru_cache(maxsize=maxsize)(fn)

        @functools.wraps(fn)
        def call(text: str) -> _T:
            return cached(text) if len(text) <= max_chars else fn(text)

        return call

    return decorate


@lru_cache(maxsize=1)
def _t2s() -> Any:
    # Imported lazily: building the converter reads dictionaries and costs ~100 ms.
    import opencc

    return opencc.OpenCC("t2s")


def strip_invisible(text: str) -> str:
    return _INVISIBLE_RE.sub("", text)


def to_simplified(text: str) -> str:
    if not _CJK_RE.search(text):
        return text
    return str(_t2s().convert(text))


@remembered(maxsize=4096)
def normalize(text: str) -> str:
    """NFKC (full-width → ASCII), invisible characters removed, traditional → simplified, spaces collapsed.
    Remembered: the rules normalize the same clause again and again (negation, change cues, reply kinds)."""
    text = unicodedata.normalize("NFKC", strip_invisible(text))
    text = to_simplified(text)
    lines = [_SPACE_RE.sub(" ", line).strip() for line in text.splitlines()]
    return "\n".join(line for line in lines if line)


def detect_lang(text: str) -> Lang:
    """zh when CJK characters make up a fair share of the letters, else en."""
    cjk = len(_CJK_RE.findall(text))
    latin = len(_LATIN_RE.findall(text))
    # One CJK character carries about as much as a short English word.
    return "zh" if cjk and cjk * 3 >= latin * 0.5 else "en"


def has_cjk(text: str) -> bool:
    return bool(_CJK_RE.search(text))


# --- splitting ---------------------------------------------------------------------------------------

_CODE_BLOCK_RE = re.compile(r"```.*?(```|$)", re.S)
# Sentence ends: Chinese terminators always; ASCII ones only before a space/end so "3.12" and "e.g." survive.
# Chat often starts a sentence in lower case ("rotating them. this is for my shop"): a period after a word of
# two or more lower-case letters ends a sentence before a lower-case word too.
# So does a period after a number or an acronym ("got a pixel 8. how do i", "we run it on GKE. what breaks"); the
# abbreviations that take a period (`_ABBREV_RE`) are held out first. Chat uses an emoji as a full stop
# ("又要加班😮‍💨 我在杭州当老师"): an emoji followed by a space ends a sentence.
_SENT_RE = re.compile(
    r"(?<=[。！？!?；;])\s*|(?<=\.)\s+(?=[A-Z\"'(\u4e00-\u9fff]|$)|(?<=[A-Za-z]{2}\.)\s+(?=[a-z])"
    r"|(?<=\d\.)\s+(?=[a-z]{2})|(?<=[)\]]\.)\s+(?=[a-z])|\n+|(?<=[…])\s*"
    r"|(?<=[\U0001F300-\U0001FAFF\u2600-\u27BF])[ \t\u3000]+"
)
# A redaction marker's colon ("[REDACTED:password]") is not a clause boundary, nor a time's ("早上 7:30 到公司").
# A leading `\s+` starts only where a whitespace run starts (`(?<!\s)`): tried from every position of a long
# run, each try rescans the rest of it (quadratic: 32,000 spaces took ~14 s). Same splits, linear.
# Chinese chat often puts a space where punctuation belongs ("我妈有高血压 每天吃药 她能吃西柚吗"): standard Chinese
# has no spaces between words, so a space between two Chinese characters ends a clause like a comma. A space next
# to a Latin word or a number ("我用 VS Code 写", "下个月 15 号") is word spacing.
_ZH_CLAUSE_RE = re.compile(
    r"[，,、]\s*|(?<!\[REDACTED)(?:(?<!\d)[：:]|[：:](?!\d))\s*|(?<!\s)\s+[—–-]{1,2}\s+|——"
    r"|(?<=[\u3400-\u9fff])[ \t\u3000]+(?=[\u3400-\u9fff])"
)
_EN_CLAUSE_RE = re.compile(
    r",\s+(?:but|so|though|although)\s+|,\s+(?=(?:and I|and we|and my|because|since|while|which)\b)"
    r"|,\s+(?=(?:I|I'm|I've|I'd|I'll|we|we're|my|our|she|he|they|it's|it is|that's|that is)\b)"
    # "I'm a PhD student at UCSD, can you help me …?": the question after the comma is a clause of its own.
    r"|,\s+(?=(?:can|could|would|will|do|does|did|is|are|should|shall|any|what|what's|how|why|where|when|which|"
    r"who|please)\s)"
    r"|(?<!\s)\s+(?:but|though|although)\s+(?=\w)"
    r"|(?:(?<!\s)\s+)?:\s+|(?<!\s)\s+[—–-]{1,2}\s+|—"
    # A hedge after a statement ("I shoot on Fujifilm, in case that matters", ", if that helps") is a clause of
    # its own: it says why the speaker mentions the fact, not what the fact is.
    r"|,\s+(?=(?:just )?in case\b|if (?:that|it) (?:helps|matters)\b)"
)


def strip_code(text: str) -> str:
    """Drop fenced code blocks: code and pasted config are material for the task, not facts about a person."""
    return _CODE_BLOCK_RE.sub(" ", text)


_ABBREV_RE = re.compile(r"\b(Dr|Mr|Mrs|Ms|Prof|St|Jr|Sr|vs|etc|e\.g|i\.e|approx|No)\.(?=\s)")
_DOT_HOLD = "\u2024"  # one-dot leader stands in for an abbreviation's dot while splitting


def split_sentences(text: str) -> list[str]:
    held = _ABBREV_RE.sub(lambda m: m.group(1) + _DOT_HOLD, text)
    parts = _SENT_RE.split(held)
    out = [p.strip().replace(_DOT_HOLD, ".") for p in parts if p and p.strip()]
    return [p for p in out if not re.fullmatch(r"[\W_]+", p)]


_EN_AND_I_RE = re.compile(
    # Chat writes the pronoun in lower case and drops the apostrophe ("and im bored", "and ive got"). "My wife and I
    # are moving" is one subject: "I" before a plural verb is no new clause, but "my wife and I" starts one.
    r"(?<!\s)\s+and\s+(?=(?:I|i)\s+(?!are\b|were\b|have\b|'ve\b|both\b)|(?:I'm|i'm|im|I've|i've|ive|I'd|I'll|we|we're|we've"
    r"|she's|he's|they're)\b|(?:my|our) \w+ and (?:I|i)\b"
    # "I run a bakery and want a formula": the same subject goes on to ask for something
    r"|(?:want|need|would like|am looking for|was wondering)\b"
    # "took up bouldering and my forearms are wrecked today": a second subject with its own verb
    r"|my \w+(?: \w+)? (?:is|are|was|were|has|have|had|hasn't|haven't|isn't|aren't|keeps?|won't|can't|feels?"
    # "… every day and my bag got soaked this morning": any past or auxiliary verb starts the second statement
    r"|got|gets|did|does|do|will|would|could|just|\w{2,}ed)\b)"
)


_EN_SHORT_STATEMENT_RE = re.compile(r"^(?:I'm|i'm|im|I am|i am)\s+\w+\s*$")


def _split_and_i(piece: str) -> list[str]:
    """ "I write Python and I prefer Polars" holds two statements; "my wife and I hike" holds one."""
    m = _EN_AND_I_RE.search(piece)
    # Fewer than three words before are a subject of their own ("my dad and my mom are"), unless they are a whole
    # statement already ("I'm diabetic and my wife is vegan").
    if m is None or (len(piece[: m.start()].split()) < 3 and not _EN_SHORT_STATEMENT_RE.match(piece[: m.start()])):
        return [piece]
    return [piece[: m.start()], *_split_and_i(piece[m.end() :])]


EN_TIME_LEADS = r"ever since|since|after|once"
"""Words that open a fronted time clause ("ever since the move to Leeds …"): here they end a clause, and the
distiller reads such a clause as the change it reports (pipeline.extract._as_event)."""
_EN_FRONTED_LEAD_RE = re.compile(rf"^(?:{EN_TIME_LEADS}|now that)\s+(?!when\b)", re.I)
_EN_SUBJECT_RE = re.compile(r"\s(?=(?:I|i|I'm|i'm|im|I've|i've|ive|I'd|i'd|my|we|we're|we've|our)\s)")
_EN_LEADS_ON_TEXT = "from to into onto with of for in at on by about like than and or the a an"
_EN_LEADS_ON = frozenset(_EN_LEADS_ON_TEXT.split())
"""Words after which a pronoun is an object, not the next subject ("after the move from my old PaaS …")."""


def _split_fronted(piece: str) -> list[str]:
    """A fronted time or reason clause without its comma ("Ever since the move to Leeds my commute is…", "Now that
    I'm at Monzo I have to…", "After transferring to Edinburgh I lost…") ends where the main clause's subject
    starts: the first "I"/"my"/"we" after two or more words that does not follow a preposition."""
    lead = _EN_FRONTED_LEAD_RE.match(piece)
    if lead is None:
        return [piece]
    for m in _EN_SUBJECT_RE.finditer(piece, lead.end()):
        words = piece[lead.end() : m.start()].split()
        if len(words) > 10:
            break
        if len(words) >= 2 and words[-1].lower() not in _EN_LEADS_ON:
            return [piece[: m.start()], piece[m.end() :].strip()]
    return [piece]


_EN_WH_RE = re.compile(r"^(?:what|whats|what's|how|where|when|which|who|why|is there|are there|any)\b", re.I)
_EN_OWN_SUBJECT_RE = re.compile(r"\s(?=(?:im|i'm|I'm|i am|I am|ive|i've|I've|my|My|we're|we've|our)\s)")
_EN_ASKS_ON_TEXT = (
    "is are was were do does did can could should would will be get give tell show help make let know think "
    "that if whether"
)
_EN_ASKS_ON = _EN_LEADS_ON | frozenset(_EN_ASKS_ON_TEXT.split())
"""Words after which "my"/"I'm" still belongs to the question ("what is my …", "how do I get my …")."""


def _split_run_on(piece: str) -> list[str]:
    """A question typed without its question mark runs on into a statement ("whats a good marinade for salmon im
    pescatarian", "how do I fix this im on windows"): the statement starts at its own subject."""
    if _EN_WH_RE.match(piece) is None:
        return [piece]
    for m in _EN_OWN_SUBJECT_RE.finditer(piece):
        words = piece[: m.start()].split()
        if len(words) >= 3 and words[-1].lower() not in _EN_ASKS_ON:
            return [piece[: m.start()], piece[m.end() :].strip()]
    return [piece]


_EN_SO_RE = re.compile(r"(?<!\s)\s+so\s+(?=[A-Za-z])")
_SO_DEGREE_BEFORE_TEXT = (
    "i'm im am is are was were be been being it's its that's feel feels feeling felt look looks looked seem seems "
    "seemed get gets got getting become became not just"
)
_SO_DEGREE_BEFORE = frozenset(_SO_DEGREE_BEFORE_TEXT.split())
"""After these, "so" is a degree word ("I'm so tired", "it's been so long", "feel so much better"), no conjunction."""
_SO_DEGREE_AFTER_TEXT = (
    "much many far long often well little few that very too good bad hard fast happy sad glad tired busy excited "
    "sorry cute nice great bored stressed annoyed sure"
)
_SO_DEGREE_AFTER = frozenset(_SO_DEGREE_AFTER_TEXT.split())
"""Before these, "so" is a degree word or a purpose ("love it so much", "so that"), no new clause."""


def _split_so(piece: str) -> list[str]:
    """ "im pescatarian so fish is my main protein", "I do 3D rendering for work so render times cost me money": "so"
    without a comma still joins two statements, the second a consequence; only the first may be the fact."""
    for m in _EN_SO_RE.finditer(piece):
        before, after = piece[: m.start()].split(), piece[m.end() :].split()
        if (
            len(before) >= 2
            and len(after) >= 2
            and before[-1].lower() not in _SO_DEGREE_BEFORE
            and after[0].lower().strip(",.") not in _SO_DEGREE_AFTER
        ):
            return [piece[: m.start()], *_split_so(piece[m.end() :])]
    return [piece]


def split_clauses(text: str) -> list[str]:
    """Split one sentence into clauses (Chinese commas/colons, English clause boundaries)."""
    out: list[str] = []
    for whole in split_sentences(text):
        sent = _BRACKETED_RE.sub(_hide_commas, whole)
        pieces = _ZH_CLAUSE_RE.split(sent) if has_cjk(sent) else _EN_CLAUSE_RE.split(sent)
        if not has_cjk(sent):
            # Chat English leaves out the commas: a fronted time clause, a question without its mark, "and I …"
            # and "so …" still end a clause (each step splits what the one before left).
            pieces = [*_split_fronted(pieces[0]), *pieces[1:]]
            for split in (_split_run_on, _split_and_i, _split_so):
                pieces = [p for piece in pieces for p in split(piece)]
        frame = ""  # a Chinese clause of time ("我上大学的时候") is the frame of the next one, no statement itself
        for piece in pieces:
            piece = piece.translate(_SHOWN_COMMAS).strip(" \t,，、;；。.!！")
            if piece and not re.fullmatch(r"[\W_]+", piece):
                if frame:
                    piece, frame = f"{frame}，{piece}", ""
                if _ZH_FRAME_END_RE.search(piece):
                    frame = piece
                    continue
                out.append(piece)
        if frame:
            out.append(frame)
    return out


_ZH_FRAME_END_RE = re.compile(r"(?:时候|那会儿?|那阵子?|期间)$")
"""A Chinese clause that ends as a time ("出差的时候", "读书那会儿", "装修期间") says when the next one holds:
alone it is a fragment ("用户出差的时候"), and what it frames is no longer true of now without it."""


_BRACKETED_RE = re.compile(r"[（(][^（）()]{1,40}[）)]")
_HIDE_COMMAS = str.maketrans("，,、", "\x00\x01\x02")
_SHOWN_COMMAS = str.maketrans("\x00\x01\x02", "，,、")


def _hide_commas(m: re.Match[str]) -> str:
    """A comma inside brackets ends no clause ("我家年糕（蓝猫，两岁）最近掉毛"): hidden while the sentence is split."""
    return m.group(0).translate(_HIDE_COMMAS)


# --- negation ----------------------------------------------------------------------------------------

_ZH_NEG_RE = re.compile(r"不再|不|没有|没|别|非|无|未|从不|从没|戒了|戒掉|停了")
# 不错/不少/不管/无论/非常/别人/没想到 are not negations of the statement, nor the words that hold 别, 未, 无 or 非
# without denying anything: 特别 ("我特别喜欢画画"), 分别, 区别, 未来, 无线, 非洲.
_ZH_NEG_FALSE = re.compile(
    r"不错|不少|不管|不仅|不过(?!敏)|不但|差不多|不好意思|无论|非常|并非常|别人|别的|无聊|没想到|了不起|不得不|"
    r"特别|分别|区别|差别|告别|离别|类别|级别|个别|性别|识别|辨别|鉴别|别墅|别致|别针|"
    r"未来|无线|无人机|非洲|南非|是非"
)
_EN_NEG_RE = re.compile(
    r"\b(?:not|no longer|never|don't|doesn't|didn't|isn't|aren't|wasn't|won't|can't|cannot|"
    r"haven't|hasn't|no|none|nothing|nor|without|stopped|quit|avoid|avoids)\b",
    re.I,
)
_EN_NEG_FALSE = re.compile(r"\bnot only\b|\bno problem\b|\bno worries\b|\bno doubt\b", re.I)


def is_negated(text: str) -> bool:
    """Whether the statement denies/excludes something ("不过敏", "no longer use", "don't drink")."""
    t = normalize(text)
    zh = _ZH_NEG_FALSE.sub("", t)
    if _ZH_NEG_RE.search(zh):
        return True
    en = _EN_NEG_FALSE.sub("", t.replace("’", "'"))
    return bool(_EN_NEG_RE.search(en))


_CONTRAST_TAIL_RE = re.compile(r"[,，]\s*(?:not|never|rather than|instead of)\b.*$|[,，]\s*(?:而不是|不是|不要|别).*$")


def core_negated(text: str) -> bool:
    """Negated unless the only negation is a contrastive tail ("X now, not Y anymore", "要 X，不要 Y")."""
    t = normalize(text)
    core = _CONTRAST_TAIL_RE.sub("", t)
    return is_negated(core or t)


# --- numbers and versions -----------------------------------------------------------------------------

_ZH_DIGITS = {
    "零": 0,
    "〇": 0,
    "一": 1,
    "二": 2,
    "两": 2,
    "三": 3,
    "四": 4,
    "五": 5,
    "六": 6,
    "七": 7,
    "八": 8,
    "九": 9,
}
# Entered at the start of a numeral run only (the look-behind): tried from each of its positions, a long run
# with no unit after it was rescanned from each (quadratic: 4,000 numerals took 0.13 s). The greedy match
# from the run's start is the longest with a unit after it, so no later start in the run could match.
_ZH_NUM_RE = re.compile(
    r"(?<![零〇一二两三四五六七八九十百千])"
    r"[零〇一二两三四五六七八九十百千]+(?=[个点月号日年周天次岁公里分钟小时块元万千百倍层栋名人家台])"
)
_VERSION_RE = re.compile(r"(?<![\w.])v?(\d+(?:\.\d+)+)(?![\w.])|(?<![\w.])(\d+)(?![\d])")


def zh_numeral_to_int(s: str) -> int | None:
    """Small Chinese numerals (up to the thousands): 三→3, 十五→15, 二十→20, 一百二→120."""
    total, section, current = 0, 0, 0
    units = {"十": 10, "百": 100, "千": 1000}
    if not s:
        return None
    for ch in s:
        if ch in _ZH_DIGITS:
            current = _ZH_DIGITS[ch]
        elif ch in units:
            section += (current or 1) * units[ch]
            current = 0
        else:
            return None
    if s[-1] == "百" or s[-1] == "千" or s[-1] == "十":
        return total + section
    # 一百二 means 120: a trailing digit after 百 counts tens.
    if len(s) >= 2 and s[-2] == "百" and current:
        return total + section + current * 10
    return total + section + current


def _canon_number(raw: str) -> str:
    raw = raw.lstrip("vV")
    if "." in raw:
        # 8.0 and 8 name the same major version; 15.4 stays 15.4.
        parts = raw.split(".")
        while len(parts) > 1 and parts[-1].strip("0") == "":
            parts.pop()
        return ".".join(str(int(p)) if p.isdigit() else p for p in parts)
    return str(int(raw)) if raw.isdigit() else raw


def extract_numbers(text: str) -> set[str]:
    """Numbers and versions in canonical form: "MySQL 8.0"→{"8"}, "5 公里"→{"5"}, "三月"→{"3"}."""
    t = normalize(text)
    out: set[str] = set()
    for m in _VERSION_RE.finditer(t):
        raw = m.group(1) or m.group(2)
        if raw:
            out.add(_canon_number(raw))
    for m in _ZH_NUM_RE.finditer(t):
        n = zh_numeral_to_int(m.group(0))
        if n is not None:
            out.add(str(n))
    return out


# A name starts after a non-letter (a start right after a letter could always have begun one letter earlier)
# and is at most 64 characters: unbounded, every letter of a long run with no version after it rescanned the
# rest of the run (quadratic: 4,000 "v" took 0.58 s). Linear now; only a >64-character "name" differs.
_PRODUCT_VERSION_RE = re.compile(r"(?<![A-Za-z])([A-Za-z][A-Za-z0-9+#.\-]{0,63})\s?v?(\d+(?:\.\d+)*)\b")


def extract_versions(text: str) -> dict[str, str]:
    """Product → version pairs ("PostgreSQL 15", "MySQL 8.0", "Python3.12"), product lower-cased."""
    out: dict[str, str] = {}
    for m in _PRODUCT_VERSION_RE.finditer(normalize(text)):
        name = m.group(1).rstrip(".-").lower()
        if len(name) >= 2 and not name.isdigit():
            out[name] = _canon_number(m.group(2))
    return out


def numbers_conflict(a: str, b: str) -> bool:
    """True when both texts carry numbers and each has one the other lacks (5.7 vs 8.0, 3 次 vs 5 次).

    A text that only adds numbers to the other (prefers PostgreSQL → PostgreSQL 15) is a refinement.
    """
    na, nb = extract_numbers(a), extract_numbers(b)
    return bool(na - nb) and bool(nb - na)


# --- change of state -----------------------------------------------------------------------------------

_ZH_CHANGE = (
    "升级到",
    "升级成",
    "升到",
    "换成",
    "换到",
    "换了",
    "改成",
    "改为",
    "改用",
    "改到",
    "搬到",
    "搬去",
    "搬来",
    "搬过来",
    "搬回",
    "搬家",
    "转到",
    "转成",
    "迁到",
    "迁移到",
    "跳槽",
    "换工作",
    "换了工作",
    "换了份工作",
    "换了个工作",
    "入职",
    "报到",
    "不再",
    "已经不",
    "再也不",
    "没再",
    "再没",
    "结婚了",
    "离婚了",
    "分手了",
    "扔了",
    "荒废了",
    "不用了",
    "戒了",
    "戒掉",
    "离职",
    "辞职",
    "调到",
    "调去",
    "调了",
    "现在改",
    "现在换",
    "以前是",
    "之前是",
    "切换到",
    "转岗",
    "转行",
    "现在已经",
    "已经开始",
    "现在开始",
    "卸了",
    "卸载了",
    "删了",
    "删掉了",
    "卖了",
    "卖掉了",
    "扔掉了",
    "退掉了",
    "卸掉了",
    "送人了",
    "去世",
    "离世",
    "病逝",
    "老死了",
    "病死了",
    "安乐死",
    "过世",
    "毕业了",
    "被裁",
    "被辞退",
    "被开除",
    "被解雇",
    "被炒鱿鱼",
    "失业了",
    "下岗了",
    "退休了",
)
RECORD_WRONG_RE = re.compile(
    r"记错了|搞错了|弄错了|记混了|\byou(?:'ve| have)? got (?:it|that|this|me) wrong\b|\byou misremembered\b|"
    r"\byou(?:'re| are) mixing (?:it|me|that) up\b",
    re.I,
)
"""The user says the assistant's record of them is wrong: the statement that follows replaces what it held."""
# 改 + a verb is "switched to doing" ("改学韩语", "改喝豆浆", "改骑车上班"); not 改善, 改进, 修改, 改天.
_ZH_SWITCH_VERB_RE = re.compile(
    r"(?<![修更批篡])改(?:学|喝|吃|练|骑|开|养|玩|看|读|坐|听|打|跑|住|穿|抽|考|做|走|去|游|滑|爬|弹|种|戴|睡|租|买)"
    # a new job begun or found ("开始了新的生活教练工作", "找到新工作了"); not one needed or looked for ("想找新工作")
    r"|(?:开始了?|入职了?|换了|有了|找到了?)新的?[\u4e00-\u9fffA-Za-z]{0,8}(?:工作|岗位|职位)"
    # a marriage registered ("上个月刚领的证")
    r"|领(?:了|的)?(?:结婚)?证"
    # the same changes said as when they were done, 是…的 splitting the verb from its object ("去年搬的家",
    # "三月份入的职", "上周分的手") or following a time ("三月份换的组", "年初卖的车")
    r"|[搬入离辞结分跳转]的[家职婚手槽行岗]"
    r"|(?<!每)(?:年|月|份|周|天|礼拜|星期[一二三四五六日天]?|前|底|初)(?:才|刚|就|刚刚)?(?:换|卖|戒|辞|退|搬|删|卸)的"
    # a role taken up ("这个月开始正式当组长了"), a partner left ("跟小雨分了"), something put down for good
    # ("日语早就放下了")
    r"|开始(?:正式)?(?:当|担任)|(?:跟|和|与)[\u4e00-\u9fffA-Za-z]{1,4}分了|(?:已经|早就?|都)放下了"
    # something stopped for good ("跑步也停了", "健身早就停了"); not "雨停了", "车停了" (a moment, a place)
    r"|(?:也|都|早就?|已经|彻底|就这么)停了|停掉了"
)
# Then and now set against each other ("以前不吃榴莲，现在觉得挺好吃", "之前是素食者，后来又开始吃肉了"): what held
# before no longer does. Not when the now goes on as before ("以前喜欢，现在也喜欢", "现在还在").
_ZH_THEN_NOW_RE = re.compile(
    r"(?:以前|之前|过去|原先|从前|早先)[^。！？!?]{0,40}?(?:现在|如今|这几年|后来)(?!也|还|都|仍|依然|一直)"
)
# "雅思不考了", "咖啡不喝了": 不 + a verb + 了 ends a habit or a plan (no longer). Not "不错了", "不行了" (a state).
_ZH_NO_LONGER_RE = re.compile(r"不(?!错|行|好|对|了|知|会|够|要|太|是)[\u4e00-\u9fff]{1,2}了")
_EN_CHANGE_RE = re.compile(
    r"\b(?:switched|switching|moved|moving|migrated|migrating|upgraded|changed|converted|relocat(?:ed|ing|e)) "
    r"(?:to|over|from|off|onto)\b|"
    # with what moved between ("switched everything over to a Mac", "moved our infra to GCP"); not "moved my
    # appointment to Friday": one's own things move for a day, a whole setup moves for good
    r"\b(?:switched|switching|moved|moving|migrated|migrating) (?:everything|it all|all of (?:it|them|our \w+)|"
    r"our (?:\w+ )?\w+|the (?:whole|entire) \w+|us) (?:over )?(?:to|onto)\b|"
    # out of one thing, into another ("moved everything out of Notion", "migrated it all into Obsidian", "moved out
    # of my parents' place", "moving into a flat in Bath")
    r"\b(?:switched|switching|moved|moving|migrated|migrating)"
    r"(?: (?:everything|it all|all of (?:it|them|my \w+|our \w+)|our (?:\w+ )?\w+|the (?:whole|entire) \w+|us))?"
    r"(?: over)? (?:out of|into)\b|"
    r"\b(?:start|starting) (?:at|as|a new)\b|\bjoining\b|"
    r"\bno longer\b|\bnot anymore\b|\banymore\b|\bnow use\b|\bthese days\b|\bnowadays\b|"
    r"\b(?:changed|switched) jobs\b|"
    r"(?<!from )\bnow on\b|\bnow i\b|\bi'm now\b|\bnow work\b|"
    r"\bstarted at\b|\bjoined\b|\bnew job\b|\bnew role\b|\bstopped\b|\bquit\b|\bused to\b|\bagain\b|"
    r"\binstead of\b|\breplaced\b|\bgave up\b|\bnot \w+ any ?more\b|\bchanged my mind\b|"
    # The present perfect of a change ("I've gone vegan", "we have relocated"), "I now …", and a habit or plan that
    # did not last ("keto didn't stick"). Not "I've become …" or "I've taken up …": a new interest joins the old
    # ones (measured: as cues they retired memories of everyday chat that still held).
    r"\b(?:have|has|'ve|'s) (?:gone|transferred|relocated|given up|left|sold)\b|\b(?:i|we) now\b|"
    r"\b(?:didn't|did not|never) (?:stick|last|work out)\b|\bon hold\b|\b(?:broke|split) up\b|\bgot divorced\b|"
    # A state that began at a time ("been vegan since March", "we've lived in Lisbon since June") replaced another.
    r"\b(?:been|lived|living|worked|working)\b[^.,;!?]{1,40}?\bsince\b|"
    # Something given up ("dropped Spanish", "ditched Notion", "spanish just kind of fell off"); not a measure that
    # fell ("revenue dropped 12%", "dropped to 3 signups").
    r"\b(?:dropped(?!\s+(?:to|by|from|off|below|under|\d))|ditched|shelved|scrapped)\b|"
    r"\bfell (?:off|away|by the wayside)\b|\b(?:passed away|died)\b|"
    # something owned that is gone ("sold the civic", "got rid of the car", "gave my bike away")
    r"\bgraduated\b|\bsold (?:my|our|the)\b|\bgot rid of\b|\bgave away (?:my|our|the)\b|\buninstalled\b"
    # an animal found a new home ("we rehomed the fish", "had to rehome the cat"); a service or an account ended
    # ("cancelled my gym membership", "closed my chase account", "unsubscribed from netflix"); not a meeting or a
    # reservation cancelled, not "need to unsubscribe from newsletters" (not done)
    r"|\bre-?homed\b|\bhad to re-?home\b|\bunsubscribed\b|\bdeactivated (?:my|our)\b"
    r"|\b(?:cancell?ed|closed|deleted|terminated) (?:my|our) (?:[\w-]+ ){0,2}"
    r"(?:subscription|membership|account|plan|contract|policy)s?\b"
    # an animal put down ("we had to put biscuit down", "had to have her put to sleep"); not "put the kids to sleep",
    # "had to put my foot down", "had to calm down"
    r"|\bhad to put (?!(?:my|his|her|our|their) foot\b)(?:\w+ ){1,3}(?:down|to sleep)\b"
    r"|\bhad to have (?:\w+ ){1,2}put (?:down|to sleep)\b"
    r"|\bgave (?:my|our|the) [\w -]{1,24}? away\b|"
    # a marriage, an engagement; losing someone named ("we lost Biscuit in March")
    r"\bgot (?:married|engaged|hitched)\b|\b(?:i|we) lost (?:my |our )?(?-i:[A-Z])\w+|"
    # a job that ended ("got laid off", "was let go", "lost my job", "retired last year")
    r"\b(?:got|was|been|being) (?:laid off|let go|fired(?! up)|made redundant)\b|\blost (?:my|her|his|their) job\b|"
    r"\bretired\b",
    re.I,
)
# A present state said with a closing "now" ("I'm retired now", "we live in Porto now"). Not "right now" or "for
# now" (for the moment), not a duration ("for a few years now"), not "I have to go now" (leaving), not "we can start
# now". Three linear searches: one pattern with two tempered runs was quadratic (4,000 characters took a second).
_CLOSING_NOW_RE = re.compile(r"(?<!\bright )(?<!\bjust )\bnow(?:\s+(?:lol|haha|tbh|though|actually))?\W*$", re.I)
_NOW_SUBJECT_RE = re.compile(r"\b(?:i'm|im|i am|we're|we are|i|we|it's)\b", re.I)
_NOT_NOW_STATE_RE = re.compile(
    r"\bfor\b|\bhave to\b|\bgotta\b|\bneed to\b|\b(?:can|will|should|could|must|let's)\b|'ll\b", re.I
)


_PART_END_RE = re.compile(r"\s*[,;，；]\s*")


def _closing_now(text: str) -> bool:
    """A part of the text (up to a comma or a semicolon) that closes with "now": a fact's words often run on past
    it ("i host on hetzner now, heroku got too expensive")."""
    for part in _PART_END_RE.split(text):
        now = _CLOSING_NOW_RE.search(part)
        if (
            now is not None
            and _NOW_SUBJECT_RE.search(part, 0, now.start()) is not None
            and _NOT_NOW_STATE_RE.search(part, 0, now.start()) is None
        ):
            return True
    return False


CORRECTION_RE = re.compile(r"其实|原来|\bafter all\b|\bturns? out\b|\bturned out\b|\bactually\b", re.I)
"""A clause that corrects a belief ("其实不过敏", "turns out I'm not allergic after all")."""


def has_change_cue(text: str) -> bool:
    """A change of state makes an older value wrong ("升级到", "搬到", "不再", "switched to", "no longer")."""
    t = normalize(text)
    return any(c in t for c in _ZH_CHANGE) or bool(
        _ZH_NO_LONGER_RE.search(t)
        or _ZH_SWITCH_VERB_RE.search(t)
        or _ZH_THEN_NOW_RE.search(t)
        or _EN_CHANGE_RE.search(t)
        or RECORD_WRONG_RE.search(t)
        or _closing_now(t)
    )


# --- confirmation / rejection --------------------------------------------------------------------------

_ZH_CONFIRM_RE = re.compile(
    r"^(?:是的|是啊|是呀|对的|对啊|对呀|对|没错|正是|确实|嗯对|嗯，对|就是|没错儿|是)(?:[，,。!！\s]|$)"
)
_ZH_REJECT_RE = re.compile(r"^(?:哈哈\S*\s*)?(?:不是|不对|没有|并不|其实不|错了|不，|不,)|^其实")
_EN_CONFIRM_RE = re.compile(
    r"^(?:yes|yeah|yep|yup|right|correct|exactly|indeed|that's (?:it|right|correct)|you got it|spot on)\b",
    re.I,
)
_EN_REJECT_RE = re.compile(
    r"^(?:no\b|nope\b|nah\b|not really\b|actually\b|not quite\b|wrong\b|that's not\b|i'm not\b|it's not\b)|"
    # The gap stops at the next "not a(n)": with `.*` each opener rescanned the rest of the line (quadratic:
    # 4,000 chars of "not a " took 53 ms). Used only as a yes/no test, where the two agree.
    r"\b(?:not a|not an)\b(?:(?!\bnot an?\b).)*\b(?:lol|haha)\b",
    re.I,
)


def reply_kind(text: str) -> Reply | None:
    """Is this turn confirming or rejecting what was just said to the user?"""
    t = normalize(text).lstrip("\"'“ ")
    if _ZH_REJECT_RE.search(t) or _EN_REJECT_RE.search(t):
        return "reject"
    if _ZH_CONFIRM_RE.search(t) or _EN_CONFIRM_RE.search(t):
        return "confirm"
    return None


# --- tokens ---------------------------------------------------------------------------------------------

_WORD_RE = re.compile(r"[A-Za-z][A-Za-z0-9+#.\-]*[A-Za-z0-9+#]|[A-Za-z]|\d+(?:\.\d+)*")
_EN_STOP = frozenset(
    [
        "a",
        "an",
        "the",
        "and",
        "or",
        "but",
        "of",
        "to",
        "in",
        "on",
        "at",
        "for",
        "with",
        "by",
        "from",
        "is",
        "are",
        "was",
        "were",
        "be",
        "been",
        "am",
        "i",
        "me",
        "my",
        "we",
        "our",
        "you",
        "your",
        "user",
        "user's",
        "he",
        "she",
        "it",
        "they",
        "them",
        "his",
        "her",
        "its",
        "their",
        "this",
        "that",
        "these",
        "those",
        "have",
        "has",
        "had",
        "do",
        "does",
        "did",
        "not",
        "no",
        "so",
        "as",
        "very",
        "really",
        "just",
        "also",
        "still",
        "now",
        "then",
        "than",
        "too",
        "much",
        "more",
        "most",
        "some",
        "any",
        "all",
        "about",
        "into",
        "over",
        "after",
        "before",
        "there",
        "here",
        "what",
        "which",
        "who",
        "whom",
        "when",
        "where",
        "why",
        "how",
        "will",
        "would",
        "can",
        "could",
        "should",
        "may",
        "might",
        "must",
    ]
)
_ZH_STOP = frozenset(
    [
        "用户",
        "的",
        "了",
        "是",
        "在",
        "我",
        "我们",
        "他",
        "她",
        "它",
        "你",
        "和",
        "与",
        "也",
        "都",
        "就",
        "还",
        "很",
        "有",
        "这",
        "那",
        "个",
        "一",
        "把",
        "被",
        "给",
        "着",
        "过",
        "吧",
        "呢",
        "吗",
        "啊",
    ]
)


POS_RUN_CACHE = 8192
"""Runs of characters whose part-of-speech tags `pos_cut` remembers (short strings: a few hundred KB at most)."""


@lru_cache(maxsize=1)
def _pos_tokenizer() -> Any:
    """jieba's part-of-speech tokenizer, remembering how it tagged each run of characters its dictionary does not
    cut into words. That run goes through an HMM in pure Python, most of jieba's time, and the same short runs
    ("我很", "了吗", "我的") come up in turn after turn. Its dictionary and tag table are jieba's default ones, so
    it cuts and tags as `jieba.posseg.lcut` does (a test holds the two equal)."""
    import jieba.posseg as pseg

    class Remembering(pseg.POSTokenizer):
        def __init__(self) -> None:  # jieba's own tokenizer and tag table, not a second copy
            self.tokenizer = pseg.dt.tokenizer
            self.word_tag_tab = pseg.dt.word_tag_tab
            self._tag_run = lru_cache(maxsize=POS_RUN_CACHE)(self._tagged_run)

        def _tagged_run(self, run: str) -> tuple[Any, ...]:
            return tuple(pseg.POSTokenizer._POSTokenizer__cut_detail(self, run))

        # the name jieba's cut calls for such a run (a private method, mangled: jieba 0.42 has had it since 0.36)
        def _POSTokenizer__cut_detail(self, run: str) -> Any:
            return iter(self._tag_run(run))

    return Remembering()


def pos_cut(text: str) -> list[Any]:
    """jieba's words of `text` with their part-of-speech flags (`jieba.posseg.lcut`), faster on chat. The pairs of a
    remembered run are shared between calls: read them, never change them."""
    return list(_pos_tokenizer().cut(text))


def content_tokens(text: str) -> set[str]:
    """Lower-cased content words (jieba for Chinese), used for overlap checks when no embedding is at hand."""
    t = normalize(text).lower()
    out = {w for w in _WORD_RE.findall(t) if w not in _EN_STOP}
    if has_cjk(t):
        import jieba

        for w in jieba.lcut(t):
            w = w.strip()
            if w and has_cjk(w) and w not in _ZH_STOP:
                out.add(w)
    return out


# --- quoted material -------------------------------------------------------------------------------------
# What a speaker SHOWS (a pasted e-mail, a forwarded message, a quoted text, "she wrote: …") is not what the
# speaker SAYS: it is material, like a tool's output, and may carry instructions written by somebody else.
# Every pattern below is anchored or bounded, and the quote scanner is one pass: linear on any input.

_QUOTE_PAIRS = {"“": "”", "「": "」", "『": "』", "«": "»", "‘": "’", '"': '"', "'": "'"}
_HEADER_RE = re.compile(
    r"(?:from|to|cc|bcc|subject|sent|date|reply-to|发件人|收件人|抄送|主题|发送时间|日期)[ \t]{0,3}[:：]", re.I
)
_FROM_HEADER_RE = re.compile(r"(?:from|发件人)[ \t]{0,3}[:：]", re.I)
_FORWARD_MARK_RE = re.compile(
    r"-{2,}[ \t]{0,5}(?:original message|forwarded message)|begin forwarded message|"
    r"-{2,}[ \t]{0,5}(?:转发|原始邮件)|转发的邮件|原始邮件[:：]|以下为转发",
    re.I,
)
# A medium as the speaker needs no colon ("the notice says to …", "it says"); a person does ("my landlord
# texted:", "Sarah replied:"), since "he said I'm right" reports what he meant rather than showing his words.
_EN_CUE_RE = re.compile(
    r"\b(?:e-?mail|message|text|txt|sms|letter|note|notice|memo|invoice|page|website|site|post|dm|voicemail|"
    r"screenshot|document|form|notification|alert|it)s? (?:says|said|reads|read|states|stated|wrote|writes)\b"
    r"(?: (?:that|to))?[ \t]{0,3}[:,]?"
    r"|\b(?:she|he|they|someone|somebody|(?:my|our|his|her|their|the|a) [\w-]{1,20}(?: [\w-]{1,20})?|"
    r"(?-i:[A-Z][a-z]{1,20})) (?:wrote|writes|said|says|texted|texts|e-?mailed|messaged|replied|posted|sent(?: me)?|"
    r"told me|forwarded(?: me)?)(?: me| us| back| this)?[ \t]{0,3}:",
    re.I,
)
_ZH_CUE_RE = re.compile(
    r"(?:邮件|电邮|短信|消息|信息|微信|通知|来信|信|公告|网页|页面|群|留言|截图|文件)(?:里面|上面|里|上|中)?"
    r"(?:说|写道|写着|写的是|称|提到|要求)[:：，,]?"
    r"|(?:他|她|他们|她们|对方|人家|[\u4e00-\u9fff]{0,3}(?:老板|经理|房东|同事|朋友|客户|领导|老师|银行|客服|主管|"
    r"总监|财务|妈|爸|老婆|老公))(?:发来|回复|留言|说|写道|写|转发)(?:了|的是|道)?[:：]"
    r"|原文如下[:：]?|转发(?:的|了)?(?:邮件|消息|短信|内容)?[:：]"
)
# A line of a chat log pasted or forwarded into the turn: a speaker's label at the start of the line, in a chat app's
# export form: "[Auntie May]: …", "[09:14] Sam: …", "<kev> …", "12/03/2024, 21:07 - Dana: …". What follows is that
# person's message. A bracketed label needs its colon: "[Help] my cat …" and "【求助】…" tag the speaker's own post.
# Not the speaker's own notes and headings ("[edit]: …", "[update]: …", "[Context]: …", "[Me]: …"), a redaction
# marker ("[REDACTED:api_key]"), a checkbox ("[x] …"), a footnote ("[1] …") or a markdown link ("[docs](…)",
# "[docs]: https://…").
_CHAT_LABEL_RE = re.compile(
    r"[ \t]*(?:"
    r"\[(?!(?:edit|update|ps|p\.s\.|note|tl;?dr|eta|redacted|context|background|question|answer|info|details?"
    r"|summary|goal|task|request|problem|issue|me|user)\b)(?=[^\]\n]*[A-Za-z\u4e00-\u9fff])[^\]\n\[]{2,40}\]"
    r"(?!\()[ \t]*(?:[^\s:：\[\]()][^:：\n\[\]]{0,40})?[:：]"
    r"|\[[\d/.,:\- ]{4,25}(?:[AaPp][Mm])?\][ \t]*[^\s:：\[\]][^:：\n\[\]]{0,40}[:：]"
    r"|<[A-Za-z][\w.\-]{0,30}>(?=[ \t])"
    r"|\d{1,4}[/.\-]\d{1,2}[/.\-]\d{2,4},?[ \t]+\d{1,2}:\d{2}(?:[ \t]?[AaPp][Mm])?[ \t]*[-–][ \t]*[^:：\n]{1,40}[:：]"
    r")[ \t]*(?!https?://)\S",
    re.I,
)
_NAMING_RE = re.compile(r"(?:called|named|titled|entitled|叫做?|名为|名叫|取名|称为)[ \t]{0,3}$", re.I)
_QUESTION_END_RE = re.compile(r"[?？][\s\"'”’」』)）]*$")
_SENTENCE_RE = re.compile(r"[^.!?。！？\n]+[.!?。！？]*")
_SENTENCE_END_RE = re.compile(r"[.!?。！？]")


class QuotedSplit:
    """A turn cut into what the speaker says (`own`) and what the speaker shows (`quoted`)."""

    def __init__(self, own: str, quoted: list[str]) -> None:
        self.own = own
        """The speaker's words; each piece of quoted material is replaced by a line break (a sentence end)."""
        self.quoted = quoted
        """The quoted spans, `>` lines, pasted or forwarded messages and reported speech, in order."""


def speech_cue(text: str) -> re.Match[str] | None:
    """The first reported-speech cue in `text` ("the e-mail says", "my boss wrote:", "邮件里说", "原文如下：")."""
    for pattern in (_EN_CUE_RE, _ZH_CUE_RE):
        m = pattern.search(text)
        if m is not None:
            return m
    return None


def _follows_cue(before: str) -> bool:
    """Whether a quote opens right after a cue or a colon: then a quote of any length is material."""
    tail = before[-60:].rstrip(" \t")
    if tail.endswith((":", "：")):
        return True
    m = speech_cue(tail)
    return m is not None and not tail[m.end() :].strip(" ,，:：")


def _speech_like(content: str, single: bool) -> bool:
    """A long quoted span reads as somebody's sentence; a short one, or a title ("Let It Go"), is a name."""
    cjk = len(_CJK_RE.findall(content))
    if cjk:
        return cjk >= 10
    words = content.split()
    if len(words) < (6 if single else 5):
        return False
    capitalised = [w for w in words if w[:1].isalpha() and len(w) > 3]
    return not capitalised or sum(w[0].isupper() for w in capitalised) / len(capitalised) < 0.7


def _opens_quote(text: str, i: int) -> bool:
    ch = text[i]
    if ch == "’":
        return False  # a closing mark or an apostrophe
    if ch == "'":  # an apostrophe ("don't", "users'") or a stray mark cannot open a quote
        return not (i > 0 and text[i - 1].isalnum()) and i + 1 < len(text) and not text[i + 1].isspace()
    return ch in _QUOTE_PAIRS


def _quote_spans(text: str) -> list[tuple[int, int]]:
    """Quoted sentences: spans in quotation marks that read as speech, or that follow a cue or a colon.

    One left-to-right pass with one open quote at a time; a blank line abandons an unclosed quote.
    """
    spans: list[tuple[int, int]] = []
    start, closer = -1, ""
    n = len(text)
    for i, ch in enumerate(text):
        if start < 0:
            if _opens_quote(text, i):
                start, closer = i, _QUOTE_PAIRS[ch]
            continue
        if ch == "\n" and i + 1 < n and text[i + 1] == "\n":
            start, closer = -1, ""
        elif ch == closer and not (closer in "'’" and i + 1 < n and text[i + 1].isalnum()):
            shown = _speech_like(text[start + 1 : i], closer in "'’") or _follows_cue(text[max(0, start - 60) : start])
            if shown and not _NAMING_RE.search(text[max(0, start - 20) : start]):
                spans.append((start, i + 1))
            start, closer = -1, ""
    return spans


def _lines(text: str) -> list[tuple[int, int]]:
    """(start, end) of every line, the newline excluded."""
    out, pos = [], 0
    for line in text.split("\n"):
        out.append((pos, pos + len(line)))
        pos += len(line) + 1
    return out


def is_mail_header(line: str) -> bool:
    """A mail header ("From: …", "主题：…") or forward marker ("-----Original Message-----") line."""
    line = line.lstrip(" \t>")
    return bool(_HEADER_RE.match(line) or _FORWARD_MARK_RE.search(line[:60]))


def _starts_message(lines: list[str], i: int) -> bool:
    """A pasted or forwarded message starts here: a forward marker, or a header block (two header lines, one
    of them From:, or a From: line with an address)."""
    line = lines[i].lstrip(" \t>")
    if _FORWARD_MARK_RE.search(line[:60]):
        return True
    if not _FROM_HEADER_RE.match(line) and not (_HEADER_RE.match(line) and i + 1 < len(lines)):
        return False
    block = [b for b in (lines[j].lstrip(" \t>") for j in range(i, min(i + 4, len(lines)))) if _HEADER_RE.match(b)]
    has_from = any(_FROM_HEADER_RE.match(b) for b in block)
    return has_from and (len(block) >= 2 or "@" in line)


def _own_tail(text: str, start: int) -> int:
    """Where the speaker resumes after a pasted message that runs to the end of the turn: a last paragraph,
    after a blank line, that asks something ("is this a scam?") is the speaker's own. Its start, or len(text)."""
    cut = text.rfind("\n\n", start)
    if cut < 0:
        return len(text)
    tail = text[cut:].strip()
    if tail and len(tail) <= 300 and ("?" in tail or "？" in tail) and not tail.startswith(">"):
        return cut
    return len(text)


def _drop_trailing_questions(text: str, start: int, end: int) -> int:
    """Shorten an inline quoted run so that the questions it ends with ("…. Should I pay?") stay the speaker's."""
    sentences = [(m.start(), m.end()) for m in _SENTENCE_RE.finditer(text, start, end)]
    while sentences and _QUESTION_END_RE.search(text[sentences[-1][0] : sentences[-1][1]]):
        end = sentences.pop()[0]
    return end


_TABLE_DELIMS = (",", "\t", "|", ";")
_TABLE_FIELD_MAX_WORDS = 4


def _row_shape(line: str) -> tuple[str, int] | None:
    """(delimiter, fields) when a line reads as a row of pasted data: fields split by one delimiter, each short
    ("BK-7,Oat Loaf,12", "| id | name |"). A sentence with commas has long fields, or spaces after them."""
    line = line.strip(" \t")
    for delim in _TABLE_DELIMS:
        fields = [f.strip() for f in line.strip("|").split(delim)] if delim == "|" else line.split(delim)
        if len(fields) < 2:
            continue
        if delim == "," and any(f.startswith(" ") for f in fields[1:]):
            continue  # "I'm a nurse, I live in Leeds": prose puts a space after its commas
        if len(fields) < (3 if delim in ",;" else 2):
            continue  # "我是老师,住在北京": one comma typed without a space is still prose
        if all(f.strip() and len(f.split()) <= _TABLE_FIELD_MAX_WORDS and len(f) <= 40 for f in fields):
            return delim, len(fields)
    return None


def _table_spans(bounds: list[tuple[int, int]], lines: list[str]) -> list[tuple[int, int]]:
    """Pasted tables: two or more consecutive lines with the same row shape (CSV, TSV, markdown). They are
    material for the task, like code, and say nothing about the speaker."""
    spans: list[tuple[int, int]] = []
    if len(lines) < 2:
        return spans
    i = 0
    while i < len(lines):
        shape = _row_shape(lines[i])
        j = i + 1
        while shape is not None and j < len(lines) and (_row_shape(lines[j]) == shape or _is_rule_row(lines[j])):
            j += 1
        rows = [line for line in lines[i:j] if not _is_rule_row(line)]
        data = sum(bool(re.search(r"\d", line)) for line in rows)
        if shape is not None and len(rows) >= 2 and (shape[0] in "|\t" or data >= 2):
            spans.append((bounds[i][0], bounds[j - 1][1]))  # delimited prose seldom repeats its shape with numbers
        i = j
    return spans


def _is_rule_row(line: str) -> bool:
    """A markdown table's rule line ("|---|:--:|")."""
    return "|" in line and "---" in line and not set(line) - set("|-: \t")


def _block_spans(text: str) -> list[tuple[int, int]]:
    """Quoted lines (`>`), pasted/forwarded messages (header blocks, forward markers), pasted tables and
    reported speech."""
    bounds = _lines(text)
    lines = [text[s:e] for s, e in bounds]
    spans: list[tuple[int, int]] = _table_spans(bounds, lines)
    for i, (s, e) in enumerate(bounds):
        line = lines[i]
        if line.lstrip(" \t").startswith(">"):
            spans.append((s, e))
            continue
        if _starts_message(lines, i):
            spans.append((s, _own_tail(text, s)))
            break  # the message runs to the end of the turn
        if _CHAT_LABEL_RE.match(line):
            spans.append((s, e))  # someone's message in a pasted or forwarded chat log
            continue
        cue = speech_cue(line)
        if cue is None:
            continue
        begin = s + cue.end()
        after = text[begin:e].strip(" \t")
        if not after:  # "she wrote:" closing a line: the lines after it are what she wrote
            spans.append((begin, _own_tail(text, e)))
            break
        if after[:1] in _QUOTE_PAIRS:
            continue  # a quote right after the cue is measured by the quote scanner
        colon = cue.group(0).rstrip().endswith((":", "："))
        stop = e if colon else (m.end() if (m := _SENTENCE_END_RE.search(text, begin, e)) else e)
        stop = _drop_trailing_questions(text, begin, stop)
        if stop > begin:
            spans.append((begin, stop))
    return spans


def split_quoted(text: str) -> QuotedSplit:
    """Cut the material a speaker shows out of their own words (see the section comment above).

    Shown: spans in quotation marks that read as a sentence (“…”, 「…」, "…", a long '…') or follow a cue,
    lines starting with `>`, lines of a pasted chat log ("[Sam]: …", "[09:14] Sam: …", "<kev> …"), mail headers
    and forward markers with the message under them, and what follows a
    reported-speech cue ("the e-mail says", "my landlord texted:", "邮件里说", "原文如下："). Expects NFKC text
    with its line breaks (`normalize` drops blank lines, which end a pasted message).
    """
    spans = sorted(_block_spans(text) + _quote_spans(text))
    if not spans:
        return QuotedSplit(text, [])
    merged: list[tuple[int, int]] = []
    for s, e in spans:
        if merged and s <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], e))
        else:
            merged.append((s, e))
    own, quoted, pos = [], [], 0
    for s, e in merged:
        own.append(text[pos:s])
        body = "\n".join(line.lstrip(" \t>") for line in text[s:e].split("\n")).strip()
        if body:
            quoted.append(body)
        pos = e
    own.append(text[pos:])
    return QuotedSplit("\n".join(own), quoted)


def own_and_shown(text: str) -> tuple[str, list[str]]:
    """`split_quoted` on a turn's raw text, both sides normalized: (own words, quoted material)."""
    split = split_quoted(unicodedata.normalize("NFKC", strip_invisible(text)))
    return normalize(split.own), [q for q in map(normalize, split.quoted) if q]


def restates_quoted(value: str, own: str, quoted: list[str]) -> bool:
    """Whether `value` repeats quoted material rather than the speaker's own words: most of its content words
    come from the quotes, and more of them than from what the speaker said around the quotes."""
    if not quoted:
        return False
    words = content_tokens(value)
    if not words:
        return False
    shown = len(words & content_tokens("\n".join(quoted))) / len(words)
    said = len(words & content_tokens(own)) / len(words)
    return shown >= 0.5 and shown > said
