/**
 * The development deployment's token rules: the issuer and audience the gateway expects by default
 * and `npm run token` signs with (the key pair is in dev-keys/). Compose and the k8s base restate
 * them as data; test/deploy checks they agree.
 */
export const DEV_ISSUER = 'rest-microservices-dev';
export const DEV_AUDIENCE = 'rest-microservices';

/**
 * The development key's public half (dev-keys/public-key.jwk; test/deploy checks they agree). Its
 * private half is published, so a gateway that trusts it must not be reached from other machines.
 */
export const DEV_PUBLIC_KEY_JWK = {
  kty: 'EC',
  crv: 'P-256',
  x: 'DzXAGmJzy88i0Diwhvt5mn1IyinJNRJeKU3A5kgqWNY',
  y: '1Zv1aDuJoynGc5Au5x3XGKLp5Tc6xG3_ptPHgCZ7wCE',
} as const;
