// Draws the outcome charts from the JSON the page embeds (no inline script: the CSP forbids it).
(function () {
  "use strict";
  var node = document.getElementById("outcome-data");
  if (!node || typeof Chart === "undefined") { return; }
  var data = JSON.parse(node.textContent);
  var colors = { merged: "#2e7d32", closed: "#c62828", revised: "#1565c0" };
  function datasets(source, asPercent) {
    return ["merged", "closed", "revised"].map(function (key) {
      return {
        label: key,
        data: source[key].map(function (v) { return asPercent ? Math.round(v * 1000) / 10 : v; }),
        borderColor: colors[key],
        backgroundColor: colors[key],
        tension: 0.2
      };
    });
  }
  window.ribbitCharts = {
    rates: new Chart(document.getElementById("rates-chart"), {
      type: "line",
      data: { labels: data.weeks, datasets: datasets(data.rates, true) },
      options: { animation: false, responsive: true, maintainAspectRatio: false,
                 plugins: { title: { display: true, text: "Rates by week (% of decided PRs)" } },
                 scales: { y: { min: 0, max: 100 } } }
    }),
    counts: new Chart(document.getElementById("counts-chart"), {
      type: "bar",
      data: { labels: data.weeks, datasets: datasets(data.counts, false) },
      options: { animation: false, responsive: true, maintainAspectRatio: false,
                 plugins: { title: { display: true, text: "Decided PRs by week" } } }
    })
  };
}());
