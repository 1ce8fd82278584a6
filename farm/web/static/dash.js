/* farm's dashboard: what every page shares (polling, tables, formats, actions).
 * No framework and no build step: plain browser JavaScript, loaded after Chart.js.
 * Text from the farm (serials, reasons, errors) is always set as text, never as HTML. */
"use strict";

const farm = (() => {
  const body = document.body;

  /** A DOM element: el("td", {class: "num"}, "12", otherNode). */
  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [name, value] of Object.entries(attrs || {})) {
      if (value !== null && value !== undefined && value !== false) node.setAttribute(name, value);
    }
    for (const child of children.flat()) {
      if (child === null || child === undefined) continue;
      node.append(child instanceof Node ? child : String(child));
    }
    return node;
  }

  function status(text, isError) {
    const node = document.getElementById("status");
    if (!node) return;
    node.textContent = text;
    node.classList.toggle("error", Boolean(isError));
  }

  function toLogin() {
    location.href = "/login?next=" + encodeURIComponent(location.pathname + location.search);
  }

  /** GET JSON with the session cookie; 401 goes to the login page, other errors throw. */
  async function getJSON(url) {
    const response = await fetch(url, {credentials: "same-origin",
                                       headers: {Accept: "application/json"}});
    if (response.status === 401) { toLogin(); throw new Error("logged out"); }
    const data = await response.json().catch(() => ({}));
    if (!response.ok) throw new Error(data.error || data.detail || `${response.status} ${response.statusText}`);
    return data;
  }

  /** POST to an API route (an operator's action); returns the JSON answer or throws.
   * X-Farm-CSRF tells farm the request comes from its own pages (farm/api/csrf.py). */
  async function post(url) {
    const response = await fetch(url, {method: "POST", credentials: "same-origin",
                                       headers: {Accept: "application/json", "X-Farm-CSRF": "1"}});
    if (response.status === 401) { toLogin(); throw new Error("logged out"); }
    const data = await response.json().catch(() => ({}));
    if (!response.ok) throw new Error(data.error || data.detail || `${response.status} ${response.statusText}`);
    return data;
  }

  /** Fetch the body's data-sources (name -> URL) now and every data-poll-ms, together,
   * calling render({name: data}) once all have answered. */
  function poll(render) {
    const sources = Object.entries(JSON.parse(body.dataset.sources || "{}"));
    const everyMs = Number(body.dataset.pollMs) || 2000;
    if (!sources.length) { status("nothing to show yet"); return () => {}; }
    let timer = null;
    async function tick() {
      timer = null;
      if (!document.hidden) {
        try {
          const answers = await Promise.all(sources.map(([, url]) => getJSON(url)));
          render(Object.fromEntries(sources.map(([name], i) => [name, answers[i]])));
          status("updated " + new Date().toLocaleTimeString());
        } catch (error) {
          status(error.message, true);
        }
      }
      timer = setTimeout(tick, everyMs);
    }
    tick();
    return () => { if (timer !== null) { clearTimeout(timer); tick(); } };  // refresh now
  }

  /** Replace a table's body by rows (arrays of cells); each cell is labelled by its header. */
  function fillTable(table, rows, emptyText) {
    const headers = [...table.querySelectorAll("thead th")].map((th) => th.textContent);
    const tbody = table.querySelector("tbody");
    const built = rows.map((row) => {
      const tr = row.tr || el("tr", {});
      (row.cells || row).forEach((cell, i) => {
        const td = cell instanceof Node && cell.nodeName === "TD" ? cell : el("td", {}, cell);
        td.dataset.label = headers[i] || "";
        tr.append(td);
      });
      return tr;
    });
    if (!built.length) {
      built.push(el("tr", {class: "empty"}, el("td", {colspan: headers.length}, emptyText || "none")));
    }
    tbody.replaceChildren(...built);
  }

  const fmt = {
    time(iso) {
      if (!iso) return "";
      const d = new Date(iso);
      return el("time", {datetime: iso, title: d.toLocaleString()}, d.toLocaleString());
    },
    clock(iso) { return iso ? new Date(iso).toLocaleTimeString() : ""; },
    num(value, digits) {
      return value === null || value === undefined ? "" : Number(value).toFixed(digits ?? 1);
    },
    /** A figure in its unit: seconds are shown in ms. */
    amount(value, unit) {
      if (value === null || value === undefined) return "";
      return unit === "s" ? `${(value * 1e3).toFixed(3)} ms` : `${Number(value).toPrecision(4)} ${unit}`;
    },
    badge(text, cls) { return el("span", {class: `badge s-${cls || text}`}, text); },
    /** A job's state; one a newer farm wrote and this one does not know: "paused (unknown)". */
    jobState(j) {
      return j.unknown_state ? fmt.badge(`${j.unknown_state} (unknown)`, "unknown") : fmt.badge(j.state);
    },
    thermal(status) {
      const names = ["none", "light", "moderate", "severe", "critical", "emergency", "shutdown"];
      return status === null || status === undefined ? "" : `${status} ${names[status] || ""}`;
    },
    /** A value of a reading kept with results, under its column ({name, heading, unit,
     * levels}): "31.5"; a level with its name, "2 moderate". */
    kept(column, value) {
      if (value === null || value === undefined) return "";
      return column.levels.length ? `${value} ${column.levels[value] || ""}` : fmt.num(value, 1);
    },
    /** One reading's value with its declared unit: "31.5 °C", "81 %"; a level with its
     * name, "0 none". */
    reading(v) {
      if (v.value === null || v.value === undefined) return "";
      if (v.levels && v.levels.length) return `${v.value} ${v.levels[v.value] || ""}`;
      const value = Number.isInteger(v.value) ? String(v.value) : Number(v.value).toFixed(1);
      return v.unit ? `${value} ${v.unit}` : value;
    },
    /** Readings as their kind declares them ([{name, label, value, unit, description}]):
     * a list of label and value with its unit, one reading a line; the description and the
     * stored name are the tooltip. */
    readings(values) {
      if (!values.length) return "";
      return el("dl", {class: "readings"}, values.flatMap((v) => {
        const title = v.description ? `${v.description} (${v.name})` : v.name;
        return [el("dt", {title, "data-reading": v.name}, v.label || v.name),
                el("dd", {title, "data-reading": v.name}, fmt.reading(v))];
      }));
    },
    jobLink(id) { return id === null || id === undefined ? "" : el("a", {href: `/jobs/${id}`}, `#${id}`); },
  };

  /** A Chart.js chart that is updated in place (no animation: it is redrawn every poll). */
  function chart(canvasId, config) {
    const canvas = document.getElementById(canvasId);
    config.options = Object.assign({animation: false, responsive: true,
                                    maintainAspectRatio: false}, config.options || {});
    return new Chart(canvas, config);
  }

  const palette = ["#2456a6", "#b3261e", "#1b7f3b", "#a76200", "#6a3fa0", "#00838f", "#8d6e63",
                   "#c2185b"];

  return {el, status, getJSON, post, poll, fillTable, fmt, chart, palette,
          operator: body.dataset.operator === "true"};
})();
