/**
 * Each service in services.json with its code: its definition and app, from its build (`dist`, for
 * scripts run by node) or its sources (`src`, for the tests, which jest compiles). Every service's
 * app module (users-service/src/app.ts, for one) exports `service` and `createApp`; the scaffold
 * (scripts/new-service.ts) writes them so.
 */
import type { RequestListener } from 'node:http';
import { readServiceList, type ServiceEntry } from '@app/shared/platform/services';
import type { ServiceDefinition, ServiceDependencies } from '@app/shared/service';

export interface ServiceModule {
  entry: ServiceEntry;
  service: ServiceDefinition;
  createApp: (dependencies: ServiceDependencies) => RequestListener;
}

export async function serviceModules(from: 'dist' | 'src' = 'dist'): Promise<ServiceModule[]> {
  const modules: ServiceModule[] = [];
  // One import at a time: jest's module loader can fail imports made concurrently. A relative
  // specifier, so that jest maps the sources' `.js` to their `.ts`.
  for (const entry of readServiceList()) {
    const module = (await import(`../${entry.workspace}/${from}/app.js`)) as Omit<ServiceModule, 'entry'>;
    modules.push({ entry, service: module.service, createApp: module.createApp });
  }
  return modules;
}
