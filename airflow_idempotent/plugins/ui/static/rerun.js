/* The rerun preview page: POST the window and conf to this app's JSON API, show each task's answer.
   Every value from the server is put into the page with textContent (never as HTML). */
(function () {
  "use strict";

  var data = JSON.parse(document.getElementById("idem-data").textContent);
  var idem = window.idempotent;
  var $ = idem.$, el = idem.el, say = idem.say, detail = idem.detail, decimals = idem.decimals, fmt = idem.fmt;
  var url = data.root + "/api/dags/" + encodeURIComponent(data.dag_id) + "/rerun/preview";

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
    if (t.code && t.code.differs) {
      box.appendChild(el("p", "DAG version changed since " + t.code.changed_periods.join(", ")
        + " was written: " + t.code.would_run, "code code-changed"));
    }
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
    idem.call("POST", url, form.body).then(function (answer) {
      if (answer.status !== 200) {
        say("Refused: " + detail(answer.payload, answer.status), "error");
        $("result").classList.add("hidden");
        return;
      }
      say("");
      show(answer.payload);
    }).catch(function (err) {
      say("The preview failed: " + err, "error");
    }).then(function () { button.disabled = false; });
  });

  document.documentElement.setAttribute("data-ready", "1");  /* the button works from here on */
}());
