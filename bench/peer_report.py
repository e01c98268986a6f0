"""The side-by-side report: bench/peer.py's results.json to report.md, remirror / DRBD.

    python bench/peer_report.py DIR     # DIR/results.json -> DIR/report.md

Every row is a ratio within one run: in each round remirror's figure over DRBD's from the
same round (the two ran one after the other on the same link), then the median of the
rounds' ratios with their spread (lowest to highest). A rate is held to >= 0.95 of DRBD's, a
latency or a time to <= 1.05x; a p99 of fewer than 100 samples is shown and not judged (it is
the slowest one or two). Sequential writes over the WAN are also held to the physical limit,
min(link, disk): >= 0.9 in async mode, >= 0.8 in sync mode, the disk's figure the round's
baseline (a modelled disk alone). A cell in which either mirror lost its peer (bench/peer.py's
health check) is left out of the ratios and named.
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path
from typing import Any

from workloads import JOBS  # bench/'s own, beside this file

RATE_GOAL = 0.95
LATENCY_GOAL = 1.05
WAN_SEQUENTIAL_GOAL = {"async": 0.9, "sync": 0.8}
FEWEST_FOR_P99 = 100
NOT_CELLS = ("initial_sync", "baseline", "outage")
SYSTEMS = ("remirror", "drbd")
# (label, path into a workload's results, kind): "rate" is better higher, "time" lower.
ROWS: tuple[tuple[str, tuple[str, ...], str], ...] = (
    ("4 KiB QD1 write, mean", ("qd1", "mean_ms"), "time"),
    ("4 KiB QD1 write, p50", ("qd1", "p50_ms"), "time"),
    ("4 KiB QD1 write, p99", ("qd1", "p99_ms"), "time"),
    ("4 KiB QD16 write IOPS", ("qd16", "iops"), "rate"),
    ("4 KiB QD16 write, mean", ("qd16", "mean_ms"), "time"),
    ("4 KiB QD16 write, p50", ("qd16", "p50_ms"), "time"),
    ("4 KiB QD16 write, p99", ("qd16", "p99_ms"), "time"),
    ("50/50 mix QD16, write IOPS", ("mix", "write", "iops"), "rate"),
    ("1 MiB sequential MB/s", ("seq", "mb_per_s"), "rate"),
    ("trace write, mean", ("trace", "mean_ms"), "time"),
    ("trace write, p50", ("trace", "p50_ms"), "time"),
    ("trace write, p99", ("trace", "p99_ms"), "time"),
    ("PostMark to durable, s", ("postmark", "seconds_to_durable"), "time"),
)


def walk(data: Any, path: tuple[str, ...]) -> Any:
    """What lies at `path` in nested dicts, or None where a key is missing."""
    value: Any = data
    for key in path:
        if not isinstance(value, dict) or key not in value:
            return None
        value = value[key]
    return value


def dig(data: Any, path: tuple[str, ...]) -> float | None:
    value = walk(data, path)
    return float(value) if isinstance(value, int | float) else None


def spread(values: list[float], digits: int = 2) -> str:
    """The median, and the lowest and highest when there are several."""
    if not values:
        return "-"
    median = statistics.median(values)
    if len(values) == 1:
        return f"{median:.{digits}f}"
    return f"{median:.{digits}f} ({min(values):.{digits}f}-{max(values):.{digits}f})"


def rounds(results: dict[str, Any]) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = results.get("rounds") or []
    return found


def cells(results: dict[str, Any]) -> list[str]:
    """The link-and-mode cells the rounds measured, in the order of the first round."""
    found: list[str] = []
    for one in rounds(results):
        found += [key for key in one if key not in NOT_CELLS and key not in found]
    return found


def valid(measured: dict[str, Any], system: str) -> bool:
    """Whether a system ran whole in a cell; not when the cell or the system's run is missing
    (a round cut off before it)."""
    run: dict[str, Any] = measured.get(system) or {}
    return bool(run) and "error" not in run and bool(run.get("run", {}).get("valid", True))


def paired(
    results: dict[str, Any], cell: str, path: tuple[str, ...]
) -> tuple[list[float], list[float], list[float], list[float]]:
    """remirror's and DRBD's figures in each round whose cell has both whole, their ratios, and
    each round's fewer sample count of the two."""
    ours, theirs, ratios, samples = [], [], [], []
    for one in rounds(results):
        measured = one.get(cell, {})
        if not all(valid(measured, s) for s in SYSTEMS):
            continue
        mine, peer = dig(measured.get("remirror"), path), dig(measured.get("drbd"), path)
        if mine is None or peer is None:
            continue
        ours.append(mine)
        theirs.append(peer)
        if peer:
            ratios.append(mine / peer)
        counts = [dig(measured[s], (*path[:-1], "ios")) for s in SYSTEMS]
        samples.append(min(c for c in counts if c is not None) if any(c is not None for c in counts) else 0)
    return ours, theirs, ratios, samples


def verdict(kind: str, ratio: float) -> str:
    if kind == "rate":
        return "met" if ratio >= RATE_GOAL else f"**under {RATE_GOAL}**"
    return "met" if ratio <= LATENCY_GOAL else f"**over {LATENCY_GOAL}x**"


def workload_table(results: dict[str, Any], cell: str) -> tuple[list[str], list[str]]:
    """A cell's rows (lab figures; ratio remirror / DRBD), and the rows that miss the goal."""
    lines = [
        "| workload | remirror | DRBD | remirror / DRBD | samples | goal |",
        "|---|---|---|---|---|---|",
    ]
    missed = []
    for label, path, kind in ROWS:
        ours, theirs, ratios, samples = paired(results, cell, path)
        if not ratios:
            continue
        median = statistics.median(ratios)
        suffix = "x" if kind == "time" else ""
        unit = " ms" if path[-1].endswith("_ms") else ""
        fewest = int(min(samples)) if samples else 0
        judged = not path[-1].startswith("p99") or fewest >= FEWEST_FOR_P99
        said = verdict(kind, median) if judged else f"not judged (< {FEWEST_FOR_P99} samples)"
        count = str(fewest) if fewest else "-"
        lines.append(
            f"| {label}{unit} | {spread(ours)} | {spread(theirs)} | {spread(ratios)}{suffix} | {count} | {said} |"
        )
        if judged and said != "met":
            missed.append(f"{cell}: {label} {median:.2f}{suffix}")
    return lines, missed


# (heading, host, figure) of the requests each leg's disk took during a job.
REQUEST_COLUMNS = (
    ("writes at site-a's disk", "site-a", "writes"),
    ("writes at site-b's disk", "site-b", "writes"),
    ("KiB per write at site-b", "site-b", "kib_per_write"),
)


def requests_table(results: dict[str, Any], cell: str) -> list[str]:
    """What each leg's disk took during each job of a cell, remirror | DRBD (the median over the
    rounds with both whole): the requests behind a latency or rate row. Empty when the run
    counted none (before 2026-12-02)."""
    head = " | ".join(f"{heading}, remirror | DRBD" for heading, _, _ in REQUEST_COLUMNS)
    lines = [f"| job | {head} |", "|---|" + "---|" * 2 * len(REQUEST_COLUMNS)]
    for job in JOBS:
        cells_of_row = []
        for _, host, figure in REQUEST_COLUMNS:
            for system in SYSTEMS:
                found = [
                    value
                    for one in rounds(results)
                    if all(valid(one.get(cell, {}), s) for s in SYSTEMS)
                    and (value := dig(one[cell].get(system), ("requests", job, host, figure))) is not None
                ]
                cells_of_row.append(spread(found, 1) if found else "-")
        if any(value != "-" for value in cells_of_row):
            lines.append(f"| {job} | " + " | ".join(cells_of_row) + " |")
    return lines if len(lines) > 2 else []


def slowest_writes(results: dict[str, Any], cell: str) -> list[str]:
    """The QD1 job's slowest writes in each round, each system's: when in the counted part each
    came (s), and how long it took (ms). Empty when the run logged none (before 2026-12-02)."""
    lines = []
    for number, one in enumerate(rounds(results), 1):
        for system in SYSTEMS:
            slowest = walk(one.get(cell, {}).get(system), ("qd1", "slowest"))
            if isinstance(slowest, list) and slowest:
                shown = ", ".join(f"{write['ms']:.0f} ms at {write['at_s']:.1f} s" for write in slowest)
                lines.append(f"- round {number}, {system}: {shown}")
    return lines


def physical_limit(results: dict[str, Any], link: str, one: dict[str, Any]) -> tuple[float | None, str]:
    """min(link, disk) in the lab's MB/s for a round: the link's rate dilated, the round's
    baseline disk's sequential figure; and which one it is."""
    meta = results["meta"]
    link_mb_s = meta["links"][link]["rate_bit_s"] / 8 / 1e6 / float(meta["dilation"]["factor"])
    disk = dig(one.get("baseline"), ("seq", "mb_per_s"))
    if disk is None:
        return None, ""
    return (link_mb_s, "the link") if link_mb_s < disk else (disk, "the disk")


def wan_sequential(results: dict[str, Any]) -> tuple[list[str], list[str]]:
    lines = [
        "| mode | limit, lab MB/s | remirror | of the limit | DRBD | of the limit | goal |",
        "|---|---|---|---|---|---|---|",
    ]
    missed = []
    for mode, goal in WAN_SEQUENTIAL_GOAL.items():
        limits: list[float] = []
        which = ""
        shares: dict[str, list[float]] = {s: [] for s in SYSTEMS}
        figures: dict[str, list[float]] = {s: [] for s in SYSTEMS}
        for one in rounds(results):
            measured = one.get(f"WAN {mode}", {})
            limit, which_now = physical_limit(results, "WAN", one)
            if limit is None or not measured:
                continue
            limits.append(limit)
            which = which_now or which
            for system in SYSTEMS:
                rate = dig(measured.get(system), ("seq", "mb_per_s"))
                if rate is not None and valid(measured, system):
                    figures[system].append(rate)
                    shares[system].append(rate / limit)
        if not shares["remirror"]:
            continue
        share = statistics.median(shares["remirror"])
        met = "met" if share >= goal else f"**under {goal}**"
        lines.append(
            f"| {mode} | {spread(limits)} ({which}) | {spread(figures['remirror'])} | {spread(shares['remirror'])}"
            f" | {spread(figures['drbd'])} | {spread(shares['drbd'])} | >= {goal}: {met} |"
        )
        if met != "met":
            missed.append(f"WAN {mode}: sequential {share:.2f} of min(link, disk)")
    return lines, missed


def per_round(results: dict[str, Any], step: str, key: str, scale: float = 1.0) -> list[str]:
    """A row of a once-per-round step: each system's median and spread, and their ratio's."""
    mine, theirs, ratios = [], [], []
    for one in rounds(results):
        done = one.get(step, {})
        a, b = dig(done.get("remirror"), (key,)), dig(done.get("drbd"), (key,))
        if a is not None:
            mine.append(a / scale)
        if b is not None:
            theirs.append(b / scale)
        if a is not None and b:
            ratios.append(a / b)
    return [spread(mine, 1), spread(theirs, 1), f"{spread(ratios)}x" if ratios else "-"]


def step_table(
    results: dict[str, Any], step: str, heading: str, rows: tuple[tuple[str, str, float], ...]
) -> list[str]:
    """A step each mirror ran alone (the initial sync, the outage): a row per figure, side by
    side; a figure neither recorded (a run before it was counted) has no row."""
    shown = [(label, per_round(results, step, key, scale)) for label, key, scale in rows]
    return [
        heading,
        "",
        "| | remirror | DRBD | remirror / DRBD |",
        "|---|---|---|---|",
        *(f"| {label} | " + " | ".join(row) + " |" for label, row in shown if row[:2] != ["-", "-"]),
    ]


def sync_tables(results: dict[str, Any]) -> list[str]:
    lines: list[str] = []
    first = next((one["initial_sync"] for one in rounds(results) if "initial_sync" in one), None)
    if first:
        heading = (
            f"**Initial sync of blank {first['disk_bytes'] >> 20} MiB disks over the LAN**, each mirror alone"
            " (lab seconds; the copy is md's recovery, or DRBD's resync, by its own kernel log):"
        )
        lines += step_table(results, "initial_sync", heading, (
            ("seconds to in sync (set-up included)", "seconds", 1.0),
            ("the copy, seconds", "copy_seconds", 1.0),
            ("MB sent on the link", "bytes_sent", 1e6),
            ("MB written at the DR site", "bytes_written_at_dr", 1e6),
            ("write requests at the DR site's disk", "writes_at_dr", 1.0),
            ("KiB per write at the DR site", "kib_per_write_at_dr", 1.0),
            ("read requests at the primary's disk", "reads_at_primary", 1.0),
            ("KiB per read at the primary", "kib_per_read_at_primary", 1.0),
        ))  # fmt: skip
        lines.append("")
    outage = next((one["outage"] for one in rounds(results) if "outage" in one), None)
    if outage and all(s in outage for s in SYSTEMS):
        writes = results["meta"]["outage"]
        heading = (
            f"**Resync after the same outage** over the WAN, sync mode and protocol C: {writes['writes']} random"
            f" 4 KiB writes over {writes['region_bytes'] >> 20} MiB while the link was cut:"
        )
        lines += step_table(results, "outage", heading, (
            ("seconds, link up to in sync", "seconds_link_back_to_in_sync", 1.0),
            ("the copy, seconds", "copy_seconds", 1.0),
            ("MB sent on the link", "bytes_sent", 1e6),
            ("MB written at the DR site", "bytes_written_at_dr", 1e6),
            ("write requests at the DR site's disk", "writes_at_dr", 1.0),
            ("KiB per write at the DR site", "kib_per_write_at_dr", 1.0),
            ("the first write's stall, s (undilated timeouts: a lab figure)", "first_write_stall_s", 1.0),
        ))  # fmt: skip
        marked = [
            f"{s}: {outage[s]['marked_before_the_resync']}"
            for s in SYSTEMS
            if "marked_before_the_resync" in outage[s]
        ]
        lines += ["", f"What each marked for the resync (round 1): {'; '.join(marked)}.", ""]
    return lines


def settings_table(results: dict[str, Any]) -> list[str]:
    """DRBD's settings in each cell of the first round (the resync's rate and fill target follow
    the link), with remirror's profile beside them."""
    first = rounds(results)[0] if rounds(results) else {}
    by_cell = {
        cell: measured["settings"]["drbd"]
        for cell, measured in first.items()
        if isinstance(measured, dict) and "settings" in measured
    }
    if not by_cell:
        return []
    keys = list(next(iter(by_cell.values())))
    lines = [
        "## The settings",
        "",
        "DRBD's resource, as bench/peer.py wrote it for each cell (the user guide's throughput and WAN tuning):",
        "",
        "| setting | " + " | ".join(by_cell) + " |",
        "|---|" + "---|" * len(by_cell),
    ]
    lines += [
        f"| {key} | " + " | ".join(str(s.get(key, "")) for s in by_cell.values()) + " |" for key in keys
    ]
    remirror = next(iter(first.get(c, {}).get("settings", {}) for c in by_cell))
    lines += [
        "",
        f"remirror's session and array in the first cell: {remirror.get('iscsi_negotiated', '?')};"
        f" {remirror.get('iscsi_node_window', '?')}; md's safe mode {remirror.get('md_safe_mode_delay', '?')} s.",
    ]
    profile = results["meta"].get("remirror_profile")
    if profile:
        lines += [
            "",
            "remirror's profile (the async cells: `mode: async`):",
            "",
            "```yaml",
            profile.rstrip(),
            "```",
        ]
    return [*lines, ""]


def left_out(results: dict[str, Any]) -> list[str]:
    """Cells a mirror was not whole in, or failed, by round."""
    found = []
    for number, one in enumerate(rounds(results), 1):
        for cell in (k for k in one if k not in NOT_CELLS):
            for system in SYSTEMS:
                if not valid(one[cell], system):
                    run = one[cell].get(system, {})
                    why = run.get("error") or f"health after: {run.get('run', {}).get('health_after')}"
                    found.append(f"round {number}, {cell}, {system}: {why}")
    return found


def hosts(each: dict[str, float]) -> str:
    return ", ".join(f"{name} {value:.2f}" for name, value in each.items())


def header(results: dict[str, Any]) -> list[str]:
    meta = results.get("meta") or {}
    if "versions" not in meta:
        return ["# remirror beside DRBD", "", "The run stopped before its hosts were ready.", ""]
    versions = meta["versions"].get("site-a", {})
    factor = meta["dilation"]["factor"]
    after = meta.get("dilation_after", {}).get("factor")
    wheel = meta.get("wheel", {})
    return [
        "# remirror beside DRBD",
        "",
        f"`{meta.get('command', 'bench/peer.py')}` at {meta.get('commit', '?')} (the hosts ran"
        f" {wheel.get('file', '?')}, sha256 {wheel.get('sha256', '?')[:16]}), {meta['date']}; {len(rounds(results))}"
        f" of {meta['settings']['rounds']} rounds, {meta['settings']['fio_seconds']} s fio jobs after"
        f" {meta['settings'].get('fio_ramp_seconds', 0)} s not counted, {meta['settings']['trace_seconds']} s of the"
        f" trace, in {meta.get('seconds', 0) / 60:.0f} minutes. Hosts: {versions.get('kernel', '?')},"
        f" {versions.get('fio', '?')}, {versions.get('mdadm', '?')}, DRBD {versions.get('drbd', '?')} (drbd-utils"
        f" {versions.get('drbd-utils', '?')}), {versions.get('remirror', '?')}. Dilation {factor:.2f} at the start"
        f" ({hosts(meta['dilation']['hosts'])})"
        + (f", {after:.2f} at the end" if after else "")
        + ": lab figures times it (a rate) or over it (a time) estimate the modelled hardware's."
        + (f" remirror's bitmap chunk: {chunk}." if (chunk := meta["settings"].get("bitmap_chunk")) else ""),
        "",
        "Each figure is the median of the rounds, with the lowest and highest in brackets; each ratio is the"
        " median of the rounds' own ratios (remirror and DRBD measured one after the other in the same round,"
        " which one first alternating between rounds and cells). A rate is held to >= 0.95 of DRBD's, a"
        f" latency or a time to <= 1.05x; a p99 from fewer than {FEWEST_FOR_P99} samples (`samples`: the"
        " fewer of the two's, in the round with fewest) is not judged. The trace is replayed at its own"
        " timing while the disks are dilated: its bursts arrive D times denser than on the modelled"
        " hardware, for both mirrors alike.",
        "",
    ]


def render(results: dict[str, Any]) -> str:
    lines = header(results)
    missed: list[str] = []
    for cell in cells(results):
        link, mode = cell.split()
        protocol = {"sync": "C", "async": "A"}.get(mode, "?")
        lines += [f"## {link}, remirror {mode} mode against DRBD protocol {protocol}", ""]
        table, under = workload_table(results, cell)
        lines += [*table, ""]
        missed += under
        counted = requests_table(results, cell)
        if counted:
            lines += ["What each leg's disk took during each job:", "", *counted, ""]
        slow = slowest_writes(results, cell)
        if slow:
            lines += ["The QD1 job's five slowest writes, in the order they came:", "", *slow, ""]
    if rounds(results) and "meta" in results and "links" in results["meta"]:
        wan, under = wan_sequential(results)
        if len(wan) > 2:
            lines += ["## Sequential writes over the WAN against min(link, disk)", "", *wan, ""]
            missed += under
    lines += ["## Syncs", "", *sync_tables(results)]
    lines += settings_table(results)
    lines += ["## Under the goal", ""]
    lines += [f"- {row}" for row in missed] or ["- none"]
    dropped = left_out(results)
    if dropped:
        lines += ["", "## Left out (a mirror not whole, or a failed run)", ""] + [
            f"- {row}" for row in dropped
        ]
    if results.get("errors"):
        lines += ["", "## Steps that failed", ""] + [f"- {k}: {v}" for k, v in results["errors"].items()]
    return "\n".join(lines) + "\n"


def main() -> int:
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "bench/out-peer")
    results = json.loads((out / "results.json").read_text())
    (out / "report.md").write_text(render(results))
    sys.stdout.write(f"{out / 'report.md'}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
