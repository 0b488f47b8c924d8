/**
 * The dashboard's script, served as text (no build step, no network): it reads the event stream
 * (`snapshot`, then `patch` with whole sections) and draws workers, the queue charts, runs as graphs,
 * and a node's prompt and output on a click. Controls call the control API with the session cookie.
 * Plain ES2020 in a raw string: no backticks or dollar-brace inside.
 */
export const APP_JS = String.raw`'use strict';
(function () {
  var S = { hub: null, workers: [], queue: null, history: [], runs: [] };
  var rowsById = {}, lastHeard = 0, es = null, taskES = null, openTask = null, tasks = [];
  var $ = function (id) { return document.getElementById(id); };
  var esc = function (s) { return String(s == null ? '' : s).replace(/[&<>"']/g, function (c) { return { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' }[c]; }); };
  var ago = function (ms) { if (ms < 0) ms = 0; return ms < 1500 ? (ms / 1000).toFixed(1) + ' s' : ms < 120000 ? Math.round(ms / 1000) + ' s' : Math.round(ms / 60000) + ' min'; };
  var dur = function (s) { return s < 120 ? s + ' s' : s < 7200 ? Math.floor(s / 60) + ' min' : (s / 3600).toFixed(1) + ' h'; };

  function connect() {
    if (es) es.close();
    es = new EventSource('/dashboard/events');
    setConn('connecting');
    es.addEventListener('snapshot', function (e) {
      var d = JSON.parse(e.data);
      S.hub = d.hub; S.workers = d.workers || []; S.queue = d.queue; S.history = d.history || []; S.runs = d.runs || [];
      heard(); renderAll();
    });
    es.addEventListener('patch', function (e) {
      var d = JSON.parse(e.data);
      if (d.hub) S.hub = d.hub;
      if (d.workers) S.workers = d.workers;
      if (d.queue) S.queue = d.queue;
      if (d.runs) S.runs = d.runs;
      if (d.samples) { S.history = S.history.concat(d.samples).slice(-300); }
      heard();
      if (d.hub) renderHub();
      if (d.workers) renderWorkers();
      if (d.queue || d.samples) renderQueue();
      if (d.runs) renderRuns();
    });
    es.addEventListener('ping', heard);
    es.onopen = function () { setConn('live'); };
    es.onerror = function () { setConn(es.readyState === 2 ? 'lost' : 'reconnecting'); if (es.readyState === 2) setTimeout(connect, 2000); };
  }
  function heard() { lastHeard = Date.now(); setConn('live'); }
  function setConn(s) { var c = $('conn'); c.dataset.conn = s === 'live' ? 'live' : s === 'lost' || s === 'reconnecting' ? 'lost' : 'connecting'; c.textContent = s; }

  function renderAll() { renderHub(); renderQueue(); renderWorkers(); renderRuns(); }

  function renderHub() {
    var h = S.hub; if (!h) return;
    var m = $('mode'); m.textContent = h.mode; m.dataset.mode = h.mode;
    $('coordinator').textContent = h.coordinator;
    $('hubname').textContent = h.name;
    $('hubaddr').textContent = h.address ? '(' + h.address.host + ':' + h.address.port + ', pid ' + h.pid + ')' : '';
    tick();
  }
  function tick() {
    if (S.hub) $('uptime').textContent = dur(Math.max(0, Math.round((Date.now() - S.hub.started_at) / 1000)));
    $('heard').textContent = lastHeard ? 'hub last heard ' + ago(Date.now() - lastHeard) + ' ago' : 'connecting…';
    var rows = document.querySelectorAll('#workers tbody tr');
    for (var i = 0; i < rows.length; i++) { var t = Number(rows[i].dataset.seen); var c = rows[i].querySelector('.heard'); if (c && t) c.textContent = ago(Date.now() - t); }
  }

  function renderQueue() {
    var q = S.queue; if (!q) return;
    $('q-queued').textContent = q.queued; $('q-leased').textContent = q.leased; $('q-done').textContent = q.done; $('q-failed').textContent = q.failed;
    $('q-p50').textContent = q.dispatch_p50_ms.toFixed(2); $('q-p99').textContent = q.dispatch_p99_ms.toFixed(2); $('q-tps').textContent = q.tps;
    var h = S.history;
    chart($('chart-depth'), h, [[1, 'var(--queued)'], [2, 'var(--running)']]);
    chart($('chart-done'), h, [[3, 'var(--done)'], [4, 'var(--failed)']]);
    chart($('chart-tps'), h, [[5, 'var(--tps)']]);
  }
  function chart(svg, h, series) {
    var W = 300, H = 80, n = h.length, max = 1;
    for (var i = 0; i < n; i++) for (var j = 0; j < series.length; j++) max = Math.max(max, h[i][series[j][0]]);
    var out = '';
    if (n > 1) {
      var t0 = h[0][0], t1 = Math.max(t0 + 1, h[n - 1][0]);
      for (var s = 0; s < series.length; s++) {
        var pts = [];
        for (var k = 0; k < n; k++) pts.push(((h[k][0] - t0) / (t1 - t0) * (W - 4) + 2).toFixed(1) + ',' + (H - 4 - h[k][series[s][0]] / max * (H - 16)).toFixed(1));
        out += '<polyline fill="none" stroke="' + series[s][1] + '" stroke-width="1.6" vector-effect="non-scaling-stroke" points="' + pts.join(' ') + '"/>';
      }
    }
    svg.innerHTML = out;
    // The scale as text beside the chart: text inside a stretched SVG is stretched too.
    var m = svg.parentNode.querySelector('.max'); if (m) m.textContent = n > 1 ? 'max ' + fmtNum(max) : '';
  }
  function fmtNum(n) { return n >= 10000 ? Math.round(n / 1000) + 'k' : String(Math.round(n * 10) / 10); }

  function renderWorkers() {
    var ws = S.workers, live = 0, dead = 0, busy = 0, tb = document.querySelector('#workers tbody'), seen = {};
    var none = tb.querySelector('tr.none'); if (none) none.remove();
    for (var i = 0; i < ws.length; i++) {
      var w = ws[i];
      var state = w.state === 'dead' ? (w.supervised ? 'dead · respawning' : 'dead') : w.state;
      if (w.state === 'dead') dead++; else { live++; if (w.tasks.length) busy++; }
      // A run's task ids differ at their end (the node): show that end.
      var task = w.tasks.length ? '<a href="#" data-task="' + esc(w.tasks[0]) + '" title="' + esc(w.tasks[0]) + '">' + esc(w.tasks[0].length > 26 ? '…' + w.tasks[0].slice(-25) : w.tasks[0]) + '</a>' + (w.tasks.length > 1 ? ' +' + (w.tasks.length - 1) : '') : '';
      var tr = rowsById[w.id];
      if (!tr) { tr = rowsById[w.id] = document.createElement('tr'); tr.dataset.worker = w.id; }
      if (tb.children[i] !== tr) tb.insertBefore(tr, tb.children[i] || null);
      seen[w.id] = true;
      tr.dataset.state = w.state; tr.dataset.respawns = w.respawns; tr.dataset.seen = w.state === 'dead' ? w.dead_since : w.last_seen;
      set(tr, '<td>' + esc(w.id) + (w.respawns ? '<span class="tag" title="came back after dropping out">respawned ×' + w.respawns + '</span>' : '') + '</td>'
        + '<td><span class="state ' + esc(w.state) + '" title="the worker says: ' + esc(w.agent_state) + '">' + esc(state) + '</span></td>'
        + '<td>' + esc(w.role || '-') + (w.role_pending ? ' <span class="muted">→ ' + esc(w.role_pending) + '</span>' : '') + '</td>'
        + '<td>' + esc(w.driver) + '</td><td>' + esc(w.host) + (w.pid ? ' <span class="muted">' + w.pid + '</span>' : '') + '</td>'
        + '<td>' + task + '</td><td>' + w.tps + '</td><td>' + w.done + '</td><td class="heard"></td>');
    }
    for (var id in rowsById) if (!seen[id]) { rowsById[id].remove(); delete rowsById[id]; }
    if (!ws.length) tb.innerHTML = '<tr class="none"><td colspan="9" class="muted">no workers connected</td></tr>';
    $('w-summary').textContent = live + ' connected, ' + busy + ' busy' + (dead ? ', ' + dead + ' dead' : '');
    var sel = $('role-worker'), keep = sel.value, ids = ws.filter(function (w) { return w.state !== 'dead'; }).map(function (w) { return w.id; });
    if (sel.dataset.ids !== ids.join(',')) {
      sel.innerHTML = ids.map(function (id) { return '<option>' + esc(id) + '</option>'; }).join('');
      sel.dataset.ids = ids.join(',');
      if (ids.indexOf(keep) >= 0) sel.value = keep;
    }
    tick();
  }

  // A run's verdict as a colour: good, bad, stopped by someone; anything else (no consensus, …) amber.
  var VERDICT = { done: 'done', approved: 'done', passed: 'done', winner: 'done', scored: 'done', failed: 'failed', fail: 'failed', aborted: 'failed', rejected: 'failed', cancelled: 'cancelled', stopped: 'cancelled' };
  var COLOR = { queued: '#cfd8dc', running: '#64b5f6', done: '#66bb6a', failed: '#ef5350', cancelled: '#90a4ae' };
  // Each run's head and graph are replaced only when their text changed: a node keeps its element
  // (and a click on it lands) while nothing about it changes.
  function renderRuns() {
    var el = $('runs');
    if (!S.runs.length) return;
    var seen = {};
    var empty = el.querySelector('p.muted'); if (empty) empty.remove();
    S.runs.forEach(function (r, i) {
      seen[r.run] = true;
      var card = el.querySelector('.run[data-run="' + cssEsc(r.run) + '"]');
      if (!card) {
        card = document.createElement('div'); card.className = 'run'; card.dataset.run = r.run;
        card.innerHTML = '<div class="run-head"><span class="run-info"></span><span class="run-act"></span></div><div class="graph" data-run="' + esc(r.run) + '"></div>';
      }
      if (el.children[i] !== card) el.insertBefore(card, el.children[i] || null);
      card.dataset.state = r.state; card.dataset.verdict = r.verdict || '';
      set(card.querySelector('.run-info'), runHead(r));
      set(card.querySelector('.run-act'), runAct(r));
      set(card.querySelector('.graph'), graph(r));
    });
    Array.prototype.slice.call(el.querySelectorAll('.run')).forEach(function (c) { if (!seen[c.dataset.run]) c.remove(); });
  }
  function set(node, html) { if (node._html !== html) { node.innerHTML = html; node._html = html; } }
  function cssEsc(s) { return String(s).replace(/["\\]/g, '\\$&'); }
  function runHead(r) {
    // The badge says how the run went as its nodes did (running, done, failed, cancelled); a verdict
    // the topology reached (a guard's "fail", "no consensus") is shown beside it, not as a failure.
    var status = runStatus(r), v = r.verdict && r.verdict !== status && VERDICT[r.verdict] !== status ? r.verdict : '';
    var badge = '<span class="state ' + status + '" data-status="' + status + '">' + status + '</span>'
      + (v ? '<span class="state verdict ' + (VERDICT[v] === 'done' ? 'done' : 'warn') + '" title="the topology\'s verdict' + (r.reason ? ': ' + esc(r.reason) : '') + '">verdict: ' + esc(v) + '</span>' : '');
    return '<b>' + esc(r.experiment) + '</b><span class="muted">' + esc(r.topology) + ' · ' + esc(r.run) + '</span>' + badge
      + '<span class="grow muted">' + r.done + '/' + r.submitted + ' nodes' + (r.failed ? ', ' + r.failed + ' failed' : '') + ' · ' + r.tokens_out + ' tokens · ' + r.tokens_per_s + ' tok/s · ' + (r.elapsed_ms / 1000).toFixed(1) + ' s' + (r.reason ? ' · ' + esc(r.reason) : '') + '</span>';
  }
  function runStatus(r) {
    if (r.state === 'running') return 'running';
    if (r.verdict === 'cancelled' || r.verdict === 'stopped' || r.nodes.some(function (n) { return n.state === 'cancelled'; })) return 'cancelled';
    if (r.failed > 0 || r.nodes.some(function (n) { return n.state === 'failed'; })) return 'failed';
    return 'done';
  }
  function runAct(r) {
    return r.state === 'running' ? '<button class="danger cancel-run" data-run="' + esc(r.run) + '">Cancel run</button>'
      : r.report ? '<a class="report" href="' + esc(r.report) + '" target="_blank" rel="noopener">report.html</a>' : '<span class="muted">report pending…</span>';
  }
  function graph(r) {
    var nodes = r.nodes; if (!nodes.length) return '<p class="muted">no node submitted yet</p>';
    var byId = {}, depth = {};
    nodes.forEach(function (n) { byId[n.node] = n; });
    function d(n) {
      if (depth[n.node] !== undefined) return depth[n.node];
      depth[n.node] = 0;
      var m = 0; n.after.forEach(function (a) { if (byId[a]) m = Math.max(m, d(byId[a]) + 1); });
      return (depth[n.node] = m);
    }
    var cols = [];
    nodes.forEach(function (n) { var k = d(n); (cols[k] = cols[k] || []).push(n); });
    var prefix = common(nodes), longest = 0;
    nodes.forEach(function (n) { longest = Math.max(longest, n.node.length - prefix.length); });
    // Wide enough for the longest name (up to 56 characters; the full name is on hover and in the drawer).
    var LABEL = Math.max(22, Math.min(56, longest)), W = Math.max(150, 14 + LABEL * 6.6), H = 34, GX = 36, GY = 8, pos = {}, body = '', rows = 0, x = 10;
    cols.forEach(function (col) {
      if (!col) return;
      col.sort(function (a, b) { return a.node.localeCompare(b.node, 'en', { numeric: true }); });
      rows = Math.max(rows, col.length);
      col.forEach(function (n, i) {
        var y = 10 + i * (H + GY);
        pos[n.node] = { x: x, y: y };
        var sub = [n.state, n.worker, n.verdict, n.ms !== undefined ? n.ms + ' ms' : ''].filter(Boolean).join(' · ');
        body += '<g class="node" data-node="' + esc(n.node) + '" data-task="' + esc(n.task) + '" data-state="' + esc(n.state) + '"><title>' + esc(n.node + ' (' + n.role + '): ' + sub) + '</title>'
          + '<rect x="' + x + '" y="' + y + '" width="' + W + '" height="' + H + '" rx="5" fill="' + (COLOR[n.state] || '#ddd') + '"/>'
          + '<text x="' + (x + 7) + '" y="' + (y + 14) + '" font-size="11" font-weight="600">' + esc(clip(n.node.slice(prefix.length), LABEL)) + '</text>'
          + '<text x="' + (x + 7) + '" y="' + (y + 27) + '" font-size="10" fill="#263238">' + esc(clip(sub, Math.round(LABEL * 1.15))) + '</text></g>';
      });
      x += W + GX;
    });
    var edges = '';
    nodes.forEach(function (n) {
      var to = pos[n.node];
      n.after.forEach(function (a) {
        var f = pos[a]; if (!f || !to) return;
        var x1 = f.x + W, y1 = f.y + H / 2, x2 = to.x, y2 = to.y + H / 2, mx = (x1 + x2) / 2;
        edges += '<path d="M' + x1 + ' ' + y1 + 'C' + mx + ' ' + y1 + ' ' + mx + ' ' + y2 + ' ' + x2 + ' ' + y2 + '" fill="none" stroke="#b0bec5"/>';
      });
    });
    var w = x - GX + 10, h = 20 + rows * (H + GY) - GY;
    return '<svg width="' + w + '" height="' + h + '" viewBox="0 0 ' + w + ' ' + h + '" font-family="system-ui,sans-serif">' + edges + body + '</svg>'
      + (r.more ? '<p class="muted">+' + r.more + ' more nodes (see the report)</p>' : '');
  }
  function common(nodes) {
    var p = nodes[0].node.slice(0, nodes[0].node.lastIndexOf('/') + 1);
    nodes.forEach(function (n) { while (p && n.node.indexOf(p) !== 0) p = p.slice(0, p.slice(0, -1).lastIndexOf('/') + 1); });
    return p;
  }
  function clip(s, n) { return s.length > n ? s.slice(0, n - 1) + '…' : s; }

  // A node's (or task's) prompt and output: its own small stream, closed with the drawer.
  function openNode(task, title) {
    if (taskES) taskES.close();
    openTask = task;
    $('drawer').hidden = false;
    $('d-title').textContent = title || task;
    $('d-meta').textContent = task; $('d-prompt').textContent = '…'; $('d-output').textContent = ''; setState('');
    taskES = new EventSource('/dashboard/task?id=' + encodeURIComponent(task));
    var mine = taskES;
    taskES.addEventListener('task', function (e) {
      var d = JSON.parse(e.data);
      $('d-prompt').textContent = d.prompt;
      var m = d.meta || {};
      $('d-meta').textContent = [task, m.role || d.role ? 'role ' + (m.role || d.role) : '', d.worker ? 'worker ' + d.worker : '', 'attempts ' + d.attempts].filter(Boolean).join(' · ');
      setState(d.state);
    });
    taskES.addEventListener('text', function (e) { var d = JSON.parse(e.data); $('d-output').textContent += d.append; setState('running'); });
    taskES.addEventListener('reset', function () { $('d-output').textContent = ''; setState('queued'); });
    taskES.addEventListener('done', function (e) {
      var d = JSON.parse(e.data);
      mine.close();
      $('d-output').textContent = d.state === 'done' ? d.text : (d.error ? d.error.code + ': ' + d.error.msg : 'failed');
      setState(d.state);
      trackState(task, d.state);
    });
    taskES.onerror = function () { if (mine.readyState === 2) setState('unavailable'); };
  }
  function setState(s) { var e = $('d-state'); e.textContent = s; e.className = 'state ' + s; }
  function closeDrawer() { if (taskES) taskES.close(); taskES = null; openTask = null; $('drawer').hidden = true; }

  // Tasks submitted from this page: each follows its own task stream until it is done or failed.
  function trackTask(id) {
    tasks.unshift({ id: id, state: 'queued' });
    tasks = tasks.slice(0, 20);
    renderTasks();
    var t = new EventSource('/dashboard/task?id=' + encodeURIComponent(id));
    t.addEventListener('task', function (e) { trackState(id, JSON.parse(e.data).state); });
    t.addEventListener('text', function () { trackState(id, 'running'); });
    t.addEventListener('done', function (e) {
      t.close();
      var d = JSON.parse(e.data);
      for (var i = 0; i < tasks.length; i++) if (tasks[i].id === id) tasks[i].out = d.state === 'done' ? d.text : (d.error ? d.error.code + ': ' + d.error.msg : 'failed');
      trackState(id, d.state);
    });
    t.onerror = function () { if (t.readyState === 2) trackState(id, 'unknown'); };
  }
  function trackState(id, state) {
    for (var i = 0; i < tasks.length; i++) if (tasks[i].id === id && tasks[i].state !== 'done' && tasks[i].state !== 'failed') tasks[i].state = state === 'leased' ? 'running' : state;
    renderTasks();
  }
  function renderTasks() {
    $('tasks').innerHTML = tasks.map(function (t) {
      return '<li data-task="' + esc(t.id) + '" data-state="' + esc(t.state) + '" title="click: prompt and output"><span class="state ' + esc(t.state) + '">' + esc(t.state) + '</span><code>' + esc(t.id) + '</code>'
        + (t.out !== undefined ? '<span class="out">' + esc(clip(t.out, 400)) + '</span>' : '') + '</li>';
    }).join('');
  }

  function api(method, path, body) {
    return fetch(path, { method: method, headers: { 'content-type': 'application/json', 'x-swarm-dashboard': '1' }, body: body === undefined ? undefined : JSON.stringify(body), credentials: 'same-origin' })
      .then(function (r) { return r.json().catch(function () { return {}; }).then(function (j) { if (!r.ok) throw new Error((j.code || r.status) + ': ' + (j.msg || r.statusText)); return j; }); });
  }
  function toast(msg, err) { var t = $('toast'); t.textContent = msg; t.className = err ? 'error' : ''; t.hidden = false; clearTimeout(toast.timer); toast.timer = setTimeout(function () { t.hidden = true; }, 3500); }

  document.addEventListener('DOMContentLoaded', function () {
    $('submit-form').addEventListener('submit', function (e) {
      e.preventDefault();
      var prompt = $('submit-prompt').value, role = $('submit-role').value.trim(), task = { prompt: prompt };
      if (role) task.role = role;
      api('POST', '/tasks', task).then(function (r) {
        var id = r.accepted[0].id; $('submit-prompt').value = ''; trackTask(id); toast('task ' + id + ' accepted');
      }).catch(function (err) { toast(err.message, true); });
    });
    $('role-form').addEventListener('submit', function (e) {
      e.preventDefault();
      var id = $('role-worker').value, role = $('role-name').value.trim();
      if (!id || !role) return;
      api('POST', '/workers/' + encodeURIComponent(id) + '/role', { role: role }).then(function () { toast(id + ': role ' + role + ' sent'); $('role-name').value = ''; })
        .catch(function (err) { toast(err.message, true); });
    });
    document.body.addEventListener('click', function (e) {
      var el = e.target.closest ? e.target : e.target.parentNode;
      var c = el.closest('.cancel-run');
      if (c) {
        c.disabled = true; c.textContent = 'cancelling…';
        api('POST', '/runs/' + encodeURIComponent(c.dataset.run) + '/cancel', { reason: 'cancelled from the dashboard' })
          .then(function () { toast('run ' + c.dataset.run + ' cancelled'); }).catch(function (err) { c.disabled = false; c.textContent = 'Cancel run'; toast(err.message, true); });
        return;
      }
      var n = el.closest('g.node'); if (n) { openNode(n.dataset.task, n.dataset.node); return; }
      var t = el.closest('[data-task]'); if (t) { e.preventDefault(); openNode(t.dataset.task); }
    });
    $('d-close').addEventListener('click', closeDrawer);
    document.addEventListener('keydown', function (e) { if (e.key === 'Escape') closeDrawer(); });
    setInterval(tick, 1000);
    connect();
  });
})();
`;
