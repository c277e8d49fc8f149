// Keeps the reviewer's job page current while the job runs: asks for progress every
// few seconds, and refetches the server-rendered turns, diff and gates only when they
// changed (no inline script: the CSP forbids it; no HTML built here: the server's
// templates are the one renderer, and they escape the model's output).
(function () {
  "use strict";
  var live = document.getElementById("live");
  if (!live) { return; }
  var interval = parseInt(live.dataset.intervalMs, 10) || 3000;
  var version = live.dataset.version;

  function openDetails(root) {
    var ids = [];
    root.querySelectorAll("details[id]").forEach(function (d) { if (d.open) { ids.push(d.id); } });
    return ids;
  }

  function swapDetail() {
    return fetch(live.dataset.detailUrl, { credentials: "omit", cache: "no-store" })
      .then(function (r) { if (!r.ok) { throw new Error(r.status); } return r.text(); })
      .then(function (html) {
        var target = document.getElementById("job-detail");
        var wasOpen = openDetails(target);
        target.innerHTML = html;
        wasOpen.forEach(function (id) {
          var d = document.getElementById(id);
          if (d) { d.open = true; }
        });
      });
  }

  function poll() {
    fetch(live.dataset.progressUrl, { credentials: "omit", cache: "no-store" })
      .then(function (r) { if (!r.ok) { throw new Error(r.status); } return r.json(); })
      .then(function (p) {
        document.getElementById("turn-count").textContent = String(p.turns);
        document.getElementById("current-step").textContent = p.step;
        var state = document.getElementById("job-state");
        state.textContent = p.state;
        state.className = "badge " + p.state;
        var next = p.version === version ? Promise.resolve()
          : swapDetail().then(function () { version = p.version; });
        return next.then(function () { if (!p.done) { setTimeout(poll, interval); } });
      })
      .catch(function () { setTimeout(poll, interval * 4); });
  }

  if (live.dataset.done !== "true") { setTimeout(poll, interval); }
}());
