"""`pqshake plan | run | resume | ls | load`."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from pqshake.errors import UserError

PARALLEL_HELP = ("links side by side (default: the experiment's 'parallel', else auto): auto packs independent links by "
                 "CPU share under a budget; N at most N at once; 1 one cell at a time")


def register(app: typer.Typer) -> None:
    @app.command("plan")
    def plan_cmd(
        experiment: Path = typer.Argument(..., help="experiment file, e.g. experiments/demo.yaml"),
        parallel: Optional[str] = typer.Option(None, "--parallel", metavar="auto|N", help=PARALLEL_HELP),
        cells: bool = typer.Option(False, "--cells", help="list every cell in run order"),
        seed: Optional[int] = typer.Option(None, "--seed", help="order seed (default: the file's, else random)"),
        shards: Optional[str] = typer.Option(None, "--shards", help="also show the estimate split into N shards "
                                             "(run --shard I/N): per shard cells and time, the imbalance; "
                                             "several as 1,8,32"),
    ) -> None:
        """Cells, samples and the estimated duration (from the handshake model); nothing is run."""
        from .plan import build_plan, fmt_seconds, profile_figures, rates_text, values_text

        from .slots import parse_parallel, plan_slots

        # the options first: a bad one is refused in one line, not after half a plan
        shard_counts = _parse_counts(shards) if shards is not None else []
        par = parse_parallel(parallel, "--parallel") if parallel is not None else None
        p = build_plan(experiment, seed=seed)
        s = p.summary()
        m = p.model
        from pqshake.rows.axes import core as C

        print(f"{m.name}: {s['cells']} cells ("
              + "".join(f"{len(p.axis_values(a.key))} {a.field} x " for a in C.LOOP) + f"{m.repetitions} repetitions"
              + "".join(f" x {len(v)} {k}" for k, v in s["sweeps"].items())
              + (f", {s['excluded']} excluded" if s["excluded"] else "") + ")")
        print(f"  groups:   {values_text(p.groups)}")
        print(f"  sigs:     {values_text(p.sigs)}")
        print(f"  modes:    {', '.join(m.modes)}")
        from pqshake.rows import axes as AX
        from pqshake.rows import transports as T

        print(f"  transports: {', '.join(m.transports)}"
              + "".join(t.plan_note(m) for t in T.REGISTRY if t.name in m.transports))
        for k, v in s["sweeps"].items():  # a swept setting: the cells it changes run once per value
            print(f"  {k}: {values_text(v, AX.get(k).show)} (swept: once per value in each cell it changes)")
        if m.samples == "auto":
            a = m.adaptive
            lo, hi = (a.min + m.warmup) * s["cells"], (a.max + m.warmup) * s["cells"]
            print(f"  samples:  auto: {a.min}..{a.max} per cell until the median's 95 % CI is within "
                  f"±{a.ci * 100:g} % (+ {m.warmup} warm-up) = {lo}..{hi} handshakes, about {s['attempts']} "
                  f"expected; blocks of {m.block}; concurrency {m.concurrency}")
        else:
            print(f"  samples:  {m.samples} per cell + {m.warmup} warm-up = {s['attempts']} handshakes; "
                  f"concurrency {m.concurrency}")
        print(f"  order:    {m.order}" + (f" (blocks of {m.block})" if m.order == "interleaved" else "")
              + f" (seed {p.seed})")
        if m.capture:
            print(f"  capture:  {s['capture_cells']} of {s['cells']} cells (pcapng up to {m.capture_max_bytes} bytes "
                  "and the TLS key log per cell)")
        print("  profiles:")
        for name, prof in p.profiles.items():
            f = profile_figures(prof)
            n = sum(1 for c in p.cells if c.profile == name)
            est = p.estimate_s([c for c in p.cells if c.profile == name], keygen=False, fixed=False)
            print(f"    {name:<28} rtt {f['rtt_ns'] / 1e6:8.2f} ms  {rates_text(f):<28}"
                  f"  loss {max(f['loss_up'], f['loss_down']) * 100:5.2f} %  mtu {f['mtu']:>5}  {n:>4} cells  ~{fmt_seconds(est)}")
        for note in p.notes:
            print(f"  note: {note}")
        key = s.get("bfe_key")
        if key:
            from pqshake.rows.modes.fs0rtt import p_text

            print(f"  fs0rtt key: n {key['n']}, p {p_text(key['p'])} ({key['slots']} slots): "
                  + ("in the cache" if key["cached"] else f"generated first (~{fmt_seconds(key['keygen_estimate_s'])})"))
        parts = p.estimate_parts_s()
        est = sum(parts.values())
        from .runner import LONG_RUN_S

        print(f"  estimated duration: {fmt_seconds(est)} (handshakes {fmt_seconds(parts['handshakes'])}; "
              f"RTT probes {fmt_seconds(parts['probes'])}, servers and timers {fmt_seconds(parts['programs'])}, "
              f"links {fmt_seconds(parts['links'])}, the run's start and end {fmt_seconds(parts['run'])})"
              + (f"  (longer than {fmt_seconds(LONG_RUN_S)}: 'run' will ask, or pass --yes)" if est > LONG_RUN_S else ""))
        sp = plan_slots(p, parallel=par)
        if sp.slots > 1:
            print(f"  slots:    {sp.slots} links side by side ({sp.why}); {len(sp.chunks)} chunks of consecutive cells, "
                  f"{len(sp.solo)} alone")
            print(f"  estimated duration with slots: {fmt_seconds(sp.estimate_s)} "
                  f"({_speedup(sp.sequential_s, sp.estimate_s)} than one cell at a time)")
        else:
            print(f"  slots:    1, one cell at a time ({sp.why})")
            auto = plan_slots(p, parallel="auto")
            if auto.slots > 1:
                print(f"            with --parallel auto: {auto.slots} links side by side, estimated "
                      f"{fmt_seconds(auto.estimate_s)} ({_speedup(auto.sequential_s, auto.estimate_s)})")
        for n in shard_counts:
            _print_shards(p, n)
        if cells:
            for i, c in enumerate(p.cells, 1):
                print(f"  {i:>5} {c.cell_id}  ~{p.cell_estimate_s(c):.1f}s")

    @app.command("run")
    def run_cmd(
        experiment: Path = typer.Argument(..., help="experiment file, e.g. experiments/demo.yaml"),
        out: Optional[Path] = typer.Option(None, "--out", help="results root (default results/ or $PQS_RESULTS); "
                                           "the run goes to OUT/<name>/<id>/"),
        yes: bool = typer.Option(False, "--yes", "-y", help="do not ask before a very long run"),
        quiet: bool = typer.Option(False, "--quiet", "-q", help="no progress output"),
        seed: Optional[int] = typer.Option(None, "--seed", help="order seed (default: the file's, else random)"),
        shard: Optional[str] = typer.Option(None, "--shard", metavar="I/N", help="run only shard I of N (I from 0; "
                                            "a partition balanced by the estimate, the same on every machine); "
                                            "its own run directory <id>-sIofN; 'pqshake merge' joins the shards"),
        resume: bool = typer.Option(False, "--resume", help="with --shard: if OUT already holds a run of this shard "
                                    "of this experiment file, resume it instead of starting another (a "
                                    "resubmitted array task)"),
        parallel: Optional[str] = typer.Option(None, "--parallel", metavar="auto|N",
                                               help=PARALLEL_HELP),
    ) -> None:
        """Run an experiment; prints the run directory."""
        from .runner import resume_run, start_run
        from .slots import parse_parallel

        par = parse_parallel(parallel, "--parallel") if parallel is not None else None

        spec = None
        if shard is not None:
            from .shard import parse_shard

            spec = parse_shard(shard)
        elif resume:
            raise UserError("--resume goes with --shard I/N (a whole run resumes with: pqshake resume RUN_DIR)", exit_code=2)
        if spec is not None and resume:
            from .model import load_experiment
            from .rundir import default_results_root
            from .shard import find_existing

            ef = load_experiment(experiment)
            prev = find_existing(out or default_results_root(), ef.model.name, spec, ef.sha256())
            if prev is not None:
                print(f"shard {spec}: resuming {prev}")
                _print_result(resume_run(prev, quiet=quiet, parallel=par))
                return
        path = start_run(experiment, out=out, yes=yes, quiet=quiet, seed=seed, shard=spec, parallel=par)
        _print_result(path)

    @app.command("resume")
    def resume_cmd(
        run_dir: Path = typer.Argument(..., help="a run directory, results/<name>/<id>"),
        quiet: bool = typer.Option(False, "--quiet", "-q"),
        rerun_suspect: bool = typer.Option(False, "--rerun-suspect",
                                           help="also run again the cells whose validity verdict is suspect "
                                                "(their first attempt is kept under logs/)"),
        allow_mixed: bool = typer.Option(False, "--allow-mixed",
                                         help="resume although the commit or the built programs changed since the "
                                              "run began (recorded in meta.json and shown in the report)"),
        parallel: Optional[str] = typer.Option(None, "--parallel", metavar="auto|N", help=PARALLEL_HELP),
    ) -> None:
        """Run the cells an interrupted run left (partial cells are set aside under logs/)."""
        from .runner import resume_run
        from .slots import parse_parallel

        par = parse_parallel(parallel, "--parallel") if parallel is not None else None
        path = resume_run(run_dir, quiet=quiet, rerun_suspect=rerun_suspect, allow_mixed=allow_mixed, parallel=par)
        _print_result(path)

    @app.command("ls")
    def ls_cmd(
        root: Optional[Path] = typer.Argument(None, help="results root (default results/ or $PQS_RESULTS)"),
        latest: Optional[str] = typer.Option(None, "--latest", metavar="NAME",
                                             help="print only the newest run directory of experiment NAME (for scripts)"),
    ) -> None:
        """List runs: name, id, status, cells done."""
        from .rundir import default_results_root, list_runs

        r = root or default_results_root()
        runs = list_runs(r)
        if latest is not None:
            mine = [x for x in runs if x["name"] == latest]
            if not mine:
                raise UserError(f"no run of '{latest}' under {r} (pqshake run experiments/{latest}.yaml)")
            print(max(mine, key=lambda x: x["id"])["path"])
            return
        if not runs:
            print(f"no runs under {r}")
            return
        print(f"{'name':<16} {'id':<24} {'status':<24} {'cells':>11}  started")
        for x in runs:
            cells = f"{x['cells_done']}/{x['cells'] if x['cells'] is not None else '?'}"
            st = x["status"] + (f" ({x['cells_failed']} failed)" if x["cells_failed"] else "")
            print(f"{x['name'] or '?':<16} {x['id']:<24} {st:<24} {cells:>11}  {x['started'] or ''}")
            print(f"  {x['path']}")

    @app.command("load")
    def load_cmd(
        run_dir: Path = typer.Argument(..., help="a run directory, results/<name>/<id>"),
        table: str = typer.Option("samples", "--table", help="samples, server or cells"),
        csv: Optional[Path] = typer.Option(None, "--csv", help="also write the table as CSV"),
    ) -> None:
        """(Re)build the parquet files from raw/ and print a summary. In Python:
        `from pqshake.experiments import load; df = load(run_dir)`."""
        import pandas as pd

        from .rundir import load

        df = load(run_dir, table)
        print(f"{table}: {len(df)} rows x {len(df.columns)} columns")
        if csv:
            try:
                df.to_csv(csv, index=False)
            except OSError as e:
                raise UserError(f"{csv}: cannot write: {e.strerror or e}", exit_code=1) from None
            print(f"wrote {csv}")
        if table == "samples" and len(df) and "handshake_ns" in df:
            meas = df[~df["warmup"].astype(bool)]
            key = ["profile", "group", "sig", "mode"] + (["transport"] if "transport" in meas else [])
            g = meas.groupby(key, sort=True)
            summ = pd.DataFrame({
                "n": g.size(),
                "ok": g["ok"].sum(),
                "p50_ms": g["handshake_ns"].median() / 1e6,
                "p90_ms": g["handshake_ns"].quantile(0.9) / 1e6,
            })
            with pd.option_context("display.max_rows", 500, "display.width", 160):
                print(summ.round(3).to_string())
        elif len(df):
            with pd.option_context("display.max_rows", 50, "display.width", 160, "display.max_columns", 14):
                print(df.head(20).to_string())


# A ratio of estimates within 5 % of 1 is no gain: the estimates are not that exact, and
# "1.0x faster" (or "0.9x faster", slots costing their links' set-ups) claims what is not so.
NO_GAIN = 1.05


def _speedup(sequential_s: float, slots_s: float) -> str:
    """'2.3x faster', or 'no faster' when the slots' estimate does not beat one cell at a time."""
    ratio = sequential_s / slots_s if slots_s > 0 else 1.0
    return f"{ratio:.1f}x faster" if ratio > NO_GAIN else "no faster"


def _parse_counts(text: str) -> list[int]:
    try:
        counts = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        counts = []
    if not counts or any(n < 1 for n in counts):
        raise UserError(f"--shards {text!r}: expected a positive number of shards, or several as 1,8,32", exit_code=2)
    return counts


def _print_shards(p, n: int) -> None:
    from .plan import fmt_seconds
    from .shard import estimates

    e = estimates(p, n)
    print(f"  {n} shard{'s' if n > 1 else ''}: wall time ~{fmt_seconds(e['wall_s'])} (the slowest shard; serial "
          f"{fmt_seconds(e['serial_s'])}, shards together {fmt_seconds(e['sum_s'])}); imbalance "
          f"{e['imbalance'] * 100:.2f} % (slowest / mean - 1)")
    if n <= 64:
        for i, (nc, s, np_) in enumerate(zip(e["cells"], e["estimate_s"], e["profiles"])):
            print(f"    shard {i:>3}/{n}: {nc:>5} cells  {np_:>3} profiles  ~{fmt_seconds(s)}")


def _print_result(path: Path) -> None:
    """The run's outcome; a run with failed cells exits 1, its last line says how to measure them
    again (a failed cell is no measurement, and a script must not take the run as done)."""
    from .rundir import RunDir

    run = RunDir(path)
    m = run.meta()
    failed = m.get("cells_failed", 0)
    print(f"{m.get('status')}: {m.get('cells_complete', 0)} cells complete, {failed} failed")
    print(f"run directory: {path}")
    print(f"figures: make figures RUN={path}")
    if failed:
        raise UserError(f"{failed} cell{'s' if failed > 1 else ''} failed (reasons in {run.logs / 'run.log'}); "
                        f"measure {'them' if failed > 1 else 'it'} again with: pqshake resume {path}", exit_code=1)
