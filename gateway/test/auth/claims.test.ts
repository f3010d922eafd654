import { createPublicKey } from 'node:crypto';
import { ConfigError, parseConfig } from '@app/shared/platform/config';
import fc from 'fast-check';
import type { JWTPayload } from 'jose';
import { signedClaims, testPublicKeyPem } from '../../../test/support/auth.js';
import { otherForms, PROVIDER_SHAPES, withoutAudience } from '../../../test/support/provider-tokens.js';
import { CLAIM_PRESET_NAMES, CLAIM_PRESETS, type ClaimPreset } from '../../src/auth/claims.js';
import { configSchema } from '../../src/config.js';
import { InvalidToken, TokenVerifier } from '../../src/auth/tokens.js';

const publicKey = createPublicKey(testPublicKeyPem);
const SCOPES = ['users:read', 'users:write', 'products:read'];
/** What each provider's documented token grants besides SCOPES (PROVIDER_SHAPES puts them there, as the provider does). */
const PROVIDER_SCOPES: Record<ClaimPreset, string[]> = { generic: [], keycloak: ['profile', 'email'], auth0: ['openid', 'profile'], okta: ['openid'], entra: [], cognito: [] };

const verifierFor = (preset: ClaimPreset) => {
  const { issuer, audience } = PROVIDER_SHAPES[preset];
  return new TokenVerifier({ publicKey }, { issuer, audience, algorithms: ['ES256'], clockToleranceSeconds: 30, maxLifetimeSeconds: 86_400, claims: CLAIM_PRESETS[preset] });
};
const verify = async (preset: ClaimPreset, claims: JWTPayload) => verifierFor(preset).verify(`Bearer ${await signedClaims(claims)}`);

describe.each(CLAIM_PRESET_NAMES)('AUTH_CLAIMS=%s', (preset) => {
  const shaped = () => PROVIDER_SHAPES[preset].claims('alice', SCOPES);

  it('accepts a token shaped as the provider documents it, with its scopes, subject and id', async () => {
    const claims = shaped();
    expect(await verify(preset, claims)).toMatchObject({
      subject: 'alice',
      tokenId: claims[CLAIM_PRESETS[preset].tokenId],
      scopes: new Set([...PROVIDER_SCOPES[preset], ...SCOPES]),
    });
  });

  it('refuses it with a scope claim in the other form, naming the claim', async () => {
    const cases = otherForms(preset, shaped());
    expect(cases.length).toBeGreaterThan(0);
    for (const { claim, claims } of cases) {
      await expect(verify(preset, claims)).rejects.toMatchObject({ name: 'InvalidToken', message: expect.stringMatching(new RegExp(`^The access token's ${claim} claim must be (an array of strings|a string of space-separated scopes)$`)) });
    }
  });

  it('refuses it without its audience, naming the claim', async () => {
    const { claim, claims } = withoutAudience(preset, shaped());
    await expect(verify(preset, claims)).rejects.toMatchObject({ name: 'InvalidToken', message: `The access token has no ${claim} claim` });
  });
});

describe('the audience in client_id (cognito)', () => {
  const claims = (client_id: unknown) => ({ ...PROVIDER_SHAPES.cognito.claims('alice', SCOPES), client_id });

  it('is compared exactly with AUTH_AUDIENCE, and must be a string', async () => {
    for (const other of ['1EXAMPLE23456789', '1example23456789 ', 'elsewhere']) {
      await expect(verify('cognito', claims(other))).rejects.toMatchObject({ message: "The access token's client_id claim is not accepted here" });
    }
    for (const notString of [['1example23456789'], 7, null]) {
      await expect(verify('cognito', claims(notString))).rejects.toMatchObject({ message: "The access token's client_id claim must be a string" });
    }
  });

  it('is the only audience read: an aud claim neither lets a token in nor keeps it out', async () => {
    expect(await verify('cognito', { ...claims('1example23456789'), aud: 'elsewhere' })).toMatchObject({ subject: 'alice' });
    await expect(verify('cognito', { ...claims('elsewhere'), aud: '1example23456789' })).rejects.toThrow(InvalidToken);
  });
});

describe('the token id in uti (entra)', () => {
  it('is required and bounded as a jti is, and a jti does not stand in for it', async () => {
    const withoutUti = { ...PROVIDER_SHAPES.entra.claims('alice', SCOPES), uti: undefined };
    await expect(verify('entra', { ...withoutUti, jti: 'some-id' })).rejects.toMatchObject({ message: 'The access token has no uti claim' });
    await expect(verify('entra', { ...withoutUti, uti: 'u'.repeat(256) })).rejects.toMatchObject({ message: "The access token's uti claim is not a string of 1 to 255 characters" });
  });
});

describe('whatever JSON the mapped claims hold', () => {
  const MAPPED = ['scope', 'scp', 'roles', 'aud', 'client_id', 'sub', 'jti', 'uti'];
  const value = fc.oneof(fc.jsonValue(), fc.string(), fc.array(fc.string()), fc.constant(undefined));
  const overrides = fc.dictionary(fc.constantFrom(...MAPPED), value, { maxKeys: MAPPED.length });

  it('a token is a principal with string scopes or an InvalidToken, never another error', async () => {
    await fc.assert(
      fc.asyncProperty(fc.constantFrom(...CLAIM_PRESET_NAMES), overrides, async (preset, changed) => {
        const claims = { ...PROVIDER_SHAPES[preset].claims('alice', SCOPES), ...changed };
        try {
          const principal = await verify(preset, claims);
          expect([...principal!.scopes].every((scope) => typeof scope === 'string')).toBe(true);
          expect(typeof principal!.subject).toBe('string');
          expect(typeof principal!.tokenId).toBe('string');
        } catch (error) {
          expect(error).toBeInstanceOf(InvalidToken);
          expect((error as InvalidToken).message).toMatch(/^The access token/);
        }
      }),
      { numRuns: 300 },
    );
  });
});

describe('AUTH_CLAIMS', () => {
  it('is generic unless set, and one of the presets', () => {
    expect(parseConfig(configSchema, {}).AUTH_CLAIMS).toBe('generic');
    expect(parseConfig(configSchema, { AUTH_CLAIMS: 'entra' }).AUTH_CLAIMS).toBe('entra');
  });

  it('stops the gateway at start when it names no preset, saying which there are', () => {
    for (const unknown of ['azure', 'Okta', 'okta ']) {
      expect(() => parseConfig(configSchema, { AUTH_CLAIMS: unknown })).toThrow(ConfigError);
      expect(() => parseConfig(configSchema, { AUTH_CLAIMS: unknown })).toThrow(`AUTH_CLAIMS: must be one of generic, keycloak, auth0, okta, entra, cognito (got ${JSON.stringify(unknown)})`);
    }
  });
});
