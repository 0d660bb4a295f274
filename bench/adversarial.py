"""Hostile input at the size limit: how long the secret redactor and the offline distiller take.

    .venv/bin/python bench/adversarial.py

The inputs are the regression tests' (tests/security/test_redos.py): each attack unit repeated to one turn
at the per-turn limit (32,000 characters), turns packed with short secrets, and one transcript of max-size
turns the distiller's splitters and patterns used to backtrack over. For each it prints the best of three
runs, the issue's bound beside it (50 ms a turn for redaction), and ends with one JSON line.
Before the RE2 redactor and the pattern fixes (issue #10), `"a-"` x 16,000 took 198 s and `"auth."` x 600
took 27 s on this machine.
"""

from __future__ import annotations

import json
import os
import platform
import sys
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from pipeline.offline import OfflineDistiller  # noqa: E402
from pipeline.secrets import redact_secrets  # noqa: E402
from tests.security.test_redos import (  # noqa: E402
    ATTACK_UNITS,
    BUDGET_S,
    DENSE_UNITS,
    DISTILL_TURNS,
    MAX_TURN,
    _best_of_3,
    _fill,
    _transcript,
)


def main() -> None:
    rows: dict[str, float] = {}
    print(f"redaction of one {MAX_TURN:,}-character turn (best of 3; bound {BUDGET_S * 1000:.0f} ms)")
    for group, units in (("attack", ATTACK_UNITS), ("dense", DENSE_UNITS)):
        for unit in units:
            text = _fill(unit)
            ms = _best_of_3(partial(redact_secrets, text)) * 1000
            rows[f"{group}:{unit!r}"] = round(ms, 2)
            print(f"  {group:6} {unit!r:40} {ms:8.1f} ms")
    megabyte = "eyJ-" * 250_000
    mb_s = _best_of_3(lambda: redact_secrets(megabyte))
    print(f"  1 MB of 'eyJ-'                                  {mb_s * 1000:8.1f} ms")

    distiller = OfflineDistiller()
    distiller.distill(_transcript(["我住在上海，I live in Berlin."]))  # lexicons and jieba loaded first
    transcript = _transcript(DISTILL_TURNS)
    distill_s = _best_of_3(lambda: distiller.distill(transcript))
    print(f"offline distillation of {len(DISTILL_TURNS)} max-size attack turns: {distill_s:.2f} s (bound 5 s)")

    attack = [v for k, v in rows.items() if k.startswith("attack:")]
    dense = [v for k, v in rows.items() if k.startswith("dense:")]
    print(
        json.dumps(
            {
                "bench": "adversarial",
                "machine": f"{platform.machine()} {os.cpu_count()} cpu",
                "turn_chars": MAX_TURN,
                "redact_attack_max_ms": max(attack),
                "redact_dense_max_ms": max(dense),
                "redact_bound_ms": BUDGET_S * 1000,
                "redact_1mb_eyj_ms": round(mb_s * 1000, 1),
                "distill_attack_transcript_s": round(distill_s, 2),
                "distill_attack_turns": len(DISTILL_TURNS),
            }
        )
    )


if __name__ == "__main__":
    main()
