"""Language helpers shared by the offline distiller and reconcile.

Everything here is pure and deterministic: normalisation, language detection, clause splitting and the
small cue detectors (negation, numbers/versions, change of state, confirmation/rejection) that the
extraction rules and the conflict checks are built from. Chinese and English are handled side by side.
"""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache
from typing import Any, Literal

Lang = Literal["zh", "en"]
Reply = Literal["confirm", "reject"]

# Invisible characters used to smuggle text past a reader (zero-width, bidi controls, Unicode tags).
_INVISIBLE_RE = re.compile("[\u00ad\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u2069\ufeff\U000e0000-\U000e007f]")
_SPACE_RE = re.compile(r"[ \t\u00a0\u3000]+")
_CJK_RE = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff]")
_LATIN_RE = re.compile(r"[A-Za-z]")


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


def normalize(text: str) -> str:
    """NFKC (full-width → ASCII), invisible characters removed, traditional → simplified, spaces collapsed."""
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
_SENT_RE = re.compile(
    r"(?<=[。！？!?；;])\s*|(?<=\.)\s+(?=[A-Z\"'(\u4e00-\u9fff]|$)|(?<=[a-z]{2}\.)\s+(?=[a-z])|\n+|(?<=[…])\s*"
)
# A redaction marker's colon ("[REDACTED:password]") is not a clause boundary.
_ZH_CLAUSE_RE = re.compile(r"[，,、]\s*|(?<!\[REDACTED)[：:]\s*|\s+[—–-]{1,2}\s+|——")
_EN_CLAUSE_RE = re.compile(
    r",\s+(?:but|so|though|although)\s+|,\s+(?=(?:and I|and we|and my|because|since|while|which)\b)"
    r"|,\s+(?=(?:I|I'm|I've|I'd|I'll|we|we're|my|our|she|he|they|it's|it is|that's|that is)\b)"
    r"|\s+(?:but|though|although)\s+(?=\w)"
    r"|\s*:\s+|\s+[—–-]{1,2}\s+|—"
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


_EN_AND_I_RE = re.compile(r"\s+and\s+(?=(?:I|I'm|I've|I'd|I'll|we|we're|we've)\b)")


def _split_and_i(piece: str) -> list[str]:
    """ "I write Python and I prefer Polars" holds two statements; "my wife and I hike" holds one."""
    m = _EN_AND_I_RE.search(piece)
    if m is None or len(piece[: m.start()].split()) < 3:
        return [piece]
    return [piece[: m.start()], *_split_and_i(piece[m.end() :])]


def split_clauses(text: str) -> list[str]:
    """Split one sentence into clauses (Chinese commas/colons, English clause boundaries)."""
    out: list[str] = []
    for sent in split_sentences(text):
        pieces = _ZH_CLAUSE_RE.split(sent) if has_cjk(sent) else _EN_CLAUSE_RE.split(sent)
        if not has_cjk(sent):
            pieces = [p for piece in pieces for p in _split_and_i(piece)]
        for piece in pieces:
            piece = piece.strip(" \t,，、;；。.!！")
            if piece and not re.fullmatch(r"[\W_]+", piece):
                out.append(piece)
    return out


# --- negation ----------------------------------------------------------------------------------------

_ZH_NEG_RE = re.compile(r"不再|不|没有|没|别|非|无|未|从不|从没|戒了|戒掉|停了")
# 不错/不少/不管/无论/非常/别人/没想到 are not negations of the statement.
_ZH_NEG_FALSE = re.compile(
    r"不错|不少|不管|不仅|不过(?!敏)|不但|差不多|不好意思|无论|非常|并非常|别人|别的|无聊|没想到|了不起|不得不"
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
_ZH_NUM_RE = re.compile(
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


_PRODUCT_VERSION_RE = re.compile(r"([A-Za-z][A-Za-z0-9+#.\-]*)\s?v?(\d+(?:\.\d+)*)\b")


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
    "搬家",
    "转到",
    "转成",
    "迁到",
    "迁移到",
    "跳槽",
    "入职",
    "不再",
    "已经不",
    "再也不",
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
)
_EN_CHANGE_RE = re.compile(
    r"\b(?:switched|switching|moved|moving|migrated|upgraded|changed|converted) (?:to|over|from)\b|"
    r"\bno longer\b|\bnot anymore\b|\banymore\b|\bnow use\b|"
    r"(?<!from )\bnow on\b|\bnow i\b|\bi'm now\b|\bnow work\b|"
    r"\bstarted at\b|\bjoined\b|\bnew job\b|\bnew role\b|\bstopped\b|\bquit\b|\bused to\b|\bagain\b|"
    r"\binstead of\b|\breplaced\b|\bgave up\b|\bnot \w+ any ?more\b|\bchanged my mind\b",
    re.I,
)


def has_change_cue(text: str) -> bool:
    """A change of state makes an older value wrong ("升级到", "搬到", "不再", "switched to", "no longer")."""
    t = normalize(text)
    return any(c in t for c in _ZH_CHANGE) or bool(_EN_CHANGE_RE.search(t))


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
    r"\b(?:not a|not an)\b.*\b(?:lol|haha)\b",
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
