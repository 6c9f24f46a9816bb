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
 * each with its `seq`, replayed from `after_seq` and then live. The hello asks for `batch`
 * frames (`{type: "batch", events: [...]}`: several events to a frame, replayed ones too); each
 * event of one goes through the same handling as an event in a frame of its own.
 *
 * Attributes (all observed: a change applies at once)
 *   endpoint (alias src)  ws(s) URL of the socket; default: same origin, `/agent/ws`
 *   token                 a signed actor token (sent in `hello`); setting a new one after the
 *                         gateway refused the old one reconnects
 *   thread                a fixed thread id (default: one the gateway makes, remembered)
 *   title                 the assistant's name, heading the chat (default "Assistant")
 *   welcome               the text of the empty state, shown before the first message
 *   prompts               example prompts shown in the empty state, a JSON array of strings
 *                         (`prompts='["Track my order", "Talk to a person"]'`); one sends when clicked
 *   accent                the accent colour, any CSS colour (`#0a7d5a`, `rebeccapurple`); one that
 *                         `CSS.supports("color", …)` refuses is ignored. It wins over `--ac-accent`
 *   logo                  the URL of an image shown in the header instead of the default mark
 *   layout                "panel" (default: a card that fills its container) | "page" (fills the
 *                         viewport, no card chrome: a page that is only the chat, with the person's
 *                         conversations beside it: open, rename, delete, start a new one; on a
 *                         narrow screen behind a button. Not with a fixed `thread`)
 *   theme                 "light" | "dark" (default: the system's preference)
 *   agent                 the agent to talk to (sent in `hello` and with each message; default:
 *                         the gateway's default agent; `GET /agent/agents` lists the choices)
 *   persona               the persona the agent speaks as, sent with each message (an id or
 *                         alias; the gateway pins it on the thread)
 * Properties and methods
 *   threadId (read-only), title, pageContext (object, or function returning one, sent with
 *   each message), send(text, pageContext?) -> boolean, newConversation(), focusInput()
 * Events (bubbling, composed; `detail` shown)
 *   agora-status   {state: "connecting" | "online" | "reconnecting" | "offline"}
 *   agora-welcome  {thread_id, actor, agent, demo, restored}
 *   agora-event    the event frame, for every event shown (run-started, text-delta, ui…)
 *   agora-error    {code, message, id}
 * Styling: custom properties on the element (`--ac-accent`, `--ac-bg`, `--ac-font`… see
 *   agora-chat.css) and `::part(panel)`.
 * Keyboard: in the conversation, Up and Down move between messages (Home, End: the first, the
 *   last; Escape: back to the message box); a focused message shows its time.
 *
 * The thread id, the last seen seq and the events already shown are kept in localStorage, keyed
 * by the endpoint (and thread): a reload shows them at once and asks only for what came after;
 * a dropped socket reconnects with backoff and replays exactly what it missed. When the gateway
 * no longer has the conversation (`welcome {restored: false}`: an in-memory gateway restarted),
 * the widget says so once, in the transcript, and keeps what it showed as a read-only copy.
 *
 * Nothing internal is ever shown: no actor or thread ids, no model or tool identifiers.
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
  const MAX_FILES = 10; // attachments one message may carry (the gateway's MAX_ATTACHMENTS)
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
    attach: '<path d="M20.5 11.5 12 20a5 5 0 0 1-7-7l8.5-8.5a3.3 3.3 0 0 1 4.7 4.7L9.7 17.7a1.7 1.7 0 0 1-2.4-2.4L15 7.6"/>',
    spark: '<path d="M12 3l1.9 5.6L19.5 10.5l-5.6 1.9L12 18l-1.9-5.6L4.5 10.5l5.6-1.9z"/><path d="M19 16l.8 2.2L22 19l-2.2.8L19 22l-.8-2.2L16 19l2.2-.8z"/>',
    arrowDown: '<path d="M12 5v14M5.5 12.5 12 19l6.5-6.5"/>',
    retry: '<path d="M20 11a8 8 0 1 0-2.3 5.7"/><path d="M20 4v7h-7"/>',
    copy: '<rect x="8.5" y="8.5" width="12" height="12" rx="2"/><path d="M15.5 8.5V5.5a2 2 0 0 0-2-2h-8a2 2 0 0 0-2 2v8a2 2 0 0 0 2 2h3"/>',
    chevron: '<path d="m9 6 6 6-6 6"/>',
    menu: '<path d="M4 6.5h16M4 12h16M4 17.5h16"/>',
    edit: '<path d="M4 20h4L19 9a2.8 2.8 0 0 0-4-4L4 16z"/><path d="m13.5 6.5 4 4"/>',
    trash: '<path d="M4 7h16M10 11v6M14 11v6"/><path d="M6 7l1 12a2 2 0 0 0 2 2h6a2 2 0 0 0 2-2l1-12M9 7V4.5A1.5 1.5 0 0 1 10.5 3h3A1.5 1.5 0 0 1 15 4.5V7"/>',
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

  /** The `id` (or `sub`) claim of an actor token, read without verifying it (only to key the cache). */
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

  /**
   * Keeps `{thread_id, seq, frames, users, actor, trimmed}` in localStorage, keyed by the endpoint
   * (and the fixed thread, if any). `frames` are the events already shown, so a reload renders
   * them at once and asks only for what came after `seq`; `users` maps run ids to what the person
   * typed (the event log does not carry it); `actor` is who the last `welcome` named, so that a
   * reload tells the person's own decisions from others' before the server answers; `trimmed`
   * says the frames were dropped for space. Storage failures (quota, privacy mode) only cost a
   * full replay.
   */
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
          actor: typeof data.actor === "string" ? data.actor : null,
          trimmed: data.trimmed === true,
        };
      } catch {
        return null;
      }
    }

    save({ thread_id, seq, frames, users, actor }) {
      // Deltas of finished messages are redundant: `text-end` carries the whole text.
      const ended = new Set(frames.filter((f) => f.type === "text-end").map((f) => f.message_id));
      const kept = frames.filter((f) => f.type !== "text-delta" || !ended.has(f.message_id));
      const trimmed = { thread_id, seq: 0, frames: [], users, actor, trimmed: true };
      let json = JSON.stringify({ thread_id, seq, frames: kept, users, actor });
      if (json.length > CACHE_LIMIT) json = JSON.stringify(trimmed);
      try {
        localStorage.setItem(this.key, json);
      } catch {
        try {
          localStorage.setItem(this.key, JSON.stringify(trimmed));
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

  /** Where a decision made by someone else was made, as people say it (web decisions say nothing). */
  const VIA_NAMES = { whatsapp: "on WhatsApp", "whatsapp-cloud": "on WhatsApp", telegram: "on Telegram" };

  /**
   * What a settled approval card says: its one-word state and the sentence under it. Nobody is
   * named: a decision is "you" (the person this widget speaks for) or "someone else".
   */
  function approvalOutcome(frame, actorId) {
    if (frame.via === "superseded") return ["Skipped", "Skipped: the conversation moved on."];
    if (frame.via === "cancelled") return ["Withdrawn", "Withdrawn: the run was stopped."];
    const someoneElse = frame.decided_by && frame.decided_by !== actorId;
    const who = someoneElse ? ` by someone else${VIA_NAMES[frame.via] ? ` ${VIA_NAMES[frame.via]}` : ""}` : " by you";
    switch (frame.status) {
      case "approved":
        return ["Approved", `Approved${who}.`];
      case "rejected":
        return ["Rejected", `Rejected${who}.`];
      default:
        return ["Expired", "Expired before anyone decided."];
    }
  }

  /** "refund_order" -> "Refund order", "ProductCard" -> "Product card": never an identifier as is. */
  function humanize(name) {
    const words = String(name || "")
      .replace(/(?<=[a-z0-9])(?=[A-Z])/g, " ")
      .replace(/[_-]+/g, " ")
      .trim()
      .toLowerCase();
    return words ? words.charAt(0).toUpperCase() + words.slice(1) : "";
  }

  /**
   * A tool line's button is named by its text ("Refunded order 1042, done"), spelled out: computed
   * from its content, the hidden ", done" would be read after a stray space.
   */
  function nameTool(line) {
    line.firstChild.setAttribute("aria-label", line.querySelector(".ac-tool__text").textContent);
  }

  /** Set a `<time>` element to an ISO time: its machine form, its words, and the full date as a tooltip. */
  function setTime(node, iso) {
    const text = formatTime(iso);
    if (!text) return;
    node.dateTime = new Date(iso).toISOString();
    node.textContent = text;
    node.title = new Date(iso).toLocaleString();
  }

  /** "14:32", or "Mar 5, 14:32" for another day; "" for no time. */
  function formatTime(iso) {
    const at = new Date(iso);
    if (Number.isNaN(at.getTime())) return "";
    const time = at.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" });
    if (at.toDateString() === new Date().toDateString()) return time;
    return `${at.toLocaleDateString([], { month: "short", day: "numeric" })}, ${time}`;
  }

  /** When a conversation was last active: "Just now", "5 min ago", "Today", "Yesterday", "Mar 5". */
  function formatAgo(iso, now = new Date()) {
    const at = new Date(iso);
    if (Number.isNaN(at.getTime())) return "";
    const minutes = Math.floor((now - at) / 60_000);
    if (minutes < 1) return "Just now";
    if (minutes < 60) return `${minutes} min ago`;
    if (at.toDateString() === now.toDateString()) return "Today";
    const yesterday = new Date(now);
    yesterday.setDate(now.getDate() - 1);
    if (at.toDateString() === yesterday.toDateString()) return "Yesterday";
    const options = { month: "short", day: "numeric" };
    if (at.getFullYear() !== now.getFullYear()) options.year = "numeric";
    return at.toLocaleDateString([], options);
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

  /** One value of a tool's arguments or output, in a few words (a list is its length). */
  function valueText(value) {
    if (value === null || value === undefined) return "none";
    if (typeof value === "string") return value.length > 240 ? `${value.slice(0, 239)}…` : value;
    if (typeof value !== "object") return String(value);
    if (Array.isArray(value)) return value.length === 1 ? "1 item" : `${value.length} items`;
    const json = JSON.stringify(value);
    return json.length > 240 ? `${json.slice(0, 239)}…` : json;
  }

  /** An object as a two-column list (at most 20 entries); anything else as text. */
  function fieldsView(value, empty) {
    if (value === null || value === undefined || (typeof value === "object" && !Object.keys(value).length)) {
      return h("p", { class: "ac-result ac-result--note" }, empty);
    }
    if (typeof value !== "object" || Array.isArray(value)) {
      return h("p", { class: "ac-result ac-result--note" }, valueText(value));
    }
    const list = h("dl", { class: "ac-result ac-fields" });
    const entries = Object.entries(value);
    for (const [key, item] of entries.slice(0, 20)) {
      list.append(h("div", {}, h("dt", {}, humanize(key) || key), h("dd", {}, valueText(item))));
    }
    if (entries.length > 20) list.append(h("div", {}, h("dt", {}, `and ${entries.length - 20} more`)));
    return list;
  }

  /** Short cells with a figure (dates, amounts, codes) stay on one line in a narrow table. */
  function keepFiguresWhole(root) {
    for (const cell of root.querySelectorAll("td, th")) {
      const text = cell.textContent.trim();
      if (text.length <= 20 && /\d/.test(text) && (text.match(/\s+/g) || []).length <= 2) {
        cell.classList.add("ac-nowrap");
      }
    }
  }

  /** Black or white, whichever reads better on `colour` (WCAG relative luminance); white when unsure. */
  function textColourOn(colour) {
    const context = document.createElement("canvas").getContext("2d");
    if (!context) return "#ffffff";
    context.fillStyle = "#000000";
    context.fillStyle = colour; // a colour the canvas cannot parse leaves black, hence the check
    const hex = /^#([0-9a-f]{2})([0-9a-f]{2})([0-9a-f]{2})$/i.exec(context.fillStyle);
    const rgb = /^rgba?\((\d+), (\d+), (\d+)/.exec(context.fillStyle);
    const parts = hex ? hex.slice(1, 4).map((v) => parseInt(v, 16)) : rgb ? rgb.slice(1, 4).map(Number) : null;
    if (!parts) return "#ffffff";
    const [r, g, b] = parts.map((v) => {
      const c = v / 255;
      return c <= 0.03928 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4;
    });
    const luminance = 0.2126 * r + 0.7152 * g + 0.0722 * b;
    return 1.05 / (luminance + 0.05) >= (luminance + 0.05) / 0.05 ? "#ffffff" : "#111318";
  }

  /** The example prompts of the `prompts` attribute: a JSON array; only non-empty strings count. */
  function parsePrompts(value) {
    if (!value) return [];
    let list;
    try {
      list = JSON.parse(value);
    } catch {
      list = null;
    }
    if (!Array.isArray(list)) {
      console.warn('<agora-chat>: prompts must be a JSON array of strings, like \'["Track my order"]\'');
      return [];
    }
    return list
      .filter((item) => typeof item === "string" && item.trim() && item.length <= MAX_TEXT)
      .map((item) => item.trim())
      .slice(0, 8);
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

  // -- the conversations list (the full-page layout) ---------------------------------------------

  /** Characters of a name given to a conversation (the gateway's own bound). */
  const TITLE_MAX = 200;
  const THREADS_PAGE = 30;

  /**
   * The person's conversations beside the chat (`GET /agent/threads`), newest first: open one,
   * rename it in place (`PATCH`), delete it after a confirm (`DELETE`), start a new one. The
   * element gives it `request(path, options)` (a fetch to the gateway with the person's
   * credentials), `open(threadId)`, `startNew()` and `current()` (the thread on screen).
   */
  class ConversationList {
    constructor(ui, { request, open, startNew, current, announce }) {
      this.ui = ui;
      this.request = request;
      this.open = open;
      this.startNew = startNew;
      this.current = current;
      this.announce = announce;
      this.items = []; // [{thread_id, title, last_activity}], as the gateway listed them
      this.cursor = null;
      this.loading = null;
      this.again = false;
      this.timer = 0;
      this.ticker = 0;
      this.editing = null; // the thread id being renamed or asked about: the list is not redrawn meanwhile
      ui["threads-new"].addEventListener("click", () => this.startNew());
      ui["threads-more"].addEventListener("click", () => this.load({ more: true }));
    }

    /** Say again how long ago each conversation was active (a minute's ticker, while the element is on a page). */
    tick() {
      for (const time of this.ui["threads-list"].querySelectorAll(".ac-thread__time[datetime]")) {
        time.textContent = formatAgo(time.dateTime);
      }
    }

    /** Load the first page again soon: changes within `delay` of the first make one request. */
    refresh(delay = 150) {
      if (this.timer && delay > 0) return; // one is due already
      clearTimeout(this.timer);
      this.timer = setTimeout(() => {
        this.timer = 0;
        this.load();
      }, delay);
    }

    start() {
      this.ticker ||= setInterval(() => this.tick(), 60_000);
    }

    stop() {
      clearTimeout(this.timer);
      this.timer = 0;
      clearInterval(this.ticker);
      this.ticker = 0;
    }

    async load({ more = false } = {}) {
      if (this.loading) {
        this.again = true; // once this one is in: things changed while it was asked
        return this.loading;
      }
      const query = new URLSearchParams({ limit: String(THREADS_PAGE) });
      if (more && this.cursor) query.set("cursor", this.cursor);
      this.loading = (async () => {
        try {
          const response = await this.request(`threads?${query}`);
          if (!response.ok) throw new Error(String(response.status));
          const body = await response.json();
          const lines = Array.isArray(body.threads) ? body.threads : [];
          if (more) {
            const known = new Set(this.items.map((item) => item.thread_id));
            this.items.push(...lines.filter((line) => !known.has(line.thread_id)));
          } else {
            // A refresh keeps the older pages already shown (beyond the first page, as they were).
            const fresh = new Set(lines.map((line) => line.thread_id));
            const older = this.items.length > THREADS_PAGE ? this.items.slice(THREADS_PAGE) : [];
            this.items = [...lines, ...older.filter((item) => !fresh.has(item.thread_id))];
          }
          if (more || this.items.length <= THREADS_PAGE) this.cursor = body.next_cursor || null;
          this.showError(null);
        } catch {
          this.showError("The conversations could not be loaded.");
        }
        this.render();
      })().finally(() => {
        this.loading = null;
        if (this.again) {
          this.again = false;
          this.refresh(0);
        }
      });
      return this.loading;
    }

    showError(message) {
      this.ui["threads-error"].textContent = message || "";
      this.ui["threads-error"].hidden = !message;
    }

    render() {
      // Mid-rename or mid-confirm, the list stays as it is (moving the row would take its focus):
      // it is drawn again when that ends.
      if (this.editing) return;
      const list = this.ui["threads-list"];
      // A button of the list that has the focus keeps it in the redrawn row.
      const focused = list.getRootNode().activeElement;
      const row = focused && list.contains(focused) ? focused.closest(".ac-thread") : null;
      const control = row ? [...row.querySelectorAll("button")].indexOf(focused) : -1;
      list.replaceChildren(...this.items.map((item) => this.row(item)));
      if (row && control >= 0) {
        const again = this.rowOf(row.dataset.threadId)?.querySelectorAll("button")[control];
        (again || this.ui["threads-new"]).focus({ preventScroll: true });
      }
      this.markCurrent();
      this.ui["threads-empty"].hidden = this.items.length > 0;
      this.ui["threads-more"].hidden = !this.cursor;
    }

    /** Show which conversation is on screen. */
    markCurrent() {
      const current = this.current();
      for (const row of this.ui["threads-list"].children) {
        const open = row.querySelector(".ac-thread__open");
        if (!open) continue;
        if (row.dataset.threadId === current) open.setAttribute("aria-current", "true");
        else open.removeAttribute("aria-current");
      }
    }

    static titleOf(item) {
      return item.title || "Untitled conversation";
    }

    row(item) {
      const title = ConversationList.titleOf(item);
      const time = h("time", { class: "ac-thread__time" }, formatAgo(item.last_activity));
      if (!Number.isNaN(new Date(item.last_activity).getTime())) {
        time.dateTime = new Date(item.last_activity).toISOString();
        time.title = new Date(item.last_activity).toLocaleString();
      }
      const open = h(
        "button",
        { type: "button", class: "ac-thread__open" },
        h("span", { class: "ac-thread__title" }, title),
        time,
      );
      open.addEventListener("click", () => this.open(item.thread_id));
      const rename = h("button", { type: "button", class: "ac-iconbtn ac-thread__rename", "aria-label": `Rename “${title}”`, title: "Rename" }, icon("edit"));
      const remove = h("button", { type: "button", class: "ac-iconbtn ac-thread__delete", "aria-label": `Delete “${title}”`, title: "Delete" }, icon("trash"));
      rename.addEventListener("click", () => this.startRename(item));
      remove.addEventListener("click", () => this.confirmDelete(item));
      const row = h("li", { class: "ac-thread" }, open, h("div", { class: "ac-thread__actions" }, rename, remove));
      row.dataset.threadId = item.thread_id;
      return row;
    }

    rowOf(threadId) {
      return [...this.ui["threads-list"].children].find((row) => row.dataset.threadId === threadId) || null;
    }

    /** Rename in place: Enter (or leaving the field) saves, Escape gives up; an empty name gives back the first message. */
    startRename(item) {
      const row = this.rowOf(item.thread_id);
      if (!row) return;
      this.editing = item.thread_id;
      const input = h("input", { type: "text", class: "ac-thread__input", maxlength: TITLE_MAX, "aria-label": "Conversation name" });
      input.value = item.title || "";
      const form = h("form", { class: "ac-thread__form" }, input);
      let done = false;
      const finish = async (save) => {
        if (done) return;
        done = true;
        const title = input.value.replace(/\s+/g, " ").trim();
        if (save && title !== (item.title || "")) {
          input.disabled = true;
          const ok = await this.rename(item, title || null);
          if (!ok) this.showError("The conversation could not be renamed.");
        }
        this.editing = null;
        this.render();
        this.rowOf(item.thread_id)?.querySelector(".ac-thread__rename")?.focus();
      };
      form.addEventListener("submit", (event) => {
        event.preventDefault();
        finish(true);
      });
      input.addEventListener("keydown", (event) => {
        if (event.key === "Escape") {
          event.preventDefault();
          event.stopPropagation();
          finish(false);
        }
      });
      input.addEventListener("blur", () => finish(true));
      row.replaceChildren(form);
      input.focus();
      input.select();
    }

    async rename(item, title) {
      try {
        const response = await this.request(`threads/${encodeURIComponent(item.thread_id)}`, {
          method: "PATCH",
          json: { title },
        });
        if (!response.ok) return false;
        const body = await response.json();
        for (const known of this.items) if (known.thread_id === item.thread_id) known.title = body.title ?? null;
        item.title = body.title ?? null;
        this.announce(`Renamed to ${ConversationList.titleOf(item)}`);
        this.refresh();
        return true;
      } catch {
        return false;
      }
    }

    /** Ask in the row itself before deleting: what goes, and two buttons (Cancel has the focus). */
    confirmDelete(item) {
      const row = this.rowOf(item.thread_id);
      if (!row) return;
      this.editing = item.thread_id;
      const title = ConversationList.titleOf(item);
      const question = h("p", { class: "ac-thread__question" }, `Delete “${title}”? Its messages are erased for good.`);
      const cancel = h("button", { type: "button", class: "ac-btn ac-btn--secondary" }, "Cancel");
      const confirm = h("button", { type: "button", class: "ac-btn ac-btn--danger" }, "Delete");
      const box = h("div", { class: "ac-thread__confirm", role: "group", "aria-label": `Delete “${title}”` }, question, h("div", { class: "ac-thread__buttons" }, cancel, confirm));
      const back = () => {
        this.editing = null;
        this.render();
        this.rowOf(item.thread_id)?.querySelector(".ac-thread__delete")?.focus();
      };
      cancel.addEventListener("click", back);
      box.addEventListener("keydown", (event) => {
        if (event.key === "Escape") {
          event.preventDefault();
          event.stopPropagation();
          back();
        }
      });
      confirm.addEventListener("click", async () => {
        confirm.setAttribute("aria-disabled", "true");
        cancel.setAttribute("aria-disabled", "true");
        confirm.prepend(h("span", { class: "ac-spinner", "aria-hidden": "true" }));
        const ok = await this.remove(item);
        this.editing = null;
        if (!ok) this.showError("The conversation could not be deleted.");
        this.render();
        if (ok) this.ui["threads-new"].focus();
      });
      row.replaceChildren(box);
      cancel.focus();
    }

    async remove(item) {
      try {
        const response = await this.request(`threads/${encodeURIComponent(item.thread_id)}`, { method: "DELETE" });
        if (!response.ok && response.status !== 404) return false; // already gone is gone
        this.items = this.items.filter((other) => other.thread_id !== item.thread_id);
        this.announce(`Deleted ${ConversationList.titleOf(item)}`);
        this.refresh();
        if (item.thread_id === this.current()) this.startNew();
        return true;
      } catch {
        return false;
      }
    }
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
      <nav class="ac-threads" data-slot="threads" aria-label="Conversations" hidden>
        <div class="ac-threads__head">
          <h2 class="ac-threads__title">Conversations</h2>
          <button type="button" class="ac-iconbtn ac-threads__close" data-slot="threads-close" aria-label="Close the conversations"></button>
        </div>
        <button type="button" class="ac-btn ac-btn--secondary ac-threads__new" data-slot="threads-new">New conversation</button>
        <p class="ac-threads__error" data-slot="threads-error" role="alert" hidden></p>
        <ul class="ac-threads__list" data-slot="threads-list"></ul>
        <p class="ac-threads__empty" data-slot="threads-empty" hidden>Your conversations will be listed here.</p>
        <button type="button" class="ac-linkbtn ac-threads__more" data-slot="threads-more" hidden>Show older</button>
      </nav>
      <div class="ac-scrim" data-slot="scrim" hidden></div>
      <header class="ac-header">
        <button type="button" class="ac-iconbtn ac-threads-toggle" data-slot="threads-toggle" aria-label="Conversations"
          aria-expanded="false" hidden></button>
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
            <p class="ac-empty__text" data-slot="empty-text"></p>
            <ul class="ac-prompts" data-slot="prompts" aria-label="Examples" hidden></ul>
          </div>
        </div>
        <button type="button" class="ac-jump" data-slot="jump" hidden>Latest messages</button>
      </div>
      <p class="ac-banner" data-slot="banner" role="alert" hidden></p>
      <ul class="ac-files" data-slot="files" aria-label="Files to send" hidden></ul>
      <form class="ac-composer" data-slot="form" novalidate>
        <label class="ac-sr" data-slot="label">Message</label>
        <textarea data-slot="input" rows="1" maxlength="${MAX_TEXT}" placeholder="Write a message…" enterkeyhint="send"
          autocomplete="off" aria-describedby="ac-hint"></textarea>
        <button type="button" class="ac-attach" data-slot="attach" aria-label="Attach a file"></button>
        <input type="file" data-slot="file" multiple hidden tabindex="-1"
          accept="image/png,image/jpeg,image/gif,image/webp,application/pdf">
        <button type="button" class="ac-stop" data-slot="stop" aria-label="Stop" hidden><span>Stop</span></button>
        <button type="submit" class="ac-send" data-slot="send" aria-label="Send"></button>
      </form>
      <p class="ac-sr" id="ac-hint">Enter sends, Shift+Enter adds a line.</p>
      <div class="ac-sr" data-slot="announcer" aria-live="polite" aria-atomic="true"></div>
    </section>`;

  const DEFAULT_WELCOME = "Ask a question below. Actions that change something wait for your approval.";
  const DEMO_WELCOME = "This demo answers with an offline, rule-based model. Try one of the examples, or say hello.";

  /** A frame of our own in the transcript (never from the server): the conversation was lost here. */
  const LOST_FRAME = "agora-chat:conversation-lost";

  let instances = 0;

  class AgoraChat extends HTMLElement {
    static observedAttributes = [
      "endpoint", "src", "token", "thread", "title", "welcome", "prompts", "accent", "logo", "layout",
      "agent", "persona",
    ];

    // connection
    #ws = null;
    #attempt = 0;
    #retryTimer = 0;
    #stopped = true;
    #files = []; // attachments waiting for the next send: {id, name, mime, size, url}
    #uploading = 0;
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
    #toolInfo = new Map(); // tool_call_id -> {line, toggle, details, summary, input, output, result, error}
    #nested = new Map(); // a handoff's tool_call_id -> the group of its sub-agent's lines
    #decisions = new Map(); // tool_call_id -> the approval-settled frame (its wording depends on who you are)
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
    #queued = new Map(); // queued message_id -> {bubble, text}: waits for the active run to end
    #dequeued = new Set(); // message ids that left the queue: a late message-queued or ack is stale
    #remembered = false; // a conversation was cached for this thread: losing it is worth saying
    #demo = false;
    #uid = "";
    #ids = 0;
    #ui = {};
    #threads = null; // the conversations list (the full-page layout)

    constructor() {
      super();
      const root = this.attachShadow({ mode: "open", delegatesFocus: false });
      root.append(TEMPLATE.content.cloneNode(true));
      for (const node of root.querySelectorAll("[data-slot]")) this.#ui[node.dataset.slot] = node;
      const uid = `ac${++instances}`;
      this.#uid = uid;
      this.#ui.input.id = `${uid}-input`;
      this.#ui.label.htmlFor = this.#ui.input.id;
      this.#applyLogo();
      this.#ui.new.append(icon("plus"));
      this.#ui.send.append(icon("send"));
      this.#ui.attach.append(icon("attach"));
      this.#ui.stop.prepend(icon("stop"));
      this.#ui.jump.prepend(icon("arrowDown"));
      this.#ui["threads-toggle"].append(icon("menu"));
      this.#ui["threads-close"].append(icon("cross"));
      this.#ui["threads-new"].prepend(icon("plus"));
      this.#ui.threads.id = `${uid}-threads`;
      this.#ui["threads-toggle"].setAttribute("aria-controls", this.#ui.threads.id);
      this.#threads = new ConversationList(this.#ui, {
        request: (path, options) => this.#request(path, options),
        open: (threadId) => this.#openThread(threadId),
        startNew: () => {
          this.#showThreads(false);
          this.newConversation();
        },
        current: () => this.#threadId,
        announce: (text) => this.#announce(text),
      });
      this.#bindUi();
      this.#applyWelcome();
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
      const files = this.#files.filter((file) => file.id);
      if ((!value && !files.length) || value.length > MAX_TEXT || !this.#canSend() || this.#uploading) return false;
      const id = this.#nextId("send");
      const bubble = this.#userBubble(value, { pending: true });
      if (files.length) bubble.querySelector(".ac-msg__body").append(this.#fileList(files, false));
      this.#pending.set(id, { kind: "send", text: value, bubble });
      this.#log().append(bubble);
      this.#ui.empty.hidden = true;
      this.#scrollToEnd(true);
      const context = pageContext ?? (typeof this.#pageContext === "function" ? this.#pageContext() : this.#pageContext);
      const frame = { type: "send", id, text: value };
      const agent = this.getAttribute("agent");
      if (agent) frame.agent = agent;
      const persona = this.getAttribute("persona");
      if (persona) frame.persona = persona;
      if (files.length) frame.attachments = files.map((file) => file.id);
      if (context && typeof context === "object") frame.page_context = context;
      this.#files = [];
      this.#renderFiles();
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
      this.#threads.markCurrent();
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
      this.#applyBrand();
      this.#applyLayout();
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
      this.#threads.stop();
      clearTimeout(this.#retryTimer);
      clearInterval(this.#ticker);
      this.#ticker = 0;
      this.#ws?.close(1000, "bye");
      this.#ws = null;
    }

    attributeChangedCallback(name, previous, value) {
      switch (name) {
        case "title":
          if (value !== null) {
            this.title = value;
            this.removeAttribute("title");
          }
          return;
        case "welcome":
          this.#applyWelcome();
          return;
        case "prompts":
          this.#applyPrompts();
          return;
        case "accent":
          this.#applyAccent();
          return;
        case "logo":
          this.#applyLogo();
          return;
        case "layout":
          this.#applyLayout();
          return;
        default:
          break;
      }
      if (previous === value || !this.isConnected || this.#stopped) return;
      switch (name) {
        case "token":
        case "agent":
          // A fresh token or agent matters at the next hello; a socket refused for one retries now.
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
          this.#applyLayout();
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
        link.addEventListener("load", () => this.#measureGutter(), { once: true });
        link.href = assetUrl(link.dataset.href, this.#endpoint());
      }
    }

    /** The log's scroll bar width (0 for overlay scroll bars): the page layout centres the column around it. */
    #measureGutter() {
      const log = this.#log();
      this.#ui.panel.style.setProperty("--ac-gutter", `${Math.max(0, log.offsetWidth - log.clientWidth)}px`);
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
        const hello = {
          type: "hello",
          id: "hello",
          after_seq: this.#lastSeq,
          ui_capabilities: { formats: ["html", "image", "text"] },
          batch: true,
        };
        if (this.#threadId) hello.thread_id = this.#threadId;
        const token = this.getAttribute("token");
        if (token) hello.token = token;
        const agent = this.getAttribute("agent");
        if (agent) hello.agent = agent;
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
        if (!frame || typeof frame.type !== "string") return;
        if (frame.type !== "batch") {
          this.#onFrame(frame);
          return;
        }
        for (const event of Array.isArray(frame.events) ? frame.events : []) {
          // A frame handled earlier may have closed this socket (or opened another): the rest is not ours.
          if (this.#ws !== ws) return;
          if (event && typeof event.type === "string" && event.type !== "batch") this.#onFrame(event);
        }
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
      // A new conversation appears with its first run; every run moves its conversation to the top.
      if ((frame.type === "run-started" || frame.type === "run-finished") && this.#listsThreads()) {
        this.#threads.refresh();
      }
      this.#emit("agora-event", frame);
    }

    #onWelcome(frame) {
      // The thread the hello asked for is gone (a store that was reset, or a thread the server
      // replaced with a fresh one): what is on screen is no longer the server's conversation.
      const asked = this.#threadId;
      if (asked && (frame.restored === false || asked !== frame.thread_id)) this.#conversationLost();
      this.#threadId = frame.thread_id;
      const actor = frame.actor?.id ?? null;
      if (actor !== this.#actorId) {
        this.#actorId = actor;
        this.#rewordDecisions();
      }
      this.#welcomed = true;
      this.#attempt = 0;
      this.#hideBanner();
      this.#setStatus("online");
      // An error that was about the connection is about the past now.
      for (const error of this.#log().querySelectorAll(".ac-approval__error[data-cause=connection]")) {
        error.hidden = true;
        error.textContent = "";
        delete error.dataset.cause;
      }
      this.#ui.badge.hidden = !frame.demo;
      this.#ui.badge.textContent = DEMO_BADGE;
      this.#demo = !!frame.demo;
      this.#applyWelcome();
      if (!this.#cache) this.#cache = new TranscriptCache(this.#cacheKey());
      this.#scheduleSave();
      this.#updateComposer();
      if (this.#listsThreads()) this.#threads.refresh(0);
      const { thread_id, actor: who, agent } = frame;
      const restored = frame.restored !== false;
      this.#emit("agora-welcome", { thread_id, actor: who, agent, demo: !!frame.demo, restored });
    }

    /**
     * The server no longer has the conversation on screen. Say so, once, where it happened (a
     * local frame, kept with the transcript, so a reload shows the same), keep what was shown as
     * a read-only copy, and start over from the server's (empty or shorter) log.
     */
    #conversationLost() {
      const since = this.#frames.findLastIndex((f) => f.type === LOST_FRAME) + 1;
      const shown = this.#frames.length > since;
      this.#lastSeq = 0;
      if (!shown && !this.#remembered) return; // nothing was seen: nothing is lost
      this.#remembered = false;
      const frame = { type: LOST_FRAME, copy: shown, at: new Date().toISOString() };
      this.#frames.push(frame);
      this.#apply(frame);
      this.#scheduleSave();
    }

    /** Draw the loss of the conversation: the transcript above becomes a read-only copy. */
    #markLost(frame) {
      const undecidable = "This can no longer be decided: the conversation was not restored.";
      for (const card of this.#approvals.values()) {
        if (card.dataset.status === "pending") this.#settleCard(card, "lost", "Not decided", undecidable, "cross");
      }
      for (const line of this.#tools.values()) {
        if (line.dataset.state !== "running") continue;
        line.dataset.state = "stopped";
        line.querySelector(".ac-tool__text .ac-sr").textContent = ", stopped";
        nameTool(line);
        line.querySelector(".ac-tool__state").replaceChildren(icon("stop", "ac-icon ac-icon--state"));
      }
      for (const message of this.#messages.values()) {
        if (message.done) continue;
        message.done = true;
        message.node.removeAttribute("aria-busy");
        message.body.replaceChildren(richText(message.text));
      }
      for (const button of this.#log().querySelectorAll(".ac-retry")) button.remove();
      // From here on, events build new nodes: the copy above is nobody's to update any more.
      for (const map of [this.#runs, this.#messages, this.#tools, this.#toolInfo, this.#approvals, this.#components]) {
        map.clear();
      }
      this.#decisions.clear();
      this.#unsent.clear();
      this.#queued.clear();
      this.#dequeued.clear();
      this.#renderQueue.clear();
      const text =
        "This conversation could not be restored: the server no longer has it, most likely because it " +
        "restarted and kept its conversations only in memory. " +
        (frame.copy ? "Above is this browser's copy, read-only; new" : "New") +
        " messages start a new conversation.";
      this.#log().append(h("p", { class: "ac-lost", role: "note" }, icon("warning"), h("span", {}, text)));
      this.#announce(text);
    }

    /** Who decided depends on who you are: said again once the server has named you. */
    #rewordDecisions() {
      for (const [callId, frame] of this.#decisions) {
        const outcome = this.#approvals.get(callId)?.querySelector(".ac-approval__outcome");
        if (outcome) outcome.lastChild.textContent = approvalOutcome(frame, this.#actorId)[1];
      }
    }

    #onAck(frame) {
      const pending = this.#pending.get(frame.id);
      if (!pending) return;
      this.#pending.delete(frame.id);
      if (pending.kind === "send" && frame.queued && frame.message_id) {
        if (this.#dequeued.has(frame.message_id) || pending.bubble.dataset.runId) return; // it ran already
        const known = this.#queued.get(frame.message_id);
        if (known && known.bubble !== pending.bubble) known.bubble.remove(); // announced before its ack
        this.#markQueued(pending.bubble, frame.message_id, pending.text);
        return;
      }
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
        case "queue":
          this.#showBanner(message);
          break;
        default:
          if (frame.id === "hello" && frame.code === "unknown_agent") {
            // The `agent` attribute names no agent this person may use: wait for another one.
            this.#halted = true;
            this.#setStatus("offline");
            this.#showBanner(message);
          } else if (frame.id !== "hello") {
            this.#showBanner(message);
          }
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
        if (pending.kind === "decide") {
          this.#decisionFailed(pending.card, "The connection dropped; try again.", { connection: true });
        }
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
        case "message-queued":
          this.#messageQueued(frame);
          break;
        case "message-dequeued":
          this.#messageDequeued(frame);
          break;
        case "quota-warning": {
          const share = frame.limit ? Math.min(100, Math.floor((100 * frame.used) / frame.limit)) : 100;
          const period = frame.period === "month" ? "monthly" : "daily";
          this.#notice(frame, "quota", `You have used ${share}% of your ${period} allowance.`);
          break;
        }
        case LOST_FRAME:
          this.#markLost(frame);
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
        this.#log().append((bubble = this.#userBubble(known, { runId: frame.run_id, at: frame.at })));
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
          this.#log().append((bubble = this.#userBubble("", { runId: frame.run_id, unknown: true, at: frame.at })));
          this.#lookUpUserTexts();
        }
      }
      const run = this.#run(frame);
      run.user = bubble;
      bubble.after(run.turn);
      const time = bubble.querySelector(".ac-msg__time");
      if (time) setTime(time, frame.at);
      // Only the last failure offers to try again: a new run makes the older offers moot.
      for (const button of this.#log().querySelectorAll(".ac-notice .ac-retry")) button.remove();
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
        const time = h("time", { class: "ac-msg__time" });
        const copyAttrs = { type: "button", class: "ac-copy", "aria-label": "Copy message", title: "Copy" };
        const copy = h("button", copyAttrs, icon("copy"));
        const foot = h("div", { class: "ac-msg__foot" }, copy);
        foot.hidden = true; // until the message is whole
        const attrs = { class: "ac-msg ac-msg--assistant", role: "article", tabindex: "-1", "aria-busy": "true" };
        const node = h("div", attrs, who, body, time, foot);
        message = { node, body, foot, time, text: "", done: false };
        copy.addEventListener("click", () => this.#copy(message.text));
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
      // The end's time, not the first word's: a reload (which keeps only the end) shows the same.
      setTime(message.time, frame.at);
      message.foot.hidden = false;
      this.#announce(message.text);
    }

    /** Copy `text` to the clipboard (through a selection where the Clipboard API is refused). */
    async #copy(text) {
      try {
        await navigator.clipboard.writeText(text);
      } catch {
        const area = h("textarea", { class: "ac-sr", readonly: true, "aria-hidden": "true" });
        area.value = text;
        this.#ui.panel.append(area);
        area.select();
        const copied = document.execCommand("copy");
        area.remove();
        if (!copied) {
          this.#announce("Could not copy: the browser refused.");
          return;
        }
      }
      this.#announce("Copied");
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
      const narration = frame.running || frame.label || humanize(frame.tool) || "Working";
      if (!line) {
        // The whole line is a disclosure button: it shows the call's arguments and its result.
        const detailsId = `${this.#uid}-tool-${++this.#ids}`;
        const toggle = h(
          "button",
          { type: "button", class: "ac-tool__toggle", "aria-expanded": "false", "aria-controls": detailsId },
          h("span", { class: "ac-tool__icon" }, icon(frame.icon || "tool")),
          // One span for the words and how it went: the button's name reads "Refunded order 1042, done".
          h("span", { class: "ac-tool__text" }, h("span", { class: "ac-tool__label" }), h("span", { class: "ac-sr" })),
          h("span", { class: "ac-tool__state" }),
          icon("chevron", "ac-icon ac-tool__chevron"),
        );
        line = h("div", { class: "ac-tool", "data-state": "running", "data-tool": frame.tool }, toggle);
        const details = h("div", { class: "ac-tool-details", id: detailsId, hidden: true });
        const info = {
          line, toggle, details, summary: null, // its nodes (summary: the result view under the line)
          input: frame.input, output: undefined, result: null, error: null, // what the call said
        };
        toggle.addEventListener("click", () => this.#toggleDetails(info));
        this.#tools.set(frame.tool_call_id, line);
        this.#toolInfo.set(frame.tool_call_id, info);
        // An approved action's line goes right under its approval card.
        const card = this.#approvals.get(frame.tool_call_id);
        if (card) card.after(line);
        else this.#place(frame).append(line);
        line.after(details);
      }
      const info = this.#toolInfo.get(frame.tool_call_id);
      if (frame.input && typeof frame.input === "object") info.input = frame.input;
      line.dataset.state = "running";
      line.querySelector(".ac-tool__label").textContent = narration;
      line.querySelector(".ac-tool__text .ac-sr").textContent = ", running";
      nameTool(line);
      line.querySelector(".ac-tool__state").replaceChildren(h("span", { class: "ac-spinner", "aria-hidden": "true" }));
      this.#fillDetails(info);
      this.#announce(`${narration}…`);
    }

    /**
     * Where a line goes: its run's turn, or, for a sub-agent's line (`parent_tool_call_id`, a
     * handoff), a group indented under the handoff's own line.
     */
    #place(frame) {
      const parentId = frame.parent_tool_call_id;
      const parent = parentId ? this.#tools.get(parentId) : null;
      if (!parent) return this.#run(frame).turn;
      let group = this.#nested.get(parentId);
      if (!group) {
        const who = humanize(frame.sub_agent || "") || "Another agent";
        group = h("div", { class: "ac-nested", role: "group", "aria-label": `${who} at work` });
        let anchor = parent;
        while (anchor.nextElementSibling?.matches(".ac-tool-details, .ac-tool-result")) anchor = anchor.nextElementSibling;
        anchor.after(group);
        this.#nested.set(parentId, group);
      }
      return group;
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
        this.#toolStarted({ ...frame, running: humanize(frame.tool) || "Working", icon: null, input: null });
        line = this.#tools.get(frame.tool_call_id);
      }
      const info = this.#toolInfo.get(frame.tool_call_id);
      line.dataset.state = state;
      const label = line.querySelector(".ac-tool__label");
      if (text) label.textContent = text;
      const words = { done: "done", failed: "failed", denied: "not run", stopped: "stopped" }[state];
      const glyph = { done: "check", stopped: "stop" }[state] || "cross";
      // Read as "Refunding order 1042, done" or "Fetching the invoice, failed: No such order".
      line.querySelector(".ac-tool__text .ac-sr").textContent = detail ? "" : `, ${words}`;
      nameTool(line);
      line.querySelector(".ac-tool__state").replaceChildren(icon(glyph, "ac-icon ac-icon--state"));
      line.querySelector(".ac-tool__detail")?.remove();
      if (detail) {
        const prefix = detail.toLowerCase() === words ? ", " : `, ${words}: `;
        line.append(h("span", { class: "ac-tool__detail" }, h("span", { class: "ac-sr" }, prefix), detail));
      }
      info.output = frame.output;
      info.result = frame.result ?? null;
      info.error = state === "done" ? null : detail || words;
      // The result view reads under the line (after its details), before the components the call showed.
      if (extra) {
        info.summary = h("div", { class: "ac-tool-result" }, extra);
        info.summary.hidden = info.toggle.getAttribute("aria-expanded") === "true";
        info.details.after(info.summary);
      }
      this.#fillDetails(info);
      this.#announce(state === "done" ? label.textContent : `${label.textContent}: ${detail || words}`);
    }

    #toggleDetails(info) {
      const open = info.toggle.getAttribute("aria-expanded") !== "true";
      const stick = this.#nearEnd();
      info.toggle.setAttribute("aria-expanded", String(open));
      info.details.hidden = !open;
      // Open, the details carry the result view: the summary under the line would repeat it.
      if (info.summary) info.summary.hidden = open;
      this.#fillDetails(info);
      if (open && stick) this.#scrollToEnd(true); // opened at the end: the details must not hide below
    }

    /** The details of a call: what the model asked for, and what came back (the result view when there is one). */
    #fillDetails(info) {
      if (info.details.hidden) return; // drawn when opened
      const input = h("div", { class: "ac-details__input" }, h("p", { class: "ac-details__label" }, "Input"));
      input.append(fieldsView(info.input, "No input."));
      const result = h("div", { class: "ac-details__result" }, h("p", { class: "ac-details__label" }, "Result"));
      const state = info.line.dataset.state;
      if (state === "running") result.append(h("p", { class: "ac-result ac-result--note" }, "Still working…"));
      else if (info.error) result.append(h("p", { class: "ac-result ac-result--note" }, info.error));
      else result.append(resultView(info.result) || fieldsView(info.output, "Nothing came back."));
      info.details.replaceChildren(input, result);
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
      // The person asking decides, unless the gateway's policy names approvers of a role.
      const mine = !frame.approver || frame.approver === "requester";
      const kicker = mine ? "Needs your approval" : "Needs approval";
      // "Always": approve later calls of this tool in the conversation too (never for a role's: four eyes).
      const remember = mine
        ? h(
            "label",
            { class: "ac-approval__remember" },
            h("input", { type: "checkbox", "data-remember": true }),
            "Always allow this in this conversation",
          )
        : null;
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
        h("p", { class: "ac-approval__kicker" }, icon(destructive ? "warning" : "shield"), kicker),
        h("p", { class: "ac-approval__title", id: `${id}-title` }, confirmation.title || "Approve this action?"),
        h(
          "p",
          { class: "ac-approval__detail", id: `${id}-detail` },
          confirmation.detail || "",
          expiry ? h("span", { class: "ac-approval__expiry", "data-expires-at": frame.expires_at }, expiry) : null,
        ),
        h("div", { class: "ac-approval__actions" }, reject, approve),
        remember,
        h("p", { class: "ac-approval__error", role: "alert", hidden: true }),
        h("p", { class: "ac-approval__outcome", hidden: true }),
      );
      card.dataset.toolCallId = frame.tool_call_id;
      approve.addEventListener("click", () => this.#decide(card, true));
      reject.addEventListener("click", () => this.#decide(card, false));
      this.#approvals.set(frame.tool_call_id, card);
      this.#place(frame).append(card);
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
      if (approve && card.querySelector("[data-remember]")?.checked) frame.remember = true;
      if (!this.#transmit(frame)) {
        this.#decisionFailed(card, "Not connected; try again in a moment.", { connection: true });
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

    /** A decision that did not go through; one lost with the connection is cleared once it is back. */
    #decisionFailed(card, message, { connection = false } = {}) {
      if (!card || card.dataset.status !== "pending") return;
      card.removeAttribute("aria-busy");
      for (const button of card.querySelectorAll("button")) {
        button.removeAttribute("aria-disabled");
        button.querySelector(".ac-spinner")?.remove();
      }
      const error = card.querySelector(".ac-approval__error");
      error.textContent = message;
      error.hidden = false;
      if (connection) error.dataset.cause = "connection";
      else delete error.dataset.cause;
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
      this.#decisions.set(frame.tool_call_id, frame);
      const [state, text] = approvalOutcome(frame, this.#actorId);
      this.#settleCard(card, frame.status, state, text, frame.status === "approved" ? "check" : "cross");
      this.#announce(text);
    }

    /** A card that no longer waits: its buttons go, its kicker and last line say what happened. */
    #settleCard(card, status, state, text, glyph) {
      const hadFocus = card.contains(this.shadowRoot.activeElement);
      card.dataset.status = status;
      card.removeAttribute("aria-busy");
      card.querySelector(".ac-approval__actions")?.remove();
      card.querySelector(".ac-approval__remember")?.remove();
      card.querySelector(".ac-approval__expiry")?.remove();
      const error = card.querySelector(".ac-approval__error");
      error.hidden = true;
      error.textContent = "";
      card.querySelector(".ac-approval__kicker").replaceChildren(icon(glyph), state);
      const outcome = card.querySelector(".ac-approval__outcome");
      outcome.replaceChildren(icon(glyph), text);
      outcome.hidden = false;
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
        const own = `.ac-ui[data-tool-call-id="${CSS.escape(frame.tool_call_id || "")}"]`;
        const siblings = `.ac-tool-details, .ac-tool-result, ${own}`;
        while (anchor?.nextElementSibling?.matches(siblings)) anchor = anchor.nextElementSibling;
        if (frame.tool_call_id) wrapper.dataset.toolCallId = frame.tool_call_id;
        if (anchor?.parentNode) anchor.after(wrapper);
        else this.#place(frame).append(wrapper);
      }
      const title = typeof frame.props?.title === "string" ? frame.props.title : "";
      const label = frame.fallback_text || title || humanize(frame.component);
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
        keepFiguresWhole(template.content);
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
      return h("p", { class: "ac-ui__text" }, frame.text || frame.fallback_text || humanize(frame.component));
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
      const glyph = icon(kind === "stopped" ? "stop" : "warning");
      const notice = h("p", { class: `ac-notice ac-notice--${kind}` }, glyph, h("span", {}, text));
      if (kind === "error") notice.setAttribute("role", this.#quiet ? "note" : "alert");
      const run = this.#run(frame);
      const asked = this.#users[frame.run_id] ?? run.user?.querySelector(".ac-msg__body")?.textContent;
      if (kind === "error" && asked) {
        // A failed run (the model could not be reached, say) can be asked again, as it was.
        const retry = h("button", { type: "button", class: "ac-linkbtn ac-retry" }, icon("retry"), "Retry");
        retry.addEventListener("click", () => {
          if (this.#sendOrDraft(asked)) retry.remove();
        });
        notice.append(retry);
      }
      run.turn.append(notice);
      if (kind !== "error") this.#announce(text);
    }

    // -- the person's messages ----------------------------------------------------------------------

    #userBubble(text, { runId = null, pending = false, unknown = false, at = null } = {}) {
      const body = h("div", { class: "ac-msg__body" });
      if (text) body.append(richTextPlain(text));
      const time = h("time", { class: "ac-msg__time" });
      setTime(time, at || new Date().toISOString());
      const attrs = { class: "ac-msg ac-msg--user", role: "article", tabindex: "-1" };
      const bubble = h("div", attrs, h("span", { class: "ac-sr" }, "You: "), body, time);
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

    // -- queued messages ------------------------------------------------------------------------------

    /** A message waiting for the active run: a bubble that can be edited or removed until it runs. */
    #messageQueued(frame) {
      if (this.#dequeued.has(frame.message_id)) return; // written after it began (or was removed)
      const known = this.#queued.get(frame.message_id);
      if (known) {
        if (frame.edited && frame.text !== known.text) {
          known.text = frame.text;
          known.bubble.querySelector(".ac-msg__body").replaceChildren(richTextPlain(frame.text));
        }
        return;
      }
      // Ours, announced before its ack (the oldest in flight), or sent from another tab or device.
      const inFlight = [...this.#pending.values()].find(
        (p) => p.kind === "send" && !p.bubble.dataset.runId && !p.bubble.dataset.messageId,
      );
      let bubble = inFlight?.bubble;
      if (!bubble) this.#log().append((bubble = this.#userBubble(frame.text, { at: frame.at })));
      this.#markQueued(bubble, frame.message_id, frame.text);
    }

    #messageDequeued(frame) {
      this.#dequeued.add(frame.message_id);
      const known = this.#queued.get(frame.message_id);
      if (!known) return;
      this.#queued.delete(frame.message_id);
      const { bubble, text } = known;
      if (frame.reason !== "started") {
        bubble.remove();
        this.#announce("Queued message removed");
        return;
      }
      // It is its run's message now: run-started (next in the log) puts the run after it.
      delete bubble.dataset.messageId;
      bubble.querySelector(".ac-msg__queued")?.remove();
      this.#users[frame.run_id] = text;
      this.#markSent(bubble, frame.run_id);
      // It runs now: after what ran before it, ahead of the messages still waiting.
      const waiting = this.#log().querySelector(".ac-msg--user[data-state=queued]");
      if (waiting) waiting.before(bubble);
      else this.#log().append(bubble);
    }

    #markQueued(bubble, messageId, text) {
      this.#queued.set(messageId, { bubble, text });
      bubble.dataset.state = "queued";
      bubble.dataset.messageId = messageId;
      if (bubble.querySelector(".ac-msg__queued")) return;
      const edit = h("button", { type: "button", class: "ac-linkbtn ac-queued-edit" }, "Edit");
      const remove = h("button", { type: "button", class: "ac-linkbtn ac-queued-remove" }, "Remove");
      edit.setAttribute("aria-label", "Edit queued message");
      remove.setAttribute("aria-label", "Remove queued message");
      edit.addEventListener("click", () => this.#editQueued(messageId));
      remove.addEventListener("click", () => this.#queueFrame({ type: "queue_remove", message_id: messageId }));
      const note = h("span", { class: "ac-queued-note" }, "Queued: runs after the current answer");
      bubble.append(h("p", { class: "ac-msg__status ac-msg__queued" }, note, edit, remove));
    }

    #editQueued(messageId) {
      const known = this.#queued.get(messageId);
      if (!known || known.bubble.querySelector(".ac-queued-editor")) return;
      const field = h("textarea", { class: "ac-queued-editor", rows: "2", "aria-label": "Queued message" });
      field.value = known.text;
      const save = h("button", { type: "button", class: "ac-linkbtn ac-queued-save" }, "Save");
      const cancel = h("button", { type: "button", class: "ac-linkbtn ac-queued-cancel" }, "Cancel");
      const form = h("div", { class: "ac-queued-form" }, field, save, cancel);
      const close = () => form.remove();
      save.addEventListener("click", () => {
        const text = field.value.trim();
        if (!text || text.length > MAX_TEXT) return;
        if (this.#queueFrame({ type: "queue_edit", message_id: messageId, text })) close();
      });
      cancel.addEventListener("click", close);
      known.bubble.append(form);
      field.focus();
    }

    #queueFrame(frame) {
      const id = this.#nextId("queue");
      this.#pending.set(id, { kind: "queue" });
      if (this.#transmit({ ...frame, id })) return true;
      this.#pending.delete(id);
      this.#showBanner("Not connected: try again in a moment.");
      return false;
    }

    #markFailed(bubble, text, message, uncertain = false) {
      if (!bubble.isConnected || bubble.dataset.state === "failed") return;
      bubble.dataset.state = "failed";
      if (uncertain) this.#unsent.set(bubble, text);
      const retry = h("button", { type: "button", class: "ac-linkbtn ac-retry" }, icon("retry"), "Retry");
      retry.addEventListener("click", () => {
        if (!this.send(text)) return;
        this.#unsent.delete(bubble);
        bubble.remove();
      });
      const stick = this.#nearEnd();
      bubble.append(h("p", { class: "ac-msg__status", role: "alert" }, h("span", {}, message), retry));
      this.#scrollToEnd(stick); // the line just added must not hide below the fold
    }

    /** A request to the gateway's HTTP API (`path` below `/agent/`) with the person's credentials. */
    #request(path, { method = "GET", json } = {}) {
      const base = this.#endpoint();
      base.protocol = base.protocol === "wss:" ? "https:" : "http:";
      const url = new URL(path, base);
      const headers = {};
      const token = this.getAttribute("token");
      if (token) headers.Authorization = `Bearer ${token}`;
      if (json !== undefined) headers["Content-Type"] = "application/json";
      const credentials = url.origin === location.origin ? "same-origin" : "include";
      const body = json !== undefined ? JSON.stringify(json) : undefined;
      return fetch(url, { method, headers, body, credentials });
    }

    /** The conversations list is offered: the full-page layout, without a fixed thread. */
    #listsThreads() {
      return this.getAttribute("layout") === "page" && !this.getAttribute("thread");
    }

    #applyLayout() {
      const on = this.#listsThreads();
      this.#ui.threads.hidden = !on;
      this.#ui["threads-toggle"].hidden = !on;
      this.#ui.panel.classList.toggle("ac--threads", on);
      if (!on) {
        this.#showThreads(false);
        this.#threads.stop();
        return;
      }
      if (this.isConnected) this.#threads.start();
      if (this.isConnected && this.#welcomed) this.#threads.refresh(0);
    }

    /** On a narrow screen the list is a drawer over the chat: open it, or close it (the focus goes back). */
    #showThreads(open) {
      const panel = this.#ui.panel;
      const was = panel.hasAttribute("data-threads-open");
      panel.toggleAttribute("data-threads-open", open);
      this.#ui.scrim.hidden = !open;
      this.#ui["threads-toggle"].setAttribute("aria-expanded", String(open));
      if (open && !was) {
        (this.#ui["threads-list"].querySelector("[aria-current]") || this.#ui["threads-new"]).focus();
      } else if (!open && was && this.#ui.threads.contains(this.shadowRoot.activeElement)) {
        this.#ui["threads-toggle"].focus();
      }
    }

    /** Show another conversation: its history comes from the gateway, as on a reconnect. */
    #openThread(threadId) {
      this.#showThreads(false);
      if (threadId === this.#threadId) {
        this.focusInput();
        return;
      }
      this.#flushSave();
      this.#cache?.clear();
      this.#resetConversation();
      this.#threadId = threadId;
      this.#threads.markCurrent();
      this.#reconnectNow();
      this.focusInput();
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
      this.#actorId = stored.actor; // who "you" were: the server confirms (or corrects) in its welcome
      this.#remembered = stored.trimmed;
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
      this.#nested.clear();
      this.#toolInfo.clear();
      this.#approvals.clear();
      this.#decisions.clear();
      this.#components.clear();
      this.#pending.clear();
      this.#unsent.clear();
      this.#queued.clear();
      this.#dequeued.clear();
      this.#renderQueue.clear();
      this.#remembered = false;
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
      const state = { thread_id: this.#threadId, seq: this.#lastSeq, frames: this.#frames, users: this.#users };
      this.#cache.save({ ...state, actor: this.#actorId });
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
      this.#bindFiles();
      this.#ui.new.addEventListener("click", () => this.newConversation());
      this.#ui["threads-toggle"].addEventListener("click", () => {
        this.#showThreads(!this.#ui.panel.hasAttribute("data-threads-open"));
      });
      this.#ui["threads-close"].addEventListener("click", () => this.#showThreads(false));
      this.#ui.scrim.addEventListener("click", () => this.#showThreads(false));
      this.#ui.threads.addEventListener("keydown", (event) => {
        if (event.key === "Escape" && this.#ui.panel.hasAttribute("data-threads-open")) {
          event.preventDefault();
          this.#showThreads(false);
        }
      });
      jump.addEventListener("click", () => {
        this.#scrollToEnd(true);
        this.focusInput();
      });
      log.addEventListener("scroll", () => {
        if (this.#nearEnd()) jump.hidden = true;
      });
      log.addEventListener("keydown", (event) => this.#moveBetweenMessages(event));
    }

    /**
     * Up and Down move the focus from message to message (Home, End: the first and the last;
     * Escape: back to the message box), from the conversation or a message in it. A focused
     * message shows its time; a screen reader reads it whole.
     */
    #moveBetweenMessages(event) {
      const log = this.#log();
      const from = event.target;
      if (!["ArrowUp", "ArrowDown", "Home", "End", "Escape"].includes(event.key)) return;
      if (from !== log && !from.matches?.(".ac-msg")) return;
      if (event.key === "Escape") {
        if (from === log) return;
        event.preventDefault();
        this.focusInput();
        return;
      }
      const messages = [...log.querySelectorAll(".ac-msg:not([hidden])")];
      if (!messages.length) return;
      const at = messages.indexOf(from);
      const last = messages.length - 1;
      const to = {
        ArrowUp: at < 0 ? last : Math.max(0, at - 1),
        ArrowDown: at < 0 ? last : Math.min(last, at + 1),
        Home: 0,
        End: last,
      }[event.key];
      event.preventDefault();
      messages[to].focus();
    }

    // -- attachments: uploaded over HTTP first, then sent by id --------------------------------------

    /** The attach button, drag and drop onto the panel, and pasted files all upload. */
    #bindFiles() {
      const { attach, file, input, panel } = this.#ui;
      attach.addEventListener("click", () => file.click());
      file.addEventListener("change", () => {
        this.attachFiles([...file.files]);
        file.value = "";
      });
      input.addEventListener("paste", (event) => {
        const pasted = [...(event.clipboardData?.files || [])];
        if (pasted.length) {
          event.preventDefault();
          this.attachFiles(pasted);
        }
      });
      const target = panel || this.#ui.form;
      target.addEventListener("dragover", (event) => {
        if ([...(event.dataTransfer?.types || [])].includes("Files")) {
          event.preventDefault();
          target.dataset.dropping = "";
        }
      });
      target.addEventListener("dragleave", () => delete target.dataset.dropping);
      target.addEventListener("drop", (event) => {
        delete target.dataset.dropping;
        const dropped = [...(event.dataTransfer?.files || [])];
        if (dropped.length) {
          event.preventDefault();
          this.attachFiles(dropped);
        }
      });
    }

    /** Upload `files` (File objects) to send with the next message; each shows as a chip. */
    attachFiles(files) {
      for (const file of files.slice(0, Math.max(0, MAX_FILES - this.#files.length))) {
        const entry = { id: null, name: file.name || "file", mime: file.type, size: file.size, url: null };
        if (file.type.startsWith("image/")) entry.url = URL.createObjectURL(file);
        this.#files.push(entry);
        this.#uploading += 1;
        this.#upload(file)
          .then((answer) => {
            entry.id = answer.id;
            entry.mime = answer.mime;
            this.#announce(`${entry.name} attached`);
          })
          .catch((error) => {
            this.#files = this.#files.filter((other) => other !== entry);
            this.#announce(`${entry.name}: ${error.message}`);
            this.#showFileError(`${entry.name}: ${error.message}`);
          })
          .finally(() => {
            this.#uploading -= 1;
            this.#renderFiles();
            this.#updateComposer();
          });
      }
      this.#renderFiles();
      this.#updateComposer();
    }

    async #upload(file) {
      const base = this.#endpoint();
      base.protocol = base.protocol === "wss:" ? "https:" : "http:";
      const url = new URL("attachments", base);
      if (this.#threadId) url.searchParams.set("thread_id", this.#threadId);
      const headers = {};
      const token = this.getAttribute("token");
      if (token) headers.Authorization = `Bearer ${token}`;
      const body = new FormData();
      body.append("file", file, file.name || "file");
      const credentials = url.origin === location.origin ? "same-origin" : "include";
      const response = await fetch(url, { method: "POST", headers, body, credentials });
      const answer = await response.json().catch(() => ({}));
      if (response.status !== 201) throw new Error(answer.message || `not uploaded (${response.status})`);
      return answer;
    }

    #showFileError(message) {
      const banner = this.#ui.banner;
      banner.textContent = message;
      banner.hidden = false;
    }

    /** The files waiting to be sent, as chips (a thumbnail for images) with a remove button. */
    #renderFiles() {
      const list = this.#ui.files;
      list.replaceChildren(this.#fileList(this.#files, true));
      list.hidden = !this.#files.length;
    }

    #fileList(files, removable) {
      const fragment = document.createDocumentFragment();
      for (const file of files) {
        const chip = h(removable ? "li" : "span", { class: "ac-file", "data-state": file.id ? "ready" : "uploading" });
        if (file.url) chip.append(h("img", { class: "ac-file__thumb", src: file.url, alt: "" }));
        else chip.append(icon("document"));
        chip.append(h("span", { class: "ac-file__name" }, file.name));
        if (removable) {
          const remove = h("button", { type: "button", class: "ac-file__remove", "aria-label": `Remove ${file.name}` });
          remove.append(icon("cross"));
          remove.addEventListener("click", () => {
            this.#files = this.#files.filter((other) => other !== file);
            this.#renderFiles();
            this.#updateComposer();
          });
          chip.append(remove);
        }
        fragment.append(chip);
      }
      if (removable) return fragment;
      return h("span", { class: "ac-files ac-files--sent" }, fragment);
    }

    #submit() {
      const text = this.#ui.input.value.trim();
      if (!text && !this.#files.length) return;
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
      // A message sent while a run works waits in the thread's queue (a queued bubble).
      const sending = [...this.#pending.values()].some((p) => p.kind === "send");
      return this.#welcomed && !sending;
    }

    #updateComposer() {
      const { input, send, stop } = this.#ui;
      const active = this.#activeRun();
      send.disabled = (!input.value.trim() && !this.#files.length) || this.#uploading > 0 || !this.#canSend();
      const stopWasFocused = this.shadowRoot.activeElement === stop;
      stop.hidden = !active;
      if (!active) stop.disabled = false;
      if (stopWasFocused && !active) input.focus();
      if (!this.#welcomed) input.placeholder = "Connecting…";
      else input.placeholder = active ? "Working on it… (a new message waits its turn)" : "Write a message…";
    }

    /** Three dots at the end of a working run that shows nothing else in motion. */
    #updateBusy() {
      for (const dots of this.#log().querySelectorAll(".ac-typing")) dots.remove();
      for (const run of this.#runs.values()) {
        if (!run.active) continue;
        let last = run.turn.lastElementChild;
        if (last?.matches(".ac-tool-details")) last = last.previousElementSibling;
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

    /** The branding attributes (`welcome`, `prompts`, `accent`, `logo`), all at once. */
    #applyBrand() {
      this.#applyWelcome();
      this.#applyPrompts();
      this.#applyAccent();
      this.#applyLogo();
    }

    #applyWelcome() {
      const welcome = this.getAttribute("welcome")?.trim();
      this.#ui["empty-text"].textContent = welcome || (this.#demo ? DEMO_WELCOME : DEFAULT_WELCOME);
    }

    #applyPrompts() {
      const prompts = parsePrompts(this.getAttribute("prompts"));
      const items = prompts.map((text) => {
        const button = h("button", { type: "button", class: "ac-prompt" }, text);
        button.addEventListener("click", () => this.#sendOrDraft(text));
        return h("li", {}, button);
      });
      this.#ui.prompts.replaceChildren(...items);
      this.#ui.prompts.hidden = !items.length;
    }

    /**
     * The accent colour drives the accent custom properties, set on the panel: below the host,
     * so it wins over the theme's palette and the page's `--ac-accent`. Derived shades are
     * mixed from it; the text on it is black or white, whichever reads better.
     */
    #applyAccent() {
      const style = this.#ui.panel.style;
      for (const name of ["--ac-accent", "--ac-accent-hover", "--ac-accent-soft", "--ac-accent-text", "--ac-focus"]) {
        style.removeProperty(name);
      }
      const accent = this.getAttribute("accent")?.trim();
      if (!accent) return;
      if (!CSS.supports("color", accent)) {
        console.warn(`<agora-chat>: accent ${JSON.stringify(accent.slice(0, 60))} is not a CSS colour; ignored`);
        return;
      }
      style.setProperty("--ac-accent", accent);
      style.setProperty("--ac-accent-hover", `color-mix(in srgb, ${accent} 84%, black)`);
      style.setProperty("--ac-accent-soft", `color-mix(in srgb, ${accent} 14%, var(--ac-bg))`);
      style.setProperty("--ac-accent-text", textColourOn(accent));
      style.setProperty("--ac-focus", accent);
    }

    /** The `logo` image in the header (and the empty state); the default mark when none loads. */
    #applyLogo() {
      const value = this.getAttribute("logo")?.trim();
      let url = null;
      try {
        url = value ? new URL(value, document.baseURI) : null;
      } catch {
        url = null;
      }
      const dataImage = url?.protocol === "data:" && /^data:image\//i.test(value);
      const usable = url !== null && (["http:", "https:", "blob:"].includes(url.protocol) || dataImage);
      for (const [slot, size] of [["avatar", 36], ["empty-icon", 48]]) {
        const holder = this.#ui[slot];
        holder.classList.toggle("ac-logo", usable);
        if (!usable) {
          holder.replaceChildren(icon("spark"));
          continue;
        }
        const image = h("img", { src: value, alt: "", width: size, height: size, decoding: "async" });
        image.addEventListener("error", () => {
          holder.classList.remove("ac-logo");
          holder.replaceChildren(icon("spark"));
        });
        holder.replaceChildren(image);
      }
    }

    /** Send `text` now or, when it cannot be sent yet, leave it in the message box to send. */
    #sendOrDraft(text) {
      if (this.send(text)) return true;
      this.#ui.input.value = text;
      this.#autosize();
      this.#updateComposer();
      this.focusInput();
      return false;
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
