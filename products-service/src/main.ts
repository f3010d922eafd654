import { runService } from '@app/shared/service';
import { service } from './app.js';

await runService(service);
