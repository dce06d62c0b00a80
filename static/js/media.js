// Images in posts: the editor's "Add image…" button, drop and paste into the Markdown body
// upload to the Media library and insert the image's Markdown at the cursor; the Media
// page's form checks the size first. Without this script the Media page's form still works.
(function () {
  "use strict";
  var pending = null, range = [0, 0];
  function csrf() {
    var meta = document.querySelector('meta[name="csrf-token"]');
    return meta ? meta.getAttribute("content") : "";
  }
  function el(id) { return document.getElementById(id); }
  function showError(field, message) {
    var box = el("e-media-" + field), input = el("f-media-" + field);
    box.textContent = message; box.hidden = !message;
    if (message) { input.setAttribute("aria-invalid", "true"); input.setAttribute("aria-describedby", box.id); }
    else { input.removeAttribute("aria-invalid"); }
  }
  function sizeText(bytes) { return (Math.round(bytes / 100000) / 10) + " MB"; }
  function tooLarge(file, dialog) {
    var max = parseInt(dialog.getAttribute("data-max-bytes"), 10);
    return file.size > max ? "The file is " + sizeText(file.size) + ": images may be at most " +
      dialog.getAttribute("data-limit") + "." : "";
  }
  function open(file) {
    var dialog = el("media-dialog"), body = el("f-body"), picked = el("media-picked");
    if (!dialog || !body) { return; }
    range = [body.selectionStart, body.selectionEnd];
    pending = file || null;
    showError("file", ""); showError("alt", ""); el("media-status").textContent = "";
    el("f-media-file").value = "";
    el("f-media-file").hidden = !!pending;
    picked.textContent = pending ? "To upload: " + (pending.name || "a pasted image") : "";
    dialog.showModal();
    (pending ? el("f-media-alt") : el("f-media-file")).focus();
  }
  function insert(markdown) {
    var body = el("f-body");
    body.focus();
    body.setRangeText(markdown, range[0], range[1], "end");
    body.dispatchEvent(new Event("input", {bubbles: true}));  // the preview and "unsaved"
  }
  function upload(event) {
    var dialog = el("media-dialog"), input = el("f-media-file"), alt = el("f-media-alt");
    var file = pending || (input.files && input.files[0]), button, data, problem;
    event.preventDefault();
    showError("file", ""); showError("alt", "");
    if (!file) { showError("file", "Choose an image."); input.focus(); return; }
    problem = tooLarge(file, dialog);
    if (problem) { showError("file", problem); return; }
    if (!alt.value.trim()) {
      showError("alt", "Describe the image for readers who cannot see it."); alt.focus(); return;
    }
    data = new FormData();
    data.append("file", file, file.name || "pasted-image");
    data.append("alt", alt.value);
    data.append("csrf_token", csrf());
    button = dialog.querySelector("[data-media-upload]");
    button.disabled = true;
    el("media-status").textContent = "Uploading…";
    fetch(dialog.getAttribute("data-upload"), {method: "POST", body: data, credentials: "same-origin",
      headers: {"Accept": "application/json", "X-CSRFToken": csrf()}})
      .then(function (response) {
        return response.json().then(function (answer) { return [response.ok, answer]; });
      })
      .then(function (result) {
        if (result[0]) {
          dialog.close(); alt.value = ""; pending = null; insert(result[1].markdown);
        } else {
          showError(result[1].field === "alt" ? "alt" : "file", result[1].detail || result[1].error);
        }
      })
      .catch(function () { showError("file", "The upload failed: check the connection and try again."); })
      .then(function () { button.disabled = false; el("media-status").textContent = ""; });
  }
  function imageIn(transfer) {
    var files = transfer ? transfer.files : [], i;
    for (i = 0; i < files.length; i += 1) {
      if (/^image\//.test(files[i].type)) { return files[i]; }
    }
    return null;
  }
  document.addEventListener("click", function (event) {
    var target = event.target.closest && event.target.closest("[data-media-open], [data-media-cancel]");
    if (!target) { return; }
    if (target.hasAttribute("data-media-open")) { open(null); } else { el("media-dialog").close(); }
  });
  document.addEventListener("submit", function (event) {
    var form = event.target, file, problem;
    if (form.closest("#media-dialog")) { upload(event); return; }
    if (!form.hasAttribute("data-media-form")) { return; }
    file = el("f-file").files[0];  // the Media page: refuse an oversized file before sending it
    problem = file ? tooLarge(file, form) : "";
    if (problem) {
      event.preventDefault();
      var box = el("e-file") || document.createElement("small");
      box.id = "e-file"; box.className = "error"; box.textContent = problem;
      el("f-file").after(box); el("f-file").setAttribute("aria-invalid", "true");
      el("f-file").setAttribute("aria-describedby", "e-file");
    }
  });
  document.addEventListener("dragover", function (event) {
    if (event.target.id === "f-body" && event.dataTransfer &&
        Array.prototype.indexOf.call(event.dataTransfer.types, "Files") !== -1) {
      event.preventDefault();
    }
  });
  document.addEventListener("drop", function (event) {
    var file = event.target.id === "f-body" && imageIn(event.dataTransfer);
    if (file) { event.preventDefault(); open(file); }
  });
  document.addEventListener("paste", function (event) {
    var file = event.target.id === "f-body" && imageIn(event.clipboardData);
    if (file) { event.preventDefault(); open(file); }
  });
}());
