// The TypeScript SDK's MCP client (the @modelcontextprotocol/sdk found on
// NODE_PATH) against one Streamable HTTP endpoint, for
// TestServerEverythingTypeScriptClient: it lists the tools and calls a few
// server-everything tools, then prints one JSON object with what it saw.
// Tools are keyed by name; each keeps what a client shows of it.
"use strict";
const { Client } = require("@modelcontextprotocol/sdk/client/index.js");
const { StreamableHTTPClientTransport } = require("@modelcontextprotocol/sdk/client/streamableHttp.js");

async function main() {
  const endpoint = process.argv[2];
  const client = new Client({ name: "utcpd-ts-test", version: "1" });
  await client.connect(new StreamableHTTPClientTransport(new URL(endpoint)));
  const out = { tools: {}, calls: {} };
  let cursor;
  do {
    const page = await client.listTools({ cursor });
    for (const t of page.tools) {
      out.tools[t.name] = { title: t.title ?? null, description: t.description ?? null, annotations: t.annotations ?? null,
        inputSchema: t.inputSchema, outputSchema: t.outputSchema ?? null };
    }
    cursor = page.nextCursor;
  } while (cursor);
  const call = async (name, args, progress) => {
    const seen = [];
    const opts = progress ? { onprogress: (p) => seen.push({ progress: p.progress, total: p.total ?? null, message: p.message ?? null }) } : undefined;
    const res = await client.callTool({ name, arguments: args }, undefined, opts);
    delete res._meta; // the answering server's identity differs by design
    return progress ? { result: res, progress: seen } : res;
  };
  out.calls["get-tiny-image"] = await call("get-tiny-image", {});
  out.calls["get-annotated-message"] = await call("get-annotated-message", { messageType: "success", includeImage: true });
  out.calls["get-structured-content"] = await call("get-structured-content", { location: "Chicago" });
  out.calls["trigger-long-running-operation"] = await call("trigger-long-running-operation", { duration: 1, steps: 2 }, true);
  await client.close();
  process.stdout.write(JSON.stringify(out));
}

main().catch((err) => {
  process.stderr.write(String(err && err.stack || err) + "\n");
  process.exit(1);
});
