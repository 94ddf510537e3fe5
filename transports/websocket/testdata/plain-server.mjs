// A WebSocket server built on the ws npm package, a third-party WebSocket
// implementation, that answers plain frames as python-utcp's websocket
// protocol expects, for TestNodePeerPlain. It knows nothing of the utcpd
// envelope. It listens on 127.0.0.1 at a free port and prints
// {"port": N, "ws_version": V} as its first line of standard output.
//
// Path / is discovery: a text frame {"type":"utcp"} is answered with the
// bare manual (no envelope), whose tools have their own templates, one URL
// per tool and no envelope. On /<tool> every text frame is the tool's
// arguments as a JSON object, answered by one text frame:
//
//   echo   the arguments, as JSON
//   greet  the text "hello, <name>" (not JSON)
//   count  the numbers 1..n, a frame each, then a normal close (1000)
//
// Run it with NODE_PATH pointing at testdata/peer/node_modules (npm ci
// --prefix transports/websocket/testdata/peer). ES modules ignore
// NODE_PATH, so ws is loaded through createRequire, which honours it.
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
const { WebSocketServer } = require('ws');
const wsVersion = require('ws/package.json').version;

const wss = new WebSocketServer({ host: '127.0.0.1', port: 0 });

const manual = (base) => ({
  utcp_version: '1.1.0',
  manual_version: '1.0.0',
  tools: ['echo', 'greet', 'count'].map((name) => ({
    name,
    description: `The ${name} tool of the plain ws peer.`,
    inputs: { type: 'object' },
    tags: ['peer'],
    tool_call_template: { name: 'plain', call_template_type: 'websocket', url: `${base}/${name}` },
  })),
});

wss.on('connection', (ws, req) => {
  const tool = req.url.replace(/^\/+/, '');
  const base = `ws://${req.headers.host}`;
  ws.on('message', (data, isBinary) => {
    let args;
    try {
      args = JSON.parse(data.toString('utf8'));
    } catch {
      args = undefined;
    }
    if (isBinary || typeof args !== 'object' || args === null) {
      ws.send('expected a JSON object');
      return;
    }
    switch (tool) {
      case '':
        if (args.type === 'utcp') ws.send(JSON.stringify(manual(base)));
        return;
      case 'echo':
        ws.send(JSON.stringify(args));
        return;
      case 'greet':
        ws.send(`hello, ${args.name}`);
        return;
      case 'count':
        for (let i = 1; i <= Number(args.n || 0); i++) ws.send(JSON.stringify(i));
        ws.close(1000, 'done');
        return;
      default:
        ws.send(`no tool ${tool}`);
    }
  });
});

wss.on('listening', () => {
  process.stdout.write(JSON.stringify({ port: wss.address().port, ws_version: wsVersion }) + '\n');
});

// The test stops it with a signal.
for (const sig of ['SIGTERM', 'SIGINT']) process.on(sig, () => process.exit(0));
