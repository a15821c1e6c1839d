/* What the pages' scripts share (window.idempotent): DOM helpers that only ever set textContent,
   the error text of an answer, a JSON call carrying the page's CSRF token, number formatting. */
(function () {
  "use strict";

  var csrf = document.querySelector('meta[name="idempotent-csrf"]').getAttribute("content");

  function $(id) { return document.getElementById(id); }

  function el(tag, text, cls) {
    var node = document.createElement(tag);
    if (text !== undefined && text !== null) node.textContent = String(text);
    if (cls) node.className = cls;
    return node;
  }

  function show(node, on) { node.classList.toggle("hidden", !on); }

  function say(text, kind) {
    var box = $("message");
    box.textContent = text || "";
    box.className = "box" + (kind ? " " + kind : "") + (text ? "" : " hidden");
  }

  function detail(payload, status) {
    if (payload && typeof payload.detail === "string") return payload.detail;
    if (payload && Array.isArray(payload.detail)) {
      return payload.detail.map(function (d) {
        return (d.loc || []).slice(1).join(".") + ": " + d.msg;
      }).join("; ");
    }
    return "HTTP " + status;
  }

  function call(method, url, body) {
    var init = {
      method: method,
      credentials: "same-origin",
      headers: { "Accept": "application/json", "X-Idempotent-CSRF": csrf }
    };
    if (body !== undefined) {
      init.headers["Content-Type"] = "application/json";
      init.body = JSON.stringify(body);
    }
    return fetch(url, init).then(function (response) {
      return response.json().catch(function () { return null; }).then(function (payload) {
        return { status: response.status, payload: payload };
      });
    });
  }

  function decimals(v) {
    var text = String(v === null || v === undefined ? "" : v);
    return text.indexOf(".") >= 0 ? Math.min(4, text.split(".")[1].length) : 0;
  }

  /* A figure with thousands separators and `places` decimals (default: its own). */
  function fmt(v, places) {
    if (v === null || v === undefined || v === "") return "";
    var n = Number(v);
    if (isNaN(n)) return String(v);
    var p = places === undefined ? decimals(v) : places;
    return n.toLocaleString("en-US", { minimumFractionDigits: p, maximumFractionDigits: p });
  }

  window.idempotent = { $: $, el: el, show: show, say: say, detail: detail, call: call, decimals: decimals, fmt: fmt };
}());
