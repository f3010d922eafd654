import { runMigrations } from '@app/shared/service';
import { productsService } from './app.js';

await runMigrations(productsService);
