import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { apiContract, type Contract } from './contract.js';

/** Request headers fetch sets itself, or that describe one hop only. */
const HOP_BY_HOP = ['host', 'connection', 'keep-alive', 'content-length', 'transfer-encoding', 'expect'];

function headersOf(incoming: http.IncomingHttpHeaders): Headers {
  const headers = new Headers();
  for (const [name, value] of Object.entries(incoming)) {
    if (value === undefined || HOP_BY_HOP.includes(name)) continue;
    for (const one of Array.isArray(value) ? value : [value]) headers.append(name, one);
  }
  return headers;
}

export interface ContractProxy {
  url: string;
  /** `METHOD /path → status` of each exchange, in order. */
  exchanges: string[];
  /** Every departure from the contract, of a request or a response, with its exchange. */
  violations: string[];
  close(): Promise<void>;
}

/**
 * A contract-checking proxy: put it between a client and `target`; it forwards every request,
 * checks the request and the response against openapi.json, and records what departs from it.
 */
export async function startContractProxy(target: string, contract: Contract = apiContract()): Promise<ContractProxy> {
  const exchanges: string[] = [];
  const violations: string[] = [];
  const server = http.createServer(async (req, res) => {
    try {
      const chunks: Buffer[] = [];
      for await (const chunk of req) chunks.push(chunk as Buffer);
      const requestBody = Buffer.concat(chunks);
      const method = req.method ?? 'GET';
      const requestHeaders = headersOf(req.headers);
      const upstream = await fetch(new URL(req.url ?? '/', target), {
        method,
        headers: requestHeaders,
        body: requestBody.length > 0 ? requestBody : undefined,
        redirect: 'manual',
      });
      const body = Buffer.from(await upstream.arrayBuffer());
      const exchange = `${method} ${req.url} → ${upstream.status}`;
      exchanges.push(exchange);
      const found = contract.violations({
        method,
        url: req.url ?? '/',
        status: upstream.status,
        headers: upstream.headers,
        text: body.toString('utf8'),
        request: { headers: requestHeaders, text: requestBody.toString('utf8') },
      });
      violations.push(...found.map((violation) => `${exchange}: ${violation}`));
      const headers: Record<string, string> = {};
      upstream.headers.forEach((value, name) => {
        if (!HOP_BY_HOP.includes(name) && name !== 'content-encoding') headers[name] = value;
      });
      res.writeHead(upstream.status, headers);
      res.end(method === 'HEAD' ? undefined : body);
    } catch (error) {
      violations.push(`${req.method} ${req.url}: the proxy failed: ${String(error)}`);
      res.destroy();
    }
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    exchanges,
    violations,
    close: () =>
      new Promise((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
