/**
 * The development deployment's token rules: the issuer and audience the gateway expects by default
 * and `npm run token` signs with (the key pair is in dev-keys/). Compose and the k8s base restate
 * them as data; test/deploy checks they agree.
 */
export const DEV_ISSUER = 'rest-microservices-dev';
export const DEV_AUDIENCE = 'rest-microservices';
