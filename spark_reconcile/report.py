"""The HTML report: one self-contained page a person can read at a glance (verdict, charts, lists)."""

from __future__ import annotations

import math
from collections import Counter
from html import escape

from spark_reconcile.svg import Series, columns

COLORS = {"missing": "#d62728", "dup_extra": "#ff7f0e", "late": "#e7ba52", "pending": "#9e9e9e",
          "orphan": "#9467bd", "expired": "#8c6d31", "ok": "#2ca02c", "original": "#17becf"}
PROBLEMS = (("missing", "missing"), ("dup_extra", "duplicate copies"), ("late", "late"),
            ("pending", "pending"), ("orphan", "orphan"), ("expired", "expired (TTL)"),
            ("original", "originals at target"))
_CSS = """
body{font:14px/1.45 system-ui,sans-serif;margin:24px;color:#222;max-width:1100px}
h1{font-size:22px;margin:0 0 4px}h2{font-size:18px;margin:28px 0 8px;border-bottom:1px solid #ddd}
h3{font-size:15px;margin:18px 0 6px}.pass{color:#fff;background:#2ca02c}.fail{color:#fff;background:#d62728}
.no-data{color:#fff;background:#8a6d00}
.badge{padding:2px 10px;border-radius:4px;font-weight:600}.muted{color:#666}
.cards{display:flex;flex-wrap:wrap;gap:8px}
.card{border:1px solid #ddd;border-radius:6px;padding:6px 10px;min-width:84px}
.card b{display:block;font-size:18px}table{border-collapse:collapse;margin:6px 0;font-size:13px}
td,th{border:1px solid #e2e2e2;padding:3px 7px;text-align:right}th{background:#f6f6f6}
td:first-child,th:first-child{text-align:left}.chart{display:block;margin:8px 0}
.chart .t{font-weight:600;font-size:13px}.chart .l{font-size:11px;fill:#444}.chart .g{stroke:#eee}
.chart .a{stroke:#888}code{font-size:12px}
"""


def render(summary: dict) -> str:
    verdict = summary["verdict"]
    parts = [
        "<!DOCTYPE html><html lang=en><head><meta charset=utf-8>",
        f"<title>sbfed reconcile: {verdict}</title><style>{_CSS}</style></head><body>",
        f'<h1>Reconciliation <span class="badge {verdict.replace(" ", "-")}">{verdict.upper()}</span></h1>',
        f'<p class=muted>{escape(_scope(summary))}</p>',
    ]
    reasons = [*summary["failures"], *summary.get("no_data", [])]
    if reasons:
        parts.append("<ul>" + "".join(f"<li>{escape(f)}</li>" for f in reasons) + "</ul>")
    for c in summary["comparisons"]:
        parts.append(_comparison(c))
    parts.append(_lists(summary))
    parts.append(_sequence_gaps(summary["source_sequence_gaps"]))
    parts.append(_provenance(summary))
    parts.append("</body></html>")
    return "\n".join(p for p in parts if p)


def _scope(s: dict) -> str:
    w = s["window"]
    window = f"{w['start'] or 'beginning'} to {w['end'] or 'end'} (UTC)"
    st = s["settings"]
    source = f", source {s['source']}" if s["source"] else ""
    return (f"mode {s['mode']}{source}; window {window}; grace {st['grace_s']:g}s, skew {st['skew_s']:g}s, "
            f"lookahead {w['lookahead_s']:g}s; identity {st['identity']}; generated {s['generated_at']}")


def _num(value) -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "-"
    if isinstance(value, float):
        return f"{value:,.3f}".rstrip("0").rstrip(".")
    return f"{value:,}" if isinstance(value, int) else escape(str(value))


def _comparison(c: dict) -> str:
    t, lag = c["totals"], c["lag_ms"] or {}
    cards = [("expected", t["expected"]), ("ok", t["ok"]), ("late", t["late"]), ("pending", t["pending"]),
             ("missing", t["missing"]), ("expired", t["expired"]), ("orphan", t["orphan"]),
             ("originals at target", t["original"]),
             *([("originals never sent", t["original_unsent"])]
               if c["originals_checked_against_sent"] else []),
             ("duplicated keys", t["dup_keys"]), ("extra copies", t["dup_extra"]),
             ("completeness %", t["completeness_pct"]), ("lag p50 ms", lag.get("p50")),
             ("lag p99 ms", lag.get("p99")), ("lag max ms", lag.get("max"))]
    html = [f"<h2>{escape(' + '.join(c['sources']))} &rarr; {escape(c['target'])}</h2>",
            '<div class="cards">']
    html += [f'<div class="card"><b>{_num(v)}</b>{escape(k)}</div>' for k, v in cards]
    html.append("</div>")
    html.append(_lag_chart(c["lag_histogram"]))
    hours = c["hours"]
    multi_day = len({h["hour"][:10] for h in hours}) > 1
    html.append(_problem_chart("Gaps, duplicates and late messages per hour (UTC)",
                               [h["hour"][5:13].replace("T", " ") if multi_day else h["hour"][11:13] + "h"
                                for h in hours], hours))
    entities = c["entities"]
    html.append(_problem_chart("Per entity", [e["entity"][:14] for e in entities], entities))
    html.append(_entity_table(entities))
    html.append(_ordering_table(c["out_of_order"]))
    return "\n".join(html)


def _problem_chart(title: str, labels: list[str], rows: list[dict]) -> str:
    series = [Series(name, [float(r[key]) for r in rows], COLORS[key]) for key, name in PROBLEMS]
    return columns(title, labels, [s for s in series if any(s.values)] or series[:1], y_label="messages")


def _lag_chart(histogram: list[dict]) -> str:
    """Merge the fine lag buckets into quarter decades (1, 1.8, 3.2, 5.6 x 10^k ms), empty ones included."""
    negative = sum(h["messages"] for h in histogram if h["lag_ms"] < 0)
    zero = sum(h["messages"] for h in histogram if h["lag_ms"] == 0)
    bins: Counter = Counter()
    for h in histogram:
        if h["lag_ms"] > 0:
            bins[math.floor(math.log10(h["lag_ms"]) * 4)] += h["messages"]
    labels, values = [], []
    for name, count in (("<0", negative), ("0", zero)):
        if count:
            labels.append(name)
            values.append(float(count))
    if bins:
        for k in range(min(bins), max(bins) + 1):
            labels.append(_ms_label(10 ** (k / 4)))
            values.append(float(bins.get(k, 0)))
    return columns("Replication lag of delivered messages (first copy; bins start at the label)", labels,
                   [Series("messages", values, "#1f77b4")], y_label="messages")


def _ms_label(ms: float) -> str:
    unit, size = ("min", 60_000.0) if ms >= 60_000 else ("s", 1000.0) if ms >= 1000 else ("ms", 1.0)
    value = ms / size
    return f"{value:.0f}{unit}" if value >= 10 else f"{value:.2g}{unit}"


def _table(headers: list[str], rows: list[list]) -> str:
    head = "".join(f"<th>{escape(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{_num(v)}</td>" for v in r) + "</tr>" for r in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def _entity_table(entities: list[dict]) -> str:
    rows = []
    for e in entities:
        lag = e["lag_ms"] or {}
        rows.append([e["entity"], e["expected"], e["ok"], e["late"], e["pending"], e["missing"], e["expired"],
                     e["orphan"], e["original"], e["dup_keys"], e["dup_extra"], e["completeness_pct"],
                     lag.get("p50"), lag.get("p95"), lag.get("p99"), lag.get("max"), e["watermark"],
                     e["watermark_age_s"]])
    return "<h3>Entities</h3>" + _table(
        ["entity", "expected", "ok", "late", "pending", "missing", "expired", "orphan", "originals",
         "dup keys", "+copies", "complete %", "lag p50", "p95", "p99", "max ms", "watermark (UTC)", "age s"],
        rows)


def _ordering_table(ordering: list[dict]) -> str:
    if not ordering:
        return "<p class=muted>No sequence numbers: ordering not checked.</p>"
    worst = sorted(ordering, key=lambda r: -r["out_of_order"])[:20]
    return ("<h3>Out-of-order arrivals per source partition (worst 20)</h3>"
            + _table(["origin", "entity", "partition", "delivered", "out of order", "max displacement"],
                     [[r["origin"], r["entity"], r["partition"], r["delivered"], r["out_of_order"],
                       r["max_displacement"]] for r in worst]))


def _lists(summary: dict) -> str:
    html = []
    for name, rows in summary["samples"].items():
        if not rows:
            continue
        headers = list(rows[0])
        html.append(f"<h3>{escape(name.capitalize())} (first {len(rows)}; full table under "
                    f"<code>{escape(summary['outputs']['details'])}</code>)</h3>")
        cells = [[", ".join(r[h]) if isinstance(r[h], list) else r[h] for h in headers] for r in rows]
        html.append(_table(headers, cells))
    return "<h2>Lists</h2>" + "\n".join(html) if html else ""


def _sequence_gaps(gaps: list[dict]) -> str:
    holes = [g for g in gaps if g["gaps"] > 0]
    if not gaps:
        return ""
    if not holes:
        return "<p class=muted>Source capture is continuous (no SequenceNumber gaps in the source log).</p>"
    return ("<h3>SequenceNumber gaps in the source log itself (lost in capture, not in replication)</h3>"
            + _table(["entity", "partition", "messages", "first", "last", "gaps"],
                     [[g["entity"], g["partition"], g["messages"], g["first"], g["last"], g["gaps"]]
                      for g in holes]))


def _provenance(summary: dict) -> str:
    inputs = _table(["tag", "path", "records read", "malformed records"],
                    [[i["tag"], i["path"], i["records_read"], i["malformed_records"]]
                     for i in summary["inputs"]])
    engine = ", ".join(f"{k} {'-' if v is None else v}" for k, v in summary["engine"].items())
    timings = ", ".join(f"{k} {v:g}s" for k, v in summary["timings_s"].items())
    return (f"<h2>Provenance</h2>{inputs}<p class=muted>{escape(engine)}<br>{escape(timings)}<br>"
            f"lag percentiles: {escape(summary['settings']['lag_percentiles'])}</p>")
