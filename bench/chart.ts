/**
 * The benches' charts, SVG written here (no plotting library, no external service): `npm run
 * bench`'s, one bar per target for requests/s and one for p99 latency, side by side, with the
 * figures on the bars; and `npm run load`'s curve.
 */

export interface ChartRow {
  label: string;
  requestsPerSecond: number;
  p99Ms: number;
  /** Bars of the same group share a colour: ours, nginx, the reference servers. */
  group: 'ours' | 'nginx' | 'reference';
}

const COLOURS = { ours: '#2f6fb0', nginx: '#3d9a50', reference: '#8a8a8a' } as const;
const escape = (text: string) => text.replaceAll('&', '&amp;').replaceAll('<', '&lt;').replaceAll('>', '&gt;');
const thousands = (n: number) => Math.round(n).toLocaleString('en-US');

export function chartSvg(rows: ChartRow[], title: string, subtitle: string): string {
  const labelWidth = 230;
  const panelWidth = 330;
  const gap = 40;
  const rowHeight = 26;
  const top = 70;
  const width = labelWidth + panelWidth * 2 + gap + 20;
  const height = top + rows.length * rowHeight + 40;
  const maxRps = Math.max(...rows.map((r) => r.requestsPerSecond), 1);
  const maxP99 = Math.max(...rows.map((r) => r.p99Ms), 0.001);
  const panels = [
    { x: labelWidth, heading: 'requests/s (more is better)', value: (r: ChartRow) => r.requestsPerSecond, max: maxRps, text: (r: ChartRow) => thousands(r.requestsPerSecond) },
    { x: labelWidth + panelWidth + gap, heading: 'p99 latency, ms (less is better)', value: (r: ChartRow) => r.p99Ms, max: maxP99, text: (r: ChartRow) => `${r.p99Ms} ms` },
  ];
  const parts = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="sans-serif" font-size="12">`,
    `<rect width="100%" height="100%" fill="#ffffff"/>`,
    `<text x="10" y="22" font-size="15" font-weight="bold">${escape(title)}</text>`,
    `<text x="10" y="40" fill="#555">${escape(subtitle)}</text>`,
  ];
  for (const panel of panels) parts.push(`<text x="${panel.x}" y="${top - 10}" font-weight="bold">${escape(panel.heading)}</text>`);
  rows.forEach((row, i) => {
    const y = top + i * rowHeight;
    parts.push(`<text x="${labelWidth - 8}" y="${y + 16}" text-anchor="end">${escape(row.label)}</text>`);
    for (const panel of panels) {
      const barWidth = Math.max(1, (panel.value(row) / panel.max) * (panelWidth - 70));
      parts.push(`<rect x="${panel.x}" y="${y + 4}" width="${barWidth.toFixed(1)}" height="${rowHeight - 8}" fill="${COLOURS[row.group]}"/>`);
      parts.push(`<text x="${(panel.x + barWidth + 4).toFixed(1)}" y="${y + 16}">${escape(panel.text(row))}</text>`);
    }
  });
  const legendY = top + rows.length * rowHeight + 24;
  let legendX = labelWidth;
  for (const [group, label] of [['ours', 'this project'], ['nginx', 'nginx'], ['reference', 'floor and ceiling']] as const) {
    parts.push(`<rect x="${legendX}" y="${legendY - 10}" width="12" height="12" fill="${COLOURS[group]}"/>`);
    parts.push(`<text x="${legendX + 16}" y="${legendY}">${label}</text>`);
    legendX += 130;
  }
  parts.push('</svg>');
  return `${parts.join('\n')}\n`;
}

/** The load curve as an SVG: goodput (bars) and p99 (line) per step, and the Redis cut second by second. */
export function loadCurveSvg(steps: { connections: number; goodput: number; p99Ms: number }[], cut: { second: number; goodput: number }[], cutWindow: [number, number], cutConnections: number, meta: string): string {
  const width = 860;
  const height = 360;
  const panel = { x: 60, y: 40, w: 360, h: 250 };
  const maxGoodput = Math.max(...steps.map((s) => s.goodput), ...cut.map((c) => c.goodput), 1);
  const maxP99 = Math.max(...steps.map((s) => s.p99Ms), 1);
  const yGood = (v: number) => panel.y + panel.h - (v / maxGoodput) * panel.h;
  const band = panel.w / steps.length;
  const bars = steps
    .map((s, i) => {
      const x = panel.x + i * band + band * 0.2;
      return `<rect x="${x}" y="${yGood(s.goodput)}" width="${band * 0.6}" height="${panel.y + panel.h - yGood(s.goodput)}" fill="#4c78a8"/>
<text x="${x + band * 0.3}" y="${yGood(s.goodput) - 4}" text-anchor="middle" font-size="11">${s.goodput}</text>
<text x="${x + band * 0.3}" y="${panel.y + panel.h + 16}" text-anchor="middle" font-size="12">${s.connections}</text>`;
    })
    .join('\n');
  const p99Points = steps.map((s, i) => `${panel.x + i * band + band / 2},${panel.y + panel.h - (s.p99Ms / maxP99) * panel.h}`);
  const p99Labels = steps
    .map((s, i) => `<text x="${panel.x + i * band + band / 2 + 4}" y="${panel.y + panel.h - (s.p99Ms / maxP99) * panel.h + 14}" font-size="11" fill="#e45756">${Math.round(s.p99Ms)} ms</text>`)
    .join('\n');
  const right = { x: 500, y: 40, w: 320, h: 250 };
  const xCut = (i: number) => right.x + (cut.length > 1 ? (i / (cut.length - 1)) * right.w : 0);
  const yCut = (v: number) => right.y + right.h - (v / maxGoodput) * right.h;
  const cutLine = cut.map((c, i) => `${xCut(i)},${yCut(c.goodput)}`).join(' ');
  const first = cut[0]?.second ?? 0;
  const shade = (second: number) => xCut(Math.max(0, Math.min(cut.length - 1, second - first)));
  const best = Math.max(...steps.map((s) => s.goodput));
  return `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" font-family="sans-serif">
<rect width="100%" height="100%" fill="#fff"/>
<text x="${panel.x}" y="20" font-size="14" font-weight="bold">Goodput (bars, 2xx/s) and p99 (red) per step</text>
<line x1="${panel.x}" y1="${panel.y + panel.h}" x2="${panel.x + panel.w}" y2="${panel.y + panel.h}" stroke="#333"/>
${bars}
<polyline points="${p99Points.join(' ')}" fill="none" stroke="#e45756" stroke-width="2"/>
${p99Labels}
<text x="${panel.x + panel.w / 2}" y="${panel.y + panel.h + 34}" text-anchor="middle" font-size="12">concurrent connections</text>
<text x="${right.x}" y="20" font-size="14" font-weight="bold">Redis cut for 2 s at ${cutConnections} connections (2xx/s)</text>
<rect x="${shade(cutWindow[0])}" y="${right.y}" width="${Math.max(2, shade(cutWindow[1]) - shade(cutWindow[0]))}" height="${right.h}" fill="#f2cf5b" opacity="0.5"/>
<line x1="${right.x}" y1="${yCut(best)}" x2="${right.x + right.w}" y2="${yCut(best)}" stroke="#999" stroke-dasharray="4 3"/>
<text x="${right.x + right.w}" y="${yCut(best) - 4}" text-anchor="end" font-size="11" fill="#666">best step ${best}/s</text>
<polyline points="${cutLine}" fill="none" stroke="#4c78a8" stroke-width="2"/>
<line x1="${right.x}" y1="${right.y + right.h}" x2="${right.x + right.w}" y2="${right.y + right.h}" stroke="#333"/>
<text x="${right.x + right.w / 2}" y="${right.y + right.h + 16}" text-anchor="middle" font-size="12">seconds (Redis cut: shaded)</text>
<text x="${panel.x}" y="${height - 12}" font-size="11" fill="#666">${meta}</text>
</svg>
`;
}
