/**
 * "New releases" of a service for the roll tests: a copy of its built workspace (dist/, migrations/,
 * package.json) in a temporary folder with migration files added. A service finds its
 * migrations beside its code (`new URL('../migrations/', import.meta.url)` from dist/app.js), as
 * in its image, so a copy with one more file is that release exactly, with no setting added to
 * production code for the tests' sake. The folder's node_modules links to the repository's, so the
 * copy imports the same @app/shared and dependencies as the workspace.
 */
import { cp, mkdtemp, rm, symlink, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { ROOT } from '../../tools/process.ts';

export interface Release {
  /** The folder holding its dist/ and migrations/: what ReplicaStack starts a replica from. */
  folder: string;
  remove(): Promise<void>;
}

/** `workspace` as built, with `added` migration files (name → SQL). */
export async function releaseOf(workspace: string, added: Record<string, string>): Promise<Release> {
  const root = await mkdtemp(path.join(os.tmpdir(), `release-${workspace}-`));
  const folder = path.join(root, workspace);
  for (const part of ['dist', 'migrations', 'package.json']) await cp(path.join(ROOT, workspace, part), path.join(folder, part), { recursive: true });
  await symlink(path.join(ROOT, 'node_modules'), path.join(root, 'node_modules'));
  for (const [file, sql] of Object.entries(added)) await writeFile(path.join(folder, 'migrations', file), sql);
  return { folder, remove: () => rm(root, { recursive: true, force: true }) };
}
