// A third-party UTCP client against utcpd's GET /utcp: the TypeScript
// reference client (@utcp/sdk with @utcp/http), unmodified. It registers
// the gateway as one manual named "utcpd", lists the tools, calls a few
// with typed arguments and prints one line of JSON on stdout for the Go
// test (api/utcpmanual/peer_test.go) to check. The client's own log lines
// go to stderr.
//
// Environment: UTCPD_URL (the gateway's base URL) and
// utcpd_UTCPD_API_KEY (the API key; the client namespaces the manual's
// ${UTCPD_API_KEY} by the manual name "utcpd").
import { UtcpClient } from "@utcp/sdk";
import "@utcp/http";

console.log = (...args) => process.stderr.write(args.join(" ") + "\n");

const base = process.env.UTCPD_URL;
if (!base) {
  throw new Error("UTCPD_URL is not set");
}

const client = await UtcpClient.create(process.cwd(), {
  manual_call_templates: [
    {
      name: "utcpd",
      call_template_type: "http",
      http_method: "GET",
      url: base + "/utcp",
      auth: { auth_type: "api_key", api_key: "Bearer ${UTCPD_API_KEY}", var_name: "Authorization", location: "header" },
    },
  ],
});

// failure describes a rejected call: the HTTP status and the error body.
function failure(err) {
  return { status: err?.response?.status ?? null, data: err?.response?.data ?? String(err) };
}

async function attempt(name, args) {
  try {
    return { ok: await client.callTool(name, args) };
  } catch (err) {
    return { error: failure(err) };
  }
}

const tools = (await client.getTools()).map((t) => t.name).sort();
const echoArgs = {
  count: 3,
  ratio: 0.5,
  flag: true,
  label: "héllo wörld & co+[x]",
  tags: ["a", "b,c"],
  ids: [7, 8],
  options: { level: 2, deep: { on: false, name: "12" } },
  config: { nested: { list: [1, null, { z: true }], empty: {} }, s: "x" },
};
const result = {
  tools,
  echo: await attempt("utcpd.typed.echo", echoArgs),
  add: await attempt("utcpd.demo.add", { a: 2, b: 3.5 }),
  weird: await attempt("utcpd.typed.we ird/$HOME{x}", { label: "x" }),
  crash: await attempt("utcpd.typed.crash", { why: "because" }),
  denied: await attempt("utcpd.typed.echo", { count: 13 }),
};
await client.close();
process.stdout.write(JSON.stringify(result) + "\n");
