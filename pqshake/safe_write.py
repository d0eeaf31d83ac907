"""Writes that never follow a symbolic link, for everything pqshake writes into a run directory
or an analysis folder.

pqshake runs as root and run directories travel (tarballs, shards for `merge`, a shared
results/): a link planted in one must not make pqshake write outside it. So:

- a whole file is written to a new temporary name in the same folder (O_CREAT | O_EXCL |
  O_NOFOLLOW: never an existing file, never through a link), fsynced, then renamed over the
  destination; a rename replaces a link, it does not write through it;
- an append (the run log) opens with O_NOFOLLOW and O_NONBLOCK, and only a regular file with one
  name (a hard link's other name would be appended to as well);
- a folder is created component by component below a root, refusing a link on the way;
- before a command writes, check_tree() refuses a run or analysis folder holding a link where
  pqshake writes, in one line naming the link and the fix; in a run directory (check_run) also a
  FIFO, device or socket, a file over its read cap (pqshake/results/safe_read.py) and a
  hard-linked log, so that a refused run is left exactly as it was.

Temporary names are pqshake's own (`.<name>.pqs-tmp.<pid>.<hex>`, folders
`.pqs-stage.<pid>.<hex>`), so remove_stale_temps() can remove what an interrupted write left, and
only that.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import shutil
import stat
from pathlib import Path
from typing import Iterable, Iterator

from pqshake.errors import UserError

TMP_MARK = ".pqs-tmp"
STAGE_PREFIX = ".pqs-stage."
# pqshake's temporary names: this version's, and earlier versions' `.<name>.tmp[.<pid>]`
# (rundir.write_atomic, the tables, the analysis frames), which an interrupted write left too.
_TMP_NAME = re.compile(r"^\..+\.pqs-tmp\.(\d+)\.[0-9a-f]{8}$")
_STAGE_NAME = re.compile(r"^\.pqs-stage\.(\d+)\.[0-9a-f]{8}$")
_OLD_TMP_NAME = re.compile(r"^\.(?:DONE|experiment\.resolved\.yaml|[a-z-]+\.(?:json|parquet|csv))\.tmp(?:\.(\d+))?$")

# Where pqshake writes in a run directory (check_tree): files, and folders whose whole content it
# writes. The analysis folder's own names follow (an --out folder holds other files too).
RUN_WRITES = ("meta.json", "plan.json", "experiment.resolved.yaml", "timer-header.json", "samples.parquet",
              "server.parquet", "cells.parquet", "experiment", "raw", "net", "logs", "analysis")
ANALYSIS_WRITES = ("summary.parquet", "summary.csv", "summary.tex", "summary.md", "analysis.json", "report.md",
                   "machines.csv", "speed.jsonl", "reproduction.md",
                   "reproduction.csv", "figures")

# Files pqshake appends to in a run directory (the rest it writes whole, by rename): one with
# another name (a hard link) is refused, the append would write that file too.
APPENDS = ("logs/run.log",)

FILE_MODE = 0o644
SECRET_MODE = 0o600  # key logs and captures: the owner only (docs/run-directory-security.md)


# ---------------------------------------------------------------------------------------------
# Refusing links


def link_message(p: Path) -> str:
    try:
        target = os.readlink(p)
    except OSError:
        target = "?"
    return (f"{p}: a symbolic link (to {target}) where pqshake writes; pqshake writes nothing through links "
            f"(a run directory may come from elsewhere): remove it (rm {p}), then run again")


def refuse_link(p: Path | str) -> None:
    p = Path(p)
    if p.is_symlink():
        raise UserError(link_message(p), exit_code=1)


def _below(path: Path, root: Path) -> list[Path]:
    """The components of path below root (root excluded, path included), outermost first."""
    try:
        rel = path.relative_to(root)
    except ValueError:
        return [path]
    out, cur = [], root
    for part in rel.parts:
        cur = cur / part
        out.append(cur)
    return out


def _judge(p: Path, base: Path, files: bool) -> bool:
    """One name of a checked tree (lstat, never followed): a link refused; with files, also
    anything but a folder or a regular file (a FIFO, a device, a socket), a regular file over
    its read cap, and an appended file with another name (APPENDS). True for a folder."""
    try:
        st = os.lstat(p)
    except FileNotFoundError:
        return False
    if stat.S_ISLNK(st.st_mode):
        raise UserError(link_message(p), exit_code=1)
    if stat.S_ISDIR(st.st_mode) or not files:
        return stat.S_ISDIR(st.st_mode)
    from pqshake.results import safe_read as sr  # the read side's caps (pqshake/results imports this module)

    if not stat.S_ISREG(st.st_mode):
        raise sr.not_regular(p, st.st_mode)
    cap = sr.cap_for(p.name)
    if cap is not None and st.st_size > cap:
        raise sr.too_large(p, st.st_size, cap)
    if st.st_nlink > 1 and p.relative_to(base).as_posix() in APPENDS:
        raise hardlink_refused(p, st.st_nlink)
    return False


def check_tree(base: Path | str, names: Iterable[str], files: bool = False) -> None:
    """Refuse (one line) a link at any of `names` under base or anywhere inside those of them
    that are folders; with files (a run directory, where pqshake also reads), also what
    _judge refuses: a FIFO, device or socket (opening one may wait forever or never end), a
    file over its read cap, a hard-linked log. base itself is the user's choice and not judged.
    One lstat per name, all before the command changes anything."""
    base = Path(base)
    if not base.is_dir():
        return
    for name in names:
        p = base / name
        if _judge(p, base, files):
            for top, dirs, fs in os.walk(p):  # os.walk does not descend into links
                for n in dirs + fs:
                    _judge(Path(top) / n, base, files)


def check_run(run: Path | str) -> None:
    """A run directory: no link where pqshake writes (its files and folders, the analysis), and
    nothing pqshake could not read whole and at once (check_tree's files)."""
    check_tree(run, RUN_WRITES, files=True)


# ---------------------------------------------------------------------------------------------
# Folders


def ensure_dir(path: Path | str, root: Path | str, mode: int = 0o755) -> Path:
    """mkdir -p that refuses a link on the way: every component of path below root (the run
    directory or the analysis folder)."""
    path, root = Path(path), Path(root)
    root.mkdir(parents=True, exist_ok=True)
    for d in _below(path, root):
        refuse_link(d)
        try:
            d.mkdir(mode=mode)
        except FileExistsError:
            pass
        refuse_link(d)  # made a link between the two calls: refused all the same
    return path


def _check_parents(path: Path, root: Path | None) -> None:
    for d in _below(path.parent, Path(root)) if root is not None else [path.parent]:
        refuse_link(d)


# ---------------------------------------------------------------------------------------------
# Whole files: temporary name, fsync, rename


def _tmp_name(dest: Path) -> Path:
    return dest.with_name(f".{dest.name}{TMP_MARK}.{os.getpid()}.{os.urandom(4).hex()}")


def _create(p: Path, mode: int) -> int:
    return os.open(p, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode)


def fsync_dir(path: Path | str) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def publish(tmp: Path, dest: Path) -> Path:
    """Put a finished temporary file in place: fsync it, rename it over dest (a link at dest is
    refused, not followed), fsync the folder."""
    fd = os.open(tmp, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    refuse_link(dest)
    os.replace(tmp, dest)
    fsync_dir(dest.parent)
    return dest


@contextlib.contextmanager
def replacing(dest: Path | str, root: Path | str | None = None, mode: int = FILE_MODE) -> Iterator[Path]:
    """A new empty temporary file beside dest for a writer that wants a path (savefig,
    to_parquet, copyfile); renamed over dest when the block ends, removed if it fails."""
    dest = Path(dest)
    _check_parents(dest, Path(root) if root is not None else None)
    refuse_link(dest)
    tmp = _tmp_name(dest)
    os.close(_create(tmp, mode))
    try:
        yield tmp
        publish(tmp, dest)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise


def write_bytes(dest: Path | str, data: bytes, root: Path | str | None = None, mode: int = FILE_MODE) -> Path:
    """dest is either absent, the old file, or the whole new one; never written through a link."""
    dest = Path(dest)
    with replacing(dest, root, mode) as tmp:
        fd = os.open(tmp, os.O_WRONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
    return dest


def write_text(dest: Path | str, text: str, root: Path | str | None = None, mode: int = FILE_MODE) -> Path:
    return write_bytes(dest, text.encode("utf-8"), root, mode)


@contextlib.contextmanager
def staging(folder: Path | str) -> Iterator[Path]:
    """A private new folder inside `folder` (0700, pqshake's temporary name) for a writer that
    names its own files (matplotlib's save); move them out with publish(). Removed at the end."""
    folder = Path(folder)
    refuse_link(folder)
    d = folder / f"{STAGE_PREFIX}{os.getpid()}.{os.urandom(4).hex()}"
    d.mkdir(mode=0o700)  # fails on anything already there, a link included
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


def hardlink_refused(p: Path, links: int) -> UserError:
    return UserError(f"{p}: a file with {links} names (hard links), which pqshake appends to: the line would land in "
                     f"the other names' file too (a run directory may come from elsewhere); give it a file of its own "
                     f"(cp {p} {p}.own && mv {p}.own {p}), then run again", exit_code=1)


def open_append(path: Path | str, mode: int = FILE_MODE):
    """A text file opened for appending (the run log): never a link, never waiting (O_NONBLOCK:
    a FIFO without a reader fails at once, one with a reader is refused on the descriptor), a
    regular file with one name only (appending to a hard link writes the other name's file)."""
    path = Path(path)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, mode)
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise UserError(link_message(path), exit_code=1) from None
        if e.errno == errno.ENXIO:  # a FIFO nobody reads
            from pqshake.results import safe_read as sr

            raise sr.not_regular(path, stat.S_IFIFO) from None
        raise
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            from pqshake.results import safe_read as sr

            raise sr.not_regular(path, st.st_mode)
        if st.st_nlink > 1:
            raise hardlink_refused(path, st.st_nlink)
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return os.fdopen(fd, "a", encoding="utf-8")


def probe_writable(folder: Path | str) -> None:
    """Create and remove a file of pqshake's temporary naming in folder (OSError if it cannot)."""
    folder = Path(folder)
    p = _tmp_name(folder / ".pqs-write-test")
    os.close(_create(p, FILE_MODE))
    p.unlink()


# ---------------------------------------------------------------------------------------------
# What an interrupted write left


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # someone else's process: alive
    return True


def _stale_name(name: str) -> re.Match | None:
    """A temporary name of pqshake's (the match: group 1 the writer's pid, if it has one)."""
    for pat in (_TMP_NAME, _STAGE_NAME, _OLD_TMP_NAME):
        m = pat.match(name)
        if m:
            return m
    return None


def _stale(name: str) -> bool:
    m = _stale_name(name)
    return m is not None and (m.group(1) is None or not _alive(int(m.group(1))))


def remove_stale_temps(base: Path | str, names: Iterable[str] = RUN_WRITES) -> list[Path]:
    """Remove the temporary files (and staging folders) of pqshake's naming whose writer is no
    longer running, in base and in the folders of `names` under it. Nothing else is touched,
    nor followed: a link is removed as a link. Returns what was removed."""
    base = Path(base)
    out: list[Path] = []
    tops = [base] + [base / n for n in names if (base / n).is_dir() and not (base / n).is_symlink()]
    for top in tops:
        walk = os.walk(top) if top != base else [(str(base), [], os.listdir(base))]
        for d, dirs, files in walk:
            for n in list(dirs) + list(files):
                if not _stale(n):
                    continue
                p = Path(d) / n
                st = p.lstat()
                if stat.S_ISDIR(st.st_mode):
                    shutil.rmtree(p, ignore_errors=True)
                    if n in dirs:
                        dirs.remove(n)
                else:
                    p.unlink(missing_ok=True)
                out.append(p)
    return out


# ---------------------------------------------------------------------------------------------
# A full or read-only disk, in one line


_NO_SPACE = {errno.ENOSPC: "the disk is full", errno.EDQUOT: "the disk quota is used up",
             errno.EROFS: "the file system is read-only"}


def _errno_of(e: BaseException) -> int | None:
    """The errno of an OSError, also when a library put it only in the message (pyarrow:
    '... [errno 28] No space left on device')."""
    while e is not None:
        if isinstance(e, OSError):
            if e.errno in _NO_SPACE:
                return e.errno
            m = re.search(r"\[errno (\d+)\]", str(e), re.I)
            if m and int(m.group(1)) in _NO_SPACE:
                return int(m.group(1))
        e = e.__cause__ or e.__context__
    return None


def is_disk_full(e: BaseException) -> bool:
    """No space: the disk or the quota is full (a run stops resumable on this)."""
    return _errno_of(e) in (errno.ENOSPC, errno.EDQUOT)


def no_space_error(e: BaseException, where: Path | str, then: str) -> UserError | None:
    """One line for a full disk, a used-up quota or a read-only file system while writing under
    `where` (None for any other error)."""
    code = _errno_of(e)
    if code is None:
        return None
    name = getattr(e, "filename", None)
    # a temporary of ours means nothing to the user: the folder it was written in does
    path = where if not name or _stale_name(Path(str(name)).name) else name
    return UserError(f"{path}: cannot write, {_NO_SPACE[code]} ({errno.errorcode[code]}); {then}", exit_code=1)


@contextlib.contextmanager
def storage_errors(where: Path | str, then: str = "free some space (or choose another folder with --out DIR), then run it again"):
    """Turn a full / read-only disk inside the block into one line naming where."""
    try:
        yield
    except OSError as e:
        err = no_space_error(e, where, then)
        if err is None:
            raise
        raise err from None
