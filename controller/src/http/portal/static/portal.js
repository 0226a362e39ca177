// Cohort portal: the copy buttons. Everything else works as plain forms without script.
"use strict";
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

// Live progress of a provision (or of new limits applied): the operation is polled until it
// ends; during a provision each student's row shows its item's state.
(function () {
  const section = document.getElementById("progress");
  if (!section) return;
  const bar = document.getElementById("progress-bar");
  const text = document.getElementById("progress-text");
  async function poll() {
    const response = await fetch("/progress/" + section.dataset.operation, { cache: "no-store" });
    if (!response.ok) return;
    const op = await response.json();
    bar.max = Math.max(op.progress.total, 1);
    bar.value = op.progress.done;
    text.textContent = op.progress.done + " / " + op.progress.total + " (" + op.status + ")";
    // A provision's items are the students' containers being made; other operations (new
    // limits applied) leave the rows' states to the page.
    for (const item of op.kind === "provision_course" ? op.items : []) {
      const row = document.querySelector('#students tr[data-instance="' + CSS.escape(item.target) + '"] td.state');
      if (row) row.textContent = item.status === "success" ? "ready" : item.status;
    }
    section.dataset.status = op.status;
    if (["pending", "running"].includes(op.status)) setTimeout(poll, 1000);
  }
  poll();
})();
