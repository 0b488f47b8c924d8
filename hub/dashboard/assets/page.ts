/** The dashboard's page: static markup; app.js fills it from the event stream. */
export function pageHtml(): string {
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1">
<title>swarm dashboard</title><link rel="icon" href="data:,"><link rel="stylesheet" href="/dashboard/app.css">
<script src="/dashboard/app.js" defer></script></head>
<body>
<header>
  <span class="brand">Mittelö swarm</span>
  <span id="mode" class="badge" data-mode="">…</span>
  <span class="kv">coordinator <b id="coordinator">…</b></span>
  <span class="kv">hub <b id="hubname">…</b> <span id="hubaddr" class="muted"></span></span>
  <span class="kv">up <b id="uptime">…</b></span>
  <span class="kv" id="heard">connecting…</span>
  <span id="conn" class="conn" data-conn="connecting">connecting</span>
</header>
<main>
  <section id="queue-panel" class="panel">
    <h2>Queue</h2>
    <div class="stats">
      <div><b id="q-queued">0</b><span>queued</span></div>
      <div><b id="q-leased">0</b><span>running</span></div>
      <div><b id="q-done">0</b><span>done</span></div>
      <div><b id="q-failed">0</b><span>failed</span></div>
      <div><b id="q-p50">0</b><span>dispatch p50, ms</span></div>
      <div><b id="q-p99">0</b><span>dispatch p99, ms</span></div>
      <div><b id="q-tps">0</b><span>tokens/s</span></div>
    </div>
    <div class="charts">
      <figure><figcaption>waiting &amp; running <i class="k queued"></i>queued <i class="k leased"></i>running<span class="max"></span></figcaption><svg id="chart-depth" viewBox="0 0 300 80" preserveAspectRatio="none"></svg></figure>
      <figure><figcaption>finished <i class="k done"></i>done <i class="k failed"></i>failed<span class="max"></span></figcaption><svg id="chart-done" viewBox="0 0 300 80" preserveAspectRatio="none"></svg></figure>
      <figure><figcaption>tokens/s <i class="k tps"></i><span class="max"></span></figcaption><svg id="chart-tps" viewBox="0 0 300 80" preserveAspectRatio="none"></svg></figure>
    </div>
    <form id="submit-form" autocomplete="off">
      <textarea id="submit-prompt" rows="2" placeholder="a prompt for one task" required maxlength="100000"></textarea>
      <input id="submit-role" placeholder="role (optional)" maxlength="256">
      <button type="submit" id="submit-btn">Submit task</button>
    </form>
    <ul id="tasks" class="tasks"></ul>
  </section>
  <section id="workers-panel" class="panel">
    <h2>Workers <span id="w-summary" class="muted"></span></h2>
    <form id="role-form" autocomplete="off">
      <label>change role of <select id="role-worker"></select></label>
      <input id="role-name" placeholder="new role" required maxlength="256">
      <button type="submit" id="role-btn">Assign</button>
    </form>
    <table id="workers"><thead><tr><th>worker</th><th>state</th><th>role</th><th>driver</th><th>host</th><th>task</th><th>tok/s</th><th>done</th><th>heard</th></tr></thead><tbody></tbody></table>
  </section>
  <section id="runs-panel" class="panel">
    <h2>Runs</h2>
    <div id="runs"><p class="muted">No topology run on this hub yet (<code>swarm run experiment.yaml</code>).</p></div>
  </section>
</main>
<aside id="drawer" hidden>
  <div class="drawer-head"><b id="d-title"></b><button id="d-close" type="button" aria-label="close">×</button></div>
  <div id="d-meta" class="muted"></div>
  <h3>Prompt</h3><pre id="d-prompt"></pre>
  <h3>Output <span id="d-state" class="state"></span></h3><pre id="d-output"></pre>
</aside>
<div id="toast" hidden></div>
</body></html>
`;
}

export const PAGE_CSS = `
:root{--bg:#f5f6f8;--panel:#fff;--ink:#1d2330;--muted:#6b7280;--line:#e5e7eb;--queued:#b0bec5;--running:#42a5f5;--done:#66bb6a;--failed:#ef5350;--cancelled:#90a4ae;--dead:#c62828;--tps:#ab47bc}
*{box-sizing:border-box}
body{margin:0;font:13px/1.4 system-ui,-apple-system,"Segoe UI",sans-serif;background:var(--bg);color:var(--ink)}
header{display:flex;flex-wrap:wrap;gap:14px;align-items:center;padding:10px 18px;background:#1d2330;color:#e5e7eb}
header b{color:#fff}.brand{font-weight:700;font-size:15px;margin-right:6px}.kv{white-space:nowrap}
.badge{padding:2px 10px;border-radius:10px;background:#455a64;color:#fff;font-weight:600}
.badge[data-mode=star]{background:#2e7d32}.badge[data-mode=gossip]{background:#ef6c00}.badge[data-mode=reconciling]{background:#f9a825;color:#222}
.conn{margin-left:auto;padding:2px 8px;border-radius:8px;font-size:12px;background:#455a64}
.conn[data-conn=live]{background:#1b5e20}.conn[data-conn=lost]{background:#b71c1c}
main{display:grid;grid-template-columns:minmax(360px,1fr) minmax(520px,1.5fr);gap:14px;padding:14px 18px}
.panel{background:var(--panel);border:1px solid var(--line);border-radius:8px;padding:12px 14px;min-width:0}
#runs-panel{grid-column:1/-1}
h2{font-size:14px;margin:0 0 10px}h3{font-size:13px;margin:14px 0 6px}
.muted{color:var(--muted);font-weight:normal}
.stats{display:grid;grid-template-columns:repeat(4,1fr);gap:8px;margin-bottom:12px}
.stats div{background:var(--bg);border-radius:6px;padding:6px 8px;min-width:0}.stats b{display:block;font-size:17px}.stats span{color:var(--muted);font-size:11px;white-space:nowrap}
.charts{display:grid;grid-template-columns:1fr;gap:10px}
figure{margin:0}figcaption{display:flex;align-items:center;font-size:11px;color:var(--muted);margin-bottom:3px;white-space:nowrap}
figcaption .max{margin-left:auto;font-variant-numeric:tabular-nums}
.charts svg{width:100%;height:64px;background:var(--bg);border-radius:4px;display:block}
i.k{display:inline-block;width:9px;height:9px;border-radius:2px;margin:0 3px 0 6px;vertical-align:-1px}
i.k.queued{background:var(--queued)}i.k.leased{background:var(--running)}i.k.done{background:var(--done)}i.k.failed{background:var(--failed)}i.k.tps{background:var(--tps)}
form{display:flex;gap:6px;align-items:center;margin:12px 0 6px;flex-wrap:wrap}
textarea,input,select{font:inherit;padding:5px 7px;border:1px solid #cfd4dc;border-radius:5px;background:#fff}
textarea{flex:1 1 240px;resize:vertical;min-height:34px}
button{font:inherit;padding:5px 12px;border:0;border-radius:5px;background:#1e63d6;color:#fff;cursor:pointer}
button:hover{background:#174fb0}button.danger{background:#c62828}button.danger:hover{background:#a11f1f}
.tasks{list-style:none;margin:0;padding:0;max-height:260px;overflow:auto}
.tasks li{display:flex;gap:8px;align-items:center;padding:3px 0;border-bottom:1px solid var(--line);cursor:pointer}
.tasks li code{flex:1;overflow:hidden;text-overflow:ellipsis;white-space:nowrap}
.tasks li{flex-wrap:wrap}.tasks li .out{flex-basis:100%;white-space:pre-wrap;font-size:12px;color:#37474f;max-height:4.5em;overflow:hidden}
table{width:100%;border-collapse:collapse;font-size:12px}
th{text-align:left;color:var(--muted);font-weight:600;border-bottom:1px solid var(--line);padding:4px 6px}
td{border-bottom:1px solid #f0f1f3;padding:3px 6px;white-space:nowrap;max-width:180px;overflow:hidden;text-overflow:ellipsis}
tr[data-state=dead] td{color:var(--dead);background:#fff5f5}
.state{display:inline-block;padding:0 7px;border-radius:8px;font-size:11px;font-weight:600;background:#eceff1;color:#37474f}
.state.IDLE,.state.idle{background:#e8f5e9;color:#2e7d32}.state.BUSY,.state.busy,.state.running,.state.leased{background:#e3f2fd;color:#1565c0}
.state.dead,.state.failed{background:#ffebee;color:#c62828}.state.done{background:#e8f5e9;color:#2e7d32}.state.queued{background:#eceff1;color:#455a64}
.state.cancelled{background:#eceff1;color:#546e7a}.state.warn{background:#fff3e0;color:#e65100}
.tag{font-size:10px;color:#6a1b9a;margin-left:4px}
.run{border:1px solid var(--line);border-radius:6px;padding:10px;margin-bottom:10px}
.run-head{display:flex;gap:10px;align-items:center;flex-wrap:wrap;margin-bottom:6px}
.run-head .run-info{display:flex;gap:10px;align-items:center;flex-wrap:wrap;flex:1}.run-head .grow{flex:1}
.graph{overflow:auto;max-height:420px}
.graph g.node{cursor:pointer}.graph g.node:hover rect{stroke:#1d2330;stroke-width:2}
.graph g.node[data-state=running] rect{animation:pulse 1.2s ease-in-out infinite}
@keyframes pulse{50%{opacity:.55}}
a{color:#1e63d6}
#drawer{position:fixed;top:0;right:0;bottom:0;width:min(560px,92vw);background:#fff;border-left:1px solid var(--line);box-shadow:-6px 0 18px rgba(0,0,0,.08);padding:12px 16px;overflow:auto;z-index:5}
.drawer-head{display:flex;align-items:center;gap:8px}.drawer-head b{flex:1;word-break:break-all}
#d-close{background:transparent;color:var(--ink);font-size:20px;padding:0 8px}
pre{background:var(--bg);border-radius:5px;padding:8px;white-space:pre-wrap;word-break:break-word;max-height:38vh;overflow:auto;margin:0;font-size:12px}
#toast{position:fixed;bottom:16px;left:50%;transform:translateX(-50%);background:#1d2330;color:#fff;padding:8px 14px;border-radius:6px;z-index:6}
#toast.error{background:#b71c1c}
@media (max-width:980px){main{grid-template-columns:1fr}}
`;
