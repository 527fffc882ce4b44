// The test pages. They use only what a browser gives a web app (EventSource, WebSocket) and
// record what arrives in `window.state`, which the tests read with page.evaluate.

/** A page with `startSse(url)`: a plain EventSource whose events land in window.state. */
export const SSE_PAGE = `<!doctype html>
<html><head><meta charset="utf-8"><title>herald sse</title></head>
<body><pre id="log"></pre>
<script>
window.state = { messages: [], subscribed: [], disconnects: [], opens: 0, errors: [], badFrames: [] };
window.startSse = (url) => {
  const es = new EventSource(url);
  window.es = es;
  es.onopen = () => { state.opens += 1; };
  es.onerror = () => { state.errors.push({ readyState: es.readyState, at: Date.now() }); };
  es.addEventListener('subscribed', (e) => {
    try { state.subscribed.push(JSON.parse(e.data)); } catch (err) { state.badFrames.push(e.data); }
  });
  es.addEventListener('disconnect', (e) => { state.disconnects.push(e.data); });
  es.onmessage = (e) => {
    try {
      state.messages.push({ lastEventId: e.lastEventId, origin: e.origin, ...JSON.parse(e.data) });
    } catch (err) {
      state.badFrames.push(e.data);
    }
    document.getElementById('log').textContent += e.data + '\\n';
  };
};
window.stopSse = () => { if (window.es) window.es.close(); };
</script></body></html>`;

/**
 * A page with a WebSocket client: `wsOpen(url)`, `wsSend(obj)`, `wsClose()`. Every frame is kept
 * in window.state.frames in arrival order, tagged with the connection it came on.
 */
export const WS_PAGE = `<!doctype html>
<html><head><meta charset="utf-8"><title>herald ws</title></head>
<body>
<script>
window.state = { frames: [], connections: 0, closes: [], errors: 0, badFrames: [] };
window.wsOpen = (url) => new Promise((resolve, reject) => {
  const ws = new WebSocket(url);
  const conn = ++state.connections;
  window.ws = ws;
  ws.onopen = () => resolve(conn);
  ws.onerror = () => { state.errors += 1; reject(new Error('websocket error on connection ' + conn)); };
  ws.onclose = (e) => { state.closes.push({ conn, code: e.code, reason: e.reason, wasClean: e.wasClean }); };
  ws.onmessage = (e) => {
    try { state.frames.push({ conn, ...JSON.parse(e.data) }); } catch (err) { state.badFrames.push(String(e.data)); }
  };
});
window.wsSend = (obj) => window.ws.send(JSON.stringify(obj));
window.wsClose = () => new Promise((resolve) => {
  const ws = window.ws;
  if (ws.readyState === WebSocket.CLOSED) return resolve();
  ws.addEventListener('close', () => resolve(), { once: true });
  ws.close(1000, 'bye');
});
</script></body></html>`;
