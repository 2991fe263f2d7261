"""What a reader sees of a chart's text: the drawn bounding boxes of every visible label, from matplotlib's renderer.

A chart whose labels cover each other, or run off the picture's edge, cannot be read; checking the rendered boxes
(``Text.get_window_extent(renderer)``) finds that whatever the layout code meant to do.
"""

from __future__ import annotations

from typing import Any

from matplotlib.text import Text

__all__ = ["unreadable_texts"]

TOLERANCE = 1.0
"""Pixels two boxes may share (anti-aliased glyph edges touching is not an overlap)."""


def unreadable_texts(fig: Any) -> list[str]:
    """Every pair of visible texts whose drawn boxes overlap, and every text that runs off the figure, described."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    undrawn = _undrawn_tick_labels(fig)
    texts = [t for t in fig.findobj(Text) if t.get_visible() and t.get_text().strip() and id(t) not in undrawn]
    boxes = [(t.get_text(), t.get_window_extent(renderer)) for t in texts]
    found = []
    whole = fig.bbox
    for index, (text, box) in enumerate(boxes):
        if box.x0 < whole.x0 - TOLERANCE or box.x1 > whole.x1 + TOLERANCE:
            found.append(f"{text!r} runs off the picture ({box.x0:.0f}..{box.x1:.0f} of {whole.x1:.0f} px)")
        if box.y0 < whole.y0 - TOLERANCE or box.y1 > whole.y1 + TOLERANCE:
            found.append(f"{text!r} runs off the picture ({box.y0:.0f}..{box.y1:.0f} of {whole.y1:.0f} px)")
        for other, other_box in boxes[index + 1 :]:
            width = min(box.x1, other_box.x1) - max(box.x0, other_box.x0)
            height = min(box.y1, other_box.y1) - max(box.y0, other_box.y0)
            if width > TOLERANCE and height > TOLERANCE:
                found.append(f"{text!r} and {other!r} overlap")
    return found


def _undrawn_tick_labels(fig: Any) -> set[int]:
    """The tick labels matplotlib keeps but does not draw: those of ticks outside the axis' view limits."""
    found: set[int] = set()
    for ax in fig.axes:
        for axis, limits in ((ax.xaxis, ax.get_xlim()), (ax.yaxis, ax.get_ylim())):
            low, high = sorted(limits)
            for tick in [*axis.get_major_ticks(), *axis.get_minor_ticks()]:
                where = tick.get_loc()
                if where is None or not low - 1e-9 <= where <= high + 1e-9:
                    found.update((id(tick.label1), id(tick.label2)))
    return found
