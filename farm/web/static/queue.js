/* The queue page: running, queued (with why each waits) and recently ended jobs.
 * Jobs come from the API's /api/v1/jobs ({job, waiting}); a running job's phones and host
 * from /api/v1/devices (each device names the job it runs). */
"use strict";

(() => {
  const {el, fmt} = farm;

  function render({running, queued, ended, devices}) {
    const phones = {};
    for (const d of devices) {
      if (d.job_id !== null && d.job_id !== undefined) (phones[d.job_id] ||= []).push(d);
    }
    /** The kind and what it measures: "tune · gemm n=512 float32". */
    const what = (j, workload) => el("td", {class: "c-what"}, j.kind,
      workload ? el("span", {class: "reason"}, workload) : "");
    farm.fillTable(document.getElementById("running"), running.map(({job: j, workload}) => {
      const mine = phones[j.id] || [];
      return {tr: el("tr", {"data-job": j.id}),
              cells: [fmt.jobLink(j.id), what(j, workload), mine.map((d) => d.serial).join(", "),
                      [...new Set(mine.map((d) => d.host).filter(Boolean))].join(", "),
                      fmt.time(j.submitted_at), `${j.attempts_made}/${j.attempts_max}`,
                      j.owner || ""]};
    }), "nothing runs");
    // Oldest first: the order they are served in at equal priority.
    farm.fillTable(document.getElementById("queued"), [...queued].reverse().map(({job: j, waiting, workload}) => ({
      tr: el("tr", {"data-job": j.id}),
      cells: [fmt.jobLink(j.id), what(j, workload), j.priority, fmt.time(j.submitted_at),
              el("td", {class: "c-waiting"}, waiting || ""), j.owner || ""]})),
      "the queue is empty");
    farm.fillTable(document.getElementById("ended"), ended.map(({job: j, workload}) => ({
      tr: el("tr", {"data-job": j.id}),
      cells: [fmt.jobLink(j.id), what(j, workload), fmt.jobState(j), fmt.time(j.finished_at),
              `${j.attempts_made}/${j.attempts_max}`, j.error || ""]})),
      "no job ended yet");
    document.getElementById("running-count").textContent = `${running.length}`;
    document.getElementById("queued-count").textContent = `${queued.length}`;
  }

  farm.poll(render);
})();
