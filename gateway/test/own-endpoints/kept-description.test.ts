import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { createLogger } from '@app/shared/platform/logger';
import { HttpProblem } from '@app/shared/platform/problem';
import { DESCRIPTION_CHECK_MS, KeptDescription } from '../../src/own-endpoints/kept-description.js';

const log = createLogger('test', 'silent');
const deadlines = { upstreamMs: 1_000, requestBodyMs: 1_000 };
const documentWith = (title: string) => JSON.stringify({ openapi: '3.1.0', info: { title, version: '1' }, paths: {}, components: {} });

/** A service that describes itself as `document` says (a status instead, to fail), counting the asks. */
async function describingService() {
  const state = { document: documentWith('one') as string | number, asked: 0 };
  const server = http.createServer((_req, res) => {
    state.asked++;
    if (typeof state.document === 'number') res.writeHead(state.document).end();
    else res.writeHead(200, { 'content-type': 'application/json' }).end(state.document);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return { state, upstream: { name: 'things', url, prefix: '/api/things' }, close: () => new Promise((resolve) => server.close(resolve)) };
}

describe('KeptDescription', () => {
  let service: Awaited<ReturnType<typeof describingService>>;
  let clock = 0;
  let merges = 0;
  const kept = () =>
    new KeptDescription([service.upstream], deadlines, (parts) => {
      merges++;
      return parts[0]!.document;
    }, () => clock);

  beforeEach(async () => {
    service = await describingService();
    clock = 0;
    merges = 0;
  });
  afterEach(() => service.close());

  it('asks the service once for any number of requests meanwhile, and builds once', async () => {
    const description = kept();
    const built = await Promise.all(Array.from({ length: 50 }, () => description.current(log, 'r')));
    clock += DESCRIPTION_CHECK_MS - 1;
    built.push(await description.current(log, 'r'));
    expect([service.state.asked, merges, new Set(built).size]).toEqual([1, 1, 1]);
    expect(JSON.parse(built[0]!.body.toString())).toMatchObject({ info: { title: 'one' } });
    expect(built[0]!.etag).toMatch(/^"[\w-]{27}"$/);
  });

  it('asks again once the answer is DESCRIPTION_CHECK_MS old; rebuilds only when the description changed', async () => {
    const description = kept();
    const first = await description.current(log, 'r');
    clock += DESCRIPTION_CHECK_MS;
    expect(await description.current(log, 'r')).toBe(first);
    expect([service.state.asked, merges]).toEqual([2, 1]);
    service.state.document = documentWith('two');
    clock += DESCRIPTION_CHECK_MS;
    const changed = await description.current(log, 'r');
    expect([service.state.asked, merges]).toEqual([3, 2]);
    expect(changed.etag).not.toBe(first.etag);
    expect(JSON.parse(changed.body.toString())).toMatchObject({ info: { title: 'two' } });
  });

  it('keeps the last good description while the service fails; before any, a 503 that is itself kept', async () => {
    service.state.document = 503;
    const description = kept();
    const unavailable = await description.current(log, 'r').catch((error: unknown) => error);
    expect(unavailable).toBeInstanceOf(HttpProblem);
    expect((unavailable as HttpProblem).status).toBe(503);
    await description.current(log, 'r').catch(() => undefined);
    expect(service.state.asked).toBe(1);
    service.state.document = documentWith('back');
    clock += DESCRIPTION_CHECK_MS;
    const good = await description.current(log, 'r');
    service.state.document = 'not json';
    clock += DESCRIPTION_CHECK_MS;
    expect(await description.current(log, 'r')).toBe(good);
    expect(service.state.asked).toBe(3);
  });

  it('compresses once, with variants smaller than the document', async () => {
    service.state.document = documentWith('x'.repeat(4_000));
    const built = await kept().current(log, 'r');
    expect(built.variants.br!.length).toBeLessThan(built.body.length);
    expect(built.variants.gzip!.length).toBeLessThan(built.body.length);
  });
});
