/* A device's page: its row of /api/v1/devices/SERIAL (state, health, facts, events), its
 * readings over time and the tail of its log from /api/v1/dashboard/devices/SERIAL/... */
"use strict";

(() => {
  const {el, fmt} = farm;
  let chart = null;

  function facts(d) {
    const f = d.facts || {};
    const pairs = [
      ["state", fmt.badge(d.state)], ["health", fmt.badge(d.health)], ["why", d.health_reason],
      ["kind", d.kind], ["model", f.model], ["SoC", f.soc], ["ABI", f.emulated ? `${f.abi}, emulated` : f.abi], ["host", d.host],
      ["job", d.job_id ? fmt.jobLink(d.job_id) : ""],
      ["reserved by", d.reservation ? d.reservation.owner : ""],
      ["readings", d.stale ? "stale (not probed while offline or unreachable)" : ""],
      ["last seen", fmt.time(d.last_seen)],
    ].filter(([, v]) => v !== "" && v !== null && v !== undefined);
    document.getElementById("device-facts").replaceChildren(
      ...pairs.flatMap(([name, value]) => [el("dt", {}, name), el("dd", {}, value)]));
    document.getElementById("device-state").replaceChildren(fmt.badge(d.state));
  }

  /** Every reading name in the samples, the device's declared order (its latest values) first. */
  function names(list, d) {
    const seen = (d.values || []).map((v) => v.name);
    for (const r of list) for (const name of Object.keys(r.readings || {})) {
      if (!seen.includes(name)) seen.push(name);
    }
    return seen;
  }

  function readings(list, d) {
    const declared = Object.fromEntries((d.values || []).map((v) => [v.name, v]));
    const shown = names(list, d);
    const label = (name) => {
      const v = declared[name] || {};
      return v.unit ? `${v.label || name} (${v.unit})` : v.label || name;
    };
    const labels = list.map((r) => fmt.clock(r.at));
    const datasets = shown.map((name, i) => ({
      label: label(name), data: list.map((r) => (r.readings || {})[name] ?? null),
      borderColor: farm.palette[i % farm.palette.length],
      backgroundColor: farm.palette[i % farm.palette.length],
    }));
    if (!chart) {
      chart = farm.chart("readings-chart", {type: "line", data: {labels, datasets},
                                            options: {spanGaps: true}});
    } else {
      chart.data.labels = labels;
      chart.data.datasets = datasets;
      chart.update();
    }
    document.getElementById("readings-chart").dataset.points = String(list.length);
    const table = document.getElementById("readings");
    table.tHead.rows[0].replaceChildren(el("th", {}, "at"), ...shown.map((n) => el("th", {}, label(n))));
    farm.fillTable(table, [...list].reverse().slice(0, 20).map((r) => [
      fmt.time(r.at), ...shown.map((name) => {
        const value = (r.readings || {})[name];
        return name === "thermal_status" ? fmt.thermal(value) : fmt.num(value, 1);
      })]), "no reading yet");
  }

  function render({device: d, readings: list, log}) {
    facts(d);
    readings(list, d);
    farm.fillTable(document.getElementById("events"), (d.events || []).map((e) => [
      fmt.time(e.at), `${e.from_state || "-"} → ${e.to_state}`, e.reason || ""]), "no event");
    document.getElementById("log-source").textContent =
      log.error ? `(${log.error})` : log.source ? `(${log.source}, last ${log.lines.length} lines)` : "";
    const text = log.lines.join("\n");
    const pre = document.getElementById("log");
    if (pre.textContent !== text) pre.textContent = text;
  }

  farm.poll(render);
})();
