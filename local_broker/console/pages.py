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
           csrf: str = "", badges: str = "") -> str:
    """`badges`: HTML set after the title (an entity's kind and status)."""
    user = ""
    if policy:
        user = (f'<form method="post" action="{url("logout")}" class="user">{_csrf(csrf)}'
                f'<span>signed in as <b>{escape(policy)}</b></span> '
                '<button class="btn small">sign out</button></form>')
    banner = f'<p class="note" id="note">{escape(note)}</p>' if note else ""
    return (f'<!doctype html><html lang="en"><head><meta charset="utf-8">'
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            f'<title>{escape(title)} · {escape(namespace)}</title>'
            f'<link rel="icon" type="image/svg+xml" href="{url("static", "favicon.svg")}">'
            f'<link rel="stylesheet" href="{url("static", "console.css")}">'
            f'<script src="{url("static", "console.js")}" defer></script></head><body>'
            f'<header><a href="{url()}" class="brand"><img src="{url("static", "favicon.svg")}" width="20" '
            f'height="20" alt=""> sbfed console</a> <span class="ns">'
            f'{escape(namespace)}</span>{user}</header><main>{banner}<h1>{escape(title)}{badges}</h1>{content}'
            f'</main>{CONFIRM_DIALOG}</body></html>')


# Destructive actions ask first: console.js opens this dialog for a button with data-confirm; without the
# script the server answers such a form with a confirmation page (confirmation_page) instead.
CONFIRM_DIALOG = ('<dialog id="confirm"><p id="confirm-text"></p><div class="row">'
                  '<button type="button" class="btn" id="confirm-cancel">Cancel</button>'
                  '<button type="button" class="btn danger" id="confirm-ok">Confirm</button></div></dialog>')


def _csrf(token: str) -> str:
    return f'<input type="hidden" name="csrf" value="{escape(token)}">'


def _button(label: str, name: str, value: str, *, id: str | None = None, style: str = "",
            confirm: str | None = None) -> str:
    """A form button; `confirm`: the question a destructive action asks first (see CONFIRM_DIALOG)."""
    attributes = f' id="{id}"' if id else ""
    if confirm:
        attributes += f' data-confirm="{escape(confirm)}"'
    return (f'<button class="btn {style}" name="{name}" value="{escape(value)}"{attributes}>'
            f'{escape(label)}</button>')


def question(switch: str, target: str, form: dict[str, str]) -> str | None:
    """What a destructive action asks before it is carried out (None for the others): `switch` is the
    action's route (faults, actions, partitions or status) and `target` the (sub-)queue or entity it acts on.
    The page's buttons carry the same question for console.js's dialog."""
    if switch == "faults" and form.get("namespace_down") in ("drop", "refuse"):
        how = ("every connection is dropped" if form["namespace_down"] == "drop"
               else "new connections are refused")
        return f"Take the namespace down? Until it is brought up, {how} and clients fail."
    if switch == "actions" and form.get("action") == "purge":
        return f"Purge {target}? Every available message is deleted; this cannot be undone."
    if switch == "actions" and form.get("action") == "resubmit" and "sequence_number" not in form:
        return f"Resubmit every message of {target}? Each is sent again and removed from here."
    if switch == "partitions" and form.get("partition", "").endswith(":down"):
        return f"Take partition {form['partition'].split(':')[0]} of {target} down?"
    if switch == "geo" and form.get("mode") == "forced":
        return (f"Force the promotion of {target}? It becomes the primary at once; what it has not received "
                "yet is lost. Every client connection is dropped (clients reconnect).")
    if switch == "geo":
        return (f"Promote {target}? What it has not received is replicated first, then it becomes the "
                "primary; every client connection is dropped (clients reconnect).")
    if switch == "status" and form.get("status", "Active") != "Active":
        return f"Set the status of {target} to {form['status']}? Clients are refused what it disables."
    return None


def confirmation_page(question: str, action: str, form: dict[str, str], back: str) -> str:
    """The question of a destructive action posted without its confirmation (the page's script would have
    asked in a dialog): the same form again, confirmed, or back."""
    fields = "".join(f'<input type="hidden" name="{escape(k)}" value="{escape(v)}">' for k, v in form.items()
                     if k != "confirmed")
    return (f'<section class="panel" id="confirmation"><p>{escape(question)}</p>'
            f'<form method="post" action="{escape(action)}" class="inline">{fields}'
            '<input type="hidden" name="confirmed" value="1">'
            '<button class="btn danger" id="confirmed">Confirm</button></form> '
            f'<a class="btn" href="{escape(back)}">Cancel</a></section>')


def login(namespace: str, note: str | None = None) -> str:
    form = (f'<section class="panel"><form method="post" action="{url("login")}" class="fields login">'
            '<label for="policy">Policy name</label><input id="policy" name="policy" '
            'value="RootManageSharedAccessKey" required>'
            '<label for="key">Key or connection string</label><input id="key" name="key" type="password" '
            'required autocomplete="off"><div class="actions"><button class="btn primary" id="sign-in">'
            'Sign in</button></div></form>'
            '<p class="details">Use a shared access policy of this namespace: its name and key, or a whole '
            'connection string (its <code>SharedAccessKeyName</code> and <code>SharedAccessKey</code> are '
            'used). What you can do follows the policy\'s rights: Listen peeks, Send sends, Manage purges '
            'and injects faults.</p></section>')
    return layout(namespace, "Sign in", form, f"{note}" if note else None)


def namespace_page(namespace: str, health: list[str], faults: dict[str, Any], connection: dict[str, str],
                   certificate: str, rows: list[EntityRow], at: float, can_manage: bool, csrf: str) -> str:
    status = ('<section class="panel"><h2>Status</h2>'
              f'<div id="status" data-refresh="{url("fragments", "status")}">'
              f'{status_panel(health, faults)}</div></section>')
    switches = (_fault_switches(faults, csrf) if can_manage else
                '<section class="panel"><h2>Fault injection</h2><p class="rights" id="rights-note">'
                'Fault switches need the Manage right.</p></section>')
    strings = "".join(f'<dt>{escape(name)}</dt><dd class="copy-field"><input readonly class="copy" '
                      f'value="{escape(value)}" aria-label="{escape(name)}"><button type="button" '
                      'class="btn copy-button">copy</button></dd>' for name, value in connection.items())
    verify = ('<p id="certificate" class="details">The management API answers over HTTPS with the broker\'s '
              f'own certificate: give the client <code>connection_verify="{escape(certificate)}"</code>.</p>'
              if certificate else "")
    return (f'<div class="grid">{status}{switches}</div>'
            f'<section class="panel"><h2>Connection strings</h2><dl class="strings">{strings}</dl>{verify}'
            '</section><section class="panel"><h2>Entities</h2><div class="table-wrap">'
            '<table class="entities sortable"><thead><tr><th data-sort="text">entity</th>'
            '<th data-sort="text">status</th><th data-sort="number">active</th>'
            '<th data-sort="number">dead-letter</th><th data-sort="number">transfer DLQ</th>'
            '<th data-sort="number">scheduled</th><th data-sort="number">deferred</th>'
            '<th data-sort="number">size</th><th>messages/s, last 60 s ' + LEGEND + '</th>'
            f'</tr></thead><tbody id="entity-rows" data-refresh="{url("fragments", "entities")}">'
            f'{entity_rows(rows, at)}</tbody></table></div></section>')


LEGEND = ('<span class="legend"><span><i style="background:#2563eb"></i>in</span>'
          '<span><i style="background:#16a34a"></i>out</span>'
          '<span><i style="background:#dc2626"></i>DLQ</span></span>')


def status_panel(health: list[str], faults: dict[str, Any]) -> str:
    """The namespace's status, latency, problems and partitions down (refreshed every second: a drill may
    take the namespace down through the control API while a person watches)."""
    state = _state_of(faults, health)
    problems = "".join(f"<li>{escape(p)}</li>" for p in health)
    return (f'<p>Namespace <b id="ns-status" class="badge status-{escape(state.split()[0])}">'
            f'{escape(state)}</b>'
            f' · latency {int(faults.get("latency_ms") or 0)} ms</p>'
            + (f"<ul class='problems'>{problems}</ul>" if problems else "") + _partitions_down(faults))


def describe_faults(faults: dict[str, Any]) -> str:
    """The fault state in words (the note after a switch), as the status panel shows it."""
    down = faults.get("namespace_down")
    state = {"drop": "down (connections dropped)", "refuse": "down (new connections refused)"}.get(
        down or "", "up")
    parts = [f"Namespace {state}", f"latency {int(faults.get('latency_ms') or 0)} ms"]
    partitions = faults.get("partitions_down") or []
    if partitions:
        parts.append(f"{len(partitions)} partition(s) down")
    return ", ".join(parts) + "."


def namespaces(current: str, hosted: dict[str, tuple[str, dict[str, Any]]]) -> str:
    """Every namespace of the broker with its status and faults, linked to its console (each on its own
    port, signed in with its own keys); nothing when the broker hosts just this one."""
    if len(hosted) < 2:
        return ""
    return ('<section class="panel"><h2>Namespaces of this broker</h2><div class="table-wrap">'
            '<table id="namespaces"><thead><tr><th>namespace</th><th>status</th><th>latency</th>'
            f'<th>partitions down</th></tr></thead><tbody data-refresh="{url("fragments", "namespaces")}">'
            f'{namespace_rows(current, hosted)}</tbody></table></div></section>')


def namespace_rows(current: str, hosted: dict[str, tuple[str, dict[str, Any]]]) -> str:
    rows = []
    for name, (address, faults) in sorted(hosted.items()):
        link = (f'<b>{escape(name)}</b> <small>(this one)</small>' if name == current
                else f'<a href="{escape(address)}{PREFIX}/">{escape(name)}</a>')
        state = _state_of(faults)
        down = len(faults.get("partitions_down") or [])
        rows.append(f'<tr data-namespace="{escape(name)}"><td>{link}</td>'
                    f'<td><span class="badge status-{state.split()[0]}">{escape(state)}</span></td>'
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
    buttons = (_button("Take down (drop connections)", "namespace_down", "drop", id="fault-drop",
                       style="danger", confirm=question("faults", "", {"namespace_down": "drop"}))
               + _button("Refuse new connections", "namespace_down", "refuse", id="fault-refuse",
                         style="danger", confirm=question("faults", "", {"namespace_down": "refuse"}))
               + _button("Bring up", "namespace_down", "up", id="fault-up", style="primary"))
    return (f'<section class="panel"><h2>Fault injection</h2><form method="post" action="{action}" '
            f'class="row">{_csrf(csrf)}{buttons}</form><form method="post" action="{action}" class="row" '
            f'style="margin-top:10px">{_csrf(csrf)}<label for="latency">Latency (ms)</label>'
            f'<input id="latency" name="latency_ms" type="number" min="0" style="width:100px" '
            f'value="{int(faults.get("latency_ms") or 0)}"><button class="btn" id="set-latency">Set latency'
            '</button></form></section>')


def geo_panel(status: dict[str, Any], can_manage: bool, csrf: str) -> str:
    """A geo-replicated namespace's replicas (docs/geo-replication.md) and, with the Manage right, a planned
    and a forced promotion for each secondary."""
    rows = []
    for replica in status["replicas"]:
        region = replica["region"]
        actions = ""
        if can_manage and replica["role"] == "Secondary":
            actions = (f'<form method="post" action="{url("geo", "promote")}" class="inline">{_csrf(csrf)}'
                       f'<input type="hidden" name="region" value="{escape(region)}">'
                       + _button("Promote", "mode", "planned", id=f"promote-{region}",
                                 confirm=question("geo", region, {"mode": "planned"}))
                       + _button("Force", "mode", "forced", id=f"force-{region}", style="danger",
                                 confirm=question("geo", region, {"mode": "forced"})) + "</form>")
        rows.append(f'<tr data-region="{escape(region)}"><td>{escape(region)}</td>'
                    f'<td>{escape(replica["role"])}</td><td>{escape(replica["state"])}</td>'
                    f'<td class="n">{float(replica["lag_seconds"]):.1f} s</td>'
                    f'<td class="n">{int(replica["pending_operations"])}</td><td>{actions}</td></tr>')
    most = status["max_replication_lag_seconds"]
    lag = "" if status["mode"] == "synchronous" else f", maximum lag {most:g} s"
    return (f'<section class="panel" id="geo"><h2>Geo-Replication</h2><p>{escape(status["mode"])}'
            f'{escape(lag)}; clients reach the primary through this namespace\'s connection strings.</p>'
            '<div class="table-wrap"><table id="replicas"><thead><tr><th>region</th><th>role</th>'
            '<th>state</th><th>lag</th><th>pending</th><th></th></tr></thead>'
            f'<tbody>{"".join(rows)}</tbody></table></div></section>')


def describe_promotion(answer: dict[str, Any]) -> str:
    lost = answer.get("lost_operations", 0)
    return (f"{answer['primary']} is the primary ({answer['promotion']} promotion"
            + (f", {lost} operation(s) lost)." if lost else ", nothing lost)."))


def entity_rows(rows: list[EntityRow], at: float) -> str:
    """The table's rows; each sparkline carries the entity's message totals and when they were read, from
    which console.js plots messages per second between two refreshes. A topic holds no messages of its
    own: its counts are its subscriptions' sums, shown muted and labelled so."""
    out = []
    for r in rows:
        indent = ' class="sub"' if r.kind == "subscription" else ""
        name = f'<a href="{url("entity", r.path)}">{escape(r.path)}</a>'
        cells = [(r.active, False), (r.dead_letter, True), (r.transfer_dead_letter, True),
                 (r.scheduled, False), (r.deferred, False)]
        if r.receivable:
            counts = "".join(f"<td class='n{' hot' if hot and c else ''}'>{c}</td>" for c, hot in cells)
        else:
            counts = "".join(f'<td class="n sum" title="the sum of its subscriptions">{c}</td>'
                             for c, _ in cells)
        status = "ok" if r.status == "Active" else "warn"
        out.append(f'<tr data-entity="{escape(r.path)}"{indent}><td>{name}{_arrows(r)}'
                   f'<div class="details">{escape(_details(r))}</div></td>'
                   f'<td><span class="badge {status}">{escape(r.status)}</span></td>{counts}'
                   f'<td class="n" data-value="{r.size}">{_bytes(r.size)}</td>'
                   f'<td class="throughput">{_sparkline(r, at)}</td></tr>')
    return "".join(out) or '<tr><td colspan="9">No queues or topics yet.</td></tr>'


def _bytes(size: int) -> str:
    for unit, scale in (("MB", 1 << 20), ("KB", 1 << 10)):
        if size >= scale:
            return f"{size / scale:.1f} {unit}"
    return f"{size} B"


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
    if row.kind == "topic":
        details.append("counts: sums of its subscriptions")
    return "; ".join(details + row.rules)


def entity_counts(row: EntityRow, at: float) -> str:
    """The entity page's counts and chart (refreshed every second like the namespace's table)."""
    tiles = (("active", row.active, False), ("dead-letter", row.dead_letter, True),
             ("transfer DLQ", row.transfer_dead_letter, True), ("scheduled", row.scheduled, False),
             ("deferred", row.deferred, False))
    shown = "".join(f'<div class="tile{" hot" if hot and n else ""}"><b>{n}</b><span>{label}</span></div>'
                    for label, n, hot in tiles)
    summed = ' <small>(sums of its subscriptions)</small>' if not row.receivable else ""
    return (f'<div class="tiles">{shown}<div class="tile"><b>{_bytes(row.size)}</b><span>size</span></div>'
            f'</div><span id="counts" class="details">active {row.active} · dead-letter {row.dead_letter} · '
            f'transfer DLQ {row.transfer_dead_letter} · scheduled {row.scheduled} · '
            f'deferred {row.deferred} · {row.size} bytes{summed}</span><div class="throughput">'
            f'{_sparkline(row, at, 560, 90)} {LEGEND}</div>')


def _sparkline(row: EntityRow, at: float, width: int = 160, height: int = 32) -> str:
    """A topic's plots what it enqueues only (it holds no messages to complete or dead-letter)."""
    totals = row.totals
    held = (f' data-completed="{totals.completed}" data-dead-lettered="{totals.dead_lettered}"'
            if row.receivable else "")
    return (f'<canvas class="spark" width="{width}" height="{height}" data-entity="{escape(row.path)}" '
            f'data-at="{at:.3f}" data-enqueued="{totals.enqueued}"{held}></canvas>'
            '<span class="rate" title="enqueued / completed / dead-lettered per second">&ndash;</span>')


SUB_QUEUES = {"main": (SUFFIXES[SubQueueKind.MAIN], "messages"),
              "dlq": (SUFFIXES[SubQueueKind.DEAD_LETTER], "dead-letter queue"),
              "tdlq": (SUFFIXES[SubQueueKind.TRANSFER_DEAD_LETTER], "transfer dead-letter queue")}


def entity_badges(row: EntityRow) -> str:
    status = "ok" if row.status == "Active" else "warn"
    extra = "".join(f' <span class="badge">{escape(text)}</span>' for text, shown in (
        ("sessions", row.requires_session), (f"{row.partitions} partitions", row.partitions > 1)) if shown)
    return (f' <span class="badge kind">{escape(row.kind)}</span> <span class="badge {status}" '
            f'id="entity-status-badge">{escape(row.status)}</span>{extra}')


def entity_page(row: EntityRow, at: float, sub_queue: str, messages: list[PeekedMessage],
                from_sequence: int, page_size: int, rights: frozenset[str], csrf: str,
                partitions_down: set[int], subscriptions: list[EntityRow]) -> str:
    """`subscriptions`: a topic's (linked from its page); `partitions_down`: those taken down."""
    refresh = url("fragments", "entity", row.path)
    overview = (f'<section class="panel"><p class="details" id="entity-details">{escape(row.status)}; '
                f'{escape(_details(row))}{_arrows(row)}</p><div id="entity-counts" data-refresh="{refresh}">'
                f'{entity_counts(row, at)}</div></section>')
    action = url("entity", row.path, "actions", queue=sub_queue)
    manage = ""
    if "Manage" in rights:
        manage = _status_switch(row, csrf) + (_partition_switches(row, csrf, partitions_down)
                                              if row.partitions > 1 else "")
        manage = f'<section class="panel"><h2>Switches</h2>{manage}</section>'
    if not row.receivable:  # a topic holds its messages in its subscriptions
        links = "".join(f'<li><a href="{url("entity", s.path)}">{escape(s.path)}</a>{_arrows(s)} '
                        f'<small>{s.active} active</small></li>' for s in subscriptions)
        parts = [overview, '<section class="panel"><h2>Subscriptions</h2><p class="details">A topic '
                 'keeps its messages in its subscriptions; peek them there:</p>'
                 f'<ul id="subscriptions">{links or "<li>none yet</li>"}</ul></section>']
        if "Send" in rights:
            parts.append(_send_form(row, action, csrf))
        parts.append(manage + _rights_note(row, sub_queue, rights))
        return "".join(parts)
    counts = {"main": row.active + row.deferred, "dlq": row.dead_letter, "tdlq": row.transfer_dead_letter}
    tabs = "".join(
        f'<a href="{url("entity", row.path, queue=key)}" class="tab{" on" if key == sub_queue else ""}" '
        f'id="tab-{key}">{escape(label)}<span class="count">{counts[key]}</span></a>'
        for key, (_, label) in SUB_QUEUES.items())
    toolbar, where = [], row.path + SUB_QUEUES[sub_queue][0]
    if sub_queue != "main" and "Listen" in rights and "Send" in rights:
        toolbar.append(f'<form method="post" action="{action}" class="inline">{_csrf(csrf)}'
                       + _button("Resubmit all", "action", "resubmit", id="resubmit-all",
                                 confirm=question("actions", where, {"action": "resubmit"})) + '</form>')
    if "Manage" in rights:
        toolbar.append(f'<form method="post" action="{action}" class="inline">{_csrf(csrf)}'
                       + _button("Purge", "action", "purge", id="purge", style="danger",
                                 confirm=question("actions", where, {"action": "purge"})) + '</form>')
    hint = ""
    if sub_queue != "main" and row.kind == "subscription" and "Send" in rights:
        topic = row.path.split("/")[0]  # a subscription receives only through its topic
        hint = (f'<p class="hint" id="resubmit-note">Resubmitting sends to the topic {escape(topic)}: every '
                'subscription whose rules match gets the message again.</p>')
    sendable = sub_queue == "main" and "Send" in rights and row.kind == "queue"
    send = _send_form(row, action, csrf) if sendable else ""
    listing = _messages(row, sub_queue, messages, from_sequence, page_size, action, rights, csrf)
    return (overview + send + f'<section class="panel"><nav class="tabs">{tabs}</nav>'
            f'<div class="toolbar">{"".join(toolbar)}</div>{hint}{_rights_note(row, sub_queue, rights)}'
            f'{listing}</section>' + manage)


def _status_switch(row: EntityRow, csrf: str) -> str:
    """The entity's status (a drill can disable a queue, or only its sends or receives)."""
    options = "".join(f'<option{" selected" if status.value == row.status else ""}>{status.value}</option>'
                      for status in EntityStatus)
    asking = question("status", row.path, {"status": "{status}"})  # console.js puts the chosen one in
    return (f'<form method="post" action="{url("entity", row.path, "status")}" class="row status-switch">'
            f'{_csrf(csrf)}<label for="entity-status">Status</label><select name="status" id="entity-status">'
            f'{options}</select><button class="btn" id="set-status" data-confirm-unless="Active" '
            f'data-confirm="{escape(asking or "")}">Set status</button></form>')


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
    """One button per partition showing its state; a click switches it (taking one down asks first)."""
    buttons = []
    for i in range(row.partitions):
        if i in down:
            buttons.append(f'<button name="partition" value="{i}:up" class="btn down" '
                           f'title="partition {i}: bring it up">{i} down</button>')
        else:
            asking = question("partitions", row.path, {"partition": f"{i}:down"}) or ""
            buttons.append(f'<button name="partition" value="{i}:down" class="btn up" title="partition {i}: '
                           f'take it down" data-confirm="{escape(asking)}">{i} up</button>')
    return (f'<form method="post" action="{url("entity", row.path, "partitions")}" class="partitions">'
            f'{_csrf(csrf)}<span class="details">Partitions (click one to take it down or bring it up):'
            '</span> '
            f'{"".join(buttons)}</form>')


MESSAGE_COLUMNS = (("#", "number"), ("message id", "text"), ("subject", "text"), ("body", "text"),
                   ("enqueued (UTC)", "text"), ("size", "number"), ("deliveries", "number"),
                   ("state", "text"))


def _messages(row: EntityRow, sub_queue: str, messages: list[PeekedMessage], from_sequence: int,
              page_size: int, action: str, rights: frozenset[str], csrf: str) -> str:
    """A compact table, a row per message; a click on a row opens its properties and body below it."""
    if "Listen" not in rights:
        return "<p>Peeking needs the Listen right.</p>"
    can_resubmit = sub_queue != "main" and "Send" in rights
    rows = []
    for m in messages:
        resubmit = (f'<form method="post" action="{action}" class="inline">{_csrf(csrf)}'
                    f'<input type="hidden" name="sequence_number" value="{m.sequence_number}">'
                    '<button class="btn small" name="action" value="resubmit">Resubmit</button></form>'
                    if can_resubmit else "")
        state = _dead_letter_reason(m) or escape(str(m.system.get("State", "")))
        enqueued = str(m.system.get("EnqueuedTimeUtc", ""))[:23].replace("T", " ")
        cells = (f'<td class="n">{m.sequence_number}</td>'
                 f'<td class="mono">{escape(str(m.system.get("MessageId", "")))}</td>'
                 f'<td>{escape(str(m.system.get("Subject", "")))}</td>'
                 f'<td class="mono">{escape(_preview(m))}</td>'
                 f'<td>{escape(enqueued)}</td>'
                 f'<td class="n">{int(m.system.get("Size", 0))}</td>'
                 f'<td class="n">{int(m.system.get("DeliveryCount", 0))}</td><td>{state}</td>')
        system = "".join(f"<tr><th>{escape(k)}</th><td>{escape(str(v))}</td></tr>"
                         for k, v in m.system.items())
        app = "".join(f"<tr><th>{escape(str(k))}</th><td>{escape(repr(v))}</td></tr>"
                      for k, v in m.application.items()) or '<tr><td class="details">none</td></tr>'
        rows.append(f'<tbody class="message-group"><tr class="message" data-sequence="{m.sequence_number}" '
                    f'tabindex="0" aria-expanded="false">{cells}<td>{resubmit}</td></tr>'
                    f'<tr class="message-detail" hidden><td colspan="{len(MESSAGE_COLUMNS) + 1}">'
                    '<div class="props">'
                    f'<table class="system"><caption>system properties</caption>{system}</table>'
                    f'<table class="application"><caption>application properties</caption>{app}</table></div>'
                    f'{_body(m)}</td></tr></tbody>')
    # A partitioned entity's peek gives one partition's messages at a time: the next page may be the next's.
    pager = ""
    if messages and (len(messages) == page_size or row.partitions > 1):
        label = f"next {page_size}" if len(messages) == page_size else "next partition"
        following = url("entity", row.path, queue=sub_queue, start=messages[-1].sequence_number + 1)
        pager = f'<a id="next-page" href="{following}" class="btn">{label} →</a>'
    first = (f'<a class="btn" href="{url("entity", row.path, queue=sub_queue)}">← first</a>'
             if from_sequence > 0 else "")
    head = "".join(f'<th data-sort="{kind}">{label}</th>' for label, kind in MESSAGE_COLUMNS)
    table = (f'<div class="table-wrap"><table class="messages sortable"><thead><tr>{head}<th></th></tr>'
             f'</thead>{"".join(rows)}</table></div>' if rows else '<p class="details">No messages.</p>')
    return (f'<h2>Peek <small>from #{from_sequence}, {page_size} a page; click a row for its properties and '
            f'body</small></h2>{table}<p class="pager">{first}{pager}</p>')


def _preview(m: PeekedMessage, length: int = 60) -> str:
    """The body's first characters as text (hex past the first byte that is not UTF-8)."""
    if m.body is None:
        text = m.body_value or ""
    else:
        try:
            text = m.body[:length * 4].decode("utf-8")
        except UnicodeDecodeError:
            text = m.body[:length // 3].hex(" ")
    return text if len(text) <= length else text[:length - 1] + "…"


def _dead_letter_reason(m: PeekedMessage) -> str:
    reason = m.application.get(DEAD_LETTER_REASON)
    if reason is None:
        return ""
    description = m.application.get(DEAD_LETTER_ERROR_DESCRIPTION)
    return (f'<span class="reason">dead-lettered: <b>{escape(str(reason))}</b>'
            + (f" — {escape(str(description))}" if description is not None else "") + "</span>")


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
    return (f'<details class="panel" id="send-panel"><summary>Send a test message</summary>'
            f'<form method="post" action="{action}" class="fields send">{_csrf(csrf)}'
            '<label for="send-body">Body</label><textarea id="send-body" name="body" rows="3"></textarea>'
            '<label for="send-id">Message id</label><input id="send-id" name="message_id">'
            '<label for="send-props">Application properties (JSON object)</label>'
            '<input id="send-props" name="properties" placeholder=\'{"k": "v"}\'>'
            '<label for="send-session">Session id</label>'
            f'<input id="send-session" name="session_id"{required}>'
            '<label for="send-key">Partition key</label><input id="send-key" name="partition_key">'
            '<label for="send-delay">Schedule in seconds</label>'
            '<input id="send-delay" name="schedule_seconds" type="number" min="0">'
            '<div class="actions"><button class="btn primary" name="action" value="send" id="send">Send'
            '</button></div></form></details>')
