import { jest } from '@jest/globals';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import fc from 'fast-check';
import { BASE_EJECTION_MS, isConnectFailure, PROBE_INTERVAL_MS, probeByConnecting, ReplicaHealth, socketReset, upstreamAgent, UPSTREAM_MAX_SOCKET_AGE_MS, type Endpoint } from '../../src/proxy/upstream-agent.js';

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

/** Compose's DNS: one address per replica, the port of the URL. */
const twoAddresses = { resolve: async (_hostname: string, port: number) => [{ host: '127.0.0.1', port }, { host: '127.0.0.2', port }] };

/** A port nothing listens on: a replica that was killed. */
async function closedPort(): Promise<number> {
  const server = http.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

function request(agent: http.Agent, port: number, options: { method?: string; headers?: Record<string, string> } = {}): Promise<number> {
  return new Promise((resolve, reject) => {
    http
      .request({ host: 'products-service', port, agent, ...options }, (res) => {
        res.resume();
        res.on('end', () => resolve(res.statusCode!));
      })
      .on('error', reject)
      .end();
  });
}

const get = (agent: http.Agent, port: number) => request(agent, port);

describe('the upstream agent', () => {
  it('spreads concurrent requests over every address the service name resolves to', async () => {
    const service = await replicas();
    const agent = upstreamAgent('http://products-service', twoAddresses);
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
    const agent = upstreamAgent('http://products-service', {
      resolve: async (hostname) => {
        throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: 'ENOTFOUND' });
      },
    });
    await expect(get(agent, 80)).rejects.toMatchObject({ code: 'ENOTFOUND' });
    agent.destroy();
  });

  it('closes a socket older than UPSTREAM_MAX_SOCKET_AGE_MS once its request is done, so new replicas get connections', async () => {
    const { port, close } = await replicas();
    const connections: number[] = [];
    let clock = 1_000;
    const agent = upstreamAgent(`http://service:${port}`, { resolve: async () => [{ host: '127.0.0.1', port }], now: () => clock });
    const localPort = async () => {
      const answered = await new Promise<http.IncomingMessage>((resolve, reject) => http.get({ host: 'service', port, agent }, resolve).on('error', reject));
      connections.push(answered.socket.localPort!);
      answered.resume();
      // Done once the agent has had the socket back (kept, or closed for its age).
      await new Promise((resolve) => answered.once('end', () => setImmediate(resolve)));
    };
    try {
      await localPort();
      clock += UPSTREAM_MAX_SOCKET_AGE_MS;
      await localPort(); // as old as allowed: kept
      clock += 1;
      await localPort(); // older: its last request, then closed
      await localPort();
      expect(connections[1]).toBe(connections[0]);
      expect(connections[2]).toBe(connections[0]);
      expect(connections[3]).not.toBe(connections[0]);
    } finally {
      agent.destroy();
      await close();
    }
  });

  describe('when a replica cannot be connected to', () => {
    let live: http.Server;
    let livePort: number;
    let deadPort: number;
    beforeAll(async () => {
      live = http.createServer((_req, res) => res.end('ok'));
      await new Promise<void>((resolve) => live.listen(0, '127.0.0.1', resolve));
      livePort = (live.address() as AddressInfo).port;
      deadPort = await closedPort();
    });
    afterAll(() => new Promise((resolve) => live.close(resolve)));

    /** The dead replica first, the live one second: the first connection goes to the dead one. */
    const deadThenLive = () => ({ resolve: async (): Promise<Endpoint[]> => [{ host: '127.0.0.1', port: deadPort }, { host: '127.0.0.1', port: livePort }] });

    it('fails the request, its error tagged as a connection never opened, and ejects the replica at once', async () => {
      let now = 1_000_000;
      const health = new ReplicaHealth(() => now);
      const dead = { host: '127.0.0.1', port: deadPort };
      const agent = upstreamAgent('http://products-service', { ...deadThenLive(), health });
      try {
        const failure: unknown = await request(agent, 80, { method: 'POST' }).catch((error: unknown) => error);
        expect(failure).toMatchObject({ code: 'ECONNREFUSED' });
        expect(isConnectFailure(failure)).toBe(true);
        expect(health.isEjected(dead)).toBe(true);
        // Ejected: every new connection goes to the live replica first.
        for (let i = 0; i < 4; i++) expect(await request(agent, 80, { method: 'POST', headers: { Connection: 'close' } })).toBe(200);
        now += BASE_EJECTION_MS;
        expect(health.isEjected(dead)).toBe(false);
        expect(health.order('another-service:80', [dead, { host: '127.0.0.1', port: livePort }])[0]).toEqual(dead);
      } finally {
        agent.destroy();
      }
    });

    it('gives a fresh agent a connection of its own per request, closed after it', async () => {
      const agent = upstreamAgent('http://products-service', { resolve: async () => [{ host: '127.0.0.1', port: livePort }], fresh: true });
      const localPorts = new Set<number>();
      try {
        for (let i = 0; i < 3; i++) {
          await new Promise<void>((resolve, reject) =>
            http.get({ host: 'products-service', port: 80, agent }, (res) => {
              localPorts.add(res.socket.localPort!);
              res.resume().on('end', resolve);
            }).on('error', reject),
          );
        }
        expect(localPorts.size).toBe(3);
      } finally {
        agent.destroy();
      }
    });

    it('ejects the replica of a socket reset under a request at once', async () => {
      const health = new ReplicaHealth(() => 0);
      const agent = upstreamAgent('http://products-service', { resolve: async () => [{ host: '127.0.0.1', port: livePort }], health });
      try {
        const answered = await new Promise<http.IncomingMessage>((resolve, reject) => http.get({ host: 'products-service', port: 80, agent }, resolve).on('error', reject));
        answered.resume();
        socketReset(answered.socket);
        expect(health.isEjected({ host: '127.0.0.1', port: livePort })).toBe(true);
      } finally {
        agent.destroy();
      }
    });
  });
});

describe('replica health', () => {
  const [a, b] = [{ host: '127.0.0.1', port: 1 }, { host: '127.0.0.1', port: 2 }];

  it('uses ejected replicas when every replica is ejected, rather than none', () => {
    const health = new ReplicaHealth(() => 0);
    health.failed(a);
    health.failed(b);
    expect(health.order('s', [a, b])).toHaveLength(2);
  });

  it('tries the ejected replica that failed longest ago first when every replica is ejected, whatever the turn', () => {
    let now = 0;
    const health = new ReplicaHealth(() => now);
    health.failed(a);
    now += 1_000;
    health.failed(b);
    for (let turn = 0; turn < 4; turn++) expect(health.order('s', [b, a])[0]).toEqual(a);
  });

  describe('probes', () => {
    beforeEach(() => jest.useFakeTimers());
    afterEach(() => jest.useRealTimers());

    it('bring an ejected replica back at the first connection it accepts, a probe at a time every PROBE_INTERVAL_MS', async () => {
      const probed: number[] = [];
      let accepts = false;
      let now = 0;
      const health = new ReplicaHealth(() => now, async () => {
        probed.push(now);
        if (!accepts) throw new Error('refused');
      });
      health.failed(a);
      health.failed(a);
      for (let i = 1; i <= 3; i++) {
        now += PROBE_INTERVAL_MS;
        await jest.advanceTimersByTimeAsync(PROBE_INTERVAL_MS);
      }
      expect(probed).toEqual([1_000, 2_000, 3_000]);
      expect(health.isEjected(a)).toBe(true);
      accepts = true;
      now += PROBE_INTERVAL_MS;
      await jest.advanceTimersByTimeAsync(PROBE_INTERVAL_MS);
      expect(health.isEjected(a)).toBe(false);
      now += 10 * PROBE_INTERVAL_MS;
      await jest.advanceTimersByTimeAsync(10 * PROBE_INTERVAL_MS);
      expect(probed).toHaveLength(4);
    });

    it('stop when the ejection is over', async () => {
      let probes = 0;
      let now = 0;
      const health = new ReplicaHealth(() => now, async () => {
        probes++;
        throw new Error('refused');
      });
      health.failed(a);
      now = BASE_EJECTION_MS;
      await jest.advanceTimersByTimeAsync(10 * BASE_EJECTION_MS);
      expect(probes).toBe(0);
    });
  });

  it('probes by connecting: an accepting address resolves, a closed port rejects', async () => {
    const server = http.createServer();
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    try {
      await expect(probeByConnecting({ host: '127.0.0.1', port: (server.address() as AddressInfo).port })).resolves.toBeUndefined();
      await expect(probeByConnecting({ host: '127.0.0.1', port: await closedPort() })).rejects.toMatchObject({ code: 'ECONNREFUSED' });
    } finally {
      await new Promise((resolve) => server.close(resolve));
    }
  });

  it('keeps a replica out longer each time it fails again after coming back, and forgives it on a success', () => {
    let now = 0;
    const health = new ReplicaHealth(() => now);
    health.failed(a);
    now += BASE_EJECTION_MS;
    expect(health.isEjected(a)).toBe(false);
    health.failed(a);
    now += BASE_EJECTION_MS;
    expect(health.isEjected(a)).toBe(true);
    now += BASE_EJECTION_MS;
    expect(health.isEjected(a)).toBe(false);
    health.succeeded(a);
    health.failed(a);
    now += BASE_EJECTION_MS;
    expect(health.isEjected(a)).toBe(false);
  });

  it('ejects on the first failure, and failures while out (one death resets all its requests) do not lengthen it', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 50 }), fc.integer({ min: 0, max: BASE_EJECTION_MS - 1 }), (failures, spread) => {
        let now = 0;
        const health = new ReplicaHealth(() => now);
        for (let i = 0; i < failures; i++) {
          now = Math.floor((spread * i) / failures);
          health.failed(a);
          expect(health.isEjected(a)).toBe(true);
          expect(health.order('s', [a, b])).toEqual([b, a]);
        }
        now = BASE_EJECTION_MS;
        expect(health.isEjected(a)).toBe(false);
      }),
    );
  });
});
