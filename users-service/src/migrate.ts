import { runMigrations } from '@app/shared/service';
import { usersService } from './app.js';

await runMigrations(usersService);
