"""Turns benchmarks/sidebyside.py's results.json into a Markdown report and PNG plots.

Run with Debian's python3 (python3-matplotlib; without it the report has no plots):

  sidebyside_report.py OUT/results.json OUT            # OUT/report.md + OUT/*.png
  sidebyside_report.py OUT/results.json OUT --docs DOCS  # also DOCS/performance.md and
                                                         # DOCS/performance/*.png
Every figure has the reference beside it and a ratio that says which way is better.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import sys

REF_INFO = "reference (INFO, as shipped)"
REF_WARN = "reference (WARNING)"
BOXD = "boxd"


def f(x, unit="", digits=None) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "–"
    if digits is None:
        digits = 0 if abs(x) >= 100 else (1 if abs(x) >= 10 else 2)
    return f"{x:,.{digits}f}{unit}"


def ratio(a, b, digits=1) -> str:
    if a is None or b is None or not b or (isinstance(a, float) and math.isnan(a)) \
            or (isinstance(b, float) and math.isnan(b)):
        return "–"
    return f"{a / b:,.{digits}f}×"


def lat(us) -> str:
    if us is None or (isinstance(us, float) and math.isnan(us)):
        return "–"
    return f"{us / 1000:,.2f} ms" if us >= 1000 else f"{us:,.0f} µs"


def table(head: list[str], rows: list[list[str]]) -> str:
    out = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(out)


def by(rows, **kw):
    for r in rows:
        if all(r.get(k) == v for k, v in kw.items()):
            return r
    return {}


# ── plots ─────────────────────────────────────────────────────────────


def plots(res: dict, out: str) -> list[tuple[str, str]]:
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("sidebyside_report: matplotlib missing (apt-get install python3-matplotlib); "
              "no plots", file=sys.stderr)
        return []
    made = []
    w = res["workloads"]
    colors = {REF_INFO: "tab:red", REF_WARN: "tab:orange", BOXD: "tab:blue",
              "boxd (io_spin_us 0)": "tab:cyan"}

    rows = w.get("fixedrate")
    if isinstance(rows, list) and rows:
        rates = sorted({r["offered_per_s"] for r in rows})
        fig, axes = plt.subplots(1, len(rates), figsize=(6 * len(rates), 4.2), squeeze=False)
        for ax, rate in zip(axes[0], rates):
            for r in rows:
                if r["offered_per_s"] != rate or not r.get("latencies_ms"):
                    continue
                v = sorted(r["latencies_ms"])
                ys = [(i + 1) / len(v) for i in range(len(v))]
                ax.plot(v, ys, label=r["server"], color=colors.get(r["server"]))
            ax.set_xscale("log")
            ax.set_xlabel("box_exec latency, ms (log; Python client, send → reply)")
            ax.set_ylabel("fraction of requests ≤ x")
            ax.set_title(f"Latency CDF at {rate:,.0f} execs/s offered, 16 connections")
            ax.grid(True, which="both", alpha=0.3)
            ax.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(os.path.join(out, "latency.png"), dpi=110)
        plt.close(fig)
        made.append(("latency.png", "Latency distribution at a fixed offered load"))

    rows = w.get("throughput")
    if isinstance(rows, list) and rows:
        fig, axes = plt.subplots(1, 2, figsize=(12, 4.2))
        for ax, ws in zip(axes, ("shared", "per-connection")):
            for server in (REF_INFO, REF_WARN, BOXD):
                pts = sorted((r["connections"], r.get("round_trips_per_s")) for r in rows
                             if r["server"] == server and r["action"] == "exec"
                             and r["workspaces"] == ws and r.get("round_trips_per_s"))
                if pts:
                    ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=server,
                            color=colors.get(server))
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.set_xlabel("connections (one request in flight each)")
            ax.set_ylabel("box_exec round trips/s (log)")
            ax.set_title("one workspace for all connections" if ws == "shared"
                         else "one workspace per connection")
            ax.grid(True, which="both", alpha=0.3)
            ax.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(os.path.join(out, "throughput.png"), dpi=110)
        plt.close(fig)
        made.append(("throughput.png", "Throughput against connections (boxbench, zero-cost backends)"))

    rows = w.get("memory")
    if isinstance(rows, list) and rows:
        fig, ax = plt.subplots(figsize=(7, 4.2))
        for r in rows:
            xs = [p["sessions"] for p in r["points"]]
            c = "tab:red" if r["kind"] == "reference" else "tab:blue"
            name = "reference" if r["kind"] == "reference" else "boxd"
            ax.plot(xs, [p["pss_kib"] / 1024 for p in r["points"]], marker="o", color=c,
                    label=f"{name} PSS")
            ax.plot(xs, [p["rss_kib"] / 1024 for p in r["points"]], marker=".", color=c,
                    linestyle="--", label=f"{name} RSS")
            ref = r.get("after_refused") or {}
            if ref:
                ax.scatter([xs[-1]], [ref["pss_kib"] / 1024], marker="x", color=c, s=60,
                           label=f"{name} PSS after {ref['first_uses']:,} refused first uses")
        ax.set_xlabel("idle sessions (one per workspace)")
        ax.set_ylabel("MiB")
        ax.set_title("Server memory against idle sessions")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(os.path.join(out, "memory.png"), dpi=110)
        plt.close(fig)
        made.append(("memory.png", "Memory against sessions"))

    sb = w.get("sandbox")
    if isinstance(sb, dict) and sb.get("rows"):
        fig, ax = plt.subplots(figsize=(8, 4.2))
        names, warm, cold = [], [], []
        for r in sb["rows"]:
            if "error" in r:
                continue
            names.append(r["server"])
            w1 = r.get("warm_1", {})
            warm.append(w1.get("p50_us", float("nan")) / 1000 if not w1.get("errors") else float("nan"))
            cold.append(r.get("cold", {}).get("p50_ms", float("nan")))
        xs = range(len(names))
        ax.bar([x - 0.2 for x in xs], warm, width=0.4, label="warm exec p50 (over the wire)")
        ax.bar([x + 0.2 for x in xs], cold, width=0.4, label="cold first use p50 (start+exec)")
        for name, fl in sb.get("floors", {}).items():
            ax.axhline(fl["p50_ms"], linestyle=":", color="gray" if "bwrap" in name else "black",
                       label=f"floor: {name} p50")
        ax.set_xticks(list(xs))
        ax.set_xticklabels(names)
        ax.set_yscale("log")
        ax.set_ylabel("ms (log)")
        ax.set_title("Real exec of `true`")
        ax.grid(True, axis="y", which="both", alpha=0.3)
        ax.legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(os.path.join(out, "sandbox.png"), dpi=110)
        plt.close(fig)
        made.append(("sandbox.png", "Real sandboxes: warm and cold exec against the floors"))
    return made


# ── the report ────────────────────────────────────────────────────────


def targets(w: dict) -> list[list[str]]:
    """The performance issue's targets, each with the figure this run measured and whether
    it is met (rows whose workload did not run are left out)."""
    out = []

    def row(name, figure, target, ok):
        out.append([name, figure, target, "met" if ok else "**missed**"])

    mem = w.get("memory")
    if isinstance(mem, list) and mem:
        a, c = by(mem, kind="reference"), by(mem, kind="boxd")

        def per(r):
            pts = r.get("points", [])
            if len(pts) < 2 or pts[-1]["sessions"] <= pts[0]["sessions"]:
                return None, None
            d = (pts[-1]["pss_kib"] - pts[0]["pss_kib"]) / (pts[-1]["sessions"] - pts[0]["sessions"])
            rf = r.get("after_refused", {})
            return d, ((rf["pss_kib"] - pts[-1]["pss_kib"]) / rf["first_uses"] if rf else None)
        (da, _), (dc, rc) = per(a), per(c)
        if da and dc:
            row("idle session (own workspace), PSS", f"{dc:.1f} KiB vs reference {da:.1f} KiB",
                "≤ reference", dc <= da)
        if rc is not None:
            row("first use refused at the cap, new workspace", f"{rc:.2f} KiB", "≤ 1 KiB", rc <= 1.0)
    sb = w.get("sandbox")
    if isinstance(sb, dict):
        fl = sb.get("floors", {})
        floor = fl.get("fork+exec /bin/sh -c true", {}).get("p50_ms")
        bw = next((v.get("p50_ms") for k, v in fl.items() if "bwrap" in k), None)
        rows = {r["server"]: r for r in sb.get("rows", []) if "error" not in r}
        refc = rows.get("reference nsjail", {}).get("cold", {}).get("p50_ms")
        for name in ("boxd bwrap", "boxd nsjail"):
            r = rows.get(name)
            if not r:
                continue
            warm = (r.get("warm_1", {}).get("p50_us") or 0) / 1000
            if floor and warm:
                row(f"warm exec `true`, {name}", f"{warm:.3f} ms = {warm / floor:.2f}× floor",
                    "≤ 1.3× fork+exec floor", warm <= 1.3 * floor)
            if bw and warm and name == "boxd bwrap":
                row("warm exec below a fresh bwrap", f"{bw / warm:.1f}× below", "≥ 4×", bw / warm >= 4)
            cold = r.get("cold", {}).get("p50_ms")
            if refc and cold:
                row(f"cold first use, new workspace, {name}",
                    f"{cold:.2f} ms = {cold / refc:.2f}× reference nsjail", "≤ 0.5×", cold <= 0.5 * refc)
    fr = w.get("fixedrate")
    if isinstance(fr, list) and fr:
        for rate in sorted({r["offered_per_s"] for r in fr}):
            b = by(fr, server=BOXD, offered_per_s=rate)
            refs = [r for r in fr if r["offered_per_s"] == rate and r["kind"] == "reference"]
            if b and refs:
                worst = max(b["server_cpu_s_per_s"] / r["server_cpu_s_per_s"] for r in refs
                            if r.get("server_cpu_s_per_s"))
                row(f"CPU-s per s at {rate:,.0f} execs/s", f"{worst:.2f}× the reference",
                    "≤ 0.5×", worst <= 0.5)
    tp = w.get("throughput")
    if isinstance(tp, list) and tp:
        for n in (16, 256):
            c = by(tp, server=BOXD, action="exec", connections=n, workspaces="per-connection")
            for ref, label in ((REF_INFO, "as shipped"), (REF_WARN, "WARNING")):
                a = by(tp, server=ref, action="exec", connections=n, workspaces="per-connection")
                if a.get("round_trips_per_s") and c.get("round_trips_per_s"):
                    x = c["round_trips_per_s"] / a["round_trips_per_s"]
                    row(f"exec/s, {n} connections, one workspace each, reference {label}",
                        f"{x:.1f}×", "≥ 20×", x >= 20)
    return out


def report(res: dict, images: list[tuple[str, str]], image_dir: str, legacy: str) -> str:
    m = res["machine"]
    w = res["workloads"]
    s = res.get("settings", {})
    L = []
    L.append("# boxd beside the reference (LangBot's Box runtime)\n")
    L.append(f"Produced by `{res['command']}` on {m['date']}.\n")
    L.append(f"- Machine: {m['cores']} cores, {m['cpu_model']}, kernel {m['kernel']}, "
             f"memory {m['memory']}; Python {m['python']}, langbot-plugin {m['langbot_plugin']}.")
    L.append("- Reference: `lbp box`'s own `server.main()` from langbot-plugin, started by "
             "`benchmarks/reference_box.py` with `BoxRuntime` given a zero-cost backend shaped "
             "like boxd's scripted one (start instant, exec returns exit 0 at once), or its own "
             "nsjail backend for real sandboxes. *As shipped* = INFO logging (two lines per exec, "
             "to a file); *WARNING* = the same server with logging at WARNING.")
    L.append("- boxd: default server options (`io_threads` 1, `io_spin_us` 50), scripted backend "
             "unless a real one is named.")
    L.append("- Clients: `boxbench` (C++) for throughput and latency; one Python asyncio client "
             "(websockets) for the rest, the same for both servers. Each workload runs the "
             "reference and boxd alternately in this one run"
             f" ({s.get('rounds', '?')} alternating rounds of {s.get('seconds', '?')} s for "
             "boxbench rows; the median is shown).")
    L.append("- Server CPU is utime+stime of the server process from /proc/PID/stat; memory is "
             "RSS and PSS from /proc/PID/smaps_rollup.")
    L.append("- Client and servers share the machine's cores. Other work on the machine "
             "competes too; figures are indicative, nothing asserts on them.\n")
    goals = targets(w)
    if goals:
        L.append("## Targets\n")
        L.append("The performance issue's targets against this run's figures (details below).\n")
        L.append(table(["target", "this run", "goal", ""], goals) + "\n")

    rows = w.get("throughput")
    if isinstance(rows, list) and rows:
        L.append("## Ping latency and exec throughput (boxbench, zero-cost backends)\n")
        L.append("Each connection keeps one request in flight. *shared*: every connection in one "
                 "workspace, where the reference throttles a workspace to 4 blocking jobs in "
                 "flight (decode, encode and validation count), so those rows mostly measure that "
                 "throttle; *per-connection*: one workspace per connection, the honest comparison. "
                 "**Throughput ratio = boxd / reference: higher is better for boxd. Latency ratio "
                 "= reference / boxd: higher is better for boxd.**\n")
        head = ["workload", "conns", "workspaces", "ref as shipped /s", "ref WARNING /s", "boxd /s",
                "boxd/ref shipped", "boxd/ref WARNING", "p50 ref shipped", "p50 ref WARNING",
                "p50 boxd", "ref WARNING/boxd p50", "p99 ref WARNING", "p99 boxd"]
        out = []
        keys = []
        for r in rows:
            k = (r["action"], r["connections"], r["workspaces"])
            if k not in keys:
                keys.append(k)
        for action, n, ws in keys:
            a = by(rows, server=REF_INFO, action=action, connections=n, workspaces=ws)
            b = by(rows, server=REF_WARN, action=action, connections=n, workspaces=ws)
            c = by(rows, server=BOXD, action=action, connections=n, workspaces=ws)
            out.append([action, str(n), ws, f(a.get("round_trips_per_s")),
                        f(b.get("round_trips_per_s")), f(c.get("round_trips_per_s")),
                        ratio(c.get("round_trips_per_s"), a.get("round_trips_per_s")),
                        ratio(c.get("round_trips_per_s"), b.get("round_trips_per_s")),
                        lat(a.get("p50_us")), lat(b.get("p50_us")), lat(c.get("p50_us")),
                        ratio(b.get("p50_us"), c.get("p50_us")), lat(b.get("p99_us")),
                        lat(c.get("p99_us"))])
        L.append(table(head, out) + "\n")
        errs = [f"{r['server']} {r['action']} {r['connections']} {r['workspaces']}: "
                f"{r.get('errors') or r.get('error')}" for r in rows
                if r.get("errors") or r.get("error")]
        if errs:
            L.append("Errors: " + "; ".join(errs) + "\n")
        L.append("Server CPU per request at saturation (CPU-seconds of the server over the whole "
                 "boxbench run, divided by its requests). **Ratio = reference / boxd: higher is "
                 "better for boxd.**\n")
        out = []
        for action, n, ws in keys:
            a = by(rows, server=REF_INFO, action=action, connections=n, workspaces=ws)
            b = by(rows, server=REF_WARN, action=action, connections=n, workspaces=ws)
            c = by(rows, server=BOXD, action=action, connections=n, workspaces=ws)
            out.append([action, str(n), ws, f(a.get("server_cpu_us_per_request"), " µs"),
                        f(b.get("server_cpu_us_per_request"), " µs"),
                        f(c.get("server_cpu_us_per_request"), " µs"),
                        ratio(a.get("server_cpu_us_per_request"), c.get("server_cpu_us_per_request")),
                        ratio(b.get("server_cpu_us_per_request"), c.get("server_cpu_us_per_request"))])
        L.append(table(["workload", "conns", "workspaces", "ref shipped CPU/req",
                        "ref WARNING CPU/req", "boxd CPU/req", "ref shipped/boxd",
                        "ref WARNING/boxd"], out) + "\n")

    rows = w.get("fixedrate")
    if isinstance(rows, list) and rows:
        L.append("## CPU per request at a fixed offered load\n")
        L.append("A Python open-loop client offers a fixed rate of `box_exec` over 16 connections "
                 "(one workspace each; boxbench has no fixed-rate mode). CPU is the server's over "
                 "the measured window; latency is the client's send → reply (it includes the "
                 "Python client's own cost, the same for both). When the achieved rate falls "
                 "short of the offered one, or p50 grows to hundreds of ms, the server is "
                 "saturated and requests queue. **Ratios = reference / boxd: higher is better "
                 "for boxd.**\n")
        out = []
        for rate in sorted({r["offered_per_s"] for r in rows}):
            boxd = by(rows, server=BOXD, offered_per_s=rate)
            for r in rows:
                if r["offered_per_s"] != rate:
                    continue
                isref = r["kind"] == "reference"
                out.append([f"{rate:,.0f}/s", r["server"], f(r["achieved_per_s"]),
                            f(r["server_cpu_s_per_s"], digits=3),
                            f(r["server_cpu_us_per_request"], " µs"),
                            lat(r["p50_us"]), lat(r["p99_us"]), str(r["errors"]),
                            ratio(r["server_cpu_us_per_request"],
                                  boxd.get("server_cpu_us_per_request")) if isref else "",
                            ratio(r["p50_us"], boxd.get("p50_us")) if isref else ""])
        L.append(table(["offered", "server", "achieved /s", "server CPU-s per s", "CPU/req",
                        "p50", "p99", "errors", "CPU/req ref/boxd", "p50 ref/boxd"], out) + "\n")

    rows = w.get("firstuse")
    if isinstance(rows, list) and rows:
        L.append("## Concurrent first use\n")
        a, c = by(rows, kind="reference"), by(rows, kind="boxd")
        n = (a or c).get("requests")
        L.append(f"{n:,} `box_exec` sent at once for one new session in a fresh workspace, over "
                 f"{(a or c).get('connections')} connections (both servers cap a connection at "
                 "128 concurrent actions). Drain = first send → last reply. Starts = backend "
                 "session starts (1 is right). **Drain ratio = reference / boxd: higher is "
                 "better for boxd.**\n")
        out = [[r["server"], f"{r['drain_s'] * 1000:,.0f} ms", f"{r['ok']:,}", f"{r['failed']:,}",
                str(r["starts"])] for r in (a, c) if r]
        out.append(["ratio ref/boxd", ratio(a.get("drain_s"), c.get("drain_s")), "", "", ""])
        L.append(table(["server", "drain", "ok", "failed", "backend starts"], out) + "\n")

    rows = w.get("memory")
    if isinstance(rows, list) and rows:
        L.append("## Memory against idle sessions\n")
        L.append("Idle sessions, one per workspace, created by first use (`box_exec true`); both "
                 "servers' session cap is 5,000. Then 5,000 more first uses in new workspaces, "
                 "all refused at the cap. **Ratio = boxd / reference: lower is better for "
                 "boxd.**\n")
        a, c = by(rows, kind="reference"), by(rows, kind="boxd")
        out = []
        for pa, pc in zip(a.get("points", []), c.get("points", [])):
            out.append([f"{pa['sessions']:,} sessions", f(pa["rss_kib"] / 1024, " MiB", 1),
                        f(pa["pss_kib"] / 1024, " MiB", 1), f(pc["rss_kib"] / 1024, " MiB", 1),
                        f(pc["pss_kib"] / 1024, " MiB", 1), ratio(pc["pss_kib"], pa["pss_kib"], 2)])
        ra, rc = a.get("after_refused", {}), c.get("after_refused", {})
        if ra and rc:
            out.append([f"+{ra['first_uses']:,} refused first uses (ref {ra['refused']:,} "
                        f"refused, boxd {rc['refused']:,})",
                        f(ra["rss_kib"] / 1024, " MiB", 1), f(ra["pss_kib"] / 1024, " MiB", 1),
                        f(rc["rss_kib"] / 1024, " MiB", 1), f(rc["pss_kib"] / 1024, " MiB", 1),
                        ratio(rc["pss_kib"], ra["pss_kib"], 2)])
        L.append(table(["", "ref RSS", "ref PSS", "boxd RSS", "boxd PSS", "PSS boxd/ref"], out))
        per = []
        for r in (a, c):
            pts = r.get("points", [])
            if len(pts) >= 2 and pts[-1]["sessions"] > pts[0]["sessions"]:
                d = (pts[-1]["pss_kib"] - pts[0]["pss_kib"]) / (pts[-1]["sessions"] - pts[0]["sessions"])
                rf = r.get("after_refused", {})
                dr = (rf["pss_kib"] - pts[-1]["pss_kib"]) / rf["first_uses"] if rf else None
                per.append(f"{r['kind']}: {d:,.1f} KiB PSS per idle session"
                           + (f", {dr:,.2f} KiB per refused first use in a new workspace"
                              if dr is not None else ""))
        L.append("\n" + "; ".join(per) + ".\n")

    sb = w.get("sandbox")
    if isinstance(sb, dict) and (sb.get("rows") or sb.get("floors")):
        L.append("## Real sandboxes: warm and cold exec of `true`\n")
        fl = sb.get("floors", {})
        floor = fl.get("fork+exec /bin/sh -c true", {}).get("p50_ms")
        bw = next((v.get("p50_ms") for k, v in fl.items() if "bwrap" in k), None)
        L.append("Warm = boxbench `box_exec true` over the wire in a started session, one "
                 "connection (and 4 connections, one workspace each); cold = first use of a new "
                 "session (start + exec), Python client, session deleted after each (not timed). "
                 "Floors (bench_floor, no server): a bare fork + exec of `/bin/sh -c true` with "
                 "waitpid, and a fresh `bwrap --unshare-all --ro-bind / / /bin/sh -c true`. "
                 "**×floor = p50 / fork+exec floor p50: lower is better (target for boxd warm "
                 "exec: ≤ 1.3×).**\n")
        out = []
        for name, v in fl.items():
            out.append([f"floor: {name}", f(v["p50_ms"], " ms", 3), f(v["p99_ms"], " ms", 3),
                        ratio(v["p50_ms"], floor, 2), "", "", "", ""])
        for r in sb.get("rows", []):
            if "error" in r:
                out.append([r["server"], "could not start", "", "", "", "", "", ""])
                continue
            w1, w4, cold = r.get("warm_1", {}), r.get("warm_4", {}), r.get("cold", {})
            bad = not w1 or w1.get("errors") or "error" in w1
            out.append([r["server"] + (" (**errors**)" if w1 and bad else ""),
                        lat(w1.get("p50_us")), lat(w1.get("p99_us")),
                        ratio((w1.get("p50_us") or 0) / 1000, floor, 2) if not bad else "–",
                        ratio((w1.get("p50_us") or 0) / 1000, bw, 2) if not bad else "–",
                        f(w4.get("round_trips_per_s"), "/s"),
                        f(cold.get("p50_ms"), " ms", 2), f(cold.get("p99_ms"), " ms", 2)])
        L.append(table(["", "warm p50", "warm p99", "×floor", "×fresh bwrap",
                        "warm 4 conns", "cold p50", "cold p99"], out) + "\n")
        refn = next((r for r in sb.get("rows", []) if r["server"] == "reference nsjail"
                     and "error" not in r), None)
        bxn = next((r for r in sb.get("rows", []) if r["server"] == "boxd nsjail"
                    and "error" not in r), None)
        if refn and bxn:
            L.append("nsjail, reference / boxd (higher is better for boxd): warm p50 "
                     f"{ratio(refn['warm_1'].get('p50_us'), bxn['warm_1'].get('p50_us'))}, "
                     f"cold p50 {ratio(refn['cold'].get('p50_ms'), bxn['cold'].get('p50_ms'))}, "
                     f"warm 4 conns throughput boxd/reference "
                     f"{ratio(bxn['warm_4'].get('round_trips_per_s'), refn['warm_4'].get('round_trips_per_s'))}."
                     " The reference runs one nsjail process per exec; boxd keeps the sandbox.\n")
        # Cold start: the warm pool against the normal start, each against the reference.
        refc = (refn or {}).get("cold", {}).get("p50_ms")
        crow = []
        for r in sb.get("rows", []):
            if "error" in r:
                continue
            for key, what in (("cold", "new workspace, 0.25 s apart"),
                              ("cold_back_to_back", "new workspace, back to back"),
                              ("cold_quota", "new workspace, 16 MB quota image")):
                c = r.get(key)
                if not c:
                    continue
                crow.append([r["server"], what, f(c.get("p50_ms"), " ms", 2), f(c.get("p99_ms"), " ms", 2),
                             ratio(c.get("p50_ms"), refc, 2) if refc else "–", str(c.get("errors", 0))])
        if crow:
            L.append("### Cold start\n")
            L.append("First exec of a new session in a new workspace (standard mode, network off). "
                     "boxd's rows with the warm pool (`box.limits.warm_pool`, default 2) adopt a "
                     "sandbox started ahead; *warm pool off* is the normal start, which workspaces "
                     "with a uid, network on or a quota take. Back to back, the pool drains and "
                     "first uses wait for a start under way. **×reference = p50 / the reference "
                     "nsjail's cold p50: lower is better (target ≤ 0.5×).**\n")
            L.append(table(["", "first use", "p50", "p99", "×reference", "errors"], crow) + "\n")
        pools = [(r["server"], r["pool"]) for r in sb.get("rows", []) if r.get("pool")]
        if pools:
            L.append("Warm pool cost, once full: " + "; ".join(
                f"{n}: {p.get('sandboxes') or 0:.0f} sandboxes, {p['processes']} processes, "
                f"PSS {p['pss_kib'] / 1024:.1f} MiB" for n, p in pools) + ".\n")

    rows = w.get("revocation")
    if isinstance(rows, list) and rows:
        L.append("## Revocation latency (admission mode)\n")
        L.append("For each of N workspaces: push a grant, first use (one live session), then time "
                 "`box_revoke_sandbox_admission_grant` from send to reply; both servers stop the "
                 "workspace's sessions before replying. An exec after the revocation must be "
                 "refused. Zero-cost backends. **Ratio = reference / boxd: higher is better for "
                 "boxd.**\n")
        a, c = by(rows, kind="reference"), by(rows, kind="boxd")
        out = [[r["server"], f(r["p50_ms"], " ms", 3), f(r["p99_ms"], " ms", 3), str(r["runs"]),
                str(r["error_count"]), str(r["exec_after_revoke_succeeded"])] for r in (a, c) if r]
        out.append(["ratio ref/boxd", ratio(a.get("p50_ms"), c.get("p50_ms"), 2),
                    ratio(a.get("p99_ms"), c.get("p99_ms"), 2), "", "", ""])
        L.append(table(["server", "p50", "p99", "runs", "errors", "exec after revoke ok"], out)
                 + "\n")
        L.append("boxd commits admission state to SQLite (`synchronous=FULL`) before it replies, "
                 "which is the likely cause of its p99 (not isolated here); the reference keeps "
                 "admission state in memory.\n")

    failed = {k: v["failed"] for k, v in w.items() if isinstance(v, dict) and "failed" in v}
    if failed:
        L.append("## Workloads that failed\n")
        for k, v in failed.items():
            L.append(f"- {k}: `{v}`")
        L.append("")

    if images:
        L.append("## Plots\n")
        for name, title in images:
            L.append(f"### {title}\n\n![{title}]({image_dir}{name})\n")

    if legacy:
        L.append("## The earlier figures (boxd only)\n")
        L.append("The benchmarks `make bench` ran before the side-by-side harness: the actor "
                 "core in-process, real sandboxes in-process, LangBot's nsjail backend "
                 "in-process, boxbench against boxd.\n")
        L.append("```\n" + legacy.strip() + "\n```\n")
    return "\n".join(L)


KEPT_MARKER = "<!-- Measured by their own programs; kept when this page is generated again. -->"


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("results")
    p.add_argument("out")
    p.add_argument("--legacy", default="", help="text output of the earlier benchmarks")
    p.add_argument("--docs", default="", help="also write DOCS/performance.md and its plots")
    a = p.parse_args()
    with open(a.results) as fh:
        res = json.load(fh)
    os.makedirs(a.out, exist_ok=True)
    images = plots(res, a.out)
    legacy = open(a.legacy).read() if a.legacy and os.path.exists(a.legacy) else ""
    with open(os.path.join(a.out, "report.md"), "w") as fh:
        fh.write(report(res, images, "", legacy))
    print(f"report: {os.path.join(a.out, 'report.md')}")
    if a.docs:
        pdir = os.path.join(a.docs, "performance")
        os.makedirs(pdir, exist_ok=True)
        for name, _ in images:
            shutil.copy(os.path.join(a.out, name), os.path.join(pdir, name))
        text = report(res, images, "performance/", "")
        text = text.replace("# boxd beside the reference (LangBot's Box runtime)",
                            "# Performance: boxd beside the reference (LangBot's Box runtime)\n\n"
                            "Generated by `make bench` (`scripts/run-benchmarks BUILD --docs`); "
                            "the full report, with the older boxd-only figures, is "
                            "`BUILD/bench/report.md`.", 1)
        # Sections measured by programs of their own (cluster, density) follow a marker in
        # the page and are kept as they are.
        page = os.path.join(a.docs, "performance.md")
        if os.path.exists(page):
            with open(page) as fh:
                old = fh.read()
            if KEPT_MARKER in old:
                text = text.rstrip("\n") + "\n\n" + old[old.index(KEPT_MARKER):]
        with open(page, "w") as fh:
            fh.write(text)
        print(f"docs: {os.path.join(a.docs, 'performance.md')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
