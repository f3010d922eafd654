/**
 * The files outside `<name>-service/` that a new service is registered in, each as an edit of
 * its text: services.json (the one list), the root tsconfig.json (the build), docker-compose.yml
 * (its block from the template, the gateway's dependency, MySQL's password file) and one line each
 * in the Kubernetes base and dev overlay. Every edit appends to a list whose place is fixed (a
 * comment marks each), so it keeps the file's layout and comments.
 */
import path from 'node:path';
import type { Ownership } from '../../shared/src/platform/ownership-policy.ts';

export interface Registration {
  /** The file, relative to the repository root. */
  file: string;
  update(text: string): string;
}

const MARKER = /# One (line|block) per service in services\.json \(npm run new-service adds it\)/;

/**
 * `text` with `entry` appended to the list under the `nth` marker comment: after the last line
 * indented at least as deep as the marker's.
 */
function appendAfterMarker(file: string, text: string, entry: string, nth = 0): string {
  const lines = text.split('\n');
  const markers = lines.flatMap((line, i) => (MARKER.test(line) ? [i] : []));
  const at = markers[nth];
  if (at === undefined) throw new Error(`${file}: found no "One line per service" comment to register the service under`);
  const indent = (line: string) => line.length - line.trimStart().length;
  let end = at + 1;
  while (end < lines.length && lines[end]!.trim() !== '' && indent(lines[end]!) >= indent(lines[at]!)) end++;
  lines.splice(end, 0, ...entry.replace(/\n$/, '').split('\n'));
  return lines.join('\n');
}

export function registrations(options: { name: string; port: number; owner: Ownership; servicesFile: string; root: string }): Registration[] {
  const { name, port, owner } = options;
  const workspace = `${name}-service`;
  return [
    {
      file: path.relative(options.root, options.servicesFile),
      // One entry per line, as the file is written: appended after the last one.
      update: (text) => text.replace(/(\n)(\s*)(\{[^\n]*\})(\n\s*\])/, `$1$2$3,\n$2{ "name": "${name}", "port": ${port}, "cachedReads": true, "publicReads": false, "owner": "${owner}" }$4`),
    },
    {
      file: 'tsconfig.json',
      update: (text) => text.replace(/(\n\s*)(\{ "path": "gateway" \})/, `$1{ "path": "${workspace}" },$1$2`),
    },
    {
      file: 'docker-compose.yml',
      update: (text) => {
        const block = `  ${workspace}:
    <<: *service
    build:
      context: .
      args:
        WORKSPACE: ${workspace}
    image: rest-microservices/${workspace}:dev
    env_file:
      - ${workspace}/deploy/compose.env

`;
        const withBlock = text.replace(/^ {2}mysql:$/m, `${block}  mysql:`);
        const withDependency = appendAfterMarker('docker-compose.yml', withBlock, `      ${workspace}:\n        condition: service_healthy`);
        return appendAfterMarker('docker-compose.yml', withDependency, `      - ${workspace}/deploy/mysql.env`, 2);
      },
    },
    { file: 'k8s/base/kustomization.yaml', update: (text) => appendAfterMarker('k8s/base/kustomization.yaml', text, `  - ../../${workspace}/deploy/k8s`) },
    { file: 'k8s/overlays/dev/kustomization.yaml', update: (text) => appendAfterMarker('k8s/overlays/dev/kustomization.yaml', text, `  - ../../../${workspace}/deploy/k8s/dev`) },
  ];
}
