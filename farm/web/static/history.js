/* A workload's history: each phone's median per finished job, oldest job first. */
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

  function render({view: data}) {
    choices(data);
    const unit = data.phones.length ? data.phones[0].unit : "s";
    const scale = unit === "s" ? 1e3 : 1;
    // One point per job on the x axis (the phones' figures come oldest first).
    const jobs = [...new Set(data.phones.map((p) => p.job_id))];
    const labels = jobs.map((id) => {
      const first = data.phones.find((p) => p.job_id === id);
      return `#${id} ${first.finished_at ? new Date(first.finished_at).toLocaleString() : ""}`;
    });
    const serials = [...new Set(data.phones.map((p) => p.serial || "?"))].sort();
    const datasets = serials.map((serial, i) => ({
      label: serial, borderColor: farm.palette[i % farm.palette.length],
      backgroundColor: farm.palette[i % farm.palette.length], pointRadius: 4, spanGaps: true,
      data: jobs.map((id) => {
        const p = data.phones.find((f) => f.job_id === id && (f.serial || "?") === serial);
        return p ? p.spread.median * scale : null;
      }),
    }));
    if (!chart) {
      chart = farm.chart("history-chart", {
        type: "line", data: {labels, datasets},
        options: {scales: {
          x: {title: {display: true, text: "job, finished"}},
          y: {title: {display: true, text: `median (${unit === "s" ? "ms" : unit})`}}}},
      });
    } else {
      chart.data.labels = labels;
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
