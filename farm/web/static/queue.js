/* The queue page: running, queued (with why each waits) and recently ended jobs. */
"use strict";

(() => {
  const {el, fmt} = farm;

  function render({view: data}) {
    farm.fillTable(document.getElementById("running"), data.running.map((j) => ({
      tr: el("tr", {"data-job": j.id}),
      cells: [fmt.jobLink(j.id), j.kind, (j.serials || []).join(", "), j.host || "",
              fmt.time(j.started_at), `${j.attempts_made}/${j.attempts_max}`, j.owner || ""]})),
      "nothing runs");
    farm.fillTable(document.getElementById("queued"), data.queued.map((j) => ({
      tr: el("tr", {"data-job": j.id}),
      cells: [fmt.jobLink(j.id), j.kind, j.priority, fmt.time(j.submitted_at),
              el("td", {class: "c-waiting"}, j.waiting || ""), j.owner || ""]})),
      "the queue is empty");
    farm.fillTable(document.getElementById("ended"), data.ended.map((j) => ({
      tr: el("tr", {"data-job": j.id}),
      cells: [fmt.jobLink(j.id), j.kind, fmt.badge(j.state), fmt.time(j.finished_at),
              `${j.attempts_made}/${j.attempts_max}`, j.error || ""]})),
      "no job ended yet");
    document.getElementById("running-count").textContent = `${data.running.length}`;
    document.getElementById("queued-count").textContent = `${data.queued.length}`;
  }

  farm.poll(render);
})();
