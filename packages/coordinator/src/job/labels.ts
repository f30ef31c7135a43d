import { createHash } from 'node:crypto';
import { type FileFormat, type IdMode, type TextEncoding, binaryLabels, numericLabels, readLabelFile } from '@admm-share/core';
import type { LossName } from '@admm-share/protocol';

export interface LabelOptions {
  format?: FileFormat;
  ids?: IdMode;
  idColumn?: string;
  labelColumn?: string;
  encoding?: TextEncoding;
}

export interface Labels {
  file: string;
  ids: string[];
  /** +-1 for logistic loss, raw numbers for squared loss. */
  y: Float64Array;
  /** For logistic loss: which raw value became -1 / +1. */
  classes?: { negative: string; positive: string };
}

export function loadLabels(path: string, loss: LossName, opts: LabelOptions): Labels {
  const t = readLabelFile(path, opts);
  if (loss === 'logistic') {
    const { y, negative, positive } = binaryLabels(t);
    return { file: path, ids: t.ids, y, classes: { negative, positive } };
  }
  return { file: path, ids: t.ids, y: numericLabels(t) };
}

/** Digest of label ids and values, in file order. */
export function labelsDigest(...sets: ({ ids: string[]; y: Float64Array } | undefined)[]): string {
  const h = createHash('sha256');
  for (const s of sets) {
    if (!s) {
      h.update('\0none');
      continue;
    }
    for (let i = 0; i < s.ids.length; i++) h.update(`${s.ids[i]}\0${s.y[i]}\n`);
  }
  return h.digest('hex');
}
