import { mkdirSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { quiet, renderSvg } from './plot.js';
import { writeFileAtomic } from '@admm-share/core';
import { DEFAULT_ANDERSON } from '@admm-share/coordinator';
import type { NoiseMechanism } from '@admm-share/protocol';
import { type SimulateOptions, type SimulateSummary, simulate } from './simulate.js';

export interface SweepOptions {
  data: string;
  test: string;
  split: string;
  out: string;
  epsilons: number[];
  delta: number;
  rounds: number;
  lambda: number;
  mechanisms: NoiseMechanism[];
  /** Seed the noise (reproducible figures; predictable noise). */
  seed?: string;
}

export interface SweepRow {
  mechanism: string;
  epsilon: number | null;
  delta: number | null;
  rounds: number;
  sigma: number;
  sensitivity: number;
  logLoss: number;
  accuracy: number;
  auc: number;
}

/**
 * Test log loss and accuracy against epsilon for each privacy mechanism, over real
 * processes (one `simulate` per point), with the central and party-1-only models and the
 * noiseless ADMM run as reference lines. Writes sweep.csv, sweep.json and sweep.svg.
 */
export async function privacySweep(o: SweepOptions, log: (line: string) => void): Promise<SweepRow[]> {
  const out = resolve(o.out);
  mkdirSync(out, { recursive: true });
  const base: SimulateOptions = {
    data: o.data,
    test: o.test,
    split: o.split,
    lambda: o.lambda,
    rounds: o.rounds,
    variant: 'exact',
    alpha: 1.6,
    anderson: DEFAULT_ANDERSON,
    evalEvery: 0,
    intercept: false,
    dataSeed: 'admm-share',
    baselines: false,
    privacy: { mechanism: 'none', delta: o.delta },
  };
  const rows: SweepRow[] = [];
  const point = (s: SimulateSummary, mechanism: string): SweepRow => {
    // The first party with noise (in a one-shot run party 1 is the active party and has none).
    const q = s.privacy.find((x) => x.mechanism !== 'none') ?? s.privacy[0];
    return {
      mechanism,
      epsilon: q.epsilon,
      delta: q.delta,
      rounds: s.rounds,
      sigma: q.sigma,
      sensitivity: q.sensitivity,
      logLoss: s.test!.logLoss!,
      accuracy: s.test!.accuracy!,
      auc: s.test!.auc!,
    };
  };
  const reference = await simulate({ ...base, baselines: true, out: join(out, 'runs', 'none') }, quiet);
  rows.push(point(reference, 'none'));
  log(`none: test log loss ${reference.test!.logLoss!.toFixed(4)}, accuracy ${reference.test!.accuracy!.toFixed(4)}`);
  // The one-shot release is the default with privacy: party 1 is the label holder's (active)
  // party; the same release with every party passive is its own series.
  const series = o.mechanisms.flatMap((mechanism): { label: string; mechanism: NoiseMechanism; activeParty: string | undefined }[] =>
    mechanism === 'score-release'
      ? [{ label: mechanism, mechanism, activeParty: 'party-1' }, { label: `${mechanism} all passive`, mechanism, activeParty: undefined }]
      : [{ label: mechanism, mechanism, activeParty: undefined }],
  );
  for (const { label, mechanism, activeParty } of series)
    for (const epsilon of o.epsilons) {
      const s = await simulate(
        {
          ...base,
          out: join(out, 'runs', `${label.replace(/ /g, '-')}-eps${epsilon}`),
          privacy: { mechanism, epsilon, delta: o.delta, seed: o.seed === undefined ? undefined : `${o.seed}/${label}/${epsilon}`, ...(mechanism === 'paper' ? { b1: 1, c1: 1 } : {}) },
          activeParty,
        },
        quiet,
      );
      const row = point(s, label);
      rows.push(row);
      log(`${label} epsilon ${epsilon}: sigma ${row.sigma.toPrecision(4)}, test log loss ${row.logLoss.toFixed(4)}, accuracy ${row.accuracy.toFixed(4)}`);
    }
  const central = reference.baselines!.central.test!;
  const local = reference.baselines!.local.test!;
  const header = 'mechanism,epsilon,delta,rounds,sigma,sensitivity,test_log_loss,test_accuracy,test_auc';
  const csv = [header, ...rows.map((r) => [r.mechanism, r.epsilon ?? 'none', r.delta ?? '', r.rounds, r.sigma, r.sensitivity, r.logLoss, r.accuracy, r.auc].join(','))];
  csv.push(`central (all features),none,,,0,0,${central.logLoss},${central.accuracy},${central.auc}`);
  csv.push(`${reference.baselines!.local.party} only,none,,,0,0,${local.logLoss},${local.accuracy},${local.auc}`);
  writeFileAtomic(join(out, 'sweep.csv'), csv.join('\n') + '\n');
  writeFileAtomic(join(out, 'sweep.json'), JSON.stringify({ rows, central, local, options: o }, null, 2) + '\n');
  writeFileAtomic(join(out, 'sweep.svg'), await plot(rows, { central, local, localName: `${reference.baselines!.local.party} only` }));
  return rows;
}

async function plot(rows: SweepRow[], ref: { central: { logLoss?: number; accuracy?: number }; local: { logLoss?: number; accuracy?: number }; localName: string }): Promise<string> {
  const points = rows.filter((r) => r.epsilon !== null);
  const none = rows.find((r) => r.epsilon === null)!;
  const panel = (field: 'logLoss' | 'accuracy', title: string) => {
    const rules = [
      { label: 'central, all features', value: ref.central[field] },
      { label: ref.localName, value: ref.local[field] },
      { label: 'ADMM without noise', value: none[field] },
    ];
    return {
      width: 360,
      height: 260,
      title,
      layer: [
        {
          data: { values: points },
          mark: { type: 'line', point: true },
          encoding: {
            x: { field: 'epsilon', type: 'quantitative', scale: { type: 'log' }, title: 'epsilon (delta = 1e-5, per party)' },
            // Log loss spans 0.3 to 10^6 across mechanisms: a log scale keeps both readable.
            y: { field, type: 'quantitative', title, scale: field === 'logLoss' ? { type: 'log' } : { zero: false } },
            color: { field: 'mechanism', type: 'nominal', title: 'mechanism', legend: { labelLimit: 260 } },
          },
        },
        {
          data: { values: rules },
          mark: { type: 'rule', strokeDash: [4, 3] },
          encoding: {
            y: { field: 'value', type: 'quantitative' },
            strokeDash: { field: 'label', type: 'nominal', title: 'reference', legend: { labelLimit: 200 } },
          },
        },
      ],
    };
  };
  const spec = {
    $schema: 'https://vega.github.io/schema/vega-lite/v6.json',
    hconcat: [panel('logLoss', 'test log loss'), panel('accuracy', 'test accuracy')],
    resolve: { scale: { color: 'shared' } },
    background: 'white',
  };
  return renderSvg(spec);
}
