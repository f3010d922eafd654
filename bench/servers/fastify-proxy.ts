/**
 * The best Node peer of the gateway's proxy hop: fastify with `@fastify/http-proxy` (undici's
 * keep-alive pool underneath), in front of the service, as its README sets it up, logging off.
 * Started by `npm run bench`; reads PORT and UPSTREAM_URL.
 */
import proxy from '@fastify/http-proxy';
import Fastify from 'fastify';

const app = Fastify({ logger: false, keepAliveTimeout: 65_000 });
app.get('/healthz', async () => 'ok');
await app.register(proxy, { upstream: process.env.UPSTREAM_URL!, prefix: '/api', rewritePrefix: '/api' });
await app.listen({ port: Number(process.env.PORT), host: '127.0.0.1' });
process.once('SIGTERM', () => void app.close());
