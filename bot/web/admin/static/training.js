// Draws the reward curves of training runs from the JSON the page embeds (the CSP forbids
// inline script).
(function () {
  "use strict";
  var node = document.getElementById("reward-data");
  if (!node || typeof Chart === "undefined") { return; }
  var runs = JSON.parse(node.textContent);
  var longest = runs.reduce(function (n, r) { return Math.max(n, r.rewards.length); }, 0);
  var steps = [];
  for (var i = 1; i <= longest; i++) { steps.push(i); }
  window.ribbitCharts = {
    rewards: new Chart(document.getElementById("reward-chart"), {
      type: "line",
      data: {
        labels: steps,
        datasets: runs.map(function (r) { return { label: r.run, data: r.rewards, tension: 0.2 }; })
      },
      options: { animation: false, responsive: true, maintainAspectRatio: false,
                 plugins: { title: { display: true, text: "Mean reward per step" } },
                 scales: { y: { min: 0, max: 1 }, x: { title: { display: true, text: "step" } } } }
    })
  };
}());
