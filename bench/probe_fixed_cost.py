#!/usr/bin/env python
"""The operator's fixed cost per call on a warm process (issue #33): where it goes, and whether a
change cut it.

    python bench/probe_fixed_cost.py profile --engines duckdb,postgres --sizes 1000 --calls 20
    python bench/probe_fixed_cost.py ab --base /tmp/base-checkout --engines duckdb --sizes 1000,100000

Both use bench_engines.py's scenario, databases, hand-written statements and timed operator call
(`run_operator`: `PartitionOverwriteOperator` / `MergeOperator` ``.execute(context)`` whole, checksum
and history on, each statement timed and its server CPU read), in databases named ``eng48_<hex>``
dropped at the end.

``profile``: after two warm-up calls, cProfile over ``--calls`` calls of one process; prints the
functions with the most own and cumulative time per call, and the 'other' (wall time minus the
statements and the commit) with the process's CPU beside it.

``ab``: two worker processes, one importing the package from ``--base`` (a checkout of the commit
to compare against), one from this checkout, kept warm; each repeat runs the base, the branch and
the hand-written write once, the order rotating, the target settled before each. Per side, the
medians (minimum-maximum) of the wall time, the process's CPU (``time.process_time``: it does not
stretch when other work takes the machine's CPUs), 'other' and the statements' server CPU.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench_engines import REPO_ROOT, airflow_home, fill, load, run_hand, run_operator, settle, warehouse

PREFIX = "eng48"


def use_root(root: Path) -> None:
    """Import the package from `root` (a checkout), ahead of this one and of the editable install."""
    sys.path.insert(0, str(root))
    import airflow_idempotent

    assert Path(airflow_idempotent.__file__).resolve().is_relative_to(root.resolve()), (
        airflow_idempotent.__file__
    )


def call(kind: str, strategy: str, run: int) -> dict[str, Any]:
    """One timed operator call: wall, this process's CPU, its statements' wall and server CPU."""
    steps: list[dict[str, float]] = []
    cpu: list[dict[str, float]] = []
    c0 = time.process_time()
    wall = run_operator(kind, strategy, run, steps, cpu)
    process = time.process_time() - c0
    return {
        "wall": wall,
        "cpu": process,
        "other": wall - sum(steps[0].values()),
        "steps": steps[0],
        "server": cpu[0],
    }


# ------------------------------------------------------------------------------------- profile
def profile(kind: str, strategy: str, calls: int, top: int) -> None:
    for r in range(2):
        call(kind, strategy, r)
    # CPU, not wall: the machine is shared, and waits on the servers are not the Python's cost
    prof = cProfile.Profile(time.process_time)
    runs = []
    for r in range(calls):
        prof.enable()
        runs.append(call(kind, strategy, 100 + r))
        prof.disable()
    other = statistics.median(r["other"] for r in runs) * 1000
    cpu = statistics.median(r["cpu"] for r in runs) * 1000
    print(
        f"\n### {kind} {strategy}: {calls} calls under cProfile (process CPU timer), other {other:.1f} ms, "
        f"process CPU {cpu:.1f} ms"
    )
    stats = pstats.Stats(prof)
    for key in ("tottime", "cumulative"):
        print(f"-- by {key}, ms per call (ncalls per call)")
        stats.sort_stats(key)
        width = stats.fcn_list[:top]  # type: ignore[attr-defined]
        for func in width:
            _cc, nc, tt, ct, _ = stats.stats[func]  # type: ignore[attr-defined]
            name = f"{Path(func[0]).name}:{func[1]}({func[2]})"
            print(f"{tt * 1000 / calls:8.2f} {ct * 1000 / calls:8.2f} {nc / calls:8.1f}  {name}")
    if os.environ.get("ENG48_CALLERS"):
        stats.sort_stats("cumulative")
        stats.print_callers(*os.environ["ENG48_CALLERS"].split(","))


# ------------------------------------------------------------------------------------- timeline
def timeline(kind: str, strategy: str, calls: int) -> None:
    """Warm calls with every statement, commit and rollback of every engine (warehouse and history
    store) and every new DBAPI connection logged with its start offset and duration: the gaps are
    the Python between."""
    from sqlalchemy import event
    from sqlalchemy.engine import Engine
    from sqlalchemy.engine.default import DefaultDialect
    from sqlalchemy.pool import Pool

    events: list[tuple[float, float, str]] = []
    starts: dict[int, float] = {}

    def before(conn: Any, cursor: Any, statement: str, *_: Any) -> None:
        starts[id(cursor)] = time.perf_counter()

    def after(conn: Any, cursor: Any, statement: str, *_: Any) -> None:
        t0 = starts.pop(id(cursor), time.perf_counter())
        db = conn.engine.url.database or ""
        events.append((t0, time.perf_counter() - t0, f"{db[-14:]}: {' '.join(statement.split())[:110]}"))

    def connected(dbapi: Any, record: Any) -> None:
        events.append((time.perf_counter(), 0.0, "  (new DBAPI connection made)"))

    def timed(name: str, real: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(self: Any, dbapi_connection: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return real(self, dbapi_connection)
            finally:
                events.append((t0, time.perf_counter() - t0, f"  ({name} {self.name})"))

        return wrapper

    for r in range(2):
        call(kind, strategy, r)
    real_commit, real_rollback = DefaultDialect.do_commit, DefaultDialect.do_rollback
    event.listen(Engine, "before_cursor_execute", before)
    event.listen(Engine, "after_cursor_execute", after)
    event.listen(Pool, "connect", connected)
    DefaultDialect.do_rollback = timed("rollback", real_rollback)  # type: ignore[method-assign]
    DefaultDialect.do_commit = timed("commit", real_commit)  # type: ignore[method-assign]
    try:
        for r in range(calls):
            events.clear()
            started = time.perf_counter()
            out = call(kind, strategy, 200 + r)
            print(
                f"\n### {kind} {strategy} call {r}: wall {out['wall'] * 1000:.1f} ms, other "
                f"{out['other'] * 1000:.1f}, process CPU {out['cpu'] * 1000:.1f}, statements "
                f"{len([e for e in events if ':' in e[2]])}"
            )
            last = started
            for t0, took, text in sorted(events):
                print(f"{(t0 - started) * 1000:8.2f} +{(t0 - last) * 1000:6.2f} {took * 1000:7.2f}  {text}")
                last = t0 + took
    finally:
        DefaultDialect.do_commit, DefaultDialect.do_rollback = real_commit, real_rollback  # type: ignore[method-assign]
        event.remove(Engine, "before_cursor_execute", before)
        event.remove(Engine, "after_cursor_execute", after)
        event.remove(Pool, "connect", connected)


# ------------------------------------------------------------------------------------- breakdown
#: (module, attribute path) of the steps timed by `breakdown`: inclusive, so nested ones overlap.
STEPS = (
    ("airflow_idempotent.operators.base", "WindowWriteOperator.covered"),
    ("airflow_idempotent.identity", "AttemptIdentity.from_context"),
    ("airflow.sdk.bases.hook", "BaseHook.get_connection"),
    ("airflow_idempotent.hooks.warehouse", "create_engine"),
    ("airflow_idempotent.adapters.early", "EarlyConnect.open_early"),
    ("airflow_idempotent.operators.base", "check_deterministic"),
    ("airflow_idempotent.operators.base", "WindowWriteOperator.fingerprint_parts"),
    ("airflow_idempotent.operators.base", "fingerprint"),
    ("airflow_idempotent.operators.base", "SafeHistory.__init__"),
    ("airflow_idempotent.operators.guarded", "GuardedWriteMixin.check_kill_switch"),
    ("airflow_idempotent.history.fences", "AttemptFence.take"),
    ("airflow_idempotent.history.fences", "AttemptFence.check"),
    ("airflow_idempotent.history.link", "StoreLink.connection"),
    ("airflow_idempotent.operators.base", "WindowWriteOperator.write"),
    ("airflow_idempotent.strategies", "prepare"),
    ("airflow_idempotent.adapters.base", "EngineAdapter.execute"),
    ("airflow_idempotent.adapters.base", "EngineAdapter.render"),
    ("airflow_idempotent.adapters.base", "EngineAdapter.insert_select"),
    ("airflow_idempotent.adapters.base", "EngineAdapter.upsert"),
    ("airflow_idempotent.adapters.base", "EngineAdapter.delete_window"),
    ("airflow_idempotent.adapters.checksums", "ChecksumStatements.window_checksum"),
    ("airflow_idempotent.history.spool", "SafeHistory.record"),
    ("airflow_idempotent.operators.base", "WindowWriteOperator.emit_asset_event"),
    ("logging", "Logger._log"),
    ("threading", "Thread.start"),
)


def breakdown(kind: str, strategy: str, calls: int) -> None:
    """Inclusive CPU (this process) and wall per step of `STEPS`, per call, medians over `calls`."""
    import importlib

    totals: dict[str, list[tuple[float, float]]] = {}
    current: dict[str, list[float]] = {}
    patched: list[tuple[Any, str, Any]] = []

    def wrap(label: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            c0, t0 = time.process_time(), time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                acc = current.setdefault(label, [0.0, 0.0, 0])
                acc[0] += time.process_time() - c0
                acc[1] += time.perf_counter() - t0
                acc[2] += 1

        return wrapper

    for r in range(2):
        call(kind, strategy, r)
    for module_name, path in STEPS:
        owner: Any = importlib.import_module(module_name)
        *parents, name = path.split(".")
        for parent in parents:
            owner = getattr(owner, parent)
        real = owner.__dict__.get(name) if isinstance(owner, type) else getattr(owner, name, None)
        if real is None or isinstance(real, property):
            print(f"not timed: {module_name}.{path}")
            continue
        patched.append((owner, name, real))
        if isinstance(real, classmethod | staticmethod):
            setattr(owner, name, type(real)(wrap(path, real.__func__)))
        else:
            setattr(owner, name, wrap(path, real))
    try:
        runs = []
        for r in range(calls):
            current.clear()
            runs.append(call(kind, strategy, 400 + r))
            for label, (cpu, wall, n) in current.items():
                totals.setdefault(label, []).append((cpu, wall, n))
    finally:
        for owner, name, real in reversed(patched):
            setattr(owner, name, real)
    cpu = statistics.median(r["cpu"] for r in runs) * 1000
    other = statistics.median(r["other"] for r in runs) * 1000
    print(f"\n### {kind} {strategy}: {calls} calls, process CPU {cpu:.2f} ms, other {other:.1f} ms (wall)")
    print("| step (inclusive) | calls per write | CPU ms (median) | wall ms (median) |")
    print("|---|---:|---:|---:|")
    for _, path in STEPS:
        values = totals.get(path, [])
        if values:
            pad = [(0.0, 0.0, 0)] * (calls - len(values))
            c = statistics.median(v[0] for v in values + pad) * 1000
            w = statistics.median(v[1] for v in values + pad) * 1000
            print(f"| {path} | {statistics.median(v[2] for v in values + pad):.0f} | {c:.2f} | {w:.2f} |")


# ------------------------------------------------------------------------------------- sampling
def loop(db: Any, strategy: str, calls: int) -> None:
    """Warm calls under a sampling profiler: with ENG48_SPY=<py-spy binary>:<output>, py-spy attaches
    after three warm-up calls (its samples leave out the first calls' imports and the store's
    migration) and stops after the last call; idle threads (waiting on a server) are not sampled."""
    import signal

    for r in range(3):
        settle(db)
        call(db.kind, strategy, r)
    spy = None
    if os.environ.get("ENG48_SPY"):
        binary, output = os.environ["ENG48_SPY"].split(":")
        spy = subprocess.Popen(
            [
                binary,
                "record",
                "--gil",
                "--pid",
                str(os.getpid()),
                "--rate",
                "1000",
                "--format",
                "raw",
                "-o",
                output,
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        time.sleep(2)
    for r in range(calls):
        settle(db)
        call(db.kind, strategy, 300 + r)
    if spy is not None:
        spy.send_signal(signal.SIGINT)
        spy.wait(timeout=60)


# ------------------------------------------------------------------------------------- A/B
class Worker:
    """A warm process importing the package from one checkout, running calls on request."""

    def __init__(self, root: Path) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, __file__, "worker", "--root", str(root)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            cwd=REPO_ROOT,
        )

    def __call__(self, kind: str, strategy: str, run: int) -> dict[str, Any]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps([kind, strategy, run]) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError("worker died")
        return json.loads(line)

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=60)


def worker(root: Path) -> None:
    results = os.fdopen(os.dup(1), "w")  # the answers; the task's logs go to stderr
    os.dup2(2, 1)
    use_root(root)
    for line in sys.stdin:
        kind, strategy, run = json.loads(line)
        out = call(kind, strategy, run)
        results.write(json.dumps(out) + "\n")
        results.flush()


def hand(db: Any, strategy: str) -> dict[str, Any]:
    steps: list[dict[str, float]] = []
    cpu: list[dict[str, float]] = []
    c0 = time.process_time()
    wall = run_hand(db, strategy, steps, cpu)
    return {
        "wall": wall,
        "cpu": time.process_time() - c0,
        "other": wall - sum(steps[0].values()),
        "steps": steps[0],
        "server": cpu[0],
    }


def med(runs: list[dict[str, Any]], get: Callable[[dict[str, Any]], float]) -> str:
    values = [get(r) * 1000 for r in runs]
    return f"{statistics.median(values):.1f} ({min(values):.1f}-{max(values):.1f})"


def ab(db: Any, strategy: str, sides: dict[str, Worker], repeats: int) -> list[str]:
    names = [*sides, "hand"]
    runs: dict[str, list[dict[str, Any]]] = {n: [] for n in names}
    for r in range(repeats + 1):
        order = names[r % len(names) :] + names[: r % len(names)]
        for name in order:
            settle(db)
            out = hand(db, strategy) if name == "hand" else sides[name](db.kind, strategy, 1000 * r + 7)
            if r:
                runs[name].append(out)
    rows = []
    for name in names:
        rs = runs[name]
        rows.append(
            f"| {name} | {med(rs, lambda x: x['wall'])} | {med(rs, lambda x: x['cpu'])} | "
            f"{med(rs, lambda x: x['other'])} | {med(rs, lambda x: sum(x['server'].values()))} |"
        )
    base, new = runs["base"], runs["branch"]
    for label, key in (("wall", "wall"), ("process CPU", "cpu"), ("other", "other")):
        paired = [(b[key] - a[key]) * 1000 for a, b in zip(base, new, strict=True)]
        rows.append(
            f"| branch - base, paired, {label} | {statistics.median(paired):+.1f} ms "
            f"({min(paired):+.1f} to {max(paired):+.1f}) | | | |"
        )
    for side in ("base", "branch"):
        ratio = statistics.median(x["wall"] for x in runs[side]) / statistics.median(
            x["wall"] for x in runs["hand"]
        )
        rows.append(f"| {side} / hand, ratio of medians | {ratio:.3f} | | | |")
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("mode", choices=("profile", "timeline", "loop", "breakdown", "ab", "worker"))
    parser.add_argument("--engines", default="duckdb,postgres")
    parser.add_argument("--sizes", default="1000")
    parser.add_argument("--strategies", default="overwrite,merge")
    parser.add_argument("--calls", type=int, default=20)
    parser.add_argument("--top", type=int, default=40)
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument("--root", type=Path, default=REPO_ROOT)
    parser.add_argument("--base", type=Path)
    args = parser.parse_args()
    if args.mode == "worker":
        worker(args.root)
        return 0
    if args.mode in ("profile", "timeline", "loop", "breakdown"):
        use_root(args.root)
    with airflow_home(PREFIX) as home:
        for kind in args.engines.split(","):
            with warehouse(kind, home, PREFIX) as db:
                # started once the connection `warehouse` is in the environment they inherit
                sides = {"base": Worker(args.base), "branch": Worker(args.root)} if args.mode == "ab" else {}
                try:
                    for n in [int(s) for s in args.sizes.split(",")]:
                        fill(db, n)
                        for strategy in args.strategies.split(","):
                            if args.mode == "profile":
                                profile(kind, strategy, args.calls, args.top)
                                continue
                            if args.mode == "timeline":
                                timeline(kind, strategy, args.calls)
                                continue
                            if args.mode == "breakdown":
                                breakdown(kind, strategy, args.calls)
                                continue
                            if args.mode == "loop":
                                loop(db, strategy, args.calls)
                                continue
                            before = load()
                            rows = ab(db, strategy, sides, args.repeats)
                            head = f"{kind} {n:,} {strategy}, {args.repeats} repeats"
                            print(f"\n### {head}, load {before} -> {load()}")
                            print(
                                "| side | wall ms | process CPU ms | other ms | server CPU of statements ms |"
                            )
                            print("|---|---:|---:|---:|---:|")
                            print("\n".join(rows), flush=True)
                finally:
                    for w in sides.values():
                        w.close()
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    sys.exit(main())
