/** The built-in data sets of `admm-share simulate --dataset` (used when --data is not given). */
export const DATASETS = ['synthetic', 'spam', 'gisette'] as const;
export type DatasetName = (typeof DATASETS)[number];
