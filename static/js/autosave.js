// Autosave: the post form's unsaved text goes to the server (form[data-autosave]) 2 s after
// typing stops, at least every 3 s while it goes on, and when the tab hides or closes; the
// status line beside Save says what happened. The kept text is the editor's alone, never a
// version of the post (webapp/posts/autosaves.py). Without JS, nothing is kept.
(function () {
  "use strict";
  var QUIET_MS = 2000, MOST_MS = 3000;
  var NAMES = ["title", "slug", "body", "publish_at", "zone"];
  var SENT = ["csrf_token", "version", "digest"].concat(NAMES);
  var form, status, url, timer = null, first = 0, sent = "", busy = false, again = false;
  var leaving = false;

  function value(name) { return form.elements[name] ? form.elements[name].value : ""; }
  function typed() { return NAMES.map(value).join("\u0000"); }
  function payload() {
    var data = new URLSearchParams();
    SENT.forEach(function (name) { if (form.elements[name]) { data.append(name, value(name)); } });
    return data;
  }
  function say(text) { if (status) { status.textContent = text; } }
  // an offer of text kept earlier waits for Restore or Discard: saving now would replace it
  function waiting() { return !!document.getElementById("autosave-offer"); }

  function refused(response) {
    // signed out: the sign-in page (a redirect), or the session's CSRF token gone (a 400
    // naming no field); a 400 naming a field is the text's (a pasted NUL character)
    var signedOut = new Error("you are signed out; sign in again in another tab");
    if (response.redirected) { return Promise.reject(signedOut); }
    return response.json().catch(function () { return {}; }).then(function (answer) {
      if (response.status === 400 && !answer.field) { throw signedOut; }
      throw new Error(answer.error || "the server refused it (" + response.status + ")");
    });
  }
  function save() {
    var now = typed();
    window.clearTimeout(timer); timer = null; first = 0;
    if (now === sent || waiting()) { return; }
    if (busy) { again = true; return; }
    busy = true;
    window.fetch(url, {method: "POST", body: payload(), credentials: "same-origin",
                       headers: {Accept: "application/json"}})
      .then(function (response) { return response.ok && !response.redirected ? response.json() : refused(response); })
      .then(function (answer) { sent = now; say(answer.said); })
      .catch(function (error) {
        say("Not saved: " + (navigator.onLine === false || error instanceof TypeError
          ? "offline" : error.message));
      })
      .then(function () { busy = false; if (again) { again = false; later(); } });
  }
  function later() {
    var now = Date.now();
    if (waiting()) { say("Autosave waits: restore or discard the changes kept above."); return; }
    first = first || now;
    window.clearTimeout(timer);
    timer = window.setTimeout(save, Math.max(0, Math.min(QUIET_MS, first + MOST_MS - now)));
  }
  // the tab hides or closes: send what is typed now, in a request that outlives the page
  function flush() {
    var now = typed(), body;
    if (leaving || now === sent || waiting()) { return; }
    body = payload();
    if (!(navigator.sendBeacon && navigator.sendBeacon(url, body))) {  // over 64 kB: fetch
      window.fetch(url, {method: "POST", body: body, credentials: "same-origin", keepalive:
        body.toString().length < 60000}).catch(function () {});
    }
    sent = now;
  }

  document.addEventListener("DOMContentLoaded", function () {
    form = document.querySelector("form[data-autosave]");
    if (!form) { return; }
    status = document.getElementById("autosave-status");
    url = form.getAttribute("data-autosave");
    sent = form.hasAttribute("data-unsaved") ? "" : typed();  // a restored or refused form
    form.addEventListener("input", later);
    form.addEventListener("submit", function () { leaving = true; window.clearTimeout(timer); });
    if (!sent) { later(); }
  });
  document.addEventListener("visibilitychange", function () {
    if (form && document.visibilityState === "hidden") { flush(); }
  });
  window.addEventListener("pagehide", function () { if (form) { flush(); } });
  window.addEventListener("offline", function () { if (form && typed() !== sent) { say("Not saved: offline"); } });
  window.addEventListener("online", function () { if (form) { save(); } });
})();
