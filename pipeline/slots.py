"""The slot registry: the one list of what hindsight can remember about someone.

A memory's key is `<subject>.<slot>`: `user.city`, `person:maya.hobby`, `team.stack`, `project:atlas.deadline`.
Every reader of slot knowledge reads it here and nowhere else:

- the offline extractor's classifier predicts a slot name from this list (`pipeline.slot_model`);
- reconcile compares keys through `canonical_slot` (aliases: `home_city` is `city`) and asks `cardinality`
  whether a new value replaces the old one or joins it;
- full text indexes a memory's topic words (`topic_words`), so "what does the user do for a living" finds
  `user.role` although neither word is in the value; `VOCAB_VERSION` changes when those words do, and the
  reindex job (`hindsight.services.reindex`) rebuilds rows built with another version;
- the lifecycle reads `stale_after_days` for slots whose facts age differently from their kind;
- the LLM back-end's prompt lists the slots and their descriptions (`prompt_lines`).

Slots are general categories of personal and working facts, written once; none names a conversation.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Literal

from schemas.pipeline import MemoryKind

Cardinality = Literal["one", "many"]
K = MemoryKind


@dataclass(frozen=True)
class Slot:
    name: str
    """The key's attribute part (`city` in `user.city`)."""
    kind: MemoryKind
    cardinality: Cardinality
    """`one`: a new value replaces the old one (a city, an employer); `many`: values accumulate (pets)."""
    description: str
    en: tuple[str, ...] = ()
    """English words people ask about this slot with ("what does the user do for a living" → living, job)."""
    zh: tuple[str, ...] = ()
    aliases: tuple[str, ...] = ()
    """Other attribute words that name this slot in keys written elsewhere (an LLM's `user.occupation`)."""
    subjects: tuple[str, ...] = ("user", "person")
    """Whom the slot can describe: the user, another named person, the user's team, a project."""
    stale_after_days: int | None = None
    """Days without re-confirmation before an active memory of this slot turns stale; None: its kind's window."""
    confused_with: tuple[str, ...] = ()
    """Slots whose statements read like this one's ("leading the analytics team": a job or an employer?): a change
    filed under this slot, with one of these a close second, is weighed against that slot's memory too."""
    named_value: bool = True
    """Whether a value names one thing (a city, an employer, a job, an editor), so that a one-value slot's new
    value that drops the old value's words replaces it; False for values that describe in free words (working
    hours, how to answer), which a paraphrase restates with other words."""


def _w(text: str) -> tuple[str, ...]:
    return tuple(text.split())


_JOB_EN = "job work works occupation profession career living title"
_JOB_ZH = "工作 职业 岗位 职位 做什么"

SLOTS: tuple[Slot, ...] = (
    Slot(
        "name",
        K.profile,
        "one",
        "the person's name or what they want to be called",
        _w("name called call"),
        _w("名字 姓名 叫 称呼"),
        _w("nickname full_name"),
    ),
    Slot(
        "age",
        K.profile,
        "one",
        "age or year of birth",
        _w("age old born birthday"),
        _w("年龄 岁 多大 出生"),
        _w("birthday birth_year"),
    ),
    Slot(
        "role",
        K.profile,
        "one",
        "job title or occupation; student, retired or out of work",
        _w(_JOB_EN + " role"),
        _w(_JOB_ZH),
        _w("title position occupation profession job job_title job_status"),
        confused_with=("employer",),
    ),
    Slot(
        "employer",
        K.profile,
        "one",
        "the company or organisation they work for or at",
        _w("employer company work works workplace job"),
        _w("公司 单位 工作 上班"),
        _w("company workplace work organisation organization"),
        confused_with=("role",),
    ),
    Slot(
        "city",
        K.profile,
        "one",
        "where they live now: city, district or country",
        _w("city live lives living based home"),
        _w("城市 住 住在 所在 哪里 哪儿"),
        _w("home home_city location residence address lives live current_city"),
    ),
    Slot(
        "hometown",
        K.profile,
        "one",
        "where they grew up, were born or come from",
        _w("hometown grew born from origin"),
        _w("老家 家乡 出生 哪里人"),
        _w("origin birthplace home_town"),
        stale_after_days=730,
    ),
    Slot(
        "education",
        K.profile,
        "many",
        "school, university, degree, major, courses and exams they study for",
        _w("school university college degree major study studies studying exam course class"),
        _w("学校 大学 专业 学位 学历 学习 考试 课程 年级"),
        _w("school study studies degree major exam course"),
    ),
    Slot(
        "background",
        K.profile,
        "many",
        "their past: former jobs, places they used to live, where their family comes from",
        _w("background used past former previously"),
        _w("以前 曾经 过去 背景"),
        _w("previous_role previous_job past history ethnicity"),
    ),
    Slot(
        "language",
        K.profile,
        "many",
        "natural languages they speak or are learning",
        _w("language languages speak speaks"),
        _w("语言 外语 会说"),
        _w("languages spoken_language"),
    ),
    Slot(
        "family",
        K.relationship,
        "many",
        "spouse or partner, children, parents, siblings, who they live with",
        _w("family married wife husband partner kids children son daughter parents siblings"),
        _w("家人 家庭 结婚 老婆 老公 孩子 儿子 女儿 父母 兄弟 姐妹"),
        _w("children kids spouse partner marital_status siblings parents relationship lives_with"),
    ),
    Slot("pet", K.fact, "many", "pets they have", _w("pet pets dog cat animal"), _w("宠物 狗 猫"), _w("pets animal")),
    Slot(
        "hobby",
        K.preference,
        "many",
        "hobbies, pastimes and what they do for fun",
        _w("hobby hobbies pastime fun spare"),
        _w("爱好 兴趣 业余 周末 消遣"),
        _w("hobbies interest interests pastime activity"),
    ),
    Slot(
        "exercise",
        K.habit,
        "many",
        "sports and exercise they do",
        _w("exercise sport sports workout fitness gym"),
        _w("运动 锻炼 健身"),
        _w("sport sports fitness workout running training"),
    ),
    Slot(
        "music",
        K.preference,
        "many",
        "music they like or play, instruments",
        _w("music songs song listen listening band instrument"),
        _w("音乐 歌 听歌 乐器"),
        _w("instrument songs"),
    ),
    Slot(
        "media",
        K.preference,
        "many",
        "films, shows, books, podcasts and games they like",
        _w("movie movies film show shows tv book books reading read podcast games"),
        _w("电影 电视剧 剧 书 读书 看书 小说 播客 游戏"),
        _w("movies films tv books reading games podcast"),
    ),
    Slot(
        "food",
        K.preference,
        "many",
        "foods and cuisines they like or dislike, cooking",
        _w("food eat eats cuisine dish cook cooking"),
        _w("食物 吃 菜 口味 做饭"),
        _w("cuisine dish cooking foods"),
    ),
    Slot(
        "diet",
        K.preference,
        "many",
        "diet and eating restrictions (vegetarian, halal, no pork)",
        _w("diet eat eats vegetarian vegan"),
        _w("饮食 吃 忌口 素食"),
        _w("dietary eating restrictions"),
    ),
    Slot(
        "drink",
        K.preference,
        "many",
        "drinks: coffee, tea, alcohol, not drinking",
        _w("drink drinks coffee tea alcohol"),
        _w("喝 饮料 咖啡 茶 酒"),
        _w("drinks beverage coffee tea alcohol"),
    ),
    Slot(
        "allergy", K.fact, "many", "allergies", _w("allergy allergic allergies"), _w("过敏"), _w("allergies allergic")
    ),
    Slot(
        "health",
        K.fact,
        "many",
        "health conditions, injuries, medication, disabilities",
        _w("health medical condition medication injury"),
        _w("健康 身体 病 药 伤"),
        _w("medical condition conditions medication"),
    ),
    Slot(
        "habit",
        K.habit,
        "many",
        "routines and habits: daily routine, how they get to work, smoking, sleep",
        _w("habit habits routine usually smoke commute"),
        _w("习惯 通常 平时 作息 抽烟 通勤"),
        _w("habits routine smoking sleep commute commuting"),
    ),
    Slot(
        "schedule",
        K.habit,
        "one",
        "working hours, shifts and when they are available",
        _w("schedule hours shift shifts available"),
        _w("作息 时间 班 上班时间"),
        _w("hours shift shifts availability"),
        named_value=False,
    ),
    Slot(
        "goal",
        K.preference,
        "many",
        "long-term goals, aspirations and what they are working towards",
        _w("goal goals dream plan plans become saving"),
        _w("目标 梦想 理想 打算 计划"),
        _w("goals dream aspiration"),
    ),
    Slot(
        "possession",
        K.fact,
        "many",
        "things they own: a car, a house, a bike",
        _w("own owns car house drive"),
        _w("有 车 房子 拥有"),
        _w("vehicle car house owns"),
    ),
    Slot(
        "trait",
        K.profile,
        "many",
        "personality, appearance and how they describe themselves",
        _w("personality character"),
        _w("性格 个性 为人"),
        _w("personality physical appearance"),
    ),
    Slot(
        "belief",
        K.profile,
        "many",
        "religion, politics and values",
        _w("religion faith belief politics"),
        _w("信仰 宗教 政治"),
        _w("religion faith politics"),
    ),
    Slot(
        "preference",
        K.preference,
        "many",
        "other likes, dislikes and favourites (colours, places, brands)",
        _w("likes like favorite favourite prefers preference"),
        _w("喜欢 偏好 最爱"),
        _w("preferences likes dislike dislikes"),
    ),
    Slot(
        "stack",
        K.preference,
        "many",
        "software tools, frameworks, services and clouds used",
        _w("stack tech technology framework tools tool uses service cloud browser"),
        _w("技术栈 框架 技术 工具 服务 云 浏览器"),
        _w("tools tool tech technology framework frameworks cloud infra services hosting browser browsers"),
        ("user", "person", "team", "project"),
    ),
    Slot(
        "programming_language",
        K.preference,
        "many",
        "programming languages used",
        _w("language languages programming code coding"),
        _w("编程 语言 代码"),
        _w("programming code lang"),
        ("user", "person", "team", "project"),
    ),
    Slot(
        "database",
        K.preference,
        "one",
        "the database used",
        _w("database db"),
        _w("数据库"),
        _w("db databases"),
        ("user", "person", "team", "project"),
    ),
    Slot("editor", K.preference, "one", "code editor or IDE", _w("editor ide"), _w("编辑器"), _w("ide")),
    Slot(
        "os",
        K.preference,
        "one",
        "operating system used",
        _w("operating system computer os"),
        _w("操作系统 系统 电脑"),
        _w("operating_system"),
        confused_with=("device",),
    ),
    Slot(
        "device",
        K.preference,
        "one",
        "phone, laptop or computer used",
        _w("device phone laptop computer"),
        _w("设备 手机 电脑"),
        _w("phone mobile laptop devices"),
        confused_with=("os",),
    ),
    Slot(
        "project",
        K.project,
        "many",
        "what they are working on or building, and its constraints",
        _w("project projects working building build"),
        _w("项目 在做 开发 做的"),
        _w("projects product thesis"),
        ("user", "person", "team", "project"),
    ),
    Slot(
        "deadline",
        K.project,
        "one",
        "a project's deadline or launch date",
        _w("deadline due launch"),
        _w("截止 上线 期限 交付"),
        _w("due launch due_date"),
        ("user", "team", "project"),
        stale_after_days=14,
    ),
    Slot(
        "decision",
        K.decision,
        "many",
        "a decision taken about work or life",
        _w("decision decided choice"),
        _w("决定 选择"),
        _w("decisions choice"),
    ),
    Slot(
        "answer_style",
        K.preference,
        "one",
        "how they want the assistant to answer (short, in Chinese, code)",
        _w("answers answer style format reply replies responses"),
        _w("回答 回复 格式 风格"),
        _w("style answer answers reply response format communication"),
        named_value=False,
    ),
    Slot(
        "instruction",
        K.preference,
        "many",
        "a standing instruction to the assistant",
        _w("instruction rule always"),
        _w("要求 规则"),
        _w("instructions rule rules"),
    ),
)

BY_NAME: dict[str, Slot] = {s.name: s for s in SLOTS}
_ALIAS: dict[str, str] = {
    **{a: s.name for s in SLOTS for a in s.aliases},
    **{s.name: s.name for s in SLOTS},
}


def vocab_version(registry: tuple[Slot, ...]) -> str:
    """A digest of what full text reads from the registry: each slot's name, topic words and aliases."""
    return hashlib.sha256(repr(sorted((s.name, s.en, s.zh, s.aliases) for s in registry)).encode()).hexdigest()[:12]


VOCAB_VERSION = vocab_version(SLOTS)
"""Changes whenever a slot's name, topic words or aliases do: full text built with another is rebuilt."""


KEY_FILLER = frozenset(
    _w("favorite favourite fav main current primary preferred usual regular daily weekly")
    + _w("pref prefs preference preferences info")
)
"""Words that qualify a slot without naming one (`favourite_sport` is about sport)."""


def exact_slot(attribute: str) -> Slot | None:
    """The slot an attribute names as a whole (`programming_language`, `home_city`), not by one of its words."""
    name = _ALIAS.get(attribute.lower())
    return BY_NAME[name] if name else None


def slot_of(attribute: str) -> Slot | None:
    """The slot an attribute word or dotted attribute names (`city`, `home_city`, `diet.spicy_food`)."""
    attribute = attribute.lower()
    whole = exact_slot(attribute)
    if whole is not None:
        return whole
    for part in re.split(r"[._\-]+", attribute):
        if part in _ALIAS and part not in KEY_FILLER:
            return BY_NAME[_ALIAS[part]]
    return None


@lru_cache(maxsize=4096)
def label_slots(label: str) -> frozenset[str]:
    """The slots a field label names ("Tech stack", "Due date", "数据库", "上线时间"): by the slot's name or an alias
    (as `slot_of` reads a key), by one of its English topic words, or, in Chinese, by containing one of its Chinese
    topic words. A label that names no slot ("Output", "Step 1", "报错") is no field of a profile."""
    words = re.findall(r"[a-z][a-z_]*", label.lower())
    found = {s.name for s in [slot_of("_".join(words))] if s is not None} if words else set()
    for slot in SLOTS:
        if any(w in slot.en or w in slot.aliases for w in words) or any(
            len(w) >= 2 and not w.isascii() and w in label for w in slot.zh
        ):
            found.add(slot.name)
    return frozenset(found)


def key_slot(key: str) -> Slot | None:
    """The slot of a whole key (`user.home_city` → city, `person:maya.hobby` → hobby)."""
    _, _, attribute = key.partition(".")
    return slot_of(attribute) if attribute else None


def canonical_slot(attribute: str) -> str | None:
    slot = slot_of(attribute)
    return slot.name if slot else None


@lru_cache(maxsize=4096)
def topic_words(key: str) -> tuple[str, ...]:
    """The words people ask about a key's topic with, English then Chinese (`user.role` → job, work, 工作 …)."""
    words: list[str] = []
    for part in re.split(r"[._:\s]+", key.lower()):
        slot = slot_of(part) if part else None
        if slot is None:
            continue
        for w in (slot.name.replace("_", " "), *slot.en, *slot.zh):
            for token in w.split():
                if token not in words:
                    words.append(token)
    return tuple(words)


def slot_stale_windows() -> dict[str, int]:
    """Key attribute (a slot's name and each alias) → days before an unconfirmed memory turns stale, for the
    slots whose facts age differently from their kind (a hometown does not change; a deadline passes)."""
    return {a: s.stale_after_days for s in SLOTS if s.stale_after_days for a in (s.name, *s.aliases)}


def prompt_lines() -> str:
    """The registry as the LLM prompt lists it: one `slot (cardinality): description` per line."""
    return "\n".join(
        f"- {s.name} ({'one value' if s.cardinality == 'one' else 'several'}): {s.description}" for s in SLOTS
    )
