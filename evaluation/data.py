"""Loaders for the evaluation formats, validated before anything touches the store.

Every problem names the file and line (JSONL) or the item's position (JSON), e.g.
`cases.jsonl:7: expect.facts.0: give "any" or "all"`.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from hindsight.errors import InvalidInput
from schemas.pipeline import MemoryKind, Role, Source


class DataError(InvalidInput):
    """A malformed evaluation file: the message names the file, the line and the problem."""


def _describe(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors()[:3]:
        loc = ".".join(str(p) for p in err["loc"])
        msg = err["msg"].removeprefix("Value error, ")
        parts.append(f"{loc}: {msg}" if loc else msg)
    more = f" (+{exc.error_count() - 3} more)" if exc.error_count() > 3 else ""
    return "; ".join(parts) + more


def _read_text(path: Path) -> str:
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise DataError(f"{path}: {exc.strerror}") from None
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise DataError(f"{path}:{line}: invalid UTF-8 (byte {exc.start})") from None


def read_jsonl(path: Path) -> list[tuple[int, dict[str, Any]]]:
    """(line number, object) for every non-blank line; a bad line stops the whole file."""
    items: list[tuple[int, dict[str, Any]]] = []
    for lineno, line in enumerate(_read_text(path).splitlines(), start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise DataError(f"{path}:{lineno}: invalid JSON: {exc.msg} (column {exc.colno})") from None
        if not isinstance(obj, dict):
            raise DataError(f"{path}:{lineno}: expected a JSON object, got {type(obj).__name__}")
        items.append((lineno, obj))
    if not items:
        raise DataError(f"{path}: no records found")
    return items


def read_json_list(path: Path) -> list[tuple[str, dict[str, Any]]]:
    """(where, object) for each item of a JSON array; `where` is `file[i] (line n)`."""
    text = _read_text(path)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise DataError(f"{path}:{exc.lineno}: invalid JSON: {exc.msg} (column {exc.colno})") from None
    if not isinstance(data, list) or not data:
        raise DataError(f"{path}:1: expected a non-empty JSON array of items")
    # Line numbers of the top-level items, for readable messages.
    lines = _item_lines(text, len(data))
    out = []
    for i, item in enumerate(data):
        where = f"{path}:{lines[i]} (item {i})" if i < len(lines) else f"{path} (item {i})"
        if not isinstance(item, dict):
            raise DataError(f"{where}: expected a JSON object, got {type(item).__name__}")
        out.append((where, item))
    return out


def _item_lines(text: str, count: int) -> list[int]:
    """Line where each top-level array element starts (a light scan that respects strings)."""
    starts: list[int] = []
    depth, line, in_str, esc = 0, 1, False, False
    for ch in text:
        if ch == "\n":
            line += 1
        if in_str:
            if esc:
                esc = False
            elif ch == "\\":
                esc = True
            elif ch == '"':
                in_str = False
            continue
        if ch == '"':
            in_str = True
        elif ch in "[{":
            if depth == 1:
                starts.append(line)
            depth += 1
        elif ch in "]}":
            depth -= 1
    return starts[:count]


# ---------------------------------------------------------------------------------------------------------
# distill / red-team cases (FORMAT.md)


class _Model(BaseModel):
    model_config = ConfigDict(extra="ignore", str_strip_whitespace=False)


def _non_empty_strings(v: list[str], what: str) -> list[str]:
    for s in v:
        if not isinstance(s, str) or not s.strip():
            raise ValueError(f"{what} holds an empty string")
    return v


class PriorMemory(_Model):
    ref: str = Field(min_length=1)
    key: str = Field(min_length=1, max_length=256)
    value: str = Field(min_length=1)
    kind: MemoryKind = MemoryKind.fact
    source: Source = Source.user
    confidence: float = Field(0.8, ge=0.0, le=1.0)
    days_ago: float = Field(0.0, ge=0.0)
    pinned: bool = False


class CaseTurn(_Model):
    role: Role
    content: str = Field(min_length=1)
    name: str | None = None
    turn_id: str | None = None


class CaseConversation(_Model):
    conversation_id: str = Field(min_length=1)
    days_ago: float = Field(0.0, ge=0.0)
    turns: list[CaseTurn] = Field(min_length=1)


class FactExpect(_Model):
    any: list[str] = Field(default_factory=list)
    all: list[str] = Field(default_factory=list)
    note: str = ""

    @model_validator(mode="after")
    def _has_strings(self) -> FactExpect:
        if not self.any and not self.all:
            raise ValueError('give "any" or "all"')
        _non_empty_strings(self.any + self.all, "any/all")
        return self


class AbsentExpect(_Model):
    any: list[str] = Field(min_length=1)
    note: str = ""

    @field_validator("any")
    @classmethod
    def _strings(cls, v: list[str]) -> list[str]:
        return _non_empty_strings(v, "any")


class SupersededExpect(_Model):
    ref: str = Field(min_length=1)
    note: str = ""


class QueryExpect(_Model):
    q: str = Field(min_length=1)
    k: int = Field(5, ge=1, le=100)
    any: list[str] = Field(default_factory=list)
    above: list[str] = Field(default_factory=list)
    none: list[str] = Field(default_factory=list)
    note: str = ""

    @model_validator(mode="after")
    def _checks_something(self) -> QueryExpect:
        if not self.any and not self.none:
            raise ValueError('a query needs "any" (what must be found) or "none" (what must not)')
        if self.above and not self.any:
            raise ValueError('"above" needs "any"')
        _non_empty_strings(self.any + self.above + self.none, "any/above/none")
        return self


class Expect(_Model):
    facts: list[FactExpect] = Field(default_factory=list)
    absent: list[AbsentExpect] = Field(default_factory=list)
    superseded: list[SupersededExpect] = Field(default_factory=list)
    queries: list[QueryExpect] = Field(default_factory=list)


class Case(_Model):
    id: str = Field(min_length=1)
    lang: str = Field(min_length=1)
    tags: list[str] = Field(default_factory=list)
    prior: list[PriorMemory] = Field(default_factory=list)
    conversations: list[CaseConversation] = Field(min_length=1)
    expect: Expect

    @model_validator(mode="after")
    def _refs(self) -> Case:
        refs = [p.ref for p in self.prior]
        if len(refs) != len(set(refs)):
            raise ValueError("prior refs must be unique")
        for s in self.expect.superseded:
            if s.ref not in refs:
                raise ValueError(f"expect.superseded names ref {s.ref!r}, which no prior memory has")
        return self


@dataclass
class CaseFile:
    path: Path
    cases: list[Case]
    redteam: bool


def load_cases(path: str | Path, *, redteam: bool | None = None) -> CaseFile:
    """Parse and validate every case; a red-team file is named so (`redteam`/`red-team`) unless told."""
    path = Path(path)
    cases: list[Case] = []
    seen: dict[str, int] = {}
    for lineno, obj in read_jsonl(path):
        try:
            case = Case.model_validate(obj)
        except ValidationError as exc:
            raise DataError(f"{path}:{lineno}: {_describe(exc)}") from None
        if case.id in seen:
            raise DataError(f"{path}:{lineno}: case id {case.id!r} already used on line {seen[case.id]}")
        seen[case.id] = lineno
        cases.append(case)
    if redteam is None:
        redteam = bool(re.search(r"red[-_]?team", path.name, re.IGNORECASE))
    return CaseFile(path=path, cases=cases, redteam=redteam)


# ---------------------------------------------------------------------------------------------------------
# retrieval data sets: LoCoMo, LongMemEval, MADial


@dataclass
class RawTurn:
    turn_id: str
    role: str
    """`user` or `assistant` as ingested."""
    speaker: str
    text: str


@dataclass
class Session:
    session_id: str
    occurred_at: datetime
    turns: list[RawTurn]


@dataclass
class Question:
    qid: str
    question: str
    category: str
    evidence: list[str]
    """Turn ids whose content answers the question."""
    asked_at: datetime | None = None
    answer: str | None = None
    """The benchmark's reference answer (scored by `--qa`), when it gives one."""


def _answer_text(raw: object) -> str | None:
    """A reference answer as text (the files hold strings, and numbers or lists for some questions)."""
    if raw is None or isinstance(raw, dict):
        return None
    if isinstance(raw, list):
        return ", ".join(str(x) for x in raw) or None
    return str(raw).strip() or None


@dataclass
class Conversation:
    """One isolated history (a namespace) and the questions asked about it."""

    conv_id: str
    sessions: list[Session]
    questions: list[Question] = field(default_factory=list)

    @property
    def turns(self) -> list[tuple[Session, RawTurn]]:
        return [(s, t) for s in self.sessions for t in s.turns]


_LOCOMO_DATE = ("%I:%M %p on %d %B, %Y", "%I:%M %p on %d %b, %Y", "%I:%M %p on %B %d, %Y")


def _parse_date(text: str, formats: tuple[str, ...]) -> datetime | None:
    text = " ".join(str(text).split())
    for fmt in formats:
        try:
            return datetime.strptime(text, fmt).replace(tzinfo=UTC)
        except ValueError:
            continue
    return None


_SESSION_KEY = re.compile(r"^session_(\d+)$")
_DIA_SPLIT = re.compile(r"[;,\s]+")


def load_locomo(path: str | Path, *, categories: tuple[str, ...] = ("1", "2", "3", "4")) -> list[Conversation]:
    """LoCoMo (`data/locomo10.json` layout): sessions of turns with `dia_id`, QA items with `evidence`.

    Questions whose category is not in `categories` (category 5 is adversarial: no answer exists) and
    evidence ids that name no turn are left out; a question left with no evidence is not scored.
    """
    path = Path(path)
    out: list[Conversation] = []
    for where, item in read_json_list(path):
        conv = item.get("conversation")
        qa = item.get("qa")
        if not isinstance(conv, dict):
            raise DataError(f'{where}: "conversation" must be an object of sessions')
        if not isinstance(qa, list):
            raise DataError(f'{where}: "qa" must be a list of questions')
        conv_id = str(item.get("sample_id") or f"conv-{len(out)}")
        sessions: list[Session] = []
        numbers = sorted(int(m.group(1)) for k in conv if (m := _SESSION_KEY.match(k)))
        if not numbers:
            raise DataError(f"{where}: conversation {conv_id} has no session_N lists")
        base = datetime(2000, 1, 1, tzinfo=UTC)
        seen_ids: set[str] = set()
        for n in numbers:
            turns_raw = conv[f"session_{n}"]
            if not isinstance(turns_raw, list):
                raise DataError(f"{where}: {conv_id}.session_{n} must be a list of turns")
            when = _parse_date(conv.get(f"session_{n}_date_time", ""), _LOCOMO_DATE)
            when = when or base.replace(day=1) + (n * (datetime(2000, 1, 2, tzinfo=UTC) - base))
            turns: list[RawTurn] = []
            for j, t in enumerate(turns_raw):
                if not isinstance(t, dict):
                    raise DataError(f"{where}: {conv_id}.session_{n}[{j}] must be an object")
                dia, speaker, text = t.get("dia_id"), t.get("speaker"), t.get("text")
                if not isinstance(dia, str) or not dia:
                    raise DataError(f'{where}: {conv_id}.session_{n}[{j}] has no "dia_id"')
                if not isinstance(text, str):
                    raise DataError(f'{where}: {conv_id}.session_{n}[{j}] ({dia}) has no "text"')
                if dia in seen_ids:
                    raise DataError(f"{where}: {conv_id}: dia_id {dia} appears twice")
                seen_ids.add(dia)
                caption = t.get("blip_caption")
                if isinstance(caption, str) and caption.strip():
                    text = f"{text} [shares a photo: {caption.strip()}]".strip()
                if not text.strip():
                    continue
                # Both LoCoMo speakers are people talking about their own lives: both are ingested as
                # user turns (the speaker's name rides along), so either one's statements can be remembered.
                role = "user"
                turns.append(RawTurn(turn_id=dia, role=role, speaker=str(speaker or role), text=text))
            if turns:
                sessions.append(Session(session_id=f"session_{n}", occurred_at=when, turns=turns))
        questions: list[Question] = []
        for j, q in enumerate(qa):
            if not isinstance(q, dict) or not isinstance(q.get("question"), str):
                raise DataError(f'{where}: {conv_id}.qa[{j}] needs a "question" string')
            cat = str(q.get("category", ""))
            if cat not in categories:
                continue
            evidence = q.get("evidence", [])
            if not isinstance(evidence, list):
                raise DataError(f'{where}: {conv_id}.qa[{j}] "evidence" must be a list of dia_ids')
            ids = [e for raw in evidence for e in _DIA_SPLIT.split(str(raw)) if e in seen_ids]
            if ids:
                gold = q.get("answer")
                questions.append(
                    Question(f"{conv_id}/q{j}", q["question"], cat, sorted(set(ids)), answer=_answer_text(gold))
                )
        out.append(Conversation(conv_id=conv_id, sessions=sessions, questions=questions))
    return out


_LME_DATE = ("%Y/%m/%d (%a) %H:%M", "%Y/%m/%d %H:%M", "%Y-%m-%d %H:%M", "%Y-%m-%d")


def load_longmemeval(path: str | Path) -> list[Conversation]:
    """LongMemEval: one history per question (`haystack_sessions`), evidence = turns marked `has_answer`."""
    path = Path(path)
    out: list[Conversation] = []
    for where, item in read_json_list(path):
        qid = item.get("question_id")
        question = item.get("question")
        sessions_raw = item.get("haystack_sessions")
        if not isinstance(qid, str) or not isinstance(question, str):
            raise DataError(f'{where}: needs "question_id" and "question" strings')
        if not isinstance(sessions_raw, list) or not sessions_raw:
            raise DataError(f'{where}: {qid}: "haystack_sessions" must be a non-empty list')
        ids = item.get("haystack_session_ids") or [f"s{i}" for i in range(len(sessions_raw))]
        dates = item.get("haystack_dates") or []
        if len(ids) != len(sessions_raw):
            raise DataError(f"{where}: {qid}: haystack_session_ids and haystack_sessions differ in length")
        sessions: list[Session] = []
        evidence: list[str] = []
        base = datetime(2023, 1, 1, tzinfo=UTC)
        for i, (sid, turns_raw) in enumerate(zip(ids, sessions_raw, strict=True)):
            if not isinstance(turns_raw, list):
                raise DataError(f"{where}: {qid}: haystack_sessions[{i}] must be a list of turns")
            when = _parse_date(dates[i], _LME_DATE) if i < len(dates) else None
            turns: list[RawTurn] = []
            for j, t in enumerate(turns_raw):
                if not isinstance(t, dict) or t.get("role") not in ("user", "assistant"):
                    raise DataError(f'{where}: {qid}: haystack_sessions[{i}][{j}] needs role "user" or "assistant"')
                content = t.get("content")
                if not isinstance(content, str):
                    raise DataError(f'{where}: {qid}: haystack_sessions[{i}][{j}] has no "content" string')
                tid = f"{sid}:{j}"
                if t.get("has_answer"):
                    evidence.append(tid)
                if content.strip():
                    turns.append(RawTurn(turn_id=tid, role=t["role"], speaker=t["role"], text=content))
            if turns:
                sessions.append(Session(session_id=str(sid), occurred_at=when or base, turns=turns))
        qtype = str(item.get("question_type", "unknown"))
        asked = _parse_date(item.get("question_date", ""), _LME_DATE)
        gold = _answer_text(item.get("answer"))
        questions = [Question(qid, question, qtype, evidence, asked, answer=gold)] if evidence else []
        out.append(Conversation(conv_id=qid, sessions=sessions, questions=questions))
    return out


@dataclass
class MadialMemory:
    memory_id: str
    user_id: str
    text: str
    time: datetime | None


@dataclass
class MadialQuery:
    qid: str
    user_id: str
    turns: list[tuple[str, str]]
    """(speaker, text) of every turn before the test turn."""
    relevant: list[str]

    def query(self, mode: str = "user-3") -> str:
        """`user-3`: the last three user turns (the construction bench/embeddings.py fixed before measuring);
        `last-user`: the last user turn; `context`: every turn before the test turn, speakers named."""
        user = [text for who, text in self.turns if who.lower() != "assistant"] or [t for _, t in self.turns]
        if mode == "user-3":
            return " ".join(user[-3:])
        if mode == "last-user":
            return user[-1]
        if mode == "context":
            return "\n".join(f"{who}: {text}" for who, text in self.turns)
        raise ValueError(f"unknown query mode {mode!r}")


MADIAL_QUERY_MODES = ("user-3", "last-user", "context")


_SPEAKER_LINE = re.compile(r'^<(?P<who>[^>]+)>\s*[:：]\s*"?(?P<text>.*?)"?\s*$', re.DOTALL)


def load_madial(dialogues: str | Path, memories: str | Path) -> tuple[list[MadialMemory], list[MadialQuery]]:
    """MADial-Bench: memories (one `{id: {...}}` object a line) and dialogues with `test-turn`/`relevant-id`.

    The query is the dialogue before its (first) test turn, speaker names kept.
    """
    mem_path, dia_path = Path(memories), Path(dialogues)
    mems: dict[str, MadialMemory] = {}
    for lineno, obj in read_jsonl(mem_path):
        items = [obj] if "event" in obj else list(obj.values())
        for m in items:
            if not isinstance(m, dict) or not isinstance(m.get("event"), str) or not m["event"].strip():
                raise DataError(f'{mem_path}:{lineno}: a memory needs an "event" string')
            mid = str(m.get("id", next(iter(obj)) if len(obj) == 1 else ""))
            if not mid:
                raise DataError(f'{mem_path}:{lineno}: a memory needs an "id"')
            if mid in mems:
                raise DataError(f"{mem_path}:{lineno}: memory id {mid} appears twice")
            when = _parse_date(str(m.get("time", "")), ("%Y-%m-%d",))
            mems[mid] = MadialMemory(mid, str(m.get("user-id", "")), m["event"].strip(), when)
    queries: list[MadialQuery] = []
    for lineno, obj in read_jsonl(dia_path):
        dialogue, test_turn, relevant = obj.get("dialogue"), obj.get("test-turn"), obj.get("relevant-id")
        if not isinstance(dialogue, list) or not all(isinstance(x, str) for x in dialogue):
            raise DataError(f'{dia_path}:{lineno}: "dialogue" must be a list of strings')
        if not isinstance(test_turn, list) or not test_turn or not all(isinstance(x, int) for x in test_turn):
            raise DataError(f'{dia_path}:{lineno}: "test-turn" must be a non-empty list of turn indexes')
        if not isinstance(relevant, list) or not relevant:
            raise DataError(f'{dia_path}:{lineno}: "relevant-id" must be a non-empty list of memory ids')
        turn = min(test_turn)
        if not 0 < turn <= len(dialogue):
            raise DataError(f"{dia_path}:{lineno}: test-turn {turn} is outside the dialogue (0..{len(dialogue)})")
        unknown = [str(r) for r in relevant if str(r) not in mems]
        if unknown:
            raise DataError(f"{dia_path}:{lineno}: relevant-id names unknown memories {', '.join(unknown)}")
        lines: list[tuple[str, str]] = []
        for raw in dialogue[:turn]:
            raw = raw.strip()
            if not raw or raw in ("<BOD>", "<EOD>"):
                continue
            m = _SPEAKER_LINE.match(raw)
            lines.append((m.group("who"), m.group("text").strip('"“” ')) if m else ("", raw))
        if not lines:
            raise DataError(f"{dia_path}:{lineno}: nothing precedes test-turn {turn}")
        user = str(obj.get("user-id", mems[str(relevant[0])].user_id))
        queries.append(MadialQuery(str(obj.get("id", lineno)), user, lines, [str(r) for r in relevant]))
    return list(mems.values()), queries
