// A tool server on a third-party WebRTC stack: @roamhq/wrtc, which is
// Chrome's libwebrtc with the browser's RTCPeerConnection API. It speaks
// utcpd's webrtc signaling (POST /signal; /ws with trickled candidates)
// and data-channel envelope exactly as docs/transports.md describes
// them, written from that description alone, so that the Go tests prove
// the protocol works across stacks.
//
// It prints one JSON line {"port": N, "peer_id": "..."} on stdout once
// it listens on 127.0.0.1, and runs until killed. PEER_DEBUG=1 logs each
// message it handles to standard error.
//
// Run it with NODE_PATH pointing at testdata/peer/node_modules (npm ci
// --prefix transports/webrtc/testdata/peer). ES modules ignore NODE_PATH,
// so the packages are loaded through createRequire, which honours it.
import http from 'node:http';
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
const wrtc = require('@roamhq/wrtc');
const { WebSocketServer } = require('ws');

const { RTCPeerConnection } = wrtc;
const PEER_ID = 'wrtc-peer';
const MAX_MESSAGE = 16 * 1024; // the largest data-channel message we send
const stats = { cancelled: 0, calls: 0 };

const manual = {
  utcp_version: '1.0.1',
  manual_version: '1.0.0',
  tools: [
    { name: 'echo', description: 'Echo returns its inputs.', inputs: { type: 'object' } },
    { name: 'add', description: 'Add returns the sum of a and b.', inputs: { type: 'object', properties: { a: { type: 'number' }, b: { type: 'number' } } } },
    { name: 'fail', description: 'Fail reports a tool error.', inputs: { type: 'object' } },
    { name: 'count', description: 'Count streams 1..n.', inputs: { type: 'object', properties: { n: { type: 'integer' } } } },
    { name: 'sleep', description: 'Sleep waits ms milliseconds unless cancelled.', inputs: { type: 'object', properties: { ms: { type: 'integer' } } } },
    { name: 'stats', description: 'Stats reports calls and cancellations seen.', inputs: { type: 'object' } },
  ],
};

// Envelope: whole messages out, split into chunks when too large.
function sendMessage(dc, msg) {
  const bytes = Buffer.from(JSON.stringify(msg), 'utf8');
  if (bytes.length <= MAX_MESSAGE) {
    dc.send(bytes.toString('utf8'));
    return;
  }
  const id = msg.id ?? '';
  const room = MAX_MESSAGE - 100 - Buffer.byteLength(JSON.stringify(id));
  const piece = Math.floor(room / 4) * 3;
  for (let seq = 0, off = 0; off < bytes.length; seq++, off += piece) {
    const part = bytes.subarray(off, off + piece);
    dc.send(JSON.stringify({ type: 'chunk', id, seq, last: off + piece >= bytes.length, data: part.toString('base64') }));
  }
}

function serveChannel(dc) {
  const partial = new Map(); // id -> {next, parts}
  const running = new Map(); // id -> cancel function
  const answer = (msg) => { if (dc.readyState === 'open') sendMessage(dc, msg); };

  function handle(text) {
    let m;
    try { m = JSON.parse(text); } catch { answer({ type: 'tool_error', error: { code: 'invalid_request', message: 'not JSON' } }); return; }
    if (m.type === 'chunk') {
      let p = partial.get(m.id);
      if (m.seq === 0) { p = { next: 0, parts: [] }; partial.set(m.id, p); }
      if (!p || p.next !== m.seq) { partial.delete(m.id); return; }
      p.parts.push(Buffer.from(m.data, 'base64'));
      p.next++;
      if (m.last) { partial.delete(m.id); handle(Buffer.concat(p.parts).toString('utf8')); }
      return;
    }
    const id = m.id;
    if (process.env.PEER_DEBUG) process.stderr.write(`msg ${m.type} ${id} ${m.tool ?? ''}\n`);
    switch (m.type) {
      case 'utcp':
        answer({ type: 'manual', id, manual });
        return;
      case 'cancel': {
        const stop = running.get(id);
        if (stop) stop();
        return;
      }
      case 'tool_call':
        stats.calls++;
        call(id, m.tool, m.inputs ?? {});
        return;
      default:
        answer({ type: 'tool_error', id, error: { code: 'invalid_request', message: `unknown type ${m.type}` } });
    }
  }

  function call(id, tool, inputs) {
    switch (tool) {
      case 'echo': answer({ type: 'tool_response', id, output: inputs }); return;
      case 'add': answer({ type: 'tool_response', id, output: { sum: Number(inputs.a) + Number(inputs.b) } }); return;
      case 'fail': answer({ type: 'tool_error', id, error: { code: 'tool_error', message: String(inputs.message ?? 'failed') } }); return;
      case 'stats': answer({ type: 'tool_response', id, output: { ...stats } }); return;
      case 'count':
        for (let i = 1; i <= Number(inputs.n); i++) answer({ type: 'tool_event', id, event: i });
        answer({ type: 'tool_response', id });
        return;
      case 'sleep': {
        const timer = setTimeout(() => { running.delete(id); answer({ type: 'tool_response', id, output: { slept_ms: inputs.ms } }); }, Number(inputs.ms));
        running.set(id, () => { clearTimeout(timer); running.delete(id); stats.cancelled++; });
        return;
      }
      default:
        answer({ type: 'tool_error', id, error: { code: 'tool_not_found', message: `no tool ${tool}` } });
    }
  }

  dc.onmessage = (ev) => handle(typeof ev.data === 'string' ? ev.data : Buffer.from(ev.data).toString('utf8'));
  dc.onclose = () => { for (const stop of running.values()) stop(); };
}

function newPeer(onCandidate) {
  const pc = new RTCPeerConnection({ iceServers: [] });
  pc.ondatachannel = (ev) => serveChannel(ev.channel);
  pc.onconnectionstatechange = () => {
    if (['failed', 'closed', 'disconnected'].includes(pc.connectionState)) pc.close();
  };
  if (onCandidate) pc.onicecandidate = (ev) => onCandidate(ev.candidate);
  return pc;
}

function gathered(pc) {
  if (pc.iceGatheringState === 'complete') return Promise.resolve();
  return new Promise((resolve) => {
    const check = () => { if (pc.iceGatheringState === 'complete') resolve(); };
    pc.onicegatheringstatechange = check;
    setTimeout(resolve, 5000);
  });
}

const server = http.createServer((req, res) => {
  if (req.method !== 'POST' || req.url !== '/signal') { res.writeHead(404).end(); return; }
  let body = '';
  req.on('data', (d) => { body += d; });
  req.on('end', async () => {
    const reply = (status, msg) => { res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(msg)); };
    let offer;
    try { offer = JSON.parse(body); } catch { reply(400, { type: 'error', error: 'not JSON' }); return; }
    if (offer.type !== 'offer' || offer.peer_id !== PEER_ID) { reply(404, { type: 'error', error: `unknown peer_id ${offer.peer_id}` }); return; }
    const pc = newPeer(null);
    try {
      await pc.setRemoteDescription({ type: 'offer', sdp: offer.sdp });
      await pc.setLocalDescription(await pc.createAnswer());
      await gathered(pc);
      reply(200, { type: 'answer', sdp: pc.localDescription.sdp });
    } catch (err) {
      pc.close();
      reply(400, { type: 'error', error: String(err) });
    }
  });
});

const wss = new WebSocketServer({ server, path: '/ws' });
wss.on('connection', (ws) => {
  let pc = null;
  let answered = false;
  const queued = [];
  const send = (msg) => { if (ws.readyState === 1) ws.send(JSON.stringify(msg)); };
  const local = (c) => {
    const msg = c && c.candidate
      ? { type: 'candidate', candidate: { candidate: c.candidate, sdpMid: c.sdpMid, sdpMLineIndex: c.sdpMLineIndex } }
      : { type: 'candidate' };
    if (answered) send(msg); else queued.push(msg);
  };
  ws.on('message', async (data) => {
    let m;
    try { m = JSON.parse(String(data)); } catch { return; }
    if (m.type === 'offer') {
      if (m.peer_id !== PEER_ID) { send({ type: 'error', error: `unknown peer_id ${m.peer_id}` }); return; }
      pc = newPeer(local);
      await pc.setRemoteDescription({ type: 'offer', sdp: m.sdp });
      await pc.setLocalDescription(await pc.createAnswer());
      send({ type: 'answer', sdp: pc.localDescription.sdp });
      answered = true;
      for (const q of queued.splice(0)) send(q);
    } else if (m.type === 'candidate' && pc && m.candidate && m.candidate.candidate) {
      try { await pc.addIceCandidate(m.candidate); } catch (err) { process.stderr.write(`candidate refused: ${err}\n`); }
    }
  });
});

server.listen(0, '127.0.0.1', () => {
  process.stdout.write(JSON.stringify({ port: server.address().port, peer_id: PEER_ID }) + '\n');
});
