// Keeps the jobs list and the health page current without a reload: asks the page's
// small JSON endpoint for a version every few seconds, and refetches the server-rendered
// fragment only when it changed (no inline script: the CSP forbids it; no HTML built
// here: the server's templates are the one renderer). Paused while the tab is hidden.
(function () {
  "use strict";
  document.querySelectorAll("[data-live-url]").forEach(function (live) {
    var interval = parseInt(live.dataset.intervalMs, 10) || 5000;
    var version = live.dataset.version;

    function getJson(url) {
      return fetch(url, { credentials: "same-origin", cache: "no-store",
                          headers: { Accept: "application/json" } })
        .then(function (r) { if (!r.ok) { throw new Error(r.status); } return r.json(); });
    }

    function swap() {
      return fetch(live.dataset.fragmentUrl, { credentials: "same-origin", cache: "no-store" })
        .then(function (r) { if (!r.ok) { throw new Error(r.status); } return r.text(); })
        .then(function (html) { live.innerHTML = html; });
    }

    function poll() {
      if (document.hidden) { setTimeout(poll, interval); return; }
      getJson(live.dataset.liveUrl)
        .then(function (p) {
          var total = document.getElementById("job-total");
          if (total && typeof p.total === "number") { total.textContent = String(p.total); }
          if (p.version === version) { return null; }
          return swap().then(function () {
            version = p.version;
            live.dataset.version = version;
          });
        })
        .then(function () { setTimeout(poll, interval); })
        .catch(function () { setTimeout(poll, interval * 4); });
    }

    setTimeout(poll, interval);
  });
}());
