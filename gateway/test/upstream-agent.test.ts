import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { retireAgedSocket, rotatingLookup, upstreamAgent, UPSTREAM_MAX_SOCKET_AGE_MS } from '../src/upstream-agent.js';

/** Two "replicas" of one service on different loopback addresses and the same port, as Compose gives them. */
async function replicas() {
  const hits = new Map<string, number>();
  const first = http.createServer((req, res) => {
    hits.set(req.socket.localAddress!, (hits.get(req.socket.localAddress!) ?? 0) + 1);
    res.end('ok');
  });
  await new Promise<void>((resolve) => first.listen(0, '127.0.0.1', resolve));
  const { port } = first.address() as AddressInfo;
  const second = http.createServer(first.listeners('request')[0] as http.RequestListener);
  await new Promise<void>((resolve) => second.listen(port, '127.0.0.2', resolve));
  return {
    port,
    hits,
    close: () => Promise.all([first, second].map((server) => new Promise((resolve) => server.close(resolve)))),
  };
}

const twoReplicas = rotatingLookup((_hostname, callback) =>
  callback(null, [
    { address: '127.0.0.1', family: 4 },
    { address: '127.0.0.2', family: 4 },
  ]),
);

function get(agent: http.Agent, port: number): Promise<number> {
  return new Promise((resolve, reject) => {
    http
      .get({ host: 'products-service', port, agent }, (res) => {
        res.resume();
        res.on('end', () => resolve(res.statusCode!));
      })
      .on('error', reject);
  });
}

describe('the upstream agent', () => {
  it('spreads concurrent requests over every address the service name resolves to', async () => {
    const service = await replicas();
    const agent = upstreamAgent('http://products-service', twoReplicas);
    try {
      const statuses = await Promise.all(Array.from({ length: 10 }, () => get(agent, service.port)));
      expect(statuses).toEqual(Array(10).fill(200));
      expect(service.hits.get('127.0.0.1')).toBe(5);
      expect(service.hits.get('127.0.0.2')).toBe(5);
    } finally {
      agent.destroy();
      await service.close();
    }
  });

  it('passes a failed lookup on as the error', async () => {
    const failing = rotatingLookup((hostname, callback) => callback(Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: 'ENOTFOUND' }), []));
    const agent = upstreamAgent('http://products-service', failing);
    await expect(get(agent, 80)).rejects.toMatchObject({ code: 'ENOTFOUND' });
    agent.destroy();
  });

  it('makes the request on an aged socket its last, so new replicas get connections', () => {
    const socket = {};
    const headers = new Map<string, string>();
    const request = { socket, setHeader: (name: string, value: string) => headers.set(name, value) } as unknown as http.ClientRequest;
    retireAgedSocket(request, 1_000);
    retireAgedSocket(request, 1_000 + UPSTREAM_MAX_SOCKET_AGE_MS);
    expect(headers.get('Connection')).toBeUndefined();
    retireAgedSocket(request, 1_001 + UPSTREAM_MAX_SOCKET_AGE_MS);
    expect(headers.get('Connection')).toBe('close');
  });
});
