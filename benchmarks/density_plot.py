"""Plots benchmarks/density.py's JSON reports: starts/s and host memory per sandbox
against live sandboxes, one line per driver and mode. Printed figures stay the source;
this is a picture of them.

usage: /usr/bin/python3 density_plot.py OUT.png REPORT.json [REPORT.json ...]
(Debian's python3-matplotlib; without it nothing is drawn and it says so.)"""

from __future__ import annotations

import json
import sys


def main() -> int:
    if len(sys.argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("density_plot: no matplotlib; no plot drawn", file=sys.stderr)
        return 0
    fig, (rate, mem) = plt.subplots(1, 2, figsize=(11, 4))
    for path in sys.argv[2:]:
        with open(path) as f:
            r = json.load(f)
        rows = [x for x in r["rows"] if x.get("live")]
        label = f"{r['driver']}, {r['mode']}"
        live = [x["live"] for x in rows]
        rate.plot(live, [x["starts_per_s"] for x in rows], marker="o", label=label)
        mem.plot(live, [x["used_kib"] / x["live"] / 1024 for x in rows], marker="o", label=label)
        if r.get("floor"):
            mem.axhline(r["floor"]["used_kib_per"] / 1024, linestyle=":", color="grey", label="bare bwrap floor")
    rate.set_xlabel("live sandboxes")
    rate.set_ylabel("starts/s (first exec of a new workspace)")
    mem.set_xlabel("live sandboxes")
    mem.set_ylabel("host memory per sandbox (MiB)")
    for ax in (rate, mem):
        ax.grid(True, alpha=0.3)
        ax.set_ylim(bottom=0)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(sys.argv[1], dpi=110)
    print(f"density_plot: wrote {sys.argv[1]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
