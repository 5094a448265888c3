r"""Text from a result (a region name, a parameter value) as one cell of a table a person reads.

Names and parameters are the user's text and may hold anything: a line break, a tab, a terminal's escape
sequence. Printed raw, a line break ends a table's row and pushes the rest of it (its status, its ``REGRESSION``
mark) onto a line of its own, and an escape sequence can rewrite the terminal. The text tables (``nsightx show``,
``nsightx demo``, ``nsightx compare``) and the Markdown ones write each cell through :func:`cell_text`.
"""

from __future__ import annotations


def cell_text(text: str, *, markdown: bool = False) -> str:
    r"""``text`` as one table cell on one line: a text table's or Markdown's.

    A backslash is doubled first, so what follows reads back unambiguously. Markdown also escapes the pipe and
    writes a line break (``\r\n``, ``\r``, ``\n``) as ``<br>``. A text table writes every character that is not
    printable (line breaks, tabs, a terminal's escape sequences, ``\u2028``) as its Python escape (``\n``,
    ``\t``, ``\x1b``).
    """
    text = text.replace("\\", "\\\\")
    if markdown:
        text = text.replace("|", "\\|")
        return text.replace("\r\n", "<br>").replace("\r", "<br>").replace("\n", "<br>")
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text)
