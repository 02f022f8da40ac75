// The viewer in a real browser (issue 26): Debian's Chromium, headless, driven by playwright-core,
// the page served from 127.0.0.1 by a server in this script (and once from file://).
//
// Each real ExecuTorch file is opened through the page's file input, and what the page shows
// (verify's findings, the methods and stored-tensor counts, the size table, the byte map's
// bands, the graph's nodes and edges, the memory plan per method and buffer with its picture's
// boxes) is compared with the ptepack CLI's --json (and `graph -o X.dot`, `map --memory -o
// X.svg`) on the same file; again with every file read by its leading bytes only (?leading=1).
// A corrupt file, a truncated one, an empty one and random bytes must show the CLI's findings.
// A 4 GiB sparse .pte must be described (the plan included) in under 2 s reading under 64 MiB
// of it. Every view of stories260k_qnn.pte and keyword_spotting.pte is screenshotted into OUT and
// checked not blank (tests/tools/png_stats.py). The page may request nothing but its own
// three files.
//
//   node browser_test.js BUILD_WEB_DIR PTEPACK_CLI FIXTURES_DIR OUT_DIR
//
// Prints one line per check and ends with "N passed, N failed".
'use strict';
const fs = require('fs');
const path = require('path');
const http = require('http');
const os = require('os');
const { execFileSync, spawnSync } = require('child_process');
const { chromium } = require('playwright-core');

const [webDir, cli, fixtures, outDir] = process.argv.slice(2).map((p) => path.resolve(p));
const ROOT = path.resolve(__dirname, '..', '..');
const CHROMIUM = process.env.PTEPACK_CHROMIUM || '/usr/bin/chromium';
const FLAGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
  '--disable-background-networking', '--disable-component-update', '--disable-sync'];
fs.mkdirSync(outDir, { recursive: true });

let passed = 0;
let failed = 0;
function check(ok, what, detail) {
  if (ok) { ++passed; console.log(`ok   ${what}`); } else { ++failed; console.log(`FAIL ${what}${detail ? `\n     ${detail}` : ''}`); }
  return ok;
}
function same(a, b, what) {
  const x = JSON.stringify(a);
  const y = JSON.stringify(b);
  return check(x === y, what, x === y ? '' : `page: ${x.slice(0, 600)}\n     cli:  ${y.slice(0, 600)}`);
}

// The CLI, run in the file's folder on base names (so that messages name files as the page does).
function cliJson(dir, args) {
  const r = spawnSync(cli, args, { cwd: dir, encoding: 'utf8', maxBuffer: 1 << 28 });
  if (r.status === 2 || !r.stdout.trim().startsWith('{')) throw new Error(`ptepack ${args.join(' ')}: exit ${r.status}: ${r.stderr}`);
  return JSON.parse(r.stdout);
}
function dotCounts(dir, file) {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'ptepack-dot-'));
  const r = spawnSync(cli, ['graph', file, '-o', path.join(tmp, 'g.dot'), '-q'], { cwd: dir, encoding: 'utf8' });
  if (r.status !== 0) { fs.rmSync(tmp, { recursive: true }); return null; }
  const dot = fs.readFileSync(path.join(tmp, 'g.dot'), 'utf8');
  fs.rmSync(tmp, { recursive: true });
  const methods = [];
  for (const line of dot.split('\n')) {
    if (/^ {2}subgraph /.test(line)) methods.push({ nodes: 0, edges: 0 });
    else if (/^ {4}\S+ -> \S+ \[/.test(line)) methods[methods.length - 1].edges++;
    else if (/^ {4}\S+ \[/.test(line)) methods[methods.length - 1].nodes++;
  }
  return methods;
}
function pngStats(file, ...colours) {
  const out = execFileSync('python3', [path.join(ROOT, 'tests/tools/png_stats.py'), file, ...colours], { encoding: 'utf8' });
  const [w, h, nonWhite, ...m] = out.trim().split(/\s+/).map(Number);
  return { w, h, nonWhite, matching: m };
}

// ---- A static server on 127.0.0.1 that logs what it served.
const served = [];
const TYPES = { '.html': 'text/html; charset=utf-8', '.js': 'text/javascript', '.wasm': 'application/wasm' };
const server = http.createServer((req, res) => {
  const url = new URL(req.url, 'http://127.0.0.1');
  served.push(url.pathname);
  const name = url.pathname === '/' ? 'index.html' : url.pathname.slice(1);
  const file = path.join(webDir, name);
  if (name.includes('..') || !['index.html', 'ptepack.js', 'ptepack.wasm'].includes(name) || !fs.existsSync(file)) {
    res.writeHead(404);
    res.end('not found');
    return;
  }
  res.writeHead(200, { 'Content-Type': TYPES[path.extname(name)] || 'application/octet-stream' });
  fs.createReadStream(file).pipe(res);
});

// What the page shows, read from its DOM.
async function shown(page) {
  return page.evaluate(async () => {
    const st = window.ptepackViewer;
    const click = async (name) => {
      document.querySelector(`nav#tabs button[data-view="${name}"]`).click();
      await new Promise((r) => setTimeout(r, 0));
      return document.querySelector('section.view');
    };
    const out = { status: document.querySelector('#status').textContent, docs: st.docs.length, timing: st.timing,
      viewMs: st.docs[0] && st.docs[0].view_ms };
    if (st.docs[0] && st.docs[0].error) { out.error = st.docs[0].error; return out; }
    let s = await click('verify');
    const verdict = s.querySelector('.verdict');
    out.valid = verdict ? verdict.dataset.valid === 'true' : null;
    out.viewError = s.querySelector('.errorbox') ? s.querySelector('.errorbox').dataset.error : null;
    out.findings = [...s.querySelectorAll('tr.finding')].map((tr) => {
      const td = tr.querySelectorAll('td');
      return { severity: tr.dataset.severity, code: tr.dataset.code, offset: tr.dataset.offset === undefined ? null : Number(tr.dataset.offset),
        message: td[4].textContent, expected: td[5].textContent, found: td[6].textContent };
    });
    out.notChecked = [...s.querySelectorAll('[data-list="not_checked"] li')].map((li) => li.textContent);
    s = await click('inspect');
    const m = s.querySelector('[data-methods]');
    out.methods = m ? Number(m.dataset.methods) : null;
    const t = s.querySelector('[data-tensors]');
    out.tensors = t ? Number(t.dataset.tensors) : null;
    out.inspectError = s.querySelector('.errorbox') ? s.querySelector('.errorbox').dataset.error : null;
    s = await click('size');
    out.size = [...s.querySelectorAll('h2[data-file-size]')].map((h) => {
      const table = h.nextElementSibling;
      return { file: h.dataset.sizeFile, size: Number(h.dataset.fileSize),
        parts: [...table.querySelectorAll('tr.part')].map((tr) => Number(tr.dataset.bytes)) };
    });
    out.sizeError = s.querySelector('.errorbox') ? s.querySelector('.errorbox').dataset.error : null;
    s = await click('map');
    out.map = [...s.querySelectorAll('.mapbox')].map((b) => [...b.querySelectorAll('rect.band')].map((r) => Number(r.dataset.offset)));
    s = await click('graph');
    const methods = [];
    const pick = s.querySelector('#graph-method');
    if (pick) {
      for (let i = 0; i < pick.options.length; ++i) {
        pick.value = String(i);
        pick.dispatchEvent(new Event('change'));
        const svg = s.querySelector('#graph-box svg');
        methods.push({ nodes: svg.querySelectorAll('g.node').length, edges: svg.querySelectorAll('path.edge').length });
      }
    }
    out.graph = methods;
    s = await click('plan');
    out.missing = [...document.querySelectorAll('nav#tabs button')].map((b) => b.dataset.view)
      .filter((v) => st.docs[0].views[v] === undefined);
    const planError = s.querySelector('.errorbox[data-error]');
    out.planError = planError ? planError.dataset.error : null;
    // The numbers as shown: each cell's text, its thousands separators dropped.
    const num = (cell) => (cell ? Number(cell.textContent.replace(/,/g, '').replace(/\s.*$/, '')) : null);
    const total = s.querySelector('[data-plan-total]');
    out.planTotal = total ? { size_now: Number(total.dataset.planTotal), lower_bound: Number(total.dataset.planBound),
      planned: Number(total.dataset.planPlanned), text: total.textContent } : null;
    out.planBuffers = [...s.querySelectorAll('tr.plan-buffer')].map((tr) => {
      const cell = (k) => tr.querySelector(`td[data-key="${k}"]`);
      const sizes = {};
      for (const td of tr.querySelectorAll('td[data-key^="algo:"]')) if (td.textContent) sizes[td.dataset.key.slice(5)] = num(td);
      const peak = cell('peak').querySelector('[data-instruction]');
      const h3 = [...s.querySelectorAll('h3[data-peak-method]')].find((h) => h.dataset.peakMethod === tr.dataset.method &&
        h.dataset.peakMemoryId === tr.dataset.memoryId);
      const values = h3 ? [...h3.nextElementSibling.nextElementSibling.querySelectorAll('tr.peak-value')].map((r) => {
        const c = (k) => r.querySelector(`td[data-key="${k}"]`);
        return { value: num(c('value')), bytes: num(c('bytes')), interval: c('interval').textContent.split('..').map(Number) };
      }) : [];
      return { method: tr.dataset.method, memory_id: Number(tr.dataset.memoryId), size_now: num(cell('size_now')),
        lower_bound: num(cell('lower_bound')), above: Number(cell('above_lower_bound_percent').textContent), sizes,
        planned: num(cell('planned')), peak: peak ? { instruction: Number(peak.dataset.instruction), bytes: num(cell('peak_bytes')) } : null, values };
    });
    const noPlan = s.querySelector('[data-no-plan]');
    out.planNone = noPlan ? Number(noPlan.dataset.noPlan) : 0;
    out.planNotChecked = [...s.querySelectorAll('[data-list="plan-not-checked"] li')].length;
    out.planPanels = [...s.querySelectorAll('.planbox g.panel')].map((g) => ({ method: g.dataset.method,
      memory_id: Number(g.dataset.memoryId), boxes: g.querySelectorAll('rect.tensor').length,
      titled: g.querySelectorAll('rect.tensor > title').length }));
    out.planPicture = !!s.querySelector('.planbox svg');
    return out;
  });
}

async function open(page, url, files) {
  await page.goto(url);
  await page.waitForSelector('body[data-state="ready"]', { timeout: 30000 });
  await page.setInputFiles('#file-input', files);
  await page.waitForSelector('body[data-state="done"]', { timeout: 60000 });
  return shown(page);
}

// The documents to open: each .pte with the .ptd of the same name, .bpte files, .ptd files alone.
function fixtureSets() {
  const names = fs.readdirSync(fixtures).sort();
  const sets = [];
  for (const n of names) {
    const ext = path.extname(n);
    if (ext === '.pte' || ext === '.bpte') {
      const ptd = n.replace(/\.pte$/, '.ptd');
      sets.push(ext === '.pte' && names.includes(ptd) ? [n, ptd] : [n]);
    } else if (ext === '.ptd') {
      sets.push([n]);
    }
  }
  return sets;
}

// Everything the page shows of `files` (in `dir`) equals the CLI's --json.
function compare(got, dir, files, label) {
  const [file, ...ptds] = files;
  const ptdArgs = ptds.flatMap((p) => ['--ptd', p]);
  const v = cliJson(dir, ['verify', file, ...ptdArgs, '--json']);
  same(got.valid, v.valid, `${label}: valid`);
  same(got.findings, v.findings.map((f) => ({ severity: f.severity, code: f.code, offset: f.offset === undefined ? null : f.offset,
    message: f.message, expected: f.expected || '', found: f.found || '' })), `${label}: findings (${v.findings.length})`);
  if (!label.includes('leading')) same(got.notChecked, v.not_checked, `${label}: not checked`);
  const ins = cliJson(dir, ['inspect', file, ...ptdArgs, '--json']);
  const desc = ins.format === 'bpte' ? (ins.program.description || {}) : ins;
  if (desc.methods) {
    same(got.methods, desc.methods.length, `${label}: methods`);
    same(got.tensors, desc.methods.reduce((s, m) => s + (m.stored_tensors || []).length, 0), `${label}: stored tensors`);
  }
  const sz = spawnSync(cli, ['size', file, ...(file.endsWith('.bpte') ? [] : ptdArgs), '--json', '--top', '1000000'], { cwd: dir, encoding: 'utf8' });
  if (file.endsWith('.bpte')) { comparePlan(got, dir, files, label); return; }
  if (sz.status === 0) {
    const j = JSON.parse(sz.stdout);
    const want = [j, ...(j.ptds || [])].map((f) => ({ file: path.basename(f.file), size: f.file_size,
      parts: f.parts.map((p) => p.bytes).sort((a, b) => b - a) }));
    same(got.size.map((f) => ({ ...f, parts: f.parts.slice().sort((a, b) => b - a) })), want, `${label}: size parts`);
    same(got.map, [j, ...(j.ptds || [])].map((f) => (f.bands || []).map((b) => b.offset)), `${label}: byte map bands`);
  } else {
    check(got.sizeError === 'invalid', `${label}: size refused as the CLI refuses it (exit ${sz.status})`, `page: ${got.sizeError}`);
  }
  if (!file.endsWith('.ptd')) {
    const dot = dotCounts(dir, file);
    if (dot) same(got.graph, dot, `${label}: graph nodes and edges per method`);
    else check(got.graph.length === 0, `${label}: no graph, as the CLI draws none`);
  }
  same(got.missing, [], `${label}: every view in this build`);
  comparePlan(got, dir, files, label);
}

// The boxes of `ptepack map --memory FILE -o X.svg`, per panel (method and buffer).
function memoryMapPanels(dir, file) {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'ptepack-plan-'));
  try {
    execFileSync(cli, ['map', '--memory', file, '-o', path.join(tmp, 'plan.svg'), '-q'], { cwd: dir });
    const svg = fs.readFileSync(path.join(tmp, 'plan.svg'), 'utf8');
    const unescape = (t) => t.replace(/&quot;/g, '"').replace(/&apos;/g, "'").replace(/&lt;/g, '<').replace(/&gt;/g, '>').replace(/&amp;/g, '&');
    return [...svg.matchAll(/<g class="panel" data-method="([^"]*)" data-memory-id="(\d+)">([\s\S]*?)<\/g>/g)].map((m) => ({
      method: unescape(m[1]), memory_id: Number(m[2]), boxes: (m[3].match(/<rect class="tensor"/g) || []).length,
      titled: (m[3].match(/<rect class="tensor"[^>]*><title>/g) || []).length }));
  } finally {
    fs.rmSync(tmp, { recursive: true, force: true });
  }
}

// The plan view equals `ptepack plan --json` (and its picture `map --memory`'s) on the same
// program. A .bpte: the program it wraps, cut out of it (the CLI plans .pte files only).
let planCheckMs = 0;  // time in comparePlan (its CLI runs), for the summary line
function comparePlan(got, dir, files, label) {
  const t0 = Date.now();
  try {
    comparePlanAt(got, dir, files, label);
  } finally {
    planCheckMs += Date.now() - t0;
  }
}
// `ptepack plan --json` and map --memory's panels of one set of files, run once per set (the
// whole and the leading-bytes pages are compared with the same run: `plan` of xor.pte, whose
// exact search it runs, takes 6.6 s with the ASan CLI scripts/test.sh gives). null: a .ptd.
const cliPlans = new Map();
function cliPlan(dir, files) {
  const key = [dir, ...files].join('\n');
  if (cliPlans.has(key)) return cliPlans.get(key);
  const [file, ...ptds] = files;
  let out = null;
  if (!file.endsWith('.ptd')) {
    let planDir = dir;
    let planFile = file;
    let tmp = null;
    if (file.endsWith('.bpte')) {
      const ins = cliJson(dir, ['inspect', file, '--json']);
      tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'ptepack-bpte-'));
      const fd = fs.openSync(path.join(dir, file), 'r');
      const buf = Buffer.alloc(ins.program.size);
      fs.readSync(fd, buf, 0, buf.length, ins.program.offset);
      fs.closeSync(fd);
      planDir = tmp;
      planFile = 'program.pte';
      fs.writeFileSync(path.join(tmp, planFile), buf);
    }
    try {
      const r = spawnSync(cli, ['plan', planFile, ...(tmp ? [] : ptds.flatMap((q) => ['--ptd', q])), '--json'],
        { cwd: planDir, encoding: 'utf8', maxBuffer: 1 << 28 });
      out = { status: r.status, plan: r.status === 0 ? JSON.parse(r.stdout) : null,
        panels: r.status === 0 ? memoryMapPanels(planDir, planFile) : null };
    } finally {
      if (tmp) fs.rmSync(tmp, { recursive: true, force: true });
    }
  }
  cliPlans.set(key, out);
  return out;
}

function comparePlanAt(got, dir, files, label) {
  const c = cliPlan(dir, files);
  if (!c) {
    check(got.planError === 'no-program', `${label}: plan view says a .ptd plans no memory`, `page: ${got.planError}`);
    return;
  }
  if (c.status !== 0) {
    check(got.planError === 'invalid', `${label}: plan view refused as the CLI refuses it (exit ${c.status})`, `page: ${got.planError}`);
    return;
  }
  const p = c.plan;
  const drawn = p.methods.some((m) => m.buffers.length || m.not_checked);
  if (!check(!got.planError && got.planPicture === drawn, `${label}: plan view shown, ${drawn ? 'with' : 'without'} its picture (${drawn ? 'planned' : 'no planned'} tensors)`,
    `page: ${got.planError}, picture ${got.planPicture}`)) return;
  same(got.planTotal && { size_now: got.planTotal.size_now, lower_bound: got.planTotal.lower_bound, planned: got.planTotal.planned },
    { size_now: p.size_now, lower_bound: p.lower_bound, planned: p.planned }, `${label}: plan totals (now ${p.size_now}, lower bound ${p.lower_bound}, re-planned ${p.planned})`);
  const want = [];
  for (const m of p.methods) {
    for (const b of m.buffers) {
      want.push({ method: m.name, memory_id: b.memory_id, size_now: b.size_now, lower_bound: b.lower_bound,
        above: Math.round(b.above_lower_bound_percent * 10) / 10, sizes: b.sizes, planned: b.planned,
        peak: b.peak ? { instruction: b.peak.instruction, bytes: b.peak.bytes } : null,
        values: b.peak ? b.peak.values.map((v) => ({ value: v.value, bytes: v.bytes, interval: v.interval })) : [] });
    }
  }
  // The sizes per algorithm compared by name (the page lists them in plan's order).
  const byName = (o) => Object.fromEntries(Object.entries(o).sort(([x], [y]) => x.localeCompare(y)));
  got.planBuffers.forEach((r) => { r.sizes = byName(r.sizes); });
  want.forEach((r) => { r.sizes = byName(r.sizes); });
  same(got.planBuffers, want, `${label}: plan per method and buffer (${want.map((b) => `${b.method}#${b.memory_id}: now ${b.size_now}, ` +
    `bound ${b.lower_bound}, ${Object.entries(b.sizes).map(([k, v]) => `${k} ${v}`).join(', ')}, peak ${b.peak ? `@${b.peak.instruction} ${b.peak.bytes} B, ${b.values.length} tensors` : 'none'}`).join('; ') || 'no planned buffers'})`);
  same([got.planNone, got.planNotChecked], [p.methods.filter((m) => !m.buffers.length && !m.not_checked).length,
    p.methods.filter((m) => m.not_checked).length], `${label}: methods without planned tensors, and not derived`);
  const panels = c.panels;
  same(got.planPanels, panels, `${label}: picture has map --memory's panels and boxes (${panels.map((q) => `${q.method}#${q.memory_id}: ${q.boxes} boxes`).join(', ') || 'none'})`);
  check(got.planPanels.every((q) => q.titled === q.boxes), `${label}: every box has its hover title`);
}

const SHOT_COLOURS = {
  inspect: { hex: '#1d2330', min: 1500, what: 'text' },
  verify: { hex: '#2e7d32', min: 100, what: 'the green verdict' },
  size: { hex: '#1d2330', min: 1500, what: 'text' },
  map: { hex: '#f28e2b', min: 500, what: 'the flatbuffer band' },
  graph: { hex: '#b8e6b8', min: 1000, what: 'input nodes' },
  plan: { hex: '#1d2330', min: 1500, what: 'text' },
  // keyword_spotting.pte's plan: the picture's boxes (temporaries in green).
  'keyword_spotting-plan': { hex: '#59a14f', min: 2000, what: 'the picture\'s temporaries' },
};

async function screenshots(page, base, label) {
  const views = ['inspect', 'verify', 'size', 'map', 'graph', 'plan'];
  const out = [];
  for (const v of views) {
    await page.click(`nav#tabs button[data-view="${v}"]`);
    const file = path.join(outDir, `${base}-${v}.png`);
    await page.screenshot({ path: file, fullPage: v !== 'inspect' && v !== 'size' });
    // Not blank: pixels of what the view draws, in a picture of the view alone (the page's
    // header and background would pass an empty view).
    const part = path.join(outDir, `${base}-${v}-view.png`);
    const box = await page.locator('section.view').boundingBox();
    await page.screenshot({ path: part, fullPage: true,
      clip: { x: box.x, y: box.y, width: box.width, height: Math.min(box.height, 1000) } });
    const colour = SHOT_COLOURS[`${base}-${v}`] || SHOT_COLOURS[v];
    const st = pngStats(part, colour.hex);
    check(st.matching[0] >= colour.min, `${label}: screenshot of ${v} shows ${colour.what} (${st.matching[0]} pixels of ${colour.hex}; ${st.nonWhite} of ${st.w * st.h} not white)`);
    out.push(file);
  }
  return out;
}

// A deterministic byte generator (xorshift32).
function randomBytes(n, seed) {
  const b = Buffer.alloc(n);
  let x = seed >>> 0;
  for (let i = 0; i < n; ++i) { x ^= x << 13; x >>>= 0; x ^= x >>> 17; x ^= x << 5; x >>>= 0; b[i] = x & 255; }
  return b;
}

// A 4 GiB .pte whose one constant is a hole: written by `ptepack pack` from a sparse data file.
function bigPte(dir) {
  const data = path.join(dir, 'weights.bin');
  const size = 4 * 1024 * 1024 * 1024;
  const fd = fs.openSync(data, 'w');
  fs.ftruncateSync(fd, size);
  fs.writeSync(fd, Buffer.from('first bytes'), 0, 11, 0);
  fs.closeSync(fd);
  const spec = {
    program: { version: 0, execution_plan: [{
      name: 'forward',
      values: [{ val_type: 'Tensor', val: { scalar_type: 'BYTE', sizes: [4, 1073741824], dim_order: [0, 1], data_buffer_idx: 1 } }],
      inputs: [], outputs: [0], chains: [{ instructions: [] }], operators: [], delegates: [], non_const_buffer_sizes: [0],
    }] },
    constants: [{ file: data, offset: 0, size }],
  };
  fs.writeFileSync(path.join(dir, 'spec.json'), JSON.stringify(spec));
  fs.writeFileSync(path.join(dir, 'config.json'), '{}');
  execFileSync(cli, ['pack', 'config.json', 'spec.json', '-o', 'big.pte', '-q'], { cwd: dir });
  fs.rmSync(data);
  return 'big.pte';
}

// A program whose plan verify flags (plan-overlap): p -> relu -> r -> exp -> s -> neg -> q, packed
// with s apart from r (packing verifies it), then s's offset patched onto r's last 16 bytes while
// both are live at instruction 1. X is chosen so that s's offset is one unique 4-byte pattern in
// the file (checked).
function overlapPte(dir) {
  const X = 0x1d0;
  const t = (n, offset) => ({ val_type: 'Tensor', val: { scalar_type: 'FLOAT', sizes: [n], dim_order: [0],
    allocation_info: { memory_id: 1, memory_offset_low: offset } } });
  const call = (op, a, b) => ({ instr_args_type: 'KernelCall', instr_args: { op_index: op, args: [a, b, b] } });
  const spec = { program: { version: 0, execution_plan: [{
    name: 'forward', values: [t(16, 0), t(8, X), t(8, X + 32), t(16, X + 64)], inputs: [0], outputs: [3],
    chains: [{ inputs: [0], outputs: [3], instructions: [call(0, 0, 1), call(1, 1, 2), call(2, 2, 3)] }],
    operators: ['relu', 'exp', 'neg'].map((n) => ({ name: `aten::${n}`, overload: 'out' })), delegates: [],
    non_const_buffer_sizes: [0, X + 128],
  }], segments: [] } };
  fs.writeFileSync(path.join(dir, 'overlap-spec.json'), JSON.stringify(spec));
  fs.writeFileSync(path.join(dir, 'config.json'), '{}');
  execFileSync(cli, ['pack', 'config.json', 'overlap-spec.json', '-o', 'overlap.pte', '-q'], { cwd: dir });
  const b = fs.readFileSync(path.join(dir, 'overlap.pte'));
  const from = Buffer.alloc(4);
  from.writeUInt32LE(X + 32);
  const at = b.indexOf(from);
  if (at < 0 || b.indexOf(from, at + 1) >= 0) throw new Error('overlap.pte: s\'s offset is not one unique pattern');
  b.writeUInt32LE(X + 16, at);
  fs.writeFileSync(path.join(dir, 'overlap.pte'), b);
  return 'overlap.pte';
}

(async () => {
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  const base = `http://127.0.0.1:${server.address().port}`;
  const userData = fs.mkdtempSync(path.join(os.tmpdir(), 'ptepack-chromium-'));
  const context = await chromium.launchPersistentContext(userData, {
    executablePath: CHROMIUM, headless: true, args: FLAGS, viewport: { width: 1400, height: 900 },
  });
  const page = context.pages()[0] || await context.newPage();
  const requests = [];
  page.on('request', (r) => requests.push(r.url()));
  const consoleErrors = [];
  page.on('pageerror', (e) => consoleErrors.push(String(e)));
  const work = fs.mkdtempSync(path.join(os.tmpdir(), 'ptepack-web-'));
  try {
    // Every fixture, read whole and by leading bytes.
    for (const files of fixtureSets()) {
      const paths = files.map((f) => path.join(fixtures, f));
      const label = files.join(' + ');
      const got = await open(page, `${base}/index.html`, paths);
      if (!check(!got.error, `${label}: opened`, JSON.stringify(got.error))) continue;
      compare(got, fixtures, files, label);
      const lead = await open(page, `${base}/index.html?leading=1`, paths);
      compare(lead, fixtures, files, `${label} (leading bytes)`);
      const total = paths.reduce((s, p) => s + fs.statSync(p).size, 0);
      console.log(`     ${label}: ${total} bytes; read whole: ${got.timing.bytes_read} in ${got.timing.total_ms.toFixed(1)} ms; ` +
        `by leading bytes: ${lead.timing.bytes_read} in ${lead.timing.total_ms.toFixed(1)} ms; ` +
        `the plan view ${got.viewMs.plan.toFixed(1)} ms and ${lead.viewMs.plan.toFixed(1)} ms of those`);
      if (['stories260k_qnn.pte', 'keyword_spotting.pte'].includes(files[0])) {
        await open(page, `${base}/index.html`, paths);
        await screenshots(page, path.basename(files[0], '.pte'), label);
      }
    }

    // Bad files: the CLI's findings, shown as findings.
    const stories = fs.readFileSync(path.join(fixtures, 'stories260k_qnn.pte'));
    const bad = {
      'corrupt-program-size.pte': (() => { const b = Buffer.from(stories); b.writeBigUInt64LE(BigInt(b.length + 1), 16); return b; })(),
      'corrupt-flatbuffer.pte': (() => { const b = Buffer.from(stories); for (let i = 200; i < 260; ++i) b[i] = 0xff; return b; })(),
      'truncated.pte': stories.subarray(0, stories.length >> 1),
      'empty.pte': Buffer.alloc(0),
      'random.bin': randomBytes(4096, 26),
    };
    for (const [name, bytes] of Object.entries(bad)) {
      fs.writeFileSync(path.join(work, name), bytes);
      for (const q of ['', '?leading=1']) {
        const got = await open(page, `${base}/index.html${q}`, [path.join(work, name)]);
        const v = cliJson(work, ['verify', name, '--json']);
        same(got.findings.map((f) => f.code), v.findings.map((f) => f.code), `${name}${q}: findings ${v.findings.map((f) => f.code).join(', ')}`);
        check(got.valid === false && got.findings.some((f) => f.severity === 'error'), `${name}${q}: shown invalid, with errors`);
      }
    }
    // The hostile inputs of testdata/regressions: the CLI's findings (or its error), never a blank page.
    const regressions = path.join(ROOT, 'testdata', 'regressions');
    for (const name of fs.readdirSync(regressions).filter((n) => /\.(pte|ptd|bpte)$/.test(n)).sort()) {
      const got = await open(page, `${base}/index.html`, [path.join(regressions, name)]);
      const r = spawnSync(cli, ['verify', name, '--json'], { cwd: regressions, encoding: 'utf8' });
      const v = JSON.parse(r.stdout);
      if (v.error) {
        check(!!got.error || got.viewError, `${name}: the CLI cannot read it (${v.error.code}); the page says why`, JSON.stringify(got).slice(0, 300));
      } else {
        same(got.findings.map((f) => f.code), v.findings.map((f) => f.code), `${name}: findings ${v.findings.map((f) => f.code).join(', ') || '(none)'}`);
      }
    }
    const rnd = await open(page, `${base}/index.html`, [path.join(work, 'random.bin')]);
    check(rnd.findings.some((f) => /not an ExecuTorch program/.test(f.message)), 'random.bin: "not an ExecuTorch program"');
    await page.click('nav#tabs button[data-view="verify"]');
    await page.click('tr.finding a.offset');
    const hl = await page.evaluate(() => document.querySelectorAll('.mapbox .highlight').length);
    check(hl === 0 || hl === 2, 'a finding\'s offset link opens the byte map (or says there is none)');
    const cor = await open(page, `${base}/index.html`, [path.join(work, 'corrupt-program-size.pte')]);
    check(cor.findings.length > 0, 'corrupt-program-size.pte: findings listed');

    // A plan verify flags: shown as the CLI's plan shows it, the overlapping tensors red in the
    // picture as in map --memory's.
    const tOverlap = Date.now();
    const ov = overlapPte(work);
    const ovShown = await open(page, `${base}/index.html`, [path.join(work, ov)]);
    const ovV = cliJson(work, ['verify', ov, '--json']);
    same(ovShown.findings.map((f) => f.code), ovV.findings.map((f) => f.code), `${ov}: findings ${ovV.findings.map((f) => f.code).join(', ')}`);
    check(ovV.findings.some((f) => f.code === 'plan-overlap'), `${ov}: the CLI reports plan-overlap`);
    comparePlan(ovShown, work, [ov], ov);
    const red = await page.evaluate(() => ({ banner: Number((document.querySelector('[data-plan-errors]') || { dataset: {} }).dataset.planErrors),
      red: [...document.querySelectorAll('.planbox rect.tensor[data-overlap]')].map((r) => Number(r.dataset.value)) }));
    const ovSvg = path.join(work, 'overlap.svg');
    execFileSync(cli, ['map', '--memory', ov, '-o', ovSvg, '-q'], { cwd: work });
    const cliRed = [...fs.readFileSync(ovSvg, 'utf8').matchAll(/<rect class="tensor" data-value="(\d+)"[^>]*data-overlap="1"/g)].map((m) => Number(m[1]));
    same(red, { banner: ovV.findings.filter((f) => f.code.startsWith('plan-') && f.severity === 'error').length, red: cliRed },
      `${ov}: the plan's errors said, values ${cliRed.join(' and ')} red as in map --memory`);
    await page.screenshot({ path: path.join(outDir, 'overlap-plan.png'), fullPage: true });
    const overlapMs = Date.now() - tOverlap;

    // A finding's offset highlights its region in the byte map (the warning of
    // module_linear_no_constant_segment.pte is at offset 84, in the flatbuffer).
    await open(page, `${base}/index.html`, [path.join(fixtures, 'module_linear_no_constant_segment.pte')]);
    await page.click('nav#tabs button[data-view="verify"]');
    const links = await page.$$('tr.finding a.offset');
    if (check(links.length === 1, 'module_linear_no_constant_segment.pte: one finding with an offset link')) {
      await links[0].click();
      const h = await page.evaluate(() => ({ view: document.querySelector('section.view').dataset.view,
        marks: document.querySelectorAll('.mapbox .highlight').length,
        at: Number((document.querySelector('.mapbox [data-highlight-offset]') || { dataset: {} }).dataset.highlightOffset),
        label: (document.querySelector('.highlight-label') || {}).textContent }));
      check(h.view === 'map' && h.marks === 2 && h.at === 84 && /offset 84 is in flatbuffer/.test(h.label || ''),
        `clicking a finding's offset shows it in the byte map (${h.label})`);
      await page.screenshot({ path: path.join(outDir, 'finding-highlight.png'), fullPage: true });
    }

    // 4 GiB sparse .pte: described in under 2 s, reading under 64 MiB of it.
    const big = bigPte(work);
    const bigSize = fs.statSync(path.join(work, big)).size;
    await page.goto(`${base}/index.html`);
    await page.waitForSelector('body[data-state="ready"]');
    // Count the bytes the page reads, from outside its code: every Blob.slice it takes.
    await page.evaluate(() => {
      window.slicedBytes = 0;
      const orig = Blob.prototype.slice;
      Blob.prototype.slice = function (a, b, t) { const s = orig.call(this, a, b, t); window.slicedBytes += s.size; return s; };
    });
    const t0 = Date.now();
    await page.setInputFiles('#file-input', [path.join(work, big)]);
    await page.waitForSelector('body[data-state="done"]', { timeout: 60000 });
    const wall = Date.now() - t0;
    const bigShown = await shown(page);
    const sliced = await page.evaluate(() => window.slicedBytes);
    const v = cliJson(work, ['verify', big, '--json']);
    same(bigShown.findings.map((f) => f.code), v.findings.map((f) => f.code), `4 GiB sparse .pte (${bigSize} bytes): findings as the CLI's`);
    check(bigShown.timing.total_ms < 2000, `4 GiB sparse .pte: described in ${bigShown.timing.total_ms.toFixed(1)} ms in the page ` +
      `(${wall} ms from setting the input to the drawn page), under 2 s`);
    check(sliced < 64 * 1024 * 1024 && bigShown.timing.bytes_read === sliced,
      `4 GiB sparse .pte: ${sliced} bytes read (Blob.slice), under 64 MiB`);
    check(bigShown.notChecked.some((s) => /were not read/.test(s)), '4 GiB sparse .pte: verify says what was not read');
    same(bigShown.size[0].size, bigSize, '4 GiB sparse .pte: size view has the whole file size');
    comparePlan(bigShown, work, [big], '4 GiB sparse .pte');
    console.log(`     4 GiB sparse .pte: ${bigSize} bytes, ${sliced} read, ${bigShown.timing.total_ms.toFixed(1)} ms in the page ` +
      `(the plan view ${bigShown.viewMs.plan.toFixed(1)} ms), ${wall} ms wall`);
    fs.rmSync(path.join(work, big));

    // From file:// too (the module from inside ptepack.js).
    const fileUrl = `file://${path.join(webDir, 'index.html')}`;
    const viaFile = await open(page, fileUrl, [path.join(fixtures, 'add.pte')]);
    const addV = cliJson(fixtures, ['verify', 'add.pte', '--json']);
    same(viaFile.findings.map((f) => f.code), addV.findings.map((f) => f.code), 'file:// page: add.pte findings as the CLI\'s');
    check(viaFile.methods === 1, 'file:// page: add.pte has 1 method');

    console.log(`     the plan's checks: ${(planCheckMs / 1000).toFixed(1)} s comparing with plan --json and map --memory ` +
      `(the CLI runs included), ${(overlapMs / 1000).toFixed(1)} s for ${ov}`);

    // No requests of the page's own beyond its three files.
    const foreign = requests.filter((u) => !/^(blob:|data:|file:)/.test(u) &&
      !new RegExp(`^${base}/(index\\.html(\\?leading=1)?|ptepack\\.js|ptepack\\.wasm)$`).test(u));
    check(foreign.length === 0, `requests only for the page's own files (${requests.length} requests)`, foreign.slice(0, 5).join(' '));
    check(consoleErrors.length === 0, 'no uncaught errors in the page', consoleErrors.slice(0, 3).join(' | '));
  } catch (e) {
    check(false, 'browser test ran to the end', e.stack);
  } finally {
    await context.close();
    server.close();
    fs.rmSync(work, { recursive: true, force: true });
    fs.rmSync(userData, { recursive: true, force: true });
  }
  console.log(`browser: ${passed} passed, ${failed} failed`);
  process.exit(failed ? 1 : 0);
})();
