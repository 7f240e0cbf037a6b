"""Where bytes stop being UTF-8, for error messages that name the byte.

msgspec's JSON decoder refuses a string that is not UTF-8, but how it says so changed: up to
0.22 it raised ``UnicodeDecodeError`` (whose ``start`` counted from the string's first byte), from
0.23 a ``DecodeError`` "Invalid UTF-8 encoded string" with no offset at all. So the callers do not
read the offset from the exception: after any decoding error they ask :func:`first_invalid_utf8`
of the bytes they hold, which is the same on every release.
"""

from __future__ import annotations

import codecs

_STEP = 1 << 20


def first_invalid_utf8(data: bytes | memoryview) -> int | None:
    """The offset of the first byte that is not UTF-8, if any. Decodes in slices of 1 MiB, so
    a dump of hundreds of megabytes is never copied whole as text; the incremental decoder
    carries a character cut at a slice's end over to the next."""
    view = memoryview(data).cast("B")
    decoder = codecs.getincrementaldecoder("utf-8")()
    for start in range(0, len(view), _STEP):
        pending = len(decoder.getstate()[0])  # bytes of a character begun in the slice before
        try:
            decoder.decode(view[start : start + _STEP])
        except UnicodeDecodeError as err:
            return start - pending + err.start
    try:
        decoder.decode(b"", final=True)
    except UnicodeDecodeError as err:  # a character cut at the very end
        return len(view) - len(err.object) + err.start
    return None
