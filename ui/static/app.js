// The dashboard's only script: live refresh of the [data-live] regions, the
// select-all box with a count of the selection, and the live on/off switch.
// Every page works without it.
(function () {
  "use strict";
  var body = document.body;
  var every = Number(body.dataset.refresh) || 0;

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
  var timer = 0;
  var btn = document.getElementById("live-toggle");
  var status = document.getElementById("live-status");
  if (btn) {
    btn.hidden = false;
    btn.title = "Updates every " + every / 1000 + " s; press to pause";
    btn.addEventListener("click", function () {
      on = !on;
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
