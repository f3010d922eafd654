/** Removes, under `root`, the node-gyp builds of the packages its package.json's `allowScripts` disallows; returns them (relative to `root`). */
export function dropDisallowedBuilds(root: string): string[];
