import { EventEmitter } from 'node:events';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { createLogger } from '@app/shared/platform/logger';
import type { Exchange } from '../src/exchange.js';
import { pipeline, type Stage } from '../src/pipeline.js';
import type { ResponseWriter } from '../src/respond.js';
import { Routing } from '../src/routing/service-routes.js';

/** The chain: every request goes through the stages in order until one answers; a failure is answered once. */
const routing = new Routing([{ name: 'users', url: 'http://127.0.0.1:1', prefix: '/api/users', cachedReads: true, publicReads: false, owner: 'none' }]);
const silent = createLogger('test', 'silent');

function request(url: string | undefined) {
  const req = Object.assign(new EventEmitter(), { url, method: 'GET', headers: {} }) as unknown as IncomingMessage;
  const res = Object.assign(new EventEmitter(), { headersSent: false }) as unknown as ServerResponse;
  return { req, res };
}

/** Runs one request to `url` (null: a request with none) through `stages`; resolves with the names of the stages it met and the failures answered. */
function run(stages: (Stage & { answers: boolean | 'async' | 'throws' | 'rejects' })[], url: string | null = '/api/users') {
  const met: string[] = [];
  const failures: unknown[] = [];
  const writer = { failure: (_exchange: Exchange, error: unknown) => failures.push(error) } as unknown as ResponseWriter;
  let seen: Exchange | undefined;
  const chain = stages.map((stage): Stage => ({
    name: stage.name,
    run(exchange) {
      met.push(stage.name);
      seen = exchange;
      if (stage.answers === 'throws') throw new Error(stage.name);
      if (stage.answers === 'rejects') return Promise.reject(new Error(stage.name));
      if (stage.answers === 'async') return Promise.resolve(false);
      return stage.answers;
    },
  }));
  const { req, res } = request(url ?? undefined);
  pipeline(chain, { routing, writer, logger: silent, onFinished: () => undefined })(req, res);
  return { met, failures, req, exchange: () => seen, settled: new Promise((resolve) => setImmediate(resolve)) };
}

const stage = (name: string, answers: boolean | 'async' | 'throws' | 'rejects') => ({ name, answers, run: () => false });

describe('pipeline', () => {
  it('runs the stages in order and stops at the first that answers, synchronously', () => {
    const { met } = run([stage('a', false), stage('b', true), stage('c', true)]);
    expect(met).toEqual(['a', 'b']);
  });

  it('goes on after a stage that waited and passed the request on', async () => {
    const result = run([stage('a', 'async'), stage('b', false), stage('c', true)]);
    expect(result.met).toEqual(['a']);
    await result.settled;
    expect(result.met).toEqual(['a', 'b', 'c']);
  });

  it('answers a stage that throws or rejects as a failure, once, and runs no later stage', async () => {
    const thrown = run([stage('a', 'throws'), stage('b', true)]);
    const rejected = run([stage('a', 'rejects'), stage('b', true)]);
    await Promise.all([thrown.settled, rejected.settled]);
    expect(thrown.met).toEqual(['a']);
    expect(rejected.met).toEqual(['a']);
    expect(thrown.failures).toHaveLength(1);
    expect(rejected.failures).toHaveLength(1);
  });

  it('gives every stage the one exchange: the target in canonical form and the service routing names', () => {
    const { exchange } = run([stage('a', true)], '/api/users?limit=1');
    expect(exchange()?.target?.path).toBe('/api/users');
    expect(exchange()?.service?.upstream.name).toBe('users');
    expect(exchange()?.requestId).toMatch(/^[0-9a-f-]{36}$/);
    expect(exchange()?.underApi).toBe(true);
  });

  it('has no target for a request with no canonical form, still under /api', () => {
    const { exchange } = run([stage('a', true)], '/api/users/');
    expect(exchange()?.target).toBeUndefined();
    expect(exchange()?.underApi).toBe(true);
  });

  it('leaves a request that every stage passed on unanswered, with no failure', async () => {
    const passed = run([stage('a', false), stage('b', false)]);
    const waited = run([stage('a', false), stage('b', 'async')]);
    await Promise.all([passed.settled, waited.settled]);
    expect(passed.met).toEqual(['a', 'b']);
    expect(waited.met).toEqual(['a', 'b']);
    expect(passed.failures).toEqual([]);
    expect(waited.failures).toEqual([]);
  });

  it('rewrites an absolute-form target to its origin form, and leaves one with no canonical form as it came', () => {
    const absolute = run([stage('a', true)], 'http://gateway.example/api/users?limit=1');
    expect(absolute.req.url).toBe('/api/users?limit=1');
    expect(absolute.exchange()?.service?.upstream.name).toBe('users');
    const odd = run([stage('a', true)], 'http://gateway.example/api/users/');
    expect(odd.req.url).toBe('http://gateway.example/api/users/');
  });

  it('reads a request with no target as one for /', () => {
    const { exchange } = run([stage('a', true)], null);
    expect(exchange()?.target?.path).toBe('/');
    expect(exchange()?.underApi).toBe(false);
  });
});
