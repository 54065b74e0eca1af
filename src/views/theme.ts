/** Colours of the current JupyterLab theme, read from its CSS variables. */

import { isDark } from '../colors';

/** What the canvas views draw with. */
export interface ITheme {
  background: string;
  panel: string;
  foreground: string;
  muted: string;
  border: string;
  grid: string;
  accent: string;
  warn: string;
  selection: string;
  font: string;
  dark: boolean;
}

function cssVar(
  style: CSSStyleDeclaration,
  name: string,
  fallback: string
): string {
  const v = style.getPropertyValue(name).trim();
  return v || fallback;
}

/** Read the theme from the CSS variables in effect at `node`. */
export function readTheme(node: HTMLElement): ITheme {
  const style = getComputedStyle(node);
  const background = cssVar(style, '--jp-layout-color1', '#ffffff');
  const dark = isDark(background);
  const family = cssVar(style, '--jp-ui-font-family', 'sans-serif');
  return {
    background,
    panel: cssVar(style, '--jp-layout-color2', dark ? '#222222' : '#eeeeee'),
    foreground: cssVar(
      style,
      '--jp-ui-font-color1',
      dark ? '#ffffff' : '#000000'
    ),
    muted: cssVar(style, '--jp-ui-font-color2', dark ? '#aaaaaa' : '#555555'),
    border: cssVar(style, '--jp-border-color2', dark ? '#444444' : '#cccccc'),
    grid: cssVar(style, '--jp-border-color3', dark ? '#333333' : '#eeeeee'),
    accent: cssVar(style, '--jp-brand-color1', '#1976d2'),
    warn: cssVar(style, '--jp-warn-color0', '#e65100'),
    selection: dark ? 'rgba(120, 170, 255, 0.22)' : 'rgba(25, 118, 210, 0.16)',
    font: `11px ${family}`,
    dark
  };
}
