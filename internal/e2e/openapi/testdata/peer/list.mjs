// The official TypeScript MCP SDK client (@modelcontextprotocol/sdk,
// unmodified) against utcpd's MCP front: it connects over Streamable HTTP
// to MCP_URL, lists every tool page by page (the SDK compiles each listed
// outputSchema with Ajv while it does, and throws on one it cannot
// compile), and prints one line of JSON on stdout for the Go test
// (internal/e2e/openapi) to check: the tool names, how many have an
// output schema, and the annotations listed.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

console.log = (...args) => process.stderr.write(args.join(" ") + "\n");
console.warn = console.log;

const url = process.env.MCP_URL;
if (!url) {
  throw new Error("MCP_URL is not set");
}

const client = new Client({ name: "utcpd-openapi-test", version: "1.0.0" });
await client.connect(new StreamableHTTPClientTransport(new URL(url)));

const result = { names: [], outputSchemas: 0, readOnly: [], destructive: [], pages: 0 };
let cursor;
try {
  do {
    const page = await client.listTools(cursor ? { cursor } : {});
    result.pages++;
    for (const tool of page.tools) {
      result.names.push(tool.name);
      if (tool.outputSchema) result.outputSchemas++;
      if (tool.annotations?.readOnlyHint) result.readOnly.push(tool.name);
      if (tool.annotations?.destructiveHint) result.destructive.push(tool.name);
    }
    cursor = page.nextCursor;
  } while (cursor);
} catch (err) {
  result.error = String(err?.message ?? err);
}
await client.close();
process.stdout.write(JSON.stringify(result) + "\n");
