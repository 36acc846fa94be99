"""Small server-side SVG charts for the governance dashboard: no JavaScript, no CDN, readable
without colour (every bar and point carries a <title> with its exact value)."""

from dataclasses import dataclass
from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

PALETTE = ["#2f5d8a", "#d9822b", "#3a8a5c", "#a23b72", "#6b6b6b", "#b5a642"]


@dataclass(frozen=True)
class Series:
    name: str
    values: list[float]


def _frame(width: int, height: int, title: str, body: list[str]) -> SafeString:
    return mark_safe(
        f'<svg class="chart" role="img" aria-label="{escape(title)}" viewBox="0 0 {width} {height}" '
        f'width="100%" preserveAspectRatio="xMidYMid meet" xmlns="http://www.w3.org/2000/svg">'
        f"<title>{escape(title)}</title>{''.join(body)}</svg>"
    )


def _axis(max_value: float, *, left: int, top: int, plot_h: int, plot_w: int, unit: str) -> list[str]:
    parts = []
    for i in range(5):
        value = max_value * i / 4
        y = top + plot_h - plot_h * i / 4
        parts.append(f'<line x1="{left}" x2="{left + plot_w}" y1="{y:.1f}" y2="{y:.1f}" stroke="#ddd"/>')
        parts.append(f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end" font-size="11">{_fmt(value)}{escape(unit)}</text>')
    return parts


def _fmt(value: float) -> str:
    if value >= 1000:
        return f"{value / 1000:.1f}k"
    return f"{value:.0f}" if value == int(value) or value >= 10 else f"{value:.1f}"


def _legend(series: list[Series], *, x: int, y: int) -> list[str]:
    parts = []
    for i, s in enumerate(series):
        parts.append(f'<rect x="{x + i * 140}" y="{y}" width="12" height="12" fill="{PALETTE[i % len(PALETTE)]}"/>')
        parts.append(f'<text x="{x + i * 140 + 18}" y="{y + 11}" font-size="12">{escape(s.name)}</text>')
    return parts


def grouped_bars(labels: list[str], series: list[Series], *, title: str, unit: str = "", width: int = 720,
                 height: int = 260, label_every: int = 1) -> SafeString:
    """Bars per label, one bar per series side by side."""
    left, top, bottom = 48, 28, 44
    plot_w, plot_h = width - left - 12, height - top - bottom
    max_value = max([v for s in series for v in s.values] + [1])
    body = _axis(max_value, left=left, top=top, plot_h=plot_h, plot_w=plot_w, unit=unit)
    slot = plot_w / max(len(labels), 1)
    bar_w = max(1.0, (slot * 0.8) / max(len(series), 1))
    for li, label in enumerate(labels):
        for si, s in enumerate(series):
            value = s.values[li]
            h = plot_h * value / max_value
            x = left + li * slot + slot * 0.1 + si * bar_w
            body.append(
                f'<rect x="{x:.1f}" y="{top + plot_h - h:.1f}" width="{bar_w:.1f}" height="{h:.1f}" '
                f'fill="{PALETTE[si % len(PALETTE)]}"><title>{escape(label)} · {escape(s.name)}: {_fmt(value)}{escape(unit)}</title></rect>'
            )
        if li % label_every == 0:
            body.append(f'<text x="{left + li * slot + slot / 2:.1f}" y="{top + plot_h + 16}" text-anchor="middle" '
                        f'font-size="11">{escape(label)}</text>')
    body += _legend(series, x=left, y=height - 16)
    return _frame(width, height, title, body)


def stacked_bars(labels: list[str], series: list[Series], *, title: str, width: int = 720, height: int = 260) -> SafeString:
    """One bar per label, stacked by series (e.g. active memory per kind, stacked by age bucket)."""
    left, top, bottom = 48, 28, 44
    plot_w, plot_h = width - left - 12, height - top - bottom
    totals = [sum(s.values[i] for s in series) for i in range(len(labels))]
    max_value = max(totals + [1])
    body = _axis(max_value, left=left, top=top, plot_h=plot_h, plot_w=plot_w, unit="")
    slot = plot_w / max(len(labels), 1)
    for li, label in enumerate(labels):
        y = top + plot_h
        for si, s in enumerate(series):
            h = plot_h * s.values[li] / max_value
            y -= h
            body.append(
                f'<rect x="{left + li * slot + slot * 0.2:.1f}" y="{y:.1f}" width="{slot * 0.6:.1f}" height="{h:.1f}" '
                f'fill="{PALETTE[si % len(PALETTE)]}"><title>{escape(label)} · {escape(s.name)}: {_fmt(s.values[li])}</title></rect>'
            )
        body.append(f'<text x="{left + li * slot + slot / 2:.1f}" y="{top + plot_h + 16}" text-anchor="middle" '
                    f'font-size="11">{escape(label)}</text>')
    body += _legend(series, x=left, y=height - 16)
    return _frame(width, height, title, body)


def points(labels: list[str], values: list[float], *, title: str, unit: str = "", width: int = 720,
           height: int = 240) -> SafeString:
    """A dot per observation in time order, joined by a line (e.g. forget propagation lag)."""
    left, top, bottom = 48, 28, 36
    plot_w, plot_h = width - left - 12, height - top - bottom
    max_value = max(values + [1])
    body = _axis(max_value, left=left, top=top, plot_h=plot_h, plot_w=plot_w, unit=unit)
    step = plot_w / max(len(values) - 1, 1)
    coords = [(left + i * step, top + plot_h - plot_h * v / max_value) for i, v in enumerate(values)]
    if len(coords) > 1:
        path = " ".join(f"{x:.1f},{y:.1f}" for x, y in coords)
        body.append(f'<polyline points="{path}" fill="none" stroke="{PALETTE[0]}" stroke-width="1.5"/>')
    for (x, y), label, value in zip(coords, labels, values):
        body.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3.5" fill="{PALETTE[1]}"><title>{escape(label)}: '
                    f'{_fmt(value)}{escape(unit)}</title></circle>')
    if not values:
        body.append(f'<text x="{width / 2}" y="{height / 2}" text-anchor="middle" font-size="13">No data yet</text>')
    return _frame(width, height, title, body)
