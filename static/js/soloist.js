// Small progressive enhancements; every page works without them.
(function () {
  "use strict";
  // Offer the browser's time zone where a form has none yet (also in swapped-in fragments).
  function defaultZones(root) {
    var zone = Intl.DateTimeFormat().resolvedOptions().timeZone;
    root.querySelectorAll("input[data-default-zone]").forEach(function (input) {
      if (!input.value && zone) { input.value = zone; }
    });
  }
  document.addEventListener("DOMContentLoaded", function () { defaultZones(document); });
  // Timer form: show only the fields of the schedule kind picked ([data-kind]) and the
  // parameter fields of the action picked ([data-action]); all show without JS (the server
  // reads the picked action's only).
  function showPicked(attribute, picked) {
    if (!picked) { return; }
    document.querySelectorAll("[" + attribute + "]").forEach(function (el) {
      el.hidden = el.getAttribute(attribute) !== picked.value;
    });
  }
  function showTimerFields() {
    showPicked("data-kind", document.querySelector("input[name=kind]:checked"));
    showPicked("data-action", document.getElementById("f-action"));
  }
  document.addEventListener("DOMContentLoaded", showTimerFields);
  document.addEventListener("change", function (event) {
    if (event.target.name === "kind" || event.target.id === "f-action") { showTimerFields(); }
  });
  document.addEventListener("htmx:load", function (event) { defaultZones(event.detail.elt); });
  // A [data-fill="#id"] button puts its data-value into that field (a time that works).
  document.addEventListener("click", function (event) {
    var button = event.target.closest && event.target.closest("[data-fill]"), field;
    if (!button) { return; }
    field = document.querySelector(button.getAttribute("data-fill"));
    if (!field) { return; }
    field.value = button.getAttribute("data-value");
    field.dispatchEvent(new Event("input", {bubbles: true}));
    field.focus();
  });
  // A [data-copy="#id"] button copies that element's text or a field's value (a one-time
  // password, a link, a secret, Markdown) and says "Copied", aloud too (a status region).
  function copied(button, done) {
    var status = document.getElementById("copy-status");
    if (!status) {
      status = document.createElement("span");
      status.id = "copy-status"; status.className = "visually-hidden";
      status.setAttribute("role", "status");
      document.body.appendChild(status);
    }
    button.removeAttribute("aria-label");  // its words are now what it says
    button.textContent = done ? "Copied" : "Select and copy it by hand";
    status.textContent = done ? "Copied to the clipboard." : "Could not copy: select it by hand.";
  }
  function copyByHand(source, text) {  // no Clipboard API (plain http): a selection and copy
    var field = source;
    if (!("value" in source)) {
      field = document.createElement("textarea"); field.value = text;
      field.setAttribute("readonly", ""); field.className = "visually-hidden";
      document.body.appendChild(field);
    }
    field.select();
    try { return document.execCommand("copy"); } catch (e) { return false; }
    finally { if (field !== source) { field.remove(); } }
  }
  document.addEventListener("click", function (event) {
    var button = event.target.closest && event.target.closest("[data-copy]"), source, text;
    if (!button) { return; }
    source = document.querySelector(button.getAttribute("data-copy"));
    if (!source) { return; }
    text = ("value" in source ? source.value : source.textContent).trim();
    if (!navigator.clipboard) { copied(button, copyByHand(source, text)); return; }
    navigator.clipboard.writeText(text).then(function () { copied(button, true); },
      function () { copied(button, copyByHand(source, text)); });
  });
  // Ask before a [data-confirm] button acts (delegated, so swapped-in buttons ask too).
  document.addEventListener("click", function (event) {
    var el = event.target.closest && event.target.closest("[data-confirm]");
    if (el && !window.confirm(el.getAttribute("data-confirm"))) { event.preventDefault(); }
  });
  // Keep "in 12 min" / "3 h ago" hints current (time[data-relative]; same wording as the server).
  function span(seconds) {
    var whole = Math.floor(seconds), hours, minutes;
    if (whole < 1) { return null; }
    if (whole < 60) { return whole + " s"; }
    if (whole < 3600) { return Math.floor(whole / 60) + " min"; }
    hours = Math.floor(whole / 3600); minutes = Math.floor(whole / 60) % 60;
    if (hours < 10 && minutes) { return hours + " h " + minutes + " min"; }
    if (hours < 48) { return hours + " h"; }
    return Math.floor(hours / 24) + " days";
  }
  function relativeTimes() {
    var now = Date.now();
    document.querySelectorAll("time[data-relative]").forEach(function (el) {
      var at = Date.parse(el.getAttribute("datetime")), seconds, text;
      if (isNaN(at)) { return; }
      seconds = (at - now) / 1000; text = span(Math.abs(seconds));
      el.textContent = text === null ? "now" : (seconds > 0 ? "in " + text : text + " ago");
    });
  }
  window.setInterval(relativeTimes, 1000);
  // Poll less in a hidden tab: [data-hidden-poll=N] lets one poll through every N s while the
  // tab is hidden, and one at once when it shows again (htmx's trigger filters need eval,
  // which the Content-Security-Policy refuses).
  var lastPoll = {}, loadedAt = Date.now();  // the page's own content is as fresh as a poll
  document.addEventListener("htmx:confirm", function (event) {
    var el = event.detail.elt, every = Number(el.getAttribute("data-hidden-poll"));
    // a refresh never takes a move being typed or a post being dragged from under the editor
    if (el.hasAttribute("data-keep-while-editing") && event.detail.verb === "get" &&
        (el.querySelector("details[open]") || el.contains(document.activeElement) &&
         document.activeElement.matches("input, select, textarea") || dragging)) {
      event.preventDefault();
      return;
    }
    var now = Date.now(), last = lastPoll[el.id] || loadedAt;
    if (!every) { return; }
    if (document.visibilityState === "hidden" && now - last < every * 1000) {
      event.preventDefault();
      return;
    }
    lastPoll[el.id] = now;
  });
  // A page refreshing itself (hx-trigger "every …") says so: the server does not count a
  // poll as use (webapp.accounts.security POLL_HEADER), so a tab left open still idles out.
  document.addEventListener("htmx:configRequest", function (event) {
    var trigger = event.detail.elt.getAttribute("hx-trigger") || "";
    if (/(^|,)\s*every\s/.test(trigger)) { event.detail.headers["X-Soloist-Poll"] = "1"; }
  });
  // Keep a polled fragment and say "connection lost" instead of blanking it; a 422 that
  // names the fields at fault is shown where the element asks for it ([data-swap-invalid]).
  document.addEventListener("htmx:beforeSwap", function (event) {
    var status = event.detail.xhr.status, elt = event.detail.elt;
    if (status === 422 && elt.closest && elt.closest("[data-swap-invalid]")) {
      event.detail.shouldSwap = true; event.detail.isError = false;
    } else if (status >= 400) { event.detail.shouldSwap = false; }
  });
  function lost(event) {
    var target = event.detail.elt.closest("[data-live]"), xhr = event.detail.xhr;
    if (target) { target.classList.add("lost"); }
    // a 503 is the server saying its database is away (webapp.views.errors), not itself
    if (target && xhr && xhr.status === 503) { target.classList.add("db-away"); }
  }
  document.addEventListener("htmx:sendError", lost);
  document.addEventListener("htmx:responseError", lost);
  document.addEventListener("htmx:timeout", lost);  // a hung server, not just a gone one
  document.addEventListener("htmx:afterSwap", function (event) {
    var target = event.detail.elt.closest("[data-live]");
    if (target) { target.classList.remove("lost", "db-away"); }
  });
  // A fold the reader opened (or closed) in a polled fragment stays so when the next poll
  // swaps the fragment in: its state is kept by id across swaps.
  var folds = {};
  document.addEventListener("toggle", function (event) {
    var el = event.target;
    if (el.tagName === "DETAILS" && el.id) { folds[el.id] = el.open; }
  }, true);
  document.addEventListener("htmx:load", function (event) {
    Array.prototype.forEach.call(event.detail.elt.querySelectorAll("details[id]"),
      function (el) { if (el.id in folds) { el.open = folds[el.id]; } });
  });
  // Post editor: the text typed but not saved goes with the panel form that schedules or
  // publishes ([data-saves-text]; the server saves it first, refusing someone else's newer
  // version as Save does), and leaving the page otherwise asks first.
  var leaving = false;
  function unsaved(form) {
    return !!form && (form.hasAttribute("data-unsaved") ||
      Array.prototype.some.call(form.elements, function (el) {
        return (el.tagName === "TEXTAREA" || el.type === "text") && el.value !== el.defaultValue;
      }));
  }
  // New post: Back after saving refetches the form with a new one-time token and no title.
  // The history entry keeps the saved form's token and title, so saving again opens the post
  // it made (the server knows the token), never a copy that clashes with it.
  function keepOnce(form) {
    if (form.elements.once) {
      history.replaceState(Object.assign({}, history.state, {
        soloistOnce: form.elements.once.value, soloistTitle: form.elements.title.value}), "");
    }
  }
  document.addEventListener("DOMContentLoaded", function () {
    var form = document.getElementById("content-form"), kept = history.state;
    if (form && form.elements.once && kept && kept.soloistOnce) {
      form.elements.once.value = kept.soloistOnce;
      if (!form.elements.title.value) { form.elements.title.value = kept.soloistTitle || ""; }
    }
  });
  function carry(form, name, value) {
    var input = form.querySelector("input[type=hidden][name=" + name + "][data-carried]");
    if (!input) {
      input = document.createElement("input");
      input.type = "hidden"; input.name = name; input.setAttribute("data-carried", "");
      form.appendChild(input);
    }
    input.value = value;
  }
  document.addEventListener("submit", function (event) {
    var form = event.target, text = document.getElementById("content-form");
    if (!text || form === text) { leaving = true; keepOnce(form); return; }
    if (!form.hasAttribute("data-saves-text") || !unsaved(text)) {
      leaving = !unsaved(text);
      return;
    }
    ["title", "slug", "body", "digest"].forEach(function (name) {
      if (text.elements[name]) { carry(form, name, text.elements[name].value); }
    });
    carry(form, "text_version", text.elements.version ? text.elements.version.value : "");
    leaving = true;
  });
  // A new post's button says what it will do: save a draft, or save and schedule.
  document.addEventListener("input", function (event) {
    var form = event.target.form, button;
    if (!form || form.id !== "content-form" || event.target.name !== "publish_at") { return; }
    button = form.querySelector("button[data-timed]");
    if (button) {
      button.textContent = button.getAttribute(event.target.value ? "data-timed" : "data-untimed");
    }
  });
  window.addEventListener("beforeunload", function (event) {
    if (!leaving && unsaved(document.getElementById("content-form"))) {
      event.preventDefault();
      event.returnValue = "";  // the browser says its own words: "changes you made may not be saved"
    }
    leaving = false;
  });
  // Calendar: drag a scheduled post (li[data-move-form]) onto another day (td[data-date]) to
  // fill its move form's day and submit it, the same form the keyboard uses. On the week
  // page a day's hours are cells too (td[data-hour]): a drop there sets the hour as well,
  // keeping the minutes.
  var dragging = false;
  document.addEventListener("dragend", function () { dragging = false; });
  document.addEventListener("dragstart", function (event) {
    var chip = event.target.closest && event.target.closest("[data-move-form]");
    if (!chip) { return; }
    dragging = true;
    event.dataTransfer.setData("text/plain", chip.getAttribute("data-move-form"));
    event.dataTransfer.effectAllowed = "move";
  });
  // A day or an hour that has passed, or one the clocks skip, is no drop target (the move
  // would be refused); the cell under the dragged post is outlined.
  function dropDay(event) {
    return event.target.closest &&
      event.target.closest("#calendar td[data-date]:not(.past):not(.skipped)");
  }
  function unmark() {
    document.querySelectorAll("#calendar td.drop-target").forEach(function (td) {
      td.classList.remove("drop-target");
    });
  }
  document.addEventListener("dragover", function (event) {
    var day = dropDay(event);
    if (!day) { return; }
    event.preventDefault(); event.dataTransfer.dropEffect = "move";
    if (!day.classList.contains("drop-target")) { unmark(); day.classList.add("drop-target"); }
  });
  document.addEventListener("dragend", unmark);
  document.addEventListener("drop", function (event) {
    var day = dropDay(event), form, date, time, hour, moved;
    unmark();
    if (!day) { return; }
    event.preventDefault();
    form = document.getElementById(event.dataTransfer.getData("text/plain"));
    date = form && form.querySelector("input[name=date]");
    time = form && form.querySelector("input[name=time]");
    if (!date || !time) { return; }
    moved = date.value !== day.getAttribute("data-date");
    date.value = day.getAttribute("data-date");
    hour = day.getAttribute("data-hour");
    if (hour !== null) {
      hour = ("0" + hour).slice(-2);
      moved = moved || time.value.slice(0, 2) !== hour;
      time.value = hour + time.value.slice(2);
    }
    if (moved) { form.requestSubmit(); }
  });
})();
