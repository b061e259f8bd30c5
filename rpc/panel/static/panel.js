// Hire panel: progressive enhancement only. Without this script every page works: secrets are plain,
// selectable text fields. With it: "Copy" buttons, select-on-focus for secrets, and focus moved to a
// just-shown secret so that keyboard and screen-reader users land on it.
(function () {
  "use strict";

  var announcer = document.getElementById("announcer");

  function announce(text) {
    if (!announcer) return;
    announcer.textContent = "";
    window.setTimeout(function () { announcer.textContent = text; }, 50);
  }

  function valueOf(target) {
    return "value" in target && target.tagName !== "PRE" ? target.value : target.textContent;
  }

  function selectAll(target) {
    if (typeof target.select === "function") {
      target.select();
      return;
    }
    var range = document.createRange();
    range.selectNodeContents(target);
    var selection = window.getSelection();
    selection.removeAllRanges();
    selection.addRange(range);
  }

  function fallbackCopy(target) {
    selectAll(target);
    try {
      return document.execCommand("copy");
    } catch (error) {
      return false;
    }
  }

  function copied(button, ok) {
    var label = button.getAttribute("data-label") || button.textContent;
    button.setAttribute("data-label", label);
    button.textContent = ok ? "Copied" : "Press Ctrl+C";
    announce(ok ? "Copied to the clipboard" : "Selected: press Control C to copy");
    window.setTimeout(function () { button.textContent = label; }, 2000);
  }

  document.querySelectorAll("button[data-copy]").forEach(function (button) {
    var target = document.getElementById(button.getAttribute("data-copy"));
    if (!target) return;
    button.hidden = false;
    button.addEventListener("click", function () {
      var text = valueOf(target);
      if (navigator.clipboard && window.isSecureContext) {
        navigator.clipboard.writeText(text).then(
          function () { copied(button, true); },
          function () { copied(button, fallbackCopy(target)); }
        );
      } else {
        copied(button, fallbackCopy(target));
      }
    });
  });

  document.querySelectorAll("[data-select-on-focus]").forEach(function (field) {
    field.addEventListener("focus", function () { field.select(); });
  });

  var shown = document.querySelector("[data-focus-on-load]");
  if (shown) {
    shown.focus();
  }
})();
