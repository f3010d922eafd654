import { runService } from '@app/shared/service';
import { productsService } from './app.js';

await runService(productsService);
