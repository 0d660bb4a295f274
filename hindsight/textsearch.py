"""Text prepared for PostgreSQL full-text search: Chinese segmented with jieba, everything lower-cased."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from functools import lru_cache
from types import ModuleType

from pipeline.slots import VOCAB_VERSION, topic_words

_HAN = re.compile(r"[\u3400-\u9fff]")
_TOKEN = re.compile(r"[\w.+#-]+", re.UNICODE)


@lru_cache(maxsize=1)
def _jieba() -> ModuleType:
    import logging

    import jieba

    jieba.setLogLevel(logging.WARNING)
    jieba.initialize()
    return jieba


def segment(text: str) -> list[str]:
    """Tokens of `text`: jieba search-mode words for Chinese runs, word tokens for the rest."""
    text = unicodedata.normalize("NFKC", text).lower()
    tokens: list[str] = []
    if _HAN.search(text):
        for word in _jieba().cut_for_search(text):
            word = word.strip()
            if word and _TOKEN.search(word):
                tokens.append(word)
    else:
        tokens = _TOKEN.findall(text)
    return [t.strip(".-") for t in tokens if t.strip(".-")]


def search_text(text: str) -> str:
    return " ".join(segment(text))


def key_topic_words(key: str) -> list[str]:
    """The words people ask about a key's topic with (`user.role` -> job, occupation, 工作, ...): "what does the
    user do for a living" and "用户是做什么工作的" name neither `role` nor the job. They come from the slot
    registry (`pipeline.slots`); full text indexes them beside the key and value, never the embedding."""
    return list(topic_words(key))


SEARCH_VOCAB = VOCAB_VERSION
"""Recorded beside each memory's search text; the reindex job rebuilds rows written with another version."""


def memory_search_text(key: str, value: str, also_slots: Sequence[str] = ()) -> str:
    """What full text indexes of a memory: its key's words, the topic words of its key's slot and of the other
    slots its value fills (`also_slots`), and its value."""
    topics = dict.fromkeys([*key_topic_words(key), *(w for slot in also_slots for w in topic_words(f"x.{slot}"))])
    return search_text(" ".join([key.replace(".", " ").replace("_", " "), *topics, value]))


def episode_search_text(summary: str, entities: list[str]) -> str:
    """What full text indexes of an episode: its summary and its named entities."""
    return search_text(" ".join([summary, *entities]))


# Words that carry no topic in a query. Documents still index them (the writer is unchanged); a query only
# drops them so that "what is the user's database" does not match every memory containing "is" or "the".
_STOPWORD_TEXT = """
    a an the is are was were be been being am do does did doing have has had having i me my mine we us our
    ours you your yours he him his she her hers it its they them their theirs this that these those what
    which who whom whose when where why how whats there here of in on at to for from by with about as into
    over under than then so and or but not no nor if else also too very can could should would will shall
    may might must just any some all each every both either neither other such only own same s t ll ve re d
    m please tell know remember recall say said does doesnt dont isnt arent any anything something thing
    things like user users
    的 了 吗 呢 吧 啊 呀 是 在 和 与 及 或 就 都 也 还 又 而 但 把 被 给 对 从 向 让 我 我们 你 你们 他 她 它 他们
    她们 它们 这 那 这个 那个 这些 那些 什么 怎么 怎样 哪 哪个 哪些 哪里 哪儿 谁 为什么 多少 几 吗 么 呢 一个 有 没有
    是不是 请 告诉 知道 记得 一下 用户 做 干 搞
"""
_QUERY_STOPWORDS = frozenset(_STOPWORD_TEXT.split())


def query_terms(text: str, *, max_terms: int = 32) -> list[str]:
    """Distinct search terms of a query, segmented exactly as the writer segments memories.

    Stopwords are dropped unless nothing else is left (a query of only "what is it" still searches).
    """
    seen: dict[str, None] = {}
    for token in segment(text):
        seen.setdefault(token, None)
    terms = list(seen)
    kept = [t for t in terms if t not in _QUERY_STOPWORDS and t.replace("'", "") not in _QUERY_STOPWORDS]
    return (kept or terms)[:max_terms]


_ASCII_WORD = re.compile(r"[a-z]+")
_SUFFIXES = ("ies", "es", "s", "ing", "ed", "ly")


def tsquery_term(term: str) -> tuple[str, bool]:
    """(text, is_prefix) for one query term. `simple` full text does not stem, so an English word of four
    or more letters loses a common suffix and matches as a prefix (`lives` -> `live:*`, `allergies` ->
    `allerg:*`); every other term (Chinese words, identifiers, numbers) matches exactly as indexed."""
    if len(term) >= 4 and _ASCII_WORD.fullmatch(term):
        for suffix in _SUFFIXES:
            if term.endswith(suffix) and len(term) - len(suffix) >= 4:
                term = term[: -len(suffix)]
                break
        return f"'{term}':*", True
    return term, False
