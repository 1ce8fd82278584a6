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
      ["kind", d.kind], ["model", f.model], ["SoC", f.soc], ["ABI", f.abi], ["host", d.host],
      ["job", d.job_id ? fmt.jobLink(d.job_id) : ""],
      ["reserved by", d.reservation ? d.reservation.owner : ""],
      ["readings", d.stale ? "stale (not probed while offline or unreachable)" : ""],
      ["last seen", fmt.time(d.last_seen)],
    ].filter(([, v]) => v !== "" && v !== null && v !== undefined);
    document.getElementById("device-facts").replaceChildren(
      ...pairs.flatMap(([name, value]) => [el("dt", {}, name), el("dd", {}, value)]));
    document.getElementById("device-state").replaceChildren(fmt.badge(d.state));
  }

  function readings(list) {
    const labels = list.map((r) => fmt.clock(r.at));
    const temps = list.map((r) => r.battery_temp_c);
    const levels = list.map((r) => r.battery_pct);
    if (!chart) {
      chart = farm.chart("readings-chart", {
        type: "line",
        data: {labels, datasets: [
          {label: "battery °C", data: temps, borderColor: farm.palette[1], backgroundColor: farm.palette[1]},
          {label: "battery %", data: levels, borderColor: farm.palette[0], backgroundColor: farm.palette[0]},
        ]},
        options: {spanGaps: true},
      });
    } else {
      chart.data.labels = labels;
      chart.data.datasets[0].data = temps;
      chart.data.datasets[1].data = levels;
      chart.update();
    }
    document.getElementById("readings-chart").dataset.points = String(list.length);
    farm.fillTable(document.getElementById("readings"), [...list].reverse().slice(0, 20).map((r) => [
      fmt.time(r.at), fmt.num(r.battery_pct, 0), fmt.num(r.battery_temp_c, 1),
      fmt.thermal(r.thermal_status)]), "no reading yet");
  }

  function render({device: d, readings: list, log}) {
    facts(d);
    readings(list);
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
