// The dashboard's own script: live refresh of the [data-live] regions, the
// select-all box with a count of the selection, the live on/off switch, and
// the charts (uPlot, vendored beside it), which read their data from the
// dashboard's rates endpoint. Every page works without it.
(function () {
  "use strict";
  var body = document.body;
  var every = Number(body.dataset.refresh) || 0;
  var live = { on: true };

  // Charts. Each .chart[data-chart] is "rates" (enqueued, completed, failed
  // and dead-lettered per second) or "wait" (the oldest ready task's wait),
  // drawn from the JSON at data-src, fetched again every sample period
  // while the page is live.
  var charts = [];
  function cssVar(name, fallback) {
    var v = getComputedStyle(document.documentElement).getPropertyValue(name).trim();
    return v || fallback;
  }
  function fmtRate(u, v) {
    if (v == null) return "—";
    return v >= 100 ? v.toFixed(0) : v >= 10 ? v.toFixed(1) : v.toFixed(2);
  }
  function fmtWait(u, v) {
    if (v == null) return "none ready";
    if (v < 60) return v.toFixed(v < 10 ? 1 : 0) + " s";
    if (v < 3600) return Math.floor(v / 60) + "m" + String(Math.floor(v % 60)).padStart(2, "0") + "s";
    return Math.floor(v / 3600) + "h" + String(Math.floor((v % 3600) / 60)).padStart(2, "0") + "m";
  }
  function chartHeight() {
    return window.innerWidth < 640 ? 130 : 170;
  }
  function chartOpts(kind, width) {
    var axis = { stroke: cssVar("--muted", "#59636e"), grid: { stroke: cssVar("--line", "#dde1e6"), width: 1 },
      ticks: { stroke: cssVar("--line", "#dde1e6"), width: 1 } };
    var base = { width: width, height: chartHeight(), cursor: { y: false }, legend: { live: true },
      scales: { x: { time: true } }, axes: [Object.assign({}, axis), Object.assign({ size: 56 }, axis)] };
    if (kind === "wait") {
      base.axes[1].values = function (u, vs) { return vs.map(function (v) { return fmtWait(u, v); }); };
      base.series = [{}, { label: "oldest ready", stroke: cssVar("--in-flight-f", "#e0a526"), width: 2,
        fill: "rgba(224,165,38,.12)", value: fmtWait, spanGaps: false }];
      base.scales.y = { range: function (u, lo, hi) { return [0, Math.max(1, hi * 1.1)]; } };
      return base;
    }
    base.axes[1].values = function (u, vs) { return vs.map(function (v) { return fmtRate(u, v); }); };
    base.scales.y = { range: function (u, lo, hi) { return [0, Math.max(0.1, hi * 1.1)]; } };
    base.series = [{},
      { label: "enqueued/s", stroke: "#8a94a0", width: 1.5, value: fmtRate },
      { label: "completed/s", stroke: cssVar("--ready-f", "#3b7ff0"), width: 2, value: fmtRate },
      { label: "failed/s", stroke: cssVar("--in-flight-f", "#e0a526"), width: 1.5, value: fmtRate },
      { label: "dead/s", stroke: cssVar("--dead-f", "#d93a2f"), width: 1.5, value: fmtRate }];
    return base;
  }
  function columns(kind, d) {
    if (kind === "wait") return [d.t, d.oldest];
    return [d.t, d.enqueued, d.completed, d.failed, d.dead];
  }
  function drawChart(c) {
    return fetch(c.el.dataset.src, { credentials: "same-origin", cache: "no-store" })
      .then(function (r) {
        if (!r.ok) throw new Error("answered " + r.status);
        return r.json();
      })
      .then(function (d) {
        c.period = Math.max(1000, (d.every || 5) * 1000);
        var data = columns(c.kind, d);
        c.el.dataset.points = String(d.t.length);
        if (c.empty) c.empty.hidden = d.t.length > 0;
        if (!c.plot) {
          c.plot = new window.uPlot(chartOpts(c.kind, c.el.clientWidth || 300), data, c.el);
        } else {
          c.plot.setData(data);
        }
        c.el.dataset.drawn = String(Number(c.el.dataset.drawn || 0) + 1);
      })
      .catch(function (e) {
        if (c.empty) {
          c.empty.hidden = false;
          c.empty.textContent = "Chart not updated (" + e.message + ")";
        }
      });
  }
  function chartLoop(c) {
    var again = function () {
      setTimeout(function () {
        if (live.on && !document.hidden) drawChart(c).then(again);
        else again();
      }, c.period);
    };
    drawChart(c).then(again);
  }
  if (window.uPlot) {
    document.querySelectorAll(".chart[data-chart]").forEach(function (el) {
      var empty = document.createElement("p");
      empty.className = "chart-empty muted";
      empty.textContent = "Collecting samples: the chart starts with the dashboard.";
      el.appendChild(empty);
      var c = { el: el, kind: el.dataset.chart, plot: null, empty: empty, period: 5000 };
      charts.push(c);
      chartLoop(c);
    });
    var resizeTimer = 0;
    window.addEventListener("resize", function () {
      clearTimeout(resizeTimer);
      resizeTimer = setTimeout(function () {
        charts.forEach(function (c) {
          if (c.plot) c.plot.setSize({ width: c.el.clientWidth || 300, height: chartHeight() });
        });
      }, 150);
    });
  }

  function boxes() {
    return document.querySelectorAll('#tasks input[name="id"]');
  }
  function showSelected() {
    var label = document.getElementById("selected-count");
    if (!label) return;
    var n = 0;
    boxes().forEach(function (c) {
      if (c.checked) n++;
    });
    label.textContent = n ? n + " selected:" : "Selected tasks:";
  }
  document.addEventListener("change", function (e) {
    if (!e.target) return;
    if (e.target.id === "select-all") {
      boxes().forEach(function (c) {
        c.checked = e.target.checked;
      });
    }
    if (e.target.type === "checkbox") showSelected();
  });

  if (!every) return;
  var on = true;
  live.on = true;
  var timer = 0;
  var btn = document.getElementById("live-toggle");
  var status = document.getElementById("live-status");
  if (btn) {
    btn.hidden = false;
    btn.title = "Updates every " + every / 1000 + " s; press to pause";
    btn.addEventListener("click", function () {
      on = !on;
      live.on = on;
      btn.setAttribute("aria-pressed", String(on));
      btn.title = on ? "Updates every " + every / 1000 + " s; press to pause" : "Paused; press to update again";
      if (status) status.textContent = on ? "" : "paused";
      if (on) tick();
    });
  }

  // swap replaces each live region whose content changed, keeping the
  // selection and the focus, and leaving alone a region the user is typing
  // or choosing in.
  function swap(doc) {
    document.querySelectorAll("[data-live][id]").forEach(function (el) {
      var fresh = doc.getElementById(el.id);
      if (!fresh || el.innerHTML === fresh.innerHTML) return;
      var active = document.activeElement;
      if (active && active !== el && el.contains(active) && active.type !== "checkbox" && active.tagName !== "A") return;
      var checked = {};
      el.querySelectorAll("input[type=checkbox]").forEach(function (c) {
        if (c.checked) checked[c.id || c.value] = true;
      });
      var focusKey = null;
      if (active && el.contains(active)) {
        focusKey = active.id || active.value || active.getAttribute("href");
      }
      el.replaceChildren.apply(el, Array.prototype.slice.call(fresh.childNodes));
      el.querySelectorAll("input[type=checkbox]").forEach(function (c) {
        if (checked[c.id || c.value]) c.checked = true;
      });
      if (focusKey) {
        el.querySelectorAll("input, a").forEach(function (c) {
          if ((c.id || c.value || c.getAttribute("href")) === focusKey) c.focus();
        });
      }
    });
    showSelected();
  }

  function tick() {
    clearTimeout(timer);
    if (!on) return;
    if (document.hidden) {
      timer = setTimeout(tick, every);
      return;
    }
    var code = 0;
    fetch(location.href, { headers: { "X-Docket-Live": "1" }, credentials: "same-origin", cache: "no-store" })
      .then(function (r) {
        code = r.status;
        return r.text();
      })
      .then(function (html) {
        // An error answer is swapped in too: its regions say what is wrong
        // (a cluster page while a node cannot answer); pages without
        // matching regions change nothing.
        swap(new DOMParser().parseFromString(html, "text/html"));
        body.dataset.updated = String(Number(body.dataset.updated || 0) + 1);
        if (status) {
          status.textContent = code >= 400 ? "answered " + code : "updated " + new Date().toLocaleTimeString();
        }
      })
      .catch(function (e) {
        if (status) status.textContent = "not updated (" + e.message + ")";
      })
      .then(function () {
        timer = setTimeout(tick, every);
      });
  }
  timer = setTimeout(tick, every);
})();
