/**
 * `node scripts/dashboard-picture.ts <prometheus-url> <file.png>`: draws the dashboard
 * (k8s/monitoring/dashboard.json) from a running Prometheus, each panel's queries over the last ten
 * minutes as lines, and photographs it with headless Chromium. docs/dashboard.png is one, drawn
 * during the end-to-end monitoring test (test/e2e/monitoring.test.ts, with DASHBOARD_PICTURE set).
 */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';
import { findOneOf } from './setup/machine.ts';

export const DASHBOARD_FILE = fileURLToPath(new URL('../k8s/monitoring/dashboard.json', import.meta.url));

export interface Dashboard {
  title: string;
  panels: { title: string; fieldConfig: { defaults: { unit: string } }; targets: { expr: string; legendFormat: string }[] }[];
}

interface Line {
  name: string;
  points: [number, number][];
}

const WIDTH = 620;
const HEIGHT = 230;
const COLOURS = ['#73bf69', '#f2cc0c', '#5794f2', '#ff9830', '#f2495c', '#b877d9', '#8ab8ff', '#ffb357'];

/** A value as its panel's unit shows it. */
function formatted(value: number, unit: string): string {
  const round = (n: number) => (Math.abs(n) >= 100 ? n.toFixed(0) : Math.abs(n) >= 10 ? n.toFixed(1) : n.toPrecision(2));
  if (unit === 'percentunit') return `${round(value * 100)}%`;
  if (unit === 's') return value < 1 ? `${round(value * 1000)} ms` : `${round(value)} s`;
  if (unit === 'reqps') return `${round(value)}/s`;
  return round(value);
}

/** Each of a panel's queries over [start, end], its series named by the target's legend. */
async function panelLines(prometheus: string, targets: Dashboard['panels'][number]['targets'], start: number, end: number): Promise<Line[]> {
  const step = Math.max(1, Math.round((end - start) / 240));
  const lines: Line[] = [];
  for (const target of targets) {
    const url = `${prometheus}/api/v1/query_range?query=${encodeURIComponent(target.expr)}&start=${start}&end=${end}&step=${step}`;
    const answer = (await (await fetch(url)).json()) as { data?: { result: { metric: Record<string, string>; values: [number, string][] }[] } };
    for (const series of answer.data?.result ?? []) {
      const name = target.legendFormat.replace(/\{\{\s*(\w+)\s*\}\}/g, (_, label: string) => series.metric[label] ?? '');
      lines.push({ name, points: series.values.map(([time, value]) => [time, Number(value)] as [number, number]).filter(([, value]) => Number.isFinite(value)) });
    }
  }
  return lines;
}

/** One panel as SVG: its lines scaled into the frame, the axis's top and bottom values, a legend. */
function panelSvg(title: string, unit: string, lines: Line[], start: number, end: number): string {
  const values = lines.flatMap((line) => line.points.map(([, value]) => value));
  const low = Math.min(0, ...values);
  const high = Math.max(...values, low + (unit === 'percentunit' ? 0.01 : 1));
  const x = (time: number) => 60 + ((time - start) / (end - start)) * (WIDTH - 80);
  const y = (value: number) => 30 + (1 - (value - low) / (high - low)) * (HEIGHT - 60);
  const paths = lines.map((line, i) => {
    const d = line.points.map(([time, value], j) => `${j === 0 ? 'M' : 'L'}${x(time).toFixed(1)},${y(value).toFixed(1)}`).join(' ');
    return `<path d="${d}" fill="none" stroke="${COLOURS[i % COLOURS.length]}" stroke-width="1.6"/>`;
  });
  const legend = lines.map((line, i) => `<tspan fill="${COLOURS[i % COLOURS.length]}">■</tspan> ${escape(line.name)}`).join('   ');
  return `<svg xmlns="http://www.w3.org/2000/svg" width="${WIDTH}" height="${HEIGHT}">
    <rect width="100%" height="100%" fill="#181b1f" stroke="#2c3235"/>
    <text x="10" y="18" fill="#ccccdc" font-size="13" font-weight="600">${escape(title)}</text>
    <line x1="60" y1="${y(high)}" x2="${WIDTH - 20}" y2="${y(high)}" stroke="#2c3235"/>
    <line x1="60" y1="${y(low)}" x2="${WIDTH - 20}" y2="${y(low)}" stroke="#2c3235"/>
    <text x="55" y="${y(high) + 4}" fill="#8e8e8e" font-size="10" text-anchor="end">${formatted(high, unit)}</text>
    <text x="55" y="${y(low) + 4}" fill="#8e8e8e" font-size="10" text-anchor="end">${formatted(low, unit)}</text>
    ${paths.join('\n')}
    <text x="10" y="${HEIGHT - 10}" fill="#ccccdc" font-size="10">${lines.length > 0 ? legend : 'no data'}</text>
  </svg>`;
}

const escape = (text: string) => text.replace(/[&<>"]/g, (c) => `&#${c.charCodeAt(0)};`);

/** When, in the last ten minutes, the Prometheus at `prometheus` first scraped anything. */
async function firstScrape(prometheus: string, end: number): Promise<number> {
  const [up] = await panelLines(prometheus, [{ expr: 'up', legendFormat: '' }], end - 600, end);
  return up?.points[0]?.[0] ?? end - 600;
}

/** Draws `dashboard` from the Prometheus at `prometheus`, over the last ten minutes or since it started, into `pngFile`. */
export async function dashboardPicture(prometheus: string, pngFile: string, dashboard = JSON.parse(readFileSync(DASHBOARD_FILE, 'utf8')) as Dashboard): Promise<void> {
  const end = Date.now() / 1000;
  const start = await firstScrape(prometheus, end);
  const svgs = [];
  for (const panel of dashboard.panels) svgs.push(panelSvg(panel.title, panel.fieldConfig.defaults.unit, await panelLines(prometheus, panel.targets, start, end), start, end));
  const html = `<body style="margin:0;background:#111217;font-family:sans-serif"><div style="display:grid;grid-template-columns:repeat(2,${WIDTH}px);gap:8px;padding:8px">${svgs.join('')}</div></body>`;
  const browser = await chromium.launch({
    executablePath: process.env.CHROMIUM_PATH ?? findOneOf(['chromium', 'chromium-browser']) ?? 'chromium',
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--no-first-run'],
  });
  try {
    const page = await browser.newPage({ viewport: { width: 2 * WIDTH + 24, height: 400 } });
    await page.setContent(html);
    await page.screenshot({ path: pngFile, fullPage: true });
  } finally {
    await browser.close();
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const [prometheus, pngFile] = process.argv.slice(2);
  if (!prometheus || !pngFile) throw new Error('usage: node scripts/dashboard-picture.ts <prometheus-url> <file.png>');
  await dashboardPicture(prometheus, pngFile);
}
