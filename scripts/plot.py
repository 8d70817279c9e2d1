#!/usr/bin/env python3
"""Draws the performance page's charts as SVG, from the data files under docs/data/ (Python's standard library only).

    scripts/plot.py [--out DIR] FILE.csv...      (default: every docs/data/*.csv into docs/images/)

A data file is CSV. Its leading lines starting with '#' are settings, one 'key: value' a line:

    # title: hub-sim: latency against the offered rate        the chart's title
    # kind: line                                              'line' (x is a number) or 'bar' (x is a label, grouped bars)
    # x: offered requests/s                                   the axes' labels
    # y: ms
    # scale: log                                              a logarithmic y axis (default: linear, from 0)
    # hline: 5 target                                         a dashed line at y = 5, labelled (any number of them)
    # source: $(make -s hub-sim) ... --rate N                  the command that measured it, written under the chart

then a header row (the x column's name, then one name per series) and one row per x. An empty cell is a figure that
was not measured: a line skips it, a bar is left out. The output depends only on the file, so that a second run
writes the same bytes (scripts/check-docs.sh checks that the committed SVGs are current).
"""

import csv
import math
import os
import sys
from xml.sax.saxutils import escape

WIDTH, HEIGHT = 720, 400
LEFT, RIGHT, TOP, BOTTOM = 70, 130, 64, 80
COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b"]
FONT = 'font-family="sans-serif"'


def read(path):
    settings, hlines, rows = {}, [], []
    with open(path, newline="", encoding="utf-8") as file:
        lines = file.read().splitlines()
    data = []
    for line in lines:
        if line.startswith("#"):
            key, _, value = line[1:].partition(":")
            key, value = key.strip(), value.strip()
            if key == "hline":
                number, _, label = value.partition(" ")
                hlines.append((float(number), label.strip()))
            else:
                settings[key] = value
        elif line.strip():
            data.append(line)
    header, *body = list(csv.reader(data))
    for row in body:
        values = [float(cell) if cell.strip() else None for cell in row[1:]]
        rows.append((row[0].strip(), values + [None] * (len(header) - 1 - len(values))))
    return settings, hlines, [name.strip() for name in header], rows


def nice_ticks(low, high, count=5):
    """Round ticks (1, 2 or 5 times a power of ten) that cover [low, high]."""
    if high <= low:
        high = low + 1
    raw = (high - low) / count
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= raw)
    first = math.floor(low / step) * step
    ticks = []
    value = first
    while value < high + step * 0.999:
        ticks.append(round(value, 10))
        value += step
    return ticks


def log_ticks(low, high):
    """1, 2 and 5 times the powers of ten from below low to above high."""
    ticks = []
    power = 10 ** math.floor(math.log10(low))
    while not ticks or ticks[-1] < high:
        ticks += [m * power for m in (1, 2, 5)]
        power *= 10
    while ticks[1] <= low:
        ticks.pop(0)
    while ticks[-2] >= high:
        ticks.pop()
    return [round(t, 10) for t in ticks]


def wrap(content, width):
    lines, line = [], ""
    for word in content.split(" "):
        if line and len(line) + 1 + len(word) > width:
            lines.append(line)
            line = word
        else:
            line = f"{line} {word}" if line else word
    return lines + [line]


def label(value):
    text = f"{value:,.10f}".rstrip("0").rstrip(".")
    return text


def text(x, y, content, size=12, anchor="middle", extra=""):
    return f'<text x="{x:.1f}" y="{y:.1f}" {FONT} font-size="{size}" text-anchor="{anchor}"{extra}>{escape(content)}</text>'


def draw(settings, hlines, header, rows):
    kind = settings.get("kind", "line")
    series = header[1:]
    values = [v for _, vs in rows for v in vs if v is not None] + [h for h, _ in hlines]
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    if settings.get("scale") == "log":
        yticks = log_ticks(min(values), max(values))
        low, high = math.log10(yticks[0]), math.log10(yticks[-1])

        def ypos(v):
            return TOP + plot_h * (1 - (math.log10(v) - low) / (high - low))
    else:
        yticks = nice_ticks(0, max(values) * 1.05)

        def ypos(v):
            return TOP + plot_h * (1 - v / yticks[-1])

    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}">',
        f'<rect width="{WIDTH}" height="{HEIGHT}" fill="white"/>',
        text(WIDTH / 2, 24, settings.get("title", ""), size=15, extra=' font-weight="bold"'),
    ]
    for tick in yticks:
        y = ypos(tick)
        out.append(f'<line x1="{LEFT}" y1="{y:.1f}" x2="{LEFT + plot_w}" y2="{y:.1f}" stroke="#e0e0e0"/>')
        out.append(text(LEFT - 6, y + 4, label(tick), anchor="end"))
    out.append(text(16, TOP + plot_h / 2, settings.get("y", ""), extra=f' transform="rotate(-90 16 {TOP + plot_h / 2:.1f})"'))
    out.append(text(LEFT + plot_w / 2, HEIGHT - BOTTOM + 40, settings.get("x", "")))

    if kind == "line":
        xs = [float(x) for x, _ in rows]
        xticks = nice_ticks(min(xs), max(xs))
        xmin, xmax = xticks[0], xticks[-1]

        def xpos(v):
            return LEFT + plot_w * (v - xmin) / (xmax - xmin)

        for tick in xticks:
            out.append(text(xpos(tick), TOP + plot_h + 18, label(tick)))
        for index, name in enumerate(series):
            color = COLORS[index % len(COLORS)]
            points = [(xpos(x), ypos(vs[index])) for x, (_, vs) in zip(xs, rows) if vs[index] is not None]
            path = " ".join(f"{x:.1f},{y:.1f}" for x, y in points)
            out.append(f'<polyline points="{path}" fill="none" stroke="{color}" stroke-width="2"/>')
            for (x, y), value in zip(points, [vs[index] for _, vs in rows if vs[index] is not None]):
                out.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3.5" fill="{color}"/>')
                out.append(text(x, y - 8, label(value), size=10, extra=f' fill="{color}"'))
    else:
        group = plot_w / len(rows)
        bar = group * 0.8 / len(series)
        for row_index, (name, vs) in enumerate(rows):
            left = LEFT + group * row_index + group * 0.1
            out.append(text(LEFT + group * (row_index + 0.5), TOP + plot_h + 18, name, size=11))
            for index, value in enumerate(vs):
                if value is None:
                    continue
                color = COLORS[index % len(COLORS)]
                x, y = left + bar * index, ypos(value)
                out.append(f'<rect x="{x:.1f}" y="{y:.1f}" width="{bar - 1:.1f}" height="{TOP + plot_h - y:.1f}" fill="{color}"/>')
                out.append(text(x + bar / 2, y - 4, label(value), size=9))

    for value, name in hlines:
        y = ypos(value)
        out.append(f'<line x1="{LEFT}" y1="{y:.1f}" x2="{LEFT + plot_w}" y2="{y:.1f}" stroke="#555" stroke-dasharray="6 4"/>')
        out.append(text(LEFT + plot_w + 6, y + 4, name, size=11, anchor="start", extra=' fill="#555"'))
    out.append(f'<line x1="{LEFT}" y1="{TOP + plot_h}" x2="{LEFT + plot_w}" y2="{TOP + plot_h}" stroke="black"/>')
    out.append(f'<line x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{TOP + plot_h}" stroke="black"/>')

    x = LEFT
    for index, name in enumerate(series):
        out.append(f'<rect x="{x}" y="{TOP - 25}" width="12" height="12" fill="{COLORS[index % len(COLORS)]}"/>')
        out.append(text(x + 17, TOP - 15, name, size=11, anchor="start"))
        x += 40 + 7 * len(name)
    if "source" in settings:
        lines = wrap(settings["source"], 110)
        for index, line in enumerate(lines):
            out.append(text(LEFT, HEIGHT - 8 - 13 * (len(lines) - 1 - index), line, size=10, anchor="start", extra=' fill="#555"'))
    out.append("</svg>")
    return "\n".join(out) + "\n"


def main(arguments):
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    out_dir = os.path.join(root, "docs", "images")
    if arguments[:1] == ["--out"]:
        out_dir, arguments = arguments[1], arguments[2:]
    if not arguments:
        data = os.path.join(root, "docs", "data")
        arguments = sorted(os.path.join(data, name) for name in os.listdir(data) if name.endswith(".csv"))
    for path in arguments:
        target = os.path.join(out_dir, os.path.splitext(os.path.basename(path))[0] + ".svg")
        with open(target, "w", encoding="utf-8") as file:
            file.write(draw(*read(path)))
        print(target)


if __name__ == "__main__":
    main(sys.argv[1:])
