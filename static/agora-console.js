/*
 * The staff console (GET /console; gateway/_console.py). Plain JS, no build step.
 *
 * The page comes rendered with the approvals and runs of the moment (#console-data). This script
 * gives each approval its Approve / Reject controls, then keeps the page live over the web socket's
 * approval feed: `hello {token, watch_approvals: true}` brings `approval-pending` for each new
 * approval this staff member may decide (and, at once, for those waiting already) and
 * `approval-closed` when one stops waiting, decided here, elsewhere or by expiry. Decisions go
 * through POST /agent/tool-call/approve and /reject; the runs are re-read from GET /console/runs
 * when an approval comes or goes. Every change is announced in the polite live region.
 */
(() => {
  "use strict";

  const token = document.body.dataset.token;
  const data = JSON.parse(document.getElementById("console-data").textContent);
  const list = document.getElementById("approval-list");
  const empty = document.getElementById("no-approvals");
  const count = document.getElementById("approval-count");
  const rows = document.getElementById("run-rows");
  const status = document.getElementById("connection");
  const announcer = document.getElementById("announcer");
  const approvals = new Map(data.approvals.map((a) => [a.tool_call_id, a]));
  const auth = { Authorization: `Bearer ${token}` };

  // The token came in the address: keep it out of the history and of anything copied from the bar.
  if (new URL(location.href).searchParams.has("token")) history.replaceState(null, "", location.pathname);

  const el = (tag, props = {}, ...children) => {
    const node = Object.assign(document.createElement(tag), props);
    node.append(...children.filter((c) => c !== null && c !== undefined));
    return node;
  };

  const announce = (text) => {
    announcer.textContent = "";
    // A fresh text node after a tick: screen readers announce the change even when it repeats.
    setTimeout(() => { announcer.textContent = text; }, 30);
  };

  const when = (iso) => {
    const date = new Date(iso);
    return Number.isNaN(date.getTime()) ? iso : date.toLocaleString();
  };

  async function decide(approval, approve, reason, card) {
    const buttons = card.querySelectorAll("button, textarea");
    buttons.forEach((b) => { b.disabled = true; });
    const path = approve ? "/agent/tool-call/approve" : "/agent/tool-call/reject";
    const body = approve ? { tool_call_id: approval.tool_call_id } : { tool_call_id: approval.tool_call_id, reason: reason || null };
    const problem = card.querySelector(".ac-problem");
    try {
      const response = await fetch(path, {
        method: "POST",
        headers: { ...auth, "Content-Type": "application/json" },
        body: JSON.stringify(body),
      });
      const answer = await response.json().catch(() => ({}));
      if (!response.ok) throw new Error(answer.message || `The gateway answered ${response.status}`);
      closed(approval.tool_call_id, answer.status);
    } catch (error) {
      problem.textContent = `Not decided: ${error.message}`;
      problem.hidden = false;
      buttons.forEach((b) => { b.disabled = false; });
      card.querySelector("button").focus();
    }
  }

  function card(approval) {
    const titleId = `title-${approval.tool_call_id}`;
    const reasonId = `reason-${approval.tool_call_id}`;
    const node = el("li", { className: "ac-approval" });
    if (approval.tone === "destructive") node.classList.add("ac-approval--destructive");
    node.dataset.id = approval.tool_call_id;
    node.setAttribute("aria-labelledby", titleId);
    const facts = el("dl", { className: "ac-facts" });
    for (const [label, value] of [
      ["Requester", approval.requester.id],
      ["Channel", approval.channel || "unknown"],
      ["Tool", approval.tool],
      ["Requested", when(approval.requested_at)],
      ["Expires", when(approval.expires_at)],
    ]) facts.append(el("dt", { textContent: label }), el("dd", { textContent: value }));
    const verb = approval.confirmation.verb || "Approve";
    const approveButton = el("button", { type: "button", className: "ac-btn ac-btn--primary", textContent: verb });
    if (approval.tone === "destructive") approveButton.classList.add("ac-btn--danger");
    const rejectButton = el("button", { type: "button", className: "ac-btn", textContent: "Reject…" });
    const reason = el("textarea", { id: reasonId, className: "ac-reason", rows: 2, maxLength: 500 });
    const reasonBox = el(
      "div",
      { className: "ac-reject", hidden: true },
      el("label", { htmlFor: reasonId, textContent: "Reason (the requester is told)" }),
      reason,
      el("div", { className: "ac-actions" },
        el("button", { type: "button", className: "ac-btn ac-btn--danger", textContent: "Reject" }),
        el("button", { type: "button", className: "ac-btn", textContent: "Back" })),
    );
    const [confirmReject, back] = reasonBox.querySelectorAll("button");
    approveButton.addEventListener("click", () => decide(approval, true, null, node));
    rejectButton.addEventListener("click", () => {
      reasonBox.hidden = false;
      rejectButton.setAttribute("aria-expanded", "true");
      reason.focus();
    });
    back.addEventListener("click", () => {
      reasonBox.hidden = true;
      rejectButton.setAttribute("aria-expanded", "false");
      rejectButton.focus();
    });
    confirmReject.addEventListener("click", () => decide(approval, false, reason.value.trim(), node));
    reason.addEventListener("keydown", (event) => {
      if (event.key === "Escape") back.click();
      if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) confirmReject.click();
    });
    rejectButton.setAttribute("aria-expanded", "false");
    rejectButton.setAttribute("aria-controls", reasonId);
    node.append(
      el("h3", { id: titleId, textContent: approval.confirmation.title }),
      approval.confirmation.detail ? el("p", { className: "ac-detail", textContent: approval.confirmation.detail }) : null,
      facts,
      el("div", { className: "ac-actions" }, approveButton, rejectButton),
      reasonBox,
      el("p", { className: "ac-problem", hidden: true, role: "alert" }),
    );
    return node;
  }

  function renderCount() {
    count.textContent = String(approvals.size);
    empty.hidden = approvals.size > 0;
  }

  function renderApprovals() {
    list.replaceChildren(...[...approvals.values()].map(card));
    renderCount();
  }

  function pending(approval) {
    if (approvals.has(approval.tool_call_id)) return;
    approvals.set(approval.tool_call_id, approval);
    list.prepend(card(approval)); // newest first
    renderCount();
    announce(`New approval waiting: ${approval.confirmation.title}, asked by ${approval.requester.id}`);
    refreshRuns();
  }

  function closed(toolCallId, outcome) {
    const approval = approvals.get(toolCallId);
    if (!approval) return;
    approvals.delete(toolCallId);
    const node = list.querySelector(`[data-id="${CSS.escape(toolCallId)}"]`);
    const hadFocus = node && node.contains(document.activeElement);
    if (node) node.remove();
    renderCount();
    if (hadFocus) (list.querySelector("button") || document.getElementById("approvals")).focus();
    announce(`${approval.confirmation.title}: ${outcome || "closed"}`);
    refreshRuns();
  }

  function renderRuns(runs) {
    rows.replaceChildren(...runs.map((run) => {
      const row = el("tr");
      row.dataset.run = run.run_id;
      const state = el("span", { className: `ac-status ac-status--${run.status}`, textContent: run.status });
      row.append(
        el("td", {}, el("time", { dateTime: run.created_at, textContent: when(run.created_at) })),
        el("td", { textContent: run.requester }),
        el("td", { textContent: run.channel || "" }),
        el("td", { textContent: run.text }),
        el("td", {}, state),
      );
      return row;
    }));
  }

  let refreshing = null;
  async function refreshRuns() {
    if (refreshing) return refreshing;
    refreshing = (async () => {
      try {
        const response = await fetch("/console/runs", { headers: auth });
        if (response.ok) renderRuns((await response.json()).runs);
      } finally {
        refreshing = null;
      }
    })();
    return refreshing;
  }

  /** Drop the approvals that stopped waiting while the page was offline (the feed resends the rest). */
  async function reconcile() {
    const response = await fetch("/agent/approvals?limit=100", { headers: auth });
    if (!response.ok) return;
    const waiting = new Set((await response.json()).approvals.map((a) => a.tool_call_id));
    for (const id of [...approvals.keys()]) if (!waiting.has(id)) closed(id, "closed");
  }

  let retry = 500;
  let reconnected = false;
  function connect() {
    const scheme = location.protocol === "https:" ? "wss" : "ws";
    const socket = new WebSocket(`${scheme}://${location.host}/agent/ws`);
    socket.addEventListener("open", () => {
      socket.send(JSON.stringify({ type: "hello", token, watch_approvals: true }));
    });
    socket.addEventListener("message", (message) => {
      const frame = JSON.parse(message.data);
      if (frame.type === "welcome") {
        if (reconnected) reconcile(); // what closed while the connection was down
        reconnected = true;
        retry = 500;
        status.textContent = "Live";
        status.dataset.state = "live";
      } else if (frame.type === "approval-pending") {
        pending(frame.approval);
      } else if (frame.type === "approval-closed") {
        closed(frame.tool_call_id, frame.status);
      } else if (frame.type === "error" && frame.code === "watch_forbidden") {
        status.textContent = frame.message;
      }
    });
    socket.addEventListener("close", () => {
      status.textContent = "Reconnecting…";
      status.dataset.state = "offline";
      setTimeout(connect, retry);
      retry = Math.min(retry * 2, 15000);
    });
  }

  renderApprovals();
  renderRuns(data.runs);
  connect();
  document.body.dataset.ready = "true";
})();
