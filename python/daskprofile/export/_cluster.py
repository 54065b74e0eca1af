"""The tabs of a cluster run: Memory (``_cluster_memory``) and Bandwidth (``_bandwidth``).

A tab is made only when its table has rows: local runs and older files have neither, and
render as before. The task stream's actions and workers: ``_cluster_stream``; the summary's
"Where it ran": ``_cluster_summary``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._bandwidth import bandwidth_panel
from ._cluster_memory import memory_panel
from ._common import RunLike

if TYPE_CHECKING:
    from bokeh.models import Range1d, TabPanel


def cluster_tabs(run: RunLike, x_range: Range1d) -> list[TabPanel]:
    """The Memory and Bandwidth tabs of ``run`` (none for a run without those tables)."""
    from bokeh.models import TabPanel

    tabs = []
    memory = run.memory
    if len(memory):
        tabs.append(TabPanel(title="Memory", child=memory_panel(memory, x_range, run.workers)))
    if len(run.transfers):
        tabs.append(TabPanel(title="Bandwidth", child=bandwidth_panel(run, x_range)))
    return tabs
