"""Where the agent's socket and traces live: one private directory per user.

Both sides use this module: the agent inside the training process (so it may import only the
standard library) and the client in gpudoctor's process, which may run as another user (root) and
must find the directory from the target's PID alone — hence no environment variable decides it.

Trust (issue 39): /tmp is shared, so anyone can create ``/tmp/gpudoctor-<uid>`` before that user's
agent does and answer in its name. The client trusts a socket only in a directory that is a real
directory (no symlink) owned by the TARGET's uid with no access for others, and only a socket owned
by that uid (:func:`find_socket`; :func:`untrusted_socket` says why one was refused). The agent never
uses a directory it does not own: it takes the next candidate (:func:`ensure_private_dir`), the last
being ``~/.gpudoctor`` in the user's own home, which no one else can plant.
"""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path

#: The fallback directory's name in the user's home (used when the /tmp one is not ours).
HOME_DIR_NAME = ".gpudoctor"
#: Where the per-user directories are made (module constants so tests can point them elsewhere).
RUN_USER = Path("/run/user")
TMP = Path("/tmp")


class PrivateDirError(OSError):
    """The private directory exists but is not safe to use (wrong owner, mode or a symlink)."""


def candidate_dirs(uid: int) -> list[Path]:
    """The private directories the agent of ``uid`` may use, in order of preference."""
    run_user = RUN_USER / str(uid)
    dirs = []
    try:
        if run_user.is_dir() and run_user.stat().st_uid == uid:
            dirs.append(run_user / "gpudoctor")
    except OSError:
        pass
    dirs.append(TMP / f"gpudoctor-{uid}")
    home = _home_of(uid)
    if home is not None:
        dirs.append(home / HOME_DIR_NAME)
    return dirs


def _home_of(uid: int) -> Path | None:
    """``uid``'s home directory from the password database, when it exists and that user owns it."""
    try:
        import pwd

        home = Path(pwd.getpwuid(uid).pw_dir)
        st = os.stat(home)
    except (ImportError, KeyError, OSError):
        return None
    return home if stat.S_ISDIR(st.st_mode) and st.st_uid == uid and home != Path("/") else None


def untrusted_dir(path: Path, uid: int) -> str | None:
    """Why ``path`` is not a private directory of ``uid`` (None: it is one)."""
    try:
        st = os.lstat(path)
    except OSError as exc:
        return f"{path} cannot be read ({exc.strerror})"
    if stat.S_ISLNK(st.st_mode):
        return f"{path} is a symbolic link"
    if not stat.S_ISDIR(st.st_mode):
        return f"{path} is not a directory"
    if st.st_uid != uid:
        return f"{path} belongs to uid {st.st_uid}, not {uid}"
    if st.st_mode & 0o077:
        return f"{path} is open to other users (mode {oct(st.st_mode & 0o777)})"
    return None


def _check_private(path: Path, uid: int) -> None:
    why = untrusted_dir(path, uid)
    if why is not None:
        raise PrivateDirError(why)


def ensure_private_dir() -> Path:
    """Create (or check) this process's private directory, mode 0700, and return it.

    A candidate that exists but is not ours (another user created it first, or it is a symlink or
    not a directory) is passed over, never used or changed; one of ours with a looser mode is set
    back to 0700.

    Raises:
        PrivateDirError: no candidate directory is usable (each one's reason, joined).
    """
    uid = os.geteuid()
    reasons = []
    for path in candidate_dirs(uid):
        try:
            os.mkdir(path, 0o700)
        except FileExistsError:
            pass
        except OSError as exc:
            reasons.append(f"{path}: {exc.strerror}")
            continue
        why = untrusted_dir(path, uid)
        if why is not None and "open to other users" in why:
            # a real directory of ours (lstat); in sticky /tmp only we can rename it: tighten it
            with contextlib.suppress(OSError):
                os.chmod(path, 0o700)
            why = untrusted_dir(path, uid)
        if why is None:
            return path
        reasons.append(why)
    raise PrivateDirError("no private directory for gpudoctor's agent: " + "; ".join(reasons))


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


def process_stopped(pid: int) -> bool:
    """Whether ``pid`` is stopped by a signal (state ``T``: SIGSTOP, Ctrl-Z; not a debugger's
    short ``t`` tracing stop, which py-spy and the injector cause themselves)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as fh:
            text = fh.read()
    except OSError:
        return False
    # the command name (field 2) may hold spaces and parentheses: the state follows the last ")"
    rest = text[text.rfind(")") + 1:].split()
    return bool(rest) and rest[0] == "T"


def _search(pid: int) -> tuple[Path | None, str | None]:
    """(the trusted socket of ``pid``'s agent or None, why a socket found for it was not trusted)."""
    uid = process_uid(pid)
    if uid is None:
        return None, None
    refused = None
    for directory in candidate_dirs(uid):
        path = directory / socket_name(pid)
        try:
            st = os.lstat(path)
        except OSError:
            continue
        if not stat.S_ISSOCK(st.st_mode):
            continue
        why = untrusted_dir(directory, uid)
        if why is None and st.st_uid != uid:
            why = f"{path} belongs to uid {st.st_uid}, not {uid}"
        if why is None:
            return path, None
        refused = refused or why
    return None, refused


def find_socket(pid: int) -> Path | None:
    """The socket of ``pid``'s agent if one exists on disk in a directory that only the process's
    own user owns and can enter, owned by that user (it may still be stale)."""
    return _search(pid)[0]


def untrusted_socket(pid: int) -> str | None:
    """One sentence when an agent socket for ``pid`` exists only where its user does not own it alone
    (another user may have planted it to answer in the agent's name); None otherwise."""
    path, refused = _search(pid)
    if path is not None or refused is None:
        return None
    return (f"refusing the agent socket of process {pid}: {refused}; another user may have created it to "
            "answer in the agent's name (remove that directory, then attach again).")
