"""Relative time in a memory's value, resolved against when the conversation happened.

A memory is read months later: "User's team upgraded to PostgreSQL 16 last week" is false by then, and
"用户去年搬到成都" means another year. Each relative expression is rewritten to the date it meant at
`occurred_at` (the ingest time, never the text's claim), at the precision it was said with: a day
("yesterday" → "on 2026-11-30"), a week ("last week" → "in the week of 2026-11-23"), a month ("last month" →
"in October 2026", "上个月" → "2026年10月"), a year ("去年" → "2025年"). Expressions with no fixed point
("recently", "最近", "these days") are left alone: they say nothing a reader could resolve.
"""

from __future__ import annotations

import calendar
import re
from collections.abc import Callable
from datetime import date, datetime, timedelta

_MONTHS = list(calendar.month_name)[1:]
_EN_NUM = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "ten": 10}
_ZH_NUM = {"一": 1, "两": 2, "二": 2, "三": 3, "四": 4, "五": 5, "六": 6, "七": 7, "八": 8, "九": 9, "十": 10, "半": 0}


def _month_shift(d: date, months: int) -> date:
    m = d.month - 1 + months
    return date(d.year + m // 12, m % 12 + 1, 1)


def _week_start(d: date) -> date:
    return d - timedelta(days=d.weekday())


def _en_month(d: date) -> str:
    return f"in {_MONTHS[d.month - 1]} {d.year}"


def _zh_month(d: date) -> str:
    return f"{d.year}年{d.month}月"


def _n(word: str, table: dict[str, int]) -> int:
    return int(word) if word.isdigit() else table.get(word, 1)


Rule = tuple[re.Pattern[str], Callable[[re.Match[str], date], str]]


def _en_day(days: int) -> Callable[[re.Match[str], date], str]:
    return lambda m, d: f"on {d + timedelta(days=days):%Y-%m-%d}"


def _en_week(weeks: int) -> Callable[[re.Match[str], date], str]:
    return lambda m, d: f"in the week of {_week_start(d) + timedelta(weeks=weeks):%Y-%m-%d}"


def _zh_day(days: int) -> Callable[[re.Match[str], date], str]:
    return lambda m, d: f"{d + timedelta(days=days):%Y年%-m月%-d日}"


def _zh_week(weeks: int) -> Callable[[re.Match[str], date], str]:
    return lambda m, d: f"{_week_start(d) + timedelta(weeks=weeks):%Y年%-m月%-d日}那周"


_EN_COUNT = r"(\d+|a|an|one|two|three|four|five|six|ten)"
_ZH_COUNT = r"(\d+|[一两二三四五六七八九十])"


def _count(m: re.Match[str]) -> int:
    word = m.group(1).lower()
    return _n(word, _ZH_NUM if word in _ZH_NUM else _EN_NUM)


_EN: list[Rule] = [
    (re.compile(r"\byesterday\b", re.I), _en_day(-1)),
    (re.compile(r"\b(?:today|tonight|this morning|this afternoon|this evening)\b", re.I), _en_day(0)),
    (re.compile(r"\btomorrow\b", re.I), _en_day(1)),
    (re.compile(r"\blast week(?:end)?\b", re.I), _en_week(-1)),
    (re.compile(r"\bthis week(?:end)?\b", re.I), _en_week(0)),
    (re.compile(r"\bnext week(?:end)?\b", re.I), _en_week(1)),
    (re.compile(r"\blast month\b", re.I), lambda m, d: _en_month(_month_shift(d, -1))),
    (re.compile(r"\bthis month\b", re.I), lambda m, d: _en_month(d)),
    (re.compile(r"\bnext month\b", re.I), lambda m, d: _en_month(_month_shift(d, 1))),
    (re.compile(r"\blast year\b", re.I), lambda m, d: f"in {d.year - 1}"),
    (re.compile(r"\bthis year\b", re.I), lambda m, d: f"in {d.year}"),
    (re.compile(r"\bnext year\b", re.I), lambda m, d: f"in {d.year + 1}"),
    (re.compile(_EN_COUNT + r" days? ago\b", re.I), lambda m, d: _en_day(-_count(m))(m, d)),
    (re.compile(_EN_COUNT + r" weeks? ago\b", re.I), lambda m, d: _en_week(-_count(m))(m, d)),
    (re.compile(_EN_COUNT + r" months? ago\b", re.I), lambda m, d: _en_month(_month_shift(d, -_count(m)))),
    (re.compile(_EN_COUNT + r" years? ago\b", re.I), lambda m, d: f"in {d.year - _count(m)}"),
]

_ZH: list[Rule] = [
    (re.compile(r"前天"), _zh_day(-2)),
    (re.compile(r"昨天|昨晚"), _zh_day(-1)),
    (re.compile(r"今天|今晚|今早"), _zh_day(0)),
    (re.compile(r"明天"), _zh_day(1)),
    (re.compile(r"上(?:个)?(?:周|星期|礼拜)末?"), _zh_week(-1)),
    (re.compile(r"(?:这|本)(?:个)?(?:周|星期|礼拜)末?"), _zh_week(0)),
    (re.compile(r"下(?:个)?(?:周|星期|礼拜)末?"), _zh_week(1)),
    (re.compile(r"上(?:个)?月"), lambda m, d: _zh_month(_month_shift(d, -1))),
    (re.compile(r"(?:这|本)(?:个)?月"), lambda m, d: _zh_month(d)),
    (re.compile(r"下(?:个)?月"), lambda m, d: _zh_month(_month_shift(d, 1))),
    (re.compile(r"前年"), lambda m, d: f"{d.year - 2}年"),
    (re.compile(r"去年"), lambda m, d: f"{d.year - 1}年"),
    (re.compile(r"今年"), lambda m, d: f"{d.year}年"),
    (re.compile(r"明年"), lambda m, d: f"{d.year + 1}年"),
    (re.compile(_ZH_COUNT + r"天前"), lambda m, d: _zh_day(-_count(m))(m, d)),
    (re.compile(_ZH_COUNT + r"个?(?:星期|礼拜|周)前"), lambda m, d: _zh_week(-_count(m))(m, d)),
    (re.compile(_ZH_COUNT + r"个月前"), lambda m, d: _zh_month(_month_shift(d, -_count(m)))),
    (re.compile(_ZH_COUNT + r"年前"), lambda m, d: f"{d.year - _count(m)}年"),
]


def resolve_relative_time(text: str, occurred_at: datetime | date) -> str:
    """`text` with each relative time expression replaced by the date it meant at `occurred_at`."""
    day = occurred_at.date() if isinstance(occurred_at, datetime) else occurred_at
    for pattern, render in (*_ZH, *_EN):
        if pattern.search(text):
            text = pattern.sub(lambda m, render=render: render(m, day), text)  # type: ignore[misc]
    return re.sub(r"\s{2,}", " ", text)
