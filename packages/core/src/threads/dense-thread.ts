// One thread of DenseTeam (dense-team.ts, a ThreadTeam): its part of each call on the shared block.
import { type DenseThreadData, Op, type PackedPart } from './dense-team.js';
import { choleskyRows, denseGramRows, denseMatTVecRows, denseMatVecRows, denseOuterGramRows } from '../linalg/dense.js';
import { type TeamThreadData, serveTeam } from './thread-team.js';

serveTeam<DenseThreadData & TeamThreadData>(({ a, from, to, x, w, out, partial }) => (op, message) => {
  switch (op) {
    case Op.MatVec:
      return denseMatVecRows(out, a, x, from, to);
    case Op.MatTVec:
      return denseMatTVecRows(partial, a, w, from, to);
    case Op.Gram:
    case Op.OuterGram:
    case Op.CholeskyLeft: {
      const m = message() as PackedPart;
      if (op === Op.Gram) denseGramRows(a, m.g, 0, a.rows, undefined, m.from, m.to);
      else if (op === Op.OuterGram) denseOuterGramRows(a, m.g, m.from, m.to);
      else choleskyRows(m.g, m.n!, m.from, m.to, 0, m.upTo);
      return;
    }
    default:
      throw new Error(`unknown op ${op}`);
  }
});
