/**
 * `npm run bench`: GET /api/products/{id} on this machine, in one run, four ways:
 *   (a) straight from products-service, (b) through the gateway with the cache off,
 *   (c) through the gateway with a warm cache, (d) a bare node:http server answering the same bytes
 *   (the ceiling of this machine). Every server is its own process, started here; autocannon drives
 *   them one after the other. Prints requests/s and p50/p99 and the ratios c/a, c/d and b/a, and
 *   writes them to bench/results/latest.json.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdir, writeFile } from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import autocannon from 'autocannon';
import mysql from 'mysql2/promise';

const ROOT = new URL('..', import.meta.url).pathname;
const MYSQL_URL = process.env.BENCH_MYSQL_URL ?? 'mysql://root@127.0.0.1:3306';
const REDIS_URL = process.env.BENCH_REDIS_URL ?? 'redis://127.0.0.1:6379';
const DURATION_SECONDS = Number(process.env.BENCH_DURATION_SECONDS ?? 10);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 50);

interface Started {
  url: string;
  child: ChildProcess;
}

async function freePort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

/** Starts a server process on a free port and waits until its /healthz answers. */
async function start(args: string[], env: Record<string, string>): Promise<Started> {
  const port = await freePort();
  // Request logs at warn: the figures are about the request path, not about writing log lines.
  const child = spawn(process.execPath, args, { cwd: ROOT, env: { PATH: process.env.PATH, PORT: String(port), LOG_LEVEL: 'warn', ...env }, stdio: 'inherit' });
  const url = `http://127.0.0.1:${port}`;
  for (let attempt = 0; attempt < 100; attempt++) {
    if (child.exitCode !== null) break;
    if (await fetch(`${url}/healthz`).then((r) => r.ok, () => false)) return { url, child };
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  child.kill();
  throw new Error(`${args.join(' ')} did not start`);
}

// The ceiling: a node:http server that answers every request with the bytes the service returned.
const BARE_SERVER = `
const http = require('node:http');
const { body, etag } = JSON.parse(process.env.RESPONSE);
const server = http.createServer((req, res) => {
  if (req.url === '/healthz') return res.end('ok');
  res.writeHead(200, { 'content-type': 'application/json; charset=utf-8', etag, 'cache-control': 'no-cache', 'content-length': Buffer.byteLength(body) });
  res.end(body);
});
server.keepAliveTimeout = 65000;
server.listen(Number(process.env.PORT), '127.0.0.1');
`;

interface Figures {
  requestsPerSecond: number;
  p50Ms: number;
  p99Ms: number;
  errors: number;
  non2xx: number;
}

async function measure(name: string, url: string): Promise<Figures> {
  process.stdout.write(`  ${name}: ${url} for ${DURATION_SECONDS}s … `);
  await autocannon({ url, connections: CONNECTIONS, duration: 1 }); // warm-up: JIT, pools, keep-alive sockets
  const result = await autocannon({ url, connections: CONNECTIONS, duration: DURATION_SECONDS });
  const figures = {
    requestsPerSecond: Math.round(result.requests.average),
    p50Ms: result.latency.p50,
    p99Ms: result.latency.p99,
    errors: result.errors + result.timeouts,
    non2xx: result.non2xx,
  };
  process.stdout.write(`${figures.requestsPerSecond} req/s\n`);
  return figures;
}

async function main(): Promise<void> {
  const schema = `bench_${randomBytes(4).toString('hex')}_products`;
  const databaseUrl = `${MYSQL_URL}/${schema}`;
  const started: ChildProcess[] = [];
  try {
    const products = await start(['products-service/dist/main.js'], { DATABASE_URL: databaseUrl });
    started.push(products.child);
    const created = await fetch(`${products.url}/api/products`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ sku: 'BENCH-1', name: 'Benchmark widget', description: 'Measured.', price: { amount: '19.99', currency: 'EUR' }, stock: 42 }),
    });
    const path = created.headers.get('location')!;
    const body = await (await fetch(`${products.url}${path}`)).text();
    const etag = created.headers.get('etag')!;

    const gatewayEnv = { USERS_SERVICE_URL: products.url, PRODUCTS_SERVICE_URL: products.url, REDIS_URL };
    const uncached = await start(['gateway/dist/main.js'], { ...gatewayEnv, CACHE_ENABLED: 'false' });
    const cached = await start(['gateway/dist/main.js'], { ...gatewayEnv, CACHE_ENABLED: 'true' });
    const bare = await start(['-e', BARE_SERVER], { RESPONSE: JSON.stringify({ body, etag }) });
    started.push(uncached.child, cached.child, bare.child);
    for (let i = 0; i < 20 && (await fetch(`${cached.url}${path}`)).headers.get('x-cache') !== 'HIT'; i++);

    console.log(`GET ${path} (${Buffer.byteLength(body)} bytes), ${CONNECTIONS} connections, on ${os.cpus().length} × ${os.cpus()[0]?.model}`);
    const a = await measure('(a) products-service', `${products.url}${path}`);
    const b = await measure('(b) gateway, cache off', `${uncached.url}${path}`);
    const c = await measure('(c) gateway, warm cache', `${cached.url}${path}`);
    const d = await measure('(d) bare node:http', `${bare.url}${path}`);
    const ratio = (x: Figures, y: Figures) => Math.round((x.requestsPerSecond / y.requestsPerSecond) * 100) / 100;
    const results = {
      date: new Date().toISOString(),
      machine: { cpus: os.cpus().length, model: os.cpus()[0]?.model, memoryGiB: Math.round(os.totalmem() / 2 ** 30), node: process.version },
      settings: { durationSeconds: DURATION_SECONDS, connections: CONNECTIONS, logLevel: 'warn' },
      figures: { a, b, c, d },
      ratios: { 'c/a': ratio(c, a), 'c/d': ratio(c, d), 'b/a': ratio(b, a) },
    };
    console.table(Object.fromEntries(Object.entries(results.figures).map(([k, f]) => [k, { 'req/s': f.requestsPerSecond, 'p50 ms': f.p50Ms, 'p99 ms': f.p99Ms, errors: f.errors, non2xx: f.non2xx }])));
    console.log('ratios (requests/s):', results.ratios);
    await mkdir(new URL('results/', import.meta.url), { recursive: true });
    await writeFile(new URL('results/latest.json', import.meta.url), `${JSON.stringify(results, null, 2)}\n`);
    console.log('written to bench/results/latest.json');
  } finally {
    for (const child of started) child.kill('SIGTERM');
    const connection = await mysql.createConnection(MYSQL_URL);
    await connection.query(`DROP DATABASE IF EXISTS \`${schema}\``);
    await connection.end();
  }
}

await main();
