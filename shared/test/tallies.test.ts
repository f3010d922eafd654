import { DURATION_BUCKETS, RequestTallies, talliedCounterAndHistogram } from '@app/shared/platform/tallies';
import fc from 'fast-check';
import { Counter, Histogram, Registry } from 'prom-client';

const NAMES = {
  counter: { name: 'requests_total', help: 'Requests.' },
  histogram: { name: 'request_duration_seconds', help: 'Durations.' },
};
const LABELS = ['route', 'method', 'status'] as const;

const request = fc.record({
  route: fc.constantFrom('/api/products/{id}', '/api/users', 'unmatched'),
  method: fc.constantFrom('GET', 'POST'),
  status: fc.constantFrom(200, 404, 503),
  // Bucket bounds themselves, where `le` is inclusive, and values beyond the last.
  seconds: fc.oneof(fc.constantFrom(...DURATION_BUCKETS), fc.double({ min: 0, max: 20, noNaN: true })),
});

/** The same requests through prom-client's own counter and histogram. */
async function asPromClientSays(requests: { route: string; method: string; status: number; seconds: number }[], scrapes: number): Promise<string> {
  const registry = new Registry();
  const counter = new Counter({ ...NAMES.counter, labelNames: LABELS, registers: [registry] });
  const histogram = new Histogram({ ...NAMES.histogram, labelNames: LABELS, buckets: DURATION_BUCKETS, registers: [registry] });
  for (const { route, method, status, seconds } of requests) {
    counter.inc({ route, method, status: String(status) });
    histogram.observe({ route, method, status: String(status) }, seconds);
  }
  let text = '';
  for (let i = 0; i < scrapes; i++) text = await registry.metrics();
  return text;
}

/** Sorted lines, so that only the order of label sets may differ. */
const lines = (text: string) => text.split('\n').sort();

describe('talliedCounterAndHistogram', () => {
  it("reads out what prom-client's own counter and histogram would, scrape after scrape", async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(request, { maxLength: 60 }), fc.integer({ min: 0, max: 60 }), async (requests, scrapeAfter) => {
        const registry = new Registry();
        const tallies = new RequestTallies();
        talliedCounterAndHistogram(registry, NAMES, [...LABELS], () => tallies);
        // A scrape between requests must neither lose nor count twice what came before it.
        requests.forEach(({ route, method, status, seconds }, i) => {
          if (i === scrapeAfter) void registry.metrics();
          tallies.finished(route, method, status, seconds);
        });
        await registry.metrics();
        expect(lines(await registry.metrics())).toEqual(lines(await asPromClientSays(requests, 2)));
      }),
    );
  });
});
