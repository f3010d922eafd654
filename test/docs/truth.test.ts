/**
 * The docs are true: what README.md, CONTRIBUTING.md and docs/*.md say about the repository is
 * checked against the repository itself, for nine kinds of untruth (numbered as in the tests):
 * 1 npm scripts, 2 their flags, 3 environment variables, 4 the README's defaults, 5 paths,
 * 6 curl examples without a token, 7 figures without their date, 8 one explanation in two places,
 * 9 programs run but not declared. Each kind is checked on the docs as they are, and has a test
 * that plants one fault of that kind into a copy of a real doc (or source file) and expects it
 * found: a check that cannot fail proves nothing. The checks are pure functions (commands.ts,
 * variables.ts, paths.ts, claims.ts, duplicates.ts, programs.ts); facts.ts reads the repository.
 */
import { NEEDS } from '../../scripts/setup/needs.js';
import { curlsWithoutToken, datesOutsideBenchmarks, unsourcedClaims } from './claims.js';
import { missingScripts, rejectedFlags } from './commands.js';
import { duplicates, RUN_WORDS } from './duplicates.js';
import { configDefaults, configSchemas, dependencyBins, docs, elsewhere, files, programSources, scriptFacts, variableFacts } from './facts.js';
import type { Doc, Mismatch } from './markdown.js';
import { missingPaths } from './paths.js';
import { needsNotNamed, programsRun, undeclaredPrograms, type Source } from './programs.js';
import { undocumentedVariables, unreadVariables, wrongDefaults } from './variables.js';

const [scripts, schemas] = await Promise.all([scriptFacts(docs), configSchemas()]);
const variables = variableFacts(schemas);
const defaults = configDefaults(schemas);
const sources = programSources();
const paths = { files, elsewhere };

const shown = (mismatches: Mismatch[]) => mismatches.map(({ file, line, message }) => `${file}:${line}: ${message}`);
/** What a check finds in a planted copy that it does not find in the docs as they are (line numbers aside). */
const fresh = (inCopy: Mismatch[], asTheyAre: Mismatch[]) => shown(inCopy.filter(({ file, message }) => !asTheyAre.some((one) => one.file === file && one.message === message)));
const doc = (file: string) => docs.find((one) => one.file === file)!;
const readme = doc('README.md');

/** A copy of `file` with `from` replaced by `to` (which must be there: a plant that misses proves nothing). */
function planted(file: string, from: string | RegExp, to: string): Doc {
  const original = doc(file);
  expect(original.text).toMatch(from);
  return { file, text: original.text.replace(from, to) };
}

/** The docs with one of them replaced by its planted copy. */
const docsWith = (copy: Doc) => docs.map((one) => (one.file === copy.file ? copy : one));

describe('the docs, as they are', () => {
  test('1. every npm command they show names a script of package.json or of the workspace named', () => {
    expect(shown(missingScripts(docs, scripts))).toEqual([]);
  });

  test('2. every flag they show is one the command accepts (its parseArgs options, jest\'s, Stryker\'s)', () => {
    expect(shown(rejectedFlags(docs, scripts))).toEqual([]);
  });

  test('3. every variable they name is read by some code, and every variable the code reads is named where it belongs', () => {
    expect(shown([...unreadVariables(docs, variables), ...undocumentedVariables(docs, variables)])).toEqual([]);
  });

  test('4. the README\'s configuration table states the defaults the code has', () => {
    expect(shown(wrongDefaults(readme, defaults))).toEqual([]);
  });

  test('5. every repository path they name exists', () => {
    expect(shown(missingPaths(docs, paths))).toEqual([]);
  });

  test('6. every curl example of the API carries a token, or says why it needs none', () => {
    expect(shown(docs.flatMap(curlsWithoutToken))).toEqual([]);
  });

  test('7. the README\'s figures link their dated benchmark file, and no other doc carries a date', () => {
    expect(shown([...unsourcedClaims(readme), ...docs.flatMap(datesOutsideBenchmarks)])).toEqual([]);
  });

  test(`8. each thing is explained once: no run of ${RUN_WORDS} words in two places (the docs' restructuring makes it pass)`, () => {
    expect(duplicates(docs).map(({ first, second, words }) => `${first.file}:${first.line} and ${second.file}:${second.line}: ${words}`)).toEqual([]);
  });

  test('9. every program the code runs by name is declared in scripts/setup/needs.ts or runs on every machine', () => {
    expect(shown(undeclaredPrograms(programsRun(sources), NEEDS, dependencyBins))).toEqual([]);
  });

  test('9. docs/testing.md names every need of scripts/setup/needs.ts (the bench\'s: docs/performance.md) (the needs section\'s rewrite makes it pass)', () => {
    expect(shown(needsNotNamed(NEEDS, docs))).toEqual([]);
  });
});

describe('a fault planted into a copy of a real doc is found', () => {
  test('1. a script that does not exist, in the root package and in a workspace', () => {
    const copies = [planted('README.md', '`npm run token` prints', '`npm run tokens` prints'), planted('docs/adding-a-service.md', 'npm run migrate -w', 'npm run migrations -w')];
    expect(fresh(missingScripts(copies, scripts), missingScripts(docs, scripts))).toEqual([
      expect.stringContaining('npm run tokens: no such script in package.json'),
      expect.stringContaining('npm run migrations -w <name>-service: no such script'),
    ]);
  });

  test('2. a flag the script\'s parser rejects, and one jest rejects', () => {
    const copies = [planted('README.md', 'token -- --admin', 'token -- --admins'), planted('docs/testing.md', "-- --selectProjects 'single Redis'", "-- --selectProject 'single Redis'")];
    expect(fresh(rejectedFlags(copies, scripts), rejectedFlags(docs, scripts))).toEqual([
      expect.stringContaining('npm run token -- --admins: not an option of the command'),
      expect.stringContaining('npm run test -- --selectProject: not an option of the command'),
    ]);
  });

  test('3. a variable no code reads; a runtime one left out of the README\'s table, a test one out of docs/testing.md', () => {
    const unread = planted('README.md', '| `LOG_LEVEL` |', '| `CACHE_WARMUP_SECONDS` | gateway | `0` |\n| `LOG_LEVEL` |');
    expect(fresh(unreadVariables([unread], variables), unreadVariables(docs, variables))).toEqual([expect.stringContaining('CACHE_WARMUP_SECONDS: no code reads this variable')]);
    const asTheyAre = undocumentedVariables(docs, variables);
    const withoutRow = docsWith(planted('README.md', /\| `LOG_LEVEL` \|.*\n/, ''));
    expect(fresh(undocumentedVariables(withoutRow, variables), asTheyAre)).toEqual([expect.stringMatching(/^README.md:0: LOG_LEVEL: read by .*gateway\/src\/config.ts.*, not named in the README's configuration table$/)]);
    const withoutTestRow = docsWith(planted('docs/testing.md', /\| `TEST_LOG_LEVEL` \|.*\n/, ''));
    expect(fresh(undocumentedVariables(withoutTestRow, variables), asTheyAre)).toEqual(['docs/testing.md:0: TEST_LOG_LEVEL: read by test/support/stack.ts, not named in docs/testing.md']);
  });

  test('4. a default the code does not have', () => {
    const host = planted('README.md', '| `HOST` | all | `127.0.0.1`', '| `HOST` | all | `0.0.0.0`');
    expect(fresh(wrongDefaults(host, defaults), wrongDefaults(readme, defaults))).toEqual(
      ['gateway', 'users', 'products'].map((process) => expect.stringContaining(`HOST: the table says 0.0.0.0, ${process}'s default is 127.0.0.1`)),
    );
    const database = planted('README.md', '`mysql://root@127.0.0.1:3306/<name>`', '`mysql://app@127.0.0.1:3307/<name>`');
    expect(fresh(wrongDefaults(database, defaults), wrongDefaults(readme, defaults))).toEqual([
      expect.stringContaining("DATABASE_URL: the table says mysql://app@127.0.0.1:3307/<name>, users's default is mysql://root@127.0.0.1:3306/users"),
      expect.stringContaining("DATABASE_URL: the table says mysql://app@127.0.0.1:3307/<name>, products's default is mysql://root@127.0.0.1:3306/products"),
    ]);
  });

  test('5. a file and a folder that are not there', () => {
    const copy = planted('docs/architecture.md', '## The gateway\'s chain', '## The gateway\'s chain\n\nThe guard is `gateway/src/guard.ts`; its manifests are in k8s/components/cache/.');
    expect(fresh(missingPaths([copy], paths), missingPaths(docs, paths))).toEqual([
      expect.stringContaining('gateway/src/guard.ts: no such path in the repository'),
      expect.stringContaining('k8s/components/cache/: no such path in the repository'),
    ]);
  });

  test('6. a curl of the API without a token, unless a comment says why', () => {
    const curl = 'curl 127.0.0.1:8080/api/users -H "authorization: Bearer $(npm run -s token -- --scope users:read)"';
    const bare = planted('docs/deploy.md', curl, 'curl 127.0.0.1:8080/api/products');
    expect(fresh(curlsWithoutToken(bare), [])).toEqual([expect.stringContaining('curl 127.0.0.1:8080/api/products: no Authorization header')]);
    const said = planted('docs/deploy.md', curl, 'curl 127.0.0.1:8080/api/products   # no token: AUTH_PUBLIC_READS=products');
    expect(shown(curlsWithoutToken(said))).toEqual([]);
  });

  test('7. a README figure with no dated source, and a date in a doc', () => {
    const claim = planted('README.md', '## Contributing', 'The gateway answers 40,000 requests a second, 3× what nginx does.\n\n## Contributing');
    expect(fresh(unsourcedClaims(claim), unsourcedClaims(readme))).toEqual([expect.stringContaining('"The gateway answers 40,000 requests a second, 3× what nginx does."')]);
    const dated = planted('docs/api.md', '## Errors', '## Errors\n\nOn 2026-12-01 a 404 took 2 ms.');
    expect(fresh(datesOutsideBenchmarks(dated), datesOutsideBenchmarks(doc('docs/api.md')))).toEqual([expect.stringContaining('2026-12-01: a dated figure belongs in docs/benchmarks/')]);
  });

  test(`8. the same ${RUN_WORDS} words in two docs`, () => {
    const copy = planted('docs/deploy.md', '### Images', 'The gateway is the only way in, and decides once, before the cache and the proxy.\n\n### Images');
    const found = duplicates(docsWith(copy)).filter(({ second }) => second.file === 'docs/deploy.md');
    expect(found.map(({ first, words }) => [first.file, words])).toEqual([['README.md', 'the gateway is the only way in and decides once before the cache and the proxy']]);
  });

  test('9. a program no need declares, run directly and through a wrapper; a need docs/testing.md does not name', () => {
    const copy = (file: string, from: string, to: string): Source => {
      const source = sources.find((one) => one.file === file)!;
      expect(source.text).toContain(from);
      return { file, text: source.text.replace(from, to) };
    };
    const helm = copy('test/deploy/kustomize.ts', "?? 'kubectl'", "?? 'helm'");
    const docker = copy('test/e2e/processes.test.ts', "run('npm', ['start', '--silent'], env", "run('docker', ['start', '--silent'], env");
    const withPlants = sources.map((one) => (one.file === helm.file ? helm : one.file === docker.file ? docker : one));
    expect(fresh(undeclaredPrograms(programsRun(withPlants), NEEDS, dependencyBins), [])).toEqual(['test/deploy/kustomize.ts:23: runs helm, which no need in scripts/setup/needs.ts provides', expect.stringMatching(/^test\/e2e\/processes\.test\.ts:\d+: runs docker, which no need in scripts\/setup\/needs\.ts provides$/)]);
    const jq = { name: 'jq', why: 'reads JSON', for: ['test'], programs: [['jq']] };
    expect(fresh(needsNotNamed([...NEEDS, jq], docs), needsNotNamed(NEEDS, docs))).toEqual(['docs/testing.md:0: does not name the need "jq" (scripts/setup/needs.ts)']);
  });
});
