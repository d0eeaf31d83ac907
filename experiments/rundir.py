"""The run directory: layout, locking, provenance, atomic cell completion, sessions. What the
files hold (the results format: its version, the tables, the JSON-lines reader, the migration
of earlier runs) belongs to pqshake/results/; the runner and analysis/synthetic.py write whole
tables and runs through here, the analysis reads through pqshake.results.

    results/<name>/<id>/
      meta.json                  format version, provenance, seeds, times, status
      experiment/                the experiment file and its includes, verbatim
      experiment.resolved.yaml   includes merged, seed fixed: what `resume` re-plans from
      plan.json                  the ordered cells
      raw/<cell_id>/             source of truth, one folder per cell:
        timer.jsonl server.jsonl rtt.json *.stderr DONE (written last, atomically)
        qlog/server/ qlog/client/  quic cells with `qlog: true`: the programs' qlog traces
        <cell_id>.pcapng <cell_id>.keys   `capture: true`: the cell's flows on the link
                                   (pqs-capture) and the client's TLS key log (capture_paths)
      net/<profile>/<session>[-c<chunk>]/   describe.json check.json counters-before.json counters-after.json
      logs/                      run.log, failed cells' logs, partial cells set aside by resume
      samples.parquet server.parquet cells.parquet   rebuilt from raw/ (run, resume, load)

A cell is complete when raw/<cell_id>/DONE exists; everything else in raw/ is a partial cell
that `resume` sets aside under logs/ and runs again.
"""

from __future__ import annotations

import datetime as dt
import errno
import fcntl
import json
import os
import platform
import re
import shutil
import socket
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

from pqshake import results as fmt
from pqshake import safe_write as sw
from pqshake.errors import UserError
from pqshake.results import layout, safe_read
from pqshake.results.meta import DONE

LOCK_NAME = ".pqs-run.lock"
RUN_DIR_MODE = layout.RUN_DIR_MODE  # pqshake/results/layout.py says why


def now_iso() -> str:
    return dt.datetime.now(dt.timezone.utc).astimezone().isoformat(timespec="milliseconds")


default_results_root = layout.default_results_root


# ---------------------------------------------------------------------------------------------
# Durable writes (never through a link: pqshake/safe_write.py)

fsync_dir = sw.fsync_dir


def fsync_file(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomic(path: Path, text: str, root: Path | None = None) -> None:
    """tmp + fsync + rename + fsync(dir): the file is either absent or whole, and never written
    through a link (root: the run directory, no link allowed below it)."""
    sw.write_text(path, text, root=root)


write_json = layout.write_json


def read_json(path: Path) -> Any:
    """A JSON file of a run (or of pqshake's state): never a FIFO, device or link, within its
    size cap (pqshake/results/safe_read.py; one-line UserError otherwise)."""
    return safe_read.read_json(path)


is_disk_full = sw.is_disk_full


# ---------------------------------------------------------------------------------------------
# Lock: one run per results root at a time


class RunLock:
    """flock on <root>/.pqs-run.lock, held for the whole run; the kernel drops it if the
    process dies, so a kill -9 leaves no stale lock. The file names the holder."""

    def __init__(self, root: Path):
        self.path = root / LOCK_NAME
        self.fd: int | None = None

    def acquire(self, run_dir: Path) -> None:
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
        except OSError as e:
            if e.errno == errno.ELOOP:  # a shared results/ with a planted link
                raise UserError(sw.link_message(self.path), exit_code=1) from None
            raise
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            try:
                holder = json.loads(os.pread(fd, 4096, 0).decode() or "{}")
            except (ValueError, OSError):
                holder = {}
            os.close(fd)
            raise UserError(
                f"another run is in progress in {self.path.parent} (pid {holder.get('pid', '?')}, "
                f"{holder.get('run_dir', '?')}); wait for it to finish or stop it (Ctrl-C / kill {holder.get('pid', 'PID')})",
                exit_code=1,
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps({"pid": os.getpid(), "run_dir": str(run_dir), "since": now_iso()}).encode(), 0)
        self.fd = fd

    def release(self) -> None:
        if self.fd is not None:
            try:
                os.ftruncate(self.fd, 0)
            except OSError:
                pass
            fcntl.flock(self.fd, fcntl.LOCK_UN)
            os.close(self.fd)
            self.fd = None


def lock_holder(root: Path) -> dict | None:
    """Who holds the lock of a results root (None if nobody)."""
    p = root / LOCK_NAME
    if not p.exists():
        return None
    try:  # a shared results/: never wait on a FIFO, never follow a link planted there
        fd = os.open(p, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            try:
                return json.loads(os.pread(fd, 4096, 0).decode() or "{}")
            except ValueError:
                return {}
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)


def check_writable(root: Path) -> None:
    try:
        root.mkdir(parents=True, exist_ok=True)
        sw.probe_writable(root)
    except OSError as e:
        raise UserError(f"results directory {root} is not writable ({e.strerror or e}); "
                        "choose another with --out DIR or fix its permissions", exit_code=1) from None


# ---------------------------------------------------------------------------------------------
# Layout


class RunDir:
    def __init__(self, path: Path):
        self.path = Path(path)
        # meta.json is read, changed and written whole: slots (experiments/slots.py) update it
        # from several threads, so every read-modify-write holds this lock
        self.meta_lock = threading.RLock()

    # paths
    @property
    def meta_path(self) -> Path:
        return self.path / "meta.json"

    @property
    def raw(self) -> Path:
        return self.path / "raw"

    @property
    def logs(self) -> Path:
        return self.path / "logs"

    @property
    def net(self) -> Path:
        return self.path / "net"

    def cell_dir(self, cell_id: str) -> Path:
        return self.raw / cell_id

    def qlog_dir(self, cell_id: str, role: str) -> Path:
        """Where a quic cell's qlog traces go (role: server or client), created empty."""
        if role not in ("server", "client"):
            raise ValueError(f"qlog role {role!r}: server or client")
        return sw.ensure_dir(self.raw / cell_id / "qlog" / role, root=self.path)

    def done_path(self, cell_id: str) -> Path:
        return self.raw / cell_id / DONE

    @property
    def resolved_experiment(self) -> Path:
        return self.path / "experiment.resolved.yaml"

    def is_run(self) -> bool:
        return self.meta_path.is_file()

    def create(self) -> None:
        layout.create(self.path)

    def check_links(self) -> None:
        """Refuse (one line) a run directory holding a link where pqshake writes, or a file it
        could not read whole and at once (a FIFO, a device, over its cap) or append to alone (a
        hard-linked log): safe_write.check_run. Before anything changes the run."""
        sw.check_run(self.path)

    def remove_stale_temps(self) -> list[Path]:
        """What interrupted writes left (pqshake's temporary names, their writer gone)."""
        return sw.remove_stale_temps(self.path)

    # meta
    def meta(self) -> dict:
        return read_json(self.meta_path)

    def update_meta(self, **fields: Any) -> dict:
        with self.meta_lock:
            m = self.meta() if self.meta_path.exists() else {}
            m.update(fields)
            write_json(self.meta_path, m, root=self.path)
            return m

    # cells
    def done(self, cell_id: str) -> dict | None:
        return fmt.done_info(self.path, cell_id)

    def done_cells(self) -> dict[str, dict]:
        out = {}
        if self.raw.is_dir():
            for d in self.raw.iterdir():
                info = self.done(d.name)
                if info is not None:
                    out[d.name] = info
        return out

    def mark_done(self, cell_id: str, info: dict) -> None:
        write_json(self.done_path(cell_id), info, root=self.path)

    def set_aside_partial(self, cell_id: str, why: str = "partial") -> Path | None:
        """Move a cell folder without DONE under logs/ (kept as evidence)."""
        d = self.cell_dir(cell_id)
        if not d.exists():
            return None
        dest = self.logs / f"{why}-{cell_id}-{dt.datetime.now().strftime('%Y%m%dT%H%M%S')}"
        n = 1
        while dest.exists():
            dest = dest.with_name(dest.name + f".{n}")
            n += 1
        sw.refuse_link(self.logs)  # the move goes into logs/: never into a folder elsewhere
        os.replace(d, dest)
        fsync_dir(self.raw)
        return dest

    def log(self, line: str) -> None:
        try:
            sw.refuse_link(self.logs)
            with sw.open_append(self.logs / "run.log") as f:
                f.write(f"{now_iso()} {line}\n")
        except (OSError, UserError):
            pass  # the log is best-effort; a link there is refused up front (check_links)


def new_run_id() -> tuple[str, str]:
    """(directory id, short hex for namespace names)."""
    short = os.urandom(3).hex()
    return f"{dt.datetime.now().strftime('%Y%m%dT%H%M%S')}-{short}", short


# ---------------------------------------------------------------------------------------------
# Provenance


def _run(argv: list[str], timeout: float = 10) -> str | None:
    try:
        r = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired):
        return None
    out = (r.stdout or r.stderr).strip()
    return out if r.returncode == 0 or out else None


def git_info(repo: Path) -> dict:
    commit = _run(["git", "-C", str(repo), "rev-parse", "HEAD"])
    if commit and not re.match(r"^[0-9a-f]{40}$", commit):
        commit = None
    status = _run(["git", "-C", str(repo), "status", "--porcelain", "--untracked-files=no"])
    return {"commit": commit, "dirty": bool(status) if commit else True}


def cpu_info() -> dict:
    model = None
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    gov = None
    try:
        gov = Path("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor").read_text().strip()
    except OSError:
        pass
    aff = None
    try:
        aff = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        pass
    return {"model": model, "cores": os.cpu_count(), "usable_cores": aff, "governor": gov}


def python_packages() -> dict:
    from importlib import metadata

    out = {"python": platform.python_version()}
    for name in ("pqshake", "pydantic", "typer", "rich", "pyyaml", "numpy", "scipy", "pandas", "pyarrow"):
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


def tool_binaries() -> dict:
    """The programs a run executes, by sha256 of the binary (their versions and the crypto
    stack's come from the timer's header line, under `stack`)."""
    import hashlib

    from pqshake.paths import build_dir

    out = {}
    for name in ("pqs-timer", "pqs-server", "pqs-linkemu", "pqs-probe", "pqs-capture"):
        p = build_dir() / "bin" / name
        try:
            out[name] = {"path": str(p), "sha256": hashlib.sha256(p.read_bytes()).hexdigest()}
        except OSError:
            out[name] = None
    return out


def capture_paths(cell_id: str) -> tuple[str, str]:
    """`capture: true`: a cell's pcapng and TLS key log, named from the cell id, in its folder."""
    return f"{cell_id}.pcapng", f"{cell_id}.keys"


def capture_meta(exp: Any) -> dict:
    """meta.json `capture`: whether each cell records its flows on the link and the client's TLS
    secrets, and how (each cell's DONE `capture` adds its own counts: frames, bytes, capped)."""
    if not getattr(exp, "capture", False):
        return {"enabled": False}
    cells = ([r.model_dump(exclude_none=True) for r in exp.capture_cells] if getattr(exp, "capture_cells", None)
             else "all")
    return {"enabled": True, "cells": cells, "max_bytes": exp.capture_max_bytes, "tool": "pqs-capture",
            "where": "the link namespace, both link-side interfaces, each frame once as it enters the link",
            "filter": "IPv4 TCP and UDP from or to the cell's server address and port",
            "files": ["raw/<cell_id>/<cell_id>.pcapng", "raw/<cell_id>/<cell_id>.keys"],
            "keylog": "NSS key log format (SSLKEYLOGFILE), written by pqs-timer --keylog"}


def implementations(groups: list[str]) -> dict:
    """Which provider implements each group of the run and each TLS 1.3 signature scheme, as
    the built timer reports it (`--list-groups` / `--list-sigs`: name, tab, provider; the
    provider choice of the environment, $PQS_PROVIDER, applies as it does to the run). A
    signature algorithm's scheme is its TLS name (falcon512, mldsa44, ecdsa_secp256r1_sha256)."""
    from pqshake.paths import build_dir

    timer = build_dir() / "bin" / "pqs-timer"
    out: dict[str, Any] = {"groups": {}, "sigalgs": {}}
    for key, opt in (("groups", "--list-groups"), ("sigalgs", "--list-sigs")):
        text = _run([str(timer), opt], timeout=20) or ""
        listed = dict(ln.split("\t", 1) for ln in text.splitlines() if "\t" in ln)
        out[key] = listed
    lower = {k.lower(): v for k, v in out["groups"].items()}
    out["groups"] = {g: lower.get(g.lower()) for g in groups}
    return out


def provenance() -> dict:
    from pqshake.paths import REPO

    ip = _run(["ip", "-V"])
    return {
        "git": git_info(REPO),
        "host": socket.gethostname(),
        "kernel": platform.release(),
        "kernel_version": platform.version(),
        # inside `pqshake uml run`: the user-mode Linux kernel, its version and where it came from
        "uml": json.loads(os.environ["PQS_UML_KERNEL"]) if os.environ.get("PQS_UML_KERNEL") else None,
        "iproute2": ip,
        "cpu": cpu_info(),
        "python_packages": python_packages(),
        "tools": tool_binaries(),
        "argv": sys.argv,
    }


def session_provenance() -> dict:
    """What a session of a run (the first `run`, each `resume`) ran with: the commit, the
    binaries by hash, the crypto stack the build records, the host and kernel."""
    from pqshake.paths import build_dir

    prov = provenance()
    stack = {}
    deps = build_dir() / "deps.mk"
    if deps.is_file():
        for line in deps.read_text().splitlines():
            if ":=" in line and not line.lstrip().startswith("#") and "VERSION" in line.split(":=")[0]:
                k, v = line.split(":=", 1)
                stack[k.strip().lower()] = v.strip()
    return {"commit": prov["git"]["commit"], "dirty": prov["git"]["dirty"], "host": prov["host"],
            "kernel": prov["kernel"], "stack": stack,
            "binaries": {k: (v or {}).get("sha256") for k, v in prov["tools"].items()}}


# What a resume may not change without --allow-mixed: the code and the programs that measure.
MIXED_FIELDS = ("commit", "binaries")


def provenance_differences(first: dict, now: dict) -> list[tuple[str, str]]:
    """(field, 'before -> now') for each of MIXED_FIELDS that differs; binaries by name."""
    out = []
    if first.get("commit") != now.get("commit"):
        out.append(("commit", f"{str(first.get('commit'))[:12]} -> {str(now.get('commit'))[:12]}"))
    fb, nb = first.get("binaries") or {}, now.get("binaries") or {}
    for name in sorted(set(fb) | set(nb)):
        if fb.get(name) != nb.get(name):
            out.append((f"binaries.{name}", f"{str(fb.get(name))[:12]} -> {str(nb.get(name))[:12]}"))
    return out


def first_provenance(meta: dict) -> dict:
    """The run's own provenance: its first session's, or for runs recorded before sessions
    carried one, what meta.json recorded when the run began."""
    for s in meta.get("sessions", []):
        if s.get("provenance"):
            return s["provenance"]
    tools = meta.get("tools") or {}
    return {"commit": (meta.get("git") or {}).get("commit"),
            # very early runs recorded a version string per tool, not a hash: no hash then
            "binaries": {k: (v if isinstance(v, dict) else {}).get("sha256") for k, v in tools.items()}}


# ---------------------------------------------------------------------------------------------
# Tables (their format: pqshake/results/; here only where they live and when they are rebuilt)


def build_tables(run: RunDir) -> dict:
    """(Re)build samples/server/cells.parquet from raw/ (cells with DONE only). Returns the
    frames. Written via tmp + rename."""
    frames = fmt.collect_tables(run.path)
    fmt.write_tables(run.path, frames)
    return frames


def find_run(path: Path | str) -> RunDir:
    p = Path(path)
    if not (p / "meta.json").is_file() and not os.path.lexists(p / "meta.json"):
        # results/<name> -> its latest run
        if p.is_dir():
            subs = sorted(d for d in p.iterdir() if (d / "meta.json").is_file())
            if subs:
                fmt.read_meta(subs[-1] / "meta.json")
                return RunDir(subs[-1])
        raise UserError(f"{p}: not a run directory (no meta.json); 'pqshake ls' lists runs")
    run = RunDir(p)
    fmt.read_meta(run.meta_path)
    return run


def load(run_dir: Path | str, table: str = "samples"):
    """A run's table as a pandas DataFrame: 'samples' (every attempt, warm-ups and failures
    included), 'server' (one row per server-side connection) or 'cells'; a run of an earlier
    format as this version's (pqshake/results/migrate.py). Tables raw/ has outgrown are
    rebuilt and written (in memory when the run is read-only)."""
    if table not in fmt.TABLES:
        raise UserError(f"table '{table}': one of samples, server, cells")
    run = find_run(run_dir)
    run.check_links()  # the preflight `analyze` makes: a run from elsewhere is read as safely
    if fmt.stale(run.path, table, need_raw=False):
        try:
            frames = build_tables(run)
        except OSError as e:
            if sw.is_disk_full(e):  # the tables are written all or none: the old ones are intact
                raise sw.no_space_error(e, run.path, f"the old tables are intact; free some space, then run "
                                                     f"pqshake load {run.path} again") from None
            # read-only results: build in memory
            frames = fmt.collect_tables(run.path)
    else:
        frames = fmt.migrate(run.path, tuple(dict.fromkeys((table, "cells"))))
    # a damaged line is dropped, never silently (pqshake/results/tables.py: damage_note)
    for note in fmt.damage_notes(run.path, frames.get("cells")):
        print(f"warning: {note}", file=sys.stderr)
    return frames[table]


def list_runs(root: Path) -> list[dict]:
    out = []
    if not root.is_dir():
        return out
    holder = lock_holder(root) or {}
    for meta in sorted(root.glob("*/*/meta.json")):
        run = RunDir(meta.parent)
        try:
            m = run.meta()
        except (ValueError, OSError, UserError):  # UserError: not a file pqshake can read (safe_read.py)
            continue
        try:
            total = len(read_json(run.path / "plan.json")["cells"])
        except (OSError, ValueError, KeyError, UserError):
            total = None
        try:
            done = run.done_cells()
        except UserError:
            continue
        failed = sum(1 for v in done.values() if v.get("status") != "complete")
        status = m.get("status", "?")
        if status == "running" and holder.get("run_dir") != str(run.path):
            status = "interrupted"
        out.append({"name": m.get("name"), "id": run.path.name, "path": str(run.path), "status": status,
                    "cells_done": len(done), "cells_failed": failed, "cells": total,
                    "started": m.get("started"), "ended": m.get("ended")})
    return out


def copy_experiment(run: RunDir, files: list[Path]) -> list[dict]:
    """Verbatim copies under experiment/, with their sha256."""
    import hashlib

    out = []
    base = files[0].parent
    for f in files:
        try:
            rel = f.relative_to(base)
        except ValueError:
            rel = Path("_include") / f.name
        dest = run.path / "experiment" / rel
        sw.ensure_dir(dest.parent, root=run.path)
        with sw.replacing(dest, root=run.path) as tmp:
            shutil.copyfile(f, tmp)
        out.append({"path": str(f), "copy": str(dest.relative_to(run.path)),
                    "sha256": hashlib.sha256(f.read_bytes()).hexdigest()})
    return out
