// The web console end to end, in a real browser (Debian's chromium,
// driven by playwright-core). Used by TestConsoleBrowser in
// cmd/utcpd/console_browser_test.go.
//
// env: DAEMON (http://127.0.0.1:PORT), TOKEN (the admin token), BACKEND
// (the demo HTTP server), SSE (the demo SSE server), ATTACKER (a page of
// another origin), OUT (where the screenshots go).
// Prints one JSON object: what each step saw, the console errors of the
// console's pages, and every request sent off loopback.
const { chromium } = require('playwright-core');
const path = require('path');

const daemon = process.env.DAEMON;
const token = process.env.TOKEN;
const backend = process.env.BACKEND;
const sse = process.env.SSE;
const attacker = process.env.ATTACKER;
const out = process.env.OUT;

const step = async (res, name, fn) => {
  res.steps.push(name);
  try {
    res.seen[name] = await fn();
  } catch (e) {
    throw new Error(`${name}: ${e && e.stack || e}`);
  }
};

(async () => {
  const browser = await chromium.launch({
    executablePath: '/usr/bin/chromium',
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync',
      '--disable-default-apps', '--disable-extensions'],
  });
  const res = { steps: [], seen: {}, consoleErrors: [], outside: [], attackerErrors: [] };
  try {
    const ctx = await browser.newContext({ viewport: { width: 1200, height: 760 } });
    ctx.setDefaultTimeout(20000);
    ctx.on('request', (r) => {
      const u = new URL(r.url());
      if (u.protocol === 'data:' || u.protocol === 'blob:') return;
      if (u.hostname !== '127.0.0.1' && u.hostname !== 'localhost') res.outside.push(r.url());
    });
    const watch = (page) => {
      page.on('console', (m) => {
        if (m.type() !== 'error') return;
        // Attributed to the page it shows on (a page of another origin
        // logs the daemon's refusals of its requests).
        const where = (m.location() && m.location().url) || '';
        (page.url().startsWith(daemon) ? res.consoleErrors : res.attackerErrors).push(`${page.url()} (${where}): ${m.text()}`);
      });
      page.on('pageerror', (e) => {
        (page.url().startsWith(daemon) ? res.consoleErrors : res.attackerErrors).push(`${page.url()}: ${e}`);
      });
      page.on('dialog', (d) => d.accept());
    };
    const shot = (page, name) => page.screenshot({ path: path.join(out, `${name}.png`) });
    const page = await ctx.newPage();
    watch(page);

    await step(res, 'root redirects to the login page', async () => {
      await page.goto(daemon + '/');
      await page.waitForURL(/\/ui\/login/);
      await shot(page, 'login');
      return page.url().replace(daemon, '');
    });

    await step(res, 'log in with the admin token', async () => {
      await page.fill('#token', token);
      await Promise.all([page.waitForURL(/\/ui\/manuals$/), page.click('form.login-form button[type=submit]')]);
      return page.url().replace(daemon, '');
    });

    await step(res, 'register the demo HTTP manual through the form', async () => {
      await page.fill('#add-url input[name=url]', backend + '/utcp');
      await page.selectOption('#add-url select[name=type]', 'http');
      await page.fill('#add-url input[name=name]', 'demo');
      await Promise.all([page.waitForURL(/\/ui\/manual\?name=demo/), page.click('#add-url button[type=submit]')]);
      const flash = await page.textContent('.flash');
      await page.goto(daemon + '/ui/manuals');
      const row = await page.textContent('tr[data-manual="demo"]');
      await shot(page, 'manuals');
      return { flash, row: row.replace(/\s+/g, ' ').trim() };
    });

    await step(res, 'find add by search', async () => {
      await page.goto(daemon + '/ui/tools');
      await page.fill('#q', 'sum two numbers');
      await Promise.all([page.waitForURL(/q=sum/), page.click('form.search button[type=submit]')]);
      const first = await page.getAttribute('table.tools tbody tr:first-child', 'data-tool');
      await Promise.all([page.waitForURL(/\/ui\/tool\?name=demo.add/), page.click('tr[data-tool="demo.add"] a')]);
      return { first };
    });

    await step(res, 'call add through the generated form', async () => {
      const required = await page.$$eval('.field[data-required="true"] > .label', (ls) => ls.map((l) => l.textContent.trim()));
      await page.fill('.field[data-name="a"] input.value', '2');
      await page.fill('.field[data-name="b"] input.value', '3');
      await page.click('#call-button');
      await page.waitForSelector('#result .tree');
      const result = (await page.textContent('#result .tree')).replace(/\s+/g, ' ').trim();
      await shot(page, 'tool');
      return { required, result };
    });

    await step(res, 'a form generated from a rich schema sends what was typed', async () => {
      const manual = { utcp_version: '1.1.0', tools: [{
        name: 'report', description: 'Files a report (echoed back by the demo server).', tags: ['forms'],
        inputs: { type: 'object', required: ['title', 'count', 'mode'], properties: {
          title: { type: 'string', description: 'what the report is about' },
          count: { type: 'integer', minimum: 1 },
          ratio: { type: 'number' },
          loud: { type: 'boolean' },
          mode: { enum: ['fast', 'slow'] },
          tags: { type: 'array', items: { type: 'string' } },
          points: { type: 'array', items: { type: 'object', required: ['x', 'y'], properties: { x: { type: 'number' }, y: { type: 'number' } } } },
          owner: { type: 'object', required: ['name'], properties: { name: { type: 'string' }, admin: { type: 'boolean' } } } } },
        tool_call_template: { call_template_type: 'http', http_method: 'GET', url: backend + '/tools/echo' } }] };
      await page.goto(daemon + '/ui/manuals');
      await page.fill('#add-template textarea[name=template]', JSON.stringify({ name: 'forms', call_template_type: 'text',
        content: JSON.stringify(manual), allowed_communication_protocols: ['text', 'http'] }, null, 2));
      await Promise.all([page.waitForURL(/\/ui\/manual\?name=forms/), page.click('#add-template button[type=submit]')]);
      await page.goto(daemon + '/ui/tool?name=forms.report');
      await page.fill('.field[data-name="title"] input.value', 'Quarterly report');
      await page.fill('.field[data-name="count"] input.value', '3');
      await page.selectOption('.field[data-name="loud"] select.value', 'true');
      await page.selectOption('.field[data-name="mode"] select.value', '"slow"');
      await page.click('.field[data-name="tags"] > button.add');
      await page.click('.field[data-name="tags"] > button.add');
      await page.click('.field[data-name="tags"] > button.add');
      const tags = page.locator('.field[data-name="tags"] > ol.items > li.item input.value');
      await tags.nth(0).fill('a');
      await tags.nth(1).fill('b');
      await page.click('.field[data-name="tags"] > ol.items > li.item:nth-child(3) > button.remove');
      await page.click('.field[data-name="points"] > button.add');
      await page.fill('.field[data-name="points"] li.item .field[data-name="x"] input.value', '1.5');
      await page.fill('.field[data-name="points"] li.item .field[data-name="y"] input.value', '-2');
      await page.fill('.field[data-name="owner"] .field[data-name="name"] input.value', 'ann');
      await page.click('#call-button');
      await page.waitForFunction(() => /done/.test(document.getElementById('call-status').textContent));
      await page.locator('#call-form').screenshot({ path: path.join(out, 'form.png') });
      return { sent: JSON.parse(await page.inputValue('#raw-args')), result: (await page.textContent('#result .tree')).replace(/\s+/g, ' ').trim() };
    });

    await step(res, 'register the demo SSE manual by pasting its template', async () => {
      await page.goto(daemon + '/ui/manuals');
      await page.fill('#add-template textarea[name=template]', JSON.stringify({ name: 'live', call_template_type: 'sse', url: sse + '/utcp' }, null, 2));
      await Promise.all([page.waitForURL(/\/ui\/manual\?name=live/), page.click('#add-template button[type=submit]')]);
      return { flash: await page.textContent('.flash') };
    });

    await step(res, 'stream count event by event', async () => {
      await page.goto(daemon + '/ui/tool?name=live.count');
      await page.fill('.field[data-name="n"] input.value', '3');
      await page.fill('.field[data-name="delay_ms"] input.value', '50');
      await page.click('#stream-button');
      await page.waitForFunction(() => /stream ended/.test(document.getElementById('call-status').textContent));
      const events = await page.$$eval('#result ol.events > li', (ls) => ls.map((l) => l.querySelector('.tree').textContent.trim()));
      return { events, status: await page.textContent('#call-status') };
    });

    await step(res, 'MCP content blocks render as an image and text', async () => {
      // echo answers its arguments: here an MCP tool result's content.
      const png = 'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==';
      await page.goto(daemon + '/ui/tool?name=live.echo');
      await page.fill('.field[data-kind="object"] > label.more > textarea.extra', JSON.stringify({ content: [
        { type: 'image', data: png, mimeType: 'image/png' },
        { type: 'text', text: 'a caption\non two lines' },
        { type: 'image', data: '<script>', mimeType: 'image/png' },
        { type: 'image', data: png, mimeType: 'text/html' }] }));
      await page.click('#call-button');
      await page.waitForSelector('#result .tree');
      await page.waitForFunction(() => { const i = document.querySelector('#result img.content'); return i && i.complete; });
      return {
        images: await page.$$eval('#result img.content', (is) => is.map((i) => ({ w: i.naturalWidth, src: i.src.slice(0, 22) }))),
        text: await page.$$eval('#result pre.text', (ps) => ps.map((p) => p.textContent)),
        scripts: await page.$$eval('#result script', (s) => s.length),
      };
    });

    await step(res, 'a policy sends echo to review; approve it from the Reviews page', async () => {
      await page.goto(daemon + '/ui/tool?name=demo.echo');
      await page.fill('.field[data-kind="object"] > label.more > textarea.extra', JSON.stringify({ message: 'hello from the console', api_key: 'sk-live-console-secret-0123456789abcdef' }));
      await page.click('#call-button');
      await page.waitForFunction(() => /review/.test(document.getElementById('call-status').textContent));
      const reviews = await ctx.newPage();
      watch(reviews);
      await reviews.goto(daemon + '/ui/reviews');
      await reviews.waitForSelector('article.review[data-tool="demo.echo"]');
      const card = (await reviews.textContent('article.review[data-tool="demo.echo"]')).replace(/\s+/g, ' ').trim();
      await reviews.fill('article.review[data-tool="demo.echo"] textarea[name=note]', 'looks fine');
      await shot(reviews, 'reviews');
      await Promise.all([reviews.waitForURL(/\/ui\/reviews$/), reviews.click('article.review[data-tool="demo.echo"] button.approve')]);
      const flash = await reviews.textContent('.flash');
      const history = (await reviews.textContent('table.history tbody')).replace(/\s+/g, ' ').trim();
      await reviews.close();
      await page.waitForFunction(() => /done/.test(document.getElementById('call-status').textContent));
      const result = (await page.textContent('#result .tree')).replace(/\s+/g, ' ').trim();
      return { card, flash, history, result };
    });

    await step(res, 'the calls in Audit', async () => {
      await page.goto(daemon + '/ui/audit');
      await page.fill('form.filters input[name=manual]', 'demo');
      await page.fill('form.filters input[name=principal]', 'utcpd-admin');
      await Promise.all([page.waitForURL(/manual=demo/), page.click('form.filters button[type=submit]')]);
      const rows = await page.$$eval('table.audit tbody tr', (rs) => rs.map((r) => ({ tool: r.dataset.tool, outcome: r.dataset.outcome, text: r.textContent.replace(/\s+/g, ' ').trim() })));
      await shot(page, 'audit');
      return { rows };
    });

    await step(res, 'Traffic, live', async () => {
      await page.goto(daemon + '/ui/traffic?window=1m');
      await page.waitForSelector('#live-status.on');
      // More calls, as the console's script makes them (one tool error
      // in eight): the live panel shows them without a reload.
      const calls = () => page.evaluate(() => Number(document.querySelector('ul.totals li strong').textContent));
      const before = await calls();
      const made = await page.evaluate(async () => {
        const csrf = document.querySelector('meta[name="csrf-token"]').content;
        let ok = 0;
        for (let i = 0; i < 24; i++) {
          const fail = i % 8 === 7;
          const res = await fetch(`/ui/call?name=${fail ? 'demo.fail' : 'demo.add'}`, {
            method: 'POST', headers: { 'Content-Type': 'application/json', Accept: 'application/json', 'X-CSRF-Token': csrf },
            body: JSON.stringify({ arguments: fail ? { message: 'a planned failure' } : { a: i, b: 1 } }) });
          if (res.ok) ok++;
        }
        return ok;
      });
      await page.waitForFunction((n) => Number(document.querySelector('ul.totals li strong').textContent) >= n, before + 24);
      const charts = await page.$$eval('svg.chart', (s) => s.length);
      const tools = await page.$$eval('table.traffic tbody tr', (rs) => rs.map((r) => r.dataset.tool));
      const errors = await page.textContent('tr[data-tool="demo.fail"] td:nth-child(4)');
      await shot(page, 'traffic');
      return { before, after: await calls(), made, charts, tools, errors };
    });

    await step(res, 'a page of another origin cannot drive the console', async () => {
      const evil = await ctx.newPage();
      watch(evil);
      await evil.goto(attacker + '/');
      const r = await evil.evaluate(async (d) => {
        const seen = {};
        const attempt = async (name, url, init) => {
          try {
            const res = await fetch(url, init);
            seen[name] = { type: res.type, status: res.status };
          } catch (e) {
            seen[name] = { error: String(e) };
          }
        };
        await attempt('noCorsForm', d + '/ui/manuals', { method: 'POST', mode: 'no-cors', credentials: 'include',
          headers: { 'Content-Type': 'application/x-www-form-urlencoded' }, body: 'mode=url&type=http&name=evil&url=' + encodeURIComponent(d + '/utcp') });
        await attempt('corsCall', d + '/ui/call?name=demo.add', { method: 'POST', credentials: 'include',
          headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ arguments: { a: 40, b: 2 } }) });
        await new Promise((resolve) => {
          const f = document.createElement('iframe');
          f.name = 'sink';
          document.body.appendChild(f);
          const form = document.createElement('form');
          form.method = 'POST';
          form.action = d + '/ui/manual/delete';
          form.target = 'sink';
          const i = document.createElement('input');
          i.name = 'name';
          i.value = 'demo';
          form.appendChild(i);
          document.body.appendChild(form);
          f.onload = resolve;
          form.submit();
          setTimeout(resolve, 3000);
        });
        seen.formDelete = { submitted: true };
        return seen;
      }, daemon);
      await evil.close();
      return r;
    });

    await step(res, 'the console still works after the attempts', async () => {
      await page.goto(daemon + '/ui/manuals');
      return { demo: (await page.$('tr[data-manual="demo"]')) !== null, evil: (await page.$('tr[data-manual="evil"]')) !== null };
    });
  } catch (e) {
    res.error = String(e && e.stack || e);
  } finally {
    await browser.close();
  }
  process.stdout.write(JSON.stringify(res) + '\n');
})();
