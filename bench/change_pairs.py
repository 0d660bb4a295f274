"""Does a user's new turn retire the memory it makes untrue, and only that one? (issue #11, supersession)

    .venv/bin/python bench/change_pairs.py [--show dev] [--dev-only]

Each line of `bench/data/change_pairs_{en,zh}.jsonl` (160 per language, written by a helper from a brief alone,
without the eval files or the code) is a stored memory ("User uses Google Chrome as their browser"), one chat turn
of the user's ("been on firefox for a few months since chrome killed my adblocker") and whether the turn makes the
memory untrue (`replaces`) or not (`keeps`: half of them hard, a second pet, a plan to switch, a friend's move, a
trivial change). The memory is filed under the slot the classifier reads in it, as the extractor would have filed
it; the turn goes through the real extractor and reconcile with that one memory. Printed per language and half
(odd ids `dev`, whose failures may be read with `--show dev`; even ids `val`, aggregates only): the share of
`replaces` pairs whose memory is archived (recall) and of `keeps` pairs whose memory is archived (false
supersession), with the change classifier and, as the baseline beside it, the rule cues alone. `--dev-only`
prints the dev halves alone, for choosing between settings without a look at the val halves.
"""

from __future__ import annotations

import json
import sys
import uuid
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated

import typer

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pipeline.extract import extract_facts  # noqa: E402
from pipeline.reconcile import reconcile  # noqa: E402
from pipeline.slot_model import SlotJudge  # noqa: E402
from pipeline.usem import UsemEmbedder  # noqa: E402
from schemas.pipeline import (  # noqa: E402
    EmbeddedFact,
    ExistingMemory,
    MemoryKind,
    MemoryState,
    Role,
    Source,
    Transcript,
    Turn,
)

DATA = Path(__file__).with_name("data")


def _first_person(memory: str) -> str:
    return memory.replace("User ", "I ", 1).replace("User's ", "My ", 1).replace("用户", "我", 1)


def _archived(row: dict[str, str], judge: SlotJudge, embedder: UsemEmbedder) -> tuple[bool, list[str]]:
    [vector] = embedder.embed([row["old"]])
    old = ExistingMemory(
        id=uuid.uuid4(),
        kind=MemoryKind.fact,
        key=f"user.{judge.predict(_first_person(row['old'])).slot}",
        value=row["old"],
        source=Source.user,
        confidence=0.8,
        state=MemoryState.active,
        embedding=vector,
    )
    turn = Turn(index=0, turn_id="0", role=Role.user, content=row["new"])
    transcript = Transcript(
        id=uuid.uuid4(),
        namespace="bench",
        conversation_id="pairs",
        turns=[turn],
        occurred_at=datetime(2026, 12, 1, tzinfo=UTC),
    )
    facts = extract_facts(transcript, judge)
    if not facts:
        return False, []
    vectors = embedder.embed([f.value for f in facts])
    embedded = [EmbeddedFact(fact=f, embedding=v) for f, v in zip(facts, vectors, strict=True)]
    ops = reconcile(embedded, [old], dedupe_threshold=0.9)
    return any(o.action == "supersede" and o.target_id == old.id for o in ops), [f"{f.key}: {f.value}" for f in facts]


def main(
    show: Annotated[str, typer.Option(help="Print the failures of this half (dev only).")] = "",
    dev_only: Annotated[bool, typer.Option(help="Print the dev halves' figures alone.")] = False,
) -> None:
    if show not in ("", "dev"):
        raise typer.BadParameter("only the dev half's failures may be read")
    embedder = UsemEmbedder()
    judges = {"rules": SlotJudge(embedder, change=False), "model": SlotJudge(embedder)}
    report: dict[str, dict[str, dict[str, float]]] = {}
    for name, judge in judges.items():
        tally: Counter[tuple[str, str, bool]] = Counter()
        for lang in ("en", "zh"):
            rows = [json.loads(line) for line in (DATA / f"change_pairs_{lang}.jsonl").open(encoding="utf-8")]
            judge.prime([r["new"] for r in rows])
            for r in rows:
                half = "dev" if int(r["id"].rsplit("-", 1)[1]) % 2 else "val"
                archived, facts = _archived(r, judge, embedder)
                tally[f"{lang}-{half}", r["label"], archived] += 1
                if show == half and name == "model" and archived != (r["label"] == "replaces"):
                    typer.echo(f"{r['id']} {r['label']}: {r['old']} || {r['new']} || {facts}", err=True)

        def share(part: str, label: str, tally: Counter[tuple[str, str, bool]] = tally) -> float:
            return round(tally[part, label, True] / max(1, tally[part, label, True] + tally[part, label, False]), 3)

        parts = ("en-dev", "zh-dev") if dev_only else ("en-dev", "en-val", "zh-dev", "zh-val")
        report[name] = {
            part: {"recall": share(part, "replaces"), "false_supersession": share(part, "keeps")} for part in parts
        }
    for part in report["model"]:
        m, r = report["model"][part], report["rules"][part]
        typer.echo(
            f"{part}: recall {m['recall']:.3f} (rules alone {r['recall']:.3f}), "
            f"false supersession {m['false_supersession']:.3f} (rules alone {r['false_supersession']:.3f})",
            err=True,
        )
    typer.echo(json.dumps({"bench": "change_pairs", "produced_by": judges["model"].produced_by, **report}))


if __name__ == "__main__":
    typer.run(main)
