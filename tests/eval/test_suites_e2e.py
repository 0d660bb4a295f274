"""Each suite once, end to end, on tiny hand-made files: real PostgreSQL, Redis and Celery worker processes.

The distill suite runs standalone (it starts its own embedded PostgreSQL, Redis and worker, as a user would
run it); the others use the test stack's servers and worker (`--external`).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from tests.conftest import REPO, Services, Stack

DATA = Path(__file__).parent / "data"
pytestmark = [pytest.mark.e2e, pytest.mark.eval]


def run_eval(args: list[str], env: dict[str, str], timeout: float = 240) -> tuple[int, str, str]:
    proc = subprocess.run(
        [sys.executable, "-m", "hindsight.cli", "eval", *args],
        env=env,
        cwd=str(REPO),
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    return proc.returncode, proc.stdout, proc.stderr


def last_json(stdout: str) -> dict[str, Any]:
    lines = [ln for ln in stdout.splitlines() if ln.strip()]
    assert lines, "no output"
    return json.loads(lines[-1])


def test_distill_suite_standalone(services: Services) -> None:
    rc, out, err = run_eval(["distill", str(DATA / "cases.jsonl")], services.env())
    assert rc == 0, err[-3000:]
    m = last_json(out)
    assert m["suite"] == "distill"
    assert m["cases"] == 2
    assert set(m["by_lang"]) == {"en", "zh"}
    overall = m["overall"]
    assert overall["fact_recall"] == 1.0, out
    assert overall["absent_leak_rate"] == 0.0, out
    assert overall["superseded_handled"] == 1.0, out
    assert overall["duplicate_rate"] == 0.0, out
    assert overall["query_hit"] == 1.0, out
    assert overall["attack_write_rate"] is None  # not a red-team file
    assert overall["benign_false_rejection"] is None
    assert m["by_lang"]["zh"]["superseded_handled"] is None  # the Chinese case expects no supersession
    [produced] = m["produced_by"]
    assert produced.startswith("offline/2+slots-")  # the classifier's version and digest are recorded
    assert "fact_recall" in out  # the table


def test_redteam_suite(stack: Stack) -> None:
    rc, out, err = run_eval(["distill", "--external", str(DATA / "redteam.jsonl")], stack.services.env())
    assert rc == 0, err[-3000:]
    m = last_json(out)
    assert m["redteam"] is True
    assert m["overall"]["attack_write_rate"] == 0.0, out
    assert m["overall"]["benign_false_rejection"] == 0.0, out
    assert m["overall"]["superseded_handled"] is None


def _check_retrieval(m: dict[str, Any], suite: str, questions: int) -> None:
    assert m["suite"] == suite
    assert m["questions"] == questions
    for system in ("hindsight", "dense_turns", "bm25_turns", "hybrid_turns"):
        row = m[system]
        assert set(row) == {
            "recall@5",
            "recall@10",
            "recall@250tok",
            "recall@500tok",
            "recall@1000tok",
            "recall@2000tok",
            "recall@half_dense_tok",
            "tokens@10",
        }
        assert all(0.0 <= row[k] <= 1.0 for k in row if k != "tokens@10")
    # every raw turn fits in the top 10 of a tiny history: the baselines must cover every question
    assert m["dense_turns"]["recall@10"] == 1.0
    assert m["bm25_turns"]["recall@10"] == 1.0
    assert m["hybrid_turns"]["recall@10"] == 1.0
    for budget in ("recall@250tok", "recall@500tok", "recall@1000tok"):
        assert m["hybrid_turns"][budget] <= m["hybrid_turns"]["recall@2000tok"]
        best = max(m[s][budget] for s in ("dense_turns", "bm25_turns", "hybrid_turns"))
        ratio = m["vs_best_baseline"]["all"][budget]
        assert ratio is None if best == 0 else abs(ratio - m["hindsight"][budget] / best) < 1e-3
    assert m["hindsight"]["tokens@10"] > 0
    assert 0.0 <= m["hindsight"]["recall@half_dense_tok"] <= m["hindsight"]["recall@2000tok"]
    assert m["hindsight"]["recall@10"] > 0.0  # provenance of recalled memories names evidence turns


def test_locomo_suite(stack: Stack) -> None:
    rc, out, err = run_eval(["locomo", "--external", str(DATA / "locomo.json")], stack.services.env())
    assert rc == 0, err[-3000:]
    m = last_json(out)
    _check_retrieval(m, "locomo", 3)  # the category-5 question is not scored
    assert set(m["by_category"]) == {"1", "2", "4"}
    assert m["by_category"]["1"]["hindsight"]["n"] == 1


def test_longmemeval_suite(stack: Stack) -> None:
    rc, out, err = run_eval(["longmemeval", "--external", str(DATA / "longmemeval.json")], stack.services.env())
    assert rc == 0, err[-3000:]
    m = last_json(out)
    _check_retrieval(m, "longmemeval", 2)
    assert set(m["by_category"]) == {"single-session-user", "knowledge-update"}


def test_madial_suite(stack: Stack) -> None:
    args = [
        "madial",
        "--external",
        str(DATA / "madial-dialogue.jsonl"),
        "--memories",
        str(DATA / "madial-memory.jsonl"),
    ]
    rc, out, err = run_eval(args, stack.services.env())
    assert rc == 0, err[-3000:]
    m = last_json(out)
    assert m["suite"] == "madial"
    assert m["queries"] == 2
    for system in ("hindsight", "dense", "bm25", "hybrid"):
        assert m[system]["recall@10"] == 1.0  # four memories: all are in the top 10
        assert 0.0 < m[system]["mrr"] <= 1.0
        assert m[system]["recall@2000tok"] == 1.0  # four short memories fit in 2,000 tokens
        assert m[system]["recall@250tok"] <= m[system]["recall@500tok"] <= m[system]["recall@2000tok"]


def _eval_rows(engine: sa.Engine) -> int:
    with engine.connect() as conn:
        return conn.execute(sa.text("SELECT count(*) FROM transcripts WHERE namespace LIKE 'eval-%'")).scalar_one()


def test_a_malformed_file_stops_before_touching_the_store(stack: Stack, engine: sa.Engine, tmp_path: Path) -> None:
    lines = (DATA / "cases.jsonl").read_text().splitlines()
    bad = json.loads(lines[1])
    bad["conversations"][0]["turns"][0]["role"] = "narrator"
    path = tmp_path / "bad.jsonl"
    path.write_text(lines[0] + "\n" + json.dumps(bad, ensure_ascii=False) + "\n")
    before = _eval_rows(engine)
    rc, out, err = run_eval(["distill", "--external", str(path)], stack.services.env(), timeout=60)
    assert rc == 2
    assert f"{path}:2:" in err
    assert "role" in err
    assert _eval_rows(engine) == before
    assert out.strip() == ""


def _llm_answer(request: dict[str, Any]) -> dict[str, Any]:
    """A scripted model: reports the editor the transcript names (the OpenAI-compatible back-end's schema)."""
    prompt = json.dumps(request["messages"], ensure_ascii=False)
    facts = []
    if "Neovim" in prompt:
        facts.append(
            {
                "kind": "preference",
                "key": "user.editor",
                "value": "User codes in Neovim",
                "source_turn_ids": ["0"],
                "negated": False,
                "supersedes_previous": True,
                "confidence": 0.9,
                "subject": "user",
            }
        )
    return {"summary": "The user named their editor.", "entities": [], "summary_turn_ids": ["0"], "facts": facts}


def _model_env(services: Services, base_url: str) -> dict[str, str]:
    """The eval's environment with the OpenAI-compatible back-end pointed at a scripted server."""
    return services.env(
        HINDSIGHT_LLM__BACKEND="openai",
        HINDSIGHT_LLM__BASE_URL=base_url,
        HINDSIGHT_LLM__API_KEY="test-key-not-secret",
        HINDSIGHT_LLM__MODEL="scripted-model",
    )


def test_distill_suite_measures_the_openai_backend(services: Services) -> None:
    from tests.fakes.llm_server import ScriptedLLMServer

    server = ScriptedLLMServer(default=_llm_answer).start()
    try:
        env = _model_env(services, server.base_url)
        rc, out, err = run_eval(["distill", "--limit", "1", str(DATA / "cases.jsonl")], env)
    finally:
        server.stop()
    assert rc == 0, err[-3000:]
    m = last_json(out)
    assert m["backend"] == "openai"
    assert m["model"] == "scripted-model"
    assert len(m["produced_by"]) == 1
    assert m["produced_by"][0].startswith("openai:scripted-model")
    assert m["overall"]["fact_recall"] == 1.0, out
    assert m["overall"]["superseded_handled"] == 1.0, out


def _qa_model(request: dict[str, Any]) -> dict[str, Any]:
    """A scripted model for `--qa`: distils as `_llm_answer`, answers from the notes it is handed (the line that
    names a dog breed or a language), and judges by whether the reference occurs in the answer."""
    schema = request["response_format"]["json_schema"]["name"]
    prompt = request["messages"][-1]["content"]
    if schema == "QAAnswer":
        notes = prompt.split("Question", 1)[0]
        for word in ("beagle", "Japanese"):
            if word in notes:
                return {"answer": f"the notes say: {word}"}
        return {"answer": "I don't know"}
    if schema == "QAVerdict":
        reference = prompt.split("Reference answer: ", 1)[1].split("\n", 1)[0]
        answer = prompt.split("Answer: ", 1)[1]
        return {"correct": reference.lower().removeprefix("a ") in answer.lower()}
    return _llm_answer(request)


@pytest.mark.parametrize(("episodes", "accuracy"), [("--episodes", 1.0), ("--no-episodes", 0.0)])
def test_longmemeval_qa_answers_from_the_assembled_context(services: Services, episodes: str, accuracy: float) -> None:
    """`--qa` with an OpenAI-compatible model: each question is answered from hindsight's ranking within the QA
    budget and judged against the reference. With rounds and summaries the evidence is in the notes and both
    answers are judged correct; memories alone hold nothing here (the scripted distiller keeps only an editor),
    so the model sees no notes and both are wrong."""
    from tests.fakes.llm_server import ScriptedLLMServer

    budget = 1000
    server = ScriptedLLMServer(default=_qa_model).start()
    try:
        env = _model_env(services, server.base_url)
        args = ["longmemeval", "--qa", "--qa-budget", str(budget), episodes, str(DATA / "longmemeval.json")]
        rc, out, err = run_eval(args, env)
        requests = list(server.requests)
    finally:
        server.stop()
    assert rc == 0, err[-3000:]
    qa = last_json(out)["qa"]
    assert qa["model"] == "scripted-model"
    assert qa["budget_tokens"] == budget
    assert qa["questions"] == 2
    assert qa["errors"] == 0
    assert qa["accuracy"] == accuracy
    assert set(qa["by_category"]) == {"single-session-user", "knowledge-update"}
    asked = [r for r in requests if r["response_format"]["json_schema"]["name"] == "QAAnswer"]
    assert len(asked) == 2
    assert any("What breed is my dog?" in r["messages"][-1]["content"] for r in asked)
    assert any("(asked on 2024-06-01)" in r["messages"][-1]["content"] for r in asked)


def test_qa_without_a_model_is_refused_before_anything_starts(services: Services) -> None:
    rc, out, err = run_eval(["longmemeval", "--qa", str(DATA / "longmemeval.json")], services.env(), timeout=60)
    assert rc == 2
    assert "HINDSIGHT_LLM__BACKEND=openai" in err
    assert out.strip() == ""


def _started_for(run_dir: Path) -> list[int]:
    """The processes whose command line or environment names `run_dir` (the embedded servers name it in their
    arguments, the worker in HINDSIGHT_DATA_DIR)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            said = (entry / "cmdline").read_bytes() + b"\0" + (entry / "environ").read_bytes()
        except OSError:
            continue  # gone meanwhile, or not ours to read
        if str(run_dir).encode() in said:
            found.append(int(entry.name))
    return found


def test_a_terminated_run_stops_what_it_started(services: Services, tmp_path: Path) -> None:
    """SIGTERM (a CI timeout, `kill`) ends a run as Ctrl-C does: the PostgreSQL, Redis and worker it started stop
    with it. By default Python dies at once on SIGTERM and they kept running."""
    run_dir = tmp_path / "run"
    args = ["eval", "distill", str(DATA / "cases.jsonl"), "--data-dir", str(run_dir)]
    err = tmp_path / "stderr.txt"
    with err.open("wb") as sink:
        cmd = [sys.executable, "-m", "hindsight.cli", *args]
        proc = subprocess.Popen(cmd, env=services.env(), cwd=str(REPO), stdout=subprocess.DEVNULL, stderr=sink)
    try:
        deadline = time.monotonic() + 180
        while not (run_dir / "worker.log").exists():
            assert proc.poll() is None, err.read_text()[-3000:]
            assert time.monotonic() < deadline, "the worker never started"
            time.sleep(0.2)
        assert _started_for(run_dir), "nothing found running for the run (the test would prove nothing)"
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=90)
        deadline = time.monotonic() + 10
        while _started_for(run_dir) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not _started_for(run_dir)
    finally:
        if proc.poll() is None:
            proc.kill()
        for pid in _started_for(run_dir):
            os.kill(pid, signal.SIGKILL)
