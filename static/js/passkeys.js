// Passkeys (WebAuthn): [data-passkey-register] makes one under Settings, [data-passkey-signin]
// signs in with one. The server's options and the browser's answers travel as JSON, their
// bytes as base64url (webauthn's options_to_json on the server).
(function () {
  "use strict";
  function toBytes(text) {
    var b64 = text.replace(/-/g, "+").replace(/_/g, "/");
    while (b64.length % 4) { b64 += "="; }
    var raw = atob(b64), out = new Uint8Array(raw.length);
    for (var i = 0; i < raw.length; i++) { out[i] = raw.charCodeAt(i); }
    return out.buffer;
  }
  function toText(buffer) {
    var bytes = new Uint8Array(buffer), raw = "";
    for (var i = 0; i < bytes.length; i++) { raw += String.fromCharCode(bytes[i]); }
    return btoa(raw).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
  }
  function csrf() {
    var input = document.querySelector("input[name=csrf_token]");
    return input ? input.value : "";
  }
  function post(url, body) {
    return fetch(url, {method: "POST", credentials: "same-origin",
                       headers: {"Content-Type": "application/json", "X-CSRFToken": csrf()},
                       body: JSON.stringify(body || {})})
      .then(function (r) { return r.json().then(function (j) { j.ok = r.ok; return j; }); });
  }
  function say(box, text) { if (box) { box.textContent = text; box.hidden = false; } }
  function credentialJson(cred) {
    var r = cred.response, out = {id: cred.id, rawId: toText(cred.rawId), type: cred.type,
                                  response: {clientDataJSON: toText(r.clientDataJSON)}};
    if (r.attestationObject) {
      out.response.attestationObject = toText(r.attestationObject);
      out.response.transports = r.getTransports ? r.getTransports() : [];
    } else {
      out.response.authenticatorData = toText(r.authenticatorData);
      out.response.signature = toText(r.signature);
      out.response.userHandle = r.userHandle ? toText(r.userHandle) : null;
    }
    out.clientExtensionResults = cred.getClientExtensionResults ? cred.getClientExtensionResults() : {};
    return out;
  }
  document.addEventListener("click", function (event) {
    var button = event.target.closest && event.target.closest("[data-passkey-register], [data-passkey-signin]");
    if (!button) { return; }
    event.preventDefault();
    var box = document.getElementById(button.getAttribute("data-status"));
    if (!window.PublicKeyCredential) { say(box, "This browser does not support passkeys."); return; }
    var registering = button.hasAttribute("data-passkey-register");
    var optionsUrl = button.getAttribute("data-options"), doneUrl = button.getAttribute("data-done");
    post(optionsUrl).then(function (options) {
      if (!options.ok) { throw new Error(options.error || "The site refused."); }
      options.challenge = toBytes(options.challenge);
      if (registering) {
        options.user.id = toBytes(options.user.id);
        (options.excludeCredentials || []).forEach(function (c) { c.id = toBytes(c.id); });
        return navigator.credentials.create({publicKey: options});
      }
      (options.allowCredentials || []).forEach(function (c) { c.id = toBytes(c.id); });
      return navigator.credentials.get({publicKey: options});
    }).then(function (cred) {
      var name = document.getElementById("passkey-name");
      var next = document.querySelector("input[name=next]");
      return post(doneUrl, {credential: credentialJson(cred), name: name ? name.value : "",
                            next: next ? next.value : ""});
    }).then(function (answer) {
      if (!answer.ok) { throw new Error(answer.error || "The site refused."); }
      if (button.hasAttribute("data-then-submit")) { button.form.submit(); return; }
      window.location.assign(answer.redirect);
    }).catch(function (error) {
      say(box, error && error.name === "NotAllowedError" ? "Cancelled, or no passkey for this site here." : (error.message || String(error)));
    });
  });
})();
