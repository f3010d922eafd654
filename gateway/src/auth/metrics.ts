import { Counter, type Registry } from 'prom-client';

/** What a fetch of the identity provider's key set came to (key-source.ts). */
export type KeyFetchOutcome = 'changed' | 'unchanged' | 'failed';

/** `gateway_auth_key_fetches_total`, in `registry`; returns what counts a fetch. */
export function keyFetchCounter(registry: Registry): (outcome: KeyFetchOutcome) => void {
  const fetches = new Counter({
    name: 'gateway_auth_key_fetches_total',
    help: "Fetches of the identity provider's key set (AUTH_JWKS_URL or AUTH_DISCOVERY), by outcome: changed, unchanged, failed.",
    labelNames: ['outcome'],
    registers: [registry],
  });
  return (outcome) => fetches.inc({ outcome });
}
