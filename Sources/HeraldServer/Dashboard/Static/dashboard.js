// Herald dashboard: the live parts. Every page reads and works without this file.
"use strict";

document.addEventListener("DOMContentLoaded", () => {
  // Send a test: the exact payload and headers, computed by the server as it would send them.
  const form = document.getElementById("send-form");
  if (form) {
    let timer = null;
    let sequence = 0;
    const show = (id, text) => { const node = document.getElementById(id); if (node) node.textContent = text; };
    const clear = () => {
      for (const id of ["preview-banner-title", "preview-banner-subtitle", "preview-banner-body", "preview-headers", "preview-payload", "preview-bytes", "preview-reach", "preview-locales", "preview-android", "preview-android-note", "preview-web", "preview-web-note"]) show(id, "");
    };
    const refresh = async () => {
      const mine = ++sequence;
      const body = new URLSearchParams(new FormData(form));
      body.delete("action");
      try {
        const answer = await fetch(form.dataset.preview, {
          method: "POST", body, credentials: "same-origin",
          headers: { "X-CSRF-Token": form.elements.csrf.value },
        });
        const preview = await answer.json();
        if (mine !== sequence) return;
        if (preview.ok) {
          show("preview-error", "");
          show("preview-banner-title", typeof preview.title === "string" ? preview.title : "");
          show("preview-banner-subtitle", typeof preview.subtitle === "string" ? preview.subtitle : "");
          show("preview-banner-body", typeof preview.body === "string" ? preview.body : "");
          show("preview-headers", Object.entries(preview.headers).map(([k, v]) => `${k}: ${v}`).join("\n"));
          show("preview-payload", preview.payload);
          show("preview-bytes", `${preview.bytes} bytes`);
          // The Android (FCM) message, or why there is none ("APNs only: …").
          show("preview-android", typeof preview.android === "string" ? preview.android : "");
          show("preview-android-note", typeof preview.androidNote === "string" ? preview.androidNote : "");
          // The Web Push message a browser decrypts, or why no browser gets it ("Not for browsers: …").
          show("preview-web", typeof preview.web === "string" ? preview.web : "");
          show("preview-web-note", typeof preview.webNote === "string" ? preview.webNote : "");
          show("preview-reach", typeof preview.reach === "string" ? preview.reach : "");
          // A template send: each locale's texts, built as text nodes (never HTML).
          const locales = document.getElementById("preview-locales");
          if (locales) {
            locales.replaceChildren(...(preview.locales || []).map((row) => {
              const li = document.createElement("li");
              li.className = "wrap";
              li.dataset.locale = row.locale;
              const name = document.createElement("strong");
              name.textContent = row.locale;
              li.append(name, `: ${row.title} ${row.subtitle} — ${row.body}`);
              return li;
            }));
          }
        } else {
          // Nothing of the last good preview stays on screen as if it were current.
          clear();
          show("preview-error", preview.error || "This cannot be previewed.");
        }
      } catch (error) {
        clear();
        show("preview-error", "The preview is unavailable (is the server reachable?).");
      }
    };
    form.addEventListener("input", () => { clearTimeout(timer); timer = setTimeout(refresh, 200); });
    form.addEventListener("change", () => { clearTimeout(timer); timer = setTimeout(refresh, 50); });
  }

  // The emulated phone: pushes arrive live.
  const phone = document.querySelector(".phone[data-stream]");
  if (phone && window.EventSource) {
    const list = document.getElementById("phone-notifications");
    const source = new EventSource(phone.dataset.stream);
    source.addEventListener("push", (message) => {
      const item = JSON.parse(message.data);
      const li = document.createElement("li");
      li.className = "banner arrived";
      const app = document.createElement("div");
      app.className = "banner-app";
      app.textContent = `${item.pushType} · ${item.time}`;
      const title = document.createElement("div");
      title.className = "banner-title";
      title.textContent = item.title;
      const subtitle = document.createElement("div");
      subtitle.className = "banner-subtitle";
      subtitle.textContent = item.subtitle || "";
      const body = document.createElement("div");
      body.className = "banner-body";
      body.textContent = item.body;
      li.append(app, title, subtitle, body);
      list.prepend(li);
      const empty = document.getElementById("phone-empty");
      if (empty) empty.remove();
    });
  }

  // Pages still changing (a notification being sent) refresh themselves.
  const refresher = document.querySelector("[data-refresh]");
  if (refresher) {
    setTimeout(() => window.location.reload(), Number(refresher.dataset.refresh) * 1000);
  }
});
