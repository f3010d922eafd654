import express, { type Router } from 'express';
import { problems } from '../problem.js';
import type { Lifecycle } from './lifecycle.js';
import { sendProblem } from './responses.js';
import { allowOnly } from './routing.js';

/** The probes' paths: asked by the orchestrator, never by clients. */
export const PROBE_PATHS: readonly string[] = ['/healthz', '/readyz'];

/**
 * `/healthz` (liveness: the process runs) and `/readyz` (readiness: not shutting down and the
 * dependency check passes). `unreadyReason` must be quick, must not throw, and returns why the
 * process cannot serve, or undefined when it can.
 */
export function healthRoutes(
  lifecycle: Lifecycle,
  unreadyReason: () => Promise<string | undefined> = async () => undefined,
): Router {
  const router = express.Router();
  router.get('/healthz', (_req, res) => {
    res.setHeader('Cache-Control', 'no-store');
    res.json({ status: 'ok' });
  });
  router.get('/readyz', async (req, res) => {
    res.setHeader('Cache-Control', 'no-store');
    const reason = lifecycle.shuttingDown ? 'The process is shutting down' : await unreadyReason();
    if (reason === undefined) res.json({ status: 'ready' });
    else sendProblem(req, res, problems.unavailable(reason));
  });
  router.all([...PROBE_PATHS], allowOnly(['GET']));
  return router;
}

