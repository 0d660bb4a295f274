"""Test-only worker hook, loaded with `celery worker -I tests.faults.hooks` by the fault suite only.

It crashes a worker child (SIGKILL to itself) right after a distill task committed its transcript as
`done` and before the parent process acknowledges the message: the window in which a message is
redelivered although its work is already in Postgres. Each crash consumes one token file in
`<data_dir>/crash-after-commit/`, so a scenario decides how many crashes happen; each crash leaves a
`crashed-<transcript id>` file as evidence.
"""

from __future__ import annotations

import contextlib
import os
import signal
from typing import Any

from celery.signals import task_postrun

from hindsight.config import get_settings


@task_postrun.connect
def _crash_after_commit(task: Any = None, args: Any = None, retval: Any = None, **_: Any) -> None:
    if getattr(task, "name", None) != "distill.transcript" or not isinstance(retval, dict):
        return
    if retval.get("status") != "done":
        return
    tokens = get_settings().data_dir / "crash-after-commit"
    if not tokens.is_dir():
        return
    for token in sorted(tokens.glob("token-*")):
        with contextlib.suppress(FileNotFoundError):
            token.unlink()  # atomic claim: only one child gets each token
            (tokens / f"crashed-{args[0]}").touch()
            os.kill(os.getpid(), signal.SIGKILL)
