// The ptepack viewer's page (issue 26). scripts/build-web.sh appends this file to Emscripten's
// loader (which defines createPtepack) to make build-web/ptepack.js.
//
// Files are read here by slices (Blob.slice): the first 64 bytes, then the leading bytes the
// reader needs (headers and flatbuffer; LeadingBytesNeeded in serialize/read/leading_bytes.h
// says how many), or the whole file when it is at most WHOLE_LIMIT bytes. The WebAssembly
// module (web/ptepack_web.cpp) judges and describes them with ptepack's own code and returns
// one JSON document per file; every view below is drawn from that JSON. Nothing is parsed
// here: no second reader.
'use strict';
(function () {
  // Files up to this size are read whole: the config inference (inspect's "config") reads
  // segment data. Larger files: only their leading bytes.
  const WHOLE_LIMIT = 64 * 1024 * 1024;
  // More than this in WebAssembly memory (2 GiB at most) is refused with a message.
  const MAX_READ = 1536 * 1024 * 1024;
  // The views the page knows, in order. A view the module does not return is "not in this
  // build"; one it returns that is not listed here is drawn as tables after these.
  const VIEWS = [
    { name: 'inspect', title: 'Inspect' },
    { name: 'verify', title: 'Verify' },
    { name: 'size', title: 'Size' },
    { name: 'map', title: 'Byte map' },
    { name: 'graph', title: 'Graph' },
    { name: 'plan', title: 'Memory plan' },
  ];
  const params = new URLSearchParams(location.search);
  // ?leading=1: read every file by its leading bytes, however small (the browser test uses it).
  const forceLeading = params.get('leading') === '1';

  const $ = (sel) => document.querySelector(sel);
  const state = { module: null, docs: [], current: 0, view: 'inspect', result: null, busy: false };
  // For tests and the curious: what the page last read and showed.
  window.ptepackViewer = state;

  // ---- Small DOM helpers.
  function el(tag, attrs, ...children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === undefined || v === null || v === false) continue;
      if (k === 'class') e.className = v;
      else if (k === 'text') e.textContent = v;
      else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
      else e.setAttribute(k, v === true ? '' : String(v));
    }
    for (const c of children.flat()) {
      if (c === null || c === undefined || c === false) continue;
      e.append(c instanceof Node ? c : document.createTextNode(String(c)));
    }
    return e;
  }
  const fmt = (n) => (typeof n === 'number' ? n.toLocaleString('en-US') : n);
  function human(n) {
    if (typeof n !== 'number') return String(n);
    const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
    let i = 0;
    let v = n;
    while (v >= 1024 && i < units.length - 1) { v /= 1024; ++i; }
    return i === 0 ? `${n} B` : `${v.toFixed(1)} ${units[i]}`;
  }
  const shape = (s) => (Array.isArray(s) ? `[${s.join(', ')}]` : s === undefined ? '' : String(s));
  function cellText(v) {
    if (v === null || v === undefined) return '';
    if (Array.isArray(v)) return v.every((x) => typeof x !== 'object') ? shape(v) : `${v.length} items`;
    if (typeof v === 'object') return JSON.stringify(v);
    return String(v);
  }

  // A table whose columns sort when their header is clicked (numbers as numbers).
  // columns: [{key, title, num, render(row) -> Node|string, value(row) -> sort key}]
  function sortableTable(columns, rows, opts = {}) {
    const table = el('table', { class: opts.class, 'data-table': opts.name });
    const thead = el('thead');
    const tbody = el('tbody');
    let sortKey = opts.sortKey;
    let desc = opts.desc !== false;
    const valueOf = (c, r) => (c.value ? c.value(r) : r[c.key]);
    function fill() {
      tbody.textContent = '';
      let list = rows.slice();
      const col = columns.find((c) => c.key === sortKey);
      if (col) {
        list.sort((a, b) => {
          const x = valueOf(col, a);
          const y = valueOf(col, b);
          const r = typeof x === 'number' && typeof y === 'number' ? x - y : String(x ?? '').localeCompare(String(y ?? ''));
          return desc ? -r : r;
        });
      }
      for (const r of list) {
        const tr = el('tr', opts.rowAttrs ? opts.rowAttrs(r) : {});
        for (const c of columns) {
          const v = c.render ? c.render(r) : c.num ? fmt(r[c.key]) : cellText(r[c.key]);
          tr.append(el('td', { class: c.num ? 'num' : c.mono ? 'mono' : undefined }, v));
        }
        tbody.append(tr);
      }
    }
    const hr = el('tr');
    for (const c of columns) {
      const th = el('th', {
        class: `sortable${c.num ? ' num' : ''}`,
        'data-key': c.key,
        title: 'sort',
        onclick: () => {
          desc = sortKey === c.key ? !desc : !!c.num;
          sortKey = c.key;
          fill();
        },
      }, c.title);
      hr.append(th);
    }
    thead.append(hr);
    table.append(thead, tbody);
    fill();
    return table;
  }

  function kvTable(obj, name) {
    const t = el('table', { class: 'kv', 'data-table': name });
    for (const [k, v] of Object.entries(obj)) {
      if (v !== null && typeof v === 'object' && !Array.isArray(v)) continue;
      t.append(el('tr', {}, el('td', {}, k), el('td', { class: 'mono' }, typeof v === 'number' ? fmt(v) : cellText(v))));
    }
    return t;
  }

  // Any JSON as headings, key/value tables and tables of arrays of objects (views the page has
  // no drawing of its own for, such as the memory plan once the module returns it).
  function genericJson(v, title, depth = 0) {
    const box = el('div');
    if (title) box.append(el(depth === 0 ? 'h2' : 'h3', {}, title));
    if (Array.isArray(v)) {
      if (v.length && v.every((x) => x && typeof x === 'object' && !Array.isArray(x))) {
        const keys = [];
        for (const r of v) for (const k of Object.keys(r)) if (!keys.includes(k) && typeof r[k] !== 'object') keys.push(k);
        const numeric = (k) => v.every((r) => r[k] === undefined || typeof r[k] === 'number');
        box.append(sortableTable(keys.map((k) => ({ key: k, title: k, num: numeric(k) })), v, { name: title }));
        v.forEach((r, i) => {
          for (const [k, sub] of Object.entries(r)) {
            if (sub && typeof sub === 'object' && depth < 3) box.append(genericJson(sub, `${title || ''}[${i}].${k}`, depth + 1));
          }
        });
      } else {
        box.append(el('div', { class: 'mono' }, v.map(cellText).join(', ')));
      }
    } else if (v && typeof v === 'object') {
      box.append(kvTable(v, title));
      for (const [k, sub] of Object.entries(v)) {
        if (sub && typeof sub === 'object' && depth < 4) box.append(genericJson(sub, k, depth + 1));
      }
    } else {
      box.append(el('div', { class: 'mono' }, cellText(v)));
    }
    return box;
  }

  function errorBox(err, what) {
    const e = err && err.error ? err.error : err;
    return el('div', { class: 'errorbox', 'data-error': e.code || 'error' },
      el('b', {}, `${what ? what + ': ' : ''}${e.code || 'error'}`), ' ', e.message || String(e),
      e.offset !== undefined ? ` (offset ${fmt(e.offset)})` : '');
  }

  // ---- Findings: a table with offsets that jump to the byte map.
  function findingsTable(findings) {
    return sortableTable([
      { key: 'severity', title: 'severity', render: (f) => el('span', { class: `sev-${f.severity}` }, f.severity) },
      { key: 'code', title: 'code', mono: true },
      { key: 'file', title: 'file', render: (f) => (f.file || '').split('/').pop() },
      { key: 'offset', title: 'offset', num: true, value: (f) => (f.offset === undefined ? -1 : f.offset),
        render: (f) => (f.offset === undefined ? '' : el('a', { class: 'offset', 'data-offset': f.offset,
          onclick: () => showOffset(f.file, f.offset) }, fmt(f.offset))) },
      { key: 'message', title: 'message' },
      { key: 'expected', title: 'expected', mono: true },
      { key: 'found', title: 'found', mono: true },
    ], findings, {
      name: 'findings',
      rowAttrs: (f) => ({ class: 'finding', 'data-code': f.code, 'data-severity': f.severity,
        'data-offset': f.offset === undefined ? null : f.offset }),
    });
  }

  // ---- The views. Each takes the document and its view's JSON, returns a Node.
  const draw = {};

  draw.verify = (doc, v) => {
    const box = el('div');
    const findings = v.findings || [];
    const errors = findings.filter((f) => f.severity === 'error').length;
    const warnings = findings.length - errors;
    box.append(el('div', { class: `verdict ${v.valid ? 'ok' : 'bad'}`, 'data-valid': String(v.valid) },
      v.valid ? 'valid: ExecuTorch\u2019s runtime would load it' : 'INVALID',
      ` \u2014 ${errors} error${errors === 1 ? '' : 's'}, ${warnings} warning${warnings === 1 ? '' : 's'}`));
    if ((v.not_checked || []).length) {
      box.append(el('h2', {}, 'Not checked'));
      box.append(el('ul', { 'data-list': 'not_checked' }, v.not_checked.map((s) => el('li', { class: 'note' }, s))));
    }
    if (findings.length) {
      box.append(el('h2', {}, 'Findings'), el('p', { class: 'note' }, 'Click an offset to see it in the byte map.'));
      box.append(findingsTable(findings));
    }
    return box;
  };

  draw.inspect = (doc, d) => {
    const box = el('div');
    if (doc.kind === 'bpte') {
      box.append(el('h2', {}, 'BundledProgram'), kvTable({ file: d.file, size: d.size, version: d.version,
        program_offset: d.program && d.program.offset, program_size: d.program && d.program.size,
        method_test_suites: (d.method_test_suites || []).length }, 'bpte'));
      box.append(sortableTable([
        { key: 'method_name', title: 'method', mono: true },
        { key: 'cases', title: 'test cases', num: true, value: (s) => s.test_cases.length, render: (s) => fmt(s.test_cases.length) },
        { key: 'offset', title: 'offset', num: true },
      ], d.method_test_suites || [], { name: 'test_suites' }));
      if (d.program && d.program.description) box.append(el('h2', {}, 'Wrapped program'), draw.inspect({ kind: 'pte' }, d.program.description));
      return box;
    }
    if (doc.kind === 'ptd' || d.format === 'ptd') return inspectPtd(d, box);
    box.append(el('h2', {}, 'File'));
    box.append(kvTable({ file: d.file, format: d.format, size: d.size, 'schema version': d.version, valid: d.valid,
      'delegate bytes saved by sharing': d.delegate_dedup_bytes_saved }, 'file'));
    if (d.header) box.append(el('h2', {}, 'Header'), kvTable(flatHeader(d.header), 'header'));
    const methods = d.methods || [];
    box.append(el('h2', { 'data-methods': methods.length }, `Methods (${methods.length})`));
    box.append(sortableTable([
      { key: 'name', title: 'method', mono: true },
      { key: 'inputs', title: 'inputs', num: true, value: (m) => (m.inputs || []).length, render: (m) => fmt((m.inputs || []).length) },
      { key: 'outputs', title: 'outputs', num: true, value: (m) => (m.outputs || []).length, render: (m) => fmt((m.outputs || []).length) },
      { key: 'num_values', title: 'values', num: true },
      { key: 'num_instructions', title: 'instructions', num: true },
      { key: 'operators', title: 'operators', num: true, value: (m) => (m.operators || []).length, render: (m) => fmt((m.operators || []).length) },
      { key: 'delegates', title: 'delegates', num: true, value: (m) => (m.delegates || []).length, render: (m) => fmt((m.delegates || []).length) },
      { key: 'stored_tensors', title: 'stored tensors', num: true, value: (m) => (m.stored_tensors || []).length, render: (m) => fmt((m.stored_tensors || []).length) },
    ], methods, { name: 'methods', rowAttrs: (m) => ({ 'data-method': m.name }) }));
    for (const m of methods) {
      box.append(el('h2', {}, `Method ${m.name}`));
      const io = [];
      (m.inputs || []).forEach((t, i) => io.push({ dir: 'input', i, ...t }));
      (m.outputs || []).forEach((t, i) => io.push({ dir: 'output', i, ...t }));
      box.append(sortableTable([
        { key: 'dir', title: '' }, { key: 'i', title: '#', num: true },
        { key: 'index', title: 'value', num: true },
        { key: 'kind', title: 'kind' },
        { key: 'dtype', title: 'dtype', mono: true },
        { key: 'sizes', title: 'shape', mono: true, render: (t) => shape(t.sizes || t.shape) },
        { key: 'dynamism', title: 'dynamism' },
      ], io, { name: `io ${m.name}` }));
      box.append(kvTable({ 'planned buffers (non_const_buffer_sizes)': shape(m.non_const_buffer_sizes), chains: m.num_chains,
        'stack traces': m.stacktraces, 'mutable buffer names': (m.mutable_buffer_names || []).join(', ') }, `plan ${m.name}`));
      if ((m.operators || []).length) {
        box.append(el('h3', {}, 'Operators'));
        const ops = m.operators.map((o, i) => (typeof o === 'string' ? { index: i, operator: o } : { index: i, ...o }));
        box.append(sortableTable(objectColumns(ops), ops, { name: `operators ${m.name}` }));
      }
      if ((m.delegates || []).length) {
        box.append(el('h3', {}, 'Delegates'));
        const cols = objectColumns(m.delegates);
        for (const c of cols) {
          if (c.key === 'compile_spec_values') c.render = (x) => (x.compile_spec_values || []).map((v) => `${v.key} (${fmt(v.size)} B)`).join(', ');
        }
        box.append(sortableTable(cols, m.delegates, { name: `delegates ${m.name}` }));
      }
    }
    box.append(tensorsSection(methods));
    for (const key of ['segments', 'constants', 'named_data', 'external_tensors', 'ptd_files', 'config']) {
      if (d[key] === undefined || d[key] === null || (Array.isArray(d[key]) && !d[key].length)) continue;
      box.append(genericJson(d[key], key.replace(/_/g, ' ')));
    }
    return box;
  };

  function flatHeader(h) {
    const out = {};
    for (const [k, v] of Object.entries(h)) {
      if (v && typeof v === 'object' && !Array.isArray(v)) for (const [k2, v2] of Object.entries(v)) out[`${k}.${k2}`] = v2;
      else out[k] = v;
    }
    return out;
  }

  function objectColumns(rows) {
    const keys = [];
    for (const r of rows) for (const k of Object.keys(r)) if (!keys.includes(k)) keys.push(k);
    return keys.map((k) => ({ key: k, title: k.replace(/_/g, ' '), num: rows.every((r) => r[k] === undefined || typeof r[k] === 'number') }));
  }

  // Stored tensors of every method, with a name filter (inspect --tensor PATTERN).
  function tensorsSection(methods) {
    const rows = [];
    for (const m of methods) for (const t of m.stored_tensors || []) rows.push({ method: m.name, ...t });
    const box = el('div', { 'data-tensors': rows.length });
    box.append(el('h2', {}, `Stored tensors (${rows.length})`));
    const count = el('span', { class: 'note' });
    const holder = el('div');
    const input = el('input', { type: 'search', id: 'tensor-filter', placeholder: 'filter by name (inspect --tensor)' });
    const cols = objectColumns(rows.length ? rows : [{ method: '', name: '' }]);
    for (const c of cols) if (c.key === 'shape' || c.key === 'sizes') c.render = (t) => shape(t[c.key]);
    const refill = () => {
      const pat = input.value;
      const shown = rows.filter((t) => String(t.name || '').includes(pat));
      count.textContent = ` ${shown.length} of ${rows.length} shown`;
      holder.textContent = '';
      holder.append(sortableTable(cols, shown, { name: 'tensors', sortKey: 'bytes', rowAttrs: () => ({ class: 'tensor' }) }));
    };
    input.addEventListener('input', refill);
    box.append(el('div', {}, input, count), holder);
    refill();
    return box;
  }

  function inspectPtd(d, box) {
    box.append(el('h2', {}, 'FlatTensor data file'));
    box.append(kvTable({ file: d.file, size: d.size, valid: d.valid }, 'file'));
    if (d.header) box.append(el('h2', {}, 'Header'), kvTable(flatHeader(d.header), 'header'));
    for (const [k, v] of Object.entries(d)) {
      if (['file', 'size', 'valid', 'header', 'findings', 'format'].includes(k)) continue;
      if (v && typeof v === 'object') box.append(genericJson(v, k.replace(/_/g, ' ')));
    }
    return box;
  }

  draw.size = (doc, s) => {
    const box = el('div');
    const files = [s, ...(s.ptds || [])];
    for (const f of files) {
      box.append(el('h2', { 'data-size-file': (f.file || '').split('/').pop(), 'data-file-size': f.file_size },
        `${(f.file || '').split('/').pop()}: ${fmt(f.file_size)} bytes (${human(f.file_size)})`));
      box.append(sortableTable([
        { key: 'group', title: 'group' },
        { key: 'name', title: 'part' },
        { key: 'bytes', title: 'bytes', num: true },
        { key: 'percent', title: '%', num: true, render: (p) => p.percent.toFixed(1) },
      ], f.parts || [], { name: 'parts', sortKey: 'bytes', rowAttrs: (p) => ({ class: 'part', 'data-bytes': p.bytes }) }));
    }
    if ((s.tensors || []).length) {
      box.append(el('h2', {}, `Tensors (${fmt(s.tensors_total)})`));
      box.append(sortableTable([
        { key: 'name', title: 'name', mono: true },
        { key: 'method', title: 'method', mono: true },
        { key: 'value_index', title: 'value', num: true },
        { key: 'dtype', title: 'dtype', mono: true },
        { key: 'shape', title: 'shape', mono: true, render: (t) => shape(t.shape) },
        { key: 'location', title: 'location' },
        { key: 'uses', title: 'uses', num: true },
        { key: 'bytes', title: 'bytes', num: true },
      ], s.tensors, { name: 'size-tensors', sortKey: 'bytes', rowAttrs: () => ({ class: 'size-tensor' }) }));
    }
    if ((s.delegates || []).length) {
      box.append(el('h2', {}, `Delegates (${fmt(s.delegates_total)})`));
      box.append(sortableTable(objectColumns(s.delegates), s.delegates, { name: 'size-delegates', sortKey: 'bytes' }));
    }
    if (s.memory) box.append(genericJson(s.memory, 'runtime memory'));
    return box;
  };

  draw.map = (doc, m) => {
    const box = el('div');
    const log = el('input', { type: 'checkbox', id: 'map-log', checked: state.mapLog });
    box.append(el('p', { class: 'note' }, 'ptepack map: every byte of the file by kind; hover a band for its offset and size. ',
      el('label', {}, log, ' band widths on a log scale (map --log)')));
    const holders = [];
    for (const f of m.files || []) {
      const name = (f.file || '').split('/').pop();
      const holder = el('div', { class: 'mapbox', 'data-map-file': name });
      holders.push([holder, f]);
      box.append(holder);
    }
    const fill = () => {
      for (const [holder, f] of holders) {
        // The SVG is ptepack's own (ByteMapSvg), made by the module; names in it are escaped there.
        const svg = state.mapLog ? f.svg_log : f.svg;
        holder.innerHTML = svg.slice(svg.indexOf('<svg'));
      }
    };
    log.addEventListener('change', () => { state.mapLog = log.checked; fill(); });
    fill();
    return box;
  };

  // A finding's offset: the byte map, its band outlined and a marker at the offset.
  function showOffset(file, offset) {
    selectView('map');
    const name = (file || '').split('/').pop();
    const holders = [...document.querySelectorAll('.mapbox')];
    const holder = holders.find((h) => h.dataset.mapFile === name) || holders[0];
    if (!holder) return;
    const svg = holder.querySelector('svg');
    for (const old of svg.querySelectorAll('.highlight')) old.remove();
    const bands = [...svg.querySelectorAll('rect.band')];
    let band = bands.find((b) => offset >= +b.dataset.offset && offset < +b.dataset.offset + +b.dataset.size);
    if (!band && bands.length) band = bands[bands.length - 1];
    if (!band) return;
    const x0 = +band.getAttribute('x');
    const w = +band.getAttribute('width');
    const y = +band.getAttribute('y');
    const h = +band.getAttribute('height');
    const size = +band.dataset.size;
    const frac = size > 0 ? Math.min(1, Math.max(0, (offset - +band.dataset.offset) / size)) : 0;
    const ns = 'http://www.w3.org/2000/svg';
    const outline = document.createElementNS(ns, 'rect');
    for (const [k, v] of Object.entries({ x: x0 - 1, y: y - 3, width: w + 2, height: h + 6, fill: 'none', stroke: '#d62728', 'stroke-width': 3, class: 'highlight', 'data-highlight-offset': offset })) outline.setAttribute(k, v);
    const mark = document.createElementNS(ns, 'path');
    const mx = x0 + frac * w;
    mark.setAttribute('d', `M ${mx} ${y - 14} L ${mx - 6} ${y - 24} L ${mx + 6} ${y - 24} Z M ${mx} ${y - 14} L ${mx} ${y + h + 4}`);
    mark.setAttribute('stroke', '#d62728');
    mark.setAttribute('fill', '#d62728');
    mark.setAttribute('stroke-width', '2');
    mark.setAttribute('class', 'highlight');
    svg.append(outline, mark);
    const label = holder.parentNode.querySelector('.highlight-label') || el('p', { class: 'highlight-label note' });
    label.textContent = `offset ${fmt(offset)} is in ${band.querySelector('title').textContent}`;
    holder.before(label);
    holder.scrollIntoView({ block: 'center' });
  }

  // ---- The graph: a layered layout of ptepack graph's nodes and edges, drawn as SVG.
  const NODE_FILL = { input: '#b8e6b8', output: '#dda0dd', kernel: '#add8e6', delegate: '#ffa07a', instruction: '#add8e6', constant: '#ffffe0' };
  const MAX_NODES = 3000;

  function layoutGraph(g) {
    const nodes = g.nodes.slice(0, MAX_NODES).map((n, i) => ({ ...n, i, lines: n.label.split('\n') }));
    const byId = new Map(nodes.map((n) => [n.id, n]));
    const edges = g.edges.filter((e) => byId.has(e.from) && byId.has(e.to) && e.from !== e.to);
    const out = new Map(nodes.map((n) => [n.id, []]));
    const inc = new Map(nodes.map((n) => [n.id, []]));
    for (const e of edges) { out.get(e.from).push(e); inc.get(e.to).push(e); }
    // Ranks: longest path from the sources over edges that go forward in the order the nodes
    // were found (dataflow goes forward; this also breaks any cycle).
    for (const n of nodes) {
      let r = 0;
      for (const e of inc.get(n.id)) { const p = byId.get(e.from); if (p.i < n.i) r = Math.max(r, p.rank + 1); }
      n.rank = r;
    }
    // Outputs at the bottom, constants just above their first user.
    const maxRank = Math.max(0, ...nodes.map((n) => n.rank));
    for (const n of nodes) if (n.kind === 'output') n.rank = Math.max(n.rank, maxRank);
    for (const n of nodes) {
      if (n.kind !== 'constant') continue;
      const users = out.get(n.id).map((e) => byId.get(e.to).rank);
      if (users.length) n.rank = Math.max(0, Math.min(...users) - 1);
    }
    const ranks = [];
    for (const n of nodes) (ranks[n.rank] = ranks[n.rank] || []).push(n);
    for (let r = 0; r < ranks.length; ++r) ranks[r] = ranks[r] || [];
    // Sizes from the labels.
    for (const n of nodes) {
      n.w = Math.max(60, 7.2 * Math.max(...n.lines.map((l) => l.length)) + 20);
      n.h = 16 * n.lines.length + 14;
    }
    // Order within ranks: a few barycentre sweeps, down then up.
    const pos = () => ranks.forEach((row) => row.forEach((n, k) => { n.k = k; }));
    pos();
    for (let sweep = 0; sweep < 4; ++sweep) {
      const down = sweep % 2 === 0;
      const order = down ? ranks : ranks.slice().reverse();
      for (const row of order) {
        for (const n of row) {
          const nb = (down ? inc.get(n.id).map((e) => byId.get(e.from)) : out.get(n.id).map((e) => byId.get(e.to)));
          n.bary = nb.length ? nb.reduce((s, m) => s + m.k, 0) / nb.length : n.k;
        }
        row.sort((a, b) => a.bary - b.bary);
        row.forEach((n, k) => { n.k = k; });
      }
    }
    // Coordinates: rows centred.
    const gapX = 24;
    const gapY = 54;
    let y = 20;
    let width = 0;
    for (const row of ranks) width = Math.max(width, row.reduce((s, n) => s + n.w + gapX, 0));
    width += 40;
    for (const row of ranks) {
      const rowW = row.reduce((s, n) => s + n.w + gapX, -gapX);
      let x = (width - rowW) / 2;
      const rowH = Math.max(0, ...row.map((n) => n.h));
      for (const n of row) { n.x = x; n.y = y + (rowH - n.h) / 2; x += n.w + gapX; }
      y += rowH + gapY;
    }
    const outDegree = new Map([...out].map(([k, v]) => [k, v.length]));
    const inDegree = new Map([...inc].map(([k, v]) => [k, v.length]));
    return { nodes, edges, byId, width, height: y, outDegree, inDegree };
  }

  function svgEl(tag, attrs, text) {
    const e = document.createElementNS('http://www.w3.org/2000/svg', tag);
    for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
    if (text !== undefined) e.textContent = text;
    return e;
  }

  function graphSvg(g) {
    const L = layoutGraph(g);
    const svg = svgEl('svg', { xmlns: 'http://www.w3.org/2000/svg', width: L.width, height: L.height,
      viewBox: `0 0 ${L.width} ${L.height}`, 'font-family': 'DejaVu Sans, Arial, sans-serif', 'font-size': 12,
      'data-nodes': L.nodes.length, 'data-edges': L.edges.length });
    svg.append(svgEl('rect', { width: '100%', height: '100%', fill: '#ffffff' }));
    const defs = svgEl('defs', {});
    const marker = svgEl('marker', { id: 'arrow', viewBox: '0 0 10 10', refX: 10, refY: 5, markerWidth: 7, markerHeight: 7, orient: 'auto-start-reverse' });
    marker.append(svgEl('path', { d: 'M 0 0 L 10 5 L 0 10 z', fill: '#555555' }));
    defs.append(marker);
    svg.append(defs);
    const edgeLayer = svgEl('g', { class: 'edges' });
    for (const e of L.edges) {
      const a = L.byId.get(e.from);
      const b = L.byId.get(e.to);
      const x1 = a.x + a.w / 2;
      const y1 = a.y + a.h;
      const x2 = b.x + b.w / 2;
      const y2 = b.y;
      const up = y2 <= y1;
      const dy = up ? 60 : Math.max(20, (y2 - y1) / 2);
      const d = `M ${x1} ${y1} C ${x1} ${y1 + dy} ${x2} ${y2 - dy} ${x2} ${y2}`;
      const p = svgEl('path', { d, fill: 'none', stroke: '#555555', 'stroke-width': 1.2, 'marker-end': 'url(#arrow)', class: 'edge' });
      if (e.alias) p.setAttribute('stroke-dasharray', '5 4');
      p.append(svgEl('title', {}, `${e.label}\n${e.from} \u2192 ${e.to}`));
      edgeLayer.append(p);
      if (L.edges.length <= 400) {
        // On the curve near the end that is not shared: near the source where several edges
        // meet at the target, near the target where several leave the source.
        const t = L.outDegree.get(e.from) > L.inDegree.get(e.to) ? 0.8 : 0.25;
        const u = 1 - t;
        const bx = u * u * u * x1 + 3 * u * u * t * x1 + 3 * u * t * t * x2 + t * t * t * x2;
        const by = u * u * u * y1 + 3 * u * u * t * (y1 + dy) + 3 * u * t * t * (y2 - dy) + t * t * t * y2;
        edgeLayer.append(svgEl('text', { x: bx + 4, y: by + 3, 'font-size': 9, fill: '#444444' }, e.label));
      }
    }
    svg.append(edgeLayer);
    const nodeLayer = svgEl('g', { class: 'nodes' });
    for (const n of L.nodes) {
      const gN = svgEl('g', { class: `node node-${n.kind}`, 'data-id': n.id });
      gN.append(svgEl('rect', { x: n.x, y: n.y, width: n.w, height: n.h, rx: n.kind === 'kernel' || n.kind === 'delegate' || n.kind === 'instruction' ? 8 : 2,
        fill: NODE_FILL[n.kind] || '#eeeeee', stroke: '#333333', 'stroke-width': 1 }));
      n.lines.forEach((line, k) => {
        gN.append(svgEl('text', { x: n.x + n.w / 2, y: n.y + 20 + 16 * k, 'text-anchor': 'middle', 'font-size': k ? 11 : 12 }, line));
      });
      gN.append(svgEl('title', {}, `${n.label}\n(${n.kind}, ${n.id})`));
      nodeLayer.append(gN);
    }
    svg.append(nodeLayer);
    return { svg, shown: L.nodes.length };
  }

  draw.graph = (doc, gr) => {
    const box = el('div');
    const methods = gr.methods || [];
    if (!methods.length) { box.append(el('p', { class: 'missing' }, 'no methods')); return box; }
    const pick = el('select', { id: 'graph-method' }, methods.map((m, i) => el('option', { value: i }, `${m.name} (${m.nodes.length} nodes, ${m.edges.length} edges)`)));
    const fit = el('input', { type: 'checkbox', id: 'graph-fit' });
    const holder = el('div', { id: 'graph-box' });
    const note = el('p', { class: 'note' });
    const show = () => {
      const m = methods[+pick.value];
      holder.textContent = '';
      const { svg, shown } = graphSvg(m);
      holder.append(svg);
      // Wider than the box: fit it when that keeps the text readable (at least half size).
      const w = +svg.getAttribute('width');
      const room = (holder.clientWidth || $('#views').clientWidth - 30) - 2;
      if (fit.dataset.touched !== '1') fit.checked = w > room && room / w >= 0.5;
      if (fit.checked && w > room) {
        svg.setAttribute('width', room);
        svg.setAttribute('height', (+svg.getAttribute('height') * room) / w);
      }
      note.textContent = `ptepack graph, method ${m.name}: ${m.nodes.length} nodes, ${m.edges.length} edges` +
        (shown < m.nodes.length ? ` (the first ${shown} nodes drawn)` : '') + '. Edges carry tensor values (value index, dtype, shape); dashed: a view that needed no instruction.';
    };
    pick.addEventListener('change', show);
    fit.addEventListener('change', () => { fit.dataset.touched = '1'; show(); });
    box.append(el('div', {}, 'method ', pick, ' ', el('label', {}, fit, ' fit to the width')), note, holder);
    show();
    return box;
  };

  // ---- Documents, tabs and views.
  function selectView(name) {
    state.view = name;
    renderTabs();
    renderView();
  }

  function viewsOf(doc) {
    const known = VIEWS.map((v) => v.name);
    const extra = Object.keys(doc.views || {}).filter((k) => !known.includes(k)).map((k) => ({ name: k, title: k }));
    return VIEWS.concat(extra);
  }

  function renderDocs() {
    const nav = $('#docs');
    nav.textContent = '';
    if (state.docs.length < 2) return;
    state.docs.forEach((d, i) => nav.append(el('button', { class: i === state.current ? 'active' : undefined,
      onclick: () => { state.current = i; renderDocs(); renderTabs(); renderView(); } }, d.file)));
  }

  function tabBadge(doc, name) {
    const v = doc.views && doc.views[name];
    if (!v) return '';
    if (v.error) return ' \u26a0';
    if (name === 'verify') {
      const errs = (v.findings || []).filter((f) => f.severity === 'error').length;
      const warns = (v.findings || []).length - errs;
      return errs ? ` (${errs} error${errs > 1 ? 's' : ''})` : warns ? ` (${warns} warning${warns > 1 ? 's' : ''})` : ' \u2713';
    }
    return '';
  }

  function renderTabs() {
    const nav = $('#tabs');
    nav.textContent = '';
    const doc = state.docs[state.current];
    if (!doc) return;
    for (const v of viewsOf(doc)) {
      nav.append(el('button', { class: v.name === state.view ? 'active' : undefined, 'data-view': v.name,
        onclick: () => selectView(v.name) }, v.title + tabBadge(doc, v.name)));
    }
  }

  function renderView() {
    const box = $('#views');
    box.textContent = '';
    const doc = state.docs[state.current];
    if (!doc) return;
    const meta = viewsOf(doc).find((v) => v.name === state.view) || VIEWS[0];
    const section = el('section', { class: 'view', id: `view-${meta.name}`, 'data-view': meta.name });
    box.append(section);
    if (doc.error) {
      section.append(errorBox(doc.error, doc.file));
      return;
    }
    const data = doc.views && doc.views[meta.name];
    if (data === undefined) {
      const what = meta.name === 'plan' ? 'memory plan' : meta.title.toLowerCase();
      section.append(el('p', { class: 'missing', 'data-missing': meta.name }, `${what}: not in this build`));
      return;
    }
    if (data && data.error) {
      section.append(errorBox(data, meta.title));
      return;
    }
    try {
      section.append(draw[meta.name] ? draw[meta.name](doc, data) : genericJson(data, meta.title));
    } catch (e) {
      section.append(errorBox({ code: 'page', message: `this view could not be drawn: ${e.message}` }, meta.title));
      section.append(genericJson(data, meta.title));
    }
  }

  function setStatus(text, error) {
    const s = $('#status');
    s.textContent = text;
    s.className = error ? 'error' : '';
  }

  // ---- Reading files by slices.
  async function readSlice(file, start, end) {
    const buf = new Uint8Array(await file.slice(start, end).arrayBuffer());
    state.bytesRead += buf.length;
    return buf;
  }

  function toHeap(bytes) {
    const M = state.module;
    const p = M._malloc(Math.max(1, bytes.length));
    if (!p) throw new Error(`cannot hold ${bytes.length} bytes in WebAssembly memory`);
    M.HEAPU8.set(bytes, p);
    return p;
  }

  // The bytes of `file` to hand to the module: the first 64, then the leading bytes the reader
  // needs, or the whole file when it is small.
  async function readForReader(file) {
    const M = state.module;
    const size = file.size;
    if (size <= WHOLE_LIMIT && !forceLeading) return readSlice(file, 0, size);
    const first = await readSlice(file, 0, Math.min(64, size));
    const p = toHeap(first);
    let need;
    try { need = M.leadingBytes(p, first.length, size); } finally { M._free(p); }
    if (need > MAX_READ) throw new Error(`${file.name}: the reader needs the first ${fmt(need)} bytes, more than this page can hold`);
    if (need <= first.length) return first.subarray(0, need);
    const head = new Uint8Array(need);
    head.set(first);
    head.set(await readSlice(file, first.length, need), first.length);
    return head;
  }

  async function openFiles(fileList) {
    const files = [...fileList];
    if (!files.length || !state.module) return;
    if (state.busy) return;
    state.busy = true;
    state.bytesRead = 0;
    const t0 = performance.now();
    setStatus(`reading ${files.map((f) => f.name).join(', ')}\u2026`);
    const M = state.module;
    const session = new M.Session();
    try {
      for (const f of files) {
        const bytes = await readForReader(f);
        session.add(f.name, toHeap(bytes), bytes.length, f.size);  // the session frees it
      }
      const t1 = performance.now();
      const result = JSON.parse(session.analyze());
      const t2 = performance.now();
      state.result = result;
      state.docs = result.documents;
      state.current = 0;
      const total = files.reduce((s, f) => s + f.size, 0);
      state.timing = { read_ms: t1 - t0, analyze_ms: t2 - t1, total_ms: t2 - t0, bytes_read: state.bytesRead, bytes_total: total };
      setStatus(`${files.map((f) => f.name).join(', ')}: ${fmt(total)} bytes, ${fmt(state.bytesRead)} read ` +
        `(${state.bytesRead >= total ? 'whole' : 'headers and flatbuffer'}), described in ${(t2 - t0).toFixed(0)} ms`);
    } catch (e) {
      state.docs = [{ file: files.map((f) => f.name).join(', '), error: { code: 'page', message: String(e && e.message || e) } }];
      setStatus(String(e && e.message || e), true);
    } finally {
      session.delete();
      state.busy = false;
    }
    renderDocs();
    renderTabs();
    renderView();
    document.body.dataset.state = 'done';
  }

  // ---- Start: the WebAssembly module, then the file input and drop zone.
  function wasmBytesInline() {
    // From file:// the browser lets the page read no file beside it: build-web.sh appends the
    // module to this script as base64 (PTEPACK_WASM_BASE64) for that case.
    if (typeof PTEPACK_WASM_BASE64 !== 'string') return undefined;
    const bin = atob(PTEPACK_WASM_BASE64);
    const out = new Uint8Array(bin.length);
    for (let i = 0; i < bin.length; ++i) out[i] = bin.charCodeAt(i);
    return out;
  }

  function start() {
    const input = $('#file-input');
    input.addEventListener('change', () => openFiles(input.files));
    const drop = $('#drop');
    for (const ev of ['dragenter', 'dragover']) {
      document.addEventListener(ev, (e) => { e.preventDefault(); drop.classList.add('over'); });
    }
    document.addEventListener('dragleave', () => drop.classList.remove('over'));
    document.addEventListener('drop', (e) => {
      e.preventDefault();
      drop.classList.remove('over');
      if (e.dataTransfer && e.dataTransfer.files.length) openFiles(e.dataTransfer.files);
    });
    const opts = {};
    if (location.protocol === 'file:') opts.wasmBinary = wasmBytesInline();
    let settled = false;
    createPtepack(opts).then((M) => {
      settled = true;
      state.module = M;
      $('#version').textContent = `ptepack ${M.version()}`;
      setStatus('Ready: open or drop a file.');
      document.body.dataset.state = 'ready';
      if (input.files.length) openFiles(input.files);
    }, (e) => {
      settled = true;
      setStatus(`The WebAssembly reader could not be loaded: ${e && e.message || e}`, true);
      document.body.dataset.state = 'failed';
    });
    setTimeout(() => {
      if (!settled) setStatus('The WebAssembly reader has not loaded yet (is ptepack.wasm beside ptepack.js?)', true);
    }, 10000);
  }

  if (document.readyState === 'loading') document.addEventListener('DOMContentLoaded', start);
  else start();
})();
