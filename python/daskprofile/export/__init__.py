"""Exporters: turn a finished Run into files people open (HTML, Chrome trace, speedscope,
collapsed stacks). They read a Run's public surface and nothing else."""

from __future__ import annotations

from .folded import to_folded
from .html import render_html, to_html
from .speedscope import to_speedscope
from .trace import to_chrome_trace

__all__ = ["render_html", "to_chrome_trace", "to_folded", "to_html", "to_speedscope"]
