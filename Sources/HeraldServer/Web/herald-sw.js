// SPDX-License-Identifier: Apache-2.0
// Herald's Web Push service worker: a classic script. Serve it as the worker itself
// (`new Herald({serviceWorker: "/herald-sw.js"})` with this file at that path), or load it from
// the app's own worker:
//
//   importScripts("https://push.example.com/sdk/herald-sw.js");
//
// It shows every push as a notification (browsers revoke the permission of sites whose pushes
// show nothing — Safari at once, Chrome with a "site updated in the background" notice, Firefox
// after 16), reports receipts (`received`, then `opened` with the action chosen) to Herald, opens
// or focuses the notification's `navigate` URL on a click, and registers the new subscription
// when the browser renews it (`pushsubscriptionchange`).
//
// Hooks, set on `self` before or after importScripts:
// - `self.heraldOnPush({event, text, json})`: a push that is not a declarative one (not JSON, or no
//   `"web_push": 8030`); return true once it showed a notification itself, anything else and a
//   generic notification is shown (title: the page's `defaultTitle`, or "New notification").
// - `self.heraldOnNotificationClick({event, url, action, data})`: return true to handle the click
//   yourself (the receipt is reported either way).
// - `self.HERALD_MANUAL = true` before importScripts: no listeners are added; call
//   `self.herald.handlePush(event)`, `handleNotificationClick(event)` and
//   `handleSubscriptionChange(event)` from yours (each returns the promise to wait on).
// Configuration comes from the page (herald-web.js writes it to IndexedDB for this worker's
// scope); `self.herald.configure({server, app, registerKey})` sets it in the worker instead.
"use strict";

(function () {
  const DB_NAME = "herald";
  const DB_VERSION = 1;
  const CONFIG_STORE = "config";
  const RECEIPT_STORE = "receipts";
  /** A declarative push message (W3C Push API) says so with this. */
  const DECLARATIVE = 8030;
  /** At most this many receipts in one POST, and this many waiting in IndexedDB. */
  const BATCH = 100;
  const QUEUE_LIMIT = 1000;
  /** A report Herald has not recorded the delivery of yet (`delivery_unknown`) is tried this often. */
  const MAXIMUM_TRIES = 10;
  const ASSERTION_WANTED = new Set([
    "user_assertion_required", "user_assertion_expired", "user_assertion_unbound", "user_assertion_wrong_device",
  ]);

  let staticConfig = null;

  const herald = {
    version: 1,
    /** Configures the worker without the page: `{server, app, registerKey, defaultTitle?, assertionURL?}`. */
    configure(config) { staticConfig = { ...config }; },
    handlePush, handleNotificationClick, handleSubscriptionChange,
    /** What a push would show, without showing it: `{title, options, appBadge, receipt, declarative}`. */
    parse(text) { return describe(text, self.registration.scope, null); },
    /** The sender's `data` of a notification this worker showed (or the browser, for a declarative push). */
    dataOf(notification) {
      const data = notification && notification.data;
      return data && typeof data === "object" && data.herald ? data.data : data;
    },
    report,
  };
  self.herald = herald;

  if (!self.HERALD_MANUAL) {
    self.addEventListener("push", (event) => event.waitUntil(handlePush(event)));
    self.addEventListener("notificationclick", (event) => event.waitUntil(handleNotificationClick(event)));
    self.addEventListener("pushsubscriptionchange", (event) => event.waitUntil(handleSubscriptionChange(event)));
  }

  // -- push

  async function handlePush(event) {
    let text = null;
    try { text = event.data ? event.data.text() : null; } catch { text = null; }
    const config = await loadConfig();
    const shown = describe(text, self.registration.scope, config);
    const work = [];
    if (shown.receipt) work.push(report([{ receipt: shown.receipt, event: "received" }]));
    work.push(present(event, text, shown));
    if (shown.appBadge !== null) work.push(setBadge(shown.appBadge));
    await Promise.all(work.map((promise) => promise.catch((error) => console.warn("herald:", error))));
  }

  async function present(event, text, shown) {
    if (!shown.declarative && typeof self.heraldOnPush === "function") {
      try {
        if ((await self.heraldOnPush({ event, text, json: shown.json })) === true) return;
      } catch (error) {
        console.warn("herald: heraldOnPush failed, showing the generic notification", error);
      }
    }
    try {
      await self.registration.showNotification(shown.title, shown.options);
    } catch (error) {
      // An option this browser refuses (TypeError): the text alone, rather than nothing.
      await self.registration.showNotification(shown.title, { body: shown.options.body, tag: shown.options.tag, data: shown.options.data });
    }
  }

  /**
   * The notification for a push's text: a declarative push message
   * (`{"web_push": 8030, "notification": {title, navigate, …}}`) as the browser would show it,
   * or a generic one. Tolerant: members of the wrong type are left out, never fatal.
   */
  function describe(text, scope, config) {
    let json = null;
    if (typeof text === "string" && text) {
      try { json = JSON.parse(text); } catch { json = null; }
    }
    const message = isObject(json) ? json : null;
    const receipt = message && typeof message.hr === "string" && message.hr ? message.hr : null;
    const notification = message && isObject(message.notification) ? message.notification : null;
    const declarative = !!(message && message.web_push === DECLARATIVE && notification && typeof notification.title === "string");
    const source = declarative ? notification : notification || message || {};
    const options = {};
    const meta = { navigate: resolve(source.navigate, scope) || scope, hr: receipt || undefined };

    for (const name of ["body", "lang", "tag"]) if (typeof source[name] === "string") options[name] = source[name];
    if (["auto", "ltr", "rtl"].includes(source.dir)) options.dir = source.dir;
    for (const name of ["icon", "image", "badge"]) {
      const url = resolve(source[name], scope);
      if (url) options[name] = url;
    }
    if (typeof source.silent === "boolean") options.silent = source.silent;
    const requireInteraction = typeof source.requireInteraction === "boolean" ? source.requireInteraction : source.require_interaction;
    if (typeof requireInteraction === "boolean") options.requireInteraction = requireInteraction;
    // renotify without a tag, and vibrate with silent, are TypeErrors in showNotification.
    if (source.renotify === true && options.tag) options.renotify = true;
    if (Array.isArray(source.vibrate) && options.silent !== true && source.vibrate.every(Number.isInteger)) options.vibrate = source.vibrate;
    if (Number.isFinite(source.timestamp)) options.timestamp = source.timestamp;
    if (Array.isArray(source.actions)) {
      const limit = typeof Notification !== "undefined" && Number.isInteger(Notification.maxActions) ? Notification.maxActions : 2;
      const actions = source.actions.filter((action) => isObject(action) && typeof action.action === "string" && action.action && typeof action.title === "string");
      meta.actions = {};
      options.actions = actions.slice(0, Math.max(limit, 0)).map((action) => {
        const entry = { action: action.action, title: action.title };
        const icon = resolve(action.icon, scope);
        if (icon) entry.icon = icon;
        const navigate = resolve(action.navigate, scope);
        if (navigate) meta.actions[action.action] = navigate;
        return entry;
      });
    }
    options.data = { herald: meta, data: source.data === undefined ? null : source.data };

    let title = typeof source.title === "string" && source.title ? source.title : null;
    if (!title) title = (config && config.defaultTitle) || "New notification";
    if (!declarative && !notification && message === null && typeof text === "string" && text && options.body === undefined) {
      options.body = text.length > 240 ? text.slice(0, 239) + "…" : text;
    }
    const badge = message ? appBadge(message.app_badge !== undefined ? message.app_badge : notification && notification.app_badge) : null;
    return { title, options, appBadge: badge, receipt, declarative, json };
  }

  /** A badge count: a non-negative integer, or a string of digits (as Safari takes it); null for none. */
  function appBadge(value) {
    if (Number.isInteger(value) && value >= 0) return value;
    if (typeof value === "string" && /^\d{1,15}$/.test(value)) return Number(value);
    return null;
  }

  async function setBadge(count) {
    const navigator = self.navigator;
    try {
      if (count === 0 && typeof navigator.clearAppBadge === "function") await navigator.clearAppBadge();
      else if (typeof navigator.setAppBadge === "function") await navigator.setAppBadge(count);
    } catch {
      // Badging is decoration (no badge on Linux, none in Firefox): never a failure of the push.
    }
  }

  // -- click

  async function handleNotificationClick(event) {
    const notification = event.notification;
    const action = typeof event.action === "string" ? event.action : "";
    const meta = notification.data && isObject(notification.data) && isObject(notification.data.herald) ? notification.data.herald : {};
    let url = meta.navigate || notification.navigate || null;
    if (action) {
      const chosen = meta.actions && meta.actions[action]
        || (Array.isArray(notification.actions) && (notification.actions.find((item) => item.action === action) || {}).navigate);
      if (chosen) url = chosen;
    }
    notification.close();
    const work = [];
    if (meta.hr) {
      const item = { receipt: meta.hr, event: "opened" };
      if (action && new TextEncoder().encode(action).length <= 64) item.action = action;
      work.push(report([item]));
    }
    let handled = false;
    if (typeof self.heraldOnNotificationClick === "function") {
      try {
        handled = (await self.heraldOnNotificationClick({ event, url, action, data: herald.dataOf(notification) })) === true;
      } catch (error) {
        console.warn("herald: heraldOnNotificationClick failed", error);
      }
    }
    if (!handled) work.unshift(focusOrOpen(url || self.registration.scope));
    await Promise.all(work.map((promise) => promise.catch((error) => console.warn("herald:", error))));
  }

  async function focusOrOpen(url) {
    const windows = await self.clients.matchAll({ type: "window", includeUncontrolled: true });
    const open = windows.find((client) => client.url === url);
    if (open && typeof open.focus === "function") return open.focus();
    return self.clients.openWindow(url);
  }

  // -- subscription renewed by the browser

  async function handleSubscriptionChange(event) {
    const config = await loadConfig();
    if (!config || !config.server) return;
    const old = event.oldSubscription || null;
    let subscription = event.newSubscription || null;
    if (!subscription) {
      const key = config.applicationServerKey ? base64urlDecode(config.applicationServerKey) : old && old.options && old.options.applicationServerKey;
      if (!key) return;
      subscription = await self.registration.pushManager.subscribe({ userVisibleOnly: true, applicationServerKey: key });
    }
    const device = await registerFromWorker(config, subscription);
    const previous = (old && old.endpoint) || config.endpoint;
    if (previous && previous !== subscription.endpoint) {
      // The token as is: `wp:` and base64url are safe in a path (Herald reads the segment undecoded).
      await call(config, "DELETE", `/v1/apps/${encodeURIComponent(config.app)}/devices/${await tokenFor(previous)}`).catch(() => {});
    }
    return device;
  }

  /**
   * Registers a subscription the worker made. The user stays if Herald allows it without an
   * assertion (user verification off), or with one from the app's `assertionURL`; otherwise it
   * is registered without the user and `userPending` is kept for the page's next subscribe().
   */
  async function registerFromWorker(config, subscription) {
    const json = subscription.toJSON();
    const body = {
      transport: "webpush",
      subscription: { endpoint: subscription.endpoint, keys: { p256dh: json.keys.p256dh, auth: json.keys.auth } },
      platform: "web",
    };
    try { body.timeZone = Intl.DateTimeFormat().resolvedOptions().timeZone || undefined; } catch { /* none */ }
    if (self.navigator.language) body.locale = self.navigator.language;
    if (config.appVersion) body.appVersion = config.appVersion;
    const path = `/v1/apps/${encodeURIComponent(config.app)}/registrations`;
    let pending = false;
    let device;
    if (config.userId) {
      body.userId = config.userId;
      // A new subscription is a new device to bind: the assertion is asked for up front.
      const assertion = config.assertionURL ? await assertionFrom(config.assertionURL, config.userId, subscription.endpoint).catch(() => null) : null;
      if (assertion) body.userAssertion = assertion;
    }
    try {
      device = await call(config, "POST", path, body);
    } catch (error) {
      // Refused the user (or, with no code to read, refused at all): registered without the
      // user rather than not at all — pushes to everyone and to its tags still arrive.
      if (!(config.userId && (ASSERTION_WANTED.has(error.code) || error.code === "network"))) throw error;
      delete body.userId;
      delete body.userAssertion;
      device = await call(config, "POST", path, body);
      pending = true;
    }
    const changes = { endpoint: subscription.endpoint, token: device.token, userPending: pending };
    if (config.applicationServerKey) changes.subscribedKey = config.applicationServerKey;
    await updateConfig(config.scope, changes);
    return device;
  }

  async function assertionFrom(url, userId, endpoint) {
    const answer = await fetch(url, {
      method: "POST", credentials: "include", headers: { "content-type": "application/json" },
      body: JSON.stringify({ userId, token: endpoint }),
    });
    const json = await answer.json();
    return answer.ok && json && typeof json.assertion === "string" ? json.assertion : null;
  }

  // -- receipts

  /**
   * Reports receipts (`{receipt, event, action?}`), with any left waiting from before, in one
   * POST. Those whose delivery Herald has not recorded yet (`delivery_unknown`: the push can
   * arrive before the sender's record) are tried again twice within the event, then kept for
   * the next one; a network failure keeps them all.
   */
  async function report(items) {
    const now = Date.now();
    const fresh = items.map((item) => ({ ...item, at: item.at || now, tries: 0 }));
    const config = await loadConfig();
    if (!config || !config.server || !config.registerKey) {
      await queue(fresh);
      return { applied: 0, queued: fresh.length };
    }
    let batch = dedupe((await takeQueued()).concat(fresh)).slice(-BATCH);
    let applied = 0;
    for (let attempt = 0; batch.length; attempt++) {
      let answer;
      try {
        answer = await call(config, "POST", `/v1/apps/${encodeURIComponent(config.app)}/receipts`, {
          receipts: batch.map(({ receipt, event, action, at }) => (action ? { receipt, event, action, at } : { receipt, event, at })),
        });
      } catch (error) {
        // Herald refused the batch as a whole (receipts off, a revoked key): nothing to retry.
        if (error.status && error.status < 500 && error.status !== 429) return { applied, dropped: batch.length, error: error.code };
        await queue(batch);
        return { applied, queued: batch.length };
      }
      applied += (answer.applied || 0) + (answer.duplicates || 0);
      const waiting = new Set((answer.refused || []).filter((item) => item.code === "delivery_unknown").map((item) => item.index));
      batch = batch.filter((_, index) => waiting.has(index)).map((item) => ({ ...item, tries: item.tries + 1 })).filter((item) => item.tries < MAXIMUM_TRIES);
      if (!batch.length) break;
      if (attempt >= 2) {
        await queue(batch);
        return { applied, queued: batch.length };
      }
      await new Promise((done) => setTimeout(done, 1000 * (attempt + 1)));
    }
    return { applied, queued: 0 };
  }

  function dedupe(items) {
    const seen = new Map();
    for (const item of items) seen.set(`${item.receipt} ${item.event}`, item);
    return [...seen.values()];
  }

  // -- Herald's API

  async function call(config, method, path, body) {
    let answer;
    try {
      answer = await fetch(config.server.replace(/\/+$/, "") + path, {
        method,
        headers: body === undefined ? { authorization: `Bearer ${config.registerKey}` }
          : { authorization: `Bearer ${config.registerKey}`, "content-type": "application/json" },
        body: body === undefined ? undefined : JSON.stringify(body),
        credentials: "omit",
        cache: "no-store",
      });
    } catch (error) {
      throw Object.assign(new Error(`Herald could not be reached: ${error && error.message}`), { code: "network" });
    }
    const text = await answer.text();
    let json = null;
    try { json = text ? JSON.parse(text) : null; } catch { json = null; }
    if (!answer.ok) {
      const detail = json && json.error;
      throw Object.assign(new Error(detail && detail.message || `Herald answered ${answer.status}`), {
        code: detail && typeof detail.code === "string" ? detail.code : `http_${answer.status}`, status: answer.status,
      });
    }
    return json;
  }

  // -- IndexedDB (the same database and stores as herald-web.js)

  function openDatabase() {
    return new Promise((resolve, reject) => {
      const request = indexedDB.open(DB_NAME, DB_VERSION);
      request.onupgradeneeded = () => {
        const db = request.result;
        if (!db.objectStoreNames.contains(CONFIG_STORE)) db.createObjectStore(CONFIG_STORE, { keyPath: "scope" });
        if (!db.objectStoreNames.contains(RECEIPT_STORE)) db.createObjectStore(RECEIPT_STORE, { keyPath: "key" });
      };
      request.onsuccess = () => resolve(request.result);
      request.onerror = () => reject(request.error);
    });
  }

  async function transact(storeName, mode, work) {
    const db = await openDatabase();
    try {
      return await new Promise((resolve, reject) => {
        const transaction = db.transaction(storeName, mode);
        let result;
        work(transaction.objectStore(storeName), (value) => { result = value; });
        transaction.oncomplete = () => resolve(result);
        transaction.onerror = () => reject(transaction.error);
        transaction.onabort = () => reject(transaction.error);
      });
    } finally {
      db.close();
    }
  }

  async function loadConfig() {
    const scope = self.registration.scope;
    const stored = await transact(CONFIG_STORE, "readonly", (store, done) => {
      const request = store.get(scope);
      request.onsuccess = () => done(request.result || null);
    }).catch(() => null);
    if (stored && stored.server) return stored;
    return staticConfig ? { scope, ...(stored || {}), ...staticConfig } : stored;
  }

  function updateConfig(scope, changes) {
    return transact(CONFIG_STORE, "readwrite", (store) => {
      const request = store.get(scope);
      request.onsuccess = () => store.put({ ...(request.result || { scope }), ...changes });
    }).catch(() => {});
  }

  function queue(items) {
    return transact(RECEIPT_STORE, "readwrite", (store) => {
      for (const item of items) store.put({ ...item, key: `${item.receipt} ${item.event}` });
      const count = store.count();
      count.onsuccess = () => {
        if (count.result <= QUEUE_LIMIT) return;
        // The oldest go first.
        let excess = count.result - QUEUE_LIMIT;
        const all = store.getAll();
        all.onsuccess = () => {
          for (const item of all.result.sort((a, b) => a.at - b.at)) {
            if (excess-- <= 0) break;
            store.delete(item.key);
          }
        };
      };
    }).catch(() => {});
  }

  /** Everything queued (removed from the queue: what still waits after a flush is queued again). */
  function takeQueued() {
    return transact(RECEIPT_STORE, "readwrite", (store, done) => {
      const all = store.getAll();
      all.onsuccess = () => {
        done(all.result.map(({ key, ...item }) => item));
        store.clear();
      };
    }).catch(() => []);
  }

  // -- small things

  function isObject(value) {
    return value !== null && typeof value === "object" && !Array.isArray(value);
  }

  function resolve(url, base) {
    if (typeof url !== "string" || !url) return null;
    try { return new URL(url, base).href; } catch { return null; }
  }

  function base64urlDecode(text) {
    const base64 = text.replace(/-/g, "+").replace(/_/g, "/").replace(/=+$/, "");
    const binary = atob(base64 + "===".slice((base64.length + 3) % 4));
    const bytes = new Uint8Array(binary.length);
    for (let i = 0; i < binary.length; i++) bytes[i] = binary.charCodeAt(i);
    return bytes;
  }

  async function tokenFor(endpoint) {
    const digest = new Uint8Array(await crypto.subtle.digest("SHA-256", new TextEncoder().encode(endpoint)));
    let binary = "";
    for (let i = 0; i < digest.length; i++) binary += String.fromCharCode(digest[i]);
    return "wp:" + btoa(binary).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
  }
})();
