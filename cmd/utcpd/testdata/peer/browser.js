// A web page attacks a utcpd daemon on loopback, in a real browser
// (Debian's chromium, driven by playwright-core). Used by
// TestSecurityBrowser in cmd/utcpd/security_browser_test.go.
//
// env: DAEMON (http://127.0.0.1:PORT), ATTACKER (the page's server),
// REBIND (a name the browser resolves to 127.0.0.1).
// Prints one JSON object: what each attempt saw from the page's side.
const { chromium } = require('playwright-core');

const daemon = process.env.DAEMON;
const attacker = process.env.ATTACKER;
const rebind = process.env.REBIND;
const port = new URL(daemon).port;

(async () => {
  const browser = await chromium.launch({
    executablePath: '/usr/bin/chromium',
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync',
      `--host-resolver-rules=MAP ${rebind} 127.0.0.1`],
  });
  const out = {};
  const outside = [];
  try {
    const ctx = await browser.newContext();
    ctx.on('request', (r) => {
      const h = new URL(r.url()).hostname;
      if (h !== '127.0.0.1' && h !== rebind) outside.push(r.url());
    });
    const page = await ctx.newPage();

    // 1. The attacker's page, another origin on loopback.
    await page.goto(attacker + '/');
    out.crossOrigin = await page.evaluate(async (d) => {
      const r = {};
      const attempt = async (name, url, init) => {
        try {
          const res = await fetch(url, init);
          r[name] = { type: res.type, status: res.status };
        } catch (e) {
          r[name] = { error: String(e) };
        }
      };
      const body = JSON.stringify({ arguments: {} });
      await attempt('noCorsText', d + '/v1/tools/local.pwn/call', { method: 'POST', mode: 'no-cors', body });
      await attempt('noCorsEmpty', d + '/v1/tools/local.pwn/call', { method: 'POST', mode: 'no-cors' });
      await attempt('corsJSON', d + '/v1/tools/local.pwn/call', { method: 'POST', headers: { 'Content-Type': 'application/json' }, body });
      await attempt('codemode', d + '/v1/codemode', { method: 'POST', mode: 'no-cors', body: JSON.stringify({ code: "return call_tool('local.pwn', {})" }) });
      await attempt('mcp', d + '/mcp', { method: 'POST', mode: 'no-cors', body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'local.pwn', arguments: {} } }) });
      await attempt('admin', d + '/admin/manuals', { method: 'POST', mode: 'no-cors', body: '{}' });
      // A form POST into a frame.
      await new Promise((resolve) => {
        const f = document.createElement('iframe');
        f.name = 'sink';
        f.onload = resolve;
        document.body.appendChild(f);
        const form = document.createElement('form');
        form.method = 'POST';
        form.action = d + '/utcp/call/local.pwn?a=1';
        form.target = 'sink';
        const i = document.createElement('input');
        i.name = 'a';
        i.value = '1';
        form.appendChild(i);
        document.body.appendChild(form);
        form.submit();
        setTimeout(resolve, 3000);
      });
      r.form = { submitted: true };
      return r;
    }, daemon);

    // 2. DNS rebinding: a page whose own name now resolves to 127.0.0.1,
    // at the daemon's port, so that the browser treats the daemon as
    // the page's own origin.
    const rb = `http://${rebind}:${port}`;
    const nav = await page.goto(rb + '/healthz');
    out.rebindNavigation = { status: nav ? nav.status() : 0 };
    out.rebind = await page.evaluate(async () => {
      const res = await fetch('/v1/tools/local.pwn/call', { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ arguments: {} }) });
      return { status: res.status, body: await res.text() };
    });

    // 3. Control: a page of the daemon's own origin may call a tool
    // (local.ok, which leaves its own marker).
    await page.goto(daemon + '/healthz');
    out.sameOrigin = await page.evaluate(async () => {
      const res = await fetch('/v1/tools/local.ok/call', { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ arguments: {} }) });
      return { status: res.status };
    });
  } catch (e) {
    out.error = String(e && e.stack || e);
  } finally {
    out.outside = outside;
    await browser.close();
  }
  process.stdout.write(JSON.stringify(out) + '\n');
})();
