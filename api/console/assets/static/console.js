// utcpd web console: the one script of the console, written for it (no
// framework, no third-party code). It reads the generated tool forms into
// arguments, calls tools and renders their results (a JSON tree, MCP
// image content as images, text), streams event by event, and keeps the
// Traffic page live. Every text is put in with textContent: nothing a
// tool returns is parsed as HTML.
'use strict';

(() => {
  const csrf = () => {
    const m = document.querySelector('meta[name="csrf-token"]');
    return m ? m.content : '';
  };
  const el = (tag, cls, text) => {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined) e.textContent = text;
    return e;
  };

  // ---- confirmations ----
  document.addEventListener('submit', (e) => {
    const b = e.submitter;
    if (b && b.dataset.confirm && !window.confirm(b.dataset.confirm)) e.preventDefault();
  });

  // ---- reading a generated form ----
  const labelOf = (f) => f.dataset.name || 'the value';
  const fieldsOf = (box) => Array.from(box ? box.children : []).filter((c) => c.classList.contains('field'));

  const parseJSON = (text, what) => {
    try {
      return JSON.parse(text);
    } catch (err) {
      throw new Error(`${what}: not valid JSON (${err.message})`);
    }
  };

  // read returns {set, value} for one field: set is false for an
  // optional field left empty (its property is left out).
  const read = (f) => {
    const kind = f.dataset.kind;
    const required = f.dataset.required === 'true';
    const input = f.querySelector(':scope > .value');
    switch (kind) {
      case 'object': {
        const obj = {};
        for (const c of fieldsOf(f.querySelector(':scope > .fields'))) {
          const r = read(c);
          if (r.set) obj[c.dataset.name] = r.value;
        }
        const extra = f.querySelector(':scope > label.more > textarea.extra');
        if (extra && extra.value.trim() !== '') {
          const x = parseJSON(extra.value, `${labelOf(f)} (further properties)`);
          if (x === null || typeof x !== 'object' || Array.isArray(x)) throw new Error(`${labelOf(f)}: further properties must be a JSON object`);
          Object.assign(obj, x);
        }
        return { set: required || Object.keys(obj).length > 0, value: obj };
      }
      case 'array': {
        const arr = [];
        for (const li of f.querySelectorAll(':scope > ol.items > li.item')) {
          const r = read(li.querySelector(':scope > .field'));
          if (r.set) arr.push(r.value);
        }
        return { set: required || arr.length > 0, value: arr };
      }
      case 'string':
        return { set: input.value !== '' || required, value: input.value };
      case 'number':
      case 'integer': {
        const v = input.value.trim();
        if (v === '') return { set: false };
        const n = Number(v);
        if (!Number.isFinite(n)) throw new Error(`${labelOf(f)}: ${v} is not a number`);
        if (kind === 'integer' && !Number.isInteger(n)) throw new Error(`${labelOf(f)}: ${v} is not an integer`);
        return { set: true, value: n };
      }
      case 'boolean':
        if (input.type === 'checkbox') return { set: true, value: input.checked };
        return input.value === '' ? { set: false } : { set: true, value: input.value === 'true' };
      case 'enum':
        return input.value === '' ? { set: false } : { set: true, value: JSON.parse(input.value) };
      default: {
        const v = input.value.trim();
        return v === '' ? { set: false } : { set: true, value: parseJSON(v, labelOf(f)) };
      }
    }
  };

  const addItem = (arr) => {
    const tpl = arr.querySelector(':scope > template.item-template');
    const list = arr.querySelector(':scope > ol.items');
    if (!tpl || !list) return;
    const frag = tpl.content.cloneNode(true);
    const li = frag.querySelector('li.item');
    list.appendChild(frag);
    if (li) initArrays(li);
  };
  const initArrays = (root) => {
    for (const arr of root.querySelectorAll('.field.array')) {
      const n = Number(arr.dataset.min || 0);
      for (let i = arr.querySelectorAll(':scope > ol.items > li.item').length; i < n; i++) addItem(arr);
    }
  };

  // ---- rendering values ----
  const imageTypes = /^image\/(png|jpeg|gif|webp)$/;
  const base64 = /^[A-Za-z0-9+/\r\n]*={0,2}$/;
  const maxNodes = 5000;

  const isImage = (v) => v && typeof v === 'object' && v.type === 'image' && typeof v.data === 'string' &&
    typeof v.mimeType === 'string' && imageTypes.test(v.mimeType) && base64.test(v.data);
  const isText = (v) => v && typeof v === 'object' && !Array.isArray(v) && v.type === 'text' && typeof v.text === 'string';

  const tree = (v) => {
    let budget = maxNodes;
    const node = (x, depth) => {
      if (--budget < 0) return el('span', 'null', '…');
      if (x === null) return el('span', 'null', 'null');
      switch (typeof x) {
        case 'string':
          return x.includes('\n') ? el('pre', 'text', x) : el('span', 'str', JSON.stringify(x));
        case 'number':
          return el('span', 'num', String(x));
        case 'boolean':
          return el('span', 'bool', String(x));
      }
      if (isImage(x)) {
        const box = el('div', 'image');
        const img = el('img', 'content');
        img.alt = `image (${x.mimeType})`;
        img.src = `data:${x.mimeType};base64,${x.data.replace(/[\r\n]/g, '')}`;
        box.appendChild(img);
        return box;
      }
      if (isText(x)) return el('pre', 'text', x.text);
      const isArr = Array.isArray(x);
      const keys = isArr ? x.map((_, i) => i) : Object.keys(x);
      const d = el('details');
      d.open = depth < 3;
      const n = keys.length;
      d.appendChild(el('summary', '', isArr ? `[${n} ${n === 1 ? 'item' : 'items'}]` : `{${n} ${n === 1 ? 'key' : 'keys'}}`));
      const ul = el('ul');
      for (const k of keys) {
        const li = el('li');
        if (!isArr) li.appendChild(el('span', 'key', `${k}: `));
        li.appendChild(node(x[k], depth + 1));
        ul.appendChild(li);
      }
      d.appendChild(ul);
      return d;
    };
    const box = el('div', 'tree');
    box.appendChild(node(v, 0));
    return box;
  };

  const problem = (env) => {
    const e = (env && env.error) || { code: 'internal', message: 'no answer', details: {} };
    const box = el('div', 'problem');
    box.setAttribute('role', 'alert');
    const p = el('p');
    p.appendChild(el('strong', 'code', e.code));
    p.appendChild(document.createTextNode(' '));
    p.appendChild(el('span', 'message', e.message));
    box.appendChild(p);
    const keys = Object.keys(e.details || {});
    if (keys.length) {
      const dl = el('dl', 'details');
      for (const k of keys) {
        dl.appendChild(el('dt', '', k));
        const v = e.details[k];
        dl.appendChild(el('dd', '', typeof v === 'string' ? v : JSON.stringify(v)));
      }
      box.appendChild(dl);
    }
    return box;
  };

  const rawView = (v) => {
    const d = el('details', 'raw');
    d.appendChild(el('summary', '', 'raw JSON'));
    d.appendChild(el('pre', 'json', JSON.stringify(v, null, 2)));
    return d;
  };

  // ---- calling a tool ----
  const post = (path, args) => fetch(path, {
    method: 'POST',
    credentials: 'same-origin',
    headers: { 'Content-Type': 'application/json', Accept: 'application/json', 'X-CSRF-Token': csrf() },
    body: JSON.stringify({ arguments: args }),
  });

  const answerError = async (res) => {
    let env;
    try {
      env = await res.json();
    } catch (err) {
      env = { error: { code: 'internal', message: `HTTP ${res.status}`, details: {} } };
    }
    return problem(env);
  };

  const form = document.getElementById('call-form');
  if (form) {
    const root = form.querySelector(':scope > .field');
    const raw = document.getElementById('raw-args');
    const rawBox = form.querySelector('details.raw');
    const result = document.getElementById('result');
    const status = document.getElementById('call-status');
    const buttons = form.querySelectorAll('.buttons button');
    const tool = form.dataset.tool;
    initArrays(form);

    form.addEventListener('click', (e) => {
      const b = e.target.closest('button');
      if (!b) return;
      if (b.classList.contains('add')) {
        addItem(b.closest('.field.array'));
      } else if (b.classList.contains('remove')) {
        b.closest('li.item').remove();
      }
    });

    const busy = (on, text) => {
      for (const b of buttons) b.disabled = on;
      status.textContent = text || '';
    };

    const call = async (args) => {
      const t0 = performance.now();
      const res = await post(`/ui/call?name=${encodeURIComponent(tool)}`, args);
      const ms = Math.round(performance.now() - t0);
      result.replaceChildren();
      if (!res.ok) {
        result.appendChild(await answerError(res));
        return `failed after ${ms} ms`;
      }
      const ans = await res.json();
      const line = el('p', ans.is_error ? 'outcome-line is-error' : 'outcome-line', ans.is_error ? 'The tool reported an error:' : 'Result:');
      result.appendChild(line);
      if (ans.is_error && ans.error) result.appendChild(problem({ error: ans.error }));
      result.appendChild(tree(ans.result));
      result.appendChild(rawView(ans.result));
      return `${ans.is_error ? 'tool error' : 'done'} in ${ms} ms`;
    };

    const stream = async (args) => {
      const res = await post(`/ui/stream?name=${encodeURIComponent(tool)}`, args);
      result.replaceChildren();
      if (!res.ok) {
        result.appendChild(await answerError(res));
        return 'failed';
      }
      result.appendChild(el('p', 'outcome-line', 'Events:'));
      const list = el('ol', 'events');
      result.appendChild(list);
      const reader = res.body.getReader();
      const dec = new TextDecoder();
      let buf = '';
      let n = 0;
      let outcome = 'the stream ended early';
      const handle = (line) => {
        if (!line.trim()) return;
        const msg = JSON.parse(line);
        if (msg.event) {
          n++;
          const li = el('li', 'event');
          li.appendChild(el('span', 'n', `#${n}${msg.event.type ? ' ' + msg.event.type : ''}`));
          li.appendChild(tree(msg.event.data));
          list.appendChild(li);
          status.textContent = `${n} events…`;
        } else if (msg.end) {
          outcome = `stream ended after ${n} events`;
        } else if (msg.error) {
          result.appendChild(problem({ error: msg.error }));
          outcome = `stream failed after ${n} events`;
        }
      };
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buf += dec.decode(value, { stream: true });
        let i;
        while ((i = buf.indexOf('\n')) >= 0) {
          handle(buf.slice(0, i));
          buf = buf.slice(i + 1);
        }
      }
      handle(buf);
      return outcome;
    };

    form.addEventListener('submit', async (e) => {
      e.preventDefault();
      const mode = e.submitter && e.submitter.value === 'stream' ? 'stream' : 'call';
      let args;
      try {
        if (rawBox.open && raw.value.trim() !== '') {
          args = parseJSON(raw.value, 'arguments');
        } else {
          args = read(root).value;
        }
        if (args === null || typeof args !== 'object' || Array.isArray(args)) throw new Error('the arguments must be a JSON object');
      } catch (err) {
        result.replaceChildren(problem({ error: { code: 'invalid_arguments', message: err.message, details: {} } }));
        return;
      }
      if (!rawBox.open) raw.value = JSON.stringify(args, null, 2);
      busy(true, mode === 'stream' ? 'streaming…' : 'calling… (a call a guard sends to review waits for the decision)');
      try {
        status.textContent = await (mode === 'stream' ? stream(args) : call(args));
      } catch (err) {
        result.replaceChildren(problem({ error: { code: 'transport_error', message: String(err), details: {} } }));
        status.textContent = '';
      } finally {
        for (const b of buttons) b.disabled = false;
      }
    });
  }

  // ---- live traffic ----
  const panel = document.getElementById('traffic-panel');
  if (panel && window.EventSource) {
    const live = document.getElementById('live-status');
    const es = new EventSource(panel.dataset.events);
    es.addEventListener('panel', (e) => {
      const d = JSON.parse(e.data);
      // Rendered by the daemon's html/template: every text in it is
      // escaped there.
      panel.innerHTML = d.html;
      if (live) live.classList.add('on');
    });
    es.addEventListener('error', () => {
      if (live) live.classList.remove('on');
    });
    window.addEventListener('pagehide', () => es.close());
  }
})();
