/* A job's page: facts, attempts, the live tuning chart, results per phone with spread.
 * The job from the API's /api/v1/jobs/ID, its spread per phone from /api/v1/jobs/ID/results,
 * the chart's trials from /api/v1/dashboard/jobs/ID/trials, whether its bundle can be
 * downloaded from /api/v1/dashboard/jobs/ID/export. */
"use strict";

(() => {
  const {el, fmt} = farm;
  let tuningChart = null;
  let phonesChart = null;

  function facts(data) {
    const j = data.job;
    const pairs = [
      ["kind", j.kind], ["state", fmt.badge(j.state)], ["priority", j.priority],
      ["attempts", `${j.attempts_made}/${j.attempts_max}`], ["submitted", fmt.time(j.submitted_at)],
      ["finished", fmt.time(j.finished_at)], ["run", j.run_id || ""], ["owner", j.owner || ""],
      ["waiting because", data.waiting || ""], ["error", j.error || ""],
    ].filter(([, value]) => value !== "" && value !== null && value !== undefined);
    document.getElementById("job-facts").replaceChildren(
      ...pairs.flatMap(([name, value]) => [el("dt", {}, name), el("dd", {}, value)]));
    document.getElementById("job-state").replaceChildren(fmt.badge(j.state));
  }

  function tuning(t, trials) {
    const section = document.getElementById("tuning");
    const runs = trials.trial_run_s || [];
    if (!t && !runs.length) { section.hidden = true; return; }
    section.hidden = false;
    t = t || {counters: {tasks: []}};
    const measured = runs.filter((v) => v !== null).length;
    const counters = t.counters || {tasks: []};
    const eta = counters.eta_s === null || counters.eta_s === undefined ? ""
      : `, about ${Math.round(counters.eta_s)} s left`;
    document.getElementById("tuning-progress").textContent = t.trials_asked
      ? `${t.trials_measured}/${t.trials_asked} trials measured, ${t.tasks_done}/${counters.tasks.length} tasks done${eta}`
      : `${measured} trials measured`;
    const labels = runs.map((_, i) => i + 1);
    const points = runs.map((v) => (v === null ? null : v * 1e3));
    const best = (trials.best_run_s || []).map((v) => (v === null ? null : v * 1e3));
    if (!tuningChart) {
      tuningChart = farm.chart("tuning-chart", {
        type: "line",
        data: {labels, datasets: [
          {label: "trial run time (ms)", data: points, showLine: false, pointRadius: 3,
           borderColor: farm.palette[0], backgroundColor: farm.palette[0]},
          {label: "best so far (ms)", data: best, stepped: true, pointRadius: 0,
           borderColor: farm.palette[2], backgroundColor: farm.palette[2]},
        ]},
        options: {spanGaps: true, scales: {x: {title: {display: true, text: "trial"}},
                                           y: {title: {display: true, text: "ms"}}}},
      });
    } else {
      tuningChart.data.labels = labels;
      tuningChart.data.datasets[0].data = points;
      tuningChart.data.datasets[1].data = best;
      tuningChart.update();
    }
    document.getElementById("tuning-chart").dataset.points = String(runs.length);
    farm.fillTable(document.getElementById("tasks"), (counters.tasks || []).map((task) => [
      task.name, `${task.trials_measured}/${task.trials_asked}`,
      task.best_s === null ? "" : fmt.amount(task.best_s, "s")]), "not started");
  }

  /** As farmctl results labels a phone's figure (farm.results.spreads.noise_label). */
  function noise(p) {
    if (p.rerun) return p.noisy ? "re-run: noisy" : "re-run: steady";
    return p.noisy ? "noisy" : "";
  }

  function phones(list) {
    const section = document.getElementById("phones-section");
    if (!list.length) { section.hidden = true; return; }
    section.hidden = false;
    const unit = list[0].unit;
    const scale = unit === "s" ? 1e3 : 1;
    const labels = list.map((p) => p.serial || "?");
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
      p.serial || "", p.spread.n, fmt.amount(p.spread.median, unit), fmt.amount(p.spread.iqr, unit),
      fmt.num(p.spread.cv * 100, 1),
      `${fmt.amount(p.spread.ci_low, unit)} – ${fmt.amount(p.spread.ci_high, unit)}`,
      fmt.num(p.battery_temp_c, 1), fmt.thermal(p.thermal_status), noise(p)]));
  }

  /** A finished tune's speed-up per phone (its result's per_serial), and its export. */
  function speedups(data, exported) {
    const section = document.getElementById("speedup-section");
    const summary = (data.result && data.result.summary) || {};
    const perSerial = summary.per_serial || {};
    const serials = Object.keys(perSerial).sort();
    if (data.job.kind !== "tune" || !serials.length) { section.hidden = true; return; }
    section.hidden = false;
    farm.fillTable(document.getElementById("speedups"), serials.map((serial) => {
      const f = perSerial[serial];
      return {tr: el("tr", {"data-serial": serial}), cells: [
        serial, el("td", {class: "num speedup"}, f.speedup ? `×${fmt.num(f.speedup, 2)}` : ""),
        fmt.amount(f.tuned_median_s, "s"), fmt.num(f.tuned_gflops, 2)]};
    }));
    const exportCommand = `farmctl export ${data.job.id} --out job-${data.job.id}-bundle`;
    const download = exported.available
      ? [el("a", {href: `/api/v1/dashboard/jobs/${data.job.id}/export.zip`, download: "",
                  id: "export-download"}, `job-${data.job.id}-bundle.zip`), ", or on the farm host: "]
      : ["on the farm host: "];
    const shown = document.getElementById("export");
    if (shown.dataset.available !== String(exported.available)) {  // a link kept across polls
      shown.dataset.available = String(exported.available);
      shown.replaceChildren(
        "Export the tuned bundle (library, MetaSchedule database, manifest, README): ",
        ...download, el("code", {}, exportCommand));
    }
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

  function render({job: data, results, trials, export: exported}) {
    profileReady(data.job);
    facts(data);
    tuning(data.tuning, trials);
    speedups(data, exported);
    phones(results.spreads);
    farm.fillTable(document.getElementById("attempts"), data.attempts.map((a) => [
      a.id, a.serials.join(", "), a.host || "", fmt.badge(a.state), fmt.time(a.started_at),
      fmt.time(a.finished_at), a.error ? `${a.error_kind}: ${a.error}` : ""]), "no attempt yet");
    const spec = document.getElementById("spec");
    const text = JSON.stringify(data.job.spec, null, 2);
    if (spec.textContent !== text) spec.textContent = text;
  }

  farm.poll(render);
})();
