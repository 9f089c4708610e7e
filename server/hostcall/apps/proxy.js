// The sandbox proxy: the one page of the apps origin the widget frames. It relays JSON-RPC
// between its parent (the widget, whose exact origin is ?host=) and one inner frame (the
// view, on this same origin), and nothing else. The view is loaded by URL, never srcdoc:
// a srcdoc frame would inherit this page's CSP, and the view's own policy (its declared
// domains) is the one that must hold there.
(function () {
  "use strict";

  var READY = "ui/notifications/sandbox-proxy-ready";
  var RESOURCE = "ui/notifications/sandbox-resource-ready";
  var SANDBOX = "allow-scripts allow-same-origin allow-forms";
  var VIEWS = location.origin + "/apps/view/";

  var host = new URLSearchParams(location.search).get("host");
  var inner = null;
  if (!host || window.parent === window) return;

  function toHost(message) {
    window.parent.postMessage(message, host);
  }

  function load(viewUrl) {
    // Once, and only a view of this origin: the proxy frames nothing else.
    if (inner || typeof viewUrl !== "string" || viewUrl.indexOf(VIEWS) !== 0) return;
    inner = document.createElement("iframe");
    inner.setAttribute("sandbox", SANDBOX);
    inner.setAttribute("referrerpolicy", "no-referrer");
    inner.setAttribute("title", "View");
    // The view's policy names its ancestors (frame-ancestors holds for the whole chain):
    // the widget is one of them.
    inner.src = viewUrl + (viewUrl.indexOf("?") < 0 ? "?" : "&") + "host=" + encodeURIComponent(host);
    document.body.appendChild(inner);
  }

  window.addEventListener("message", function (event) {
    var data = event.data;
    if (event.source === window.parent && event.origin === host) {
      if (data && data.method === RESOURCE) {
        load(data.params && data.params.viewUrl);
      } else if (inner && inner.contentWindow) {
        inner.contentWindow.postMessage(data, location.origin);
      }
    } else if (inner && event.source === inner.contentWindow && event.origin === location.origin) {
      toHost(data);
    }
  });

  toHost({ jsonrpc: "2.0", method: READY, params: {} });
})();
