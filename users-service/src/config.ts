import { serviceDefaults } from '@app/shared/platform/services';
import { serviceConfigSchema } from '@app/shared/service';

/** Its name, port and database from its entry in services.json. */
export const defaults = serviceDefaults('users');

/** The environment this process reads (validated at start-up). */
export const configSchema = serviceConfigSchema(defaults);
