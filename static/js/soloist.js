// Small progressive enhancements; every page works without them.
(function () {
  "use strict";
  // Offer the browser's time zone where a form has none yet.
  document.addEventListener("DOMContentLoaded", function () {
    var zone = Intl.DateTimeFormat().resolvedOptions().timeZone;
    document.querySelectorAll("input[data-default-zone]").forEach(function (input) {
      if (!input.value && zone) { input.value = zone; }
    });
    document.querySelectorAll("[data-confirm]").forEach(function (el) {
      el.addEventListener("click", function (event) {
        if (!window.confirm(el.getAttribute("data-confirm"))) { event.preventDefault(); }
      });
    });
  });
  // Keep a polled fragment and say "connection lost" instead of blanking it.
  document.addEventListener("htmx:beforeSwap", function (event) {
    if (event.detail.xhr.status >= 400) { event.detail.shouldSwap = false; }
  });
  function lost(event) {
    var target = event.detail.elt.closest("[data-live]");
    if (target) { target.classList.add("lost"); }
  }
  document.addEventListener("htmx:sendError", lost);
  document.addEventListener("htmx:responseError", lost);
  document.addEventListener("htmx:afterSwap", function (event) {
    var target = event.detail.elt.closest("[data-live]");
    if (target) { target.classList.remove("lost"); }
  });
})();
