import { runMigrations } from '@app/shared/service';
import { service } from './app.js';

await runMigrations(service);
