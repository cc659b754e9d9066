"""Where the agent's socket and traces live: one private directory per user.

Both sides use this module: the agent inside the training process (so it may import only the
standard library) and the client in gpudoctor's process, which may run as another user (root) and
must find the directory from the target's PID alone — hence no environment variable decides it.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path


class PrivateDirError(OSError):
    """The private directory exists but is not safe to use (wrong owner, mode or a symlink)."""


def candidate_dirs(uid: int) -> list[Path]:
    """The private directories the agent of ``uid`` may use, in order of preference."""
    run_user = Path(f"/run/user/{uid}")
    dirs = []
    try:
        if run_user.is_dir() and run_user.stat().st_uid == uid:
            dirs.append(run_user / "gpudoctor")
    except OSError:
        pass
    dirs.append(Path(f"/tmp/gpudoctor-{uid}"))
    return dirs


def _check_private(path: Path, uid: int) -> None:
    st = os.lstat(path)
    if not stat.S_ISDIR(st.st_mode):
        raise PrivateDirError(f"{path} is not a directory")
    if st.st_uid != uid:
        raise PrivateDirError(f"{path} belongs to uid {st.st_uid}, not {uid}")
    if st.st_mode & 0o077:
        raise PrivateDirError(f"{path} is readable by others (mode {oct(st.st_mode & 0o777)})")


def ensure_private_dir() -> Path:
    """Create (or check) this process's private directory, mode 0700, and return it.

    Raises:
        PrivateDirError: the directory exists but another user owns it or others can read it.
    """
    uid = os.geteuid()
    path = candidate_dirs(uid)[0]
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass
    _check_private(path, uid)
    return path


def socket_name(pid: int) -> str:
    return f"agent-{pid}.sock"


def process_uid(pid: int) -> int | None:
    """Effective uid of ``pid`` from /proc, or None when the process does not exist."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii", errors="replace") as fh:
            for line in fh:
                if line.startswith("Uid:"):
                    return int(line.split()[2])
    except (OSError, ValueError, IndexError):
        return None
    return None


def find_socket(pid: int) -> Path | None:
    """The socket of ``pid``'s agent if one exists on disk (it may still be stale)."""
    uid = process_uid(pid)
    if uid is None:
        return None
    for directory in candidate_dirs(uid):
        path = directory / socket_name(pid)
        try:
            if stat.S_ISSOCK(os.lstat(path).st_mode):
                return path
        except OSError:
            continue
    return None
