// The job's dashboard: follows /api/events (server-sent events: a snapshot, then new rounds
// and the status as they change) and draws the charts with uPlot. Every asset comes from the
// coordinator's HTTP port; nothing is fetched from elsewhere. It shows job-level numbers
// only (the API holds nothing else).
/* global uPlot */
'use strict';

(() => {
  const $ = (id) => document.getElementById(id);
  const PARTY_COLOURS = ['#175cd3', '#dc6803', '#12805c', '#9e77ed', '#c11574', '#0e9384', '#667085', '#b54708'];
  /** The browser keeps at most this many rounds; beyond it the older half is thinned, as the server does. */
  const MAX_POINTS = 20000;

  let status = null;
  let rounds = [];
  let ended = false;
  let drawQueued = false;
  const charts = {};

  // ---- formatting -------------------------------------------------------------------------
  const num = (v, digits = 4) => {
    if (v === null || v === undefined || Number.isNaN(v)) return '–';
    const a = Math.abs(v);
    if (a !== 0 && (a < 1e-3 || a >= 1e6)) return v.toExponential(3);
    return Number(v.toFixed(digits)).toString();
  };
  const bytes = (b) => {
    if (b === null || b === undefined) return '–';
    const units = ['B', 'kB', 'MB', 'GB', 'TB'];
    let k = 0;
    while (b >= 1000 && k < units.length - 1) { b /= 1000; k++; }
    return `${k === 0 ? b : b.toFixed(b < 10 ? 2 : 1)} ${units[k]}`;
  };
  const ms = (s) => (s === null || s === undefined ? '–' : s < 1 ? `${(s * 1000).toFixed(s < 0.01 ? 2 : 1)} ms` : `${s.toFixed(2)} s`);
  const duration = (s) => {
    if (!Number.isFinite(s)) return '';
    const h = Math.floor(s / 3600), m = Math.floor((s % 3600) / 60), sec = Math.floor(s % 60);
    return h > 0 ? `${h} h ${m} min` : m > 0 ? `${m} min ${sec} s` : `${s.toFixed(1)} s`;
  };
  const metricsLine = (t) => {
    if (!t) return null;
    if (t.rmse !== undefined) return `RMSE ${num(t.rmse)}`;
    return `AUC ${num(t.auc)} · accuracy ${num(t.accuracy)} · log loss ${num(t.logLoss)}`;
  };
  const el = (tag, text, cls) => {
    const e = document.createElement(tag);
    if (text !== undefined && text !== null) e.textContent = text;
    if (cls) e.className = cls;
    return e;
  };

  // ---- charts -----------------------------------------------------------------------------
  const width = (id) => Math.max(300, $(id).clientWidth || 560);
  const positive = (v) => (v !== undefined && v !== null && v > 0 ? v : null);
  const axisFmt = (u, vals) => vals.map((v) => (v === null ? '' : Math.abs(v) >= 1e4 || (Math.abs(v) < 1e-2 && v !== 0) ? v.toExponential(0) : String(Number(v.toPrecision(3)))));

  /** On a log axis: ticks, grid and labels at powers of ten only, every k-th so that at most about six remain. */
  const decades = (u, splits) => {
    const exps = splits.map((v) => (v > 0 ? Math.log10(v) : NaN));
    const whole = exps.filter((e) => Math.abs(e - Math.round(e)) < 1e-9);
    const k = Math.max(1, Math.ceil(whole.length / 6));
    return splits.map((v, i) => (Math.abs(exps[i] - Math.round(exps[i])) < 1e-9 && Math.round(exps[i]) % k === 0 ? v : null));
  };

  function makeChart(id, series, yLog, yLabel) {
    const opts = {
      width: width(id),
      height: 240,
      legend: { live: true },
      cursor: { drag: { x: true, y: false } },
      scales: { x: { time: false }, y: yLog ? { distr: 3, log: 10 } : { auto: true } },
      axes: [
        { label: 'round', stroke: '#667085', grid: { stroke: '#eef0f3' } },
        yLog
          ? { label: yLabel, stroke: '#667085', grid: { stroke: '#eef0f3', filter: decades }, ticks: { filter: decades }, filter: decades, values: axisFmt, size: 60 }
          : { label: yLabel, stroke: '#667085', grid: { stroke: '#eef0f3' }, values: axisFmt, size: 60 },
      ],
      // Points only while there are too few to draw a line (a one-shot job has one round).
      series: [{ label: 'round' }, ...series.map((s) => ({ spanGaps: true, width: 2, points: { show: (u) => u.data[0].length < 3, size: 7 }, ...s }))],
    };
    const u = new uPlot(opts, [[], ...series.map(() => [])], $(id));
    u.yLog = yLog;
    return u;
  }

  function objectiveChart(log) {
    if (charts.objective && charts.objective.yLog === log) return charts.objective;
    if (charts.objective) charts.objective.destroy();
    charts.objective = makeChart('chart-objective', [{ label: 'objective', stroke: '#175cd3', value: (u, v) => num(v) }], log, log ? 'objective (log)' : 'objective');
    return charts.objective;
  }

  function timeChart(parties) {
    const key = parties.join(',');
    if (charts.time && charts.time.key === key) return charts.time;
    if (charts.time) charts.time.destroy();
    charts.time = makeChart(
      'chart-time',
      [
        { label: 'round (coordinator)', stroke: '#1d2433', dash: [4, 3], value: (u, v) => ms(v) },
        ...parties.map((p, m) => ({ label: p, stroke: PARTY_COLOURS[m % PARTY_COLOURS.length], value: (u, v) => ms(v) })),
      ],
      true,
      'seconds (log)',
    );
    charts.time.key = key;
    return charts.time;
  }

  function draw() {
    drawQueued = false;
    if (!status) return;
    renderStatus();
    const xs = rounds.map((r) => r.round);
    // A log scale needs positive values; the corrected objective of label privacy can go below 0.
    const objLog = rounds.length > 0 && rounds.every((r) => r.objective > 0);
    objectiveChart(objLog).setData([xs, rounds.map((r) => (objLog ? positive(r.objective) : r.objective))]);
    $('chart-objective').dataset.points = String(rounds.length);

    const hasResiduals = rounds.some((r) => r.primal !== undefined);
    $('no-residuals').classList.toggle('hidden', hasResiduals || rounds.length === 0);
    $('chart-residuals').classList.toggle('hidden', !hasResiduals && rounds.length > 0);
    charts.residuals ??= makeChart(
      'chart-residuals',
      [
        { label: 'primal', stroke: '#175cd3', value: (u, v) => num(v) },
        { label: 'dual', stroke: '#dc6803', value: (u, v) => num(v) },
      ],
      true,
      'residual (log)',
    );
    charts.residuals.setData([xs, rounds.map((r) => positive(r.primal)), rounds.map((r) => positive(r.dual))]);
    $('chart-residuals').dataset.points = String(hasResiduals ? rounds.length : 0);

    const ids = status.parties.map((p) => p.id);
    const t = timeChart(ids);
    t.setData([xs, rounds.map((r) => positive(r.roundSeconds)), ...ids.map((_, m) => rounds.map((r) => positive(r.partySeconds[m])))]);

    const tested = rounds.filter((r) => r.test);
    const result = status.result;
    const final = result && result.test && !tested.some((r) => r.round === result.rounds) ? [{ round: result.rounds, test: result.test }] : [];
    const points = [...tested, ...final];
    $('no-test').classList.toggle('hidden', points.length > 0);
    $('chart-test').classList.toggle('hidden', points.length === 0);
    if (points.length > 0) {
      const rmse = points[0].test.rmse !== undefined;
      const keys = rmse ? [['rmse', 'RMSE']] : [['auc', 'AUC'], ['accuracy', 'accuracy'], ['logLoss', 'log loss']];
      if (!charts.test || charts.test.rmse !== rmse) {
        if (charts.test) charts.test.destroy();
        charts.test = makeChart('chart-test', keys.map(([, label], i) => ({ label, stroke: PARTY_COLOURS[i], value: (u, v) => num(v), points: { show: true, size: 6 } })), false, 'metric');
        charts.test.rmse = rmse;
      }
      charts.test.setData([points.map((r) => r.round), ...keys.map(([k]) => points.map((r) => r.test[k] ?? null))]);
    }
  }

  function queueDraw() {
    if (!drawQueued) {
      drawQueued = true;
      requestAnimationFrame(draw);
    }
  }

  // ---- the rest of the page ---------------------------------------------------------------
  function renderStatus() {
    const s = status;
    const j = s.job;
    document.title = `admm-share ${j.id}: ${s.phase}, round ${s.round}`;
    $('job-id').textContent = j.id;
    const phase = $('phase');
    phase.textContent = s.phase;
    phase.className = `badge ${s.phase}`;
    $('round').textContent = String(s.round);
    $('max-rounds').textContent = ` / ${j.maxRounds}`;
    $('elapsed').textContent = duration(s.elapsedSeconds);
    const facts = [
      `${j.algorithm}${j.algorithm === 'admm' ? ` (${j.variant})` : ''}`,
      `${j.loss} loss`,
      j.rows !== null ? `${j.rows} training rows` : null,
      j.testRows ? `${j.testRows} test rows` : null,
      `${s.parties.length} parties`,
      j.activeParty ? `active party ${j.activeParty}` : null,
      s.alignment && s.alignment.phase === 'done' ? `ids aligned in ${duration(s.alignment.seconds)}` : null,
      `started ${new Date(j.startedAt).toLocaleString()}`,
    ];
    $('job-line').textContent = facts.filter(Boolean).join(' · ');
    const latest = s.latest;
    $('objective').textContent = latest ? num(latest.objective, 6) : '–';
    $('primal').textContent = latest && latest.primal !== undefined ? num(latest.primal) : '–';
    $('dual').textContent = latest && latest.dual !== undefined ? num(latest.dual) : '–';
    $('round-time').textContent = latest ? ms(latest.roundSeconds) : '–';
    const test = s.result && s.result.test ? { round: s.result.rounds, metrics: s.result.test } : s.test;
    $('test').textContent = test ? `${metricsLine(test.metrics)} (round ${test.round})` : s.result && s.result.evaluationSkipped ? `not evaluated: ${s.result.evaluationSkipped}` : 'not evaluated yet';
    $('bytes').textContent = `${bytes(s.bytes.received)} / ${bytes(s.bytes.sent)}`;

    const error = $('error');
    error.classList.toggle('hidden', !s.error);
    error.textContent = s.error ? `The job failed: ${s.error}` : '';

    renderAlignment(s);
    renderParties(s);
    renderResult(s);
  }

  // The private set intersection: most of a large job's time, before any round.
  function renderAlignment(s) {
    const a = s.alignment;
    const section = $('alignment');
    const finished = (x) => x.total !== null && x.done >= x.total;
    // While the alignment runs every step is shown; after it only a rejoining party's unfinished
    // ones (its duration is then in the job's line).
    const shown = !a ? [] : a.phase === 'aligning' ? a.steps : a.steps.filter((x) => !finished(x));
    section.classList.toggle('hidden', !a || (a.phase !== 'aligning' && a.phase !== 'failed' && shown.length === 0));
    if (!a) return;
    section.dataset.phase = a.phase;
    $('alignment-line').textContent = {
      aligning: `running for ${duration(a.seconds)}`,
      done: `done in ${duration(a.seconds)}`,
      failed: `stopped after ${duration(a.seconds)}`,
      resumed: 'none before training: the job resumed from its checkpoint',
    }[a.phase];
    const waiting = a.waitingFor || [];
    $('alignment-waiting').classList.toggle('hidden', waiting.length === 0);
    $('alignment-waiting').textContent = `Waiting for the ids of ${waiting.map((w) => `${w.party} (${w.joined ? 'joined: it hashes and blinds its own ids first' : 'not joined yet'})`).join(', ')}.`;
    $('alignment-steps').classList.toggle('hidden', shown.length === 0);
    $('alignment-steps').tBodies[0].replaceChildren(...shown.map((x) => {
      const tr = el('tr');
      tr.dataset.step = x.step;
      tr.dataset.party = x.party ?? '';
      tr.dataset.set = x.set;
      const bar = el('progress');
      // Without a total yet the bar is indeterminate (a step waiting for the threads).
      if (x.total !== null) {
        bar.max = Math.max(1, x.total);
        bar.value = x.done;
      }
      const cell = el('td');
      cell.append(bar);
      tr.append(
        el('td', x.step),
        el('td', x.party ?? 'coordinator (label ids)', x.party ? 'mono' : ''),
        el('td', x.set),
        cell,
        el('td', `${x.done} / ${x.total ?? '…'}`, 'num'),
        el('td', duration(x.seconds), 'num'),
        el('td', finished(x) ? 'done' : x.etaSeconds === null ? '–' : `about ${duration(x.etaSeconds)}`, 'num'),
      );
      return tr;
    }));
  }

  function renderParties(s) {
    const body = $('parties').tBodies[0];
    const rows = s.parties.map((p) => {
      const tr = el('tr');
      tr.dataset.party = p.id;
      tr.append(el('td', p.id, 'mono'), el('td', s.job.activeParty ? p.role : '–'));
      const state = el('td', p.state, `state state-${p.state}`);
      state.dataset.state = p.state;
      tr.append(state, el('td', p.features ? String(p.features) : '–', 'num'), el('td', p.rows ? String(p.rows) : '–', 'num'));
      const last = p.lastRound;
      tr.append(
        el('td', last ? ms(last.seconds) : '–', 'num'),
        el('td', last ? `${bytes(last.bytesIn)} / ${bytes(last.bytesOut)}` : '–', 'num'),
        el('td', `${bytes(p.bytesIn)} / ${bytes(p.bytesOut)}`, 'num'),
        el('td', String(p.rejoins), 'num'),
      );
      const budget = el('td');
      if (p.epsilonBudget !== null) {
        const box = el('div', undefined, 'budget');
        const bar = el('div', undefined, 'budget-bar');
        const fill = el('div', undefined, 'budget-fill');
        const share = Math.min(1, p.epsilonSpent / p.epsilonBudget);
        fill.style.width = `${(100 * share).toFixed(1)}%`;
        if (share >= 0.999) fill.classList.add('full');
        bar.append(fill);
        box.append(bar, el('span', `${num(p.epsilonSpent, 3)} / ${num(p.epsilonBudget, 3)}${p.mechanism ? ` (${p.mechanism})` : ''}`, 'mono'));
        budget.append(box);
      } else budget.textContent = p.role === 'active' && s.job.activeParty ? 'none (active party: no noise)' : 'no noise';
      tr.append(budget);
      return tr;
    });
    body.replaceChildren(...rows);
    const lp = $('label-privacy');
    lp.classList.toggle('hidden', s.job.labelEpsilon === null);
    lp.textContent = s.job.labelEpsilon !== null ? `Label privacy at the coordinator: label epsilon ${s.job.labelEpsilon} (randomized response on the training labels, once per job).` : '';
  }

  function renderResult(s) {
    const r = s.result;
    $('result').classList.toggle('hidden', !r);
    if (!r) return;
    const rounds = `${r.rounds} round${r.rounds === 1 ? '' : 's'}`;
    const how =
      status.job.algorithm === 'one-shot'
        ? 'finished (one release per passive party and one fit)'
        : r.reason === 'converged'
          ? `converged after ${rounds}`
          : r.reason === 'budget'
            ? `stopped by a privacy budget after ${rounds}`
            : `ran ${rounds}`;
    $('result-line').textContent = `The job ${how} in ${duration(r.seconds.total)} (training ${duration(r.seconds.training)}, ${ms(r.seconds.perRound)} per round); objective ${num(r.objective, 6)}${r.objectiveFrom === 'noisy shares' ? ' (from noisy shares)' : ''}.`;
    const row = (name, objective, t) => {
      const tr = el('tr');
      tr.append(el('td', name), el('td', num(objective, 6), 'num'));
      for (const k of ['logLoss', 'accuracy', 'auc', 'rmse']) tr.append(el('td', t ? num(t[k]) : '–', 'num'));
      return tr;
    };
    const rows = [row('this job\'s model (every party)', r.objective, r.test)];
    if (r.local) rows.push(row(`${r.local.party} alone (its local-only model)`, r.local.objective, r.local.test));
    if (r.baseline) rows.push(row('base rate (predict the training labels\' rate)', null, r.baseline));
    $('comparison').tBodies[0].replaceChildren(...rows);
    $('comparison-note').textContent = r.local
      ? ''
      : 'No local-only model to compare with: a one-shot job with an active party fits one, and otherwise the coordinator shows the one given by --local-baseline (admm-share simulate --dashboard passes party 1 alone).';
    $('warnings').replaceChildren(...r.warnings.map((w) => el('li', `Warning: ${w}`)));
  }

  // ---- the event stream -------------------------------------------------------------------
  function addRounds(points) {
    const last = rounds.length ? rounds[rounds.length - 1].round : -Infinity;
    for (const p of points) if (p.round > last) rounds.push(p);
    if (rounds.length > MAX_POINTS) {
      const half = Math.floor(rounds.length / 2);
      rounds = rounds.filter((_, i) => i >= half || i % 2 === 0);
    }
  }

  /** Connected: live while the job runs; once it has ended, nothing more will come. */
  function showConnected(link) {
    link.textContent = ended ? `the job has ended (${status.phase}); this is its last state` : 'live';
    link.className = ended ? 'link ended' : 'link live';
  }

  function connect() {
    const link = $('link');
    const es = new EventSource('api/events');
    es.addEventListener('snapshot', (e) => {
      const s = JSON.parse(e.data);
      rounds = [];
      addRounds(s.rounds);
      delete s.rounds;
      status = s;
      ended = status.phase === 'done' || status.phase === 'failed';
      showConnected(link);
      queueDraw();
    });
    es.addEventListener('rounds', (e) => {
      addRounds(JSON.parse(e.data));
      queueDraw();
    });
    es.addEventListener('state', (e) => {
      status = JSON.parse(e.data);
      ended = status.phase === 'done' || status.phase === 'failed';
      showConnected(link);
      queueDraw();
    });
    es.onerror = () => {
      if (ended) {
        // The coordinator has closed its port after the job: what is shown is the job's end.
        es.close();
        link.textContent = 'the coordinator has stopped; this is the job\'s last state';
      } else link.textContent = 'connection lost; retrying';
      link.className = 'link lost';
    };
  }

  window.addEventListener('resize', () => {
    for (const [name, u] of Object.entries(charts)) u.setSize({ width: width(`chart-${name}`), height: 240 });
  });
  // For tests and the curious: the charts and the data they draw.
  window.dashboard = { charts, get rounds() { return rounds; }, get status() { return status; } };
  connect();
})();
