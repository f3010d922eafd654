import type { Context } from '@opentelemetry/api';

/**
 * A context that adds one value to another: what the context of every request served is made of
 * (its span, and the RPC metadata when sampled). The API's own contexts copy their parent's map
 * and make three closures for each value set, garbage every request would leave for the collector;
 * this is two fields and a link. Values set on it, by the request's own spans or instrumentations,
 * make more of it: a request's chain stays a few links long.
 */
export class ChainedContext implements Context {
  constructor(
    private readonly parent: Context,
    private readonly key?: symbol,
    private readonly value?: unknown,
  ) {}

  getValue(key: symbol): unknown {
    return key === this.key ? this.value : this.parent.getValue(key);
  }

  setValue(key: symbol, value: unknown): Context {
    return new ChainedContext(this, key, value);
  }

  /** The value left undefined rather than removed: a context answers a key it does not hold with undefined anyway. */
  deleteValue(key: symbol): Context {
    return new ChainedContext(this, key, undefined);
  }
}
