import { hostFields } from '@app/shared/platform/http/malformed-requests';

describe('hostFields', () => {
  it('counts the Host header fields in any case', () => {
    expect(hostFields(['Host', 'a', 'Accept', '*/*', 'HOST', 'b', 'host', 'c'])).toBe(3);
  });

  it('counts field names only: a value "host" or a name that ends in Host is no Host field', () => {
    expect(hostFields(['X-Forwarded-Host', 'example', 'Via', 'host', 'Hosts', 'x'])).toBe(0);
    expect(hostFields([])).toBe(0);
  });
});
