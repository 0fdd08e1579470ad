"""A table as one block of static HTML: every cell escaped text, its header kept in view while the rows scroll.

Streamlit's own tables cost the browser far more than the rows need: st.table draws each cell as Markdown, and
st.dataframe loads and runs a canvas grid (its script fetched and compiled the first time a page shows one). A
table the reader only reads (the Overview's pieces, a model's settings) needs neither. User text is escaped: a
piece such as "<b>" or "*" shows as typed and is never markup.

Rows are CSS grid rows with ARIA table roles, in blocks of BLOCK rows that the browser lays out and paints only
when scrolled into view (content-visibility): a 512-piece text's table costs what its visible rows cost, as a data
grid's would, each time anything on the page asks for a layout. The header lies above the scrolling rows with the
same columns and the same scrollbar gutter, so they line up; a sticky header would need an opaque background, and
the page's theme (light or dark, the reader's choice) is not known to the server."""
from __future__ import annotations

import unicodedata
from html import escape
from numbers import Number

CLASS = "vt-table"
BLOCK = 32                       # rows laid out together
ROW_PX = 31                      # a one-line row's height: the size a block not yet shown is taken to have
MIN_CH = 10                      # a column's least width, in characters: four such columns fit a phone's 390 px
STYLE = f"""<style>
.{CLASS} {{ margin-bottom: 0.5rem; font-size: 0.875rem; }}
.{CLASS} > div {{ scrollbar-gutter: stable; }}
.{CLASS} > div:first-child {{ overflow: hidden; background: rgba(128, 128, 128, 0.15); }}
.{CLASS} > div:last-child {{ overflow-y: auto; }}
.{CLASS} > div:last-child > div {{ content-visibility: auto; }}
.{CLASS} [role=row] {{ display: grid; grid-template-columns: var(--vt-cols);
  border-bottom: 1px solid rgba(128, 128, 128, 0.25); }}
.{CLASS} [role=row] > div {{ padding: 0.25rem 0.5rem; overflow-wrap: anywhere; min-width: 0; }}
.{CLASS} [role=columnheader] {{ overflow-wrap: normal; font-weight: 600; }}   /* on the cell: a row's ch stays regular */
.{CLASS} .n {{ text-align: right; font-variant-numeric: tabular-nums; }}
</style>"""
WIDE = {"W", "F"}                # East Asian wide and full-width characters take about two columns


def width(text: str) -> int:
    """Text's width in narrow characters."""
    return sum(2 if unicodedata.east_asian_width(ch) in WIDE else 1 for ch in text)


def text(value) -> str:
    """What a cell shows: True as ✓, False and None as nothing, anything else as str() has it."""
    if isinstance(value, bool):
        return "✓" if value else ""
    return "" if value is None else str(value)


def numeric(values) -> bool:
    return bool(values) and all(isinstance(v, Number) and not isinstance(v, bool) for v in values)


def longest_word(text: str) -> int:
    return max(map(width, text.split() or [""]))


def column_widths(columns: dict) -> str:
    """grid-template-columns: each column's share of the width, from its header's longest word and its cells' widths
    (+ 2 for the padding; a longer cell wraps, a header between its words), and at least its longest word (up to
    MIN_CH characters) and the padding, so that a short column on a phone is not squeezed to a character a line."""
    tracks = []
    for k, vs in columns.items():
        cells = [text(v) for v in vs[:500]]
        head = min(14, longest_word(str(k)))
        weight = min(40, max(4, head, *map(width, cells))) + 2
        least = min(MIN_CH, max(longest_word(str(k)), *map(longest_word, cells))) + 2
        tracks.append(f"minmax({least}ch, {weight}fr)")      # the same for every row: header and rows line up
    return " ".join(tracks)


def markup(columns: dict, height: int = 600) -> str:
    """{header: values} as the HTML of a table with no index, its rows scrolling under the header past `height` px."""
    columns = {k: list(vs) for k, vs in columns.items()}
    kinds = [' class="n"' if numeric(vs) else "" for vs in columns.values()]
    head = "".join(f'<div role="columnheader"{c}>{escape(str(k))}</div>' for k, c in zip(columns, kinds))
    rows = ['<div role="row">' + "".join(f'<div role="cell"{c}>{escape(text(v))}</div>' for v, c in zip(row, kinds))
            + "</div>" for row in zip(*columns.values())]
    blocks = "".join(f'<div style="contain-intrinsic-size: auto {ROW_PX * len(rows[i:i + BLOCK])}px">'
                     + "".join(rows[i:i + BLOCK]) + "</div>" for i in range(0, len(rows), BLOCK))
    return (f'{STYLE}<div class="{CLASS}" role="table" style="--vt-cols: {column_widths(columns)}">'
            f'<div role="rowgroup"><div role="row">{head}</div></div>'
            f'<div role="rowgroup" style="max-height: {int(height)}px">{blocks}</div></div>')
