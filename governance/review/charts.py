"""Small server-side SVG charts for the governance dashboard: no JavaScript, no CDN, readable
without colour (every bar and point carries a <title> with its exact value)."""

import math
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


NICE_STEPS = (1, 2, 5)  # tick steps are one of these times a power of ten
TICKS = 5  # at most this many intervals on the y axis


@dataclass(frozen=True)
class Scale:
    """A y axis from 0 to `top` in `step`s: the smallest "nice" step (1, 2 or 5 times a power of
    ten) that covers the largest value in at most TICKS intervals, so ticks are evenly spaced and
    their labels exact (0.2, 0.4, 0.6, not 0, 0.2, 0.5, 0.8 on evenly spaced lines)."""

    step: float
    top: float

    @classmethod
    def covering(cls, max_value: float, *, whole: bool = False) -> "Scale":
        """`whole`: the values are counts, so the step is at least 1."""
        max_value = max(max_value, 1.0 if whole else 0.0) or 1.0
        rough = max_value / TICKS
        power = 10 ** math.floor(math.log10(rough))
        step = next(n * power for n in (*NICE_STEPS, 10) if n * power >= rough * (1 - 1e-9))
        if whole:
            step = max(1.0, step)
        return cls(step=step, top=step * math.ceil(max_value / step - 1e-9))

    @property
    def ticks(self) -> list[float]:
        return [self.step * i for i in range(round(self.top / self.step) + 1)]

    @property
    def decimals(self) -> int:
        return max(0, -math.floor(math.log10(self.step) + 1e-9))

    def label(self, value: float) -> str:
        if not value:
            return "0"
        if self.top >= 10_000:
            return f"{value / 1000:g}k"
        return f"{value:.{self.decimals}f}"


def _axis(scale: Scale, *, left: int, top: int, plot_h: int, plot_w: int, unit: str) -> list[str]:
    parts = []
    for value in scale.ticks:
        y = top + plot_h - plot_h * value / scale.top
        parts.append(f'<line x1="{left}" x2="{left + plot_w}" y1="{y:.1f}" y2="{y:.1f}" stroke="#ddd"/>')
        parts.append(
            f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end" font-size="11">{scale.label(value)}{escape(unit)}</text>'
        )
    return parts


def _fmt(value: float) -> str:
    """An exact value for a tooltip."""
    return f"{value:,.0f}" if value == int(value) else f"{value:,.2f}"


LEGEND_ROW = 18
LEGEND_CHAR_W = 7  # a rough width of one character at font-size 12, for placing legend items


def _legend_rows(series: list[Series], *, width: int, left: int) -> list[list[tuple[int, int, Series]]]:
    """Legend items laid out left to right, wrapping to a new row when the next would not fit:
    [(index, x offset, series)] per row."""
    rows: list[list[tuple[int, int, Series]]] = [[]]
    x = 0
    for i, s in enumerate(series):
        item_w = 18 + LEGEND_CHAR_W * len(s.name) + 22
        if rows[-1] and left + x + item_w > width:
            rows.append([])
            x = 0
        rows[-1].append((i, x, s))
        x += item_w
    return rows


def _legend(rows: list[list[tuple[int, int, Series]]], *, x: int, y: int) -> list[str]:
    parts = []
    for r, row in enumerate(rows):
        for i, offset, s in row:
            top = y + r * LEGEND_ROW
            parts.append(f'<rect x="{x + offset}" y="{top}" width="12" height="12" fill="{PALETTE[i % len(PALETTE)]}"/>')
            parts.append(f'<text x="{x + offset + 18}" y="{top + 11}" font-size="12">{escape(s.name)}</text>')
    return parts


LEFT = 64  # room for the y axis title and its tick labels ("0.15 s", "100")
MAX_BAR = 28  # a bar's width at most, so a chart of one or two days is not a wall of colour
MAX_STACK = 72  # likewise for a stacked bar (one kind of memory)
X_LABELS = 8  # at most this many labels under a chart of points
LABEL_CHAR_W = 6.6  # a rough width of one character at font-size 11, for spacing x labels
LABEL_ROW = 12  # the second row of staggered x labels sits this much lower


def _y_title(title: str, *, top: int, plot_h: int) -> list[str]:
    """What the y axis measures, written up the left edge."""
    if not title:
        return []
    x, y = 14, top + plot_h / 2
    return [
        (
            f'<text class="axis-title" x="{x}" y="{y:.1f}" transform="rotate(-90 {x} {y:.1f})" '
            f'text-anchor="middle" font-size="12">{escape(title)}</text>'
        )
    ]


def _layout(
    series: list[Series], *, width: int, height: int, labels: list[str], every: int
) -> tuple[int, int, int, int, list, int, float, bool]:
    """left, top, plot width, plot height, legend rows, total height (grown by extra legend rows
    and a second row of x labels), the width of one label's slot, and whether the x labels
    alternate between two rows (when neighbours would touch, e.g. kind names on a narrow chart)."""
    left, top, bottom = LEFT, 28, 44
    plot_w = width - left - 12
    slot = plot_w / max(len(labels), 1)
    stagger = max((len(label) for label in labels), default=0) * LABEL_CHAR_W > slot * every - 6
    rows = _legend_rows(series, width=width, left=left)
    extra = LABEL_ROW if stagger else 0
    return (left, top, plot_w, height - top - bottom, rows, height + (len(rows) - 1) * LEGEND_ROW + extra, slot, stagger)


def _x_labels(labels: list[str], *, left: int, slot: float, y: int, every: int, stagger: bool = False) -> list[str]:
    """Every `every`-th label counted back from the last, so the newest (today) is always named;
    staggered: every other one a row lower."""
    last = len(labels) - 1
    shown = [i for i in range(len(labels)) if (last - i) % every == 0]
    return [
        f'<text x="{left + i * slot + slot / 2:.1f}" y="{y + (LABEL_ROW if stagger and n % 2 else 0)}" '
        f'text-anchor="middle" font-size="11">{escape(labels[i])}</text>'
        for n, i in enumerate(shown)
    ]


def grouped_bars(
    labels: list[str],
    series: list[Series],
    *,
    title: str,
    unit: str = "",
    width: int = 720,
    height: int = 260,
    label_every: int = 1,
    whole: bool = False,
    y_title: str = "",
) -> SafeString:
    """Bars per label, one bar per series side by side, the group centred on its label. `whole`:
    the values are counts."""
    left, top, plot_w, plot_h, legend, height, slot, stagger = _layout(
        series, width=width, height=height, labels=labels, every=label_every
    )
    scale = Scale.covering(max([v for s in series for v in s.values] + [0]), whole=whole)
    body = _axis(scale, left=left, top=top, plot_h=plot_h, plot_w=plot_w, unit=unit)
    body += _y_title(y_title, top=top, plot_h=plot_h)
    bar_w = max(1.0, min(MAX_BAR, (slot * 0.8) / max(len(series), 1)))
    group_w = bar_w * len(series)
    for li, label in enumerate(labels):
        for si, s in enumerate(series):
            value = s.values[li]
            h = plot_h * value / scale.top
            x = left + li * slot + (slot - group_w) / 2 + si * bar_w
            body.append(
                f'<rect x="{x:.1f}" y="{top + plot_h - h:.1f}" width="{bar_w:.1f}" height="{h:.1f}" '
                f'fill="{PALETTE[si % len(PALETTE)]}"><title>{escape(label)} · {escape(s.name)}: {_fmt(value)}{escape(unit)}</title></rect>'
            )
    body += _x_labels(labels, left=left, slot=slot, y=top + plot_h + 16, every=label_every, stagger=stagger)
    body += _legend(legend, x=left, y=top + plot_h + 28 + (LABEL_ROW if stagger else 0))
    return _frame(width, height, title, body)


def stacked_bars(
    labels: list[str], series: list[Series], *, title: str, width: int = 720, height: int = 260, y_title: str = ""
) -> SafeString:
    """One bar per label, stacked by series (e.g. active memory per kind, stacked by age bucket);
    the values are counts."""
    left, top, plot_w, plot_h, legend, height, slot, stagger = _layout(series, width=width, height=height, labels=labels, every=1)
    totals = [sum(s.values[i] for s in series) for i in range(len(labels))]
    scale = Scale.covering(max([*totals, 0]), whole=True)
    body = _axis(scale, left=left, top=top, plot_h=plot_h, plot_w=plot_w, unit="")
    body += _y_title(y_title, top=top, plot_h=plot_h)
    bar_w = min(MAX_STACK, slot * 0.6)
    for li, label in enumerate(labels):
        y: float = top + plot_h
        for si, s in enumerate(series):
            h = plot_h * s.values[li] / scale.top
            y -= h
            body.append(
                f'<rect x="{left + li * slot + (slot - bar_w) / 2:.1f}" y="{y:.1f}" width="{bar_w:.1f}" height="{h:.1f}" '
                f'fill="{PALETTE[si % len(PALETTE)]}"><title>{escape(label)} · {escape(s.name)}: {_fmt(s.values[li])}</title></rect>'
            )
    body += _x_labels(labels, left=left, slot=slot, y=top + plot_h + 16, every=1, stagger=stagger)
    body += _legend(legend, x=left, y=top + plot_h + 28 + (LABEL_ROW if stagger else 0))
    return _frame(width, height, title, body)


def points(
    labels: list[str],
    values: list[float],
    *,
    title: str,
    unit: str = "",
    width: int = 720,
    height: int = 240,
    y_title: str = "",
    x_title: str = "",
) -> SafeString:
    """A dot per observation in time order, joined by a line (e.g. forget propagation lag), each in
    the middle of its share of the width (one observation: in the middle, not on the y axis). Under
    them their labels (a day each), a label only where it changes and at most X_LABELS of them, and
    `x_title` below."""
    left, top, bottom = LEFT, 28, 52
    plot_w, plot_h = width - left - 12, height - top - bottom
    scale = Scale.covering(max([*values, 0]))
    body = _axis(scale, left=left, top=top, plot_h=plot_h, plot_w=plot_w, unit=unit)
    body += _y_title(y_title, top=top, plot_h=plot_h)
    slot = plot_w / max(len(values), 1)
    coords = [(left + (i + 0.5) * slot, top + plot_h - plot_h * v / scale.top) for i, v in enumerate(values)]
    if len(coords) > 1:
        path = " ".join(f"{x:.1f},{y:.1f}" for x, y in coords)
        body.append(f'<polyline points="{path}" fill="none" stroke="{PALETTE[0]}" stroke-width="1.5"/>')
    for (x, y), label, value in zip(coords, labels, values, strict=True):
        body.append(
            f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3.5" fill="{PALETTE[1]}"><title>{escape(label)}: '
            f"{_fmt(value)}{escape(unit)}</title></circle>"
        )
    # A label where the day changes, thinned so that labels keep at least a label's width apart.
    changes = [i for i, label in enumerate(labels) if i == 0 or label != labels[i - 1]]
    gap = max(plot_w / X_LABELS, max((len(label) for label in labels), default=0) * LABEL_CHAR_W + 10)
    shown: list[int] = []
    for i in changes:
        if not shown or (i - shown[-1]) * slot >= gap:
            shown.append(i)
    for i in shown:
        body.append(
            f'<text x="{left + (i + 0.5) * slot:.1f}" y="{top + plot_h + 16}" text-anchor="middle" '
            f'font-size="11">{escape(labels[i])}</text>'
        )
    if x_title:
        body.append(
            f'<text class="axis-title" x="{left + plot_w / 2:.1f}" y="{top + plot_h + 38}" '
            f'text-anchor="middle" font-size="12">{escape(x_title)}</text>'
        )
    if not values:
        body.append(
            f'<text x="{left + plot_w / 2:.1f}" y="{top + plot_h / 2:.1f}" text-anchor="middle" font-size="13">No data yet</text>'
        )
    return _frame(width, height, title, body)
