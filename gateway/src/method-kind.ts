/**
 * What a request's method makes it, decided here and nowhere else in the gateway. Everything
 * that differs between reads and writes follows from it:
 *
 * | kind      | methods                      | budget | slot share | scope          | cache              | another replica on a refused connect |
 * |-----------|------------------------------|--------|------------|----------------|--------------------|--------------------------------------|
 * | `read`    | GET, HEAD                    | read   | read       | `<name>:read`  | served, filled     | yes                                  |
 * | `options` | OPTIONS                      | read   | read       | none           | no part            | no                                   |
 * | `write`   | every other (POST, PUT, …)   | write  | write      | `<name>:write` | renewed after it   | only with an Idempotency-Key         |
 *
 * An unknown method is a write: it may change something, so it is counted, scoped and renewed as one.
 */
export type MethodKind = 'read' | 'options' | 'write';

export function kindOf(method: string | undefined): MethodKind {
  if (method === 'GET' || method === 'HEAD') return 'read';
  return method === 'OPTIONS' ? 'options' : 'write';
}
