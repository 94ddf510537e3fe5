// A utcpd-envelope WebSocket server built on the ws npm package, a
// third-party WebSocket implementation, for TestNodePeer. It listens on
// 127.0.0.1 at a free port and prints {"port": N, "ws_version": V} as its
// first line of standard output.
//
// Tools: echo (result: the arguments), count (event frames 1..n, then end),
// fail (an error frame with code tool_error and the given message); any
// other name is answered with code tool_not_found. It selects the
// subprotocol "utcpd.v1" when offered and refuses any other.
//
// Run it with NODE_PATH pointing at testdata/peer/node_modules (npm ci
// --prefix transports/websocket/testdata/peer). ES modules ignore
// NODE_PATH, so ws is loaded through createRequire, which honours it.
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
const { WebSocketServer } = require('ws');
const wsVersion = require('ws/package.json').version;

const tools = ['echo', 'count', 'fail'].map((name) => ({
  name,
  description: `The ${name} tool of the ws peer.`,
  inputs: { type: 'object' },
  tags: ['peer'],
}));

const wss = new WebSocketServer({
  host: '127.0.0.1',
  port: 0,
  handleProtocols: (protocols) => (protocols.has('utcpd.v1') ? 'utcpd.v1' : false),
});

wss.on('connection', (ws) => {
  const send = (frame) => ws.send(JSON.stringify(frame));
  ws.on('message', (data, isBinary) => {
    let f;
    try {
      f = JSON.parse(data.toString('utf8'));
    } catch {
      send({ type: 'error', error: { code: 'invalid_request', message: 'not JSON' } });
      return;
    }
    if (isBinary || typeof f !== 'object' || f === null) {
      send({ type: 'error', error: { code: 'invalid_request', message: 'not an envelope' } });
      return;
    }
    const { id } = f;
    switch (f.type) {
      case 'utcp':
        send({ type: 'manual', id, manual: { utcp_version: '1.1.0', manual_version: '1.0.0', tools } });
        return;
      case 'cancel':
        return;
      case 'call':
        break;
      default:
        send({ type: 'error', id, error: { code: 'invalid_request', message: `unknown type ${f.type}` } });
        return;
    }
    const args = f.arguments || {};
    switch (f.tool) {
      case 'echo':
        send({ type: 'result', id, result: args });
        return;
      case 'count':
        for (let i = 1; i <= Number(args.n || 0); i++) send({ type: 'event', id, data: i });
        send({ type: 'end', id });
        return;
      case 'fail':
        send({ type: 'error', id, error: { code: 'tool_error', message: String(args.message || 'failed') } });
        return;
      default:
        send({ type: 'error', id, error: { code: 'tool_not_found', message: `no tool ${f.tool}` } });
    }
  });
});

wss.on('listening', () => {
  process.stdout.write(JSON.stringify({ port: wss.address().port, ws_version: wsVersion }) + '\n');
});

// The test stops it with a signal.
for (const sig of ['SIGTERM', 'SIGINT']) process.on(sig, () => process.exit(0));
