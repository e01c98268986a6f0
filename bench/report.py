"""The benchmark report: results.json (from bench/suite.py) to report.md and PNG plots.

Runs on the host after the lab (`./dev bench` calls it): python bench/report.py DIR
reads DIR/results.json and writes DIR/report.md and DIR/*.png. Every figure is
given as a ratio to its baseline from the same run, with the absolute number
beside it, and checked against the targets of issue 27 and the seeds' figures, after
the calibration of the modelled disks.
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from statistics import median
from typing import Any

import matplotlib

matplotlib.use("Agg")  # no screen: files only
import matplotlib.pyplot as plt
from common import CAUTION

# The capstone seed's iSCSI transfer rates (dd to the iSCSI disk, 64 KB pages, its
# tables in section 4), KB/s by (Mbit, delay ms): delay cost it far more than the link.
CAPSTONE_KB_PER_S = {
    (1, 0): 112.294, (1, 50): 111.245, (1, 100): 107.704, (1, 150): 104.493,
    (45, 0): 4975.931, (45, 50): 2113.362, (45, 100): 1114.059, (45, 150): 737.518,
    (100, 0): 10581.333, (100, 50): 2075.265, (100, 100): 1014.673, (100, 150): 687.801,
}  # fmt: skip
CONFIG_ORDER = (
    "baseline",
    "S-S",
    "S-iL",
    "S-iW",
    "S-iDL",
    "S-iDW",
    "D-iDL",
    "async-W",
    "CDP-stack",
    "CDP-60s",
    "CDP-60s-D",
    "CDP-60s-DD",
    "CDP-10s",
)


def describe_model(performance: dict[str, Any] | None) -> str:
    if not performance:
        return "No performance model (a plain lab: virtio disks, a bare veth)."
    queue = performance.get("queue", {}).get(performance["disk_model"])  # recorded since 2026-11-26
    settings = (
        f" Each disk's queue: {queue['scheduler']}, room for {queue['nr_requests']} requests,"
        f" writeback throttling {'off' if queue['wbt_lat_usec'] == '0' else 'on'}."
        if queue
        else ""
    )
    return (
        f"Data disks modelled as {performance['disk_model']}, cache disks as {performance['cache_disk_model']},"
        f" a {performance['lan']['rate_bit_s'] / 1e9:g} Gbit/s LAN, all dilated"
        f" {performance['dilation']['factor']:.2f}x.{settings}"
    )


def ratio(value: float, base: float) -> str:
    return f"{value / base:.2f}x" if base else "n/a"


def configs_table(configs: dict[str, Any]) -> list[str]:
    base = configs.get("baseline")
    rows = [
        "| configuration | 4k QD1 mean ms | p50 | p99 | p99.9 | vs baseline (mean) | 4k QD16 IOPS | vs baseline"
        " | 50/50 IOPS (r+w) | 1M seq MB/s | vs baseline | trace mean ms | trace p99 ms"
        " | PostMark s (to durable) | vs baseline |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name in CONFIG_ORDER:
        c = configs.get(name)
        if c is None:
            continue
        q1, q16, seq, mix, pm = c["qd1"], c["qd16"], c["seq"], c["mix"], c["postmark"]
        tr = c.get("trace", {"mean_ms": float("nan"), "p99_ms": float("nan")})  # not in every run
        b = base or c
        rows.append(
            f"| {name} | {q1['mean_ms']:.2f} | {q1['p50_ms']:.2f} | {q1['p99_ms']:.2f} | {q1['p99_9_ms']:.2f}"
            f" | {ratio(q1['mean_ms'], b['qd1']['mean_ms'])} | {q16['iops']:.0f}"
            f" | {ratio(q16['iops'], b['qd16']['iops'])}"
            f" | {mix['read']['iops'] + mix['write']['iops']:.0f} | {seq['mb_per_s']:.1f}"
            f" | {ratio(seq['mb_per_s'], b['seq']['mb_per_s'])} | {tr['mean_ms']:.2f} | {tr['p99_ms']:.2f}"
            f" | {pm['seconds_to_durable']:.1f} | {ratio(pm['seconds_to_durable'], b['postmark']['seconds_to_durable'])} |"
        )
    return rows


def targets(results: dict[str, Any]) -> list[str]:
    """Issue 27's targets, each a ratio from this run, and the seeds' figures for reference."""
    c = results.get("configs", {})
    rows: list[tuple[str, str, float, str, bool | None]] = []  # what, target, value, detail, met

    def get(name: str, job: str, key: str) -> float:
        return float(c[name][job][key])

    def have(*names: str) -> bool:
        return all(n in c for n in names)

    def at_least(
        what: str, target: float, seed: str, num: tuple[str, str, str], den: tuple[str, str, str]
    ) -> None:
        if have(num[0], den[0]):
            a, b = get(*num), get(*den)
            rows.append((what, f">= {target:g}{seed}", a / b, f"{a:.2f} / {b:.2f}", a / b >= target))

    def at_most(what: str, target: float, num: tuple[str, str, str], den: tuple[str, str, str]) -> None:
        if have(num[0], den[0]):
            a, b = get(*num), get(*den)
            rows.append((what, f"<= {target:g}", a / b, f"{a:.2f} / {b:.2f} ms", a / b <= target))

    at_least("S-iL 1 MiB sequential MB/s / single disk", 0.97, " (TH-MSNS: 98.67%)",
             ("S-iL", "seq", "mb_per_s"), ("baseline", "seq", "mb_per_s"))  # fmt: skip
    at_most("async-W (14 ms round trip) 4 KiB QD1 p50 / single disk", 1.1,
            ("async-W", "qd1", "p50_ms"), ("baseline", "qd1", "p50_ms"))  # fmt: skip
    at_least("D-iDL / S-iL 4 KiB QD16 random-write IOPS", 4, " (DCD: about 4x)",
             ("D-iDL", "qd16", "iops"), ("S-iL", "qd16", "iops"))  # fmt: skip
    at_least("S-iL / D-iDL mean 4 KiB QD1 write latency", 2, "",
             ("S-iL", "qd1", "mean_ms"), ("D-iDL", "qd1", "mean_ms"))  # fmt: skip
    resync = results.get("resync")
    if resync and resync.get("resynced_over_dirty") is not None:
        value = resync["resynced_over_dirty"]
        rows.append(("bytes resynced / dirty bitmap chunks' size", "<= 1.25", value, "", value <= 1.25))
    # Issue 48's: CDP at the contract's cadence where the primary's leg has a writecache (the DCD
    # takes the copy-on-write's writes at the primary), against S-iL without either.
    for cdp in ("CDP-60s", "CDP-60s-D", "CDP-60s-DD", "CDP-10s"):
        at_least(
            f"{cdp} / S-iL 1 MiB sequential MB/s",
            0.9,
            "",
            (cdp, "seq", "mb_per_s"),
            ("S-iL", "seq", "mb_per_s"),
        )
        at_least(f"{cdp} / S-iL 4 KiB QD16 IOPS", 0.9, "", (cdp, "qd16", "iops"), ("S-iL", "qd16", "iops"))
        at_most(
            f"{cdp} / S-iL 4 KiB QD1 mean latency", 1.2, (cdp, "qd1", "mean_ms"), ("S-iL", "qd1", "mean_ms")
        )

    def compared(name: str, against: str, what: str) -> None:
        """A reference row per job (no target): `name` over `against` in this run."""
        if have(name, against):
            for job, key, label in (("seq", "mb_per_s", "1 MiB sequential MB/s"), ("qd16", "iops", "4 KiB QD16 IOPS"),
                                    ("qd1", "mean_ms", "4 KiB QD1 mean latency")):  # fmt: skip
                a, b = get(name, job, key), get(against, job, key)
                rows.append((f"{name} / {against} {label}", what, a / b, f"{a:.2f} / {b:.2f}", None))

    # With a writecache on both legs, S-iL's ratios above hold the DCD's burst too; what CDP
    # itself costs there is against the same legs without it (D-iDL).
    compared("CDP-60s-DD", "D-iDL", "CDP's cost on a DCD")
    # Where CDP's cost lies: its stack standing (dm-era over a thin volume, no point taken);
    # the rest of CDP-60s's is what each point costs after it (copy-on-write, a new era).
    compared("CDP-stack", "S-iL", "CDP's layers, no point")
    # The seeds' other figures, for reference.
    for cached, depth in (("S-iDL", "qd1"), ("S-iDL", "qd16")):
        if have("S-iL", cached):
            plain, cached_ms = get("S-iL", depth, "mean_ms"), get(cached, depth, "mean_ms")
            rows.append((f"S-iL / {cached} mean 4 KiB write latency, {depth.upper()}", "DCD: about 4x",
                         plain / cached_ms, f"{plain:.2f} / {cached_ms:.2f} ms", None))  # fmt: skip
    for slow, fast, seed in (
        ("S-iW", "S-iL", "about 3 (DCD, 14 ms RTT)"),
        ("S-iDW", "S-iW", "about 0.5 (DCD)"),
    ):
        if have(slow, fast):
            value = c[slow]["postmark"]["seconds_to_durable"] / c[fast]["postmark"]["seconds_to_durable"]
            rows.append((f"PostMark time {slow} / {fast}", seed, value, "", None))
    met = {True: "met", False: "**not met**", None: "(reference)"}
    return [
        "| what | target | this run | | |",
        "|---|---|---|---|---|",
        *(
            f"| {what} | {target} | {value:.2f} | {detail} | {met[ok]} |"
            for what, target, value, detail, ok in rows
        ),
    ]


def points_line(name: str, config: dict[str, Any]) -> str:
    """How the points of a CDP configuration were taken: by its daemon during the jobs (when in
    each judged job each came, and how long it took), or, in runs before 2026-12-03, by the
    bench before each job."""
    taken, interval = config.get("points_taken", 0), config.get("interval_lab_s")
    daemon = config.get("daemon")
    if daemon is None:
        each = f", one at the start of each judged job, which ran one interval ({interval} s in the lab)"
        return f"{name}: {taken} recovery points taken while measuring{each if interval else ''}."
    judged = [p for p in daemon["points"] if p["job"] is not None]
    when = ", ".join(
        f"{p['into_job_s']:.0f} s into job {p['job'] + 1} (took {p['seconds']:.1f} s)" for p in judged
    )
    failed = f"; {len(daemon['failures'])} ticks failed" if daemon["failures"] else ""
    return (
        f"{name}: {taken} recovery points taken by `remirror cdp run` while measuring, its schedule"
        f" every {interval} s in the lab; the judged jobs (QD1, QD16, sequential, one interval each)"
        f" held {daemon['points_per_job']}: {when or 'none'}{failed}."
    )


def steady_line(steady: dict[str, Any], configs: dict[str, Any]) -> str:
    """D-iDL's QD16 writes past its caches, beside its burst and S-iL's QD16."""
    plain = configs.get("S-iL", {}).get("qd16", {}).get("iops")
    full = steady.get("cache_full_after_s")

    def vs(iops: float | None) -> str:
        return f"{iops:.0f} IOPS ({iops / plain:.1f}x S-iL's QD16)" if iops and plain else f"{iops} IOPS"

    filled = f"full after {full:.0f} s" if full is not None else "**not full** when it stopped"
    return (
        f"4 KiB random writes at QD16 over {steady['region_bytes'] >> 20} MiB (the caches hold 256 MiB):"
        f" the first 10 s {vs(steady['burst_iops'])}; the primary's cache {filled}; then, writeback"
        f" bounding the writes, {vs(steady['steady_iops'])} over the last {steady['steady_seconds']} s."
    )


def own_points_lines(own: dict[str, Any], configs: dict[str, Any]) -> list[str]:
    """The DR site's own points in async mode: each round's pass with and without them, the
    ratios in the same round (QD1's p50, p99 and mean, QD16's IOPS: median and range), and
    md's backlog's drain."""
    passes = own.get("passes", [])
    rounds = sorted({p["round"] for p in passes})
    by = {(p["round"], p["points"]): p for p in passes}
    rows = [
        "| round | points | QD1 p50 / p99 / mean (ms) | drained after QD1 (s) | QD16 IOPS | drained after QD16 (s)"
        " | points in the jobs (QD1, QD16) |",
        "|---|---|---|---|---|---|---|",
    ]
    for each in passes:
        q1, q16 = each["qd1"], each["qd16"]
        held = each.get("daemon", {}).get("points_per_job")
        rows.append(
            f"| {each['round']} | {'yes' if each['points'] else 'no'}"
            f" | {q1['p50_ms']:.1f} / {q1['p99_ms']:.1f} / {q1['mean_ms']:.1f} | {each['qd1_drained_s']}"
            f" | {q16['iops']:.0f} | {each['qd16_drained_s']} | {held if held is not None else '-'} |"
        )

    def ratios(value: Callable[[dict[str, Any]], float]) -> list[float]:
        return [
            value(by[r, True]) / value(by[r, False])
            for r in rounds
            if (r, True) in by and (r, False) in by and value(by[r, False])
        ]

    lines = [
        f"Site B's own points under its leg every {own['every_s']} s of the modelled hardware's time"
        f" ({own['interval_lab_s']} s in the lab), taken by its own daemon; one mirror (async, the WAN),"
        " the stack under the leg throughout, the daemon running in every other pass (ABBA).",
        "",
        *rows,
    ]
    judged = (
        ("QD1 p50", lambda p: p["qd1"]["p50_ms"], "x"),
        ("QD1 p99", lambda p: p["qd1"]["p99_ms"], "x"),
        ("QD1 mean", lambda p: p["qd1"]["mean_ms"], "x"),
        ("QD16 IOPS", lambda p: p["qd16"]["iops"], ""),
    )
    said = []
    for what, value, unit in judged:
        each = ratios(value)
        if each:
            said.append(f"{what} {median(each):.2f}{unit} ({min(each):.2f}-{max(each):.2f})")
    if said:
        lines += ["", f"With the points / without, in the same round, median of {len(ratios(judged[0][1]))}"
                  f" rounds (range): {'; '.join(said)}. The target: QD1 p50 <= 1.05x."]  # fmt: skip
    lines += waits_lines(passes)
    plain = configs.get("async-W", {}).get("qd1", {}).get("p50_ms")
    with_points = [p["qd1"]["p50_ms"] for p in passes if p["points"]]
    if plain and with_points:
        lines += ["", f"Against async-W (no stack under the leg, measured once in this run): QD1 p50"
                  f" {median(with_points) / plain:.2f}x with the points, median of {len(with_points)}."]  # fmt: skip
    return lines


def waits_lines(passes: list[dict[str, Any]]) -> list[str]:
    """Where fio and md's raid1 thread slept uninterruptibly in the passes with points and in
    those without (recorded since 2026-12-03's second run): each job's looks summed over the
    rounds, the most often seen first."""
    lines: list[str] = []
    for job in ("qd1", "qd16"):
        for points in (True, False):
            seen: Counter[str] = Counter()
            looks = 0
            for each in (p for p in passes if p["points"] is points and f"{job}_waits" in p):
                looks += each[f"{job}_waits"]["looks"]
                seen.update(each[f"{job}_waits"]["most_seen"])
            if not looks:
                continue
            said = "; ".join(f"`{where}` {count}" for where, count in seen.most_common(4)) or "none"
            lines.append(
                f"- {job.upper()}, {'with' if points else 'without'} the points: of {looks} looks, in D state: {said}"
            )
    return ["", "Where the writers waited (looks every 0.2 s):", "", *lines] if lines else []


CALIBRATION_TOLERANCE = 0.15


def calibration_table(results: dict[str, Any]) -> list[str]:
    """Each modelled disk as measured in the lab, mapped back by the dilation, against what the
    model declares: the HDD from the baseline's jobs, the SSD from the calibration step's."""
    performance = results.get("meta", {}).get("performance")
    if not performance:
        return ["No performance model in this run (a plain lab): nothing to calibrate."]
    factor = performance["dilation"]["factor"]
    measured = {"hdd": results.get("configs", {}).get("baseline"), **results.get("calibration", {})}
    rows = [
        "| disk | figure | declared | lab | lab, dilation undone | error | within 15% |",
        "|---|---|---|---|---|---|---|",
    ]
    for disk, declared in performance["declared"].items():
        jobs = measured.get(disk)
        if not jobs:
            continue
        for figure, lab, physical, unit in (
            ("QD1 4 KiB write latency", jobs["qd1"]["mean_ms"], jobs["qd1"]["mean_ms"] / factor, "ms"),
            ("QD16 4 KiB random-write IOPS", jobs["qd16"]["iops"], jobs["qd16"]["iops"] * factor, ""),
            ("1 MiB sequential write MB/s", jobs["seq"]["mb_per_s"], jobs["seq"]["mb_per_s"] * factor, ""),
        ):
            key = {"ms": "qd1_write_ms"}.get(unit) or (
                "random_iops" if "IOPS" in figure else "sequential_mb_s"
            )
            want = declared[key]
            error = physical / want - 1
            ok = "yes" if abs(error) <= CALIBRATION_TOLERANCE else "**no**"
            rows.append(
                f"| {disk} | {figure} | {want:.4g} {unit} | {lab:.4g} {unit} | {physical:.4g} {unit}"
                f" | {error:+.1%} | {ok} |"
            )
    ratios = performance["dilation"].get("ratios")
    measured_how = (
        "measured at boot against the host: " + ", ".join(f"{k} {v:.1f}x" for k, v in ratios.items())
        if ratios
        else "given (--dilation)"
    )
    lines = [*rows, "", f"Dilation {factor:.2f} ({measured_how}; the geometric mean)."]
    overhead = performance.get("request_overhead")
    if overhead:
        lines.append(
            f"The guest's own time per request on a scratch {overhead['model']} disk, beyond its service time"
            f" (lab): {overhead['one_at_a_time_s'] * 1000:.1f} ms one at a time,"
            f" {overhead['queued_s'] * 1000:.1f} ms queued, {overhead['stream_s'] * 1000:.1f} ms for its"
            f" largest request; {overhead['taken_off_s'] * 1000:.1f} ms was taken off the service time."
        )
    rtt = results.get("iscsi_round_trip")
    if rtt:
        extra = rtt["remote_read"]["mean_ms"] - rtt["local_read"]["mean_ms"]
        lines.append(
            f"The iSCSI round trip on the LAN (4 KiB reads, QD1, over iSCSI minus local):"
            f" {extra:.2f} ms in the lab, {extra / factor * 1000:.0f} us with the dilation undone."
        )
    return lines


TERABYTE = 1e12


def sync_table(results: dict[str, Any]) -> list[str]:
    """1 TB initial sync and resync times over each link, from the resync rates this run
    measured, next to the physical limit (size over the link's rate, or the disk's)."""
    performance = results.get("meta", {}).get("performance")
    resync = results.get("resync", {})
    if not performance or not resync.get("rates"):
        return []
    factor = performance["dilation"]["factor"]
    disk = performance["declared"][performance["disk_model"]]["sequential_mb_s"] * 1e6
    rows = [
        "| link | resync rate (lab) | with the dilation undone | 1 TB full sync | physical limit | of the limit"
        " | 10 GB dirty |",
        "|---|---|---|---|---|---|---|",
    ]
    for phase in resync["rates"]:
        rate = phase["bytes_per_s"] * factor
        link = phase["link_mbit"] * 1e6 / 8 if phase["link_mbit"] else performance["lan"]["rate_bit_s"] / 8
        limit = min(link, disk)
        name = f"{phase['link_mbit']} Mbit/s" if phase["link_mbit"] else "LAN (10 Gbit/s)"
        rows.append(
            f"| {name} | {phase['bytes_per_s'] / 1e6:.2f} MB/s | {rate / 1e6:.1f} MB/s"
            f" | {TERABYTE / rate / 3600:.1f} h | {TERABYTE / limit / 3600:.1f} h"
            f" ({'disk' if disk < link else 'link'}) | {rate / limit:.2f} | {10e9 / rate / 60:.1f} min |"
        )
    return rows


def grid_table(grid: list[dict[str, Any]]) -> list[str]:
    cell = {(g["through"], g["rate_mbit"], g["delay_ms"]): g for g in grid}
    rows = [
        "| link | delay each way | ideal MB/s | mirror MB/s | of ideal | iSCSI alone MB/s | of ideal | mirror / iSCSI"
        " | capstone's iSCSI MB/s (of ideal) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for rate, delay in sorted({(g["rate_mbit"], g["delay_ms"]) for g in grid}):
        m, i = cell.get(("mirror", rate, delay)), cell.get(("iSCSI", rate, delay))
        ideal = (m or i or {}).get("ideal_mb_per_s", 0)
        rows.append(
            f"| {rate} Mbit | {delay} ms | {ideal:.3f}"
            + (f" | {m['mb_per_s']:.3f} | {m['of_ideal']:.2f}" if m else " | | ")
            + (f" | {i['mb_per_s']:.3f} | {i['of_ideal']:.2f}" if i else " | | ")
            + (f" | {m['mb_per_s'] / i['mb_per_s']:.2f}" if m and i and i["mb_per_s"] else " | ")
            + _capstone(rate, delay, ideal)
        )
    return rows


def _capstone(rate: int, delay: int, ideal: float) -> str:
    kb = CAPSTONE_KB_PER_S.get((rate, delay))
    return f" | {kb * 1024 / 1e6:.3f} ({kb * 1024 / 1e6 / ideal:.2f}) |" if kb and ideal else " | |"


def control_table(control: dict[str, Any]) -> list[str]:
    rows = ["| verb | seconds | exit | site-a requests / commands | site-b requests / commands / answer bytes |",
            "|---|---|---|---|---|"]  # fmt: skip
    for verb, c in control.items():
        a, b = c["sites"].get("site-a", {}), c["sites"].get("site-b", {})
        rows.append(
            f"| {verb} | {c['seconds']:.1f} | {c['exit']} | {a.get('requests', 0)} / {a.get('commands', 0)}"
            f" | {b.get('requests', 0)} / {b.get('commands', 0)} / {b.get('answer_bytes', 0)} |"
        )
    return rows


def plot_configs(configs: dict[str, Any], out: Path) -> list[str]:
    names = [n for n in CONFIG_ORDER if n in configs]
    if "baseline" not in configs:
        return []
    base = configs["baseline"]
    fig, (left, right) = plt.subplots(1, 2, figsize=(13, 4.5))
    x = range(len(names))
    left.bar([i - 0.2 for i in x], [configs[n]["qd1"]["mean_ms"] for n in names], 0.4, label="mean")
    left.bar([i + 0.2 for i in x], [configs[n]["qd1"]["p99_ms"] for n in names], 0.4, label="p99")
    left.set_xticks(list(x), names, rotation=30)
    left.set_ylabel("ms")
    left.set_title("4 KiB random writes, QD1: latency")
    left.legend()
    metrics: dict[str, Callable[[dict[str, Any]], float]] = {
        "4k QD16 IOPS": lambda c: c["qd16"]["iops"],
        "1M seq MB/s": lambda c: c["seq"]["mb_per_s"],
        "1 / PostMark time": lambda c: 1 / c["postmark"]["seconds_to_durable"],
    }
    width = 0.8 / len(metrics)
    for k, (label, get) in enumerate(metrics.items()):
        right.bar(
            [i - 0.4 + width * (k + 0.5) for i in x],
            [get(configs[n]) / get(base) for n in names],
            width,
            label=label,
        )
    right.axhline(1, color="grey", linewidth=0.8)
    right.set_xticks(list(x), names, rotation=30)
    right.set_ylabel("relative to the single disk (higher is better)")
    right.set_title("Throughput against the baseline")
    right.legend()
    fig.tight_layout()
    fig.savefig(out / "configs.png", dpi=100)
    plt.close(fig)
    return ["![latency and throughput per configuration](configs.png)"]


def plot_grid(grid: list[dict[str, Any]], out: Path) -> list[str]:
    if not grid:
        return []
    fig, axis = plt.subplots(figsize=(7, 4.5))
    for through, style in (("mirror", "-o"), ("iSCSI", "--x")):
        for rate in sorted({g["rate_mbit"] for g in grid}):
            cells = sorted(
                (g for g in grid if g["through"] == through and g["rate_mbit"] == rate),
                key=lambda g: g["delay_ms"],
            )
            if cells:
                axis.plot(
                    [g["delay_ms"] for g in cells],
                    [g["of_ideal"] for g in cells],
                    style,
                    label=f"{through}, {rate} Mbit",
                )
    axis.set_xlabel("delay each way (ms)")
    axis.set_ylabel("throughput / link rate")
    axis.set_ylim(0, 1.1)
    axis.set_title("Sequential writes over the link grid")
    axis.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out / "grid.png", dpi=100)
    plt.close(fig)
    return ["![the link grid](grid.png)"]


def render(results: dict[str, Any], out: Path) -> str:
    meta = results.get("meta", {})
    configs = results.get("configs", {})
    lines = [
        "# remirror benchmarks",
        "",
        f"Run {meta.get('date', '?')} in the lab: kernel {meta.get('kernel', '?')}, {meta.get('fio', 'fio')},"
        f" {meta.get('mdadm', 'mdadm')}. {describe_model(meta.get('performance'))}"
        f" {meta.get('fio_seconds', '?')} s per fio job; WAN {meta.get('wan_delay_ms_each_way', 7)} ms each way,"
        f" {meta.get('wan_rate_mbit', '?')} Mbit/s. Method: docs/performance.md.",
        "",
        f"> {CAUTION}",
        "",
        "## Calibration: the modelled disks against their declared figures",
        "",
        *calibration_table(results),
        "",
        "## Targets and the seeds' figures",
        "",
        *targets(results),
        "",
        "## Configurations",
        "",
        *configs_table(configs),
        "",
        *(
            [f"Trace columns: {meta['trace']['dropped']}.", ""]
            if meta.get("trace", {}).get("dropped")
            else []
        ),
        *plot_configs(configs, out),
    ]
    for step, error in results.get("errors", {}).items():
        lines += ["", f"**{step} did not finish:** {error}"]
    for name in ("CDP-60s", "CDP-60s-D", "CDP-60s-DD", "CDP-10s"):
        if name in configs:
            lines += ["", points_line(name, configs[name])]
    if results.get("own_points", {}).get("passes"):
        lines += [
            "",
            "## The DR site's own points, async",
            "",
            *own_points_lines(results["own_points"], configs),
        ]
    steady = configs.get("D-iDL", {}).get("steady")
    if steady:
        lines += ["", "## The DCD at steady state", "", steady_line(steady, configs)]
    if results.get("grid"):
        lines += ["", "## The link grid (1 MiB = 2^20 bytes; MB = 10^6)", "", *grid_table(results["grid"]), "",
                  *plot_grid(results["grid"], out)]  # fmt: skip
    resync = results.get("resync")
    if resync:
        lines += [
            "",
            "## Resync after a link outage",
            "",
            f"{resync['writes_during_outage']} random 4 KiB writes ({resync['bytes_written_during_outage']} bytes)"
            f" over a {resync['hot_region_bytes'] >> 20} MiB working set while the link was down;"
            f" the bitmap then had {resync['dirty_chunks']} dirty chunks of {resync['chunk_bytes'] >> 10} KiB"
            f" ({resync['dirty_bytes']} bytes). {resync['bytes_resynced']} bytes were resynced"
            f" ({(resync['resynced_over_dirty'] or 0):.2f}x the dirty chunks), and the mirror was MIRRORED"
            f" {resync['seconds_link_back_to_mirrored']:.0f} s after the link came back"
            f" ({resync['reconcile_passes']} reconcile passes).",
        ]
        sync = sync_table(results)
        if sync:
            lines += [
                "",
                "The resync's rate over each link, and what it means for a 1 TB disk: a full sync (a new"
                " mirror, or a replaced leg: md copies every block the same way) and a resync after"
                " an outage that dirtied 10 GB:",
                "",
                *sync,
            ]
    if results.get("control"):
        lines += ["", "## Control-plane cost (healthy S-iL mirror)", "", *control_table(results["control"])]
    return "\n".join(lines) + "\n"


def main() -> int:
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "bench/out")
    try:
        results = json.loads((out / "results.json").read_text())
    except (OSError, ValueError) as error:
        sys.exit(f"bench/report.py: cannot read {out / 'results.json'}: {error}")
    (out / "report.md").write_text(render(results, out))
    sys.stdout.write(f"{out / 'report.md'}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
