/**
 * TEST-ONLY preload (`node --import ./test/support/headless-dns.mjs gateway/dist/main.js`): answers
 * DNS lookups of the names in TEST_HEADLESS_DNS as a Kubernetes headless Service's name answers, with
 * one address per replica, e.g. `users-service=127.0.0.1,127.0.0.2;products-service=127.0.0.1,127.0.0.2`.
 * Every other name goes to the real resolver. The gateway's code is unchanged: it calls
 * `dns.promises.lookup(name, { all: true })` as in production, and no /etc/hosts is edited.
 */
import dns from 'node:dns';

const answers = new Map(
  (process.env.TEST_HEADLESS_DNS ?? '')
    .split(';')
    .filter(Boolean)
    .map((entry) => {
      const [name, addresses] = entry.split('=');
      return [name, addresses.split(',').map((address) => ({ address, family: address.includes(':') ? 6 : 4 }))];
    }),
);

const realPromisesLookup = dns.promises.lookup.bind(dns.promises);
dns.promises.lookup = async (hostname, options) => {
  const known = answers.get(hostname);
  if (known === undefined) return realPromisesLookup(hostname, options);
  const all = typeof options === 'object' && options !== null && options.all === true;
  return all ? known.map((entry) => ({ ...entry })) : { ...known[0] };
};
