/* The guarded backfill page: preview, start, watch, stop. Talks to this app's JSON API only.
   Every value from the server is put into the page with textContent (never as HTML). */
(function () {
  "use strict";

  var data = JSON.parse(document.getElementById("idem-data").textContent);
  var api = data.root + "/api/dags/" + encodeURIComponent(data.dag_id);
  var POLL_MS = 2000;
  var pollTimer = null;
  var current = null;
  var idem = window.idempotent;
  var $ = idem.$, el = idem.el, show = idem.show, say = idem.say, detail = idem.detail;
  var call = idem.call, decimals = idem.decimals, fmt = idem.fmt;

  function value(id) {
    var v = $(id).value.trim();
    return v === "" ? undefined : v;
  }

  function number(raw) {
    if (raw === undefined) return undefined;
    var n = Number(raw);
    return isNaN(n) ? raw : n;  /* not a number: sent as typed, the server refuses it */
  }

  function collect() {
    var body = {
      from_date: value("from_date"),
      to_date: value("to_date"),
      semantics: $("semantics").value,
      reason: value("reason"),
      reprocess_behavior: $("reprocess_behavior").value
    };
    var policy = value("policy_version");
    if (policy !== undefined) body.policy_version = policy;
    var approve = number(value("approve_windows"));
    if (approve !== undefined) body.approve_windows = approve;
    var runs = number(value("max_active_runs"));
    if (runs !== undefined) body.max_active_runs = runs;
    var thresholds = {};
    ["max_changed_rows", "max_removed_rows", "max_added_rows", "max_shrink"].forEach(function (name) {
      var v = number(value(name));
      if (v !== undefined) thresholds[name] = v;
    });
    [["measure-rel", "max_measure_rel_change"], ["measure-abs", "max_measure_abs_change"]].forEach(function (pair) {
      var limits = {};
      document.querySelectorAll("." + pair[0]).forEach(function (input) {
        var v = input.value.trim();
        if (v !== "") limits[input.getAttribute("data-measure")] = number(v);
      });
      if (Object.keys(limits).length) thresholds[pair[1]] = limits;
    });
    if (Object.keys(thresholds).length) body.thresholds = thresholds;
    return body;
  }

  function day(iso) { return iso ? String(iso).slice(0, 10) : ""; }

  function runLink(runId, text) {
    if (!runId) return el("span", text);
    var a = el("a", text);
    a.href = data.airflow + "/dags/" + encodeURIComponent(data.dag_id) + "/runs/" + encodeURIComponent(runId);
    a.target = "_top";
    return a;
  }

  /* ------------------------------------------------------------------ preview */
  function renderPreview(p) {
    show($("preview"), true);
    var parts = [p.count + " window" + (p.count === 1 ? "" : "s") + " will run, of " + p.total_in_range + " in the range"];
    if (p.cap !== null) parts.push("cap " + p.cap + (p.over_cap ? ": over the cap, approve exactly " + p.approval_needed : ""));
    if (p.effective_thresholds) {
      var t = p.effective_thresholds, limits = [];
      ["max_changed_rows", "max_removed_rows", "max_added_rows", "max_shrink"].forEach(function (k) {
        if (t[k] !== null && t[k] !== undefined) limits.push(k + " " + t[k]);
      });
      Object.keys(t.max_measure_rel_change || {}).forEach(function (k) { limits.push(k + " ±" + t.max_measure_rel_change[k] * 100 + " %"); });
      Object.keys(t.max_measure_abs_change || {}).forEach(function (k) { limits.push(k + " ±" + t.max_measure_abs_change[k]); });
      if (limits.length) parts.push("stop conditions: " + limits.join(", "));
    }
    $("preview-summary").textContent = parts.join(" · ");
    var refusal = p.refusal ? "The guard refuses: " + p.refusal : (p.airflow_refusal ? "Airflow refuses: " + p.airflow_refusal : "");
    $("preview-refusal").textContent = refusal;
    show($("preview-refusal"), !!refusal);
    var blocked = $("preview-blocked");
    blocked.replaceChildren();
    (p.blocked || []).concat(p.history_error ? [p.history_error] : []).forEach(function (b) { blocked.appendChild(el("li", b)); });
    var body = $("preview-table").querySelector("tbody");
    body.replaceChildren();
    (p.windows || []).forEach(function (w) {
      var tr = el("tr", null, w.will_run ? "" : "skipped");
      tr.appendChild(el("td", day(w.logical_date) || w.partition_key));
      tr.appendChild(el("td", w.label || ""));
      tr.appendChild(el("td", w.will_run ? "yes" : "no: run " + (w.skip_reason || "exists")));
      var run = el("td");
      if (w.run_state) run.appendChild(runLink(w.run_id, w.run_state));
      tr.appendChild(run);
      var existing = el("td");
      if (!w.existing || !w.existing.length) existing.textContent = "no data recorded";
      (w.existing || []).forEach(function (x) {
        existing.appendChild(el("div", x.table + ": policy " + (x.policy_version || "?") + ", version " + x.dataset_version +
          ", " + fmt(x.row_count) + " rows, written " + String(x.written_at || "").slice(0, 16).replace("T", " ")));
      });
      tr.appendChild(existing);
      body.appendChild(tr);
    });
    if (p.total_in_range > p.listed) {
      var more = el("tr");
      var td = el("td", (p.total_in_range - p.listed) + " more windows not listed");
      td.colSpan = 5;
      more.appendChild(td);
      body.appendChild(more);
    }
    $("start-button").disabled = !p.can_submit;
  }

  function doPreview() {
    say("");
    $("start-button").disabled = true;
    call("POST", api + "/backfills/preview", collect()).then(function (r) {
      if (r.status === 200) renderPreview(r.payload);
      else { show($("preview"), false); say(detail(r.payload, r.status), "error"); }
    }).catch(function (e) { say("preview failed: " + e, "error"); });
  }

  function doStart() {
    $("start-button").disabled = true;
    say("creating the backfill…");
    call("POST", api + "/backfills", collect()).then(function (r) {
      if (r.status === 200) {
        say("Backfill " + r.payload.backfill.id + " created: its windows are queued.", "ok");
        show($("preview"), false);
        watch(r.payload.backfill.id);
      } else {
        say("Refused: " + detail(r.payload, r.status), "error");
      }
    }).catch(function (e) { say("creating failed: " + e, "error"); });
  }

  /* ------------------------------------------------------------------ status */
  function renderSwitches(switches) {
    var list = $("switch-list");
    list.replaceChildren();
    (switches || []).forEach(function (s) { list.appendChild(el("li", s.description)); });
    show($("switches"), !!(switches && switches.length));
  }

  function lastWrite(writes) { return writes && writes.length ? writes[writes.length - 1] : null; }

  function renderStatus(s) {
    show($("status"), true);
    var b = s.backfill;
    $("status-id").textContent = "#" + b.id;
    var phase = $("status-phase");
    phase.textContent = s.phase;
    phase.className = "phase phase-" + s.phase.split(" ")[0];
    var conf = b.dag_run_conf || {};
    var states = Object.keys(s.states).map(function (k) { return s.states[k] + " " + k; }).join(", ");
    $("status-summary").textContent = day(b.from_date) + " to " + day(b.to_date) + " · " + (conf.semantics || "") +
      (conf.policy_version ? " under " + conf.policy_version : "") + " · \u201c" + (conf.reason || "") + "\u201d · " +
      (b.triggering_user_name ? "by " + b.triggering_user_name + " · " : "") + states;
    $("status-error").textContent = s.history_error || "";
    show($("status-error"), !!s.history_error);
    $("stop-button").disabled = s.finished;
    renderSwitches(s.switches);
    var body = $("status-table").querySelector("tbody");
    body.replaceChildren();
    s.windows.forEach(function (w) {
      var write = lastWrite(w.writes);
      var diff = write && write.diff;
      var tr = el("tr", null, "state-" + (w.state || "none") + (write ? " write-" + write.status : ""));
      tr.appendChild(el("td", w.label || day(w.logical_date)));
      var run = el("td");
      run.appendChild(runLink(w.run_id, w.state || (w.exception_reason ? "not run: " + w.exception_reason : "")));
      tr.appendChild(run);
      tr.appendChild(el("td", write ? write.status + (w.writes.length > 1 ? " (try " + write.try_number + ")" : "") : ""));
      tr.appendChild(el("td", write ? "policy " + (write.policy_version || "?") + (write.status === "written" ? " · version " + write.dataset_version : "") : ""));
      tr.appendChild(el("td", diff ? fmt(diff.rows_before) + " → " + fmt(diff.rows_after) : ""));
      tr.appendChild(el("td", diff ? "+" + diff.added + " / −" + diff.removed + " / ~" + diff.changed + " / =" + diff.unchanged : ""));
      var measures = el("td");
      if (diff && diff.measures) {
        Object.keys(diff.measures).forEach(function (name) {
          var m = diff.measures[name];
          var p = Math.max(decimals(m.before), decimals(m.after), decimals(m.delta));
          var delta = (Number(m.delta) > 0 ? "+" : "") + fmt(m.delta, p);
          measures.appendChild(el("div", name + " " + fmt(m.before, p) + " → " + fmt(m.after, p) + " (" + delta + ")"));
        });
      }
      tr.appendChild(measures);
      tr.appendChild(el("td", write && write.message ? String(write.message).split("\n")[0] : "", "message"));
      body.appendChild(tr);
    });
    return s.finished || (s.phase === "stopped" && !(s.states.running));
  }

  function poll() {
    if (current === null) return;
    call("GET", api + "/backfills/" + current).then(function (r) {
      if (r.status !== 200) { say(detail(r.payload, r.status), "error"); return; }
      var done = renderStatus(r.payload);
      if (!done) pollTimer = setTimeout(poll, POLL_MS);
    }).catch(function () { pollTimer = setTimeout(poll, POLL_MS * 2); });
  }

  function watch(id) {
    current = id;
    if (pollTimer) clearTimeout(pollTimer);
    poll();
  }

  function doStop() {
    if (current === null) return;
    $("stop-button").disabled = true;
    call("POST", api + "/backfills/" + current + "/stop", { reason: $("stop-reason").value.trim() }).then(function (r) {
      if (r.status === 200) {
        say("Stopped: the kill switch is on and the backfill is paused. Windows already writing refuse before commit.", "ok");
        renderStatus(r.payload);
        watch(current);
      } else {
        $("stop-button").disabled = false;
        say("Stop failed: " + detail(r.payload, r.status), "error");
      }
    }).catch(function (e) { $("stop-button").disabled = false; say("stop failed: " + e, "error"); });
  }

  function doClear() {
    call("POST", api + "/killswitch/clear", {}).then(function (r) {
      if (r.status === 200) { renderSwitches([]); say(r.payload.cleared ? "Kill switch cleared." : "No backfill kill switch was on.", "ok"); }
      else say("Clearing failed: " + detail(r.payload, r.status), "error");
    });
  }

  /* ------------------------------------------------------------------ wiring */
  $("preview-button").addEventListener("click", doPreview);
  $("start-button").addEventListener("click", doStart);
  $("stop-button").addEventListener("click", doStop);
  $("clear-switch").addEventListener("click", doClear);
  $("backfill-form").addEventListener("input", function () { $("start-button").disabled = true; });
  $("backfill-form").addEventListener("submit", function (e) { e.preventDefault(); doPreview(); });
  if (data.latest_backfill) watch(data.latest_backfill.id);
  document.documentElement.setAttribute("data-ready", "1");  /* the buttons work from here on */
})();
