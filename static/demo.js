// The demo page: example prompts go to the widget.
(() => {
  "use strict";

  const chat = document.querySelector("agora-chat");
  const reduceMotion = window.matchMedia("(prefers-reduced-motion: reduce)");

  // The page says "offline demo model" only when the gateway says so.
  document.addEventListener("agora-welcome", (event) => {
    const demo = Boolean(event.detail && event.detail.demo);
    document.getElementById("demo-note").hidden = !demo;
    document.getElementById("model-note").hidden = demo;
  });

  document.addEventListener("click", (event) => {
    // "Skip to the chat" lands in the message box, ready to type.
    if (event.target.closest("a.skip") && chat) {
      event.preventDefault();
      chat.scrollIntoView({ block: "nearest" });
      chat.focusInput();
      return;
    }
    const button = event.target.closest("[data-prompt]");
    if (!button || !chat) return;
    // The widget refuses while it is connecting or still answering; the person can retry then.
    if (!chat.send(button.dataset.prompt)) {
      chat.focusInput();
      return;
    }
    // On a phone the chat sits below the examples: bring it into view.
    if (chat.getBoundingClientRect().top > window.innerHeight / 2) {
      chat.scrollIntoView({ block: "end", behavior: reduceMotion.matches ? "auto" : "smooth" });
    }
  });
})();
