import { runService } from '@app/shared/service';
import { usersService } from './app.js';

await runService(usersService);
