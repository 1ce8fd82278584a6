/* An A/B job on its page: the sides, each phone's verdict of B against A, and per phone a chart
 * of its rounds' ratios B/A with their median, the median's interval and the threshold band
 * (1 ± threshold), from /api/v1/dashboard/jobs/ID/ab (farm/web/ab_view.py). The raw timings
 * of each round and the phone's reading before it are in the chart's tooltips and in a table
 * under it. Loaded before job.js, which calls farm.ab.render on every poll. */
"use strict";

farm.ab = (() => {
  const {el, fmt} = farm;
  const charts = new Map();  // serial -> Chart
  const band = "rgba(95,107,118,.14)";
  const interval = "rgba(36,86,166,.22)";
  // The readings each round carries, as the server declares them ({name, heading, unit, levels}).
  let columns = [];

  /** A horizontal line at y over the rounds [first, last], drawn without points. */
  function level(label, y, first, last, extra) {
    return Object.assign({type: "line", label, data: y === null ? []
      : [{x: first, y}, {x: last, y}], pointRadius: 0, borderWidth: 1.5}, extra);
  }

  /** One phone's datasets: the band 1 ± threshold, the median's interval, the median ratio
   * and every round's ratio B/A (its raw timings and reading kept for the tooltip). */
  function datasets(phone, threshold) {
    const rounds = phone.per_round.filter((r) => r.ratio !== null);
    const first = rounds.length ? rounds[0].round : 0;
    const last = rounds.length ? rounds[rounds.length - 1].round : 0;
    const t = threshold === null ? null : threshold;
    return [
      level("1 − threshold", t === null ? null : 1 - t, first, last,
            {borderColor: "#8a949e", borderDash: [5, 4], band: true, lower: true}),
      level(`threshold band 1 ± ${t === null ? "?" : fmt.num(t, 3)}`, t === null ? null : 1 + t,
            first, last, {borderColor: "#8a949e", borderDash: [5, 4], backgroundColor: band,
                          fill: "-1", band: true}),
      level("CI low", phone.ci_low, first, last,
            {borderColor: "rgba(36,86,166,.5)", borderWidth: 1, ci: true, lower: true}),
      level("CI of the median ratio", phone.ci_high, first, last,
            {borderColor: "rgba(36,86,166,.5)", borderWidth: 1, backgroundColor: interval,
             fill: "-1", ci: true}),
      level("median ratio", phone.ratio, first, last,
            {borderColor: "#1d2329", borderWidth: 2, median: true}),
      {type: "scatter", label: "B/A of each round", rounds: true, pointRadius: 3,
       borderColor: farm.palette[1], backgroundColor: farm.palette[1],
       data: rounds.map((r) => ({x: r.round, y: r.ratio, a: r.a_s, b: r.b_s, reading: r}))},
    ];
  }

  function tooltip(item) {
    const p = item.raw;
    if (!item.dataset.rounds) return `${item.dataset.label}: ${fmt.num(p.y, 4)}`;
    const readings = columns.map((c) => [c.heading, fmt.kept(c, p.reading[c.name])])
      .filter(([, shown]) => shown !== "").map(([heading, shown]) => `, ${heading} ${shown}`);
    return `B/A ${fmt.num(p.y, 4)}: A ${fmt.amount(p.a, "s")}, B ${fmt.amount(p.b, "s")}` +
      readings.join("");
  }

  function newChart(canvas, phone, threshold) {
    return new Chart(canvas, {
      type: "line",
      data: {datasets: datasets(phone, threshold)},
      options: {
        animation: false, responsive: true, maintainAspectRatio: false,
        plugins: {
          legend: {labels: {filter: (item, data) => !data.datasets[item.datasetIndex].lower}},
          tooltip: {callbacks: {title: (items) => items.length ? `round ${items[0].raw.x}` : "",
                                label: tooltip}},
        },
        scales: {x: {type: "linear", title: {display: true, text: "round"},
                     ticks: {precision: 0}},
                 y: {title: {display: true, text: "B/A (1 = same; above: B slower)"}}},
      },
    });
  }

  /** The figure of one phone: a caption, its chart and its rounds' table (folded). */
  function figure(serial, index) {
    const canvas = el("canvas", {id: `ab-chart-${index}`, "data-serial": serial,
                                 "aria-label": `ratio B/A per round on ${serial}`});
    const table = el("table", {class: "ab-rounds cards"},
                     el("thead", {}, el("tr", {}, ["round", "A", "B", "B/A",
                                                   ...columns.map((c) => c.heading)]
                                                   .map((h) => el("th", {}, h)))),
                     el("tbody", {}));
    return el("figure", {class: "ab-phone", "data-serial": serial},
              el("figcaption", {}, ""), el("div", {class: "chart"}, canvas),
              el("details", {}, el("summary", {}, "each round's timings and reading"), table));
  }

  function caption(phone, threshold, confidence) {
    const pct = confidence === null ? "" : `${Math.round(confidence * 100)}% `;
    const ci = phone.ci_low === null ? "" : `, ${pct}CI ${fmt.num(phone.ci_low, 3)} – ${fmt.num(phone.ci_high, 3)}`;
    const band = threshold === null ? "" : `; no change inside ${fmt.num(1 - threshold, 3)} – ${fmt.num(1 + threshold, 3)}`;
    return `${phone.serial}: ${phone.verdict || "?"}, median B/A ${fmt.num(phone.ratio, 3)}${ci}` +
      ` over ${phone.per_round.length} rounds${band}`;
  }

  function charted(view) {
    const holder = document.getElementById("ab-charts");
    const serials = view.phones.map((p) => p.serial);
    const shown = [...holder.querySelectorAll("figure.ab-phone")].map((f) => f.dataset.serial);
    if (shown.join("\n") !== serials.join("\n")) {  // other phones: build the figures again
      charts.forEach((c) => c.destroy());
      charts.clear();
      holder.replaceChildren(...serials.map(figure));
    }
    view.phones.forEach((phone, i) => {
      const node = holder.children[i];
      node.querySelector("figcaption").textContent =
        caption(phone, view.threshold, view.confidence);
      const canvas = node.querySelector("canvas");
      canvas.dataset.rounds = String(phone.per_round.filter((r) => r.ratio !== null).length);
      const existing = charts.get(phone.serial);
      if (existing) {
        existing.data.datasets = datasets(phone, view.threshold);
        existing.update();
      } else {
        charts.set(phone.serial, newChart(canvas, phone, view.threshold));
      }
      farm.fillTable(node.querySelector("table"), phone.per_round.map((r) => [
        r.round, fmt.amount(r.a_s, "s"), fmt.amount(r.b_s, "s"), fmt.num(r.ratio, 4),
        ...columns.map((c) => fmt.kept(c, r[c.name]))]), "no round");
    });
  }

  /** The A/B section: hidden for a job with no A/B result. */
  function render(view) {
    const section = document.getElementById("ab-section");
    if (!view.phones.length) { section.hidden = true; return; }
    section.hidden = false;
    columns = view.readings || [];
    const threshold = view.threshold === null ? "" : `threshold ±${fmt.num(view.threshold * 100, 1)}%`;
    document.getElementById("ab-rule").textContent = threshold;
    document.getElementById("ab-rule").title = view.method || "";
    document.getElementById("ab-sides").replaceChildren(
      el("dt", {}, "A (baseline)"), el("dd", {}, view.a || "?"),
      el("dt", {}, "B (judged)"), el("dd", {}, view.b || "?"));
    farm.fillTable(document.getElementById("ab-phones"), view.phones.map((p) => ({
      tr: el("tr", {"data-serial": p.serial}), cells: [
        p.serial, el("td", {class: "verdict"}, fmt.badge(p.verdict || "?",
                                                        (p.verdict || "").replace(/\s+/g, "-"))),
        el("td", {class: "num ratio"}, fmt.num(p.ratio, 3)),
        p.ci_low === null || p.ci_high === null ? ""
          : `${fmt.num(p.ci_low, 3)} – ${fmt.num(p.ci_high, 3)}`,
        p.rounds ?? "", fmt.amount(p.median_a_ms === null ? null : p.median_a_ms / 1e3, "s"),
        fmt.amount(p.median_b_ms === null ? null : p.median_b_ms / 1e3, "s"),
        p.phone_s === null ? "" : `${fmt.num(p.phone_s, 1)} s`, p.why || ""]})), "no phone");
    charted(view);
  }

  return {render};
})();
