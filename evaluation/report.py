"""Tables (rich) and the closing JSON line of each suite."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from rich.console import Console
from rich.table import Table

from evaluation.scoring import DISTILL_KEYS, HALF_DENSE, RETRIEVAL_BUDGETS, CaseScore


def _fmt(v: Any) -> str:
    if v is None:
        return "—"
    if isinstance(v, float):
        return f"{v:.3f}" if v <= 1.0 else f"{v:.0f}"
    return str(v)


def distill_table(metrics: dict[str, Any]) -> Table:
    table = Table(title=f"memory quality — {metrics.get('file', '')} ({metrics['cases']} cases)")
    table.add_column("metric")
    groups = [("overall", metrics["overall"])] + list(metrics["by_lang"].items())
    for name, _ in groups:
        table.add_column(name, justify="right")
    for key in DISTILL_KEYS:
        table.add_row(key, *(_fmt(g.get(key)) for _, g in groups))
    return table


def failures_text(cases: Sequence[CaseScore], stored: dict[str, list[str]], limit_lines: int = 15) -> str:
    """Each failing case: what was expected and went wrong, then what the store holds."""
    failing = [c for c in cases if not c.passed]
    if not failing:
        return ""
    lines = [f"failing cases: {len(failing)} of {len(cases)}"]
    for c in failing:
        lines.append(f"\n✗ {c.case_id} ({c.lang})")
        lines.extend(f"    - {f}" for f in c.failures)
        held = stored.get(c.case_id, [])
        lines.append("    store holds:" if held else "    store holds: (nothing)")
        lines.extend(f"      {h}" for h in held[:limit_lines])
        if len(held) > limit_lines:
            lines.append(f"      … {len(held) - limit_lines} more")
    return "\n".join(lines)


def evidence_table(metrics: dict[str, Any]) -> Table:
    systems = tuple(
        s
        for s in (
            "hindsight",
            "hindsight_memories",
            "hindsight_episodes",
            "hindsight_rounds",
            "dense_turns",
            "bm25_turns",
            "hybrid_turns",
        )
        if s in metrics
    )
    keys = (
        "recall@5",
        "recall@10",
        *(f"recall@{b}tok" for b in RETRIEVAL_BUDGETS),
        HALF_DENSE,
        "tokens@10",
    )
    table = Table(title=f"{metrics['suite']}: evidence recall ({metrics['questions']} questions)")
    table.add_column("category")
    table.add_column("n", justify="right")
    table.add_column("system", no_wrap=True)
    for k in keys:
        table.add_column(k, justify="right")
    rows = [("all", metrics["questions"], {s: metrics[s] for s in systems})]
    rows += [(cat, by[systems[0]].get("n", ""), by) for cat, by in metrics["by_category"].items()]
    for cat, n, by in rows:
        for i, s in enumerate(systems):
            table.add_row(cat if i == 0 else "", str(n) if i == 0 else "", s, *(_fmt(by[s].get(k)) for k in keys))
        ratio = (metrics.get("vs_best_baseline") or {}).get(cat if cat != "all" else "all")
        if ratio:
            cells = ["", "", *(_fmt(ratio.get(k)) if k in ratio else "" for k in keys[2:])]
            table.add_row("", "", "÷ best raw-turn baseline", *cells, style="dim")
    return table


def madial_table(metrics: dict[str, Any]) -> Table:
    keys = ("recall@1", "recall@5", "recall@10", *(f"recall@{b}tok" for b in RETRIEVAL_BUDGETS), "mrr")
    table = Table(title=f"madial: retrieval of relevant memories ({metrics['queries']} queries)")
    table.add_column("system")
    for k in keys:
        table.add_column(k, justify="right")
    for s in ("hindsight", "dense", "bm25", "hybrid"):
        table.add_row(s, *(_fmt(metrics[s].get(k)) for k in keys))
    return table


def json_line(metrics: dict[str, Any]) -> str:
    return json.dumps(metrics, ensure_ascii=False, sort_keys=False, default=str)


def emit(out: Console, metrics: dict[str, Any]) -> None:
    """The last line of a suite: one JSON object, printed raw (no wrapping, no markup)."""
    out.file.write(json_line(metrics) + "\n")
    out.file.flush()


def qa_table(metrics: dict[str, Any]) -> Table:
    """Answer accuracy of `--qa`, overall and per category."""
    qa = metrics["qa"]
    table = Table(title=f"{metrics['suite']}: answer accuracy ({qa['model']}, {qa['budget_tokens']} tokens of context)")
    for col in ("category", "n", "accuracy"):
        table.add_column(col, justify="right" if col != "category" else "left")
    table.add_row("all", str(qa["questions"]), str(qa["accuracy"]))
    for cat, row in qa["by_category"].items():
        table.add_row(cat, str(row["n"]), str(row["accuracy"]))
    if qa["errors"]:
        table.caption = f"{qa['errors']} questions not scored (the model failed after its retries)"
    return table
