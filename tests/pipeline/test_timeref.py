"""Relative time in memory values is resolved against the conversation's time, at the precision it was said; the
time a question names is resolved against when it is asked."""

from __future__ import annotations

import uuid
from datetime import UTC, date, datetime

import pytest

from pipeline.extract import extract_facts
from pipeline.timeref import Span, resolve_relative_time, time_window, without_time
from schemas.pipeline import Role, Transcript, Turn

AT = datetime(2026, 12, 1, 15, 0, tzinfo=UTC)  # a Tuesday


@pytest.mark.parametrize(
    ("text", "resolved"),
    [
        ("upgraded to PostgreSQL 16 last week", "upgraded to PostgreSQL 16 in the week of 2026-11-23"),
        ("started at Acme 3 weeks ago", "started at Acme in the week of 2026-11-09"),
        ("moved to Lyon two years ago", "moved to Lyon in 2024"),
        ("adopted a cat yesterday", "adopted a cat on 2026-11-30"),
        ("joined the club last month", "joined the club in November 2026"),
        ("starts the new job next month", "starts the new job in January 2027"),
        ("上周把数据库升级到 PostgreSQL 16 了", "2026年11月23日那周把数据库升级到 PostgreSQL 16 了"),
        ("去年搬到成都", "2025年搬到成都"),
        ("三天前领养了一只猫", "2026年11月28日领养了一只猫"),
        ("上个月开始学吉他", "2026年11月开始学吉他"),
        ("两年前换了工作", "2024年换了工作"),
        # a time ahead: the exam is in a week that can be named, and stays true when read a year later
        ("has a pharmacology exam in 3 weeks", "has a pharmacology exam in the week of 2026-12-21"),
        ("the lease ends two months from now", "the lease ends in February 2027"),
        ("plans to retire in 10 years", "plans to retire in 2036"),
        ("三周后考雅思", "2026年12月21日那周考雅思"),
        ("两个月以后搬去杭州", "2027年2月搬去杭州"),
        # a named day of a week: "last Friday" is the latest Friday before the Tuesday the conversation took place
        ("last Friday was my last day at Deliveroo", "on 2026-11-27 was my last day at Deliveroo"),
        ("starts at Ocado next Monday", "starts at Ocado on 2026-12-07"),
        ("this Saturday is the wedding", "on 2026-12-05 is the wedding"),
        ("上周五去医院复查了", "2026年11月27日去医院复查了"),  # one day, not "the week of …" and a stray 五
        ("下周一入职", "2026年12月7日入职"),
        # a bare weekday: past when said with was/were, ahead when the clause says something starts then
        ("my last day at Deliveroo was Friday, sad", "my last day at Deliveroo was on 2026-11-27, sad"),
        ("the move was on Saturday", "the move was on 2026-11-28"),
        ("I start at Ocado on Monday", "I start at Ocado on 2026-12-07"),
        ("we're moving on Saturday", "we're moving on 2026-12-05"),
        # a month without its year, read by the tense of its clause (the conversation is in December 2026)
        ("passed the N3 in November", "passed the N3 in November 2026"),
        ("we're moving in March", "we're moving in March 2027"),
        ("vegan since February", "vegan since February 2026"),
        ("training for the Berlin marathon in September", "training for the Berlin marathon in September 2027"),
        ("I was training for a race in May", "I was training for a race in May 2026"),  # the past wins
        ("12月过了N3", "2026年12月过了N3"),
        ("3月要搬去杭州", "2027年3月要搬去杭州"),
        # a few days back names no one day: the week three days back falls in
        ("前几天换了个华为手机", "2026年11月23日那周换了个华为手机"),
        ("adopted a cat a few days ago", "adopted a cat in the week of 2026-11-23"),
        # a month in Chinese numerals, with 份 or the start or end of it, read by its clause's tense
        ("七月份毕业了", "2026年7月毕业了"),
        ("三月份换的组，现在做推荐", "2026年3月换的组，现在做推荐"),  # 是…的: a past event
        ("八月底要考一建", "2027年8月底要考一建"),
        ("十二月要去考试", "2026年12月要去考试"),
        # the start or end of a year or month said alone, or of one named
        ("年初从字节出来了", "2026年初从字节出来了"),
        ("年底要上线", "2026年底要上线"),
        ("去年底调过来的", "2025年底调过来的"),
        ("明年初要搬家", "2027年初要搬家"),
        ("这个月底搬家", "2026年12月底搬家"),
        ("这个月月底结账", "2026年12月底结账"),
        ("上个月初入职的", "2026年11月初入职的"),
        ("后天去报到", "2026年12月3日去报到"),
        # a rough count back names no one month or year: about then
        ("几个月前开始学吉他", "2026年9月左右开始学吉他"),
        ("两三个月前换了工作", "2026年9月左右换了工作"),  # a range, not "两" and three months back
        ("几年前搬到上海", "2023年左右搬到上海"),
        ("took up bouldering a couple months ago", "took up bouldering around October 2026"),
        ("switched to Japanese a few weeks ago", "switched to Japanese around November 2026"),
        ("moved here a few years ago", "moved here around 2023"),
    ],
)
def test_relative_time_becomes_the_date_it_meant(text: str, resolved: str) -> None:
    assert resolve_relative_time(text, AT) == resolved


def test_time_without_a_fixed_point_is_left_alone() -> None:
    for text in ("recently started running", "最近在学日语", "has lived here for years"):
        assert resolve_relative_time(text, AT) == text


@pytest.mark.parametrize(
    "text",
    [
        "lost 5 kg in two months",  # how long it took, not a time ahead
        "can read a novel in a week",
        "haven't eaten meat in ten years",  # how long it has not happened
        "went skiing for the first time in years",
        "usually ships a feature in 3 days",
        "will decide in a week or two",  # no one week is named
        "每周五游泳",  # a weekly day, not one day
        "二十天后出发",  # a count the rule cannot read is left whole, not read as "十天后" after a stray 二
        "毕业两年后去了北京",  # two years after graduating, not from now
        "I swim on Fridays",  # a weekly day
        "we met on Tuesday",  # no tense the rule reads
        "we were Friday night regulars",  # the day qualifies a noun
        "was born in May",  # a yearly month names no one month
        "every year in June we go skiing",
        "Christmas in December is the best",  # no tense to read
        "每年3月去日本",
        "3月出生的",
        "在日本月薪三十万",  # 本 of 日本 is no "this"
        "喜欢日本周边",
        "这个月饼太甜了",  # 月饼 (a mooncake) names no month
        "五月天的歌都会唱",  # a band, not May
        "三月份的天气最舒服",  # no tense to read
        "十月份出生的",  # a yearly month
        "八月十五回家",  # a day in numerals this rule does not read: left whole, not half-read
        "十二个月前",  # not "二个月前" after a stray 十
        "二十年前搬到北京",  # twenty years, not a rough "two or ten"
        "三十个月前",
        "2023年前就搬了",  # before a year, not 2023 years back
        "以后天天骑车",  # 以后 + 天天, no 后天
        "在青年中心上班",
        "大年初三添了个外孙女",  # a day of the lunar new year, not the start of a year
    ],
)
def test_a_length_of_time_or_a_weekly_day_is_left_alone(text: str) -> None:
    assert resolve_relative_time(text, AT) == text


def test_a_memory_value_holds_no_relative_time() -> None:
    transcript = Transcript(
        id=uuid.uuid4(),
        namespace="t",
        conversation_id="c",
        occurred_at=AT,
        turns=[
            Turn(index=0, turn_id="t0", role=Role.user, content="我们团队上个月把数据库从 MySQL 换成了 PostgreSQL。")
        ],
    )
    values = [f.value for f in extract_facts(transcript)]
    assert any("PostgreSQL" in v for v in values)
    assert not any("上个月" in v for v in values)
    assert any("2026年11月" in v for v in values if "PostgreSQL" in v)


NOW = date(2026, 3, 18)  # a Wednesday


@pytest.mark.parametrize(
    ("question", "start", "end", "unit"),
    [
        ("What did I buy last month?", date(2026, 2, 1), date(2026, 3, 1), "month"),
        ("where did I go last weekend", date(2026, 3, 9), date(2026, 3, 16), "week"),
        ("what did I eat yesterday", date(2026, 3, 17), date(2026, 3, 18), "day"),
        ("what happened three weeks ago", date(2026, 2, 23), date(2026, 3, 2), "week"),
        ("Where was I in May 2023?", date(2023, 5, 1), date(2023, 6, 1), "month"),
        ("what did I say on May 5, 2023", date(2023, 5, 5), date(2023, 5, 6), "day"),
        ("what did I read in May", date(2025, 5, 1), date(2025, 6, 1), "month"),  # the latest May before now
        ("in 2022, where did I live", date(2022, 1, 1), date(2023, 1, 1), "year"),
        ("两个月前我在做什么", date(2026, 1, 1), date(2026, 2, 1), "month"),
        ("上周末我去了哪里", date(2026, 3, 9), date(2026, 3, 16), "week"),
        ("我2024年3月去了哪", date(2024, 3, 1), date(2024, 4, 1), "month"),
        ("我3月2日做了什么", date(2026, 3, 2), date(2026, 3, 3), "day"),
        ("去年我买了什么", date(2025, 1, 1), date(2026, 1, 1), "year"),
        ("what did I do last week and yesterday", date(2026, 3, 9), date(2026, 3, 18), "week"),  # both, coarsest
        ("what did I do last Friday", date(2026, 3, 13), date(2026, 3, 14), "day"),
        ("上周三我吃了什么", date(2026, 3, 11), date(2026, 3, 12), "day"),
        ("去年底我在哪上班", date(2025, 10, 1), date(2026, 1, 1), "year"),  # the last quarter of 2025
        ("what did I start a few months ago", date(2025, 11, 1), date(2026, 2, 1), "month"),  # December, ± a month
        ("我七月在干嘛", date(2025, 7, 1), date(2025, 8, 1), "month"),  # the latest July, in Chinese numerals
    ],
)
def test_a_question_names_a_stretch_of_time(question: str, start: date, end: date, unit: str) -> None:
    assert time_window(question, NOW) == Span(start, end, unit)


@pytest.mark.parametrize(
    "question",
    [
        "May I ask what I said?",
        "what have I been reading recently",
        "我最近在忙什么",
        "what is 2023 minus 5",
        "February 30, 2024",
        "五月天演唱会是哪天",  # a band, not May
    ],
)
def test_no_fixed_time_names_no_window(question: str) -> None:
    assert time_window(question, NOW) is None


def test_a_clause_without_its_time_says_what_happened() -> None:
    assert without_time("我上个月开始当测试组的组长了") == "我开始当测试组的组长了"
    assert without_time("I started leading the QA team last month") == "I started leading the QA team"
    assert without_time("moved to Leeds in 2023") == "moved to Leeds"
    assert without_time("用 Go 写 后端") == "用 Go 写 后端"  # nothing to take out: left exactly as it was
    assert without_time("10月份入职的") == "入职的"  # the month whole, not "份入职的"
    assert without_time("去年十月领的证") == "领的证"
    assert without_time("上个月底从携程离职，下周去小红书报到") == "从携程离职， 去小红书报到"
    assert without_time("14号去报到") == "去报到"  # a day of no named month: no date to resolve, still a time
    assert without_time("住在10号楼") == "住在10号楼"  # a building, not a day
    assert without_time("前阵子换了手机") == "换了手机"
    assert without_time("三个月前，我开始了新的工作") == "我开始了新的工作"
