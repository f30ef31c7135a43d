// What every HTML report shares (the coordinator's model report, each party's coefficient page,
// the experiment's and sweep's plots): a Vega-Lite spec rendered to SVG without a browser, and a
// self-contained page around it. No script and no remote resource in the page: it opens offline
// and under a strict Content-Security-Policy (the page declares one). vega and vega-lite are
// loaded on first use: they cost about a third of a command's start-up, and only reports draw.
import type { TopLevelSpec } from 'vega-lite';

/** Render a Vega-Lite spec to an SVG document (no browser: vega's headless renderer). */
export async function renderSvg(spec: object): Promise<string> {
  const [vega, vl] = await Promise.all([import('vega'), import('vega-lite')]);
  return new vega.View(vega.parse(vl.compile(spec as TopLevelSpec).spec), { renderer: 'none' }).toSVG();
}

const ESCAPES: Readonly<Record<string, string>> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };

/** Text for HTML (element content and quoted attributes): names come from users' files. */
export function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => ESCAPES[c]);
}

/** A number for a table cell: 4 significant decimals in the usual range, exponent form outside it, '-' for NaN. */
export function formatNumber(v: number | null | undefined, digits = 4): string {
  if (v === null || v === undefined || Number.isNaN(v)) return '-';
  if (!Number.isFinite(v)) return v > 0 ? 'inf' : '-inf';
  return v === 0 || (Math.abs(v) >= 1e-3 && Math.abs(v) < 1e6) ? v.toFixed(digits) : v.toExponential(digits - 1);
}

/** An HTML table: `head` and `rows` are already escaped cells (use escapeHtml on text from files). */
export function htmlTable(head: readonly string[], rows: readonly (readonly string[])[]): string {
  const tr = (cells: readonly string[], tag: 'th' | 'td') => `<tr>${cells.map((c) => `<${tag}>${c}</${tag}>`).join('')}</tr>`;
  return `<table><thead>${tr(head, 'th')}</thead><tbody>${rows.map((r) => tr(r, 'td')).join('\n')}</tbody></table>`;
}

/**
 * A whole page: `body` is HTML (escaped by the caller), the title is escaped here. The CSP
 * allows inline style only: the SVG plots are inline elements, not scripts or fetched images.
 */
export function htmlPage(title: string, body: string): string {
  return `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; img-src data:">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${escapeHtml(title)}</title>
<style>
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 72em; padding: 0 1em; color: #222; }
table { border-collapse: collapse; margin: 1em 0; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.6em; text-align: right; }
th:first-child, td:first-child { text-align: left; }
.plots { display: flex; flex-wrap: wrap; gap: 1.5em; }
.warning { color: #a40; }
.note { color: #555; font-size: 0.9em; }
</style>
</head>
<body>
<h1>${escapeHtml(title)}</h1>
${body}
</body>
</html>
`;
}
