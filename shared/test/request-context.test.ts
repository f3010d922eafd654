import { ChainedContext } from '@app/shared/telemetry/request-context';
import { createContextKey, ROOT_CONTEXT, trace } from '@opentelemetry/api';

const SPAN = trace.wrapSpanContext({ traceId: '0af7651916cd43dd8448eb211c80319c', spanId: 'b7ad6b7169203331', traceFlags: 0 });
const OUTER = createContextKey('outer');
const INNER = createContextKey('inner');

describe('ChainedContext', () => {
  it('answers its own value and its parent’s, as the API’s context does', () => {
    const parent = ROOT_CONTEXT.setValue(OUTER, 'outer');
    const context = trace.setSpan(new ChainedContext(parent), SPAN);
    expect(trace.getSpan(context)).toBe(SPAN);
    expect(context.getValue(OUTER)).toBe('outer');
    expect(context.getValue(INNER)).toBeUndefined();
    expect(trace.getSpan(parent)).toBeUndefined();
  });

  it('leaves the context it was made from as it was when a value is set or deleted', () => {
    const context = new ChainedContext(ROOT_CONTEXT).setValue(INNER, 'first');
    const replaced = context.setValue(INNER, 'second');
    const deleted = replaced.deleteValue(INNER);
    expect([context.getValue(INNER), replaced.getValue(INNER), deleted.getValue(INNER)]).toEqual(['first', 'second', undefined]);
    expect(trace.getSpan(trace.deleteSpan(trace.setSpan(context, SPAN)))).toBeUndefined();
  });
});
