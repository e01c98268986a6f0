"""A real database on a lab mirror, for rehearsing a disaster: PostgreSQL under pgbench.

What a copy is worth after a disaster is what the applications on it make
of it. This runs Debian's PostgreSQL on a file system on the mirror at
site A, drives it with pgbench's TPC-B-like transactions, and after a
promotion starts it again at site B and asks it the questions a DBA would:
does it come up, do the balances add up (pgbench's invariant: accounts,
tellers and branches each sum to the history's deltas), are the indexes
and tables sound (amcheck), and which transactions that pgbench saw
committed are missing.

Each transaction tags its history row with its pgbench client, and a
client's transactions commit one after another, so "which are missing" is
exact: per client, pgbench's log says how many it saw committed before a
moment, and the history at site B how many it holds.

Used by the hosts' lab (tests/hosts_lab: a primary's power cut, then a
forced promotion) and the experiment `bench/async_disaster.py`.
"""

from __future__ import annotations

import json
import math
import shlex
import subprocess
import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from remirror.lab.net import in_site_b

RUN_DIR = "/run/remirror-lab-database"  # sockets and pgbench's logs (the lab's /run is its own)
PG_BIN = max(Path("/usr/lib/postgresql").glob("*/bin"), default=Path("/usr/lib/postgresql/15/bin"))

# pgbench's built-in tpcb-like script, its history row tagged with the client that wrote it.
TAGGED_TPCB = """\\set aid random(1, 100000 * :scale)
\\set bid random(1, 1 * :scale)
\\set tid random(1, 10 * :scale)
\\set delta random(-5000, 5000)
BEGIN;
UPDATE pgbench_accounts SET abalance = abalance + :delta WHERE aid = :aid;
SELECT abalance FROM pgbench_accounts WHERE aid = :aid;
UPDATE pgbench_tellers SET tbalance = tbalance + :delta WHERE tid = :tid;
UPDATE pgbench_branches SET bbalance = bbalance + :delta WHERE bid = :bid;
INSERT INTO pgbench_history (tid, bid, aid, delta, mtime, filler)
  VALUES (:tid, :bid, :aid, :delta, CURRENT_TIMESTAMP, 'c' || :client_id);
END;
"""

# Small, and checkpointing often: data pages reach the disk during the run, not only WAL.
SETTINGS = {
    "listen_addresses": "''",
    "shared_buffers": "16MB",
    "checkpoint_timeout": "30s",
    "max_wal_size": "48MB",
    "min_wal_size": "32MB",
    "fsync": "on",
    "synchronous_commit": "on",
    "full_page_writes": "on",
}


def _sh(argv: list[str], timeout: float = 600, check: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
    if check and done.returncode != 0:
        said = (done.stderr or done.stdout)[-800:]
        raise RuntimeError(f"{shlex.join(argv)}: exit {done.returncode}: {said}")
    return done


@dataclass(frozen=True)
class Cluster:
    """A PostgreSQL cluster in `data` on one lab site, on a socket of its own."""

    site: str  # "a" or "b" (the single-VM lab's sites), or a host's name
    data: str
    port: int
    # How a command reaches the cluster's host when it is not this kernel: an SSH argv that
    # takes the command as one string (the hosts' lab, remirror.lab.hosts.machine.Host.ssh_argv).
    remote: tuple[str, ...] = ()

    @property
    def socket(self) -> str:
        """The directory of its Unix socket (no TCP: the lab's addresses are the sites')."""
        return f"{RUN_DIR}/socket-{self.site}"

    def argv(self, *argv: str, user: str = "postgres") -> list[str]:
        """`argv` on the cluster's site, as `user`."""
        command = ["runuser", "-u", user, "--", *argv] if user != "root" else list(argv)
        if self.remote:
            return [*self.remote, shlex.join(command)]
        return in_site_b(command) if self.site == "b" else command

    def run(self, *argv: str, user: str = "postgres", timeout: float = 600, check: bool = True) -> str:
        """Run a command on the cluster's site; its output."""
        return _sh(self.argv(*argv, user=user), timeout, check).stdout

    def start(self) -> float:
        """Start the server and wait until it accepts connections (crash recovery first); seconds."""
        started = time.monotonic()
        self.run("install", "-d", "-o", "postgres", "-m", "0755", self.socket, user="root")
        options = f"-p {self.port} -k {self.socket}"
        self.run(
            f"{PG_BIN}/pg_ctl", "-D", self.data, "-w", "-t", "600", "-o", options,
            "-l", f"{self.data}/../postgres-{self.site}.log", "start", timeout=660,
        )  # fmt: skip
        return time.monotonic() - started

    def stop(self) -> None:
        """Stop the server if it runs (fast shutdown)."""
        self.run(f"{PG_BIN}/pg_ctl", "-D", self.data, "-m", "fast", "-w", "stop", check=False)

    def kill(self, gone_within: float = 300) -> None:
        """Every server process killed at once, as a power cut would stop them: the lab runs one
        cluster at a time, as user postgres, whose processes are all named `postgres` (pgbench,
        also run as postgres, lives on to write its log). Not `kill -KILL -PGID`: twice in the
        lab the guest powered off right after that command (its script had ended).

        Returns once they are gone: a process waiting on the disk dies only when its write ends
        (with the link cut, when iSCSI gives up on the remote leg), and until then its files keep
        the file system busy (seen in CI: `umount` right after the kill, "target is busy")."""
        servers = ("-u", "postgres", "-x", "postgres")
        _sh(self.argv("pkill", "-KILL", *servers, user="root"), check=False)
        deadline = time.monotonic() + gone_within
        while _sh(self.argv("pgrep", *servers, user="root"), check=False).returncode == 0:
            if time.monotonic() > deadline:
                raise RuntimeError(f"postgres still runs {gone_within:.0f} s after SIGKILL")
            time.sleep(0.2)

    def sql(self, query: str) -> str:
        """One query's result, unaligned, no headers."""
        return self.run(
            f"{PG_BIN}/psql", "-X", "-q", "-At", "-v", "ON_ERROR_STOP=1", "-h", self.socket,
            "-p", str(self.port), "-d", "postgres", "-c", query,
        ).strip()  # fmt: skip


def create(site: str, mount: str, port: int = 5432, remote: tuple[str, ...] = ()) -> Cluster:
    """A new cluster in `mount`/pg (a file system on the mirror), tuned by SETTINGS."""
    cluster = Cluster(site, f"{mount}/pg", port, remote)
    cluster.run("install", "-d", "-o", "postgres", "-g", "postgres", "-m", "0700", cluster.data, user="root")
    cluster.run("chown", "postgres:postgres", mount, user="root")
    cluster.run(f"{PG_BIN}/initdb", "--no-sync", "-A", "trust", "-U", "postgres", "-D", cluster.data)
    conf = "".join(f"{key} = {value}\n" for key, value in SETTINGS.items())
    cluster.run("sh", "-c", f"cat >> {cluster.data}/postgresql.conf <<'EOF'\n{conf}EOF")
    return cluster


def load(cluster: Cluster, scale: int = 1) -> None:
    """pgbench's tables (scale 1: 100,000 accounts), and the script that tags history rows."""
    cluster.run(
        f"{PG_BIN}/pgbench", "-i", "-q", "-s", str(scale), "-h", cluster.socket, "-p", str(cluster.port),
        "postgres",
    )  # fmt: skip
    cluster.run("sh", "-c", f"cat > {cluster.data}/../tpcb-tagged.sql <<'EOF'\n{TAGGED_TPCB}EOF")


@dataclass
class Workload:
    """pgbench running against a cluster, logging each transaction it saw committed."""

    cluster: Cluster
    log_dir: str
    process: subprocess.Popen[str] = field(init=False)

    def start(self, clients: int, seconds: int, rate: int | None = None) -> Workload:
        """Start pgbench in the background: `clients` connections for `seconds`, at most `rate`
        transactions a second (None: as fast as they go)."""
        _sh(["install", "-d", "-o", "postgres", "-m", "0755", self.log_dir])
        limit = ["-R", str(rate)] if rate else []
        argv = self.cluster.argv(
            f"{PG_BIN}/pgbench", "-n", *limit, "-c", str(clients), "-j", str(min(clients, 2)),
            "-T", str(seconds),
            "-l", "--log-prefix", f"{self.log_dir}/tx", "-f", f"{self.cluster.data}/../tpcb-tagged.sql",
            "-h", self.cluster.socket, "-p", str(self.cluster.port), "postgres",
        )  # fmt: skip
        self.process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        return self

    def running(self) -> bool:
        """Whether pgbench still runs."""
        return self.process.poll() is None

    def wait(self, timeout: float = 600) -> str:
        """Until pgbench ends (its clients aborted when the server died); its output."""
        out, _ = self.process.communicate(timeout=timeout)
        return out

    def committed_before(self, moment: float) -> Counter[str]:
        """Per client (`c0`, `c1`, ...), the transactions pgbench saw committed before `moment`
        (unix time): its per-transaction log gives each one's end as epoch seconds and microseconds."""
        lines = (line for path in Path(self.log_dir).glob("tx*") for line in path.read_text().splitlines())
        return committed(lines, moment)


def committed(log_lines: Iterable[str], before: float = math.inf) -> Counter[str]:
    """Per client (`c0`, `c1`, ...), the transactions pgbench's per-transaction log (`-l`) says
    committed before `before` (unix time; by default all of them)."""
    seen: Counter[str] = Counter()
    for line in log_lines:
        fields = line.split()
        # client_id transaction_no time script_no time_epoch time_us
        numbers = fields[2:3] + fields[4:6]
        if len(numbers) < 3 or not all(f.isdigit() for f in numbers):
            continue  # a transaction that failed is logged with "failed" for its time
        if int(fields[4]) + int(fields[5]) / 1e6 < before:
            seen[f"c{fields[0]}"] += 1
    return seen


@dataclass(frozen=True)
class Verdict:
    """What the database makes of a copy."""

    started: bool
    recovery_seconds: float
    balances: dict[str, int]  # accounts, tellers, branches, history: sums of balances and deltas
    amcheck_problems: int  # btree index and heap problems amcheck reports
    committed: dict[str, int]  # per client: history rows present
    error: str = ""

    @property
    def balances_agree(self) -> bool:
        """pgbench's invariant: every sum equals the history's."""
        return len(set(self.balances.values())) == 1 and len(self.balances) == 4

    @property
    def sound(self) -> bool:
        """It started, its balances agree and amcheck found nothing."""
        return self.started and self.balances_agree and self.amcheck_problems == 0

    def missing(self, acknowledged: Counter[str]) -> int:
        """Transactions pgbench saw committed that this copy lacks."""
        return sum(max(0, n - self.committed.get(client, 0)) for client, n in acknowledged.items())

    def as_json(self) -> dict[str, object]:
        """For a test's record or the experiment's results."""
        return {
            "started": self.started,
            "recovery_seconds": round(self.recovery_seconds, 1),
            "balances": self.balances,
            "balances_agree": self.balances_agree,
            "amcheck_problems": self.amcheck_problems,
            "history_rows": sum(self.committed.values()),
            "error": self.error,
        }


AMCHECK = """CREATE EXTENSION IF NOT EXISTS amcheck;
SELECT count(*) FROM (
  SELECT bt_index_check(index => c.oid, heapallindexed => true)
  FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_am am ON am.oid = c.relam
  WHERE am.amname = 'btree' AND c.relname LIKE 'pgbench_%') checked WHERE false;
SELECT (SELECT count(*) FROM verify_heapam('pgbench_accounts'))
     + (SELECT count(*) FROM verify_heapam('pgbench_tellers'))
     + (SELECT count(*) FROM verify_heapam('pgbench_branches'))
     + (SELECT count(*) FROM verify_heapam('pgbench_history'));"""


def judge(cluster: Cluster) -> Verdict:
    """Start the cluster (crash recovery) and check it: balances, amcheck, history per client."""
    try:
        recovery = cluster.start()
    except (RuntimeError, subprocess.TimeoutExpired) as error:
        return Verdict(False, 0.0, {}, 0, {}, str(error)[-500:])
    try:
        sums = cluster.sql(
            "SELECT json_build_object('accounts', (SELECT sum(abalance) FROM pgbench_accounts),"
            " 'tellers', (SELECT sum(tbalance) FROM pgbench_tellers),"
            " 'branches', (SELECT sum(bbalance) FROM pgbench_branches),"
            " 'history', (SELECT coalesce(sum(delta), 0) FROM pgbench_history))"
        )
        balances = {k: int(v or 0) for k, v in json.loads(sums).items()}
        rows = cluster.sql("SELECT trim(filler), count(*) FROM pgbench_history GROUP BY 1")
        committed = {c: int(n) for c, n in (line.split("|") for line in rows.splitlines() if line)}
        # amcheck raises on the first broken index (an error, not a row): count it as one.
        try:
            problems = int(cluster.sql(AMCHECK).splitlines()[-1])
        except RuntimeError as error:
            return Verdict(True, recovery, balances, 1, committed, str(error)[-500:])
        return Verdict(True, recovery, balances, problems, committed)
    except RuntimeError as error:
        return Verdict(True, recovery, {}, 0, {}, str(error)[-500:])
