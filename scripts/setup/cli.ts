/**
 * `node scripts/setup/cli.ts <test|containers|images|bench>`: makes present what that command needs
 * (scripts/setup/needs.ts), or stops at once naming what is missing and the command that
 * installs it. `npm test`, `npm run chaos`, `npm run test:containers` and `npm run image-smoke`
 * run it first, so a run never stops halfway for want of a program.
 */
import { NEEDS, type Need, type Purpose } from './needs.ts';
import { findOneOf } from './machine.ts';
import { MissingNeeds, provide } from './provision.ts';

const COMMANDS: Record<Exclude<Purpose, 'start'>, string> = { test: 'npm test', containers: 'npm run test:containers', images: 'npm run image-smoke', bench: 'npm run bench' };

/** Whether a Docker API engine answers, for testcontainers to start MySQL in (docs/testing.md). */
async function containerEngineAnswers(): Promise<boolean> {
  try {
    const { getContainerRuntimeClient } = await import('testcontainers');
    await getContainerRuntimeClient();
    return true;
  } catch {
    return false;
  }
}

/** The needs of the tests that nothing in the environment supplies another way. */
async function testNeeds(env: NodeJS.ProcessEnv): Promise<Need[]> {
  const supplied: Record<string, () => boolean | Promise<boolean>> = {
    'MySQL or MariaDB': async () =>
      Boolean(env.TEST_MYSQL_URL) || env.TEST_SERVERS === 'containers' || (!findOneOf(['mariadbd', 'mysqld']) && (await containerEngineAnswers())),
    Redis: () => Boolean(env.TEST_REDIS_URL && env.TEST_REDIS_CLUSTER_NODES),
    Chromium: () => Boolean(env.CHROMIUM_PATH),
    'kubectl with kustomize v5': () => Boolean(env.KUBECTL),
  };
  const needs: Need[] = [];
  for (const need of NEEDS.filter((n) => n.for.includes('test'))) {
    if (!(await supplied[need.name]?.())) needs.push(need);
  }
  return needs;
}

const purpose = process.argv[2] as keyof typeof COMMANDS;
if (!(purpose in COMMANDS)) {
  console.error(`usage: node scripts/setup/cli.ts <${Object.keys(COMMANDS).join('|')}>`);
  process.exit(2);
}
const needs = purpose === 'test' ? await testNeeds(process.env) : NEEDS.filter((need) => need.for.includes(purpose));
try {
  provide(needs, COMMANDS[purpose], (line) => console.log(`setup: ${line}`));
} catch (error) {
  if (!(error instanceof MissingNeeds)) throw error;
  console.error(error.message);
  process.exit(1);
}
