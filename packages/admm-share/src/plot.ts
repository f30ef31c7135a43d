// What the experiment and the privacy sweep share: a Vega-Lite spec rendered to SVG (the
// renderer lives in the runtime package, which the model reports use too), and a stream that
// swallows the progress lines of the simulations they run.
export { renderSvg } from '@admm-share/runtime';

/** Where a simulation's progress goes when a command runs many of them. */
export const quiet = { write: () => true } as unknown as NodeJS.WriteStream;
