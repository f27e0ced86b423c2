"""Small inline SVG charts (no plotting library, no external assets): stacked columns with axis and legend."""

from __future__ import annotations

import math
from dataclasses import dataclass
from html import escape

_LEFT, _RIGHT, _TOP, _BOTTOM = 64, 12, 36, 44
_CHAR_PX = 6.5


@dataclass(frozen=True)
class Series:
    name: str
    values: list[float]
    color: str


def nice_ticks(top: float, count: int = 4) -> list[float]:
    """Round tick values (1, 2, 5 x 10^k) from 0 to at least `top`."""
    if top <= 0:
        return [0.0, 1.0]
    raw = top / count
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= raw)
    return [i * step for i in range(math.ceil(top / step - 1e-9) + 1)]


def _fmt(value: float) -> str:
    if value >= 1_000_000:
        return f"{value / 1_000_000:g}M"
    if value >= 1_000:
        return f"{value / 1_000:g}k"
    return f"{value:g}"


def columns(title: str, labels: list[str], series: list[Series], *, width: int = 760, height: int = 240,
            y_label: str = "") -> str:
    """A stacked column chart; every column segment has a hover title with its exact value."""
    plot_w, plot_h = width - _LEFT - _RIGHT, height - _TOP - _BOTTOM
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}" role="img" aria-label="{escape(title)}" class="chart">',
           f'<text x="{_LEFT}" y="14" class="t">{escape(title)}</text>']
    x = _LEFT
    for s in series:
        out.append(f'<rect x="{x}" y="20" width="10" height="10" fill="{s.color}"/>'
                   f'<text x="{x + 14}" y="29" class="l">{escape(s.name)}</text>')
        x += 24 + len(s.name) * _CHAR_PX
    totals = [sum(s.values[i] for s in series) for i in range(len(labels))]
    if not labels or max(totals, default=0) <= 0:
        out.append(f'<text x="{_LEFT + plot_w / 2}" y="{_TOP + plot_h / 2}" class="l" text-anchor="middle">'
                   "nothing to show</text></svg>")
        return "".join(out)
    ticks = nice_ticks(max(totals))
    scale = plot_h / ticks[-1]
    base = _TOP + plot_h
    for tick in ticks:
        y = base - tick * scale
        out.append(f'<line x1="{_LEFT}" x2="{_LEFT + plot_w}" y1="{y:.1f}" y2="{y:.1f}" class="g"/>'
                   f'<text x="{_LEFT - 4}" y="{y + 4:.1f}" class="l" text-anchor="end">{_fmt(tick)}</text>')
    if y_label:
        out.append(f'<text x="12" y="{_TOP + plot_h / 2}" class="l" text-anchor="middle" '
                   f'transform="rotate(-90 12 {_TOP + plot_h / 2})">{escape(y_label)}</text>')
    slot = plot_w / len(labels)
    bar = max(1.0, slot * 0.8)
    widest = max(len(label) for label in labels) * _CHAR_PX + 8
    every = max(1, math.ceil(widest / slot))
    for i, label in enumerate(labels):
        x0 = _LEFT + i * slot + (slot - bar) / 2
        top = base
        for s in series:
            value = s.values[i]
            if value <= 0:
                continue
            h = max(value * scale, 1.5)  # a single message stays visible
            top -= h
            out.append(f'<rect x="{x0:.1f}" y="{top:.1f}" width="{bar:.1f}" height="{h:.1f}" '
                       f'fill="{s.color}"><title>{escape(label)}: {escape(s.name)} {value:g}</title></rect>')
        if i % every == 0:
            out.append(f'<text x="{x0 + bar / 2:.1f}" y="{base + 14}" class="l" text-anchor="middle">'
                       f"{escape(label)}</text>")
    out.append(f'<line x1="{_LEFT}" x2="{_LEFT + plot_w}" y1="{base}" y2="{base}" class="a"/></svg>')
    return "".join(out)
