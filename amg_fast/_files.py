"""Files written whole or not at all, and the leftovers of writers that died.

Every writer of amg_fast writes `<name>.tmp-<pid>` beside the target and renames it over the
target when complete, so a reader never sees a half-written file. A writer killed in between
(kill -9, power loss) leaves its temp file behind; the next writer of the same target removes
the temp files of writers that are no longer running (remove_stale_temps).
"""
from __future__ import annotations

import contextlib
import glob
import os
import stat
from pathlib import Path

__all__ = ["temp_path", "atomic_path", "atomic_write_text", "remove_stale_temps", "check_writable_dir",
           "check_output_file"]


def temp_path(path) -> Path:
    """The temp file this process writes `path` through: `<name>.tmp-<pid>` in the same folder."""
    path = Path(path)
    return path.with_name(f"{path.name}.tmp-{os.getpid()}")


def _pid_running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's live process
        return True
    return True


def remove_stale_temps(path) -> list[Path]:
    """Remove `<name>.tmp-<pid>` files of `path` whose writer process no longer runs; returns them."""
    path = Path(path)
    removed = []
    for tmp in path.parent.glob(glob.escape(path.name) + ".tmp-*"):
        pid = tmp.name.rsplit(".tmp-", 1)[1]
        if pid.isdigit() and int(pid) != os.getpid() and not _pid_running(int(pid)):
            tmp.unlink(missing_ok=True)
            removed.append(tmp)
    return removed


@contextlib.contextmanager
def atomic_path(path):
    """Yield the temp path to write `path` through; rename it to `path` only if the block succeeds
    (the temp file is removed otherwise). Stale temp files of dead writers are removed first."""
    path = Path(path)
    remove_stale_temps(path)
    tmp = temp_path(path)
    try:
        yield tmp
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def atomic_write_text(path, text: str) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(text)


def check_writable_dir(name: str, path, *, value=None) -> None:
    """Require that directory `path` exists or can be created and written: its nearest existing
    ancestor is a directory this process may write. name is the argument, e.g. '--out', and
    value what it was given (default: path; a file's name whose folder is `path`)."""
    path = Path(path)
    value = path if value is None else value
    existing = next((p for p in (path, *path.parents) if p.exists()), None)
    if existing is not None and not existing.is_dir():
        where = "is a file" if existing == Path(value) else f"lies under {existing}, which is a file"
        raise ValueError(f"{name} {value}: {where}, not a directory; choose a path in a directory")
    if existing is not None and not os.access(existing, os.W_OK | os.X_OK):
        raise ValueError(f"{name} {value}: {existing} is not writable by this user; choose a writable directory")


def check_output_file(name: str, path) -> Path:
    """The file that argument `name` (given `path`) is to be written to, checked before any work:
    a symlink is followed to its target, which is written through (the link stays a link); the
    target must be a regular file or not exist yet, in an existing directory this process may
    write. Returns the real target, for atomic_path / atomic_write_text."""
    given = Path(path)
    try:
        target = Path(os.path.realpath(given, strict=True))
    except (FileNotFoundError, NotADirectoryError):  # a new file (or a link to one), or a path below a file
        target = Path(os.path.realpath(given))
    except OSError as err:  # a symlink loop
        raise ValueError(f"{name} {path}: cannot be followed to a file ({err.strerror or err})") from None
    shown = f"{path}" if target == given.absolute() else f"{path} (a symlink to {target})"
    if target.is_dir():
        raise ValueError(f"{name} {shown}: is a directory; give a file name")
    if target.exists() and not stat.S_ISREG(target.stat().st_mode):
        raise ValueError(f"{name} {shown}: is not a regular file (a device, pipe or socket); allowed: a regular file "
                         "or a new name, which is written whole through a temp file beside it")
    folder = target.parent if given.is_symlink() else given.parent  # as the user wrote it, unless a link
    check_writable_dir(name, folder, value=path)
    if not folder.exists():
        raise ValueError(f"{name} {shown}: its folder {folder} does not exist; create it first")
    return target
