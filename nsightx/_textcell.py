r"""Text from a result (a region name, a parameter value) as one cell of a table a person reads.

Names and parameters are the user's text and may hold anything: a line break, a tab, a terminal's escape
sequence. Printed raw, a line break ends a table's row and pushes the rest of it (its status, its ``REGRESSION``
mark) onto a line of its own, and an escape sequence can rewrite the terminal. The text tables (``nsightx show``,
``nsightx demo``, ``nsightx compare``) and the Markdown ones write each cell through :func:`cell_text`.

A text table separates its columns by two spaces or more, so a name holding two spaces in a row (``"copy  fp32"``)
read as two cells to a person or a program splitting the row on runs of spaces, and a name's outer space
(``" a"``, another region than ``"a"``) merged into the separator. Such spaces are written as ``\x20``.
"""

from __future__ import annotations

import re

_LOOSE_SPACE = re.compile(r"^ |(?<= ) | $")
"""A space a text table's reader would take as part of a column separator: one after a space, or at either end."""


def cell_text(text: str, *, markdown: bool = False) -> str:
    r"""``text`` as one table cell on one line: a text table's or Markdown's.

    A backslash is doubled first, so what follows reads back unambiguously. Markdown also escapes the pipe and
    writes a line break (``\r\n``, ``\r``, ``\n``) as ``<br>``. A text table writes every character that is not
    printable (line breaks, tabs, a terminal's escape sequences, ``\u2028``) as its Python escape (``\n``,
    ``\t``, ``\x1b``), and a space that follows a space or starts or ends the text as ``\x20`` (``"a  b"`` as
    ``a \x20b``): the table's columns are separated by two spaces or more, and a cell never holds two in a row.
    """
    text = text.replace("\\", "\\\\")
    if markdown:
        text = text.replace("|", "\\|")
        return text.replace("\r\n", "<br>").replace("\r", "<br>").replace("\n", "<br>")
    if not text.isprintable():
        text = "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text)
    return _LOOSE_SPACE.sub(r"\\x20", text) if " " in text else text
