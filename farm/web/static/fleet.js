/* The fleet page: every phone and board, redrawn from /api/v1/dashboard/fleet. */
"use strict";

(() => {
  const {el, fmt} = farm;
  const table = document.getElementById("fleet");
  let refresh = () => {};

  function incidents(list) {
    if (!list.length) return el("span", {class: "muted"}, "none");
    return el("ul", {class: "incidents"}, list.map((e) => el("li", {},
      el("time", {datetime: e.at}, fmt.clock(e.at)), " ",
      `${e.from_state || "-"} → ${e.to_state}`, e.reason ? ` (${e.reason})` : "")));
  }

  function reservation(d) {
    const r = d.reservation;
    if (!r) return "";
    return el("span", {}, r.owner || "reserved",
              r.expires_at ? el("span", {class: "reason"}, "until ", fmt.clock(r.expires_at)) : "");
  }

  function action(serial, name) {
    const button = el("button", {type: "button", "data-action": name}, name);
    button.addEventListener("click", async () => {
      button.disabled = true;
      try {
        await farm.post(`/api/v1/devices/${encodeURIComponent(serial)}/${name}`);
        farm.status(`${serial}: ${name} done`);
        refresh();
      } catch (error) {
        farm.status(`${serial}: ${name} refused: ${error.message}`, true);
      } finally {
        button.disabled = false;
      }
    });
    return button;
  }

  function actions(d) {
    const td = el("td", {class: "actions"});
    td.append(action(d.serial, d.drained ? "undrain" : "drain"));
    if (d.state === "quarantined") td.append(action(d.serial, "release"));
    return td;
  }

  /** The state as farmctl devices shows it (its shown_state where the row carries one). */
  function shownState(d) {
    if (d.shown_state) return d.shown_state;
    if (d.state === "busy" && d.drained) return "draining";
    return d.state + (d.drained ? " (drained)" : "") + (d.held_outside ? " (held outside)" : "");
  }

  function row(d, events) {
    const facts = d.facts || {};
    const device = [d.kind && d.kind !== "android" ? d.kind : "", facts.model, facts.soc, facts.abi,
                    facts.emulated ? "emulated" : "", d.host ? `@${d.host}` : ""].filter(Boolean).join(" · ");
    const cells = [
      el("td", {class: "serial"},
         el("a", {href: `/devices/${encodeURIComponent(d.serial)}`}, el("strong", {}, d.serial))),
      el("td", {class: "c-state"},
         fmt.badge(shownState(d), d.unreachable ? "unreachable" : d.state),
         d.held_outside ? el("span", {class: "reason"}, d.held_outside) : ""),
      el("td", {class: "c-health"}, fmt.badge(d.health),
         d.health_reason ? el("span", {class: "reason"}, d.health_reason) : ""),
      el("td", {class: "c-readings"}, fmt.readings((d.values || []).filter((v) => v.gates)),
         d.stale && d.sampled_at ? el("span", {class: "reason stale"}, "stale, ", fmt.clock(d.sampled_at)) : ""),
      el("td", {}, device),
      el("td", {class: "c-reservation"}, reservation(d)),
      el("td", {class: "c-job"}, fmt.jobLink(d.job_id)),
      el("td", {class: "c-incidents"}, incidents(events || [])),
    ];
    if (farm.operator) cells.push(actions(d));
    return {tr: el("tr", {"data-serial": d.serial, "data-state": d.state}), cells};
  }

  /** What a device is grouped and filtered by: state, model, SoC, host, owner (its reservation's). */
  function fields(d) {
    const facts = d.facts || {};
    return {state: d.unreachable ? "unreachable" : d.state, model: facts.model || "",
            soc: facts.soc || "", host: d.host || "",
            owner: (d.reservation && d.reservation.owner) || ""};
  }

  const controls = {
    text: document.getElementById("filter"),
    state: document.getElementById("state-filter"),
    group: document.getElementById("group-by"),
    offline: document.getElementById("show-offline"),
  };
  let last = null;

  function shown(d) {
    const f = fields(d);
    if (!controls.offline.checked && d.stale) return false;
    if (controls.state.value && f.state !== controls.state.value) return false;
    const words = controls.text.value.trim().toLowerCase().split(/\s+/).filter(Boolean);
    const text = [d.serial, shownState(d), f.model, f.soc, f.host, f.owner, d.kind]
      .join(" ").toLowerCase();
    return words.every((w) => text.includes(w));
  }

  function stateOptions(devices) {
    const states = [...new Set(devices.map((d) => fields(d).state))].sort();
    const have = [...controls.state.options].map((o) => o.value);
    for (const s of states) if (!have.includes(s)) controls.state.append(el("option", {value: s}, s));
  }

  function render(data) {
    last = data;
    const {devices, incidents: events} = data;
    stateOptions(devices);
    const visible = devices.filter(shown);
    const by = controls.group.value;
    const rows = [];
    const columns = table.querySelectorAll("thead th").length;
    if (by) {
      const groups = new Map();
      for (const d of visible) {
        const key = fields(d)[by] || "(none)";
        if (!groups.has(key)) groups.set(key, []);
        groups.get(key).push(d);
      }
      for (const key of [...groups.keys()].sort()) {
        const members = groups.get(key);
        rows.push({tr: el("tr", {class: "group", "data-group": key}),
                   cells: [el("td", {colspan: columns}, `${by} ${key} (${members.length})`)]});
        for (const d of members) rows.push(row(d, events[d.serial]));
      }
    } else {
      for (const d of visible) rows.push(row(d, events[d.serial]));
    }
    farm.fillTable(table, rows, devices.length ? "no device matches the filter" : "no phones known yet");
    const hidden = devices.filter((d) => d.stale).length;
    document.getElementById("hidden-count").textContent =
      hidden && !controls.offline.checked ? `(${hidden} hidden)` : "";
    const counts = {};
    for (const d of devices) counts[d.state] = (counts[d.state] || 0) + 1;
    document.getElementById("summary").textContent =
      `${devices.length} devices: ` +
      Object.entries(counts).map(([state, n]) => `${n} ${state}`).join(", ");
  }

  // The filters only redraw the table: Enter in the text box must not submit the form (a
  // reload of "/?" that clears it). A listener here, not an inline onsubmit, which the
  // pages' Content-Security-Policy (script-src 'self') refuses to run.
  document.getElementById("filters").addEventListener("submit", (event) => {
    event.preventDefault();
    if (last) render(last);
  });
  for (const control of Object.values(controls)) {
    control.addEventListener("input", () => last && render(last));
    control.addEventListener("change", () => last && render(last));
  }
  refresh = farm.poll(render);
})();
