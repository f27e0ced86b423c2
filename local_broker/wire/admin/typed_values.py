"""`KeyValueOfstringanyType` lists: SQL filter/action parameters and correlation filter properties.

Each value carries its XML Schema type (`i:type="d6p1:int"`), so a filter compares `5` and `'5'` as the
different values they are. Reading resolves the type attribute by namespace URI (requests say `xsi:`,
responses `i:`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime, timedelta
from typing import Any
from xml.etree import ElementTree

from local_broker.engine.errors import ArgumentError
from local_broker.wire.admin.atom import XSD_NS, XSI_NS, element, sb, text
from local_broker.wire.admin.durations import format_duration, parse_duration, parse_timestamp

INT32_MAX, INT32_MIN = 2**31 - 1, -(2**31)


def _boolean(raw: str) -> bool:
    lowered = raw.strip().lower()
    if lowered not in ("true", "false", "1", "0"):
        raise ValueError(f"'{raw}' is not a boolean.")
    return lowered in ("true", "1")


_READERS: dict[str, Callable[[str], Any]] = {
    "string": str,
    "boolean": _boolean,
    "double": float, "float": float, "decimal": float,
    "dateTime": parse_timestamp,
    "duration": parse_duration,
    **dict.fromkeys(("int", "long", "short", "byte", "unsignedInt", "unsignedLong", "unsignedShort",
                     "unsignedByte"), int),
}


def read_key_values(parent: ElementTree.Element | None, owner: str) -> dict[str, Any] | None:
    """The typed dict under `parent` (None when there is no list); `owner` names it in errors."""
    if parent is None:
        return None
    values: dict[str, Any] = {}
    for pair in parent.findall(sb("KeyValueOfstringanyType")):
        key, value = pair.find(sb("Key")), pair.find(sb("Value"))
        if key is None or not key.text or value is None:
            raise ArgumentError(f"Every entry of {owner} needs a <Key> and a <Value>.", property_name=owner)
        values[key.text] = _read_value(key.text, value, owner)
    return values


def _read_value(key: str, value: ElementTree.Element, owner: str) -> Any:
    if value.get(f"{{{XSI_NS}}}nil") == "true":
        return None
    declared = value.get(f"{{{XSI_NS}}}type", "string")
    type_name = declared.rpartition(":")[2]
    reader = _READERS.get(type_name)
    if reader is None:
        raise ArgumentError(f"The value of '{key}' in {owner} has the unsupported type '{declared}'.",
                            property_name=owner)
    try:
        return reader(value.text or "")
    except ValueError as exc:
        raise ArgumentError(f"The value of '{key}' in {owner} is not a valid {type_name}: {exc}",
                            property_name=owner) from exc


def _type_and_text(value: Any) -> tuple[str, str]:
    if isinstance(value, bool):  # before int: bool is an int
        return "boolean", "true" if value else "false"
    # int() and float(): a value a client typed over AMQP (proton's int32, long, float32...) prints its type
    if isinstance(value, int):
        return ("int" if INT32_MIN <= value <= INT32_MAX else "long"), str(int(value))
    if isinstance(value, float):
        return "double", repr(float(value))
    if isinstance(value, datetime):
        return "dateTime", value.isoformat()
    if isinstance(value, timedelta):
        return "duration", format_duration(value)
    return "string", str(value)


def render_key_values(tag: str, values: Mapping[str, Any] | None) -> str:
    """`<tag>` with one `KeyValueOfstringanyType` per entry; empty string when there are none."""
    if not values:
        return ""
    pairs = []
    for key, value in values.items():
        if value is None:
            rendered = '<Value i:nil="true"/>'
        else:
            type_name, raw = _type_and_text(value)
            rendered = f'<Value xmlns:d6p1="{XSD_NS}" i:type="d6p1:{type_name}">{text(raw)}</Value>'
        pairs.append(f"<KeyValueOfstringanyType>{element('Key', key)}{rendered}</KeyValueOfstringanyType>")
    return f"<{tag}>{''.join(pairs)}</{tag}>"
