"""The secret redactor and the offline distiller run in linear time on hostile input.

`redact_secrets` runs on the API's request thread for every ingested turn and every `remember`, holding the
GIL: a pattern that backtracks (quadratic or worse) on a crafted turn stalls the whole API. Every input here
is at the per-turn limit (`LimitSettings.max_turn_chars`, 32,000 characters) and built to make a
backtracking engine retry from every position: runs of a secret keyword with its separator, of the
characters a pattern repeats, and seeded random strings.
"""

from __future__ import annotations

import random
import string
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime

import pytest

from hindsight.config import LimitSettings
from pipeline import extract_lexicon as lx
from pipeline.offline import OfflineDistiller
from pipeline.secrets import redact_secrets
from pipeline.text import extract_numbers, extract_versions, has_change_cue, reply_kind, split_clauses
from schemas.pipeline import Role, Transcript, Turn

MAX_TURN = LimitSettings().max_turn_chars
# The bound for one turn at the size limit.
BUDGET_S = 0.050

# Units repeated to the limit: each secret keyword with the separators its pattern allows, and the character
# runs the patterns repeat (what made the backtracking patterns retry from every position).
ATTACK_UNITS = [
    "auth.",
    "a-",
    "a.",
    "a+",
    "aA0+",
    "aA0/",
    "A",
    "eyJ-",
    "eyJ",
    "eyJa.",
    "password=",
    "password is ",
    "password for the ",
    "password, a1",
    "pw:",
    "密码是",
    "密码",
    "密码 a1",
    "银行卡密码 ",
    "PIN 是 ",
    "sk-",
    "sk-proj-",
    "ghp_",
    "xoxb-",
    "AKIA",
    "AIza",
    "+1 (",
    "+86 1",
    "(415) ",
    "138 ",
    "电话",
    "手机号是 1",
    "phone number is 1",
    "call me at +",
    "Bearer ",
    "token: ",
    "api_key=",
    "-----BEGIN PRIVATE KEY-----",
    "-----BEGIN A ",
    "://a:",
    "a://a:",
    "http://a:b",
    "a@",
    "1 ",
    "1-",
    "12 ",
    "4539 ",
    "110105",
    "身份证 ",
    "==",
    "q8Zt3LkP0vWx7RmN2bYc5HjD9sFa4GeU.",
    "我的密码是abc，",
    "中文English123，",
    " ",
    "\n",
]
# Short secrets packed as densely as possible: no backtracking, but one redaction (a Python callback) per
# 6-9 characters, 4,000-5,000 of them per turn. ~15-20 ms on an idle core; the bound leaves room for a
# loaded shared box, where these run 2-3x slower.
DENSE_UNITS = [
    "pw:abcd ",
    "密码1234",
    "密码是1234，",
    "a://a:b@",
    "pin,1234 ",
    "PIN 是 1234 ",
    "auth=abcdef ",
    "11010519491231002X ",
    "4539 1488 0343 6467 ",
    "13811112222 ",
    "+44 7700 900123 ",
    "tel 415-555-0123 ",
    "q8Zt3LkP0vWx7RmN2bYc5HjD9sFa4GeU ",
]


def _fill(unit: str, size: int = MAX_TURN) -> str:
    return (unit * (size // len(unit) + 1))[:size]


def _random_text(seed: int, alphabet: str) -> str:
    rnd = random.Random(seed)
    return "".join(rnd.choice(alphabet) for _ in range(MAX_TURN))


def _best_of_3(fn: Callable[[], object]) -> float:
    """Fastest of three runs: the bound is about the algorithm, not about a busy 2-core box."""
    times = []
    for _ in range(3):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


@pytest.mark.parametrize("unit", ATTACK_UNITS)
def test_redaction_of_a_max_size_attack_turn_is_fast(unit: str) -> None:
    text = _fill(unit)
    elapsed = _best_of_3(lambda: redact_secrets(text))
    assert elapsed <= BUDGET_S, f"{unit!r} x {MAX_TURN} chars took {elapsed * 1000:.1f} ms"


@pytest.mark.parametrize("unit", DENSE_UNITS)
def test_redaction_of_a_turn_packed_with_short_secrets_is_linear(unit: str) -> None:
    text = _fill(unit)
    elapsed = _best_of_3(lambda: redact_secrets(text))
    assert elapsed <= 2 * BUDGET_S, f"{unit!r} x {MAX_TURN} chars took {elapsed * 1000:.1f} ms"


@pytest.mark.parametrize(
    ("seed", "alphabet"),
    [
        (1, string.printable),
        (2, string.ascii_letters + string.digits + "-_./+=:@ "),
        (3, "密码是为：:= aA1-_.，。我的"),
        (4, string.digits + " -"),
    ],
)
def test_redaction_of_random_max_size_turns_is_fast(seed: int, alphabet: str) -> None:
    text = _random_text(seed, alphabet)
    elapsed = _best_of_3(lambda: redact_secrets(text))
    assert elapsed <= BUDGET_S, f"seed {seed} took {elapsed * 1000:.1f} ms"


def test_a_megabyte_of_jwt_prefixes_finishes_well_under_a_second() -> None:
    # Beyond the turn limit (a `remember` body or a metadata value may be longer): linear, so ~0.1 s.
    text = "eyJ-" * 250_000
    start = time.perf_counter()
    redact_secrets(text)
    assert time.perf_counter() - start < 1.0


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        ("the password for the router is Xk2#pq9z", "Xk2#pq9z"),
        ("the password to the staging server was hunter2!", "hunter2!"),
        ("my gmail password, tr0ub4dor", "tr0ub4dor"),
        ("password for my bank account: zz91Tq", "zz91Tq"),
        ("银行卡密码 847261", "847261"),
        ("wifi密码 Sunshine2024", "Sunshine2024"),
        ("wifi密码12345678，记得改", "12345678"),
        ("PIN 是 1234", "1234"),
        ("我的PIN码是 4321", "4321"),
        ("pw:\u3000h4ck-me-not\u3000ok", "h4ck-me-not"),  # ideographic space ends the value, as before
        ("密钥sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8t", "sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8t"),  # glued to CJK
        ("密码是 4539 1488 0343 6467", "0343 6467"),  # the whole card, not just its first group
    ],
)
def test_more_phrasings_of_a_password_are_redacted(text: str, secret: str) -> None:
    r = redact_secrets(text)
    assert secret not in r.text
    assert r.kinds


@pytest.mark.parametrize(
    "text",
    [
        "the password is wrong",
        "I changed my password yesterday",
        "密码太长了",
        "密码是不是太长了",
        "the password is hashed with bcrypt",
        "the password for the router is printed on the back",
        "the password for this site is too short",
        "my gmail password, again",
        "the password isolation level is fine",
        "重置密码 https://example.com/reset",
        "密码 policy 要求八位",
    ],
)
def test_talk_about_a_password_is_not_redacted(text: str) -> None:
    r = redact_secrets(text)
    assert r.text == text
    assert r.kinds == []


def test_url_credential_keeps_its_at_sign_and_offsets() -> None:
    r = redact_secrets("clone https://bot:g1thubPw@git.example.com/x.git and ftp://u:p4ssw0rd@h/")
    assert r.text == "clone https://bot:[REDACTED:password]@git.example.com/x.git and ftp://u:[REDACTED:password]@h/"


def test_lone_surrogate_does_not_break_redaction() -> None:
    r = redact_secrets("x \ud800 password is s3cretXY")
    assert "s3cretXY" not in r.text
    assert r.text.startswith("x \ufffd ")


# The worker-path patterns that backtracked (each was quadratic or worse on these strings at the size limit:
# seconds to minutes), through the function that applies them.
WORKER_CASES: list[tuple[str, Callable[[str], object], str]] = [
    # normalize() collapses spaces and tabs and splits lines, but "\x1f" is whitespace that survives it.
    ("clause splitter, en", split_clauses, "I" + "\x1f" * (MAX_TURN - 4) + "and"),
    ("clause splitter, zh", split_clauses, "我" + "\x1f" * (MAX_TURN - 2) + ":"),
    ("product versions", extract_versions, _fill("v")),
    ("product versions, dotted", extract_versions, _fill("A.")),
    ("CJK numerals", extract_numbers, _fill("一")),
    ("rejection reply", reply_kind, "ok " + _fill("not a ")),
    ("standing instruction", lambda t: lx.ZH_STANDING.search(t), _fill("要是")),
    ("discourse tail", lambda t: lx.EN_DISCOURSE_TAIL.sub("", t), _fill(", ") + "x"),
    ("discourse tail zh", lambda t: lx.ZH_DISCOURSE_TAIL.sub("", t), _fill("，") + "x"),
    # a closing "now" after a subject: two tempered runs in one pattern took a second at 4,000 characters
    ("change cue, closing now", has_change_cue, _fill("i ") + "x"),
    ("change cue, closing now, subjects", has_change_cue, _fill("we are fine ")),
]


@pytest.mark.parametrize(("what", "fn", "text"), WORKER_CASES, ids=[c[0] for c in WORKER_CASES])
def test_worker_text_patterns_are_linear_on_max_size_turns(what: str, fn: Callable[[str], object], text: str) -> None:
    elapsed = _best_of_3(lambda: fn(text))
    assert elapsed < 0.2, f"{what}: {elapsed * 1000:.0f} ms"


# Turns for the distiller, each at the size limit: runs the sentence/clause splitters and extraction patterns
# used to backtrack over (whitespace after a comma or before a dash or colon, a bracket annotation, a
# trailing "by the way", a "要是 … 提醒" opener), plus the redactor's worst strings. CJK turns are kept short:
# jieba's part-of-speech tagger, not a regex, costs ~0.2 ms per CJK character (linear, but slow).
DISTILL_TURNS = [
    " " * MAX_TURN,
    "I," + " " * (MAX_TURN - 2),
    "I," + "\x1f" * (MAX_TURN - 12) + "I'm Rosa",  # whitespace that normalize() does not collapse
    "我" + "\x1f" * (MAX_TURN - 4) + " - 好",
    _fill("  -"),
    _fill(" : "),
    _fill(", "),
    "x" + " " * (MAX_TURN - 12) + "[image here",
    _fill(", ") + "by the way",
    _fill("a-"),
    _fill("auth."),
    _fill("eyJ-"),
    _fill("I'm "),
    _fill("要是", 2000),
]


def _transcript(contents: list[str]) -> Transcript:
    return Transcript(
        id=uuid.uuid4(),
        namespace="t",
        conversation_id="c",
        occurred_at=datetime.now(UTC),
        turns=[
            Turn(index=i, turn_id=f"t{i}", role=Role.user if i % 2 == 0 else Role.assistant, content=c)
            for i, c in enumerate(contents)
        ],
    )


def test_offline_distillation_of_max_size_attack_turns_is_bounded() -> None:
    OfflineDistiller().distill(_transcript(["我住在上海，I live in Berlin."]))  # load lexicons and jieba first
    transcript = _transcript(DISTILL_TURNS)
    start = time.perf_counter()
    OfflineDistiller().distill(transcript)
    elapsed = time.perf_counter() - start
    # Before the fixes this transcript ran for minutes (the "a-" turn alone: 194 s).
    assert elapsed < 5.0, f"{len(DISTILL_TURNS)} max-size turns took {elapsed:.1f} s"


@pytest.mark.parametrize("unit", ["也", "其实", "用户", "2026年", "Lena and I ", "gave my "])
def test_what_a_change_ends_is_read_in_linear_time_on_values_at_the_write_limit(unit: str) -> None:
    """Reconcile reads what a value says it ended (`_replaced_terms`) on every change, a caller's own writes included
    (values up to 2,000 characters): runs of the adverbs that may stand before a Chinese verb were cubic."""
    from pipeline.reconcile import _replaced_terms

    value = "用户" + _fill(unit, 2_000) + "卖了"

    def read() -> object:
        _replaced_terms.cache_clear()
        return _replaced_terms(value)

    assert _best_of_3(read) < 0.05


@pytest.mark.parametrize("unit", ["do you ", "what you ", "your ", "你", "you you you what ", "would you like "])
def test_what_an_assistant_turn_offers_is_read_in_bounded_time(unit: str) -> None:
    """Every user turn reads the assistant turn before it for an offer (`offer_words`); a hostile one at the size
    limit must not make the worker scan it from every position."""
    from pipeline.extract import offer_words

    assert _best_of_3(lambda: offer_words(_fill(unit))) < 0.05
