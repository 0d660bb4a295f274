"""Loaders reject malformed files naming the line and the problem, and read the shipped tiny files."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from evaluation.data import DataError, load_cases, load_locomo, load_longmemeval, load_madial

DATA = Path(__file__).parent / "data"
GOOD = {
    "id": "x1",
    "lang": "en",
    "conversations": [{"conversation_id": "c", "turns": [{"role": "user", "content": "I like tea."}]}],
    "expect": {"facts": [{"any": ["tea"]}]},
}


def _write(tmp_path: Path, lines: list[str], name: str = "cases.jsonl") -> Path:
    p = tmp_path / name
    p.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return p


def _bad(tmp_path: Path, obj: dict[str, Any], line: int = 3) -> str:
    lines = [json.dumps(GOOD), ""] + [json.dumps(obj)]
    path = _write(tmp_path, lines)
    with pytest.raises(DataError) as err:
        load_cases(path)
    assert f"{path}:{line}:" in str(err.value)
    return str(err.value)


def test_good_files_load() -> None:
    cases = load_cases(DATA / "cases.jsonl")
    assert [c.id for c in cases.cases] == ["en-editor-1", "zh-pet-1"]
    assert not cases.redteam
    assert load_cases(DATA / "redteam.jsonl").redteam
    assert not load_cases(DATA / "redteam.jsonl", redteam=False).redteam
    (conv,) = load_locomo(DATA / "locomo.json")
    assert [q.evidence for q in conv.questions] == [["D1:1"], ["D1:3"], ["D2:1"]]  # category 5 left out
    assert conv.sessions[0].occurred_at.isoformat() == "2024-03-03T10:00:00+00:00"
    lme = load_longmemeval(DATA / "longmemeval.json")
    assert lme[0].questions[0].evidence == ["s-a:0"]
    mems, queries = load_madial(DATA / "madial-dialogue.jsonl", DATA / "madial-memory.jsonl")
    assert len(mems) == 4
    assert queries[0].relevant == ["m1"]
    assert "小林: 我想再去滑雪。" in queries[0].query("context")
    assert queries[0].query("user-3") == "这周末又下雪了，好想去山上玩！ 我想再去滑雪。"
    assert queries[0].query("last-user") == "我想再去滑雪。"
    assert all("冬令营" not in queries[0].query(m) for m in ("context", "user-3"))  # not the test turn itself


def test_invalid_json_names_the_line(tmp_path: Path) -> None:
    path = _write(tmp_path, [json.dumps(GOOD), "{not json"])
    with pytest.raises(DataError, match=r"cases.jsonl:2: invalid JSON"):
        load_cases(path)


def test_missing_field(tmp_path: Path) -> None:
    msg = _bad(tmp_path, {k: v for k, v in GOOD.items() if k != "expect"})
    assert "expect" in msg


def test_bad_role(tmp_path: Path) -> None:
    obj = {**GOOD, "id": "x2", "conversations": [{"conversation_id": "c", "turns": [{"role": "bot", "content": "hi"}]}]}
    assert "role" in _bad(tmp_path, obj)


def test_fact_without_strings(tmp_path: Path) -> None:
    assert 'give "any" or "all"' in _bad(tmp_path, {**GOOD, "id": "x2", "expect": {"facts": [{"note": "?"}]}})


def test_superseded_ref_must_exist(tmp_path: Path) -> None:
    obj = {**GOOD, "id": "x2", "expect": {"superseded": [{"ref": "p9"}]}}
    assert "p9" in _bad(tmp_path, obj)


def test_duplicate_case_id(tmp_path: Path) -> None:
    assert "already used on line 1" in _bad(tmp_path, GOOD)


def test_confidence_out_of_range(tmp_path: Path) -> None:
    prior = [{"ref": "p", "key": "user.x", "value": "v", "confidence": 1.5}]
    assert "confidence" in _bad(tmp_path, {**GOOD, "id": "x2", "prior": prior})


def test_empty_file(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="no records"):
        load_cases(_write(tmp_path, [""]))


def test_locomo_turn_without_dia_id(tmp_path: Path) -> None:
    data = json.loads((DATA / "locomo.json").read_text())
    del data[0]["conversation"]["session_2"][1]["dia_id"]
    path = tmp_path / "l.json"
    path.write_text(json.dumps(data, indent=1))
    with pytest.raises(DataError, match=r'l.json:2 \(item 0\): .*session_2\[1\] has no "dia_id"'):
        load_locomo(path)


def test_longmemeval_bad_role(tmp_path: Path) -> None:
    data = json.loads((DATA / "longmemeval.json").read_text())
    data[1]["haystack_sessions"][0][0]["role"] = "system"
    path = tmp_path / "l.json"
    path.write_text(json.dumps(data, indent=1))
    with pytest.raises(DataError, match=r"tiny-q2: haystack_sessions\[0\]\[0\] needs role"):
        load_longmemeval(path)


def test_madial_unknown_relevant_id(tmp_path: Path) -> None:
    lines = (DATA / "madial-dialogue.jsonl").read_text().splitlines()
    obj = json.loads(lines[1])
    obj["relevant-id"] = ["m99"]
    path = _write(tmp_path, [lines[0], json.dumps(obj, ensure_ascii=False)], "d.jsonl")
    with pytest.raises(DataError, match=r"d.jsonl:2: relevant-id names unknown memories m99"):
        load_madial(path, DATA / "madial-memory.jsonl")
