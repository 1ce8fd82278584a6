/* A workload's history: each phone's median (with its 95% CI) per finished job, over time. */
"use strict";

(() => {
  const {el, fmt} = farm;
  let chart = null;

  function choices(data) {
    const select = document.getElementById("workloads");
    const known = [...select.options].map((o) => o.value).join("\n");
    if (known === ["", ...data.workloads].join("\n")) return;
    select.replaceChildren(el("option", {value: ""}, "choose…"),
      ...data.workloads.map((w) => el("option", {value: w, selected: w === data.workload}, w)));
  }

  function render(data) {
    choices(data);
    if (!data.workload) { farm.status(`${data.workloads.length} workloads with results`); }
    const unit = data.phones.length ? data.phones[0].unit : "s";
    const scale = unit === "s" ? 1e3 : 1;
    const serials = [...new Set(data.phones.map((p) => p.serial || "?"))].sort();
    const datasets = serials.map((serial, i) => ({
      label: serial, borderColor: farm.palette[i % farm.palette.length],
      backgroundColor: farm.palette[i % farm.palette.length], pointRadius: 4,
      data: data.phones.filter((p) => (p.serial || "?") === serial && p.finished_at)
        .map((p) => ({x: Date.parse(p.finished_at), y: p.spread.median * scale, job: p.job_id})),
    }));
    if (!chart) {
      chart = farm.chart("history-chart", {
        type: "line", data: {datasets},
        options: {parsing: true, scales: {
          x: {type: "linear", title: {display: true, text: "finished"},
              ticks: {callback: (v) => new Date(v).toLocaleString()}},
          y: {title: {display: true, text: `median (${unit === "s" ? "ms" : unit})`}}},
          plugins: {tooltip: {callbacks: {title: (items) => items.map(
            (item) => `job ${item.raw.job}, ${new Date(item.raw.x).toLocaleString()}`)}}}},
      });
    } else {
      chart.data.datasets = datasets;
      chart.update();
    }
    farm.fillTable(document.getElementById("history"), data.phones.map((p) => [
      fmt.time(p.finished_at), fmt.jobLink(p.job_id), p.serial || "", p.spread.n,
      fmt.amount(p.spread.median, unit),
      `${fmt.amount(p.spread.ci_low, unit)} – ${fmt.amount(p.spread.ci_high, unit)}`,
      fmt.num(p.spread.cv * 100, 1), p.noise]), data.workload ? "no results" : "choose a workload");
  }

  farm.poll(render);
})();
