// sbfed console: refreshes every element marked data-refresh once a second (its URL answers the element's
// new inner HTML) and draws each entity's active count over the last 60 samples. No framework, no build.
"use strict";
(function () {
  const history = new Map();  // entity path -> recent active counts
  const SAMPLES = 60;

  function sample() {
    document.querySelectorAll("canvas.spark").forEach(function (canvas) {
      const key = canvas.dataset.entity;
      const values = history.get(key) || [];
      values.push(Number(canvas.dataset.count));
      if (values.length > SAMPLES) values.shift();
      history.set(key, values);
      draw(canvas, values);
    });
  }

  function draw(canvas, values) {
    const ctx = canvas.getContext("2d");
    ctx.clearRect(0, 0, canvas.width, canvas.height);
    const top = Math.max(1, Math.max.apply(null, values));
    const step = canvas.width / (SAMPLES - 1);
    ctx.strokeStyle = "#2563eb";
    ctx.beginPath();
    values.forEach(function (v, i) {
      const x = (SAMPLES - values.length + i) * step;
      const y = canvas.height - 1 - (v / top) * (canvas.height - 2);
      if (i === 0) ctx.moveTo(x, y); else ctx.lineTo(x, y);
    });
    ctx.stroke();
  }

  function refresh() {
    document.querySelectorAll("[data-refresh]").forEach(function (element) {
      fetch(element.dataset.refresh, {credentials: "same-origin", cache: "no-store"})
        .then(function (response) {
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

  document.addEventListener("DOMContentLoaded", function () {
    sample();
    if (document.querySelector("[data-refresh]")) setInterval(refresh, 1000);
  });
})();
