// validate.cjs URL: fetches the OpenAPI description served at URL and
// validates it with @apidevtools/swagger-parser (the OpenAPI schema of its
// version, then the semantic checks: unique operationIds, path parameters,
// $refs). The document is fetched here and handed over parsed, because the
// parser's own resolver refuses loopback URLs. Prints one JSON line:
// {"ok": true, "openapi": "3.1.0", "paths": N} or {"ok": false, "error":
// "..."}; exits 0 when valid, 1 when not, 2 on bad usage.
"use strict";
const SwaggerParser = require("@apidevtools/swagger-parser");

async function main() {
  const url = process.argv[2];
  if (!url) {
    console.error("usage: node validate.cjs URL");
    process.exit(2);
  }
  try {
    const res = await fetch(url);
    if (!res.ok) {
      throw new Error(`GET ${url}: HTTP ${res.status}`);
    }
    const api = await SwaggerParser.validate(await res.json());
    console.log(JSON.stringify({ ok: true, openapi: api.openapi || api.swagger, paths: Object.keys(api.paths || {}).length }));
  } catch (err) {
    console.log(JSON.stringify({ ok: false, error: String(err && err.message ? err.message : err) }));
    process.exit(1);
  }
}

main();
