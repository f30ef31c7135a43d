// What the experiment and the privacy sweep share: a Vega-Lite spec rendered to SVG, and a
// stream that swallows the progress lines of the simulations they run. vega and vega-lite are
// loaded on first use: they cost about a third of a command's start-up, and only these two
// commands draw.
import type { TopLevelSpec } from 'vega-lite';

/** Render a Vega-Lite spec to an SVG document (no browser: vega's headless renderer). */
export async function renderSvg(spec: object): Promise<string> {
  const [vega, vl] = await Promise.all([import('vega'), import('vega-lite')]);
  return new vega.View(vega.parse(vl.compile(spec as TopLevelSpec).spec), { renderer: 'none' }).toSVG();
}

/** Where a simulation's progress goes when a command runs many of them. */
export const quiet = { write: () => true } as unknown as NodeJS.WriteStream;
