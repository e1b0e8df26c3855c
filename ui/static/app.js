// The dashboard's only script: live refresh of the [data-live] regions, the
// select-all box, and the live on/off switch. Pages work without it.
(function () {
  "use strict";
  var body = document.body;
  var every = Number(body.dataset.refresh) || 0;

  document.addEventListener("change", function (e) {
    if (e.target && e.target.id === "select-all") {
      document.querySelectorAll('#tasks input[name="id"]').forEach(function (c) {
        c.checked = e.target.checked;
      });
    }
  });

  if (!every) return;
  var on = true;
  var timer = 0;
  var btn = document.getElementById("live-toggle");
  var status = document.getElementById("live-status");
  if (btn) {
    btn.hidden = false;
    btn.addEventListener("click", function () {
      on = !on;
      btn.setAttribute("aria-pressed", String(on));
      btn.textContent = "Live: " + (on ? "on" : "off");
      if (on) tick();
    });
  }

  function swap(doc) {
    document.querySelectorAll("[data-live][id]").forEach(function (el) {
      var fresh = doc.getElementById(el.id);
      if (!fresh || el.innerHTML === fresh.innerHTML) return;
      var active = document.activeElement;
      if (active && active !== el && el.contains(active) && active.type !== "checkbox") return;
      var checked = {};
      el.querySelectorAll("input[type=checkbox]").forEach(function (c) {
        if (c.checked) checked[c.id || c.value] = true;
      });
      var focusKey = active && el.contains(active) ? active.id || active.value : null;
      el.replaceChildren.apply(el, Array.prototype.slice.call(fresh.childNodes));
      el.querySelectorAll("input[type=checkbox]").forEach(function (c) {
        if (checked[c.id || c.value]) c.checked = true;
        if (focusKey && (c.id || c.value) === focusKey) c.focus();
      });
    });
  }

  function tick() {
    clearTimeout(timer);
    if (!on) return;
    if (document.hidden) {
      timer = setTimeout(tick, every);
      return;
    }
    fetch(location.href, { headers: { "X-Docket-Live": "1" }, credentials: "same-origin", cache: "no-store" })
      .then(function (r) {
        if (!r.ok) throw new Error("status " + r.status);
        return r.text();
      })
      .then(function (html) {
        swap(new DOMParser().parseFromString(html, "text/html"));
        body.dataset.updated = String(Number(body.dataset.updated || 0) + 1);
        if (status) status.textContent = "updated " + new Date().toLocaleTimeString();
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
