"""What the secret redactor lets through, on chat messages written to probe it (security, issue #10's redactor).

    .venv/bin/python bench/secret_probe.py [FILES...] [--half dev|val] [--show]

Each line of a probe file (default: `bench/data/secrets_probe_v1.jsonl` and `secrets_probe_v2.jsonl`) is a message
a person might type to an assistant, with the one credential or personal identifier in it (`secret`, copied
verbatim, and its `kind`) or none (`kind` "benign": an order number, a version, a zip code, talk about passwords).
Helpers wrote both files from a brief that named the kinds and asked for many ways of saying each; they saw no
project code and no test. v1 was split in halves by a hash of the text: the rules of stop 48 were written from the
`dev` half, checked on the `val` half, and then, `val` having been read, measured on v2, written afterwards by
another helper and not read line by line.

Each message goes through `pipeline.secrets.redact_secrets`, the function every path that stores text calls. A
secret counts as leaked when it is still in the output, or when its digits and letters without spaces and dashes
still are (a card number left in its groups). A benign message counts as changed when any of it was redacted.
Prints a table per language and one JSON line; `--show` lists each leak and each benign message changed.
"""

from __future__ import annotations

import hashlib
import json
import re
import sys
from collections import Counter
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pipeline.secrets import redact_secrets  # noqa: E402

DATA = Path(__file__).resolve().parent / "data"
DEFAULT_FILES = [DATA / "secrets_probe_v1.jsonl", DATA / "secrets_probe_v2.jsonl"]


def half(text: str) -> str:
    """The half of v1 a message is in: `dev` (the rules were written from it) or `val`."""
    return "dev" if int(hashlib.sha256(text.encode()).hexdigest(), 16) % 2 == 0 else "val"


def leaked(secret: str, redacted: str) -> bool:
    core = re.sub(r"[\s\-]", "", secret)
    return secret in redacted or (len(core) >= 6 and core in re.sub(r"[\s\-]", "", redacted))


def main(
    files: Annotated[list[Path] | None, typer.Argument(help="Probe files (JSON lines).")] = None,
    only: Annotated[str | None, typer.Option("--half", help="Only this half of each file: dev or val.")] = None,
    show: Annotated[bool, typer.Option(help="List each leak and each benign message changed.")] = False,
) -> None:
    console = Console()
    report: dict[str, dict[str, object]] = {}
    for path in files or DEFAULT_FILES:
        rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
        if only:
            rows = [r for r in rows if half(r["text"]) == only]
        total: Counter[tuple[str, str]] = Counter()
        bad: Counter[tuple[str, str]] = Counter()
        for r in rows:
            out = redact_secrets(r["text"]).text
            key = (r["lang"], r["kind"])
            total[key] += 1
            wrong = out != r["text"] if r["secret"] is None else leaked(r["secret"], out)
            bad[key] += wrong
            if wrong and show:
                console.print(f"{'CHANGED' if r['secret'] is None else 'LEAKED '} {r['lang']} {r['kind']}: {out}")
        table = Table(title=f"{path.name}{f' ({only})' if only else ''}")
        for col in ("lang", "secrets leaked", "leak rate", "benign changed", "benign rate"):
            table.add_column(col)
        figures: dict[str, object] = {}
        for lang in sorted({lang for lang, _ in total}):
            n = sum(v for (la, k), v in total.items() if la == lang and k != "benign")
            n_bad = sum(v for (la, k), v in bad.items() if la == lang and k != "benign")
            b, b_bad = total[(lang, "benign")], bad[(lang, "benign")]
            figures[lang] = {
                "secrets": n,
                "leaked": n_bad,
                "leak_rate": round(n_bad / max(n, 1), 3),
                "benign": b,
                "benign_changed": b_bad,
                "by_kind": {k: f"{bad[(la, k)]}/{v}" for (la, k), v in sorted(total.items()) if la == lang},
            }
            table.add_row(lang, f"{n_bad}/{n}", f"{n_bad / max(n, 1):.3f}", f"{b_bad}/{b}", f"{b_bad / max(b, 1):.3f}")
        console.print(table)
        report[path.name + (f":{only}" if only else "")] = figures
    print(json.dumps({"bench": "secrets", "files": report}, ensure_ascii=False))


if __name__ == "__main__":
    typer.run(main)
