// The one rule for comparing epsilon spent with a budget, shared by training's ledger and
// the scoring ledger.

/**
 * Relative tolerance of every comparison of epsilon spent with the budget. calibrateSigma and
 * accountEpsilon invert each other by bisection through erfc/exp/sqrt, so accounting the
 * calibrated number of rounds gives the budget back only up to rounding (1.0000000000000004
 * for a budget of 1; the reference vectors agree to 1e-12). 1e-9 is far above that and far
 * below a real overspend: one round more than budgeted costs about epsilon / (2 T), which is
 * more than 1e-9 epsilon for any T below 5e8 rounds.
 */
export const BUDGET_RTOL = 1e-9;

/** Whether `spent` is within `budget`, up to BUDGET_RTOL. */
export function withinBudget(spent: number, budget: number): boolean {
  return spent <= budget * (1 + BUDGET_RTOL);
}

/** What the ledger reports: an overshoot within BUDGET_RTOL is rounding, so it is the budget itself. */
export function reportedSpent(computed: number, budget: number): number {
  return computed > budget && withinBudget(computed, budget) ? budget : computed;
}
