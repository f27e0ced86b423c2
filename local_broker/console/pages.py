"""The console's HTML, rendered on the server (every value escaped). console.js refreshes the parts marked
`data-refresh` and nothing else; every action is a plain form POST answered by a redirect."""

from __future__ import annotations

import json
from html import escape
from typing import Any
from urllib.parse import quote

from local_broker.console.operations import EntityRow, PeekedMessage
from local_broker.engine import EntityStatus
from local_broker.engine.entities import SUFFIXES, SubQueueKind
from local_broker.engine.message import DEAD_LETTER_ERROR_DESCRIPTION, DEAD_LETTER_REASON

PREFIX = "/$console"


def url(*parts: str, **query: Any) -> str:
    path = PREFIX + "/" + "/".join(quote(p, safe="/$") for p in parts)
    pairs = [f"{k}={quote(str(v))}" for k, v in query.items() if v is not None]
    return path + ("?" + "&".join(pairs) if pairs else "")


def layout(namespace: str, title: str, content: str, note: str | None = None, policy: str | None = None,
           csrf: str = "") -> str:
    user = ""
    if policy:
        user = (f'<form method="post" action="{url("logout")}" class="user">{_csrf(csrf)}'
                f'signed in as <b>{escape(policy)}</b> <button>sign out</button></form>')
    banner = f'<p class="note" id="note">{escape(note)}</p>' if note else ""
    return (f'<!doctype html><html><head><meta charset="utf-8"><title>{escape(title)} · {escape(namespace)}'
            f'</title><link rel="stylesheet" href="{url("static", "console.css")}">'
            f'<script src="{url("static", "console.js")}" defer></script></head><body>'
            f'<header><a href="{url()}" class="brand">sbfed console</a> <span class="ns">{escape(namespace)}'
            f'</span>{user}</header><main>{banner}<h1>{escape(title)}</h1>{content}</main></body></html>')


def _csrf(token: str) -> str:
    return f'<input type="hidden" name="csrf" value="{escape(token)}">'


def login(namespace: str, note: str | None = None) -> str:
    form = (f'<form method="post" action="{url("login")}" class="login">'
            '<label>Policy name <input name="policy" value="RootManageSharedAccessKey" required></label>'
            '<label>Key or connection string <input name="key" type="password" required autocomplete="off">'
            '</label><button id="sign-in">Sign in</button></form>'
            '<p>Use a shared access policy of this namespace: its name and key, or a whole connection string '
            '(its <code>SharedAccessKeyName</code> and <code>SharedAccessKey</code> are used). What you can '
            'do follows the policy\'s rights: Listen peeks, Send sends, Manage purges and injects faults.'
            '</p>')
    return layout(namespace, "Sign in", form, note)


def namespace_page(namespace: str, health: list[str], faults: dict[str, Any], connection: dict[str, str],
                   certificate: str, rows: list[EntityRow], at: float, can_manage: bool, csrf: str) -> str:
    parts = [f'<section><h2>Status</h2><div id="status" data-refresh="{url("fragments", "status")}">'
             f'{status_panel(health, faults)}</div></section>']
    if can_manage:
        parts.append(_fault_switches(faults, csrf))
    else:
        parts.append('<p class="rights" id="rights-note">Fault switches need the Manage right.</p>')
    strings = "".join(f'<dt>{escape(name)}</dt><dd><input readonly class="copy" value="{escape(value)}"> '
                      '<button type="button" class="copy-button">copy</button></dd>'
                      for name, value in connection.items())
    verify = ('<p id="certificate">The management API answers over HTTPS with the broker\'s own '
              f'certificate: give the client <code>connection_verify="{escape(certificate)}"</code>.</p>'
              if certificate else "")
    parts.append(f"<section><h2>Connection strings</h2><dl>{strings}</dl>{verify}</section>")
    parts.append('<section><h2>Entities</h2><table class="entities"><thead><tr><th>entity</th><th>status</th>'
                 '<th>active</th><th>dead-letter</th><th>transfer DLQ</th><th>scheduled</th><th>deferred</th>'
                 '<th>size</th><th>messages/s, last 60 s</th><th>details</th></tr></thead>'
                 f'<tbody id="entity-rows" data-refresh="{url("fragments", "entities")}">'
                 f'{entity_rows(rows, at)}'
                 '</tbody></table></section>')
    return "".join(parts)


def status_panel(health: list[str], faults: dict[str, Any]) -> str:
    """The namespace's status, latency, problems and partitions down (refreshed every second: a drill may
    take the namespace down through the control API while a person watches)."""
    state = _state_of(faults, health)
    problems = "".join(f"<li>{escape(p)}</li>" for p in health)
    return (f'<p>Namespace <b id="ns-status" class="status-{escape(state.split()[0])}">{escape(state)}</b>, '
            f'latency {int(faults.get("latency_ms") or 0)} ms.</p>'
            + (f"<ul class='problems'>{problems}</ul>" if problems else "") + _partitions_down(faults))


def namespaces(current: str, hosted: dict[str, tuple[str, dict[str, Any]]]) -> str:
    """Every namespace of the broker with its status and faults, linked to its console (each on its own
    port, signed in with its own keys); nothing when the broker hosts just this one."""
    if len(hosted) < 2:
        return ""
    return ('<section><h2>Namespaces of this broker</h2><table id="namespaces"><thead><tr><th>namespace</th>'
            '<th>status</th><th>latency</th><th>partitions down</th></tr></thead>'
            f'<tbody data-refresh="{url("fragments", "namespaces")}">{namespace_rows(current, hosted)}'
            '</tbody></table></section>')


def namespace_rows(current: str, hosted: dict[str, tuple[str, dict[str, Any]]]) -> str:
    rows = []
    for name, (address, faults) in sorted(hosted.items()):
        link = (f'<b>{escape(name)}</b> (this one)' if name == current
                else f'<a href="{escape(address)}{PREFIX}/">{escape(name)}</a>')
        state = _state_of(faults)
        down = len(faults.get("partitions_down") or [])
        rows.append(f'<tr data-namespace="{escape(name)}"><td>{link}</td>'
                    f'<td class="status-{state.split()[0]}">{escape(state)}</td>'
                    f'<td class="n">{int(faults.get("latency_ms") or 0)} ms</td>'
                    f'<td class="n">{down}</td></tr>')
    return "".join(rows)


def _state_of(faults: dict[str, Any], health: list[str] | None = None) -> str:
    down = faults.get("namespace_down")
    return "down (" + down + ")" if down else ("degraded" if health else "up")


def _partitions_down(faults: dict[str, Any]) -> str:
    down = faults.get("partitions_down") or []
    if not down:
        return ""
    items = "".join(f"<li>{escape(p['entity'])} partition {int(p['partition_id'])}</li>" for p in down)
    return f"<p>Partitions down:</p><ul>{items}</ul>"


def _fault_switches(faults: dict[str, Any], csrf: str) -> str:
    action = url("faults")
    buttons = "".join(
        f'<button name="namespace_down" value="{mode}" id="fault-{mode}">{label}</button>'
        for mode, label in (("drop", "Take down (drop connections)"), ("refuse", "Refuse new connections"),
                            ("up", "Bring up")))
    return (f'<section><h2>Fault injection</h2><form method="post" action="{action}">{_csrf(csrf)}{buttons}'
            f'</form><form method="post" action="{action}">{_csrf(csrf)}<label>Latency (ms) '
            f'<input name="latency_ms" type="number" min="0" value="{int(faults.get("latency_ms") or 0)}">'
            '</label><button id="set-latency">Set latency</button></form></section>')


def entity_rows(rows: list[EntityRow], at: float) -> str:
    """The table's rows; each sparkline carries the entity's message totals and when they were read, from
    which console.js plots messages per second between two refreshes."""
    out = []
    for r in rows:
        indent = ' class="sub"' if r.kind == "subscription" else ""
        name = f'<a href="{url("entity", r.path)}">{escape(r.path)}</a>'
        cells = [r.active, r.dead_letter, r.transfer_dead_letter, r.scheduled, r.deferred, r.size]
        counts = "".join(f"<td class='n'>{c}</td>" for c in cells)
        out.append(f'<tr data-entity="{escape(r.path)}"{indent}><td>{name}{_arrows(r)}</td>'
                   f'<td>{escape(r.status)}</td>{counts}<td class="throughput">{_sparkline(r, at)}</td>'
                   f'<td class="details">{escape(_details(r))}</td></tr>')
    return "".join(out) or '<tr><td colspan="10">No queues or topics yet.</td></tr>'


def _arrows(row: EntityRow) -> str:
    """Where the entity forwards its messages and its dead letters."""
    arrows = ""
    if row.forward_to:
        arrows += f' <span class="arrow">→ {escape(row.forward_to)}</span>'
    if row.forward_dead_letters_to:
        arrows += f' <span class="arrow">DLQ → {escape(row.forward_dead_letters_to)}</span>'
    return arrows


def _details(row: EntityRow) -> str:
    details = [row.kind]
    if row.partitions > 1:
        details.append(f"{row.partitions} partitions")
    if row.requires_session:
        details.append("sessions")
    return "; ".join(details + row.rules)


def entity_counts(row: EntityRow, at: float) -> str:
    """The entity page's counts and sparkline (refreshed every second like the namespace's table)."""
    return (f'<span id="counts">active {row.active} · dead-letter {row.dead_letter} · transfer DLQ '
            f'{row.transfer_dead_letter} · scheduled {row.scheduled} · deferred {row.deferred} · '
            f'{row.size} bytes</span> <span class="throughput">{_sparkline(row, at)}</span>')


def _sparkline(row: EntityRow, at: float) -> str:
    """A topic's plots what it enqueues only (it holds no messages to complete or dead-letter)."""
    enqueued, completed, dead_lettered = row.totals
    held = (f' data-completed="{completed}" data-dead-lettered="{dead_lettered}"' if row.receivable else "")
    return (f'<canvas class="spark" width="120" height="22" data-entity="{escape(row.path)}" '
            f'data-at="{at:.3f}" data-enqueued="{enqueued}"{held}></canvas> '
            '<span class="rate" title="enqueued / completed / dead-lettered per second">&ndash;</span>')


SUB_QUEUES = {"main": (SUFFIXES[SubQueueKind.MAIN], "messages"),
              "dlq": (SUFFIXES[SubQueueKind.DEAD_LETTER], "dead-letter queue"),
              "tdlq": (SUFFIXES[SubQueueKind.TRANSFER_DEAD_LETTER], "transfer dead-letter queue")}


def entity_page(row: EntityRow, at: float, sub_queue: str, messages: list[PeekedMessage],
                from_sequence: int, page_size: int, rights: frozenset[str], csrf: str,
                partitions_down: set[int], subscriptions: list[EntityRow]) -> str:
    """`subscriptions`: a topic's (linked from its page); `partitions_down`: those taken down."""
    tabs = "".join(
        f'<a href="{url("entity", row.path, queue=key)}" class="tab{" on" if key == sub_queue else ""}" '
        f'id="tab-{key}">{escape(label)}</a>' for key, (_, label) in SUB_QUEUES.items())
    refresh = url("fragments", "entity", row.path)
    counts = (f'<p class="details" id="entity-details">{escape(row.status)}; {escape(_details(row))}'
              f'{_arrows(row)}</p><p id="entity-counts" data-refresh="{refresh}">'
              f'{entity_counts(row, at)}</p>')
    if "Manage" in rights:
        counts += _status_switch(row, csrf)
    action = url("entity", row.path, "actions", queue=sub_queue)
    if not row.receivable:  # a topic holds its messages in its subscriptions
        links = "".join(f'<li><a href="{url("entity", s.path)}">{escape(s.path)}</a>{_arrows(s)}</li>'
                        for s in subscriptions)
        parts = [counts, "<p>A topic keeps its messages in its subscriptions; peek them there:</p>"
                 f'<ul id="subscriptions">{links or "<li>none yet</li>"}</ul>']
        if "Send" in rights:
            parts.append(_send_form(row, action, csrf))
        if "Manage" in rights and row.partitions > 1:
            parts.append(_partition_switches(row, csrf, partitions_down))
        parts.append(_rights_note(row, sub_queue, rights))
        return "".join(parts)
    parts = [f'<nav class="tabs">{tabs}</nav>', counts]
    if sub_queue != "main" and "Listen" in rights and "Send" in rights:
        parts.append(f'<form method="post" action="{action}" class="inline">{_csrf(csrf)}'
                     '<button name="action" value="resubmit" id="resubmit-all">Resubmit all</button></form>')
        if row.kind == "subscription":  # a subscription receives only through its topic
            topic = row.path.split("/")[0]
            parts.append(f'<p class="hint" id="resubmit-note">Resubmitting sends to the topic '
                         f'{escape(topic)}: every subscription whose rules match gets the message again.</p>')
    if "Manage" in rights:
        parts.append(f'<form method="post" action="{action}" class="inline">{_csrf(csrf)}'
                     '<button name="action" value="purge" id="purge">Purge</button></form>')
        if row.partitions > 1:
            parts.append(_partition_switches(row, csrf, partitions_down))
    parts.append(_rights_note(row, sub_queue, rights))
    parts.append(_messages(row, sub_queue, messages, from_sequence, page_size, action, rights, csrf))
    if sub_queue == "main" and "Send" in rights and row.kind == "queue":
        parts.append(_send_form(row, action, csrf))
    return "".join(parts)


def _status_switch(row: EntityRow, csrf: str) -> str:
    """The entity's status (a drill can disable a queue, or only its sends or receives)."""
    options = "".join(f'<option{" selected" if status.value == row.status else ""}>{status.value}</option>'
                      for status in EntityStatus)
    return (f'<form method="post" action="{url("entity", row.path, "status")}" class="status-switch">'
            f'{_csrf(csrf)}<label>Status <select name="status" id="entity-status">{options}</select></label> '
            '<button id="set-status">Set status</button></form>')


def _rights_note(row: EntityRow, sub_queue: str, rights: frozenset[str]) -> str:
    """What this session cannot do here, and the right it would take (the buttons are left out)."""
    missing = []
    if row.receivable and "Manage" not in rights:
        missing.append("purging needs Manage")
    if sub_queue != "main" and not {"Listen", "Send"} <= rights:
        missing.append("resubmitting needs Listen and Send")
    if sub_queue == "main" and row.kind != "subscription" and "Send" not in rights:
        missing.append("sending needs Send")
    if "Manage" not in rights:
        missing.append("status and partition switches need Manage" if row.partitions > 1
                       else "the status switch needs Manage")
    if not missing:
        return ""
    held = ", ".join(sorted(rights)) or "no rights"
    return f'<p class="rights" id="rights-note">This session\'s policy has {held}: {"; ".join(missing)}.</p>'


def _partition_switches(row: EntityRow, csrf: str, down: set[int]) -> str:
    """One button per partition showing its state; a click switches it."""
    switches = ((i, "down", "up", "bring it up") if i in down else (i, "up", "down", "take it down")
                for i in range(row.partitions))
    buttons = "".join(f'<button name="partition" value="{i}:{switch}" class="{state}" title="partition {i}: '
                      f'{hint}">{i} {state}</button>' for i, state, switch, hint in switches)
    return (f'<form method="post" action="{url("entity", row.path, "partitions")}" class="partitions">'
            f'{_csrf(csrf)}Partitions (click one to take it down or bring it up): {buttons}</form>')


def _messages(row: EntityRow, sub_queue: str, messages: list[PeekedMessage], from_sequence: int,
              page_size: int, action: str, rights: frozenset[str], csrf: str) -> str:
    if "Listen" not in rights:
        return "<p>Peeking needs the Listen right.</p>"
    items = []
    can_resubmit = sub_queue != "main" and "Send" in rights
    for m in messages:
        system = "".join(f"<tr><th>{escape(k)}</th><td>{escape(str(v))}</td></tr>"
                         for k, v in m.system.items())
        app = "".join(f"<tr><th>{escape(str(k))}</th><td>{escape(repr(v))}</td></tr>"
                      for k, v in m.application.items())
        resubmit = (f'<form method="post" action="{action}" class="inline">{_csrf(csrf)}'
                    f'<input type="hidden" name="sequence_number" value="{m.sequence_number}">'
                    '<button name="action" value="resubmit">Resubmit</button></form>' if can_resubmit else "")
        items.append(f'<article class="message" data-sequence="{m.sequence_number}"><h3>#{m.sequence_number}'
                     f' {escape(str(m.system.get("MessageId", "")))}</h3>{_dead_letter_reason(m)}{resubmit}'
                     f'<div class="props"><table class="system"><caption>system properties</caption>{system}'
                     f'</table><table class="application"><caption>application properties</caption>{app}'
                     f'</table></div>{_body(m)}</article>')
    # A partitioned entity's peek gives one partition's messages at a time: the next page may be the next's.
    pager = ""
    if messages and (len(messages) == page_size or row.partitions > 1):
        label = f"next {page_size}" if len(messages) == page_size else "next partition"
        following = url("entity", row.path, queue=sub_queue, start=messages[-1].sequence_number + 1)
        pager = f'<a id="next-page" href="{following}">{label} →</a>'
    first = (f'<a href="{url("entity", row.path, queue=sub_queue)}">← first</a> '
             if from_sequence > 0 else "")
    return (f'<section><h2>Peek (from #{from_sequence})</h2>{"".join(items) or "<p>No messages.</p>"}'
            f'<p class="pager">{first}{pager}</p></section>')


def _dead_letter_reason(m: PeekedMessage) -> str:
    reason = m.application.get(DEAD_LETTER_REASON)
    if reason is None:
        return ""
    description = m.application.get(DEAD_LETTER_ERROR_DESCRIPTION)
    return (f'<p class="reason">dead-lettered: <b>{escape(str(reason))}</b>'
            + (f" — {escape(str(description))}" if description is not None else "") + "</p>")


def _body(m: PeekedMessage) -> str:
    if m.body is None:
        return f'<pre class="body">{escape(m.body_value or "")}</pre>'
    views = [("hex", " ".join(f"{b:02x}" for b in m.body[:4096]))]
    try:
        text = m.body.decode("utf-8")
    except UnicodeDecodeError:
        text = None
    if text is not None:
        try:
            views.insert(0, ("json", json.dumps(json.loads(text), indent=2)))
        except ValueError:
            pass
        views.insert(0 if len(views) == 1 else 1, ("text", text))
    return "".join(f'<details class="body"{" open" if i == 0 else ""}><summary>body as {kind}</summary>'
                   f'<pre class="body-{kind}">{escape(value)}</pre></details>' for i, (kind, value) in
                   enumerate(views))


def _send_form(row: EntityRow, action: str, csrf: str) -> str:
    required = " required" if row.requires_session else ""  # a topic's subscriptions may want one too
    session = f'<label>Session id <input name="session_id"{required}></label>'
    return (f'<section><h2>Send a test message</h2><form method="post" action="{action}" class="send">'
            f'{_csrf(csrf)}<label>Body <textarea name="body" rows="3"></textarea></label>'
            '<label>Message id <input name="message_id"></label>'
            '<label>Application properties (JSON object) <input name="properties" placeholder=\'{"k": "v"}\'>'
            f'</label>{session}<label>Partition key <input name="partition_key"></label>'
            '<label>Schedule in seconds <input name="schedule_seconds" type="number" min="0"></label>'
            '<button name="action" value="send" id="send">Send</button></form></section>')
