"""Tables for notebooks: pandas on demand (the optional extra ``stsim[pandas]``) and a
small HTML table (a notebook's ``_repr_html_``) that needs nothing."""
from __future__ import annotations

import html
import math

__all__ = ["pandas", "html_table", "PANDAS_HINT", "HTML_ROWS"]

PANDAS_HINT = 'to_pandas() needs pandas, the optional extra "pandas": pip install "stsim[pandas]"'
#: rows an HTML table shows at most (the first and the last half of them)
HTML_ROWS = 20


def pandas():
    """The ``pandas`` module; ``ImportError`` naming the extra to install without it."""
    try:
        import pandas as pd
    except ImportError:
        raise ImportError(PANDAS_HINT) from None
    return pd


def _cell(v) -> str:
    if isinstance(v, float):
        return "nan" if math.isnan(v) else f"{v:.6g}"
    return html.escape("" if v is None else str(v))


def html_table(columns, rows, caption: str = "", limit: int = HTML_ROWS) -> str:
    """``rows`` (dicts, or sequences in ``columns`` order) as an HTML table with a
    caption; beyond ``limit`` rows only the first and last ``limit // 2`` are shown, with
    a row saying how many are left out.

    >>> html_table(["a"], [{"a": 1.5}]).count("<td>")
    1
    """
    rows = list(rows)
    as_list = [[r.get(c) for c in columns] if isinstance(r, dict) else list(r) for r in rows]
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in columns)
    body = []
    shown = as_list if len(as_list) <= limit else \
        as_list[:limit // 2] + [None] + as_list[-(limit // 2):]
    for r in shown:
        if r is None:
            body.append(f'<tr><td colspan="{len(columns)}">… {len(as_list) - 2 * (limit // 2)} '
                        f'rows not shown …</td></tr>')
        else:
            body.append("<tr>" + "".join(f"<td>{_cell(v)}</td>" for v in r) + "</tr>")
    cap = f"<caption>{html.escape(caption)}</caption>" if caption else ""
    return (f"<table>{cap}<thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody>"
            f"</table>")
