"""Do memory values still say "last month" or "年底" when they are read a year later? (issue #11, values)

    .venv/bin/python bench/value_time.py [FILES...] [--show]

Every conversation of each eval-format file (default: `bench/data/cases_*.jsonl` and
`../shared/eval/distill-dev.jsonl`) goes through the offline extractor at the time the case gives it
(`days_ago` counted back from now), and each value it writes is checked for time said relative to that moment.
The check is a list of its own, written apart from `pipeline/timeref.py` so that the module is not measured by
itself: `resolvable` counts values holding an expression a date could replace ("last month", "a few weeks
ago", "去年", "年底", "七月份", "两三个月前"); `vague` those holding a time with no fixed point ("recently", "最近",
"前阵子"), which SPEC leaves as said. A weekly day ("every Friday", "每周六") is neither. Prints one JSON line; `--show`
lists the values first.
"""

from __future__ import annotations

import json
import re
import sys
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Annotated

import typer

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from evaluation.data import load_cases  # noqa: E402
from pipeline.extract import extract_facts  # noqa: E402
from pipeline.slot_model import default_judge  # noqa: E402
from schemas.pipeline import Transcript, Turn  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]

_ZH_MONTH = r"(?:十[一二]?|[一二三四五六七八九]|\d{1,2})月"
RESOLVABLE = re.compile(
    # Chinese: a named neighbour of now, a count back or ahead, a month or its start or end without a year
    r"[上下这本]个?(?:周|星期|礼拜|月)|[去今明前]年|[昨今明]天|后天(?!天)|"
    r"(?<![\d一二两三四五六七八九十年])(?:几|[一二两三四五六七八九十]{1,2}|\d{1,2})(?:天|个?(?:星期|礼拜|周)|个月|年)[前后](?!后)|"
    rf"(?<![\d年])(?:年[初底末]|月[初底末])|(?<![\d年])(?<!每){_ZH_MONTH}(?:份|[初底末])?(?![\d日号天])|"
    # English: a named neighbour of now, a count back or ahead, a month without its year after a preposition
    r"\b(?:yesterday|today|tonight|tomorrow|(?:last|next|this) (?:week|weekend|month|year)|"
    r"(?:a|an|one|two|three|four|five|six|\d+|a couple(?: of)?|couple of|a few|few|several) "
    r"(?:days?|weeks?|months?|years?) (?:ago|from now)|in (?:a|an|one|two|three|\d+) (?:days?|weeks?|months?|years?)|"
    r"(?:in|since|by|until) (?:january|february|march|april|may|june|july|august|september|october|november|december)"
    r"\b(?!,? (?:19|20)\d\d))",
    re.I,
)
VAGUE = re.compile(r"最近|近来|前阵子|前段时间|这阵子|\b(?:recently|lately|these days|a while (?:ago|back))\b", re.I)


def _transcripts(path: Path, now: datetime) -> list[tuple[str, Transcript]]:
    """Each conversation of a case file (read and checked as `hindsight eval distill` reads it), at its case's time."""
    out = []
    for case in load_cases(path).cases:
        for conv in case.conversations:
            turns = [
                Turn(index=i, turn_id=t.turn_id or str(i), role=t.role, content=t.content, name=t.name)
                for i, t in enumerate(conv.turns)
            ]
            at = now - timedelta(days=conv.days_ago)
            transcript = Transcript(id=uuid.uuid4(), namespace="t", conversation_id="c", occurred_at=at, turns=turns)
            out.append((case.id, transcript))
    return out


def main(
    files: Annotated[list[Path] | None, typer.Argument(help="Eval-format case files.")] = None,
    show: Annotated[bool, typer.Option(help="List the values that hold a relative time.")] = False,
) -> None:
    default = [*sorted((ROOT / "bench" / "data").glob("cases_*.jsonl")), ROOT / "../shared/eval/distill-dev.jsonl"]
    paths = files or default
    judge, now = default_judge(), datetime.now(UTC)
    values = resolvable = vague = 0
    for path in paths:
        for case_id, transcript in _transcripts(path, now):
            for fact in extract_facts(transcript, judge):
                values += 1
                hit, loose = RESOLVABLE.search(fact.value), VAGUE.search(fact.value)
                resolvable += hit is not None
                vague += loose is not None
                if show and (hit or loose):
                    said = (hit or loose).group(0)  # type: ignore[union-attr]
                    print(f"{'resolvable' if hit else 'vague':10s} {case_id:20s} {said!r:14s} {fact.value}")
    print(
        json.dumps(
            {
                "files": len(paths),
                "values": values,
                "resolvable_left": resolvable,
                "resolvable_share": round(resolvable / max(values, 1), 4),
                "vague": vague,
            }
        )
    )


if __name__ == "__main__":
    typer.run(main)
