"""pqshake as an unprivileged user: `doctor` reports the rootless mode and `run` re-executes itself
inside a user + network + mount + PID namespace of its own (emulation/rootless.py), runs a small
experiment over the userspace link, and leaves nothing behind when killed.

The test is started as root (it needs root to make the user): it creates an account
`pqs-<runid>` (recorded in a run record before it exists, so `pqshake clean` removes it after a
crash) and runs pqshake as that account through setpriv. The build, the venv's interpreter and
the pinned stack may sit under a home directory the new account cannot enter (a 0700 ~root):
a private mount namespace of the test (root) puts a tmpfs over that directory and binds back
only those paths, read-only as before - nothing of the host changes.
"""

from __future__ import annotations

import json
import os
import pwd
import re
import shlex
import signal
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from exp_file import experiment_yaml

from pqshake.emulation import netns, rootless

pytestmark = pytest.mark.netns  # needs root to create the account; always runs in CI

REPO = Path(__file__).resolve().parents[1]


def exp_text(samples: int) -> str:
    return experiment_yaml("rootless", groups=["x25519", "X25519MLKEM768"], sigs=["ecdsa-p256"],
                           profiles=[dict(name="rootless-a", rtt="10ms")], samples=samples, warmup=2, seed=3)


def needed_paths() -> list[Path]:
    """What the account must read: the checkout, the build, the interpreter, the pinned stack."""
    from pqshake.paths import build_dir

    paths = {REPO, build_dir(), Path(sys.prefix), Path(os.path.realpath(sys.executable)).parent.parent}
    deps = build_dir() / "deps.mk"
    for line in deps.read_text().splitlines():
        m = re.match(r"^\w+_PREFIX := (\S+)", line)
        if m:
            paths.add(Path(m.group(1)))
    return sorted(p.resolve() for p in paths)


def blocker(path: Path) -> Path | None:
    """The outermost ancestor others cannot enter (no o+x), if any."""
    for a in reversed(path.parents):
        if not os.stat(a).st_mode & stat.S_IXOTH:
            return a
    return None


def expose_script(stage: Path) -> str:
    """Shell lines (run as root in a private mount namespace) that make the needed paths
    reachable: bind each aside, a tmpfs over its blocking ancestor, bind it back."""
    lines = []
    groups: dict[Path, list[Path]] = {}
    for p in needed_paths():
        b = blocker(p)
        if b is not None:
            groups.setdefault(b, []).append(p)
    i = 0
    for b, paths in groups.items():
        moves = []
        for p in paths:
            if any(q != p and q in p.parents for q in paths):
                continue  # inside another bound path
            s = stage / str(i)
            i += 1
            lines.append(f"mkdir -p {s} && mount --bind {shlex.quote(str(p))} {s}")
            moves.append((s, p))
        lines.append(f"mount -t tmpfs -o mode=0755 pqs-expose {shlex.quote(str(b))}")
        for s, p in moves:
            lines.append(f"mkdir -p {shlex.quote(str(p))} && mount --move {s} {shlex.quote(str(p))}")
    return "\n".join(["set -e", *lines])


@pytest.fixture
def account():
    """A fresh unprivileged account pqs-<runid> with a home of its own; removed afterwards."""
    rid = netns.new_run_id()
    name = f"pqs-{rid}"
    home = Path(tempfile.gettempdir()) / f"pqs-{rid}-home"
    stage = Path(tempfile.gettempdir()) / f"pqs-{rid}-stage"
    rec = netns.claim_run(rid, namespaces=[], purpose="rootless test", users=[name], workdir=str(home))
    try:
        netns.run(["useradd", "--system", "--no-create-home", "--home-dir", str(home), "--shell", "/bin/sh", name])
        pw = pwd.getpwnam(name)
        home.mkdir(mode=0o755)
        os.chown(home, pw.pw_uid, pw.pw_gid)
        stage.mkdir(mode=0o700)
        script = expose_script(stage)

        def as_user(*argv: str, background: bool = False, timeout: float = 300):
            env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home), "LANG": "C.UTF-8",
                   "PQS_RESULTS": str(home / "results")}
            if "PQS_BUILD" in os.environ:
                env["PQS_BUILD"] = os.environ["PQS_BUILD"]
            cmd = ["unshare", "--mount", "--propagation", "private", "sh", "-c",
                   script + f'\nexec setpriv --reuid={pw.pw_uid} --regid={pw.pw_gid} --clear-groups "$@"',
                   "pqs-expose", *argv]
            if background:
                return subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                        start_new_session=True)
            return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)

        yield pw, home, as_user
    finally:
        netns.remove_run(rec)
        import shutil

        shutil.rmtree(home, ignore_errors=True)
        shutil.rmtree(stage, ignore_errors=True)
    with pytest.raises(KeyError):
        pwd.getpwnam(name)


def user_pids(uid: int) -> list[int]:
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                m = re.search(r"^Uid:\s+(\d+)", (d / "status").read_text(), re.M)
            except OSError:
                continue
            if m and int(m.group(1)) == uid:
                out.append(int(d.name))
    return out


def host_namespaces() -> set[str]:
    return set(netns.ns_list())


def run_namespaces(run: Path) -> set[str]:
    """The host's /run/netns entries this run made: those named for its sessions (a session id
    is its links' run id, net/<profile>/<session>/). Other tests and runs on the machine may make
    namespaces meanwhile; only this run's count."""
    sessions = {d.name for d in run.glob("net/*/*") if d.is_dir()}
    assert sessions, f"{run}: no link was recorded"
    return {n for n in host_namespaces() if any(n.startswith(f"pqs-{s}-") for s in sessions)}


def test_rootless_doctor_and_run(account):
    pw, home, as_user = account
    pqs = str(REPO / ".venv" / "bin" / "pqshake")
    ok, detail = rootless.available()  # as root this probe works too: the same namespaces
    assert ok, detail

    cp = as_user(pqs, "doctor", "--json")
    items = {i["name"]: i for i in map(json.loads, cp.stdout.splitlines())}
    assert items["privileges"]["status"] == "ok" and "rootless mode" in items["privileges"]["detail"], cp.stdout
    assert f"uid {pw.pw_uid}" in items["privileges"]["detail"]
    for name in ("network namespaces", "veth", "AF_PACKET"):
        assert items[name]["status"] == "ok", items[name]
    assert "backend auto = " in items["netem / backend"]["detail"]
    assert cp.returncode == 0, cp.stdout + cp.stderr

    # The unprivileged account cannot build namespaces itself: without the re-exec it would fail.
    cp = as_user("ip", "netns", "add", "pqs-never")
    assert cp.returncode != 0 and "pqs-never" not in host_namespaces()

    exp = home / "rootless.yaml"
    exp.write_text(exp_text(10))
    cp = as_user(pqs, "run", str(exp), "--yes")
    assert cp.returncode == 0, cp.stderr
    assert "complete: 2 cells complete, 0 failed" in cp.stdout, cp.stdout + cp.stderr
    [run] = sorted((home / "results").glob("rootless/*/meta.json"))
    assert run.stat().st_uid == pw.pw_uid  # written by the account, in its own directory
    from pqshake.experiments import load

    s = load(run.parent)
    assert len(s) == 2 * (10 + 2) and s["ok"].all() and set(s["backend"]) == {"userspace"}
    med = s[~s["warmup"]]["handshake_ns"].median()
    assert 10e6 < med < 500e6  # at least the emulated 10 ms RTT; a loose upper bound
    assert run_namespaces(run.parent) == set()  # nothing was made in the host's /run/netns
    assert user_pids(pw.pw_uid) == []

    # Killed hard (SIGKILL to the outermost unshare): the PID namespace takes every process along.
    exp.write_text(exp_text(400))
    p = as_user(pqs, "run", str(exp), "--yes", "--out", str(home / "killed"), background=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not list((home / "killed").glob("rootless/*/raw/*")):
        assert p.poll() is None, p.communicate()
        time.sleep(0.1)
    assert len(user_pids(pw.pw_uid)) >= 3  # pqshake, pqs-server, pqs-linkemu, pqs-timer ...
    os.killpg(p.pid, signal.SIGKILL)
    p.communicate()
    deadline = time.monotonic() + 10
    while user_pids(pw.pw_uid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert user_pids(pw.pw_uid) == []
    [killed] = sorted((home / "killed").glob("rootless/*/meta.json"))
    assert run_namespaces(killed.parent) == set()


def test_not_root_without_userns_one_line(account):
    """Where user namespaces are refused, `run` stops with one line naming the fix."""
    pw, home, as_user = account
    code = ("import sys; from pqshake.emulation import rootless; "
            "rootless._cache['userns'] = (False, 'unprivileged namespaces refused: Operation not permitted'); "
            "from pqshake.cli import main; sys.exit(main(['run', 'x.yaml']))")
    cp = as_user(str(REPO / ".venv" / "bin" / "python"), "-c", code)
    assert cp.returncode == 1 and cp.stdout == ""
    [line] = cp.stderr.splitlines()
    assert line.startswith("pqshake: not root and no rootless mode here") and "fix:" in line, line
