/**
 * The bench's chart, an SVG written here (no plotting library, no external service): one bar per
 * target for requests/s and one for p99 latency, side by side, with the figures on the bars.
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
