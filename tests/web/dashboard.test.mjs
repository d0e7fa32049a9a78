// End-to-end tests of hetpoold's web dashboard in Debian's headless Chromium, driven by
// playwright-core, against a daemon with two simulated agents on 127.0.0.1. Pages render, the
// topology graph shows the fixture's links, a submitted job appears and changes state, a waiting
// job says why, the planner answers. Screenshots go to $HETPOOL_SCREENSHOT_DIR.
//   HETPOOL_BUILD_DIR=build HETPOOL_SOURCE_DIR=. node tests/web/dashboard.test.mjs
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, execFile } from 'node:child_process';
import { mkdtempSync, mkdirSync, readFileSync, existsSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';

const source = resolve(process.env.HETPOOL_SOURCE_DIR || '.');
const build = resolve(process.env.HETPOOL_BUILD_DIR || join(source, 'build'));
const shots = resolve(process.env.HETPOOL_SCREENSHOT_DIR || join(build, 'screenshots'));
const chromiumPath = process.env.HETPOOL_CHROMIUM || '/usr/bin/chromium';
const run = promisify(execFile);

let chromium;
try {
  ({ chromium } = await import('playwright-core'));
} catch (e) {
  console.error('playwright-core is missing: run npm ci --prefix tests/web (tests/run.sh does)');
  process.exit(1);
}

function freePort() {
  return new Promise((res, rej) => {
    const srv = createServer();
    srv.listen(0, '127.0.0.1', () => { const { port } = srv.address(); srv.close(() => res(port)); });
    srv.on('error', rej);
  });
}

async function waitFor(check, what, timeoutMs = 30000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try { if (await check()) return; } catch (e) { /* not yet */ }
    if (Date.now() > deadline) throw new Error('timed out waiting for ' + what);
    await new Promise((r) => setTimeout(r, 200));
  }
}

const dir = mkdtempSync(join(tmpdir(), 'hetpool-web-'));
const children = [];
let grpcPort, httpPort, browser, base;

function start(args, log) {
  const child = spawn(args[0], args.slice(1), { stdio: ['ignore', 'ignore', 'ignore'], detached: false,
    env: Object.assign({}, process.env) });
  children.push(child);
  return child;
}

async function cli(...args) {
  const { stdout } = await run(join(build, 'src/hetpoolctl'), ['--server', `127.0.0.1:${grpcPort}`, '--insecure', ...args]);
  return stdout.trim();
}

async function submit(spec) {
  const file = join(dir, `job-${Date.now()}-${Math.random().toString(16).slice(2)}.json`);
  (await import('node:fs')).writeFileSync(file, JSON.stringify(spec));
  return cli('submit', '-f', file);
}

before(async () => {
  grpcPort = await freePort();
  httpPort = await freePort();
  base = `http://127.0.0.1:${httpPort}`;
  start([join(build, 'src/hetpoold'), '--insecure', '--listen', `127.0.0.1:${grpcPort}`, '--data-dir', join(dir, 'daemon'),
    '--http-listen', `127.0.0.1:${httpPort}`, '--rdzv-port-range', '12500-12549']);
  // Start-up waits get two minutes: on a loaded machine (the suite's container tests beside this
  // one) two agents once took over 30 s to report Ready.
  const startUpMs = 120000;
  await waitFor(async () => (await fetch(base + '/api/nodes')).ok, 'hetpoold', startUpMs);
  for (const node of ['node-a', 'node-b']) {
    start([join(build, 'src/hetpool-agent'), '--insecure', '--server', `127.0.0.1:${grpcPort}`, '--node-name', node,
      '--work-dir', join(dir, node), '--backend', 'sim', '--inventory', join(source, 'deploy/examples', node + '.json'),
      '--job-dirs', `${source},/tmp`, '--run-as', 'root', '--kill-grace', '2s']);
  }
  await waitFor(async () => {
    const nodes = await (await fetch(base + '/api/nodes')).json();
    return (nodes.nodes || []).filter((n) => n.state === 'NODE_STATE_READY').length === 2;
  }, 'two Ready nodes', startUpMs);
  mkdirSync(shots, { recursive: true });
  browser = await chromium.launch({
    executablePath: chromiumPath,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
      '--disable-component-update', '--disable-sync'],
  });
});

after(async () => {
  if (browser) await browser.close();
  for (const child of children.slice().reverse()) child.kill('SIGTERM');  // agents first: they stop their jobs
  await new Promise((r) => setTimeout(r, 1500));
  for (const child of children) if (child.exitCode === null) child.kill('SIGKILL');
});

test('the pool overview shows every vendor and node', async () => {
  const page = await browser.newPage();
  const errors = [];
  page.on('pageerror', (e) => errors.push(e.message));
  page.on('console', (m) => { if (m.type() === 'error') errors.push(m.text()); });
  await page.goto(base + '/');
  await page.waitForSelector('tr[data-node="node-b"]');
  for (const vendor of ['nvidia', 'metax', 'cambricon']) {
    assert.equal(await page.locator(`.card[data-vendor="${vendor}"]`).count(), 1, vendor);
  }
  assert.match(await page.locator('.card[data-vendor="nvidia"] .big').innerText(), /4 free \/ 4/);
  assert.match(await page.locator('tr[data-node="node-a"]').innerText(), /READY/);
  await page.screenshot({ path: join(shots, 'overview.png'), fullPage: true });
  assert.deepEqual(errors, []);
  await page.close();
});

test("a node's topology graph draws the fixture's links", async () => {
  const page = await browser.newPage();
  await page.goto(base + '/#/nodes/node-a');
  await page.waitForSelector('svg.topology circle[data-device="nvidia0"]');
  assert.equal(await page.locator('svg.topology circle.device').count(), 4);
  // deploy/examples/node-a.json: the H100 pair on NVLink (18 links), the MLU370 pair on MLU-Link.
  const nvlink = page.locator('svg.topology line[data-kind="nvlink"]');
  assert.equal(await nvlink.count(), 1);
  assert.deepEqual([await nvlink.getAttribute('data-from'), await nvlink.getAttribute('data-to')].sort(), ['nvidia0', 'nvidia1']);
  assert.equal(await page.locator('svg.topology line[data-kind="mlulink"]').count(), 1);
  assert.match(await page.locator('svg.topology').innerHTML(), /nvlink x18/);
  await page.goto(base + '/#/nodes/node-b');
  await page.waitForSelector('svg.topology[data-node="node-b"] line[data-kind="metaxlink"]');
  await page.screenshot({ path: join(shots, 'node-b-topology.png'), fullPage: true });
  await page.close();
});

test('a submitted job appears, changes state and shows its logs', async () => {
  const page = await browser.newPage();
  await page.goto(base + '/#/queue');
  await page.waitForSelector('table#queue');
  const id = await submit({ name: 'web-e2e', user: 'wendy', working_dir: source, nnodes: 1, devices_per_node: 1,
    python: { script: 'deploy/examples/train_ddp.py', args: ['--steps', '25', '--step-sleep', '0.1'] },
    requirements: { vendors: ['nvidia'] } });
  assert.match(id, /^job-\d+$/);
  await page.waitForSelector(`tr[data-job="${id}"]`);  // the queue refreshes by itself
  await page.goto(base + '/#/jobs/' + id);
  await waitFor(async () => /RUNNING|SUCCEEDED/.test(await page.locator('#job-state').innerText()), 'the job to run');
  await page.screenshot({ path: join(shots, 'job-running.png'), fullPage: true });
  await waitFor(async () => (await page.locator('#job-state').innerText()) === 'SUCCEEDED', 'the job to succeed', 90000);
  await waitFor(async () => /final loss/.test(await page.locator('#logs').innerText()), 'its logs');
  assert.match(await page.locator('#events').innerText(), /Scheduled[\s\S]*Running[\s\S]*Succeeded/);
  assert.match(await page.locator('main').innerText(), /nccl\/cuda/);  // the launch plan
  await page.screenshot({ path: join(shots, 'job-succeeded.png'), fullPage: true });
  await page.close();
});

// Issue 45, item 5: what a job prints reaches the page with its control characters written out.
test("a job's control characters are shown escaped", async () => {
  const id = await submit({ name: 'web-controls', user: 'wendy', working_dir: '/tmp', nnodes: 1, devices_per_node: 1,
    command: ['/bin/sh', '-c', "printf 'clip \\033]52;c;aGk=\\007 done\\n'"], requirements: { vendors: ['nvidia'] } });
  const page = await browser.newPage();
  await page.goto(base + '/#/jobs/' + id);
  await waitFor(async () => /x1b/.test(await page.locator('#logs').innerText()), 'its logs', 90000);
  const logs = await page.locator('#logs').innerText();
  assert.match(logs, /clip \\x1b\]52;c;aGk=\\x07 done/);
  assert.doesNotMatch(logs, /[\u001b\u0007]/);
  await page.close();
});

test('a waiting job says why in the queue', async () => {
  const spec = { user: 'wendy', working_dir: '/tmp', nnodes: 2, devices_per_node: 2, command: ['/bin/sleep', '60'],
    requirements: { vendors: ['nvidia'] } };
  const first = await submit(Object.assign({ name: 'holder' }, spec));
  const second = await submit(Object.assign({ name: 'waiter' }, spec));
  const page = await browser.newPage();
  await page.goto(base + '/#/queue');
  const row = page.locator(`tr[data-job="${second}"]`);
  await waitFor(async () => /waiting for capacity/.test(await row.innerText()), 'the pending reason');
  assert.match(await row.innerText(), /PENDING/);
  assert.match(await row.innerText(), /needs 2 nodes? x 2/);
  await page.screenshot({ path: join(shots, 'queue.png'), fullPage: true });
  await cli('cancel', second);
  await cli('cancel', first);
  await page.close();
});

test('the planner answers what a model would need here', async () => {
  const page = await browser.newPage();
  await page.goto(base + '/#/plan');
  await page.fill('input[name="model"]', 'llama-2-7b');
  await page.selectOption('select[name="mode"]', 'infer');
  await page.click('#plan-form button');
  await page.waitForSelector('table#plans');
  const first = page.locator('table#plans tbody tr').first();
  assert.equal(await first.getAttribute('data-feasible'), 'true');
  assert.match(await page.locator('table#plans').innerText(), /H100-SXM/);
  assert.match(await page.locator('#plan-result').innerText(), /6\.74B parameters/);
  await page.screenshot({ path: join(shots, 'planner.png'), fullPage: true });
  await page.close();
});
