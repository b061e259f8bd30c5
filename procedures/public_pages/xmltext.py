"""Text made safe for XML 1.0 whatever it holds: characters XML forbids are dropped (they cannot be written at
all, not even as references), and CDATA sections are split around every `]]>` so that none ends early."""

from __future__ import annotations

import re
from xml.sax.saxutils import escape

# Everything outside XML 1.0's Char production: C0 controls but tab, LF and CR; lone surrogates; U+FFFE/U+FFFF.
_FORBIDDEN = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def clean(text: str) -> str:
    return _FORBIDDEN.sub("", text)


def cdata(text: str | None) -> str:
    """`text` as one or more adjacent CDATA sections that a parser reads back as `text` (cleaned)."""
    return "<![CDATA[" + clean(text or "").replace("]]>", "]]]]><![CDATA[>") + "]]>"


def text(value: str) -> str:
    """`value` escaped for an element's content (URLs, dates)."""
    return escape(clean(value))
