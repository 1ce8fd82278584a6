/* A job's page: facts, attempts, the live tuning chart, results per phone with spread.
 * The job from the API's /api/v1/jobs/ID, its spread per phone from /api/v1/jobs/ID/results,
 * the chart's trials per task from /api/v1/dashboard/jobs/ID/trials, a finished tune's
 * speed-ups from /api/v1/dashboard/jobs/ID/speedups, whether its bundle can be downloaded
 * from /api/v1/dashboard/jobs/ID/export, an A/B job's verdicts and rounds from
 * /api/v1/dashboard/jobs/ID/ab (drawn by ab.js). */
"use strict";

(() => {
  const {el, fmt} = farm;
  let tuningChart = null;
  let phonesChart = null;

  function facts(data) {
    const j = data.job;
    const pairs = [
      ["kind", j.kind], ["state", fmt.jobState(j)], ["priority", j.priority],
      ["attempts", `${j.attempts_made}/${j.attempts_max}`], ["submitted", fmt.time(j.submitted_at)],
      ["finished", fmt.time(j.finished_at)], ["run", j.run_id || ""], ["owner", j.owner || ""],
      ["waiting because", data.waiting || ""], ["error", j.error || ""],
    ].filter(([, value]) => value !== "" && value !== null && value !== undefined);
    document.getElementById("job-facts").replaceChildren(
      ...pairs.flatMap(([name, value]) => [el("dt", {}, name), el("dd", {}, value)]));
    document.getElementById("job-state").replaceChildren(fmt.jobState(j));
  }

  /** A task's points for the chart: x the task's trial number, y in ms (null: failed). */
  function points(values) {
    return (values || []).map((v, i) => ({x: i + 1, y: v === null ? null : v * 1e3}));
  }

  /** The live tuning chart: per task (the heaviest first) its trials as points and its best
   * so far as a line, on a log axis: tasks differ by orders of magnitude (a convolution's ms,
   * a reshape's µs), so one curve over every task would say little. */
  function tuning(t, trials) {
    const section = document.getElementById("tuning");
    const tasks = trials.tasks || [];
    if (!t && !tasks.length) { section.hidden = true; return; }
    section.hidden = false;
    t = t || {counters: {tasks: []}};
    const counters = t.counters || {tasks: []};
    const eta = counters.eta_s === null || counters.eta_s === undefined ? ""
      : `, about ${Math.round(counters.eta_s)} s left`;
    document.getElementById("tuning-progress").textContent = t.trials_asked
      ? `${t.trials_measured}/${t.trials_asked} trials measured, ${t.tasks_done}/${counters.tasks.length} tasks done${eta}`
      : `${trials.trials || 0} trials recorded`;
    document.getElementById("tuning-curves").textContent = tasks.length
      ? `Each task's trial run times and its best so far, ${tasks.length < trials.tasks_tuned
        ? `the ${tasks.length} heaviest of ${trials.tasks_tuned} tasks tuned`
        : "the heaviest first"}.` : "";
    const datasets = tasks.flatMap((task, i) => {
      const colour = farm.palette[i % farm.palette.length];
      return [
        {label: task.name, data: points(task.best_run_s), stepped: true, pointRadius: 0,
         borderColor: colour, backgroundColor: colour},
        {label: `${task.name}: trials`, data: points(task.trial_run_s), showLine: false,
         pointRadius: 3, borderColor: colour, backgroundColor: colour, trials: true},
      ];
    });
    if (!tuningChart) {
      tuningChart = farm.chart("tuning-chart", {
        type: "line",
        data: {datasets},
        options: {spanGaps: true,
                  plugins: {legend: {labels: {filter: (item, data) =>
                    !data.datasets[item.datasetIndex].trials}}},
                  scales: {x: {type: "linear", min: 1, title: {display: true, text: "trial of the task"},
                               ticks: {precision: 0}},
                           y: {type: "logarithmic",
                               title: {display: true, text: "run time (ms, log scale)"}}}},
      });
    } else {
      tuningChart.data.datasets = datasets;
      tuningChart.update();
    }
    const canvas = document.getElementById("tuning-chart");
    canvas.dataset.points = String(trials.trials || 0);
    canvas.dataset.curves = String(tasks.length);
    farm.fillTable(document.getElementById("tasks"), (counters.tasks || []).map((task) => [
      task.name, `${task.trials_measured}/${task.trials_asked}`,
      task.best_s === null ? "" : fmt.amount(task.best_s, "s")]), "not started");
  }

  /** As farmctl results labels a phone's figure (farm.results.spreads.noise_label). */
  function noise(p) {
    if (p.rerun) return p.noisy ? "re-run: noisy" : "re-run: steady";
    return p.noisy ? "noisy" : "";
  }

  /** A phone's name in the spread table: an A/B job's builds are two figures of one phone,
   * told apart by the side its workload ends with (farm.results.spreads: "... [A]"). */
  function phoneName(p) {
    const side = / \[([AB])\]$/.exec(p.workload || "");
    return side ? `${p.serial || "?"} ${side[1]}` : p.serial || "?";
  }

  function phones(list, columns) {
    const section = document.getElementById("phones-section");
    if (!list.length) { section.hidden = true; return; }
    section.hidden = false;
    document.querySelector("#phones thead tr").replaceChildren(
      ...["phone", "n", "median", "IQR", "CV %", "95% CI", ...columns.map((c) => c.heading),
          "noise"].map((h) => farm.el("th", {}, h)));
    const unit = list[0].unit;
    const scale = unit === "s" ? 1e3 : 1;
    const labels = list.map(phoneName);
    const ci = list.map((p) => [p.spread.ci_low * scale, p.spread.ci_high * scale]);
    const medians = list.map((p) => p.spread.median * scale);
    if (!phonesChart) {
      phonesChart = farm.chart("phones-chart", {
        type: "bar",
        data: {labels, datasets: [
          {label: "95% CI of the median", data: ci, backgroundColor: "rgba(36,86,166,.35)"},
          {type: "line", label: "median", data: medians, showLine: false, pointRadius: 5,
           borderColor: farm.palette[1], backgroundColor: farm.palette[1]},
        ]},
        options: {scales: {y: {title: {display: true, text: unit === "s" ? "ms" : unit}}}},
      });
    } else {
      phonesChart.data.labels = labels;
      phonesChart.data.datasets[0].data = ci;
      phonesChart.data.datasets[1].data = medians;
      phonesChart.update();
    }
    farm.fillTable(document.getElementById("phones"), list.map((p) => [
      phoneName(p), p.spread.n, fmt.amount(p.spread.median, unit), fmt.amount(p.spread.iqr, unit),
      fmt.num(p.spread.cv * 100, 1),
      `${fmt.amount(p.spread.ci_low, unit)} – ${fmt.amount(p.spread.ci_high, unit)}`,
      ...columns.map((c) => fmt.kept(c, p[c.name])), noise(p)]));
  }

  /** A finished tune's speed-up per phone (/api/v1/dashboard/jobs/ID/speedups), and its
   * bundle: a download link when it can be built without compiling, else why not. */
  function speedups(view, exported, j) {
    const section = document.getElementById("speedup-section");
    const list = view.phones || [];
    if (!list.length && !exported.available) { section.hidden = true; return; }
    section.hidden = false;
    farm.fillTable(document.getElementById("speedups"), list.map((p) => ({
      tr: el("tr", {"data-serial": p.serial}), cells: [
        p.serial, el("td", {class: "num speedup"}, p.speedup ? `×${fmt.num(p.speedup, 2)}` : ""),
        fmt.amount(p.untuned_median_s, "s"), fmt.amount(p.tuned_median_s, "s"),
        fmt.num(p.tuned_gflops, 2)]})), "no phone timed");
    document.getElementById("best-note").textContent = view.best_note || "";
    const shown = document.getElementById("export");
    const state = `${exported.available} ${exported.reason}`;
    if (shown.dataset.state === state) return;  // a link kept across polls
    shown.dataset.state = state;
    const command = `farmctl export ${j.id} --out job-${j.id}-bundle`;
    shown.replaceChildren(...(exported.available
      ? ["Export the tuned bundle (library, MetaSchedule database, manifest, README): ",
         el("a", {href: `/api/v1/dashboard/jobs/${j.id}/export.zip`, download: "",
                  id: "export-download"}, `job-${j.id}-bundle.zip`),
         ", or on the farm host: ", el("code", {}, command)]
      : [`No bundle to download: ${exported.reason}`]));
  }

  /** The profile chart is drawn by the server when the page opens (farm/web/profile_chart.py):
   * once a profiled job has succeeded while the page was open, open it again, once per job. */
  function profileReady(j) {
    const profiled = j.spec && j.spec.params && j.spec.params.profile;
    const key = `farm-profile-reload-${j.id}`;
    if (j.state !== "succeeded" || !profiled || document.getElementById("profile-section")
        || sessionStorage.getItem(key)) return;
    sessionStorage.setItem(key, "1");
    location.reload();
  }

  function render({job: data, results, trials, speedups: timed, ab, export: exported}) {
    profileReady(data.job);
    facts(data);
    tuning(data.tuning, trials);
    speedups(timed, exported, data.job);
    farm.ab.render(ab);
    phones(results.spreads, results.readings || []);
    farm.fillTable(document.getElementById("attempts"), data.attempts.map((a) => [
      a.id, a.serials.join(", "), a.host || "", fmt.badge(a.state), fmt.time(a.started_at),
      fmt.time(a.finished_at), a.error ? `${a.error_kind}: ${a.error}` : ""]), "no attempt yet");
    const spec = document.getElementById("spec");
    const text = JSON.stringify(data.job.spec, null, 2);
    if (spec.textContent !== text) spec.textContent = text;
  }

  farm.poll(render);
})();
