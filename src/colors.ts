/** Pure colour helpers: group colours, contrast, theme darkness (no DOM). */

/** Red, green, blue in 0..255. */
export type RGB = [number, number, number];

const HEX = /^#([0-9a-f]{6})$/i;

/** `#rrggbb` to RGB, or null when the string is not that form. */
export function parseHex(color: string): RGB | null {
  const m = HEX.exec(color.trim());
  if (!m) {
    return null;
  }
  const v = parseInt(m[1], 16);
  return [(v >> 16) & 255, (v >> 8) & 255, v & 255];
}

/** RGB to `#rrggbb`. */
export function toHex(rgb: RGB): string {
  return (
    '#' +
    rgb
      .map(c =>
        Math.max(0, Math.min(255, Math.round(c)))
          .toString(16)
          .padStart(2, '0')
      )
      .join('')
  );
}

/** A stable 32-bit hash of a string (FNV-1a). */
export function hashString(text: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return h >>> 0;
}

/** HSL (h in degrees, s and l in 0..1) to RGB. */
export function hslToRgb(h: number, s: number, l: number): RGB {
  const k = (n: number) => (n + h / 30) % 12;
  const a = s * Math.min(l, 1 - l);
  const f = (n: number) =>
    l - a * Math.max(-1, Math.min(k(n) - 3, Math.min(9 - k(n), 1)));
  return [f(0) * 255, f(8) * 255, f(4) * 255];
}

/** A colour derived from a name, stable across runs and sessions. */
export function nameColor(name: string): string {
  const h = hashString(name);
  return toHex(hslToRgb(h % 360, 0.55 + ((h >> 9) % 20) / 100, 0.5));
}

/** The kernel's colour when it is a valid `#rrggbb`, else one derived from the name. */
export function groupColor(name: string, given: string | undefined): string {
  return given !== undefined && parseHex(given)
    ? given.toLowerCase()
    : nameColor(name);
}

/** Relative luminance (0 black .. 1 white) of an RGB colour. */
export function luminance(rgb: RGB): number {
  const lin = (c: number) => {
    const v = c / 255;
    return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4);
  };
  return 0.2126 * lin(rgb[0]) + 0.7152 * lin(rgb[1]) + 0.0722 * lin(rgb[2]);
}

/** Parse `#rgb`, `#rrggbb` or `rgb(a)(r, g, b...)`, as computed styles give them. */
export function parseCssColor(color: string): RGB | null {
  const c = color.trim();
  const hex = parseHex(c);
  if (hex) {
    return hex;
  }
  const short = /^#([0-9a-f])([0-9a-f])([0-9a-f])$/i.exec(c);
  if (short) {
    return [1, 2, 3].map(i => parseInt(short[i] + short[i], 16)) as RGB;
  }
  const rgb = /^rgba?\(\s*([\d.]+)[,\s]+([\d.]+)[,\s]+([\d.]+)/i.exec(c);
  if (rgb) {
    return [Number(rgb[1]), Number(rgb[2]), Number(rgb[3])];
  }
  return null;
}

/** Whether a background colour is dark (so text on it should be light). */
export function isDark(color: string): boolean {
  const rgb = parseCssColor(color);
  return rgb !== null && luminance(rgb) < 0.25;
}

/** Black or white, whichever reads better on `background` (a `#rrggbb`). */
export function textOn(background: string): string {
  const rgb = parseHex(background);
  return rgb && luminance(rgb) < 0.4 ? '#ffffff' : '#000000';
}

/** Mix two `#rrggbb` colours: t = 0 gives a, t = 1 gives b. */
export function mix(a: string, b: string, t: number): string {
  const x = parseHex(a) ?? [0, 0, 0];
  const y = parseHex(b) ?? [0, 0, 0];
  return toHex([0, 1, 2].map(i => x[i] + (y[i] - x[i]) * t) as RGB);
}
