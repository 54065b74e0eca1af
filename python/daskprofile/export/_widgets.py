"""Small bokeh building blocks shared by the snapshot's plots."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from bokeh.models import Range1d
    from bokeh.plotting import figure as Figure

#: legend entries of the task stream (heaviest groups); the rest only have colours
LEGEND_GROUPS = 20
#: lines of the cache chart (groups with the highest peak), plus a total line
CACHE_GROUPS = 12

_FMT_SECONDS = """
function fmt(s) {
  if (s === null || s === undefined || !isFinite(s)) return "-";
  const a = Math.abs(s);
  if (a >= 1) return s.toPrecision(3) + " s";
  if (a >= 1e-3) return (s * 1e3).toPrecision(3) + " ms";
  return (s * 1e6).toPrecision(3) + " \u00b5s";
}
"""
_FMT_BYTES = """
function fmt(n) {
  if (n === null || n === undefined || !isFinite(n) || n < 0) return "-";
  const units = ["B", "kB", "MB", "GB", "TB"];
  let i = 0;
  while (Math.abs(n) >= 1000 && i < units.length - 1) { n /= 1000; i++; }
  return (i ? n.toPrecision(3) : String(Math.round(n))) + " " + units[i];
}
"""
_TOOLS = "xpan,xwheel_zoom,xbox_zoom,reset,save"


def seconds_hover(code: str = "return fmt(value);", **args: Any) -> Any:
    """A hover formatter showing seconds as s/ms/us; ``code`` may use ``fmt``."""
    from bokeh.models import CustomJSHover

    return CustomJSHover(args=args, code=_FMT_SECONDS + code)


def bytes_hover(suffix: str = "") -> Any:
    """A hover formatter showing bytes as B/kB/MB/GB (``-``: not known), then ``suffix``."""
    from bokeh.models import CustomJSHover

    return CustomJSHover(args={"suffix": suffix}, code=_FMT_BYTES + "return fmt(value) + suffix;")


def bytes_ticks() -> Any:
    """An axis tick formatter in B/kB/MB/GB."""
    from bokeh.models import CustomJSTickFormatter

    return CustomJSTickFormatter(code=_FMT_BYTES + "return tick > 0 ? fmt(tick) : String(tick);")


def lookup_hover(names: list[str]) -> Any:
    """A hover formatter mapping an integer column to a name."""
    from bokeh.models import CustomJSHover

    return CustomJSHover(
        args={"names": names}, code="const n = names[Math.round(value)]; return n ?? '';"
    )


def time_figure(x_range: Range1d, height: int, title: str, **kwargs: Any) -> Figure:
    """A figure on the run's shared time axis; ``kwargs`` override the defaults."""
    from bokeh.plotting import figure

    options: dict[str, Any] = {
        "height": height,
        "title": title,
        "tools": _TOOLS,
        "sizing_mode": "stretch_width",
        **kwargs,
    }
    if options["tools"] == _TOOLS:
        options.setdefault("active_scroll", "xwheel_zoom")
    fig = figure(x_range=x_range, **options)
    fig.toolbar.logo = None
    fig.xaxis.axis_label = "seconds since start"
    return fig


def tag_tools_added_since(fig: Figure, created: list[Any]) -> None:
    """Tag ``"daskprofile"`` the tools of ``fig`` that are not in ``created``."""
    for tool in fig.tools:
        if tool not in created:
            tool.tags = [*tool.tags, "daskprofile"]
