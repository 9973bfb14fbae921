// manent web UI: keeps the page's times current and follows the page's
// Server-Sent Events stream. Relative times (<time data-rel>) and the
// duration of a running step ([data-since]) are brought up to date every
// second, by the server's rules; the server's text is what a browser
// without script shows. Log lines are appended to #log; any other event
// reloads the #live region from the server (the same HTML as the page). EventSource reconnects by itself and
// resumes with Last-Event-ID; after a refused stream the script asks the
// same address once why (refused()) and opens a new stream from the last
// event it saw — after the refusal's Retry-After, its detail in the banner
// (too many streams: limits.streams_per_identity) — unless the session has
// ended (signed out, here or in another tab or browser, or expired: the
// server ends the open stream then), which it says instead, the stream is
// forbidden or gone (403, 404), or the server's database was restored from
// a backup older than that event, when the page is loaded again.
(function () {
  'use strict';
  var body = document.body;

  // The server's clock: the times are measured against it, not against a
  // browser's clock that may be off.
  var skew = Date.parse(body.getAttribute('data-now') || '') - Date.now();
  if (isNaN(skew)) { skew = 0; }
  var SEC = 1000, MIN = 60 * SEC, HOUR = 60 * MIN, DAY = 24 * HOUR;

  // relative is reltime.Format (pkg/reltime): each time truncated to its unit.
  function relative(t, now) {
    var d = now - t;
    var future = d < 0;
    if (future) { d = -d; }
    if (d < 10 * SEC) { return 'just now'; }
    var s;
    if (d < MIN) { s = Math.floor(d / SEC) + 's'; }
    else if (d < HOUR) { s = Math.floor(d / MIN) + 'm'; }
    else if (d < DAY) { s = Math.floor(d / HOUR) + 'h'; }
    else if (d < 365 * DAY) { s = Math.floor(d / DAY) + 'd'; }
    else { s = Math.floor(d / (365 * DAY)) + 'y'; }
    return future ? 'in ' + s : s + ' ago';
  }

  function pad(n) { return n < 10 ? '0' + n : String(n); }

  // elapsed is stepDuration (pages.go): "250ms", "3.6s", "2m05s", "3h07m", "2d".
  function elapsed(d) {
    if (d < 0) { d = 0; }
    if (d < SEC) { return Math.floor(d) + 'ms'; }
    if (d < MIN) { return (d / SEC).toFixed(1) + 's'; }
    if (d < HOUR) { return Math.floor(d / MIN) + 'm' + pad(Math.floor(d / SEC) % 60) + 's'; }
    if (d < 48 * HOUR) { return Math.floor(d / HOUR) + 'h' + pad(Math.floor(d / MIN) % 60) + 'm'; }
    return Math.floor(d / DAY) + 'd';
  }

  function each(selector, attr, format, now) {
    var els = document.querySelectorAll(selector);
    for (var i = 0; i < els.length; i++) {
      var t = Date.parse(els[i].getAttribute(attr) || '');
      if (isNaN(t)) { continue; }
      var text = format(t, now);
      if (els[i].textContent !== text) { els[i].textContent = text; }
    }
  }

  function tick() {
    var now = Date.now() + skew;
    each('time[data-rel]', 'datetime', relative, now);
    each('[data-since]', 'data-since', function (t, n) { return elapsed(n - t); }, now);
  }
  tick();
  setInterval(tick, 1000);

  var streamURL = body.getAttribute('data-stream');
  // base is the path prefix the UI is served under (web.path_prefix).
  var base = body.getAttribute('data-base') || '';
  var deployStream = base + '/deployments/';
  if (!streamURL || !window.EventSource) { return; }
  var live = document.getElementById('live');
  var log = document.getElementById('log');
  var conn = document.getElementById('conn');
  var follow = body.hasAttribute('data-log') && log;
  var lastLog = log ? parseInt(log.getAttribute('data-last') || '0', 10) : 0;
  var lastID = '';
  var es = null;
  var timer = null;
  var broken = false;
  var finished = false;

  function status(text) {
    if (!conn) { return; }
    conn.textContent = text || '';
    conn.hidden = !text;
  }

  // sessionEnded stops following and says why.
  function sessionEnded() {
    finished = true;
    if (es) { es.close(); }
    status('Your session has ended. Reload to sign in again.');
  }

  // refresh reloads the #live region: 150 ms after an event, one reload
  // at a time, and no sooner after the last one than it took — a busy
  // server answering slowly is asked less often, not kept busy by every
  // open tab. Events meanwhile make one more reload.
  var loading = false;
  var again = false;
  var took = 0;

  function refresh() {
    if (!live) { return; }
    if (loading) { again = true; return; }
    if (timer) { return; }
    timer = setTimeout(load, Math.max(150, took));
  }

  function load() {
    timer = null;
    loading = true;
    var t0 = Date.now();
    var done = function () {
      loading = false;
      took = Date.now() - t0;
      if (again) { again = false; refresh(); }
    };
    fetch(location.pathname + location.search, { headers: { 'X-Manent-Fragment': '1' }, credentials: 'same-origin' })
      .then(function (r) {
        if (r.redirected || r.status === 401) { sessionEnded(); return null; }
        return r.ok ? r.text() : null;
      })
      .then(function (html) {
        if (html === null || html === undefined) { return; }
        var active = document.activeElement;
        var activeID = active && live.contains(active) ? active.id : '';
        // A comment being written survives the reload (both forms').
        var kept = {};
        ['comment', 'wave-comment'].forEach(function (id) {
          var c = document.getElementById(id);
          if (c && c.value) { kept[id] = c.value; }
        });
        live.innerHTML = html;
        Object.keys(kept).forEach(function (id) {
          var c = document.getElementById(id);
          if (c) { c.value = kept[id]; }
        });
        if (activeID) {
          var el = document.getElementById(activeID);
          if (el) { el.focus(); }
        }
      })
      .catch(function () { /* the stream's error handler reports the connection */ })
      .then(done);
  }

  // Log lines are added in batches, at most every 50 ms, with one layout
  // read each: one per line froze the tab when a step wrote thousands at
  // once. The page keeps the last MAX_LINES (the API's page, MaxLogPage)
  // and says where the rest is.
  var MAX_LINES = 10000;
  var pending = [];
  var flushTimer = null;

  function appendLine(seq, d) {
    if (seq <= lastLog) { return; }
    lastLog = seq;
    pending.push([seq, d]);
    if (pending.length > MAX_LINES) { pending.shift(); dropped(); }
    if (!flushTimer) { flushTimer = setTimeout(flush, 50); }
  }

  function dropped() {
    var note = document.getElementById('log-dropped');
    if (note) { note.hidden = false; }
  }

  function flush() {
    flushTimer = null;
    var batch = pending;
    pending = [];
    var atBottom = log.scrollTop + log.clientHeight >= log.scrollHeight - 8;
    var frag = document.createDocumentFragment();
    for (var i = 0; i < batch.length; i++) {
      var d = batch[i][1];
      var line = document.createElement('span');
      line.className = 'line';
      line.setAttribute('data-seq', String(batch[i][0]));
      if (d.step) {
        var s = document.createElement('span');
        s.className = 'ls';
        s.textContent = showControls(String(d.step));
        line.appendChild(s);
      }
      appendColoured(line, String(d.text || ''));
      frag.appendChild(line);
      frag.appendChild(document.createTextNode('\n'));
    }
    log.appendChild(frag);
    var extra = log.children.length - MAX_LINES;
    if (extra > 0) {
      var range = document.createRange();
      range.setStartBefore(log.firstChild);
      range.setEndAfter(log.children[extra - 1]);
      range.deleteContents();
      if (log.firstChild && log.firstChild.nodeType === 3) { log.removeChild(log.firstChild); }
      dropped();
    }
    var empty = document.getElementById('log-empty');
    if (empty) { empty.remove(); }
    if (atBottom) { log.scrollTop = log.scrollHeight; }
  }

  // showControls writes every bidirectional-text control or mark of text
  // as the server's pages do (showControls in bidi.go): \u202e, as text,
  // so that a line cannot show in another order than it is stored; and
  // every control character but newline and tab as the CLI does, \x07,
  // \x0d, \u0085. Hebrew and Arabic letters stay. A log line's escape
  // sequences are read (appendColoured) before, so its ESC never gets here.
  var HIDDEN = /[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/g;
  function showControls(text) {
    return text.replace(HIDDEN, function (c) {
      var n = c.charCodeAt(0);
      if (n < 0x80) { return '\\x' + ('0' + n.toString(16)).slice(-2); }
      return '\\u' + ('000' + n.toString(16)).slice(-4);
    });
  }

  // appendColoured adds a log line's text to el with its SGR colours as
  // classes and every other escape sequence dropped: ansiSpans in
  // ansi.go, the same rules (the text is set as text, never as markup).
  var MAX_SPANS = 256;
  function sgrClass(s) {
    var c = [];
    if (s.bold) { c.push('ansi-bold'); }
    if (s.dim) { c.push('ansi-dim'); }
    if (s.italic) { c.push('ansi-italic'); }
    if (s.underline) { c.push('ansi-underline'); }
    if (s.fg) { c.push('ansi-fg-' + (s.fg - 1)); }
    if (s.bg) { c.push('ansi-bg-' + (s.bg - 1)); }
    return c.join(' ');
  }
  function sgrApply(s, params) {
    var ps = params.split(/[;:]/).filter(function (p) { return p !== ''; });
    if (ps.length === 0) { return {}; }
    for (var i = 0; i < ps.length; i++) {
      var n = ps[i].length > 3 || !/^\d+$/.test(ps[i]) ? -1 : parseInt(ps[i], 10);
      if (n === 0) { s = {}; }
      else if (n === 1) { s.bold = true; }
      else if (n === 2) { s.dim = true; }
      else if (n === 3) { s.italic = true; }
      else if (n === 4) { s.underline = true; }
      else if (n === 22) { s.bold = false; s.dim = false; }
      else if (n === 23) { s.italic = false; }
      else if (n === 24) { s.underline = false; }
      else if (n >= 30 && n <= 37) { s.fg = n - 30 + 1; }
      else if (n >= 90 && n <= 97) { s.fg = n - 90 + 9; }
      else if (n === 39) { s.fg = 0; }
      else if (n >= 40 && n <= 47) { s.bg = n - 40 + 1; }
      else if (n >= 100 && n <= 107) { s.bg = n - 100 + 9; }
      else if (n === 49) { s.bg = 0; }
      else if (n === 38 || n === 48) {
        var m = i + 1 < ps.length ? ps[i + 1] : '';
        if (m === '5') { i += 2; } else if (m === '2') { i += 4; }
      }
    }
    return s;
  }
  function appendColoured(el, text) {
    if (text.indexOf('\x1b') < 0) { el.appendChild(document.createTextNode(showControls(text))); return; }
    var runs = [], buf = '', cls = '', want = '', s = {}, i = 0, n = text.length;
    function write(t) {
      if (want !== cls && runs.length < MAX_SPANS - 1) {
        if (buf) { runs.push([cls, buf]); buf = ''; }
        cls = want;
      }
      buf += t;
    }
    while (i < n) {
      var j = text.indexOf('\x1b', i);
      if (j !== i) { write(text.slice(i, j < 0 ? n : j)); i = j < 0 ? n : j; continue; }
      i++;
      if (i >= n) { break; }
      var c = text.charCodeAt(i);
      if (c === 0x5b) { // CSI
        i++;
        var start = i;
        while (i < n && text.charCodeAt(i) >= 0x30 && text.charCodeAt(i) <= 0x3f) { i++; }
        var params = text.slice(start, i);
        while (i < n && text.charCodeAt(i) >= 0x20 && text.charCodeAt(i) <= 0x2f) { i++; }
        if (i < n && text.charCodeAt(i) >= 0x40 && text.charCodeAt(i) <= 0x7e) {
          if (text.charAt(i) === 'm' && start + params.length === i) { s = sgrApply(s, params); want = sgrClass(s); }
          i++;
        }
      } else if (']P_^X'.indexOf(text.charAt(i)) >= 0) { // OSC, DCS, APC, PM, SOS
        i++;
        while (i < n) {
          if (text.charCodeAt(i) === 7) { i++; break; }
          if (text.charCodeAt(i) === 0x1b && text.charAt(i + 1) === '\\') { i += 2; break; }
          i++;
        }
      } else {
        if (c >= 0x20 && c <= 0x2f && i + 1 < n) { i++; }
        i++;
      }
    }
    if (buf) { runs.push([cls, buf]); }
    for (var k = 0; k < runs.length; k++) {
      if (!runs[k][0]) { el.appendChild(document.createTextNode(showControls(runs[k][1]))); continue; }
      var sp = document.createElement('span');
      sp.className = runs[k][0];
      sp.textContent = showControls(runs[k][1]);
      el.appendChild(sp);
    }
  }

  function url() {
    if (!lastID || streamURL.indexOf(deployStream) !== 0) { return streamURL; }
    return streamURL.replace(/last_event_id=[^&]*/, 'last_event_id=' + encodeURIComponent(lastID));
  }

  function onEvent(ev) {
    if (ev.lastEventId) { lastID = ev.lastEventId; }
    var e;
    try { e = JSON.parse(ev.data); } catch (err) { return; }
    if (e.type === 'log') {
      if (follow) { appendLine(e.seq, e.data || {}); }
      return;
    }
    refresh();
    if (e.type === 'done' && follow) {
      finished = true;
      es.close();
      status('');
    }
  }

  // RETRY is the wait before the next stream after a refusal that names
  // none; a refusal's Retry-After (a 429 past limits.streams_per_identity,
  // a 503) replaces it, at most RETRY_MAX.
  var RETRY = 2 * SEC, RETRY_MAX = 5 * MIN;

  function reopen(ms) { setTimeout(function () { if (!finished) { open(); } }, ms); }

  // refused learns why the stream was refused — EventSource does not say
  // — with one request of the same address, read no further than its
  // status and problem: a stream that answers now is closed at once and
  // opened again after RETRY; 401 is the end of the session; a 422 whose
  // last_event_id is below the last event seen says the server's database
  // was restored from an older backup (what the page shows after that
  // event is undone there), so the page is loaded again; any other problem
  // is shown (its detail) and the next stream waits its Retry-After; a 403
  // or 404 ends the following (retrying changes nothing).
  function refused() {
    var ac = window.AbortController ? new AbortController() : null;
    var stop = function (r) { if (ac) { ac.abort(); } else if (r && r.body && r.body.cancel) { r.body.cancel(); } };
    var lost = function () { status('Disconnected from the server; retrying…'); reopen(RETRY); };
    fetch(url(), { headers: { 'Accept': 'text/event-stream' }, credentials: 'same-origin', signal: ac ? ac.signal : undefined })
      .then(function (r) {
        if (r.ok) { stop(r); lost(); return; }
        if (r.status === 401) { stop(r); sessionEnded(); return; }
        var wait = parseInt(r.headers.get('Retry-After') || '', 10) * SEC;
        wait = isNaN(wait) ? RETRY : Math.min(Math.max(wait, RETRY), RETRY_MAX);
        var type = r.headers.get('Content-Type') || '';
        var problem = type.indexOf('json') >= 0 ? r.json() : Promise.reject(new Error('not a problem'));
        return problem.then(function (p) {
          var end = p && p.last_event_id;
          if (r.status === 422 && lastID && typeof end === 'number' && end < parseInt(lastID, 10)) {
            finished = true;
            status('The server\'s database was restored from an older backup; loading the page again…');
            location.reload();
            return;
          }
          var detail = String((p && p.detail) || r.statusText || r.status).slice(0, 500);
          if (r.status === 403 || r.status === 404) {
            finished = true;
            status('Live updates stopped: ' + detail.replace(/[.\s]+$/, '') + '. Reload to try again.');
            return;
          }
          status('Live updates paused: ' + detail + ' (trying again in ' + Math.round(wait / SEC) + 's)');
          reopen(wait);
        }, function () { stop(r); status('Disconnected from the server; retrying…'); reopen(wait); });
      }, lost);
  }

  function open() {
    es = new EventSource(url());
    ['state', 'step', 'log', 'rollout', 'approval', 'done'].forEach(function (t) { es.addEventListener(t, onEvent); });
    es.onopen = function () {
      if (broken) { broken = false; refresh(); }
      status('');
    };
    es.onerror = function () {
      if (finished) { return; }
      broken = true;
      if (es.readyState === EventSource.CLOSED) {
        // The stream was refused: why, and when to try again?
        refused();
      } else {
        status('Reconnecting to the server…');
      }
    };
  }

  if (log && follow) { log.scrollTop = log.scrollHeight; }
  open();
}());
