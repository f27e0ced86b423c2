// sbfed console: refreshes every element marked data-refresh once a second (its URL answers the element's
// new inner HTML) and plots each entity's messages per second (enqueued, completed, dead-lettered) over the
// last 60 refreshes, from the totals the server puts on its sparkline. No framework, no build.
"use strict";
(function () {
  const SAMPLES = 60;
  const SERIES = [  // dataset name, colour, label
    ["enqueued", "#2563eb", "in"], ["completed", "#16a34a", "out"], ["deadLettered", "#dc2626", "DLQ"]];
  const history = new Map();  // entity path -> {at, totals, rates: one array per series}

  function sample() {
    document.querySelectorAll("canvas.spark").forEach(function (canvas) {
      const key = canvas.dataset.entity;
      const at = Number(canvas.dataset.at);
      // A topic has only "enqueued" (it holds no messages to complete or dead-letter).
      const series = SERIES.filter(function (s) { return s[0] in canvas.dataset; });
      const totals = series.map(function (s) { return Number(canvas.dataset[s[0]]); });
      let seen = history.get(key);
      if (!seen) {
        seen = {at: at, series: series, totals: totals, rates: series.map(function () { return []; })};
        history.set(key, seen);
      } else if (at > seen.at) {
        const seconds = at - seen.at;
        totals.forEach(function (total, i) {
          const rates = seen.rates[i];
          rates.push(Math.max(0, total - seen.totals[i]) / seconds);  // totals restart with the broker
          if (rates.length > SAMPLES) rates.shift();
        });
        seen.at = at;
        seen.totals = totals;
      }
      canvas.dataset.samples = String(seen.rates[0].length);
      draw(canvas, seen);
      const label = canvas.parentElement.querySelector(".rate");
      if (label) label.textContent = describe(seen);
    });
  }

  function describe(seen) {
    const rates = seen.rates;
    if (!rates[0].length) return "–";
    const parts = seen.series.map(function (s, i) {
      const last = rates[i][rates[i].length - 1];
      return s[0] === "deadLettered" && last === 0 ? "" : format(last) + " " + s[2];
    }).filter(Boolean);
    return parts.join(" · ") + "/s";
  }

  function format(rate) {
    return rate >= 10 ? String(Math.round(rate)) : rate.toFixed(1);
  }

  // The lines of each series, scaled to the highest rate shown; a chart tall enough gets a scale too.
  function draw(canvas, seen) {
    const rates = seen.rates;
    const ctx = canvas.getContext("2d");
    ctx.clearRect(0, 0, canvas.width, canvas.height);
    const top = Math.max(1, Math.max.apply(null, [].concat.apply([], rates)));
    const step = canvas.width / (SAMPLES - 1);
    const labelled = canvas.height >= 60;
    const pad = labelled ? 14 : 2;
    if (labelled) {
      ctx.strokeStyle = "#e2e8f0";
      ctx.fillStyle = "#64748b";
      ctx.font = "11px system-ui, sans-serif";
      [0, 0.5, 1].forEach(function (f) {
        const y = canvas.height - 1 - f * (canvas.height - pad);
        ctx.beginPath(); ctx.moveTo(0, y); ctx.lineTo(canvas.width, y); ctx.stroke();
      });
      ctx.fillText(format(top) + "/s", 4, 11);
      ctx.fillText("60 s ago", 4, canvas.height - 4);
    }
    ctx.lineWidth = labelled ? 2 : 1.5;
    rates.forEach(function (values, s) {
      ctx.strokeStyle = seen.series[s][1];
      ctx.beginPath();
      values.forEach(function (v, i) {
        const x = (SAMPLES - values.length + i) * step;
        const y = canvas.height - 1 - (v / top) * (canvas.height - pad);
        if (i === 0) ctx.moveTo(x, y); else ctx.lineTo(x, y);
      });
      ctx.stroke();
    });
  }

  // A refresh sent to the sign-in page: the session ended (expired, signed out elsewhere, broker restarted).
  function signedOut(loginUrl) {
    clearInterval(timer);
    if (document.getElementById("signed-out")) return;
    const note = document.createElement("p");
    note.className = "error";
    note.id = "signed-out";
    note.append("The session ended (it expired, was signed out, or the broker restarted); the figures " +
                "below stopped. ");
    const link = document.createElement("a");
    link.href = loginUrl;
    link.textContent = "Sign in again";
    note.append(link);
    document.querySelector("main").prepend(note);
  }

  let timer = null;

  function refresh() {
    document.querySelectorAll("[data-refresh]").forEach(function (element) {
      fetch(element.dataset.refresh, {credentials: "same-origin", cache: "no-store"})
        .then(function (response) {
          if (response.redirected && new URL(response.url).pathname.endsWith("/login")) {
            signedOut(response.url);
          }
          if (response.redirected || !response.ok) throw new Error("status " + response.status);
          return response.text();
        })
        .then(function (html) {
          element.innerHTML = html;
          element.removeAttribute("data-stale");
          resort(element);
          sample();
        })
        .catch(function () { element.setAttribute("data-stale", "true"); });
    });
  }

  // A connection string's copy button: the clipboard API where the page is a secure context (loopback or
  // https), else the selection and execCommand.
  function copy(button) {
    const input = button.parentElement.querySelector("input.copy");
    const done = function () { button.textContent = "copied"; };
    const fallback = function () { input.select(); if (document.execCommand("copy")) done(); };
    if (navigator.clipboard && window.isSecureContext) {
      navigator.clipboard.writeText(input.value).then(done, fallback);
    } else {
      fallback();
    }
  }

  // A message row opens (and closes) the row of its properties and body below it.
  function toggle(row) {
    const detail = row.nextElementSibling;
    const open = detail.hidden;
    detail.hidden = !open;
    row.classList.toggle("open", open);
    row.setAttribute("aria-expanded", String(open));
  }

  // A click on a sortable column's header sorts the rows by it (a message's detail row moves with it: each
  // message is a tbody of its own); a second click reverses. Refreshed tables keep the order chosen.
  const sorting = new Map();  // table's tbody id or "messages" -> [column index, direction]

  function sortTable(table, column, direction) {
    const header = table.tHead.rows[0].cells[column];
    const numeric = header.dataset.sort === "number";
    const groups = table.tBodies.length > 1 ? Array.from(table.tBodies) : Array.from(table.tBodies[0].rows);
    const value = function (group) {
      const row = group.rows ? group.rows[0] : group;
      const cell = row.cells[column];
      if (!cell) return "";
      const text = cell.dataset.value !== undefined ? cell.dataset.value : cell.textContent.trim();
      return numeric ? Number(text.replace(/[^0-9.-]/g, "")) || 0 : text.toLowerCase();
    };
    const keyed = groups.map(function (group, i) { return {group: group, key: value(group), at: i}; });
    keyed.sort(function (a, b) {
      return (a.key < b.key ? -1 : a.key > b.key ? 1 : a.at - b.at) * direction;
    });
    const parent = groups[0] && groups[0].parentNode;
    keyed.forEach(function (k) { parent.appendChild(k.group); });
    Array.from(header.parentNode.cells).forEach(function (cell) { cell.removeAttribute("aria-sort"); });
    header.setAttribute("aria-sort", direction > 0 ? "ascending" : "descending");
  }

  function resort(element) {
    const table = element.closest("table.sortable");
    const chosen = table && sorting.get(table.className);
    if (chosen) sortTable(table, chosen[0], chosen[1]);
  }

  // Destructive actions ask first, in a dialog; the form then goes with confirmed=1 (the server asks on a
  // page of its own when a form comes without it).
  function confirmFirst(button) {
    const unless = button.dataset.confirmUnless;  // a select whose value needs no asking (a status back on)
    const chosen = unless && button.form.querySelector("select").value;
    if (unless && chosen === unless) return false;
    const dialog = document.getElementById("confirm");
    document.getElementById("confirm-text").textContent = button.dataset.confirm.replace("{status}", chosen);
    dialog.returnValue = "";
    dialog.onclose = function () {
      if (dialog.returnValue !== "ok") return;
      const confirmed = document.createElement("input");
      confirmed.type = "hidden";
      confirmed.name = "confirmed";
      confirmed.value = "1";
      button.form.appendChild(confirmed);
      button.form.requestSubmit(button);
    };
    dialog.showModal();
    return true;
  }

  document.addEventListener("click", function (event) {
    const target = event.target;
    const copyButton = target.closest("button.copy-button");
    if (copyButton) { copy(copyButton); return; }
    if (target.id === "confirm-ok" || target.id === "confirm-cancel") {
      document.getElementById("confirm").close(target.id === "confirm-ok" ? "ok" : "");
      return;
    }
    const asking = target.closest("button[data-confirm]");
    if (asking && !asking.form.querySelector("input[name=confirmed]") && confirmFirst(asking)) {
      event.preventDefault();
      return;
    }
    const header = target.closest("table.sortable th[data-sort]");
    if (header) {
      const table = header.closest("table");
      const column = header.cellIndex;
      const previous = sorting.get(table.className);
      const direction = previous && previous[0] === column ? -previous[1] : 1;
      sorting.set(table.className, [column, direction]);
      sortTable(table, column, direction);
      return;
    }
    const row = target.closest("tr.message");
    if (row && !target.closest("form, a, button")) toggle(row);
  });

  document.addEventListener("keydown", function (event) {
    const row = event.target.closest && event.target.closest("tr.message");
    if (row && (event.key === "Enter" || event.key === " ")) { event.preventDefault(); toggle(row); }
  });

  document.addEventListener("DOMContentLoaded", function () {
    sample();
    if (document.querySelector("[data-refresh]")) timer = setInterval(refresh, 1000);
  });
})();
