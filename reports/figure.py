"""Shared pieces of the report figures: PNG bytes of a matplotlib figure (Agg canvas, no pyplot
state) and legend labels for defense stacks."""

from __future__ import annotations

import io
import textwrap

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

DPI = 110


def label(text, width: int = 24) -> str:
    """Plain text for matplotlib (no mathtext), wrapped at defense-stack joints."""
    text = str(text).replace("$", r"\$")
    return "\n+".join(textwrap.fill(part, width, break_long_words=False) for part in text.split("+"))


def png(fig: Figure) -> bytes:
    """The figure as PNG bytes."""
    FigureCanvasAgg(fig)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI, bbox_inches="tight", metadata={"Software": None})
    return buf.getvalue()
