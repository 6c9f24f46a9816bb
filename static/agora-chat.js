/*!
 * <agora-chat>: the web chat widget of agora-gateway.
 *
 * One classic script, no dependencies, no build step:
 *
 *   <script src="https://your-gateway/static/agora-chat.js" defer></script>
 *   <agora-chat title="Support" token="…"></agora-chat>
 *
 * It talks to the gateway over one web socket (`/agent/ws`, see channels/web/_socket.py):
 * `hello` first (thread id, last seen seq, capabilities, token), then `send`, `approve`,
 * `reject` and `cancel`. The server answers with `welcome`, then every event of the thread,
 * each with its `seq`, replayed from `after_seq` and then live.
 *
 * Attributes
 *   endpoint (alias src)  ws(s) URL of the socket; default: same origin, `/agent/ws`
 *   token                 a signed actor token (sent in `hello`); setting a new one after the
 *                         gateway refused the old one reconnects
 *   thread                a fixed thread id (default: one the gateway makes, remembered)
 *   title                 the panel's heading (default "Assistant")
 *   theme                 "light" | "dark" (default: the system's preference)
 * Properties and methods
 *   threadId (read-only), title, pageContext (object, or function returning one, sent with
 *   each message), send(text, pageContext?) -> boolean, newConversation(), focusInput()
 * Events (bubbling, composed; `detail` shown)
 *   agora-status   {state: "connecting" | "online" | "reconnecting" | "offline"}
 *   agora-welcome  {thread_id, actor, agent, demo}
 *   agora-event    the event frame, for every event shown (run-started, text-delta, ui…)
 *   agora-error    {code, message, id}
 * Styling: custom properties on the element (`--ac-accent`, `--ac-bg`, `--ac-font`… see
 *   agora-chat.css) and `::part(panel)`.
 *
 * The thread id, the last seen seq and the events already shown are kept in localStorage, keyed
 * by the endpoint (and thread): a reload shows them at once and asks only for what came after;
 * a dropped socket reconnects with backoff and replays exactly what it missed.
 *
 * Safety: model text is only ever inserted as text nodes (a tiny markdown subset is built with
 * DOM calls). The only HTML inserted is what the server rendered for a component: it is
 * produced from autoescaped templates, sanitized and namespaced (`ag-` classes) server-side,
 * and goes through an inert <template>, so nothing in it runs.
 */
(() => {
  "use strict";

  if (customElements.get("agora-chat")) return;

  /**
   * Where this script was loaded from: its stylesheets sit beside it. A module script has no
   * `currentScript`; then the script element that loaded us is found by name, and failing that
   * each element uses its endpoint's `/static/` (see `assetUrl`).
   */
  const SCRIPT_URL =
    document.currentScript?.src ||
    [...document.querySelectorAll("script[src]")]
      .map((script) => script.src)
      .findLast((src) => /\/agora-chat\.js(?:[?#]|$)/.test(src)) ||
    null;
  const STORAGE_PREFIX = "agora-chat:v1:";
  /** Characters of cached transcript per conversation; beyond it a reload replays from the server. */
  const CACHE_LIMIT = 1_500_000;
  const BACKOFF_FIRST_MS = 500;
  const BACKOFF_MAX_MS = 15_000;
  const MAX_TEXT = 8000;
  const DEMO_BADGE = "Demo model — rule-based, offline";

  // Close codes of channels/web/_socket.py.
  const CLOSE_BAD_HELLO = 4400;
  const CLOSE_UNAUTHENTICATED = 4401;
  const CLOSE_FORBIDDEN = 4403;

  // -- icons: our own inline SVG (24x24, stroked with currentColor) --------------------------------

  const ICON_PATHS = {
    weather:
      '<circle cx="8" cy="8" r="3"/><path d="M8 2v1.5M2 8h1.5M3.8 3.8l1 1M12.2 3.8l-1 1"/><path d="M10 20h7.5a3.5 3.5 0 0 0 0-7 5 5 0 0 0-9.6 1.6A2.8 2.8 0 0 0 10 20z"/>',
    orders: '<path d="M3 7.5 12 3l9 4.5v9L12 21l-9-4.5z"/><path d="m3 7.5 9 4.5 9-4.5M12 12v9"/>',
    chart: '<path d="M4 20V4M4 20h16"/><rect x="7" y="11" width="3" height="6" rx="0.5"/><rect x="12" y="7" width="3" height="10" rx="0.5"/><rect x="17" y="13" width="3" height="4" rx="0.5"/>',
    document: '<path d="M14 3H7a2 2 0 0 0-2 2v14a2 2 0 0 0 2 2h10a2 2 0 0 0 2-2V8z"/><path d="M14 3v5h5M9 13h6M9 17h6"/>',
    refund: '<path d="M3 12a9 9 0 1 0 3-6.7L3 8"/><path d="M3 3v5h5"/><path d="M12 8v8M14.5 9.5h-3.2a1.6 1.6 0 0 0 0 3.2h1.4a1.6 1.6 0 0 1 0 3.2H9.5"/>',
    subscription: '<path d="M17 2l4 4-4 4"/><path d="M3 11V9a3 3 0 0 1 3-3h15M7 22l-4-4 4-4"/><path d="M21 13v2a3 3 0 0 1-3 3H3"/>',
    tool: '<path d="M14.7 6.3a4 4 0 0 0-5.4 5.1L3.6 17.1a1.6 1.6 0 0 0 2.3 2.3l5.7-5.7a4 4 0 0 0 5.1-5.4l-2.5 2.5-2.3-.4-.4-2.3z"/>',
    check: '<path d="m5 12.5 4.5 4.5L19 7.5"/>',
    cross: '<path d="M6 6l12 12M18 6 6 18"/>',
    warning: '<path d="M10.3 3.9 2.4 17.5A2 2 0 0 0 4.1 20.5h15.8a2 2 0 0 0 1.7-3L13.7 3.9a2 2 0 0 0-3.4 0z"/><path d="M12 9v4.5M12 17h.01"/>',
    shield: '<path d="M12 3 4.5 6v5.5c0 4.6 3.2 8.3 7.5 9.5 4.3-1.2 7.5-4.9 7.5-9.5V6z"/><path d="m9 12 2 2 4-4"/>',
    send: '<path d="M12 19V5M5.5 11.5 12 5l6.5 6.5"/>',
    stop: '<rect x="7" y="7" width="10" height="10" rx="1.5" fill="currentColor" stroke="none"/>',
    plus: '<path d="M12 5v14M5 12h14"/>',
    spark: '<path d="M12 3l1.9 5.6L19.5 10.5l-5.6 1.9L12 18l-1.9-5.6L4.5 10.5l5.6-1.9z"/><path d="M19 16l.8 2.2L22 19l-2.2.8L19 22l-.8-2.2L16 19l2.2-.8z"/>',
    arrowDown: '<path d="M12 5v14M5.5 12.5 12 19l6.5-6.5"/>',
    retry: '<path d="M20 11a8 8 0 1 0-2.3 5.7"/><path d="M20 4v7h-7"/>',
  };

  /** An icon element (decorative: hidden from assistive technology). Only our constants are parsed. */
  function icon(name, className = "ac-icon") {
    const template = document.createElement("template");
    template.innerHTML =
      `<svg class="${className}" viewBox="0 0 24 24" fill="none" stroke="currentColor" stroke-width="1.8" ` +
      `stroke-linecap="round" stroke-linejoin="round" aria-hidden="true" focusable="false">` +
      `${ICON_PATHS[name] || ICON_PATHS.tool}</svg>`;
    return template.content.firstChild;
  }

  /** `h("p", {class: "x"}, "text", node)`: a small element builder; strings become text nodes. */
  function h(tag, attrs = {}, ...children) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(attrs)) {
      if (value === false || value === null || value === undefined) continue;
      if (key === "class") node.className = value;
      else if (key === "text") node.textContent = value;
      else node.setAttribute(key, value === true ? "" : String(value));
    }
    node.append(...children.filter((child) => child !== null && child !== undefined && child !== false));
    return node;
  }

  // -- the assistant's text: escaped, with a tiny markdown subset ---------------------------------

  // **bold**, *bold*, _italic_ (not inside words), `code`.
  const INLINE = /\*\*([^*\n]+?)\*\*|\*([^*\s](?:[^*\n]*?[^*\s])?)\*|(?<![\p{L}\p{N}_])_([^_\s](?:[^_\n]*?[^_\s])?)_(?![\p{L}\p{N}_])|`([^`\n]+)`/gu;
  const LIST_ITEM = /^\s*[-•]\s+(.*)$/;

  function appendInline(parent, text) {
    let last = 0;
    for (const match of text.matchAll(INLINE)) {
      if (match.index > last) parent.append(text.slice(last, match.index));
      const [, strong2, strong1, em, code] = match;
      if (strong2 !== undefined || strong1 !== undefined) parent.append(h("strong", {}, strong2 ?? strong1));
      else if (em !== undefined) parent.append(h("em", {}, em));
      else parent.append(h("code", {}, code));
      last = match.index + match[0].length;
    }
    if (last < text.length) parent.append(text.slice(last));
  }

  /** Model text -> DOM: paragraphs, line breaks, `- ` lists and inline emphasis; never HTML. */
  function richText(text) {
    const fragment = document.createDocumentFragment();
    let paragraph = null;
    let list = null;
    for (const line of String(text).replace(/\r\n?/g, "\n").split("\n")) {
      const item = LIST_ITEM.exec(line);
      if (item) {
        paragraph = null;
        if (!list) fragment.append((list = h("ul")));
        const li = h("li");
        appendInline(li, item[1]);
        list.append(li);
        continue;
      }
      list = null;
      if (!line.trim()) {
        paragraph = null;
        continue;
      }
      if (paragraph) paragraph.append(h("br"));
      else fragment.append((paragraph = h("p")));
      appendInline(paragraph, line);
    }
    return fragment;
  }

  // -- the transcript cache: what a reload shows before asking the server for the rest ------------

  /**
   * Keeps `{thread_id, seq, frames, users}` in localStorage, keyed by the endpoint (and the fixed
   * thread, if any). `frames` are the events already shown, so a reload renders them at once and
   * asks only for what came after `seq`; `users` maps run ids to what the person typed (the
   * event log does not carry it). Storage failures (quota, privacy mode) only cost a full replay.
   */
  /** The `id` (or `sub`) claim of an actor token, read without verifying it (only for naming). */
  function tokenSubject(token) {
    if (!token) return "";
    try {
      const part = token.split(".")[1].replace(/-/g, "+").replace(/_/g, "/");
      const claims = JSON.parse(atob(part + "=".repeat((4 - (part.length % 4)) % 4)));
      return String(claims.id ?? claims.sub ?? "");
    } catch {
      return "";
    }
  }

  class TranscriptCache {
    constructor(key) {
      this.key = STORAGE_PREFIX + key;
    }

    load() {
      try {
        const data = JSON.parse(localStorage.getItem(this.key) || "null");
        if (!data || typeof data.thread_id !== "string") return null;
        return {
          thread_id: data.thread_id,
          seq: Number.isInteger(data.seq) ? data.seq : 0,
          frames: Array.isArray(data.frames) ? data.frames : [],
          users: data.users && typeof data.users === "object" ? data.users : {},
        };
      } catch {
        return null;
      }
    }

    save({ thread_id, seq, frames, users }) {
      // Deltas of finished messages are redundant: `text-end` carries the whole text.
      const ended = new Set(frames.filter((f) => f.type === "text-end").map((f) => f.message_id));
      const kept = frames.filter((f) => f.type !== "text-delta" || !ended.has(f.message_id));
      let json = JSON.stringify({ thread_id, seq, frames: kept, users });
      if (json.length > CACHE_LIMIT) json = JSON.stringify({ thread_id, seq: 0, frames: [], users });
      try {
        localStorage.setItem(this.key, json);
      } catch {
        try {
          localStorage.setItem(this.key, JSON.stringify({ thread_id, seq: 0, frames: [], users }));
        } catch {
          /* storage unavailable: a reload replays the whole thread */
        }
      }
    }

    clear() {
      try {
        localStorage.removeItem(this.key);
      } catch {
        /* nothing to clear */
      }
    }
  }

  // -- helpers over events ------------------------------------------------------------------------

  function approvalOutcome(frame, actorId) {
    const by = frame.decided_by && frame.decided_by !== actorId ? ` by ${frame.decided_by}` : "";
    if (frame.via === "superseded") return "Skipped: the conversation moved on.";
    if (frame.via === "cancelled") return "Withdrawn: the run was stopped.";
    switch (frame.status) {
      case "approved":
        return `Approved${by || " by you"}.`;
      case "rejected":
        return `Rejected${by || " by you"}.`;
      default:
        return "Expired before anyone decided.";
    }
  }

  /** "Expires in 24 h", "Expires in 5 min": relative, refreshed while the card waits. */
  function formatExpiry(iso, now = Date.now()) {
    const at = new Date(iso).getTime();
    if (Number.isNaN(at)) return "";
    const minutes = Math.round((at - now) / 60_000);
    if (minutes <= 0) return "Expired: ask again to go ahead";
    if (minutes < 60) return `Expires in ${minutes} min`;
    const hours = Math.round(minutes / 60);
    if (hours < 48) return `Expires in ${hours} h`;
    return `Expires on ${new Date(at).toLocaleDateString([], { month: "short", day: "numeric" })}`;
  }

  /** "70092.0 EUR" -> "€70,092.00"; "3 items" -> "3 items"; anything else as it is. */
  function formatValue(value) {
    const text = String(value);
    const match = /^(-?\d+(?:\.\d+)?)(?:\s+(\S.*))?$/.exec(text.trim());
    if (!match) return text;
    const number = Number(match[1]);
    const unit = match[2];
    try {
      if (unit && /^[A-Z]{3}$/.test(unit)) {
        return new Intl.NumberFormat(undefined, { style: "currency", currency: unit }).format(number);
      }
    } catch {
      /* not a currency code after all */
    }
    const formatted = number.toLocaleString(undefined, { maximumFractionDigits: 2 });
    return unit ? `${formatted} ${unit}` : formatted;
  }

  /** The filled result view of `tool-completed` (tools/_presentation.py `fill_result_view`). */
  function resultView(result) {
    if (!result || typeof result !== "object") return null;
    switch (result.kind) {
      case "metrics": {
        if (!Array.isArray(result.items) || !result.items.length) return null;
        const list = h("dl", { class: "ac-result ac-result--metrics" });
        for (const item of result.items) {
          list.append(h("div", {}, h("dt", {}, String(item.label)), h("dd", {}, formatValue(item.value))));
        }
        return list;
      }
      case "table": {
        if (result.empty) return h("p", { class: "ac-result ac-result--note" }, String(result.empty));
        const table = h("table", { class: "ac-result ac-result--table" });
        table.append(h("thead", {}, h("tr", {}, ...(result.columns || []).map((c) => h("th", { scope: "col" }, String(c))))));
        const rows = (result.rows || []).map((row) => h("tr", {}, ...row.map((cell) => h("td", {}, String(cell)))));
        table.append(h("tbody", {}, ...rows));
        const wrap = h("div", { class: "ac-scroll" }, table);
        if (result.more) wrap.append(h("p", { class: "ac-result--note" }, `and ${result.more} more`));
        return wrap;
      }
      case "log":
        return Array.isArray(result.lines) && result.lines.length
          ? h("pre", { class: "ac-result ac-result--log" }, result.lines.join("\n"))
          : null;
      case "note":
        return result.text ? h("p", { class: "ac-result ac-result--note" }, String(result.text)) : null;
      default:
        return null;
    }
  }

  /** The URL of one of the widget's own files (stylesheets), for an element talking to `endpoint`. */
  function assetUrl(name, endpoint) {
    if (SCRIPT_URL) return new URL(name, SCRIPT_URL).href;
    const base = new URL("/static/", endpoint);
    base.protocol = base.protocol === "wss:" ? "https:" : "http:";
    return new URL(name, base).href;
  }

  function wsUrlFrom(value) {
    const url = new URL(value || "/agent/ws", location.href);
    if (url.protocol === "http:") url.protocol = "ws:";
    else if (url.protocol === "https:") url.protocol = "wss:";
    return url;
  }

  // -- the element --------------------------------------------------------------------------------

  // The shadow tree. Accessibility: the panel is a named region; the log has role="log" but is
  // kept silent (aria-live="off") because streamed text would be read word by word. Instead one
  // polite live region ("announcer") reads each finished message, tool outcome and approval once;
  // failures use role="alert". Connection changes are a role="status". The stylesheet link
  // targets are filled in when the element connects (they sit beside the script).
  const TEMPLATE = document.createElement("template");
  TEMPLATE.innerHTML = `
    <style>:host{display:block}.ac{visibility:hidden}</style>
    <link rel="stylesheet" data-href="components.css">
    <link rel="stylesheet" data-href="agora-chat.css">
    <section class="ac" part="panel" data-slot="panel">
      <header class="ac-header">
        <div class="ac-avatar" data-slot="avatar"></div>
        <div class="ac-heading">
          <h2 class="ac-title" data-slot="title"></h2>
          <div class="ac-meta">
            <p class="ac-status" data-slot="status" role="status" data-state="connecting">
              <span class="ac-dot" aria-hidden="true"></span><span data-slot="status-text">Connecting…</span>
            </p>
            <span class="ac-badge" data-slot="badge" hidden></span>
          </div>
        </div>
        <button type="button" class="ac-iconbtn" data-slot="new" aria-label="Start a new conversation" title="New conversation"></button>
      </header>
      <div class="ac-body">
        <div class="ac-log" data-slot="log" role="log" aria-live="off" aria-label="Conversation" tabindex="0">
          <div class="ac-empty" data-slot="empty">
            <div class="ac-empty__icon" data-slot="empty-icon"></div>
            <p class="ac-empty__title">How can I help?</p>
            <p class="ac-empty__text" data-slot="empty-text">Ask a question below. Actions that change something wait for your approval.</p>
          </div>
        </div>
        <button type="button" class="ac-jump" data-slot="jump" hidden>Latest messages</button>
      </div>
      <p class="ac-banner" data-slot="banner" role="alert" hidden></p>
      <form class="ac-composer" data-slot="form" novalidate>
        <label class="ac-sr" data-slot="label">Message</label>
        <textarea data-slot="input" rows="1" maxlength="${MAX_TEXT}" placeholder="Write a message…" enterkeyhint="send"
          autocomplete="off" aria-describedby="ac-hint"></textarea>
        <button type="button" class="ac-stop" data-slot="stop" aria-label="Stop" hidden><span>Stop</span></button>
        <button type="submit" class="ac-send" data-slot="send" aria-label="Send"></button>
      </form>
      <p class="ac-sr" id="ac-hint">Enter sends, Shift+Enter adds a line.</p>
      <div class="ac-sr" data-slot="announcer" aria-live="polite" aria-atomic="true"></div>
    </section>`;

  let instances = 0;

  class AgoraChat extends HTMLElement {
    static observedAttributes = ["endpoint", "src", "token", "thread", "title"];

    // connection
    #ws = null;
    #attempt = 0;
    #retryTimer = 0;
    #stopped = true;
    #halted = false; // an auth failure: wait for a new token instead of retrying
    #welcomed = false;
    #frameCounter = 0;
    // conversation
    #cache = null;
    #threadId = null;
    #actorId = null;
    #lastSeq = 0;
    #frames = [];
    #users = {};
    #quiet = false; // rendering cached history: no announcements
    #runs = new Map(); // run_id -> {turn, active, user}
    #messages = new Map(); // message_id -> {node, text, done}
    #tools = new Map(); // tool_call_id -> line
    #approvals = new Map(); // tool_call_id -> card
    #components = new Map(); // ui id -> wrapper
    #pending = new Map(); // frame id -> {kind, ...}
    #historyLookup = null;
    #saveTimer = 0;
    #ticker = 0; // refreshes the expiry of waiting approvals
    #renderQueue = new Set();
    #renderScheduled = false;
    #pageContext = null;
    #title = "Assistant";
    #loaded = false;
    #unsent = new Map(); // failed bubble -> text (a reconnect may prove it was sent after all)
    #ui = {};

    constructor() {
      super();
      const root = this.attachShadow({ mode: "open", delegatesFocus: false });
      root.append(TEMPLATE.content.cloneNode(true));
      for (const node of root.querySelectorAll("[data-slot]")) this.#ui[node.dataset.slot] = node;
      const uid = `ac${++instances}`;
      this.#ui.input.id = `${uid}-input`;
      this.#ui.label.htmlFor = this.#ui.input.id;
      this.#ui.avatar.append(icon("spark"));
      this.#ui["empty-icon"].append(icon("spark"));
      this.#ui.new.append(icon("plus"));
      this.#ui.send.append(icon("send"));
      this.#ui.stop.prepend(icon("stop"));
      this.#ui.jump.prepend(icon("arrowDown"));
      this.#bindUi();
    }

    // -- public API ---------------------------------------------------------------------------------

    /** The current thread id (null before the first `welcome`). */
    get threadId() {
      return this.#threadId;
    }

    /** The panel's heading (the `title` attribute; kept off the host, where it would be a tooltip). */
    get title() {
      return this.#title;
    }

    set title(value) {
      this.#title = String(value ?? "") || "Assistant";
      this.#applyTitle();
    }

    /** Extra context sent with each message: an object, or a function returning one. */
    get pageContext() {
      return this.#pageContext;
    }

    set pageContext(value) {
      this.#pageContext = value;
    }

    /** Send `text` as the person; false when it cannot be sent right now. */
    send(text, pageContext) {
      const value = String(text ?? "").trim();
      if (!value || value.length > MAX_TEXT || !this.#canSend()) return false;
      const id = this.#nextId("send");
      const bubble = this.#userBubble(value, { pending: true });
      this.#pending.set(id, { kind: "send", text: value, bubble });
      this.#log().append(bubble);
      this.#ui.empty.hidden = true;
      this.#scrollToEnd(true);
      const context = pageContext ?? (typeof this.#pageContext === "function" ? this.#pageContext() : this.#pageContext);
      const frame = { type: "send", id, text: value };
      if (context && typeof context === "object") frame.page_context = context;
      if (!this.#transmit(frame)) {
        this.#pending.delete(id);
        this.#markFailed(bubble, value, "Not sent: not connected.");
      }
      this.#updateComposer();
      return true;
    }

    /** Forget the stored conversation and start a new thread. */
    newConversation() {
      this.#cache?.clear();
      this.#resetConversation();
      this.#threadId = this.getAttribute("thread") || null;
      this.#reconnectNow();
      this.focusInput();
    }

    /** Move the keyboard focus to the message box. */
    focusInput() {
      this.#ui.input.focus();
    }

    // -- lifecycle ----------------------------------------------------------------------------------

    connectedCallback() {
      this.#linkStylesheets();
      this.#applyTitle();
      this.#stopped = false;
      if (!this.#loaded) this.#loadConversation();
      if (this.#approvals.size) this.#ticker ||= setInterval(() => this.#refreshExpiries(), 30_000);
      this.#connect();
      window.addEventListener("pagehide", this.#flushSave);
    }

    disconnectedCallback() {
      this.#stopped = true;
      window.removeEventListener("pagehide", this.#flushSave);
      this.#flushSave();
      clearTimeout(this.#retryTimer);
      clearInterval(this.#ticker);
      this.#ticker = 0;
      this.#ws?.close(1000, "bye");
      this.#ws = null;
    }

    attributeChangedCallback(name, previous, value) {
      if (name === "title") {
        if (value !== null) {
          this.title = value;
          this.removeAttribute("title");
        }
        return;
      }
      if (previous === value || !this.isConnected || this.#stopped) return;
      switch (name) {
        case "token":
          // A fresh token matters at the next hello; a socket closed for a bad one retries now.
          if (this.#halted) {
            this.#halted = false;
            this.#reconnectNow();
          }
          break;
        case "endpoint":
        case "src":
        case "thread":
          this.#flushSave();
          this.#resetConversation();
          this.#loadConversation();
          this.#reconnectNow();
          break;
        default:
          break;
      }
    }

    /** Point the shadow root's stylesheets at their files (once: the endpoint is known by now). */
    #linkStylesheets() {
      for (const link of this.shadowRoot.querySelectorAll("link[data-href]:not([href])")) {
        // Shown even unstyled rather than never, should a stylesheet fail to load.
        link.addEventListener("error", () => this.#ui.panel.style.setProperty("visibility", "visible"), { once: true });
        link.href = assetUrl(link.dataset.href, this.#endpoint());
      }
    }

    // -- connection ---------------------------------------------------------------------------------

    #endpoint() {
      return wsUrlFrom(this.getAttribute("endpoint") || this.getAttribute("src"));
    }

    #connect() {
      if (this.#stopped || this.#halted || this.#ws) return;
      this.#welcomed = false;
      this.#setStatus(this.#attempt ? "reconnecting" : "connecting");
      let ws;
      try {
        ws = new WebSocket(this.#endpoint());
      } catch (error) {
        this.#fatal("bad_endpoint", `Cannot connect: ${error.message}`);
        return;
      }
      this.#ws = ws;
      ws.addEventListener("open", () => {
        // Replay starts after the last event on screen; components come as HTML (else image or text).
        const hello = { type: "hello", id: "hello", after_seq: this.#lastSeq, ui_capabilities: { formats: ["html", "image", "text"] } };
        if (this.#threadId) hello.thread_id = this.#threadId;
        const token = this.getAttribute("token");
        if (token) hello.token = token;
        ws.send(JSON.stringify(hello));
      });
      ws.addEventListener("message", (event) => {
        if (this.#ws !== ws) return;
        let frame;
        try {
          frame = JSON.parse(event.data);
        } catch {
          return;
        }
        if (frame && typeof frame.type === "string") this.#onFrame(frame);
      });
      ws.addEventListener("close", (event) => {
        if (this.#ws !== ws) return;
        this.#ws = null;
        this.#onClose(event.code);
      });
    }

    #onClose(code) {
      this.#welcomed = false;
      this.#failPending();
      this.#updateComposer();
      if (this.#stopped) return;
      if (code === CLOSE_UNAUTHENTICATED) {
        this.#halted = true;
        this.#setStatus("offline");
        this.#showBanner("You are signed out of the chat. Sign in again to continue.");
        this.#emit("agora-error", { code: "unauthenticated", message: "The chat needs a valid token" });
        return;
      }
      if (code === CLOSE_FORBIDDEN) {
        // The stored thread belongs to someone else (a new identity): start afresh.
        this.#cache?.clear();
        this.#resetConversation();
        this.#threadId = null;
      }
      const delay = code === CLOSE_FORBIDDEN || code === CLOSE_BAD_HELLO ? 0 : this.#backoff();
      this.#setStatus("reconnecting", delay);
      clearTimeout(this.#retryTimer);
      this.#retryTimer = setTimeout(() => this.#connect(), delay);
    }

    /** Exponential backoff with jitter: 0.5 s, 1 s, 2 s... up to 15 s. */
    #backoff() {
      const base = Math.min(BACKOFF_MAX_MS, BACKOFF_FIRST_MS * 2 ** this.#attempt);
      this.#attempt += 1;
      return Math.round(base / 2 + Math.random() * (base / 2));
    }

    #reconnectNow() {
      clearTimeout(this.#retryTimer);
      this.#failPending();
      this.#attempt = 0;
      const ws = this.#ws;
      this.#ws = null;
      ws?.close(1000, "reconnect");
      this.#connect();
    }

    #transmit(frame) {
      if (!this.#ws || this.#ws.readyState !== WebSocket.OPEN || !this.#welcomed) return false;
      this.#ws.send(JSON.stringify(frame));
      return true;
    }

    #nextId(kind) {
      this.#frameCounter += 1;
      return `${kind}-${this.#frameCounter}`;
    }

    // -- frames -------------------------------------------------------------------------------------

    #onFrame(frame) {
      switch (frame.type) {
        case "welcome":
          this.#onWelcome(frame);
          return;
        case "ack":
          this.#onAck(frame);
          return;
        case "error":
          this.#onError(frame);
          return;
        default:
          break;
      }
      if (!Number.isInteger(frame.seq)) return;
      if (frame.seq <= this.#lastSeq) {
        // Already shown, unless the server's log no longer matches ours (a store that was reset).
        if (this.#runs.has(frame.run_id)) return;
        this.#log().append(h("p", { class: "ac-divider" }, "The conversation was restarted on the server"));
      }
      this.#lastSeq = frame.seq;
      this.#frames.push(frame);
      this.#apply(frame);
      this.#scheduleSave();
      this.#emit("agora-event", frame);
    }

    #onWelcome(frame) {
      const changed = this.#threadId && this.#threadId !== frame.thread_id;
      if (changed) this.#resetConversation();
      this.#threadId = frame.thread_id;
      this.#actorId = frame.actor?.id ?? null;
      this.#welcomed = true;
      this.#attempt = 0;
      this.#hideBanner();
      this.#setStatus("online");
      this.#ui.badge.hidden = !frame.demo;
      this.#ui.badge.textContent = DEMO_BADGE;
      if (frame.demo) {
        this.#ui["empty-text"].textContent =
          "This demo answers with an offline, rule-based model. Try one of the examples, or say hello.";
      }
      if (!this.#cache) this.#cache = new TranscriptCache(this.#cacheKey());
      this.#scheduleSave();
      this.#updateComposer();
      const { thread_id, actor, agent } = frame;
      this.#emit("agora-welcome", { thread_id, actor, agent, demo: !!frame.demo });
    }

    #onAck(frame) {
      const pending = this.#pending.get(frame.id);
      if (!pending) return;
      this.#pending.delete(frame.id);
      if (pending.kind === "send" && frame.run_id) {
        this.#users[frame.run_id] = pending.text;
        this.#scheduleSave();
        const run = this.#runs.get(frame.run_id);
        if (run && run.user && run.user !== pending.bubble) {
          // The run was announced before its ack and took another bubble: keep ours, drop that one.
          run.user.remove();
        }
        this.#markSent(pending.bubble, frame.run_id);
        if (run) run.user = pending.bubble;
      }
    }

    #onError(frame) {
      const pending = frame.id ? this.#pending.get(frame.id) : null;
      if (pending) this.#pending.delete(frame.id);
      const message = frame.message || "Something went wrong.";
      this.#emit("agora-error", { code: frame.code, message, id: frame.id ?? null });
      switch (pending?.kind) {
        case "send":
          this.#markFailed(pending.bubble, pending.text, message);
          break;
        case "decide":
          this.#decisionFailed(pending.card, message);
          break;
        case "cancel":
          this.#ui.stop.disabled = false;
          this.#updateComposer();
          break;
        default:
          if (frame.id !== "hello") this.#showBanner(message);
          break;
      }
    }

    /** Un-acknowledged frames die with their socket: say so, and offer a retry. */
    #failPending() {
      for (const pending of this.#pending.values()) {
        // A message may have arrived before the socket dropped: a replayed run can still claim it.
        if (pending.kind === "send") {
          this.#markFailed(pending.bubble, pending.text, "Not sent: the connection dropped.", true);
        }
        if (pending.kind === "decide") this.#decisionFailed(pending.card, "The connection dropped; try again.");
      }
      this.#pending.clear();
    }

    // -- events -> DOM ------------------------------------------------------------------------------

    #apply(frame) {
      const stick = this.#nearEnd();
      switch (frame.type) {
        case "run-started":
          this.#runStarted(frame);
          break;
        case "text-delta":
          this.#textDelta(frame);
          break;
        case "text-end":
          this.#textEnd(frame);
          break;
        case "tool-started":
          this.#toolStarted(frame);
          break;
        case "tool-completed":
          this.#toolSettled(frame, "done", { text: frame.done, extra: resultView(frame.result) });
          break;
        case "tool-failed": {
          const stopped = frame.error?.code === "cancelled";
          const detail = stopped ? "Stopped" : frame.error?.message || "Failed";
          this.#toolSettled(frame, stopped ? "stopped" : "failed", { detail });
          break;
        }
        case "tool-denied":
          // A rejected or lapsed approval already says so on its card.
          if (!this.#approvals.has(frame.tool_call_id)) {
            this.#toolSettled(frame, "denied", { detail: frame.reason || "Not allowed" });
          }
          break;
        case "approval-requested":
          this.#approvalRequested(frame);
          break;
        case "approval-settled":
          this.#approvalSettled(frame);
          break;
        case "ui":
          this.#uiComponent(frame);
          break;
        case "run-error":
          this.#notice(frame, "error", frame.message || "The run failed.");
          break;
        case "run-finished":
          this.#runFinished(frame);
          break;
        default:
          break;
      }
      this.#updateBusy();
      this.#updateComposer();
      this.#ui.empty.hidden = this.#runs.size > 0 || this.#log().querySelector(".ac-msg") !== null;
      this.#scrollToEnd(stick);
    }

    #log() {
      return this.#ui.log;
    }

    #run(frame) {
      let run = this.#runs.get(frame.run_id);
      if (!run) {
        const turn = h("div", { class: "ac-turn", "data-run-id": frame.run_id, "data-status": "running" });
        run = { turn, active: true, user: null };
        this.#runs.set(frame.run_id, run);
        this.#log().append(run.turn);
      }
      return run;
    }

    #runStarted(frame) {
      if (this.#runs.has(frame.run_id)) return;
      const known = this.#users[frame.run_id];
      let bubble = this.#log().querySelector(`.ac-msg--user[data-run-id="${CSS.escape(frame.run_id)}"]`);
      if (!bubble && known !== undefined) {
        this.#log().append((bubble = this.#userBubble(known, { runId: frame.run_id })));
      } else if (!bubble) {
        // Not acknowledged yet: most likely our oldest message in flight, or one whose ack was lost
        // with a dropped socket (the ack, if it comes, confirms).
        const inFlight = [...this.#pending.values()].find((p) => p.kind === "send" && !p.bubble.dataset.runId);
        const [unsent, text] = this.#unsent.entries().next().value ?? [];
        if (inFlight) {
          bubble = inFlight.bubble;
          bubble.dataset.runId = frame.run_id;
        } else if (unsent) {
          this.#unsent.delete(unsent);
          this.#users[frame.run_id] = text;
          this.#markSent(unsent, frame.run_id);
          bubble = unsent;
        } else {
          // Sent from another tab or device: what they typed comes from the thread's history.
          this.#log().append((bubble = this.#userBubble("", { runId: frame.run_id, unknown: true })));
          this.#lookUpUserTexts();
        }
      }
      const run = this.#run(frame);
      run.user = bubble;
      bubble.after(run.turn);
    }

    #runFinished(frame) {
      const run = this.#run(frame);
      run.active = false;
      run.turn.dataset.status = frame.status;
      if (frame.status === "cancelled") this.#notice(frame, "stopped", "Stopped.");
      else if (frame.status === "failed" && !run.turn.querySelector(".ac-notice--error")) {
        this.#notice(frame, "error", "Something went wrong; the run stopped.");
      }
      for (const node of run.turn.querySelectorAll(".ac-msg--assistant[aria-busy]")) node.removeAttribute("aria-busy");
    }

    #message(frame) {
      let message = this.#messages.get(frame.message_id);
      if (!message) {
        const body = h("div", { class: "ac-msg__body" });
        const who = h("span", { class: "ac-sr" }, "Assistant: ");
        const node = h("div", { class: "ac-msg ac-msg--assistant", "aria-busy": "true" }, who, body);
        message = { node, body, text: "", done: false };
        this.#messages.set(frame.message_id, message);
        this.#run(frame).turn.append(node);
      }
      return message;
    }

    #textDelta(frame) {
      const message = this.#message(frame);
      if (message.done) return;
      message.text += frame.delta || "";
      this.#queueRender(message);
    }

    #textEnd(frame) {
      const message = this.#message(frame);
      message.text = frame.text ?? message.text;
      message.done = true;
      message.node.removeAttribute("aria-busy");
      this.#renderQueue.delete(message);
      message.body.replaceChildren(richText(message.text));
      this.#announce(message.text);
    }

    /** Streamed text is re-rendered at most once per frame, not once per delta. */
    #queueRender(message) {
      this.#renderQueue.add(message);
      if (this.#renderScheduled) return;
      this.#renderScheduled = true;
      requestAnimationFrame(() => {
        this.#renderScheduled = false;
        const stick = this.#nearEnd();
        for (const item of this.#renderQueue) item.body.replaceChildren(richText(item.text));
        this.#renderQueue.clear();
        this.#scrollToEnd(stick);
      });
    }

    #toolStarted(frame) {
      let line = this.#tools.get(frame.tool_call_id);
      if (!line) {
        line = h(
          "div",
          { class: "ac-tool", "data-state": "running", "data-tool": frame.tool },
          h("span", { class: "ac-tool__icon" }, icon(frame.icon || "tool")),
          h("span", { class: "ac-tool__text" }),
          h("span", { class: "ac-tool__state" }),
        );
        this.#tools.set(frame.tool_call_id, line);
        // An approved action's line goes right under its approval card.
        const card = this.#approvals.get(frame.tool_call_id);
        if (card) card.after(line);
        else this.#run(frame).turn.append(line);
      }
      line.dataset.state = "running";
      line.querySelector(".ac-tool__text").textContent = frame.running || frame.label || frame.tool;
      const spinner = h("span", { class: "ac-spinner", "aria-hidden": "true" });
      line.querySelector(".ac-tool__state").replaceChildren(spinner, h("span", { class: "ac-sr" }, ", running"));
      this.#announce(`${frame.running || frame.label || frame.tool}…`);
    }

    /**
     * A tool call's outcome on its line. `done` replaces the narration with the `done` text (and
     * shows the result view under it); otherwise the narration stays and `detail` says what
     * happened (the error, the denial's reason, "Stopped").
     */
    #toolSettled(frame, state, { text = null, detail = null, extra = null } = {}) {
      let line = this.#tools.get(frame.tool_call_id);
      if (!line) {
        // Denied or failed before it started (gates, validation, preflight): name the tool.
        const name = String(frame.tool || "tool").replace(/[_-]+/g, " ");
        this.#toolStarted({ ...frame, running: name.charAt(0).toUpperCase() + name.slice(1), icon: null });
        line = this.#tools.get(frame.tool_call_id);
      }
      line.dataset.state = state;
      const label = line.querySelector(".ac-tool__text");
      if (text) label.textContent = text;
      const words = { done: "done", failed: "failed", denied: "not run", stopped: "stopped" }[state];
      const glyph = { done: "check", stopped: "stop" }[state] || "cross";
      // Read as "Refunding order 1042, done" or "Fetching the invoice, failed: No such order".
      const spoken = detail ? null : h("span", { class: "ac-sr" }, `, ${words}`);
      line.querySelector(".ac-tool__state").replaceChildren(icon(glyph, "ac-icon ac-icon--state"), spoken ?? "");
      line.querySelector(".ac-tool__detail")?.remove();
      if (detail) {
        const prefix = detail.toLowerCase() === words ? ", " : `, ${words}: `;
        line.append(h("span", { class: "ac-tool__detail" }, h("span", { class: "ac-sr" }, prefix), detail));
      }
      // The result view reads under the line, before the components the call showed.
      if (extra) line.after(h("div", { class: "ac-tool-result" }, extra));
      this.#announce(state === "done" ? label.textContent : `${label.textContent}: ${detail || words}`);
    }

    #approvalRequested(frame) {
      if (this.#approvals.has(frame.tool_call_id)) return;
      const id = `${this.#ui.input.id}-${this.#approvals.size + 1}`;
      const confirmation = frame.confirmation || {};
      const destructive = frame.tone === "destructive";
      const approveClass = `ac-btn ${destructive ? "ac-btn--danger" : "ac-btn--primary"}`;
      const approve = h("button", { type: "button", class: approveClass, "data-action": "approve" }, confirmation.verb || "Approve");
      const reject = h("button", { type: "button", class: "ac-btn ac-btn--secondary", "data-action": "reject" }, "Reject");
      const expiry = frame.expires_at ? formatExpiry(frame.expires_at) : "";
      const card = h(
        "div",
        {
          class: "ac-approval",
          role: "group",
          tabindex: "-1",
          "data-tone": destructive ? "destructive" : "neutral",
          "data-status": "pending",
          "aria-labelledby": `${id}-title`,
          "aria-describedby": `${id}-detail`,
        },
        h("p", { class: "ac-approval__kicker" }, icon(destructive ? "warning" : "shield"), "Needs your approval"),
        h("p", { class: "ac-approval__title", id: `${id}-title` }, confirmation.title || "Approve this action?"),
        h(
          "p",
          { class: "ac-approval__detail", id: `${id}-detail` },
          confirmation.detail || "",
          expiry ? h("span", { class: "ac-approval__expiry", "data-expires-at": frame.expires_at }, expiry) : null,
        ),
        h("div", { class: "ac-approval__actions" }, reject, approve),
        h("p", { class: "ac-approval__error", role: "alert", hidden: true }),
        h("p", { class: "ac-approval__outcome", hidden: true }),
      );
      card.dataset.toolCallId = frame.tool_call_id;
      approve.addEventListener("click", () => this.#decide(card, true));
      reject.addEventListener("click", () => this.#decide(card, false));
      this.#approvals.set(frame.tool_call_id, card);
      this.#run(frame).turn.append(card);
      this.#ticker ||= setInterval(() => this.#refreshExpiries(), 30_000);
      this.#announce(`Approval needed: ${confirmation.title || "an action"}. ${confirmation.verb || "Approve"} or Reject.`);
      // Bring a keyboard user to the decision, unless they are in the middle of typing.
      if (!this.#quiet && this.shadowRoot.activeElement === this.#ui.input && !this.#ui.input.value) {
        requestAnimationFrame(() => card.focus({ preventScroll: true }));
      }
    }

    #refreshExpiries() {
      const waiting = this.#log().querySelectorAll(".ac-approval[data-status=pending] .ac-approval__expiry");
      for (const node of waiting) node.textContent = formatExpiry(node.dataset.expiresAt);
      if (!waiting.length) {
        clearInterval(this.#ticker);
        this.#ticker = 0;
      }
    }

    #decide(card, approve) {
      if (card.dataset.status !== "pending" || card.hasAttribute("aria-busy")) return;
      const id = this.#nextId(approve ? "approve" : "reject");
      const frame = { type: approve ? "approve" : "reject", id, tool_call_id: card.dataset.toolCallId };
      if (!this.#transmit(frame)) {
        this.#decisionFailed(card, "Not connected; try again in a moment.");
        return;
      }
      this.#pending.set(id, { kind: "decide", card });
      card.setAttribute("aria-busy", "true");
      card.querySelector(".ac-approval__error").hidden = true;
      // aria-disabled rather than disabled: a disabled button would drop the keyboard focus.
      for (const button of card.querySelectorAll("button")) {
        button.setAttribute("aria-disabled", "true");
        if (button.dataset.action === (approve ? "approve" : "reject")) {
          button.prepend(h("span", { class: "ac-spinner", "aria-hidden": "true" }));
        }
      }
    }

    #decisionFailed(card, message) {
      if (!card || card.dataset.status !== "pending") return;
      card.removeAttribute("aria-busy");
      for (const button of card.querySelectorAll("button")) {
        button.removeAttribute("aria-disabled");
        button.querySelector(".ac-spinner")?.remove();
      }
      const error = card.querySelector(".ac-approval__error");
      error.textContent = message;
      error.hidden = false;
    }

    #approvalSettled(frame) {
      const card = this.#approvals.get(frame.tool_call_id);
      const run = this.#runs.get(frame.run_id);
      // A decision resumes the run (a withdrawn or superseded approval does not).
      if (run && frame.via !== "superseded" && frame.via !== "cancelled" && frame.via !== "expiry") {
        run.active = true;
        run.turn.dataset.status = "running";
      }
      if (!card) return;
      const hadFocus = card.contains(this.shadowRoot.activeElement);
      card.dataset.status = frame.status;
      card.removeAttribute("aria-busy");
      card.querySelector(".ac-approval__actions").remove();
      card.querySelector(".ac-approval__error").hidden = true;
      card.querySelector(".ac-approval__expiry")?.remove();
      const outcome = card.querySelector(".ac-approval__outcome");
      const text = approvalOutcome(frame, this.#actorId);
      outcome.replaceChildren(icon(frame.status === "approved" ? "check" : "cross"), text);
      outcome.hidden = false;
      this.#announce(text);
      // The buttons are gone: the card itself, now telling the outcome, keeps the focus.
      if (hadFocus) card.focus({ preventScroll: true });
    }

    #uiComponent(frame) {
      let wrapper = this.#components.get(frame.id);
      const fresh = !wrapper;
      if (fresh) {
        wrapper = h("div", { class: "ac-ui" });
        this.#components.set(frame.id, wrapper);
      }
      wrapper.dataset.component = frame.component;
      wrapper.replaceChildren(this.#componentContent(frame));
      if (fresh) {
        // A component belongs with its tool line when it has one: under it, before later text.
        let anchor = frame.tool_call_id ? this.#tools.get(frame.tool_call_id) : null;
        const siblings = `.ac-tool-result, .ac-ui[data-tool-call-id="${CSS.escape(frame.tool_call_id || "")}"]`;
        while (anchor?.nextElementSibling?.matches(siblings)) anchor = anchor.nextElementSibling;
        if (frame.tool_call_id) wrapper.dataset.toolCallId = frame.tool_call_id;
        if (anchor?.parentNode) anchor.after(wrapper);
        else this.#run(frame).turn.append(wrapper);
      }
      const title = typeof frame.props?.title === "string" ? frame.props.title : "";
      const label = frame.fallback_text || title || frame.component.replace(/(?<=[a-z])(?=[A-Z])/g, " ");
      wrapper.setAttribute("aria-label", label);
      wrapper.setAttribute("role", "group");
      this.#announce(`Shown: ${label}`);
    }

    #componentContent(frame) {
      if (frame.form === "html" && typeof frame.html === "string") {
        // Server-rendered and sanitized; parsed inertly (a <template> runs nothing).
        const template = document.createElement("template");
        template.innerHTML = frame.html;
        this.#fromGateway(template.content);
        return template.content;
      }
      if (Array.isArray(frame.media) && frame.media.length) {
        const fragment = document.createDocumentFragment();
        for (const item of frame.media) {
          const alt = frame.text || frame.fallback_text || frame.component;
          if (String(item.mime).startsWith("image/")) {
            fragment.append(h("img", { class: "ac-ui__image", src: item.url, alt, loading: "lazy" }));
          } else {
            const link = { class: "ac-ui__file", href: item.url, target: "_blank", rel: "noopener" };
            fragment.append(h("a", link, icon("document"), item.filename || "Open document"));
          }
        }
        return fragment;
      }
      return h("p", { class: "ac-ui__text" }, frame.text || frame.fallback_text || `[${frame.component}]`);
    }

    /**
     * A component's root-relative links (`/assets/product.png`, an app's static file) name the
     * gateway's files: on a host page of another origin they would otherwise point at the host.
     */
    #fromGateway(content) {
      const base = new URL("/", this.#endpoint());
      base.protocol = base.protocol === "wss:" ? "https:" : "http:";
      for (const element of content.querySelectorAll("[src], [href]")) {
        for (const name of ["src", "href"]) {
          const value = element.getAttribute(name);
          if (value?.startsWith("/") && !value.startsWith("//")) element.setAttribute(name, new URL(value, base).href);
        }
      }
    }

    #notice(frame, kind, text) {
      const glyph = icon(kind === "error" ? "warning" : "stop");
      const notice = h("p", { class: `ac-notice ac-notice--${kind}` }, glyph, h("span", {}, text));
      if (kind === "error") notice.setAttribute("role", this.#quiet ? "note" : "alert");
      this.#run(frame).turn.append(notice);
      if (kind !== "error") this.#announce(text);
    }

    // -- the person's messages ----------------------------------------------------------------------

    #userBubble(text, { runId = null, pending = false, unknown = false } = {}) {
      const body = h("div", { class: "ac-msg__body" });
      if (text) body.append(richTextPlain(text));
      const bubble = h("div", { class: "ac-msg ac-msg--user" }, h("span", { class: "ac-sr" }, "You: "), body);
      if (runId) bubble.dataset.runId = runId;
      if (pending) bubble.dataset.state = "sending";
      if (unknown) bubble.hidden = true;
      return bubble;
    }

    #markSent(bubble, runId) {
      this.#unsent.delete(bubble);
      delete bubble.dataset.state;
      bubble.dataset.runId = runId;
      bubble.querySelector(".ac-msg__status")?.remove();
    }

    #markFailed(bubble, text, message, uncertain = false) {
      if (!bubble.isConnected || bubble.dataset.state === "failed") return;
      bubble.dataset.state = "failed";
      if (uncertain) this.#unsent.set(bubble, text);
      const retry = h("button", { type: "button", class: "ac-linkbtn" }, icon("retry"), "Retry");
      retry.addEventListener("click", () => {
        if (!this.send(text)) return;
        this.#unsent.delete(bubble);
        bubble.remove();
      });
      const stick = this.#nearEnd();
      bubble.append(h("p", { class: "ac-msg__status", role: "alert" }, h("span", {}, message), retry));
      this.#scrollToEnd(stick); // the line just added must not hide below the fold
    }

    /** Fill in what was typed elsewhere: the k-th `run-started` of a thread goes with its k-th user message. */
    #lookUpUserTexts() {
      if (this.#historyLookup || !this.#threadId) return;
      this.#historyLookup = (async () => {
        const base = this.#endpoint();
        base.protocol = base.protocol === "wss:" ? "https:" : "http:";
        const headers = {};
        const token = this.getAttribute("token");
        if (token) headers.Authorization = `Bearer ${token}`;
        const runIds = [];
        let messages = [];
        let after = 0;
        for (let page = 0; page < 20; page += 1) {
          const url = new URL(`threads/${encodeURIComponent(this.#threadId)}?after=${after}`, base);
          const credentials = url.origin === location.origin ? "same-origin" : "include";
          const response = await fetch(url, { headers, credentials });
          if (!response.ok) return;
          const body = await response.json();
          messages = body.messages || [];
          for (const event of body.events || []) if (event.type === "run-started") runIds.push(event.run_id);
          if (!body.events?.length || body.events.at(-1).seq >= body.last_seq) break;
          after = body.events.at(-1).seq;
        }
        const texts = messages.filter((m) => m.role === "user").map((m) => m.content);
        runIds.forEach((runId, index) => {
          if (texts[index] !== undefined && this.#users[runId] === undefined) this.#users[runId] = texts[index];
        });
        for (const bubble of this.#log().querySelectorAll(".ac-msg--user[hidden]")) {
          const text = this.#users[bubble.dataset.runId];
          if (text === undefined) continue;
          bubble.querySelector(".ac-msg__body").replaceChildren(richTextPlain(text));
          bubble.hidden = false;
        }
        this.#scheduleSave();
      })()
        .catch(() => {
          /* the history is a nicety: without it those messages stay hidden */
        })
        .finally(() => {
          this.#historyLookup = null;
        });
    }

    // -- the conversation's state -------------------------------------------------------------------

    #cacheKey() {
      // One transcript per endpoint, thread and identity: a page that switches users must never
      // show the previous user's conversation, even for the moment before the server refuses it.
      const thread = this.getAttribute("thread");
      const who = tokenSubject(this.getAttribute("token"));
      return `${this.#endpoint().href}${thread ? `#${thread}` : ""}${who ? `@${who}` : ""}`;
    }

    /** Show the cached transcript (if any) and remember where the server should resume. */
    #loadConversation() {
      this.#loaded = true;
      this.#cache = new TranscriptCache(this.#cacheKey());
      const fixed = this.getAttribute("thread");
      const stored = this.#cache.load();
      if (!stored || (fixed && stored.thread_id !== fixed)) {
        this.#threadId = fixed || null;
        return;
      }
      this.#threadId = stored.thread_id;
      this.#users = stored.users;
      this.#quiet = true;
      try {
        for (const frame of stored.frames) {
          if (!frame || typeof frame.type !== "string") continue;
          this.#frames.push(frame);
          this.#apply(frame);
        }
      } finally {
        this.#quiet = false;
      }
      // Only claim what is on screen: a dropped cache (seq 0) replays the whole thread.
      this.#lastSeq = stored.frames.length ? stored.seq : 0;
      this.#scrollToEnd(true);
    }

    #resetConversation() {
      this.#frames = [];
      this.#users = {};
      this.#lastSeq = 0;
      this.#runs.clear();
      this.#messages.clear();
      this.#tools.clear();
      this.#approvals.clear();
      this.#components.clear();
      this.#pending.clear();
      this.#unsent.clear();
      this.#renderQueue.clear();
      this.#log().replaceChildren(this.#ui.empty);
      this.#ui.empty.hidden = false;
      this.#updateBusy();
      this.#updateComposer();
    }

    #scheduleSave() {
      if (this.#saveTimer) return;
      this.#saveTimer = setTimeout(this.#flushSave, 250);
    }

    #flushSave = () => {
      clearTimeout(this.#saveTimer);
      this.#saveTimer = 0;
      if (!this.#cache || !this.#threadId) return;
      this.#cache.save({ thread_id: this.#threadId, seq: this.#lastSeq, frames: this.#frames, users: this.#users });
    };

    // -- chrome: composer, status, busy indicator, scrolling ---------------------------------------

    #bindUi() {
      const { form, input, stop, jump, log } = this.#ui;
      form.addEventListener("submit", (event) => {
        event.preventDefault();
        this.#submit();
      });
      input.addEventListener("keydown", (event) => {
        if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
          event.preventDefault();
          this.#submit();
        }
      });
      input.addEventListener("input", () => {
        this.#autosize();
        this.#updateComposer();
      });
      stop.addEventListener("click", () => this.#stop());
      this.#ui.new.addEventListener("click", () => this.newConversation());
      jump.addEventListener("click", () => {
        this.#scrollToEnd(true);
        this.focusInput();
      });
      log.addEventListener("scroll", () => {
        if (this.#nearEnd()) jump.hidden = true;
      });
    }

    #submit() {
      const text = this.#ui.input.value.trim();
      if (!text) return;
      if (this.send(text)) {
        this.#ui.input.value = "";
        this.#autosize();
        this.#updateComposer();
      }
    }

    #stop() {
      const active = [...this.#runs.entries()].filter(([, run]) => run.active).map(([runId]) => runId);
      for (const runId of active) {
        const id = this.#nextId("cancel");
        if (this.#transmit({ type: "cancel", id, run_id: runId })) this.#pending.set(id, { kind: "cancel" });
      }
      this.#ui.stop.disabled = true;
      this.focusInput();
    }

    #activeRun() {
      for (const run of this.#runs.values()) if (run.active) return true;
      return false;
    }

    #canSend() {
      const sending = [...this.#pending.values()].some((p) => p.kind === "send");
      return this.#welcomed && !this.#activeRun() && !sending;
    }

    #updateComposer() {
      const { input, send, stop } = this.#ui;
      const active = this.#activeRun();
      send.disabled = !input.value.trim() || !this.#canSend();
      const stopWasFocused = this.shadowRoot.activeElement === stop;
      stop.hidden = !active;
      if (!active) stop.disabled = false;
      if (stopWasFocused && !active) input.focus();
      if (!this.#welcomed) input.placeholder = "Connecting…";
      else input.placeholder = active ? "Working on it… (Stop to interrupt)" : "Write a message…";
    }

    /** Three dots at the end of a working run that shows nothing else in motion. */
    #updateBusy() {
      for (const dots of this.#log().querySelectorAll(".ac-typing")) dots.remove();
      for (const run of this.#runs.values()) {
        if (!run.active) continue;
        const last = run.turn.lastElementChild;
        const moving = last && last.matches(".ac-tool[data-state=running], .ac-msg--assistant[aria-busy]");
        if (!moving) {
          run.turn.append(
            h("div", { class: "ac-typing", "aria-hidden": "true" }, h("span"), h("span"), h("span")),
          );
        }
      }
    }

    #autosize() {
      const input = this.#ui.input;
      input.style.height = "auto";
      input.style.height = `${Math.min(input.scrollHeight, 160)}px`;
    }

    #nearEnd() {
      const log = this.#log();
      return log.scrollHeight - log.scrollTop - log.clientHeight < 96;
    }

    #scrollToEnd(stick) {
      const log = this.#log();
      if (stick) {
        log.scrollTop = log.scrollHeight;
        this.#ui.jump.hidden = true;
      } else if (!this.#quiet) {
        this.#ui.jump.hidden = false;
      }
    }

    #setStatus(state, delay = 0) {
      const text = {
        connecting: "Connecting…",
        online: "Online",
        reconnecting: delay >= 1000 ? `Reconnecting in ${Math.round(delay / 1000)} s…` : "Reconnecting…",
        offline: "Offline",
      }[state];
      this.#ui.status.dataset.state = state;
      this.#ui["status-text"].textContent = text;
      this.#emit("agora-status", { state });
    }

    #showBanner(message) {
      this.#ui.banner.textContent = message;
      this.#ui.banner.hidden = false;
    }

    #hideBanner() {
      this.#ui.banner.hidden = true;
    }

    #fatal(code, message) {
      this.#halted = true;
      this.#setStatus("offline");
      this.#showBanner(message);
      this.#emit("agora-error", { code, message });
    }

    #applyTitle() {
      const title = this.#title;
      this.#ui.title.textContent = title;
      this.#ui.panel.setAttribute("aria-label", `${title} chat`);
    }

    #announce(text) {
      if (this.#quiet || !text) return;
      const region = this.#ui.announcer;
      region.textContent = "";
      // A fresh text node in the next frame makes screen readers read repeats too.
      requestAnimationFrame(() => {
        region.textContent = String(text).slice(0, 400);
      });
    }

    #emit(type, detail) {
      this.dispatchEvent(new CustomEvent(type, { detail, bubbles: true, composed: true }));
    }
  }

  /** What the person typed, shown as typed (line breaks kept, nothing interpreted). */
  function richTextPlain(text) {
    const fragment = document.createDocumentFragment();
    String(text)
      .split("\n")
      .forEach((line, index) => {
        if (index) fragment.append(h("br"));
        fragment.append(line);
      });
    return fragment;
  }

  customElements.define("agora-chat", AgoraChat);
})();
