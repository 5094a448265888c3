"""What is wrong with a result file's bytes before any JSON is read: empty, a byte-order mark, invalid UTF-8.

nsightx writes its result and raw files as UTF-8 without a byte-order mark, and never an empty file (a result is
written in one step, a raw file starts with its header line). A file that breaks one of these rules was cut,
re-encoded by another tool or damaged on the way; saying exactly that (which byte, which line) is more useful
than the JSON parser's "expected value at line 1 column 1". :func:`start_problem` is cheap (it looks at the first
bytes) and runs before parsing; :func:`utf8_problem` decodes the whole file, so loaders call it only once
parsing has failed.
"""

from __future__ import annotations

import codecs

_BOMS = (
    (codecs.BOM_UTF8, "UTF-8"),
    (codecs.BOM_UTF32_LE, "UTF-32 LE"),  # before UTF-16 LE: FF FE 00 00 starts with FF FE
    (codecs.BOM_UTF32_BE, "UTF-32 BE"),
    (codecs.BOM_UTF16_LE, "UTF-16 LE"),
    (codecs.BOM_UTF16_BE, "UTF-16 BE"),
)


def start_problem(data: bytes) -> str | None:
    """Why ``data`` cannot be a result file from its first bytes alone, or ``None``.

    Returns:
        The end of a sentence that starts with the file's name: ``is empty (0 bytes); ...`` or ``starts with a
        UTF-8 byte-order mark (BOM) at byte 0; ...``.
    """
    if not data:
        return (
            "is empty (0 bytes): nsightx never writes an empty result or raw file, so it was cut short (a full "
            "disk?) or created by something else; there is nothing to load"
        )
    if data.isspace():
        return f"holds only whitespace ({len(data)} bytes): it is not an nsightx result; there is nothing to load"
    for bom, name in _BOMS:
        if data.startswith(bom):
            return (
                f"starts with a {name} byte-order mark (BOM) at byte 0 ({bom.hex(' ')}): nsightx writes UTF-8 "
                "without a BOM, so another program re-encoded the file (or it is not text at all); save it again "
                "as UTF-8 without a BOM" + (f" (remove the first {len(bom)} bytes)" if name == "UTF-8" else "")
            )
    return None


def utf8_problem(data: bytes) -> str | None:
    """Where ``data`` is not valid UTF-8 (line, byte within that line and byte of the file), or ``None``.

    Returns:
        The end of a sentence that starts with the file's name: ``holds invalid UTF-8 at line 3 byte 17 ...``.
    """
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as e:
        return invalid_utf8(data, e)
    return None


def invalid_utf8(data: bytes, e: UnicodeDecodeError) -> str:
    """The message of :func:`utf8_problem` for a decoding error ``e`` of ``data``."""
    line = data.count(b"\n", 0, e.start) + 1
    column = e.start - (data.rfind(b"\n", 0, e.start) + 1) + 1
    bad = data[e.start : max(e.end, e.start + 1)].hex(" ")
    return (
        f"holds invalid UTF-8 at line {line} byte {column} (byte {e.start} of the file, {bad}: {e.reason}): "
        "nsightx writes only UTF-8, so the file was damaged (a changed byte, a disk or transfer error) or "
        "re-encoded; restore it from a copy"
    )
