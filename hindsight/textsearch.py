"""Text prepared for PostgreSQL full-text search: Chinese segmented with jieba, everything lower-cased."""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache

_HAN = re.compile(r"[\u3400-\u9fff]")
_TOKEN = re.compile(r"[\w.+#-]+", re.UNICODE)


@lru_cache(maxsize=1)
def _jieba():  # type: ignore[no-untyped-def]
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
