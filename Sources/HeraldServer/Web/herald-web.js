// SPDX-License-Identifier: Apache-2.0
// Herald's Web Push SDK for pages: an ES module, no build step, no dependencies.
// Safari 16+ (macOS 13+; iOS/iPadOS 16.4+ as a Home Screen web app), Firefox, Chrome and Edge.
//
//   import { Herald } from "https://push.example.com/sdk/herald-web.js";
//   const herald = new Herald({ server: "https://push.example.com", app: "shop", registerKey: "hk_…" });
//   button.onclick = () => herald.subscribe({ userId: "u1", assertion: (endpoint) => myBackend.assert(endpoint) });
//
// The page's service worker (default `/herald-sw.js`) must load herald-sw.js: serve it as the
// worker itself, or `importScripts(".../sdk/herald-sw.js")` from yours. What the worker needs
// (server, app, register key, the user) is kept in IndexedDB, which both sides read.
// docs/web.md has the whole walk, from an empty page to a first push.

const DB_NAME = "herald";
const DB_VERSION = 1;
/**
 * Per service-worker scope: {scope, server, app, registerKey, applicationServerKey (the app's),
 * subscribedKey (the one the subscription was made with), endpoint, token, userId, userPending,
 * assertionURL, appVersion, defaultTitle}.
 */
const CONFIG_STORE = "config";
/** Receipts the worker could not send yet. */
const RECEIPT_STORE = "receipts";
/** Refusals a fresh user assertion answers (as HeraldKit's). */
const ASSERTION_WANTED = new Set([
  "user_assertion_required", "user_assertion_expired", "user_assertion_unbound", "user_assertion_wrong_device",
]);

/** A refusal with a stable `code`: Herald's own (`{"error": {"code", "message"}}`) or the SDK's. */
export class HeraldError extends Error {
  /**
   * @param {string} code e.g. `unsupported`, `permission_denied`, `permission_default`, `network`,
   *   `subscribe_failed`, or Herald's (`unauthorized`, `user_assertion_required`, `endpoint_not_allowed`, …)
   * @param {string} message
   * @param {{status?: number, cause?: unknown}} [details] the HTTP status when Herald answered
   */
  constructor(code, message, details = {}) {
    super(message, details.cause === undefined ? undefined : { cause: details.cause });
    this.name = "HeraldError";
    this.code = code;
    this.status = details.status;
  }
}

export class Herald {
  /**
   * @param {object} options
   * @param {string} options.server Herald's origin (and path prefix, if any), e.g. `https://push.example.com`
   * @param {string} options.app the app's id
   * @param {string} options.registerKey a key of scope `register` for this app (safe to ship in a page)
   * @param {string} [options.serviceWorker] the worker's script URL, same origin as the page
   * @param {string} [options.scope] the worker's scope (default: the script's directory)
   * @param {string|((userId: string, endpoint: string) => Promise<string>)} [options.userAssertion]
   *   where a user assertion comes from when Herald asks for a fresh one (after the browser
   *   renewed the subscription, or an assertion expired): a function, or the URL of the app's
   *   backend that answers `POST {userId, token}` (cookies included) with `{"assertion": "…"}` —
   *   a URL also serves the service worker, which cannot call a function of the page's.
   * @param {string} [options.appVersion] sent with the registration
   * @param {string} [options.defaultTitle] the title of the notification shown for a push that is not a declarative one
   */
  constructor({ server, app, registerKey, serviceWorker = "/herald-sw.js", scope, userAssertion, appVersion, defaultTitle } = {}) {
    if (typeof server !== "string" || !server) throw new HeraldError("bad_options", "server is required");
    if (typeof app !== "string" || !app) throw new HeraldError("bad_options", "app is required");
    if (typeof registerKey !== "string" || !registerKey) throw new HeraldError("bad_options", "registerKey is required");
    this.server = server.replace(/\/+$/, "");
    this.app = app;
    this.registerKey = registerKey;
    this.serviceWorker = serviceWorker;
    this.scope = scope;
    this.userAssertion = userAssertion;
    this.appVersion = appVersion;
    this.defaultTitle = defaultTitle;
  }

  /** Whether this browser can receive Web Push here (a secure context with service workers, PushManager and notifications). */
  static supported() {
    return typeof window !== "undefined" && window.isSecureContext === true && typeof navigator !== "undefined" &&
      "serviceWorker" in navigator && "PushManager" in window && "Notification" in window;
  }

  /** The notification permission: `granted`, `denied`, `default`, or `unsupported`. */
  static permission() {
    return Herald.supported() ? Notification.permission : "unsupported";
  }

  /**
   * Subscribes this browser and registers it with Herald; resolves to the device Herald holds
   * (`token` is `wp:…`). Call it on every page load (cheap when nothing changed: the existing
   * subscription is reused) and from the button that turns notifications on.
   *
   * Permission: when it is still `default`, this asks for it (`Notification.requestPermission()`)
   * before anything else — Safari (and Firefox) only show the prompt when the call comes from a
   * user gesture, so call subscribe() first thing in a click handler; on page load, with
   * permission not yet granted, it throws `permission_default` without prompting
   * (`{prompt: false}`) or whatever the browser decides.
   *
   * @param {object} [options]
   * @param {string|null} [options.userId] binds the subscription to this user (needs `assertion`
   *   unless the app has user verification off, or it is already bound to that user); null logs
   *   out; left out: the user remembered from before, if any
   * @param {string|((endpoint: string) => Promise<string>)} [options.assertion] the app
   *   backend's user assertion for `userId` and this subscription: Herald binds it to the
   *   endpoint, which is only known once the browser subscribed, so pass a function of it
   * @param {boolean} [options.prompt] false: never ask for permission (page load)
   * @param {string[]} [options.tags]
   */
  async subscribe({ userId, assertion, prompt = true, tags } = {}) {
    if (!Herald.supported()) throw new HeraldError("unsupported", "this browser has no Web Push here (a secure context with service workers and notifications is needed)");
    // Before any await: Safari accepts the request only while the user gesture is current.
    let permission = Notification.permission;
    const asked = permission === "default" && prompt ? Notification.requestPermission() : null;
    if (asked) permission = await asked;
    if (permission === "denied") throw new HeraldError("permission_denied", "notifications are blocked for this site");
    if (permission !== "granted") throw new HeraldError("permission_default", "notification permission was not granted (ask from a user gesture)");

    const registration = await this.#worker();
    const saved = (await readConfig(registration.scope)) || {};
    const key = await this.#vapidKey();
    await writeConfig({ ...saved, ...this.#base(registration.scope), applicationServerKey: key });

    let subscription = await registration.pushManager.getSubscription();
    let previous = null;
    // The key it was made with: the browser's word (PushSubscription.options), else what this SDK
    // remembers subscribing with; unknown (neither) counts as another key, once.
    const made = subscription && subscription.options && subscription.options.applicationServerKey;
    const current = made ? sameKey(made, key)
      : !!subscription && saved.endpoint === subscription.endpoint && saved.subscribedKey === key;
    if (subscription && !current) {
      // The app rotated its VAPID key: a subscription stays bound to the key it was made with.
      previous = subscription;
      await subscription.unsubscribe().catch(() => {});
      subscription = null;
    }
    if (!subscription) {
      try {
        subscription = await registration.pushManager.subscribe({ userVisibleOnly: true, applicationServerKey: base64urlDecode(key) });
      } catch (error) {
        throw new HeraldError(error && error.name === "NotAllowedError" ? "permission_denied" : "subscribe_failed",
          `the browser refused the subscription: ${error && error.message}`, { cause: error });
      }
    }

    const explicit = userId !== undefined;
    const user = explicit ? userId : saved.userId || null;
    // Herald binds a subscription to a user with an assertion unless it is bound to that user
    // already: a new subscription, a pending user, another user all need one.
    const bound = !!user && saved.endpoint === subscription.endpoint && saved.userId === user && !saved.userPending;
    const device = await this.#register(registration, subscription, {
      userId: user, assertion: explicit ? assertion : undefined, explicit, tags, needsAssertion: !!user && !bound,
    });
    await updateConfig(registration.scope, { subscribedKey: key });
    const oldEndpoint = previous ? previous.endpoint : saved.endpoint && saved.endpoint !== subscription.endpoint ? saved.endpoint : null;
    if (oldEndpoint) await this.#delete(await tokenFor(oldEndpoint)).catch(() => {});
    return device;
  }

  /** Binds the subscription to `userId` (a login), with the app backend's `assertion` (a string, or a function of the endpoint). */
  async setUser(userId, assertion) {
    if (typeof userId !== "string" || !userId) throw new HeraldError("bad_user", "setUser needs a user id; logout() removes it");
    return this.subscribe({ userId, assertion, prompt: false });
  }

  /** Keeps the subscription but binds it to no user: pushes to the user stop reaching this browser. */
  async logout() {
    const registration = await this.#existingWorker();
    const subscription = registration && (await registration.pushManager.getSubscription());
    if (!subscription) {
      if (registration) await updateConfig(registration.scope, { userId: null, userPending: false });
      return null;
    }
    return this.#register(registration, subscription, { userId: null, explicit: true });
  }

  /** Unregisters from Herald and unsubscribes the browser (pushes stop). */
  async unsubscribe() {
    const registration = await this.#existingWorker();
    const subscription = registration && (await registration.pushManager.getSubscription());
    if (!subscription) return false;
    let failure = null;
    try {
      await this.#delete(await tokenFor(subscription.endpoint));
    } catch (error) {
      if (!(error instanceof HeraldError && error.code === "not_found")) failure = error;
    }
    await subscription.unsubscribe().catch(() => {});
    await updateConfig(registration.scope, { endpoint: null, token: null, userId: null, userPending: false });
    if (failure) throw failure;
    return true;
  }

  /**
   * What this browser holds now, without asking Herald: `{token, endpoint, userId, userPending,
   * permission}`, or null when it is not subscribed. `userPending`: the browser renewed its
   * subscription in the background and the user is bound again at the next subscribe().
   */
  async registration() {
    if (!Herald.supported()) return null;
    const registration = await this.#existingWorker();
    const subscription = registration && (await registration.pushManager.getSubscription());
    if (!subscription) return null;
    const saved = (await readConfig(registration.scope)) || {};
    return {
      token: await tokenFor(subscription.endpoint),
      endpoint: subscription.endpoint,
      userId: saved.userId || null,
      userPending: saved.userPending === true,
      permission: Notification.permission,
    };
  }

  /** The Herald token of a subscription endpoint: `wp:` + base64url(SHA-256(endpoint)). */
  static tokenFor(endpoint) {
    return tokenFor(endpoint);
  }

  // -- internals

  #base(scope) {
    return {
      scope, server: this.server, app: this.app, registerKey: this.registerKey, defaultTitle: this.defaultTitle,
      assertionURL: typeof this.userAssertion === "string" ? new URL(this.userAssertion, location.href).href : undefined,
      appVersion: this.appVersion,
    };
  }

  async #worker() {
    let registration;
    try {
      registration = await navigator.serviceWorker.register(this.serviceWorker, this.scope ? { scope: this.scope } : undefined);
    } catch (error) {
      throw new HeraldError("service_worker_failed", `the service worker ${this.serviceWorker} could not be registered: ${error && error.message}`, { cause: error });
    }
    return activated(registration);
  }

  async #existingWorker() {
    const url = new URL(this.scope || this.serviceWorker, location.href).href;
    const registration = await navigator.serviceWorker.getRegistration(url);
    return registration ? activated(registration) : null;
  }

  async #vapidKey() {
    const answer = await this.#call("GET", `/v1/apps/${encodeURIComponent(this.app)}/webpush/key`);
    if (!answer || typeof answer.publicKey !== "string") throw new HeraldError("bad_response", "Herald answered no publicKey");
    return answer.publicKey;
  }

  /**
   * POSTs the registration. When Herald wants a (fresh) user assertion it asks the
   * `userAssertion` source once; without one, a user only remembered (not asked for now) is left
   * pending — the subscription is registered without a user, bound again at the next subscribe()
   * that can get an assertion — rather than failing the page's load.
   */
  async #register(registration, subscription, { userId, assertion, explicit, tags, needsAssertion = false }) {
    const json = subscription.toJSON();
    const body = {
      transport: "webpush",
      subscription: { endpoint: subscription.endpoint, keys: { p256dh: json.keys.p256dh, auth: json.keys.auth } },
      platform: "web",
      locale: navigator.language || undefined,
      timeZone: timeZone(),
    };
    if (this.appVersion) body.appVersion = this.appVersion;
    if (Array.isArray(tags)) body.tags = tags;
    if (userId) {
      body.userId = userId;
      let given = typeof assertion === "function" ? await assertion(subscription.endpoint) : assertion;
      // Asked for up front where one is needed: a refusal's code may not reach a page whose
      // origin Herald answers CORS for only on success.
      if (!given && needsAssertion && this.userAssertion) given = await this.#freshAssertion(userId, subscription.endpoint).catch(() => null);
      if (given) body.userAssertion = given;
    }
    const path = `/v1/apps/${encodeURIComponent(this.app)}/registrations`;
    let device;
    let pending = false;
    try {
      device = await this.#call("POST", path, body);
    } catch (error) {
      if (!(userId && error instanceof HeraldError && ASSERTION_WANTED.has(error.code))) throw error;
      if (this.userAssertion && !(needsAssertion && body.userAssertion && error.code === "user_assertion_required")) {
        body.userAssertion = await this.#freshAssertion(userId, subscription.endpoint);
        device = await this.#call("POST", path, body);
      } else if (!explicit) {
        delete body.userId;
        delete body.userAssertion;
        device = await this.#call("POST", path, body);
        pending = true;
      } else {
        throw error;
      }
    }
    await updateConfig(registration.scope, {
      endpoint: subscription.endpoint, token: device.token, userId: userId || null, userPending: pending,
    });
    return device;
  }

  async #freshAssertion(userId, endpoint) {
    if (typeof this.userAssertion === "function") return this.userAssertion(userId, endpoint);
    const answer = await fetch(new URL(this.userAssertion, location.href), {
      method: "POST", credentials: "include", headers: { "content-type": "application/json" },
      body: JSON.stringify({ userId, token: endpoint }),
    });
    const json = await answer.json().catch(() => null);
    if (!answer.ok || !json || typeof json.assertion !== "string") {
      throw new HeraldError("user_assertion_unavailable", `the app's backend gave no assertion (HTTP ${answer.status})`, { status: answer.status });
    }
    return json.assertion;
  }

  #delete(token) {
    // As is: `wp:` and base64url are safe in a path (Herald reads the segment undecoded).
    return this.#call("DELETE", `/v1/apps/${encodeURIComponent(this.app)}/devices/${token}`);
  }

  async #call(method, path, body) {
    let answer;
    try {
      answer = await fetch(this.server + path, {
        method,
        headers: body === undefined ? { authorization: `Bearer ${this.registerKey}` }
          : { authorization: `Bearer ${this.registerKey}`, "content-type": "application/json" },
        body: body === undefined ? undefined : JSON.stringify(body),
        credentials: "omit",
        cache: "no-store",
      });
    } catch (error) {
      throw new HeraldError("network", `Herald could not be reached (${method} ${path}): ${error && error.message}`, { cause: error });
    }
    const text = await answer.text();
    let json = null;
    try { json = text ? JSON.parse(text) : null; } catch { json = null; }
    if (!answer.ok) {
      const detail = json && json.error;
      throw new HeraldError(detail && typeof detail.code === "string" ? detail.code : `http_${answer.status}`,
        detail && typeof detail.message === "string" ? detail.message : `Herald answered ${answer.status} to ${method} ${path}`,
        { status: answer.status });
    }
    return json;
  }
}

// -- helpers shared in spirit with herald-sw.js (a classic script cannot import a module)

/** Resolves once `registration` has an active worker (push subscriptions need one). */
function activated(registration) {
  if (registration.active) return Promise.resolve(registration);
  const worker = registration.installing || registration.waiting;
  if (!worker) {
    // Between an update's end and the next worker's start a registration can hold none for a
    // moment (seen in Firefox on a loaded machine): wait for that worker to be found.
    return new Promise((resolve, reject) => {
      const found = () => {
        registration.removeEventListener("updatefound", found);
        activated(registration).then(resolve, reject);
      };
      registration.addEventListener("updatefound", found);
    });
  }
  return new Promise((resolve, reject) => {
    const check = () => {
      if (registration.active) { worker.removeEventListener("statechange", check); resolve(registration); }
      else if (worker.state === "redundant") { worker.removeEventListener("statechange", check); reject(new HeraldError("service_worker_failed", "the service worker failed to install")); }
    };
    worker.addEventListener("statechange", check);
    check();
  });
}

function timeZone() {
  try { return Intl.DateTimeFormat().resolvedOptions().timeZone || undefined; } catch { return undefined; }
}

function base64urlDecode(text) {
  const base64 = text.replace(/-/g, "+").replace(/_/g, "/").replace(/=+$/, "");
  const binary = atob(base64 + "===".slice((base64.length + 3) % 4));
  const bytes = new Uint8Array(binary.length);
  for (let i = 0; i < binary.length; i++) bytes[i] = binary.charCodeAt(i);
  return bytes;
}

function base64urlEncode(buffer) {
  const bytes = new Uint8Array(buffer);
  let binary = "";
  for (let i = 0; i < bytes.length; i++) binary += String.fromCharCode(bytes[i]);
  return btoa(binary).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

/** Whether a subscription's applicationServerKey (an ArrayBuffer, or null) is the base64url `key`. */
function sameKey(buffer, key) {
  if (!buffer) return false;
  const a = new Uint8Array(buffer);
  const b = base64urlDecode(key);
  return a.length === b.length && a.every((value, index) => value === b[index]);
}

async function tokenFor(endpoint) {
  const digest = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(endpoint));
  return "wp:" + base64urlEncode(digest);
}

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

async function transact(mode, work) {
  const db = await openDatabase();
  try {
    return await new Promise((resolve, reject) => {
      const transaction = db.transaction(CONFIG_STORE, mode);
      let result;
      Promise.resolve(work(transaction.objectStore(CONFIG_STORE), (value) => { result = value; })).catch(reject);
      transaction.oncomplete = () => resolve(result);
      transaction.onerror = () => reject(transaction.error);
      transaction.onabort = () => reject(transaction.error);
    });
  } finally {
    db.close();
  }
}

function readConfig(scope) {
  return transact("readonly", (store, done) => {
    const request = store.get(scope);
    request.onsuccess = () => done(request.result || null);
  }).catch(() => null);
}

function writeConfig(config) {
  return transact("readwrite", (store) => { store.put(config); });
}

function updateConfig(scope, changes) {
  return transact("readwrite", (store) => {
    const request = store.get(scope);
    request.onsuccess = () => store.put({ ...(request.result || { scope }), ...changes });
  });
}
