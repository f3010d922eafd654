import { list } from '@app/shared/platform/config';
import { z } from 'zod';

const origin = z.string().refine((value) => URL.canParse(value) && new URL(value).origin === value);

/** The settings of CORS: the origins whose browser pages may call the API. */
export const corsConfig = {
  CORS_ORIGINS: list('', origin, 'must be a comma-separated list of origins (scheme://host[:port])'),
};
