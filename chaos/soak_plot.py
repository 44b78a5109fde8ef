"""The soak's plots (``chaos.soak``): one PNG per figure, each series over the run's time."""

from __future__ import annotations

from pathlib import Path
from typing import Any

FIGURES: dict[str, tuple[str, list[str]]] = {
    "memory": ("RSS (MB)", ["server_rss_mb", "clients_rss_mb"]),
    "size": ("size (MB)", ["db_mb", "wal_mb"]),
    "depth": ("messages", ["ready", "leased", "delayed", "dlq"]),
    "latency": ("p99 latency (ms)", [f"{op}_p99_ms" for op in
                                     ("enqueue", "poll", "ack", "nack", "extend")]),
}


def plot(out_dir: Path, name: str, rows: list[dict[str, Any]]) -> list[Path]:
    """Write ``<name>-<figure>.png`` for each figure; their paths."""
    import matplotlib

    matplotlib.use("Agg")  # files only, no display
    import matplotlib.pyplot as plt

    written = []
    for figure, (label, series) in FIGURES.items():
        fig, ax = plt.subplots(figsize=(8, 3.5))
        for s in series:
            points = [(r["t_s"] / 60, r[s]) for r in rows if r.get(s) is not None]
            if points:
                ax.plot(*zip(*points, strict=True), label=s)
        ax.set_xlabel("minutes")
        ax.set_ylabel(label)
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
        ax.legend(loc="upper left", fontsize="small")
        ax.set_title(f"{name}: {figure}")
        fig.tight_layout()
        path = out_dir / f"{name}-{figure}.png"
        fig.savefig(path, dpi=100)
        plt.close(fig)
        written.append(path)
    return written
