/**
 * What a request's method makes it, decided here and nowhere else, in the gateway and the services
 * alike. Everything that differs between reads and writes follows from it:
 *
 * | kind      | methods                      | budget | slot share | scope          | cache              | retried when reset before an answer |
 * |-----------|------------------------------|--------|------------|----------------|--------------------|-------------------------------------|
 * | `read`    | GET, HEAD                    | read   | read       | `<name>:read`  | served, filled     | yes                                 |
 * | `options` | OPTIONS                      | read   | read       | none           | no part            | only with an Idempotency-Key        |
 * | `write`   | every other (POST, PUT, …)   | write  | write      | `<name>:write` | renewed after it   | only with an Idempotency-Key        |
 *
 * Any of them goes to another replica when its connection could not be opened (the gateway's
 * upstream retries).
 *
 * An unknown method is a write: it may change something, so it is counted, scoped and renewed as one.
 */
export type MethodKind = 'read' | 'options' | 'write';

export function kindOf(method: string | undefined): MethodKind {
  if (method === 'GET' || method === 'HEAD') return 'read';
  return method === 'OPTIONS' ? 'options' : 'write';
}
