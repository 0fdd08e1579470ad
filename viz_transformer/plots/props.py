"""Setting a figure's properties the cheap way: `put(obj, **props)` does what `obj.update(**props)` does.

plotly's update(), update_layout() and update_xaxes() route every call through the figure's batch_update and parse
each key as a magic-underscore path, and every property set on an object inside a figure is reported to the
figure's relayout bookkeeping (kept for FigureWidget). The layout every figure gets (style.layout,
margins.fit_margins) cost several times the figure's own construction that way (benchmarks/figure_build.py). Here each top-level property is set once, a dict already merged with
what the property holds. tests/test_plot_props.py compares the result with update()'s.
"""
from __future__ import annotations

from plotly.basedatatypes import BasePlotlyType


def put(obj: BasePlotlyType, **props) -> None:
    """Set each property of obj (a layout, an axis, a trace) in one assignment: a dict is merged into what the
    property holds, key by key and nested dicts too, as update() merges it; any other value (a number, a string,
    None, a list) replaces the property, as update() replaces it."""
    for key, value in props.items():
        if isinstance(value, dict):
            held = getattr(obj, key)
            if isinstance(held, BasePlotlyType):
                value = _merged(held.to_plotly_json(), value)
        setattr(obj, key, value)


def _merged(held: dict, new: dict) -> dict:
    out = dict(held)
    for key, value in new.items():
        out[key] = _merged(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out
