/* The comparison page: `farmctl compare A B` as a chart of B/A per phone with its 95% CI. */
"use strict";

(() => {
  const {el, fmt} = farm;
  let chart = null;
  const colours = {slower: "rgba(179,38,30,.55)", faster: "rgba(27,127,59,.55)",
                   undecided: "rgba(204,122,0,.55)"};

  function render({view: data}) {
    const common = data.phones.filter((p) => p.ratio !== null);
    const undecided = data.undecided.length
      ? `; undecided on ${data.undecided.length} phone(s): ${data.undecided.join(", ")} ` +
        "(too few samples or too wide a CI: measure again with more)"
      : "";
    const verdict = (data.regressed
      ? `B is slower than A on ${data.slower.length} phone(s): ${data.slower.join(", ")}`
      : "no phone is slower in B") + undecided;
    document.getElementById("verdict").textContent =
      `${data.b.ref} vs ${data.a.ref} (${data.a.workload}): ${verdict} ` +
      `(threshold ${(data.threshold * 100).toFixed(0)} %, alpha ${data.alpha})`;
    const labels = common.map((p) => p.serial);
    const ci = common.map((p) => [p.ci_low, p.ci_high]);
    const ratios = common.map((p) => p.ratio);
    const fill = common.map((p) => colours[p.verdict] || "rgba(95,107,118,.4)");
    if (!chart) {
      chart = farm.chart("compare-chart", {
        type: "bar",
        data: {labels, datasets: [
          {label: "95% CI of B/A", data: ci, backgroundColor: fill},
          {type: "line", label: "median B / median A", data: ratios, showLine: false,
           pointRadius: 5, borderColor: "#1d2329", backgroundColor: "#1d2329"},
        ]},
        options: {scales: {y: {title: {display: true, text: "B/A (1 = same; above: B slower)"}}}},
      });
    } else {
      chart.data.labels = labels;
      chart.data.datasets[0].data = ci;
      chart.data.datasets[0].backgroundColor = fill;
      chart.data.datasets[1].data = ratios;
      chart.update();
    }
    farm.fillTable(document.getElementById("comparison"), data.phones.map((p) => ({
      tr: el("tr", {"data-serial": p.serial}),
      cells: [p.serial, fmt.amount(p.median_a_s, "s"), fmt.amount(p.median_b_s, "s"),
              fmt.num(p.ratio, 3),
              p.ci_low === null ? "" : `${fmt.num(p.ci_low, 3)} – ${fmt.num(p.ci_high, 3)}`,
              p.p_value === null ? "" : Number(p.p_value).toPrecision(2),
              fmt.badge(p.verdict, p.verdict.replace(/\s+/g, "-")),
              p.reason || "",
              p.noisy ? fmt.badge(`noisy: ${p.noisy}`, "noisy") : ""]})), "no phone");
  }

  /** Offer the recent succeeded jobs and runs in A's and B's lists, so nobody types ids. */
  async function offerRefs() {
    const jobs = await farm.getJSON("/api/v1/jobs?state=succeeded&limit=200");
    const options = [];
    const runs = new Set();
    for (const {job: j, workload} of jobs) {
      if (j.run_id && !runs.has(j.run_id)) {
        runs.add(j.run_id);
        options.push(el("option", {value: j.run_id}, `run ${j.run_id} · ${workload || j.kind}`));
      }
      options.push(el("option", {value: String(j.id)},
                      `job ${j.id} · ${workload || j.kind} · ${fmt.clock(j.finished_at)}`));
    }
    document.getElementById("refs").replaceChildren(...options);
  }

  offerRefs().catch((error) => farm.status(`cannot list jobs: ${error.message}`, true));
  farm.poll(render);
})();
