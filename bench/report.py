"""What a run leaves: the table on the terminal, the raw figures as JSON, the latency chart."""

from __future__ import annotations

import json
import os
import platform
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from .stats import ms, percentile


@dataclass
class Figure:
    name: str
    value: float
    unit: str
    target: str
    passed: bool | None
    """None: reported for information, whatever the value."""
    detail: str


def table(figures: list[Figure]) -> str:
    rows = [("figure", "value", "target", "result", "detail")]
    for figure in figures:
        verdict = "info" if figure.passed is None else ("PASS" if figure.passed else "FAIL")
        value = f"{figure.value:,.0f}" if figure.value >= 1000 else f"{figure.value:.2f}"
        rows.append((figure.name, f"{value} {figure.unit}", figure.target, verdict, figure.detail))
    widths = [max(len(row[i]) for row in rows) for i in range(5)]
    lines = [
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True))
        for row in rows
    ]
    lines.insert(1, "  ".join("-" * width for width in widths))
    return "\n".join(line.rstrip() for line in lines)


def machine() -> dict[str, Any]:
    model = next(
        (
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        ),
        platform.processor(),
    )
    return {
        "cpus": os.cpu_count(),
        "cpu": model,
        "python": platform.python_version(),
        # Other work on the machine shows up as noise; the load says how much there was.
        "load_average": os.getloadavg(),
    }


# The chart's panels: title, the raw figures' key, and the two sides compared.
PANELS = (
    ("Non-streaming, 1 KB (noop chain)", "latency", "direct_s", "gateway_s"),
    ("Time to first event", "ttfe", "direct_s", "gateway_s"),
    ("4 MB request, string_replace", "armed", "flag_off_s", "flag_on_s"),
)


def chart(raw: dict[str, Any], path: Path) -> None:
    """The latency distributions the run measured (a run of some groups only draws fewer)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [panel for panel in PANELS if panel[1] in raw]
    if not panels:
        return
    figure, axes = plt.subplots(1, len(panels), figsize=(5 * len(panels), 4.2), squeeze=False)
    for axis, (title, key, left, right) in zip(axes[0], panels, strict=True):
        for side, color in ((left, "tab:blue"), (right, "tab:orange")):
            values = sorted(ms(value) for value in raw[key][side])
            share = [(index + 1) / len(values) for index in range(len(values))]
            label = side.removesuffix("_s").replace("_", " ")
            axis.plot(
                values, share, color=color, label=f"{label} (p50 {percentile(values, 50):.2f} ms)"
            )
        axis.set_title(title)
        axis.set_xlabel("ms")
        axis.set_ylabel("share of requests")
        axis.grid(alpha=0.3)
        axis.legend(loc="lower right")
    figure.suptitle("Policy Gateway vs direct access (CDF, loopback, instant upstream)")
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def write(raw: dict[str, Any], figures: list[Figure], seconds: float, results: Path) -> None:
    """The raw figures (results/latest.json), the chart, and the table on the terminal."""
    raw["figures"] = [asdict(figure) for figure in figures]
    raw["seconds"] = seconds
    (results / "latest.json").write_text(json.dumps(raw, indent=1))
    chart(raw, results / "latency.png")
    info = raw["machine"]
    print(
        f"\nPolicy Gateway benchmark: {info['cpus']} CPUs ({info['cpu']}), "
        f"Python {info['python']}, load average at start {info['load_average'][0]:.2f}"
    )
    print(table(figures))
    print(f"\n{seconds:.0f} s; raw figures and chart in {results}")
