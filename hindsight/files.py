"""Files that may hold user text (logs, process output, the embedded Redis's data) are private to the user
hindsight runs as: 0600, in 0700 directories.

The mode is given when the file is created (os.open's mode, a child process's umask), so there is never a
moment when another user could open it; a chmod afterwards would leave that window open. A file or one of
hindsight's own directories left wider by an older version is narrowed as well.
"""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path
from typing import IO, Any, Literal

PRIVATE_FILE = 0o600
PRIVATE_DIR = 0o700
PRIVATE_UMASK = 0o077
"""For child processes (redis-server, the stack's worker, beat and API): what they create is private too."""


def private_dir(path: Path, *, own: bool = True) -> Path:
    """Create `path`, and its missing parents, as 0700.

    `own`: the directory is hindsight's alone (data_dir, its logs, the embedded Redis's), so an existing one
    is narrowed too. Otherwise (the folder of a configured log file, say) an existing directory is left as
    the operator made it."""
    missing = [p for p in (path, *path.parents) if not p.exists()]
    for p in reversed(missing):
        # Path.mkdir(parents=True) would create the parents with the default mode, not this one.
        with contextlib.suppress(FileExistsError):
            os.mkdir(p, PRIVATE_DIR)
    if own:
        _narrow(path, PRIVATE_DIR)
    return path


def open_private(path: Path, mode: Literal["a", "ab"] = "a") -> IO[Any]:
    """Open `path` for appending; created 0600 (and its folder 0700 when it is created here)."""
    private_dir(path.parent, own=False)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, PRIVATE_FILE)
    try:
        _narrow_fd(fd)
        if mode == "ab":
            return os.fdopen(fd, "ab")
        return os.fdopen(fd, "a", encoding="utf-8", buffering=1)
    except BaseException:
        os.close(fd)
        raise


def _narrow(path: Path, mode: int) -> None:
    if stat.S_IMODE(path.stat().st_mode) & ~mode:
        with contextlib.suppress(PermissionError):  # not ours to change: leave it, as the operator made it
            os.chmod(path, mode)


def _narrow_fd(fd: int) -> None:
    # A file created by an older version (0644) keeps user text already written: narrow it now.
    if stat.S_IMODE(os.fstat(fd).st_mode) & ~PRIVATE_FILE:
        with contextlib.suppress(PermissionError):
            os.fchmod(fd, PRIVATE_FILE)
