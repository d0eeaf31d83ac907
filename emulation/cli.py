"""`pqshake net ...` and `pqshake clean`."""

from __future__ import annotations

import json
import sys
from typing import Optional

import typer

from pqshake.errors import UserError

net = typer.Typer(no_args_is_help=True, help="Emulated links between network namespaces.")

BACKEND_HELP = "auto (netem when the kernel has it, else userspace), netem or userspace"


def _print(msg: str = "") -> None:
    print(msg, flush=True)


@net.command("up")
def up(
    profile: str = typer.Argument(..., help="profile name (see `pqshake net profiles`) or path to a YAML file"),
    backend: str = typer.Option("auto", "--backend", help=BACKEND_HELP),
    run_id: Optional[str] = typer.Option(None, "--id", help="run id, 1-6 of [a-z0-9] (default: random)"),
    seed: Optional[int] = typer.Option(None, "--seed", help="random seed (default: the profile's, else random)"),
    as_json: bool = typer.Option(False, "--json", help="print the description as JSON"),
) -> None:
    """Build client/link/server namespaces with the profile's link and keep them."""
    from pqshake.emulation.profiles import load_profile
    from pqshake.emulation.topology import Topology

    p = load_profile(profile)
    topo = Topology(p, run_id=run_id, backend=backend, persistent=True, seed=seed)
    topo.__enter__()
    d = topo.detach()
    if as_json:
        _print(json.dumps(d, indent=1))
        return
    _print(f"up: {p.summary()}")
    _print(f"backend {d['backend']} ({d['backend_reason']}), seed {d['seed']}, id {d['run_id']}")
    _print(f"run in the client:  ip netns exec {topo.client_ns} COMMAND   (address {topo.client_addr})")
    _print(f"run in the server:  ip netns exec {topo.server_ns} COMMAND   (address {topo.server_addr})")
    _print(f"e.g.                ip netns exec {topo.client_ns} ping {topo.server_addr}")
    _print(f"remove it with:     pqshake net down --id {d['run_id']}")


@net.command("down")
def down_cmd(
    run_id: Optional[str] = typer.Option(None, "--id", help="which topology (default: the only one kept by net up)"),
) -> None:
    """Remove a topology kept by `net up`."""
    from pqshake.emulation import netns
    from pqshake.emulation.clean import down

    if run_id is None:
        kept = [r["run_id"] for r in netns.read_records() if r.get("persistent")]
        if not kept:
            raise UserError("no topology is up (nothing to do)", exit_code=1)
        if len(kept) > 1:
            raise UserError(f"{len(kept)} topologies are up ({', '.join(kept)}); pick one with --id", exit_code=2)
        run_id = kept[0]
    removed = down(run_id)
    _print(f"down: {run_id} ({len(removed)} objects removed)")


@net.command("list")
def list_cmd() -> None:
    """Topologies this machine's state directory knows about."""
    from pqshake.emulation import netns

    recs = netns.read_records()
    if not recs:
        _print("no runs")
    for r in recs:
        state = "net up" if r.get("persistent") else ("live" if netns.record_live(r) else "dead (pqshake clean)")
        _print(f"{r['run_id']:8} {r.get('profile', '?'):24} {r.get('backend', '?'):9} pid {r.get('pid')}  {state}")


@net.command("check")
def check_cmd(
    profile: str = typer.Argument(..., help="profile name or YAML path"),
    backend: str = typer.Option("auto", "--backend", help=BACKEND_HELP),
    run_id: Optional[str] = typer.Option(None, "--id"),
    no_throughput: bool = typer.Option(False, "--no-throughput", help="skip the iperf3 part"),
    rtt_count: int = typer.Option(200, "--rtt-samples", min=200),
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """Measure RTT, loss, path MTU and TCP goodput through the emulated link; exit 1 when
    outside tolerance."""
    from pqshake.emulation.check import run_check
    from pqshake.emulation.profiles import load_profile
    from pqshake.emulation.topology import Topology

    p = load_profile(profile)
    with Topology(p, run_id=run_id, backend=backend) as topo:
        _print(f"check {p.summary()}")
        _print(f"backend {topo.backend} ({topo.backend_reason})")
        ok, rows = run_check(topo, throughput=not no_throughput, rtt_count=rtt_count,
                             log=(lambda m: None) if as_json else _print)
        counters = topo.counters()  # raw on purpose: the backend's own figures, for the record (rows read LinkCounters)
    if as_json:
        _print(json.dumps({"ok": ok, "rows": rows, "backend": topo.backend, "counters": counters}, indent=1))
    else:
        _table(rows)
        _print("PASS" if ok else "FAIL: outside tolerance")
    if not ok:
        raise SystemExit(1)  # (typer.Exit is swallowed by standalone_mode=False)


def _table(rows: list[dict]) -> None:
    heads = ["what", "dir", "configured", "achieved", "tolerance", "ok"]
    cells = [[str(r.get(h, "")) if h != "ok" else {True: "ok", False: "FAIL", None: "-"}[r["ok"]] for h in heads] for r in rows]
    w = [max(len(h), *(len(c[i]) for c in cells)) for i, h in enumerate(heads)]
    _print("  ".join(h.ljust(w[i]) for i, h in enumerate(heads)))
    for c in cells:
        _print("  ".join(x.ljust(w[i]) for i, x in enumerate(c)))


@net.command("profiles")
def profiles_cmd(verbose: bool = typer.Option(False, "-v", help="show each profile's numbers")) -> None:
    """The shipped profile library."""
    from pqshake.emulation.profiles import library

    for name, p in sorted(library().items()):
        _print(p.summary() if verbose else f"{name:28} {p.description}")


@net.command("show")
def show_cmd(
    profile: str = typer.Argument(..., help="library profile name, or path to a .yaml/.yml file (FILE.yaml#NAME "
                                           "for one of several)"),
    backend: str = typer.Option("userspace", "--backend", help="whose rendering to show: netem or userspace"),
) -> None:
    """Validate a profile and print what the backend would be given (no root needed)."""
    from pqshake.emulation import backend_netem, backend_userspace, netns
    from pqshake.emulation.profiles import load_profile

    p = _not_an_experiment(profile, load_profile)
    names = netns.Names("RUNID")
    # Rendered before anything is printed: a profile netem cannot run is one line, not a summary
    # and then the refusal.
    cmds = backend_netem.render(p, names, p.seed, with_seed=False) if backend == "netem" else []
    _print(p.summary())
    if backend == "netem":
        for line in backend_netem.render_text(cmds):
            _print(line)
        for n in backend_netem.semantics_notes(p):
            _print(f"note: {n}")
    else:
        _print(f"--up {backend_userspace.spec(p.up)}")
        _print(f"--down {backend_userspace.spec(p.down)}")


def _not_an_experiment(ref: str, load):
    """load(ref), but a profile command given an experiment file says so in one short line
    instead of listing a profile's fields once per experiment key."""
    try:
        return load(ref)
    except UserError as e:
        if _is_experiment(ref.split("#", 1)[0]):
            raise UserError(f"{ref}: an experiment file, not a profile (plan it with pqshake plan)",
                            e.exit_code) from None
        raise


def _is_experiment(path: str) -> bool:
    """The file's one document is a mapping with a key only experiment files have: a matrix
    axis's list (groups, sigs, modes, transports) or a swept setting (pqshake/rows/axes/; the
    emulation sits below the experiment model and reads the rows it is built from)."""
    from pqshake import yamlsrc
    from pqshake.emulation.profiles import Profile
    from pqshake.rows import axes as AX
    from pqshake.rows.axes import core as C

    if not path.endswith((".yaml", ".yml")):
        return False
    try:
        docs = yamlsrc.load_docs(path)
    except UserError:
        return False
    profile_keys = {f.alias or n for n, f in Profile.model_fields.items()}
    only = ({a.field for a in C.CORE} | set(AX.keys()) | {"include"}) - profile_keys
    return len(docs) == 1 and isinstance(docs[0].data, dict) and any(k in only for k in docs[0].data)


@net.command("validate")
def validate_cmd(files: list[str] = typer.Argument(..., help="YAML files")) -> None:
    """Validate profile files (one line per problem, exit 2 on the first bad file)."""
    from pqshake.emulation.profiles import load_profiles_file

    for f in files:
        profs = _not_an_experiment(f, load_profiles_file)
        for prof in profs:  # valid, but would `run` refuse it on this machine?
            why = prof.machine_problem()
            if why:
                raise UserError(f"{f}: profile '{prof.name}': {why}")
        _print(f"{f}: {len(profs)} profile(s) ok")


@net.command("schema")
def schema_cmd(write: bool = typer.Option(False, "--write", help="update emulation/profiles/schema.json")) -> None:
    """The JSON Schema of profile files (for editors)."""
    from pqshake.emulation.profiles import SCHEMA_PATH, schema_text

    if write:
        SCHEMA_PATH.write_text(schema_text())
        _print(f"wrote {SCHEMA_PATH}")
    else:
        sys.stdout.write(schema_text())


def clean_cmd(
    all_: bool = typer.Option(False, "--all", help="also remove topologies kept by `net up`"),
) -> None:
    """Remove what dead runs left: their pqs- namespaces (with their interfaces) and the
    processes they recorded. Live runs are never touched."""
    from pqshake.emulation import clean, netns

    netns.require_root()
    removed = clean.clean_dead(include_persistent=all_)
    for r in removed:
        _print(f"removed {r}")
    if not removed:
        _print("nothing to clean")
    for k in ([] if all_ else clean.kept()):
        _print(f"kept {k}: 'pqshake net down --id ...' or 'pqshake clean --all'")
    for ns in clean.unrecorded():
        _print(f"not ours (no record): {ns} - left alone")


uml = typer.Typer(no_args_is_help=True, help="A user-mode Linux kernel with netem, for hosts whose kernel lacks it.")


@uml.command("run", context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def uml_run(
    ctx: typer.Context,
    mem: str = typer.Option("2G", "--mem", help="the UML kernel's memory"),
    unless_netem: bool = typer.Option(False, "--unless-netem", help="run here when this kernel has sch_netem"),
) -> None:
    """Run a command (after --) as root inside a user-mode Linux kernel that has netem."""
    from pqshake.emulation import uml as uml_mod
    from pqshake.emulation.signals import TerminateOnSignals

    sig = TerminateOnSignals()
    sig.install()
    try:
        rc = uml_mod.main_run(list(ctx.args), mem=mem, unless_netem=unless_netem)
    finally:
        sig.restore()
    raise typer.Exit(rc)


@uml.command("info")
def uml_info() -> None:
    """The UML kernel pqshake would boot: version, modules, where it came from."""
    from pqshake.emulation import uml as uml_mod

    for k, v in uml_mod.kernel_info().items():
        _print(f"{k:8} {v}")


def register(app: typer.Typer) -> None:
    app.add_typer(net, name="net", help="Emulated links: up, down, check, profiles, schema.")
    app.add_typer(uml, name="uml", help="Run commands inside a user-mode Linux kernel (the netem lane).")
    app.command("clean")(clean_cmd)
