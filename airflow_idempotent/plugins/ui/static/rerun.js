/* The rerun preview page: POST the window and conf to this app's JSON API, show each task's answer.
   Every value from the server is put into the page with textContent (never as HTML). */
(function () {
  "use strict";

  var data = JSON.parse(document.getElementById("idem-data").textContent);
  var csrf = document.querySelector('meta[name="idempotent-csrf"]').getAttribute("content");
  var url = data.root + "/api/dags/" + encodeURIComponent(data.dag_id) + "/rerun/preview";

  function $(id) { return document.getElementById(id); }

  function el(tag, text, cls) {
    var node = document.createElement(tag);
    if (text !== undefined && text !== null) node.textContent = String(text);
    if (cls) node.className = cls;
    return node;
  }

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

  function collect() {
    var raw = $("conf").value.trim() || "{}";
    var conf;
    try { conf = JSON.parse(raw); } catch (e) { return { error: "Other conf is not JSON: " + e.message }; }
    if (conf === null || typeof conf !== "object" || Array.isArray(conf)) {
      return { error: "Other conf must be a JSON object, e.g. {}" };
    }
    var policy = $("policy_version").value.trim();
    if (policy) conf.policy_version = policy;
    var semantics = $("semantics").value;
    if (semantics) conf.semantics = semantics;
    var reason = $("reason").value.trim();
    if (reason) conf.reason = reason;
    return { body: { window_start: data.window_start, window_end: data.window_end, conf: conf } };
  }

  function row(table, cells, header) {
    var tr = el("tr");
    cells.forEach(function (c) { tr.appendChild(el(header ? "th" : "td", c)); });
    table.appendChild(tr);
  }

  function task(t) {
    var box = el("section", null, "task verdict-" + t.verdict.replace(" ", "-"));
    box.setAttribute("data-task", t.task_id);
    var h = el("h3");
    h.appendChild(el("span", t.task_id + " (" + t.operator + ")", "name"));
    h.appendChild(el("span", t.verdict, "verdict"));
    box.appendChild(h);
    var p = t.preview;
    if (p) {
      var facts = el("p", p.table + " window " + p.window + ": rows " + fmt(p.rows_before) + " → " + fmt(p.rows_after)
        + (t.policy_version ? " · policy " + t.policy_version : ""), "summary");
      box.appendChild(facts);
      if (p.diff) {
        var counts = el("table", null, "counts");
        row(counts, ["added", "removed", "changed", "unchanged"], true);
        row(counts, [fmt(p.diff.added), fmt(p.diff.removed), fmt(p.diff.changed), fmt(p.diff.unchanged)]);
        box.appendChild(counts);
      } else {
        box.appendChild(el("p", (p.unchanged ? "unchanged" : "changed") + " (no key_columns: no per-row diff)"));
      }
      var sums = p.diff ? p.diff.measures : p.measure_sums;
      var names = Object.keys(sums || {});
      if (names.length) {
        var measures = el("table", null, "measures");
        row(measures, ["measure", "sum before", "sum after", "change"], true);
        names.forEach(function (m) {
          var s = sums[m];
          var delta = s.delta !== undefined ? s.delta : String(Number(s.after) - Number(s.before));
          var p = Math.max(decimals(s.before), decimals(s.after), decimals(delta));
          row(measures, [m, fmt(s.before, p), fmt(s.after, p), fmt(delta, p)]);
        });
        box.appendChild(measures);
      }
      ["changed", "added", "removed"].forEach(function (kind) {
        var keys = (p.samples || {})[kind] || [];
        if (keys.length) {
          box.appendChild(el("p", kind + " keys (up to 10): " + keys.map(function (k) {
            return Array.isArray(k) ? "(" + k.join(", ") + ")" : String(k);
          }).join(", "), "sample sample-" + kind));
        }
      });
    }
    (t.effects || []).forEach(function (e) {
      box.appendChild(el("p", e.effect + " " + (e.key || "") + ": " + e.why, "effect"));
    });
    var reasons = el("ul", null, "reasons");
    t.reasons.forEach(function (r) { reasons.appendChild(el("li", r)); });
    box.appendChild(reasons);
    return box;
  }

  function show(answer) {
    var tasks = answer.tasks || [];
    var unsafe = tasks.filter(function (t) { return t.verdict === "not safe"; }).map(function (t) { return t.task_id; });
    $("result-summary").textContent = "Window " + answer.window.label + (answer.backfill ? " as a backfill" : " as a rerun")
      + " · conf " + JSON.stringify(answer.conf) + " · "
      + (unsafe.length ? "not safe to rerun: " + unsafe.join(", ") : "no task is unsafe to rerun")
      + " · nothing was written.";
    var switches = $("result-switches");
    switches.textContent = "";
    (answer.kill_switches || []).forEach(function (s) { switches.appendChild(el("li", s)); });
    var list = $("result-tasks");
    list.textContent = "";
    tasks.forEach(function (t) { list.appendChild(task(t)); });
    $("result").classList.remove("hidden");
  }

  $("preview-button").addEventListener("click", function () {
    var form = collect();
    if (form.error) { say(form.error, "error"); return; }
    var button = $("preview-button");
    button.disabled = true;
    say("Staging and diffing each task's window…");
    fetch(url, {
      method: "POST",
      credentials: "same-origin",
      headers: { "Accept": "application/json", "Content-Type": "application/json", "X-Idempotent-CSRF": csrf },
      body: JSON.stringify(form.body)
    }).then(function (response) {
      return response.json().catch(function () { return null; }).then(function (payload) {
        if (response.status !== 200) {
          say("Refused: " + detail(payload, response.status), "error");
          $("result").classList.add("hidden");
          return;
        }
        say("");
        show(payload);
      });
    }).catch(function (err) {
      say("The preview failed: " + err, "error");
    }).then(function () { button.disabled = false; });
  });

  document.documentElement.setAttribute("data-ready", "1");  /* the button works from here on */
}());
