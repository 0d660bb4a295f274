"""`--qa`: answer each benchmark question from hindsight's assembled context with the configured model, and judge
the answer against the benchmark's reference with the same model.

The judge follows each benchmark's published rubric, in our words: LongMemEval's per question type (a response
is correct when it contains the reference answer; off-by-one counts of days are forgiven in temporal reasoning;
the updated answer counts in knowledge updates; a preference question is judged against its rubric), and
LoCoMo's generous CORRECT/WRONG judging (the same thing, person or time, in any wording or format).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime

from pydantic import BaseModel, Field

from hindsight.errors import HindsightError
from pipeline.base import LLMClient

ANSWER_SYSTEM = (
    "You answer a question about a user from notes of earlier conversations with them. Use only the notes. "
    'Answer with a short phrase. If the notes do not say, answer "I don\'t know". The notes carry the date each '
    'thing was said; resolve relative times ("last week") against those dates.'
)

JUDGE_SYSTEM = (
    "You grade an answer to a question against the reference answer. Reply whether the answer is correct. "
    "Judge meaning, not wording or format."
)

RUBRICS = {
    "locomo": (
        "Be generous: the answer is correct when it refers to the same thing, person, place or time as the "
        "reference, even in other words, at another level of detail, or in another date format (7 May 2023 and "
        "May 7th are the same). It is wrong when it names something else or says it does not know."
    ),
    "longmemeval": (
        "The answer is correct when it contains the reference answer or something equivalent to it. An answer "
        "that gives only part of what is asked, or a different answer, is wrong."
    ),
    "temporal-reasoning": (
        "The answer is correct when it contains the reference answer or something equivalent to it. Do not count "
        "an off-by-one error in a number of days, weeks or months as wrong. A different answer is wrong."
    ),
    "knowledge-update": (
        "The answer is correct when it gives the updated information of the reference answer, even if it also "
        "mentions what was true before. Giving only the earlier information is wrong."
    ),
    "single-session-preference": (
        "The reference is a rubric of what a good personalised answer does. The answer is correct when it recalls "
        "and uses the user's information as the rubric asks; it need not cover every point."
    ),
}


class QAAnswer(BaseModel):
    answer: str = Field(max_length=2000)


class QAVerdict(BaseModel):
    correct: bool


def rubric(suite: str, category: str) -> str:
    return RUBRICS.get(category if suite == "longmemeval" else suite) or RUBRICS[suite]


def answer_messages(question: str, context: str, asked_at: datetime | None) -> list[dict[str, str]]:
    when = f" (asked on {asked_at:%Y-%m-%d})" if asked_at is not None else ""
    notes = context.strip() or "(no notes)"
    return [
        {"role": "system", "content": ANSWER_SYSTEM},
        {"role": "user", "content": f"Notes:\n{notes}\n\nQuestion{when}: {question}"},
    ]


def judge_messages(suite: str, category: str, question: str, reference: str, answer: str) -> list[dict[str, str]]:
    return [
        {"role": "system", "content": f"{JUDGE_SYSTEM} {rubric(suite, category)}"},
        {"role": "user", "content": f"Question: {question}\nReference answer: {reference}\nAnswer: {answer}"},
    ]


@dataclass
class QA:
    """Answers and judges questions with one model; collects accuracy by category."""

    client: LLMClient
    suite: str
    budget_tokens: int = 1000
    rows: list[tuple[str, bool]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def score(
        self, *, qid: str, question: str, category: str, reference: str, context: str, asked_at: datetime | None
    ) -> bool | None:
        """Answer and judge one question; None (and the error kept) when the model failed after its retries."""
        try:
            answer = self.client.generate(answer_messages(question, context, asked_at), QAAnswer).answer
            verdict = self.client.generate(judge_messages(self.suite, category, question, reference, answer), QAVerdict)
        except HindsightError as exc:
            self.errors.append(f"{qid}: {exc}")
            return None
        self.rows.append((category, verdict.correct))
        return verdict.correct

    def metrics(self) -> dict[str, object]:
        by: dict[str, list[bool]] = defaultdict(list)
        for cat, ok in self.rows:
            by[cat].append(ok)

        def acc(xs: list[bool]) -> float | None:
            return round(sum(xs) / len(xs), 4) if xs else None

        return {
            "model": self.client.model,
            "budget_tokens": self.budget_tokens,
            "questions": len(self.rows),
            "accuracy": acc([ok for _, ok in self.rows]),
            "errors": len(self.errors),
            "first_errors": self.errors[:5],
            "by_category": {cat: {"n": len(xs), "accuracy": acc(xs)} for cat, xs in sorted(by.items())},
        }
