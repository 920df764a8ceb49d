// The ledger console: plain modern JavaScript, no build step, no library
// (docs/console.md says why). Views are drawn as HTML strings in one
// assignment each; the consumer tree is a virtual list, so a 1,000-leaf
// tree draws well under a second.

const TOKEN_KEY = 'ledger.token';
const app = document.getElementById('app');
const crumbs = document.getElementById('crumbs');
const liveBadge = document.getElementById('live');

// ---- data calls, all with the bearer token ----------------------------

let tokenAsked = null; // the pending token prompt, shared by concurrent calls

function token() { return sessionStorage.getItem(TOKEN_KEY) || ''; }

function headers() {
  const t = token();
  return t ? { Authorization: 'Bearer ' + t } : {};
}

// askToken shows the token dialog once for every caller waiting on it.
function askToken(why) {
  if (tokenAsked) return tokenAsked;
  const dlg = document.getElementById('token-dialog');
  const input = document.getElementById('token-input');
  document.getElementById('token-why').textContent = why ||
    'This ledger asks for a token with the read scope. It is kept in this tab only (sessionStorage).';
  input.value = token();
  tokenAsked = new Promise((resolve) => {
    const done = (ok) => {
      dlg.close();
      tokenAsked = null;
      if (ok) sessionStorage.setItem(TOKEN_KEY, input.value.trim());
      resolve(ok);
    };
    document.getElementById('token-form').onsubmit = (e) => { e.preventDefault(); done(true); };
    document.getElementById('token-cancel').onclick = () => done(false);
    dlg.showModal();
    input.focus();
  });
  return tokenAsked;
}

class HTTPError extends Error {
  constructor(status, body) {
    super((body && body.error) || `HTTP ${status}`);
    this.status = status;
  }
}

// api GETs a data endpoint; on 401/403 it asks for a token and retries;
// on 503 busy (the ledger runs as many forks of a history as it may: a
// time travel folds the pool's log) it waits and retries a few times.
async function api(path, { signal } = {}) {
  for (let tries = 0, busy = 0; ; tries++) {
    const sent = token();
    const resp = await fetch(path, { headers: headers(), signal });
    if ((resp.status === 401 || resp.status === 403) && tries < 3) {
      if (token() !== sent) continue; // another call got a new token meanwhile
      const why = resp.status === 401 ? 'This ledger needs a bearer token to read.' : 'This token may not read here; give one with the read scope.';
      if (await askToken(why)) continue;
    }
    const body = await resp.json().catch(() => null);
    if (resp.status === 503 && body && body.reason === 'busy' && busy++ < 20) {
      await new Promise((r) => setTimeout(r, 150));
      continue;
    }
    if (!resp.ok) throw new HTTPError(resp.status, body);
    return body;
  }
}

// apiPost POSTs JSON to an endpoint that only reads (a what-if), with the
// same token handling as api.
async function apiPost(path, payload) {
  for (let tries = 0; ; tries++) {
    const sent = token();
    const resp = await fetch(path, { method: 'POST', headers: { ...headers(), 'Content-Type': 'application/json' }, body: JSON.stringify(payload) });
    if ((resp.status === 401 || resp.status === 403) && tries < 3) {
      if (token() !== sent) continue;
      const why = resp.status === 401 ? 'This ledger needs a bearer token to read.' : 'This token may not read here; give one with the read scope.';
      if (await askToken(why)) continue;
    }
    const body = await resp.json().catch(() => null);
    if (!resp.ok) throw new HTTPError(resp.status, body);
    return body;
  }
}

// ---- helpers ----------------------------------------------------------

const esc = (s) => String(s ?? '').replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' }[c]));
const fmtTime = (t) => (t ? new Date(t).toLocaleString(undefined, { hour12: false }) : '');
const enc = encodeURIComponent;

// color gives each consumer a stable color from its path.
function color(path) {
  let h = 0;
  for (let i = 0; i < path.length; i++) h = (h * 31 + path.charCodeAt(i)) >>> 0;
  return `hsl(${h % 360} 60% 55%)`;
}

function parseHash() {
  const [path, query] = location.hash.replace(/^#/, '').split('?');
  return { parts: (path || '/').split('/').filter(Boolean).map(decodeURIComponent), query: new URLSearchParams(query || '') };
}

function setCrumbs(html) { crumbs.innerHTML = html; }

function showError(err) {
  app.innerHTML = `<p class="error">${esc(err.message)}</p>`;
}

// ---- live updates -----------------------------------------------------

const liveListeners = new Set();

// follow reads the server-sent events of /v1/live with fetch (EventSource
// cannot send the Authorization header) and reconnects when it breaks.
async function follow() {
  for (let wait = 500; ; wait = Math.min(wait * 2, 10000)) {
    try {
      const sent = token();
      const resp = await fetch('/v1/live', { headers: { ...headers(), Accept: 'text/event-stream' } });
      if (resp.status === 401 || resp.status === 403) {
        liveBadge.className = 'live off';
        if (token() === sent && !(await askToken('The live stream needs a bearer token with the read scope.'))) {
          await new Promise((r) => setTimeout(r, wait));
        }
        continue;
      }
      if (!resp.ok || !resp.body) throw new Error(`live: HTTP ${resp.status}`);
      liveBadge.className = 'live on';
      wait = 500;
      const reader = resp.body.pipeThrough(new TextDecoderStream()).getReader();
      let buf = '';
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buf += value;
        let i;
        while ((i = buf.indexOf('\n\n')) >= 0) {
          dispatch(buf.slice(0, i));
          buf = buf.slice(i + 2);
        }
      }
    } catch (e) {
      console.warn('live stream', e);
    }
    liveBadge.className = 'live off';
    await new Promise((r) => setTimeout(r, wait));
  }
}

function dispatch(block) {
  let event = 'message';
  let data = '';
  for (const line of block.split('\n')) {
    if (line.startsWith('event:')) event = line.slice(6).trim();
    else if (line.startsWith('data:')) data += line.slice(5).trim();
  }
  if (event !== 'checkpoint' || !data) return;
  const ev = JSON.parse(data);
  for (const f of liveListeners) f(ev);
}

// ---- pools list -------------------------------------------------------

// The list is paged (a site may hold thousands of pools): a page of
// PAGE pools in name order from the cursor in the address (#/?after=P),
// optionally only the names starting with a prefix (#/?prefix=gpu-).
// "Next" follows the cursor the server gives; the browser's Back goes to
// the previous page.
const PAGE = 100;

async function poolsView(query) {
  setCrumbs('pools');
  const after = query.get('after') || '';
  const prefix = query.get('prefix') || '';
  const page = (p) => {
    const q = new URLSearchParams();
    if (p.after) q.set('after', p.after);
    if (p.prefix) q.set('prefix', p.prefix);
    const s = q.toString();
    return s ? '#/?' + s : '#/';
  };
  const draw = async () => {
    const q = new URLSearchParams({ limit: String(PAGE) });
    if (after) q.set('after', after);
    if (prefix) q.set('prefix', prefix);
    const res = await api('/v1/pools?' + q);
    const pools = res.pools;
    if (!pools.length && !after && !prefix) {
      app.innerHTML = '<p class="muted">No pool in the projection yet. Publish a plan and a host (see README).</p>';
      return;
    }
    const rows = pools.map((p) => `<tr data-pool="${esc(p.pool)}">
      <td><a href="#/pool/${enc(p.pool)}">${esc(p.pool)}</a></td>
      <td class="num">${p.capacity}</td>
      <td class="num">${p.hosts_up} <span class="muted">/ ${p.hosts_down} down</span></td>
      <td class="num">${p.consumers} <span class="muted">(${p.leaves} leaves)</span></td>
      <td class="num">${p.allocated} <span class="muted">/ ${p.demand}</span></td>
      <td class="num">${p.seq}</td>
      <td>${esc(p.last_type)} <span class="muted">${fmtTime(p.time)}</span></td>
      <td>${p.lag == null ? '<span class="muted">?</span>' : p.lag === 0 ? '<span class="badge ok">caught up</span>' : `<span class="badge warn">${p.lag} behind</span>`}</td>
      <td>${p.rules_version == null ? '<span class="muted">–</span>' : `<span title="since seq ${p.rules_since}">v${p.rules_version}</span>`}</td>
      <td>${p.halted == null ? '<span class="muted">–</span>' : p.halted ? `<span class="badge warn" title="${esc(p.halted_reason)}">halted</span>` : '<span class="badge ok">running</span>'}</td>
    </tr>`).join('');
    const focused = document.activeElement && document.activeElement.id === 'pool-prefix';
    app.innerHTML = `<h1>Pools</h1>
      <form class="pager" id="pool-filter">
        <input id="pool-prefix" placeholder="name starts with…" value="${esc(prefix)}" size="24">
        ${after ? `<a href="${page({ prefix })}" id="pools-first">first page</a>` : ''}
        ${res.after ? `<a href="${page({ after: res.after, prefix })}" id="pools-next">next ${PAGE} →</a>` : ''}
        <span class="muted">${pools.length ? `${esc(pools[0].pool)} … ${esc(pools[pools.length - 1].pool)}` : 'no pool here'}</span>
      </form>
      <table class="pools"><thead><tr><th>pool</th><th class="num">capacity</th><th class="num">hosts up</th><th class="num">consumers</th>
      <th class="num">allocated / demand</th><th class="num">seq</th><th>last event</th><th>projection lag</th><th>rules</th><th>halted</th></tr></thead>
      <tbody>${rows}</tbody></table>`;
    document.getElementById('pool-filter').onsubmit = (e) => {
      e.preventDefault();
      location.hash = page({ prefix: document.getElementById('pool-prefix').value.trim() });
    };
    if (focused) document.getElementById('pool-prefix').focus();
  };
  await draw();
  // Live: redraw this page at most once a second, however busy the site.
  let timer = null;
  return {
    onLive: () => {
      if (timer) return;
      timer = setTimeout(async () => {
        try { await draw(); } catch (err) { console.warn(err); } finally { timer = null; }
      }, 1000);
    },
  };
}

// ---- a pool -----------------------------------------------------------

function depth(path) { return path.split('/').length - 2; }
function leafName(path) { return path.slice(path.lastIndexOf('/') + 1); }

// bar draws a consumer's bars. Consumers at one depth of the tree share
// one scale (the largest allocation, planned share or target among them),
// so siblings compare at a glance: the hatched box is demand not met (cut
// at the end of the bar when larger, with an arrow), blue is allocation
// within the planned share, orange what is borrowed above it, the black
// mark the target, the green one the planned share.
function bar(c, scale) {
  const planned = c.planned ?? null;
  const target = c.target ?? null;
  const pct = (n) => Math.min(100, (100 * n) / scale);
  const own = planned == null ? c.allocated : Math.min(c.allocated, planned);
  let h = '';
  if (c.demand > c.allocated) h += `<span class="demand" style="left:${pct(c.allocated)}%;width:${pct(c.demand) - pct(c.allocated)}%"></span>`;
  h += `<span class="alloc" style="left:0;width:${pct(own)}%"></span>`;
  if (c.allocated > own) h += `<span class="borrow" style="left:${pct(own)}%;width:${pct(c.allocated) - pct(own)}%"></span>`;
  if (planned != null) h += `<span class="mark planned" style="left:calc(${pct(planned)}% - 1px)" title="planned share ${planned}"></span>`;
  if (target != null) h += `<span class="mark" style="left:calc(${pct(target)}% - 1px)" title="target ${target}"></span>`;
  if (c.demand > scale) h += '<span class="more" title="demand goes on beyond the bar">›</span>';
  return `<div class="track">${h}</div>`;
}

// scales is the bar scale of each depth of the tree.
function scales(consumers) {
  const held = [], asked = [];
  for (const c of consumers) {
    const d = depth(c.path);
    held[d] = Math.max(held[d] || 0, c.allocated, c.planned || 0, c.target || 0);
    asked[d] = Math.max(asked[d] || 0, c.demand);
  }
  // A depth where nothing is held or planned is scaled on its demand.
  return held.map((h, d) => h || asked[d] || 1);
}

function nums(c) {
  const unmet = Math.max(c.demand - c.allocated, 0);
  let s = `<b data-k="allocated">${c.allocated}</b> held`;
  if (c.target != null) s += ` · target <span data-k="target">${c.target}</span>`;
  if (c.planned != null) s += ` · planned <span data-k="planned">${c.planned}</span>`;
  s += ` · demand <span data-k="demand">${c.demand}</span>`;
  if (unmet > 0) s += ` · <span class="unmet" data-k="unmet">${unmet} unmet</span>`;
  if (c.borrowed > 0) s += ` · <span class="borrowed" data-k="borrowed">${c.borrowed} borrowed</span>`;
  return s;
}

function rowHTML(c, scale) {
  return `<div class="row ${c.leaf ? 'leaf' : 'parent'}" data-path="${esc(c.path)}">
    <div class="name" style="padding-left:${depth(c.path) * 1.1}rem" title="${esc(c.path)}${c.share != null ? ` · share ${c.share}` : ''}${c.priority != null ? ` · priority ${c.priority}` : ''}${c.max ? ` · max ${esc(c.max)}` : ''}">${esc(leafName(c.path))}</div>
    ${bar(c, scale)}<div class="nums">${nums(c)}</div></div>`;
}

// ROW is the height of a tree row in pixels (app.css .row).
const ROW = 25;

// drawTree draws the consumers into el as a virtual list: only the rows in
// view (and a margin) are in the document, so a tree of thousands of
// consumers draws as fast as one of fifty. el keeps its scroll position
// across redraws.
function drawTree(el, consumers) {
  const sc = scales(consumers);
  el.dataset.rows = consumers.length;
  el.innerHTML = `<div class="spacer" style="height:${consumers.length * ROW}px"><div class="window"></div></div>`;
  const win = el.querySelector('.window');
  let shown = '';
  const paint = () => {
    const first = Math.max(0, Math.floor(el.scrollTop / ROW) - 20);
    const last = Math.min(consumers.length, first + Math.ceil((el.clientHeight || 600) / ROW) + 40);
    if (shown === `${first}:${last}`) return;
    shown = `${first}:${last}`;
    let h = '';
    for (let i = first; i < last; i++) h += rowHTML(consumers[i], sc[depth(consumers[i].path)]);
    win.style.transform = `translateY(${first * ROW}px)`;
    win.innerHTML = h;
  };
  let queued = false;
  el.onscroll = () => {
    if (queued) return;
    queued = true;
    requestAnimationFrame(() => { queued = false; paint(); });
  };
  paint();
}

function hostsHTML(hosts) {
  return hosts.map((h) => {
    const segs = h.holders.map((x) => `<span style="width:${(100 * x.slots) / Math.max(h.slots, 1)}%;background:${color(x.consumer)}" title="${esc(x.consumer)} ${x.slots}"></span>`).join('');
    const list = h.holders.map((x) => `<li data-consumer="${esc(x.consumer)}"><i style="background:${color(x.consumer)}"></i>${esc(x.consumer)} <b>${x.slots}</b></li>`).join('');
    const owners = (h.owners || []).map((x) => `${esc(x.consumer)} ${x.slots}`).join(', ');
    return `<div class="host ${h.up ? 'up' : 'down'}" data-host="${esc(h.name)}">
      <b>${esc(h.name)}</b> <span class="muted">${esc(h.group)}</span> ${h.up ? '' : '<span class="badge warn">down</span>'}
      <div class="stack">${segs}</div><span class="muted">${h.allocated} / ${h.slots} slots</span>` +
      (owners ? `<div class="muted owners" data-k="owners">owned by ${owners}</div>` : '') + `<ul>${list}</ul></div>`;
  }).join('');
}

function policyHTML(pol, rules) {
  const p = pol || {};
  return `<span class="badge">reclaim ${esc(p.reclaim || 'priority')}</span><span class="badge">enforcement ${esc(p.enforcement || 'leaf')}</span>` +
    `<span class="badge">preemption ${p.preemption === false ? 'off' : 'on'}</span>` +
    (rules != null ? `<span class="badge" data-k="rules">rules v${rules}</span>` : '');
}

function eventSummary(ev) {
  if (!ev) return '';
  const d = ev.data || {};
  let what = ev.type;
  if (ev.type === 'demand') what = 'demand ' + Object.entries(d.demands || {}).map(([k, v]) => `${k} ${v}`).join(', ');
  else if (ev.type === 'release') what = `release ${d.consumer} ${d.slots}`;
  else if (ev.type === 'host_up') what = `host_up ${d.host} (${d.slots} slots)`;
  else if (ev.type === 'host_down') what = `host_down ${d.host}`;
  return esc(what) + (ev.refused ? ` <span class="badge warn">refused: ${esc(ev.refused)}</span>` : '');
}

async function poolView(pool, query) {
  setCrumbs(`<a href="#/">pools</a> / ${esc(pool)}`);
  const state = { at: query.get('at'), now: null, past: null, filters: { consumer: '', kind: '', rule: '' }, before: null, open: null };
  app.innerHTML = `<h1>${esc(pool)}</h1><div id="head" class="muted"></div>
    <div class="travel card" id="travel">
      <button id="tt-first" title="first event">first</button><button id="tt-prev" title="previous event">◀</button>
      <input type="range" id="tt-seq" min="0" max="0" step="1">
      <button id="tt-next" title="next event">▶</button><button id="tt-now" title="now, following live">now</button>
      <input type="datetime-local" id="tt-time" step="1" title="as of a time"><button id="tt-go">go</button>
      <div class="where" id="tt-where"></div>
    </div>
    <div class="grid">
      <section class="card"><h2>Consumers</h2>
        <div class="legend"><span><i style="background:var(--alloc)"></i>allocated</span><span><i style="background:var(--borrow)"></i>borrowed (above planned share)</span>
        <span><i style="background:repeating-linear-gradient(135deg,#ffd8a8 0 3px,#fff4e6 3px 6px)"></i>demand not met</span>
        <span><i style="background:var(--target);width:2px"></i>target</span><span><i style="background:var(--planned);width:2px"></i>planned share</span></div>
        <div class="tree" id="tree"></div></section>
      <section class="card"><h2>Hosts</h2><div class="hosts" id="hosts"></div></section>
    </div>
    <section class="card whatif" id="whatif" style="margin-top:1rem"><h2>What if</h2>
      <p class="muted">Edit the plan's shares, priorities and maxima, or a leaf's demand, and see the tree before and after: the ledger forks the pool at the point shown (now, or the time travel's) and folds the change in memory. Nothing is appended.</p>
      <button type="button" id="wi-open">edit a what-if…</button>
      <div id="wi-body"></div>
    </section>
    <section class="card" style="margin-top:1rem"><h2>Decisions</h2>
      <form class="filters" id="filters">
        <input name="consumer" placeholder="consumer (/path)" list="consumer-list"><datalist id="consumer-list"></datalist>
        <select name="kind"><option value="">any kind</option><option>grant</option><option>reclaim</option><option>release</option><option>trim</option><option>lend</option><option>return</option><option>own</option></select>
        <input name="rule" placeholder="rule (e.g. share_ratio.reclaim)" list="rule-list"><datalist id="rule-list">
        ${['priority.entitled', 'priority.borrow', 'priority.reclaim', 'share_ratio.grant', 'share_ratio.reclaim', 'release.finished', 'release.demand_dropped', 'release.max_lowered', 'release.max', 'release.consumer_removed', 'trim.host_down', 'own.use', 'own.return', 'own.assign', 'own.drop', 'own.trim', 'release.moved', 'release.lend_revoked'].map((r) => `<option>${r}</option>`).join('')}</datalist>
        <button>filter</button></form>
      <table class="timeline"><thead><tr><th class="num">seq</th><th>time</th><th>kind</th><th>consumer</th><th>from</th><th>host</th><th class="num">slots</th><th>rule</th></tr></thead><tbody id="decisions"></tbody></table>
      <button id="older" hidden>older decisions</button>
    </section>`;
  const $ = (id) => document.getElementById(id);
  // The consumer filter's suggestions are filled when it is first used,
  // not with every redraw of a large tree.
  let consumerPaths = [];
  document.querySelector('#filters input[name=consumer]').addEventListener('focus', () => {
    $('consumer-list').innerHTML = consumerPaths.map((c) => `<option>${esc(c.path)}</option>`).join('');
  });

  const drawNow = (p) => {
    state.now = p;
    $('head').innerHTML = `${policyHTML(p.policy, p.rules_version)} seq <b data-k="seq">${p.seq}</b> · ${esc(p.last_type)} ${fmtTime(p.time)} · capacity ${p.capacity} (${p.hosts_up} hosts up, ${p.hosts_down} down)` +
      (p.halted ? ` <span class="badge warn">halted: ${esc(p.halted_reason)}</span>` : '');
    consumerPaths = p.consumers;
    if (state.at) return;
    drawTree($('tree'), p.consumers);
    $('hosts').innerHTML = hostsHTML(p.hosts);
    $('tt-where').innerHTML = `<span class="badge ok">now</span> following the projection: seq ${p.seq}`;
    markFuture();
    app.dataset.view = 'now';
    app.dataset.seq = p.seq;
  };

  const drawPast = (a) => {
    state.past = a;
    drawTree($('tree'), a.consumers);
    $('hosts').innerHTML = hostsHTML(a.hosts);
    const range = $('tt-seq');
    range.min = a.first; range.max = Math.max(a.last, state.now ? state.now.seq : 0); range.value = a.seq;
    $('tt-where').innerHTML = `<span class="badge past">as of</span> seq <b data-k="asof">${a.seq}</b>` +
      (a.event ? ` · ${fmtTime(a.event.time)} · ${eventSummary(a.event)}` : ' · before the first event') +
      (a.rules_version != null ? ` · rules v${a.rules_version}` : '') +
      ` · capacity ${a.capacity}`;
    app.dataset.view = 'past';
    app.dataset.seq = a.seq;
    markFuture();
  };
  // markFuture dims the decisions made after the point shown.
  const markFuture = () => {
    const at = state.at ? Number(state.at) : Infinity;
    for (const tr of document.querySelectorAll('#decisions tr.decision')) tr.classList.toggle('future', Number(tr.dataset.seq) > at);
  };

  const loadNow = async () => {
    const p = await api(`/v1/pools/${enc(pool)}`);
    drawNow(p);
    if (!state.at) {
      const range = $('tt-seq');
      range.min = p.first_seq; range.max = p.seq; range.value = p.seq;
    }
  };

  // travel goes to a point of the pool's history (null: now).
  let travelling = 0;
  const travel = async (q) => {
    const n = ++travelling;
    if (q == null) {
      state.at = null;
      history.replaceState(null, '', `#/pool/${enc(pool)}`);
      await loadNow();
      return;
    }
    const a = await api(`/v1/pools/${enc(pool)}/as-of?${q}`);
    if (n !== travelling) return; // a later move won
    state.at = String(a.seq);
    history.replaceState(null, '', `#/pool/${enc(pool)}?at=${a.seq}`);
    drawPast(a);
  };
  const cur = () => state.past || { first: state.now.first_seq };
  $('tt-first').onclick = () => travel(`seq=${cur().first || 1}`);
  $('tt-prev').onclick = () => {
    if (state.at && state.past) { if (state.past.prev != null) travel(`seq=${state.past.prev}`); return; }
    travel(`seq=${state.now.seq - 1}`);
  };
  $('tt-next').onclick = () => { if (state.at && state.past && state.past.next != null) travel(`seq=${state.past.next}`); else travel(null); };
  $('tt-now').onclick = () => travel(null);
  let slide;
  $('tt-seq').oninput = (e) => { clearTimeout(slide); slide = setTimeout(() => travel(`seq=${e.target.value}`), 60); };
  $('tt-go').onclick = () => { const v = $('tt-time').value; if (v) travel(`time=${enc(new Date(v).toISOString())}`); };

  // ---- what if ----
  $('wi-open').onclick = () => whatIfPanel($('wi-body'), pool, state.at ? Number(state.at) : 0).catch((err) => {
    $('wi-body').innerHTML = `<p class="error">${esc(err.message)}</p>`;
  });

  // ---- decisions timeline ----
  const loadDecisions = async (more) => {
    const f = state.filters;
    const q = new URLSearchParams({ limit: '50' });
    for (const k of ['consumer', 'kind', 'rule']) if (f[k]) q.set(k, f[k]);
    if (more && state.before) q.set('before', state.before);
    const t = await api(`/v1/pools/${enc(pool)}/timeline?${q}`);
    const rows = t.decisions.map((d) => `<tr class="decision" data-seq="${d.event_seq}" data-ordinal="${d.ordinal}" data-kind="${esc(d.kind)}" data-consumer="${esc(d.consumer)}" data-from="${esc(d.from_consumer || '')}">
      <td class="num">${d.event_seq} <span class="muted">#${d.ordinal}</span></td><td>${fmtTime(d.time)}</td><td class="kind-${esc(d.kind)}">${esc(d.kind)}</td>
      <td>${esc(d.consumer)}</td><td>${esc(d.from_consumer || '')}</td><td>${esc(d.host)}</td><td class="num">${d.slots}</td><td>${esc(d.rule)}</td></tr>`).join('');
    if (more) $('decisions').insertAdjacentHTML('beforeend', rows);
    else $('decisions').innerHTML = rows || '<tr><td colspan="8" class="muted">no decision matches</td></tr>';
    state.before = t.before || null;
    $('older').hidden = !t.before;
    markFuture();
  };
  $('filters').onsubmit = (e) => {
    e.preventDefault();
    const fd = new FormData(e.target);
    state.filters = { consumer: fd.get('consumer').trim(), kind: fd.get('kind'), rule: fd.get('rule').trim() };
    loadDecisions(false).catch(showInline);
  };
  $('older').onclick = () => loadDecisions(true).catch(showInline);
  $('decisions').onclick = async (e) => {
    const tr = e.target.closest('tr.decision');
    if (!tr) return;
    const next = tr.nextElementSibling;
    if (next && next.classList.contains('explain')) { next.remove(); tr.classList.remove('open'); return; }
    tr.classList.add('open');
    const row = document.createElement('tr');
    row.className = 'explain';
    row.innerHTML = '<td colspan="8" class="muted">re-folding the log…</td>';
    tr.after(row);
    try {
      const x = await api(`/v1/pools/${enc(pool)}/decisions/${tr.dataset.seq}/${tr.dataset.ordinal}/explain`);
      row.innerHTML = `<td colspan="8"><p class="why">${esc(x.decision)}</p><pre class="story">${esc(x.story)}</pre>
        <button type="button" class="goto" data-seq="${x.event_seq}">show the pool as of seq ${x.event_seq}</button></td>`;
      row.querySelector('.goto').onclick = () => travel(`seq=${x.event_seq}`);
    } catch (err) {
      row.innerHTML = `<td colspan="8" class="error">${esc(err.message)}</td>`;
    }
  };
  const showInline = (err) => { $('decisions').innerHTML = `<tr><td colspan="8" class="error">${esc(err.message)}</td></tr>`; };

  const decisions = loadDecisions(false); // in parallel with the pool
  await loadNow();
  if (state.at) await travel(`seq=${state.at}`);
  await decisions;
  // Drawn means painted: wait for the frame after the views went in.
  await new Promise((r) => requestAnimationFrame(() => setTimeout(r, 0)));
  app.dataset.rendered = String(performance.now());

  // Live: a new checkpoint redraws the present (and the newest decisions
  // when the timeline shows its first page); in the past, only the range
  // of the control grows.
  let busy = false, again = false;
  const onLive = async (ev) => {
    if (ev.pool !== pool) return;
    if (busy) { again = true; return; }
    busy = true;
    try {
      do {
        again = false;
        await loadNow();
        if (state.at) $('tt-seq').max = state.now.seq;
        if (!state.before && !document.querySelector('tr.explain')) await loadDecisions(false);
      } while (again);
    } catch (err) {
      console.warn(err);
    } finally {
      busy = false;
    }
  };
  return { onLive };
}

// ---- what if ----------------------------------------------------------

// whatIfPanel asks the ledger for the pool at seq (0: now) with no
// hypothetical event, to get the plan and the figures there, and draws a
// form: each consumer of the plan with its share, priority and max, each
// leaf with its demand. "Show" sends the edits as a plan event (the plan
// in force with the edited fields) and a demand event, and draws the
// answer: the tree's bars before and after, and the decisions in words.
async function whatIfPanel(el, pool, seq) {
  const url = `/v1/pools/${enc(pool)}/what-if`;
  const base = await apiPost(url, seq ? { at_seq: seq, events: [] } : { events: [] });
  if (!base.plan) {
    el.innerHTML = '<p class="muted">The pool has no plan at this point.</p>';
    return;
  }
  const fig = new Map(base.consumers.map((c) => [c.path, c.before]));
  const planned = new Map(base.plan.consumers.map((c) => [c.path, c]));
  // Every consumer of the tree, the plan's listed ones editable.
  const rows = base.consumers.filter((c) => c.before).map((c) => {
    const f = c.before, p = planned.get(c.path);
    const num = (name, v) => `<input name="${name}" type="number" step="1" value="${esc(v)}" data-was="${esc(v)}">`;
    const max = p ? (p.max == null ? '' : String(p.max)) : null;
    return `<tr data-path="${esc(c.path)}"><td style="padding-left:${0.5 + depth(c.path) * 1.1}rem">${esc(c.path)}</td>
      <td>${p ? num('share', f.share) : '<span class="muted">implied</span>'}</td>
      <td>${p ? num('priority', f.priority) : ''}</td>
      <td>${p ? `<input name="max" size="6" placeholder="none" value="${esc(max)}" data-was="${esc(max)}">` : ''}</td>
      <td>${f.leaf ? num('demand', f.demand) : `<span class="muted">${f.demand}</span>`}</td></tr>`;
  }).join('');
  el.innerHTML = `<p class="muted">Fork: ${base.at.seq ? `seq <b data-k="wi-at">${base.at.seq}</b> (${fmtTime(base.at.time)})` : 'before the first event'}</p>
    <form id="wi-form"><table class="wi-edit"><thead><tr><th>consumer</th><th>share</th><th>priority</th><th>max (N or N%)</th><th>demand</th></tr></thead>
    <tbody>${rows}</tbody></table>
    <p><button id="wi-run">show before and after</button> <button type="reset" id="wi-reset">reset</button></p></form>
    <div id="wi-result"></div>`;
  const form = el.querySelector('#wi-form');
  form.onsubmit = async (e) => {
    e.preventDefault();
    const out = el.querySelector('#wi-result');
    let events;
    try {
      events = whatIfEvents(form, base.plan);
    } catch (err) {
      out.innerHTML = `<p class="error">${esc(err.message)}</p>`;
      return;
    }
    if (!events.length) {
      out.innerHTML = '<p class="muted">Nothing edited: change a share, priority, max or demand first.</p>';
      return;
    }
    out.innerHTML = '<p class="muted">asking the ledger…</p>';
    try {
      const res = await apiPost(url, seq ? { at_seq: seq, events } : { events });
      out.innerHTML = whatIfResult(res);
    } catch (err) {
      out.innerHTML = `<p class="error">${esc(err.message)}</p>`;
    }
  };
}

// whatIfEvents turns the form's edits into hypothetical events: the plan
// in force with the edited entries (everything else, ownership included,
// as it was), then the edited demands.
function whatIfEvents(form, plan) {
  const edited = JSON.parse(JSON.stringify(plan));
  const byPath = new Map(edited.consumers.map((c) => [c.path, c]));
  let planChanged = false;
  const demands = {};
  for (const tr of form.querySelectorAll('tr[data-path]')) {
    const path = tr.dataset.path;
    for (const input of tr.querySelectorAll('input')) {
      const v = input.value.trim();
      if (v === input.dataset.was) continue;
      if (input.name === 'demand') {
        demands[path] = intOf(v, `demand of ${path}`);
        continue;
      }
      const c = byPath.get(path);
      planChanged = true;
      if (input.name === 'max') {
        if (v === '') delete c.max;
        else c.max = /%$/.test(v) ? v : intOf(v, `max of ${path}`);
      } else {
        c[input.name] = intOf(v, `${input.name} of ${path}`);
      }
    }
  }
  const events = [];
  if (planChanged) events.push({ type: 'plan', data: { plan: edited } });
  if (Object.keys(demands).length) events.push({ type: 'demand', data: { demands } });
  return events;
}

function intOf(v, what) {
  if (!/^-?\d+$/.test(v)) throw new Error(`${what}: want a whole number, not "${v}"`);
  return Number(v);
}

// whatIfResult draws an answer: each consumer with its bar before and
// after (one scale per depth for both), the figures that move, each
// event's outcome and the decisions in words.
function whatIfResult(res) {
  const all = [];
  for (const c of res.consumers) {
    if (c.before) all.push({ path: c.path, ...c.before });
    if (c.after) all.push({ path: c.path, ...c.after });
  }
  const sc = scales(all);
  const figure = (c, k) => {
    const b = c.before ? c.before[k] : '–', a = c.after ? c.after[k] : '–';
    return b === a ? `<span data-k="after-${k}">${a}</span>` : `<span data-k="before-${k}">${b}</span> → <b data-k="after-${k}">${a}</b>`;
  };
  const rows = res.consumers.map((c) => `<div class="wi-row ${c.changed ? 'changed' : ''}" data-path="${esc(c.path)}">
    <div class="name" style="padding-left:${depth(c.path) * 1.1}rem" title="${esc(c.path)}">${esc(leafName(c.path))}</div>
    <div class="bars"><div class="side" data-side="before">${c.before ? bar(c.before, sc[depth(c.path)]) : '<div class="track gone"></div>'}</div>
    <div class="side" data-side="after">${c.after ? bar(c.after, sc[depth(c.path)]) : '<div class="track gone"></div>'}</div></div>
    <div class="nums">held ${figure(c, 'allocated')} · target ${figure(c, 'target')} · unmet ${figure(c, 'unmet')}</div></div>`).join('');
  const outcomes = res.events.map((e) => `<li data-index="${e.index}">${esc(e.type)}: ${e.refused
    ? `<span class="badge warn">refused: ${esc(e.refused)}</span> ${esc(e.refusal)}` : `applied as seq ${e.seq} <span class="muted">(hypothetical)</span>`}</li>`).join('');
  const decisions = res.decisions.map((d) => `<li class="kind-${esc(d.kind)}" data-kind="${esc(d.kind)}" data-consumer="${esc(d.consumer)}">${esc(d.text)}</li>`).join('');
  return `<p><span class="badge ok" id="wi-appended" data-appended="${res.appended}">${res.appended ? 'appended' : 'nothing appended'}</span>
      fork at seq ${res.at.seq}; <span class="muted">bars: before (top), after (bottom)</span></p>
    <ol class="wi-events">${outcomes}</ol>
    <div class="wi-tree" id="wi-tree">${rows}</div>
    <h3>Decisions (${res.decisions.length})</h3><ul class="wi-decisions" id="wi-decisions">${decisions || '<li class="muted">none</li>'}</ul>`;
}

// ---- router -----------------------------------------------------------

let current = null;
async function route() {
  liveListeners.clear();
  delete app.dataset.rendered;
  const { parts, query } = parseHash();
  try {
    if (parts[0] === 'pool' && parts[1]) current = await poolView(parts[1], query);
    else current = await poolsView(query);
    if (current && current.onLive) liveListeners.add(current.onLive);
  } catch (err) {
    showError(err);
  }
}

document.getElementById('token-button').onclick = async () => {
  if (await askToken()) route();
};
window.addEventListener('hashchange', () => {
  // replaceState from time travel does not fire hashchange; a link does.
  route();
});
route();
follow();
