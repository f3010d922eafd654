import { z } from 'zod';
import { baseConfig } from './base-config.js';
import { FEATURES } from './features.js';

type IntersectionOf<Union> = (Union extends unknown ? (part: Union) => void : never) extends (whole: infer Whole) => void ? Whole : never;
type FeatureSlices = IntersectionOf<(typeof FEATURES)[number]['config']>;

/** The environment the gateway reads (validated at start-up): its base settings and each feature's slice, from the feature's folder. */
export const configSchema = z.object(Object.assign({}, baseConfig, ...FEATURES.map((feature) => feature.config)) as typeof baseConfig & FeatureSlices);

export type GatewayConfig = z.infer<typeof configSchema>;
