import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { Ajv } from 'ajv';
import mysql from 'mysql2/promise';
import { parse } from 'yaml';
import { authConfigProblems } from '../../gateway/dist/auth/config.js';
import { configSchema as gatewayConfig } from '../../gateway/dist/config.js';
import { IDP_AUDIENCE } from '../../scripts/idp.js';
import { compose, composeEnvironment, deployables, readComposeFile, repoPath, type ComposeFile } from './stack.js';

/** docker-compose.yml: valid Compose, and the stack it describes starts in order and scales. */

const require = createRequire(import.meta.url);

/** The Compose specification's JSON schema, as dclint ships it (a copy of compose-spec/compose-spec). */
function composeSpecValidator() {
  const schemaFile = path.join(path.dirname(require.resolve('dclint/package.json')), 'schemas', 'compose.schema.json');
  const schema = JSON.parse(readFileSync(schemaFile, 'utf8')) as { $schema: string };
  const ajv = new Ajv({ allErrors: true, allowUnionTypes: true, strictTypes: false });
  // The schema names draft-07 by its https address; Ajv knows the meta-schema by its http one.
  ajv.addMetaSchema(require('ajv/dist/refs/json-schema-draft-07.json') as object, schema.$schema);
  return ajv.compile(schema);
}

const file = compose();
const services = Object.entries(file.services);
const serviceNames = deployables.filter(({ migrates }) => migrates).map(({ name }) => name);

test('docker-compose.yml validates against the Compose specification schema, which rejects unknown keys', () => {
  const validate = composeSpecValidator();
  expect(validate(readComposeFile()) ? [] : validate.errors).toEqual([]);
  const misspelt = readComposeFile() as { services: { gateway: Record<string, unknown> } };
  misspelt.services.gateway.helthcheck = misspelt.services.gateway.healthcheck;
  expect(validate(misspelt)).toBe(false);
});

test('the stack is the gateway and every service in services.json built from their Dockerfiles, mysql:8.4 and redis:7, and Jaeger with the tracing profile only', () => {
  expect(Object.keys(file.services).sort()).toEqual([...deployables.map(({ name }) => name), 'jaeger', 'mysql', 'redis'].sort());
  expect(services.filter(([, service]) => service.profiles !== undefined)).toEqual([['jaeger', expect.objectContaining({ profiles: ['tracing'] })]]);
  expect(file.services.gateway!.build).toEqual({ context: '.', dockerfile: 'gateway/Dockerfile' });
  for (const { name } of deployables.filter(({ migrates }) => migrates)) {
    expect(file.services[name]!.build).toEqual({ context: '.', args: { WORKSPACE: name } });
  }
  expect(file.services.mysql!.image).toBe('mysql:8.4');
  expect(file.services.redis!.image).toBe('redis:7');
});

test('only the gateway is published, on 127.0.0.1:8080 unless GATEWAY_BIND_ADDRESS says otherwise, and Jaeger\'s UI on 127.0.0.1; nothing pins a container name, so every service scales', () => {
  const published = services.filter(([, service]) => service.ports !== undefined).map(([name, service]) => [name, service.ports]);
  expect(published).toEqual([
    ['gateway', ['${GATEWAY_BIND_ADDRESS:-127.0.0.1}:8080:8080']],
    ['jaeger', ['127.0.0.1:16686:16686']],
  ]);
  expect(services.filter(([, service]) => service.container_name !== undefined)).toEqual([]);
});

test('every service has a healthcheck and a restart policy, and waits for what it depends on to be healthy', () => {
  for (const [, service] of services) {
    expect(service.healthcheck?.test[0]).toBe('CMD');
    expect(service.restart).toBe('unless-stopped');
    for (const dependency of Object.values(service.depends_on ?? {})) expect(dependency).toEqual({ condition: 'service_healthy' });
  }
  expect(Object.keys(file.services.gateway!.depends_on!).sort()).toEqual([...serviceNames, 'redis'].sort());
  for (const name of serviceNames) expect(Object.keys(file.services[name]!.depends_on!)).toEqual(['mysql']);
});

test('MySQL keeps its data in a named volume, runs the init script from compose/mysql-init, and has every service\'s password', () => {
  expect(file.services.mysql!.env_file).toEqual(['compose/mysql.env', ...serviceNames.map((name) => `${name}/deploy/mysql.env`)]);
  expect(file.volumes).toHaveProperty('mysql-data');
  expect(file.services.mysql!.volumes).toEqual(['mysql-data:/var/lib/mysql', './compose/mysql-init:/docker-entrypoint-initdb.d:ro']);
});

test('credentials live in the env files only: no service definition holds a password or a URL with credentials', () => {
  for (const [, service] of services) {
    for (const [name, value] of Object.entries(service.environment ?? {})) {
      expect(name).not.toMatch(/PASSWORD|SECRET|TOKEN/);
      expect(value).not.toMatch(/\/\/[^/]*@/);
    }
  }
});

describe('the MySQL init script', () => {
  // What Compose gives the mysql container: its env files, each service's password among them.
  const mysqlEnvironment = composeEnvironment(file.services.mysql!);

  /** Runs the script as the mysql image's entrypoint does (sourced), printing the SQL it sends. */
  const runInitScript = (environment: Record<string, string>) =>
    execFileSync('bash', ['-c', 'docker_process_sql() { cat; }; source compose/mysql-init/create-service-users.sh'], {
      cwd: repoPath(),
      env: { PATH: process.env.PATH, ...environment },
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'pipe'],
    });

  test('creates each service schema and a user granted that schema only, with the password of its DATABASE_URL', () => {
    const sql = runInitScript(mysqlEnvironment);
    const grants = [...sql.matchAll(/GRANT ALL PRIVILEGES ON `(\w+)`\.\* TO '(\w+)'@'%'/g)].map(([, schema, user]) => [user, schema]);
    expect(grants.sort()).toEqual(serviceNames.map((name) => [name.replace(/-service$/, ''), name.replace(/-service$/, '')]).sort());
    for (const { name } of deployables.filter(({ migrates }) => migrates)) {
      const url = new URL(composeEnvironment(file.services[name]!).DATABASE_URL!);
      const user = url.username;
      expect(url.pathname).toBe(`/${user}`);
      expect(url.host).toBe('mysql:3306');
      expect(sql).toContain(`CREATE DATABASE IF NOT EXISTS \`${user}\` CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;`);
      expect(sql).toContain(`CREATE USER IF NOT EXISTS '${user}'@'%' IDENTIFIED BY '${decodeURIComponent(url.password)}';`);
    }
  });

  test('escapes quotes and backslashes in a password, and stops when a password is missing', () => {
    expect(runInitScript({ ...mysqlEnvironment, USERS_DB_PASSWORD: "it's a \\ & b" })).toContain("IDENTIFIED BY 'it''s a \\\\ & b';");
    expect(() => runInitScript({ PRODUCTS_DB_PASSWORD: '' })).toThrow(/PRODUCTS_DB_PASSWORD must be set/);
  });

  test('on a real server: the user logs in with the password of its DATABASE_URL, whatever it holds, and reaches its own schema only', async () => {
    const server = new URL(process.env.TEST_MYSQL_URL!);
    // A throwaway service whose name has GRANT wildcards (`_`), and a schema those wildcards would match.
    const service = `t_${randomBytes(4).toString('hex')}_init`;
    const lookalike = service.replaceAll('_', 'x');
    const password = `q'"\\\\n\`$(x)%_&é ${service}`;
    const sql = execFileSync(
      'bash',
      ['-c', 'docker_process_sql() { cat; }; source compose/mysql-init/create-service-users.sh'],
      { cwd: repoPath(), env: { PATH: process.env.PATH, SERVICE: service, [`${service.toUpperCase()}_DB_PASSWORD`]: password }, encoding: 'utf8' },
    );
    const root = await mysql.createConnection({ uri: server.toString(), multipleStatements: true });
    try {
      await root.query(`CREATE DATABASE \`${lookalike}\``);
      await root.query(sql);
      const databaseUrl = new URL(server);
      databaseUrl.username = service;
      databaseUrl.password = encodeURIComponent(password);
      databaseUrl.pathname = `/${service}`;
      const user = await mysql.createConnection(databaseUrl.toString());
      try {
        await user.query('CREATE TABLE reachable (id INT)');
        await expect(user.query(`CREATE TABLE \`${lookalike}\`.unreachable (id INT)`)).rejects.toMatchObject({ code: expect.stringMatching(/^ER_(DB|TABLE)ACCESS_DENIED_ERROR$/) });
      } finally {
        await user.end();
      }
    } finally {
      await root.query(`DROP USER IF EXISTS '${service}'@'%'; DROP DATABASE IF EXISTS \`${service}\`; DROP DATABASE IF EXISTS \`${lookalike}\``);
      await root.end();
    }
  });
});

describe('compose/idp.yml, the stack behind the development OpenID provider', () => {
  const override = parse(readFileSync(repoPath('compose/idp.yml'), 'utf8')) as Pick<ComposeFile, 'services'>;
  const idp = override.services.idp!;

  test('validates against the Compose specification schema, and runs scripts/idp.ts from the shared build stage as node, hardened like the rest', () => {
    const validate = composeSpecValidator();
    expect(validate({ name: file.name, ...override }) ? [] : validate.errors).toEqual([]);
    expect(idp.build).toEqual({ context: '.', dockerfile: 'gateway/Dockerfile', target: 'build' });
    expect(idp.command!.slice(0, 2)).toEqual(['node', 'scripts/idp.ts']);
    expect(idp).toMatchObject({ user: 'node', read_only: true, cap_drop: ['ALL'], restart: 'unless-stopped', ports: ['127.0.0.1:9000:9000'] });
  });

  test("merged over docker-compose.yml, the gateway trusts the provider's key set, issuer and API, and no longer the development key", () => {
    const issuer = idp.command![idp.command!.indexOf('--issuer') + 1]!;
    const gateway = file.services.gateway!;
    const merged = { ...gateway, environment: { ...gateway.environment, ...override.services.gateway!.environment } };
    const config = gatewayConfig.parse(composeEnvironment(merged));
    expect([config.AUTH_PUBLIC_KEY, config.AUTH_DISCOVERY, config.AUTH_ISSUER, config.AUTH_AUDIENCE]).toEqual([undefined, true, issuer, IDP_AUDIENCE]);
    expect(new URL(issuer).port).toBe(idp.command![idp.command!.indexOf('--port') + 1]);
    expect(authConfigProblems(config)).toEqual([]);
    expect(override.services.gateway!.depends_on).toEqual({ idp: { condition: 'service_healthy' } });
  });
});
