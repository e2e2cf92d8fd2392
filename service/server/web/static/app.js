// Live updates: follow the page's change stream (server-sent events) and,
// when changes arrive, reload the page's <main> from the server, at most
// once per 300 ms. No framework, no build step.
(function () {
  "use strict";
  var src = document.body.getAttribute("data-events");
  var live = document.getElementById("live");
  if (!src || !live || !window.EventSource) { return; }
  var count = 0, timer = null, loading = false, again = false;

  function status(text, on) {
    live.textContent = text;
    live.className = "live " + (on ? "on" : "off");
  }

  function reload() {
    timer = null;
    if (loading) { again = true; return; }
    loading = true;
    fetch(window.location.href, { headers: { "Accept": "text/html" }, cache: "no-store" })
      .then(function (r) { if (!r.ok) { throw new Error(r.status); } return r.text(); })
      .then(function (html) {
        var doc = new DOMParser().parseFromString(html, "text/html");
        var next = doc.getElementById("main"), main = document.getElementById("main");
        if (next && main) {
          var before = {};
          main.querySelectorAll("tr[data-prefix],tr[data-address]").forEach(function (tr) {
            before[tr.getAttribute("data-prefix") || tr.getAttribute("data-address")] = tr.textContent;
          });
          main.replaceChildren.apply(main, Array.prototype.slice.call(next.childNodes));
          main.querySelectorAll("tr[data-prefix],tr[data-address]").forEach(function (tr) {
            var k = tr.getAttribute("data-prefix") || tr.getAttribute("data-address");
            if (before[k] !== tr.textContent) { tr.classList.add("flash"); }
          });
        }
        live.setAttribute("data-count", String(count));
        status("updated " + new Date().toLocaleTimeString(), true);
      })
      .catch(function () { status("reload failed", false); })
      .then(function () {
        loading = false;
        if (again) { again = false; schedule(); }
      });
  }

  function schedule() { if (!timer) { timer = setTimeout(reload, 300); } }

  var es = new EventSource(src);
  var opened = false;
  es.onopen = function () {
    status("live", true);
    // After a reconnect the page may have missed changes: reload it.
    if (opened) { schedule(); }
    opened = true;
  };
  es.onerror = function () { status("reconnecting…", false); };
  es.addEventListener("change", function () { count++; schedule(); });
})();
