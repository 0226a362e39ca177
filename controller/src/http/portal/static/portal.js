// Cohort portal: the copy buttons. Everything else works as plain forms without script.
"use strict";

// On a narrow screen a table's head is hidden and each row becomes a card: every cell gets its
// column's heading as `data-label`, which the stylesheet shows before the cell's value. Done here
// once for every table, so a table added to any page is readable on a phone without more work.
function labelCells(root) {
  for (const table of root.querySelectorAll("table")) {
    const heads = table.tHead ? Array.from(table.tHead.rows[0]?.cells || []) : [];
    if (!heads.length) continue;
    for (const body of table.tBodies) {
      for (const row of body.rows) {
        let column = 0;
        for (const cell of row.cells) {
          const head = heads[column];
          if (head && !cell.hasAttribute("data-label")) cell.dataset.label = head.textContent.trim();
          column += cell.colSpan || 1;
        }
      }
    }
  }
}
if (document.readyState === "loading") {
  document.addEventListener("DOMContentLoaded", () => labelCells(document));
} else {
  labelCells(document);
}
document.addEventListener("click", async (event) => {
  const button = event.target.closest("button[data-copy]");
  if (!button) return;
  const source = document.getElementById(button.dataset.copy);
  if (!source) return;
  try {
    await navigator.clipboard.writeText(source.textContent.trim());
    button.textContent = button.dataset.copied;
  } catch (_) {
    // No clipboard (an insecure context or a refused permission): select the text instead.
    const range = document.createRange();
    range.selectNodeContents(source);
    const selection = window.getSelection();
    selection.removeAllRanges();
    selection.addRange(range);
  }
});

// A roster file chosen or dropped fills the roster field, which the plain form then posts.
document.addEventListener("change", async (event) => {
  const input = event.target.closest("input[type=file][data-fills]");
  if (!input || !input.files.length) return;
  document.getElementById(input.dataset.fills).value = await input.files[0].text();
});
document.addEventListener("dragover", (event) => {
  if (event.target.closest("textarea#roster")) event.preventDefault();
});
document.addEventListener("drop", async (event) => {
  const area = event.target.closest("textarea#roster");
  if (!area || !event.dataTransfer.files.length) return;
  event.preventDefault();
  area.value = await event.dataTransfer.files[0].text();
});

// Live progress of a provision, a teardown or new limits applied: the operation is polled until
// it ends. Each student's row shows its item's state (what it became once done, `data-done`), and
// the outcome line counts what succeeded, failed or still waits in the queue and why: a provision
// whose last containers wait for room says so instead of looking stuck. Words come from the
// page (`data-words`), in its language.
(function () {
  const section = document.getElementById("progress");
  if (!section) return;
  const bar = document.getElementById("progress-bar");
  const text = document.getElementById("progress-text");
  const outcome = document.getElementById("progress-outcome");
  const words = JSON.parse(section.dataset.words || "{}");
  const word = (key) => words[key] || key;
  const doneWord = section.dataset.done || "";
  const QUEUED = "queued:";
  const isFinal = (status) => ["success", "failure", "cancelled"].includes(status);
  const reasonOf = (item) =>
    !isFinal(item.status) && (item.error || "").startsWith(QUEUED) ? item.error.slice(QUEUED.length).trim() : null;

  function showRow(item) {
    const cell = document.querySelector('#students tr[data-instance="' + CSS.escape(item.target) + '"] td.state');
    if (!cell) return;
    const reason = reasonOf(item);
    // Still queued as the page was rendered: the page's own reason is in the reader's language.
    if (reason !== null && cell.dataset.state === "queued") return;
    let state = item.status === "success" ? doneWord : reason !== null ? word("queued") : word(item.status);
    if (item.status === "failure" && item.error) state += ": " + item.error;
    cell.textContent = state;
    if (reason) {
      const why = document.createElement("span");
      why.className = "queue-reason";
      why.textContent = reason;
      cell.append(document.createElement("br"), why);
    }
  }

  async function poll() {
    const response = await fetch("/progress/" + section.dataset.operation, { cache: "no-store" });
    if (!response.ok) return;
    const op = await response.json();
    bar.max = Math.max(op.progress.total, 1);
    bar.value = op.progress.done;
    text.textContent = op.progress.done + " / " + op.progress.total + " (" + word(op.status) + ")";
    if (doneWord) op.items.forEach(showRow);
    const count = (test) => op.items.filter(test).length;
    const succeeded = count((i) => i.status === "success");
    const failed = count((i) => i.status === "failure");
    const cancelled = count((i) => i.status === "cancelled");
    const queued = count((i) => reasonOf(i) !== null);
    const parts = [];
    if (succeeded) parts.push(succeeded + " " + (doneWord || word("success")));
    if (failed) parts.push(failed + " " + word("failed"));
    if (cancelled) parts.push(cancelled + " " + word("cancelled"));
    if (queued) parts.push(queued + " " + word("queued"));
    // Running, with every unfinished item waiting for room: this is where it stays for now.
    const waiting = !isFinal(op.status) && queued > 0 && queued === count((i) => !isFinal(i.status));
    outcome.textContent = parts.join(" · ") + (waiting ? " — " + word("waiting") : "");
    section.dataset.outcome = isFinal(op.status) ? op.status : waiting ? "waiting" : "";
    section.dataset.status = op.status;
    if (!isFinal(op.status)) setTimeout(poll, waiting ? 5000 : 1000);
  }
  poll();
})();

// A dataset upload: the chosen file is sent as the request's body (streamed by the browser, so
// several GB go through), with a progress bar, and the answer's refusal shown at its field.
document.addEventListener("submit", (event) => {
  const form = event.target.closest("form#dataset-upload");
  if (!form) return;
  event.preventDefault();
  const name = form.querySelector("#dataset-name").value.trim();
  const file = form.querySelector("#dataset-file").files[0];
  if (!file) return;
  const bar = form.querySelector("#dataset-progress");
  const status = form.querySelector("#dataset-status");
  const button = form.querySelector("#dataset-upload-button");
  for (const error of form.querySelectorAll("p.error")) {
    error.hidden = true;
    error.textContent = "";
  }
  const xhr = new XMLHttpRequest();
  xhr.open("POST", form.action + "?name=" + encodeURIComponent(name));
  xhr.setRequestHeader("x-cohort-csrf", form.dataset.csrf);
  xhr.setRequestHeader("content-type", "application/x-tar");
  bar.hidden = false;
  bar.value = 0;
  status.textContent = form.dataset.sending;
  button.disabled = true;
  xhr.upload.onprogress = (e) => {
    if (e.lengthComputable && e.total > 0) bar.value = e.loaded / e.total;
  };
  const refused = (message, field) => {
    const at = form.querySelector("#dataset-" + field + "-error") || form.querySelector("#dataset-form-error");
    at.textContent = message;
    at.hidden = false;
    status.textContent = "";
    button.disabled = false;
  };
  xhr.onload = () => {
    if (xhr.status === 201) {
      bar.value = 1;
      status.textContent = form.dataset.done;
      window.setTimeout(() => window.location.reload(), 1500);
      return;
    }
    let error = {};
    try {
      error = JSON.parse(xhr.responseText).error || {};
    } catch (_) {}
    refused(error.message || xhr.statusText || String(xhr.status), error.field || "form");
  };
  xhr.onerror = () => refused(xhr.statusText || "the upload failed", "form");
  xhr.send(file);
});

// A batch job's output, tailed while it runs: read from the last offset every second (at once
// again while there is more). A job that ends while the page is open reloads the page once, to
// show its exit code; a job over already is read to its end. A refusal (the container stopped)
// ends the tail with its message.
(function () {
  const pre = document.getElementById("job-log");
  if (!pre) return;
  let offset = 0;
  async function poll() {
    let response;
    try {
      response = await fetch("/jobs/" + pre.dataset.job + "/log?offset=" + offset, { cache: "no-store" });
    } catch (_) {
      setTimeout(poll, 3000);
      return;
    }
    if (!response.ok) {
      let message = String(response.status);
      try {
        message = (await response.json()).error.message || message;
      } catch (_) {}
      pre.dataset.error = message;
      pre.append("\n[" + message + "]");
      return;
    }
    const log = await response.json();
    pre.append(log.text);
    offset = log.next_offset;
    const read = log.next_offset > log.offset;
    if (log.done && !read) {
      if (pre.dataset.done !== "true") window.location.reload();
      pre.dataset.ended = "true";
      return;
    }
    setTimeout(poll, read ? 100 : 1000);
  }
  poll();
})();
