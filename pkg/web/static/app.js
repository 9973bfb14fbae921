// manent web UI: follows the page's Server-Sent Events stream. Log lines
// are appended to #log; any other event reloads the #live region from the
// server (the same HTML as the page). EventSource reconnects by itself and
// resumes with Last-Event-ID; after a refused reconnect the script opens a
// new stream from the last event it saw — unless the session has ended
// (signed out, here or in another tab or browser, or expired: the server
// ends the open stream then), which it says instead.
(function () {
  'use strict';
  var body = document.body;
  var streamURL = body.getAttribute('data-stream');
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

  function refresh() {
    if (!live || timer) { return; }
    timer = setTimeout(function () {
      timer = null;
      fetch(location.pathname + location.search, { headers: { 'X-Manent-Fragment': '1' }, credentials: 'same-origin' })
        .then(function (r) {
          if (r.redirected || r.status === 401) { sessionEnded(); return null; }
          return r.ok ? r.text() : null;
        })
        .then(function (html) {
          if (html === null || html === undefined) { return; }
          var active = document.activeElement;
          var activeID = active && live.contains(active) ? active.id : '';
          var comment = document.getElementById('comment');
          var kept = comment ? comment.value : '';
          live.innerHTML = html;
          var c2 = document.getElementById('comment');
          if (c2 && kept) { c2.value = kept; }
          if (activeID) {
            var again = document.getElementById(activeID);
            if (again) { again.focus(); }
          }
        })
        .catch(function () { /* the stream's error handler reports the connection */ });
    }, 150);
  }

  function appendLine(seq, d) {
    if (seq <= lastLog) { return; }
    lastLog = seq;
    var atBottom = log.scrollTop + log.clientHeight >= log.scrollHeight - 8;
    var line = document.createElement('span');
    line.className = 'line';
    line.setAttribute('data-seq', String(seq));
    if (d.step) {
      var s = document.createElement('span');
      s.className = 'ls';
      s.textContent = d.step;
      line.appendChild(s);
    }
    line.appendChild(document.createTextNode(d.text));
    log.appendChild(line);
    log.appendChild(document.createTextNode('\n'));
    var empty = document.getElementById('log-empty');
    if (empty) { empty.remove(); }
    if (atBottom) { log.scrollTop = log.scrollHeight; }
  }

  function url() {
    if (!lastID || streamURL.indexOf('/deployments/') !== 0) { return streamURL; }
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
        status('Disconnected from the server; retrying…');
        var again = function () { setTimeout(function () { if (!finished) { open(); } }, 2000); };
        // The reconnect was refused: is the session still there?
        fetch(location.pathname + location.search, { headers: { 'X-Manent-Fragment': '1' }, credentials: 'same-origin' })
          .then(function (r) {
            if (r.redirected || r.status === 401) { sessionEnded(); return; }
            again();
          }, again);
      } else {
        status('Reconnecting to the server…');
      }
    };
  }

  if (log && follow) { log.scrollTop = log.scrollHeight; }
  open();
}());
