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

  function draw(canvas, seen) {
    const rates = seen.rates;
    const ctx = canvas.getContext("2d");
    ctx.clearRect(0, 0, canvas.width, canvas.height);
    const top = Math.max(1, Math.max.apply(null, [].concat.apply([], rates)));
    const step = canvas.width / (SAMPLES - 1);
    rates.forEach(function (values, s) {
      ctx.strokeStyle = seen.series[s][1];
      ctx.beginPath();
      values.forEach(function (v, i) {
        const x = (SAMPLES - values.length + i) * step;
        const y = canvas.height - 1 - (v / top) * (canvas.height - 2);
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
          sample();
        })
        .catch(function () { element.setAttribute("data-stale", "true"); });
    });
  }

  // A connection string's copy button: the clipboard API where the page is a secure context (loopback or
  // https), else the selection and execCommand.
  document.addEventListener("click", function (event) {
    const button = event.target.closest("button.copy-button");
    if (!button) return;
    const input = button.parentElement.querySelector("input.copy");
    const done = function () { button.textContent = "copied"; };
    const fallback = function () { input.select(); if (document.execCommand("copy")) done(); };
    if (navigator.clipboard && window.isSecureContext) {
      navigator.clipboard.writeText(input.value).then(done, fallback);
    } else {
      fallback();
    }
  });

  document.addEventListener("DOMContentLoaded", function () {
    sample();
    if (document.querySelector("[data-refresh]")) timer = setInterval(refresh, 1000);
  });
})();
