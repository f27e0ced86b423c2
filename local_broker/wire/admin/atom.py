"""The Atom envelope of the management API: request entries in, entries, feeds and errors out.

Responses are written as text (not through ElementTree) so the namespace prefixes are the ones Service
Bus uses and the SDK was verified against (servicebus-wire.md 11.6): Atom as the default namespace of
`entry`/`feed`, the Service Bus namespace on descriptions, `i:` for XMLSchema-instance.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from urllib.parse import urlencode
from xml.etree import ElementTree
from xml.sax.saxutils import escape, quoteattr

from local_broker.engine.errors import ArgumentError
from local_broker.wire.admin.durations import format_timestamp

ATOM_NS = "http://www.w3.org/2005/Atom"
SB_NS = "http://schemas.microsoft.com/netservices/2010/10/servicebus/connect"
XSI_NS = "http://www.w3.org/2001/XMLSchema-instance"
XSD_NS = "http://www.w3.org/2001/XMLSchema"
COUNTS_NS = "http://schemas.microsoft.com/netservices/2011/06/servicebus"

ENTRY_CONTENT_TYPE = "application/atom+xml;type=entry;charset=utf-8"
FEED_CONTENT_TYPE = "application/atom+xml;type=feed;charset=utf-8"
ERROR_CONTENT_TYPE = "application/xml; charset=utf-8"
API_VERSION = "2021-05"  # what the entries' ids and links say; any api-version is accepted on requests

MAX_BODY_BYTES = 1 << 20


def sb(tag: str) -> str:
    """Qualified name of a Service Bus element, as ElementTree spells it."""
    return f"{{{SB_NS}}}{tag}"


def text(value: object) -> str:
    """Element text, escaped."""
    return escape(str(value))


def element(tag: str, value: object) -> str:
    return f"<{tag}>{text(value)}</{tag}>"


def parse_entry(body: bytes) -> ElementTree.Element:
    """The one description element inside `<entry><content>` of a PUT body."""
    if len(body) > MAX_BODY_BYTES:
        raise ArgumentError(f"The request body is larger than {MAX_BODY_BYTES} bytes.")
    try:
        root = ElementTree.fromstring(body)
    except ElementTree.ParseError as exc:
        raise ArgumentError(f"The request body is not well-formed XML: {exc}.") from exc
    if root.tag != f"{{{ATOM_NS}}}entry":
        raise ArgumentError("The request body must be an Atom <entry> element.")
    content = root.find(f"{{{ATOM_NS}}}content")
    descriptions = list(content) if content is not None else []
    if len(descriptions) != 1:
        raise ArgumentError("The Atom entry must hold exactly one description in its <content>.")
    return descriptions[0]


def render_entry(base_url: str, path: str, title: str, description: str,
                 published: datetime | None, updated: datetime | None, author: str,
                 api_version: str = API_VERSION) -> bytes:
    """One entity as an Atom entry (a GET or a successful PUT). Clients read names back from the `<id>`
    (the JS SDK splits it on `/Subscriptions/` and `/Rules/`), so `path` is spelled as Service Bus does."""
    href = f"{base_url}/{path}?{urlencode({'api-version': api_version})}"
    return (
        f'<entry xmlns="{ATOM_NS}"><id>{text(href)}</id><title type="text">{text(title)}</title>'
        f"<published>{format_timestamp(published)}</published><updated>{format_timestamp(updated)}</updated>"
        f"<author><name>{text(author)}</name></author><link rel=\"self\" href={quoteattr(href)}/>"
        f'<content type="application/xml">{description}</content></entry>'
    ).encode()


def render_feed(base_url: str, path: str, title: str, query: Mapping[str, str], entries: Iterable[bytes],
                updated: datetime | None, next_skip: int | None, top: int) -> bytes:
    """A list page, its `<id>` and self link the request's URL. A second `<link rel="next">` carrying
    `$skip`/`$top` (written `%24skip`, as Service Bus does) makes the SDKs fetch another page."""
    self_href = f"{base_url}/{path}?{urlencode(query, safe='$')}" if query else f"{base_url}/{path}"
    links = f'<link rel="self" href={quoteattr(self_href)}/>'
    if next_skip is not None:
        paging = {"$skip": next_skip, "$top": top, "api-version": query.get("api-version", API_VERSION)}
        links += f'<link rel="next" href={quoteattr(f"{base_url}/{path}?{urlencode(paging)}")}/>'
    head = (f'<feed xmlns="{ATOM_NS}"><title type="text">{text(title)}</title><id>{text(self_href)}</id>'
            f"<updated>{format_timestamp(updated)}</updated>{links}")
    return head.encode() + b"".join(entries) + b"</feed>"


def render_error(code: int, detail: str) -> bytes:
    return f"<Error><Code>{code}</Code><Detail>{text(detail)}</Detail></Error>".encode()
